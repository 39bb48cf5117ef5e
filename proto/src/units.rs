//! Parsing of human-written sizes and durations (`4KiB`, `256MiB`, `1.5s`, `141ms`).

use std::time::Duration;

/// Parses a byte count: a plain number, or a number with a unit: `B`, SI (`kB`, `MB`, `GB`,
/// `TB`: powers of 1000) or binary (`KiB`, `MiB`, `GiB`, `TiB`: powers of 1024). Units are
/// case-insensitive except that `K`/`M`/`G` alone mean binary (as `dd` does).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!(
            "'{text}' is not a size (expected e.g. 4096, 4KiB, 256MiB)"
        ));
    }
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => return Err(format!("unknown size unit '{other}' in '{text}'")),
    };
    if let Ok(whole) = num.parse::<u64>() {
        return whole
            .checked_mul(multiplier)
            .ok_or_else(|| format!("size '{text}' is too large"));
    }
    let value: f64 = num.parse().map_err(|_| format!("'{text}' is not a size"))?;
    let bytes = value * multiplier as f64;
    if !(0.0..1.8e19).contains(&bytes) || bytes.fract() != 0.0 {
        return Err(format!("size '{text}' is not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// Parses a duration: a number with `ns`, `us`, `ms`, `s`, `m`, `h` (a plain number is seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{text}' is not a duration (expected e.g. 141ms, 30s, 15m)"))?;
    let seconds = match unit.trim() {
        "ns" => value / 1e9,
        "us" | "µs" => value / 1e6,
        "ms" => value / 1e3,
        "" | "s" => value,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => return Err(format!("unknown duration unit '{other}' in '{text}'")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("duration '{text}': {e}"))
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
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
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
        assert_eq!(parse_duration("0.5ms"), Ok(Duration::from_micros(500)));
        assert!(parse_duration("soon").is_err());
    }
}
