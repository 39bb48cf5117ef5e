//! The unsafe code of this crate, fenced here: the system calls rustix does not wrap
//! (`getrusage`, `getsockopt(TCP_INFO)`), each behind a safe function.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// User and system CPU time this process has used, in seconds (`getrusage(RUSAGE_SELF)`).
pub(crate) fn cpu_times() -> Option<(f64, f64)> {
    // SAFETY: getrusage writes into the zeroed struct we pass and has no other effects.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut u) != 0 {
            return None;
        }
        u
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some((tv(usage.ru_utime), tv(usage.ru_stime)))
}

/// `TCP_INFO` of a TCP socket.
pub(crate) fn tcp_info(socket: &impl AsFd) -> io::Result<libc::tcp_info> {
    // SAFETY: tcp_info is plain old data; getsockopt writes at most `len` bytes into it.
    unsafe {
        let mut info: libc::tcp_info = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        let rc = libc::getsockopt(
            socket.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        );
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(info)
    }
}
