//! TCP connection set-up with TLS 1.3 and certificate pinning.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use shoal_common::identity::{self, Pin};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// Connects to `to` and completes a TLS handshake that accepts only the pinned certificate.
pub(crate) async fn connect(to: &str, pin: Pin, timeout: Duration) -> Result<TlsStream<TcpStream>> {
    let connector = TlsConnector::from(Arc::new(identity::client_config(pin)?));
    let work = async {
        let tcp = TcpStream::connect(to)
            .await
            .with_context(|| format!("cannot connect to {to}"))?;
        // Records are coalesced by the sender itself; Nagle would only add delay.
        tcp.set_nodelay(true)?;
        connector
            .connect(identity::server_name(), tcp)
            .await
            .with_context(|| format!("TLS handshake with {to} failed"))
    };
    tokio::time::timeout(timeout, work)
        .await
        .with_context(|| format!("connecting to {to} timed out after {} s", timeout.as_secs()))?
}
