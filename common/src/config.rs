//! Typed configuration shared by both ends.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How files are framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[derive(clap::ValueEnum)]
pub enum Mode {
    /// One TLS/TCP stream carrying every file as a record, back to back.
    TcpBundle,
}

impl Mode {
    /// Every mode, in the order `--help` lists them.
    pub const ALL: &'static [Mode] = &[Mode::TcpBundle];

    pub fn to_wire(self) -> u8 {
        match self {
            Mode::TcpBundle => 1,
        }
    }

    pub fn from_wire(byte: u8) -> Option<Self> {
        Self::ALL.iter().copied().find(|m| m.to_wire() == byte)
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::TcpBundle => "tcp-bundle",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
