//! One run: its connections (each over the mode's transport), their outcomes merged into the
//! result row.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bytes::BytesMut;
use shoal_pipeline::queue::WorkQueue;
use shoal_pipeline::reader::{Reader, ReaderConfig};
use shoal_pipeline::tree::WalkSummary;
use shoal_proto::codec::{self, Completion, Hello};
use shoal_row::hostfacts::{cpu_steal_seconds, UdpDrops};
use shoal_row::latency::LatencyHistogram;
use shoal_row::metrics;
use shoal_row::row::RunRow;
use shoal_transport::config::{Cc, Mode};
use shoal_transport::start_window::StartWindowLog;
use shoal_transport::stats::{check_tcp_cc, quic_stats, tcp_cc, tcp_stats, ConnStats};
use shoal_transport::transport::YAMUX_WRITE_BUFFER;
use shoal_transport::udp_offload::udp_payload_bytes;
use shoal_transport::window_share::{SharedWindow, Side};
use tokio::io::AsyncWriteExt;

use crate::config::SendConfig;
use crate::finish::Sent;
use crate::progress::{ready_known, Counters, Progress, Totals};
use crate::row_figures::{
    put_connection_use, put_cpu_and_udp, put_transport_stats, receive_windows_apply, QuicUdp,
};
use crate::stats_handle::StatsHandle;
use crate::waits::Waits;
use crate::{bundle, clock, net, peak, replies, sampler, sniff, start_window, streams};

/// What a successful run measured.
struct Measured {
    completion: Completion,
    seconds: f64,
    fsync: Option<Duration>,
    connections: u64,
    /// Content bytes each connection carried, in connection order.
    connection_bytes: Vec<u64>,
    sndbuf: u64,
    /// QUIC: the first connection's UDP offload and payload size.
    udp: Option<QuicUdp>,
    peak_streams: u64,
    /// Summed over connections.
    waits: Waits,
    cc: String,
    /// Over all connections (see `ConnStats::aggregate`).
    stats: ConnStats,
    /// Each QUIC connection's Careful Resume log, in connection order.
    resume: Vec<StartWindowLog>,
    /// The run's clock (its start, on the monotonic and on the wall clock).
    clock: clock::RunClock,
    /// The peak delivery rate over the run's connections, bytes/s (`peak`).
    peak_delivery: Option<u64>,
    /// Output files (`--stats-out`, the receiver series) that could not be written.
    lost_outputs: Vec<String>,
}

/// What one connection measured.
struct ConnOutcome {
    sent: Sent,
    sndbuf: u64,
    udp: Option<QuicUdp>,
    cc: String,
    stats: ConnStats,
    resume: Option<StartWindowLog>,
}

/// Runs one transfer and returns its row (status `ok` only if the receiver reported every
/// file ready).
pub async fn send(config: &SendConfig) -> RunRow {
    run(config).await.row
}

/// [`send`], also telling whether Ctrl-C stopped the run.
pub async fn run(config: &SendConfig) -> RunOutcome {
    let cpu_start = metrics::cpu_seconds();
    let udp_start = UdpDrops::read();
    let steal_start = cpu_steal_seconds();
    let mut row = RunRow {
        timestamp: metrics::utc_timestamp(),
        mode: config.mode.to_string(),
        tls: !config.plain || config.mode.is_quic(),
        load_1m_start: metrics::load_avg_1m(),
        read_ahead_bytes: config.reader.budget as u64,
        max_streams: u64::from(config.flow.max_streams),
        cc_requested: config.cc.map(|c| c.to_string()).unwrap_or_default(),
        connections_requested: u64::from(config.connections),
        // Per QUIC connection: the window is shared by the run's connections.
        send_window: config.mode.is_quic().then(|| {
            shoal_transport::transport::quic_window_per_connection(
                config.flow.send_window,
                config.connections,
            )
        }),
        receiver: config.to.clone(),
        kernel: metrics::kernel_release(),
        host: metrics::host_name(),
        shoal_commit: config.provenance.commit.clone(),
        shoal_dirty: config.provenance.dirty,
        shoal_sha256: config.provenance.binary_sha256.clone(),
        ..Default::default()
    };
    let mut interrupted = false;
    let run_id: [u8; 16] = config.run_id.unwrap_or_else(rand::random);
    row.run_id = hex::encode(run_id);
    row.block_size = config.block_size_in_effect().unwrap_or(0);
    // The walk's start: what a run that fails before its clock starts is timed from.
    let started = clock::RunClock::start();
    // The walk feeds the connections' readers as it goes (pipeline::queue): the first files
    // are sent while the rest of the tree is walked.
    // tcp-wait waits for each file's acknowledgement: its files are never split.
    let block_size = config.block_size_in_effect().unwrap_or(u64::MAX);
    // What a run that ends early still knows: the connections set up and, in modes with
    // per-file replies, what the receiver confirmed (docs/csv-schema.md: unknown is empty).
    let mut so_far: Option<(u64, Option<(u64, u64)>)> = None;
    let result = match WorkQueue::walk(&config.src, block_size, config.hooks.reverse_blocks) {
        Ok(queue) => {
            let probes = Arc::new(Mutex::new(Vec::new()));
            let totals = Totals::new(config.mode, queue.clone());
            let mut progress = Progress::start(
                config.progress,
                totals,
                probes.clone(),
                started.started_at(),
            );
            let work = transfer(
                config,
                run_id,
                queue.clone(),
                probes.clone(),
                progress.counters.clone(),
            );
            let result = bounded(config, work).await;
            if let Err(e) = &result {
                close_quic(&probes, e).await;
            }
            // A run that ended early (a failure, the timeout) needs no more of the tree.
            queue.stop();
            progress.stop().await;
            let set_up = probes.lock().expect("probes").len() as u64;
            let ready = ready_known(config.mode).then(|| progress.counters.ready.get());
            so_far = Some((set_up, ready));
            if matches!(&result, Err(e) if e.is::<Interrupted>()) {
                progress.print_interrupted(config.progress.is_some_and(|p| p.json));
            }
            // What the walk found (all of the tree once it is over; so far, on a failure).
            let found = queue.found();
            row.files = found.files;
            row.bytes = found.bytes;
            row.files_in_blocks = found.files_in_blocks;
            if let Some(summary) = queue.summary() {
                row.skipped_symlinks = summary.skipped_symlinks;
                row.skipped_special = summary.skipped_special;
            }
            result
        }
        Err(e) => Err(e),
    };
    row.sender_cpu_seconds = metrics::cpu_seconds() - cpu_start;
    row.threads = Some(metrics::runtime_threads());
    if let (Some(a), Some(b)) = (udp_start, UdpDrops::read()) {
        let d = b.since(a);
        row.sender_udp_rcvbuf_errors = Some(d.rcvbuf_errors);
        row.sender_udp_in_errors = Some(d.in_errors);
    }
    if let (Some(a), Some(b)) = (steal_start, cpu_steal_seconds()) {
        // /proc/stat counts in 10 ms ticks.
        row.cpu_steal_seconds = Some(((b - a).max(0.0) * 100.0).round() / 100.0);
    }
    row.sender_peak_rss_bytes = metrics::peak_rss_bytes();
    let mut lost_outputs = Vec::new();
    match result {
        Ok(m) => {
            lost_outputs.extend(m.lost_outputs.iter().cloned());
            let c = &m.completion;
            row.seconds = m.seconds;
            row.clock_start_unix_us = Some(m.clock.started_unix_us());
            row.files_ready = Some(c.files);
            row.bytes_ready = Some(c.bytes);
            row.receiver_seconds = Some(c.receiver_micros as f64 / 1e6);
            row.fsync_seconds = Some(m.fsync.map_or(0.0, |d| d.as_secs_f64()));
            row.receiver_peak_rss_bytes = Some(c.peak_rss);
            row.mb_per_s = row.bytes as f64 / 1e6 / m.seconds;
            row.files_per_s = row.files as f64 / m.seconds;
            row.connections = Some(m.connections);
            put_connection_use(&mut row, config, &m.connection_bytes);
            row.receiver_connections = Some(c.connections);
            row.sndbuf_bytes = Some(m.sndbuf);
            row.receiver_rcvbuf_bytes = Some(c.rcvbuf);
            if receive_windows_apply(config.mode) {
                row.stream_window = Some(c.stream_window);
                row.conn_window = Some(c.conn_window);
            }
            if matches!(config.mode, Mode::QuicBundle | Mode::QuicStreams) {
                row.receiver_conn_window_min = c.conn_window_min;
            }
            row.peak_streams = Some(m.peak_streams);
            row.receiver_peak_streams = Some(c.peak_streams);
            row.read_wait_ms = Some(m.waits.read.as_secs_f64() * 1e3);
            row.stream_wait_ms = Some(m.waits.stream.as_secs_f64() * 1e3);
            // quinn's controllers are reported as `quinn-NAME`: the name and who implements it.
            (row.cc, row.cc_impl) = match m.cc.strip_prefix("quinn-") {
                Some(name) => (name.to_string(), "quinn".into()),
                None => (m.cc.clone(), "linux".into()),
            };
            put_transport_stats(&mut row, config.mode, &m.stats);
            row.peak_delivery_bytes_per_s = m.peak_delivery;
            start_window::put_row(&mut row, &config.start, config.mode, &m.resume);
            if let Some(path) = &config.start.phases_out {
                let logs = &m.resume;
                if let Err(e) =
                    start_window::write_phases(path, &row.run_id, m.clock.started_at(), logs)
                {
                    row.error = format!("{e:#}");
                    lost_outputs.push(row.error.clone());
                }
            }
            put_cpu_and_udp(&mut row, c, m.udp);
            row.status = "ok".into();
            match LatencyHistogram::from_bytes(&c.latency) {
                Ok(h) => {
                    let s = h.summary();
                    row.latency_p50_ms = Some(s.p50_ms);
                    row.latency_p90_ms = Some(s.p90_ms);
                    row.latency_p99_ms = Some(s.p99_ms);
                    row.latency_max_ms = Some(s.max_ms);
                    if let Some(path) = &config.latency_out {
                        if let Err(e) = h.write_distribution(path, &row.run_id) {
                            row.error = format!("{e:#}");
                            lost_outputs.push(row.error.clone());
                        }
                    }
                }
                Err(e) => row.error = format!("{e:#}"),
            }
        }
        Err(e) => {
            interrupted = e.is::<Interrupted>();
            row.seconds = started.started_at().elapsed().as_secs_f64();
            row.clock_start_unix_us = Some(started.started_unix_us());
            row.status = "failed".into();
            row.error = format!("{e:#}");
            if let Some((set_up, ready)) = so_far {
                row.connections = Some(set_up);
                if let Some((files, bytes)) = ready {
                    (row.files_ready, row.bytes_ready) = (Some(files), Some(bytes));
                }
            }
            // What the receiver kept, as its error reply says (issue 16, item 9).
            if let Some((files, bytes)) = replies::kept_by_receiver(&row.error) {
                (row.files_ready, row.bytes_ready) = (Some(files), Some(bytes));
            }
        }
    }
    RunOutcome {
        row,
        interrupted,
        lost_outputs,
    }
}

/// The error of a run stopped by Ctrl-C (`SendConfig::stop_on_ctrl_c`); the row's error reads
/// "interrupted".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// One run's row, whether Ctrl-C stopped it, and the output files it could not write
/// (`--latency-out`, `--stats-out`…), each named with its cause: the caller reports them.
#[derive(Debug)]
pub struct RunOutcome {
    pub row: RunRow,
    pub interrupted: bool,
    pub lost_outputs: Vec<String>,
}

/// Runs `work` until it ends, `--timeout` passes or (with `stop_on_ctrl_c`) Ctrl-C comes:
/// the last two fail the run like any other error, so its row is written the same way.
async fn bounded(
    config: &SendConfig,
    work: impl Future<Output = Result<Measured>>,
) -> Result<Measured> {
    let limit = async {
        match config.timeout {
            Some(limit) => {
                tokio::time::sleep(limit).await;
                anyhow!("timed out after {} s", limit.as_secs_f64())
            }
            None => std::future::pending().await,
        }
    };
    // Registered now, before the first poll: a lazily registered watch let a Ctrl-C that
    // came while the first connection was being set up end the process unreported.
    let mut sigint = match config.stop_on_ctrl_c {
        true => tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok(),
        false => None,
    };
    let interrupt = async {
        if let Some(s) = sigint.as_mut() {
            if s.recv().await.is_some() {
                return anyhow::Error::new(Interrupted);
            }
        }
        std::future::pending().await
    };
    tokio::select! {
        r = work => r,
        e = limit => Err(e),
        e = interrupt => Err(e),
    }
}

/// A run stopped from outside its connections (Ctrl-C, `--timeout`) closes each QUIC
/// connection still open with the reason, so the receiver logs it at once instead of waiting
/// out its idle timeout (a dropped connection sends no close before the process exits).
async fn close_quic(probes: &Mutex<Vec<(u16, StatsHandle)>>, why: &anyhow::Error) {
    let conns: Vec<quinn::Connection> = probes
        .lock()
        .expect("probes")
        .iter()
        .filter_map(|(_, p)| match p {
            StatsHandle::Quic(conn, _) => Some(conn.clone()),
            StatsHandle::Tcp(_) => None,
        })
        .collect();
    let reason = format!("sender stopped: {why:#}");
    for conn in conns {
        net::close_and_send(&conn, 2, reason.as_bytes(), Duration::from_secs(1)).await;
    }
}

/// Connects (N connections), streams the tree and waits for the completion report. The time
/// is `clock::RunClock`'s: first connect to the last completion report decoded.
async fn transfer(
    config: &SendConfig,
    run_id: [u8; 16],
    queue: Arc<WorkQueue>,
    probes: Arc<Mutex<Vec<(u16, StatsHandle)>>>,
    counters: Arc<Counters>,
) -> Result<Measured> {
    if config.plain && config.mode.is_quic() {
        bail!("--plain applies to TCP modes only (QUIC always encrypts)");
    }
    if let (Some(cc), false) = (config.cc, config.mode.is_quic()) {
        check_tcp_cc(cc)?;
    }
    let n = config.connections.clamp(1, 64);
    // Each connection reads ahead for itself; together they stay within the budget, but
    // each keeps room for a few chunks.
    let reader = ReaderConfig {
        budget: (config.reader.budget / n as usize).max(4 * config.reader.chunk_size),
        ..config.reader
    };
    let clock = clock::RunClock::start();
    let sampler = match config.stats_interval {
        Some(every) if config.stats_out.is_some() || config.receiver_series_out.is_some() => {
            Some(sampler::spawn(sampler::Sources {
                run_id: hex::encode(run_id),
                every,
                t0: clock.started_at(),
                probes: probes.clone(),
                ready: counters.ready.clone(),
                connections: n,
                sender_out: config.stats_out.as_deref(),
                receiver_out: config.receiver_series_out.as_deref(),
            })?)
        }
        _ => None,
    };
    // Always on: the path state saves the peak (path_state::PathRecord::saved).
    let peak = peak::spawn(probes.clone(), clock.started_at());
    // --max-streams is for the run, like the read-ahead: N connections share it (each file
    // outstanding is memory at this end and an open file at the receiver's; 8 connections ×
    // 4,096 each held ~210 MB here and ran the study's receiver out of descriptors).
    let streams_per_connection = config.flow.max_streams.div_ceil(u32::from(n)).max(1);
    // The QUIC send window is for the path too: the run's connections share it, and one that
    // has sent its share of the tree hands its part on (common/src/window_share.rs).
    let send_window = SharedWindow::new(config.flow.send_window, n, Side::Send);
    let connections = (0..n).map(|i| {
        let hello = Hello {
            run_id,
            token: config.token.clone(),
            mode: config.mode,
            // The receiver enforces its limits on what arrives and learns the run's totals from
            // the end markers: the hello does not announce them (protocol 4), so the walk need
            // not be over before the first connection opens.
            file_count: codec::TOTALS_UNKNOWN,
            total_bytes: codec::TOTALS_UNKNOWN,
            conn_index: i,
            conn_count: n,
            max_streams: streams_per_connection,
            cc: config.cc,
        };
        one_connection(
            config,
            hello,
            queue.clone(),
            reader,
            probes.clone(),
            &send_window,
            counters.clone(),
        )
    });
    // The first connection to fail ends the run (the others are dropped, so the receiver
    // sees them go and fails the run too).
    let outcomes = futures::future::try_join_all(connections).await;
    let lost_outputs = match sampler {
        Some(s) => s.stop().await,
        None => Vec::new(),
    };
    let peak_delivery = peak.stop().await;
    let outcomes = outcomes?;
    let first = &outcomes[0];
    // Every connection's reader took the queue to its end, so the walk is over.
    let WalkSummary {
        files, total_bytes, ..
    } = queue
        .summary()
        .context("the connections ended before the walk of the source tree")?;
    // The receiver checked what arrived against what the records claimed; this checks that
    // against what the walk found (the hello announced no totals).
    let c = &first.sent.completion;
    if (c.files, c.bytes) != (files, total_bytes) {
        bail!(
            "the receiver reports {} files and {} bytes ready, but the walk found {files} files and {total_bytes} bytes",
            c.files,
            c.bytes
        );
    }
    let stats: Vec<ConnStats> = outcomes.iter().map(|o| o.stats).collect();
    Ok(Measured {
        completion: first.sent.completion.clone(),
        seconds: clock.seconds(outcomes.iter().map(|o| o.sent.completed_at)),
        fsync: first.sent.fsync,
        connections: outcomes.len() as u64,
        connection_bytes: outcomes.iter().map(|o| o.sent.bytes).collect(),
        sndbuf: outcomes.iter().map(|o| o.sndbuf).max().unwrap_or(0),
        udp: first.udp,
        peak_streams: outcomes
            .iter()
            .map(|o| o.sent.peak_streams)
            .max()
            .unwrap_or(0),
        waits: Waits::total(outcomes.iter().map(|o| o.sent.waits)),
        cc: first.cc.clone(),
        stats: ConnStats::aggregate(&stats),
        resume: outcomes.iter().filter_map(|o| o.resume.clone()).collect(),
        clock,
        peak_delivery,
        lost_outputs,
    })
}

/// One connection's share of the run: its own reader over the shared queue, its own
/// TLS/QUIC session, the same completion report at the end.
async fn one_connection(
    config: &SendConfig,
    hello: Hello,
    queue: Arc<WorkQueue>,
    reader: ReaderConfig,
    probes: Arc<Mutex<Vec<(u16, StatsHandle)>>>,
    send_window: &Arc<SharedWindow>,
    counters: Arc<Counters>,
) -> Result<ConnOutcome> {
    let mut reader = Reader::spawn(queue, reader)?;
    let (to, pin, flow, hooks) = (&config.to, config.pin, &config.flow, config.hooks);
    let timeout = config.connect_timeout;
    let index = hello.conn_index;
    let register = |probe: StatsHandle| probes.lock().expect("probes").push((index, probe));
    match config.mode {
        Mode::TcpBundle | Mode::TcpWait | Mode::TcpStreams => {
            let (mut io, probe) =
                net::connect_tcp(to, pin, config.plain, config.cc, flow, timeout).await?;
            let socket = probe.shared();
            register(StatsHandle::Tcp(socket.clone()));
            let sent = if config.mode == Mode::TcpStreams {
                // The hello goes on the raw stream so the receiver can pick the mode; yamux
                // follows.
                let mut head = BytesMut::new();
                codec::encode_hello(&hello, &mut head);
                io.write_all(&head)
                    .await
                    .context("sending the hello failed")?;
                let (io, seen) = sniff::Sniff::new(io);
                // yamux reads a 12-byte header at a time; the buffer above the sniffer makes
                // it see whole reads, so a refusal is kept entire.
                let io = tokio::io::BufReader::new(io);
                // yamux (patched, vendor/yamux) flushes once per batch of frames: buffered,
                // the frames of many files leave in one TLS write instead of one each.
                let io = tokio::io::BufWriter::with_capacity(YAMUX_WRITE_BUFFER, io);
                let outcome =
                    streams::with_yamux_client(Box::new(io), hello.max_streams, |opener| async {
                        let control = opener.open_control().await?;
                        let (rd, wr) = tokio::io::split(control);
                        streams::run(rd, wr, opener, &hello, reader, hooks, counters.clone()).await
                    })
                    .await;
                // Refused before the receiver knew the mode: its reason came as a plain reply.
                match (outcome, sniff::refusal_in(&seen)) {
                    (Err(_), Some(msg)) => bail!("receiver refused the run: {msg}"),
                    (o, _) => o?,
                }
            } else {
                let (rd, wr) = tokio::io::split(io);
                let wait = config.mode == Mode::TcpWait;
                bundle::run(rd, wr, &hello, reader, wait, hooks, counters.clone()).await?
            };
            counters
                .ready
                .complete(sent.completion.files, sent.completion.bytes);
            Ok(ConnOutcome {
                sent,
                sndbuf: probe.sndbuf(),
                udp: None,
                cc: tcp_cc(&*socket),
                stats: tcp_stats(&*socket).unwrap_or_default(),
                resume: None,
            })
        }
        Mode::QuicBundle | Mode::QuicStreams => {
            // The send window is for the path: the run's connections share it.
            let mut flow = *flow;
            flow.send_window = send_window.share();
            let (controller, resume_log) =
                start_window::quic_controller(&config.start, config.cc, flow.send_window);
            let quic =
                net::connect_quic_with(to, pin, config.cc, controller, &flow, timeout).await?;
            register(StatsHandle::Quic(quic.conn.clone(), quic.acked.clone()));
            // Once this connection has sent its share of the tree, the others take its window
            // (a reader dropped unfinished drops the seat, which hands the share on too).
            let mut seat = send_window.seat(quic.conn.clone());
            reader.on_finish(move || seat.finished());
            let (send, recv) = quic
                .conn
                .open_bi()
                .await
                .context("cannot open the QUIC control stream")?;
            let result = if config.mode == Mode::QuicBundle {
                bundle::run(recv, send, &hello, reader, false, hooks, counters.clone()).await
            } else {
                let opener = streams::Opener::Quic(quic.conn.clone());
                streams::run(recv, send, opener, &hello, reader, hooks, counters.clone()).await
            };
            if let Ok(sent) = &result {
                counters
                    .ready
                    .complete(sent.completion.files, sent.completion.bytes);
            }
            let stats = quic_stats(&quic.conn, Some(&quic.acked));
            let udp = QuicUdp {
                offload: quic.udp_offload,
                payload_bytes: udp_payload_bytes(&quic.conn),
            };
            // The receiver logs the reason: a failed run must not look like a finished one.
            // The close is sent before this returns (the clock stopped at the completion
            // report), failed runs too: one that fails at once (an unreadable source file)
            // would otherwise exit before the close is sent and leave the receiver waiting.
            let (code, reason) = match &result {
                Ok(_) => (0, &b"done"[..]),
                Err(_) => (1, &b"sender failed"[..]),
            };
            net::close_and_send(&quic.conn, code, reason, Duration::from_secs(1)).await;
            Ok(ConnOutcome {
                sent: result?,
                sndbuf: quic.udp_sndbuf,
                udp: Some(udp),
                cc: Cc::quinn_name(config.cc).to_string(),
                stats,
                resume: Some(resume_log),
            })
        }
    }
}
