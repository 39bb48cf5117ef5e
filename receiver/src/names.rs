//! A run's names, checked as its records arrive: a path is a file once, and a name that is a
//! file is never also a folder on the way to another file (or an empty folder the run
//! creates), whichever came first. Pure.
//!
//! Why here, before the writers: a run's files are written by several threads, one per
//! folder (common/src/pipeline/writer/pool.rs), so two records that clash — the file `a` and
//! the file `a/b`, which needs `a` to be a folder — would reach different writers, and which
//! one met the other's entry on disk would be a race. Checked here, in the order the records
//! arrive, the later one is refused, with a message that names both, and the earlier one is
//! written as it would be by one writer. Entries already in the destination are the writers'
//! concern (they replace files and never write through anything else).

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};

use anyhow::{anyhow, Result};
use shoal_proto::relpath::{display_raw, RelPath};

/// Hashes of the run's file paths and of every folder on their way (64 bits each: a false
/// clash needs a collision among the run's names, ~2^-32 for 65,536 of them).
#[derive(Debug, Default)]
pub(crate) struct RunNames {
    hasher: RandomState,
    files: HashSet<u64>,
    folders: HashSet<u64>,
    /// The folder of the last file claimed: its way is known to be folders already.
    last_folder: Vec<u8>,
}

impl RunNames {
    /// Claims `path` as a file of the run.
    pub(crate) fn file(&mut self, path: &RelPath) -> Result<()> {
        let (folder, _) = path.split_parent();
        let own = self.hasher.hash_one(path.as_bytes());
        if self.files.contains(&own) {
            return Err(anyhow!("\"{path}\" was sent twice in this run"));
        }
        if self.folders.contains(&own) {
            return Err(anyhow!(
                "\"{path}\" was sent as a file after the run had made it a folder (for another file or an empty folder); refused"
            ));
        }
        if folder != self.last_folder.as_slice() {
            self.claim_way(folder, path)?;
            self.last_folder.clear();
            self.last_folder.extend_from_slice(folder);
        }
        self.files.insert(own);
        Ok(())
    }

    /// Claims `path` as an (empty) folder of the run.
    pub(crate) fn folder(&mut self, path: &RelPath) -> Result<()> {
        self.claim_way(path.as_bytes(), path)
    }

    /// Claims `folder` and every folder above it as folders, for `path` (named in errors):
    /// refused if the run sent any of them as a file.
    fn claim_way(&mut self, folder: &[u8], path: &RelPath) -> Result<()> {
        let ends = folder
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'/')
            .map(|(i, _)| i)
            .chain((!folder.is_empty()).then_some(folder.len()));
        let way: Vec<(usize, u64)> = ends
            .map(|end| (end, self.hasher.hash_one(&folder[..end])))
            .collect();
        if let Some(&(end, _)) = way.iter().find(|(_, h)| self.files.contains(h)) {
            let file = display_raw(&folder[..end]);
            return Err(anyhow!(
                "\"{path}\" needs \"{file}\" to be a folder, but the run sent \"{file}\" as a file earlier; refused"
            ));
        }
        self.folders.extend(way.into_iter().map(|(_, h)| h));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::relpath::PathLimits;

    fn rel(s: &str) -> RelPath {
        RelPath::from_bytes(s.as_bytes(), &PathLimits::default()).unwrap()
    }

    #[test]
    fn a_path_is_a_file_once() {
        let mut n = RunNames::default();
        n.file(&rel("d/a")).unwrap();
        n.file(&rel("d/b")).unwrap();
        let e = n.file(&rel("d/a")).unwrap_err().to_string();
        assert!(e.contains("\"d/a\" was sent twice"), "{e}");
    }

    #[test]
    fn a_file_is_never_also_a_folder_whichever_comes_first() {
        // The file first: a later file under it is refused, at any depth.
        let mut n = RunNames::default();
        n.file(&rel("x/a")).unwrap();
        let e = n.file(&rel("x/a/b/c")).unwrap_err().to_string();
        assert!(
            e.contains("needs \"x/a\" to be a folder") && e.contains("sent \"x/a\" as a file"),
            "{e}"
        );
        let e = n.folder(&rel("x/a/empty")).unwrap_err().to_string();
        assert!(e.contains("needs \"x/a\" to be a folder"), "{e}");
        // The folder first (a file's way, or an empty folder): a later file of its name is
        // refused, whether or not the previous file was in the same folder.
        let mut n = RunNames::default();
        n.file(&rel("y/b/c")).unwrap();
        n.file(&rel("y/b/d")).unwrap();
        let e = n.file(&rel("y/b")).unwrap_err().to_string();
        assert!(e.contains("made it a folder"), "{e}");
        let e = n.file(&rel("y")).unwrap_err().to_string();
        assert!(e.contains("made it a folder"), "{e}");
        n.folder(&rel("z/e")).unwrap();
        assert!(n.file(&rel("z/e")).is_err());
        assert!(n.file(&rel("z")).is_err());
        // Refused records claim nothing: the names stay usable as they were.
        n.file(&rel("z/e/f")).unwrap();
    }
}
