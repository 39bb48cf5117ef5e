//! The run's peak delivery rate: the highest rate of newly acknowledged bytes, summed over the
//! run's connections, over any window of at least one min RTT and never less than
//! [`MIN_WINDOW`]. The path state saves it (`path_state::PathRecord`) as the capacity the path
//! carried at its best: a run's whole-run goodput includes its own slow start and tail, so it
//! understates the path (1.9–5.1 MB saved on a 17.6 MB path, docs/resume.md).
//!
//! Why a window of at least one RTT and 100 ms: acknowledgements arrive in bursts (a delayed
//! ACK, a batch the receiver's stack coalesced, the sender's own loop catching up), and bytes
//! acknowledged within a few ms are no evidence of a rate. Over a round trip the acknowledged
//! bytes are what the path delivered in that round trip; over less, a burst would count as a
//! rate the path never carried, and the jump (half the saved window) would be sent as loss.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::stats_handle::StatsHandle;

/// The shortest window a rate is measured over, whatever the RTT.
pub const MIN_WINDOW: Duration = Duration::from_millis(100);

/// How often the tracker reads the connections' acknowledged bytes. Finer than the window, so
/// a window spans at most a tick more than asked.
const TICK: Duration = Duration::from_millis(20);

/// Samples of acknowledged bytes (summed over connections) against the run's clock.
#[derive(Debug, Default, Clone)]
pub struct AckSeries {
    /// (seconds since the run's start, bytes acknowledged so far); times never go back.
    samples: Vec<(f64, u64)>,
    /// The lowest non-zero min RTT any connection reported, seconds.
    min_rtt: Option<f64>,
}

impl AckSeries {
    /// Adds a sample; `acked` is the running total (a total below the previous one is taken as
    /// the previous: the counters only grow).
    pub fn push(&mut self, t: f64, acked: u64, min_rtt: Option<f64>) {
        let acked = self.samples.last().map_or(acked, |&(_, a)| a.max(acked));
        match self.samples.last() {
            Some(&(t0, _)) if t < t0 => {}
            _ => self.samples.push((t, acked)),
        }
        if let Some(r) = min_rtt.filter(|&r| r > 0.0) {
            self.min_rtt = Some(self.min_rtt.map_or(r, |m: f64| m.min(r)));
        }
    }

    /// The window the peak is measured over: the lowest min RTT seen, at least [`MIN_WINDOW`].
    pub fn window(&self) -> f64 {
        self.min_rtt.unwrap_or(0.0).max(MIN_WINDOW.as_secs_f64())
    }

    /// The peak delivery rate, bytes/s (`None`: the samples never span a window, or nothing was
    /// acknowledged).
    pub fn peak(&self) -> Option<u64> {
        peak_rate(&self.samples, self.window())
    }
}

/// The highest (acked_j − acked_i) / (t_j − t_i) over sample pairs at least `window` seconds
/// apart, taking for each later sample the latest earlier one that is far enough back (the
/// shortest span of at least `window`). Samples are in time order.
pub fn peak_rate(samples: &[(f64, u64)], window: f64) -> Option<u64> {
    let mut best: Option<f64> = None;
    let mut i = 0;
    for (j, &(tj, aj)) in samples.iter().enumerate() {
        // Advance i while the next sample would still leave a span of at least `window`.
        while i + 1 < j && tj - samples[i + 1].0 >= window {
            i += 1;
        }
        let (ti, ai) = samples[i];
        let span = tj - ti;
        if i < j && span >= window && span > 0.0 {
            let rate = aj.saturating_sub(ai) as f64 / span;
            best = Some(best.map_or(rate, |b| b.max(rate)));
        }
    }
    best.filter(|&r| r > 0.0).map(|r| r.round() as u64)
}

/// Reads every connection's acknowledged bytes every [`TICK`] while the run lasts.
pub(crate) struct PeakTracker {
    stop: oneshot::Sender<()>,
    task: JoinHandle<AckSeries>,
}

/// Starts tracking the connections in `probes` (they register as they connect) against the
/// run's clock `t0`.
pub(crate) fn spawn(probes: Arc<Mutex<Vec<(u16, StatsHandle)>>>, t0: Instant) -> PeakTracker {
    let (stop, mut stopped) = oneshot::channel();
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut series = AckSeries::default();
        // Each connection's highest count: a connection whose statistics cannot be read
        // any more (0) does not take its bytes back out of the sum.
        let mut per_conn: HashMap<u16, u64> = HashMap::new();
        loop {
            let last = tokio::select! {
                _ = tick.tick() => false,
                _ = &mut stopped => true,
            };
            let snapshot: Vec<(u16, StatsHandle)> = probes.lock().expect("probes").clone();
            let mut min_rtt: Option<f64> = None;
            for (conn, probe) in snapshot {
                let s = probe.stats();
                let e = per_conn.entry(conn).or_default();
                *e = (*e).max(s.bytes_acked);
                if s.min_rtt_ms > 0.0 {
                    let r = s.min_rtt_ms / 1e3;
                    min_rtt = Some(min_rtt.map_or(r, |m: f64| m.min(r)));
                }
            }
            let t = t0.elapsed().as_secs_f64();
            series.push(t, per_conn.values().sum(), min_rtt);
            if last {
                return series;
            }
        }
    });
    PeakTracker { stop, task }
}

impl PeakTracker {
    /// Takes a last sample and returns the run's peak delivery rate, bytes/s.
    pub(crate) async fn stop(self) -> Option<u64> {
        let _ = self.stop.send(());
        self.task.await.ok().and_then(|s| s.peak())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples every `dt` s of a flow acknowledging `rate(t)` bytes/s.
    fn series(dt: f64, until: f64, rate: impl Fn(f64) -> f64) -> AckSeries {
        let mut s = AckSeries::default();
        let (mut t, mut acked) = (0.0, 0.0);
        while t <= until + 1e-9 {
            s.push(t, acked as u64, Some(0.141));
            acked += rate(t) * dt;
            t += dt;
        }
        s
    }

    #[test]
    fn a_slow_start_ramp_then_a_plateau_gives_the_plateau_rate() {
        // Doubling every 141 ms RTT from 100 kB/s up to 125 MB/s, then flat for 0.5 s: the
        // whole-run average is far below the plateau, the peak is the plateau.
        let plateau = 125e6;
        let ramp_end = 0.141 * (plateau / 1e5f64).log2();
        let s = series(0.02, ramp_end + 0.5, |t| {
            (1e5 * 2f64.powf(t / 0.141)).min(plateau)
        });
        assert!((s.window() - 0.141).abs() < 1e-12, "the min RTT");
        let peak = s.peak().unwrap() as f64;
        assert!(
            (peak - plateau).abs() / plateau < 0.01,
            "peak {peak} vs plateau {plateau}"
        );
        let (t_end, total) = *s.samples.last().unwrap();
        let average = total as f64 / t_end;
        assert!(average < 0.5 * plateau, "average {average}");
    }

    #[test]
    fn a_burst_of_acks_shorter_than_the_window_does_not_raise_it() {
        // 10 MB/s steady, sampled every 20 ms, with 3 MB acknowledged within one 20 ms tick
        // (150 MB/s over the tick): over the 100 ms window the burst adds 3 MB / ≥ 100 ms at
        // most, never its own instantaneous rate.
        let mut s = AckSeries::default();
        let mut acked = 0u64;
        for k in 0..=50 {
            let t = f64::from(k) * 0.02;
            s.push(t, acked, Some(0.04));
            acked += 200_000;
            if k == 25 {
                acked += 3_000_000;
            }
        }
        assert_eq!(s.window(), 0.1, "at least 100 ms at a 40 ms RTT");
        let peak = s.peak().unwrap();
        // Steady 10 MB/s plus the 3 MB spread over the 100 ms window: 40 MB/s, not 150.
        assert!(peak <= 40_000_001, "{peak}");
        assert!(peak >= 10_000_000, "{peak}");
        // Without the burst it is exactly the steady rate.
        let steady = series(0.02, 1.0, |_| 10e6);
        let p = steady.peak().unwrap();
        assert!((p as f64 - 10e6).abs() < 1e3, "{p}");
    }

    #[test]
    fn no_window_no_peak() {
        let mut s = AckSeries::default();
        s.push(0.0, 0, Some(0.141));
        s.push(0.1, 1_000_000, Some(0.141));
        assert_eq!(s.peak(), None, "0.1 s never spans a 141 ms window");
        assert_eq!(
            series(0.02, 1.0, |_| 0.0).peak(),
            None,
            "nothing acknowledged"
        );
        // A count that goes back (statistics no longer readable) does not count negatively.
        let mut s = AckSeries::default();
        s.push(0.0, 0, None);
        s.push(0.2, 2_000_000, None);
        s.push(0.4, 0, None);
        assert_eq!(s.peak(), Some(10_000_000));
    }
}
