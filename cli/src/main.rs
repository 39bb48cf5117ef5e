//! `shoal`: the one user-facing binary. Clap definitions that map subcommands to library
//! calls; no transfer logic lives here. `unsafe` lives in `shoal-sys` only.
#![forbid(unsafe_code)]

mod args;
mod defaults;
mod demo;
mod diagnose;
mod gen;
mod link;
mod path;
mod probe;
mod recv;
mod report;
mod send;
mod start_window;
mod sweep;
mod verify;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use shoal_transport::config::{Cc, Mode};

/// Measure and move trees of many small files across long, fat links.
///
/// Run `shoal recv` on the receiving host and `shoal send` on the sending host. Every transfer
/// is TLS 1.3 with a pinned certificate and a shared token; `shoal verify` proves a tree
/// arrived by SHA-256 of every file.
#[derive(Debug, Parser)]
#[command(name = "shoal", version = env!("SHOAL_LONG_VERSION"), max_term_width = 100)]
#[command(after_help = args::EXIT_STATUS)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate a payload: N files of random bytes spread over folders.
    Gen(gen::GenArgs),
    /// Receive transfers into a destination folder (serves until stopped).
    Recv(recv::RecvArgs),
    /// Send a source tree to a receiver and report the figures.
    Send(Box<send::SendArgs>),
    /// Compare two trees by SHA-256 of every file; exit 1 on any difference.
    Verify(verify::VerifyArgs),
    /// Loopback demo: generate a small tree, transfer it, verify it, print the figures.
    Demo(demo::DemoArgs),
    /// Run a parameter matrix: every configuration N times, shuffled, each run verified;
    /// writes runs.csv, medians.csv and charts (see docs/sweep.md).
    Sweep(sweep::SweepArgs),
    /// Regenerate medians.csv and the charts of a sweep folder from its runs.csv.
    Report(report::ReportArgs),
    /// Compare two sweeps: per shared configuration, the ratio of median MB/s with its
    /// interval and a rank test.
    Compare(report::CompareArgs),
    /// Measure the path to a remote `shoal recv --control`: idle RTT, bulk TCP goodput each
    /// way, RTT under load, loss (what a two-host sweep records before and after its runs).
    Probe(probe::ProbeArgs),
    /// Name what holds a small-file transfer back on the path to a remote `shoal recv
    /// --control`, and the fix: path, the ends' floors, transfers of a sample, a verdict.
    Diagnose(diagnose::DiagnoseArgs),
    /// The path state `send` keeps per receiver for --resume and --initial-window saved.
    Path {
        #[command(subcommand)]
        cmd: path::PathCommand,
    },
    /// Emulated long link between two network namespaces (needs root).
    Link {
        #[command(subcommand)]
        cmd: link::LinkCommand,
    },
    /// Print this end's settings as JSON, as the kernel reports them (a sweep runs it in each
    /// namespace for meta.json): kernel, CPU, TCP/UDP buffers and controller, metrics saving,
    /// the interface towards PEER with its qdisc and offloads, DEST's file system.
    #[command(hide = true)]
    HostFacts {
        #[arg(long)]
        peer: Option<std::net::IpAddr>,
        #[arg(long)]
        dest: Option<PathBuf>,
    },
    /// Spin on one core until standard input ends (a sweep's `recv-cpu-hog`).
    #[command(hide = true)]
    CpuHog,
}

/// The build that runs, for rows and meta.json.
pub(crate) fn provenance() -> shoal_row::provenance::Provenance {
    shoal_row::provenance::Provenance::of_this_process(
        env!("SHOAL_GIT_COMMIT"),
        env!("SHOAL_GIT_DIRTY") != "false",
    )
}

/// `--mode`: the names `shoal_proto::wire::Mode` answers to, listed in `--help`.
pub(crate) fn mode_parser() -> impl clap::builder::TypedValueParser<Value = Mode> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Mode::ALL.iter().map(|m| m.name()))
        .map(|name| name.parse::<Mode>().expect("a listed mode name"))
}

/// Parses `--cc`, naming what this kernel offers when the name is unknown.
pub(crate) fn parse_cc(name: &str) -> Result<Cc, String> {
    name.parse::<Cc>().map_err(|_| {
        format!(
            "unknown congestion controller '{name}'; Shoal offers cubic, bbr and reno \
             (QUIC: quinn's); this kernel's TCP offers: {}",
            shoal_transport::stats::available_tcp_cc().join(" ")
        )
    })
}

fn main() -> ExitCode {
    shoal_sys::process::tune_malloc();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SHOAL_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("shoal: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Gen(a) => gen::gen(a),
        Command::Recv(a) => runtime(a.runtime.threads)?.block_on(recv::recv(a)),
        Command::Send(a) => runtime(a.runtime.threads)?.block_on(send::send(*a)),
        Command::Verify(a) => verify::verify_trees(a),
        // One process runs both ends: a thread each.
        Command::Demo(a) => runtime(2)?.block_on(demo::run(a)),
        Command::Sweep(a) => shoal_sweep::request::run_sweep(a.into(), &parses),
        Command::Report(a) => shoal_report::request::run_report(a.into()),
        Command::Compare(a) => shoal_report::request::run_compare(a.into()),
        Command::Probe(a) => shoal_remote::probe_request::run_probe(a.into()),
        Command::Diagnose(a) => diagnose::run(a),
        Command::HostFacts { peer, dest } => {
            let facts = shoal_row::hostfacts::HostFacts::collect(peer, dest.as_deref());
            println!("{}", serde_json::to_string(&facts)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::CpuHog => {
            shoal_hostctl::stall::hog::main();
            Ok(ExitCode::SUCCESS)
        }
        Command::Path { cmd } => Ok(if path::path_command(cmd)? {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }),
        Command::Link { cmd } => {
            let code = link::run(cmd)?;
            Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
        }
    }
}

/// Whether `shoal ARGS…` parses: the sweep checks every configuration's command lines with
/// this before it runs anything.
fn parses(args: &[std::ffi::OsString]) -> Result<(), String> {
    Cli::try_parse_from(std::iter::once("shoal".into()).chain(args.iter().cloned()))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The async runtime with `threads` workers: a current-thread runtime for 1 (no hand-offs
/// between threads), a multi-thread one otherwise.
fn runtime(threads: u16) -> Result<tokio::runtime::Runtime> {
    let mut builder = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(usize::from(threads));
        b
    };
    builder
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}
