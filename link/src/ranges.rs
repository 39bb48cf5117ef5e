//! The range of every numeric and duration flag of `shoal link`, beside its defaults
//! (`ctl::up::UpConfig`, `check::CheckOptions`): the CLI's value parsers check them as the
//! command line is parsed (exit 2, naming the flag, the value and the range).

use std::time::Duration;

use anyhow::{bail, Result};
use shoal_proto::ranges::Range;

use crate::parse::{format_rate, parse_rate, parse_span};

/// Durations: `up --rtt`, `check --duration/--warmup/--bulk-loss-max`, `blackhole --for`.
pub const SPANS: &[Range<Duration>] = &[
    Range {
        flag: "rtt",
        least: Duration::from_micros(100),
        most: Duration::from_secs(10),
        zero_is_off: false,
        why: "the delay line holds packets for half of it each way",
    },
    Range {
        flag: "duration",
        least: Duration::from_secs(1),
        most: Duration::from_secs(3_600),
        zero_is_off: false,
        why: "a bulk flow shorter than a second measures its own slow start",
    },
    Range {
        flag: "warmup",
        least: Duration::ZERO,
        most: Duration::from_secs(600),
        zero_is_off: false,
        why: "",
    },
    Range {
        flag: "bulk-loss-max",
        least: Duration::ZERO,
        most: Duration::from_secs(3_600),
        zero_is_off: false,
        why: "",
    },
    Range {
        flag: "for",
        least: Duration::from_millis(1),
        most: Duration::from_secs(3_600),
        zero_is_off: false,
        why: "",
    },
];

/// Counts: `up --mtu/--tcp-mem-max`, `check --loss-probes`.
pub const COUNTS: &[Range<u64>] = &[
    Range {
        flag: "mtu",
        least: 68,
        most: 65_535,
        zero_is_off: false,
        why: "IPv4's least and IP's greatest packet",
    },
    Range {
        flag: "tcp-mem-max",
        least: 64 << 10,
        most: i32::MAX as u64,
        zero_is_off: false,
        why: "the kernel's buffer limits are an int",
    },
    Range {
        flag: "loss-probes",
        least: 1,
        most: 1_000_000,
        zero_is_off: false,
        why: "",
    },
];

/// `up --rate` and `--down-rate`, bit/s: 1 kbit/s to 400 Gbit/s.
pub const RATE: (u64, u64) = (1_000, 400_000_000_000);

/// A duration flag's text within its range.
pub fn span_in(flag: &str, text: &str) -> Result<Duration> {
    let v = parse_span(text)?;
    let r = SPANS.iter().find(|r| r.flag == flag).expect("a link range");
    Ok(r.check(text, v)?)
}

/// A count flag's text within its range (`--tcp-mem-max` takes a size).
pub fn count_in(flag: &str, text: &str) -> Result<u64> {
    count_value_in(flag, text, crate::parse::parse_size(text)?)
}

/// A count already parsed (from a matrix, say), written `text`, within `flag`'s range.
pub fn count_value_in(flag: &str, text: &str, v: u64) -> Result<u64> {
    let r = COUNTS
        .iter()
        .find(|r| r.flag == flag)
        .expect("a link range");
    Ok(r.check(text, v)?)
}

/// A rate flag's text within [`RATE`].
pub fn rate_in(flag: &str, text: &str) -> Result<u64> {
    let v = parse_rate(text)?;
    if !(RATE.0..=RATE.1).contains(&v) {
        bail!(
            "--{flag} {text} is outside {}..={}",
            format_rate(RATE.0),
            format_rate(RATE.1)
        );
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonsense_link_settings_are_refused_by_name() {
        let e = span_in("rtt", "0s").unwrap_err().to_string();
        assert!(e.starts_with("--rtt 0s is outside 100us..=10s"), "{e}");
        assert!(rate_in("rate", "0").is_err());
        assert_eq!(rate_in("rate", "300mbit").unwrap(), 300_000_000);
        assert!(count_in("mtu", "40").is_err());
        assert!(count_in("loss-probes", "0").is_err());
        assert_eq!(count_in("tcp-mem-max", "64MiB").unwrap(), 64 << 20);
        assert!(span_in("for", "0s").is_err());
    }
}
