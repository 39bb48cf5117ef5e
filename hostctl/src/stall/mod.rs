//! One end's stalls (`recv-stall`, `send-stall`) and the receiver's CPU hog (`recv-cpu-hog`).
//! The end's process goes into a freezer group of its own (cgroup v1 `freezer` where it is
//! mounted, else a cgroup v2 group's `cgroup.freeze`; under the receiver's CPU-capped group on
//! v2, so the quota still applies); a timer process (`shoal link stall-timer`, [`timer`]) freezes and
//! thaws it on schedule from the sender's start to its exit and reports what it did, which goes
//! in the row. The timer thaws and removes the group itself when the sweep dies, and a group
//! whose sweep is gone is removed when the next sweep creates one.

pub mod exec;
pub mod hog;
pub mod timer;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::cpu_quota::QuotaGroup;
use crate::proc::Proc;
pub use shoal_matrix::conditions::stall::StallSpec;
use shoal_matrix::conditions::Conditions;
use shoal_report::columns::{col, f3, Col, Row};
use timer::{Freezer, Report};

/// Where cgroup v1's freezer is mounted on Debian-like hosts.
const V1_FREEZER: &str = "/sys/fs/cgroup/freezer";
/// The cgroup v2 root (unified hierarchy alone).
const V2_ROOT: &str = "/sys/fs/cgroup";
/// Every stall group's name starts so, then the owning process's id.
const PREFIX: &str = "shoal-stall-";

/// Which end a stall freezes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Receiver,
    Sender,
}

impl End {
    fn name(self) -> &'static str {
        match self {
            End::Receiver => "rcv",
            End::Sender => "snd",
        }
    }

    /// Length, period, stalls applied, time stalled, the group.
    fn cols(self) -> [Col; 5] {
        match self {
            End::Receiver => [
                col::RECEIVER_STALL_LENGTH_MS,
                col::RECEIVER_STALL_EVERY_MS,
                col::RECEIVER_STALLS_APPLIED,
                col::RECEIVER_STALLED_MS_TOTAL,
                col::RECEIVER_STALL_CGROUP,
            ],
            End::Sender => [
                col::SENDER_STALL_LENGTH_MS,
                col::SENDER_STALL_EVERY_MS,
                col::SENDER_STALLS_APPLIED,
                col::SENDER_STALLED_MS_TOTAL,
                col::SENDER_STALL_CGROUP,
            ],
        }
    }
}

/// One end's freezer group for one run; thawed and removed when dropped.
pub struct StallGroup {
    freezer: Freezer,
}

impl StallGroup {
    /// Creates group `name`: in the v1 freezer hierarchy, or on cgroup v2 under `v2_parent`
    /// (the end's CPU-capped group) or the root.
    pub fn create(name: &str, v2_parent: Option<&Path>) -> Result<StallGroup> {
        let dir = if Path::new(V1_FREEZER).join("tasks").exists() {
            Path::new(V1_FREEZER).join(name)
        } else if Path::new(V2_ROOT).join("cgroup.controllers").exists() {
            v2_parent.unwrap_or(Path::new(V2_ROOT)).join(name)
        } else {
            bail!(
                "stall: no cgroup freezer (neither cgroup v1 {V1_FREEZER} nor cgroup v2 {V2_ROOT})"
            );
        };
        remove_stale(dir.parent().unwrap_or(Path::new(V2_ROOT)));
        std::fs::create_dir(&dir)
            .with_context(|| format!("stall: creating cgroup {}", dir.display()))?;
        Ok(StallGroup {
            freezer: Freezer::of(&dir)?,
        })
    }

    /// Moves process `pid` (all its threads) into the group.
    pub fn add(&self, pid: i32) -> Result<()> {
        let p = self.freezer.dir.join("cgroup.procs");
        std::fs::write(&p, pid.to_string())
            .with_context(|| format!("moving {pid} into {}", p.display()))
    }

    pub fn dir(&self) -> &Path {
        &self.freezer.dir
    }
}

impl Drop for StallGroup {
    fn drop(&mut self) {
        if let Err(e) = self.freezer.remove() {
            eprintln!("warning: {e:#}");
        }
    }
}

/// Removes the stall groups under `parent` whose owner is gone (a sweep killed before its
/// timer could clean up, or a timer killed with its sweep).
fn remove_stale(parent: &Path) {
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            if let Ok(f) = Freezer::of(&e.path()) {
                let _ = f.remove();
            }
        }
    }
}

/// The group name of one end for run `order` of this process.
pub fn group_name(order: usize, end: End) -> String {
    format!("{PREFIX}{}-{order:05}-{}", std::process::id(), end.name())
}

/// A running timer process on one group.
pub struct Timer {
    proc: Proc,
    stdin: Option<std::process::ChildStdin>,
    stdout: Option<std::process::ChildStdout>,
    spec: StallSpec,
}

impl Timer {
    /// Starts `shoal stall-timer` on `group` with the duty cycle `spec`.
    pub fn start(shoal_bin: &Path, group: &Path, spec: StallSpec) -> Result<Timer> {
        let mut cmd = Command::new(shoal_bin);
        cmd.args(["link", "stall-timer"])
            .arg("--cgroup")
            .arg(group)
            .arg("--length")
            .arg(shoal_proto::units::format_duration(spec.length))
            .arg("--every")
            .arg(shoal_proto::units::format_duration(spec.every))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut proc = Proc::spawn(&mut cmd, None, "shoal stall-timer")?;
        Ok(Timer {
            stdin: proc.child.stdin.take(),
            stdout: proc.child.stdout.take(),
            proc,
            spec,
        })
    }

    /// Stops the timer (it thaws first) and returns its report.
    pub fn stop(mut self) -> Result<Report> {
        if let Some(mut s) = self.stdin.take() {
            let _ = s.write_all(b"stop\n");
        }
        let give_up = Instant::now() + self.spec.length + Duration::from_secs(5);
        let exit = self
            .proc
            .wait_until(give_up)
            .unwrap_or_else(|| self.proc.kill(Duration::from_millis(200)));
        let mut line = String::new();
        if let Some(out) = self.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut line);
        }
        serde_json::from_str(line.trim())
            .with_context(|| format!("shoal stall-timer {}: no report", exit.describe()))
    }
}

/// The stalls and hog of one run: created before it, started with the sender, stopped when
/// the sender exits.
#[derive(Default)]
pub struct RunStalls {
    pub recv: Option<(StallSpec, Option<StallGroup>)>,
    pub send: Option<(StallSpec, Option<StallGroup>)>,
    pub hog: bool,
}

/// What the timers and the hog did in one run.
#[derive(Default)]
pub struct Applied {
    pub recv: Option<Result<Report, String>>,
    pub send: Option<Result<Report, String>>,
    pub hog_cpu_seconds: Option<f64>,
}

/// The timers and hog of a run while it runs.
pub struct Running {
    recv: Option<Timer>,
    send: Option<Timer>,
    hog: Option<(Proc, Option<std::process::ChildStdin>)>,
}

impl RunStalls {
    /// The groups `cond` asks for, for run `order` (none in `none`).
    pub fn create(cond: &Conditions, order: usize, cpu: Option<&QuotaGroup>) -> Result<RunStalls> {
        let group = |spec: Option<StallSpec>, end: End, parent: Option<&Path>| -> Result<_> {
            Ok(match spec {
                None => None,
                Some(s) if s.is_none() => Some((s, None)),
                Some(s) => Some((
                    s,
                    Some(StallGroup::create(&group_name(order, end), parent)?),
                )),
            })
        };
        Ok(RunStalls {
            recv: group(
                cond.recv_stall,
                End::Receiver,
                cpu.and_then(QuotaGroup::v2_dir),
            )?,
            send: group(cond.send_stall, End::Sender, None)?,
            hog: cond.recv_cpu_hog,
        })
    }

    fn group(&self, end: End) -> Option<&StallGroup> {
        let g = match end {
            End::Receiver => &self.recv,
            End::Sender => &self.send,
        };
        g.as_ref().and_then(|(_, g)| g.as_ref())
    }

    /// Puts one end's process in its group (if it has one).
    pub fn place(&self, end: End, pid: i32) -> Result<()> {
        match self.group(end) {
            Some(g) => g.add(pid),
            None => Ok(()),
        }
    }

    /// Starts the hog in `cpu` (the receiver's capped group), before the sender starts.
    pub fn start_hog(
        &self,
        shoal_bin: &Path,
        cpu: Option<&QuotaGroup>,
    ) -> Result<Option<(Proc, Option<std::process::ChildStdin>)>> {
        let (true, Some(cpu)) = (self.hog, cpu) else {
            return Ok(None);
        };
        let mut cmd = Command::new(shoal_bin);
        cmd.arg("cpu-hog")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let mut p = Proc::spawn(&mut cmd, None, "shoal cpu-hog")?;
        let stdin = p.child.stdin.take();
        cpu.add(p.pid)
            .context("moving the CPU hog into the receiver's group")?;
        Ok(Some((p, stdin)))
    }

    /// Starts the timers, once both ends are in their groups.
    pub fn start(
        &self,
        shoal_bin: &Path,
        hog: Option<(Proc, Option<std::process::ChildStdin>)>,
    ) -> Result<Running> {
        let timer = |end: End| -> Result<Option<Timer>> {
            let spec = match end {
                End::Receiver => self.recv.as_ref().map(|(s, _)| *s),
                End::Sender => self.send.as_ref().map(|(s, _)| *s),
            };
            match (spec, self.group(end)) {
                (Some(s), Some(g)) => Timer::start(shoal_bin, g.dir(), s).map(Some),
                _ => Ok(None),
            }
        };
        Ok(Running {
            recv: timer(End::Receiver)?,
            send: timer(End::Sender)?,
            hog,
        })
    }

    /// Puts each end's stall settings and what its timer did, and the hog's CPU, in `row`.
    pub fn put(&self, applied: &Applied, row: &mut Row) {
        for (end, g, rep) in [
            (End::Receiver, &self.recv, &applied.recv),
            (End::Sender, &self.send, &applied.send),
        ] {
            let Some((spec, group)) = g else { continue };
            let [len, every, count, total, cgroup] = end.cols();
            row.set(len, f3(spec.length.as_secs_f64() * 1000.0));
            row.set(every, f3(spec.every.as_secs_f64() * 1000.0));
            match (group, rep) {
                (None, _) => {
                    row.set(count, "0");
                    row.set(total, "0.000");
                }
                (Some(g), Some(Ok(r))) => {
                    row.set(count, r.stalls_applied.to_string());
                    row.set(total, f3(r.stalled_ms_total));
                    let empty = if r.stalls_applied > 0 && r.processes_max == 0 {
                        " (empty: no process was frozen)"
                    } else {
                        ""
                    };
                    row.set(cgroup, format!("{}{empty}", describe(g.dir())));
                }
                // The condition's cells stay empty: what was applied is unknown.
                (Some(g), Some(Err(e))) => {
                    row.set(cgroup, format!("{} (timer failed: {e})", describe(g.dir())))
                }
                (Some(g), None) => row.set(cgroup, describe(g.dir())),
            }
        }
        if let Some(s) = applied.hog_cpu_seconds {
            row.set(col::RECEIVER_CPU_HOG_CPU_SECONDS, f3(s));
        }
    }
}

fn describe(dir: &Path) -> String {
    let v = if dir.join("freezer.state").exists() {
        "cgroup v1 freezer"
    } else {
        "cgroup v2 cgroup.freeze"
    };
    format!("{v} {}", dir.display())
}

impl Running {
    /// Stops the timers (each thaws its group) and the hog.
    pub fn stop(self) -> Applied {
        let stop = |t: Option<Timer>| t.map(|t| t.stop().map_err(|e| format!("{e:#}")));
        let hog_cpu_seconds = self.hog.map(|(mut p, stdin)| {
            drop(stdin);
            let e = p
                .wait_until(Instant::now() + Duration::from_secs(2))
                .unwrap_or_else(|| p.kill(Duration::from_millis(200)));
            e.cpu_seconds
        });
        Applied {
            recv: stop(self.recv),
            send: stop(self.send),
            hog_cpu_seconds,
        }
    }
}
