//! The receiver CPU axis (`recv-cpu-quota = [1.0, 0.5, 0.25]`, a fraction of one core): the
//! run's `shoal recv` is moved into a cgroup of its own whose CPU bandwidth is capped, so the
//! receiver gets that share of a core per CFS period (100 ms, or the `recv-cpu-period` axis). cgroup v1's `cpu` controller
//! (`cpu.cfs_period_us`/`cpu.cfs_quota_us`) where it is mounted, else cgroup v2's `cpu.max`.
//! The group is removed after the run; the quota read back and the throttling counters go in
//! the row.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};

/// The CFS period a group gets when no `recv-cpu-period` asks for another (the kernel's).
pub use shoal_matrix::conditions::cpu_quota::PERIOD_US;
use shoal_matrix::conditions::cpu_quota::{quota_us, PERIOD_MAX_US, PERIOD_MIN_US};
use shoal_report::columns::{col, f3, Row};

/// Where cgroup v1's `cpu` controller is mounted on Debian-like hosts.
const V1_CPU: &str = "/sys/fs/cgroup/cpu";
/// The cgroup v2 root (unified hierarchy alone).
const V2_ROOT: &str = "/sys/fs/cgroup";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// Throttling counters of a group (`cpu.stat`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Throttling {
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_seconds: f64,
}

/// One run's CPU-capped cgroup; removed when dropped.
pub struct QuotaGroup {
    dir: PathBuf,
    version: Version,
    /// Its entry in the sweep's list of what it owns (`crate::owned`).
    owned: Option<u64>,
}

impl QuotaGroup {
    /// Creates the group `name` capped at `fraction` of one core per `period_us` (from
    /// [`PERIOD_MIN_US`] to [`PERIOD_MAX_US`]).
    pub fn create(name: &str, fraction: f64, period_us: u64) -> Result<QuotaGroup> {
        if !(PERIOD_MIN_US..=PERIOD_MAX_US).contains(&period_us) {
            bail!("recv-cpu-period: {period_us} µs is outside {PERIOD_MIN_US}..={PERIOD_MAX_US}");
        }
        let quota = quota_us(fraction, period_us);
        let (version, dir) = if Path::new(V1_CPU).join("cpu.cfs_quota_us").exists() {
            (Version::V1, Path::new(V1_CPU).join(name))
        } else if std::fs::read_to_string(Path::new(V2_ROOT).join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|x| x == "cpu"))
        {
            // The root must hand the cpu controller to its children.
            let _ = std::fs::write(Path::new(V2_ROOT).join("cgroup.subtree_control"), "+cpu");
            (Version::V2, Path::new(V2_ROOT).join(name))
        } else {
            bail!(
                "recv-cpu-quota: no cgroup CPU controller (neither cgroup v1 {V1_CPU}/cpu.cfs_quota_us nor cgroup v2 {V2_ROOT}/cgroup.controllers with cpu)"
            );
        };
        let owned = crate::owned::acquire(crate::owned::Item::Cgroup { dir: dir.clone() });
        let g = QuotaGroup {
            dir,
            version,
            owned,
        };
        std::fs::create_dir(&g.dir)
            .with_context(|| format!("recv-cpu-quota: creating cgroup {}", g.dir.display()))?;
        match version {
            Version::V1 => {
                // Period first: a quota above the old period would otherwise be refused.
                g.write("cpu.cfs_period_us", &period_us.to_string())?;
                g.write("cpu.cfs_quota_us", &quota.to_string())?;
            }
            Version::V2 => g.write("cpu.max", &format!("{quota} {period_us}"))?,
        }
        Ok(g)
    }

    fn write(&self, file: &str, value: &str) -> Result<()> {
        let p = self.dir.join(file);
        std::fs::write(&p, value).with_context(|| format!("writing {value} to {}", p.display()))
    }

    fn read(&self, file: &str) -> Result<String> {
        let p = self.dir.join(file);
        std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))
    }

    /// Moves process `pid` (all its threads) into the group.
    pub fn add(&self, pid: i32) -> Result<()> {
        self.write("cgroup.procs", &pid.to_string())
    }

    /// The quota and period in effect, read back (µs).
    pub fn read_back(&self) -> Result<(u64, u64)> {
        let num = |s: &str, what: &str| -> Result<u64> {
            s.trim()
                .parse()
                .with_context(|| format!("{}: {what} {s:?}", self.dir.display()))
        };
        match self.version {
            Version::V1 => Ok((
                num(&self.read("cpu.cfs_quota_us")?, "quota")?,
                num(&self.read("cpu.cfs_period_us")?, "period")?,
            )),
            Version::V2 => {
                let t = self.read("cpu.max")?;
                let mut it = t.split_whitespace();
                let q = it.next().unwrap_or("");
                let p = it.next().unwrap_or("");
                Ok((num(q, "quota")?, num(p, "period")?))
            }
        }
    }

    /// The group's throttling counters so far.
    pub fn throttling(&self) -> Result<Throttling> {
        let text = self.read("cpu.stat")?;
        Ok(parse_stat(&text, self.version == Version::V1))
    }

    /// The group's folder on cgroup v2 (where a stall group of the same end nests).
    pub fn v2_dir(&self) -> Option<&Path> {
        (self.version == Version::V2).then_some(self.dir.as_path())
    }

    /// Which controller and group, for the row.
    pub fn describe(&self) -> String {
        let v = match self.version {
            Version::V1 => "cgroup v1 cpu",
            Version::V2 => "cgroup v2 cpu.max",
        };
        format!("{v} {}", self.dir.display())
    }

    /// Puts the quota read back and the throttling so far in `row`.
    pub fn put(&self, row: &mut Row) {
        row.set(col::RECEIVER_CPU_CGROUP, self.describe());
        if let Ok((q, p)) = self.read_back() {
            row.set(col::RECEIVER_CPU_QUOTA_US, q.to_string());
            row.set(col::RECEIVER_CPU_PERIOD_US, p.to_string());
        }
        if let Ok(t) = self.throttling() {
            row.set(col::RECEIVER_CPU_PERIODS, t.nr_periods.to_string());
            row.set(col::RECEIVER_CPU_THROTTLED, t.nr_throttled.to_string());
            row.set(col::RECEIVER_CPU_THROTTLED_SECONDS, f3(t.throttled_seconds));
        }
    }
}

/// Reads `cpu.stat`: v1 has `throttled_time` in ns, v2 `throttled_usec`.
fn parse_stat(text: &str, v1: bool) -> Throttling {
    let mut t = Throttling::default();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(k), Some(v)) = (it.next(), it.next()) else {
            continue;
        };
        let Ok(n) = v.parse::<u64>() else { continue };
        match k {
            "nr_periods" => t.nr_periods = n,
            "nr_throttled" => t.nr_throttled = n,
            "throttled_time" if v1 => t.throttled_seconds = n as f64 / 1e9,
            "throttled_usec" if !v1 => t.throttled_seconds = n as f64 / 1e6,
            _ => {}
        }
    }
    t
}

impl QuotaGroup {
    /// Removes the group, its processes back in the root first (what dropping it does, named
    /// for the call site).
    pub fn restore(self) {
        drop(self);
    }
}

impl Drop for QuotaGroup {
    fn drop(&mut self) {
        // A process still inside (a receiver that outlived its run) goes back to the root
        // first: a group with members cannot be removed.
        let parent = self.dir.parent().map(Path::to_path_buf);
        if let (Ok(procs), Some(parent)) = (self.read("cgroup.procs"), parent) {
            for pid in procs.split_whitespace() {
                let _ = std::fs::write(parent.join("cgroup.procs"), pid);
            }
        }
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                crate::owned::release(self.owned.take());
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("warning: could not remove cgroup {}", self.dir.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_in_both_versions() {
        let v1 = "nr_periods 40\nnr_throttled 12\nthrottled_time 1500000000\n";
        assert_eq!(
            parse_stat(v1, true),
            Throttling {
                nr_periods: 40,
                nr_throttled: 12,
                throttled_seconds: 1.5
            }
        );
        let v2 = "usage_usec 9\nnr_periods 4\nnr_throttled 2\nthrottled_usec 250000\n";
        assert_eq!(parse_stat(v2, false).throttled_seconds, 0.25);
    }
}
