//! What `shoal sweep` was asked to do (every default resolved) and how it went.

use std::path::PathBuf;
use std::time::Duration;

/// Runs per configuration when neither `--runs` nor `[sweep] runs` says.
pub const DEFAULT_RUNS: u32 = 5;
/// A run's time limit when neither `--timeout` nor `[sweep] timeout` says.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// The load `--quiet-wait` waits for when neither `--quiet-load` nor `[sweep] quiet_load` says.
pub const DEFAULT_QUIET_LOAD: f64 = 1.0;

/// What `shoal sweep` was asked to do, with every default resolved.
#[derive(Clone, Debug)]
pub struct Options {
    pub matrix_path: PathBuf,
    pub out: PathBuf,
    pub runs: u32,
    pub seed: u64,
    pub timeout: Duration,
    pub quiet_wait: bool,
    pub quiet_load: f64,
    pub quiet_max: Duration,
    /// Payload cache and this sweep's destinations live under here.
    pub work: PathBuf,
    /// The `shoal` binary that runs `recv`, `send` and the link forwarder.
    pub shoal_bin: PathBuf,
    /// Keep the destinations (default: deleted in bulk at the end).
    pub keep: bool,
    /// Override the matrix's `[link] check`.
    pub check: Option<bool>,
    /// Go on after a failed link check (recorded in meta.json, runs.csv and the report).
    pub accept_failed_check: bool,
    /// Pause after a bulk delete of destinations before new files are written.
    pub settle: Duration,
    /// Keep every Shoal run's traces in `OUT/traces/<config_id>-r<run>/` (`shoal send
    /// --trace-dir`).
    pub traces: bool,
    /// Two hosts: probe the path through the receiver before the first run and after the
    /// last (`crate::pathcheck`).
    pub probe: bool,
    /// `--continue DIR`: the folder taken up again (`out` is DIR).
    pub continuation: Option<crate::continuation::Continuation>,
}

/// How the sweep went.
#[derive(Debug)]
pub struct Summary {
    pub out: PathBuf,
    pub total: usize,
    pub done: usize,
    pub ok: usize,
    pub interrupted: bool,
}
