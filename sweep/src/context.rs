//! One sweep's state while it runs: options, matrix, payloads, link, sshd, destinations,
//! hooks; what every run reads.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::SystemTime;

use crate::baseline::Sshd;
use crate::dest::RemoteCtx;
use crate::hooks::Hooks;
use crate::linkctx::LinkCtx;
use crate::options::Options;
use crate::payload::Payload;
use crate::progress::Progress;
use shoal_matrix::matrix::Matrix;

pub struct Sweep<'a> {
    pub opts: &'a Options,
    pub matrix: &'a Matrix,
    pub sweep_id: String,
    pub payloads: BTreeMap<String, Payload>,
    pub link: Option<LinkCtx>,
    pub sshd: Option<Sshd>,
    pub identity: PathBuf,
    pub dest_root: PathBuf,
    pub logs: PathBuf,
    pub hooks: Hooks,
    /// Two hosts without `tcp_no_metrics_save`: forget cached TCP metrics before each run.
    pub flush_tcp_metrics: bool,
    /// When destinations were last deleted in bulk (this sweep or an earlier one, from
    /// `WORK/.last-bulk-delete`).
    pub last_bulk_delete: std::cell::Cell<Option<SystemTime>>,
    /// A remote receiver's control channel (two-host sweeps), and the run folders prepared
    /// on it that still exist.
    pub remote: Option<RemoteCtx>,
}

impl Sweep<'_> {
    pub fn quiet_wait(&self, progress: &Progress) -> f64 {
        crate::quiet::wait_for_quiet(self.opts, |s| progress.note(s))
    }

    pub fn log(&self, order: usize, what: &str) -> PathBuf {
        self.logs.join(format!("{order:05}-{what}.log"))
    }
}
