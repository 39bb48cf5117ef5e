//! Bundled records on one stream: decode, hand file ops to the writer, report completion.

use std::sync::Arc;
use std::time::Instant;

use anyhow::anyhow;
use bytes::{Buf, BytesMut};
use shoal_common::codec::{self, Completion, Hello, Record, RecordDecoder};
use shoal_common::metrics;
use shoal_common::pipeline::writer::{WriteBatch, WriteOp, WriterThread};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::Semaphore;

use crate::{peak_rss, read_some, send_error, ReceiverConfig};

/// Bytes asked of the socket per read.
pub(crate) const READ_SIZE: usize = 256 << 10;

/// Why the pump stopped early.
enum PumpError {
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
pub(crate) async fn receive<R, W>(
    config: &ReceiverConfig,
    hello: &Hello,
    rd: &mut R,
    wr: &mut W,
    buf: BytesMut,
    decoder: RecordDecoder,
    first_byte: Instant,
) -> Completion
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    metrics::reset_peak_rss();
    let writer = match WriterThread::spawn(config.dest.clone(), config.fsync, None) {
        Ok(w) => w,
        Err(e) => return fail(wr, vec![format!("{e:#}")], Completion::default()).await,
    };
    let pumped = pump(config, hello, rd, buf, decoder, &writer).await;
    let report = writer.finish().await;
    let mut errors = Vec::new();
    if let Some(e) = &report.error {
        errors.push(format!("{e:#}"));
    }
    match pumped {
        Ok(()) | Err(PumpError::WriterGone) => {}
        Err(PumpError::Other(e)) => errors.insert(0, format!("{e:#}")),
    }
    if !report.removed_partials.is_empty() {
        errors.push(format!(
            "removed {} partial file(s), e.g. \"{}\"",
            report.removed_partials.len(),
            report.removed_partials[0]
        ));
    }
    if errors.is_empty()
        && (report.files_ready != hello.file_count || report.bytes_written != hello.total_bytes)
    {
        errors.push(format!(
            "{} of {} files and {} of {} bytes ready",
            report.files_ready, hello.file_count, report.bytes_written, hello.total_bytes
        ));
    }
    let last = report.last_close.unwrap_or_else(Instant::now);
    let completion = Completion {
        files: report.files_ready,
        bytes: report.bytes_written,
        receiver_micros: last.saturating_duration_since(first_byte).as_micros() as u64,
        fsync_micros: report.fsync.map_or(0, |d| d.as_micros() as u64),
        peak_rss: peak_rss(),
        errors: Vec::new(),
    };
    if !errors.is_empty() {
        return fail(wr, errors, completion).await;
    }
    let mut out = BytesMut::new();
    codec::encode_completion(&completion, &mut out);
    if let Err(e) = async {
        wr.write_all(&out).await?;
        wr.shutdown().await
    }
    .await
    {
        let mut c = completion;
        c.errors
            .push(format!("cannot send the completion report: {e}"));
        return c;
    }
    completion
}

async fn fail<W: AsyncWrite + Unpin>(
    wr: &mut W,
    errors: Vec<String>,
    mut completion: Completion,
) -> Completion {
    send_error(wr, &errors.join("; ")).await;
    completion.errors = errors;
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
    let (mut files, mut bytes) = (0u64, 0u64);
    loop {
        let mut ops = Vec::new();
        let mut batch_bytes = 0usize;
        let mut ended = false;
        while let Some((record, n)) = decoder.decode(&buf)? {
            match record {
                Record::File(h) => {
                    files += 1;
                    if files > hello.file_count {
                        return Err(anyhow!(
                            "more files than the {} the hello announced",
                            hello.file_count
                        )
                        .into());
                    }
                    if h.size > hello.total_bytes - bytes {
                        return Err(anyhow!(
                            "file \"{}\" claims {} bytes, but only {} of the announced total remain",
                            h.path,
                            h.size,
                            hello.total_bytes - bytes
                        )
                        .into());
                    }
                    bytes += h.size;
                    buf.advance(n);
                    ops.push(WriteOp::Open {
                        id: 0,
                        path: h.path,
                        size: h.size,
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
                    if end.files != files || end.bytes != bytes {
                        return Err(anyhow!(
                            "end marker counts {} files / {} bytes but {files} / {bytes} arrived",
                            end.files,
                            end.bytes
                        )
                        .into());
                    }
                    if files != hello.file_count || bytes != hello.total_bytes {
                        return Err(anyhow!(
                            "stream ended after {files} files / {bytes} bytes; the hello announced {} / {}",
                            hello.file_count,
                            hello.total_bytes
                        )
                        .into());
                    }
                    ended = true;
                    break;
                }
                Record::Hello(_) => return Err(other("a second hello in one stream")),
            }
        }
        if !ops.is_empty() {
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
            if writer.batches.send(batch).await.is_err() {
                return Err(PumpError::WriterGone);
            }
        }
        if ended {
            if !buf.is_empty() {
                return Err(codec::DecodeError::AfterEnd.into());
            }
            return Ok(());
        }
        if read_some(rd, &mut buf, config.idle_timeout).await? == 0 {
            decoder.finish()?;
            return Err(other("stream closed early"));
        }
    }
}

fn other(msg: &str) -> PumpError {
    PumpError::Other(anyhow!("{msg}"))
}
