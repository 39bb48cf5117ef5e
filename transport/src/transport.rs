//! Transport settings both ends build the same way: QUIC transport parameters, yamux
//! configuration, UDP sockets with the buffers asked for.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};

use crate::config::{Cc, FlowConfig, UdpRcvbuf, DEFAULT_UDP_BUFFER};

/// Transport parameters both QUIC ends use, from `flow`.
pub fn quic_transport(flow: &FlowConfig, cc: Option<Cc>) -> Result<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    let varint = |v: u64| quinn::VarInt::from_u64(v).map_err(|e| anyhow!("{v}: {e}"));
    t.stream_receive_window(varint(flow.stream_window)?);
    t.receive_window(varint(flow.conn_window)?);
    t.send_window(flow.send_window);
    t.max_concurrent_uni_streams(varint(u64::from(flow.max_streams))?);
    t.max_concurrent_bidi_streams(varint(4)?);
    // A peer that vanishes (a killed process sends no reset over UDP) is noticed after this;
    // keep-alives every 2 s keep a quiet but live connection well inside it.
    t.max_idle_timeout(Some(
        quinn::IdleTimeout::try_from(Duration::from_secs(10)).expect("valid idle timeout"),
    ));
    t.keep_alive_interval(Some(Duration::from_secs(2)));
    t.congestion_controller_factory(crate::quic_cc::factory(cc));
    Ok(t)
}

/// The endpoint settings both QUIC ends use: datagrams up to
/// [`QUIC_MAX_UDP_PAYLOAD`](crate::udp_offload::QUIC_MAX_UDP_PAYLOAD) accepted (quinn's
/// default is an Ethernet frame's 1,472 bytes, which would hold a sender on a larger-MTU path
/// to that size whatever its discovery found).
pub fn quic_endpoint_config() -> quinn::EndpointConfig {
    let mut config = quinn::EndpointConfig::default();
    config
        .max_udp_payload_size(crate::udp_offload::QUIC_MAX_UDP_PAYLOAD)
        .expect("within QUIC's 1,200..=65,527 bytes");
    config
}

/// Lets a sender's MTU discovery towards `peer` go as far as the kernel's route allows
/// ([`mtu_discovery_bound`](crate::udp_offload::mtu_discovery_bound)), or `max` bytes when
/// asked (`send --max-udp-payload`; 1,200 turns discovery off); quinn's default bound stays on
/// Ethernet-sized routes.
pub fn discover_mtu_towards(
    transport: &mut quinn::TransportConfig,
    peer: SocketAddr,
    max: Option<u16>,
) {
    use crate::udp_offload::{asked_discovery_bound, mtu_discovery_bound, route_mtu};
    let route = route_mtu(peer);
    let bound = match max {
        Some(max) => Some(asked_discovery_bound(route, peer.is_ipv6(), max)),
        None => mtu_discovery_bound(route, peer.is_ipv6()),
    };
    match bound {
        Some(bound) if bound <= 1200 => {
            transport.mtu_discovery_config(None);
        }
        Some(bound) => {
            let mut discovery = quinn::MtuDiscoveryConfig::default();
            discovery.upper_bound(bound);
            transport.mtu_discovery_config(Some(discovery));
        }
        None => {}
    }
}

/// The QUIC connection receive window a receiver grants before a connection's hello has been
/// decoded: an unauthenticated peer can make it buffer no more than this, and the run's own
/// window (`quic_window_per_connection`) is granted once the hello is in, long before slow
/// start could use more.
pub const QUIC_PRE_HELLO_WINDOW: u64 = 4 << 20;

/// Concurrent QUIC file streams a receiver allows a connection before its hello has been
/// decoded; raised to the hello's `max_streams` (at most `--max-streams`) after admission.
/// Streams stop counting at the receiver only when it has read them (the sender's count drops
/// as soon as a stream's data is acknowledged), so this allowance, not the sender's limit,
/// bounds how many streams a receiver holds: 4,096 from the start on each of 8 connections
/// held up to 32,768 streams and ~100 MB of RSS in quic-streams ×8 runs.
pub const QUIC_PRE_HELLO_STREAMS: u32 = 256;

/// Smallest per-connection share of a QUIC window.
const MIN_QUIC_WINDOW: u64 = 2 << 20;

/// One connection's share of a QUIC window (receive or send) when a run spreads over
/// `connections`: the window is sized for the path, not per connection, so N connections
/// together get what one would — otherwise 8 connections buffered 8 × 20 MiB (~200 MB of RSS at
/// each end in the study's 8-connection arms).
pub fn quic_window_per_connection(window: u64, connections: u16) -> u64 {
    (window / u64::from(connections.max(1))).max(MIN_QUIC_WINDOW.min(window))
}

/// yamux streams a connection allows for `max_streams` outstanding files (plus the control
/// stream). yamux counts a stream until both of its ends are dropped, which lags the moment a
/// file is done, and a peer that exceeds the count gets its whole connection killed; so both
/// ends leave room. The receiver has already checked the hello against `max_streams`.
pub fn yamux_streams(max_streams: u32) -> usize {
    2 * max_streams as usize + 16
}

/// Receive window yamux streams may grow into beyond their guaranteed 256 KiB each: enough
/// for one stream to reach a 1 Gbit/s × 150 ms bandwidth-delay product (18.75 MB).
pub const YAMUX_GROWTH: usize = 32 << 20;

/// The receive window a yamux file stream is granted at once when its record announces more
/// than yamux's initial 256 KiB: what the record has still to come, at most this. A stream that
/// starts at 256 KiB and doubles its window each round trip took ~1.1 s to carry a 16 MiB block
/// across 141 ms, and every block starts a new stream (13.5 MB/s where tcp-bundle made 25.5 on a
/// 300 Mbit/s link). All of [`YAMUX_GROWTH`]: one large file on one connection is one stream
/// (it is not split into blocks there), and half of it held that stream to 0.834 × tcp-bundle's
/// rate on 141 ms / 1 Gbit/s. A stream that overlaps one holding the growth gets what is left
/// and auto-tunes toward its record from there. On several connections the per-file-stream
/// modes split files into blocks of this size (sender `SendConfig::block_size_in_effect`), one
/// grant each.
pub const YAMUX_STREAM_GRANT: u32 = YAMUX_GROWTH as u32;

/// The connection receive window yamux gets for `streams` streams. yamux guarantees every
/// stream 256 KiB and lets a stream auto-tune its window (doubling while the sender uses it up
/// within two round trips) only into what the connection window has *beyond* those guarantees,
/// so the window is the guarantees plus [`YAMUX_GROWTH`]. (With exactly 256 KiB × streams, as
/// yamux's own minimum, no stream can ever grow: one stream then crawls at 256 KiB per RTT.)
pub fn yamux_window(streams: usize) -> usize {
    (256usize << 10) * streams.max(1) + YAMUX_GROWTH
}

/// The write buffer both ends put under yamux (tcp-streams). The patched yamux flushes once per
/// batch of frames (vendor/yamux/README.shoal.md), so through this buffer the frames of many
/// streams leave in one TLS write instead of a record and a `write` each.
pub const YAMUX_WRITE_BUFFER: usize = 64 << 10;

/// yamux settings for `streams` concurrent streams. yamux requires the connection window to be
/// at least 256 KiB per stream; streams auto-tune their windows within it.
pub fn yamux_config(streams: usize) -> yamux::Config {
    let mut cfg = yamux::Config::default();
    // Each setter asserts window ≥ 256 KiB × streams against the other's current value, so
    // lift the window first, then set the count, then the real window.
    cfg.set_max_connection_receive_window(None);
    cfg.set_max_num_streams(streams.max(1));
    cfg.set_max_connection_receive_window(Some(yamux_window(streams)));
    cfg
}

/// A UDP socket with the buffers in `flow` (or [`DEFAULT_UDP_BUFFER`]; `udp_rcvbuf` before
/// `rcvbuf`, and `kernel` leaves the receive buffer unset).
pub fn udp_socket(bind: SocketAddr, flow: &FlowConfig) -> Result<std::net::UdpSocket> {
    let domain = socket2::Domain::for_address(bind);
    let socket = socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
    // The kernel caps these at net.core.{w,r}mem_max; what we got is read back and reported.
    let _ = socket.set_send_buffer_size(flow.sndbuf.unwrap_or(DEFAULT_UDP_BUFFER) as usize);
    let rcvbuf = match flow.udp_rcvbuf {
        Some(UdpRcvbuf::Kernel) => None,
        Some(UdpRcvbuf::Bytes(b)) => Some(b),
        None => Some(flow.rcvbuf.unwrap_or(DEFAULT_UDP_BUFFER)),
    };
    if let Some(b) = rcvbuf {
        let _ = socket.set_recv_buffer_size(b as usize);
    }
    socket
        .bind(&bind.into())
        .with_context(|| format!("cannot bind UDP {bind}"))?;
    Ok(socket.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quic_windows_are_shared_by_a_runs_connections() {
        let w = 20 << 20;
        assert_eq!(quic_window_per_connection(w, 1), w);
        assert_eq!(quic_window_per_connection(w, 0), w);
        assert_eq!(quic_window_per_connection(w, 8), w / 8);
        // Never below 2 MiB a connection, nor above the window asked for.
        assert_eq!(quic_window_per_connection(w, 64), 2 << 20);
        assert_eq!(quic_window_per_connection(1 << 20, 4), 1 << 20);
    }

    #[test]
    fn yamux_config_accepts_every_stream_count() {
        for max_streams in [1, 100, 256, 1000, 4096, 16_384] {
            yamux_config(yamux_streams(max_streams));
        }
    }
}
