//! One stream per file (yamux over TCP, or QUIC unidirectional streams). A control stream
//! carries the hello, empty folders, the end marker and the replies; each file stream carries
//! exactly one file record. Streams are handled concurrently, each with its own writer id; the
//! run completes when the end marker has arrived and as many file streams as it counts have
//! been written. Each stream's bytes go to the one records → write-ops stage (`stage`) under
//! its kind's rules (`StreamDecoder`); `FileStreamCount` holds the file streams against the end
//! marker. This module only moves bytes and drives the handlers.

use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use bytes::BytesMut;
use futures::stream::{FuturesUnordered, StreamExt};
use shoal_pipeline::writer::BatchSender;
use shoal_proto::codec::{DecodeError, FileStreamCount, RecordDecoder, StreamDecoder};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;
use tokio_util::compat::Compat;

use crate::claims::Claims;
use crate::config::ReceiverConfig;
use crate::fileread::{read_into, AckWhenWaiting, FileStream};
use crate::hub::{ConnEnd, Membership, Run};
use crate::run::TransportFacts;
use crate::stage::{send_batch, Intake, PumpError};
use crate::tune::ReadMeter;

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
    writer: BatchSender,
    /// This connection's own tally, for its end marker.
    mine: Mutex<Claims>,
    open_now: AtomicU64,
    peak_open: AtomicU64,
    /// The largest receive window a yamux file stream had (the row's `stream_window`).
    peak_window: AtomicU64,
    /// What the file streams read, for the path-sized QUIC window (`tune.rs`); `None` over
    /// yamux.
    meter: Option<Arc<ReadMeter>>,
}

/// Receives one connection's files, arriving on `inbound`; the control stream is
/// `control_rd`, already past the hello (`buf` holds what was read after it).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn receive<R: AsyncRead + Unpin>(
    config: &ReceiverConfig,
    member: &Membership,
    control_rd: &mut R,
    mut buf: BytesMut,
    decoder: RecordDecoder,
    mut inbound: mpsc::UnboundedReceiver<InboundFile>,
    mut facts: TransportFacts,
    meter: Option<Arc<ReadMeter>>,
) -> ConnEnd {
    let run = &member.run;
    let shared = Arc::new(Shared {
        config: config.clone(),
        run: run.clone(),
        writer: member.batches.clone(),
        mine: Mutex::new(Claims::default()),
        open_now: AtomicU64::new(0),
        peak_open: AtomicU64::new(0),
        peak_window: AtomicU64::new(0),
        meter,
    });
    // File handlers run inside this task: a task per file cost wake-ups between tasks (and
    // threads) for every stream opened, read and closed.
    let mut handlers = FuturesUnordered::new();
    let mut count = FileStreamCount::default();
    let mut control = Intake::new(StreamDecoder::control_stream(decoder), None);
    let mut failure: Option<String> = None;
    let mut stopped = false;
    let mut accepting = true;
    let idle = config.idle_timeout;
    // One timer for the idle deadline, moved only when it fires: resetting a timer on every
    // event cost a timer-wheel update per file.
    let mut last_progress = tokio::time::Instant::now();
    let mut idle_timer = pin!(tokio::time::sleep_until(last_progress + idle));
    loop {
        // Records on the control stream: empty folders, then the end marker. The control
        // stream carries no file, so its tally stays empty.
        let mut batch = control.take(run, &mut buf, &mut Claims::default());
        let failed = batch.result();
        if !batch.ops.is_empty()
            && send_batch(
                config,
                &run.budget,
                &run.write_wait,
                &member.batches,
                batch.ops,
                0,
            )
            .await
            .is_err()
        {
            stopped = true;
            break;
        }
        if let Err(e) = failed {
            (stopped, failure) = ended_by(e);
            break;
        }
        if let Some(e) = batch.end {
            count.ended(e);
            if !buf.is_empty() {
                failure = Some(DecodeError::AfterEnd.to_string());
                break;
            }
        }
        if let Some(e) = count.complete() {
            if let Err(err) = shared.mine.lock().expect("tally").check_own_end(e) {
                failure = Some(format!("{err:#}"));
            }
            break;
        }
        tokio::select! {
            file = inbound.recv(), if accepting => match file {
                Some(file) => handlers.push(handle_file(shared.clone(), file)),
                None => accepting = false,
            },
            Some(handled) = handlers.next(), if !handlers.is_empty() => match handled {
                Ok(()) => count.stream_done(),
                Err(e) => {
                    (stopped, failure) = ended_by(e);
                    break;
                }
            },
            read = read_control(control_rd, &mut buf), if count.end().is_none() => match read {
                Ok(0) => {
                    failure = Some(match control.finish(&buf) {
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
                        "no progress for {} s ({} file streams done)",
                        idle.as_secs(),
                        count.done()
                    ));
                    break;
                }
                idle_timer.as_mut().reset(last_progress + idle);
                continue;
            }
        }
        last_progress = tokio::time::Instant::now();
        if !accepting && handlers.is_empty() {
            if let Err(e) = count.no_more_streams() {
                failure = Some(e.to_string());
                break;
            }
        }
    }
    // A file stream beyond the count the end marker gave (and the hello announced) is
    // refused, not dropped unread: one in flight or already arrived fails the run.
    if failure.is_none() && !stopped {
        let extra = handlers.len() + usize::from(inbound.try_recv().is_ok());
        if let Err(e) = count.extra_streams(extra, run.hello.announced().map(|(files, _)| files)) {
            failure = Some(e.to_string());
        }
    }
    // Stop whatever is still in flight so every writer handle is released.
    drop(handlers);
    let peak = shared.peak_open.load(Ordering::Relaxed);
    facts.stream_window = facts
        .stream_window
        .max(shared.peak_window.load(Ordering::Relaxed));
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
            let mut s = FileStream::Yamux(AckWhenWaiting {
                stream: s.into_inner(),
                acked: false,
            });
            // No read size: a yamux read takes the frame body yamux holds (`fileread`). 4,608
            // bytes per read was the size that kept a 4 KiB file in one batch.
            let r = read_one_file(&shared, &mut s, 0).await;
            shared
                .peak_window
                .fetch_max(s.receive_window(), Ordering::Relaxed);
            if let (Ok(()), FileStream::Yamux(s)) = (&r, &mut s) {
                // Closing our side tells the sender this file is in (and acknowledges the
                // stream, if no read had to wait).
                let _ = futures::AsyncWriteExt::close(&mut s.stream).await;
            }
            r
        }
        InboundFile::Quic(s, _slot) => {
            let mut s = FileStream::Quic(s);
            let r = read_one_file(&shared, &mut s, QUIC_FIRST_READ).await;
            if let (Err(_), FileStream::Quic(s)) = (&r, &mut s) {
                let _ = s.stop(1u32.into());
            }
            r
        }
    };
    shared.open_now.fetch_sub(1, Ordering::Relaxed);
    result
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

/// A QUIC file stream's first read: enough for the record's header. What stays unread stays in
/// quinn, inside the connection's flow-control window, so a slow writer holds the sender back
/// instead of 4,096 handlers each holding a file's bytes. Reading a small file whole on the
/// first read raised the receiver's peak RSS on the 141 ms link and was no faster on loopback
/// once the window is sized for the path (docs/decisions/0009-first-read.md).
const QUIC_FIRST_READ: usize = 512;

/// Reads exactly one file record from a stream and writes it.
async fn read_one_file(
    shared: &Shared,
    rd: &mut FileStream,
    first_read: usize,
) -> Result<(), PumpError> {
    let mut intake = Intake::new(StreamDecoder::file_stream(shared.config.limits), None);
    let mut buf = BytesMut::new();
    // Bytes read from the stream, and whether its window is sized for its record yet.
    let mut read = 0u64;
    let mut sized = false;
    loop {
        let mut batch = intake.take(
            &shared.run,
            &mut buf,
            &mut shared.mine.lock().expect("tally"),
        );
        let failed = batch.result();
        if !batch.ops.is_empty() {
            send_batch(
                &shared.config,
                &shared.run.budget,
                &shared.run.write_wait,
                &shared.writer,
                batch.ops,
                batch.bytes,
            )
            .await?;
        }
        failed?;
        let due = intake.pending_data();
        if !sized && due > 0 {
            sized = true;
            rd.size_window(read + due);
        }
        // Up to 4,096 of these buffers are alive at once, so each is sized to what is due:
        // `first_read` while the header is incomplete, then exactly the file's remaining bytes
        // (64 KiB steps for large files). A fixed "4 KiB + slack" for every read made
        // `reserve` double the buffer once the header had been consumed and cost ~47 MB of
        // receiver heap.
        let want = match intake.pending_data() {
            0 => first_read,
            due => (due as usize).min(64 << 10),
        };
        let n = read_into(rd, &mut buf, want, shared.config.idle_timeout).await?;
        if n == 0 {
            intake.finish(&buf)?;
            return Ok(());
        }
        read += n as u64;
        if let Some(meter) = &shared.meter {
            meter.add(n as u64);
        }
    }
}

/// How a stage error ends the connection: (stopped, failure). The writer's stop is no failure
/// of the connection's own: the writer's report names the cause.
fn ended_by(e: PumpError) -> (bool, Option<String>) {
    match e {
        PumpError::WriterGone => (true, None),
        PumpError::Other(e) => (false, Some(format!("{e:#}"))),
    }
}
