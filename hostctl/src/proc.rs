//! Child processes of a run: started in a namespace and in their own process group (so a
//! pipeline can be ended as a whole, by its id), waited for with a deadline, with their
//! resource usage (peak RSS, CPU) from wait4(2).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rustix::process::{Pid, Signal};

/// Set by SIGINT/SIGTERM: the sweep stops after ending the current run's processes.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Catches SIGINT and SIGTERM so the link, sshd and run processes are cleaned up.
pub fn install_interrupt_handler() {
    shoal_sys::signal::on_interrupt(on_signal);
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// A killed run's error: `interrupted` when Ctrl-C or SIGTERM stopped the sweep, else the
/// limit it ran into (the time it ran, at most `limit`).
pub fn killed_error(ran: Duration, limit: Duration) -> String {
    if interrupted() {
        "interrupted".into()
    } else {
        format!(
            "killed at the {} limit",
            shoal_matrix::plan::fmt_duration(ran.min(limit))
        )
    }
}

/// How a child ended.
#[derive(Clone, Debug, Default)]
pub struct Exit {
    /// Exit code, or None when a signal ended it.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// Largest resident set of the process and its waited-for descendants, bytes.
    pub max_rss_bytes: u64,
    /// User + system CPU of the process and its waited-for descendants, seconds.
    pub cpu_seconds: f64,
}

impl Exit {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    pub fn describe(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            _ => "unknown exit".into(),
        }
    }
}

/// A started child in its own process group.
pub struct Proc {
    pub child: Child,
    pub pid: i32,
    reaped: bool,
    /// Its entry in the sweep's list of what it owns (`crate::owned`), until reaped.
    owned: Option<u64>,
}

impl Proc {
    /// Starts `cmd` in its own process group, inside network namespace `ns` when given.
    pub fn spawn(cmd: &mut Command, ns: Option<&str>, what: &str) -> Result<Proc> {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        let child = match ns {
            Some(ns) => shoal_link::spawn_in_netns(ns, cmd),
            None => cmd.spawn(),
        }
        .with_context(|| format!("cannot start {what}"))?;
        let pid = child.id() as i32;
        let owned = crate::owned::acquire(crate::owned::Item::Process {
            pid: child.id(),
            start: crate::owned::ident::start_time(child.id()).unwrap_or(0),
            what: what.to_string(),
        });
        Ok(Proc {
            child,
            pid,
            reaped: false,
            owned,
        })
    }

    /// Waits until the child exits or `deadline` passes (None: still running). Returns early,
    /// with None, when the sweep is interrupted.
    pub fn wait_until(&mut self, deadline: Instant) -> Option<Exit> {
        loop {
            if let Some(e) = self.try_wait() {
                return Some(e);
            }
            if Instant::now() >= deadline || interrupted() {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn try_wait(&mut self) -> Option<Exit> {
        if self.reaped {
            return Some(Exit::default());
        }
        let (r, status, ru) = shoal_sys::rusage::wait4_nohang(self.pid);
        if r == 0 {
            return None;
        }
        self.reaped = true;
        crate::owned::release(self.owned.take());
        if r < 0 {
            return Some(Exit::default());
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        Some(Exit {
            code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
            signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
            max_rss_bytes: ru.ru_maxrss as u64 * 1024,
            cpu_seconds: tv(ru.ru_utime) + tv(ru.ru_stime),
        })
    }

    /// Ends the whole process group (SIGTERM, then SIGKILL after `grace`) and reaps the child.
    pub fn kill(&mut self, grace: Duration) -> Exit {
        if let Some(e) = self.try_wait() {
            self.kill_group(Signal::KILL);
            return e;
        }
        self.kill_group(Signal::TERM);
        let t0 = Instant::now();
        while t0.elapsed() < grace {
            if let Some(e) = self.try_wait() {
                self.kill_group(Signal::KILL);
                return e;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill_group(Signal::KILL);
        loop {
            if let Some(e) = self.try_wait() {
                return e;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Signals the child's process group (the group id is the child's pid: we made it so).
    fn kill_group(&self, sig: Signal) {
        if let Some(pgid) = Pid::from_raw(self.pid) {
            let _ = rustix::process::kill_process_group(pgid, sig);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if !self.reaped {
            self.kill(Duration::from_millis(500));
        }
    }
}

/// Forwards the lines a child prints to a channel (read on a thread).
pub fn lines<R: std::io::Read + Send + 'static>(r: R) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Every line `lines` has yet to deliver: waits for the end of the output (the process's end
/// closes it), at most `limit`. A process that has exited may still have its last line in the
/// pipe, not yet read by the reader thread (a sweep on a saturated machine lost `shoal send`'s
/// result row that way when it took only what had already arrived).
pub fn drain(rx: &mpsc::Receiver<String>, limit: std::time::Duration) -> Vec<String> {
    let until = std::time::Instant::now() + limit;
    let mut out = Vec::new();
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => out.push(line),
            Err(_) => return out,
        }
    }
}

/// The last `n` characters of a file (a failed command's stderr, for the error column).
pub fn tail_of(path: &std::path::Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let text = text.trim();
    let start = text
        .char_indices()
        .rev()
        .nth(n.saturating_sub(1))
        .map(|(i, _)| i)
        .unwrap_or(0);
    text[start..].replace('\n', " | ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn drain_waits_for_the_end_of_the_output_within_its_limit() {
        let (tx, rx) = mpsc::channel();
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            tx.send("{\"status\":\"ok\"}".to_string()).unwrap();
        });
        assert_eq!(drain(&rx, Duration::from_secs(5)), ["{\"status\":\"ok\"}"]);
        late.join().unwrap();
        let (_tx, rx) = mpsc::channel::<String>();
        let t = Instant::now();
        assert!(drain(&rx, Duration::from_millis(30)).is_empty());
        assert!(t.elapsed() >= Duration::from_millis(30));
    }
}
