//! A raw `tcp-streams` client: pinned TLS, a hello on the raw stream, then yamux with streams
//! opened by hand, so tests can put on them what the real sender never would.
//!
//! The sender's own yamux driver (`shoal_sender::streams`) is crate-private and tied to its
//! file pipeline (bounded outstanding streams, boxed I/O); this is the few lines of it a raw
//! client needs, with the same yamux settings (`shoal_transport::transport::yamux_config`).

use std::future::poll_fn;
use std::path::Path;
use std::task::Poll;

use shoal_transport::transport::{yamux_config, yamux_streams};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::compat::{Compat, FuturesAsyncReadCompatExt, TokioAsyncReadCompatExt};

use super::raw;

/// One yamux stream, as tokio I/O.
pub type YStream = Compat<yamux::Stream>;

type Request = oneshot::Sender<Result<yamux::Stream, yamux::ConnectionError>>;

/// A yamux client connection over pinned TLS; its driver task ends when this is dropped.
pub struct YamuxClient {
    requests: mpsc::Sender<Request>,
    driver: JoinHandle<()>,
}

impl YamuxClient {
    /// TLS to `addr`, `raw_hello` on the raw stream (as the sender does, so the receiver can
    /// pick the mode), then yamux on the rest of the connection.
    pub async fn connect(addr: &str, id_dir: &Path, raw_hello: &[u8]) -> Self {
        let mut tls = raw::connect(addr, id_dir).await;
        tls.write_all(raw_hello).await.unwrap();
        tls.flush().await.unwrap();
        let mut conn = yamux::Connection::new(
            tls.compat(),
            yamux_config(yamux_streams(16)),
            yamux::Mode::Client,
        );
        let (requests, mut rx) = mpsc::channel::<Request>(4);
        let driver = tokio::spawn(async move {
            let mut pending: Option<Request> = None;
            let mut open = true;
            let _ = poll_fn(|cx| {
                loop {
                    if pending.is_none() && open {
                        match rx.poll_recv(cx) {
                            Poll::Ready(Some(tx)) => pending = Some(tx),
                            Poll::Ready(None) => open = false,
                            Poll::Pending => {}
                        }
                    }
                    let Some(tx) = pending.take() else { break };
                    match conn.poll_new_outbound(cx) {
                        Poll::Ready(r) => {
                            let _ = tx.send(r);
                        }
                        Poll::Pending => {
                            pending = Some(tx);
                            break;
                        }
                    }
                }
                // Polling inbound is what moves bytes both ways; the receiver opens no streams.
                loop {
                    match conn.poll_next_inbound(cx) {
                        Poll::Ready(Some(Ok(_))) => continue,
                        Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                        Poll::Ready(None) => return Poll::Ready(Ok(())),
                        Poll::Pending => return Poll::Pending,
                    }
                }
            })
            .await;
        });
        Self { requests, driver }
    }

    /// Opens a stream. yamux announces it with its first frame, so the first stream written
    /// to is the first the receiver sees (the control stream).
    /// Fails once the connection has ended (the receiver may close it after a refusal).
    pub async fn open(&self) -> Result<YStream, String> {
        let (tx, rx) = oneshot::channel();
        self.requests
            .send(tx)
            .await
            .map_err(|_| "the yamux connection has ended".to_string())?;
        let stream = rx
            .await
            .map_err(|_| "the yamux connection has ended".to_string())?
            .map_err(|e| format!("cannot open a yamux stream: {e}"))?;
        Ok(stream.compat())
    }
}

impl Drop for YamuxClient {
    fn drop(&mut self) {
        self.driver.abort();
    }
}
