//! `shoal recv`: serve transfers into a destination.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use shoal_transport::identity::Identity;

use crate::args::{FlowArgs, IdentityArgs, RuntimeArgs};
use crate::defaults;

#[derive(Debug, Args)]
#[command(after_help = crate::args::ranges_help(&[
    "threads",
    "writers",
    "max-streams",
    "max-connections",
    "max-path-len",
    "max-depth",
    "idle-timeout",
    "hello-timeout",
    "max-files",
    "max-bytes",
    "max-folders",
    "write-budget",
    "stream-window",
    "conn-window",
    "sndbuf",
    "rcvbuf",
]))]
pub(crate) struct RecvArgs {
    /// Address to listen on, e.g. 0.0.0.0:7474 (port 0 picks a free port).
    #[arg(long, default_value = "0.0.0.0:7474")]
    pub(crate) listen: SocketAddr,
    /// Destination folder; every run writes inside it and nowhere else: into DEST/<run id>/,
    /// a new folder per run named by the 32-hex run id the sender sends (`send --run-id`, or
    /// random), printed in the run's line. Verify that folder: `shoal verify SRC DEST/<run id>`.
    #[arg(long)]
    pub(crate) dest: PathBuf,
    /// Write every run into --dest itself instead of DEST/<run id>/ (runs then share one
    /// tree: a later run overwrites an earlier one's files, and a failed run can hide behind
    /// an earlier complete tree).
    #[arg(long)]
    pub(crate) flat: bool,
    /// Print each run's line as one JSON object on stdout: event "run", run_id, peer, mode,
    /// status (ok or failed), files_ready, bytes_ready, receiver_seconds, folder (where the
    /// run wrote), error (empty when ok). The start-up lines come first as one JSON object:
    /// event "listening", address, pin, token_file, destination, flat. On Ctrl-C:
    /// {"event":"stopped"}. Errors and refusals stay on stderr as text.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) identity: IdentityArgs,
    /// Exit after one authenticated run; exit status 0 only if that run succeeded.
    #[arg(long)]
    pub(crate) once: bool,
    /// Sync every written file and folder at the end of each run (timed separately).
    #[arg(long)]
    pub(crate) fsync: bool,
    /// Drop a peer that sends nothing for this long (handshake included).
    #[arg(long, default_value = defaults::span(defaults::RECV.idle_timeout), value_parser = |v: &str| crate::args::span_in("idle-timeout", v))]
    pub(crate) idle_timeout: Duration,
    /// Received bytes a run may hold before they are written (back-pressure to the sender).
    /// Small on purpose: TCP data waits in the kernel's socket buffer and QUIC data in
    /// quinn's receive window, so this only has to keep the writer busy.
    #[arg(long, default_value = defaults::size(defaults::RECV.write_budget as u64), value_parser = |v: &str| crate::args::floored("write-budget", v))]
    pub(crate) write_budget: u64,
    /// Writer threads per run [default: one per core, at most 4]. Files of different folders
    /// are created in parallel; a folder's files always go to the same writer, so a tree of
    /// one folder is written by one thread whatever this says. The row records it
    /// (`receiver_writers`).
    #[arg(long, value_parser = |v: &str| crate::args::count_in("writers", v).map(|n| n as u32))]
    pub(crate) writers: Option<u32>,
    /// QUIC modes: give each connection its whole receive window (--conn-window, or its share
    /// with --connections) from the start. By default a connection starts with what a 10 Gbit/s
    /// path of its handshake's round trip can use (twice that, at least 2 MiB: the whole window
    /// from ~8 ms up) and grows to twice its delivery rate times the round trip, so a short
    /// path does not hold a window's worth of data at each end. The row reports the smallest
    /// window in effect (`receiver_conn_window_min`).
    #[arg(long)]
    pub(crate) fixed_window: bool,
    /// Accept unencrypted TCP transfers (`send --plain`); the token is still required.
    #[arg(long)]
    pub(crate) allow_plain: bool,
    /// Connections (TCP and QUIC) served at once; past it new ones are refused and logged.
    #[arg(long, default_value_t = defaults::RECV.max_connections as u32, value_parser = |v: &str| crate::args::count_in("max-connections", v).map(|n| n as u32))]
    pub(crate) max_connections: u32,
    /// Most files one run may bring: enforced on the run's running count as files arrive (the
    /// file past it is refused before it is created; files kept are within the limit).
    #[arg(long, default_value_t = defaults::RECV.max_files, value_parser = |v: &str| crate::args::count_in("max-files", v))]
    pub(crate) max_files: u64,
    /// Most content bytes one run may bring, enforced like --max-files on each file's size
    /// before it is created: 4096, 4KiB, 1TiB…
    #[arg(long, default_value = defaults::size(defaults::RECV.max_bytes), value_parser = |v: &str| crate::args::count_in("max-bytes", v))]
    pub(crate) max_bytes: u64,
    /// Most folder records (empty folders) one run may bring, enforced like --max-files: the
    /// folder past it is refused before it is created. A file's own parent folders are
    /// bounded by --max-files and --max-depth.
    #[arg(long, default_value_t = defaults::RECV.max_folders, value_parser = |v: &str| crate::args::count_in("max-folders", v))]
    pub(crate) max_folders: u64,
    /// Longest path a peer may send, in bytes (each component stays ≤ 255).
    #[arg(long, default_value_t = defaults::RECV.limits.path.max_len as u16, value_parser = |v: &str| crate::args::count_in("max-path-len", v).map(|n| n as u16))]
    pub(crate) max_path_len: u16,
    /// Most components a path may have.
    #[arg(long, default_value_t = defaults::RECV.limits.path.max_depth as u16, value_parser = |v: &str| crate::args::count_in("max-depth", v).map(|n| n as u16))]
    pub(crate) max_depth: u16,
    /// Deadline from connecting to a complete hello (TLS handshake included): bounds a peer
    /// that trickles bytes.
    #[arg(long, default_value = defaults::span(defaults::RECV.hello_timeout), value_parser = |v: &str| crate::args::span_in("hello-timeout", v))]
    pub(crate) hello_timeout: Duration,
    /// Take control connections from a sweep on another host (same token, TLS only): each run
    /// gets a fresh folder under --dest (DEST/<run id>, with or without --flat), hashed from
    /// disk after the run and removed on request. Folder names are run ids; nothing outside
    /// --dest is touched. A prepared run may carry its own --fsync, --max-streams,
    /// --conn-window, --write-budget and (TCP) --rcvbuf/--sndbuf, which apply to that run's
    /// connections alone; other runs keep these flags' values. docs/two-hosts.md
    #[arg(long)]
    pub(crate) control: bool,
    /// With --control [default: off]: let the sweep run the tar-tcp baseline here. For a run
    /// it prepared, this host then listens on an ephemeral port (on its address towards the
    /// sweep's host) for one connection from that host, and runs `tar -x --no-same-owner
    /// --no-same-permissions -f - -C DEST/<run id>` on what arrives: the peer chooses no
    /// command, argument or path, only the archive's bytes (GNU tar refuses absolute names and
    /// `..`). tar is killed past the run's time limit or when the sweep stops the run.
    /// Without it a sweep with a tar-tcp arm stops before its first run. docs/two-hosts.md
    #[arg(long, requires = "control")]
    pub(crate) allow_baselines: bool,
    #[command(flatten)]
    pub(crate) flow: FlowArgs,
    #[command(flatten)]
    pub(crate) runtime: RuntimeArgs,
}

pub(crate) async fn recv(a: RecvArgs) -> Result<ExitCode> {
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
        max_folders: a.max_folders,
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
