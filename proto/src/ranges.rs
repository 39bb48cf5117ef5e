//! The range of every duration and count setting of `send` and `recv` (and the path-state
//! commands), defined once: the flags' value parsers check them when the command line is
//! parsed (a value outside is an invocation error, exit 2, naming the flag, the value and
//! the range), so a sweep's pre-flight, which parses every run's command line with the real
//! CLI, refuses them before its first run. Sizes have their floors in
//! [`crate::recvsettings::FLOORS`]; the link's ranges live with its defaults (`shoal-link`).

use std::fmt;
use std::time::Duration;

use crate::units::{format_size, format_span, parse_duration, parse_size};

/// A setting's least and greatest value, and why the least.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range<T> {
    /// The flag, without `--`.
    pub flag: &'static str,
    pub least: T,
    pub most: T,
    /// `0` is accepted outside the range and means "off".
    pub zero_is_off: bool,
    /// Why not less (said when a value is below `least`).
    pub why: &'static str,
}

const HOUR: Duration = Duration::from_secs(3_600);
const DAY: Duration = Duration::from_secs(86_400);

/// Every duration flag of `send`, `recv` and `path`.
pub const DURATIONS: &[Range<Duration>] = &[
    Range {
        flag: "idle-timeout",
        least: Duration::from_secs(1),
        most: DAY,
        zero_is_off: false,
        why: "below a second a peer is dropped between the flights of its own handshake",
    },
    Range {
        flag: "hello-timeout",
        least: Duration::from_secs(1),
        most: HOUR,
        zero_is_off: false,
        why: "a TLS handshake and hello take several round trips on a long path",
    },
    Range {
        flag: "connect-timeout",
        least: Duration::from_millis(100),
        most: HOUR,
        zero_is_off: false,
        why: "a connection takes at least a round trip and a handshake",
    },
    Range {
        flag: "timeout",
        least: Duration::from_secs(1),
        most: Duration::from_secs(30 * 86_400),
        zero_is_off: false,
        why: "a limit below a second fails the run before it has connected",
    },
    Range {
        flag: "interval",
        least: Duration::from_millis(10),
        most: HOUR,
        zero_is_off: true,
        why: "progress lines more often than every 10 ms cost more than they tell",
    },
    Range {
        flag: "stats-interval",
        least: Duration::from_millis(1),
        most: HOUR,
        zero_is_off: false,
        why: "the sampler cannot tick faster than the runtime's timer (1 ms)",
    },
    Range {
        flag: "path-state-lifetime",
        least: Duration::from_secs(1),
        most: Duration::from_secs(365 * 86_400),
        zero_is_off: false,
        why: "a lifetime of 0 would make every record expired as it is saved",
    },
];

/// Every count and byte-count flag of `send` and `recv` without a floor in `FLOORS`.
pub const COUNTS: &[Range<u64>] = &[
    Range {
        flag: "max-files",
        least: 1,
        most: u64::MAX,
        zero_is_off: false,
        why: "a limit of 0 refuses every run",
    },
    Range {
        flag: "max-bytes",
        least: 1,
        most: u64::MAX,
        zero_is_off: false,
        why: "a limit of 0 refuses every run",
    },
    Range {
        flag: "max-folders",
        least: 0,
        most: u64::MAX,
        zero_is_off: false,
        why: "",
    },
    Range {
        flag: "threads",
        least: 1,
        most: 256,
        zero_is_off: false,
        why: "the connections need a thread to run on",
    },
    Range {
        flag: "max-streams",
        least: 1,
        most: crate::recvsettings::MAX_STREAMS as u64,
        zero_is_off: false,
        why: "a per-file mode with no stream outstanding sends nothing",
    },
    Range {
        flag: "connections",
        least: 1,
        most: 64,
        zero_is_off: false,
        why: "a run needs a connection",
    },
    Range {
        flag: "max-udp-payload",
        least: 1_200,
        most: 6_500,
        zero_is_off: false,
        why: "QUIC needs datagrams of 1,200 bytes",
    },
    Range {
        flag: "writers",
        least: 1,
        most: crate::recvsettings::MAX_WRITERS as u64,
        zero_is_off: false,
        why: "a run needs a writer",
    },
    Range {
        flag: "max-connections",
        least: 1,
        most: u32::MAX as u64,
        zero_is_off: false,
        why: "a limit of 0 refuses every connection",
    },
    Range {
        flag: "max-path-len",
        least: 1,
        most: u16::MAX as u64,
        zero_is_off: false,
        why: "a limit of 0 refuses every name",
    },
    Range {
        flag: "max-depth",
        least: 1,
        most: u16::MAX as u64,
        zero_is_off: false,
        why: "a limit of 0 refuses every name",
    },
    Range {
        flag: "read-ahead",
        least: 64 << 10,
        most: 4 << 30,
        zero_is_off: false,
        why: "a read-ahead below one read's worth stalls the reader",
    },
];

/// The error of a value outside its range (or unreadable): names the flag, the value and
/// the range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeError(pub String);

impl fmt::Display for RangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RangeError {}

impl Range<Duration> {
    /// `1s..=24h` (with `0 (off) or` first when zero is off).
    pub fn describe(&self) -> String {
        let span = format!("{}..={}", format_span(self.least), format_span(self.most));
        match self.zero_is_off {
            true => format!("0 (off) or {span}"),
            false => span,
        }
    }

    pub fn check(&self, text: &str, v: Duration) -> Result<Duration, RangeError> {
        if (v.is_zero() && self.zero_is_off) || (self.least..=self.most).contains(&v) {
            return Ok(v);
        }
        let why = if v < self.least { self.why } else { "" };
        Err(outside(self.flag, text, &self.describe(), why))
    }
}

impl Range<u64> {
    /// `1..=4GiB` for byte counts, `1..` for counts without a bound.
    pub fn describe(&self) -> String {
        let show = |v: u64| match takes_size(self.flag) {
            true => format_size(v),
            false => v.to_string(),
        };
        match self.most {
            u64::MAX => format!("{} or more", show(self.least)),
            most => format!("{}..={}", show(self.least), show(most)),
        }
    }

    pub fn check(&self, text: &str, v: u64) -> Result<u64, RangeError> {
        if (v == 0 && self.zero_is_off) || (self.least..=self.most).contains(&v) {
            return Ok(v);
        }
        let why = if v < self.least { self.why } else { "" };
        Err(outside(self.flag, text, &self.describe(), why))
    }
}

/// The count flags that take a size (`4MiB`); the others a bare count.
fn takes_size(flag: &str) -> bool {
    matches!(flag, "max-bytes" | "read-ahead")
}

fn outside(flag: &str, text: &str, range: &str, why: &str) -> RangeError {
    let why = match why {
        "" => String::new(),
        w => format!(": {w}"),
    };
    RangeError(format!("--{flag} {text} is outside {range}{why}"))
}

/// The range of duration flag `flag`.
pub fn duration_range(flag: &str) -> &'static Range<Duration> {
    DURATIONS
        .iter()
        .find(|r| r.flag == flag)
        .unwrap_or_else(|| panic!("no range for --{flag}"))
}

/// The range of count flag `flag`.
pub fn count_range(flag: &str) -> &'static Range<u64> {
    COUNTS
        .iter()
        .find(|r| r.flag == flag)
        .unwrap_or_else(|| panic!("no range for --{flag}"))
}

/// A duration flag's text (`30s`, `500ms`) within its range: the flags' value parser.
pub fn parse_flag_duration(flag: &str, text: &str) -> Result<Duration, RangeError> {
    let v = parse_duration(text).map_err(|e| RangeError(format!("--{flag} {text:?}: {e}")))?;
    duration_range(flag).check(text, v)
}

/// A count flag's text within its range; a size (`4KiB`) where the least is 1 KiB or more.
pub fn parse_flag_count(flag: &str, text: &str) -> Result<u64, RangeError> {
    let range = count_range(flag);
    // A size where the least is 1 KiB or more (`4MiB`); a bare count otherwise.
    let v = match takes_size(flag) {
        true => parse_size(text).map_err(|e| RangeError(format!("--{flag} {text:?}: {e}")))?,
        false => text
            .trim()
            .parse::<u64>()
            .map_err(|_| RangeError(format!("--{flag} {text:?} is not a count")))?,
    };
    range.check(text, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_nonsense_durations_are_refused_naming_flag_value_and_range() {
        let e = parse_flag_duration("idle-timeout", "0s").unwrap_err().0;
        assert!(
            e.starts_with("--idle-timeout 0s is outside 1s..=24h:"),
            "{e}"
        );
        let e = parse_flag_duration("hello-timeout", "0s").unwrap_err().0;
        assert!(
            e.starts_with("--hello-timeout 0s is outside 1s..=1h"),
            "{e}"
        );
        for t in ["0s", "1ns", "999ms"] {
            let e = parse_flag_duration("timeout", t).unwrap_err().0;
            assert!(
                e.starts_with(&format!("--timeout {t} is outside 1s..")),
                "{e}"
            );
        }
        assert_eq!(
            parse_flag_duration("timeout", "15min"),
            Ok(Duration::from_secs(900))
        );
        assert_eq!(parse_flag_duration("interval", "0"), Ok(Duration::ZERO));
        let e = parse_flag_duration("interval", "1ms").unwrap_err().0;
        assert!(e.contains("is outside 0 (off) or 10ms..=1h"), "{e}");
        assert!(parse_flag_duration("idle-timeout", "soon").is_err());
    }

    #[test]
    fn counts_have_ranges() {
        assert!(parse_flag_count("max-files", "0").is_err());
        assert_eq!(parse_flag_count("max-folders", "0"), Ok(0));
        let e = parse_flag_count("read-ahead", "1").unwrap_err().0;
        assert_eq!(
            e,
            "--read-ahead 1 is outside 64KiB..=4GiB: a read-ahead below one read's worth stalls the reader"
        );
        assert_eq!(parse_flag_count("max-bytes", "1TiB"), Ok(1 << 40));
    }

    #[test]
    fn every_default_is_within_its_range() {
        for r in DURATIONS {
            assert!(r.least <= r.most, "{}", r.flag);
        }
        for r in COUNTS {
            assert!(r.least <= r.most, "{}", r.flag);
        }
    }
}
