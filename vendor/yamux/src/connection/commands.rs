// Shoal patch: one queue of stream commands per connection.
//
// Upstream gives every stream a bounded `futures::channel::mpsc` channel and polls all of their
// receivers through a `SelectAll`. Every command then costs a node allocation in its channel and
// a task allocation when the `SelectAll` re-queues the stream, and every stream a channel and a
// task of its own. With one small file per stream (Shoal's tcp-streams) that machinery and its
// `malloc`/`free` were about a sixth of the per-file-stream anchor's CPU (`perf`).
//
// Here every stream pushes its commands onto one FIFO queue that the connection drains. A stream
// may have at most `STREAM_CAPACITY` commands waiting (upstream's `channel(10)` admitted 10 plus
// one per sending handle, so a stream writing with its read half idle had 11 waiting), each half of a split stream parks on its own waker (see
// upstream's `read_half_does_not_steal_the_write_half_wakeup`), and a dropped stream pushes a
// last `None`, as a closed channel ended its receiver. Closing the queue (the connection closing,
// failing or being dropped) wakes every parked stream, whose next send then fails, as a closed
// channel's did.

use super::StreamCommand;
use crate::StreamId;
use nohash_hasher::IntMap;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// Commands one stream may have waiting in the queue: as many as upstream let a stream's
/// writing half queue (10 in the channel's buffer, one in the handle's own slot).
pub(crate) const STREAM_CAPACITY: usize = 11;

/// Which half of a stream waits for room: its writes and close, or its reads' window updates.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Half {
    Write = 0,
    Read = 1,
}

/// A stream's command, or `None` once the stream has been dropped (its last entry).
pub(crate) type Command = (StreamId, Option<StreamCommand>);

/// The queue is closed: the connection no longer takes commands.
#[derive(Debug)]
pub(crate) struct Closed;

#[derive(Default)]
struct Slot {
    queued: usize,
    parked: [Option<Waker>; 2],
}

impl Slot {
    fn wake(&mut self) {
        for w in self.parked.iter_mut().filter_map(Option::take) {
            w.wake();
        }
    }
}

#[derive(Default)]
struct Inner {
    commands: VecDeque<Command>,
    slots: IntMap<StreamId, Slot>,
    connection: Option<Waker>,
    closed: bool,
}

/// The connection's end of the queue.
pub(crate) struct Receiver(Arc<Mutex<Inner>>);

/// A stream's end of the queue.
pub(crate) struct Sender {
    id: StreamId,
    queue: Arc<Mutex<Inner>>,
}

impl Receiver {
    pub(crate) fn new() -> Self {
        Receiver(Arc::default())
    }

    /// The end for a new stream `id`.
    pub(crate) fn sender(&self, id: StreamId) -> Sender {
        Sender {
            id,
            queue: self.0.clone(),
        }
    }

    /// The next command, in the order the streams queued them.
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Command> {
        let mut inner = self.0.lock();
        match Self::take(&mut inner) {
            Some(c) => Poll::Ready(c),
            None => {
                match &mut inner.connection {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    w => *w = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }

    /// The next command if one is queued (draining a closed queue).
    pub(crate) fn try_next(&mut self) -> Option<Command> {
        Self::take(&mut self.0.lock())
    }

    fn take(inner: &mut Inner) -> Option<Command> {
        let (id, command) = inner.commands.pop_front()?;
        match command {
            Some(_) => {
                if let Some(slot) = inner.slots.get_mut(&id) {
                    slot.queued -= 1;
                    slot.wake();
                }
            }
            None => {
                inner.slots.remove(&id);
            }
        }
        Some((id, command))
    }

    /// Takes no more commands (those queued stay to be drained) and wakes every parked stream.
    pub(crate) fn close(&mut self) {
        let mut inner = self.0.lock();
        inner.closed = true;
        for slot in inner.slots.values_mut() {
            slot.wake();
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.close();
    }
}

impl Sender {
    pub(crate) fn is_closed(&self) -> bool {
        self.queue.lock().closed
    }

    /// Ready when this stream may queue another command; `half` parks on its own waker.
    pub(crate) fn poll_ready(&self, half: Half, cx: &mut Context<'_>) -> Poll<Result<(), Closed>> {
        let mut inner = self.queue.lock();
        if inner.closed {
            return Poll::Ready(Err(Closed));
        }
        let slot = inner.slots.entry(self.id).or_default();
        if slot.queued < STREAM_CAPACITY {
            return Poll::Ready(Ok(()));
        }
        slot.parked[half as usize] = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Queues a command (after [`Sender::poll_ready`]).
    pub(crate) fn send(&self, command: StreamCommand) -> Result<(), Closed> {
        let waker = {
            let mut inner = self.queue.lock();
            if inner.closed {
                return Err(Closed);
            }
            inner.slots.entry(self.id).or_default().queued += 1;
            inner.commands.push_back((self.id, Some(command)));
            inner.connection.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let waker = {
            let mut inner = self.queue.lock();
            if inner.closed {
                return;
            }
            inner.commands.push_back((self.id, None));
            inner.connection.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::task::{waker, ArcWake};
    use std::sync::atomic::{AtomicBool, Ordering};

    #[derive(Default)]
    struct Flag(AtomicBool);

    impl ArcWake for Flag {
        fn wake_by_ref(arc_self: &Arc<Self>) {
            arc_self.0.store(true, Ordering::SeqCst);
        }
    }

    fn close_command() -> StreamCommand {
        StreamCommand::CloseStream { ack: false }
    }

    /// Commands leave in the order queued, each stream's last entry is its drop, and a stream
    /// parked on a full share is woken (and refused) when the queue closes.
    #[test]
    fn order_drop_marker_and_close_wakes_parked_streams() {
        let mut receiver = Receiver::new();
        let (a, b) = (StreamId::new(1), StreamId::new(3));
        let (sa, sb) = (receiver.sender(a), receiver.sender(b));
        sa.send(close_command()).unwrap();
        sb.send(close_command()).unwrap();
        drop(sa);
        let order: Vec<_> = std::iter::from_fn(|| receiver.try_next())
            .map(|(id, c)| (id, c.is_some()))
            .collect();
        assert_eq!(order, [(a, true), (b, true), (a, false)]);

        for _ in 0..STREAM_CAPACITY {
            sb.send(close_command()).unwrap();
        }
        let flag = Arc::new(Flag::default());
        let w = waker(flag.clone());
        let mut cx = Context::from_waker(&w);
        assert!(sb.poll_ready(Half::Write, &mut cx).is_pending());
        receiver.close();
        assert!(flag.0.load(Ordering::SeqCst), "a parked stream is woken on close");
        assert!(matches!(sb.poll_ready(Half::Write, &mut cx), Poll::Ready(Err(Closed))));
        assert!(sb.send(close_command()).is_err());
    }
}
