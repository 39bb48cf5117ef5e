//! `shoal link check`: measures the link end to end from inside the two namespaces and
//! compares with its settings.
//!
//! Phases, in order: idle RTT (UDP echo probes), a bulk TCP flow sender → receiver with RTT
//! probes alongside (throughput and RTT under load, measured after a warm-up that gets past
//! slow start), then, when loss is configured, a long run of spaced probes whose one-way loss
//! is counted at the echo server and a paced bulk TCP flow whose retransmissions show the loss
//! per wire segment ([`crate::bulk_loss`]). Sockets are created by threads that enter a namespace
//! ([`netns::run_in`]) and keep belonging to it; probe traffic only goes to 198.18.x.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::bulk_loss;
use crate::ctl::status::LinkInfo;
use crate::forwarder::{monotonic_ns, set_fine_timer_slack, set_realtime};
use crate::ipc::ForwarderStats;
use crate::netns;
use crate::state::Backend;
use crate::verdict::{CheckReport, ForwarderUse, LossResult, RttStats, Throughput, Verdict};

const MAGIC: u32 = 0x5348_4c4b; // "SHLK"
const PROBE_LEN: usize = 32;
/// IPv4 + UDP headers + probe payload: what one probe costs on the link.
const PROBE_WIRE_BYTES: u64 = 20 + 8 + PROBE_LEN as u64;
/// IPv4 + TCP + timestamp option: per-segment overhead of the bulk flow.
const TCP_HDR_BYTES: u64 = 52;

const SESSION_IDLE: u32 = 0;
const SESSION_LOADED: u32 = 1;
const SESSION_LOSS: u32 = 2;

/// Knobs of a check run; `Default` is what the CLI uses.
#[derive(Clone, Debug)]
pub struct CheckOptions {
    /// Total bulk-flow length (default warm-up + 5 s).
    pub duration: Option<Duration>,
    /// Bulk-flow warm-up not counted (default 25 RTTs within 2–5 s).
    pub warmup: Option<Duration>,
    /// Loss probes when loss is configured.
    pub loss_probes: u64,
    /// Longest the bulk TCP loss flow may run when loss is configured (zero: skip it). It
    /// stops earlier once its sample is large enough ([`crate::verdict::bulk_loss_target_segments`]).
    pub bulk_loss_max: Duration,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            duration: None,
            warmup: None,
            loss_probes: 20_000,
            bulk_loss_max: Duration::from_secs(10),
        }
    }
}

fn encode_probe(session: u32, seq: u64) -> [u8; PROBE_LEN] {
    let mut b = [0u8; PROBE_LEN];
    b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    b[4..8].copy_from_slice(&session.to_le_bytes());
    b[8..16].copy_from_slice(&seq.to_le_bytes());
    b[16..24].copy_from_slice(&monotonic_ns().to_le_bytes());
    b
}

/// `(session, seq, sent_ns)` of a probe.
fn decode_probe(b: &[u8]) -> Option<(u32, u64, u64)> {
    if b.len() < 24 || u32::from_le_bytes(b[0..4].try_into().ok()?) != MAGIC {
        return None;
    }
    Some((
        u32::from_le_bytes(b[4..8].try_into().ok()?),
        u64::from_le_bytes(b[8..16].try_into().ok()?),
        u64::from_le_bytes(b[16..24].try_into().ok()?),
    ))
}

/// Echo server on the receiver side; counts probes per session as they arrive.
struct Echo {
    addr: SocketAddr,
    counts: Arc<[AtomicU64; 3]>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Echo {
    fn start(ns: &str, ip: &str) -> Result<Echo> {
        let ip = ip.to_string();
        let sock = netns::run_in(ns, move || {
            UdpSocket::bind((ip.as_str(), 0)).context("binding the echo socket")
        })?;
        sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        let addr = sock.local_addr()?;
        let counts: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (counts.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            set_realtime(5);
            let mut buf = [0u8; 256];
            while !s.load(Ordering::Relaxed) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                if let Some((session, _, _)) = decode_probe(&buf[..n]) {
                    if let Some(k) = c.get(session as usize) {
                        k.fetch_add(1, Ordering::Relaxed);
                    }
                    let _ = sock.send_to(&buf[..n], from);
                }
            }
        });
        Ok(Echo {
            addr,
            counts,
            stop,
            thread: Some(thread),
        })
    }

    fn count(&self, session: u32) -> u64 {
        self.counts[session as usize].load(Ordering::Relaxed)
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sends `count` probes `interval` apart and collects their round-trip times; waits `grace`
/// after the last one for stragglers. Bounded by `count × interval + grace`.
fn probe_run(
    client: &UdpSocket,
    session: u32,
    count: u64,
    interval: Duration,
    grace: Duration,
) -> Result<(u64, Vec<u64>)> {
    let stop = AtomicBool::new(false);
    let rtts = Mutex::new(Vec::with_capacity(count as usize));
    let rx = client.try_clone()?;
    rx.set_read_timeout(Some(Duration::from_millis(20)))?;
    let mut sent = 0;
    std::thread::scope(|s| -> Result<()> {
        s.spawn(|| {
            // Timestamps are taken here: keep this light thread from waiting behind the
            // bulk flow's CPU work (see forwarder::set_realtime).
            set_realtime(5);
            let mut buf = [0u8; 256];
            let mut local = Vec::with_capacity(count as usize);
            while !stop.load(Ordering::Relaxed) {
                if let Ok(n) = rx.recv(&mut buf) {
                    let now = monotonic_ns();
                    if let Some((sess, _, t)) = decode_probe(&buf[..n]) {
                        if sess == session && now >= t {
                            local.push(now - t);
                        }
                    }
                }
            }
            *rtts.lock().expect("no panics while locked") = local;
        });
        let sender = s.spawn(|| {
            set_fine_timer_slack();
            set_realtime(5);
            let t0 = Instant::now();
            let mut sent = 0;
            for seq in 0..count {
                let due = t0 + interval.mul_f64(seq as f64);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                // A full socket buffer just loses this probe; it is counted as sent.
                let _ = client.send(&encode_probe(session, seq));
                sent += 1;
            }
            sent
        });
        sent = sender
            .join()
            .map_err(|_| anyhow::anyhow!("probe sender panicked"))?;
        std::thread::sleep(grace);
        stop.store(true, Ordering::Relaxed);
        Ok(())
    })?;
    let v = rtts.into_inner().expect("receiver finished");
    Ok((sent, v))
}

/// CPU seconds (user + system, all threads) used so far by process `pid`.
pub fn process_cpu_s(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit(')').next()?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the command name: state is field 0, utime 11, stime 12.
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    let hz = rustix::param::clock_ticks_per_second() as f64;
    Some(ticks / hz)
}

fn tcp_maxseg(s: &TcpStream) -> u32 {
    shoal_sys::tcp::tcp_maxseg(s.as_fd()).max(0) as u32
}

fn tcp_total_retrans(s: &TcpStream) -> u32 {
    // Zero when TCP_INFO cannot be read.
    shoal_sys::tcp::tcp_info(&s.as_fd()).map_or(0, |info| info.tcpi_total_retrans)
}

/// Sum over both directions of the forwarder stats.
fn fwd_totals(s: &Option<ForwarderStats>) -> (u64, u64, u64) {
    s.as_ref()
        .map(|s| {
            (
                s.up.dropped_queue + s.down.dropped_queue,
                s.up.dropped_loss + s.down.dropped_loss,
                s.up.forwarded_wire_bytes + s.down.forwarded_wire_bytes,
            )
        })
        .unwrap_or_default()
}

fn tx_dropped_total(info: &LinkInfo) -> u64 {
    info.tun_tx_dropped.snd.unwrap_or(0) + info.tun_tx_dropped.rcv.unwrap_or(0)
}

struct BulkResult {
    throughput: Throughput,
    loaded: RttStats,
    forwarder: Option<ForwarderUse>,
}

/// The bulk TCP flow with loaded-RTT probes alongside.
fn bulk_phase(
    info: &LinkInfo,
    client: &UdpSocket,
    warmup: Duration,
    duration: Duration,
) -> Result<BulkResult> {
    let st = &info.state;
    let (sender, receiver) = netns::tcp_pair(&st.snd_ns, &st.rcv_ns, &st.rcv_addr)?;
    receiver.set_read_timeout(Some(Duration::from_millis(200)))?;
    sender.set_write_timeout(Some(Duration::from_millis(200)))?;
    let received = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let fwd_pid = st.forwarder_pid.filter(|_| info.forwarder_alive);

    std::thread::scope(|s| -> Result<BulkResult> {
        s.spawn(|| {
            let mut buf = vec![0u8; 256 << 10];
            let mut r = &receiver;
            while !stop.load(Ordering::Relaxed) {
                match r.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        received.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(_) => continue,
                }
            }
        });
        s.spawn(|| {
            let buf = vec![0x5au8; 256 << 10];
            let mut w = &sender;
            while !stop.load(Ordering::Relaxed) {
                let _ = w.write(&buf);
            }
        });

        let t0 = Instant::now();
        let step = Duration::from_millis(500);
        let mut series = Vec::new();
        let mut last = 0u64;
        let mut k = 1u32;
        // Sample goodput every 0.5 s through the warm-up.
        while step * k <= warmup {
            std::thread::sleep((t0 + step * k).saturating_duration_since(Instant::now()));
            let b = received.load(Ordering::Relaxed);
            series.push((b - last) as f64 * 8.0 / step.as_secs_f64() / 1e6);
            last = b;
            k += 1;
        }
        std::thread::sleep((t0 + warmup).saturating_duration_since(Instant::now()));
        let (b1, t1) = (received.load(Ordering::Relaxed), Instant::now());
        let s1 = crate::ipc::forwarder_stats(&st.name);
        let c1 = fwd_pid.and_then(process_cpu_s);

        // Loaded RTT probes every 10 ms through the measurement window.
        let window = duration.saturating_sub(warmup);
        let n_probes = (window.as_millis() / 10) as u64;
        let loaded = s.spawn(move || {
            probe_run(
                client,
                SESSION_LOADED,
                n_probes,
                Duration::from_millis(10),
                Duration::ZERO,
            )
        });
        let mut last_t = t1;
        last = b1;
        while t1.elapsed() < window {
            let next = (last_t + step).min(t1 + window);
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
            let b = received.load(Ordering::Relaxed);
            let dt = next.duration_since(last_t).as_secs_f64().max(1e-3);
            series.push((b - last) as f64 * 8.0 / dt / 1e6);
            last = b;
            last_t = next;
        }
        let (b2, t2) = (received.load(Ordering::Relaxed), Instant::now());
        let c2 = fwd_pid.and_then(process_cpu_s);
        let s2 = crate::ipc::forwarder_stats(&st.name);
        let mss = tcp_maxseg(&sender);
        let retransmits = tcp_total_retrans(&sender);
        stop.store(true, Ordering::Relaxed);
        let _ = sender.shutdown(Shutdown::Both);
        let _ = receiver.shutdown(Shutdown::Both);
        let (sent, rtts) = loaded
            .join()
            .map_err(|_| anyhow::anyhow!("probe thread panicked"))??;

        let secs = t2.duration_since(t1).as_secs_f64();
        let goodput = (b2 - b1) as f64 * 8.0 / secs;
        let expected = st.rate_bps as f64 * mss as f64 / (mss as u64 + TCP_HDR_BYTES) as f64;
        // Window needed: a BDP plus the queue; autotuning may use about half of tcp_rmem max.
        let need = (st.rate_bps as u128 * st.rtt_ns as u128 / 8 / 1_000_000_000) as u64;
        let rmem_max = info
            .state
            .sysctls
            .rcv_tcp_rmem
            .split_whitespace()
            .last()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        let rate_bound = st.loss == 0.0 && rmem_max / 2 >= need;
        // The stats file lags up to 250 ms: scale its byte counts by its own interval when
        // both snapshots exist (they are taken the same way at both ends, so lag cancels).
        let wire_bps = match (&s1, &s2) {
            (Some(a), Some(b)) => {
                Some((b.up.forwarded_wire_bytes - a.up.forwarded_wire_bytes) as f64 * 8.0 / secs)
            }
            _ => None,
        };
        let forwarder = match (fwd_pid, c1, c2) {
            (Some(pid), Some(c1), Some(c2)) => {
                let cpu_pct = (c2 - c1) / secs * 100.0;
                let wire_total = fwd_totals(&s2).2.saturating_sub(fwd_totals(&s1).2);
                let gbps = wire_total as f64 * 8.0 / secs / 1e9;
                let late = s2.as_ref().map(|s| {
                    (
                        s.up.late_max_us.max(s.down.late_max_us),
                        s.up.late_over_1ms + s.down.late_over_1ms,
                    )
                });
                Some(ForwarderUse {
                    pid,
                    cpu_pct,
                    cpu_pct_per_gbit: if gbps > 0.0 { cpu_pct / gbps } else { 0.0 },
                    late_max_us: late.map(|l| l.0).unwrap_or(0),
                    late_over_1ms: late.map(|l| l.1).unwrap_or(0),
                })
            }
            _ => None,
        };
        Ok(BulkResult {
            throughput: Throughput {
                goodput_bps: goodput,
                expected_goodput_bps: expected,
                wire_bps,
                mss,
                retransmits,
                window_s: secs,
                warmup_s: warmup.as_secs_f64(),
                series_mbps: series,
                rate_bound,
            },
            loaded: RttStats::from_samples(sent, rtts),
            forwarder,
        })
    })
}

/// Runs all phases against link `name` and judges them.
pub fn check(name: &str, opts: &CheckOptions) -> Result<CheckReport> {
    let before = crate::ctl::status::link_info(name)?;
    let st = before.state.clone();
    if st.backend == Backend::Tun && !before.forwarder_alive {
        bail!("the forwarder of link {name} is not running; recreate the link");
    }
    let rtt = Duration::from_nanos(st.rtt_ns);
    let warmup = opts
        .warmup
        .unwrap_or_else(|| (rtt * 25).clamp(Duration::from_secs(2), Duration::from_secs(5)));
    let duration = opts.duration.unwrap_or(warmup + Duration::from_secs(5));
    if duration <= warmup + Duration::from_millis(500) {
        bail!("--duration must exceed --warmup by at least 0.5 s");
    }
    let grace = rtt * 2 + Duration::from_millis(200);

    let echo = Echo::start(&st.rcv_ns, &st.rcv_addr)?;
    let snd_ip = st.snd_addr.clone();
    let dst = echo.addr;
    let client = netns::run_in(&st.snd_ns, move || {
        let s = UdpSocket::bind((snd_ip.as_str(), 0)).context("binding the probe socket")?;
        s.connect(dst).context("connecting the probe socket")?;
        Ok(s)
    })?;

    // Idle RTT: 300 probes, 5 ms apart (≈ 1.5 s).
    let (sent, rtts) = probe_run(&client, SESSION_IDLE, 300, Duration::from_millis(5), grace)?;
    let idle = RttStats::from_samples(sent, rtts);
    if idle.replies == 0 {
        bail!("no probe came back: is link {name} up and its forwarder running?");
    }

    let bulk = bulk_phase(&before, &client, warmup, duration)?;

    // Loss: spaced probes so they take at most 20% of the slower direction.
    let loss = if st.loss > 0.0 && opts.loss_probes > 0 {
        // Let the bulk flow's queue drain first.
        std::thread::sleep(
            Duration::from_nanos(st.queue_bytes * 8 * 1_000_000_000 / st.rate_bps) + grace,
        );
        let slow = st.rate_bps.min(st.down_rate_bps) as f64;
        let interval_ns = (PROBE_WIRE_BYTES as f64 * 8.0 / (0.2 * slow) * 1e9).max(100_000.0);
        let interval = Duration::from_nanos(interval_ns as u64);
        let (sent, rtts) = probe_run(&client, SESSION_LOSS, opts.loss_probes, interval, grace)?;
        let arrived = echo.count(SESSION_LOSS);
        Some(LossResult {
            probes: sent,
            interval_us: interval.as_micros() as u64,
            up_lost: sent.saturating_sub(arrived),
            up_rate: 1.0 - arrived as f64 / sent.max(1) as f64,
            down_rate: 1.0 - rtts.len() as f64 / arrived.max(1) as f64,
        })
    } else {
        None
    };
    drop(echo);

    // Bulk TCP loss: what a flow of TSO super-packets loses, which probes cannot show.
    let bulk_loss = if st.loss > 0.0 && !opts.bulk_loss_max.is_zero() {
        let target = crate::verdict::bulk_loss_target_segments(st.loss);
        Some(
            bulk_loss::measure(&before, target, opts.bulk_loss_max)
                .context("measuring loss with a bulk TCP flow")?,
        )
    } else {
        None
    };

    let after_stats = crate::ipc::fresh_stats(name);
    let after = crate::ctl::status::link_info(name)?;
    let (dq0, dl0, _) = fwd_totals(&before.counters);
    let (dq1, dl1, _) = fwd_totals(&after_stats);
    let tun_tx_dropped = tx_dropped_total(&after).saturating_sub(tx_dropped_total(&before));
    let fwd_late = |s: &Option<ForwarderStats>| {
        s.as_ref()
            .map(|s| {
                (
                    s.up.forwarded + s.down.forwarded,
                    s.up.late_over_1ms + s.down.late_over_1ms,
                )
            })
            .unwrap_or_default()
    };
    let (f0, l0) = fwd_late(&before.counters);
    let (f1, l1) = fwd_late(&after_stats);

    let mut report = CheckReport {
        link: after,
        idle_rtt: idle,
        loaded_rtt: bulk.loaded,
        throughput: bulk.throughput,
        loss,
        bulk_loss,
        forwarder: bulk.forwarder,
        dropped_queue: dq1.saturating_sub(dq0),
        dropped_loss: dl1.saturating_sub(dl0),
        tun_tx_dropped,
        forwarded: f1.saturating_sub(f0),
        late_over_1ms: l1.saturating_sub(l0),
        rows: Vec::new(),
        pass: false,
    };
    report.rows = crate::verdict::judge(&report);
    report.pass = report.rows.iter().all(|r| r.verdict != Verdict::Fail);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_codec() {
        let p = encode_probe(2, 77);
        let (s, q, t) = decode_probe(&p).unwrap();
        assert_eq!((s, q), (2, 77));
        assert!(t > 0);
        assert!(decode_probe(&[0u8; 32]).is_none());
        assert!(decode_probe(&p[..10]).is_none());
    }

    #[test]
    fn rtt_quantiles() {
        let s = RttStats::from_samples(5, vec![5_000_000, 1_000_000, 3_000_000, 2_000_000]);
        assert_eq!(s.replies, 4);
        assert_eq!(s.min_ms, 1.0);
        assert_eq!(s.max_ms, 5.0);
        assert_eq!(s.median_ms, 3.0);
    }
}
