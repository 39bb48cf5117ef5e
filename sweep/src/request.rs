//! `shoal sweep`: the request as given, its defaults, and the entry point that resolves it
//! against the matrix, checks the matrix and runs it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use shoal_proto::units::parse_duration;

use crate::engine;
use crate::options::{Options, Summary, DEFAULT_QUIET_LOAD, DEFAULT_RUNS, DEFAULT_TIMEOUT};
use shoal_matrix::matrix::Matrix;
use shoal_matrix::plan;
use shoal_matrix::preflight::{self, ArgCheck};

/// Where `--work` points when not given: payload cache and destinations.
pub const DEFAULT_WORK: &str = "/var/tmp/shoal-sweep";
/// The longest `--quiet-wait` when `--quiet-max` does not say.
pub const DEFAULT_QUIET_MAX: &str = "10m";
/// The pause after a bulk delete when `--settle` does not say (journal-less ext4 creates new
/// files far slower right after a big delete).
pub const DEFAULT_SETTLE: &str = "60s";

/// What `shoal sweep` is asked to do, as given (the matrix fills what this leaves open:
/// [`Options`] is the result, every default resolved).
#[derive(Clone, Debug)]
pub struct SweepRequest {
    pub matrix: PathBuf,
    /// `None`: `results/<UTC timestamp>/`.
    pub out: Option<PathBuf>,
    pub runs: Option<u32>,
    pub seed: Option<u64>,
    pub timeout: Option<Duration>,
    pub quiet_wait: bool,
    pub quiet_load: Option<f64>,
    pub quiet_max: Duration,
    pub work: PathBuf,
    pub keep: bool,
    pub settle: Duration,
    pub no_check: bool,
    pub accept_failed_check: bool,
    pub no_traces: bool,
    pub no_probe: bool,
    pub strict: bool,
    pub dry_run: bool,
    /// `None`: this program.
    pub shoal_bin: Option<PathBuf>,
    /// `--continue DIR`: run what DIR's runs.csv lacks (`matrix` empty: DIR's matrix.toml).
    pub continue_dir: Option<PathBuf>,
    /// `--force`: continue despite differences, recording them in meta.json.
    pub force: bool,
    /// `--clean DIR`: release what DIR's sweep left owned, and nothing else.
    pub clean: Option<PathBuf>,
}

impl Default for SweepRequest {
    fn default() -> SweepRequest {
        let duration = |s: &str| parse_duration(s).expect("a default duration parses");
        SweepRequest {
            matrix: PathBuf::new(),
            out: None,
            runs: None,
            seed: None,
            timeout: None,
            quiet_wait: false,
            quiet_load: None,
            quiet_max: duration(DEFAULT_QUIET_MAX),
            work: PathBuf::from(DEFAULT_WORK),
            keep: false,
            settle: duration(DEFAULT_SETTLE),
            no_check: false,
            accept_failed_check: false,
            no_traces: false,
            no_probe: false,
            strict: false,
            dry_run: false,
            shoal_bin: None,
            continue_dir: None,
            force: false,
            clean: None,
        }
    }
}

fn default_out() -> PathBuf {
    PathBuf::from("results").join(shoal_row::metrics::utc_timestamp_for_names())
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
pub fn run_sweep(mut a: SweepRequest, parse: ArgCheck) -> Result<ExitCode> {
    if let Some(dir) = &a.clean {
        let all = shoal_hostctl::owned::release::clean(dir)?;
        return Ok(if all {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    // --continue DIR: what the sweep began with, unless given (then checked against it).
    let began = match a.continue_dir.clone() {
        Some(dir) => {
            shoal_hostctl::owned::release::refuse_live(&dir.join(shoal_hostctl::owned::FILE))?;
            if a.out.as_ref().is_some_and(|o| *o != dir) {
                anyhow::bail!("--out and --continue name different folders");
            }
            a.out = Some(dir.clone());
            if a.matrix.as_os_str().is_empty() {
                a.matrix = dir.join("matrix.toml");
            }
            Some(crate::continuation::read_meta(&dir)?)
        }
        None => None,
    };
    let began_u64 = |k: &str| began.as_ref().and_then(|m| m[k].as_u64());
    let began_timeout = began
        .as_ref()
        .and_then(|m| m["timeout_s"].as_f64())
        .map(Duration::from_secs_f64);
    let (mut matrix, reference_problem) = Matrix::load_deferring_reference(&a.matrix)?;
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
    let mut opts = Options {
        matrix_path: a.matrix.clone(),
        out: a.out.unwrap_or_else(default_out),
        runs: a
            .runs
            .or(began_u64("runs_per_config").map(|r| r as u32))
            .or(matrix.runs)
            .unwrap_or(DEFAULT_RUNS),
        seed: a
            .seed
            .or(began_u64("order_seed"))
            .or(matrix.seed)
            .unwrap_or_else(plan::random_seed),
        timeout: a
            .timeout
            .or(began_timeout)
            .or(matrix.timeout)
            .unwrap_or(DEFAULT_TIMEOUT),
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
        accept_failed_check: a.accept_failed_check,
        settle: a.settle,
        traces: !a.no_traces && matrix.traces != Some(false),
        probe: !a.no_probe && matrix.probe != Some(false),
        continuation: None,
    };
    // Before the link, a payload or a receiver is touched: every configuration must parse.
    preflight::check(&matrix, opts.runs, opts.timeout, opts.traces, parse)?;
    if let Some(e) = reference_problem {
        return Err(e);
    }
    crate::meta::check_binaries(&matrix)?;
    if let Some(dir) = &a.continue_dir {
        let expect = crate::continuation::Expect {
            runs: opts.runs,
            seed: opts.seed,
            timeout: opts.timeout,
            binary: crate::meta::binary_provenance(&opts.shoal_bin),
        };
        let c = crate::continuation::Continuation::prepare(dir, &matrix, &expect, a.force)?;
        opts.continuation = Some(c);
    }
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
    let charts = shoal_report::chart::ChartOptions {
        html: true,
        ..Default::default()
    };
    let files = shoal_report::write_report(&summary.out, None, charts)?;
    if let Ok(t) = shoal_report::medians_table(&summary.out) {
        println!("\nmedians of the verified runs (MB = 10^6 bytes; × ref = reference median seconds / this one's):\n{t}");
    }
    shoal_report::request::print_spread_warnings(&summary.out);
    for line in shoal_remote::pathcheck::summary_lines(&summary.out) {
        println!("{line}");
    }
    // iperf3 moves no files: its ok runs are complete flows, not verified copies.
    let unverified = if matrix.configs.iter().all(|c| c.arm.moves_files()) {
        ""
    } else {
        "; iperf3's, which move no files, not verified"
    };
    println!(
        "{} of {} runs done, {} ok{}{}",
        summary.done,
        summary.total,
        summary.ok,
        if matrix_remote {
            format!(" (every ok run verified by SHA-256 of every file, hashed on the receiving host{unverified})")
        } else {
            format!(" (every ok run verified by SHA-256 of every file{unverified})")
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
