//! Bundled records on one stream (TLS/TCP, plain TCP, or one QUIC stream): decode, hand file
//! ops to the writer, report completion. With `acks` (the `tcp-wait` control arm) the receiver
//! acknowledges files as they become ready.

use std::sync::Arc;
use std::time::Instant;

use anyhow::anyhow;
use bytes::{Buf, BytesMut};
use shoal_common::codec::{self, Completion, Hello, Record, RecordDecoder};
use shoal_common::metrics;
use shoal_common::pipeline::writer::{WriteBatch, WriteOp, WriterThread};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, Semaphore};

use crate::run::{self, TransportFacts};
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

/// Receives one run's records after its hello and returns the completion it reported to the
/// sender (a non-empty `errors` list means the run failed and the sender was told why).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn receive<R, W>(
    config: &ReceiverConfig,
    hello: &Hello,
    rd: &mut R,
    wr: W,
    buf: BytesMut,
    decoder: RecordDecoder,
    first_byte: Instant,
    acks: bool,
    facts: TransportFacts,
) -> Completion
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    metrics::reset_peak_rss();
    let (ready_tx, ready_rx) = if acks {
        let (tx, rx) = mpsc::unbounded_channel();
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    let mut wr = Some(wr);
    let writer = match WriterThread::spawn(config.dest.clone(), config.fsync, ready_tx) {
        Ok(w) => w,
        Err(e) => {
            let mut c = Completion {
                errors: vec![format!("{e:#}")],
                ..Default::default()
            };
            run::reply(wr.as_mut().expect("writer half"), &mut c).await;
            return c;
        }
    };
    // The stop-and-wait arm: forward "files ready" counts as acknowledgements while the pump
    // keeps reading; the write half comes back when the writer is done.
    let acker = ready_rx.map(|mut rx| {
        let mut w = wr.take().expect("writer half");
        tokio::spawn(async move {
            let mut acked = 0;
            while let Some(n) = rx.recv().await {
                if n > acked {
                    let mut out = BytesMut::new();
                    codec::encode_ack(n, &mut out);
                    if w.write_all(&out).await.is_err() || w.flush().await.is_err() {
                        break;
                    }
                    acked = n;
                }
            }
            w
        })
    });
    let pumped = pump(config, hello, rd, buf, decoder, &writer).await;
    let report = writer.finish().await;
    let mut wr = match acker {
        Some(task) => match task.await {
            Ok(w) => w,
            Err(_) => {
                return Completion {
                    errors: vec!["acknowledgement task failed".into()],
                    ..Default::default()
                }
            }
        },
        None => wr.take().expect("writer half"),
    };
    let mut errors = Vec::new();
    if let Err(PumpError::Other(e)) = pumped {
        errors.push(format!("{e:#}"));
    }
    let mut completion = run::completion(hello, &report, errors, first_byte, &facts);
    run::reply(&mut wr, &mut completion).await;
    completion
}

/// Decodes records as they arrive and feeds the writer in batches (one per read), holding
/// receive-budget room for the bytes in flight to the disk.
async fn pump<R: AsyncRead + Unpin>(
    config: &ReceiverConfig,
    hello: &Hello,
    rd: &mut R,
    mut buf: BytesMut,
    mut decoder: RecordDecoder,
    writer: &WriterThread,
) -> Result<(), PumpError> {
    let budget = Arc::new(Semaphore::new(config.write_budget));
    let mut claims = Claims::default();
    loop {
        let mut ops = Vec::new();
        let mut batch_bytes = 0usize;
        let mut ended = false;
        while let Some((record, n)) = decoder.decode(&buf)? {
            match record {
                Record::File(h) => {
                    claims.claim(hello, &h.path.to_string(), h.size)?;
                    buf.advance(n);
                    ops.push(WriteOp::Open {
                        id: 0,
                        path: h.path,
                        size: h.size,
                        sent_at_us: h.sent_at_us,
                    });
                }
                Record::Data(_) => {
                    let data = buf.split_to(n).freeze();
                    batch_bytes += n;
                    ops.push(WriteOp::Data { id: 0, bytes: data });
                }
                Record::FileEnd => ops.push(WriteOp::Close { id: 0 }),
                Record::Dir(path) => {
                    buf.advance(n);
                    ops.push(WriteOp::Dir(path));
                }
                Record::End(end) => {
                    buf.advance(n);
                    claims.check_end(hello, end)?;
                    ended = true;
                    break;
                }
                Record::Hello(_) => return Err(anyhow!("a second hello in one stream").into()),
            }
        }
        if !ops.is_empty() {
            send_batch(config, &budget, &writer.batches, ops, batch_bytes).await?;
        }
        if ended {
            if !buf.is_empty() {
                return Err(codec::DecodeError::AfterEnd.into());
            }
            return Ok(());
        }
        if read_some(rd, &mut buf, config.idle_timeout).await? == 0 {
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

/// Files and bytes announced by records so far, checked against the hello.
#[derive(Debug, Default)]
pub(crate) struct Claims {
    pub files: u64,
    pub bytes: u64,
}

impl Claims {
    pub(crate) fn claim(&mut self, hello: &Hello, path: &str, size: u64) -> anyhow::Result<()> {
        self.files += 1;
        if self.files > hello.file_count {
            return Err(anyhow!(
                "more files than the {} the hello announced",
                hello.file_count
            ));
        }
        let remaining = hello.total_bytes - self.bytes;
        if size > remaining {
            return Err(anyhow!(
                "file \"{path}\" claims {size} bytes, but only {remaining} of the announced total remain"
            ));
        }
        self.bytes += size;
        Ok(())
    }

    pub(crate) fn check_end(&self, hello: &Hello, end: codec::EndMarker) -> anyhow::Result<()> {
        if end.files != self.files || end.bytes != self.bytes {
            return Err(anyhow!(
                "end marker counts {} files / {} bytes but {} / {} arrived",
                end.files,
                end.bytes,
                self.files,
                self.bytes
            ));
        }
        if self.files != hello.file_count || self.bytes != hello.total_bytes {
            return Err(anyhow!(
                "stream ended after {} files / {} bytes; the hello announced {} / {}",
                self.files,
                self.bytes,
                hello.file_count,
                hello.total_bytes
            ));
        }
        Ok(())
    }
}
