//! `shoal send`: one transfer, one row.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use shoal_pipeline::reader::ReaderConfig;
use shoal_transport::config::{Cc, FlowConfig, Mode};
use shoal_transport::identity::{self, Identity, Pin};

use crate::args::{FlowArgs, RuntimeArgs};
use crate::{defaults, mode_parser, parse_cc, provenance, start_window};

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("series_out").args(["stats_out", "trace_dir"])))]
#[command(after_help = crate::args::ranges_help(&SEND_RANGES))]
pub(crate) struct SendArgs {
    /// Receiver address, host:port.
    #[arg(long, value_parser = check_to)]
    pub(crate) to: String,
    /// Source folder to send (symbolic links in it are skipped and counted).
    #[arg(long)]
    pub(crate) src: PathBuf,
    /// Transport mode. tcp-bundle: one TLS/TCP stream of records; tcp-streams: yamux stream per
    /// file; quic-bundle: one QUIC stream of records; quic-streams: QUIC stream per file;
    /// tcp-wait: control arm that waits for each file's acknowledgement (one RTT per file).
    #[arg(long, default_value = defaults::SEND.mode.name(), value_parser = mode_parser())]
    pub(crate) mode: Mode,
    /// TCP modes without TLS, to isolate the cost of encryption (the receiver must run with
    /// --allow-plain; the token still applies).
    #[arg(long)]
    pub(crate) plain: bool,
    /// Read the pin and token from this identity folder (a receiver on the same host)
    /// [default: the default identity folder, unless --pin is given].
    #[arg(long, conflicts_with_all = ["pin", "token_file"])]
    pub(crate) identity: Option<PathBuf>,
    /// The receiver's certificate pin, sha256:<hex> (printed by `shoal recv`).
    #[arg(long, requires = "token_file")]
    pub(crate) pin: Option<Pin>,
    /// File holding the receiver's token.
    #[arg(long, requires = "pin")]
    pub(crate) token_file: Option<PathBuf>,
    /// Append one result row to this CSV file (header written when the file is new).
    #[arg(long)]
    pub(crate) csv: Option<PathBuf>,
    /// Print the result as one JSON object instead of the summary line; the --interval
    /// lines on stderr become JSON lines too.
    #[arg(long)]
    pub(crate) json: bool,
    /// Print a progress line on stderr this often (e.g. 500ms, 10s; 0 turns it off)
    /// [default: 1s when stderr is a terminal, else off]. Text: seconds since the start, files
    /// ready (confirmed by the receiver: tcp-wait, tcp-streams, quic-streams) or sent (bundled
    /// modes) of the total, bytes handed to the transport (records: contents plus a few bytes
    /// of framing per file) of the total, MB/s and Mbit/s delivered (acknowledged by the
    /// receiver) over the interval, ETA at the average rate so far, and cwnd (summed), RTT
    /// (averaged) and retransmits (summed: over the interval, and since the start) over the
    /// connections. With --json, one object per line: event "interval",
    /// t_s, files_sent, files_ready (null in bundled modes), files_total, bytes_sent,
    /// bytes_total, walk_done (false while the walk is still finding files: the totals are
    /// what it found so far, shown with a "+" in text), bytes_acked, mb_per_s, mbit_per_s, eta_s (null before the first byte and while walking), connections,
    /// cwnd_bytes, rtt_ms, retransmits, retransmits_total. Ctrl-C ends the run as failed with the error
    /// "interrupted" (row printed and appended to --csv, exit status 130), after the figures
    /// so far on stderr (with --json: one object, event "interrupted").
    #[arg(long, value_parser = |v: &str| crate::args::span_in("interval", v))]
    pub(crate) interval: Option<Duration>,
    /// Bytes the reader may read ahead of the socket (held in memory until written), split
    /// over the connections (at least 256 KiB each). Only hides file open/read latency: data in
    /// flight is in the socket buffers (TCP) or quinn's send window (QUIC) [default: 8MiB for
    /// TCP modes, 2MiB for QUIC modes: quinn already holds up to --send-window of data ready
    /// to send, and 8 MiB cost ~5 MB more sender RSS (docs/benchmarks.md, Memory)]
    #[arg(long, value_parser = |v: &str| crate::args::count_in("read-ahead", v))]
    pub(crate) read_ahead: Option<u64>,
    #[command(flatten)]
    pub(crate) flow: FlowArgs,
    #[command(flatten)]
    pub(crate) runtime: RuntimeArgs,
    /// Write the full per-file latency distribution (CSV: run_id, value_ms, percentile,
    /// count_at_or_below).
    #[arg(long, conflicts_with = "trace_dir")]
    pub(crate) latency_out: Option<PathBuf>,
    /// Congestion controller: cubic, bbr or reno [default: the system default for TCP
    /// (net.ipv4.tcp_congestion_control), CUBIC for QUIC]. TCP sets TCP_CONGESTION on every
    /// socket (the receiver does the same) and reports the name the kernel reads back; QUIC
    /// uses quinn's CubicConfig, BbrConfig (experimental in quinn) or NewRenoConfig.
    #[arg(long, value_parser = parse_cc)]
    pub(crate) cc: Option<Cc>,
    /// QUIC: the largest UDP payload MTU discovery may reach, bytes (1200 keeps 1,200)
    /// [default: the kernel's route MTU to the receiver less IP and UDP headers, at most 6,500;
    /// quinn's 1,452 on routes of Ethernet's MTU or less]. The row's udp_payload_bytes is the
    /// size in effect. E.g. 1452 on loopback to compare with QUIC as the Internet carries it.
    #[arg(long, value_parser = |v: &str| crate::args::count_in("max-udp-payload", v).map(|n| n as u16))]
    pub(crate) max_udp_payload: Option<u16>,
    /// Independent connections (each with its own TLS or QUIC session) sharing the files
    /// through one work queue; --max-streams, --read-ahead and the QUIC send window are for
    /// the run and split over them.
    #[arg(long, default_value_t = defaults::SEND.connections, value_parser = |v: &str| crate::args::count_in("connections", v).map(|n| n as u16))]
    pub(crate) connections: u16,
    /// Files larger than this are carried as blocks of this size, spread over the
    /// connections (every mode but tcp-wait), so one large file uses all of them [default:
    /// 16MiB in the bundled modes; in tcp-streams and quic-streams, where each block is a
    /// stream that waits a round trip for its window, none on one connection and 32MiB on
    /// several]
    #[arg(long, value_parser = |v: &str| crate::args::floored("block-size", v))]
    pub(crate) block_size: Option<u64>,
    /// Test hook: send each large file's blocks last first (they arrive out of order).
    #[arg(long, hide = true)]
    pub(crate) test_reverse_blocks: bool,
    /// Sample RTT, cwnd, retransmits, goodput… of every connection this often (e.g. 100ms)
    /// into --stats-out, or into --trace-dir's series [default with --trace-dir: 100ms].
    #[arg(long, value_parser = |v: &str| crate::args::span_in("stats-interval", v), requires = "series_out")]
    pub(crate) stats_interval: Option<Duration>,
    /// The sender's time-series CSV for --stats-interval: per sample and connection, the
    /// cumulative counters and the interval's goodput and retransmits (docs/csv-schema.md).
    #[arg(long, requires = "stats_interval", conflicts_with = "trace_dir")]
    pub(crate) stats_out: Option<PathBuf>,
    /// Keep the run's traces in this folder (created if missing): sender-series.csv (as
    /// --stats-out), latency.csv (as --latency-out) and receiver-series.csv (files and bytes
    /// the receiver reported ready, sampled on the same tick; times are when the sender
    /// learnt of them). Every row carries the run id. `shoal sweep` keeps one per run.
    #[arg(long, value_name = "DIR")]
    pub(crate) trace_dir: Option<PathBuf>,
    /// Test hook: corrupt the record of file N (walk order) to exercise the receiver's checks.
    #[arg(long, hide = true)]
    pub(crate) test_corrupt_file: Option<usize>,
    /// Give up connecting after this long.
    #[arg(long, default_value = defaults::span(defaults::SEND.connect_timeout), value_parser = |v: &str| crate::args::span_in("connect-timeout", v))]
    pub(crate) connect_timeout: Duration,
    /// Fail the run if it takes longer than this (e.g. 15m) [default: no limit].
    #[arg(long, value_parser = |v: &str| crate::args::span_in("timeout", v))]
    pub(crate) timeout: Option<Duration>,
    /// This run's id, 32 hex digits [default: random]. A sweep passes the id it prepared a
    /// fresh folder for on a receiver started with --control (docs/two-hosts.md).
    #[arg(long, value_parser = parse_run_id)]
    pub(crate) run_id: Option<[u8; 16]>,
    #[command(flatten)]
    pub(crate) start: start_window::StartArgs,
}

/// The flags whose ranges `send --help` lists.
const SEND_RANGES: [&str; 16] = [
    "connections",
    "threads",
    "max-streams",
    "max-udp-payload",
    "timeout",
    "connect-timeout",
    "interval",
    "stats-interval",
    "path-state-lifetime",
    "read-ahead",
    "block-size",
    "stream-window",
    "conn-window",
    "send-window",
    "sndbuf",
    "rcvbuf",
];

fn check_to(s: &str) -> Result<String, String> {
    shoal_sender::net::check_address(s).map(|()| s.to_string())
}

fn parse_run_id(s: &str) -> Result<[u8; 16], String> {
    shoal_proto::control::parse_run_id(s).ok_or_else(|| "expected 32 lowercase hex digits".into())
}

pub(crate) async fn send(a: SendArgs) -> Result<ExitCode> {
    // Invocation errors end here, before a run starts (exit 2, no row).
    shoal_sender::net::resolve(&a.to)
        .await
        .with_context(|| format!("--to {}", a.to))?;
    match std::fs::metadata(&a.src) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!("--src {} is not a folder", a.src.display()),
        Err(e) => bail!("--src {}: {e}", a.src.display()),
    }
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
        src: a.src.clone(),
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
    let shoal_sender::RunOutcome {
        row,
        interrupted,
        lost_outputs,
    } = shoal_sender::run(&config).await;
    a.start.save(&row, &pin, &a.to);
    if a.json {
        println!("{}", serde_json::to_string(&row)?);
    } else {
        println!("{}", row.summary_line());
        if let Some(line) = row.resume_line() {
            println!("{line}");
        }
        println!("{}", row.next_step_line(&a.src.display().to_string()));
    }
    if let Some(csv) = &a.csv {
        row.append_csv(csv)?;
    }
    // An output file that could not be written fails the command as --csv's does (exit 2).
    if !lost_outputs.is_empty() {
        anyhow::bail!("{}", lost_outputs.join("; "));
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
