//! A process named so that a reused PID is not taken for it: its PID, its start time (clock
//! ticks after boot, field 22 of `/proc/PID/stat`) and the boot it ran in.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ident {
    pub pid: u32,
    pub start: u64,
    pub boot: String,
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`): a PID of an earlier boot names nothing.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The fields of `/proc/PID/stat` after the command name (which may hold spaces and ')').
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// `pid`'s start time, if it exists.
pub fn start_time(pid: u32) -> Option<u64> {
    // Field 22 overall; the first field after ')' is field 3 (the state).
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// `pid`'s process group, if it exists and has not exited.
pub fn live_group(pid: u32) -> Option<u32> {
    let f = stat_fields(pid)?;
    if matches!(f.first().map(String::as_str), Some("Z") | Some("X")) {
        return None;
    }
    f.get(2)?.parse().ok()
}

impl Ident {
    /// This process.
    pub fn me() -> Ident {
        let pid = std::process::id();
        Ident {
            pid,
            start: start_time(pid).unwrap_or(0),
            boot: boot_id(),
        }
    }

    /// `pid` as it is now (None when it does not exist).
    pub fn of(pid: u32) -> Option<Ident> {
        Some(Ident {
            pid,
            start: start_time(pid)?,
            boot: boot_id(),
        })
    }

    /// Whether this very process still runs: same boot, same PID, same start time, and not
    /// exited (a zombie waiting for its parent is dead).
    pub fn alive(&self) -> bool {
        self.boot == boot_id()
            && start_time(self.pid) == Some(self.start)
            && live_group(self.pid).is_some()
    }
}

impl std::fmt::Display for Ident {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PID {}", self.pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_reused_pid_is_not() {
        let me = Ident::me();
        assert!(me.start > 0);
        assert!(me.alive());
        let reused = Ident {
            start: me.start + 1,
            ..me.clone()
        };
        assert!(!reused.alive(), "same PID, another start time");
        let other_boot = Ident {
            boot: "another".into(),
            ..me.clone()
        };
        assert!(!other_boot.alive());
    }

    #[test]
    fn an_exited_child_is_dead_before_it_is_reaped() {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let id = Ident::of(c.id()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!id.alive(), "a zombie is dead");
        c.wait().unwrap();
        assert!(!id.alive());
    }
}
