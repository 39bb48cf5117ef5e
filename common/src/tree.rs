//! Source trees: walking one (sorted, deterministic) and generating test payloads.

use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::relpath::{PathLimits, RelPath};

/// One regular file of a source tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    pub rel: RelPath,
    /// Size at walk time; the reader refuses a file whose size changed since.
    pub size: u64,
}

/// What a walk found: files in sorted order, folders with nothing in them, what was skipped.
#[derive(Debug, Clone)]
pub struct SourceTree {
    pub root: PathBuf,
    pub files: Vec<SourceFile>,
    /// Folders with no entries that are transferred; they are created at the destination.
    pub empty_dirs: Vec<RelPath>,
    pub total_bytes: u64,
    /// Symbolic links are never followed nor sent (policy: skipped and counted).
    pub skipped_symlinks: u64,
    /// Sockets, FIFOs and device nodes are skipped and counted.
    pub skipped_special: u64,
}

/// What a walk found besides its files.
#[derive(Debug, Clone, Default)]
pub struct WalkSummary {
    pub files: u64,
    pub total_bytes: u64,
    /// Folders with no entries that are transferred; they are created at the destination.
    pub empty_dirs: Vec<RelPath>,
    pub skipped_symlinks: u64,
    pub skipped_special: u64,
}

impl SourceTree {
    /// Walks `root` in sorted order (by byte-wise file name at every level), never following
    /// symbolic links.
    pub fn walk(root: &Path) -> Result<Self> {
        check_source_root(root)?;
        let mut files = Vec::new();
        let summary = walk_each(root, |f| {
            files.push(f);
            true
        })?;
        Ok(SourceTree {
            root: root.to_path_buf(),
            files,
            empty_dirs: summary.empty_dirs,
            total_bytes: summary.total_bytes,
            skipped_symlinks: summary.skipped_symlinks,
            skipped_special: summary.skipped_special,
        })
    }
}

/// Checks that `root` is a folder, so a wrong `--src` fails before anything connects.
pub fn check_source_root(root: &Path) -> Result<()> {
    let meta = fs::metadata(root)
        .with_context(|| format!("cannot read source folder {}", root.display()))?;
    if !meta.is_dir() {
        bail!("source {} is not a folder", root.display());
    }
    Ok(())
}

/// Walks `root` as [`SourceTree::walk`] does, handing each regular file to `on_file` as soon
/// as it is found (the sender reads and sends the first files while the walk goes on). Stops
/// early, with what it found so far, when `on_file` returns false. The caller has checked
/// `root` ([`check_source_root`]).
pub fn walk_each(root: &Path, mut on_file: impl FnMut(SourceFile) -> bool) -> Result<WalkSummary> {
    let limits = PathLimits::default();
    let mut summary = WalkSummary::default();
    let mut dirs = Vec::new();
    let mut parents_with_children: HashSet<Vec<u8>> = HashSet::new();
    for entry in walkdir::WalkDir::new(root)
        .min_depth(1)
        .follow_links(false)
        .sort_by_file_name()
    {
        let entry = entry.map_err(|e| {
            // Named as in the tree (relative), like the reader names a file it cannot read.
            let at = match e.path().map(|p| p.strip_prefix(root).unwrap_or(p)) {
                Some(p) if !p.as_os_str().is_empty() => p.display().to_string(),
                _ => ".".into(),
            };
            let what = format!("cannot read source entry {at} (in {})", root.display());
            let fallback = e.to_string();
            match e.into_io_error() {
                Some(io) => anyhow::Error::new(io).context(what),
                None => anyhow::anyhow!("{what}: {fallback}"),
            }
        })?;
        let rel_os = under_root(entry.path(), root);
        let rel = RelPath::from_path(rel_os, &limits)
            .with_context(|| format!("source path {} cannot be sent", entry.path().display()))?;
        let ft = entry.file_type();
        if ft.is_symlink() {
            summary.skipped_symlinks += 1;
            continue;
        }
        if !(ft.is_file() || ft.is_dir()) {
            summary.skipped_special += 1;
            continue;
        }
        // Looked up before it is copied: most entries share their parent with the last.
        let parent = rel.split_parent().0;
        if !parents_with_children.contains(parent) {
            parents_with_children.insert(parent.to_vec());
        }
        if ft.is_dir() {
            dirs.push(rel);
        } else {
            let size = entry
                .metadata()
                .with_context(|| format!("cannot stat {}", entry.path().display()))?
                .len();
            summary.files += 1;
            summary.total_bytes += size;
            if !on_file(SourceFile { rel, size }) {
                return Ok(summary);
            }
        }
    }
    summary.empty_dirs = dirs
        .into_iter()
        .filter(|d| !parents_with_children.contains(d.as_bytes()))
        .collect();
    Ok(summary)
}

/// `path` relative to `root`, for a path walkdir made by joining names onto `root`: its bytes
/// after `root`'s and a separator. `Path::strip_prefix` compares component by component, which
/// cost more instructions per file than the rest of the walk's own work
/// (results/bench-2026-12-02/callgrind.txt); it remains the fallback.
fn under_root<'a>(path: &'a Path, root: &Path) -> &'a Path {
    use std::os::unix::ffi::OsStrExt;
    let (p, r) = (path.as_os_str().as_bytes(), root.as_os_str().as_bytes());
    match p.strip_prefix(r) {
        Some(rest) if r.ends_with(b"/") && !rest.is_empty() => {
            Path::new(std::ffi::OsStr::from_bytes(rest))
        }
        Some([b'/', rest @ ..]) if !rest.is_empty() && rest[0] != b'/' => {
            Path::new(std::ffi::OsStr::from_bytes(rest))
        }
        _ => path
            .strip_prefix(root)
            .expect("walkdir yields paths under its root"),
    }
}

/// What `shoal gen` makes.
#[derive(Debug, Clone, Copy)]
pub struct GenSpec {
    pub files: u64,
    pub size: u64,
    /// Folder count; `None` means one folder per 256 files.
    pub dirs: Option<u64>,
    pub seed: u64,
}

/// Files per folder when `--dirs` is not given.
pub const DEFAULT_FILES_PER_DIR: u64 = 256;

impl GenSpec {
    pub fn dir_count(&self) -> u64 {
        self.dirs
            .unwrap_or_else(|| self.files.div_ceil(DEFAULT_FILES_PER_DIR))
            .clamp(1, self.files.max(1))
    }

    /// Relative path of file `index`: files fill folders in order, `ceil(files/dirs)` each.
    pub fn file_path(&self, index: u64) -> String {
        let dirs = self.dir_count();
        let per_dir = self.files.div_ceil(dirs).max(1);
        let dir_width = digits(dirs - 1);
        let file_width = digits(self.files.saturating_sub(1));
        format!(
            "d{:0dw$}/f{:0fw$}",
            index / per_dir,
            index,
            dw = dir_width,
            fw = file_width
        )
    }
}

fn digits(n: u64) -> usize {
    n.max(1).ilog10() as usize + 1
}

/// Writes the payload described by `spec` under `out` (which must be absent or empty).
/// Content is a pure function of the seed and the file index, so the same seed gives the same
/// tree whatever the thread count.
pub fn generate(out: &Path, spec: &GenSpec) -> Result<()> {
    if out.exists() {
        let mut entries =
            fs::read_dir(out).with_context(|| format!("cannot read {}", out.display()))?;
        if entries.next().is_some() {
            bail!(
                "refusing to generate into {}: the folder is not empty",
                out.display()
            );
        }
    }
    fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let dirs = spec.dir_count();
    let per_dir = spec.files.div_ceil(dirs).max(1);
    for d in 0..spec.files.div_ceil(per_dir) {
        let dir = out.join(spec.file_path(d * per_dir));
        let dir = dir.parent().expect("file paths have a folder");
        fs::create_dir(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .min(8) as u64;
    std::thread::scope(|scope| -> Result<()> {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || -> Result<()> {
                    let mut buf = vec![0u8; 1 << 20];
                    let mut i = t;
                    while i < spec.files {
                        write_file(&out.join(spec.file_path(i)), spec, i, &mut buf)?;
                        i += threads;
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join().expect("generator thread panicked")?;
        }
        Ok(())
    })
}

fn write_file(path: &Path, spec: &GenSpec, index: u64, buf: &mut [u8]) -> Result<()> {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    rng.set_stream(index);
    let mut f =
        fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut left = spec.size;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        rng.fill_bytes(&mut buf[..n]);
        f.write_all(&buf[..n])
            .with_context(|| format!("cannot write {}", path.display()))?;
        left -= n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_root_strips_the_root_as_walkdir_joins_it() {
        let p = |s: &str| Path::new(s).to_path_buf();
        for (root, path, rel) in [
            ("src", "src/d/f", "d/f"),
            ("src/", "src/d/f", "d/f"),
            ("/", "/d/f", "d/f"),
            (".", "./f", "f"),
            ("/a/b", "/a/b/c", "c"),
        ] {
            assert_eq!(under_root(&p(path), &p(root)), p(rel), "{root} {path}");
        }
    }

    #[test]
    fn paths_spread_over_folders() {
        let spec = GenSpec {
            files: 2000,
            size: 1,
            dirs: Some(20),
            seed: 1,
        };
        assert_eq!(spec.file_path(0), "d00/f0000");
        assert_eq!(spec.file_path(99), "d00/f0099");
        assert_eq!(spec.file_path(100), "d01/f0100");
        assert_eq!(spec.file_path(1999), "d19/f1999");
        let default = GenSpec {
            files: 65_536,
            size: 1,
            dirs: None,
            seed: 1,
        };
        assert_eq!(default.dir_count(), 256);
        assert_eq!(default.file_path(65_535), "d255/f65535");
    }

    #[test]
    fn same_seed_same_tree_and_walk_is_sorted() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let spec = GenSpec {
            files: 30,
            size: 100,
            dirs: Some(3),
            seed: 42,
        };
        generate(&a.path().join("t"), &spec).unwrap();
        generate(&b.path().join("t"), &spec).unwrap();
        let ta = SourceTree::walk(&a.path().join("t")).unwrap();
        assert_eq!(ta.files.len(), 30);
        assert_eq!(ta.total_bytes, 3000);
        let names: Vec<_> = ta.files.iter().map(|f| f.rel.to_string()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        for f in &ta.files {
            let x = fs::read(f.rel.under(&a.path().join("t"))).unwrap();
            let y = fs::read(f.rel.under(&b.path().join("t"))).unwrap();
            assert_eq!(x, y);
        }
        // A different seed gives different bytes.
        let c = tempfile::tempdir().unwrap();
        generate(&c.path().join("t"), &GenSpec { seed: 43, ..spec }).unwrap();
        let first = &ta.files[0].rel;
        assert_ne!(
            fs::read(first.under(&a.path().join("t"))).unwrap(),
            fs::read(first.under(&c.path().join("t"))).unwrap()
        );
    }

    #[test]
    fn walk_finds_empty_dirs_and_skips_symlinks() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        fs::create_dir_all(r.join("a/empty")).unwrap();
        fs::create_dir_all(r.join("b")).unwrap();
        fs::write(r.join("b/f"), b"x").unwrap();
        std::os::unix::fs::symlink("/etc", r.join("link")).unwrap();
        let tree = SourceTree::walk(r).unwrap();
        assert_eq!(tree.files.len(), 1);
        assert_eq!(tree.skipped_symlinks, 1);
        let empty: Vec<_> = tree.empty_dirs.iter().map(|d| d.to_string()).collect();
        assert_eq!(empty, vec!["a/empty"]);
    }
}
