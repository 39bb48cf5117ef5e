//! The link's command-line quantities: rates, time spans, loss probabilities and queue sizes.
//! Rates, durations and byte counts are read by shoal-proto's `units` (one parser per quantity
//! for every subcommand: `4M` is 4 MiB here as in `gen --size`); this module adds loss, queues
//! and the link's bounds. Pure code, so every rule is unit-tested.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

// The quantities every subcommand shares are parsed and printed by one module (shoal-proto's
// units); the link adds loss, queues and its bounds.
pub use shoal_proto::units::{
    format_duration, format_rate, parse_duration, parse_rate, parse_size, trim_float,
};

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
        Ok(Rate(parse_rate(s)?))
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
        parse_span(s).map(Span)
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

/// Splits `"0.1%"` into `(0.1, "%")`.
fn split_number(s: &str) -> Result<(f64, String)> {
    let (num, unit) = shoal_proto::units::split_number(s);
    if num.is_empty() {
        bail!("{s:?}: expected a number first");
    }
    let value: f64 = num.parse().with_context(|| format!("{s:?}: bad number"))?;
    Ok((value, unit.to_ascii_lowercase()))
}

/// A link time span: any duration [`parse_duration`] reads, up to an hour.
pub fn parse_span(s: &str) -> Result<Duration> {
    let d = parse_duration(s)?;
    if d > Duration::from_secs(3600) {
        bail!("{s:?}: longer than an hour");
    }
    Ok(d)
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

pub fn parse_queue(s: &str) -> Result<QueueSpec> {
    let (v, unit) = split_number(s)?;
    if unit == "bdp" {
        if v <= 0.0 {
            bail!("{s:?}: queue must be larger than 0 BDP");
        }
        return Ok(QueueSpec::Bdp(v));
    }
    let b = parse_size(s)?;
    if b == 0 {
        bail!("{s:?}: queue must hold at least one byte");
    }
    Ok(QueueSpec::Bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans() {
        assert_eq!(parse_span("141ms").unwrap(), Duration::from_millis(141));
        assert_eq!(parse_span("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_span("61min").is_err());
        assert!(parse_span("141").is_err());
        assert_eq!("141ms".parse::<Span>().unwrap().to_string(), "141ms");
        assert_eq!("300mbit/s".parse::<Rate>().unwrap(), Rate(300_000_000));
        assert_eq!(
            Rate(300_000_000).to_string().parse::<Rate>().unwrap(),
            Rate(300_000_000)
        );
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
        // The same byte count as `gen --size 4M` and the sweep matrix's payload sizes.
        assert_eq!(parse_queue("4M").unwrap(), QueueSpec::Bytes(4 << 20));
        assert_eq!(
            parse_queue("4M").unwrap(),
            QueueSpec::Bytes(parse_size("4M").unwrap())
        );
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
