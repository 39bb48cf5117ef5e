//! The sender's work: the tree's files (or their blocks), then its empty folders, handed to
//! whichever reader asks next — while the tree is still being walked.
//!
//! A walker thread ([`WorkQueue::walk`]) feeds the queue as it finds files, so the first files
//! are read and sent while the rest of the tree is walked: the walk of 65,536 files was ~0.1 s
//! spent before the first connect. The receiver does not need the run's totals up front
//! (protocol 4 enforces its limits on what arrives); the sender learns them when the walk ends
//! ([`WorkQueue::summary`]) and checks the completion against them.
//!
//! A file larger than the block size is handed out as its blocks, one item each, so the run's
//! connections carry one large file together.
//!
//! The walk runs at most [`AHEAD`] items ahead of the readers: an unbounded queue held the
//! whole tree while a slow start kept the readers back (~120 bytes a file: several MB of a
//! sender's peak RSS at 65,536 files, and it grows with the tree).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use anyhow::{Context, Result};

use crate::tree::{check_source_root, walk_each, SourceFile, WalkSummary};
use shoal_proto::relpath::RelPath;

/// Files the walker gathers before it hands them over while no reader waits: one lock and one
/// wake-up per batch instead of per file.
const BATCH: usize = 256;

/// Items the walk may have queued ahead of the readers before it waits for them to take some:
/// a few seconds of small files at the fastest the readers go (~60,000 files/s on tmpfs), so no
/// reader waits for the walk, and a fixed bound on the queue's memory whatever the tree.
pub const AHEAD: usize = 16_384;

/// One item of the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// File `index` (0-based, in walk order): whole, or bytes `offset..offset + len` of it
    /// (`block`).
    File {
        index: usize,
        file: Arc<SourceFile>,
        block: Option<(u64, u64)>,
    },
    /// An empty folder.
    Dir(RelPath),
}

/// The walk of the source tree failed (a folder it cannot list, a name that cannot be sent):
/// the sender's own failure, as a [`super::reader::SourceFileError`] is, so the sender ends the
/// run at once instead of waiting for a reason from the receiver.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct WalkError(String);

impl WalkError {
    /// Whether `e` (or anything in its chain) is a [`WalkError`].
    pub fn is_in(e: &anyhow::Error) -> bool {
        e.chain().any(|c| c.is::<WalkError>())
    }
}

/// What the walk has found so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Found {
    pub files: u64,
    pub bytes: u64,
    /// Files carried as blocks.
    pub files_in_blocks: u64,
    /// The walk is over: the counts are the tree's.
    pub done: bool,
}

/// Hands out a tree's items to the readers of a run's connections.
#[derive(Debug)]
pub struct WorkQueue {
    root: PathBuf,
    block_size: u64,
    /// Test hook: hand each file's blocks out last first.
    reverse_blocks: bool,
    /// Items the walk may queue ahead of the readers ([`AHEAD`]).
    ahead: usize,
    state: Mutex<State>,
    more: Condvar,
    /// The walker waits on it while the queue holds `ahead` items.
    room: Condvar,
    /// Readers waiting for an item: the walker hands over what it has at once then.
    waiting: AtomicUsize,
    /// Set by [`WorkQueue::stop`]: the walker stops at its next file.
    stopped: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    items: VecDeque<Item>,
    next_index: usize,
    found: Found,
    /// How the walk ended: its summary, or its error (every reader fails with it).
    end: Option<std::result::Result<WalkSummary, String>>,
}

impl WorkQueue {
    fn empty(root: &Path, block_size: u64, reverse_blocks: bool) -> Self {
        Self {
            root: root.to_path_buf(),
            block_size: block_size.max(1),
            reverse_blocks,
            ahead: AHEAD,
            state: Mutex::new(State::default()),
            more: Condvar::new(),
            room: Condvar::new(),
            waiting: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
        }
    }

    /// Walks `root` on a thread of its own, feeding the queue as files are found. Files
    /// larger than `block_size` are handed out as blocks of `block_size` bytes (the last one
    /// shorter); `reverse_blocks` (a test hook) hands each file's blocks out last first.
    /// A missing `root`, or one that is not a folder, is refused here, before anything starts.
    pub fn walk(root: &Path, block_size: u64, reverse_blocks: bool) -> Result<Arc<Self>> {
        Self::walk_ahead(root, block_size, reverse_blocks, AHEAD)
    }

    fn walk_ahead(
        root: &Path,
        block_size: u64,
        reverse_blocks: bool,
        ahead: usize,
    ) -> Result<Arc<Self>> {
        check_source_root(root)?;
        let queue = Arc::new(Self {
            ahead,
            ..Self::empty(root, block_size, reverse_blocks)
        });
        let walker = queue.clone();
        std::thread::Builder::new()
            .name("shoal-walk".into())
            .spawn(move || walker.run_walk())
            .context("cannot start the walk thread")?;
        Ok(queue)
    }

    /// A queue over a tree already walked (tests).
    #[cfg(test)]
    pub fn from_tree(
        tree: &crate::tree::SourceTree,
        block_size: u64,
        reverse_blocks: bool,
    ) -> Self {
        let queue = Self::empty(&tree.root, block_size, reverse_blocks);
        queue.push_files(
            &mut queue.state.lock().expect("work queue"),
            tree.files.to_vec(),
        );
        queue.end(Ok(WalkSummary {
            files: tree.files.len() as u64,
            total_bytes: tree.total_bytes,
            empty_dirs: tree.empty_dirs.clone(),
            skipped_symlinks: tree.skipped_symlinks,
            skipped_special: tree.skipped_special,
        }));
        queue
    }

    fn run_walk(&self) {
        let mut batch = Vec::with_capacity(BATCH);
        // A walk that panicked must still end the queue, or its readers would wait forever.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            walk_each(&self.root, |file| {
                batch.push(file);
                if batch.len() >= BATCH || self.waiting.load(Ordering::Acquire) > 0 {
                    self.hand_over(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)));
                }
                !self.stopped.load(Ordering::Relaxed)
            })
        }));
        let result = match result {
            Ok(walked) => {
                self.hand_over(batch);
                walked.map_err(|e| format!("{e:#}"))
            }
            Err(_) => Err(format!(
                "the walk of {} stopped unexpectedly (its thread panicked)",
                self.root.display()
            )),
        };
        self.end(result);
    }

    /// Appends `files` (whole, or as their blocks) and wakes the readers; first waits while
    /// the queue holds `ahead` items (unless the run stopped).
    fn hand_over(&self, files: Vec<SourceFile>) {
        if files.is_empty() {
            return;
        }
        let mut s = self.state.lock().expect("work queue");
        while s.items.len() >= self.ahead && !self.stopped.load(Ordering::Relaxed) {
            s = self.room.wait(s).expect("work queue");
        }
        self.push_files(&mut s, files);
        drop(s);
        self.more.notify_all();
    }

    fn push_files(&self, s: &mut State, files: Vec<SourceFile>) {
        for file in files {
            let index = s.next_index;
            s.next_index += 1;
            s.found.files += 1;
            s.found.bytes += file.size;
            let size = file.size;
            let file = Arc::new(file);
            if size <= self.block_size {
                s.items.push_back(Item::File {
                    index,
                    file,
                    block: None,
                });
                continue;
            }
            s.found.files_in_blocks += 1;
            let blocks = size.div_ceil(self.block_size);
            for j in 0..blocks {
                let j = if self.reverse_blocks {
                    blocks - 1 - j
                } else {
                    j
                };
                let offset = j * self.block_size;
                s.items.push_back(Item::File {
                    index,
                    file: file.clone(),
                    block: Some((offset, (size - offset).min(self.block_size))),
                });
            }
        }
    }

    /// Ends the walk: its empty folders follow the files.
    fn end(&self, result: std::result::Result<WalkSummary, String>) {
        let mut s = self.state.lock().expect("work queue");
        if let Ok(summary) = &result {
            s.items
                .extend(summary.empty_dirs.iter().cloned().map(Item::Dir));
            s.found.done = true;
        }
        s.end = Some(result);
        drop(s);
        self.more.notify_all();
    }

    /// The next item if one is queued now; `Ok(None)` when [`WorkQueue::take`] would wait or
    /// the walk is over (ask `take` then).
    pub fn take_ready(&self) -> Result<Option<Item>> {
        self.pop(&mut self.state.lock().expect("work queue"))
    }

    /// The front item, if any (a walker waiting for room is woken once there is some); the
    /// walk's error once it failed.
    fn pop(&self, s: &mut State) -> Result<Option<Item>> {
        if let Some(Err(e)) = &s.end {
            return Err(WalkError(e.clone()).into());
        }
        let item = s.items.pop_front();
        if item.is_some() && s.items.len() + 1 == self.ahead {
            self.room.notify_one();
        }
        Ok(item)
    }

    /// The next item, waiting for the walk when it has none yet; `None` once the walk is over
    /// and every item was taken. A failed walk fails every reader that asks after it.
    pub fn take(&self) -> Result<Option<Item>> {
        let mut s = self.state.lock().expect("work queue");
        loop {
            if let Some(item) = self.pop(&mut s)? {
                return Ok(Some(item));
            }
            if s.end.is_some() {
                return Ok(None);
            }
            self.waiting.fetch_add(1, Ordering::AcqRel);
            s = self.more.wait(s).expect("work queue");
            self.waiting.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// The folder the tree is in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What the walk has found so far.
    pub fn found(&self) -> Found {
        self.state.lock().expect("work queue").found
    }

    /// The walk's summary once it is over (`None` while it runs or after it failed).
    pub fn summary(&self) -> Option<WalkSummary> {
        match &self.state.lock().expect("work queue").end {
            Some(Ok(s)) => Some(s.clone()),
            _ => None,
        }
    }

    /// Stops the walk at its next file (the run ended without it).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        // A walker waiting for room goes on (and then stops at its next file).
        let _s = self.state.lock().expect("work queue");
        self.room.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::SourceTree;
    use shoal_proto::relpath::PathLimits;

    fn rel(s: &str) -> RelPath {
        RelPath::from_bytes(s.as_bytes(), &PathLimits::default()).unwrap()
    }

    /// (file index, block) for files, the name for folders.
    fn shape(items: &[Item]) -> Vec<(usize, Option<(u64, u64)>)> {
        items
            .iter()
            .map(|i| match i {
                Item::File { index, block, .. } => (*index, *block),
                Item::Dir(_) => (usize::MAX, None),
            })
            .collect()
    }

    fn drain(q: &WorkQueue) -> Vec<Item> {
        std::iter::from_fn(|| q.take().unwrap()).collect()
    }

    #[test]
    fn the_walk_waits_for_the_readers_once_it_is_far_enough_ahead() {
        let t = tempfile::tempdir().unwrap();
        for i in 0..BATCH + 44 {
            std::fs::write(t.path().join(format!("f{i:04}")), b"x").unwrap();
        }
        // Ten items ahead: the first batch goes in (the queue was empty), the rest waits.
        // (Waits with a deadline for the walker to get there, however loaded the machine.)
        let q = WorkQueue::walk_ahead(t.path(), u64::MAX, false, 10).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while q.found().files < BATCH as u64 {
            assert!(
                std::time::Instant::now() < deadline,
                "the walk never handed over"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        let found = q.found();
        assert_eq!((found.files, found.done), (BATCH as u64, false));
        // Readers taking items make room; the walk then ends.
        assert_eq!(drain(&q).len(), BATCH + 44);
        assert!(q.found().done);
        // A stopped run releases a waiting walker.
        let q = WorkQueue::walk_ahead(t.path(), u64::MAX, false, 10).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        q.stop();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while q.state.lock().unwrap().end.is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "the walker never ended"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[test]
    fn large_files_are_handed_out_as_blocks_between_whole_files() {
        let sizes = [5u64, 25, 10, 11, 0];
        let tree = SourceTree {
            root: "/nowhere".into(),
            files: (0..sizes.len())
                .map(|i| SourceFile {
                    rel: rel(&format!("f{i}")),
                    size: sizes[i],
                })
                .collect(),
            empty_dirs: vec![rel("d")],
            total_bytes: sizes.iter().sum(),
            skipped_symlinks: 0,
            skipped_special: 0,
        };
        let q = WorkQueue::from_tree(&tree, 10, false);
        let items = drain(&q);
        assert_eq!(
            shape(&items),
            vec![
                (0, None),
                (1, Some((0, 10))),
                (1, Some((10, 10))),
                (1, Some((20, 5))),
                (2, None),
                (3, Some((0, 10))),
                (3, Some((10, 1))),
                (4, None),
                (usize::MAX, None),
            ]
        );
        assert_eq!(items[8], Item::Dir(rel("d")));
        assert_eq!(q.found().files_in_blocks, 2);
        assert!(q.found().done);
        let q = WorkQueue::from_tree(&tree, 10, true);
        assert_eq!(
            &shape(&drain(&q))[1..4],
            &[(1, Some((20, 5))), (1, Some((10, 10))), (1, Some((0, 10)))]
        );
        assert_eq!(
            drain(&WorkQueue::from_tree(&tree, u64::MAX, false)).len(),
            6
        );
    }

    #[test]
    fn the_walk_feeds_readers_in_walk_order_and_ends_with_the_tree_s_totals() {
        let t = tempfile::tempdir().unwrap();
        for i in 0..1000 {
            let d = t.path().join(format!("d{}", i % 7));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(format!("f{i:04}")), vec![1u8; i % 13]).unwrap();
        }
        std::fs::create_dir(t.path().join("empty")).unwrap();
        let tree = SourceTree::walk(t.path()).unwrap();
        let q = WorkQueue::walk(t.path(), u64::MAX, false).unwrap();
        // Two readers, as two connections would take from it.
        let taken: Vec<Vec<Item>> = std::thread::scope(|s| {
            let a = s.spawn(|| drain(&q));
            let b = s.spawn(|| drain(&q));
            vec![a.join().unwrap(), b.join().unwrap()]
        });
        let mut files: Vec<(usize, RelPath)> = taken
            .iter()
            .flatten()
            .filter_map(|i| match i {
                Item::File { index, file, .. } => Some((*index, file.rel.clone())),
                Item::Dir(_) => None,
            })
            .collect();
        files.sort_by_key(|f| f.0);
        let walked: Vec<RelPath> = tree.files.iter().map(|f| f.rel.clone()).collect();
        assert_eq!(files.into_iter().map(|f| f.1).collect::<Vec<_>>(), walked);
        let dirs: Vec<&Item> = taken
            .iter()
            .flatten()
            .filter(|i| matches!(i, Item::Dir(_)))
            .collect();
        assert_eq!(dirs, vec![&Item::Dir(rel("empty"))]);
        let s = q.summary().unwrap();
        assert_eq!((s.files, s.total_bytes), (1000, tree.total_bytes));
        assert_eq!(q.found().files, 1000);
    }

    #[test]
    fn a_failed_walk_fails_the_readers_naming_the_cause() {
        let t = tempfile::tempdir().unwrap();
        let e = WorkQueue::walk(&t.path().join("missing"), u64::MAX, false).unwrap_err();
        assert!(e.to_string().contains("cannot read source folder"), "{e}");
        // A path deeper than the protocol allows fails the walk once it is under way.
        let mut deep = t.path().join("tree");
        for _ in 0..257 {
            deep.push("a");
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("f"), b"x").unwrap();
        let q = WorkQueue::walk(&t.path().join("tree"), u64::MAX, false).unwrap();
        let e = q.take().unwrap_err();
        assert!(WalkError::is_in(&e), "{e}");
        let e = e.to_string();
        assert!(e.contains("cannot be sent"), "{e}");
        assert!(q.summary().is_none());
    }
}
