//! Files and bytes the receiver has reported ready so far, as the sender learns it: the
//! receiver's series (`receiver-series.csv`) samples this.
//!
//! What counts as a report depends on the mode (docs/csv-schema.md):
//! - `tcp-wait`: the receiver's per-file acknowledgement (the file is written and closed);
//! - `tcp-streams`: the receiver closing its side of the file's yamux stream, which it does
//!   after closing the file;
//! - `quic-streams`: the receiver's QUIC stack acknowledging all of the file's stream (it has
//!   the bytes; the file may still be open);
//! - bundle modes (`tcp-bundle`, `quic-bundle`): nothing per file; the completion report
//!   counts every file at once.
//!
//! In every mode the completion report sets the count to the run's totals.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub(crate) struct Ready {
    files: AtomicU64,
    bytes: AtomicU64,
    /// Connections that have received the completion report.
    completions: AtomicU64,
}

impl Ready {
    /// The receiver reported `files` more files, of `bytes` bytes together.
    pub(crate) fn add(&self, files: u64, bytes: u64) {
        self.files.fetch_add(files, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The receiver's completion report: the run's totals (the same on every connection).
    pub(crate) fn complete(&self, files: u64, bytes: u64) {
        self.files.fetch_max(files, Ordering::Relaxed);
        self.bytes.fetch_max(bytes, Ordering::Relaxed);
        self.completions.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections that have received the completion report.
    pub(crate) fn completions(&self) -> u64 {
        self.completions.load(Ordering::Relaxed)
    }

    /// (files, bytes) so far.
    pub(crate) fn get(&self) -> (u64, u64) {
        (
            self.files.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}
