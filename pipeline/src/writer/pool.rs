//! A run's writers: one or more threads, each with its own [`DestWriter`] under the run's one
//! open destination root, fed by the network side's batches ([`BatchSender`] splits them by
//! folder) and reporting together when the run ends.
//!
//! Why more than one: creating a file (`O_TMPFILE`, `write`, `linkat`, `close`) is the
//! receiver's largest cost per small file, about three fifths of its CPU in tcp-streams on
//! tmpfs (docs/decisions/0016-writers-per-folder.md), and one thread does it
//! all. Writers on different folders share no folder lock and no state: a file's ops and a
//! folder's files always go to the same writer ([`super::file_id`]), so each writer's folder
//! handles stay its own, and the confinement rules are exactly those of one writer. Two of a
//! run's own records that clash (a path twice; a file `a` and a file `a/b`) would race
//! between writers: the receiver refuses the later one before it reaches them
//! (receiver/src/names.rs).

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use tokio::sync::{mpsc, oneshot};

use super::batches::{BatchSender, HeldRoom, Recycle, INTAKE_GROUP};
use super::temp::Temps;
use super::{apply, open_root, DestWriter, WriteBatch, WriteOp};
use shoal_proto::relpath::RelPath;
use shoal_row::latency::LatencyHistogram;

/// Most writers a run may have (`recv --writers`).
const MAX_WRITERS: usize = shoal_proto::control::MAX_WRITERS as usize;

/// The writer threads a run gets unless told otherwise: one per core, at most 4 (file creation
/// on one file system gains little past a few threads, and each writer is a thread per run).
pub fn default_writers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

/// Batches one writer's queue holds before the network side waits.
const QUEUE: usize = 256;

/// What a run's writers report when they end.
#[derive(Debug)]
pub struct WriterReport {
    pub files_ready: u64,
    /// Content bytes of the files ready (partial files are not kept, so not counted).
    pub bytes_ready: u64,
    pub bytes_written: u64,
    pub last_close: Option<Instant>,
    /// With `--fsync`: the sync that starts once this report is out (so the run's completion
    /// can go to the sender first and the sync is timed on its own).
    pub sync: Option<PendingSync>,
    /// Partial files removed after a failure.
    pub removed_partials: Vec<RelPath>,
    pub latency: LatencyHistogram,
    pub error: Option<anyhow::Error>,
    /// Writers the run had.
    pub writers: usize,
}

/// The sync of the destination, under way: how long it took, or why it failed.
#[derive(Debug)]
pub struct PendingSync(oneshot::Receiver<Result<Duration, String>>);

impl PendingSync {
    pub async fn wait(self) -> Result<Duration, String> {
        self.0
            .await
            .unwrap_or_else(|_| Err("the sync thread ended before the sync".into()))
    }
}

impl WriterReport {
    /// Nothing written yet, by `writers` writers.
    fn empty(writers: usize) -> Self {
        WriterReport {
            files_ready: 0,
            bytes_ready: 0,
            bytes_written: 0,
            last_close: None,
            sync: None,
            removed_partials: Vec::new(),
            latency: LatencyHistogram::default(),
            error: None,
            writers,
        }
    }
}

/// Where a run's writers write.
#[derive(Debug, Clone)]
pub enum WriterDest {
    /// The destination root (created if missing).
    Root(PathBuf),
    /// A folder prepared for the run, `name` inside `parent`: it must still exist and be a
    /// folder (not a symbolic link) when the run starts.
    Prepared { parent: PathBuf, name: String },
}

impl WriterDest {
    fn path(&self) -> PathBuf {
        match self {
            WriterDest::Root(root) => root.clone(),
            WriterDest::Prepared { parent, name } => parent.join(name),
        }
    }
}

/// How a run's writers are started.
pub struct WriterOptions {
    pub dest: WriterDest,
    /// Sync the file system once every writer has ended without error.
    pub fsync: bool,
    /// Names the run in temporary file names (hex digits).
    pub tag: String,
    /// Called (on a writer thread) as soon as a write fails, so the network side can stop
    /// at once rather than when it next hands over a batch.
    pub on_fail: Option<Box<dyn FnOnce() + Send>>,
    /// Writer threads (1..=[`MAX_WRITERS`]; outside it, the nearest bound).
    pub writers: usize,
}

/// The first failure's callback, called once whichever writer fails first.
type OnFail = Arc<Mutex<Option<Box<dyn FnOnce() + Send>>>>;

fn fire(on_fail: &OnFail) {
    if let Some(f) = on_fail.lock().expect("on_fail lock").take() {
        f();
    }
}

/// One writer's end: its figures, the partial files it removed, and its error with when it
/// happened (the run reports the first).
#[derive(Debug)]
struct Ended {
    files_ready: u64,
    bytes_ready: u64,
    bytes_written: u64,
    last_close: Option<Instant>,
    latency: LatencyHistogram,
    removed_partials: Vec<RelPath>,
    error: Option<(Instant, anyhow::Error)>,
}

impl Ended {
    /// Removes the files `writer` still has open (partial: at a clean end there are none).
    fn from(mut writer: DestWriter, error: Option<anyhow::Error>) -> Self {
        let at = Instant::now();
        Ended {
            removed_partials: writer.abort(),
            files_ready: writer.files_ready(),
            bytes_ready: writer.bytes_ready(),
            bytes_written: writer.bytes_written(),
            last_close: writer.last_close(),
            latency: writer.latency().clone(),
            error: error.map(|e| (at, e)),
        }
    }
}

/// A run's writer threads, fed by batches from the network tasks.
#[derive(Debug)]
pub struct WriterPool {
    pub batches: BatchSender,
    ended: Vec<oneshot::Receiver<Ended>>,
    writers: usize,
    /// The destination root, for the sync; `None` when it could not be opened.
    root: Option<(PathBuf, Arc<OwnedFd>)>,
    fsync: bool,
    /// Why the root could not be opened.
    open_error: Option<anyhow::Error>,
}

impl WriterPool {
    /// Opens the destination root and starts the writers. A root that cannot be opened is
    /// the run's failure, reported by [`WriterPool::finish`] (`on_fail` is called at once and
    /// every batch is refused), like any other write error.
    pub fn spawn(options: WriterOptions) -> Result<Self> {
        let WriterOptions {
            dest,
            fsync,
            tag,
            on_fail,
            writers,
        } = options;
        let writers = writers.clamp(1, MAX_WRITERS);
        let on_fail: OnFail = Arc::new(Mutex::new(on_fail));
        let recycle = Arc::new(Recycle::default());
        let root_path = dest.path();
        let root = match open_root(&dest) {
            Ok(fd) => Arc::new(fd),
            Err(e) => {
                fire(&on_fail);
                // No writer: the channel's far end is gone, so every batch is refused.
                let (tx, _) = mpsc::channel(1);
                return Ok(Self {
                    batches: BatchSender::new(vec![tx], recycle),
                    ended: Vec::new(),
                    writers,
                    root: None,
                    fsync,
                    open_error: Some(e),
                });
            }
        };
        let mut txs = Vec::with_capacity(writers);
        let mut ended = Vec::with_capacity(writers);
        for index in 0..writers {
            let (tx, rx) = mpsc::channel::<WriteBatch>(QUEUE);
            let (ended_tx, ended_rx) = oneshot::channel();
            // Temporary names n ≡ index (mod writers): unique across the run's writers.
            let temps = Temps::new(&tag, index as u64, writers as u64);
            let writer = DestWriter::in_root(&root_path, root.clone(), temps);
            let (recycle, on_fail) = (recycle.clone(), on_fail.clone());
            let name = match writers {
                1 => "shoal-writer".to_string(),
                _ => format!("shoal-writer-{index}"),
            };
            std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    let _ = ended_tx.send(write_batches(writer, rx, &recycle, &on_fail));
                })
                .context("cannot start a writer thread")?;
            txs.push(tx);
            ended.push(ended_rx);
        }
        Ok(Self {
            batches: BatchSender::new(txs, recycle),
            ended,
            writers,
            root: Some((root_path, root)),
            fsync,
            open_error: None,
        })
    }

    /// Closes the input and waits for every writer's end. Drop every other clone of `batches`
    /// first. With `fsync` and no error, the sync starts once the report is out.
    pub async fn finish(self) -> WriterReport {
        drop(self.batches);
        let mut report = WriterReport::empty(self.writers);
        if let Some(e) = self.open_error {
            report.error = Some(e);
            return report;
        }
        let mut first_error: Option<(Instant, anyhow::Error)> = None;
        for ended in self.ended {
            let Ok(ended) = ended.await else {
                let panicked = anyhow!("a writer thread panicked");
                first_error.get_or_insert((Instant::now(), panicked));
                continue;
            };
            report.files_ready += ended.files_ready;
            report.bytes_ready += ended.bytes_ready;
            report.bytes_written += ended.bytes_written;
            report.last_close = report.last_close.max(ended.last_close);
            report.latency.merge(&ended.latency);
            report.removed_partials.extend(ended.removed_partials);
            if let Some((at, e)) = ended.error {
                if first_error.as_ref().is_none_or(|(first, _)| at < *first) {
                    first_error = Some((at, e));
                }
            }
        }
        report.error = first_error.map(|(_, e)| e);
        if report.error.is_none() && !report.removed_partials.is_empty() {
            report.error = Some(anyhow!(
                "{} file(s) were left incomplete and removed",
                report.removed_partials.len()
            ));
        }
        if let (true, None, Some((path, root))) = (self.fsync, &report.error, self.root) {
            report.sync = Some(start_sync(path, root));
        }
        report
    }
}

/// One writer thread's loop: applies its batches in order until its input closes or a write
/// fails (then it stops taking batches; `on_fail` tells the network side).
fn write_batches(
    mut writer: DestWriter,
    mut rx: mpsc::Receiver<WriteBatch>,
    recycle: &Recycle,
    on_fail: &OnFail,
) -> Ended {
    let mut group = Vec::with_capacity(INTAKE_GROUP);
    let mut room = HeldRoom::default();
    while rx.blocking_recv_many(&mut group, INTAKE_GROUP) > 0 {
        for WriteBatch { ops, permit } in group.drain(..) {
            let mut bytes = 0;
            for op in &ops {
                if let Err(e) = apply(&mut writer, op) {
                    fire(on_fail);
                    return Ended::from(writer, Some(e));
                }
                bytes += op.data_len();
            }
            // The room goes back once the bytes are written (in steps: `HeldRoom`); the ops
            // go back to be freed where they were allocated. A signal's sender is dropped
            // here: the stop-and-wait arm's acknowledger ends when the last one is gone.
            room.hold(permit);
            let mut ops = ops;
            ops.retain(|op| !matches!(op, WriteOp::Signal(_)));
            drop(recycle.put(ops, bytes));
        }
        // Before waiting for more: the network side may be waiting for this room.
        room.release();
    }
    Ended::from(writer, None)
}

/// Syncs the destination's file system (every file and folder written) on a thread of its
/// own, timing it.
fn start_sync(path: PathBuf, root: Arc<OwnedFd>) -> PendingSync {
    let (tx, rx) = oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("shoal-sync".into())
        .spawn(move || {
            let start = Instant::now();
            let done = rustix::fs::syncfs(&*root)
                .map(|()| start.elapsed())
                .map_err(|e| {
                    format!(
                        "cannot sync {}: {}",
                        path.display(),
                        std::io::Error::from(e)
                    )
                });
            let _ = tx.send(done);
        });
    // Without a thread the sender is dropped, and the wait reports it.
    drop(spawned);
    PendingSync(rx)
}
