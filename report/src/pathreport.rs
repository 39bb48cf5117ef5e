//! What a path probe measured (`shoal probe`, the `probe` module), as meta.json stores it
//! and as people read it, and the comparison of the probes before the first run and after
//! the last (a path that changed during a sweep is flagged). Pure: no I/O.

use serde::{Deserialize, Serialize};
use shoal_proto::probe::BulkReport;

/// Idle RTT may move this much (fraction) between start and end before the path counts as
/// changed.
pub const RTT_TOLERANCE: f64 = 0.10;
/// Goodput (each way) may move this much.
pub const GOODPUT_TOLERANCE: f64 = 0.20;

/// Round trips of small control requests on one established TLS connection (each one
/// request and its reply: one network round trip plus the receiver's answer time).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RttSummary {
    pub probes: usize,
    pub min_ms: f64,
    pub median_ms: f64,
    pub max_ms: f64,
}

impl RttSummary {
    /// Summary of round trips in ms (all zero for none).
    pub fn of(samples: &[f64]) -> RttSummary {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return RttSummary::default();
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        RttSummary {
            probes: n,
            min_ms: v[0],
            median_ms: median,
            max_ms: v[n - 1],
        }
    }
}

/// Steady intervals shorter than this are too short to trust (s).
pub const MIN_INTERVAL_S: f64 = 1.0;
/// Fewer TCP_INFO readings than this within the steady interval are too few.
pub const MIN_SAMPLES: usize = 5;
/// A flow whose acknowledged bytes stood still this long (s) stalled.
pub const STALL_S: f64 = 1.0;

/// A flow held by a window (the receive window or the send buffer) this share of its time
/// measured that window, not the path.
pub const WINDOW_HELD: f64 = 0.5;
/// Index of dispersion of the steady retransmits from which they count as bursts (a queue
/// overflowing) rather than random loss: random loss gives about 1.
pub const BURSTY_LOSS: f64 = 5.0;
/// Random loss after the warm-up at or above this fraction makes one flow's rate the
/// controller's answer to loss (e.g. CUBIC at 1%: a few Mbit/s at 141 ms), a lower bound of
/// the path's rate rather than a reading of it.
pub const LOSS_BOUND: f64 = 0.005;

/// One direction's bulk TCP flow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Direction {
    /// Goodput (bit/s): bytes the sending end's kernel saw acknowledged over the steady
    /// interval (after the warm-up), so never above what was delivered.
    pub goodput_bit_s: f64,
    /// The steady interval's length (s) and the TCP_INFO readings within it.
    pub interval_s: f64,
    pub samples: usize,
    /// Goodput counted where the bytes arrived, over the whole flow, slow start included
    /// (bit/s).
    pub whole_goodput_bit_s: f64,
    /// The path's loss: retransmitted over sent segments after the warm-up, as a fraction
    /// (0.01 = 1 %); none without the sending end's readings.
    pub loss_fraction: Option<f64>,
    /// The same during the warm-up: mostly the probe's own slow start overflowing the
    /// bottleneck's queue, not the path's loss.
    pub warmup_loss_fraction: Option<f64>,
    /// Why these figures cannot be trusted (a short interval, a stalled flow, one RTT
    /// sample, …); empty when they can.
    pub unreliable: Vec<String>,
    /// The index of dispersion of the retransmits after the warm-up when they came in bursts
    /// (at least [`BURSTY_LOSS`]): the probe's own flow overflowing the bottleneck's queue, so
    /// `loss_fraction` is not the path's random loss. It says nothing against the goodput,
    /// which is the path's rate with a full queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_in_bursts: Option<f64>,
    /// Control round trips on a second connection while the flow ran (after its warm-up).
    pub loaded_rtt: RttSummary,
    /// The receiving end's counts and the sending end's TCP_INFO.
    pub bulk: BulkReport,
}

impl Direction {
    pub fn new(bulk: BulkReport, loaded: &[f64]) -> Direction {
        let mut why = Vec::new();
        let (goodput, interval, samples) = match &bulk.acked {
            Some(a) => {
                if a.interval_s < MIN_INTERVAL_S {
                    why.push(format!(
                        "the steady interval is {:.2} s (under {MIN_INTERVAL_S} s)",
                        a.interval_s
                    ));
                }
                if a.samples < MIN_SAMPLES {
                    why.push(format!("{} TCP_INFO readings only", a.samples));
                }
                if a.steady_loss() >= LOSS_BOUND
                    && a.steady_loss_dispersion.is_none_or(|d| d < BURSTY_LOSS)
                {
                    why.push(format!(
                        "it lost {:.2}% of its segments after the warm-up: one flow's rate at that loss is set by its controller, a lower bound of the path's rate",
                        a.steady_loss() * 100.0
                    ));
                }
                if a.longest_stall_s >= STALL_S {
                    why.push(format!(
                        "the flow stalled for {:.1} s (nothing acknowledged)",
                        a.longest_stall_s
                    ));
                }
                (a.goodput_bit_s, a.interval_s, a.samples)
            }
            None => {
                why.push("no acknowledged-bytes readings from the sending end".into());
                (0.0, 0.0, 0)
            }
        };
        if let Some(t) = &bulk.sender_tcp {
            let flow_ms = bulk.seconds * 1e3;
            for (limit, ms) in [
                ("the receive window", t.rwnd_limited_ms),
                ("the sending end's buffer", t.sndbuf_limited_ms),
            ] {
                if flow_ms > 0.0 && ms / flow_ms >= WINDOW_HELD {
                    why.push(format!(
                        "the flow was held by {limit} {:.0}% of its time: a window's rate, not the path's",
                        ms / flow_ms * 100.0
                    ));
                }
            }
        }
        let rtt = RttSummary::of(loaded);
        if rtt.probes < 2 {
            why.push(format!("{} RTT sample(s) under load", rtt.probes));
        }
        Direction {
            goodput_bit_s: goodput,
            interval_s: interval,
            samples,
            whole_goodput_bit_s: bulk.whole_goodput_bps(),
            loss_fraction: bulk.acked.as_ref().map(|a| a.steady_loss()),
            warmup_loss_fraction: bulk.acked.as_ref().map(|a| a.warmup_loss()),
            unreliable: why,
            loss_in_bursts: bulk.acked.as_ref().and_then(|a| {
                a.steady_loss_dispersion
                    .filter(|d| *d >= BURSTY_LOSS && a.steady_loss() > 0.0)
            }),
            loaded_rtt: rtt,
            bulk,
        }
    }

    /// Why the loss after the warm-up is not the path's random loss, when it is not.
    pub fn loss_note(&self) -> Option<String> {
        self.loss_in_bursts.map(|d| {
            format!(
                "it came in bursts after the warm-up (dispersion {d:.1}; about 1 for random loss): the probe's own queue overflow, not the path's random loss"
            )
        })
    }

    /// Goodput in Mbit/s (10^6 bit/s).
    pub fn goodput_mbit_s(&self) -> f64 {
        self.goodput_bit_s / 1e6
    }
}

/// One probe of the path through the receiving host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathProbe {
    /// The receiver probed (`HOST:PORT`).
    pub receiver: String,
    /// UTC time the probe started.
    pub at: String,
    pub idle_rtt: RttSummary,
    /// The control connection's own smoothed-RTT floor as this host's kernel saw it
    /// (`tcpi_min_rtt`), a cross-check on `idle_rtt`.
    pub kernel_min_rtt_ms: f64,
    /// This host → the receiving host.
    pub up: Direction,
    /// The receiving host → this host.
    pub down: Direction,
}

impl PathProbe {
    /// A few lines for people.
    pub fn text(&self) -> String {
        let r = &self.idle_rtt;
        let mut s = format!(
            "path to {} ({}):\n  idle RTT        {:.2} ms min, {:.2} ms median, {:.2} ms max ({} control round trips; kernel min_rtt {:.2} ms)\n",
            self.receiver, self.at, r.min_ms, r.median_ms, r.max_ms, r.probes, self.kernel_min_rtt_ms
        );
        for (name, d) in [
            ("this → receiver", &self.up),
            ("receiver → this", &self.down),
        ] {
            let loss = match (d.loss_fraction, &d.bulk.acked) {
                (Some(l), Some(a)) => format!(
                    "loss {:.3}% after the warm-up ({} of {} segments retransmitted; {:.3}% in the warm-up, the probe's own overshoot of the queue)",
                    l * 100.0,
                    a.steady_retransmits,
                    a.steady_segments,
                    d.warmup_loss_fraction.unwrap_or(0.0) * 100.0
                ),
                _ => "loss not read (no TCP_INFO readings at the sending end)".into(),
            };
            let l = &d.loaded_rtt;
            s += &format!(
                "  {name} {:.2} Mbit/s acknowledged over {:.2} s after a {:.1} s warm-up ({} readings; {:.2} Mbit/s arrived over all {:.1} s), {loss}, RTT under load {:.2} ms median ({:.2}–{:.2} ms, {} round trips)\n",
                d.goodput_mbit_s(),
                d.interval_s,
                d.bulk.warmup,
                d.samples,
                d.whole_goodput_bit_s / 1e6,
                d.bulk.seconds,
                l.median_ms,
                l.min_ms,
                l.max_ms,
                l.probes
            );
            if let Some(why) = d.loss_note() {
                s += &format!("    loss: {why}\n");
            }
            if !d.unreliable.is_empty() {
                s += &format!("    unreliable: {}\n", d.unreliable.join("; "));
            }
        }
        s
    }
}

/// How the path changed from `start` to `end`: one line per figure outside its tolerance
/// (idle RTT ±10 %, goodput each way ±20 %); empty when it held.
pub fn changes(start: &PathProbe, end: &PathProbe) -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |what: &str, unit: &str, a: f64, b: f64, tol: f64| {
        if a > 0.0 && ((b - a) / a).abs() > tol {
            out.push(format!(
                "{what} changed from {a:.2} {unit} to {b:.2} {unit} ({:+.0}%, more than ±{:.0}%)",
                (b - a) / a * 100.0,
                tol * 100.0
            ));
        }
    };
    check(
        "idle RTT (min)",
        "ms",
        start.idle_rtt.min_ms,
        end.idle_rtt.min_ms,
        RTT_TOLERANCE,
    );
    check(
        "goodput this → receiver",
        "Mbit/s",
        start.up.goodput_mbit_s(),
        end.up.goodput_mbit_s(),
        GOODPUT_TOLERANCE,
    );
    check(
        "goodput receiver → this",
        "Mbit/s",
        start.down.goodput_mbit_s(),
        end.down.goodput_mbit_s(),
        GOODPUT_TOLERANCE,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(rtt: f64, up: f64, down: f64) -> PathProbe {
        let mut p = PathProbe {
            idle_rtt: RttSummary::of(&[rtt, rtt + 1.0]),
            ..Default::default()
        };
        p.up.goodput_bit_s = up * 1e6;
        p.down.goodput_bit_s = down * 1e6;
        p
    }

    #[test]
    fn a_flow_held_by_a_window_is_unreliable_as_the_paths_rate() {
        let mut bulk = BulkReport {
            seconds: 3.0,
            ..Default::default()
        };
        bulk.sender_tcp = Some(shoal_proto::probe::SenderTcp {
            rwnd_limited_ms: 2400.0,
            ..Default::default()
        });
        let d = Direction::new(bulk, &[40.0, 41.0]);
        assert!(
            d.unreliable
                .iter()
                .any(|w| w.contains("held by the receive window 80%")),
            "{:?}",
            d.unreliable
        );
    }

    #[test]
    fn loss_in_bursts_is_named_and_leaves_the_goodput_standing() {
        let acked = |dispersion| shoal_proto::probe::AckedFlow {
            bytes: 15_000_000,
            interval_s: 2.5,
            samples: 50,
            goodput_bit_s: 48e6,
            steady_retransmits: 37,
            steady_segments: 14_511,
            steady_loss_dispersion: Some(dispersion),
            ..Default::default()
        };
        let direction = |dispersion| {
            let bulk = BulkReport {
                seconds: 3.5,
                acked: Some(acked(dispersion)),
                ..Default::default()
            };
            Direction::new(bulk, &[40.0, 41.0])
        };
        let bursty = direction(34.7);
        assert_eq!(bursty.unreliable, Vec::<String>::new());
        assert_eq!(bursty.loss_in_bursts, Some(34.7));
        assert!(bursty.loss_note().unwrap().contains("queue overflow"));
        let even = direction(1.1);
        assert_eq!((even.loss_in_bursts, even.loss_note()), (None, None));
    }

    #[test]
    fn rtt_summary_takes_min_median_max() {
        let r = RttSummary::of(&[3.0, 1.0, 2.0, 10.0]);
        assert_eq!(
            (r.probes, r.min_ms, r.median_ms, r.max_ms),
            (4, 1.0, 2.5, 10.0)
        );
        let odd = RttSummary::of(&[5.0, 1.0, 2.0]);
        assert_eq!(odd.median_ms, 2.0);
        assert_eq!(RttSummary::of(&[]), RttSummary::default());
    }

    #[test]
    fn a_path_within_tolerance_is_not_flagged() {
        let a = probe(40.0, 100.0, 90.0);
        let b = probe(43.9, 81.0, 107.0);
        assert!(changes(&a, &b).is_empty(), "{:?}", changes(&a, &b));
    }

    #[test]
    fn rtt_over_10_and_goodput_over_20_percent_are_flagged() {
        let a = probe(40.0, 100.0, 90.0);
        let b = probe(44.5, 79.0, 90.0);
        let c = changes(&a, &b);
        assert_eq!(c.len(), 2, "{c:?}");
        assert!(c[0].starts_with("idle RTT (min) changed from 40.00 ms to 44.50 ms (+11%"));
        assert!(
            c[1].contains("this → receiver") && c[1].contains("-21%"),
            "{c:?}"
        );
        // A start that measured nothing cannot say what changed.
        assert!(changes(&PathProbe::default(), &b).is_empty());
    }
}
