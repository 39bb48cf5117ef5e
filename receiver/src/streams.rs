//! One stream per file (yamux over TCP, or QUIC unidirectional streams). A control stream
//! carries the hello, empty folders, the end marker and the replies; each file stream carries
//! exactly one file record. Streams are handled concurrently, each with its own writer id; the
//! run completes when the end marker has arrived and as many file streams as it counts have
//! been written.

use std::future::poll_fn;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Instant;

use anyhow::anyhow;
use bytes::{Buf, BytesMut};
use shoal_common::codec::{Completion, Hello, Record, RecordDecoder};
use shoal_common::metrics;
use shoal_common::pipeline::writer::{WriteOp, WriterThread};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::compat::{Compat, FuturesAsyncReadCompatExt, TokioAsyncReadCompatExt};

use crate::bundle::{send_batch, Claims, PumpError};
use crate::run::{self, TransportFacts};
use crate::{read_sized, read_some, ReceiverConfig};

/// A file stream as it arrives.
pub(crate) enum InboundFile {
    Yamux(Compat<yamux::Stream>),
    Quic(quinn::RecvStream),
}

/// What the file-stream handlers share.
struct Shared {
    config: ReceiverConfig,
    hello: Hello,
    budget: Arc<Semaphore>,
    writer: mpsc::Sender<shoal_common::pipeline::writer::WriteBatch>,
    claims: Mutex<Claims>,
    next_id: AtomicU64,
    open_now: AtomicU64,
    peak_open: AtomicU64,
}

/// Receives a run whose files arrive on `inbound`; the control stream is `control_rd` /
/// `control_wr`, already past the hello (`buf` holds what was read after it).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn receive<R, W>(
    config: &ReceiverConfig,
    hello: &Hello,
    control_rd: &mut R,
    control_wr: &mut W,
    mut buf: BytesMut,
    mut decoder: RecordDecoder,
    mut inbound: mpsc::UnboundedReceiver<InboundFile>,
    first_byte: Instant,
    facts: TransportFacts,
) -> Completion
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    metrics::reset_peak_rss();
    let writer = match WriterThread::spawn(config.dest.clone(), config.fsync, None) {
        Ok(w) => w,
        Err(e) => {
            let mut c = Completion {
                errors: vec![format!("{e:#}")],
                ..Default::default()
            };
            run::reply(control_wr, &mut c).await;
            return c;
        }
    };
    let shared = Arc::new(Shared {
        config: config.clone(),
        hello: hello.clone(),
        budget: Arc::new(Semaphore::new(config.write_budget)),
        writer: writer.batches.clone(),
        claims: Mutex::new(Claims::default()),
        next_id: AtomicU64::new(1),
        open_now: AtomicU64::new(0),
        peak_open: AtomicU64::new(0),
    });
    let mut handlers: JoinSet<Result<(), PumpError>> = JoinSet::new();
    let mut done = 0u64;
    let mut end = None;
    let mut failure: Option<String> = None;
    let mut accepting = true;
    let idle = config.idle_timeout;
    let mut deadline = tokio::time::Instant::now() + idle;
    'run: loop {
        // Records on the control stream: empty folders, then the end marker.
        loop {
            let decoded = decoder.decode(&buf);
            match decoded {
                Ok(None) => break,
                Ok(Some((Record::Dir(path), n))) => {
                    buf.advance(n);
                    if send_batch(
                        config,
                        &shared.budget,
                        &writer.batches,
                        vec![WriteOp::Dir(path)],
                        0,
                    )
                    .await
                    .is_err()
                    {
                        break 'run;
                    }
                }
                Ok(Some((Record::End(e), n))) => {
                    buf.advance(n);
                    end = Some(e);
                }
                Ok(Some(_)) => {
                    failure = Some("a file record on the control stream".into());
                    break 'run;
                }
                Err(e) => {
                    failure = Some(e.to_string());
                    break 'run;
                }
            }
        }
        if let Some(e) = end {
            if done >= e.files {
                if let Err(err) = shared.claims.lock().expect("claims").check_end(hello, e) {
                    failure = Some(format!("{err:#}"));
                }
                break;
            }
        }
        tokio::select! {
            file = inbound.recv(), if accepting => match file {
                Some(file) => {
                    handlers.spawn(handle_file(shared.clone(), file));
                }
                None => accepting = false,
            },
            Some(joined) = handlers.join_next() => match joined {
                Ok(Ok(())) => done += 1,
                Ok(Err(PumpError::WriterGone)) => break,
                Ok(Err(PumpError::Other(e))) => {
                    failure = Some(format!("{e:#}"));
                    break;
                }
                Err(e) => {
                    failure = Some(format!("file stream task failed: {e}"));
                    break;
                }
            },
            read = read_some(control_rd, &mut buf, idle), if end.is_none() => match read {
                Ok(0) => {
                    failure = Some(match decoder.finish() {
                        Err(e) => e.to_string(),
                        Ok(()) => "control stream closed early".into(),
                    });
                    break;
                }
                Ok(_) => {}
                Err(e) => {
                    failure = Some(format!("{e:#}"));
                    break;
                }
            },
            _ = tokio::time::sleep_until(deadline) => {
                failure = Some(format!(
                    "no progress for {} s ({done} file streams done)",
                    idle.as_secs()
                ));
                break;
            }
        }
        deadline = tokio::time::Instant::now() + idle;
        if !accepting && handlers.is_empty() && end.is_some() {
            if let Some(e) = end {
                if done < e.files {
                    failure = Some(format!(
                        "the connection ended after {done} of {} file streams",
                        e.files
                    ));
                    break;
                }
            }
        }
    }
    // Stop whatever is still in flight so every writer handle is released.
    handlers.abort_all();
    while handlers.join_next().await.is_some() {}
    let peak = shared.peak_open.load(Ordering::Relaxed);
    drop(shared);
    let report = writer.finish().await;
    let mut completion = run::completion(
        hello,
        &report,
        failure.into_iter().collect(),
        first_byte,
        &facts,
    );
    completion.peak_streams = peak;
    run::reply(control_wr, &mut completion).await;
    completion
}

async fn handle_file(shared: Arc<Shared>, file: InboundFile) -> Result<(), PumpError> {
    let open = shared.open_now.fetch_add(1, Ordering::Relaxed) + 1;
    shared.peak_open.fetch_max(open, Ordering::Relaxed);
    let result = match file {
        InboundFile::Yamux(mut s) => {
            // An empty write acknowledges the stream at once, so the sender's window of 256
            // unacknowledged yamux streams drains one round trip after each open rather than
            // after each file is written.
            let _ = s.write(&[]).await;
            let r = read_one_file(&shared, &mut s).await;
            if r.is_ok() {
                // Closing our side tells the sender this file is in.
                let _ = s.shutdown().await;
            }
            r
        }
        InboundFile::Quic(mut s) => {
            let r = read_one_file(&shared, &mut s).await;
            if r.is_err() {
                let _ = s.stop(1u32.into());
            }
            r
        }
    };
    shared.open_now.fetch_sub(1, Ordering::Relaxed);
    result
}

/// Reads exactly one file record from a stream and writes it.
async fn read_one_file<R: AsyncRead + Unpin>(shared: &Shared, rd: &mut R) -> Result<(), PumpError> {
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let mut decoder = RecordDecoder::records_only(shared.config.limits);
    let mut buf = BytesMut::new();
    let mut seen_file = false;
    loop {
        let mut ops = Vec::new();
        let mut batch_bytes = 0;
        while let Some((record, n)) = decoder.decode(&buf)? {
            match record {
                Record::File(h) => {
                    if seen_file {
                        return Err(anyhow!("a second file record on one file stream").into());
                    }
                    seen_file = true;
                    shared.claims.lock().expect("claims").claim(
                        &shared.hello,
                        &h.path.to_string(),
                        h.size,
                    )?;
                    buf.advance(n);
                    ops.push(WriteOp::Open {
                        id,
                        path: h.path,
                        size: h.size,
                        sent_at_us: h.sent_at_us,
                    });
                }
                Record::Data(_) => {
                    batch_bytes += n;
                    ops.push(WriteOp::Data {
                        id,
                        bytes: buf.split_to(n).freeze(),
                    });
                }
                Record::FileEnd => ops.push(WriteOp::Close { id }),
                _ => return Err(anyhow!("a file stream may carry only one file record").into()),
            }
        }
        if !ops.is_empty() {
            send_batch(
                &shared.config,
                &shared.budget,
                &shared.writer,
                ops,
                batch_bytes,
            )
            .await?;
        }
        // A header and a small file fit in 4 KiB + a bit; larger files read in 64 KiB steps.
        let want = (decoder.pending_data() as usize).clamp(4 << 10, 64 << 10) + 512;
        if read_sized(rd, &mut buf, want, shared.config.idle_timeout).await? == 0 {
            decoder.finish_file_stream()?;
            if !seen_file {
                return Err(anyhow!("an empty file stream").into());
            }
            return Ok(());
        }
    }
}

/// Runs a yamux server connection on its own task: the first inbound stream is the control
/// stream; every later one is a file stream.
pub(crate) fn spawn_yamux_server<S>(
    io: S,
    streams_allowed: usize,
) -> (
    oneshot::Receiver<Compat<yamux::Stream>>,
    mpsc::UnboundedReceiver<InboundFile>,
    JoinHandle<()>,
)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut conn = yamux::Connection::new(
        io.compat(),
        shoal_common::transport::yamux_config(streams_allowed),
        yamux::Mode::Server,
    );
    let (control_tx, control_rx) = oneshot::channel();
    let (files_tx, files_rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut control_tx = Some(control_tx);
        let _ = poll_fn(|cx| loop {
            match conn.poll_next_inbound(cx) {
                Poll::Ready(Some(Ok(stream))) => match control_tx.take() {
                    Some(tx) => {
                        let _ = tx.send(stream.compat());
                    }
                    None => {
                        let _ = files_tx.send(InboundFile::Yamux(stream.compat()));
                    }
                },
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        })
        .await;
    });
    (control_rx, files_rx, task)
}
