//! The time model of a transfer: handshake and the last round trip + slow-start rounds (or a
//! saved window's start) + bytes at the rate the window allows + files × a per-file cost
//! fitted on the sample; and the common tools priced from the same figures.

use crate::flags::Args;
use crate::obs::{ArmKind, ArmObs, FloorRate, Observations};
use crate::verdict::ToolEstimate;

/// Round trips before the first byte of data: TCP's handshake and TLS 1.3's.
pub const HANDSHAKE_RTTS: f64 = 2.0;
/// Round trips before data for QUIC (transport and TLS together).
pub const QUIC_HANDSHAKE_RTTS: f64 = 1.0;
/// Round trips after the last byte is sent: it reaches the receiver, and the completion
/// report comes back (the clock stops on it).
pub const FINAL_RTTS: f64 = 1.0;
/// What a saved start window costs over an oracle start, in round trips: its first flight,
/// half the saved window paced over one RTT, carries half of what the path could (a saved
/// window of the path's BDP); Careful Resume (`--resume`, RFC 9959) first spends one RTT of
/// Reconnaissance. As scripts/startup-floor.py's start rule.
pub const SAVED_WINDOW_RTTS: f64 = 0.5;
/// Careful Resume's Reconnaissance: the jump waits for the first flight's acknowledgement.
pub const RECONNAISSANCE_RTTS: f64 = 1.0;
/// The initial congestion window (10 segments of 1448 bytes, RFC 6928).
pub const INITIAL_WINDOW_BYTES: f64 = 14_480.0;
/// One SSH channel's window: what tar | ssh and rsync keep in flight per round trip.
pub const SSH_WINDOW_BYTES: f64 = 2.0 * 1024.0 * 1024.0;
/// Bytes tar adds per file: a 512-byte header, and on average half a 512-byte block of padding.
pub const TAR_BYTES_PER_FILE: f64 = 768.0;
/// Bytes of rsync's file list per file (name, size, times, mode).
pub const RSYNC_LIST_BYTES_PER_FILE: f64 = 100.0;

/// The path figures every estimate uses.
#[derive(Debug, Clone)]
pub struct PathFigures {
    /// Idle RTT (s).
    pub rtt_s: f64,
    /// The path's rate sender → receiver (bit/s): the probe's bulk goodput, or the fastest
    /// arm's goodput on the sample when that is higher (a probe flow held back by a small
    /// window or by loss understates the path).
    pub rate_bps: f64,
    /// Bandwidth-delay product at that rate (bytes), at least the probe's.
    pub bdp_bytes: f64,
    /// The arm whose goodput raised the rate above the probe's, if one did.
    pub raised_by: Option<ArmKind>,
}

impl PathFigures {
    /// The figures, when the probe measured the RTT and the probe or an arm a rate.
    pub fn of(obs: &Observations) -> Option<PathFigures> {
        let rtt_s = obs.path.idle_rtt_ms? / 1000.0;
        let probe = obs.path.goodput_to_receiver_bits_per_s.unwrap_or(0.0);
        let bytes = obs.sample.sample_bytes as f64 * 8.0;
        let best = obs
            .arms
            .iter()
            .filter(|a| a.measured() && a.kind != ArmKind::PerFileWait)
            .filter_map(|a| Some((bytes / a.median_s().filter(|t| *t > 0.0)?, a)))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let (rate_bps, raised_by) = match best {
            Some((r, a)) if r > probe => (r, Some(a.kind.clone())),
            _ => (probe, None),
        };
        if !(rtt_s > 0.0 && rate_bps > 0.0) {
            return None;
        }
        let bdp_bytes = (rate_bps * rtt_s / 8.0).max(obs.path.bdp_bytes.unwrap_or(0) as f64);
        Some(PathFigures {
            rtt_s,
            rate_bps,
            bdp_bytes,
            raised_by,
        })
    }

    /// Round trips slow start takes to reach `window` bytes in flight.
    pub fn slow_start_rounds(&self, window: f64) -> f64 {
        if window <= INITIAL_WINDOW_BYTES {
            0.0
        } else {
            (window / INITIAL_WINDOW_BYTES + 1.0).log2().ceil()
        }
    }

    /// Time slow start adds over sending `bytes` at the full rate, for a window that grows
    /// to `window` bytes (s).
    pub fn slow_start_extra_s(&self, bytes: f64, window: f64) -> f64 {
        let target = window.min(bytes);
        let rounds = self.slow_start_rounds(target);
        let sent = (INITIAL_WINDOW_BYTES * (2f64.powf(rounds) - 1.0)).min(bytes);
        (rounds * self.rtt_s - sent * 8.0 / self.rate_bps).max(0.0)
    }
}

/// The smaller of the kernels' autotuning maxima: the sender's `tcp_wmem` max and the
/// receiver's `tcp_rmem` max (bytes).
pub fn kernel_window_cap(obs: &Observations) -> Option<u64> {
    let s = obs.path.sender_buffers.tcp_wmem.map(|m| m[2]);
    let r = obs.path.receiver_buffers.tcp_rmem.map(|m| m[2]);
    match (s, r) {
        (Some(s), Some(r)) => Some(s.min(r)),
        (s, r) => s.or(r),
    }
}

/// The window one TCP flow can keep in flight under the kernels' autotuning maxima (bytes):
/// about half the receiver's `tcp_rmem` max (the rest is kept for overhead, the default
/// `tcp_adv_win_scale`) and at most the sender's `tcp_wmem` max.
pub fn usable_tcp_window(obs: &Observations) -> Option<u64> {
    let s = obs.path.sender_buffers.tcp_wmem.map(|m| m[2]);
    let r = obs.path.receiver_buffers.tcp_rmem.map(|m| m[2] / 2);
    match (s, r) {
        (Some(s), Some(r)) => Some(s.min(r)),
        (s, r) => s.or(r),
    }
}

/// The number of connections an argument list asks for (1 when it does not say).
pub fn connections(flags: &[String]) -> f64 {
    Args::parse(flags)
        .options
        .iter()
        .find(|(n, _)| n == "connections")
        .and_then(|(_, v)| v.as_deref()?.parse::<f64>().ok())
        .unwrap_or(1.0)
}

/// How a transfer's window opens, in the model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Start {
    /// Slow start from the initial window to [`Model::window_bytes`].
    Slow,
    /// From a saved window: what that costs over an oracle start (s), [`SAVED_WINDOW_RTTS`]
    /// and with `--resume` [`RECONNAISSANCE_RTTS`] too.
    Saved(f64),
    /// Left out: the fixed terms alone exceeded the run, which is scaled by its bytes.
    Unmodelled,
}

/// A transfer's time as a function of its files and bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Model {
    /// The round trips no start avoids (s): the handshake before the first byte and the one
    /// after the last ([`FINAL_RTTS`]).
    pub handshake_s: f64,
    /// How the window opens.
    pub start: Start,
    /// The window slow start grows to (bytes).
    pub window_bytes: f64,
    /// Rate once the window is open (bit/s).
    pub rate_bps: f64,
    /// Cost per file beyond the bytes (s), fitted.
    pub per_file_s: f64,
}

impl Model {
    /// Fits the model to one measured arm: the path's terms from the probe, the per-file
    /// cost from what is left of the arm's median time. When the path's terms alone exceed
    /// the median, the rate is lowered to fit instead.
    pub fn fit(obs: &Observations, arm: &ArmObs, p: &PathFigures) -> Option<Model> {
        let t = arm.median_s()?;
        let files = obs.sample.sample_files.max(1) as f64;
        let bytes = obs.sample.sample_bytes as f64;
        let quic = matches!(arm.kind, ArmKind::Quic | ArmKind::QuicStartWindow);
        let n = connections(&arm.flags);
        // The kernels' TCP maxima do not bound path-sized windows, nor QUIC's own.
        let cap = match (&arm.kind, kernel_window_cap(obs)) {
            (ArmKind::PathWindows | ArmKind::Quic | ArmKind::QuicStartWindow, _) | (_, None) => {
                f64::INFINITY
            }
            (_, Some(c)) => c as f64 * n,
        };
        let window_bytes = p.bdp_bytes.min(cap);
        let saved = matches!(arm.kind, ArmKind::Resume | ArmKind::QuicStartWindow);
        let resume = Args::parse(&arm.flags).has("resume");
        let mut m = Model {
            handshake_s: p.rtt_s
                * (FINAL_RTTS
                    + if quic {
                        QUIC_HANDSHAKE_RTTS
                    } else {
                        HANDSHAKE_RTTS
                    }),
            start: if saved {
                Start::Saved(
                    p.rtt_s * (SAVED_WINDOW_RTTS + if resume { RECONNAISSANCE_RTTS } else { 0.0 }),
                )
            } else {
                Start::Slow
            },
            window_bytes,
            rate_bps: p.rate_bps.min(window_bytes * 8.0 / p.rtt_s),
            per_file_s: 0.0,
        };
        let fixed = m.fixed_s(p, bytes);
        let left = t - fixed - bytes * 8.0 / m.rate_bps;
        if left >= 0.0 {
            m.per_file_s = left / files;
        } else if t > fixed && bytes > 0.0 {
            m.rate_bps = bytes * 8.0 / (t - fixed);
        } else {
            // The fixed terms alone exceed the run: scale the run by bytes instead.
            m.handshake_s = 0.0;
            m.start = Start::Unmodelled;
            m.rate_bps = if t > 0.0 { bytes * 8.0 / t } else { p.rate_bps };
        }
        Some(m)
    }

    fn fixed_s(&self, p: &PathFigures, bytes: f64) -> f64 {
        self.handshake_s + self.start_s(p, bytes)
    }

    /// What the start costs over an oracle start for `bytes` (s).
    pub fn start_s(&self, p: &PathFigures, bytes: f64) -> f64 {
        match self.start {
            Start::Slow => p.slow_start_extra_s(bytes, self.window_bytes),
            Start::Saved(s) => s,
            Start::Unmodelled => 0.0,
        }
    }

    /// Predicted time for `files` files of `bytes` bytes (s).
    pub fn predict(&self, p: &PathFigures, files: u64, bytes: u64) -> f64 {
        self.fixed_s(p, bytes as f64)
            + bytes as f64 * 8.0 / self.rate_bps
            + files as f64 * self.per_file_s
    }
}

/// Where one arm's median time went on the sample, by the fitted model (the parts add up to
/// the median): for the chart of `--out` (a stacked bar per configuration).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Breakdown {
    /// The handshake and the round trip after the last byte.
    pub handshake_s: f64,
    /// Slow start's rounds, or a saved window's start.
    pub slow_start_s: f64,
    /// The sample's bytes at the rate the window allows.
    pub at_rate_s: f64,
    /// The receiver's measured write wait, up to what the model leaves per file.
    pub receiver_writes_s: f64,
    /// The rest: per-file waits and costs the model does not split further.
    pub per_file_s: f64,
}

/// The parts of an arm's median time on the sample.
pub fn breakdown(obs: &Observations, arm: &ArmObs, p: &PathFigures) -> Option<Breakdown> {
    let m = Model::fit(obs, arm, p)?;
    let bytes = obs.sample.sample_bytes as f64;
    let slow_start_s = m.start_s(p, bytes);
    let rest = m.per_file_s * obs.sample.sample_files.max(1) as f64;
    let writes = arm
        .median_of(|r| r.receiver_write_wait_s)
        .unwrap_or(0.0)
        .clamp(0.0, rest);
    Some(Breakdown {
        handshake_s: m.handshake_s,
        slow_start_s,
        at_rate_s: bytes * 8.0 / m.rate_bps,
        receiver_writes_s: writes,
        per_file_s: rest - writes,
    })
}

/// Round trips below which a run may end before its controller reaches the path's rate.
pub const SHORT_RUN_RTTS: f64 = 30.0;

/// On a path that loses at least [`crate::LOSS_MIN`] of its packets, round trips below which
/// a run's rate is still its start's and recoveries' (1% random loss at 40 ms: BBR moved a
/// 2.6 MiB sample at 12 Mbit/s in 46 round trips and the 78 MiB tree at 46 Mbit/s).
pub const LOSSY_RUN_RTTS: f64 = 200.0;

/// Why the whole-tree prediction from `arm` cannot be trusted, if so: the path's rate came
/// from an arm's own goodput on the sample (the probe's was lower, as a lossy or window-held
/// probe's is), in a run of fewer than [`SHORT_RUN_RTTS`] round trips, so that rate is likely
/// still a start's and the tree's time is extrapolated from it; or the path is lossy and the
/// predicting arm's run lasted fewer than [`LOSSY_RUN_RTTS`]. A floor that binds the whole
/// tree is measured without the network and stands.
pub fn prediction_doubt(
    arm: &ArmObs,
    p: &PathFigures,
    floors: &[FloorRate],
    obs: &Observations,
) -> Option<String> {
    let (files, bytes) = (obs.sample.tree_files, obs.sample.tree_bytes);
    let floor = floors
        .iter()
        .filter_map(|f| f.seconds_for(files, bytes))
        .fold(0.0, f64::max);
    if Model::fit(obs, arm, p)?.predict(p, files, bytes) <= floor {
        return None;
    }
    short_rate_run(p, obs).or_else(|| lossy_run(arm, p, obs))
}

/// The path's rate came from an arm's own goodput in a run under [`SHORT_RUN_RTTS`].
fn short_rate_run(p: &PathFigures, obs: &Observations) -> Option<String> {
    let by = p.raised_by.as_ref()?;
    let t = obs
        .arms
        .iter()
        .find(|a| &a.kind == by && a.measured())?
        .median_s()?;
    let rtts = t / p.rtt_s;
    (rtts < SHORT_RUN_RTTS).then(|| {
        format!(
            "the path's rate ({}) is {}'s own goodput on the sample, in a run of {} ({rtts:.0} round trips, under {SHORT_RUN_RTTS:.0}): a run that short may end before its controller reaches the path's rate, so the whole tree may go faster than predicted; a larger --budget samples more",
            crate::fmt::rate(p.rate_bps),
            by.label(),
            crate::fmt::secs(t),
        )
    })
}

/// The path is lossy and the predicting arm ran under [`LOSSY_RUN_RTTS`].
fn lossy_run(arm: &ArmObs, p: &PathFigures, obs: &Observations) -> Option<String> {
    let loss = obs.path.loss_to_receiver.path_loss()?;
    let t = arm.median_s()?;
    let rtts = t / p.rtt_s;
    (loss >= crate::LOSS_MIN && rtts < LOSSY_RUN_RTTS).then(|| {
        format!(
            "the path loses {} of its packets to the receiver, and {}'s run of {} ({rtts:.0} round trips, under {LOSSY_RUN_RTTS:.0}) is where the prediction scales from: on a lossy path a short run's rate depends on where the losses fell in its start and recovery, so the whole tree may go faster or slower than predicted; a larger --budget samples more",
            crate::fmt::pct(loss),
            arm.kind.label(),
            crate::fmt::secs(t),
        )
    })
}

/// The whole tree's time for a measured arm: the fitted model, or the floors that bind the
/// whole tree (reading it as found, writing it) when those are slower.
pub fn predict_tree(
    obs: &Observations,
    arm: &ArmObs,
    p: Option<&PathFigures>,
    floors: &[FloorRate],
) -> Option<f64> {
    let (files, bytes) = (obs.sample.tree_files, obs.sample.tree_bytes);
    let model = match p {
        Some(p) => Model::fit(obs, arm, p)?.predict(p, files, bytes),
        None => {
            // No path figures: scale the run by the tree's size over the sample's.
            let t = arm.median_s()?;
            let scale = if obs.sample.sample_bytes > 0 {
                bytes as f64 / obs.sample.sample_bytes as f64
            } else {
                files as f64 / obs.sample.sample_files.max(1) as f64
            };
            t * scale
        }
    };
    let floor = floors
        .iter()
        .filter_map(|f| f.seconds_for(files, bytes))
        .fold(0.0, f64::max);
    Some(model.max(floor))
}

/// What common tools would take on this path for the whole tree, from the probe's RTT and
/// rate and the ends' floors: estimates from the model, not runs.
pub fn common_tools(
    obs: &Observations,
    p: &PathFigures,
    floors: &[FloorRate],
) -> Vec<ToolEstimate> {
    let files = obs.sample.tree_files as f64;
    let bytes = obs.sample.tree_bytes as f64;
    let floor = floors
        .iter()
        .filter_map(|f| f.seconds_for(obs.sample.tree_files, obs.sample.tree_bytes))
        .fold(0.0, f64::max);
    let rtt = p.rtt_s;
    let ssh_rate = p.rate_bps.min(SSH_WINDOW_BYTES * 8.0 / rtt);
    let rate = crate::fmt::rate(p.rate_bps);
    let ssh = crate::fmt::rate(ssh_rate);
    let rtt_text = crate::fmt::secs(rtt);
    let floor_note = if floor > 0.0 {
        format!("; not below the ends' floors ({})", crate::fmt::secs(floor))
    } else {
        String::new()
    };
    let sftp = 3.0 * rtt + files * rtt + bytes * 8.0 / p.rate_bps;
    let tar_bytes = bytes + files * TAR_BYTES_PER_FILE;
    let tar = 3.0 * rtt + tar_bytes * 8.0 / ssh_rate;
    let rsync = tar + 2.0 * rtt + files * RSYNC_LIST_BYTES_PER_FILE * 8.0 / ssh_rate;
    let est = "an estimate from the model, not a run";
    vec![
        ToolEstimate {
            tool: "sftp / scp (one round trip per file)".into(),
            predicted_seconds: sftp.max(floor),
            why: format!(
                "{est}: {files} files × {rtt_text} RTT + the bytes at {rate}{floor_note}",
                files = obs.sample.tree_files
            ),
        },
        ToolEstimate {
            tool: "tar | ssh".into(),
            predicted_seconds: tar.max(floor),
            why: format!(
                "{est}: one SSH channel window (2 MiB per RTT) allows {ssh}; tar adds a \
                 512-byte header and padding per file{floor_note}"
            ),
        },
        ToolEstimate {
            tool: "rsync over ssh".into(),
            predicted_seconds: rsync.max(floor),
            why: format!(
                "{est}: as tar | ssh ({ssh}), plus its file list (~100 B per file) and a \
                 round trip to exchange it{floor_note}"
            ),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::obs::{PathObs, SampleObs};

    fn obs(files: u64, bytes: u64) -> Observations {
        Observations {
            path: PathObs {
                idle_rtt_ms: Some(141.0),
                goodput_to_receiver_bits_per_s: Some(100e6),
                ..PathObs::default()
            },
            sample: SampleObs {
                sample_files: files,
                sample_bytes: bytes,
                tree_files: files * 16,
                tree_bytes: bytes * 16,
                sizes: None,
            },
            ..Observations::default()
        }
    }

    /// A TCP run that follows the model exactly, with a per-file cost of 1 ms: slow start
    /// (`ss`), else a saved window's first flight.
    fn modelled(p: &PathFigures, files: u64, bytes: u64, ss: bool) -> f64 {
        let start = if ss {
            p.slow_start_extra_s(bytes as f64, p.bdp_bytes)
        } else {
            SAVED_WINDOW_RTTS * p.rtt_s
        };
        (HANDSHAKE_RTTS + FINAL_RTTS) * p.rtt_s
            + start
            + bytes as f64 * 8.0 / p.rate_bps
            + files as f64 * 1e-3
    }

    #[test]
    fn the_fit_reproduces_the_sample_and_scales_to_the_tree() {
        let o = obs(4096, 16 << 20);
        let p = PathFigures::of(&o).unwrap();
        let t = modelled(&p, 4096, 16 << 20, true);
        let arm = ArmObs::with_seconds(ArmKind::Base, &[], &[t]);
        let m = Model::fit(&o, &arm, &p).unwrap();
        assert!((m.per_file_s - 1e-3).abs() < 1e-9, "{m:?}");
        assert!((m.predict(&p, 4096, 16 << 20) - t).abs() < 1e-9);
        let tree = predict_tree(&o, &arm, Some(&p), &[]).unwrap();
        let want = modelled(&p, 4096 * 16, 256 << 20, true);
        assert!((tree - want).abs() < 1e-6, "{tree} {want}");
    }

    #[test]
    fn the_breakdown_adds_up_to_the_median() {
        let o = obs(4096, 16 << 20);
        let p = PathFigures::of(&o).unwrap();
        let t = modelled(&p, 4096, 16 << 20, true);
        let mut arm = ArmObs::with_seconds(ArmKind::Base, &[], &[t]);
        arm.runs[0].receiver_write_wait_s = Some(1.0);
        let b = breakdown(&o, &arm, &p).unwrap();
        let sum = b.handshake_s + b.slow_start_s + b.at_rate_s + b.receiver_writes_s + b.per_file_s;
        assert!((sum - t).abs() < 1e-9, "{b:?}");
        assert!((b.receiver_writes_s - 1.0).abs() < 1e-12 && b.slow_start_s > 0.0);
    }

    #[test]
    fn a_saved_window_saves_slow_start_once_not_per_file() {
        let o = obs(4096, 16 << 20);
        let p = PathFigures::of(&o).unwrap();
        let base = ArmObs::with_seconds(ArmKind::Base, &[], &[modelled(&p, 4096, 16 << 20, true)]);
        let resume =
            ArmObs::with_seconds(ArmKind::Resume, &[], &[modelled(&p, 4096, 16 << 20, false)]);
        let saved = predict_tree(&o, &base, Some(&p), &[]).unwrap()
            - predict_tree(&o, &resume, Some(&p), &[]).unwrap();
        let ss = p.slow_start_extra_s((256u64 << 20) as f64, p.bdp_bytes);
        let first_flight = SAVED_WINDOW_RTTS * p.rtt_s;
        assert!(
            ss > 0.5 && (saved - (ss - first_flight)).abs() < 1e-6,
            "{saved} {ss}"
        );
        // Careful Resume spends a round trip of Reconnaissance more.
        let careful = ArmObs::with_seconds(
            ArmKind::QuicStartWindow,
            &["--mode", "quic-bundle", "--resume"],
            &[10.0],
        );
        let m = Model::fit(&o, &careful, &p).unwrap();
        let rtts = (SAVED_WINDOW_RTTS + RECONNAISSANCE_RTTS) * p.rtt_s;
        assert_eq!(m.start, Start::Saved(rtts), "{m:?}");
    }

    #[test]
    fn sftp_pays_a_round_trip_per_file() {
        let o = obs(4096, 16 << 20);
        let p = PathFigures::of(&o).unwrap();
        let tools = common_tools(&o, &p, &[]);
        let rtts = 65536.0 * 0.141;
        assert!(tools[0].predicted_seconds > rtts && tools[0].predicted_seconds < rtts + 30.0);
        // One SSH window per RTT: 2 MiB / 141 ms = 119 Mbit/s, above the link's 100.
        let bytes = (256u64 << 20) as f64 + 65536.0 * TAR_BYTES_PER_FILE;
        assert!((tools[1].predicted_seconds - (3.0 * 0.141 + bytes * 8.0 / 100e6)).abs() < 1e-6);
    }
}
