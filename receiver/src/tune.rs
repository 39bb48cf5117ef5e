//! QUIC: the I/O side of the path-sized receive window (`shoal_resume::receive_window`): meters
//! what the connection's records stage reads from its stream (quic-bundle) or its file streams
//! (quic-streams), and feeds the rule once a round trip.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use shoal_resume::receive_window::{self, ReceiveTuner};
use shoal_transport::window_share::TunedReceive;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::Semaphore;
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

/// A connection's window tuning under way: stopped by [`Tuning::finish`], or when dropped, so
/// it never outlives the connection's handling (whichever way that ends).
pub(crate) struct Tuning {
    task: Option<JoinHandle<()>>,
    meter: Arc<ReadMeter>,
}

impl Tuning {
    /// What the tuning meters: the bytes the connection's records stage reads (counted with
    /// `recv --fixed-window` too, where nothing reads them: one atomic add a read).
    pub(crate) fn meter(&self) -> Arc<ReadMeter> {
        self.meter.clone()
    }

    /// Stops the tuning — before the connection's seat is given up, so it sets no window after
    /// that — and returns the smallest window the connection had.
    pub(crate) fn finish(mut self, tuned: &TunedReceive) -> u64 {
        self.stop();
        tuned.lowest()
    }

    fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Drop for Tuning {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a connection's application has read and not yet written: its part of the run's write
/// budget in use (the budget is the run's, so each of its `connections` counts an equal part).
pub(crate) struct Held {
    budget: Arc<Semaphore>,
    size: usize,
    connections: u64,
}

impl Held {
    pub(crate) fn new(budget: Arc<Semaphore>, size: usize, connections: u16) -> Self {
        Self {
            budget,
            size,
            connections: u64::from(connections.max(1)),
        }
    }

    fn bytes(&self) -> u64 {
        // The budget's permits are bytes, at most u32::MAX of them (stage::send_batch).
        let size = self.size.min(u32::MAX as usize);
        size.saturating_sub(self.budget.available_permits()) as u64 / self.connections
    }
}

/// Sets `tuned`'s window for the start (call before it is seated, so the share is never
/// granted whole on a short path) and tunes it once a period until the [`Tuning`] is finished
/// or dropped, less what `held` says the writers still hold; with `fixed` (`recv
/// --fixed-window`) it leaves the window whole.
pub(crate) fn start(
    conn: quinn::Connection,
    tuned: Arc<TunedReceive>,
    held: Held,
    fixed: bool,
) -> Tuning {
    let meter = Arc::new(ReadMeter::default());
    if fixed {
        return Tuning { task: None, meter };
    }
    // The least round trip quinn has seen, leaving out acknowledgement delays (see
    // receive_window): the smoothed one grows with a busy receiver's queue. Read once a period
    // (`stats()` locks the connection and copies all its counters): the round trip just
    // read sizes both this period's window and the wait for the next.
    let min_rtt = |conn: &quinn::Connection| conn.stats().path.min_rtt;
    let mut rtt = min_rtt(&conn);
    tuned.set_demand(receive_window::start_window(rtt), held.bytes());
    let read = meter.clone();
    let task = tokio::spawn(async move {
        let mut tuner = ReceiveTuner::default();
        let mut last = Instant::now();
        loop {
            tokio::time::sleep(receive_window::period(rtt)).await;
            let now = Instant::now();
            rtt = min_rtt(&conn);
            let total = read.read.load(Ordering::Relaxed);
            let demand = tuner.sample(total, now - last, rtt, tuned.current());
            tuned.set_demand(demand, held.bytes());
            last = now;
        }
    });
    Tuning {
        task: Some(task),
        meter,
    }
}
