//! The path probe's messages (`shoal probe`, and a two-host sweep before its first run and
//! after its last): bulk data frames on the control channel, the receiving end's goodput
//! meter and what one bulk flow measured. Pure code: times are passed in as seconds.
//!
//! A bulk flow is a run of frames of kind [`KIND_PROBE_DATA`] (body: filler bytes) ended by
//! one such frame with an empty body, on an authenticated control connection, after a
//! `probe-sink` request (the sweep's host sends) or a `probe-source` request (the receiving
//! host sends). The receiving host bounds both in time and bytes and writes nothing to disk.

use serde::{Deserialize, Serialize};

/// Frame kind: probe filler (an empty body ends the flow).
pub const KIND_PROBE_DATA: u8 = 3;
/// Filler bytes per data frame.
pub const PROBE_FRAME: usize = 64 << 10;
/// Largest probe frame either end reads (kind byte included).
pub const MAX_PROBE_FRAME: u32 = PROBE_FRAME as u32 + 1;
/// Longest bulk flow the receiving host takes part in, either way.
pub const MAX_PROBE_SECONDS: f64 = 30.0;
/// Most filler bytes the receiving host reads or sends in one flow (8 GiB: 30 s at 2 Gbit/s).
pub const MAX_PROBE_BYTES: u64 = 8 << 30;

/// What the receiving end of one bulk flow counted, and the sending end's TCP_INFO.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BulkReport {
    /// Filler bytes that arrived (TLS and frame overhead not counted).
    pub bytes: u64,
    /// From the first byte's arrival to the end frame's.
    pub seconds: f64,
    /// Bytes that arrived after the warm-up (slow start excluded).
    pub steady_bytes: u64,
    /// The time those took (0 when the flow was shorter than its warm-up).
    pub steady_seconds: f64,
    /// Warm-up asked for (s).
    pub warmup: f64,
    /// The sending end's TCP_INFO once the flow was over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_tcp: Option<SenderTcp>,
    /// What the sending end's kernel acknowledged over the flow, read every
    /// [`SAMPLE_INTERVAL_MS`]: the goodput that can be trusted (absent from an older peer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked: Option<AckedFlow>,
}

impl BulkReport {
    /// Goodput over the steady part (after the warm-up), or over the whole flow if it had
    /// none; bits per second.
    pub fn goodput_bps(&self) -> f64 {
        if self.steady_seconds > 0.0 {
            self.steady_bytes as f64 * 8.0 / self.steady_seconds
        } else if self.seconds > 0.0 {
            self.bytes as f64 * 8.0 / self.seconds
        } else {
            0.0
        }
    }

    /// Goodput from the first byte to the last, slow start included; bits per second.
    pub fn whole_goodput_bps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 * 8.0 / self.seconds
        } else {
            0.0
        }
    }
}

/// The sending end's kernel figures for a bulk flow's connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SenderTcp {
    /// Segments retransmitted (`tcpi_total_retrans`).
    pub retransmits: u64,
    /// Data segments sent (`tcpi_data_segs_out`).
    pub segments_out: u64,
    /// Smoothed and lowest RTT the kernel saw (ms).
    pub rtt_ms: f64,
    pub min_rtt_ms: f64,
    /// Congestion controller in effect, read back from the socket.
    #[serde(default)]
    pub cc: String,
    /// Time the flow was held by the peer's receive window, and by this end's send buffer
    /// (`tcpi_rwnd_limited`, `tcpi_sndbuf_limited`; ms).
    #[serde(default)]
    pub rwnd_limited_ms: f64,
    #[serde(default)]
    pub sndbuf_limited_ms: f64,
}

impl SenderTcp {
    /// Loss as `shoal link check` reports it: lost (retransmitted) over sent segments.
    pub fn loss(&self) -> f64 {
        if self.segments_out == 0 {
            0.0
        } else {
            self.retransmits as f64 / self.segments_out as f64
        }
    }
}

/// How often the sending end reads its socket's TCP_INFO during a bulk flow.
pub const SAMPLE_INTERVAL_MS: u64 = 50;

/// One TCP_INFO reading of a bulk flow's sending socket, `t` seconds after the flow started.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpSample {
    pub t: f64,
    /// Bytes the peer acknowledged, cumulatively or selectively (SACKed above a hole).
    pub bytes_acked: u64,
    pub retransmits: u64,
    pub segments_out: u64,
}

/// A bulk flow as its sender's kernel saw it: acknowledged bytes over the steady interval
/// (from the first reading at or after the warm-up to the last, taken once all was
/// acknowledged), so the goodput is never above what was delivered; and retransmissions
/// split at the warm-up, since slow start's overshoot of the bottleneck queue is the
/// probe's own loss, not the path's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AckedFlow {
    /// Bytes acknowledged within the steady interval.
    pub bytes: u64,
    /// The steady interval's length (s).
    pub interval_s: f64,
    /// TCP_INFO readings within it (its two ends included).
    pub samples: usize,
    /// `bytes` × 8 / `interval_s` (bit/s).
    pub goodput_bit_s: f64,
    /// Longest time within the interval the acknowledged bytes did not grow (s).
    pub longest_stall_s: f64,
    /// Retransmitted and sent segments before the steady interval (slow start).
    pub warmup_retransmits: u64,
    pub warmup_segments: u64,
    /// Retransmitted and sent segments within it.
    pub steady_retransmits: u64,
    pub steady_segments: u64,
    /// How bunched those retransmits are between readings: the index of dispersion of each
    /// reading's retransmits around its segments × the steady loss rate (about 1 for random
    /// loss, far above 1 when they come in bursts, as a queue overflowing does); `None` with
    /// fewer than [`MIN_DISPERSION_RETRANSMITS`] of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_loss_dispersion: Option<f64>,
}

/// Fewest steady retransmits [`AckedFlow::steady_loss_dispersion`] is computed from.
pub const MIN_DISPERSION_RETRANSMITS: u64 = 10;

impl AckedFlow {
    /// The flow from its readings (time order) and warm-up (s); `None` without two readings
    /// after the warm-up's end.
    pub fn of(samples: &[TcpSample], warmup: f64) -> Option<AckedFlow> {
        let start = samples.iter().position(|s| s.t >= warmup)?;
        let (first, last) = (samples[start], *samples.last()?);
        if last.t <= first.t {
            return None;
        }
        let steady = &samples[start..];
        let mut stall = 0.0f64;
        let mut grew_at = first.t;
        for w in steady.windows(2) {
            if w[1].bytes_acked > w[0].bytes_acked {
                grew_at = w[1].t;
            } else {
                stall = stall.max(w[1].t - grew_at);
            }
        }
        let bytes = last.bytes_acked.saturating_sub(first.bytes_acked);
        let interval_s = last.t - first.t;
        Some(AckedFlow {
            bytes,
            interval_s,
            samples: steady.len(),
            goodput_bit_s: bytes as f64 * 8.0 / interval_s,
            longest_stall_s: stall,
            warmup_retransmits: first.retransmits,
            warmup_segments: first.segments_out,
            steady_retransmits: last.retransmits.saturating_sub(first.retransmits),
            steady_segments: last.segments_out.saturating_sub(first.segments_out),
            steady_loss_dispersion: dispersion(steady),
        })
    }

    /// Retransmitted over sent segments after the warm-up: the path's own loss.
    pub fn steady_loss(&self) -> f64 {
        ratio(self.steady_retransmits, self.steady_segments)
    }

    /// The same during the warm-up (mostly the probe overflowing the bottleneck queue).
    pub fn warmup_loss(&self) -> f64 {
        ratio(self.warmup_retransmits, self.warmup_segments)
    }
}

/// The index of dispersion of the retransmits between consecutive readings, against a
/// binomial draw at the readings' overall loss rate.
fn dispersion(steady: &[TcpSample]) -> Option<f64> {
    let (first, last) = (steady.first()?, steady.last()?);
    let r = last.retransmits.saturating_sub(first.retransmits);
    let n = last.segments_out.saturating_sub(first.segments_out);
    if r < MIN_DISPERSION_RETRANSMITS || n == 0 {
        return None;
    }
    let p = r as f64 / n as f64;
    let (mut sq, mut var) = (0.0, 0.0);
    for w in steady.windows(2) {
        let ri = w[1].retransmits.saturating_sub(w[0].retransmits) as f64;
        let si = w[1].segments_out.saturating_sub(w[0].segments_out) as f64;
        sq += (ri - si * p).powi(2);
        var += si * p * (1.0 - p);
    }
    (var > 0.0).then(|| sq / var)
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Counts a bulk flow's bytes as they arrive; the warm-up starts at the first byte.
#[derive(Debug, Clone)]
pub struct GoodputMeter {
    warmup: f64,
    first: Option<f64>,
    bytes: u64,
    /// (time, bytes so far) when the warm-up ended.
    warm: Option<(f64, u64)>,
}

impl GoodputMeter {
    pub fn new(warmup: f64) -> Self {
        GoodputMeter {
            warmup: warmup.max(0.0),
            first: None,
            bytes: 0,
            warm: None,
        }
    }

    /// `n` bytes arrived at time `t` (s, any origin, never decreasing).
    pub fn add(&mut self, t: f64, n: u64) {
        let first = *self.first.get_or_insert(t);
        if self.warm.is_none() && t - first >= self.warmup && self.bytes > 0 {
            self.warm = Some((t, self.bytes));
        }
        self.bytes += n;
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Seconds since the first byte (0 before it).
    pub fn elapsed(&self, t: f64) -> f64 {
        self.first.map_or(0.0, |f| t - f)
    }

    /// The flow ended (its end frame arrived) at time `t`.
    pub fn finish(&self, t: f64) -> BulkReport {
        let seconds = self.elapsed(t).max(0.0);
        let (steady_bytes, steady_seconds) = match self.warm {
            Some((tw, bw)) if t > tw => (self.bytes - bw, t - tw),
            _ => (0, 0.0),
        };
        BulkReport {
            bytes: self.bytes,
            seconds,
            steady_bytes,
            steady_seconds,
            warmup: self.warmup,
            sender_tcp: None,
            acked: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_warm_up_is_left_out_of_the_steady_goodput() {
        // 1 MB per 0.1 s for the first second (slow start would be less), then 2 MB per 0.1 s.
        let mut m = GoodputMeter::new(1.0);
        for i in 0..30 {
            let t = 10.0 + f64::from(i) * 0.1;
            m.add(t, if i < 10 { 1_000_000 } else { 2_000_000 });
        }
        let r = m.finish(13.0);
        assert_eq!(r.bytes, 50_000_000);
        assert!((r.seconds - 3.0).abs() < 1e-9);
        // From the first chunk at or after 1 s (t = 11.0) to the end: 20 chunks of 2 MB.
        assert_eq!(r.steady_bytes, 40_000_000);
        assert!((r.steady_seconds - 2.0).abs() < 1e-9);
        assert!((r.goodput_bps() - 160e6).abs() < 1.0);
        assert!((r.whole_goodput_bps() - 50e6 * 8.0 / 3.0).abs() < 1.0);
    }

    #[test]
    fn a_flow_shorter_than_its_warm_up_reports_the_whole_flow() {
        let mut m = GoodputMeter::new(5.0);
        m.add(0.0, 1000);
        m.add(0.5, 1000);
        let r = m.finish(1.0);
        assert_eq!((r.steady_bytes, r.steady_seconds), (0, 0.0));
        assert!((r.goodput_bps() - 16_000.0).abs() < 1e-6);
        let empty = GoodputMeter::new(1.0).finish(3.0);
        assert_eq!(
            (empty.bytes, empty.seconds, empty.goodput_bps()),
            (0, 0.0, 0.0)
        );
    }

    fn sample(t: f64, bytes_acked: u64, retransmits: u64, segments_out: u64) -> TcpSample {
        TcpSample {
            t,
            bytes_acked,
            retransmits,
            segments_out,
        }
    }

    #[test]
    fn acked_goodput_is_acknowledged_bytes_over_the_steady_interval() {
        // 1 MB acknowledged per 0.1 s; 40 retransmits in slow start, 2 after it; a 0.3 s stall.
        let mut s = vec![sample(0.0, 0, 0, 0), sample(0.5, 2_000_000, 40, 1_000)];
        for i in 0u32..=10 {
            let t = 1.0 + f64::from(i) * 0.1;
            let acked = 5_000_000 + u64::from(i.min(5) + i.saturating_sub(8)) * 1_000_000;
            s.push(sample(
                t,
                acked,
                40 + u64::from(i / 5),
                3_000 + u64::from(i) * 100,
            ));
        }
        let a = AckedFlow::of(&s, 1.0).unwrap();
        assert_eq!((a.bytes, a.samples), (7_000_000, 11));
        assert!((a.interval_s - 1.0).abs() < 1e-9);
        assert!((a.goodput_bit_s - 56e6).abs() < 1.0);
        assert!((a.longest_stall_s - 0.3).abs() < 1e-9, "{a:?}");
        assert_eq!((a.warmup_retransmits, a.steady_retransmits), (40, 2));
        assert!((a.steady_loss() - 2.0 / 1000.0).abs() < 1e-12);
        assert!((a.warmup_loss() - 40.0 / 3000.0).abs() < 1e-12);
        // Nothing after the warm-up, or a single reading: no figure.
        assert_eq!(AckedFlow::of(&s[..2], 1.0), None);
        assert_eq!(AckedFlow::of(&s[..3], 1.0), None);
    }

    #[test]
    fn retransmits_in_bursts_are_over_dispersed_and_even_ones_are_not() {
        // 40 readings of 1,000 segments each: 1% lost evenly (10 per reading), or the same 400
        // retransmits in 4 bursts of 100.
        let flow = |burst: bool| {
            let (mut r, mut out) = (0u64, 0u64);
            let mut s = vec![sample(1.0, 0, 0, 0)];
            for i in 1..=40u64 {
                out += 1_000;
                r += match (burst, i % 10) {
                    (false, _) => 10,
                    (true, 0) => 100,
                    (true, _) => 0,
                };
                s.push(sample(1.0 + i as f64 * 0.1, i * 1_000_000, r, out));
            }
            AckedFlow::of(&s, 1.0).unwrap()
        };
        let even = flow(false).steady_loss_dispersion.unwrap();
        let bursts = flow(true).steady_loss_dispersion.unwrap();
        assert!(even < 1.0, "{even}");
        assert!(bursts > 50.0, "{bursts}");
        // Too few retransmits to tell.
        let s = [sample(1.0, 0, 0, 0), sample(2.0, 1, 9, 1_000)];
        assert_eq!(AckedFlow::of(&s, 1.0).unwrap().steady_loss_dispersion, None);
    }

    #[test]
    fn loss_is_retransmitted_over_sent_segments() {
        let t = SenderTcp {
            retransmits: 3,
            segments_out: 300,
            ..Default::default()
        };
        assert!((t.loss() - 0.01).abs() < 1e-12);
        assert_eq!(SenderTcp::default().loss(), 0.0);
    }
}
