//! One parser per quantity, used by every subcommand and the sweep matrix: sizes (`4KiB`,
//! `4M`, `4MB`), durations (`141ms`, `30s`, `15min`) and rates (`300mbit`, `300mbit/s`,
//! `1 Gbit/s`). What the formatters print, the parsers read back.
//!
//! | quantity | units | notes |
//! |---|---|---|
//! | size | `B`; `K` `M` `G` `T` and `KiB` `MiB` `GiB` `TiB` (×1024); `kB` `MB` `GB` `TB` (×1000) | `K`/`M`/`G` alone are binary, as `dd` reads them |
//! | duration | `ns` `us` `µs` `ms` `s` `m` `min` `h` | a bare number is refused (except `0`): `90` could mean seconds or milliseconds |
//! | rate | `bit` `kbit` `mbit` `gbit` `tbit`, each optionally `/s` | a bare number is bit/s, as `tc` reads it; `mbps` is refused (`tc` reads it as megabytes/s) |

use std::time::Duration;

/// A quantity that could not be read; the message names the text and what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnitError(String);

fn err<T>(message: String) -> Result<T, UnitError> {
    Err(UnitError(message))
}

/// Splits `"141.5 ms"` into `("141.5", "ms")`: the leading number and the unit after it.
pub fn split_number(text: &str) -> (&str, &str) {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    (num, unit.trim())
}

/// Parses a byte count: a plain number, or a number with a unit: `B`, SI (`kB`, `MB`, `GB`,
/// `TB`: powers of 1000) or binary (`KiB`, `MiB`, `GiB`, `TiB`: powers of 1024). Units are
/// case-insensitive except that `K`/`M`/`G` alone mean binary (as `dd` does).
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let (num, unit) = split_number(text);
    if num.is_empty() {
        return err(format!(
            "'{text}' is not a size (expected e.g. 4096, 4KiB, 256MiB)"
        ));
    }
    let multiplier: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => {
            return err(format!(
                "unknown size unit '{other}' in '{text}' (use B, KiB, MiB, GiB, or kB, MB, GB)"
            ))
        }
    };
    if let Ok(whole) = num.parse::<u64>() {
        return whole
            .checked_mul(multiplier)
            .ok_or_else(|| UnitError(format!("size '{text}' is too large")));
    }
    let Ok(value) = num.parse::<f64>() else {
        return err(format!("'{text}' is not a size"));
    };
    let bytes = value * multiplier as f64;
    if !(0.0..1.8e19).contains(&bytes) || bytes.fract() != 0.0 {
        return err(format!("size '{text}' is not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// Parses a duration: a number with `ns`, `us`, `ms`, `s`, `m`/`min` or `h`. A bare number is
/// refused everywhere (except `0`), so `--timeout 90` and `--stats-interval 100` cannot mean
/// seconds in one place and milliseconds in another.
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let (num, unit) = split_number(text);
    let Ok(value) = num.parse::<f64>() else {
        return err(format!(
            "'{text}' is not a duration (expected e.g. 141ms, 30s, 15min)"
        ));
    };
    let seconds = match unit {
        "ns" => value / 1e9,
        "us" | "µs" => value / 1e6,
        "ms" => value / 1e3,
        "s" => value,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        "" if value == 0.0 => 0.0,
        "" => {
            return err(format!(
                "'{text}' has no unit (write e.g. {num}s or {num}ms)"
            ))
        }
        other => {
            return err(format!(
                "unknown duration unit '{other}' in '{text}' (use ns, us, ms, s, min, h)"
            ))
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| UnitError(format!("duration '{text}': {e}")))
}

/// Parses a rate in bits per second: `300mbit`, `300mbit/s`, `300 Mbit/s` (as
/// [`format_rate`] prints it), `1gbit`; a bare number is bit/s (as `tc` reads it).
pub fn parse_rate(text: &str) -> Result<u64, UnitError> {
    let (num, unit) = split_number(text);
    let Ok(value) = num.parse::<f64>() else {
        return err(format!(
            "'{text}' is not a rate (expected e.g. 300mbit or 1gbit/s)"
        ));
    };
    let lower = unit.to_ascii_lowercase();
    let per_second = lower.strip_suffix("/s").unwrap_or(&lower);
    let multiplier: f64 = match per_second {
        "" | "bit" => 1.0,
        "k" | "kbit" => 1e3,
        "m" | "mbit" => 1e6,
        "g" | "gbit" => 1e9,
        "t" | "tbit" => 1e12,
        u if u.ends_with("bps") || u.ends_with('b') => {
            return err(format!(
            "'{text}': ambiguous unit '{unit}' (tc reads mbps as megabytes/s); write e.g. 300mbit"
        ))
        }
        _ => {
            return err(format!(
                "'{text}': unknown rate unit '{unit}' (use bit, kbit, mbit, gbit, optionally /s)"
            ))
        }
    };
    let bps = (value * multiplier).round();
    if !(1.0..=1e13).contains(&bps) {
        return err(format!(
            "'{text}': rate out of range (1 bit/s to 10 Tbit/s)"
        ));
    }
    Ok(bps as u64)
}

/// `300000000` → `"300 Mbit/s"` ([`parse_rate`] reads it back).
pub fn format_rate(bps: u64) -> String {
    let b = bps as f64;
    if b >= 1e9 {
        format!("{} Gbit/s", trim_float(b / 1e9))
    } else if b >= 1e6 {
        format!("{} Mbit/s", trim_float(b / 1e6))
    } else if b >= 1e3 {
        format!("{} kbit/s", trim_float(b / 1e3))
    } else {
        format!("{bps} bit/s")
    }
}

/// `Duration` → `"141ms"`, `"0.5ms"`, `"250us"` ([`parse_duration`] reads it back).
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns >= 1e9 {
        format!("{}s", trim_float(ns / 1e9))
    } else if ns >= 1e5 {
        format!("{}ms", trim_float(ns / 1e6))
    } else if ns >= 1e3 {
        format!("{}us", trim_float(ns / 1e3))
    } else {
        format!("{ns}ns")
    }
}

/// A byte count as a user writes it: the largest binary unit that divides it exactly
/// (`20MiB`, `4TiB`, `1500`); [`parse_size`] reads it back.
pub fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes != 0 && bytes.trailing_zeros() >= shift {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// A duration as a user writes it: whole hours, else the largest of s, ms, us that divides it
/// exactly (`1h`, `60s`, `250ms`); [`parse_duration`] reads it back.
pub fn format_span(d: Duration) -> String {
    let ns = d.as_nanos();
    for (unit_ns, unit) in [
        (3_600_000_000_000, "h"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
    ] {
        if ns != 0 && ns / unit_ns * unit_ns == ns {
            return format!("{}{unit}", ns / unit_ns);
        }
    }
    format!("{ns}ns")
}

/// Up to three decimals, trailing zeros removed.
pub fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// Formats a byte count for people: `4.0 KiB`, `268.4 MB`-style binary units.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_spans_are_written_as_users_write_them() {
        for (n, s) in [
            (20 << 20, "20MiB"),
            (4 << 40, "4TiB"),
            (4096, "4KiB"),
            (1500, "1500"),
        ] {
            assert_eq!(format_size(n), s);
            assert_eq!(parse_size(s), Ok(n));
        }
        for (d, s) in [(3600, "1h"), (600, "600s"), (60, "60s"), (10, "10s")] {
            assert_eq!(format_span(Duration::from_secs(d)), s);
            assert_eq!(parse_duration(s), Ok(Duration::from_secs(d)));
        }
        assert_eq!(format_span(Duration::from_millis(250)), "250ms");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("4M"), Ok(4 << 20));
        assert_eq!(parse_size("4 MiB"), Ok(4 << 20));
        assert_eq!(parse_size("4MB"), Ok(4_000_000));
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("4kB"), Ok(4000));
        assert_eq!(parse_size("1.5KiB"), Ok(1536));
        assert!(parse_size("abc").is_err());
        assert!(parse_size("4 parsecs").is_err());
        assert!(parse_size("99999999999999999999").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("141ms"), Ok(Duration::from_millis(141)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("15min"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("0.5ms"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("70.5ms"), Ok(Duration::from_micros(70_500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        // A bare number is refused, with the fix in the message.
        let e = parse_duration("90").unwrap_err().to_string();
        assert!(e.contains("90s"), "{e}");
        assert!(parse_duration("100").is_err());
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("300mbit"), Ok(300_000_000));
        assert_eq!(parse_rate("300mbit/s"), Ok(300_000_000));
        assert_eq!(parse_rate("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate("100Mbit"), Ok(100_000_000));
        assert_eq!(parse_rate("2.5gbit"), Ok(2_500_000_000));
        assert_eq!(parse_rate("64kbit"), Ok(64_000));
        assert_eq!(parse_rate("1000"), Ok(1000));
        assert!(parse_rate("300mbps").is_err());
        assert!(parse_rate("300MB/s").is_err());
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0mbit").is_err());
    }

    #[test]
    fn what_is_printed_reads_back() {
        for bps in [64_000, 300_000_000, 1_000_000_000, 2_500_000_000, 999] {
            assert_eq!(
                parse_rate(&format_rate(bps)),
                Ok(bps),
                "{}",
                format_rate(bps)
            );
        }
        assert_eq!(format_rate(300_000_000), "300 Mbit/s");
        assert_eq!(format_rate(1_000_000_000), "1 Gbit/s");
        for d in [
            Duration::from_millis(141),
            Duration::from_micros(500),
            Duration::from_micros(250),
            Duration::from_secs(90),
            Duration::from_nanos(40),
        ] {
            assert_eq!(parse_duration(&format_duration(d)), Ok(d), "{d:?}");
        }
        assert_eq!(format_duration(Duration::from_millis(141)), "141ms");
        assert_eq!(format_duration(Duration::from_micros(500)), "0.5ms");
    }
}
