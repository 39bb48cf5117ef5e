//! The host profile axis (`profile = ["tuned", "stock", "stock-buffers"]`): which socket-buffer
//! regime both ends run in. `tuned` is what `shoal link up` set (64 MiB TCP autotuning,
//! rmem_max/wmem_max raised) with Shoal's 20 MiB QUIC windows; `stock` is a Linux host out of
//! the box (kernel default tcp_rmem/tcp_wmem and rmem_max/wmem_max) with quinn's default
//! windows, as the reference study's VMs probably were; `stock-buffers` is the same host with
//! Shoal's QUIC windows: a QUIC application that sizes its flow control for the path (as the
//! study's QUIC must have, to reach 29 MB/s at 141 ms) on an untuned host, whose UDP socket
//! buffer the kernel caps at `rmem_max` (212,992 bytes). The sweep applies it for one run,
//! reads it back into the row and restores it after the run (shoal-sweep's conditions).

use anyhow::{bail, Result};

use crate::axis::{self, AxisValue};

/// A host profile, the value of the `profile` axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostProfile {
    /// As the link set up the namespaces; Shoal's own QUIC windows.
    Tuned,
    /// Kernel defaults ([`STOCK`]); quinn's default windows ([`QUINN_DEFAULT_WINDOWS`]).
    Stock,
    /// Kernel defaults ([`STOCK`]); Shoal's own QUIC windows.
    StockBuffers,
}

impl HostProfile {
    pub fn from_name(s: &str) -> Option<HostProfile> {
        match s {
            "tuned" => Some(HostProfile::Tuned),
            "stock" => Some(HostProfile::Stock),
            "stock-buffers" => Some(HostProfile::StockBuffers),
            _ => None,
        }
    }

    /// The profile a configuration's `profile` axis names (`None` without the axis); an
    /// unknown name is an error naming the axis and the values it takes.
    pub fn of(params: &[(String, AxisValue)]) -> Result<Option<HostProfile>> {
        let Some((_, v)) = params.iter().find(|(k, _)| k == axis::PROFILE) else {
            return Ok(None);
        };
        match HostProfile::from_name(&v.text()) {
            Some(p) => Ok(Some(p)),
            None => bail!(
                "axis {}: {:?} is not a profile (known: tuned, stock, stock-buffers)",
                axis::PROFILE,
                v.text()
            ),
        }
    }

    /// The sysctls this profile writes (`None`: leave what the link set).
    pub fn sysctls(self) -> Option<NetSysctls> {
        match self {
            HostProfile::Tuned => None,
            HostProfile::Stock | HostProfile::StockBuffers => Some(STOCK),
        }
    }

    /// QUIC windows this profile gives both ends (`None`: Shoal's defaults).
    pub fn quic_windows(self) -> Option<QuicWindows> {
        match self {
            HostProfile::Tuned | HostProfile::StockBuffers => None,
            HostProfile::Stock => Some(QUINN_DEFAULT_WINDOWS),
        }
    }
}

/// The socket-buffer sysctls a profile sets: TCP autotuning ranges per namespace, and the
/// host-wide caps on an explicit SO_RCVBUF/SO_SNDBUF (which bound Shoal's UDP buffers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetSysctls {
    pub tcp_rmem: [u64; 3],
    pub tcp_wmem: [u64; 3],
    pub rmem_max: u64,
    pub wmem_max: u64,
}

/// Linux's defaults on a machine with a few GiB of memory (net/ipv4/tcp.c, net/core/sock.c:
/// SK_RMEM_MAX/SK_WMEM_MAX = 212,992 on 64-bit). One TCP flow autotunes to at most 6 MiB of
/// receive buffer, roughly a 3 MB window: about 21 MB/s at 141 ms, the study's bundled TCP.
pub const STOCK: NetSysctls = NetSysctls {
    tcp_rmem: [4096, 131_072, 6_291_456],
    tcp_wmem: [4096, 16_384, 4_194_304],
    rmem_max: 212_992,
    wmem_max: 212_992,
};

/// QUIC flow-control windows, as `shoal send`/`shoal recv` flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuicWindows {
    pub stream_window: u64,
    pub conn_window: u64,
    pub send_window: u64,
}

/// quinn-proto 0.11's `TransportConfig::default()`: a stream window of 1.25 MB (100 Mbit/s ×
/// 100 ms), an unlimited connection window (VarInt::MAX) and an 8 × 1.25 MB send window.
pub const QUINN_DEFAULT_WINDOWS: QuicWindows = QuicWindows {
    stream_window: 1_250_000,
    conn_window: (1 << 62) - 1,
    send_window: 10_000_000,
};

/// The flow flags a profile sets, which an axis must not set too.
pub const PROFILE_FLAGS: &[&str] = &["stream-window", "conn-window", "send-window"];

impl QuicWindows {
    /// `shoal send` flags and `shoal recv` flags (the receiver takes no send window) for a run
    /// over `connections` connections. Shoal shares its windows among a run's connections (a
    /// window is for the path); a stock client opens each connection with quinn's defaults, so
    /// the send window asked for is N × the default, which gives each connection the default.
    /// (The connection window is unlimited either way; the stream window is per stream.)
    pub fn flags(&self, connections: u64) -> (Vec<String>, Vec<String>) {
        let recv = vec![
            "--stream-window".to_string(),
            self.stream_window.to_string(),
            "--conn-window".to_string(),
            self.conn_window.to_string(),
        ];
        let mut send = recv.clone();
        send.extend([
            "--send-window".to_string(),
            self.send_window
                .saturating_mul(connections.max(1))
                .to_string(),
        ]);
        (send, recv)
    }
}

/// Checks a configuration's profile against its other axes: a profile that sets QUIC windows
/// and an axis that sets one too would leave the row's label ambiguous.
pub fn check(params: &[(String, AxisValue)]) -> Result<()> {
    let Some(p) = HostProfile::of(params)? else {
        return Ok(());
    };
    if p.quic_windows().is_some() {
        for (k, _) in params {
            let flag = k.strip_prefix(axis::RECV_PREFIX).unwrap_or(k);
            if PROFILE_FLAGS.contains(&flag) {
                bail!(
                    "axis {k} with profile = \"stock\": the stock profile sets quinn's default \
                     windows itself; drop one of them"
                );
            }
        }
    }
    Ok(())
}
#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Vec<(String, AxisValue)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), AxisValue::Str(v.to_string())))
            .collect()
    }

    #[test]
    fn profile_names_and_conflicts() {
        assert_eq!(HostProfile::of(&params(&[])).unwrap(), None);
        assert_eq!(
            HostProfile::of(&params(&[("profile", "stock")])).unwrap(),
            Some(HostProfile::Stock)
        );
        let e = HostProfile::of(&params(&[("profile", "stok")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"stok\"") && e.contains("tuned, stock"), "{e}");
        let b = HostProfile::of(&params(&[("profile", "stock-buffers")])).unwrap();
        assert_eq!(b, Some(HostProfile::StockBuffers));
        // The kernel's buffers, Shoal's windows: a window axis is allowed beside it.
        assert_eq!(b.unwrap().sysctls(), Some(STOCK));
        assert_eq!(b.unwrap().quic_windows(), None);
        check(&params(&[
            ("profile", "stock-buffers"),
            ("stream-window", "8MiB"),
        ]))
        .unwrap();
        check(&params(&[("profile", "tuned"), ("stream-window", "1MiB")])).unwrap();
        let e = check(&params(&[
            ("profile", "stock"),
            ("recv.conn-window", "1MiB"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("recv.conn-window"), "{e}");
    }

    #[test]
    fn stock_windows_as_flags() {
        let (send, recv) = QUINN_DEFAULT_WINDOWS.flags(1);
        assert_eq!(
            recv,
            [
                "--stream-window",
                "1250000",
                "--conn-window",
                "4611686018427387903"
            ]
        );
        assert_eq!(&send[4..], ["--send-window", "10000000"]);
        let (send8, _) = QUINN_DEFAULT_WINDOWS.flags(8);
        assert_eq!(&send8[4..], ["--send-window", "80000000"]);
    }
}
