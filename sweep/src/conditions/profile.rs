//! Applies a host profile ([`HostProfile`], the `profile` axis) for one run: writes its
//! sysctls in both namespaces of the emulated link (and the host-wide caps), reads back what
//! is in effect for the row, and restores what was there before when dropped.
//!
//! What the kernel allows (checked on Linux 6.18): `net.ipv4.tcp_rmem`/`tcp_wmem` are per
//! network namespace and are set inside both; `net.core.rmem_max`/`wmem_max` read the initial
//! namespace's value inside a namespace and refuse writes there (EINVAL), so they are set
//! host-wide for the run and restored after it (and raised again by the next `shoal link up`
//! if a crash left them low).
//!
//! A TCP run with an `initial-window` axis writes `tcp_rmem` (receiver namespace) and
//! `tcp_wmem` (sender namespace) too (start_window/buffers.rs): it is applied after the
//! profile, raises the defaults from what the profile set (the larger of the two wins, never
//! lower), and restores them to the profile's values before the profile restores its own; the
//! row's `link_rcv_tcp_rmem`/`link_snd_tcp_wmem` then hold what the run had (read back after
//! both).

use anyhow::{Context, Result};
use shoal_link::netns;
use shoal_matrix::conditions::profile::HostProfile;
use shoal_report::columns::{col, Row};

/// One namespace's TCP ranges and the host-wide caps as read back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InEffect {
    pub snd_tcp_rmem: String,
    pub snd_tcp_wmem: String,
    pub rcv_tcp_rmem: String,
    pub rcv_tcp_wmem: String,
    pub rmem_max: String,
    pub wmem_max: String,
}

impl InEffect {
    /// Reads every value from the kernel: the TCP ranges inside each namespace, the caps in
    /// the initial namespace.
    pub fn read(snd_ns: &str, rcv_ns: &str) -> Result<InEffect> {
        let r =
            |ns: &str, k: &str| -> Result<String> { Ok(normalise(&netns::read_sysctl_in(ns, k)?)) };
        Ok(InEffect {
            snd_tcp_rmem: r(snd_ns, TCP_RMEM)?,
            snd_tcp_wmem: r(snd_ns, TCP_WMEM)?,
            rcv_tcp_rmem: r(rcv_ns, TCP_RMEM)?,
            rcv_tcp_wmem: r(rcv_ns, TCP_WMEM)?,
            rmem_max: normalise(&netns::read_sysctl(RMEM_MAX)?),
            wmem_max: normalise(&netns::read_sysctl(WMEM_MAX)?),
        })
    }

    /// Overwrites the row's link sysctl columns with these (what this run had in effect).
    pub fn put(&self, row: &mut Row) {
        row.set_triple(col::LINK_SND_TCP_RMEM, &self.snd_tcp_rmem);
        row.set_triple(col::LINK_SND_TCP_WMEM, &self.snd_tcp_wmem);
        row.set_triple(col::LINK_RCV_TCP_RMEM, &self.rcv_tcp_rmem);
        row.set_triple(col::LINK_RCV_TCP_WMEM, &self.rcv_tcp_wmem);
        row.set(col::LINK_RMEM_MAX, self.rmem_max.clone());
        row.set(col::LINK_WMEM_MAX, self.wmem_max.clone());
    }
}

pub(crate) const TCP_RMEM: &str = "net.ipv4.tcp_rmem";
pub(crate) const TCP_WMEM: &str = "net.ipv4.tcp_wmem";
const RMEM_MAX: &str = "net.core.rmem_max";
const WMEM_MAX: &str = "net.core.wmem_max";

/// A sysctl's text with its whitespace (tabs in the triples) as single spaces.
fn normalise(v: &str) -> String {
    v.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A `tcp_rmem`/`tcp_wmem` triple as the kernel takes it (and as the row records it).
pub(crate) fn triple(t: [u64; 3]) -> String {
    format!("{} {} {}", t[0], t[1], t[2])
}

/// A profile applied for one run: restores what was there before when dropped.
pub struct Applied {
    snd_ns: String,
    rcv_ns: String,
    before: InEffect,
    /// What the kernel reported after the profile was written.
    pub in_effect: InEffect,
    /// The host-wide caps' entries in the sweep's list of what it owns (`shoal_hostctl::owned`).
    owned: Vec<Option<u64>>,
}

/// Applies `p` in both namespaces (and the host-wide caps) and reads back what is in effect.
/// `tuned` writes nothing: the row then records what the link set.
pub fn apply(p: HostProfile, snd_ns: &str, rcv_ns: &str) -> Result<Applied> {
    let before = InEffect::read(snd_ns, rcv_ns)?;
    let mut applied = Applied {
        snd_ns: snd_ns.into(),
        rcv_ns: rcv_ns.into(),
        before: before.clone(),
        in_effect: before,
        owned: Vec::new(),
    };
    if let Some(s) = p.sysctls() {
        // From here on a failure restores on drop.
        for ns in [snd_ns, rcv_ns] {
            netns::set_sysctl_in(ns, TCP_RMEM, &triple(s.tcp_rmem))?;
            netns::set_sysctl_in(ns, TCP_WMEM, &triple(s.tcp_wmem))?;
        }
        // Host-wide: listed with the value to put back, in case the sweep is killed.
        for (key, was) in [
            (RMEM_MAX, &applied.before.rmem_max),
            (WMEM_MAX, &applied.before.wmem_max),
        ] {
            let item = shoal_hostctl::owned::Item::Sysctl {
                key: key.into(),
                before: was.clone(),
            };
            applied.owned.push(shoal_hostctl::owned::acquire(item));
        }
        netns::write_sysctl(RMEM_MAX, &s.rmem_max.to_string())?;
        netns::write_sysctl(WMEM_MAX, &s.wmem_max.to_string())?;
        applied.in_effect = InEffect::read(snd_ns, rcv_ns).context("reading the profile back")?;
    }
    Ok(applied)
}

impl Applied {
    /// Puts back what [`apply`] changed (what dropping it does, named for the call site).
    pub fn restore(self) {
        drop(self);
    }
}

impl Drop for Applied {
    fn drop(&mut self) {
        if self.in_effect == self.before {
            self.owned.drain(..).for_each(shoal_hostctl::owned::release);
            return;
        }
        let b = &self.before;
        for (ns, rmem, wmem) in [
            (&self.snd_ns, &b.snd_tcp_rmem, &b.snd_tcp_wmem),
            (&self.rcv_ns, &b.rcv_tcp_rmem, &b.rcv_tcp_wmem),
        ] {
            let _ = netns::set_sysctl_in(ns, TCP_RMEM, rmem);
            let _ = netns::set_sysctl_in(ns, TCP_WMEM, wmem);
        }
        let _ = netns::write_sysctl(RMEM_MAX, &b.rmem_max);
        let _ = netns::write_sysctl(WMEM_MAX, &b.wmem_max);
        self.owned.drain(..).for_each(shoal_hostctl::owned::release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_matrix::conditions::profile::STOCK;

    #[test]
    fn triples_as_the_kernel_takes_them() {
        assert_eq!(triple(STOCK.tcp_rmem), "4096 131072 6291456");
        assert_eq!(normalise("4096\t131072\t6291456\n"), "4096 131072 6291456");
    }
}
