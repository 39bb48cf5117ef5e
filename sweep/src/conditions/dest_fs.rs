//! The receiver's destination file system (`[sweep] dest_fs`): a folder on the work file system
//! (`dir`, the default), or a fresh volume per run — `tmpfs`, or a sparse image file made with
//! `mkfs` and loop-mounted (`ext4-loop`, `xfs-loop`, `btrfs-loop`, as the reference study ran
//! every method on Btrfs loop volumes). A fresh volume per run replaces deleting earlier
//! destinations: on the work file system (journal-less ext4 here) inode allocation right after
//! a big delete made runs 0.55–0.92 × their arm's median for minutes. After the run the volume
//! is unmounted and its image deleted (one large file, cheap to free); also on error.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::columns::{col, Row};

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
    fn mkfs(self) -> Option<(&'static str, &'static [&'static str], &'static str)> {
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

    /// Checks the tools are there before anything is touched: the error names the package
    /// (`scripts/setup.sh` installs them).
    pub fn check_tools(self) -> Result<()> {
        let mut need = vec![("mount", "mount"), ("umount", "mount")];
        if let Some((prog, _, pkg)) = self.mkfs() {
            need.push((prog, pkg));
        }
        if !self.is_volume() {
            return Ok(());
        }
        for (prog, pkg) in need {
            if which(prog).is_none() {
                bail!(
                    "[sweep] dest_fs = \"{}\" needs {prog}, which is not installed (package {pkg}; scripts/setup.sh installs it)",
                    self.name()
                );
            }
        }
        Ok(())
    }
}

fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// Size of a run's volume when `[sweep] dest_fs_size` does not say: twice the payload, 16 KiB
/// per file (ext4's default bytes per inode, so it has inodes enough) and 512 MiB for metadata
/// and the smallest XFS. The image is sparse: only what is written takes space.
pub fn default_size(payload_bytes: u64, files: u64) -> u64 {
    payload_bytes
        .saturating_mul(2)
        .saturating_add(files.saturating_mul(16 << 10))
        .saturating_add(512 << 20)
}

/// One run's fresh volume, mounted; unmounted and deleted when dropped.
pub struct Volume {
    kind: DestFs,
    image: Option<PathBuf>,
    mount_point: PathBuf,
    /// Where the receiver writes: a folder inside the volume (its root holds `lost+found` on
    /// ext4, which is not part of the tree).
    pub dest: PathBuf,
    size: u64,
    /// Keep the image file after unmounting (`--keep`).
    keep: bool,
}

impl Volume {
    /// Makes a fresh `kind` volume of `size` bytes mounted at `mount_point` (created), its
    /// image (if any) in `image_dir`.
    pub fn create(
        kind: DestFs,
        image_dir: &Path,
        mount_point: &Path,
        size: u64,
        keep: bool,
    ) -> Result<Volume> {
        std::fs::create_dir_all(mount_point)
            .with_context(|| format!("creating mount point {}", mount_point.display()))?;
        let mut v = Volume {
            kind,
            image: None,
            mount_point: mount_point.to_path_buf(),
            dest: mount_point.join("tree"),
            size,
            keep,
        };
        match kind.mkfs() {
            Some((prog, opts, _)) => {
                std::fs::create_dir_all(image_dir)?;
                let name = mount_point
                    .file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_else(|| "volume".into());
                let image = image_dir.join(format!("{name}.img"));
                // Sparse: set_len allocates nothing.
                let f = std::fs::File::create(&image)
                    .with_context(|| format!("creating image {}", image.display()))?;
                f.set_len(size)
                    .with_context(|| format!("sizing image {} to {size} bytes", image.display()))?;
                drop(f);
                v.image = Some(image.clone());
                run(Command::new(prog).args(opts).arg(&image))?;
                run(Command::new("mount")
                    .args(["-o", "loop"])
                    .arg(&image)
                    .arg(mount_point))?;
            }
            None if kind == DestFs::Tmpfs => run(Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size}")])
                .arg("tmpfs")
                .arg(mount_point))?,
            None => bail!("dest_fs {}: not a volume", kind.name()),
        }
        std::fs::create_dir(&v.dest).with_context(|| format!("creating {}", v.dest.display()))?;
        Ok(v)
    }

    /// Puts the volume in the row: its kind, size, and the file system and mount options the
    /// kernel reports for it.
    pub fn put(&self, row: &mut Row) {
        row.set(col::DEST_FS_KIND, self.kind.name());
        row.set(col::DEST_FS_SIZE_BYTES, self.size.to_string());
        if let Some((fs, opts)) = mount_at(&self.mount_point) {
            row.set(col::DEST_FS, fs);
            row.set(col::DEST_MOUNT_OPTIONS, opts);
        }
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        let mut unmounted = false;
        for _ in 0..20 {
            if run(Command::new("umount").arg(&self.mount_point)).is_ok() {
                unmounted = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        if !unmounted {
            // Something still holds it: detach it now, the kernel frees it when released.
            if let Err(e) = run(Command::new("umount").arg("-l").arg(&self.mount_point)) {
                eprintln!("warning: {e:#}");
            }
        }
        let _ = std::fs::remove_dir(&self.mount_point);
        if let Some(image) = &self.image {
            if !self.keep {
                let _ = std::fs::remove_file(image);
            }
        }
    }
}

/// Runs a command, its stderr in the error.
fn run(cmd: &mut Command) -> Result<()> {
    let what = crate::transfer::command_line(cmd);
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what}: {} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The file system type and options (mount options, then super options) of the mount at
/// exactly `point`, from /proc/self/mountinfo.
pub fn mount_at(point: &Path) -> Option<(String, String)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    parse_mount_at(&text, &point.to_string_lossy())
}

fn parse_mount_at(mountinfo: &str, point: &str) -> Option<(String, String)> {
    // The last matching line: a later mount over the same point hides the earlier ones.
    mountinfo.lines().rev().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        if left.get(4)?.replace("\\040", " ") != point {
            return None;
        }
        Some((
            right.first()?.to_string(),
            format!("{} ({})", left.get(5)?, right.get(2).copied().unwrap_or("")),
        ))
    })
}

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
    fn sizes_and_mountinfo() {
        // 65,536 × 4 KiB: 512 MiB + 1 GiB of inodes + 512 MiB.
        assert_eq!(default_size(256 << 20, 65_536), 2 << 30);
        let mi = "36 25 7:0 / /var/tmp/v/a rw,relatime shared:1 - btrfs /dev/loop0 rw,ssd,space_cache=v2\n\
                  37 25 0:5 / /var/tmp/v/b rw - tmpfs tmpfs rw,size=1024k\n";
        assert_eq!(
            parse_mount_at(mi, "/var/tmp/v/a"),
            Some(("btrfs".into(), "rw,relatime (rw,ssd,space_cache=v2)".into()))
        );
        assert_eq!(parse_mount_at(mi, "/var/tmp/v"), None);
    }
}
