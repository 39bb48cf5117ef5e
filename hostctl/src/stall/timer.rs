//! The stall timer (`shoal link stall-timer`, run by the sweep or `shoal link exec --stall`): freezes
//! a cgroup for a length of time once every period, on a fixed schedule, at a real-time
//! priority, and counts what it did. It stops when its standard input ends: after a `stop` line
//! (its owner is done; the owner removes the group), or without one (its owner died, e.g. a
//! sweep killed with SIGKILL: the timer thaws the group, moves its processes back to the parent
//! and removes it). Every exit thaws first, so no end stays frozen.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// The timer's real-time priority: below the link forwarder's (10), so the emulated link keeps
/// its timing, above every ordinary process.
const PRIORITY: i32 = 5;

/// What the timer did, printed as one JSON line when it stops.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Freezes applied (each one thawed again).
    pub stalls_applied: u64,
    /// Time frozen in total: from each freeze written to its thaw written, as timed here.
    pub stalled_ms_total: f64,
    /// The longest single stall.
    pub longest_stall_ms: f64,
    /// The most processes the group held at a freeze (0: it froze nothing).
    #[serde(default)]
    pub processes_max: u64,
    /// Whether the timer ran at a real-time priority (SCHED_FIFO).
    pub realtime: bool,
    /// Whether the owner asked it to stop (false: its input ended without `stop`).
    pub stopped_by_owner: bool,
}

/// The freezer interface of one cgroup: v1 `freezer.state`, v2 `cgroup.freeze`.
#[derive(Clone, Debug)]
pub struct Freezer {
    pub dir: PathBuf,
    v1: bool,
}

impl Freezer {
    /// The freezer of group `dir` (a v1 freezer group or a v2 group).
    pub fn of(dir: &Path) -> Result<Freezer> {
        if dir.join("freezer.state").exists() {
            Ok(Freezer {
                dir: dir.to_path_buf(),
                v1: true,
            })
        } else if dir.join("cgroup.freeze").exists() {
            Ok(Freezer {
                dir: dir.to_path_buf(),
                v1: false,
            })
        } else {
            bail!(
                "{}: neither a cgroup v1 freezer group (freezer.state) nor a v2 group (cgroup.freeze)",
                dir.display()
            )
        }
    }

    fn file(&self) -> PathBuf {
        self.dir.join(if self.v1 {
            "freezer.state"
        } else {
            "cgroup.freeze"
        })
    }

    pub fn freeze(&self) -> Result<()> {
        let v = if self.v1 { "FROZEN" } else { "1" };
        std::fs::write(self.file(), v).with_context(|| format!("freezing {}", self.dir.display()))
    }

    pub fn thaw(&self) -> Result<()> {
        let v = if self.v1 { "THAWED" } else { "0" };
        std::fs::write(self.file(), v).with_context(|| format!("thawing {}", self.dir.display()))
    }

    /// How many processes the group holds.
    pub fn processes(&self) -> u64 {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .map(|s| s.lines().count() as u64)
            .unwrap_or(0)
    }

    /// Thaws the group, moves its processes to the parent group and removes it (a group with
    /// members cannot be removed). Gone already is fine.
    pub fn remove(&self) -> Result<()> {
        if !self.dir.exists() {
            return Ok(());
        }
        let _ = self.thaw();
        let parent = self.dir.parent().map(Path::to_path_buf);
        for _ in 0..50 {
            if let (Ok(procs), Some(parent)) = (
                std::fs::read_to_string(self.dir.join("cgroup.procs")),
                &parent,
            ) {
                for pid in procs.split_whitespace() {
                    let _ = std::fs::write(parent.join("cgroup.procs"), pid);
                }
            }
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("could not remove cgroup {}", self.dir.display())
    }
}

/// Set by SIGINT/SIGTERM: the timer thaws and stops as if its owner had died.
static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::SeqCst);
}

/// How the timer's input ended.
enum Input {
    Stop,
    Gone,
}

/// Runs the duty cycle on group `dir` until standard input ends; returns the report.
pub fn run(dir: &Path, length: Duration, every: Duration) -> Result<Report> {
    let freezer = Freezer::of(dir)?;
    shoal_sys::signal::on_interrupt(on_signal);
    let realtime = shoal_sys::process::set_sched_fifo(PRIORITY);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut line = String::new();
        let mut lock = stdin.lock();
        loop {
            line.clear();
            match lock.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    let _ = tx.send(Input::Gone);
                    return;
                }
                Ok(_) if line.trim() == "stop" => {
                    let _ = tx.send(Input::Stop);
                    return;
                }
                Ok(_) => {}
            }
        }
    });
    // Sleeps until `until`; Some(how the input ended) when it ended first.
    let wait = |until: Instant| -> Option<Input> {
        loop {
            if SIGNALLED.load(Ordering::SeqCst) {
                return Some(Input::Gone);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            match rx.recv_timeout(left.min(Duration::from_millis(20))) {
                Ok(i) => return Some(i),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Some(Input::Gone),
            }
        }
    };
    let mut report = Report {
        realtime,
        ..Report::default()
    };
    let t0 = Instant::now();
    let run_for = every - length;
    let mut k: u32 = 0;
    let ended = loop {
        // Stall k starts at t0 + k·every + (every − length): each period runs first, then
        // stalls; a late wake-up never shifts the schedule.
        let mut at = t0 + every * k + run_for;
        let now = Instant::now();
        if now > at + length {
            // Woken too late for this one (a whole stall missed): the next one on schedule.
            k = ((now - t0).as_nanos() / every.as_nanos()) as u32;
            at = t0 + every * k + run_for;
        }
        if let Some(i) = wait(at) {
            break i;
        }
        if let Err(e) = freezer.freeze() {
            let _ = freezer.thaw();
            return Err(e);
        }
        let frozen_at = Instant::now();
        report.processes_max = report.processes_max.max(freezer.processes());
        let ended = wait(frozen_at + length);
        let thawed = freezer.thaw();
        let ms = frozen_at.elapsed().as_secs_f64() * 1000.0;
        report.stalls_applied += 1;
        report.stalled_ms_total += ms;
        report.longest_stall_ms = report.longest_stall_ms.max(ms);
        thawed?;
        if let Some(i) = ended {
            break i;
        }
        k += 1;
    };
    freezer.thaw()?;
    report.stopped_by_owner = matches!(ended, Input::Stop);
    if !report.stopped_by_owner {
        freezer.remove()?;
    }
    Ok(report)
}

/// Runs [`run`] and prints its report on standard output (an owner that died reads nothing:
/// a failed write is ignored).
pub fn main(dir: &Path, length: Duration, every: Duration) -> Result<()> {
    let report = run(dir, length, every)?;
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{}", serde_json::to_string(&report)?);
    let _ = out.flush();
    Ok(())
}
