//! Releasing what a dead sweep owned, in an order that frees each thing before what holds it
//! goes: its processes, the link (forwarder, namespaces and whatever still runs in them),
//! mounted volumes, cgroups, host-wide sysctls (the last-changed first), its work folder.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rustix::process::{Pid, Signal};

use super::{append, ident, Ident, Item, Line, List};

/// Refuses a list whose owner still runs; otherwise releases everything it lists as owned and
/// not released, recording each release. Returns a line per item (`released …`, or `could
/// not release …` for one left listed, so a later attempt retries it).
pub fn settle(path: &Path) -> Result<Vec<String>> {
    refuse_live(path)?;
    let list = List::read(path)?;
    // Only a dead owner's: never what this (or another live) process holds.
    let mut items: Vec<_> = list
        .outstanding()
        .into_iter()
        .filter(|(_, owner, _)| !owner.alive())
        .collect();
    // Stable: within a kind, the last acquired first.
    items.reverse();
    items.sort_by_key(|(_, _, item)| rank(item));
    let mut said = Vec::new();
    let (mut links, mut failed) = (Vec::new(), false);
    for (id, owner, item) in items {
        match release_item(&item, &owner) {
            Ok(what) => {
                append(path, &Line::Release { id })?;
                said.push(format!("released (owner {owner} is gone): {what}"));
                if let Item::Link { name } = item {
                    links.push((name, owner));
                }
            }
            Err(e) => {
                failed = true;
                said.push(format!(
                    "could not release {} (owner {owner} is gone): {e:#}",
                    describe(&item)
                ))
            }
        }
    }
    // Only now: a claim leads a later sweep to this list while anything in it is left.
    if !failed {
        for (name, owner) in links {
            super::claim::forget(&name, &owner);
        }
    }
    Ok(said)
}

/// Refuses a list whose owner still runs (another process than this one).
pub fn refuse_live(path: &Path) -> Result<()> {
    let list = List::read(path)?;
    if let Some(o) = list.owner() {
        if o.alive() && *o != Ident::me() {
            let dir = path.parent().unwrap_or(path);
            bail!(
                "{} belongs to a sweep that is still running ({o}): what it owns is left alone; \
                 wait for it to end, or stop it (kill -INT {}) first",
                dir.display(),
                o.pid
            );
        }
    }
    Ok(())
}

/// `shoal sweep --clean DIR`: releases what DIR's list holds (its owner dead), each said;
/// false when something could not be released.
pub fn clean(dir: &Path) -> Result<bool> {
    let path = dir.join(super::FILE);
    if !path.exists() {
        println!(
            "{}: no {} (a sweep records what it owns there): nothing to release",
            dir.display(),
            super::FILE
        );
        return Ok(true);
    }
    let said = settle(&path)?;
    if said.is_empty() {
        println!("{}: nothing left to release", dir.display());
    }
    for line in &said {
        println!("{line}");
    }
    Ok(!said.iter().any(|l| l.starts_with("could not")))
}

fn rank(item: &Item) -> u8 {
    match item {
        Item::Process { .. } => 0,
        Item::Link { .. } => 1,
        Item::Mount { .. } => 2,
        Item::Cgroup { .. } => 3,
        Item::Sysctl { .. } => 4,
        Item::WorkDir { .. } => 5,
    }
}

fn describe(item: &Item) -> String {
    match item {
        Item::Link { name } => format!("link {name}"),
        Item::Process { pid, what, .. } => format!("{what} (process group {pid})"),
        Item::Mount { point, .. } => format!("the volume mounted at {}", point.display()),
        Item::Cgroup { dir } => format!("cgroup {}", dir.display()),
        Item::Sysctl { key, before } => format!("{key} (to put back {before})"),
        Item::WorkDir { path } => format!("work folder {}", path.display()),
    }
}

fn release_item(item: &Item, owner: &Ident) -> Result<String> {
    match item {
        Item::Process { pid, start, what } => stop_group(*pid, *start, what),
        Item::Link { name } => super::claim::release_link(name, owner),
        Item::Mount { point, image } => unmount(point, image.as_deref()),
        Item::Cgroup { dir } => remove_cgroup(dir),
        Item::Sysctl { key, before } => {
            let now = shoal_link::netns::read_sysctl(key)?;
            shoal_link::netns::write_sysctl(key, before)?;
            Ok(format!(
                "{key} put back to {before} (it read {})",
                now.trim()
            ))
        }
        Item::WorkDir { path } => remove_work(path),
    }
}

/// The live members of process group `pgid` started no earlier than its leader (`start`): a
/// group id is its leader's PID, so a later group with a reused id is told apart by the
/// leader, checked first.
fn group_members(pgid: u32, start: u64) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            ident::live_group(pid) == Some(pgid)
                && ident::start_time(pid).is_some_and(|s| s >= start)
        })
        .collect()
}

fn stop_group(pgid: u32, start: u64, what: &str) -> Result<String> {
    if ident::start_time(pgid).is_some_and(|s| s != start) {
        return Ok(format!(
            "{what}: process {pgid} had exited (the PID now names another process)"
        ));
    }
    if group_members(pgid, start).is_empty() {
        return Ok(format!("{what}: process group {pgid} had exited"));
    }
    let n = group_members(pgid, start).len();
    for (sig, wait) in [
        (Signal::TERM, Duration::from_secs(2)),
        (Signal::KILL, Duration::from_secs(2)),
    ] {
        if let Some(p) = Pid::from_raw(pgid as i32) {
            let _ = rustix::process::kill_process_group(p, sig);
        }
        let t0 = Instant::now();
        while t0.elapsed() < wait && !group_members(pgid, start).is_empty() {
            std::thread::sleep(Duration::from_millis(20));
        }
        if group_members(pgid, start).is_empty() {
            return Ok(format!(
                "{what}: stopped process group {pgid} ({n} process(es))"
            ));
        }
    }
    bail!("process group {pgid} survives SIGKILL")
}

fn run(cmd: &mut Command) -> Result<()> {
    let what = crate::shell::command_line(cmd);
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!("{what}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Mount points at or under `path` (`/proc/self/mountinfo`, field 5).
fn mounts_under(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split(' ').nth(4).map(|p| p.replace("\\040", " ")))
        .filter(|p| Path::new(p).starts_with(path))
        .collect()
}

fn unmount(point: &Path, image: Option<&Path>) -> Result<String> {
    let mut did = Vec::new();
    if mounts_under(point).iter().any(|p| Path::new(p) == point) {
        if run(Command::new("umount").arg(point)).is_err() {
            // Still held: detached now, freed by the kernel once released.
            run(Command::new("umount").arg("-l").arg(point))?;
            did.push("detached (lazy unmount)");
        } else {
            did.push("unmounted");
        }
    } else {
        did.push("was not mounted");
    }
    let _ = std::fs::remove_dir(point);
    if let Some(img) = image.filter(|i| i.exists()) {
        std::fs::remove_file(img).with_context(|| format!("removing {}", img.display()))?;
        did.push("its image deleted");
    }
    Ok(format!("volume at {}: {}", point.display(), did.join(", ")))
}

fn remove_cgroup(dir: &Path) -> Result<String> {
    if !dir.exists() {
        return Ok(format!("cgroup {}: already gone", dir.display()));
    }
    if let (Ok(procs), Some(parent)) = (
        std::fs::read_to_string(dir.join("cgroup.procs")),
        dir.parent(),
    ) {
        for pid in procs.split_whitespace() {
            let _ = std::fs::write(parent.join("cgroup.procs"), pid);
        }
    }
    for _ in 0..50 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return Ok(format!("cgroup {} removed", dir.display()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bail!("cgroup {} cannot be removed", dir.display())
}

fn remove_work(path: &Path) -> Result<String> {
    if !path.exists() {
        return Ok(format!("work folder {}: already gone", path.display()));
    }
    let mounted = mounts_under(path);
    if !mounted.is_empty() {
        bail!("volumes are still mounted under it: {}", mounted.join(", "));
    }
    let root = path.parent().unwrap_or(path);
    crate::work::bulk_delete(path, root)?;
    Ok(format!("work folder {} deleted", path.display()))
}
