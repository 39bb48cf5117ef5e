//! Typed configuration shared by both ends.

use serde::{Deserialize, Serialize};

pub use shoal_proto::wire::{Cc, Mode};

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
    /// The QUIC UDP socket's `SO_RCVBUF` (`--udp-rcvbuf`); `None`: `rcvbuf`, else
    /// [`DEFAULT_UDP_BUFFER`].
    #[serde(default)]
    pub udp_rcvbuf: Option<UdpRcvbuf>,
    /// Largest UDP payload a QUIC sender's MTU discovery may reach (`send --max-udp-payload`);
    /// `None`: as far as the route allows (`udp_offload::mtu_discovery_bound`).
    pub max_udp_payload: Option<u16>,
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
            udp_rcvbuf: None,
            max_udp_payload: None,
        }
    }
}

/// A QUIC socket's receive buffer as asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UdpRcvbuf {
    /// Not set: the kernel's default (`net.core.rmem_default`), as quinn leaves it.
    Kernel,
    /// `SO_RCVBUF` of this many bytes (the kernel doubles it and caps it at `rmem_max`).
    Bytes(u64),
}

impl UdpRcvbuf {
    /// `kernel`, or a size (`212992`, `8MiB`).
    pub fn parse(text: &str) -> Result<UdpRcvbuf, String> {
        if text == "kernel" {
            return Ok(UdpRcvbuf::Kernel);
        }
        shoal_proto::units::parse_size(text)
            .map(UdpRcvbuf::Bytes)
            .map_err(|e| format!("{e} (or `kernel`: the kernel's default, not set)"))
    }
}

/// UDP socket buffer asked for when none is given (QUIC needs more than the kernel default
/// at high rates; the kernel caps it at `net.core.{r,w}mem_max`).
pub const DEFAULT_UDP_BUFFER: u64 = 8 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_rcvbuf_values() {
        assert_eq!(UdpRcvbuf::parse("kernel"), Ok(UdpRcvbuf::Kernel));
        assert_eq!(UdpRcvbuf::parse("8MiB"), Ok(UdpRcvbuf::Bytes(8 << 20)));
        assert_eq!(UdpRcvbuf::parse("212992"), Ok(UdpRcvbuf::Bytes(212_992)));
        assert!(UdpRcvbuf::parse("lots").unwrap_err().contains("kernel"));
    }
}
