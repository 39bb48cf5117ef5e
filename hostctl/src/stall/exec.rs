//! `shoal link exec --stall "20ms every 250ms" -- CMD`: CMD and everything it starts run in a
//! freezer group of their own, frozen on the duty cycle by a timer process until CMD exits.
//! CMD is started from inside the group (this process joins it for the start and leaves it
//! right after), so no child it forks early escapes the stalls.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use super::{group_name, End, StallGroup, StallSpec, Timer};

/// Runs `cmd` (at `end` of the link) under `spec` (the timer is `exe link stall-timer`); prints what the timer did on
/// standard error and returns `cmd`'s exit code.
pub fn run(cmd: &mut Command, end: End, spec: StallSpec, exe: &Path) -> Result<i32> {
    let group = StallGroup::create(&group_name(0, end), None)?;
    // The timer starts outside the group (it must never freeze itself).
    let timer = Timer::start(exe, group.dir(), spec)?;
    let me = std::process::id() as i32;
    let parent = group
        .dir()
        .parent()
        .context("the stall group has no parent")?
        .to_path_buf();
    group.add(me)?;
    let child = cmd.spawn();
    std::fs::write(parent.join("cgroup.procs"), me.to_string())
        .context("leaving the stall group")?;
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            let _ = timer.stop();
            return Err(e).context("starting the command");
        }
    };
    let status = child.wait().context("waiting for the command")?;
    let report = timer.stop()?;
    eprintln!(
        "stall {}: {} stalls applied to up to {} processes, {:.1} ms frozen in all (longest {:.1} ms{}), {}",
        spec.text(),
        report.stalls_applied,
        report.processes_max,
        report.stalled_ms_total,
        report.longest_stall_ms,
        if report.realtime {
            ""
        } else {
            "; the timer did not get a real-time priority"
        },
        super::describe(group.dir())
    );
    drop(group);
    Ok(status.code().unwrap_or(1))
}
