//! Process and machine figures that go in every row: peak RSS, CPU time, load, kernel.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Peak resident set size of this process (`VmHWM`), bytes.
pub fn peak_rss_bytes() -> u64 {
    status_kib("VmHWM:").unwrap_or(0) * 1024
}

/// Resets the peak-RSS mark to the current RSS (Linux ≥ 4.0: `echo 5 > clear_refs`), so a
/// long-running receiver reports the peak of one run, not of its lifetime.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", b"5").is_ok()
}

fn status_kib(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// User + system CPU seconds this process has used.
pub fn cpu_seconds() -> f64 {
    match shoal_sys::rusage::cpu_times() {
        Some((user, system)) => user + system,
        None => 0.0,
    }
}

/// Worker threads of the async runtime this is called from (1 for a current-thread runtime),
/// as the runtime itself reports them; 0 outside a runtime.
pub fn runtime_threads() -> u64 {
    tokio::runtime::Handle::try_current().map_or(0, |h| h.metrics().num_workers() as u64)
}

/// 1-minute load average.
pub fn load_avg_1m() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Kernel release (`uname -r`).
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Host name.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Current UTC time as ISO 8601 (`2026-11-30T05:01:02.345Z`).
pub fn utc_timestamp() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format_utc(d.as_secs(), d.subsec_millis())
}

/// Current UTC time for a file or folder name: `2026-11-30T05-01-02Z` (no colons, which some
/// tools and file systems refuse; no fraction).
pub fn utc_timestamp_for_names() -> String {
    let ts = utc_timestamp();
    ts.split('.').next().unwrap_or(&ts).replace(':', "-") + "Z"
}

fn format_utc(secs: u64, millis: u32) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Wall clock, µs since the Unix epoch: the one clock both ends can read for per-file latency
/// (exact when both run on one machine, e.g. in two namespaces; as good as clock sync across
/// two hosts).
pub fn wall_clock_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// The file system type holding `path` (ext4, btrfs, xfs, tmpfs, …), from statfs(2).
pub fn fs_type(path: &Path) -> String {
    let Ok(s) = rustix::fs::statfs(path) else {
        return String::new();
    };
    match s.f_type as u64 {
        0xEF53 => "ext4".into(),
        0x9123_683E => "btrfs".into(),
        0x5846_5342 => "xfs".into(),
        0x0102_1994 => "tmpfs".into(),
        0x794C_7630 => "overlayfs".into(),
        other => format!("0x{other:x}"),
    }
}

/// Free bytes on the file system holding `path`.
pub fn free_bytes(path: &Path) -> Option<u64> {
    let s = rustix::fs::statvfs(path).ok()?;
    Some(s.f_bavail * s.f_frsize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc() {
        assert_eq!(format_utc(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_utc(1_796_014_862, 5), "2026-11-30T05:01:02.005Z");
        assert_eq!(format_utc(951_782_400, 0), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn reads_process_figures() {
        assert!(peak_rss_bytes() > 0);
        assert!(cpu_seconds() >= 0.0);
        assert!(load_avg_1m() >= 0.0);
    }
}
