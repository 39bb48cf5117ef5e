//! Flags `send` and `recv` share: identity, runtime, flow control.

use std::path::PathBuf;

use clap::Args;
use shoal_proto::recvsettings::parse_flag_size;
use shoal_transport::config::{FlowConfig, UdpRcvbuf};

use crate::defaults;

#[derive(Debug, Args)]
pub(crate) struct IdentityArgs {
    /// Identity folder (certificate, key, `pin`, `token`); created on first use
    /// [default: $XDG_CONFIG_HOME/shoal/identity or ~/.config/shoal/identity].
    #[arg(long)]
    pub(crate) identity: Option<PathBuf>,
}

/// The async runtime of `send` and `recv`.
#[derive(Debug, Args)]
pub(crate) struct RuntimeArgs {
    /// Threads that run the connections (TLS, QUIC, yamux, timers). 1 costs the least CPU:
    /// with 2, handing packets and wake-ups between threads cost a quic-bundle sender 12–18%
    /// more CPU on the 1 Gbit/s link. More let many
    /// connections use several cores. The reader (send) and writer (recv) threads are apart
    /// either way. The row records each end's (`threads`, `receiver_threads`).
    #[arg(long, default_value_t = 1, value_parser = |v: &str| count_in("threads", v).map(|n| n as u16))]
    pub(crate) threads: u16,
}

/// Flow control and socket buffers. Defaults are sized for a 1 Gbit/s × 150 ms path.
#[derive(Debug, Args)]
pub(crate) struct FlowArgs {
    /// Per-file streams outstanding (tcp-streams, quic-streams). Sender: for the whole run,
    /// split evenly over --connections. Receiver: the most it accepts per connection.
    #[arg(long, default_value_t = defaults::FLOW.max_streams, value_parser = |v: &str| count_in("max-streams", v).map(|n| n as u32))]
    pub(crate) max_streams: u32,
    /// QUIC receive window per stream (bounds one stream, e.g. quic-bundle, to window/RTT).
    #[arg(long, default_value = defaults::size(defaults::FLOW.stream_window), value_parser = |v: &str| floored("stream-window", v))]
    pub(crate) stream_window: u64,
    /// QUIC receive window per connection (all streams together).
    #[arg(long, default_value = defaults::size(defaults::FLOW.conn_window), value_parser = |v: &str| floored("conn-window", v))]
    pub(crate) conn_window: u64,
    /// QUIC send window: bytes in flight unacknowledged (sender).
    #[arg(long, default_value = defaults::size(defaults::FLOW.send_window), value_parser = |v: &str| floored("send-window", v))]
    pub(crate) send_window: u64,
    /// SO_SNDBUF for TCP and UDP sockets [default: TCP autotuning up to net.ipv4.tcp_wmem;
    /// UDP 8 MiB]. The kernel caps it at net.core.wmem_max; the value in effect is reported.
    #[arg(long, value_parser = |v: &str| floored("sndbuf", v))]
    pub(crate) sndbuf: Option<u64>,
    /// SO_RCVBUF for TCP and UDP sockets [default: TCP autotuning up to net.ipv4.tcp_rmem;
    /// UDP 8 MiB]. The kernel caps it at net.core.rmem_max; the value in effect is reported.
    #[arg(long, value_parser = |v: &str| floored("rcvbuf", v))]
    pub(crate) rcvbuf: Option<u64>,
    /// QUIC: SO_RCVBUF of the UDP socket, set before the endpoint starts [default: --rcvbuf,
    /// else 8 MiB]; `kernel` leaves the kernel's default (net.core.rmem_default), as quinn
    /// does. The kernel caps it at net.core.rmem_max; the value in effect is reported.
    #[arg(long, value_parser = UdpRcvbuf::parse)]
    pub(crate) udp_rcvbuf: Option<UdpRcvbuf>,
}

impl FlowArgs {
    pub(crate) fn config(&self) -> FlowConfig {
        FlowConfig {
            max_streams: self.max_streams,
            stream_window: self.stream_window,
            conn_window: self.conn_window,
            send_window: self.send_window,
            sndbuf: self.sndbuf,
            rcvbuf: self.rcvbuf,
            udp_rcvbuf: self.udp_rcvbuf,
            max_udp_payload: None,
        }
    }
}

/// A duration flag within its range (`shoal_proto::ranges::DURATIONS`).
pub(crate) fn span_in(flag: &str, text: &str) -> Result<std::time::Duration, String> {
    shoal_proto::ranges::parse_flag_duration(flag, text).map_err(|e| e.to_string())
}

/// A count flag within its range (`shoal_proto::ranges::COUNTS`).
pub(crate) fn count_in(flag: &str, text: &str) -> Result<u64, String> {
    shoal_proto::ranges::parse_flag_count(flag, text).map_err(|e| e.to_string())
}

/// What `--help` says after the flags: the ranges of `flags` (from the tables that check
/// them) and the exit status.
pub(crate) fn ranges_help(flags: &[&str]) -> String {
    use shoal_proto::ranges::{COUNTS, DURATIONS};
    use shoal_proto::recvsettings::FLOORS;
    let mut out = Vec::new();
    for flag in flags {
        if let Some(r) = DURATIONS.iter().find(|r| r.flag == *flag) {
            out.push(format!("--{flag} {}", r.describe()));
        } else if let Some(r) = COUNTS.iter().find(|r| r.flag == *flag) {
            out.push(format!("--{flag} {}", r.describe()));
        } else if let Some(f) = FLOORS.iter().find(|f| f.flag == *flag) {
            out.push(format!(
                "--{flag} {} or more",
                shoal_proto::units::format_size(f.least)
            ));
        }
    }
    format!(
        "Ranges (checked as the command line is parsed): {}.\n\n{EXIT_STATUS}",
        out.join(", ")
    )
}

/// The exit status every command keeps.
pub(crate) const EXIT_STATUS: &str = "Exit status: 0 ok, 1 a run failed, 2 the invocation is \
     wrong (a flag, an address, a folder; nothing was run), 130 interrupted (Ctrl-C).";

/// A size flag within its floor (`shoal_proto::recvsettings::FLOORS`): the same bound the
/// control channel's per-run settings meet.
pub(crate) fn floored(flag: &str, text: &str) -> Result<u64, String> {
    parse_flag_size(flag, text).map_err(|e| e.to_string())
}
