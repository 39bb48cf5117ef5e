//! Sender side: reads files ahead of the network into wire-ready chunks.
//!
//! A reader thread takes items from a shared [`WorkQueue`] (so several connections can pull
//! from one tree, while it is still being walked), opens and reads each file, and sends chunks whose first one starts with the
//! file's record header. Reading runs ahead of the socket by at most the byte budget, so the
//! socket never waits on one file's open and read, and memory stays bounded when the link is
//! the bottleneck.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{bail, Context, Result};
use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;

use super::budget::{BudgetPermit, ByteBudget};
use super::queue::{Item, WorkQueue};
use crate::tree::SourceFile;
use shoal_proto::codec;
use shoal_proto::relpath::RelPath;

/// Reader settings.
#[derive(Debug, Clone, Copy)]
pub struct ReaderConfig {
    /// Bytes that may be read ahead of the socket (all chunks not yet written).
    pub budget: usize,
    /// Largest chunk of one file's content. The default, 64 KiB, stays under glibc's mmap
    /// threshold (128 KiB, `shoal_sys::process::tune_malloc`), so a chunk's buffer comes from
    /// the heap and is reused once freed: 1 MiB chunks were each mapped fresh, and with the
    /// bundle's staging buffers the page faults and the kernel's zeroing took ~10% of a
    /// quic-bundle sender's samples on the 1 Gbit/s link.
    pub chunk_size: usize,
}

impl Default for ReaderConfig {
    fn default() -> Self {
        Self {
            budget: 8 << 20,
            chunk_size: 64 << 10,
        }
    }
}

/// What a chunk belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkKind {
    /// Part of file `index` (or of one of its blocks: `block`); `first` chunks begin with the
    /// record header, `last` ends the record.
    File {
        index: usize,
        /// The whole file's size (a block's file's too).
        size: u64,
        first: bool,
        last: bool,
        /// The record is a block of the file: its offset and length.
        block: Option<(u64, u64)>,
    },
    /// A whole folder record.
    Dir,
}

/// Wire-ready bytes holding budget until dropped.
#[derive(Debug)]
pub struct Chunk {
    pub kind: ChunkKind,
    /// Mutable so the transport can stamp the send time into a file header
    /// ([`Chunk::stamp_sent_at`]) just before it writes the chunk.
    pub bytes: BytesMut,
    _permit: BudgetPermit,
}

impl Chunk {
    /// On a file's first chunk, records "now" as the moment the sender started sending it.
    pub fn stamp_sent_at(&mut self) {
        if let ChunkKind::File { first: true, .. } = self.kind {
            codec::stamp_sent_at(&mut self.bytes, shoal_row::metrics::wall_clock_us());
        }
    }

    /// Gives the bytes to a writer that wants them frozen, keeping the budget held by
    /// `self` until it is dropped.
    pub fn take_bytes(&mut self) -> Bytes {
        std::mem::take(&mut self.bytes).freeze()
    }
}

/// Chunks gathered before they are handed to the transport in one message: one wake-up of
/// the connection's task per batch instead of one per small file (a tcp-bundle sender of
/// 65,536 × 4 KiB woke ~14,000 times and wrote ~10 KiB a `writev`). A batch is handed over
/// early whenever the reader is about to wait (for the walk or for budget room), so nothing
/// is held back while the reader has nothing else to do.
const BATCH_BYTES: usize = 64 << 10;
/// ... or this many chunks (empty files are a header each).
const BATCH_CHUNKS: usize = 64;

/// The reader's chunks as the transport takes them, one at a time.
#[derive(Debug)]
pub struct Chunks {
    batches: mpsc::Receiver<Vec<Chunk>>,
    ready: VecDeque<Chunk>,
}

impl Chunks {
    /// The next chunk, waiting for the reader; `None` once it is done. Cancel-safe (for
    /// `select!`): a batch is taken whole, after the only await.
    pub async fn recv(&mut self) -> Option<Chunk> {
        if let Some(c) = self.ready.pop_front() {
            return Some(c);
        }
        let batch = self.batches.recv().await?;
        self.ready.extend(batch);
        self.ready.pop_front()
    }

    /// The next chunk if one was read already.
    pub fn try_recv(&mut self) -> Option<Chunk> {
        if self.ready.is_empty() {
            self.ready.extend(self.batches.try_recv().ok()?);
        }
        self.ready.pop_front()
    }

    /// Stops the reader's deliveries and gives back the room of what was not taken.
    fn close(&mut self) {
        self.batches.close();
        self.ready.clear();
    }
}

/// The reader thread's side: chunks gathered into the next batch.
struct Outbox<'a> {
    tx: &'a mpsc::Sender<Vec<Chunk>>,
    pending: Vec<Chunk>,
    bytes: usize,
}

impl<'a> Outbox<'a> {
    fn new(tx: &'a mpsc::Sender<Vec<Chunk>>) -> Self {
        Self {
            tx,
            pending: Vec::new(),
            bytes: 0,
        }
    }

    /// Adds `chunk`, handing the batch over once it is full; false once the transport stopped
    /// listening.
    fn push(&mut self, chunk: Chunk) -> bool {
        self.bytes += chunk.bytes.len();
        self.pending.push(chunk);
        if self.bytes >= BATCH_BYTES || self.pending.len() >= BATCH_CHUNKS {
            return self.flush();
        }
        true
    }

    /// Hands over what is gathered; false once the transport stopped listening.
    fn flush(&mut self) -> bool {
        if self.pending.is_empty() {
            return true;
        }
        self.bytes = 0;
        self.tx
            .blocking_send(std::mem::take(&mut self.pending))
            .is_ok()
    }

    /// Room for `bytes` from `budget`, handing the batch over first if the room has to be
    /// waited for (the transport frees room only by writing what it was given).
    fn acquire(&mut self, budget: &ByteBudget, bytes: usize) -> Option<BudgetPermit> {
        if let Some(permit) = budget.try_acquire(bytes) {
            return Some(permit);
        }
        if !self.flush() {
            return None;
        }
        budget.acquire(bytes)
    }

    /// The next work item, handing the batch over first if it has to be waited for.
    fn take(&mut self, queue: &WorkQueue) -> Result<Option<Item>> {
        if let Some(item) = queue.take_ready()? {
            return Ok(Some(item));
        }
        if !self.flush() {
            return Ok(None);
        }
        queue.take()
    }
}

/// A running reader: its chunks and its thread.
#[derive(Debug)]
pub struct Reader {
    pub chunks: Chunks,
    budget: ByteBudget,
    thread: Option<JoinHandle<Result<()>>>,
    /// Run once, when the transport calls [`Reader::finish`].
    on_finish: OnFinish,
}

/// A callback for [`Reader::on_finish`].
#[derive(Default)]
struct OnFinish(Option<Box<dyn FnOnce() + Send>>);

impl std::fmt::Debug for OnFinish {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Some(..)" } else { "None" })
    }
}

impl Reader {
    /// Starts a reader thread over `queue`.
    pub fn spawn(queue: Arc<WorkQueue>, config: ReaderConfig) -> Result<Self> {
        let budget = ByteBudget::new(config.budget);
        // The budget bounds memory; the channel only needs to be deep enough not to block on
        // many tiny chunks (empty files are a header only).
        let (tx, rx) = mpsc::channel(1024);
        let thread_budget = budget.clone();
        let thread = std::thread::Builder::new()
            .name("shoal-reader".into())
            .spawn(move || {
                let mut out = Outbox::new(&tx);
                let result = read_loop(&queue, config, &thread_budget, &mut out);
                // What was read before a failure still goes out, as it did chunk by chunk.
                out.flush();
                result
            })
            .context("cannot start the reader thread")?;
        Ok(Self {
            chunks: Chunks {
                batches: rx,
                ready: VecDeque::new(),
            },
            budget,
            thread: Some(thread),
            on_finish: OnFinish::default(),
        })
    }

    /// Runs `f` when the transport finishes this reader: its connection has sent its share of
    /// the tree (or stopped). QUIC connections hand their window share on then.
    pub fn on_finish(&mut self, f: impl FnOnce() + Send + 'static) {
        self.on_finish = OnFinish(Some(Box::new(f)));
    }

    /// Waits for the reader thread and returns its result (a file it could not read).
    /// Call after `chunks` returned `None`, or to stop early (remaining work is abandoned).
    pub fn finish(&mut self) -> Result<()> {
        if let Some(f) = self.on_finish.0.take() {
            f();
        }
        self.budget.close();
        self.chunks.close();
        match self.thread.take() {
            Some(t) => t.join().unwrap_or_else(|_| bail!("reader thread panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.budget.close();
        self.chunks.close();
    }
}

fn read_loop(
    queue: &WorkQueue,
    config: ReaderConfig,
    budget: &ByteBudget,
    out: &mut Outbox,
) -> Result<()> {
    let mut folder = Folder::new(queue.root());
    while let Some(item) = out.take(queue)? {
        let sent = match item {
            Item::File { index, file, block } => {
                read_file(&mut folder, index, &file, block, config, budget, out)?
            }
            Item::Dir(dir) => {
                let mut bytes = BytesMut::with_capacity(3 + dir.as_bytes().len());
                codec::encode_dir(&dir, &mut bytes);
                match out.acquire(budget, bytes.len()) {
                    Some(permit) => deliver(out, ChunkKind::Dir, bytes, permit),
                    None => false,
                }
            }
        };
        if !sent {
            return Ok(()); // the transport stopped listening
        }
    }
    Ok(())
}

/// A source file the reader could not read (unreadable, vanished, changed since the walk).
/// It fails the whole run: the file is named by its path in the tree (as the receiver would
/// name it) and the tree's root, and the cause is the error's source. The sender ends the run
/// at once on it: the receiver has nothing to say about a local failure.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} source file {rel} (in {root})")]
pub struct SourceFileError {
    /// What failed: "open", "stat", "read".
    pub action: &'static str,
    /// The file's path in the tree, escaped for display.
    pub rel: String,
    pub root: String,
    #[source]
    pub cause: std::io::Error,
}

impl SourceFileError {
    fn new(action: &'static str, root: &Path, rel: &RelPath, cause: std::io::Error) -> Self {
        Self {
            action,
            rel: rel.to_string(),
            root: root.display().to_string(),
            cause,
        }
    }

    /// Whether `e` (or anything in its chain) is a [`SourceFileError`].
    pub fn is_in(e: &anyhow::Error) -> bool {
        e.chain().any(|c| c.is::<SourceFileError>())
    }
}

/// The folder of the last file opened, held open (`O_PATH`): the files of a sorted walk come
/// folder by folder, and opening each from its folder resolves one name instead of every
/// component of its path from the root (the path walk, `__d_lookup_rcu` and `link_path_walk`,
/// was ~7% of a tcp-bundle sender's samples on 65,536 × 4 KiB: docs/benchmarks.md).
struct Folder<'a> {
    root: &'a Path,
    parent: Option<(Vec<u8>, OwnedFd)>,
}

impl<'a> Folder<'a> {
    fn new(root: &'a Path) -> Self {
        Self { root, parent: None }
    }

    /// Opens `rel` under the root for reading, never following a symbolic link in its last
    /// component (as before, the folders above it are followed).
    fn open(&mut self, rel: &RelPath) -> std::io::Result<File> {
        use rustix::fs::{Mode, OFlags};
        let (parent, name) = rel.split_parent();
        let held = matches!(&self.parent, Some((p, _)) if p == parent);
        if !held {
            let dir = self.root.join(OsStr::from_bytes(parent));
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let fd = rustix::fs::open(&dir, flags, Mode::empty())?;
            self.parent = Some((parent.to_vec(), fd));
        }
        let (_, dir) = self.parent.as_ref().expect("held above");
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(dir, OsStr::from_bytes(name), flags, Mode::empty())?;
        Ok(File::from(fd))
    }
}

/// Reads file `index` of the tree (or its block `offset, len`) into chunks; `Ok(false)` if the
/// consumer went away.
fn read_file(
    folder: &mut Folder,
    index: usize,
    entry: &SourceFile,
    block: Option<(u64, u64)>,
    config: ReaderConfig,
    budget: &ByteBudget,
    out: &mut Outbox,
) -> Result<bool> {
    let root = folder.root;
    let fail = |action, cause| SourceFileError::new(action, root, &entry.rel, cause);
    let mut file = folder.open(&entry.rel).map_err(|e| fail("open", e))?;
    // A file read whole needs no stat: its last read asks for one byte more than the walk
    // found, so a change of size since the walk fails the read below all the same (one
    // system call a file less). A block does not read to the file's end: it checks the size.
    let size = match block {
        None => entry.size,
        Some(_) => {
            let size = file.metadata().map_err(|e| fail("stat", e))?.len();
            if size != entry.size {
                let change = if size > entry.size {
                    format!(
                        "it grew while being read (more than the {} bytes it had at the walk)",
                        entry.size
                    )
                } else {
                    format!(
                        "it shrank while being read (it has {size} of the {} bytes it had at the walk)",
                        entry.size
                    )
                };
                return Err(fail("read", std::io::Error::other(change)).into());
            }
            size
        }
    };
    let (start, mut left) = block.unwrap_or((0, size));
    // Whether this item ends where the file does (a whole file, or its last block).
    let ends_file = start + left == size;
    if start > 0 {
        file.seek(SeekFrom::Start(start))
            .map_err(|e| fail("read", e))?;
    }
    let header_len = match block {
        Some(_) => codec::block_header_len(&entry.rel),
        None => codec::file_header_len(&entry.rel),
    };
    let mut first = true;
    loop {
        let n = left.min(config.chunk_size as u64) as usize;
        let head = if first { header_len } else { 0 };
        // Take the room before allocating, so memory never runs past the budget.
        let Some(permit) = out.acquire(budget, head + n) else {
            return Ok(false);
        };
        // Only the file's own last chunk can see it grew (a block's end is not the file's).
        let last = left == n as u64 && ends_file;
        // The last chunk asks for one byte more than is due: a file that grew since the walk
        // fills it, and one that shrank ends early. Either fails the run, naming the change
        // (a grown file used to be sent cut to its walk-time size and reported ok).
        let room = n + usize::from(last);
        // Read into the spare capacity, not zeroed first (`sys::read_into_spare`).
        let mut bytes = BytesMut::with_capacity(head + room);
        match (first, block) {
            (true, None) => codec::encode_file_header(&entry.rel, size, &mut bytes),
            (true, Some((offset, len))) => {
                codec::encode_block_header(&entry.rel, size, offset, len, &mut bytes)
            }
            (false, _) => {}
        }
        let got = read_up_to(&file, &mut bytes, room, n).map_err(|e| fail("read", e))?;
        if got != n {
            let at = start + (block.map_or(size, |b| b.1) - left) + got as u64;
            let change = if got > n {
                format!("it grew while being read (more than the {size} bytes it had at the walk)")
            } else {
                format!("it shrank while being read (ended after {at} of the {size} bytes it had at the walk)")
            };
            return Err(fail("read", std::io::Error::other(change)).into());
        }
        bytes.truncate(head + n);
        left -= n as u64;
        let kind = ChunkKind::File {
            index,
            size,
            first,
            last: left == 0,
            block,
        };
        if !deliver(out, kind, bytes, permit) {
            return Ok(false);
        }
        if left == 0 {
            return Ok(true);
        }
        first = false;
    }
}

/// Appends to `buf` until `room` bytes are in, the file ends, or a read comes back short
/// once `due` bytes are in (a regular file's read is short only at its end, so no extra read
/// is spent to see the end). Returns the bytes appended: `due` when the file ended there.
fn read_up_to(file: &File, buf: &mut BytesMut, room: usize, due: usize) -> std::io::Result<usize> {
    let start = buf.len();
    buf.reserve(room);
    while buf.len() - start < room {
        match shoal_sys::io::read_into_spare(file, buf, room - (buf.len() - start)) {
            Ok(0) => break,
            Ok(_) => {
                if buf.len() - start == due {
                    break; // short of the spare byte: the end of the file
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(buf.len() - start)
}

fn deliver(out: &mut Outbox, kind: ChunkKind, bytes: BytesMut, permit: BudgetPermit) -> bool {
    let chunk = Chunk {
        kind,
        bytes,
        _permit: permit,
    };
    out.push(chunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of several chunks that changes size after its first chunk was read fails the
    /// read at its last chunk, naming the change (it was sent cut to its walk-time size and
    /// reported ok when only a one-chunk file's last read asked for the spare byte).
    #[test]
    fn a_file_of_several_chunks_that_grows_or_shrinks_while_read_fails() {
        for (change, said) in [("grow", "grew while being read"), ("shrink", "shrank")] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("big");
            std::fs::write(&path, vec![7u8; 200 << 10]).unwrap();
            let queue = WorkQueue::walk(dir.path(), u64::MAX, false).unwrap();
            // Room for one chunk: the reader waits until the first is taken.
            let config = ReaderConfig {
                budget: 70 << 10,
                chunk_size: 64 << 10,
            };
            let mut reader = Reader::spawn(queue, config).unwrap();
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            rt.block_on(async {
                let first = reader.chunks.recv().await.expect("a first chunk");
                let f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .unwrap();
                match change {
                    "grow" => {
                        use std::io::Write;
                        (&f).write_all(&[8u8; 4096]).unwrap();
                    }
                    _ => f.set_len(150 << 10).unwrap(),
                }
                drop(first);
                while reader.chunks.recv().await.is_some() {}
            });
            let err = format!("{:#}", reader.finish().expect_err(change));
            assert!(err.contains(said), "{change}: {err}");
        }
    }

    /// Every file arrives whole and in walk order, in batches, while a budget far smaller than
    /// the tree makes the reader wait for room again and again: it must hand over what it
    /// gathered before it waits, or it would wait for room only those chunks can free.
    #[test]
    fn batches_keep_order_and_never_hold_back_what_frees_room() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..300 {
            std::fs::write(dir.path().join(format!("f{i:03}")), vec![i as u8; 1000]).unwrap();
        }
        std::fs::write(dir.path().join("empty"), b"").unwrap();
        let queue = WorkQueue::walk(dir.path(), u64::MAX, false).unwrap();
        let config = ReaderConfig {
            budget: 8 << 10,
            chunk_size: 64 << 10,
        };
        let mut reader = Reader::spawn(queue, config).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let mut sizes = Vec::new();
        let taking = async {
            while let Some(chunk) = reader.chunks.recv().await {
                let ChunkKind::File {
                    index,
                    size,
                    first,
                    last,
                    ..
                } = chunk.kind
                else {
                    panic!("no folders in this tree");
                };
                assert!(first && last, "a small file is one chunk");
                assert_eq!(index, sizes.len());
                sizes.push(size);
                // Taken one at a time, so the reader keeps running into its budget.
                tokio::task::yield_now().await;
            }
        };
        let deadline = std::time::Duration::from_secs(60);
        rt.block_on(async { tokio::time::timeout(deadline, taking).await })
            .expect("the reader stalled holding chunks back");
        reader.finish().unwrap();
        // "empty" sorts first.
        assert_eq!(sizes.len(), 301);
        assert_eq!(sizes[0], 0);
        assert!(sizes[1..].iter().all(|&s| s == 1000));
    }
}
