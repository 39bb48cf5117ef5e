//! Parsing and formatting of the link's command-line quantities: rates, durations, loss
//! probabilities and queue sizes. Pure code, so every unit rule is unit-tested.
//!
//! Units follow `tc` where `tc` is unambiguous (`300mbit`, `1gbit`, `141ms`). `tc`'s `mbps`
//! means *megabytes* per second, a classic trap, so `…bps` spellings are rejected with a hint.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// A link rate in bits per second (IP packet bits; no Ethernet framing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Rate(pub u64);

impl Rate {
    pub fn bits_per_sec(self) -> u64 {
        self.0
    }
}

impl FromStr for Rate {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        parse_rate(s).map(Rate)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_rate(self.0))
    }
}

/// A time span given on the command line (`141ms`, `0.5ms`, `1s`, `250us`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Span(pub Duration);

impl FromStr for Span {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        parse_duration(s).map(Span)
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

/// A random-loss probability, stored as a fraction in `[0, 1]`.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Serialize, Deserialize)]
pub struct Loss(pub f64);

impl FromStr for Loss {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        parse_loss(s).map(Loss)
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", trim_float(self.0 * 100.0))
    }
}

/// How large the drop-tail queue is: a multiple of the bandwidth-delay product or bytes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum QueueSpec {
    Bdp(f64),
    Bytes(u64),
}

impl QueueSpec {
    /// Bytes for a direction with this rate and round-trip time. Never below one
    /// 1500-byte packet, so a tiny BDP still lets a full packet in.
    pub fn resolve(self, rate_bps: u64, rtt: Duration) -> u64 {
        match self {
            QueueSpec::Bytes(b) => b,
            QueueSpec::Bdp(k) => {
                let bdp = bdp_bytes(rate_bps, rtt) as f64;
                ((bdp * k).round() as u64).max(1500)
            }
        }
    }
}

impl FromStr for QueueSpec {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        parse_queue(s)
    }
}

impl fmt::Display for QueueSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueSpec::Bdp(k) => write!(f, "{}bdp", trim_float(*k)),
            QueueSpec::Bytes(b) => write!(f, "{b}"),
        }
    }
}

/// Bandwidth-delay product in bytes.
pub fn bdp_bytes(rate_bps: u64, rtt: Duration) -> u64 {
    (rate_bps as u128 * rtt.as_nanos() / 8 / 1_000_000_000) as u64
}

/// Splits `"141.5ms"` into `(141.5, "ms")`.
fn split_number(s: &str) -> Result<(f64, String)> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    if num.is_empty() {
        bail!("{s:?}: expected a number first");
    }
    let value: f64 = num.parse().with_context(|| format!("{s:?}: bad number"))?;
    Ok((value, unit.trim().to_ascii_lowercase()))
}

pub fn parse_rate(s: &str) -> Result<u64> {
    let (v, unit) = split_number(s)?;
    let mult: f64 = match unit.as_str() {
        "" | "bit" => 1.0,
        "k" | "kbit" => 1e3,
        "m" | "mbit" => 1e6,
        "g" | "gbit" => 1e9,
        "t" | "tbit" => 1e12,
        u if u.ends_with("bps") || u.ends_with("b/s") => {
            bail!("{s:?}: ambiguous unit {u:?} (tc reads mbps as megabytes/s); write e.g. 300mbit")
        }
        u => bail!("{s:?}: unknown rate unit {u:?} (use bit, kbit, mbit, gbit)"),
    };
    let bps = (v * mult).round();
    if !(1.0..=1e13).contains(&bps) {
        bail!("{s:?}: rate out of range");
    }
    Ok(bps as u64)
}

pub fn parse_duration(s: &str) -> Result<Duration> {
    let (v, unit) = split_number(s)?;
    let ns_per: f64 = match unit.as_str() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "" => bail!("{s:?}: missing unit (write e.g. 141ms)"),
        u => bail!("{s:?}: unknown time unit {u:?} (use ns, us, ms, s)"),
    };
    let ns = (v * ns_per).round();
    if ns > 3.6e12 {
        bail!("{s:?}: longer than an hour");
    }
    Ok(Duration::from_nanos(ns as u64))
}

pub fn parse_loss(s: &str) -> Result<f64> {
    let t = s.trim();
    let (v, unit) = split_number(t)?;
    let frac = match unit.as_str() {
        "%" => v / 100.0,
        "" if v == 0.0 => 0.0,
        "" => bail!("{s:?}: write loss as a percentage, e.g. 0.1%"),
        u => bail!("{s:?}: unknown loss unit {u:?}"),
    };
    if !(0.0..=1.0).contains(&frac) {
        bail!("{s:?}: loss must be between 0% and 100%");
    }
    Ok(frac)
}

pub fn parse_bytes(s: &str) -> Result<u64> {
    let (v, unit) = split_number(s)?;
    let mult: f64 = match unit.as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        u => bail!("{s:?}: unknown size unit {u:?} (use B, KB, MB, KiB, MiB, GiB)"),
    };
    Ok((v * mult).round() as u64)
}

pub fn parse_queue(s: &str) -> Result<QueueSpec> {
    let (v, unit) = split_number(s)?;
    if unit == "bdp" {
        if v <= 0.0 {
            bail!("{s:?}: queue must be larger than 0 BDP");
        }
        return Ok(QueueSpec::Bdp(v));
    }
    let b = parse_bytes(s)?;
    if b == 0 {
        bail!("{s:?}: queue must hold at least one byte");
    }
    Ok(QueueSpec::Bytes(b))
}

/// `300000000` → `"300 Mbit/s"`.
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

/// `Duration` → `"141ms"`, `"0.5ms"`, `"250us"`.
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

/// Up to three decimals, trailing zeros removed.
fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("300mbit").unwrap(), 300_000_000);
        assert_eq!(parse_rate("1gbit").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate("100Mbit").unwrap(), 100_000_000);
        assert_eq!(parse_rate("2.5gbit").unwrap(), 2_500_000_000);
        assert_eq!(parse_rate("64kbit").unwrap(), 64_000);
        assert_eq!(parse_rate("1000").unwrap(), 1000);
        assert!(parse_rate("300mbps").is_err());
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0mbit").is_err());
        assert_eq!(format_rate(300_000_000), "300 Mbit/s");
        assert_eq!(format_rate(1_000_000_000), "1 Gbit/s");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("141ms").unwrap(), Duration::from_millis(141));
        assert_eq!(parse_duration("0.5ms").unwrap(), Duration::from_micros(500));
        assert_eq!(parse_duration("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(
            parse_duration("70.5ms").unwrap(),
            Duration::from_micros(70_500)
        );
        assert!(parse_duration("141").is_err());
        assert!(parse_duration("ms").is_err());
        assert_eq!(format_duration(Duration::from_millis(141)), "141ms");
        assert_eq!(format_duration(Duration::from_micros(500)), "0.5ms");
    }

    #[test]
    fn losses() {
        assert_eq!(parse_loss("0.1%").unwrap(), 0.001);
        assert_eq!(parse_loss("1%").unwrap(), 0.01);
        assert_eq!(parse_loss("0").unwrap(), 0.0);
        assert!(parse_loss("0.1").is_err());
        assert!(parse_loss("101%").is_err());
        assert_eq!(Loss(0.001).to_string(), "0.1%");
    }

    #[test]
    fn queues() {
        assert_eq!(parse_queue("1bdp").unwrap(), QueueSpec::Bdp(1.0));
        assert_eq!(parse_queue("2BDP").unwrap(), QueueSpec::Bdp(2.0));
        assert_eq!(parse_queue("375000").unwrap(), QueueSpec::Bytes(375_000));
        assert_eq!(parse_queue("4MiB").unwrap(), QueueSpec::Bytes(4 << 20));
        assert_eq!(parse_queue("64KiB").unwrap(), QueueSpec::Bytes(65_536));
        assert_eq!(parse_queue("1MB").unwrap(), QueueSpec::Bytes(1_000_000));
        assert!(parse_queue("0").is_err());
        assert!(parse_queue("1parsec").is_err());
        // 300 Mbit/s × 141 ms = 5,287,500 bytes.
        let rtt = Duration::from_millis(141);
        assert_eq!(QueueSpec::Bdp(1.0).resolve(300_000_000, rtt), 5_287_500);
        assert_eq!(QueueSpec::Bdp(2.0).resolve(300_000_000, rtt), 10_575_000);
        assert_eq!(QueueSpec::Bytes(9000).resolve(300_000_000, rtt), 9000);
        // A BDP smaller than one packet still admits a packet.
        assert_eq!(QueueSpec::Bdp(1.0).resolve(10_000, rtt), 1500);
    }
}
