//! Hooks between fork and exec, scheduling and the allocator.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Makes `cmd`'s process start a new session (setsid) between fork and exec.
pub fn setsid_before_exec(cmd: &mut Command) {
    // SAFETY: setsid(2) is async-signal-safe (rustix issues the raw syscall).
    unsafe {
        cmd.pre_exec(|| {
            let _ = rustix::process::setsid();
            Ok(())
        });
    }
}

/// Makes `cmd`'s process enter the network namespace open as `ns` between fork and exec.
pub fn setns_before_exec(cmd: &mut Command, ns: File) {
    // SAFETY: only setns(2), an async-signal-safe syscall (rustix issues it raw), runs in the
    // child. The File is moved into the closure, so the fd stays open until the Command is
    // dropped; it is O_CLOEXEC, so the program itself does not inherit it.
    unsafe {
        cmd.pre_exec(move || {
            rustix::thread::move_into_link_name_space(
                std::os::fd::AsFd::as_fd(&ns),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )?;
            Ok(())
        });
    }
}

/// Puts the calling thread in SCHED_FIFO at `priority`; whether it worked.
pub fn set_sched_fifo(priority: i32) -> bool {
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pthread_setschedparam on the calling thread with a valid sched_param.
    unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &p) == 0 }
}

/// glibc malloc tuning for a process that moves many small buffers between a few threads.
/// - The mmap threshold stays at its 128 KiB default. glibc otherwise raises it each time a
///   large mmapped block is freed, after which quinn's receive buffers (the assembler's
///   defragmented chunks, tens of KiB to MiBs, allocated and freed on different threads) land
///   in the arenas and stay mapped after they are freed: a quic-bundle receiver held ~35 MB of
///   live heap (massif) but 58–69 MB of RSS; pinned, 46–49 MB at the same speed.
/// - Two arenas instead of 8 per core: a tcp-streams receiver's peak RSS 61 → 54 MB, no
///   measurable loss of speed (docs/benchmarks.md).
pub fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only adjusts allocator parameters; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}
