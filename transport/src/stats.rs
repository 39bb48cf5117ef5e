//! Transport statistics of a connection: `TCP_INFO` for TCP, quinn's `ConnectionStats` for
//! QUIC, in one shape so rows and time series treat both alike. Also the congestion-control
//! socket option, set before connecting and read back after.

use std::io;
use std::os::fd::AsFd;
use std::time::Duration;

use anyhow::{bail, Result};
use serde::Serialize;
use socket2::SockRef;

use crate::config::Cc;
use crate::quic_cc::AckedBytes;

/// One connection's figures at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ConnStats {
    /// Smoothed RTT.
    pub rtt_ms: f64,
    /// Lowest RTT seen.
    pub min_rtt_ms: f64,
    /// Congestion window in bytes (TCP: `snd_cwnd × snd_mss`).
    pub cwnd_bytes: u64,
    /// TCP: segments retransmitted (`total_retrans`); QUIC: packets lost.
    pub retransmits: u64,
    /// TCP: bytes retransmitted; QUIC: bytes lost.
    pub lost_bytes: u64,
    /// QUIC congestion events (TCP: 0, not exposed).
    pub congestion_events: u64,
    /// QUIC congestion events that were persistent congestion (TCP: 0).
    pub persistent_congestion_events: u64,
    /// QUIC STREAM_DATA_BLOCKED and DATA_BLOCKED frames sent: the peer's stream or
    /// connection window held data back (TCP: 0).
    pub stream_data_blocked_frames: u64,
    pub data_blocked_frames: u64,
    /// TCP: data segments sent; QUIC: packets sent.
    pub sent_packets: u64,
    /// TCP `delivery_rate` (bytes/s; QUIC: 0, not exposed).
    pub delivery_rate: u64,
    pub bytes_sent: u64,
    /// Bytes acknowledged by the peer. TCP: `tcpi_bytes_acked` (payload); QUIC: the bytes of
    /// acknowledged ack-eliciting packets, counted by the congestion controller's delegate
    /// (`quic_cc`; 0 for a connection set up without it).
    pub bytes_acked: u64,
    /// TCP: time limited by the peer's receive window / our send buffer (ms).
    pub rwnd_limited_ms: f64,
    pub sndbuf_limited_ms: f64,
}

/// Reads `TCP_INFO` of a TCP socket.
pub fn tcp_stats(socket: &impl AsFd) -> io::Result<ConnStats> {
    let info = shoal_sys::tcp::tcp_info(socket)?;
    Ok(ConnStats {
        rtt_ms: f64::from(info.tcpi_rtt) / 1000.0,
        min_rtt_ms: f64::from(info.tcpi_min_rtt) / 1000.0,
        cwnd_bytes: u64::from(info.tcpi_snd_cwnd) * u64::from(info.tcpi_snd_mss),
        retransmits: u64::from(info.tcpi_total_retrans),
        lost_bytes: info.tcpi_bytes_retrans,
        congestion_events: 0,
        persistent_congestion_events: 0,
        stream_data_blocked_frames: 0,
        data_blocked_frames: 0,
        sent_packets: u64::from(info.tcpi_data_segs_out),
        delivery_rate: info.tcpi_delivery_rate,
        bytes_sent: info.tcpi_bytes_sent,
        bytes_acked: info.tcpi_bytes_acked,
        rwnd_limited_ms: info.tcpi_rwnd_limited as f64 / 1000.0,
        sndbuf_limited_ms: info.tcpi_sndbuf_limited as f64 / 1000.0,
    })
}

/// Whether every byte written to a TCP socket was sent and acknowledged (nothing unsent, no
/// segment in flight): the path probe reads the sender's figures only then.
pub fn tcp_all_acked(socket: &impl AsFd) -> io::Result<bool> {
    let info = shoal_sys::tcp::tcp_info(socket)?;
    Ok(info.tcpi_unacked == 0 && info.tcpi_notsent_bytes == 0)
}

/// Reads quinn's statistics of a QUIC connection; `acked` is its acknowledged-bytes count
/// (`quic_cc::Counting`), which quinn's statistics do not have.
pub fn quic_stats(conn: &quinn::Connection, acked: Option<&AckedBytes>) -> ConnStats {
    let s = conn.stats();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    ConnStats {
        rtt_ms: ms(s.path.rtt),
        min_rtt_ms: ms(s.path.min_rtt),
        cwnd_bytes: s.path.cwnd,
        retransmits: s.path.lost_packets,
        lost_bytes: s.path.lost_bytes,
        congestion_events: s.path.congestion_events,
        persistent_congestion_events: acked.map_or(0, AckedBytes::persistent_congestion),
        stream_data_blocked_frames: s.frame_tx.stream_data_blocked,
        data_blocked_frames: s.frame_tx.data_blocked,
        sent_packets: s.path.sent_packets,
        delivery_rate: 0,
        bytes_sent: s.udp_tx.bytes,
        bytes_acked: acked.map_or(0, AckedBytes::get),
        rwnd_limited_ms: 0.0,
        sndbuf_limited_ms: 0.0,
    }
}

impl ConnStats {
    /// Figures over all connections of a run: RTTs and windows averaged, counts and times
    /// summed, the lowest min-RTT.
    pub fn aggregate(conns: &[ConnStats]) -> ConnStats {
        if conns.is_empty() {
            return ConnStats::default();
        }
        let n = conns.len() as f64;
        let sum = |f: fn(&ConnStats) -> u64| conns.iter().map(f).sum::<u64>();
        let sum_f = |f: fn(&ConnStats) -> f64| conns.iter().map(f).sum::<f64>();
        ConnStats {
            rtt_ms: sum_f(|c| c.rtt_ms) / n,
            // 0 means "no sample" (a connection that carried almost nothing): not a minimum.
            min_rtt_ms: conns
                .iter()
                .map(|c| c.min_rtt_ms)
                .filter(|&m| m > 0.0)
                .reduce(f64::min)
                .unwrap_or(0.0),
            cwnd_bytes: (sum(|c| c.cwnd_bytes) as f64 / n) as u64,
            retransmits: sum(|c| c.retransmits),
            lost_bytes: sum(|c| c.lost_bytes),
            congestion_events: sum(|c| c.congestion_events),
            persistent_congestion_events: sum(|c| c.persistent_congestion_events),
            stream_data_blocked_frames: sum(|c| c.stream_data_blocked_frames),
            data_blocked_frames: sum(|c| c.data_blocked_frames),
            sent_packets: sum(|c| c.sent_packets),
            delivery_rate: sum(|c| c.delivery_rate),
            bytes_sent: sum(|c| c.bytes_sent),
            bytes_acked: sum(|c| c.bytes_acked),
            rwnd_limited_ms: sum_f(|c| c.rwnd_limited_ms),
            sndbuf_limited_ms: sum_f(|c| c.sndbuf_limited_ms),
        }
    }
}

/// Controllers the kernel offers (`tcp_available_congestion_control`).
pub fn available_tcp_cc() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Refuses a controller the kernel does not offer, naming the ones it does.
pub fn check_tcp_cc(cc: Cc) -> Result<()> {
    let available = available_tcp_cc();
    if !available.iter().any(|a| a == cc.linux_name()) {
        bail!(
            "congestion controller '{}' is not available; this kernel offers: {}",
            cc.linux_name(),
            available.join(" ")
        );
    }
    Ok(())
}

/// Sets `TCP_CONGESTION` on a socket.
pub fn set_tcp_cc(socket: &impl AsFd, cc: Cc) -> io::Result<()> {
    SockRef::from(socket).set_tcp_congestion(cc.linux_name().as_bytes())
}

/// The sending end's figures of a path probe's bulk flow (`shoal probe`), read from its
/// socket's TCP_INFO: the same at the receiver (B → A) and at the sweep (A → B).
pub fn probe_sender_tcp(socket: &impl AsFd) -> Option<shoal_proto::probe::SenderTcp> {
    let s = tcp_stats(socket).ok()?;
    Some(shoal_proto::probe::SenderTcp {
        retransmits: s.retransmits,
        segments_out: s.sent_packets,
        rtt_ms: s.rtt_ms,
        min_rtt_ms: s.min_rtt_ms,
        cc: tcp_cc(socket),
        rwnd_limited_ms: s.rwnd_limited_ms,
        sndbuf_limited_ms: s.sndbuf_limited_ms,
    })
}

/// One TCP_INFO reading of a path probe's sending socket, `t` s after its flow started. Its
/// acknowledged bytes include the segments selectively acknowledged above a hole
/// (`tcpi_sacked` × MSS): counted only once the hole fills, a reading taken during a
/// recovery would move bytes delivered before it into the next interval (a goodput 4.6% above
/// the link's ceiling at 300 Mbit/s with 1% loss).
pub fn probe_sample(socket: &impl AsFd, t: f64) -> Option<shoal_proto::probe::TcpSample> {
    let i = shoal_sys::tcp::tcp_info(socket).ok()?;
    let sacked = u64::from(i.tcpi_sacked) * u64::from(i.tcpi_snd_mss);
    Some(shoal_proto::probe::TcpSample {
        t,
        bytes_acked: i.tcpi_bytes_acked + sacked,
        retransmits: u64::from(i.tcpi_total_retrans),
        segments_out: u64::from(i.tcpi_data_segs_out),
    })
}

/// The controller a TCP socket really uses, as the kernel reports it.
pub fn tcp_cc(socket: &impl AsFd) -> String {
    SockRef::from(socket)
        .tcp_congestion()
        .map(|name| {
            String::from_utf8_lossy(&name)
                .trim_end_matches('\0')
                .to_string()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_tcp_info_and_cc_from_a_loopback_socket() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let _server = listener.accept().unwrap();
        set_tcp_cc(&client, Cc::Reno).unwrap();
        assert_eq!(tcp_cc(&client), "reno");
        let s = tcp_stats(&client).unwrap();
        assert!(s.rtt_ms > 0.0, "{s:?}");
        assert!(s.cwnd_bytes > 0, "{s:?}");
        assert!(check_tcp_cc(Cc::Cubic).is_ok());
    }

    #[test]
    fn aggregates() {
        let a = ConnStats {
            rtt_ms: 10.0,
            min_rtt_ms: 8.0,
            retransmits: 2,
            ..Default::default()
        };
        let b = ConnStats {
            rtt_ms: 20.0,
            min_rtt_ms: 9.0,
            retransmits: 3,
            ..Default::default()
        };
        let r = ConnStats::aggregate(&[a, b]);
        assert_eq!(r.rtt_ms, 15.0);
        assert_eq!(r.min_rtt_ms, 8.0);
        assert_eq!(r.retransmits, 5);
    }
}
