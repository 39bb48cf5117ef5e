//! Reading a per-file stream into the stage's buffer without zeroing memory first.
//!
//! Through `tokio_util::compat::Compat`, a yamux stream zeroes the caller's whole spare
//! capacity on every poll (a futures `AsyncRead` needs an initialised slice): for tcp-streams
//! that was a 4,608-byte memset per poll, two polls per 4 KiB file, 16% of the receiver's
//! instructions (docs/benchmarks.md, "Instructions per file"). yamux also hands out each frame's body
//! as a whole (`futures::Stream<Item = Packet>`), so reading packets costs one copy into the
//! buffer and no memset. QUIC streams go through quinn's tokio `AsyncRead`, which copies its
//! chunks into the uninitialised spare capacity (`put_slice`) and zeroes nothing.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::{Context as _, Result};
use bytes::BytesMut;
use futures::{AsyncWrite, Stream};
use tokio::io::AsyncReadExt;

/// A per-file stream, read without zeroing.
pub(crate) enum FileStream {
    Yamux(AckWhenWaiting),
    Quic(quinn::RecvStream),
}

impl FileStream {
    /// Appends at least one byte to `buf` (room for `want` is reserved where the transport
    /// reads into it) and returns how many; 0 at end of stream.
    async fn read(&mut self, buf: &mut BytesMut, want: usize) -> std::io::Result<usize> {
        match self {
            FileStream::Yamux(s) => std::future::poll_fn(|cx| s.poll_read_into(cx, buf)).await,
            FileStream::Quic(s) => {
                buf.reserve(want);
                s.read_buf(buf).await
            }
        }
    }
}

impl FileStream {
    /// Sizes a yamux stream's receive window for its record, once its header is in: `total`
    /// bytes on the stream (read so far and still due), at most
    /// [`YAMUX_STREAM_GRANT`](shoal_transport::transport::YAMUX_STREAM_GRANT). A record that
    /// fits yamux's initial 256 KiB sends nothing. The length only sizes the credit; the
    /// decoder still refuses a byte past the record, and yamux a byte past the window. QUIC
    /// streams start with `--stream-window`: nothing to do.
    pub(crate) fn size_window(&mut self, total: u64) {
        use shoal_transport::transport::YAMUX_STREAM_GRANT;
        if let FileStream::Yamux(s) = self {
            let window = u32::try_from(total)
                .unwrap_or(u32::MAX)
                .min(YAMUX_STREAM_GRANT);
            if window > s.stream.receive_window() {
                s.stream.grant_receive_window(window);
            }
        }
    }

    /// The stream's receive window now (yamux: as granted or auto-tuned; QUIC: 0, the
    /// connection's `--stream-window` applies).
    pub(crate) fn receive_window(&self) -> u64 {
        match self {
            FileStream::Yamux(s) => u64::from(s.stream.receive_window()),
            FileStream::Quic(_) => 0,
        }
    }
}

/// One read of a file stream, bounded by `timeout`; 0 at end of stream.
pub(crate) async fn read_into(
    rd: &mut FileStream,
    buf: &mut BytesMut,
    want: usize,
    timeout: Duration,
) -> Result<usize> {
    match tokio::time::timeout(timeout, rd.read(buf, want)).await {
        Ok(r) => Ok(r.context("connection failed")?),
        Err(_) => anyhow::bail!(
            "peer idle for {:.1} s (recv --idle-timeout); dropped",
            timeout.as_secs_f64()
        ),
    }
}

/// A yamux file stream that acknowledges itself the first time a read would wait.
///
/// yamux lets a sender wait for at most 256 unacknowledged streams, and a stream is
/// acknowledged by the first frame the receiver sends on it. A stream that has to wait for
/// data is acknowledged at once (an empty write), so the backlog drains one round trip after
/// each open rather than after each file. A small file is usually whole in its first read; its
/// close, a moment later, carries the acknowledgement, which saves a frame per file at both
/// ends.
pub(crate) struct AckWhenWaiting {
    pub stream: yamux::Stream,
    pub acked: bool,
}

impl AckWhenWaiting {
    /// One frame body (yamux's own allocation) per read: the bytes are already in memory,
    /// counted against the stream's yamux window. Into an empty buffer the body moves whole
    /// (no copy); otherwise it is appended.
    fn poll_read_into(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<std::io::Result<usize>> {
        loop {
            match Pin::new(&mut self.stream).poll_next(cx) {
                Poll::Ready(Some(Ok(packet))) => {
                    let n = packet.as_ref().len();
                    if n == 0 {
                        continue; // an empty frame: nothing to hand on, not the end
                    }
                    if buf.is_empty() {
                        // The frame's body becomes the buffer, uncopied: a small file's record
                        // usually arrives whole in one frame.
                        *buf = BytesMut::from(bytes::Bytes::from(packet.into_vec()));
                    } else {
                        buf.extend_from_slice(packet.as_ref());
                    }
                    return Poll::Ready(Ok(n));
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                Poll::Ready(None) => return Poll::Ready(Ok(0)),
                Poll::Pending => {
                    if !self.acked {
                        // Pending: the stream's queue to the connection is full and wakes us
                        // when it is not. A failed write shows up on the next read.
                        if Pin::new(&mut self.stream).poll_write(cx, &[]).is_ready() {
                            self.acked = true;
                        }
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}
