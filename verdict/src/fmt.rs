//! Figures written as the units table writes them (README "Units"): rates in `Mbit/s`,
//! durations as `141ms` or `12.5s`, sizes in `KiB`/`MiB`, fractions as `%`.

use shoal_proto::units;
use std::time::Duration;

/// Seconds as a duration (`1.25s`, `141ms`).
pub fn secs(s: f64) -> String {
    if !s.is_finite() {
        return "?".into();
    }
    units::format_duration(Duration::from_secs_f64(s.max(0.0)))
}

/// Bits per second (`96 Mbit/s`).
pub fn rate(bps: f64) -> String {
    units::format_rate(bps.max(0.0).round() as u64)
}

/// Bytes (`4.0 KiB`).
pub fn size(bytes: u64) -> String {
    units::human_bytes(bytes)
}

/// A fraction as a percentage (`1.2%`, `0.05%`).
pub fn pct(f: f64) -> String {
    let p = 100.0 * f;
    if p != 0.0 && p.abs() < 0.1 {
        format!("{p:.3}%")
    } else {
        format!("{p:.1}%")
    }
}
