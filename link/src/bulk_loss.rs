//! The bulk TCP loss phase of `shoal link check`: the segment loss a long TCP flow sees.
//!
//! Single-packet probes cannot see how the emulator treats segmentation-offloaded traffic: a
//! bulk TCP flow hands the link TSO super-packets of up to ~44 segments, and a link that drops
//! such a packet whole loses all of its wire segments at once. The flow's own counters say how
//! many wire segments it had to send again: `tcpi_total_retrans / tcpi_data_segs_out` (both
//! count MSS-sized segments, retransmissions included in the denominator; every lost
//! transmission is retransmitted once, so the ratio estimates the per-segment loss). The
//! counters are read after the flow has drained, so the losses of its last round trip count.
//!
//! The flow runs BBR when the kernel has it, its pacing capped at [`PACING_SHARE`] of the
//! link rate. BBR does not slow down for random loss, so the sample grows at link speed even
//! at 5 %; the cap keeps the drop-tail queue empty, so retransmissions stand for random loss
//! only. The forwarder's own drop counts over the same window are reported beside it (queue
//! drops there would inflate the estimate). The flow stops once it has sent enough segments
//! for the tolerance band to be statistically meaningful ([`crate::report::bulk_loss_target_segments`])
//! or after a time cap, whichever comes first.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rustix::net::sockopt;
use serde::Serialize;

use crate::ctl::status::LinkInfo;
use crate::ipc::ForwarderStats;
use crate::netns;

/// How long the flow may take to drain once it stops writing (every segment acknowledged).
const DRAIN_MAX: Duration = Duration::from_secs(5);

/// Share of the link rate the flow may pace at: low enough that the queue stays empty
/// (TCP/IP headers and ACK timing add a few percent), high enough to gather a sample fast.
pub const PACING_SHARE: f64 = 0.8;

/// The controller asked for; the kernel's default is used when it does not have it.
const CC: &str = "bbr";

/// What the bulk flow saw, and what the forwarder counted meanwhile.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BulkLoss {
    /// Congestion controller in effect (read back from the socket).
    pub cc: String,
    /// `SO_MAX_PACING_RATE`, bytes per second.
    pub pacing_cap_bytes_per_s: u64,
    pub seconds: f64,
    /// Segments the flow was to send before stopping (unless the time cap came first).
    pub target_segments: u64,
    /// `tcpi_data_segs_out`: data segments sent, retransmissions included.
    pub segments_sent: u64,
    /// `tcpi_total_retrans`: segments retransmitted.
    pub segments_retransmitted: u64,
    /// `tcpi_bytes_sent` / `tcpi_bytes_retrans`: the same in bytes.
    pub bytes_sent: u64,
    pub bytes_retransmitted: u64,
    /// `segments_retransmitted / segments_sent`.
    pub rate: f64,
    /// The forwarder's counts sender → receiver over the flow (wire packets): random-loss
    /// drops, queue drops, and packets offered to the link. `None` without a forwarder.
    pub emulator_lost: Option<u64>,
    pub emulator_queue_dropped: Option<u64>,
    pub emulator_offered: Option<u64>,
}

fn tcp_info(s: &TcpStream) -> Result<libc::tcp_info> {
    shoal_sys::tcp::tcp_info(&s.as_fd()).context("getsockopt TCP_INFO")
}

/// Asks for `name` as the congestion controller; returns the one in effect.
fn set_congestion(s: &TcpStream, name: &str) -> String {
    // A refusal (ENOENT) changes nothing.
    let _ = sockopt::set_tcp_congestion(s, name);
    sockopt::tcp_congestion(s).unwrap_or_default()
}

fn set_max_pacing_rate(s: &TcpStream, bytes_per_s: u64) -> Result<()> {
    // The 32-bit form works on every kernel; 4 GB/s is far above any link emulated here.
    let v = bytes_per_s.min(u32::MAX as u64) as u32;
    shoal_sys::tcp::set_max_pacing_rate(s.as_fd(), v).context("setting SO_MAX_PACING_RATE")
}

/// Sender → receiver counts of the forwarder: (lost, queue-dropped, offered), wire packets.
fn up_counts(s: &ForwarderStats) -> (u64, u64, u64) {
    let u = &s.up;
    let offered = u.forwarded_segments + u.dropped_queue + u.dropped_loss;
    (u.dropped_loss, u.dropped_queue, offered)
}

/// Runs one paced bulk flow sender → receiver until it has sent `target_segments` segments
/// or `max_time` has passed, and reports its retransmission ratio.
pub fn measure(info: &LinkInfo, target_segments: u64, max_time: Duration) -> Result<BulkLoss> {
    let st = &info.state;
    let (sender, receiver) = netns::tcp_pair(&st.snd_ns, &st.rcv_ns, &st.rcv_addr)?;
    let cc = set_congestion(&sender, CC);
    let cap = (st.rate_bps as f64 * PACING_SHARE / 8.0) as u64;
    set_max_pacing_rate(&sender, cap)?;
    receiver.set_read_timeout(Some(Duration::from_millis(200)))?;
    sender.set_write_timeout(Some(Duration::from_millis(200)))?;

    let before = crate::ipc::forwarder_stats(&st.name);
    let stop = AtomicBool::new(false);
    let stop_writing = AtomicBool::new(false);
    let t0 = Instant::now();
    let last = std::thread::scope(|s| -> Result<libc::tcp_info> {
        s.spawn(|| {
            let mut buf = vec![0u8; 256 << 10];
            let mut r = &receiver;
            while !stop.load(Ordering::Relaxed) {
                if let Ok(0) = r.read(&mut buf) {
                    break;
                }
            }
        });
        s.spawn(|| {
            let buf = vec![0xa5u8; 256 << 10];
            let mut w = &sender;
            while !stop_writing.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
                let _ = w.write(&buf);
            }
        });
        // Bounded by max_time: poll the sender's counters every 50 ms.
        let result = loop {
            std::thread::sleep(Duration::from_millis(50));
            match tcp_info(&sender) {
                Ok(i)
                    if (i.tcpi_data_segs_out as u64) < target_segments
                        && t0.elapsed() < max_time => {}
                other => break other,
            }
        };
        // Losses among the segments still in flight are not retransmitted yet: reading the
        // counters now undercounts them (by ≈ p × the flight, 5–10 % of the losses at 5 %,
        // measured). Stop writing and let the flow drain, bounded, so every lost
        // transmission has been sent again when the counters are read.
        stop_writing.store(true, Ordering::Relaxed);
        let result = match result {
            Ok(mut i) => {
                let drain_end = Instant::now() + DRAIN_MAX;
                while i.tcpi_unacked > 0 && Instant::now() < drain_end {
                    std::thread::sleep(Duration::from_millis(10));
                    match tcp_info(&sender) {
                        Ok(n) => i = n,
                        Err(_) => break,
                    }
                }
                Ok(i)
            }
            e => e,
        };
        stop.store(true, Ordering::Relaxed);
        let _ = sender.shutdown(Shutdown::Both);
        let _ = receiver.shutdown(Shutdown::Both);
        result
    })?;
    let seconds = t0.elapsed().as_secs_f64();
    // The stats file lags up to 250 ms: the flow's last segments are in the fresh copy.
    let after = crate::ipc::fresh_stats(&st.name);
    let emu = match (&before, &after) {
        (Some(b), Some(a)) => {
            let (l0, q0, o0) = up_counts(b);
            let (l1, q1, o1) = up_counts(a);
            Some((l1 - l0, q1 - q0, o1 - o0))
        }
        _ => None,
    };
    let sent = last.tcpi_data_segs_out as u64;
    let retrans = last.tcpi_total_retrans as u64;
    Ok(BulkLoss {
        cc,
        pacing_cap_bytes_per_s: cap,
        seconds,
        target_segments,
        segments_sent: sent,
        segments_retransmitted: retrans,
        bytes_sent: last.tcpi_bytes_sent,
        bytes_retransmitted: last.tcpi_bytes_retrans,
        rate: retrans as f64 / sent.max(1) as f64,
        emulator_lost: emu.map(|e| e.0),
        emulator_queue_dropped: emu.map(|e| e.1),
        emulator_offered: emu.map(|e| e.2),
    })
}
