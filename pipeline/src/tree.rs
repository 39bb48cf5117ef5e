//! Source trees: walking one (sorted, deterministic) and generating test payloads.

use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use shoal_proto::relpath::{PathLimits, RelPath};

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
    let mut walk = Walk {
        root,
        limits: PathLimits::default(),
        summary: WalkSummary::default(),
        dirs: Vec::new(),
        parents_with_children: HashSet::new(),
        on_file: &mut on_file,
    };
    walk.folder(root, &[])?;
    let Walk {
        mut summary,
        dirs,
        parents_with_children,
        ..
    } = walk;
    summary.empty_dirs = dirs
        .into_iter()
        .filter(|d| !parents_with_children.contains(d.as_bytes()))
        .collect();
    Ok(summary)
}

/// One walk's state: folders depth first, each one's entries sorted by name (byte-wise), a
/// folder's contents right after it.
struct Walk<'a, F> {
    root: &'a Path,
    limits: PathLimits,
    summary: WalkSummary,
    dirs: Vec<RelPath>,
    parents_with_children: HashSet<Vec<u8>>,
    on_file: &'a mut F,
}

impl<F: FnMut(SourceFile) -> bool> Walk<'_, F> {
    /// Walks the folder at `path` (`rel` in the tree); false once `on_file` asked to stop.
    /// Each file's size comes from `statx` relative to its open folder (`DirEntry::metadata`)
    /// and its type from the folder listing, so no path is resolved from the root per file:
    /// walkdir stat'ed every file by its whole path (`statx` ~10% of a tcp-bundle sender's
    /// samples on 65,536 × 4 KiB: docs/benchmarks.md).
    fn folder(&mut self, path: &Path, rel: &[u8]) -> Result<bool> {
        let mut entries = Vec::new();
        let listing = fs::read_dir(path).map_err(|e| self.entry_error(rel, e))?;
        for entry in listing {
            let entry = entry.map_err(|e| self.entry_error(rel, e))?;
            entries.push((entry.file_name(), entry));
        }
        entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        for (name, entry) in entries {
            let mut child = Vec::with_capacity(rel.len() + 1 + name.len());
            if !rel.is_empty() {
                child.extend_from_slice(rel);
                child.push(b'/');
            }
            child.extend_from_slice(name.as_bytes());
            let rel_child = RelPath::from_bytes(&child, &self.limits).with_context(|| {
                format!("source path {} cannot be sent", entry.path().display())
            })?;
            let ft = entry.file_type().map_err(|e| self.entry_error(&child, e))?;
            if ft.is_symlink() {
                self.summary.skipped_symlinks += 1;
                continue;
            }
            if !(ft.is_file() || ft.is_dir()) {
                self.summary.skipped_special += 1;
                continue;
            }
            // Looked up before it is copied: most entries share their parent with the last.
            if !self.parents_with_children.contains(rel) {
                self.parents_with_children.insert(rel.to_vec());
            }
            if ft.is_dir() {
                self.dirs.push(rel_child);
                if !self.folder(&entry.path(), &child)? {
                    return Ok(false);
                }
            } else {
                let size = entry
                    .metadata()
                    .with_context(|| format!("cannot stat {}", entry.path().display()))?
                    .len();
                self.summary.files += 1;
                self.summary.total_bytes += size;
                if !(self.on_file)(SourceFile {
                    rel: rel_child,
                    size,
                }) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// An entry of the tree that cannot be read, named as in the tree (relative), as the
    /// reader names a file it cannot read.
    fn entry_error(&self, rel: &[u8], e: std::io::Error) -> anyhow::Error {
        let at = if rel.is_empty() {
            ".".to_string()
        } else {
            String::from_utf8_lossy(rel).into_owned()
        };
        anyhow::Error::new(e).context(format!(
            "cannot read source entry {at} (in {})",
            self.root.display()
        ))
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

/// The seeded, incompressible content of file `index` of a payload: the same bytes for the
/// same seed and index, whatever else is generated.
fn content_rng(seed: u64, index: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(index);
    rng
}

/// Fills `buf` with the content `shoal gen --seed SEED` gives file `index` (its first
/// `buf.len()` bytes).
pub fn fill_content(seed: u64, index: u64, buf: &mut [u8]) {
    content_rng(seed, index).fill_bytes(buf);
}

fn write_file(path: &Path, spec: &GenSpec, index: u64, buf: &mut [u8]) -> Result<()> {
    let mut rng = content_rng(spec.seed, index);
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
