//! Signal masks, waits, queued signals and a handler.

use std::io;
use std::time::Duration;

/// Blocks `signals` in this thread (and threads it spawns later); the set, for [`wait_signal`].
pub fn block_signals(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigset manipulation on a local, then pthread_sigmask on this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Waits up to `timeout` for one of `set`; the signal's info if one arrived.
pub fn wait_signal(set: &libc::sigset_t, timeout: Duration) -> Option<libc::siginfo_t> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: siginfo_t is plain data (all zeroes is valid); valid set, info and timespec.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        (libc::sigtimedwait(set, &mut info, &ts) > 0).then_some(info)
    }
}

/// The integer a [`queue_signal`] sent, if `info` is such a signal (`SI_QUEUE`).
pub fn queued_value(info: &libc::siginfo_t) -> Option<usize> {
    if info.si_code != libc::SI_QUEUE {
        return None;
    }
    // SAFETY: SI_QUEUE signals carry a sigval; we sent an integer in it.
    Some(unsafe { info.si_value() }.sival_ptr.addr())
}

/// `sigqueue(pid, sig, value)`: a signal carrying an integer. Only for a PID the caller has
/// verified.
pub fn queue_signal(pid: u32, sig: libc::c_int, value: usize) -> io::Result<()> {
    let value = libc::sigval {
        sival_ptr: std::ptr::without_provenance_mut(value),
    };
    // SAFETY: sigqueue(2) with a plain integer value; the caller verified the PID.
    if unsafe { libc::sigqueue(pid as i32, sig, value) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Runs `handler` on SIGINT and SIGTERM.
pub fn on_interrupt(handler: extern "C" fn(libc::c_int)) {
    // SAFETY: the caller's handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, handler as *const () as libc::sighandler_t);
    }
}
