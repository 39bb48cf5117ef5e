//! The receiver's destination file system (`[sweep] dest_fs`): a folder on the work file system
//! (`dir`, the default), or a fresh volume per run — `tmpfs`, or a sparse image file made with
//! `mkfs` and loop-mounted (`ext4-loop`, `xfs-loop`, `btrfs-loop`). The sweep makes and removes
//! the volumes (shoal-sweep's conditions).

use serde::Serialize;

/// `[sweep] dest_fs`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DestFs {
    /// A new folder on the work file system per run (earlier ones deleted in bulk).
    #[default]
    Dir,
    Tmpfs,
    Ext4Loop,
    XfsLoop,
    BtrfsLoop,
}

pub const NAMES: &str = "dir, tmpfs, ext4-loop, xfs-loop, btrfs-loop";

impl DestFs {
    pub fn from_name(s: &str) -> Option<DestFs> {
        Some(match s {
            "dir" => DestFs::Dir,
            "tmpfs" => DestFs::Tmpfs,
            "ext4-loop" => DestFs::Ext4Loop,
            "xfs-loop" => DestFs::XfsLoop,
            "btrfs-loop" => DestFs::BtrfsLoop,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            DestFs::Dir => "dir",
            DestFs::Tmpfs => "tmpfs",
            DestFs::Ext4Loop => "ext4-loop",
            DestFs::XfsLoop => "xfs-loop",
            DestFs::BtrfsLoop => "btrfs-loop",
        }
    }

    /// The mkfs program and its options (before the image path), and the package that has it.
    pub fn mkfs(self) -> Option<(&'static str, &'static [&'static str], &'static str)> {
        match self {
            // Inode tables and journal written now, not by ext4lazyinit during the runs.
            DestFs::Ext4Loop => Some((
                "mkfs.ext4",
                &["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"],
                "e2fsprogs",
            )),
            DestFs::XfsLoop => Some(("mkfs.xfs", &["-q", "-f"], "xfsprogs")),
            DestFs::BtrfsLoop => Some(("mkfs.btrfs", &["-q", "-f"], "btrfs-progs")),
            DestFs::Dir | DestFs::Tmpfs => None,
        }
    }

    /// Whether every run gets a volume of its own.
    pub fn is_volume(self) -> bool {
        self != DestFs::Dir
    }
}

/// Size of a run's volume when `[sweep] dest_fs_size` does not say: twice the payload, 16 KiB
/// per file (ext4's default bytes per inode, so it has inodes enough) and 512 MiB for metadata
/// and the smallest XFS; a Btrfs volume [`BTRFS_MIN_SIZE`] at least. The image is sparse: only
/// what is written takes space.
pub fn default_size(kind: DestFs, payload_bytes: u64, files: u64) -> u64 {
    let size = payload_bytes
        .saturating_mul(2)
        .saturating_add(files.saturating_mul(16 << 10))
        .saturating_add(512 << 20);
    match kind {
        DestFs::BtrfsLoop => size.max(BTRFS_MIN_SIZE),
        _ => size,
    }
}

/// The smallest default Btrfs volume. Btrfs lets metadata reservations run ahead of the
/// space they will use in proportion to the device's unallocated space; on a small volume the
/// creating threads wait in `__reserve_bytes` for it to be flushed. 65,536 × 4 KiB into a
/// fresh volume (`tar -x`, medians of 5): 19,499 files/s at 2 GiB, 32,540 at 8 GiB, 37,926 at
/// 32 GiB, 38,080 at 128 GiB (results/bench-create/create-btrfs-sizes-c148060.log). A volume
/// past the knee measures the transfer, not the volume's size (docs/decisions/0028).
pub const BTRFS_MIN_SIZE: u64 = 64 << 30;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for n in NAMES.split(", ") {
            assert_eq!(DestFs::from_name(n).unwrap().name(), n);
        }
        assert_eq!(DestFs::from_name("zfs"), None);
        assert!(!DestFs::Dir.is_volume());
        assert!(DestFs::Tmpfs.is_volume());
    }

    #[test]
    fn sizes() {
        // 65,536 × 4 KiB: 512 MiB + 1 GiB of inodes + 512 MiB.
        assert_eq!(default_size(DestFs::XfsLoop, 256 << 20, 65_536), 2 << 30);
        assert_eq!(default_size(DestFs::Tmpfs, 256 << 20, 65_536), 2 << 30);
        assert_eq!(default_size(DestFs::BtrfsLoop, 256 << 20, 65_536), 64 << 30);
        assert_eq!(
            default_size(DestFs::BtrfsLoop, 64 << 30, 1),
            (128 << 30) + (16 << 10) + (512 << 20)
        );
    }
}
