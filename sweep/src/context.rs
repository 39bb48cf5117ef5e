//! One sweep's state while it runs: options, matrix, payloads, link, sshd, destinations,
//! hooks; what every run reads.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use shoal_row::metrics;

use crate::baseline::Sshd;
use crate::dest::RemoteCtx;
use crate::hooks::Hooks;
use crate::linkctx::LinkCtx;
use crate::options::Options;
use crate::payload::Payload;
use crate::proc;
use crate::progress::{fmt_duration, Progress};
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
        if !self.opts.quiet_wait {
            return 0.0;
        }
        let t0 = Instant::now();
        let mut said = false;
        loop {
            let load = metrics::load_avg_1m();
            if load < self.opts.quiet_load || proc::interrupted() {
                break;
            }
            if t0.elapsed() >= self.opts.quiet_max {
                progress.note(&format!(
                    "quiet wait: load {load:.2} still ≥ {} after {}; running anyway",
                    self.opts.quiet_load,
                    fmt_duration(self.opts.quiet_max)
                ));
                break;
            }
            if !said {
                progress.note(&format!(
                    "quiet wait: 1-minute load {load:.2} ≥ {}; waiting",
                    self.opts.quiet_load
                ));
                said = true;
            }
            std::thread::sleep(Duration::from_secs(2));
        }
        t0.elapsed().as_secs_f64()
    }

    pub fn log(&self, order: usize, what: &str) -> PathBuf {
        self.logs.join(format!("{order:05}-{what}.log"))
    }
}
