//! Measures the path to a remote receiver through its control channel alone (`shoal recv
//! --control`: the same TLS port, pin and token as a sweep): idle RTT, a bulk TCP flow each
//! way with control round trips alongside (RTT under load), and loss as the sending end's
//! TCP_INFO counts it. `shoal probe` runs it on its own; a two-host sweep before its first run
//! and after its last ([`shoal_report::pathreport`] compares the two).
//!
//! Every figure is measured where it happens: goodput where the bytes arrive (the receiving
//! host reports what reached it), loss and the controller at the sending end once every byte
//! was acknowledged.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::BytesMut;
use shoal_proto::control::{self, Reply, Request, KIND_JSON};
use shoal_proto::probe::{
    AckedFlow, BulkReport, GoodputMeter, TcpSample, KIND_PROBE_DATA, MAX_PROBE_BYTES, PROBE_FRAME,
    SAMPLE_INTERVAL_MS,
};
use shoal_row::metrics;
use shoal_transport::stats;

use crate::{exchange, next_frame, Remote, TlsStream};
use shoal_report::pathreport::{Direction, PathProbe, RttSummary};

/// How long and how much to probe.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// Control round trips for the idle RTT.
    pub rtt_probes: usize,
    /// Length of each bulk flow, warm-up included.
    pub duration: Duration,
    /// Start of each bulk flow left out of its goodput (slow start) and of its loaded RTT.
    pub warmup: Duration,
    /// Spacing of the RTT probes while a bulk flow runs.
    pub load_interval: Duration,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            rtt_probes: 20,
            duration: Duration::from_secs(4),
            warmup: Duration::from_secs(1),
            load_interval: Duration::from_millis(50),
        }
    }
}

/// Longest this end waits for its last bytes to be acknowledged before reading TCP_INFO.
const ACK_WAIT: Duration = Duration::from_secs(10);

/// Probes the path to `remote`: idle RTT, then a flow each way.
pub fn probe(remote: &Remote, opts: &ProbeOptions) -> Result<PathProbe> {
    let at = metrics::utc_timestamp();
    let (idle, kernel_min) = idle_rtt(remote, opts.rtt_probes)
        .with_context(|| format!("probe {}: idle RTT", remote.addr()))?;
    let up = under_load(remote, opts, |tls, buf| bulk_up(tls, buf, opts))
        .with_context(|| format!("probe {}: bulk flow to the receiver", remote.addr()))?;
    let down = under_load(remote, opts, |tls, buf| bulk_down(tls, buf, opts))
        .with_context(|| format!("probe {}: bulk flow from the receiver", remote.addr()))?;
    Ok(PathProbe {
        receiver: remote.addr().to_string(),
        at,
        idle_rtt: RttSummary::of(&idle),
        kernel_min_rtt_ms: kernel_min,
        up,
        down,
    })
}

/// `n` clock requests on one connection: their round trips (ms), and the kernel's
/// `min_rtt` of that connection.
fn idle_rtt(remote: &Remote, n: usize) -> Result<(Vec<f64>, f64)> {
    let (mut tls, mut buf) = remote.connect()?;
    let mut rtts = Vec::with_capacity(n);
    for _ in 0..n.max(1) {
        rtts.push(round_trip(&mut tls, &mut buf)?);
    }
    let kernel = stats::tcp_stats(&tls.sock).map_or(0.0, |s| s.min_rtt_ms);
    close(&mut tls);
    Ok((rtts, kernel))
}

/// One clock request and its reply: the round trip in ms.
fn round_trip(tls: &mut TlsStream, buf: &mut BytesMut) -> Result<f64> {
    let t0 = Instant::now();
    exchange(tls, buf, &Request::Clock, false)?;
    Ok(t0.elapsed().as_secs_f64() * 1e3)
}

fn close(tls: &mut TlsStream) {
    tls.conn.send_close_notify();
    let _ = tls.flush();
}

/// Runs one bulk flow on its own connection while a second connection sends clock requests
/// every `load_interval`; round trips that start after the warm-up are the loaded RTT.
fn under_load<F>(remote: &Remote, opts: &ProbeOptions, flow: F) -> Result<Direction>
where
    F: FnOnce(&mut TlsStream, &mut BytesMut) -> Result<BulkReport>,
{
    // Both connections are up before the flow starts, so no handshake is timed.
    let (mut rtt_tls, mut rtt_buf) = remote.connect()?;
    round_trip(&mut rtt_tls, &mut rtt_buf)?;
    let (mut tls, mut buf) = remote.connect()?;
    let stop = Arc::new(AtomicBool::new(false));
    let loaded = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let pinger = {
        let (stop, loaded, opts) = (stop.clone(), loaded.clone(), opts.clone());
        std::thread::spawn(move || -> Result<()> {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(opts.load_interval);
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let counts = start.elapsed() >= opts.warmup;
                let rtt = round_trip(&mut rtt_tls, &mut rtt_buf)?;
                if counts && !stop.load(Ordering::Relaxed) {
                    loaded.lock().expect("not poisoned").push(rtt);
                }
            }
            close(&mut rtt_tls);
            Ok(())
        })
    };
    let bulk = flow(&mut tls, &mut buf);
    stop.store(true, Ordering::Relaxed);
    let pinged = pinger.join();
    close(&mut tls);
    let bulk = bulk?;
    match pinged {
        Ok(r) => r.context("RTT probes under load")?,
        Err(_) => bail!("the RTT probe thread panicked"),
    }
    let loaded = loaded.lock().expect("not poisoned").clone();
    Ok(Direction::new(bulk, &loaded))
}

/// This host sends for `duration`; the receiving host counts what arrives.
fn bulk_up(tls: &mut TlsStream, buf: &mut BytesMut, opts: &ProbeOptions) -> Result<BulkReport> {
    let mut out = BytesMut::new();
    let req = Request::ProbeSink {
        warmup_ms: opts.warmup.as_millis() as u64,
    };
    control::encode_frame(KIND_JSON, &serde_json::to_vec(&req)?, &mut out);
    tls.write_all(&out)?;
    let mut frame = BytesMut::with_capacity(PROBE_FRAME + 5);
    control::encode_frame(KIND_PROBE_DATA, &vec![0u8; PROBE_FRAME], &mut frame);
    let start = Instant::now();
    let sampler = Sampler::start(&tls.sock, start)?;
    let sent = (|| -> Result<()> {
        // The receiving host refuses a flow past MAX_PROBE_BYTES (a fast path reaches it in
        // a few seconds on loopback), so the flow ends there as it ends at its duration.
        let mut sent = 0u64;
        while start.elapsed() < opts.duration && sent + (PROBE_FRAME as u64) <= MAX_PROBE_BYTES {
            tls.write_all(&frame).context("sending the bulk flow")?;
            sent += PROBE_FRAME as u64;
        }
        let mut end = BytesMut::new();
        control::encode_frame(KIND_PROBE_DATA, &[], &mut end);
        tls.write_all(&end)?;
        tls.flush()?;
        Ok(())
    })();
    let samples = sampler.stop(&tls.sock, start);
    sent?;
    let reply = read_reply(tls, buf)?;
    let mut report = reply
        .bulk
        .context("the receiver's probe reply has no figures")?;
    report.sender_tcp = stats::probe_sender_tcp(&tls.sock);
    report.acked = AckedFlow::of(&samples, opts.warmup.as_secs_f64());
    Ok(report)
}

/// The receiving host sends for `duration`; this host counts what arrives.
fn bulk_down(tls: &mut TlsStream, buf: &mut BytesMut, opts: &ProbeOptions) -> Result<BulkReport> {
    let mut out = BytesMut::new();
    let req = Request::ProbeSource {
        duration_ms: opts.duration.as_millis() as u64,
        warmup_ms: opts.warmup.as_millis() as u64,
    };
    control::encode_frame(KIND_JSON, &serde_json::to_vec(&req)?, &mut out);
    tls.write_all(&out)?;
    tls.flush()?;
    let start = Instant::now();
    let now = || start.elapsed().as_secs_f64();
    let mut meter = GoodputMeter::new(opts.warmup.as_secs_f64());
    let mut report = loop {
        match next_frame(tls, buf)? {
            (KIND_PROBE_DATA, body) if body.is_empty() => break meter.finish(now()),
            (KIND_PROBE_DATA, body) => meter.add(now(), body.len() as u64),
            (KIND_JSON, body) => {
                let reply: Reply = serde_json::from_slice(&body).context("bad control reply")?;
                bail!("the receiver says: {}", reply.error);
            }
            (k, _) => bail!("unexpected frame kind {k} in the receiver's bulk flow"),
        }
    };
    let reply = read_reply(tls, buf)?;
    if let Some(b) = reply.bulk {
        report.sender_tcp = b.sender_tcp;
        report.acked = b.acked;
    }
    Ok(report)
}

/// Reads the sending socket's TCP_INFO every [`SAMPLE_INTERVAL_MS`] on its own thread, so a
/// write blocked on a full window does not leave a gap in the readings.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<TcpSample>>,
}

impl Sampler {
    fn start(sock: &std::net::TcpStream, start: Instant) -> Result<Sampler> {
        let sock = sock
            .try_clone()
            .context("a second handle on the probe socket")?;
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut out = Vec::new();
            while !s2.load(Ordering::Relaxed) {
                out.extend(stats::probe_sample(&sock, start.elapsed().as_secs_f64()));
                std::thread::sleep(Duration::from_millis(SAMPLE_INTERVAL_MS));
            }
            out
        });
        Ok(Sampler { stop, thread })
    }

    /// Waits (at most [`ACK_WAIT`]) until every byte is acknowledged, then takes the last
    /// reading: the steady interval ends there.
    fn stop(self, sock: &std::net::TcpStream, start: Instant) -> Vec<TcpSample> {
        let waited = Instant::now();
        while !stats::tcp_all_acked(sock).unwrap_or(true) && waited.elapsed() < ACK_WAIT {
            std::thread::sleep(Duration::from_millis(2));
        }
        self.stop.store(true, Ordering::Relaxed);
        let mut out = self.thread.join().unwrap_or_default();
        out.extend(stats::probe_sample(sock, start.elapsed().as_secs_f64()));
        out
    }
}

fn read_reply(tls: &mut TlsStream, buf: &mut BytesMut) -> Result<Reply> {
    let reply: Reply = match next_frame(tls, buf)? {
        (KIND_JSON, body) => serde_json::from_slice(&body).context("bad control reply")?,
        (k, _) => bail!("unexpected frame kind {k}"),
    };
    if !reply.ok {
        bail!("the receiver says: {}", reply.error);
    }
    Ok(reply)
}
