//! A read into a buffer's uninitialised spare capacity; a small regular file read whole.

use std::io;
use std::os::fd::AsFd;

/// One `read` of at most `max` bytes from `fd` into `buf`'s spare capacity, which is not
/// zeroed first (zeroing 4 KiB before every 4 KiB file's read cost the sender more
/// instructions than the read's copy); `buf` grows by the bytes read. Returns them: 0 at end
/// of file or with no spare capacity.
pub fn read_into_spare(fd: impl AsFd, buf: &mut bytes::BytesMut, max: usize) -> io::Result<usize> {
    let spare = buf.spare_capacity_mut();
    let limit = max.min(spare.len());
    let (init, _) = rustix::io::read(fd, &mut spare[..limit])?;
    let n = init.len();
    // SAFETY: `read` initialised the first `n` bytes of the spare capacity, which start at
    // `buf.len()`.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}

/// The content of the regular file at `path`, at most `max` bytes. Opened with `O_NONBLOCK`
/// and then checked, so a FIFO or a device under the name neither hangs the open nor is
/// read; a file over `max` is refused, not read.
pub fn read_small_regular(path: &std::path::Path, max: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    let too_big = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {max} bytes, the most read here"),
        )
    };
    if meta.len() > max {
        return Err(too_big());
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    f.take(max + 1).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(too_big());
    }
    Ok(out)
}

/// Creates `path` for writing, only if nothing is there: `O_CREAT | O_EXCL | O_NOFOLLOW`
/// (a symbolic link or any file planted under the name is refused, never followed), mode
/// `mode` before the umask.
pub fn create_new_nofollow(path: &std::path::Path, mode: u32) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// This process's effective user id.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid takes nothing and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_small_regular_files_are_read() {
        let t = std::env::temp_dir().join(format!("shoal-sys-io-{}", std::process::id()));
        std::fs::create_dir_all(&t).unwrap();
        let small = t.join("small");
        std::fs::write(&small, b"{}").unwrap();
        assert_eq!(read_small_regular(&small, 16).unwrap(), b"{}");
        let big = t.join("big");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(1 << 20)
            .unwrap();
        let e = read_small_regular(&big, 16).unwrap_err().to_string();
        assert!(e.contains("larger than 16 bytes"), "{e}");
        let fifo = t.join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let e = read_small_regular(&fifo, 16).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn a_new_file_is_never_created_through_a_planted_link() {
        let t = std::env::temp_dir().join(format!("shoal-sys-nofollow-{}", std::process::id()));
        std::fs::create_dir_all(&t).unwrap();
        let outside = t.join("outside");
        std::fs::write(&outside, b"keep").unwrap();
        let planted = t.join(".key.tmp1");
        std::os::unix::fs::symlink(&outside, &planted).unwrap();
        let e = create_new_nofollow(&planted, 0o600).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        // A dangling link is not followed either.
        let dangling = t.join(".key.tmp2");
        std::os::unix::fs::symlink(t.join("made-through-the-link"), &dangling).unwrap();
        assert!(create_new_nofollow(&dangling, 0o600).is_err());
        assert!(!t.join("made-through-the-link").exists());
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
        create_new_nofollow(&t.join("fresh"), 0o600).unwrap();
        std::fs::remove_dir_all(&t).unwrap();
    }
}
