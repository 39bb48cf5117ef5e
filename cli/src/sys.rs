//! The binary's one `unsafe`: glibc's allocator settings (no safe wrapper exists; rustix
//! covers system calls, not libc's allocator).
#![allow(unsafe_code)]

/// glibc malloc tuning for a process that moves many small buffers between a few threads.
/// - The mmap threshold stays at its 128 KiB default. glibc otherwise raises it each time a
///   large mmapped block is freed, after which quinn's receive buffers (the assembler's
///   defragmented chunks, tens of KiB to MiBs, allocated and freed on different threads) land
///   in the arenas and stay mapped after they are freed: a quic-bundle receiver held ~35 MB of
///   live heap (massif) but 58–69 MB of RSS; pinned, 46–49 MB at the same speed.
/// - Two arenas instead of 8 per core: a tcp-streams receiver's peak RSS 61 → 54 MB, no
///   measurable loss of speed (docs/benchmarks.md).
pub fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only adjusts allocator parameters; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}
