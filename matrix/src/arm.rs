//! The kinds of arm a configuration can be (the `kind` axis): Shoal itself, or one of the
//! baselines it is measured against. The one place that maps a kind's name to its variant.

use std::fmt;

/// One kind of arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(into = "&'static str")]
pub enum Arm {
    /// `shoal send` → `shoal recv` (its `mode` axis picks the transport).
    Shoal,
    /// `tar c | ssh tar x` to the sshd the sweep starts in the receiver namespace.
    TarSsh,
    /// `rsync -a -e ssh` to that sshd.
    RsyncSsh,
    /// `sftp -b` (recursive put) to that sshd.
    Sftp,
    /// `tar c | tar x` over one plain TCP connection across the link (socat at both ends):
    /// what the link allows this payload.
    TarTcp,
    /// `tar c | tar x` on this host: what its disk does without any network.
    TarLocal,
    /// `rclone copy` over SFTP to that sshd (`rclone-transfers` parallel transfers).
    Rclone,
    /// One `iperf3` TCP flow of the payload's byte count: the path's one-flow ceiling with
    /// the arm's controller. No files move.
    Iperf3,
}

impl Arm {
    /// Every kind, in the order the matrix documentation lists them.
    pub const ALL: [Arm; 8] = [
        Arm::Shoal,
        Arm::TarSsh,
        Arm::RsyncSsh,
        Arm::Sftp,
        Arm::TarTcp,
        Arm::TarLocal,
        Arm::Rclone,
        Arm::Iperf3,
    ];

    /// The kind's name in a matrix, a label and runs.csv.
    pub fn name(self) -> &'static str {
        match self {
            Arm::Shoal => "shoal",
            Arm::TarSsh => "tar-ssh",
            Arm::RsyncSsh => "rsync-ssh",
            Arm::Sftp => "sftp",
            Arm::TarTcp => "tar-tcp",
            Arm::TarLocal => "tar-local",
            Arm::Rclone => "rclone",
            Arm::Iperf3 => "iperf3",
        }
    }

    /// The kind named `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Arm> {
        Arm::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Every kind's name, for messages: `shoal, tar-ssh, …`.
    pub fn names() -> String {
        Arm::ALL.map(Arm::name).join(", ")
    }

    /// A baseline (anything but Shoal): no Shoal axis applies to it.
    pub fn is_baseline(self) -> bool {
        self != Arm::Shoal
    }

    /// Runs over ssh to the sshd the sweep starts in the receiver namespace (across two
    /// hosts: through `[link] ssh`).
    pub fn over_ssh(self) -> bool {
        matches!(self, Arm::TarSsh | Arm::RsyncSsh | Arm::Sftp | Arm::Rclone)
    }

    /// Moves the payload's files, so its destination is verified (all but `iperf3`).
    pub fn moves_files(self) -> bool {
        self != Arm::Iperf3
    }

    /// Axes of a baseline's own (beside the sweep's): `rclone-transfers` for rclone, the
    /// controller for iperf3.
    pub fn own_axes(self) -> &'static [&'static str] {
        match self {
            Arm::Rclone => &[crate::axis::RCLONE_TRANSFERS],
            Arm::Iperf3 => &[crate::axis::CC],
            _ => &[],
        }
    }

    /// Crosses the link (all but `tar-local`, which has no network and so no congestion
    /// controller).
    pub fn crosses_link(self) -> bool {
        self != Arm::TarLocal
    }
}

impl From<Arm> for &'static str {
    fn from(a: Arm) -> &'static str {
        a.name()
    }
}

impl fmt::Display for Arm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for a in Arm::ALL {
            assert_eq!(Arm::from_name(a.name()), Some(a));
        }
        assert_eq!(Arm::from_name("tar-sh"), None);
        assert_eq!(
            Arm::names(),
            "shoal, tar-ssh, rsync-ssh, sftp, tar-tcp, tar-local, rclone, iperf3"
        );
    }
}
