//! `shoal sweep` and `shoal report`: clap arguments and their entry points.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

use crate::engine;
use crate::matrix::Matrix;
use crate::options::{Options, Summary, DEFAULT_QUIET_LOAD, DEFAULT_RUNS, DEFAULT_TIMEOUT};
use crate::plan;
use crate::preflight::{self, ArgCheck};

/// Run a parameter matrix: every configuration N times in shuffled order, every run verified.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The matrix (TOML): payloads, link, axes, exclusions (see docs/sweep.md and
    /// scripts/matrices/).
    #[arg(long)]
    pub matrix: PathBuf,
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
    #[arg(long, value_parser = shoal_common::units::parse_duration)]
    pub timeout: Option<Duration>,
    /// Before each run, wait until the 1-minute load is below --quiet-load (at most
    /// --quiet-max).
    #[arg(long)]
    pub quiet_wait: bool,
    /// Load threshold for --quiet-wait [default: the matrix's [sweep] quiet_load, else 1.0].
    #[arg(long)]
    pub quiet_load: Option<f64>,
    /// Longest --quiet-wait before a run starts anyway (the row records the wait and the load).
    #[arg(long, default_value = "10m", value_parser = shoal_common::units::parse_duration)]
    pub quiet_max: Duration,
    /// Work folder: payload cache and this sweep's destinations (deleted in bulk at the end).
    #[arg(long, default_value = "/var/tmp/shoal-sweep")]
    pub work: PathBuf,
    /// Keep every run's destination instead of deleting them at the end.
    #[arg(long)]
    pub keep: bool,
    /// Pause after destinations were deleted in bulk (by this or an earlier sweep in the same
    /// work folder) before new files are written: on journal-less ext4, new files avoid
    /// recently freed inodes and are created far slower for a while.
    #[arg(long, default_value = "60s", value_parser = shoal_common::units::parse_duration)]
    pub settle: Duration,
    /// Skip the link check before the first run.
    #[arg(long)]
    pub no_check: bool,
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
    /// The shoal binary for recv, send and the link forwarder [default: this program].
    #[arg(long, hide = true)]
    pub shoal_bin: Option<PathBuf>,
}

/// Regenerate medians.csv and the charts of a sweep folder from its runs.csv alone.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The sweep's output folder (holding runs.csv).
    pub dir: PathBuf,
    /// Reference configuration for the ratio column, e.g. mode=tcp-bundle,cc=cubic (one per
    /// payload) [default: the rows marked reference in runs.csv].
    #[arg(long)]
    pub reference: Option<String>,
    /// Draw the bar chart's axis in Mbit/s (10^6 bits of file content per second) instead of
    /// MB/s, e.g. to read it against a link rate.
    #[arg(long)]
    pub mbit: bool,
}

/// Compare two sweeps configuration by configuration (matched by payload and label).
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The first sweep's output folder (holding runs.csv): A, the baseline.
    pub dir_a: PathBuf,
    /// The second sweep's output folder: B, compared against A.
    pub dir_b: PathBuf,
    /// Also write the comparison as CSV to this file (`-` for standard output, instead of the
    /// table).
    #[arg(long)]
    pub csv: Option<PathBuf>,
}

fn default_out() -> PathBuf {
    PathBuf::from("results").join(shoal_common::metrics::utc_timestamp_for_names())
}

/// The exit status of a finished sweep: 130 when interrupted; 1 when every run failed, or
/// with `--strict` when any did; else 0 (failures are results).
pub fn exit_status(s: &Summary, strict: bool) -> u8 {
    if s.interrupted {
        130
    } else if (s.done > 0 && s.ok == 0) || (strict && s.ok < s.done) {
        1
    } else {
        0
    }
}

/// `shoal sweep`. `parse` is the `shoal` binary's own argument parser: every
/// configuration's command lines go through it before anything is touched.
pub fn run_sweep(a: SweepArgs, parse: ArgCheck) -> Result<ExitCode> {
    let mut matrix = Matrix::load(&a.matrix)?;
    // The controller in effect where no cc axis sets it, in the labels when it differs.
    let tcp_default = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "host-default".into());
    matrix.note_cc_in_effect(&tcp_default);
    let a_strict = a.strict;
    let matrix_remote = matrix.is_remote();
    let shoal_bin = match a.shoal_bin {
        Some(p) => p,
        None => std::env::current_exe().context("locating the shoal program")?,
    };
    let opts = Options {
        matrix_path: a.matrix.clone(),
        out: a.out.unwrap_or_else(default_out),
        runs: a.runs.or(matrix.runs).unwrap_or(DEFAULT_RUNS),
        seed: a.seed.or(matrix.seed).unwrap_or_else(plan::random_seed),
        timeout: a.timeout.or(matrix.timeout).unwrap_or(DEFAULT_TIMEOUT),
        quiet_wait: a.quiet_wait,
        quiet_load: a
            .quiet_load
            .or(matrix.quiet_load)
            .unwrap_or(DEFAULT_QUIET_LOAD),
        quiet_max: a.quiet_max,
        work: a.work,
        shoal_bin,
        keep: a.keep,
        check: a.no_check.then_some(false),
        settle: a.settle,
        traces: !a.no_traces && matrix.traces != Some(false),
        probe: !a.no_probe && matrix.probe != Some(false),
    };
    // Before the link, a payload or a receiver is touched: every configuration must parse.
    preflight::check(&matrix, opts.runs, opts.timeout, opts.traces, parse)?;
    if a.dry_run {
        print!(
            "{}",
            preflight::plan_text(
                &matrix,
                opts.runs,
                opts.seed,
                opts.timeout,
                opts.check != Some(false)
            )
        );
        println!("every configuration's shoal send and shoal recv command line parses; nothing was run (--dry-run)");
        return Ok(ExitCode::SUCCESS);
    }
    if !matrix.is_remote() && !is_root() {
        anyhow::bail!("a sweep on an emulated link needs root (network namespaces)");
    }
    let summary = engine::run(&opts, &matrix)?;
    let files = crate::write_report(&summary.out, None, Default::default())?;
    if let Ok(t) = crate::medians_table(&summary.out) {
        println!("\nmedians of the verified runs (MB = 10^6 bytes; × ref = reference median seconds / this one's):\n{t}");
    }
    print_spread_warnings(&summary.out);
    for line in crate::pathcheck::summary_lines(&summary.out) {
        println!("{line}");
    }
    println!(
        "{} of {} runs done, {} ok{}{}",
        summary.done,
        summary.total,
        summary.ok,
        if matrix_remote {
            " (every ok run verified by SHA-256 of every file, hashed on the receiving host)"
        } else {
            " (every ok run verified by SHA-256 of every file)"
        },
        if summary.interrupted {
            " (interrupted)"
        } else {
            ""
        }
    );
    println!("runs:    {}", summary.out.join("runs.csv").display());
    for f in files {
        println!("report:  {}", f.display());
    }
    if summary.done > 0 && summary.ok == 0 {
        eprintln!(
            "shoal sweep: every run failed (exit status 1); see the error column of runs.csv"
        );
    }
    Ok(ExitCode::from(exit_status(&summary, a_strict)))
}

/// `shoal report`.
pub fn run_report(a: ReportArgs) -> Result<ExitCode> {
    let sel = a
        .reference
        .as_deref()
        .map(crate::report::parse_selector)
        .transpose()?;
    let files = crate::write_report(
        &a.dir,
        sel.as_deref(),
        crate::chart::ChartOptions { mbit: a.mbit },
    )?;
    for f in files {
        println!("{}", f.display());
    }
    print_spread_warnings(&a.dir);
    Ok(ExitCode::SUCCESS)
}

/// `shoal compare`.
pub fn run_compare(a: CompareArgs) -> Result<ExitCode> {
    let result = crate::compare::compare(&a.dir_a, &a.dir_b)?;
    match a.csv.as_deref() {
        Some(p) if p.as_os_str() == "-" => {
            crate::compare::write_csv(&result, &mut std::io::stdout().lock())?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(p) => {
            let mut f = std::fs::File::create(p)
                .with_context(|| format!("cannot write {}", p.display()))?;
            crate::compare::write_csv(&result, &mut f)?;
        }
        None => {}
    }
    print!(
        "{}",
        crate::compare::table(
            &result,
            &a.dir_a.display().to_string(),
            &a.dir_b.display().to_string()
        )
    );
    if result.rows.is_empty() {
        anyhow::bail!(
            "{} and {} share no configuration (payload and label)",
            a.dir_a.display(),
            a.dir_b.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the summary's warnings about spread and outliers.
fn print_spread_warnings(dir: &std::path::Path) {
    if let Ok(ws) = crate::report::spread_warnings(&dir.join("medians.csv")) {
        for w in ws {
            println!("warning: {w}");
        }
    }
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_whose_every_run_failed_exits_1() {
        let s = |done, ok, interrupted| Summary {
            out: PathBuf::new(),
            total: done,
            done,
            ok,
            interrupted,
        };
        assert_eq!(exit_status(&s(4, 0, false), false), 1, "all failed");
        assert_eq!(
            exit_status(&s(4, 1, false), false),
            0,
            "failures are results"
        );
        assert_eq!(
            exit_status(&s(4, 1, false), true),
            1,
            "--strict: any failure"
        );
        assert_eq!(exit_status(&s(4, 4, false), true), 0);
        assert_eq!(exit_status(&s(0, 0, true), false), 130);
        assert_eq!(exit_status(&s(2, 0, true), false), 130);
    }
}
