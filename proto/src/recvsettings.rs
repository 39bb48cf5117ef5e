//! Receiver settings one run may carry over the control channel (a two-host sweep's
//! receiver axes): typed, validated, and limited to the `shoal recv` flags a receiver can
//! apply to one run's data connections alone. Anything else is refused by name, at the
//! sweep before its first run and again at the receiver (unknown keys do not decode).
//!
//! Pure code: the sweep builds one from its axes with [`RecvSettings::set`]; the receiver
//! applies it to the run it prepares and answers with what it has in effect.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::units::parse_size;

/// `shoal recv` flags a run may set for itself, as the sweep's axes name them.
pub const PER_RUN_FLAGS: &[&str] = &[
    "fsync",
    "max-streams",
    "conn-window",
    "write-budget",
    "writers",
    "rcvbuf",
    "sndbuf",
];

/// Largest `--max-streams`, as `shoal recv` accepts it.
pub const MAX_STREAMS: u32 = 65_536;
/// Largest QUIC receive window a run may ask of the receiving host: 1 GiB, the
/// bandwidth-delay product of 10 Gbit/s over 800 ms. A window is memory the receiver agrees
/// to buffer, and the asking peer is another host: bounded well below what QUIC could
/// announce (2^62 − 1), above any path this tool measures.
pub const MAX_WINDOW: u64 = 1 << 30;
/// Largest socket buffer the kernel's `int` option takes.
pub const MAX_SOCKET_BUFFER: u64 = i32::MAX as u64;
/// Largest write budget a run may ask for (bytes held in memory before they are written):
/// 4 GiB, for the same reason as [`MAX_WINDOW`].
pub const MAX_WRITE_BUDGET: u64 = 4 << 30;
/// Most writer threads a run may have (`recv --writers`).
pub const MAX_WRITERS: u32 = 16;

/// The least value of a size setting at which a run still makes progress, and why. One
/// table for the flags (`recv`, `send`) and for the control channel's per-run settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Floor {
    /// The flag, without `--`.
    pub flag: &'static str,
    pub least: u64,
    pub why: &'static str,
}

/// 64 KiB: one full-size TCP segment or QUIC datagram with room to spare, on any path.
pub const LEAST_WINDOW: u64 = 64 << 10;

pub const FLOORS: &[Floor] = &[
    Floor {
        flag: "conn-window",
        least: LEAST_WINDOW,
        why: "a QUIC window smaller than a few datagrams lets the sender send nothing, and the run stalls",
    },
    Floor {
        flag: "stream-window",
        least: LEAST_WINDOW,
        why: "a QUIC window smaller than a few datagrams lets the sender send nothing, and the run stalls",
    },
    Floor {
        flag: "send-window",
        least: LEAST_WINDOW,
        why: "a QUIC send window smaller than a few datagrams sends nothing, and the run stalls",
    },
    Floor {
        flag: "rcvbuf",
        least: LEAST_WINDOW,
        why: "a socket buffer of a few KiB holds less than a segment with its overhead, and a TCP run stalls",
    },
    Floor {
        flag: "sndbuf",
        least: LEAST_WINDOW,
        why: "a socket buffer of a few KiB holds less than a segment with its overhead, and a TCP run stalls",
    },
    Floor {
        flag: "write-budget",
        least: LEAST_WINDOW,
        why: "a budget below one read's worth of bytes stops the receiver reading",
    },
    Floor {
        flag: "block-size",
        least: 64 << 10,
        why: "every block is a record held until it is sent: tiny blocks make millions of them",
    },
];

/// Refuses a size setting below its floor ([`FLOORS`]), naming the floor and its reason.
pub fn at_least(flag: &str, v: u64) -> Result<u64, SettingError> {
    match FLOORS.iter().find(|f| f.flag == flag) {
        Some(f) if v < f.least => Err(SettingError(format!(
            "--{flag} {v} is below {} bytes: {}",
            f.least, f.why
        ))),
        _ => Ok(v),
    }
}

/// A size flag's text (`4MiB`, `65536`) within its floor: the flags' value parser.
pub fn parse_flag_size(flag: &str, text: &str) -> Result<u64, SettingError> {
    let v = parse_size(text).map_err(|e| SettingError(format!("--{flag} {text:?}: {e}")))?;
    at_least(flag, v)
}

/// One run's receiver settings; `None` keeps what the receiver was started with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RecvSettings {
    /// `--fsync`: sync the run's files at its end (timed separately).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsync: Option<bool>,
    /// `--max-streams`: per-file streams one connection may have outstanding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_streams: Option<u32>,
    /// `--conn-window`: the run's QUIC receive window (shared by its connections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn_window: Option<u64>,
    /// `--write-budget`: bytes received and not yet written that the run may hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_budget: Option<u64>,
    /// `--writers`: writer threads for the run's files (by folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writers: Option<u32>,
    /// `--rcvbuf`: `SO_RCVBUF` of the run's TCP connections (TCP modes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvbuf: Option<u64>,
    /// `--sndbuf`: `SO_SNDBUF` of the run's TCP connections (TCP modes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sndbuf: Option<u64>,
}

/// A setting that cannot be carried or applied; the message names the flag and the cause.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct SettingError(String);

fn bounded(flag: &str, v: u64, lo: u64, hi: u64) -> Result<u64, SettingError> {
    at_least(flag, v).map_err(|e| SettingError(format!("recv {e}")))?;
    let lo = FLOORS
        .iter()
        .find(|f| f.flag == flag)
        .map_or(lo, |f| lo.max(f.least));
    if v < lo || v > hi {
        return Err(SettingError(format!(
            "recv --{flag} {v} is outside {lo}..={hi}"
        )));
    }
    Ok(v)
}

impl RecvSettings {
    /// Sets `flag` (a `shoal recv` flag name without `--`) from its axis text: `true`/`false`
    /// for `fsync`, a count for `max-streams`, a size (`4MiB`, `65536`) for the others.
    pub fn set(&mut self, flag: &str, value: &str) -> Result<(), SettingError> {
        let size =
            || parse_size(value).map_err(|e| SettingError(format!("recv --{flag} {value:?}: {e}")));
        match flag {
            "fsync" => {
                self.fsync = Some(match value {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(SettingError(format!(
                            "recv --fsync takes true or false, not {value:?}"
                        )))
                    }
                })
            }
            "max-streams" => {
                let n: u64 = value.trim().parse().map_err(|_| {
                    SettingError(format!("recv --max-streams {value:?} is not a count"))
                })?;
                self.max_streams = Some(bounded(flag, n, 1, MAX_STREAMS.into())? as u32);
            }
            "conn-window" => self.conn_window = Some(size()?),
            "write-budget" => self.write_budget = Some(size()?),
            "writers" => {
                let n: u64 = value.trim().parse().map_err(|_| {
                    SettingError(format!("recv --writers {value:?} is not a count"))
                })?;
                self.writers = Some(bounded(flag, n, 1, MAX_WRITERS.into())? as u32);
            }
            "rcvbuf" => self.rcvbuf = Some(size()?),
            "sndbuf" => self.sndbuf = Some(size()?),
            other => {
                return Err(SettingError(format!(
                    "recv --{other} cannot be set per run over the control channel (per-run settings: {})",
                    PER_RUN_FLAGS.join(", ")
                )))
            }
        }
        self.validate()
    }

    /// Every value within what the receiver can apply. The receiver checks again whatever
    /// arrives: a peer's numbers are never trusted.
    pub fn validate(&self) -> Result<(), SettingError> {
        if let Some(n) = self.max_streams {
            bounded("max-streams", n.into(), 1, MAX_STREAMS.into())?;
        }
        if let Some(w) = self.conn_window {
            bounded("conn-window", w, 1, MAX_WINDOW)?;
        }
        if let Some(b) = self.write_budget {
            bounded("write-budget", b, 1, MAX_WRITE_BUDGET)?;
        }
        if let Some(n) = self.writers {
            bounded("writers", n.into(), 1, MAX_WRITERS.into())?;
        }
        for (flag, v) in [("rcvbuf", self.rcvbuf), ("sndbuf", self.sndbuf)] {
            if let Some(v) = v {
                bounded(flag, v, 1, MAX_SOCKET_BUFFER)?;
            }
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        *self == RecvSettings::default()
    }

    /// Whether a setting applies only to TCP sockets (a QUIC run shares the receiver's one
    /// UDP socket with every other run, so its buffers cannot be one run's).
    pub fn tcp_only(&self) -> Option<&'static str> {
        if self.rcvbuf.is_some() {
            Some("rcvbuf")
        } else if self.sndbuf.is_some() {
            Some("sndbuf")
        } else {
            None
        }
    }

    /// `fsync=true max-streams=64 …` in flag order; an unset socket buffer reads `auto`
    /// (kernel autotuning).
    pub fn describe(&self) -> String {
        let mut out = Vec::new();
        let buf = |v: Option<u64>| v.map_or("auto".to_string(), |b| b.to_string());
        if let Some(f) = self.fsync {
            out.push(format!("fsync={f}"));
        }
        if let Some(n) = self.max_streams {
            out.push(format!("max-streams={n}"));
        }
        if let Some(w) = self.conn_window {
            out.push(format!("conn-window={w}"));
        }
        if let Some(b) = self.write_budget {
            out.push(format!("write-budget={b}"));
        }
        if let Some(n) = self.writers {
            out.push(format!("writers={n}"));
        }
        out.push(format!("rcvbuf={}", buf(self.rcvbuf)));
        out.push(format!("sndbuf={}", buf(self.sndbuf)));
        out.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_become_typed_settings() {
        let mut s = RecvSettings::default();
        assert!(s.is_empty());
        s.set("fsync", "true").unwrap();
        s.set("max-streams", "64").unwrap();
        s.set("conn-window", "8MiB").unwrap();
        s.set("rcvbuf", "4MiB").unwrap();
        s.set("writers", "3").unwrap();
        assert_eq!(s.fsync, Some(true));
        assert_eq!(s.writers, Some(3));
        assert_eq!(s.max_streams, Some(64));
        assert_eq!(s.conn_window, Some(8 << 20));
        assert_eq!(s.tcp_only(), Some("rcvbuf"));
        assert_eq!(
            s.describe(),
            "fsync=true max-streams=64 conn-window=8388608 writers=3 rcvbuf=4194304 sndbuf=auto"
        );
    }

    #[test]
    fn unknown_flags_and_bad_values_are_refused_by_name() {
        let mut s = RecvSettings::default();
        let e = s.set("stream-window", "1MiB").unwrap_err().to_string();
        assert!(
            e.contains("recv --stream-window cannot be set per run"),
            "{e}"
        );
        let e = s.set("max-streams", "0").unwrap_err().to_string();
        assert!(
            e.contains("recv --max-streams 0 is outside 1..=65536"),
            "{e}"
        );
        let e = s.set("writers", "17").unwrap_err().to_string();
        assert!(e.contains("recv --writers 17 is outside 1..=16"), "{e}");
        let e = s.set("fsync", "yes").unwrap_err().to_string();
        assert!(e.contains("true or false"), "{e}");
        let e = s.set("rcvbuf", "4GiB").unwrap_err().to_string();
        assert!(
            e.contains("recv --rcvbuf 4294967296 is outside 65536..="),
            "{e}"
        );
    }

    #[test]
    fn no_setting_can_stall_a_run() {
        for flag in ["conn-window", "rcvbuf", "sndbuf", "write-budget"] {
            for small in ["1", "4096", "65535"] {
                let e = RecvSettings::default()
                    .set(flag, small)
                    .unwrap_err()
                    .to_string();
                assert!(e.contains("is below 65536 bytes:"), "{flag} {small}: {e}");
            }
            RecvSettings::default().set(flag, "64KiB").unwrap();
        }
        let wire: RecvSettings = serde_json::from_str(r#"{"conn-window":1}"#).unwrap();
        assert!(wire.validate().is_err(), "a peer's window of 1 is refused");
        for flag in ["conn-window", "stream-window", "send-window", "block-size"] {
            let e = parse_flag_size(flag, "1").unwrap_err().to_string();
            assert!(e.starts_with(&format!("--{flag} 1 is below")), "{e}");
            assert_eq!(parse_flag_size(flag, "64KiB"), Ok(65536));
        }
        assert_eq!(
            parse_flag_size("conn-window", "4611686018427387903"),
            Ok((1 << 62) - 1)
        );
    }

    #[test]
    fn the_wire_form_refuses_unknown_keys() {
        let s: RecvSettings = serde_json::from_str(r#"{"fsync":true,"max-streams":8}"#).unwrap();
        assert_eq!(s.max_streams, Some(8));
        assert!(serde_json::from_str::<RecvSettings>(r#"{"exec":"rm -rf /"}"#).is_err());
        let s: RecvSettings = serde_json::from_str(r#"{"max-streams":0}"#).unwrap();
        assert!(s.validate().is_err(), "decoded values are checked again");
    }
}
