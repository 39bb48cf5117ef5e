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

/// 1 Gbit/s × 150 ms, in bytes: the path the flow-control defaults are sized for.
pub const DESIGN_BDP: u64 = 1_000_000_000 / 8 * 150 / 1000;

/// Flow-control and socket-buffer settings of one end. Defaults are sized for a
/// 1 Gbit/s × 150 ms path (bandwidth-delay product 18.75 MB), with headroom.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowConfig {
    /// Most per-file streams outstanding on one connection (streams modes).
    pub max_streams: u32,
    /// Receive window of one stream (QUIC; yamux's maximum per stream).
    pub stream_window: u64,
    /// Receive window of a whole connection (QUIC; yamux).
    pub conn_window: u64,
    /// Bytes QUIC may have in flight unacknowledged (sender).
    pub send_window: u64,
    /// `SO_SNDBUF` for TCP and UDP sockets; `None` leaves TCP to kernel autotuning.
    pub sndbuf: Option<u64>,
    /// `SO_RCVBUF` for TCP and UDP sockets; `None` leaves TCP to kernel autotuning.
    pub rcvbuf: Option<u64>,
}

impl Default for FlowConfig {
    fn default() -> Self {
        Self {
            max_streams: 4096,
            // 20 MiB / 150 ms = 1.1 Gbit/s: above a 1 Gbit/s × 150 ms path's BDP (18.75 MB),
            // and no more, because quinn may hold up to 2.5× a full window in received
            // datagram buffers (its assembler's defragmentation threshold): receiver RSS.
            stream_window: 20 << 20,
            conn_window: 20 << 20,
            send_window: 20 << 20,
            sndbuf: None,
            rcvbuf: None,
        }
    }
}

/// UDP socket buffer asked for when none is given (QUIC needs more than the kernel default
/// at high rates; the kernel caps it at `net.core.{r,w}mem_max`).
pub const DEFAULT_UDP_BUFFER: u64 = 8 << 20;

/// Congestion controller asked for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
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
