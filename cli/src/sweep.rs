//! `shoal sweep`: its arguments, handed to shoal-sweep as a [`SweepRequest`] (whose `Default`
//! and constants hold the defaults shown here).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use shoal_proto::units::parse_duration;
use shoal_sweep::request::{self, SweepRequest};

/// Run a parameter matrix: every configuration N times in shuffled order, every run verified.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The matrix (TOML): payloads, link, axes, exclusions (see docs/sweep.md and
    /// scripts/matrices/).
    #[arg(long, required_unless_present_any = ["continue_dir", "clean"])]
    pub matrix: Option<PathBuf>,
    /// Output folder [default: results/<UTC timestamp>/].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Runs per configuration, at least 1 [default: the matrix's [sweep] runs, else 5].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: Option<u32>,
    /// Seed of the run order; the same seed gives the same order [default: the matrix's, else
    /// random; recorded in runs.csv and meta.json].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Time limit per run, e.g. 15m; a timed-out run is a failure row [default: the
    /// matrix's, else 15m].
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Before each run, wait until the 1-minute load is below --quiet-load (at most
    /// --quiet-max).
    #[arg(long)]
    pub quiet_wait: bool,
    /// Load threshold for --quiet-wait [default: the matrix's [sweep] quiet_load, else 1.0].
    #[arg(long)]
    pub quiet_load: Option<f64>,
    /// Longest --quiet-wait before a run starts anyway (the row records the wait and the load).
    #[arg(long, default_value = request::DEFAULT_QUIET_MAX, value_parser = parse_duration)]
    pub quiet_max: Duration,
    /// Work folder: payload cache and this sweep's destinations (deleted in bulk at the end).
    #[arg(long, default_value = request::DEFAULT_WORK)]
    pub work: PathBuf,
    /// Keep every run's destination instead of deleting them at the end.
    #[arg(long)]
    pub keep: bool,
    /// Pause after destinations were deleted in bulk (by this or an earlier sweep in the same
    /// work folder) before new files are written: on journal-less ext4, new files avoid
    /// recently freed inodes and are created far slower for a while.
    #[arg(long, default_value = request::DEFAULT_SETTLE, value_parser = parse_duration)]
    pub settle: Duration,
    /// Skip the link check before the first run.
    #[arg(long)]
    pub no_check: bool,
    /// Run the sweep even when the link check fails (by default a failed check stops it
    /// before the first run); every output then says the check failed.
    #[arg(long)]
    pub accept_failed_check: bool,
    /// Keep no per-run traces (by default every Shoal run keeps its time series, latency
    /// distribution and receiver series in OUT/traces/<config_id>-r<run>/; see docs/sweep.md).
    /// For very large sweeps; the same as [sweep] traces = false.
    #[arg(long)]
    pub no_traces: bool,
    /// Two hosts: skip the path probes (idle RTT, RTT under load, goodput and loss each way,
    /// about 10 s each) before the first run and after the last; the same as [sweep] probe =
    /// false.
    #[arg(long)]
    pub no_probe: bool,
    /// Exit 1 when any run failed (by default failures are results: exit 0 once every run is
    /// recorded, unless every run failed).
    #[arg(long)]
    pub strict: bool,
    /// Check the matrix (every configuration's `shoal send` and `shoal recv` command line,
    /// parsed as the runs would give it) and print the plan: configurations, runs, estimated
    /// time. Touches nothing: no link, payload, receiver or output folder.
    #[arg(long)]
    pub dry_run: bool,
    /// Continue the sweep in DIR: run only the runs its runs.csv lacks, in its seeded order,
    /// after checking the matrix, the shoal binary and the link are those it began with
    /// [--matrix: DIR/matrix.toml].
    #[arg(long = "continue", value_name = "DIR", conflicts_with_all = ["clean", "dry_run"])]
    pub continue_dir: Option<PathBuf>,
    /// With --continue: go on despite differences from the sweep that wrote DIR, recording
    /// them in DIR/meta.json.
    #[arg(long, requires = "continue_dir")]
    pub force: bool,
    /// Release what the sweep that wrote DIR left behind (its link, processes, mounts,
    /// cgroups, sysctls, work folder; listed in DIR/owned.jsonl) if it is no longer running,
    /// and run nothing.
    #[arg(long, value_name = "DIR", conflicts_with = "matrix")]
    pub clean: Option<PathBuf>,
    /// The shoal binary for recv, send and the link forwarder [default: this program].
    #[arg(long, hide = true)]
    pub shoal_bin: Option<PathBuf>,
}

impl From<SweepArgs> for SweepRequest {
    fn from(a: SweepArgs) -> SweepRequest {
        SweepRequest {
            matrix: a.matrix.unwrap_or_default(),
            out: a.out,
            runs: a.runs,
            seed: a.seed,
            timeout: a.timeout,
            quiet_wait: a.quiet_wait,
            quiet_load: a.quiet_load,
            quiet_max: a.quiet_max,
            work: a.work,
            keep: a.keep,
            settle: a.settle,
            no_check: a.no_check,
            accept_failed_check: a.accept_failed_check,
            no_traces: a.no_traces,
            no_probe: a.no_probe,
            strict: a.strict,
            dry_run: a.dry_run,
            shoal_bin: a.shoal_bin,
            continue_dir: a.continue_dir,
            force: a.force,
            clean: a.clean,
        }
    }
}
