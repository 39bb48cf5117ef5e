//! A live handle on a connection's transport statistics.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use shoal_transport::quic_cc::AckedBytes;
use shoal_transport::stats::{quic_stats, tcp_stats, ConnStats};

/// A live handle on a connection's statistics.
#[derive(Clone)]
pub(crate) enum StatsHandle {
    Tcp(Arc<OwnedFd>),
    /// The connection and the bytes its receiver acknowledged (quinn does not count them).
    Quic(quinn::Connection, AckedBytes),
}

impl StatsHandle {
    pub(crate) fn stats(&self) -> ConnStats {
        match self {
            StatsHandle::Tcp(fd) => tcp_stats(&**fd).unwrap_or_default(),
            StatsHandle::Quic(conn, acked) => quic_stats(conn, Some(acked)),
        }
    }
}
