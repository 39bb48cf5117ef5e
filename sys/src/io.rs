//! A read into a buffer's uninitialised spare capacity.

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
