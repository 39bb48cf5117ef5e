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
