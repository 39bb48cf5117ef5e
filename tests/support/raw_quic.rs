//! A raw QUIC client: the sender's own pinned connection set-up
//! (`shoal_sender::net::connect_quic`), with streams written by hand.

use std::path::Path;
use std::time::Duration;

use shoal_proto::codec::{Reply, ReplyDecoder};
use shoal_sender::net::{connect_quic, QuicConn};
use shoal_transport::config::FlowConfig;
use shoal_transport::identity::Identity;

/// A pinned QUIC connection to the receiver, handshake done.
pub async fn connect(addr: &str, id_dir: &Path) -> QuicConn {
    let (pin, _) = Identity::read_credentials(id_dir).unwrap();
    connect_quic(
        addr,
        pin,
        None,
        &FlowConfig::default(),
        Duration::from_secs(10),
    )
    .await
    .expect("QUIC connection to the receiver")
}

/// Reads the receiver's first reply from `recv` (up to `wait`).
pub async fn reply(recv: &mut quinn::RecvStream, wait: Duration) -> Option<Reply> {
    let buf = tokio::time::timeout(wait, recv.read_to_end(1 << 20))
        .await
        .ok()?
        .ok()?;
    ReplyDecoder.decode(&buf).ok().flatten().map(|(r, _)| r)
}

/// Closes the connection and lets the close reach the receiver (bounded).
pub async fn close(quic: QuicConn) {
    quic.conn.close(0u32.into(), b"done");
    let _ = tokio::time::timeout(Duration::from_secs(1), quic.endpoint.wait_idle()).await;
}
