//! Every `unsafe` of this crate: the system calls rustix does not wrap (the TUN ioctls,
//! `TCP_INFO`, `TCP_MAXSEG`, `SO_MAX_PACING_RATE`, `SCHED_FIFO`, signal masks and queued
//! signals) and the `pre_exec` hooks. The rest of the crate is safe code (`#![deny(unsafe_code)]`
//! in lib.rs) and uses rustix for the calls it has.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `struct ifreq` as TUNSETIFF reads it: name, then flags, padded to the union size.
#[repr(C)]
struct IfReqFlags {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// TUNSETIFF: attaches `fd` (an open /dev/net/tun) to interface `name` (1..15 bytes) with
/// `flags` (IFF_TUN, IFF_NO_PI, IFF_VNET_HDR).
pub fn tun_set_iff(fd: BorrowedFd<'_>, name: &str, flags: libc::c_short) -> io::Result<()> {
    let mut req = IfReqFlags {
        name: [0; libc::IFNAMSIZ],
        flags,
        _pad: [0; 22],
    };
    for (d, s) in req.name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: TUNSETIFF reads a struct ifreq, which `req` lays out.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &req) }).map(|_| ())
}

/// TUNSETVNETHDRSZ: the length of the vnet header each frame carries.
pub fn tun_set_vnet_hdr_sz(fd: BorrowedFd<'_>, sz: libc::c_int) -> io::Result<()> {
    // SAFETY: TUNSETVNETHDRSZ reads an int.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETVNETHDRSZ, &sz) }).map(|_| ())
}

/// TUNSETOFFLOAD: the offloads (TUN_F_*) the device accepts.
pub fn tun_set_offload(fd: BorrowedFd<'_>, flags: libc::c_uint) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes the flags by value as an unsigned long.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETOFFLOAD, flags as libc::c_ulong) })
        .map(|_| ())
}

/// The socket's `TCP_INFO`.
pub fn tcp_info(fd: BorrowedFd<'_>) -> io::Result<libc::tcp_info> {
    // SAFETY: tcp_info is plain data; getsockopt fills at most `len` bytes of it.
    unsafe {
        let mut info: libc::tcp_info = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        let r = libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        );
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(info)
    }
}

/// The socket's `TCP_MAXSEG` (0 if it cannot be read).
pub fn tcp_maxseg(fd: BorrowedFd<'_>) -> libc::c_int {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: TCP_MAXSEG writes one int into `v`.
    unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    v
}

/// `SO_MAX_PACING_RATE`, bytes per second (the 32-bit form).
pub fn set_max_pacing_rate(fd: BorrowedFd<'_>, v: u32) -> io::Result<()> {
    // SAFETY: SO_MAX_PACING_RATE reads one u32.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            (&v as *const u32).cast(),
            std::mem::size_of::<u32>() as libc::socklen_t,
        )
    };
    cvt(r).map(|_| ())
}

/// Puts the calling thread in SCHED_FIFO at `priority`; whether it worked.
pub fn set_sched_fifo(priority: i32) -> bool {
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pthread_setschedparam on the calling thread with a valid sched_param.
    unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &p) == 0 }
}

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
