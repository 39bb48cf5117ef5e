//! Payloads: generated once (cached by their spec) or an existing folder; the source manifest
//! (SHA-256 of every file) is computed once per payload; every run pre-reads the source into
//! the page cache.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use shoal_pipeline::tree::{self, GenSpec};
use shoal_pipeline::verify::{Entry, Manifest};

use shoal_matrix::matrix::{PayloadSource, PayloadSpec};

/// A payload ready to send.
pub struct Payload {
    pub name: String,
    pub root: PathBuf,
    pub manifest: Manifest,
    pub files: u64,
    pub bytes: u64,
    /// Where it came from, for meta.json.
    pub origin: String,
}

/// Generates (or reuses) and hashes a payload. Generated payloads live under
/// `cache/NAME-FILESxSIZE-dDIRS-sSEED/`; a sibling `.complete` marker says generation finished
/// (an interrupted generation is redone, never half-used).
pub fn prepare(spec: &PayloadSpec, cache: &Path) -> Result<Payload> {
    let (root, origin) = match &spec.source {
        PayloadSource::Existing { path } => {
            if !path.is_dir() {
                anyhow::bail!("payload {}: {} is not a folder", spec.name, path.display());
            }
            (path.clone(), format!("existing folder {}", path.display()))
        }
        PayloadSource::Generated {
            files,
            size,
            dirs,
            seed,
        } => {
            let g = GenSpec {
                files: *files,
                size: *size,
                dirs: *dirs,
                seed: *seed,
            };
            let dir = cache.join(format!(
                "{}-{}x{}-d{}-s{}",
                spec.name,
                files,
                size,
                g.dir_count(),
                seed
            ));
            let marker = dir.with_extension("complete");
            if !marker.exists() {
                if dir.exists() {
                    // A half-generated tree from an interrupted sweep: move it aside (deleting
                    // it here would put freed inodes right where the next writes go).
                    let stale = dir.with_extension(format!("stale-{}", std::process::id()));
                    std::fs::rename(&dir, &stale).with_context(|| {
                        format!("moving the incomplete payload {} aside", dir.display())
                    })?;
                }
                std::fs::create_dir_all(cache)
                    .with_context(|| format!("cannot create {}", cache.display()))?;
                tree::generate(&dir, &g)?;
                std::fs::write(&marker, b"")?;
            }
            (
                dir,
                format!(
                    "generated: {files} × {size} bytes in {} folder{}, seed {seed}",
                    g.dir_count(),
                    if g.dir_count() == 1 { "" } else { "s" }
                ),
            )
        }
    };
    let manifest =
        Manifest::build(&root, 0).with_context(|| format!("hashing payload {}", spec.name))?;
    let files = manifest.files() as u64;
    let bytes = manifest.bytes();
    Ok(Payload {
        name: spec.name.clone(),
        root,
        manifest,
        files,
        bytes,
        origin,
    })
}

/// Reads every file of the payload once so the run starts from the page cache; returns the
/// seconds it took (near zero when the tree was already cached).
pub fn preread(p: &Payload) -> Result<f64> {
    let t0 = Instant::now();
    let mut buf = vec![0u8; 1 << 20];
    for (rel, e) in &p.manifest.entries {
        if let Entry::File { .. } = e {
            let path = p
                .root
                .join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(rel));
            let mut f = std::fs::File::open(&path)
                .with_context(|| format!("pre-reading {}", path.display()))?;
            while f.read(&mut buf)? > 0 {}
        }
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// How a destination compares with the source: identical or not, and how many source files
/// arrived complete and correct (a failed run's "completed" count).
pub struct Verification {
    pub identical: bool,
    pub summary: String,
    pub files_ok: u64,
    pub bytes_ok: u64,
    pub seconds: f64,
}

/// Hashes `dest` from disk and compares every path and SHA-256 with the source manifest.
pub fn verify(src: &Manifest, dest: &Path) -> Verification {
    let t0 = Instant::now();
    let dst = if dest.is_dir() {
        Manifest::build(dest, 0)
    } else {
        Ok(Manifest::default())
    };
    compare_with(src, dst, t0.elapsed().as_secs_f64())
}

/// Compares a destination manifest (hashed here or on a remote receiver, in `seconds`) with
/// the source manifest.
pub fn compare_with(src: &Manifest, dst: Result<Manifest>, seconds: f64) -> Verification {
    let dst = match dst {
        Ok(m) => m,
        Err(e) => {
            return Verification {
                identical: false,
                summary: format!("cannot hash the destination: {e:#}"),
                files_ok: 0,
                bytes_ok: 0,
                seconds,
            }
        }
    };
    let diff = shoal_pipeline::verify::compare(src, &dst);
    let (mut files_ok, mut bytes_ok) = (0, 0);
    for (path, e) in &src.entries {
        if let Entry::File { size, .. } = e {
            if dst.entries.get(path) == Some(e) {
                files_ok += 1;
                bytes_ok += size;
            }
        }
    }
    Verification {
        identical: diff.is_identical(),
        summary: if diff.is_identical() {
            "identical".into()
        } else {
            diff.summary()
        },
        files_ok,
        bytes_ok,
        seconds,
    }
}

/// The destination's file system type and free space (shared with the receiver's control
/// channel, which reports them for a remote destination).
pub use shoal_row::metrics::{free_bytes, fs_type};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generate_cache_verify_and_count() {
        let t = tempfile::tempdir().unwrap();
        let spec = PayloadSpec {
            name: "p".into(),
            source: PayloadSource::Generated {
                files: 20,
                size: 1000,
                dirs: Some(2),
                seed: 3,
            },
        };
        let p = prepare(&spec, t.path()).unwrap();
        assert_eq!((p.files, p.bytes), (20, 20_000));
        assert!(preread(&p).unwrap() >= 0.0);
        let again = prepare(&spec, t.path()).unwrap();
        assert_eq!(again.root, p.root);

        let dest = t.path().join("dest");
        let v = verify(&p.manifest, &dest);
        assert!(!v.identical);
        assert_eq!(v.files_ok, 0);
        // Copy half the files, one of them altered.
        for (i, (rel, e)) in p.manifest.entries.iter().enumerate() {
            let rel = std::str::from_utf8(rel).unwrap();
            match e {
                Entry::Dir => std::fs::create_dir_all(dest.join(rel)).unwrap(),
                Entry::File { .. } if i % 2 == 0 => {
                    std::fs::copy(p.root.join(rel), dest.join(rel)).unwrap();
                }
                _ => {}
            }
        }
        let v = verify(&p.manifest, &dest);
        assert!(!v.identical);
        assert!(v.files_ok > 0 && v.files_ok < 20, "{}", v.files_ok);
        assert_eq!(v.bytes_ok, v.files_ok * 1000);
        assert!(!fs_type(t.path()).is_empty());
    }
}
