//! What a run's row says of its transport, connections and CPU, each only where it applies
//! (docs/csv-schema.md): a figure a transport does not expose stays empty, never 0.

use shoal_proto::codec::Completion;
use shoal_row::row::RunRow;
use shoal_transport::config::Mode;
use shoal_transport::stats::ConnStats;
use shoal_transport::udp_offload::UdpOffload;

use crate::config::SendConfig;

/// A QUIC connection's UDP figures, read back at the end of its run.
#[derive(Clone, Copy)]
pub(crate) struct QuicUdp {
    pub(crate) offload: Option<UdpOffload>,
    /// quinn's current path MTU: the UDP payload size it sends.
    pub(crate) payload_bytes: u64,
}

/// Whether the receiver's stream and connection windows mean anything in `mode`: QUIC's, and
/// yamux's in tcp-streams; tcp-bundle and tcp-wait carry one TLS stream with neither.
pub(crate) fn receive_windows_apply(mode: Mode) -> bool {
    mode.is_quic() || mode == Mode::TcpStreams
}

/// The transport statistics of an ok run, each only where `mode`'s transport exposes it
/// (docs/csv-schema.md); the others stay `None` (empty in CSV, null in JSON), never 0.
pub(crate) fn put_transport_stats(row: &mut RunRow, mode: Mode, s: &ConnStats) {
    let tcp = !mode.is_quic();
    row.rtt_ms = Some(s.rtt_ms);
    row.min_rtt_ms = Some(s.min_rtt_ms);
    row.cwnd_bytes = Some(s.cwnd_bytes);
    row.retransmits = Some(s.retransmits);
    row.lost_bytes = Some(s.lost_bytes);
    row.congestion_events = (!tcp).then_some(s.congestion_events);
    row.persistent_congestion_events = (!tcp).then_some(s.persistent_congestion_events);
    row.stream_data_blocked_frames = (!tcp).then_some(s.stream_data_blocked_frames);
    row.data_blocked_frames = (!tcp).then_some(s.data_blocked_frames);
    row.sent_packets = Some(s.sent_packets);
    row.delivery_rate_bytes_per_s = tcp.then_some(s.delivery_rate);
    row.bytes_sent = Some(s.bytes_sent);
    row.bytes_acked = Some(s.bytes_acked);
    row.rwnd_limited_ms = tcp.then_some(s.rwnd_limited_ms);
    row.sndbuf_limited_ms = tcp.then_some(s.sndbuf_limited_ms);
}

/// The row's account of how the connections were used: how many carried content, the bytes
/// each carried, and why fewer than asked for carried any.
pub(crate) fn put_connection_use(row: &mut RunRow, config: &SendConfig, bytes: &[u64]) {
    row.connection_bytes_total = Some(bytes.iter().sum());
    row.connection_bytes_each = format!(
        "[{}]",
        bytes
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    row.connections_used = bytes.iter().filter(|&&b| b > 0).count() as u64;
    let asked = row.connections_requested;
    if row.connections_used < asked {
        let why = if row.bytes == 0 {
            "the run has no content bytes".to_string()
        } else if config.mode == Mode::TcpWait {
            "tcp-wait never splits a file into blocks, and there were fewer files than connections"
                .to_string()
        } else {
            format!(
                "the run had fewer files and blocks (files over --block-size {} are split) than connections",
                shoal_proto::units::human_bytes(row.block_size)
            )
        };
        row.connections_note = format!(
            "{} of {asked} connections carried content: {why}",
            row.connections_used
        );
    }
}

/// CPU per GB of payload at both ends, and a QUIC run's UDP offload at both ends.
pub(crate) fn put_cpu_and_udp(row: &mut RunRow, c: &Completion, udp: Option<QuicUdp>) {
    let gb = row.bytes as f64 / 1e9;
    let per_gb = |s: f64| (gb > 0.0).then(|| s / gb);
    row.receiver_run_cpu_seconds = c.cpu_micros.map(|us| us as f64 / 1e6);
    row.receiver_write_wait_seconds = c.write_wait_micros.map(|us| us as f64 / 1e6);
    row.receiver_threads = c.threads;
    row.receiver_writers = c.writers;
    row.sender_cpu_s_per_gb = per_gb(row.sender_cpu_seconds);
    row.receiver_cpu_s_per_gb = row.receiver_run_cpu_seconds.and_then(per_gb);
    if let Some(u) = udp {
        row.udp_payload_bytes = Some(u.payload_bytes);
        row.sender_gso_segments = u.offload.map(|o| o.gso_segments);
        row.sender_gro_segments = u.offload.map(|o| o.gro_segments);
        row.receiver_gso_segments = c.udp_gso_segments;
        row.receiver_gro_segments = c.udp_gro_segments;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_a_transport_does_not_expose_stay_empty() {
        let s = ConnStats {
            rtt_ms: 141.0,
            congestion_events: 3,
            persistent_congestion_events: 1,
            stream_data_blocked_frames: 7,
            bytes_acked: 10,
            delivery_rate: 5,
            ..Default::default()
        };
        let mut tcp = RunRow::default();
        put_transport_stats(&mut tcp, Mode::TcpBundle, &s);
        assert_eq!(tcp.rtt_ms, Some(141.0));
        assert_eq!(tcp.congestion_events, None, "TCP does not expose it");
        assert_eq!(
            (
                tcp.persistent_congestion_events,
                tcp.stream_data_blocked_frames,
                tcp.data_blocked_frames
            ),
            (None, None, None),
            "QUIC's alone"
        );
        assert_eq!(
            (tcp.bytes_acked, tcp.delivery_rate_bytes_per_s),
            (Some(10), Some(5))
        );
        let mut quic = RunRow::default();
        put_transport_stats(&mut quic, Mode::QuicStreams, &s);
        assert_eq!(quic.congestion_events, Some(3));
        assert_eq!(
            (
                quic.persistent_congestion_events,
                quic.stream_data_blocked_frames,
                quic.data_blocked_frames
            ),
            (Some(1), Some(7), Some(0)),
            "a real 0 stays 0"
        );
        assert_eq!(
            (quic.delivery_rate_bytes_per_s, quic.rwnd_limited_ms),
            (None, None),
            "quinn does not expose them"
        );
        assert_eq!(quic.bytes_acked, Some(10), "counted by quic_cc's delegate");
        assert!(!receive_windows_apply(Mode::TcpBundle));
        assert!(!receive_windows_apply(Mode::TcpWait));
        assert!(receive_windows_apply(Mode::TcpStreams));
        assert!(receive_windows_apply(Mode::QuicBundle));
    }
}
