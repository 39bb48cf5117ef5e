//! Opening a TUN device with (optionally) the vnet header and segmentation offload.
//!
//! The device is created in the network namespace of the *calling thread*: call [`Tun::open`]
//! from a thread that has entered the target namespace. The device is not persistent, so it
//! vanishes when the last fd closes, i.e. when the forwarder exits; `down` relies on that.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::vnet::VNET_HDR_LEN;

/// Which offloads the kernel accepted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offload {
    /// Frames carry a `virtio_net_hdr`.
    pub vnet_hdr: bool,
    pub tso: bool,
    pub uso: bool,
}

impl Offload {
    pub fn describe(&self) -> String {
        match (self.vnet_hdr, self.tso, self.uso) {
            (false, _, _) => "none".into(),
            (true, true, true) => "csum+tso+uso".into(),
            (true, true, false) => "csum+tso".into(),
            (true, false, _) => "vnet header only".into(),
        }
    }
}

pub struct Tun {
    fd: OwnedFd,
    pub name: String,
    pub offload: Offload,
}

/// `struct ifreq` as TUNSETIFF reads it: name, then flags, padded to the union size.
#[repr(C)]
struct IfReqFlags {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl Tun {
    /// Creates TUN device `name` (non-blocking fd). With `offload`, asks for the vnet header
    /// and checksum + TSO (+ USO where the kernel knows it), falling back step by step.
    pub fn open(name: &str, offload: bool) -> Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            bail!("interface name {name:?} must be 1..15 bytes");
        }
        let path = CString::new("/dev/net/tun").expect("no NUL");
        // SAFETY: plain open(2) of a constant path.
        let raw = cvt(unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        })
        .context("opening /dev/net/tun")?;
        // SAFETY: `raw` is a freshly opened fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };

        let mut req = IfReqFlags {
            name: [0; libc::IFNAMSIZ],
            flags: (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short,
            _pad: [0; 22],
        };
        if offload {
            req.flags |= libc::IFF_VNET_HDR as libc::c_short;
        }
        for (d, s) in req.name.iter_mut().zip(name.bytes()) {
            *d = s as libc::c_char;
        }
        // SAFETY: TUNSETIFF reads a struct ifreq, which `req` lays out.
        cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &req) })
            .with_context(|| format!("TUNSETIFF {name}"))?;

        let mut off = Offload::default();
        if offload {
            let sz: libc::c_int = VNET_HDR_LEN as libc::c_int;
            // SAFETY: TUNSETVNETHDRSZ reads an int.
            cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETVNETHDRSZ, &sz) })
                .context("TUNSETVNETHDRSZ")?;
            off.vnet_hdr = true;
            let base = libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6 | libc::TUN_F_TSO_ECN;
            let uso = libc::TUN_F_USO4 | libc::TUN_F_USO6;
            // USO needs kernel ≥ 6.2; older kernels answer EINVAL and we keep TSO only.
            if set_offload(fd.as_raw_fd(), base | uso).is_ok() {
                off.tso = true;
                off.uso = true;
            } else if set_offload(fd.as_raw_fd(), base).is_ok() {
                off.tso = true;
            } else {
                set_offload(fd.as_raw_fd(), libc::TUN_F_CSUM).context("TUNSETOFFLOAD")?;
            }
        }
        Ok(Tun {
            fd,
            name: name.to_string(),
            offload: off,
        })
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// One frame, or `WouldBlock`.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for writes of its length.
        let n = unsafe { libc::read(self.raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    pub fn write(&self, frame: &[u8]) -> io::Result<usize> {
        // SAFETY: `frame` is valid for reads of its length.
        let n = unsafe { libc::write(self.raw_fd(), frame.as_ptr().cast(), frame.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

fn set_offload(fd: RawFd, flags: libc::c_uint) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes the flags by value as an unsigned long.
    cvt(unsafe { libc::ioctl(fd, libc::TUNSETOFFLOAD, flags as libc::c_ulong) }).map(|_| ())
}
