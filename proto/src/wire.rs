//! The enums the hello carries: the transport mode and the congestion controller, with their
//! wire values and names. Command-line parsing of them lives in the CLI.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How files are framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// One TLS/TCP stream carrying every file as a record, back to back.
    TcpBundle,
    /// TLS/TCP with yamux on top: one yamux stream per file, up to --max-streams outstanding.
    TcpStreams,
    /// One QUIC stream carrying every file as a record, back to back.
    QuicBundle,
    /// QUIC, one unidirectional stream per file, up to --max-streams outstanding.
    QuicStreams,
    /// Control arm: TLS/TCP, one file at a time, each waiting for the receiver's acknowledgement
    /// (measures the one-round-trip-per-file cost the other modes avoid).
    TcpWait,
}

impl Mode {
    /// Every mode, in the order `--help` lists them.
    pub const ALL: &'static [Mode] = &[
        Mode::TcpBundle,
        Mode::TcpStreams,
        Mode::QuicBundle,
        Mode::QuicStreams,
        Mode::TcpWait,
    ];

    pub fn to_wire(self) -> u8 {
        match self {
            Mode::TcpBundle => 1,
            Mode::TcpStreams => 2,
            Mode::QuicBundle => 3,
            Mode::QuicStreams => 4,
            Mode::TcpWait => 5,
        }
    }

    pub fn from_wire(byte: u8) -> Option<Self> {
        Self::ALL.iter().copied().find(|m| m.to_wire() == byte)
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::TcpBundle => "tcp-bundle",
            Mode::TcpStreams => "tcp-streams",
            Mode::QuicBundle => "quic-bundle",
            Mode::QuicStreams => "quic-streams",
            Mode::TcpWait => "tcp-wait",
        }
    }

    /// Runs over QUIC (UDP) rather than TCP.
    pub fn is_quic(self) -> bool {
        matches!(self, Mode::QuicBundle | Mode::QuicStreams)
    }

    /// One stream per file (rather than one stream of records).
    pub fn per_file_streams(self) -> bool {
        matches!(self, Mode::TcpStreams | Mode::QuicStreams)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Congestion controller asked for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cc {
    /// CUBIC: Linux `cubic`; quinn `CubicConfig`.
    Cubic,
    /// BBR: Linux `bbr` (v1 here); quinn `BbrConfig` (experimental in quinn).
    Bbr,
    /// Reno: Linux `reno`; quinn `NewRenoConfig`.
    Reno,
}

impl Cc {
    /// The name Linux uses in `TCP_CONGESTION`.
    pub fn linux_name(self) -> &'static str {
        match self {
            Cc::Cubic => "cubic",
            Cc::Bbr => "bbr",
            Cc::Reno => "reno",
        }
    }

    /// Wire value in the hello (0 means "the system default").
    pub fn to_wire(cc: Option<Cc>) -> u8 {
        match cc {
            None => 0,
            Some(Cc::Cubic) => 1,
            Some(Cc::Bbr) => 2,
            Some(Cc::Reno) => 3,
        }
    }

    pub fn from_wire(byte: u8) -> Option<Option<Cc>> {
        match byte {
            0 => Some(None),
            1 => Some(Some(Cc::Cubic)),
            2 => Some(Some(Cc::Bbr)),
            3 => Some(Some(Cc::Reno)),
            _ => None,
        }
    }

    /// The name quinn's controller goes by, as reported in rows.
    pub fn quinn_name(cc: Option<Cc>) -> &'static str {
        match cc {
            None | Some(Cc::Cubic) => "quinn-cubic",
            Some(Cc::Bbr) => "quinn-bbr",
            Some(Cc::Reno) => "quinn-newreno",
        }
    }
}

impl fmt::Display for Cc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.linux_name())
    }
}

impl FromStr for Mode {
    type Err = String;

    /// A mode by its name (`tcp-bundle`, …).
    fn from_str(s: &str) -> Result<Self, String> {
        Mode::ALL
            .iter()
            .copied()
            .find(|m| m.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<&str> = Mode::ALL.iter().map(|m| m.name()).collect();
                format!("unknown mode '{s}'; modes: {}", names.join(", "))
            })
    }
}

impl Cc {
    /// Every controller, in the order `--help` lists them.
    pub const ALL: &'static [Cc] = &[Cc::Cubic, Cc::Bbr, Cc::Reno];
}

impl FromStr for Cc {
    type Err = String;

    /// A controller by its Linux name (`cubic`, `bbr`, `reno`).
    fn from_str(s: &str) -> Result<Self, String> {
        Cc::ALL
            .iter()
            .copied()
            .find(|c| c.linux_name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown congestion controller '{s}'; cubic, bbr or reno"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_wire_values_round_trip() {
        for &m in Mode::ALL {
            assert_eq!(m.name().parse::<Mode>(), Ok(m));
            assert_eq!(Mode::from_wire(m.to_wire()), Some(m));
        }
        for &c in Cc::ALL {
            assert_eq!(c.linux_name().parse::<Cc>(), Ok(c));
            assert_eq!(Cc::from_wire(Cc::to_wire(Some(c))), Some(Some(c)));
        }
        assert!("tcp-bundel"
            .parse::<Mode>()
            .unwrap_err()
            .contains("tcp-bundle"));
        assert!("cubik".parse::<Cc>().is_err());
        assert_eq!(Cc::from_wire(0), Some(None));
    }
}
