//! The unsafe code of this crate, fenced here: the system calls rustix does not wrap
//! (`getrusage`, `getsockopt(TCP_INFO)`) and a read into a buffer's uninitialised spare
//! capacity, each behind a safe function.
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

/// One `read` of at most `max` bytes from `fd` into `buf`'s spare capacity, which is not
/// zeroed first (zeroing 4 KiB before every 4 KiB file's read cost the sender more
/// instructions than the read's copy); `buf` grows by the bytes read. Returns them: 0 at end
/// of file or with no spare capacity.
pub(crate) fn read_into_spare(
    fd: impl AsFd,
    buf: &mut bytes::BytesMut,
    max: usize,
) -> io::Result<usize> {
    let spare = buf.spare_capacity_mut();
    let limit = max.min(spare.len());
    let (init, _) = rustix::io::read(fd, &mut spare[..limit])?;
    let n = init.len();
    // SAFETY: `read` initialised the first `n` bytes of the spare capacity, which start at
    // `buf.len()`.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}
