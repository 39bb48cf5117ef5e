//! The TUN device's ioctls.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

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
