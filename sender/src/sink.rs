//! The write half of a bundled stream, taking owned bytes: a QUIC stream keeps them as they
//! are (`SendStream::write_chunk`: quinn holds the buffer until it is acknowledged, no copy
//! into its send buffer); a byte stream (TLS or plain TCP) copies them into the socket.

use std::future::Future;

use bytes::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt, WriteHalf};

/// A transport's write half for records.
pub(crate) trait RecordSink: AsyncWrite + Unpin {
    /// Whether the sink keeps a written buffer (its whole allocation) until the peer has
    /// acknowledged its bytes, rather than copying them out during the write.
    const KEEPS_BUFFERS: bool = false;

    /// Writes all of `bytes`.
    fn write_owned(&mut self, bytes: Bytes) -> impl Future<Output = std::io::Result<()>>;
}

impl<T: tokio::io::AsyncRead + AsyncWrite> RecordSink for WriteHalf<T> {
    async fn write_owned(&mut self, bytes: Bytes) -> std::io::Result<()> {
        self.write_all(&bytes).await
    }
}

impl RecordSink for quinn::SendStream {
    const KEEPS_BUFFERS: bool = true;

    async fn write_owned(&mut self, bytes: Bytes) -> std::io::Result<()> {
        // `write` copies into a fresh buffer of quinn's per write: one more pass over every
        // byte beside quinn's own copy into packets, and an allocation per write.
        self.write_chunk(bytes).await.map_err(std::io::Error::from)
    }
}
