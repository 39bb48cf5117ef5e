//! Keeps the first bytes a stream delivers. A `tcp-streams` sender starts yamux right after
//! its hello, but a receiver that refuses before it knows the mode (an undecodable hello,
//! `--max-connections` reached) answers with a plain error reply on the raw stream; yamux
//! then only reports a broken connection. The kept bytes let the sender show the
//! receiver's reason instead.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use shoal_proto::codec::{Reply, ReplyDecoder};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How many of the first received bytes are kept (an error reply is a few hundred at most).
const KEEP: usize = 4096;

pub(crate) struct Sniff<S> {
    inner: S,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl<S> Sniff<S> {
    pub(crate) fn new(inner: S) -> (Self, Arc<Mutex<Vec<u8>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        (
            Sniff {
                inner,
                seen: seen.clone(),
            },
            seen,
        )
    }
}

/// The receiver's error message, if the kept bytes are one whole error reply.
pub(crate) fn refusal_in(seen: &Mutex<Vec<u8>>) -> Option<String> {
    let seen = seen.lock().expect("sniff lock");
    match ReplyDecoder.decode(&seen) {
        Ok(Some((Reply::Error(msg), _))) => Some(msg),
        _ => None,
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Sniff<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let mut seen = self.seen.lock().expect("sniff lock");
        if seen.len() < KEEP {
            let new = &buf.filled()[before..];
            let room = KEEP - seen.len();
            seen.extend_from_slice(&new[..new.len().min(room)]);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Sniff<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
