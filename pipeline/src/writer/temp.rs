//! A file's life before its final name.
//!
//! Where the file system allows it, a file is written as an unnamed inode
//! (`openat(dir, ".", O_TMPFILE)`) and given its final name with one `linkat` once it is
//! complete: nothing appears in the folder until then, and a receiver killed mid-file leaves
//! nothing behind (the kernel frees an unnamed inode with its last descriptor), where a named
//! temporary file stays until the next start removes it. `linkat` never replaces an entry, so
//! when the final name exists (a file, a symbolic link, a hard link to a file elsewhere) the
//! inode is linked under a temporary name first and renamed over it: replaced, never written
//! through, as before.
//!
//! An unnamed inode is named with `linkat(fd, "", AT_EMPTY_PATH)`: since Linux 6.10 any
//! process may do that for a file it opened itself, before only one with
//! `CAP_DAC_READ_SEARCH`. Where the kernel refuses it, `/proc/self/fd/N` with
//! `AT_SYMLINK_FOLLOW` does the same through a path (slower: one more lookup per file). On
//! tmpfs, 65,536 × 4 KiB in 256 folders, a C loop of each (five runs, medians): a temporary
//! name and `renameat` 0.956 s, `O_TMPFILE` and the `/proc` path 1.024 s, `O_TMPFILE` and
//! `AT_EMPTY_PATH` 0.849 s (docs/benchmarks.md). Without either, or on a file system without `O_TMPFILE`
//! (EOPNOTSUPP, EISDIR, EINVAL from the kernel), every file is created under a temporary name
//! `.shoal-tmp.<pid>.<run>.<n>` with `O_CREAT | O_EXCL` and renamed into place.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};

use rustix::fs::{linkat, openat, renameat, unlinkat, AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::{refuse, TEMP_PREFIX};

/// What a file being written is called until it is complete.
#[derive(Debug)]
pub(super) enum TempName {
    /// An unnamed inode (`O_TMPFILE`): nothing in the folder yet.
    Unnamed,
    /// A temporary name in its folder.
    Named(Box<[u8]>),
}

/// Creates the files of one run before their final names, and names them.
#[derive(Debug)]
pub(super) struct Temps {
    /// `.shoal-tmp.<pid>.<run>.`: each temporary name is this and a counter.
    prefix: Vec<u8>,
    next: u64,
    /// What the counter grows by: a run's writers count `index, index + writers, …`, so no
    /// two of them make the same name.
    step: u64,
    /// Whether unnamed inodes are used: the kernel can name them and the file system has not
    /// refused `O_TMPFILE` yet.
    unnamed: bool,
    /// How unnamed inodes are named: `AT_EMPTY_PATH` until the kernel refuses it, then
    /// through `/proc/self/fd/N`.
    empty_path: bool,
    /// `/proc/self/fd/N`, reused.
    proc_path: Vec<u8>,
}

impl Temps {
    /// Names counted from `first` by `step` (a pool's writer `first` of `step`).
    pub(super) fn new(tag: &str, first: u64, step: u64) -> Self {
        let proc = std::path::Path::new("/proc/self/fd").is_dir();
        Self {
            prefix: format!("{TEMP_PREFIX}{}.{tag}.", std::process::id()).into_bytes(),
            next: first,
            step: step.max(1),
            // /proc is the way to name an unnamed inode that always works; without it, named
            // temporary files (the kernel's answer to AT_EMPTY_PATH is only known per file).
            unnamed: proc,
            empty_path: true,
            proc_path: Vec::with_capacity(32),
        }
    }

    /// Named temporary files only (tests; file systems known to lack `O_TMPFILE`).
    #[cfg(test)]
    pub(super) fn named_only(mut self) -> Self {
        self.unnamed = false;
        self
    }

    fn next_name(&mut self) -> Box<[u8]> {
        let mut name = Vec::with_capacity(self.prefix.len() + 20);
        name.extend_from_slice(&self.prefix);
        name.extend_from_slice(self.next.to_string().as_bytes());
        self.next += self.step;
        name.into_boxed_slice()
    }

    /// A new, empty inode in `dir` for the file `rel` (named in errors): never an entry that
    /// exists, never through a symbolic link.
    pub(super) fn create(&mut self, dir: &OwnedFd, rel: &[u8]) -> anyhow::Result<(File, TempName)> {
        if self.unnamed {
            match openat(
                dir,
                c".",
                OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o644),
            ) {
                Ok(fd) => return Ok((File::from(fd), TempName::Unnamed)),
                // The file system has no O_TMPFILE: named temporary files from now on.
                Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL) => self.unnamed = false,
                Err(e) => return Err(refuse(rel, e, "file")),
            }
        }
        let name = self.next_name();
        // O_EXCL: a new inode, never an entry that exists (O_CREAT | O_EXCL does not follow a
        // symbolic link either).
        let fd = openat(
            dir,
            &name[..],
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .map_err(|e| refuse(rel, e, "file"))?;
        Ok((File::from(fd), TempName::Named(name)))
    }

    /// Links the unnamed inode `file` as `name` in `dir`: `Ok(false)` if something has that
    /// name (`linkat` never replaces an entry).
    fn link(&mut self, file: &File, dir: &OwnedFd, name: &[u8]) -> Result<bool, Errno> {
        if self.empty_path {
            match linkat(file, c"", dir, name, AtFlags::EMPTY_PATH) {
                Ok(()) => return Ok(true),
                Err(Errno::EXIST) => return Ok(false),
                // No CAP_DAC_READ_SEARCH on a kernel before 6.10: through /proc from now on.
                Err(Errno::NOENT | Errno::PERM) => self.empty_path = false,
                Err(e) => return Err(e),
            }
        }
        self.proc_path.clear();
        write!(self.proc_path, "/proc/self/fd/{}", file.as_raw_fd()).expect("to a Vec");
        let proc_path = &self.proc_path[..];
        match linkat(
            rustix::fs::CWD,
            proc_path,
            dir,
            name,
            AtFlags::SYMLINK_FOLLOW,
        ) {
            Ok(()) => Ok(true),
            Err(Errno::EXIST) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Gives the complete `file` its final `name` in `dir`, replacing an entry there. On
    /// failure nothing is left under a temporary name.
    pub(super) fn publish(
        &mut self,
        dir: &OwnedFd,
        file: File,
        temp: TempName,
        name: &[u8],
        rel: &[u8],
    ) -> anyhow::Result<()> {
        let temp = match temp {
            TempName::Named(temp) => temp,
            TempName::Unnamed => {
                match self.link(&file, dir, name) {
                    Ok(true) => return Ok(()),
                    // Something has the name: link under a temporary name, rename over it.
                    Ok(false) => {}
                    Err(e) => return Err(refuse(rel, e, "file")),
                }
                let temp = self.next_name();
                match self.link(&file, dir, &temp) {
                    Ok(true) => temp,
                    Ok(false) => return Err(refuse(rel, Errno::EXIST, "file")),
                    Err(e) => return Err(refuse(rel, e, "file")),
                }
            }
        };
        drop(file);
        if let Err(e) = renameat(dir, &temp[..], dir, name) {
            let _ = unlinkat(dir, &temp[..], AtFlags::empty());
            return Err(refuse(rel, e, "file"));
        }
        Ok(())
    }
}

/// Closes a partial file and removes its temporary name, if it has one.
pub(super) fn discard(dir: &OwnedFd, file: File, temp: TempName) {
    drop(file);
    if let TempName::Named(name) = temp {
        let _ = unlinkat(dir, &name[..], AtFlags::empty());
    }
}
