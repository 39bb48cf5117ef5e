//! Sender side: reads files ahead of the network into wire-ready chunks.
//!
//! A reader thread takes items from a shared [`WorkQueue`] (so several connections can pull
//! from one tree, while it is still being walked), opens and reads each file, and sends chunks whose first one starts with the
//! file's record header. Reading runs ahead of the socket by at most the byte budget, so the
//! socket never waits on one file's open and read, and memory stays bounded when the link is
//! the bottleneck.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{bail, Context, Result};
use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;

use super::budget::{BudgetPermit, ByteBudget};
use super::queue::{Item, WorkQueue};
use crate::codec;
use crate::relpath::RelPath;
use crate::tree::SourceFile;

/// Reader settings.
#[derive(Debug, Clone, Copy)]
pub struct ReaderConfig {
    /// Bytes that may be read ahead of the socket (all chunks not yet written).
    pub budget: usize,
    /// Largest chunk of one file's content. The default, 64 KiB, stays under glibc's mmap
    /// threshold (128 KiB, `cli/src/sys.rs`), so a chunk's buffer comes from the heap and is
    /// reused once freed: 1 MiB chunks were each mapped fresh, and with the bundle's staging
    /// buffers the page faults and the kernel's zeroing took ~10% of a quic-bundle sender's
    /// samples on the 1 Gbit/s link (docs/benchmarks.md, "Twelfth session").
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
            codec::stamp_sent_at(&mut self.bytes, crate::metrics::wall_clock_us());
        }
    }

    /// Gives the bytes to a writer that wants them frozen, keeping the budget held by
    /// `self` until it is dropped.
    pub fn take_bytes(&mut self) -> Bytes {
        std::mem::take(&mut self.bytes).freeze()
    }
}

/// A running reader: its chunks and its thread.
#[derive(Debug)]
pub struct Reader {
    pub chunks: mpsc::Receiver<Chunk>,
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
        let (tx, rx) = mpsc::channel(4096);
        let thread_budget = budget.clone();
        let thread = std::thread::Builder::new()
            .name("shoal-reader".into())
            .spawn(move || read_loop(&queue, config, &thread_budget, &tx))
            .context("cannot start the reader thread")?;
        Ok(Self {
            chunks: rx,
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
    tx: &mpsc::Sender<Chunk>,
) -> Result<()> {
    while let Some(item) = queue.take()? {
        let sent = match item {
            Item::File { index, file, block } => {
                read_file(queue.root(), index, &file, block, config, budget, tx)?
            }
            Item::Dir(dir) => {
                let mut bytes = BytesMut::with_capacity(3 + dir.as_bytes().len());
                codec::encode_dir(&dir, &mut bytes);
                match budget.acquire(bytes.len()) {
                    Some(permit) => deliver(tx, ChunkKind::Dir, bytes, permit),
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

/// Reads file `index` of the tree in `root` (or its block `offset, len`) into chunks;
/// `Ok(false)` if the consumer went away.
fn read_file(
    root: &Path,
    index: usize,
    entry: &SourceFile,
    block: Option<(u64, u64)>,
    config: ReaderConfig,
    budget: &ByteBudget,
    tx: &mpsc::Sender<Chunk>,
) -> Result<bool> {
    let path = entry.rel.under(root);
    let fail = |action, cause| SourceFileError::new(action, root, &entry.rel, cause);
    let mut file = File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| fail("open", e))?;
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
        let Some(permit) = budget.acquire(head + n) else {
            return Ok(false);
        };
        // Only the file's own last chunk can see it grew (a block's end is not the file's).
        let last = left == n as u64 && start + left == size;
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
        if !deliver(tx, kind, bytes, permit) {
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
        match crate::sys::read_into_spare(file, buf, room - (buf.len() - start)) {
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

fn deliver(
    tx: &mpsc::Sender<Chunk>,
    kind: ChunkKind,
    bytes: BytesMut,
    permit: BudgetPermit,
) -> bool {
    let chunk = Chunk {
        kind,
        bytes,
        _permit: permit,
    };
    tx.blocking_send(chunk).is_ok()
}
