//! The network side's handle on a run's writers: batches go to the writers of their folders,
//! written ones come back to be freed where they were allocated.

use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, OwnedSemaphorePermit};

use super::{WriteBatch, WriteOp};

/// Data bytes of written ops the bin holds at most; past it the writer frees them itself.
pub(super) const RECYCLE_BYTES: usize = 1 << 20;

/// Batches the writer takes off its queue at once, at most. Taken one at a time, every batch
/// written freed one place in the queue and woke the network task once per small file (an
/// `eventfd` write each); taken in groups, the places come back a group at a time, with far
/// fewer `write` and `epoll_wait` calls at the receiver (docs/decisions/0010-writer-batches.md).
pub(super) const INTAKE_GROUP: usize = 64;

/// Receive-budget room the writer has written out but not yet handed back: given back in steps
/// of [`ROOM_STEP`] bytes, and all of it before the writer waits for more batches (so a
/// network task waiting for room always gets it), rather than one wake of the network task
/// per small file.
#[derive(Debug, Default)]
pub(super) struct HeldRoom(Option<OwnedSemaphorePermit>);

/// Bytes of written room held back at most (the receive budget is 4 MiB by default).
pub(super) const ROOM_STEP: usize = 256 << 10;

impl HeldRoom {
    /// Holds a written batch's room; gives all held room back once it reaches the step.
    pub(super) fn hold(&mut self, permit: Option<OwnedSemaphorePermit>) {
        let Some(permit) = permit else { return };
        match &mut self.0 {
            Some(held) => held.merge(permit),
            None => self.0 = Some(permit),
        }
        if self.0.as_ref().map_or(0, OwnedSemaphorePermit::num_permits) >= ROOM_STEP {
            self.release();
        }
    }

    /// Gives every held byte of room back.
    pub(super) fn release(&mut self) {
        self.0 = None;
    }
}

/// Written batches' ops, handed back to be freed by the network side that allocated them:
/// freed on the writer thread, every one of them took the allocating thread's malloc arena
/// lock (docs/decisions/0010-writer-batches.md). The bin holds at most [`RECYCLE_BYTES`] of
/// data, so it adds no more than that to the write budget's memory.
#[derive(Debug, Default)]
pub(super) struct Recycle {
    bin: Mutex<(Vec<Vec<WriteOp>>, usize)>,
}

impl Recycle {
    /// Takes `ops` (holding `bytes` of data) for the network side to free; gives them back
    /// when the bin is full.
    pub(super) fn put(&self, ops: Vec<WriteOp>, bytes: usize) -> Option<Vec<WriteOp>> {
        let mut bin = self.bin.lock().expect("recycle bin");
        if bin.1 + bytes > RECYCLE_BYTES {
            return Some(ops);
        }
        bin.1 += bytes;
        bin.0.push(ops);
        None
    }

    /// Frees what the writer handed back, on the calling thread.
    pub(super) fn empty(&self) {
        let taken = std::mem::take(&mut *self.bin.lock().expect("recycle bin"));
        drop(taken);
    }
}

/// The network side's handle on a run's writers: sends each batch's ops to the writers of
/// their folders, and frees the ops the writers are done with on the way ([`Recycle`]).
#[derive(Debug, Clone)]
pub struct BatchSender {
    txs: Vec<mpsc::Sender<WriteBatch>>,
    recycle: Arc<Recycle>,
}

impl BatchSender {
    pub(super) fn new(txs: Vec<mpsc::Sender<WriteBatch>>, recycle: Arc<Recycle>) -> Self {
        assert!(!txs.is_empty(), "a run has at least one writer");
        Self { txs, recycle }
    }

    /// Sends `batch` (waiting while a writer's queue is full); an error once a writer is
    /// gone. With several writers, each gets the batch's ops for its folders, in order, with
    /// their share of the batch's room.
    pub async fn send(&self, batch: WriteBatch) -> Result<(), mpsc::error::SendError<WriteBatch>> {
        self.recycle.empty();
        let n = self.txs.len();
        // The usual batch (one small file, or one file's next bytes) goes to one writer whole.
        let first = batch
            .ops
            .iter()
            .find_map(|op| op.writer_index(n))
            .unwrap_or(0);
        if n == 1
            || batch
                .ops
                .iter()
                .all(|op| op.writer_index(n).is_none_or(|w| w == first))
        {
            return self.txs[first].send(batch).await;
        }
        let mut parts: Vec<(Vec<WriteOp>, usize)> = (0..n).map(|_| (Vec::new(), 0)).collect();
        let mut last = first;
        for op in batch.ops {
            // A signal goes with the op before it (the file it acknowledges).
            let w = op.writer_index(n).unwrap_or(last);
            parts[w].1 += op.data_len();
            parts[w].0.push(op);
            last = w;
        }
        let mut permit = batch.permit;
        let final_part = parts.iter().rposition(|(ops, _)| !ops.is_empty());
        for (w, (ops, bytes)) in parts.into_iter().enumerate() {
            if ops.is_empty() {
                continue;
            }
            let share = match Some(w) == final_part {
                true => permit.take(),
                false => permit.as_mut().and_then(|p| {
                    let n = bytes.min(p.num_permits().saturating_sub(1));
                    p.split(n)
                }),
            };
            self.txs[w].send(WriteBatch { ops, permit: share }).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Room comes back in steps of `ROOM_STEP` and whole on `release`, never lost.
    #[test]
    fn held_room_comes_back_in_steps_and_on_release() {
        let budget = Arc::new(tokio::sync::Semaphore::new(4 * ROOM_STEP));
        let take = |n: usize| Some(budget.clone().try_acquire_many_owned(n as u32).unwrap());
        let mut room = HeldRoom::default();
        room.hold(take(ROOM_STEP / 2));
        room.hold(None);
        assert_eq!(budget.available_permits(), 4 * ROOM_STEP - ROOM_STEP / 2);
        room.hold(take(ROOM_STEP / 2));
        assert_eq!(
            budget.available_permits(),
            4 * ROOM_STEP,
            "a full step goes back"
        );
        room.hold(take(100));
        room.release();
        assert_eq!(budget.available_permits(), 4 * ROOM_STEP);
    }

    /// Written ops go back to the network side to be freed, up to the bin's bound; past it the
    /// writer keeps (and frees) them itself.
    #[test]
    fn the_recycle_bin_holds_at_most_its_bound() {
        let bin = Recycle::default();
        let data = |n: usize| {
            vec![WriteOp::Data {
                id: 1,
                bytes: bytes::Bytes::from(vec![0u8; n]),
            }]
        };
        assert!(bin
            .put(data(RECYCLE_BYTES / 2), RECYCLE_BYTES / 2)
            .is_none());
        assert!(bin
            .put(data(RECYCLE_BYTES / 2), RECYCLE_BYTES / 2)
            .is_none());
        let back = bin.put(data(1), 1).expect("the bin is full");
        assert_eq!(back[0].data_len(), 1);
        bin.empty();
        assert!(bin.put(data(1), 1).is_none(), "emptied, it takes ops again");
    }
}
