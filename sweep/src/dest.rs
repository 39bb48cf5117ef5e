//! Destinations: a fresh folder per run, deleted in bulk (never during a run), with a settle
//! pause after a bulk delete; the remote receiver's run folders likewise.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::Result;

use crate::payload;
use crate::progress::Progress;
pub use shoal_hostctl::work::{bulk_delete, last_bulk_delete};
use shoal_remote::Remote;

pub struct RemoteCtx {
    pub control: Remote,
    pub runs: std::cell::RefCell<Vec<String>>,
    /// The receiving host's facts (`recv --control` info), put in every row.
    pub facts: BTreeMap<String, String>,
    /// The receiving host's clock offset measured before the first run: per-file latency
    /// (sender stamp → receiver stamp) is corrected by it.
    pub clock: Option<shoal_remote::ClockOffset>,
}

impl RemoteCtx {
    /// The remote counterpart of [`make_room`]: when the receiver's destination is low on
    /// space, removes the earlier run folders there in bulk and pauses `settle`.
    pub fn make_room(&self, need: u64, settle: Duration, progress: &Progress) -> Result<()> {
        let free = self
            .control
            .info()?
            .facts
            .get("free_bytes")
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(u64::MAX);
        if !low_on_space(free, need) || self.runs.borrow().is_empty() {
            return Ok(());
        }
        progress.note(&format!(
            "remote receiver low on space ({} MB free): removing earlier run folders, then a {} s pause",
            free / 1_000_000,
            settle.as_secs()
        ));
        self.cleanup_all()?;
        std::thread::sleep(settle);
        Ok(())
    }

    /// Removes every prepared run folder on the receiver (bulk, like local destinations).
    pub fn cleanup_all(&self) -> Result<()> {
        for id in self.runs.borrow_mut().drain(..) {
            self.control.cleanup(&id)?;
        }
        Ok(())
    }
}

/// Whether `free` bytes leave too little room for a run of `need` bytes: twice the payload and
/// a GiB to spare.
fn low_on_space(free: u64, need: u64) -> bool {
    free <= need.saturating_mul(2) + (1 << 30)
}

/// When the work file system is low on space, deletes the destinations under `dest_root` in
/// bulk and pauses `settle` (freshly freed inodes slow the next writes on journal-less ext4).
pub fn make_room(
    dest_root: &Path,
    work: &Path,
    settle: Duration,
    last_bulk_delete: &Cell<Option<SystemTime>>,
    need: u64,
    progress: &Progress,
) -> Result<()> {
    let free = payload::free_bytes(dest_root).unwrap_or(u64::MAX);
    if !low_on_space(free, need) {
        return Ok(());
    }
    progress.note(&format!(
        "low on space ({} MB free): deleting earlier destinations in bulk, then a {} s pause",
        free / 1_000_000,
        settle.as_secs()
    ));
    let old = dest_root.with_extension("old");
    std::fs::rename(dest_root, &old)?;
    std::fs::create_dir_all(dest_root)?;
    bulk_delete(&old, work)?;
    last_bulk_delete.set(Some(SystemTime::now()));
    std::thread::sleep(settle);
    Ok(())
}
