//! Receiver side: writes files inside the destination and counts the ones that are ready.
//!
//! Confinement: every name is a validated [`RelPath`]; folders are created and opened one
//! component at a time with `mkdirat`/`openat(O_DIRECTORY | O_NOFOLLOW)` relative to the
//! already-open parent. A symbolic link on the way to a file is never followed: the write
//! fails and names it. Folder handles are cached, so each folder is created and opened once
//! per run.
//!
//! Atomic completion: a file is written as a new inode that has no name in its folder
//! (`O_TMPFILE`) or, where the file system lacks that, a temporary name
//! (`.shoal-tmp.<pid>.<run>.<n>`, created with `O_CREAT | O_EXCL`, so it never opens or
//! follows an existing entry); it gets its final name (`linkat`, or `renameat` over an entry
//! that exists) only once every announced byte is in ([`temp`]). A final name therefore only
//! ever holds a complete file; an existing entry there (a file, a symbolic link, a hard link
//! to a file elsewhere) is replaced, never written through. A failed run removes its
//! temporary files; a killed one leaves only named ones, and [`remove_stale_temps`] removes
//! them at the next receiver start.
//!
//! A file is *ready* when all its announced bytes are written and it has its final name.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use rustix::fs::{mkdirat, openat, Mode, OFlags};
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use shoal_proto::relpath::{display_raw, RelPath};
use shoal_row::latency::LatencyHistogram;
use shoal_row::metrics::wall_clock_us;

mod batches;
mod pool;
mod stale;
mod temp;

pub use batches::BatchSender;
pub use pool::{default_writers, PendingSync, WriterDest, WriterOptions, WriterPool, WriterReport};
pub use stale::remove_stale_temps;
use temp::{TempName, Temps};

/// Folder handles kept open at most; past this the cache is emptied and refilled on demand.
const MAX_CACHED_DIRS: usize = 4096;

/// Identifies one open file among those a run writes concurrently; made by [`file_id`].
pub type FileId = u64;

/// Low bits of a [`FileId`] that carry its folder's key ([`file_id`]).
const FOLDER_BITS: u32 = 8;

/// The id of a run's `seq`-th file (or block file), `path`. Its low bits are a hash of the
/// file's folder, so a pool of writers ([`WriterPool`]) sends every op of the file, and every
/// file of that folder, to one writer: each folder is created, opened and locked by one
/// thread. A peer choosing folders that share a key only loses parallelism. (Which writer
/// meets another's entry is a race, so a run's own names are checked before the writers, in
/// the order they arrive: receiver/src/names.rs.)
pub fn file_id(seq: u64, path: &RelPath) -> FileId {
    (seq << FOLDER_BITS) | folder_key(path.split_parent().0)
}

/// FNV-1a of a folder's path, folded to [`FOLDER_BITS`] bits.
fn folder_key(folder: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in folder {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (h ^ (h >> 32) ^ (h >> 16) ^ (h >> 8)) & ((1 << FOLDER_BITS) - 1)
}

/// Every temporary file name starts with this: `.shoal-tmp.<pid>.<run>.<n>`.
pub const TEMP_PREFIX: &str = ".shoal-tmp.";

/// Whether `name` (one path component) is reserved for the receiver's temporary files.
pub fn is_temp_name(name: &[u8]) -> bool {
    name.starts_with(TEMP_PREFIX.as_bytes())
}

/// Writes one run's files under a destination root.
#[derive(Debug)]
pub struct DestWriter {
    root_path: PathBuf,
    root: Arc<OwnedFd>,
    dirs: HashMap<Box<[u8]>, Arc<OwnedFd>>,
    /// Files before their final names.
    temps: Temps,
    open: HashMap<FileId, OpenFile>,
    files_ready: u64,
    /// Content bytes of the files ready: what a failed run keeps (`bytes_written` also
    /// counts partial files, which are removed).
    bytes_ready: u64,
    bytes_written: u64,
    last_close: Option<Instant>,
    latency: LatencyHistogram,
}

#[derive(Debug)]
struct OpenFile {
    file: File,
    /// The folder it is written in, and what it is called there until complete.
    dir: Arc<OwnedFd>,
    temp: TempName,
    path: RelPath,
    expected: u64,
    written: u64,
    /// Sender's wall clock when it started sending the file (0: unknown); for a file carried
    /// as blocks, the earliest of its blocks'.
    sent_at_us: u64,
    /// Carried as blocks: written at offsets, closed once every byte is in.
    blocks: bool,
}

impl DestWriter {
    /// Opens (creating if needed) the destination root. The root itself is the operator's
    /// choice and is trusted; everything below it is confined. `tag` names the run in
    /// temporary file names (hex digits).
    pub fn open(root: &Path, tag: &str) -> Result<Self> {
        let fd = open_root(&WriterDest::Root(root.to_path_buf()))?;
        Ok(Self::in_root(root, Arc::new(fd), Temps::new(tag, 0, 1)))
    }

    /// A writer under the open root `root` (shared by a pool's writers), creating its
    /// temporary files with `temps`.
    fn in_root(root_path: &Path, root: Arc<OwnedFd>, temps: Temps) -> Self {
        Self {
            root_path: root_path.to_path_buf(),
            root,
            dirs: HashMap::new(),
            temps,
            open: HashMap::new(),
            files_ready: 0,
            bytes_ready: 0,
            bytes_written: 0,
            last_close: None,
            latency: LatencyHistogram::default(),
        }
    }

    /// Named temporary files only, as on a file system without `O_TMPFILE`.
    #[cfg(test)]
    fn named_temps_only(mut self) -> Self {
        self.temps = self.temps.named_only();
        self
    }

    /// Latency of every file closed so far.
    pub fn latency(&self) -> &LatencyHistogram {
        &self.latency
    }

    pub fn root(&self) -> &Path {
        &self.root_path
    }

    pub fn files_ready(&self) -> u64 {
        self.files_ready
    }

    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    pub fn bytes_ready(&self) -> u64 {
        self.bytes_ready
    }

    pub fn last_close(&self) -> Option<Instant> {
        self.last_close
    }

    /// Starts `path` for `size` bytes under id `id`, as a new temporary file in its folder;
    /// `sent_at_us` is the sender's wall clock when it started sending the file (0 if
    /// unknown). Nothing exists under the final name until [`DestWriter::close_file`].
    pub fn open_file(
        &mut self,
        id: FileId,
        path: &RelPath,
        size: u64,
        sent_at_us: u64,
    ) -> Result<()> {
        if self.open.contains_key(&id) {
            bail!("file id {id} is already open (\"{path}\")");
        }
        let (parent, name) = path.split_parent();
        if is_temp_name(name) {
            bail!("\"{path}\": names starting with {TEMP_PREFIX} are reserved for the receiver's temporary files");
        }
        let dir = self.dir_fd(parent)?;
        let (file, temp) = self.temps.create(&dir, path.as_bytes())?;
        self.open.insert(
            id,
            OpenFile {
                file,
                dir,
                temp,
                path: path.clone(),
                expected: size,
                written: 0,
                sent_at_us,
                blocks: false,
            },
        );
        Ok(())
    }

    /// Appends `data` to open file `id`; refuses bytes past its announced size.
    pub fn write(&mut self, id: FileId, data: &[u8]) -> Result<()> {
        let f = self
            .open
            .get_mut(&id)
            .ok_or_else(|| anyhow!("data for file id {id}, which is not open"))?;
        if f.written + data.len() as u64 > f.expected {
            bail!(
                "\"{}\" received more than its announced {} bytes",
                f.path,
                f.expected
            );
        }
        f.file
            .write_all(data)
            .with_context(|| format!("cannot write \"{}\"", f.path))?;
        f.written += data.len() as u64;
        self.bytes_written += data.len() as u64;
        Ok(())
    }

    /// A block of file `id` (`path`, `size` bytes) is coming: the file's first block starts it
    /// as a new temporary file (as [`DestWriter::open_file`]); a later one (from any
    /// connection) only moves its send time earlier. Its bytes come with
    /// [`DestWriter::write_at`].
    pub fn open_block(
        &mut self,
        id: FileId,
        path: &RelPath,
        size: u64,
        sent_at_us: u64,
    ) -> Result<()> {
        if let Some(f) = self.open.get_mut(&id) {
            if !f.blocks || f.path != *path || f.expected != size {
                bail!(
                    "a block of \"{path}\" under file id {id}, which is \"{}\"",
                    f.path
                );
            }
            if sent_at_us != 0 && (f.sent_at_us == 0 || sent_at_us < f.sent_at_us) {
                f.sent_at_us = sent_at_us;
            }
            return Ok(());
        }
        self.open_file(id, path, size, sent_at_us)?;
        if let Some(f) = self.open.get_mut(&id) {
            f.blocks = true;
        }
        Ok(())
    }

    /// Writes `data` at `offset` of block file `id` (`pwrite`); once all its announced bytes
    /// are in, closes it and gives it its final name. The run's block ledger has refused
    /// overlapping blocks, so all bytes written means every byte written once; this refuses
    /// bytes outside the file or past its size all the same.
    pub fn write_at(&mut self, id: FileId, offset: u64, data: &[u8]) -> Result<()> {
        let f = self
            .open
            .get_mut(&id)
            .ok_or_else(|| anyhow!("block data for file id {id}, which is not open"))?;
        let len = data.len() as u64;
        let end = offset.checked_add(len);
        if !f.blocks || end.is_none_or(|e| e > f.expected) || f.written + len > f.expected {
            bail!(
                "\"{}\": block bytes at {offset} (+{len}) are outside its announced {} bytes",
                f.path,
                f.expected
            );
        }
        f.file
            .write_all_at(data, offset)
            .with_context(|| format!("cannot write \"{}\"", f.path))?;
        f.written += len;
        self.bytes_written += len;
        if f.written == f.expected {
            self.close_file(id)?;
        }
        Ok(())
    }

    /// Closes file `id` and gives it its final name; it is ready if every announced byte
    /// arrived. An existing entry under its name (a file, a symbolic link, a hard link) is
    /// replaced, never written through.
    pub fn close_file(&mut self, id: FileId) -> Result<()> {
        let f = self
            .open
            .remove(&id)
            .ok_or_else(|| anyhow!("close of file id {id}, which is not open"))?;
        if f.written != f.expected {
            let (path, written, expected) = (f.path.clone(), f.written, f.expected);
            remove_temp(f);
            bail!("\"{path}\" ended after {written} of its announced {expected} bytes");
        }
        let OpenFile {
            file,
            dir,
            temp,
            path,
            sent_at_us,
            expected,
            ..
        } = f;
        let (_, name) = path.split_parent();
        self.temps
            .publish(&dir, file, temp, name, path.as_bytes())?;
        self.files_ready += 1;
        self.bytes_ready += expected;
        self.last_close = Some(Instant::now());
        if sent_at_us != 0 {
            self.latency
                .record(wall_clock_us().saturating_sub(sent_at_us));
        }
        Ok(())
    }

    /// Creates folder `path` (and its parents).
    pub fn make_dir(&mut self, path: &RelPath) -> Result<()> {
        self.dir_fd(path.as_bytes()).map(drop)
    }

    /// Removes every file still open (partial: its temporary file), returning their names.
    /// Their final names were never touched.
    pub fn abort(&mut self) -> Vec<RelPath> {
        self.open
            .drain()
            .map(|(_, f)| {
                let path = f.path.clone();
                remove_temp(f);
                path
            })
            .collect()
    }

    /// Handle of folder `rel` (bytes; empty = root), creating missing components.
    fn dir_fd(&mut self, rel: &[u8]) -> Result<Arc<OwnedFd>> {
        if rel.is_empty() {
            return Ok(self.root.clone());
        }
        if let Some(fd) = self.dirs.get(rel) {
            return Ok(fd.clone());
        }
        let (parent, name) = match rel.iter().rposition(|&b| b == b'/') {
            Some(i) => (&rel[..i], &rel[i + 1..]),
            None => (&[][..], rel),
        };
        let parent_fd = self.dir_fd(parent)?;
        match mkdirat(&*parent_fd, name, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(refuse(rel, e, "folder")),
        }
        let fd = openat(
            &*parent_fd,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| refuse(rel, e, "folder"))?;
        if self.dirs.len() >= MAX_CACHED_DIRS {
            self.dirs.clear();
        }
        let fd = Arc::new(fd);
        self.dirs.insert(rel.into(), fd.clone());
        Ok(fd)
    }
}

/// Closes a partial file and removes its temporary name, if it has one.
fn remove_temp(f: OpenFile) {
    temp::discard(&f.dir, f.file, f.temp);
}

/// Opens a folder the operator named (trusted: a symbolic link there is followed).
fn open_dir(path: &Path) -> rustix::io::Result<OwnedFd> {
    openat(
        rustix::fs::CWD,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens a run's destination root: `Root` is created if missing (the operator's choice, trusted);
/// a `Prepared` folder must still be the folder that was prepared (not a symbolic link, not
/// gone).
fn open_root(dest: &WriterDest) -> Result<OwnedFd> {
    match dest {
        WriterDest::Root(root) => {
            std::fs::create_dir_all(root)
                .with_context(|| format!("cannot create destination {}", root.display()))?;
            open_dir(root).with_context(|| format!("cannot open destination {}", root.display()))
        }
        WriterDest::Prepared { parent, name } => open_subfolder(parent, name),
    }
}

/// Removes `folder` (a tree the receiver made: a run's, a write floor's) and then syncs the file
/// system it was on, so the removal's deferred writes land now and not during the next timed
/// stage. On a destination capped at 400 writes/s, files created after an unsynced removal of
/// 100 came at 15 a second, and after a `sync` at 31, the rate of a fresh volume.
pub fn remove_settled(folder: &Path) -> Result<()> {
    let parent = folder.parent().unwrap_or(Path::new("/"));
    std::fs::remove_dir_all(folder)
        .with_context(|| format!("cannot remove {}", folder.display()))?;
    let fd = open_dir(parent).with_context(|| format!("cannot open {}", parent.display()))?;
    rustix::fs::syncfs(&fd).with_context(|| format!("cannot sync {}", parent.display()))
}

/// Opens folder `name` inside `parent` (trusted) without following a symbolic link there;
/// fails if it is missing.
pub fn open_subfolder(parent: &Path, name: &str) -> Result<OwnedFd> {
    let parent_fd =
        open_dir(parent).with_context(|| format!("cannot open {}", parent.display()))?;
    openat(
        &parent_fd,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::NOENT => anyhow!("the folder {name} in {} is gone", parent.display()),
        rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => anyhow!(
            "{name} in {} is no longer a folder (a symbolic link or a file); refusing to follow it",
            parent.display()
        ),
        other => anyhow!(
            "cannot open {name} in {}: {}",
            parent.display(),
            io::Error::from(other)
        ),
    })
}

/// Turns an `openat`/`mkdirat` failure into an error that names the path and the cause.
fn refuse(rel: &[u8], e: rustix::io::Errno, what: &str) -> anyhow::Error {
    let shown = display_raw(rel);
    match e {
        rustix::io::Errno::LOOP => anyhow!(
            "destination \"{shown}\" (or a folder on its way) is a symbolic link; refusing to write through it"
        ),
        rustix::io::Errno::NOTDIR => anyhow!(
            "destination \"{shown}\": a component on its way exists and is not a folder (or is a symbolic link); refusing"
        ),
        rustix::io::Errno::ISDIR => {
            anyhow!("destination \"{shown}\" exists as a folder; cannot write a file there")
        }
        other => anyhow!(
            "cannot create {what} \"{shown}\": {}",
            io::Error::from(other)
        ),
    }
}

/// One thing for a writer to do.
#[derive(Debug)]
pub enum WriteOp {
    Open {
        id: FileId,
        path: RelPath,
        size: u64,
        /// Sender's wall clock when it started sending the file (0: unknown).
        sent_at_us: u64,
    },
    Data {
        id: FileId,
        bytes: Bytes,
    },
    Close {
        id: FileId,
    },
    /// A block of a file carried as blocks (see [`DestWriter::open_block`]).
    Block {
        id: FileId,
        path: RelPath,
        size: u64,
        sent_at_us: u64,
    },
    /// Bytes of a block at `offset` of file `id`; the file completes with its last byte.
    DataAt {
        id: FileId,
        offset: u64,
        bytes: Bytes,
    },
    Dir(RelPath),
    /// Signals the sender once the op before it in its batch, and every earlier op of that
    /// op's writer, is done (the stop-and-wait arm acknowledges each file this way, after its
    /// `Close`; it has one file in flight).
    Signal(mpsc::UnboundedSender<()>),
}

/// A batch of ops holding receive-budget room until written.
#[derive(Debug)]
pub struct WriteBatch {
    pub ops: Vec<WriteOp>,
    pub permit: Option<OwnedSemaphorePermit>,
}

impl WriteOp {
    /// Which of `writers` writers takes the op (`None`: a signal, which follows the op before
    /// it). Every op of one file, and every file of one folder, goes to the same writer.
    fn writer_index(&self, writers: usize) -> Option<usize> {
        let key = match self {
            WriteOp::Open { id, .. }
            | WriteOp::Data { id, .. }
            | WriteOp::Close { id }
            | WriteOp::Block { id, .. }
            | WriteOp::DataAt { id, .. } => id & ((1 << FOLDER_BITS) - 1),
            WriteOp::Dir(path) => folder_key(path.as_bytes()),
            WriteOp::Signal(_) => return None,
        };
        Some(key as usize % writers)
    }

    /// Data bytes the op holds.
    fn data_len(&self) -> usize {
        match self {
            WriteOp::Data { bytes, .. } | WriteOp::DataAt { bytes, .. } => bytes.len(),
            _ => 0,
        }
    }
}

fn apply(writer: &mut DestWriter, op: &WriteOp) -> Result<()> {
    match op {
        WriteOp::Open {
            id,
            path,
            size,
            sent_at_us,
        } => writer.open_file(*id, path, *size, *sent_at_us),
        WriteOp::Data { id, bytes } => writer.write(*id, bytes),
        WriteOp::Close { id } => writer.close_file(*id),
        WriteOp::Block {
            id,
            path,
            size,
            sent_at_us,
        } => writer.open_block(*id, path, *size, *sent_at_us),
        WriteOp::DataAt { id, offset, bytes } => writer.write_at(*id, *offset, bytes),
        WriteOp::Dir(path) => writer.make_dir(path),
        WriteOp::Signal(tx) => {
            let _ = tx.send(());
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests;
