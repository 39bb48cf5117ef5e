//! A raw client for crafted streams: pinned TLS to a live receiver, a hello and records built
//! by hand (so tests can send what the real sender never would).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use shoal_proto::codec::{self, Hello, Reply, ReplyDecoder};
use shoal_transport::config::Mode;
use shoal_transport::identity::{self, Identity};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// A pinned TLS connection to the receiver, handshake done.
pub async fn connect(addr: &str, id_dir: &Path) -> Tls {
    let (pin, _) = Identity::read_credentials(id_dir).unwrap();
    let connector =
        tokio_rustls::TlsConnector::from(Arc::new(identity::client_config(pin).unwrap()));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    connector
        .connect(identity::server_name(), tcp)
        .await
        .unwrap()
}

/// Reads the receiver's first reply (up to `wait`).
pub async fn reply(tls: &mut Tls, wait: Duration) -> Option<Reply> {
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(wait, tls.read_to_end(&mut buf)).await;
    ReplyDecoder.decode(&buf).ok().flatten().map(|(r, _)| r)
}

/// Sends `bytes`, closes the sending side, returns the reply.
pub async fn session(addr: &str, id_dir: &Path, bytes: &[u8]) -> Option<Reply> {
    let mut tls = connect(addr, id_dir).await;
    // The receiver may refuse mid-way and close; a failed write is expected then.
    let _ = tls.write_all(bytes).await;
    let _ = tls.shutdown().await;
    reply(&mut tls, Duration::from_secs(30)).await
}

pub fn hello(token: &[u8], files: u64, bytes: u64) -> BytesMut {
    hello_for(Mode::TcpBundle, rand::random(), token, files, bytes)
}

/// A one-connection hello for `mode` and run `run_id` (per-file stream modes ask for 16
/// outstanding streams).
pub fn hello_for(mode: Mode, run_id: [u8; 16], token: &[u8], files: u64, bytes: u64) -> BytesMut {
    let mut s = BytesMut::new();
    codec::encode_hello(
        &Hello {
            run_id,
            token: token.to_vec(),
            mode,
            file_count: files,
            total_bytes: bytes,
            conn_index: 0,
            conn_count: 1,
            max_streams: if mode.per_file_streams() { 16 } else { 0 },
            cc: None,
        },
        &mut s,
    );
    s
}

/// A file record with an unchecked raw path.
pub fn raw_file(s: &mut BytesMut, path: &[u8], size: u64, data: &[u8]) {
    s.put_u8(0x01);
    s.put_u16(path.len() as u16);
    s.put_slice(path);
    s.put_u64(size);
    s.put_u64(0); // sent_at_us
    s.put_slice(data);
}

/// The error reply a hostile case must get: one naming `cause`. Returns its message.
pub fn expect_error(name: &str, got: Option<Reply>, cause: &str) -> String {
    match got {
        Some(Reply::Error(msg)) => {
            assert!(msg.contains(cause), "{name}: {msg}");
            msg
        }
        other => panic!("{name}: expected an error naming {cause:?}, got {other:?}"),
    }
}
