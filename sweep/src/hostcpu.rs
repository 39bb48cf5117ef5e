//! How busy the whole machine was during a run, sampled from `/proc/stat`. On one machine the
//! sender, the receiver and the link emulator share the same cores, so a per-process CPU total
//! over the run cannot say whether the cores were saturated while the data flowed (a run also
//! has an idle slow-start phase). The 90th percentile of 100 ms samples can, and so can the
//! share of samples in which every core was busy.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use shoal_row::metrics::wall_clock_us;

/// A core counts as busy in a sample when at least this share of its time was neither idle
/// nor iowait (with 100 ms samples and 10 ms jiffies: 9 of 10).
pub const CORE_BUSY: f64 = 0.9;

/// Busy and total jiffies of all cores together, the number of cores, and each core's own.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuTimes {
    pub busy: u64,
    pub total: u64,
    pub cores: usize,
    /// (busy, total) of each `cpuN` line.
    pub per_core: Vec<(u64, u64)>,
}

/// Busy and total jiffies of one `cpu…` line (user nice system idle iowait irq softirq steal;
/// guest time is already in user). Idle and iowait count as not busy.
fn busy_total(line: &str) -> Option<(u64, u64)> {
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 5 {
        return None;
    }
    let total: u64 = v.iter().sum();
    Some((total - v[3] - v[4], total))
}

/// Parses `/proc/stat`: the aggregate `cpu` line and every `cpuN` line.
pub fn parse_proc_stat(text: &str) -> Option<CpuTimes> {
    let mut lines = text.lines();
    let first = lines.next()?;
    if first.split_whitespace().next()? != "cpu" {
        return None;
    }
    let (busy, total) = busy_total(first)?;
    let per_core: Vec<(u64, u64)> = lines
        .take_while(|l| l.starts_with("cpu"))
        .filter(|l| l[3..].starts_with(|c: char| c.is_ascii_digit()))
        .filter_map(busy_total)
        .collect();
    Some(CpuTimes {
        busy,
        total,
        cores: per_core.len().max(1),
        per_core,
    })
}

fn read() -> Option<CpuTimes> {
    parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Busy cores between two readings (0 ..= cores).
pub fn busy_cores(a: &CpuTimes, b: &CpuTimes) -> Option<f64> {
    let total = b.total.checked_sub(a.total)?;
    let busy = b.busy.checked_sub(a.busy)?;
    (total > 0).then(|| busy as f64 / total as f64 * b.cores as f64)
}

/// Whether every core was busy (at least [`CORE_BUSY`] of its time) between two readings.
pub fn every_core_busy(a: &CpuTimes, b: &CpuTimes) -> Option<bool> {
    if a.per_core.len() != b.per_core.len() || a.per_core.is_empty() {
        return None;
    }
    let mut all = true;
    for ((ab, at), (bb, bt)) in a.per_core.iter().zip(&b.per_core) {
        let total = bt.checked_sub(*at)?;
        let busy = bb.checked_sub(*ab)?;
        if total == 0 {
            return None;
        }
        all &= busy as f64 >= CORE_BUSY * total as f64;
    }
    Some(all)
}

/// One sample: busy cores, and whether every core was busy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub busy_cores: f64,
    pub every_core_busy: bool,
    /// The middle of the sampled interval on the wall clock, µs since the Unix epoch.
    pub mid_unix_us: u64,
}

/// Summary of a run's samples, in cores busy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Busy {
    pub mean: f64,
    pub p90: f64,
    /// Share of the samples (0–1) in which every core was busy.
    pub all_busy_share: f64,
    pub samples: usize,
}

/// Mean and 90th percentile (nearest rank) of busy-cores samples, and the share of samples
/// in which every core was busy.
pub fn summarise(samples: &[Sample]) -> Option<Busy> {
    if samples.is_empty() {
        return None;
    }
    let mut s: Vec<f64> = samples.iter().map(|x| x.busy_cores).collect();
    s.sort_by(f64::total_cmp);
    let rank = ((s.len() as f64 * 0.9).ceil() as usize).clamp(1, s.len());
    let all = samples.iter().filter(|x| x.every_core_busy).count();
    Some(Busy {
        mean: s.iter().sum::<f64>() / s.len() as f64,
        p90: s[rank - 1],
        all_busy_share: all as f64 / samples.len() as f64,
        samples: s.len(),
    })
}

/// Samples the machine every `every` on its own thread until [`Sampler::finish`].
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<Sample>>,
}

impl Sampler {
    pub fn start(every: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut out = Vec::new();
            let mut last = read();
            let mut last_at = wall_clock_us();
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(every);
                let now = read();
                let now_at = wall_clock_us();
                if let (Some(a), Some(b)) = (&last, &now) {
                    if let Some(busy_cores) = busy_cores(a, b) {
                        out.push(Sample {
                            busy_cores,
                            every_core_busy: every_core_busy(a, b).unwrap_or(false),
                            mid_unix_us: last_at + now_at.saturating_sub(last_at) / 2,
                        });
                    }
                }
                last = now;
                last_at = now_at;
            }
            out
        });
        Sampler { stop, thread }
    }

    /// Stops sampling; returns the samples, in order.
    pub fn finish(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// The samples whose interval's middle lies in `[from_us, from_us + seconds]`: a run's timed
/// window (its first connect to its last completion report), without the process start-up,
/// the receiver's start and the exit around it.
pub fn within(samples: &[Sample], from_us: u64, seconds: f64) -> Vec<Sample> {
    let to_us = from_us + (seconds.max(0.0) * 1e6) as u64;
    samples
        .iter()
        .filter(|s| (from_us..=to_us).contains(&s.mid_unix_us))
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 0 50 800 50 0 0 0 0 0\n\
                        cpu0 50 0 25 400 25 0 0 0 0 0\n\
                        cpu1 50 0 25 400 25 0 0 0 0 0\n\
                        intr 12345\nctxt 99\n";

    #[test]
    fn parses_the_aggregate_line_and_counts_cores() {
        let t = parse_proc_stat(STAT).unwrap();
        assert_eq!(
            t,
            CpuTimes {
                busy: 150,
                total: 1000,
                cores: 2,
                per_core: vec![(75, 500), (75, 500)],
            }
        );
        assert_eq!(parse_proc_stat("intr 1\n"), None);
        assert_eq!(parse_proc_stat("cpu 1 2\n"), None);
    }

    #[test]
    fn busy_cores_is_the_busy_share_of_all_cores() {
        let a = CpuTimes {
            busy: 150,
            total: 1000,
            cores: 2,
            per_core: vec![(75, 500), (75, 500)],
        };
        // 75 of 100 jiffies busy on 2 cores: 1.5 cores.
        let b = CpuTimes {
            busy: 225,
            total: 1100,
            cores: 2,
            per_core: vec![(125, 550), (100, 550)],
        };
        assert_eq!(busy_cores(&a, &b), Some(1.5));
        assert_eq!(busy_cores(&a, &a), None, "no time passed");
        assert_eq!(busy_cores(&b, &a), None, "counters went back");
    }

    #[test]
    fn every_core_busy_needs_each_core_at_90_percent() {
        let at = |c0: (u64, u64), c1: (u64, u64)| CpuTimes {
            busy: c0.0 + c1.0,
            total: c0.1 + c1.1,
            cores: 2,
            per_core: vec![c0, c1],
        };
        let a = at((0, 0), (0, 0));
        // 1.5 cores busy in total, but one core at 50%: not every core.
        assert_eq!(every_core_busy(&a, &at((10, 10), (5, 10))), Some(false));
        assert_eq!(every_core_busy(&a, &at((10, 10), (9, 10))), Some(true));
        assert_eq!(every_core_busy(&a, &at((10, 10), (8, 10))), Some(false));
        assert_eq!(every_core_busy(&a, &a), None, "no time passed");
    }

    #[test]
    fn p90_is_nearest_rank_and_the_share_counts_saturated_samples() {
        let s: Vec<Sample> = (1..=10)
            .map(|i| Sample {
                busy_cores: f64::from(i),
                every_core_busy: i > 7,
                mid_unix_us: 0,
            })
            .collect();
        let b = summarise(&s).unwrap();
        assert_eq!((b.p90, b.mean, b.samples), (9.0, 5.5, 10));
        assert_eq!(b.all_busy_share, 0.3);
        assert_eq!(summarise(&[]), None);
        let one = Sample {
            busy_cores: 0.7,
            every_core_busy: false,
            mid_unix_us: 0,
        };
        assert_eq!(summarise(&[one]).unwrap().p90, 0.7);
    }

    #[test]
    fn the_timed_window_keeps_the_samples_whose_middle_is_inside() {
        let s: Vec<Sample> = (0..10u64)
            .map(|i| Sample {
                busy_cores: 1.0,
                every_core_busy: i % 2 == 0,
                mid_unix_us: 1_000_000 + i * 100_000,
            })
            .collect();
        // 1.25 s .. 1.65 s holds the middles at 1.3, 1.4, 1.5 and 1.6 s.
        let w = within(&s, 1_250_000, 0.4);
        assert_eq!(
            w.iter().map(|x| x.mid_unix_us).collect::<Vec<_>>(),
            [1_300_000, 1_400_000, 1_500_000, 1_600_000]
        );
        assert_eq!(summarise(&w).unwrap().all_busy_share, 0.5);
        assert!(within(&s, 5_000_000, 1.0).is_empty());
    }

    #[test]
    fn samples_this_machine() {
        let s = Sampler::start(Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(120));
        let b = summarise(&s.finish()).expect("samples");
        assert!(b.samples >= 2, "{b:?}");
        let cores = read().unwrap().cores as f64;
        assert!((0.0..=cores).contains(&b.p90), "{b:?}");
        assert!((0.0..=1.0).contains(&b.all_busy_share), "{b:?}");
    }
}
