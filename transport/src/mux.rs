//! Driving a yamux connection at either end, in the task of the code that uses it.
//!
//! A driver in its own task cost a wake-up of that task (and a write) per file, and a round
//! trip between tasks per stream opened; here the connection is polled after every poll of the
//! work it serves, so the frames the work queued leave in one flush.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::compat::{Compat, FuturesAsyncReadCompatExt, TokioAsyncReadCompatExt};

use crate::transport::yamux_config;

/// A yamux client connection, shared by the code that opens streams and the code that drives
/// it. Both run inside one task ([`with_yamux_client`]), so the lock is never contended: it
/// only lets two futures of that task reach the same connection.
/// `None` once the connection has ended: dropping it is what ends its streams.
pub type ClientConn<S> = Arc<Mutex<Option<yamux::Connection<Compat<S>>>>>;

/// Runs `work` with a yamux client connection over `io` allowing `streams` streams, driving
/// the connection in the same task: polling inbound (which is what moves bytes both ways)
/// after every poll of `work`.
pub async fn with_yamux_client<S, T, F, Fut>(io: S, streams: usize, work: F) -> T
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: FnOnce(ClientConn<S>) -> Fut,
    Fut: Future<Output = T>,
{
    let conn: ClientConn<S> = Arc::new(Mutex::new(Some(yamux::Connection::new(
        io.compat(),
        yamux_config(streams),
        yamux::Mode::Client,
    ))));
    let mut work = pin!(work(conn.clone()));
    poll_fn(|cx| {
        let out = work.as_mut().poll(cx);
        // Also once `work` is done: what it queued last (an end marker, or the control
        // stream's hello before a failure) goes out as far as the socket takes it now.
        let mut guard = conn.lock().expect("yamux");
        if let Some(c) = guard.as_mut() {
            if drive_client(c, cx).is_ready() {
                // Dropping the connection ends its streams, so `work` sees the failure.
                *guard = None;
                cx.waker().wake_by_ref();
            }
        }
        out
    })
    .await
}

/// Polls a client connection until it has nothing to do; ready when it has ended.
fn drive_client<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut yamux::Connection<Compat<S>>,
    cx: &mut std::task::Context<'_>,
) -> Poll<()> {
    loop {
        match conn.poll_next_inbound(cx) {
            // The receiver opens no streams; drop any it does.
            Poll::Ready(Some(Ok(_))) => continue,
            Poll::Ready(Some(Err(_)) | None) => return Poll::Ready(()),
            Poll::Pending => return Poll::Pending,
        }
    }
}

/// What a yamux server connection hands to the code that serves it.
pub struct YamuxServer<F> {
    /// The first inbound stream.
    pub control: oneshot::Receiver<Compat<yamux::Stream>>,
    /// Every later inbound stream, as `wrap` made it.
    pub files: mpsc::UnboundedReceiver<F>,
    /// Becomes true when the connection has ended (the peer closed it, or it failed).
    pub ended: watch::Receiver<bool>,
}

/// Runs `work` with a yamux server connection over `io`, driving the connection in the same
/// task: the first inbound stream is the control stream; every later one is a file stream,
/// handed over as `wrap` makes it. The connection is polled after every poll of `work`, so
/// the acknowledgements and closes `work` queued leave in one flush. The connection is
/// dropped when `work` returns.
pub async fn with_yamux_server<S, T, Fl, W, F, Fut>(
    io: S,
    streams_allowed: usize,
    wrap: W,
    work: F,
) -> T
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    W: Fn(Compat<yamux::Stream>) -> Fl,
    F: FnOnce(YamuxServer<Fl>) -> Fut,
    Fut: Future<Output = T>,
{
    // `None` once the connection has ended: dropping it is what ends its streams.
    let mut conn = Some(yamux::Connection::new(
        io.compat(),
        yamux_config(streams_allowed),
        yamux::Mode::Server,
    ));
    let (control_tx, control) = oneshot::channel();
    let (files_tx, files) = mpsc::unbounded_channel();
    let mut files_tx = Some(files_tx);
    let (ended_tx, ended) = watch::channel(false);
    let mut work = pin!(work(YamuxServer {
        control,
        files,
        ended
    }));
    let mut control_tx = Some(control_tx);
    poll_fn(|cx| loop {
        if let Poll::Ready(out) = work.as_mut().poll(cx) {
            return Poll::Ready(out);
        }
        let Some(c) = conn.as_mut() else {
            return Poll::Pending;
        };
        // Streams handed to `work` here wake this same task; poll `work` again at once.
        let mut handed = false;
        loop {
            match c.poll_next_inbound(cx) {
                Poll::Ready(Some(Ok(stream))) => {
                    handed = true;
                    match control_tx.take() {
                        Some(tx) => {
                            let _ = tx.send(stream.compat());
                        }
                        None => {
                            if let Some(tx) = &files_tx {
                                let _ = tx.send(wrap(stream.compat()));
                            }
                        }
                    }
                }
                Poll::Ready(Some(Err(_)) | None) => {
                    conn = None;
                    // Closed channels tell `work` the connection ended.
                    control_tx = None;
                    files_tx = None;
                    let _ = ended_tx.send(true);
                    handed = true;
                    break;
                }
                Poll::Pending => break,
            }
        }
        if !handed {
            return Poll::Pending;
        }
    })
    .await
}
