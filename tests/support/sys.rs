//! The tests' system calls, through rustix; the only `unsafe` is `pre_exec` (code that runs
//! in the child between fork and exec), each hook calling async-signal-safe syscalls only.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Resource, Rlimit, Signal};
use rustix::thread::CapabilitySet;

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// SIGTERM to a process this test started.
pub fn terminate(pid: u32) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = rustix::process::kill_process(pid, Signal::TERM);
    }
}

/// A process this test started, stopped (`SIGSTOP`) until this is dropped (`SIGCONT`), also
/// when the test fails first.
pub struct Paused(Option<Pid>);

impl Paused {
    pub fn new(pid: u32) -> Self {
        let pid = i32::try_from(pid).ok().and_then(Pid::from_raw);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, Signal::STOP);
        }
        Paused(pid)
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = rustix::process::kill_process(pid, Signal::CONT);
        }
    }
}

/// mkfifo(3) at `path`, mode 0644.
pub fn mkfifo(path: &Path) -> std::io::Result<()> {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )?;
    Ok(())
}

/// Waits (bounded) until some process opens `path`, via inotify.
pub fn wait_opened(path: &Path, within: Duration) -> bool {
    use rustix::fs::inotify;
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
        .expect("inotify_init1");
    inotify::add_watch(&fd, path, inotify::WatchFlags::OPEN).expect("inotify_add_watch");
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    while started.elapsed() < within {
        if matches!(rustix::io::read(&fd, &mut buf), Ok(n) if n > 0) {
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    false
}

/// Makes `cmd`'s process unable to raise its open-files limit above `nofile` (it loses
/// CAP_SYS_RESOURCE from its bounding set, as root would need it), with that limit set.
pub fn with_open_files_limit(cmd: &mut Command, nofile: u64) -> &mut Command {
    // SAFETY: only async-signal-safe calls (prctl, setrlimit: raw syscalls through rustix)
    // between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let _ =
                rustix::thread::remove_capability_from_bounding_set(CapabilitySet::SYS_RESOURCE);
            let lim = Rlimit {
                current: Some(nofile),
                maximum: Some(nofile),
            };
            rustix::process::setrlimit(Resource::Nofile, lim)?;
            Ok(())
        })
    }
}

/// Makes `cmd`'s process unable to bypass file permissions even as root: drops
/// CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from its bounding set (and clears the ambient
/// set) between fork and exec, so after exec it holds neither. Not root: nothing to drop.
pub fn without_dac_override(cmd: &mut Command) -> &mut Command {
    if is_root() {
        // SAFETY: prctl is async-signal-safe (a raw syscall through rustix) and only changes
        // this (forked) process.
        unsafe {
            cmd.pre_exec(|| {
                let _ = rustix::thread::clear_ambient_capability_set();
                for cap in [CapabilitySet::DAC_OVERRIDE, CapabilitySet::DAC_READ_SEARCH] {
                    rustix::thread::remove_capability_from_bounding_set(cap)?;
                }
                Ok(())
            });
        }
    }
    cmd
}
