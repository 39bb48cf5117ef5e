//! A live handle on a connection's transport statistics.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use shoal_common::stats::{quic_stats, tcp_stats, ConnStats};

/// A live handle on a connection's statistics.
#[derive(Clone)]
pub(crate) enum Probe {
    Tcp(Arc<OwnedFd>),
    Quic(quinn::Connection),
}

impl Probe {
    pub(crate) fn stats(&self) -> ConnStats {
        match self {
            Probe::Tcp(fd) => tcp_stats(&**fd).unwrap_or_default(),
            Probe::Quic(conn) => quic_stats(conn),
        }
    }
}
