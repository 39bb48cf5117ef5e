//! One stream per file (yamux over TCP, or QUIC unidirectional streams). A control stream
//! carries the hello, empty folders, the end marker and the replies; each file stream carries
//! exactly one file record. Streams are handled concurrently, each with its own writer id; the
//! run completes when the end marker has arrived and as many file streams as it counts have
//! been written.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use anyhow::{anyhow, Context};
use bytes::{Buf, BytesMut};
use futures::stream::{FuturesUnordered, StreamExt};
use shoal_common::codec::{Record, RecordDecoder};
use shoal_common::pipeline::writer::{WriteBatch, WriteOp};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::compat::{Compat, FuturesAsyncReadCompatExt, TokioAsyncReadCompatExt};

use crate::bundle::{send_batch, PumpError};
use crate::claims::Claims;
use crate::hub::{ConnEnd, Membership, Run};
use crate::run::TransportFacts;
use crate::{read_sized, ReceiverConfig};

/// A file stream as it arrives.
pub(crate) enum InboundFile {
    Yamux(Compat<yamux::Stream>),
    /// With its place among the streams the connection handles at once: quinn returns a
    /// stream's credit to the peer as soon as its bytes are read, before the file is written,
    /// so without this bound the handlers of 200,000 empty files piled up (320 MB).
    Quic(quinn::RecvStream, tokio::sync::OwnedSemaphorePermit),
}

/// What the file-stream handlers of one connection share.
struct Shared {
    config: ReceiverConfig,
    run: Arc<Run>,
    writer: mpsc::Sender<WriteBatch>,
    /// This connection's own tally, for its end marker.
    mine: Mutex<Claims>,
    open_now: AtomicU64,
    peak_open: AtomicU64,
}

/// Receives one connection's files, arriving on `inbound`; the control stream is
/// `control_rd`, already past the hello (`buf` holds what was read after it).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn receive<R: AsyncRead + Unpin>(
    config: &ReceiverConfig,
    member: &Membership,
    control_rd: &mut R,
    mut buf: BytesMut,
    mut decoder: RecordDecoder,
    mut inbound: mpsc::UnboundedReceiver<InboundFile>,
    facts: TransportFacts,
) -> ConnEnd {
    let run = &member.run;
    let shared = Arc::new(Shared {
        config: config.clone(),
        run: run.clone(),
        writer: member.batches.clone(),
        mine: Mutex::new(Claims::default()),
        open_now: AtomicU64::new(0),
        peak_open: AtomicU64::new(0),
    });
    // File handlers run inside this task: a task per file cost wake-ups between tasks (and
    // threads) for every stream opened, read and closed.
    let mut handlers = FuturesUnordered::new();
    let mut done = 0u64;
    let mut end = None;
    let mut failure: Option<String> = None;
    let mut stopped = false;
    let mut accepting = true;
    let idle = config.idle_timeout;
    // One timer for the idle deadline, moved only when it fires: resetting a timer on every
    // event cost a timer-wheel update per file.
    let mut last_progress = tokio::time::Instant::now();
    let mut idle_timer = pin!(tokio::time::sleep_until(last_progress + idle));
    'run: loop {
        // Records on the control stream: empty folders, then the end marker.
        loop {
            match decoder.decode(&buf) {
                Ok(None) => break,
                Ok(Some((Record::Dir(path), n))) => {
                    buf.advance(n);
                    let ops = vec![WriteOp::Dir(path)];
                    if send_batch(config, &run.budget, &member.batches, ops, 0)
                        .await
                        .is_err()
                    {
                        stopped = true;
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
                if let Err(err) = shared.mine.lock().expect("tally").check_own_end(e) {
                    failure = Some(format!("{err:#}"));
                }
                break;
            }
        }
        tokio::select! {
            file = inbound.recv(), if accepting => match file {
                Some(file) => handlers.push(handle_file(shared.clone(), file)),
                None => accepting = false,
            },
            Some(handled) = handlers.next(), if !handlers.is_empty() => match handled {
                Ok(()) => done += 1,
                Err(PumpError::WriterGone) => {
                    stopped = true;
                    break;
                }
                Err(PumpError::Other(e)) => {
                    failure = Some(format!("{e:#}"));
                    break;
                }
            },
            read = read_control(control_rd, &mut buf), if end.is_none() => match read {
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
            _ = run.cancel.cancelled() => {
                if run.writer_failed() {
                    stopped = true; // the writer's report names the cause
                } else {
                    failure = Some("stopped: the run failed on another connection".into());
                }
                break;
            }
            _ = idle_timer.as_mut() => {
                if last_progress.elapsed() >= idle {
                    failure = Some(format!(
                        "no progress for {} s ({done} file streams done)",
                        idle.as_secs()
                    ));
                    break;
                }
                idle_timer.as_mut().reset(last_progress + idle);
                continue;
            }
        }
        last_progress = tokio::time::Instant::now();
        if !accepting && handlers.is_empty() {
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
    // A file stream beyond the count the end marker gave (and the hello announced) is
    // refused, not dropped unread: one in flight or already arrived fails the run.
    if failure.is_none() && !stopped {
        if let Some(e) = end {
            let extra = handlers.len() + usize::from(inbound.try_recv().is_ok());
            if extra > 0 {
                failure = Some(format!(
                    "a file stream beyond the {} files this connection's end marker counts (the hello announced {})",
                    e.files, run.hello.file_count
                ));
            }
        }
    }
    // Stop whatever is still in flight so every writer handle is released.
    drop(handlers);
    let peak = shared.peak_open.load(Ordering::Relaxed);
    ConnEnd {
        errors: failure.into_iter().collect(),
        stopped,
        peak_streams: peak,
        facts,
    }
}

async fn handle_file(shared: Arc<Shared>, file: InboundFile) -> Result<(), PumpError> {
    let open = shared.open_now.fetch_add(1, Ordering::Relaxed) + 1;
    shared.peak_open.fetch_max(open, Ordering::Relaxed);
    let result = match file {
        InboundFile::Yamux(s) => {
            let mut s = AckWhenWaiting {
                stream: s,
                acked: false,
            };
            let r = read_one_file(&shared, &mut s, YAMUX_FIRST_READ).await;
            if r.is_ok() {
                // Closing our side tells the sender this file is in (and acknowledges the
                // stream, if no read had to wait).
                let _ = s.stream.shutdown().await;
            }
            r
        }
        InboundFile::Quic(mut s, _slot) => {
            let r = read_one_file(&shared, &mut s, QUIC_FIRST_READ).await;
            if r.is_err() {
                let _ = s.stop(1u32.into());
            }
            r
        }
    };
    shared.open_now.fetch_sub(1, Ordering::Relaxed);
    result
}

/// A yamux file stream that acknowledges itself the first time a read would wait.
///
/// yamux lets a sender wait for at most 256 unacknowledged streams, and a stream is
/// acknowledged by the first frame the receiver sends on it. A stream that has to wait for
/// data is acknowledged at once (an empty write), so the backlog drains one round trip after
/// each open rather than after each file. A small file is usually whole in its first read; its
/// close, a moment later, carries the acknowledgement, which saves a frame per file at both
/// ends.
struct AckWhenWaiting {
    stream: Compat<yamux::Stream>,
    acked: bool,
}

impl AsyncRead for AckWhenWaiting {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let read = std::pin::Pin::new(&mut this.stream).poll_read(cx, buf);
        if read.is_pending() && !this.acked {
            // Pending: the stream's queue to the connection is full and wakes us when it is
            // not. A failed write shows up on the next read.
            if std::pin::Pin::new(&mut this.stream)
                .poll_write(cx, &[])
                .is_ready()
            {
                this.acked = true;
            }
        }
        read
    }
}

/// Reads what the control stream has (folder records, the end marker) through a small
/// scratch buffer. This read is polled afresh after every file stream event, and yamux
/// streams reach tokio through `Compat`, which zeroes all of the caller's spare capacity on
/// every poll: reading straight into the 256 KiB connection buffer cost a 256 KiB memset per
/// file (11% of the receiver's profile on tcp-streams).
///
/// No timer of its own: the caller's idle deadline covers a silent peer.
async fn read_control<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
) -> anyhow::Result<usize> {
    let mut scratch = [0u8; 2048];
    let n = rd.read(&mut scratch).await.context("connection failed")?;
    buf.extend_from_slice(&scratch[..n]);
    Ok(n)
}

/// A yamux file stream's first read: a 4 KiB file with its header and end marker, so the
/// whole file reaches the writer in one batch. 512 bytes here meant two reads and two batches
/// per file and cost tcp-streams a third of its speed (docs/benchmarks.md).
const YAMUX_FIRST_READ: usize = 4608;
/// A QUIC file stream's first read. 4.5 KiB here makes quic-streams faster (65,536 × 4 KiB on
/// tmpfs, one connection: 150–171 against 111–118 MB/s) but raised the receiver's peak RSS
/// from 47 to 116–136 MB, over the 64 MB target; why quinn then holds so much more is not yet
/// understood (docs/benchmarks.md).
const QUIC_FIRST_READ: usize = 512;

/// Reads exactly one file record from a stream and writes it.
async fn read_one_file<R: AsyncRead + Unpin>(
    shared: &Shared,
    rd: &mut R,
    first_read: usize,
) -> Result<(), PumpError> {
    let id = shared.run.next_file_id.fetch_add(1, Ordering::Relaxed);
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
                    let shown = h.path.to_string();
                    let run = &shared.run;
                    run.claims
                        .lock()
                        .expect("claims")
                        .claim(&run.hello, &shown, h.size)?;
                    let mut mine = shared.mine.lock().expect("tally");
                    mine.files += 1;
                    mine.bytes += h.size;
                    drop(mine);
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
                &shared.run.budget,
                &shared.writer,
                ops,
                batch_bytes,
            )
            .await?;
        }
        // Up to 4,096 of these buffers are alive at once, so each is sized to what is due:
        // `first_read` while the header is incomplete, then exactly the file's remaining bytes
        // (64 KiB steps for large files). A fixed "4 KiB + slack" for every read made
        // `reserve` double the buffer once the header had been consumed and cost ~47 MB of
        // receiver heap.
        let want = match decoder.pending_data() {
            0 => first_read,
            due => (due as usize).min(64 << 10),
        };
        if read_sized(rd, &mut buf, want, shared.config.idle_timeout).await? == 0 {
            decoder.finish_file_stream(&buf)?;
            if !seen_file {
                return Err(anyhow!("an empty file stream").into());
            }
            return Ok(());
        }
    }
}

/// What a yamux server connection hands to the code that serves it.
pub(crate) struct YamuxServer {
    /// The first inbound stream.
    pub control: oneshot::Receiver<Compat<yamux::Stream>>,
    /// Every later inbound stream.
    pub files: mpsc::UnboundedReceiver<InboundFile>,
    /// Becomes true when the connection has ended (the peer closed it, or it failed).
    pub ended: watch::Receiver<bool>,
}

/// Runs `work` with a yamux server connection over `io`, driving the connection in the same
/// task: the first inbound stream is the control stream; every later one is a file stream.
/// The connection is polled after every poll of `work`, so the acknowledgements and closes
/// `work` queued leave in one flush; a driver in its own task cost several wake-ups between
/// tasks per file. The connection is dropped when `work` returns.
pub(crate) async fn with_yamux_server<S, T, F, Fut>(io: S, streams_allowed: usize, work: F) -> T
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: FnOnce(YamuxServer) -> Fut,
    Fut: Future<Output = T>,
{
    // `None` once the connection has ended: dropping it is what ends its streams.
    let mut conn = Some(yamux::Connection::new(
        io.compat(),
        shoal_common::transport::yamux_config(streams_allowed),
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
                                let _ = tx.send(InboundFile::Yamux(stream.compat()));
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
