//! Bundled records on one stream (TLS/TCP, plain TCP, or one QUIC stream): decode, hand file
//! ops to the writer, report completion. With `acks` (the `tcp-wait` control arm) the receiver
//! acknowledges files as they become ready.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::anyhow;
use bytes::{Buf, BytesMut};
use shoal_common::codec::{self, Record, RecordDecoder};
use shoal_common::pipeline::writer::{WriteBatch, WriteOp};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, Semaphore};

use crate::claims::Claims;
use crate::hub::{ConnEnd, Membership};
use crate::run::TransportFacts;
use crate::{read_some, ReceiverConfig};

/// Why the pump stopped early.
pub(crate) enum PumpError {
    /// The writer thread stopped; its report holds the cause.
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

/// Receives one connection's records after its hello, feeding the run's writer. With `acks`
/// (the stop-and-wait arm) each file is acknowledged once written and closed. Returns what the
/// connection saw and the write half, for the reply.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn receive<R, W>(
    config: &ReceiverConfig,
    member: &Membership,
    rd: &mut R,
    wr: W,
    buf: BytesMut,
    decoder: RecordDecoder,
    acks: bool,
    facts: TransportFacts,
) -> (ConnEnd, W)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    // The stop-and-wait arm: the writer signals each file after closing it; this task turns
    // the signals into acknowledgements while the pump keeps reading. The write half comes
    // back when the signals end.
    let (signal, acker) = if acks {
        let (tx, mut rx) = mpsc::unbounded_channel::<()>();
        let mut w = wr;
        let task = tokio::spawn(async move {
            let mut acked = 0u64;
            while rx.recv().await.is_some() {
                acked += 1;
                let mut out = BytesMut::new();
                codec::encode_ack(acked, &mut out);
                if w.write_all(&out).await.is_err() || w.flush().await.is_err() {
                    break;
                }
            }
            w
        });
        (Some(tx), Either::Task(task))
    } else {
        (None, Either::Ready(wr))
    };
    let pumped = pump(config, member, rd, buf, decoder, signal).await;
    let wr = match acker {
        Either::Ready(w) => w,
        // The pump dropped its signal sender; the last one goes with the writer's last op.
        Either::Task(task) => task.await.expect("acknowledgement task panicked"),
    };
    let (errors, stopped) = match pumped {
        Ok(()) => (Vec::new(), false),
        Err(PumpError::WriterGone) => (Vec::new(), true),
        Err(PumpError::Other(e)) => (vec![format!("{e:#}")], false),
    };
    let end = ConnEnd {
        errors,
        stopped,
        peak_streams: 0,
        facts,
    };
    (end, wr)
}

enum Either<T, W> {
    Task(tokio::task::JoinHandle<W>),
    Ready(T),
}

/// Decodes records as they arrive and feeds the writer in batches (one per read), holding
/// receive-budget room for the bytes in flight to the disk.
async fn pump<R: AsyncRead + Unpin>(
    config: &ReceiverConfig,
    member: &Membership,
    rd: &mut R,
    mut buf: BytesMut,
    mut decoder: RecordDecoder,
    signal: Option<mpsc::UnboundedSender<()>>,
) -> Result<(), PumpError> {
    let run = &member.run;
    let hello = &run.hello;
    // This connection's own tally, for its end marker; the run's tally is in `run.claims`.
    let mut mine = Claims::default();
    let mut id = 0;
    loop {
        let mut ops = Vec::new();
        let mut batch_bytes = 0usize;
        let mut ended = false;
        while let Some((record, n)) = decoder.decode(&buf)? {
            match record {
                Record::File(h) => {
                    run.claims
                        .lock()
                        .expect("claims")
                        .claim(hello, &h.path.to_string(), h.size)?;
                    mine.files += 1;
                    mine.bytes += h.size;
                    buf.advance(n);
                    id = run.next_file_id.fetch_add(1, Ordering::Relaxed);
                    ops.push(WriteOp::Open {
                        id,
                        path: h.path,
                        size: h.size,
                        sent_at_us: h.sent_at_us,
                    });
                }
                Record::Data(_) => {
                    let data = buf.split_to(n).freeze();
                    batch_bytes += n;
                    ops.push(WriteOp::Data { id, bytes: data });
                }
                Record::FileEnd => {
                    ops.push(WriteOp::Close { id });
                    if let Some(s) = &signal {
                        ops.push(WriteOp::Signal(s.clone()));
                    }
                }
                Record::Dir(path) => {
                    buf.advance(n);
                    ops.push(WriteOp::Dir(path));
                }
                Record::End(end) => {
                    buf.advance(n);
                    mine.check_own_end(end)?;
                    ended = true;
                    break;
                }
                Record::Hello(_) => return Err(anyhow!("a second hello in one stream").into()),
            }
        }
        if !ops.is_empty() {
            send_batch(config, &run.budget, &member.batches, ops, batch_bytes).await?;
        }
        if ended {
            if !buf.is_empty() {
                return Err(codec::DecodeError::AfterEnd.into());
            }
            return Ok(());
        }
        let read = tokio::select! {
            r = read_some(rd, &mut buf, config.idle_timeout) => r?,
            _ = run.cancel.cancelled() => return Err(if run.writer_failed() {
                // The writer's report names the cause; stop reading now rather than wait for
                // data the sender holds back (tcp-wait waits for an acknowledgement).
                PumpError::WriterGone
            } else {
                anyhow!("stopped: the run failed on another connection").into()
            }),
        };
        if read == 0 {
            decoder.finish()?;
            return Err(anyhow!("stream closed early").into());
        }
    }
}

/// Hands a batch to the writer once the receive budget has room for its bytes.
pub(crate) async fn send_batch(
    config: &ReceiverConfig,
    budget: &Arc<Semaphore>,
    writer: &mpsc::Sender<WriteBatch>,
    ops: Vec<WriteOp>,
    batch_bytes: usize,
) -> Result<(), PumpError> {
    let room = batch_bytes.clamp(1, config.write_budget) as u32;
    let permit = budget
        .clone()
        .acquire_many_owned(room)
        .await
        .expect("budget never closed");
    let batch = WriteBatch {
        ops,
        permit: Some(permit),
    };
    writer.send(batch).await.map_err(|_| PumpError::WriterGone)
}
