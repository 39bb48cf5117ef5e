//! Figures written as the units table writes them (README "Units"): rates in `Mbit/s`,
//! durations as `141ms` or `12.5s`, sizes in `KiB`/`MiB`, fractions as `%`.

use shoal_proto::units;
use std::time::Duration;

/// Seconds as a duration (`1.25s`, `141ms`; whole seconds from 100 s, with hours or
/// minutes alongside from 10 minutes: `9275s (~2.6h)`).
pub fn secs(s: f64) -> String {
    if !s.is_finite() {
        return "?".into();
    }
    let s = s.max(0.0);
    if s >= 3600.0 {
        format!("{s:.0}s (~{:.1}h)", s / 3600.0)
    } else if s >= 600.0 {
        format!("{s:.0}s (~{:.0}min)", s / 60.0)
    } else if s >= 100.0 {
        format!("{s:.0}s")
    } else if s >= 10.0 {
        format!("{}s", units::trim_float((s * 10.0).round() / 10.0))
    } else {
        units::format_duration(Duration::from_secs_f64(s))
    }
}

/// Bits per second to three significant digits (`96 Mbit/s`, `119 Mbit/s`).
pub fn rate(bps: f64) -> String {
    let bps = bps.max(0.0);
    let rounded = if bps >= 1000.0 {
        let unit = 10f64.powi(bps.log10().floor() as i32 - 2);
        (bps / unit).round() * unit
    } else {
        bps.round()
    };
    units::format_rate(rounded as u64)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_as_the_table_writes_them() {
        assert_eq!(rate(118_987_000.0), "119 Mbit/s");
        assert_eq!(rate(1e9), "1 Gbit/s");
        assert_eq!(rate(95_997_000.0), "96 Mbit/s");
        assert_eq!(secs(0.141), "141ms");
        assert_eq!(secs(12.34), "12.3s");
        assert_eq!(secs(9275.4), "9275s (~2.6h)");
        assert_eq!(pct(0.0123), "1.2%");
        assert_eq!(pct(0.0005), "0.050%");
    }
}
