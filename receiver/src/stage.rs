//! The receive side's one records → write-ops stage, fed by every transport adapter: decode
//! (with the stream kind's rules, `shoal_proto`'s `StreamDecoder`), claim each file against the
//! run's hello, count it for the connection's end marker, and batch the ops for the writer
//! under the receive budget. Adapters only move bytes into the buffer it decodes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, BytesMut};
use shoal_pipeline::writer::{file_id, BatchSender, WriteBatch, WriteOp};
use shoal_proto::codec::{self, BlockError, EndMarker, Record, StreamDecoder, StreamError};
use tokio::sync::{mpsc, Semaphore};

use crate::claims::Claims;
use crate::config::ReceiverConfig;
use crate::hub::Run;

/// Why a stream's intake stopped early.
pub(crate) enum PumpError {
    /// A writer stopped; the writers' report holds the cause.
    WriterGone,
    Other(anyhow::Error),
}

impl From<anyhow::Error> for PumpError {
    fn from(e: anyhow::Error) -> Self {
        PumpError::Other(e)
    }
}

impl From<codec::DecodeError> for PumpError {
    fn from(e: codec::DecodeError) -> Self {
        PumpError::Other(e.into())
    }
}

impl From<BlockError> for PumpError {
    fn from(e: BlockError) -> Self {
        PumpError::Other(e.into())
    }
}

impl From<StreamError> for PumpError {
    fn from(e: StreamError) -> Self {
        PumpError::Other(e.into())
    }
}

/// What one pass over the received bytes made.
pub(crate) struct Batch {
    pub ops: Vec<WriteOp>,
    /// Content bytes among the ops, held against the receive budget.
    pub bytes: usize,
    /// The end marker, if it arrived: decoding stops after it.
    pub end: Option<EndMarker>,
    /// Why decoding stopped at a bad record. The ops before it are still to be written: a
    /// file that arrived whole before the bad record is kept, as it would be had the two come
    /// in different reads.
    pub failed: Option<PumpError>,
}

impl Batch {
    /// The failure, if decoding stopped at one (after the ops are handed on).
    pub(crate) fn result(&mut self) -> Result<(), PumpError> {
        self.failed.take().map_or(Ok(()), Err)
    }
}

/// One stream's records → write ops.
pub(crate) struct Intake {
    decoder: StreamDecoder,
    /// Writer id of the file being received.
    id: u64,
    /// Inside a block: where its next content byte goes in the file.
    block_at: Option<u64>,
    /// The stop-and-wait arm: the writer signals each file after closing it.
    signal: Option<mpsc::UnboundedSender<()>>,
}

impl Intake {
    pub(crate) fn new(decoder: StreamDecoder, signal: Option<mpsc::UnboundedSender<()>>) -> Self {
        Self {
            decoder,
            id: 0,
            block_at: None,
            signal,
        }
    }

    /// Content bytes still due for the file being received (0 between records).
    pub(crate) fn pending_data(&self) -> u64 {
        self.decoder.pending_data()
    }

    /// At end of stream, with what is still undecoded: an error unless the stream may end here.
    pub(crate) fn finish(&self, unconsumed: &[u8]) -> Result<(), StreamError> {
        self.decoder.finish(unconsumed)
    }

    /// Decodes every whole record `buf` holds into write ops (stopping after an end marker, or
    /// at a bad record: `Batch::failed`), claiming each file against the run's ceilings and
    /// names (`Claims`) and counting it in `mine`, the connection's own tally for its end
    /// marker. Content is split off `buf`, not copied.
    pub(crate) fn take(&mut self, run: &Run, buf: &mut BytesMut, mine: &mut Claims) -> Batch {
        let mut batch = Batch {
            ops: Vec::new(),
            bytes: 0,
            end: None,
            failed: None,
        };
        if let Err(e) = self.decode_into(run, buf, mine, &mut batch) {
            batch.failed = Some(e);
        }
        if !batch.ops.is_empty() || batch.end.is_some() {
            run.progressed();
        }
        batch
    }

    fn decode_into(
        &mut self,
        run: &Run,
        buf: &mut BytesMut,
        mine: &mut Claims,
        batch: &mut Batch,
    ) -> Result<(), PumpError> {
        while let Some((record, n)) = self.decoder.decode(buf)? {
            match record {
                Record::File(h) => {
                    run.claims.lock().expect("claims").claim(&h.path, h.size)?;
                    mine.files += 1;
                    mine.bytes += h.size;
                    buf.advance(n);
                    self.id = file_id(run.next_file_id.fetch_add(1, Ordering::Relaxed), &h.path);
                    batch.ops.push(WriteOp::Open {
                        id: self.id,
                        path: h.path,
                        size: h.size,
                        sent_at_us: h.sent_at_us,
                    });
                }
                Record::Block(b) => {
                    // Checked against the run's other blocks of the file (whichever connection
                    // brought them) before any of its bytes are written.
                    let reserved = run.blocks.lock().expect("blocks").reserve(
                        &b.path,
                        b.size,
                        b.offset,
                        b.len,
                        || file_id(run.next_file_id.fetch_add(1, Ordering::Relaxed), &b.path),
                    )?;
                    if reserved.first {
                        run.claims.lock().expect("claims").claim(&b.path, b.size)?;
                    }
                    mine.files += 1;
                    mine.bytes += b.len;
                    buf.advance(n);
                    self.id = reserved.id;
                    self.block_at = Some(b.offset);
                    batch.ops.push(WriteOp::Block {
                        id: self.id,
                        path: b.path,
                        size: b.size,
                        sent_at_us: b.sent_at_us,
                    });
                }
                Record::Data(_) => {
                    batch.bytes += n;
                    let bytes = buf.split_to(n).freeze();
                    batch.ops.push(match &mut self.block_at {
                        Some(at) => {
                            let offset = *at;
                            *at += n as u64;
                            WriteOp::DataAt {
                                id: self.id,
                                offset,
                                bytes,
                            }
                        }
                        None => WriteOp::Data { id: self.id, bytes },
                    });
                }
                // A block's file is closed by the writer with its last byte, whichever
                // block that is.
                Record::FileEnd if self.block_at.take().is_some() => {}
                Record::FileEnd => {
                    batch.ops.push(WriteOp::Close { id: self.id });
                    if let Some(s) = &self.signal {
                        batch.ops.push(WriteOp::Signal(s.clone()));
                    }
                }
                Record::Dir(path) => {
                    run.claims.lock().expect("claims").claim_folder(&path)?;
                    buf.advance(n);
                    batch.ops.push(WriteOp::Dir(path));
                }
                Record::End(end) => {
                    buf.advance(n);
                    batch.end = Some(end);
                    break;
                }
                // The decoder refuses a hello after the first.
                Record::Hello(_) => return Err(StreamError::SecondHello.into()),
            }
        }
        Ok(())
    }
}

/// After an end marker: anything more on the stream is refused.
pub(crate) fn nothing_after_end(buf: &[u8]) -> Result<(), PumpError> {
    if buf.is_empty() {
        Ok(())
    } else {
        Err(codec::DecodeError::AfterEnd.into())
    }
}

/// Hands a batch's ops to the writer once the receive budget has room for its bytes.
/// The time it waits (for room, then for the writers' queue) is added to `wait`, in µs.
pub(crate) async fn send_batch(
    config: &ReceiverConfig,
    budget: &Arc<Semaphore>,
    wait: &AtomicU64,
    writer: &BatchSender,
    ops: Vec<WriteOp>,
    batch_bytes: usize,
) -> Result<(), PumpError> {
    let room = batch_bytes.clamp(1, config.write_budget) as u32;
    let t0 = Instant::now();
    let permit = budget
        .clone()
        .acquire_many_owned(room)
        .await
        .expect("budget never closed");
    let batch = WriteBatch {
        ops,
        permit: Some(permit),
    };
    let sent = writer.send(batch).await.map_err(|_| PumpError::WriterGone);
    wait.fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
    sent
}
