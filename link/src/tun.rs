//! Opening a TUN device with (optionally) the vnet header and segmentation offload.
//!
//! The device is created in the network namespace of the *calling thread*: call [`Tun::open`]
//! from a thread that has entered the target namespace. The device is not persistent, so it
//! vanishes when the last fd closes, i.e. when the forwarder exits; `down` relies on that.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use rustix::fs::{Mode, OFlags};

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

impl Tun {
    /// Creates TUN device `name` (non-blocking fd). With `offload`, asks for the vnet header
    /// and checksum + TSO (+ USO where the kernel knows it), falling back step by step.
    pub fn open(name: &str, offload: bool) -> Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            bail!("interface name {name:?} must be 1..15 bytes");
        }
        let fd = rustix::fs::open(
            "/dev/net/tun",
            OFlags::RDWR | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(io::Error::from)
        .context("opening /dev/net/tun")?;

        let mut flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
        if offload {
            flags |= libc::IFF_VNET_HDR as libc::c_short;
        }
        shoal_sys::tun::tun_set_iff(fd.as_fd(), name, flags)
            .with_context(|| format!("TUNSETIFF {name}"))?;

        let mut off = Offload::default();
        if offload {
            let sz: libc::c_int = VNET_HDR_LEN as libc::c_int;
            shoal_sys::tun::tun_set_vnet_hdr_sz(fd.as_fd(), sz).context("TUNSETVNETHDRSZ")?;
            off.vnet_hdr = true;
            let base = libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6 | libc::TUN_F_TSO_ECN;
            let uso = libc::TUN_F_USO4 | libc::TUN_F_USO6;
            // USO needs kernel ≥ 6.2; older kernels answer EINVAL and we keep TSO only.
            if shoal_sys::tun::tun_set_offload(fd.as_fd(), base | uso).is_ok() {
                off.tso = true;
                off.uso = true;
            } else if shoal_sys::tun::tun_set_offload(fd.as_fd(), base).is_ok() {
                off.tso = true;
            } else {
                shoal_sys::tun::tun_set_offload(fd.as_fd(), libc::TUN_F_CSUM)
                    .context("TUNSETOFFLOAD")?;
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
        Ok(rustix::io::read(&self.fd, buf)?)
    }

    pub fn write(&self, frame: &[u8]) -> io::Result<usize> {
        Ok(rustix::io::write(&self.fd, frame)?)
    }
}

impl AsFd for Tun {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
