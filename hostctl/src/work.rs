//! A sweep's work folder: destinations deleted in bulk, and when that last happened (the next
//! sweep's settle wait reads it).

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

pub const LAST_DELETE: &str = ".last-bulk-delete";

/// Deletes a tree of destinations in one go, syncs (so the freed inodes' table blocks are not
/// left dirty, which on journal-less ext4 extends the time new files avoid them), and records
/// the time in `WORK/.last-bulk-delete` for the next sweep's settle wait.
pub fn bulk_delete(dir: &Path, work: &Path) -> Result<()> {
    std::fs::remove_dir_all(dir).with_context(|| format!("deleting {}", dir.display()))?;
    rustix::fs::sync();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    std::fs::write(work.join(LAST_DELETE), now.to_string())?;
    Ok(())
}

pub fn last_bulk_delete(work: &Path) -> Option<SystemTime> {
    let secs: u64 = std::fs::read_to_string(work.join(LAST_DELETE))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs))
}
