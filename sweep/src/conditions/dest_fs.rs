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
use shoal_matrix::conditions::dest_fs::DestFs;
use shoal_report::columns::{col, Row};

/// Checks the tools are there before anything is touched: the error names the package
/// (`scripts/setup.sh` installs them).
pub fn check_tools(fs: DestFs) -> Result<()> {
    let mut need = vec![("mount", "mount"), ("umount", "mount")];
    if let Some((prog, _, pkg)) = fs.mkfs() {
        need.push((prog, pkg));
    }
    if !fs.is_volume() {
        return Ok(());
    }
    for (prog, pkg) in need {
        if which(prog).is_none() {
            bail!(
                "[sweep] dest_fs = \"{}\" needs {prog}, which is not installed (package {pkg}; scripts/setup.sh installs it)",
                fs.name()
            );
        }
    }
    Ok(())
}

fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
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
    /// Its entry in the sweep's list of what it owns (`shoal_hostctl::owned`).
    owned: Option<u64>,
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
            owned: None,
        };
        let image = kind.mkfs().map(|_| {
            let name = mount_point
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_else(|| "volume".into());
            image_dir.join(format!("{name}.img"))
        });
        v.owned = shoal_hostctl::owned::acquire(shoal_hostctl::owned::Item::Mount {
            point: mount_point.to_path_buf(),
            image: image.clone().filter(|_| !keep),
        });
        match kind.mkfs() {
            Some((prog, opts, _)) => {
                std::fs::create_dir_all(image_dir)?;
                let image = image.expect("a loop volume has an image");
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

impl Volume {
    /// Unmounts the volume and deletes its image (what dropping it does, named for the call
    /// site).
    pub fn restore(self) {
        drop(self);
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
            match run(Command::new("umount").arg("-l").arg(&self.mount_point)) {
                Ok(()) => unmounted = true,
                Err(e) => eprintln!("warning: {e:#}"),
            }
        }
        let _ = std::fs::remove_dir(&self.mount_point);
        if let Some(image) = &self.image {
            if !self.keep {
                let _ = std::fs::remove_file(image);
            }
        }
        if unmounted {
            shoal_hostctl::owned::release(self.owned.take());
        }
    }
}

/// Runs a command, its stderr in the error.
fn run(cmd: &mut Command) -> Result<()> {
    let what = crate::baseline::command_line(cmd);
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
    fn mountinfo() {
        let mi = "36 25 7:0 / /var/tmp/v/a rw,relatime shared:1 - btrfs /dev/loop0 rw,ssd,space_cache=v2\n\
                  37 25 0:5 / /var/tmp/v/b rw - tmpfs tmpfs rw,size=1024k\n";
        assert_eq!(
            parse_mount_at(mi, "/var/tmp/v/a"),
            Some(("btrfs".into(), "rw,relatime (rw,ssd,space_cache=v2)".into()))
        );
        assert_eq!(parse_mount_at(mi, "/var/tmp/v"), None);
    }
}
