//! QUIC: the I/O side of the path-sized receive window (`shoal_common::window_tune`): meters
//! what the connection's records stage reads from its stream (quic-bundle) or its file streams
//! (quic-streams), and feeds the rule once a round trip.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use shoal_common::window_share::TunedReceive;
use shoal_common::window_tune::{self, ReceiveTuner};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::task::JoinHandle;

/// What the application read from a stream.
#[derive(Debug, Default)]
pub(crate) struct ReadMeter {
    read: AtomicU64,
}

impl ReadMeter {
    /// Counts `n` bytes read.
    pub(crate) fn add(&self, n: u64) {
        self.read.fetch_add(n, Ordering::Relaxed);
    }
}

/// A stream whose reads are metered.
pub(crate) struct Metered<R> {
    inner: R,
    meter: Arc<ReadMeter>,
}

impl<R> Metered<R> {
    pub(crate) fn new(inner: R, meter: Arc<ReadMeter>) -> Self {
        Self { inner, meter }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Metered<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            self.meter.add((buf.filled().len() - before) as u64);
        }
        polled
    }
}

/// Sets `tuned`'s window for the start (call before it is seated, so the share is never
/// granted whole on a short path) and runs its tuning until aborted.
pub(crate) fn spawn(
    conn: quinn::Connection,
    tuned: Arc<TunedReceive>,
    meter: Arc<ReadMeter>,
) -> JoinHandle<()> {
    let start = window_tune::start_window(conn.rtt());
    tuned.set_demand(start);
    tokio::spawn(async move {
        let mut tuner = ReceiveTuner::new(start);
        let mut last = Instant::now();
        loop {
            tokio::time::sleep(window_tune::period(conn.rtt())).await;
            let now = Instant::now();
            let read = meter.read.load(Ordering::Relaxed);
            tuned.set_demand(tuner.sample(read, now - last, conn.rtt()));
            last = now;
        }
    })
}
