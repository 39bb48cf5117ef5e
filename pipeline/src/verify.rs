//! Tree manifests (SHA-256 of every file) and their comparison: the proof that a tree arrived.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// One entry of a manifest (the control channel's codec carries it).
pub use shoal_proto::control::Entry;

/// Every regular file (with its hash) and folder under a root, by relative path bytes.
/// Symbolic links and special files are counted, not compared: Shoal never sends them.
#[derive(Debug, Default)]
pub struct Manifest {
    pub entries: BTreeMap<Vec<u8>, Entry>,
    pub skipped: u64,
}

impl Manifest {
    pub fn files(&self) -> usize {
        self.entries
            .values()
            .filter(|e| matches!(e, Entry::File { .. }))
            .count()
    }

    pub fn bytes(&self) -> u64 {
        self.entries
            .values()
            .map(|e| match e {
                Entry::File { size, .. } => *size,
                Entry::Dir => 0,
            })
            .sum()
    }

    /// Hashes every file under `root` on `threads` threads (0 = one per core).
    pub fn build(root: &Path, threads: usize) -> Result<Self> {
        if !root.is_dir() {
            bail!("{} is not a folder", root.display());
        }
        let mut manifest = Manifest::default();
        let mut files: Vec<(Vec<u8>, PathBuf)> = Vec::new();
        for entry in walkdir::WalkDir::new(root).min_depth(1).follow_links(false) {
            let entry = entry.with_context(|| format!("cannot walk {}", root.display()))?;
            let rel = entry
                .path()
                .strip_prefix(root)
                .expect("under root")
                .as_os_str()
                .as_bytes()
                .to_vec();
            let ft = entry.file_type();
            if ft.is_dir() {
                manifest.entries.insert(rel, Entry::Dir);
            } else if ft.is_file() {
                files.push((rel, entry.into_path()));
            } else {
                manifest.skipped += 1;
            }
        }
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            threads
        };
        let next = AtomicUsize::new(0);
        let hashed = Mutex::new(Vec::with_capacity(files.len()));
        std::thread::scope(|s| -> Result<()> {
            let workers: Vec<_> = (0..threads.min(files.len()).max(1))
                .map(|_| {
                    s.spawn(|| -> Result<()> {
                        let mut buf = vec![0u8; 256 << 10];
                        let mut mine = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some((rel, path)) = files.get(i) else {
                                break;
                            };
                            mine.push((rel.clone(), hash_file(path, &mut buf)?));
                        }
                        hashed.lock().expect("lock").extend(mine);
                        Ok(())
                    })
                })
                .collect();
            for w in workers {
                w.join().expect("hash thread panicked")?;
            }
            Ok(())
        })?;
        for (rel, entry) in hashed.into_inner().expect("lock") {
            manifest.entries.insert(rel, entry);
        }
        Ok(manifest)
    }
}

/// SHA-256 and size of one file.
pub fn hash_file(path: &Path, buf: &mut [u8]) -> Result<Entry> {
    // Never through a symbolic link swapped in for a file after the walk saw it.
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let mut h = Sha256::new();
    let mut size = 0u64;
    loop {
        let n = f
            .read(buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        size += n as u64;
    }
    Ok(Entry::File {
        size,
        sha256: h.finalize().into(),
    })
}

/// How two manifests differ.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct TreeDiff {
    /// In the source, absent from the destination.
    pub missing: Vec<String>,
    /// In the destination, absent from the source.
    pub extra: Vec<String>,
    /// Present on both sides with different content, size or kind.
    pub differing: Vec<String>,
}

impl TreeDiff {
    pub fn is_identical(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty() && self.differing.is_empty()
    }

    /// A one-line account, for failure rows.
    pub fn summary(&self) -> String {
        let first = self
            .missing
            .first()
            .map(|p| format!(" (first missing: {p})"))
            .or_else(|| {
                self.differing
                    .first()
                    .map(|p| format!(" (first differing: {p})"))
            })
            .or_else(|| self.extra.first().map(|p| format!(" (first extra: {p})")))
            .unwrap_or_default();
        format!(
            "{} missing, {} extra, {} differing{first}",
            self.missing.len(),
            self.extra.len(),
            self.differing.len()
        )
    }
}

/// Compares a source manifest with a destination manifest.
pub fn compare(src: &Manifest, dst: &Manifest) -> TreeDiff {
    let show = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
    let mut diff = TreeDiff::default();
    for (path, s) in &src.entries {
        match dst.entries.get(path) {
            None => diff.missing.push(show(path)),
            Some(d) if d != s => diff.differing.push(show(path)),
            Some(_) => {}
        }
    }
    for path in dst.entries.keys() {
        if !src.entries.contains_key(path) {
            diff.extra.push(show(path));
        }
    }
    diff
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn finds_every_kind_of_difference() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        for r in [a.path(), b.path()] {
            fs::create_dir_all(r.join("d")).unwrap();
            fs::write(r.join("d/same"), b"same").unwrap();
        }
        fs::write(a.path().join("d/changed"), b"one").unwrap();
        fs::write(b.path().join("d/changed"), b"two").unwrap();
        fs::write(a.path().join("only-src"), b"x").unwrap();
        fs::write(b.path().join("only-dst"), b"x").unwrap();
        let ma = Manifest::build(a.path(), 2).unwrap();
        let mb = Manifest::build(b.path(), 2).unwrap();
        let diff = compare(&ma, &mb);
        assert_eq!(diff.missing, vec!["only-src"]);
        assert_eq!(diff.extra, vec!["only-dst"]);
        assert_eq!(diff.differing, vec!["d/changed"]);
        assert!(compare(&ma, &ma).is_identical());
    }
}
