//! Temporary files a receiver that is no longer running left behind, removed at start.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use anyhow::{anyhow, Result};
use rustix::fs::{openat, unlinkat, AtFlags, Mode, OFlags};

use super::{is_temp_name, TEMP_PREFIX};

/// Removes the temporary files that receivers which are no longer running left anywhere
/// under `root` (a killed run's partial files). Walks with `openat(O_NOFOLLOW)` from `root`,
/// so it never leaves it. Files of a live process (this one, or another receiver on the
/// same destination) are left alone. Returns how many were removed.
pub fn remove_stale_temps(root: &Path) -> Result<u64> {
    let fd = match openat(
        rustix::fs::CWD,
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(0),
        Err(e) => {
            return Err(anyhow!(
                "cannot open {}: {}",
                root.display(),
                io::Error::from(e)
            ))
        }
    };
    let me = std::process::id();
    let mut removed = 0;
    // Depth first, holding one open folder per level: (folder, its subfolders still to visit).
    let mut stack: Vec<(OwnedFd, Vec<std::ffi::CString>)> = Vec::new();
    let subdirs = scan_for_temps(&fd, me, &mut removed);
    stack.push((fd, subdirs));
    while let Some((dir, pending)) = stack.last_mut() {
        let Some(name) = pending.pop() else {
            stack.pop();
            continue;
        };
        let Ok(sub) = openat(
            &*dir,
            name.as_c_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            continue;
        };
        let subdirs = scan_for_temps(&sub, me, &mut removed);
        stack.push((sub, subdirs));
    }
    Ok(removed)
}

/// Removes the stale temporary files in one folder; returns its subfolders.
fn scan_for_temps(dir: &OwnedFd, me: u32, removed: &mut u64) -> Vec<std::ffi::CString> {
    use rustix::fs::FileType;
    let mut subdirs = Vec::new();
    let Ok(listing) = rustix::fs::Dir::read_from(dir) else {
        return subdirs;
    };
    for entry in listing.flatten() {
        let name = entry.file_name();
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let mut kind = entry.file_type();
        if kind == FileType::Unknown {
            kind = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .map(|st| FileType::from_raw_mode(st.st_mode))
                .unwrap_or(FileType::Unknown);
        }
        if kind == FileType::Directory {
            subdirs.push(name.to_owned());
        } else if kind == FileType::RegularFile && is_temp_name(bytes) {
            if let Some(pid) = temp_owner(bytes) {
                let alive = pid == me || Path::new(&format!("/proc/{pid}")).exists();
                if !alive && unlinkat(dir, name, AtFlags::empty()).is_ok() {
                    *removed += 1;
                }
            }
        }
    }
    subdirs
}

/// The process id in a temporary file name `.shoal-tmp.<pid>.…`.
fn temp_owner(name: &[u8]) -> Option<u32> {
    let rest = &name[TEMP_PREFIX.len()..];
    let end = rest.iter().position(|&b| b == b'.')?;
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}
