//! Receiver side: writes files inside the destination and counts the ones that are ready.
//!
//! Confinement: every name is a validated [`RelPath`]; folders are created and opened one
//! component at a time with `mkdirat`/`openat(O_DIRECTORY | O_NOFOLLOW)` relative to the
//! already-open parent, and files with `openat(O_NOFOLLOW)`. A symbolic link that already
//! exists at the destination is never followed: the write fails and names it. Folder handles
//! are cached, so each folder is created and opened once per run.
//!
//! A file is *ready* when all its announced bytes are written and it is closed.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::hash::{BuildHasher, RandomState};
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use rustix::fs::{mkdirat, openat, unlinkat, AtFlags, Mode, OFlags};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit};

use crate::latency::LatencyHistogram;
use crate::metrics::wall_clock_us;
use crate::relpath::{display_raw, RelPath};

/// Folder handles kept open at most; past this the cache is emptied and refilled on demand.
const MAX_CACHED_DIRS: usize = 4096;

/// Identifies one open file among those a run writes concurrently (e.g. a stream id).
pub type FileId = u64;

/// Writes one run's files under a destination root.
#[derive(Debug)]
pub struct DestWriter {
    root_path: PathBuf,
    root: Arc<OwnedFd>,
    dirs: HashMap<Box<[u8]>, Arc<OwnedFd>>,
    open: HashMap<FileId, OpenFile>,
    /// Hashes of the paths written in this run, to refuse a second record for the same path.
    seen: HashSet<u64>,
    seen_hasher: RandomState,
    files_ready: u64,
    bytes_written: u64,
    last_close: Option<Instant>,
    latency: LatencyHistogram,
}

#[derive(Debug)]
struct OpenFile {
    file: File,
    path: RelPath,
    expected: u64,
    written: u64,
    /// Sender's wall clock when it started sending the file (0: unknown).
    sent_at_us: u64,
}

impl DestWriter {
    /// Opens (creating if needed) the destination root. The root itself is the operator's
    /// choice and is trusted; everything below it is confined.
    pub fn open(root: &Path) -> Result<Self> {
        std::fs::create_dir_all(root)
            .with_context(|| format!("cannot create destination {}", root.display()))?;
        let fd = openat(
            rustix::fs::CWD,
            root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .with_context(|| format!("cannot open destination {}", root.display()))?;
        Ok(Self {
            root_path: root.to_path_buf(),
            root: Arc::new(fd),
            dirs: HashMap::new(),
            open: HashMap::new(),
            seen: HashSet::new(),
            seen_hasher: RandomState::new(),
            files_ready: 0,
            bytes_written: 0,
            last_close: None,
            latency: LatencyHistogram::default(),
        })
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

    pub fn last_close(&self) -> Option<Instant> {
        self.last_close
    }

    /// Creates (or truncates) `path` for `size` bytes under id `id`; `sent_at_us` is the
    /// sender's wall clock when it started sending the file (0 if unknown).
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
        if !self.seen.insert(self.seen_hasher.hash_one(path.as_bytes())) {
            bail!("\"{path}\" was sent twice in this run");
        }
        let (parent, name) = path.split_parent();
        let dir = self.dir_fd(parent)?;
        let fd = openat(
            &*dir,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .map_err(|e| refuse(path.as_bytes(), e, "file"))?;
        self.open.insert(
            id,
            OpenFile {
                file: File::from(fd),
                path: path.clone(),
                expected: size,
                written: 0,
                sent_at_us,
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

    /// Closes file `id`; it is ready if every announced byte arrived.
    pub fn close_file(&mut self, id: FileId) -> Result<()> {
        let f = self
            .open
            .remove(&id)
            .ok_or_else(|| anyhow!("close of file id {id}, which is not open"))?;
        if f.written != f.expected {
            let (path, written, expected) = (f.path.clone(), f.written, f.expected);
            drop(f);
            self.remove_partial(&path);
            bail!("\"{path}\" ended after {written} of its announced {expected} bytes");
        }
        drop(f.file);
        self.files_ready += 1;
        self.last_close = Some(Instant::now());
        if f.sent_at_us != 0 {
            self.latency
                .record(wall_clock_us().saturating_sub(f.sent_at_us));
        }
        Ok(())
    }

    /// Creates folder `path` (and its parents).
    pub fn make_dir(&mut self, path: &RelPath) -> Result<()> {
        self.dir_fd(path.as_bytes()).map(drop)
    }

    /// Removes every file still open (partial), returning their names.
    pub fn abort(&mut self) -> Vec<RelPath> {
        let partial: Vec<RelPath> = self.open.drain().map(|(_, f)| f.path).collect();
        for p in &partial {
            self.remove_partial(p);
        }
        partial
    }

    /// Syncs the destination's file system (every file and folder written), returning the time
    /// it took.
    pub fn sync(&self) -> Result<Duration> {
        let start = Instant::now();
        rustix::fs::syncfs(&*self.root)
            .with_context(|| format!("cannot sync {}", self.root_path.display()))?;
        Ok(start.elapsed())
    }

    fn remove_partial(&mut self, path: &RelPath) {
        let (parent, name) = path.split_parent();
        if let Ok(dir) = self.dir_fd(parent) {
            let _ = unlinkat(&*dir, name, AtFlags::empty());
        }
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

/// One thing for the writer thread to do.
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
    Dir(RelPath),
    /// Signals the sender once every op before it is done (the stop-and-wait arm acknowledges
    /// each file this way).
    Signal(mpsc::UnboundedSender<()>),
}

/// A batch of ops holding receive-budget room until written.
#[derive(Debug)]
pub struct WriteBatch {
    pub ops: Vec<WriteOp>,
    pub permit: Option<OwnedSemaphorePermit>,
}

/// What the writer thread reports when it ends.
#[derive(Debug)]
pub struct WriterReport {
    pub files_ready: u64,
    pub bytes_written: u64,
    pub last_close: Option<Instant>,
    /// With `--fsync`: the sync that starts once this report is out (so the run's completion
    /// can go to the sender first and the sync is timed on its own).
    pub sync: Option<PendingSync>,
    /// Partial files removed after a failure.
    pub removed_partials: Vec<RelPath>,
    pub latency: LatencyHistogram,
    pub error: Option<anyhow::Error>,
}

/// The writer thread's sync of the destination, under way: how long it took, or why it failed.
#[derive(Debug)]
pub struct PendingSync(oneshot::Receiver<Result<Duration, String>>);

impl PendingSync {
    pub async fn wait(self) -> Result<Duration, String> {
        self.0
            .await
            .unwrap_or_else(|_| Err("the writer thread ended before the sync".into()))
    }
}

impl WriterReport {
    fn failed(error: anyhow::Error) -> Self {
        WriterReport {
            files_ready: 0,
            bytes_written: 0,
            last_close: None,
            sync: None,
            removed_partials: Vec::new(),
            latency: LatencyHistogram::default(),
            error: Some(error),
        }
    }
}

/// A writer running on its own thread, fed by batches from the network tasks.
#[derive(Debug)]
pub struct WriterThread {
    pub batches: mpsc::Sender<WriteBatch>,
    report: oneshot::Receiver<WriterReport>,
}

impl WriterThread {
    /// Starts a writer for `dest`. With `fsync`, the file system is synced once the channel
    /// closes without error, after the report is out (`WriterReport::sync`).
    pub fn spawn(dest: PathBuf, fsync: bool) -> Result<Self> {
        let (tx, mut rx) = mpsc::channel::<WriteBatch>(256);
        let (report_tx, report) = oneshot::channel();
        std::thread::Builder::new()
            .name("shoal-writer".into())
            .spawn(move || {
                let mut writer = match DestWriter::open(&dest) {
                    Ok(w) => w,
                    Err(e) => {
                        let _ = report_tx.send(WriterReport::failed(e));
                        return;
                    }
                };
                let mut error = None;
                'outer: while let Some(batch) = rx.blocking_recv() {
                    for op in batch.ops {
                        if let Err(e) = apply(&mut writer, op) {
                            error = Some(e);
                            break 'outer;
                        }
                    }
                }
                // Partial files are those still open: at a clean end there are none.
                let removed_partials = writer.abort();
                if error.is_none() && !removed_partials.is_empty() {
                    error = Some(anyhow!(
                        "{} file(s) were left incomplete and removed",
                        removed_partials.len()
                    ));
                }
                let (sync_tx, sync) = match fsync && error.is_none() {
                    true => {
                        let (tx, rx) = oneshot::channel();
                        (Some(tx), Some(PendingSync(rx)))
                    }
                    false => (None, None),
                };
                let _ = report_tx.send(WriterReport {
                    files_ready: writer.files_ready(),
                    bytes_written: writer.bytes_written(),
                    last_close: writer.last_close(),
                    sync,
                    removed_partials,
                    latency: writer.latency().clone(),
                    error,
                });
                if let Some(tx) = sync_tx {
                    let _ = tx.send(writer.sync().map_err(|e| format!("{e:#}")));
                }
            })
            .context("cannot start the writer thread")?;
        Ok(Self {
            batches: tx,
            report,
        })
    }

    /// Closes the input and waits for the report. Drop every other clone of `batches` first.
    pub async fn finish(self) -> WriterReport {
        drop(self.batches);
        self.report
            .await
            .unwrap_or_else(|_| WriterReport::failed(anyhow!("writer thread panicked")))
    }
}

fn apply(writer: &mut DestWriter, op: WriteOp) -> Result<()> {
    match op {
        WriteOp::Open {
            id,
            path,
            size,
            sent_at_us,
        } => writer.open_file(id, &path, size, sent_at_us),
        WriteOp::Data { id, bytes } => writer.write(id, &bytes),
        WriteOp::Close { id } => writer.close_file(id),
        WriteOp::Dir(path) => writer.make_dir(&path),
        WriteOp::Signal(tx) => {
            let _ = tx.send(());
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relpath::PathLimits;

    fn rel(s: &str) -> RelPath {
        RelPath::from_bytes(s.as_bytes(), &PathLimits::default()).unwrap()
    }

    #[test]
    fn writes_files_and_folders() {
        let t = tempfile::tempdir().unwrap();
        let mut w = DestWriter::open(t.path()).unwrap();
        w.open_file(1, &rel("a/b/c"), 3, 0).unwrap();
        w.write(1, b"abc").unwrap();
        w.close_file(1).unwrap();
        w.make_dir(&rel("x/y")).unwrap();
        assert_eq!(std::fs::read(t.path().join("a/b/c")).unwrap(), b"abc");
        assert!(t.path().join("x/y").is_dir());
        assert_eq!(w.files_ready(), 1);
    }

    #[test]
    fn never_follows_destination_symlinks() {
        let outside = tempfile::tempdir().unwrap();
        let t = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("d")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("f"), t.path().join("leaf")).unwrap();
        let mut w = DestWriter::open(t.path()).unwrap();
        let err = w.open_file(1, &rel("d/f"), 1, 0).unwrap_err().to_string();
        assert!(err.contains("\"d\""), "{err}");
        let err = w.open_file(2, &rel("leaf"), 1, 0).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    #[test]
    fn refuses_overruns_duplicates_and_collisions() {
        let t = tempfile::tempdir().unwrap();
        let mut w = DestWriter::open(t.path()).unwrap();
        w.open_file(1, &rel("f"), 2, 0).unwrap();
        assert!(w.write(1, b"abc").is_err());
        w.write(1, b"ab").unwrap();
        w.close_file(1).unwrap();
        assert!(w.open_file(2, &rel("f"), 1, 0).is_err(), "duplicate");
        let err = w.open_file(3, &rel("f/g"), 1, 0).unwrap_err().to_string();
        assert!(err.contains("not a folder"), "{err}");
        w.open_file(4, &rel("short"), 10, 0).unwrap();
        w.write(4, b"x").unwrap();
        assert!(w.close_file(4).is_err());
        assert!(!t.path().join("short").exists(), "partial file removed");
    }
}
