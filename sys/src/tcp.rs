//! Socket options rustix does not wrap: `TCP_INFO`, `TCP_MAXSEG`, `SO_MAX_PACING_RATE`.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// `TCP_INFO` of a TCP socket.
pub fn tcp_info(socket: &impl AsFd) -> io::Result<libc::tcp_info> {
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

/// The socket's `TCP_MAXSEG` (0 if it cannot be read).
pub fn tcp_maxseg(fd: impl AsFd) -> libc::c_int {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: TCP_MAXSEG writes one int into `v`.
    unsafe {
        libc::getsockopt(
            fd.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    v
}

/// `SO_MAX_PACING_RATE`, bytes per second (the 32-bit form).
pub fn set_max_pacing_rate(fd: impl AsFd, v: u32) -> io::Result<()> {
    // SAFETY: SO_MAX_PACING_RATE reads one u32.
    let r = unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            (&v as *const u32).cast(),
            std::mem::size_of::<u32>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
