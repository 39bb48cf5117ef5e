//! How busy the whole machine was during a run, sampled from `/proc/stat`. On one machine the
//! sender, the receiver and the link emulator share the same cores, so a per-process CPU total
//! over the run cannot say whether the cores were saturated while the data flowed (a run also
//! has an idle slow-start phase). The 90th percentile of 100 ms samples can.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Busy and total jiffies of all cores together, and the number of cores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuTimes {
    pub busy: u64,
    pub total: u64,
    pub cores: usize,
}

/// Parses `/proc/stat`: the aggregate `cpu` line (user nice system idle iowait irq softirq
/// steal; guest time is already in user) and the count of `cpuN` lines. Idle and iowait count
/// as not busy.
pub fn parse_proc_stat(text: &str) -> Option<CpuTimes> {
    let mut lines = text.lines();
    let first = lines.next()?;
    let mut fields = first.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = fields
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 5 {
        return None;
    }
    let total: u64 = v.iter().sum();
    let cores = lines
        .take_while(|l| l.starts_with("cpu"))
        .filter(|l| l[3..].starts_with(|c: char| c.is_ascii_digit()))
        .count();
    Some(CpuTimes {
        busy: total - v[3] - v[4],
        total,
        cores: cores.max(1),
    })
}

fn read() -> Option<CpuTimes> {
    parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Busy cores between two readings (0 ..= cores).
pub fn busy_cores(a: CpuTimes, b: CpuTimes) -> Option<f64> {
    let total = b.total.checked_sub(a.total)?;
    let busy = b.busy.checked_sub(a.busy)?;
    (total > 0).then(|| busy as f64 / total as f64 * b.cores as f64)
}

/// Summary of a run's samples, in cores busy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Busy {
    pub mean: f64,
    pub p90: f64,
    pub samples: usize,
}

/// Mean and 90th percentile (nearest rank) of busy-cores samples.
pub fn summarise(samples: &[f64]) -> Option<Busy> {
    if samples.is_empty() {
        return None;
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((s.len() as f64 * 0.9).ceil() as usize).clamp(1, s.len());
    Some(Busy {
        mean: s.iter().sum::<f64>() / s.len() as f64,
        p90: s[rank - 1],
        samples: s.len(),
    })
}

/// Samples the machine every `every` on its own thread until [`Sampler::finish`].
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<f64>>,
}

impl Sampler {
    pub fn start(every: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut out = Vec::new();
            let mut last = read();
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(every);
                let now = read();
                if let (Some(a), Some(b)) = (last, now) {
                    out.extend(busy_cores(a, b));
                }
                last = now;
            }
            out
        });
        Sampler { stop, thread }
    }

    /// Stops sampling and summarises (None: no full interval was sampled).
    pub fn finish(self) -> Option<Busy> {
        self.stop.store(true, Ordering::Relaxed);
        summarise(&self.thread.join().unwrap_or_default())
    }
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
                cores: 2
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
        };
        // 75 of 100 jiffies busy on 2 cores: 1.5 cores.
        let b = CpuTimes {
            busy: 225,
            total: 1100,
            cores: 2,
        };
        assert_eq!(busy_cores(a, b), Some(1.5));
        assert_eq!(busy_cores(a, a), None, "no time passed");
        assert_eq!(busy_cores(b, a), None, "counters went back");
    }

    #[test]
    fn p90_is_nearest_rank() {
        let s: Vec<f64> = (1..=10).map(f64::from).collect();
        let b = summarise(&s).unwrap();
        assert_eq!((b.p90, b.mean, b.samples), (9.0, 5.5, 10));
        assert_eq!(summarise(&[]), None);
        assert_eq!(summarise(&[0.7]).unwrap().p90, 0.7);
    }

    #[test]
    fn samples_this_machine() {
        let s = Sampler::start(Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(120));
        let b = s.finish().expect("samples");
        assert!(b.samples >= 2, "{b:?}");
        let cores = read().unwrap().cores as f64;
        assert!((0.0..=cores).contains(&b.p90), "{b:?}");
    }
}
