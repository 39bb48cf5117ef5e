//! `shoal`: the one user-facing binary. Clap definitions that map subcommands to library
//! calls; no transfer logic lives here. `unsafe` lives in `shoal-sys` only.
#![forbid(unsafe_code)]

mod defaults;
mod demo;
mod probe;
mod report;
mod start;
mod sweep;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use shoal_pipeline::reader::ReaderConfig;
use shoal_pipeline::tree::{self, GenSpec, DEFAULT_FILES_PER_DIR};
use shoal_pipeline::verify::{self, Manifest};
use shoal_proto::units::{human_bytes, parse_duration, parse_size};
use shoal_transport::config::{Cc, FlowConfig, Mode};
use shoal_transport::identity::{self, Identity, Pin};

/// Measure and move trees of many small files across long, fat links.
///
/// Run `shoal recv` on the receiving host and `shoal send` on the sending host. Every transfer
/// is TLS 1.3 with a pinned certificate and a shared token; `shoal verify` proves a tree
/// arrived by SHA-256 of every file.
#[derive(Debug, Parser)]
#[command(name = "shoal", version = env!("SHOAL_LONG_VERSION"), max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate a payload: N files of random bytes spread over folders.
    Gen(GenArgs),
    /// Receive transfers into a destination folder (serves until stopped).
    Recv(RecvArgs),
    /// Send a source tree to a receiver and report the figures.
    Send(Box<SendArgs>),
    /// Compare two trees by SHA-256 of every file; exit 1 on any difference.
    Verify(VerifyArgs),
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
    /// The path state `send` keeps per receiver for --resume and --initial-window saved.
    Path {
        #[command(subcommand)]
        cmd: start::PathCommand,
    },
    /// Emulated long link between two network namespaces (needs root).
    Link {
        #[command(subcommand)]
        cmd: shoal_link::cli::LinkCommand,
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
}

/// The build that runs, for rows and meta.json.
fn provenance() -> shoal_row::provenance::Provenance {
    shoal_row::provenance::Provenance::of_this_process(
        env!("SHOAL_GIT_COMMIT"),
        env!("SHOAL_GIT_DIRTY") != "false",
    )
}

#[derive(Debug, Args)]
struct GenArgs {
    /// Folder to create (must be absent or empty).
    #[arg(long)]
    out: PathBuf,
    /// Number of files.
    #[arg(long)]
    files: u64,
    /// Size of each file: 4096, 4KiB, 256MiB, 1GB…
    #[arg(long, value_parser = parse_size)]
    size: u64,
    /// Number of folders the files are spread over [default: one per 256 files].
    #[arg(long)]
    dirs: Option<u64>,
    /// Random seed; the same seed gives the same tree [default: random, printed].
    #[arg(long)]
    seed: Option<u64>,
}

#[derive(Debug, Args)]
struct IdentityArgs {
    /// Identity folder (certificate, key, `pin`, `token`); created on first use
    /// [default: $XDG_CONFIG_HOME/shoal/identity or ~/.config/shoal/identity].
    #[arg(long)]
    identity: Option<PathBuf>,
}

/// The async runtime of `send` and `recv`.
#[derive(Debug, Args)]
struct RuntimeArgs {
    /// Threads that run the connections (TLS, QUIC, yamux, timers). 1 costs the least CPU:
    /// with 2, handing packets and wake-ups between threads cost a quic-bundle sender 12–18%
    /// more CPU on the 1 Gbit/s link. More let many
    /// connections use several cores. The reader (send) and writer (recv) threads are apart
    /// either way. The row records each end's (`threads`, `receiver_threads`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: u16,
}

/// Flow control and socket buffers. Defaults are sized for a 1 Gbit/s × 150 ms path.
#[derive(Debug, Args)]
struct FlowArgs {
    /// Per-file streams outstanding (tcp-streams, quic-streams). Sender: for the whole run,
    /// split evenly over --connections. Receiver: the most it accepts per connection.
    #[arg(long, default_value_t = defaults::FLOW.max_streams, value_parser = clap::value_parser!(u32).range(1..=65536))]
    max_streams: u32,
    /// QUIC receive window per stream (bounds one stream, e.g. quic-bundle, to window/RTT).
    #[arg(long, default_value = defaults::size(defaults::FLOW.stream_window), value_parser = parse_size)]
    stream_window: u64,
    /// QUIC receive window per connection (all streams together).
    #[arg(long, default_value = defaults::size(defaults::FLOW.conn_window), value_parser = parse_size)]
    conn_window: u64,
    /// QUIC send window: bytes in flight unacknowledged (sender).
    #[arg(long, default_value = defaults::size(defaults::FLOW.send_window), value_parser = parse_size)]
    send_window: u64,
    /// SO_SNDBUF for TCP and UDP sockets [default: TCP autotuning up to net.ipv4.tcp_wmem;
    /// UDP 8 MiB]. The kernel caps it at net.core.wmem_max; the value in effect is reported.
    #[arg(long, value_parser = parse_size)]
    sndbuf: Option<u64>,
    /// SO_RCVBUF for TCP and UDP sockets [default: TCP autotuning up to net.ipv4.tcp_rmem;
    /// UDP 8 MiB]. The kernel caps it at net.core.rmem_max; the value in effect is reported.
    #[arg(long, value_parser = parse_size)]
    rcvbuf: Option<u64>,
}

impl FlowArgs {
    fn config(&self) -> FlowConfig {
        FlowConfig {
            max_streams: self.max_streams,
            stream_window: self.stream_window,
            conn_window: self.conn_window,
            send_window: self.send_window,
            sndbuf: self.sndbuf,
            rcvbuf: self.rcvbuf,
            max_udp_payload: None,
        }
    }
}

#[derive(Debug, Args)]
struct RecvArgs {
    /// Address to listen on, e.g. 0.0.0.0:7474 (port 0 picks a free port).
    #[arg(long, default_value = "0.0.0.0:7474")]
    listen: SocketAddr,
    /// Destination folder; every run writes inside it and nowhere else: into DEST/<run id>/,
    /// a new folder per run named by the 32-hex run id the sender sends (`send --run-id`, or
    /// random), printed in the run's line. Verify that folder: `shoal verify SRC DEST/<run id>`.
    #[arg(long)]
    dest: PathBuf,
    /// Write every run into --dest itself instead of DEST/<run id>/ (runs then share one
    /// tree: a later run overwrites an earlier one's files, and a failed run can hide behind
    /// an earlier complete tree).
    #[arg(long)]
    flat: bool,
    /// Print each run's line as one JSON object on stdout: event "run", run_id, peer, mode,
    /// status (ok or failed), files_ready, bytes_ready, receiver_seconds, folder (where the
    /// run wrote), error (empty when ok). The start-up lines come first as one JSON object:
    /// event "listening", address, pin, token_file, destination, flat. On Ctrl-C:
    /// {"event":"stopped"}. Errors and refusals stay on stderr as text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    identity: IdentityArgs,
    /// Exit after one authenticated run; exit status 0 only if that run succeeded.
    #[arg(long)]
    once: bool,
    /// Sync every written file and folder at the end of each run (timed separately).
    #[arg(long)]
    fsync: bool,
    /// Drop a peer that sends nothing for this long (handshake included).
    #[arg(long, default_value = defaults::span(defaults::RECV.idle_timeout), value_parser = parse_duration)]
    idle_timeout: Duration,
    /// Received bytes a run may hold before they are written (back-pressure to the sender).
    /// Small on purpose: TCP data waits in the kernel's socket buffer and QUIC data in
    /// quinn's receive window, so this only has to keep the writer busy.
    #[arg(long, default_value = defaults::size(defaults::RECV.write_budget as u64), value_parser = parse_size)]
    write_budget: u64,
    /// Writer threads per run [default: one per core, at most 4]. Files of different folders
    /// are created in parallel; a folder's files always go to the same writer, so a tree of
    /// one folder is written by one thread whatever this says. The row records it
    /// (`receiver_writers`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(shoal_proto::control::MAX_WRITERS)))]
    writers: Option<u32>,
    /// QUIC modes: give each connection its whole receive window (--conn-window, or its share
    /// with --connections) from the start. By default a connection starts with what a 10 Gbit/s
    /// path of its handshake's round trip can use (twice that, at least 2 MiB: the whole window
    /// from ~8 ms up) and grows to twice its delivery rate times the round trip, so a short
    /// path does not hold a window's worth of data at each end. The row reports the smallest
    /// window in effect (`receiver_conn_window_min`).
    #[arg(long)]
    fixed_window: bool,
    /// Accept unencrypted TCP transfers (`send --plain`); the token is still required.
    #[arg(long)]
    allow_plain: bool,
    /// Connections (TCP and QUIC) served at once; past it new ones are refused and logged.
    #[arg(long, default_value_t = defaults::RECV.max_connections as u32, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// Most files one run may bring: enforced on the run's running count as files arrive (the
    /// file past it is refused before it is created; files kept are within the limit).
    #[arg(long, default_value_t = defaults::RECV.max_files)]
    max_files: u64,
    /// Most content bytes one run may bring, enforced like --max-files on each file's size
    /// before it is created: 4096, 4KiB, 1TiB…
    #[arg(long, default_value = defaults::size(defaults::RECV.max_bytes), value_parser = parse_size)]
    max_bytes: u64,
    /// Longest path a peer may send, in bytes (each component stays ≤ 255).
    #[arg(long, default_value_t = defaults::RECV.limits.path.max_len as u16, value_parser = clap::value_parser!(u16).range(1..))]
    max_path_len: u16,
    /// Most components a path may have.
    #[arg(long, default_value_t = defaults::RECV.limits.path.max_depth as u16, value_parser = clap::value_parser!(u16).range(1..))]
    max_depth: u16,
    /// Deadline from connecting to a complete hello (TLS handshake included): bounds a peer
    /// that trickles bytes.
    #[arg(long, default_value = defaults::span(defaults::RECV.hello_timeout), value_parser = parse_duration)]
    hello_timeout: Duration,
    /// Take control connections from a sweep on another host (same token, TLS only): each run
    /// gets a fresh folder under --dest (DEST/<run id>, with or without --flat), hashed from
    /// disk after the run and removed on request. Folder names are run ids; nothing outside
    /// --dest is touched. A prepared run may carry its own --fsync, --max-streams,
    /// --conn-window, --write-budget and (TCP) --rcvbuf/--sndbuf, which apply to that run's
    /// connections alone; other runs keep these flags' values. docs/two-hosts.md
    #[arg(long)]
    control: bool,
    /// With --control [default: off]: let the sweep run the tar-tcp baseline here. For a run
    /// it prepared, this host then listens on an ephemeral port (on its address towards the
    /// sweep's host) for one connection from that host, and runs `tar -x --no-same-owner
    /// --no-same-permissions -f - -C DEST/<run id>` on what arrives: the peer chooses no
    /// command, argument or path, only the archive's bytes (GNU tar refuses absolute names and
    /// `..`). tar is killed past the run's time limit or when the sweep stops the run.
    /// Without it a sweep with a tar-tcp arm stops before its first run. docs/two-hosts.md
    #[arg(long, requires = "control")]
    allow_baselines: bool,
    #[command(flatten)]
    flow: FlowArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("series_out").args(["stats_out", "trace_dir"])))]
struct SendArgs {
    /// Receiver address, host:port.
    #[arg(long)]
    to: String,
    /// Source folder to send (symbolic links in it are skipped and counted).
    #[arg(long)]
    src: PathBuf,
    /// Transport mode. tcp-bundle: one TLS/TCP stream of records; tcp-streams: yamux stream per
    /// file; quic-bundle: one QUIC stream of records; quic-streams: QUIC stream per file;
    /// tcp-wait: control arm that waits for each file's acknowledgement (one RTT per file).
    #[arg(long, default_value = defaults::SEND.mode.name(), value_parser = mode_parser())]
    mode: Mode,
    /// TCP modes without TLS, to isolate the cost of encryption (the receiver must run with
    /// --allow-plain; the token still applies).
    #[arg(long)]
    plain: bool,
    /// Read the pin and token from this identity folder (a receiver on the same host)
    /// [default: the default identity folder, unless --pin is given].
    #[arg(long, conflicts_with_all = ["pin", "token_file"])]
    identity: Option<PathBuf>,
    /// The receiver's certificate pin, sha256:<hex> (printed by `shoal recv`).
    #[arg(long, requires = "token_file")]
    pin: Option<Pin>,
    /// File holding the receiver's token.
    #[arg(long, requires = "pin")]
    token_file: Option<PathBuf>,
    /// Append one result row to this CSV file (header written when the file is new).
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Print the result as one JSON object instead of the summary line; the --interval
    /// lines on stderr become JSON lines too.
    #[arg(long)]
    json: bool,
    /// Print a progress line on stderr this often (e.g. 500ms, 10s; 0 turns it off)
    /// [default: 1s when stderr is a terminal, else off]. Text: seconds since the start, files
    /// ready (confirmed by the receiver: tcp-wait, tcp-streams, quic-streams) or sent (bundled
    /// modes) of the total, bytes handed to the transport (records: contents plus a few bytes
    /// of framing per file) of the total, MB/s and Mbit/s over the interval, ETA at the
    /// average rate so far, and cwnd (summed), RTT (averaged) and retransmits (summed, since
    /// the start) over the connections. With --json, one object per line: event "interval",
    /// t_s, files_sent, files_ready (null in bundled modes), files_total, bytes_sent,
    /// bytes_total, walk_done (false while the walk is still finding files: the totals are
    /// what it found so far, shown with a "+" in text), mb_per_s, mbit_per_s, eta_s (null before the first byte and while walking), connections,
    /// cwnd_bytes, rtt_ms, retransmits. Ctrl-C ends the run as failed with the error
    /// "interrupted" (row printed and appended to --csv, exit status 130), after the figures
    /// so far on stderr (with --json: one object, event "interrupted").
    #[arg(long, value_parser = parse_duration)]
    interval: Option<Duration>,
    /// Bytes the reader may read ahead of the socket (held in memory until written), split
    /// over the connections (at least 256 KiB each). Only hides file open/read latency: data in
    /// flight is in the socket buffers (TCP) or quinn's send window (QUIC) [default: 8MiB for
    /// TCP modes, 2MiB for QUIC modes: quinn already holds up to --send-window of data ready
    /// to send, and 8 MiB cost ~5 MB more sender RSS (docs/benchmarks.md, Memory)]
    #[arg(long, value_parser = parse_size)]
    read_ahead: Option<u64>,
    #[command(flatten)]
    flow: FlowArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
    /// Write the full per-file latency distribution (CSV: run_id, value_ms, percentile,
    /// count_at_or_below).
    #[arg(long, conflicts_with = "trace_dir")]
    latency_out: Option<PathBuf>,
    /// Congestion controller: cubic, bbr or reno [default: the system default for TCP
    /// (net.ipv4.tcp_congestion_control), CUBIC for QUIC]. TCP sets TCP_CONGESTION on every
    /// socket (the receiver does the same) and reports the name the kernel reads back; QUIC
    /// uses quinn's CubicConfig, BbrConfig (experimental in quinn) or NewRenoConfig.
    #[arg(long, value_parser = parse_cc)]
    cc: Option<Cc>,
    /// QUIC: the largest UDP payload MTU discovery may reach, bytes (1200 keeps 1,200)
    /// [default: the kernel's route MTU to the receiver less IP and UDP headers, at most 6,500;
    /// quinn's 1,452 on routes of Ethernet's MTU or less]. The row's udp_payload_bytes is the
    /// size in effect. E.g. 1452 on loopback to compare with QUIC as the Internet carries it.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1200..=6500))]
    max_udp_payload: Option<u16>,
    /// Independent connections (each with its own TLS or QUIC session) sharing the files
    /// through one work queue; --max-streams, --read-ahead and the QUIC send window are for
    /// the run and split over them.
    #[arg(long, default_value_t = defaults::SEND.connections, value_parser = clap::value_parser!(u16).range(1..=64))]
    connections: u16,
    /// Files larger than this are carried as blocks of this size, spread over the
    /// connections (every mode but tcp-wait), so one large file uses all of them.
    #[arg(long, default_value = defaults::size(defaults::SEND.block_size), value_parser = parse_size)]
    block_size: u64,
    /// Test hook: send each large file's blocks last first (they arrive out of order).
    #[arg(long, hide = true)]
    test_reverse_blocks: bool,
    /// Sample RTT, cwnd, retransmits, goodput… of every connection this often (e.g. 100ms)
    /// into --stats-out, or into --trace-dir's series [default with --trace-dir: 100ms].
    #[arg(long, value_parser = parse_duration, requires = "series_out")]
    stats_interval: Option<Duration>,
    /// The sender's time-series CSV for --stats-interval: per sample and connection, the
    /// cumulative counters and the interval's goodput and retransmits (docs/csv-schema.md).
    #[arg(long, requires = "stats_interval", conflicts_with = "trace_dir")]
    stats_out: Option<PathBuf>,
    /// Keep the run's traces in this folder (created if missing): sender-series.csv (as
    /// --stats-out), latency.csv (as --latency-out) and receiver-series.csv (files and bytes
    /// the receiver reported ready, sampled on the same tick; times are when the sender
    /// learnt of them). Every row carries the run id. `shoal sweep` keeps one per run.
    #[arg(long, value_name = "DIR")]
    trace_dir: Option<PathBuf>,
    /// Test hook: corrupt the record of file N (walk order) to exercise the receiver's checks.
    #[arg(long, hide = true)]
    test_corrupt_file: Option<usize>,
    /// Give up connecting after this long.
    #[arg(long, default_value = defaults::span(defaults::SEND.connect_timeout), value_parser = parse_duration)]
    connect_timeout: Duration,
    /// Fail the run if it takes longer than this (e.g. 15m) [default: no limit].
    #[arg(long, value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// This run's id, 32 hex digits [default: random]. A sweep passes the id it prepared a
    /// fresh folder for on a receiver started with --control (docs/two-hosts.md).
    #[arg(long, value_parser = parse_run_id)]
    run_id: Option<[u8; 16]>,
    #[command(flatten)]
    start: start::StartArgs,
}

fn parse_run_id(s: &str) -> Result<[u8; 16], String> {
    shoal_proto::control::parse_run_id(s).ok_or_else(|| "expected 32 lowercase hex digits".into())
}

#[derive(Debug, Args)]
struct VerifyArgs {
    /// Source tree.
    src: PathBuf,
    /// Destination tree.
    dst: PathBuf,
    /// Hashing threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// `--mode`: the names `shoal_proto::wire::Mode` answers to, listed in `--help`.
pub(crate) fn mode_parser() -> impl clap::builder::TypedValueParser<Value = Mode> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Mode::ALL.iter().map(|m| m.name()))
        .map(|name| name.parse::<Mode>().expect("a listed mode name"))
}

/// Parses `--cc`, naming what this kernel offers when the name is unknown.
fn parse_cc(name: &str) -> Result<Cc, String> {
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
        Command::Gen(a) => gen(a),
        Command::Recv(a) => runtime(a.runtime.threads)?.block_on(recv(a)),
        Command::Send(a) => runtime(a.runtime.threads)?.block_on(send(*a)),
        Command::Verify(a) => verify_trees(a),
        // One process runs both ends: a thread each.
        Command::Demo(a) => runtime(2)?.block_on(demo::run(a)),
        Command::Sweep(a) => shoal_sweep::request::run_sweep(a.into(), &parses),
        Command::Report(a) => shoal_report::request::run_report(a.into()),
        Command::Compare(a) => shoal_report::request::run_compare(a.into()),
        Command::Probe(a) => shoal_sweep::probe_request::run_probe(a.into()),
        Command::HostFacts { peer, dest } => {
            let facts = shoal_row::hostfacts::HostFacts::collect(peer, dest.as_deref());
            println!("{}", serde_json::to_string(&facts)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Path { cmd } => Ok(if start::path_command(cmd)? {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }),
        Command::Link { cmd } => {
            let code = shoal_link::cli::run(cmd)?;
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

fn gen(a: GenArgs) -> Result<ExitCode> {
    let seed = a.seed.unwrap_or_else(rand::random);
    let spec = GenSpec {
        files: a.files,
        size: a.size,
        dirs: a.dirs,
        seed,
    };
    let started = std::time::Instant::now();
    tree::generate(&a.out, &spec)?;
    println!(
        "generated {} files of {} ({} total) in {} folders under {} in {:.1} s; seed {seed}",
        a.files,
        human_bytes(a.size),
        human_bytes(a.files * a.size),
        spec.dir_count(),
        a.out.display(),
        started.elapsed().as_secs_f64()
    );
    if a.dirs.is_none() && a.files > DEFAULT_FILES_PER_DIR {
        println!("({DEFAULT_FILES_PER_DIR} files per folder; --dirs changes that)");
    }
    Ok(ExitCode::SUCCESS)
}

async fn recv(a: RecvArgs) -> Result<ExitCode> {
    let dir = a.identity.identity.unwrap_or_else(Identity::default_dir);
    let identity = Identity::load_or_create(&dir)?;
    let (pin, token_path) = (identity.pin, identity.token_path());
    std::fs::create_dir_all(&a.dest)
        .with_context(|| format!("cannot create destination {}", a.dest.display()))?;
    let config = shoal_receiver::ReceiverConfig {
        dest: a.dest.clone(),
        flat: a.flat,
        json: a.json,
        fsync: a.fsync,
        once: a.once,
        allow_plain: a.allow_plain,
        flow: a.flow.config(),
        idle_timeout: a.idle_timeout,
        write_budget: usize::try_from(a.write_budget).unwrap_or(usize::MAX),
        writers: a
            .writers
            .map_or_else(shoal_receiver::default_writers, |n| n as usize),
        max_connections: a.max_connections as usize,
        max_files: a.max_files,
        max_bytes: a.max_bytes,
        hello_timeout: a.hello_timeout,
        control: a.control,
        allow_baselines: a.allow_baselines,
        fixed_window: a.fixed_window,
        limits: shoal_proto::codec::DecodeLimits {
            path: shoal_proto::relpath::PathLimits {
                max_len: usize::from(a.max_path_len),
                max_depth: usize::from(a.max_depth),
            },
            ..Default::default()
        },
    };
    let receiver = shoal_receiver::Receiver::bind(a.listen, identity, config).await?;
    if a.json {
        let start = serde_json::json!({
            "event": "listening",
            "address": receiver.local_addr()?.to_string(),
            "pin": pin.to_string(),
            "token_file": token_path.display().to_string(),
            "destination": a.dest.display().to_string(),
            "flat": a.flat,
        });
        println!("{start}");
    } else {
        println!("listening on {}", receiver.local_addr()?);
        println!("pin {pin}");
        println!("token file {}", token_path.display());
        match a.flat {
            true => println!(
                "destination {} (--flat: every run into it)",
                a.dest.display()
            ),
            false => println!(
                "destination {} (each run into DEST/<run id>/)",
                a.dest.display()
            ),
        }
    }
    let outcome = tokio::select! {
        r = receiver.serve() => r?,
        _ = tokio::signal::ctrl_c() => {
            match a.json {
                true => println!("{}", serde_json::json!({"event": "stopped"})),
                false => println!("stopped"),
            }
            return Ok(ExitCode::SUCCESS);
        }
    };
    Ok(match outcome {
        Some(o) if !o.ok() => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    })
}

async fn send(a: SendArgs) -> Result<ExitCode> {
    let (pin, token) = match (a.pin, a.token_file) {
        (Some(pin), Some(file)) => (pin, identity::read_token_file(&file)?),
        (None, None) => {
            let dir = a.identity.unwrap_or_else(Identity::default_dir);
            Identity::read_credentials(&dir).with_context(|| {
                format!(
                    "no --pin/--token-file given and no identity in {}",
                    dir.display()
                )
            })?
        }
        _ => bail!("--pin and --token-file go together"),
    };
    let (stats_interval, stats_out, latency_out, receiver_series_out) = match &a.trace_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            (
                Some(
                    a.stats_interval
                        .unwrap_or(shoal_row::traces::DEFAULT_INTERVAL),
                ),
                Some(dir.join(shoal_row::traces::SENDER_SERIES)),
                Some(dir.join(shoal_row::traces::LATENCY)),
                Some(dir.join(shoal_row::traces::RECEIVER_SERIES)),
            )
        }
        None => (a.stats_interval, a.stats_out, a.latency_out, None),
    };
    let start = a.start.resolve(a.mode, &pin, &a.to, a.trace_dir.as_ref())?;
    let config = shoal_sender::SendConfig {
        to: a.to.clone(),
        src: a.src,
        mode: a.mode,
        plain: a.plain,
        pin,
        token,
        reader: ReaderConfig {
            budget: a.read_ahead.map_or_else(
                || shoal_sender::default_read_ahead(a.mode),
                |n| usize::try_from(n).unwrap_or(usize::MAX),
            ),
            ..Default::default()
        },
        flow: FlowConfig {
            max_udp_payload: a.max_udp_payload,
            ..a.flow.config()
        },
        connect_timeout: a.connect_timeout,
        timeout: a.timeout,
        run_id: a.run_id,
        latency_out,
        cc: a.cc,
        connections: a.connections,
        block_size: a.block_size,
        stats_interval,
        stats_out,
        receiver_series_out,
        progress: progress_every(a.interval).map(|every| shoal_sender::ProgressConfig {
            every,
            json: a.json,
        }),
        stop_on_ctrl_c: true,
        start,
        provenance: provenance(),
        hooks: shoal_sender::TestHooks {
            corrupt_file: a.test_corrupt_file,
            reverse_blocks: a.test_reverse_blocks,
        },
    };
    let shoal_sender::RunOutcome { row, interrupted } = shoal_sender::run(&config).await;
    a.start.save(&row, &pin, &a.to);
    if a.json {
        println!("{}", serde_json::to_string(&row)?);
    } else {
        println!("{}", row.summary_line());
    }
    if let Some(csv) = &a.csv {
        row.append_csv(csv)?;
    }
    Ok(if row.is_ok() {
        ExitCode::SUCCESS
    } else if interrupted {
        // 128 + SIGINT, as a shell reports a process Ctrl-C ended.
        ExitCode::from(130)
    } else {
        ExitCode::FAILURE
    })
}

/// `send --interval`: given (0 is off), else 1 s when stderr is a terminal.
fn progress_every(interval: Option<Duration>) -> Option<Duration> {
    use std::io::IsTerminal;
    match interval {
        Some(d) if d.is_zero() => None,
        Some(d) => Some(d),
        None => std::io::stderr()
            .is_terminal()
            .then_some(Duration::from_secs(1)),
    }
}

fn verify_trees(a: VerifyArgs) -> Result<ExitCode> {
    let (src, dst) = std::thread::scope(|s| {
        let src = s.spawn(|| Manifest::build(&a.src, a.threads));
        let dst = Manifest::build(&a.dst, a.threads);
        (src.join().expect("hash thread"), dst)
    });
    let (src, dst) = (src?, dst?);
    let diff = verify::compare(&src, &dst);
    if a.json {
        let out = serde_json::json!({
            "identical": diff.is_identical(),
            "files": src.files(),
            "bytes": src.bytes(),
            "missing": diff.missing,
            "extra": diff.extra,
            "differing": diff.differing,
        });
        println!("{out}");
    } else if diff.is_identical() {
        println!(
            "identical: {} files, {} folders, {}",
            src.files(),
            src.entries.len() - src.files(),
            human_bytes(src.bytes())
        );
    } else {
        for p in &diff.missing {
            println!("missing: {p}");
        }
        for p in &diff.extra {
            println!("extra: {p}");
        }
        for p in &diff.differing {
            println!("differs: {p}");
        }
        println!("DIFFERENT: {}", diff.summary());
    }
    Ok(if diff.is_identical() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
