//! Bundled records on one stream (TLS/TCP or one QUIC stream): hello, every file's record
//! back to back, end marker. With `wait_per_file` (the `tcp-wait` control arm) the sender
//! waits for the receiver's acknowledgement after each file instead.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use bytes::{Buf, Bytes};
use shoal_pipeline::reader::{Chunk, ChunkKind, Reader};
use shoal_proto::codec::{self, EndMarker, Hello};
use tokio::io::{AsyncRead, AsyncWriteExt};

use crate::config::TestHooks;
use crate::finish::{finish_with_reply, Sent};
use crate::pool::BufPool;
use crate::progress::Counters;
use crate::replies::Replies;
use crate::sink::RecordSink;
use crate::waits::Waits;

/// Bytes gathered before one write to the socket: many small records per write. Below glibc's
/// mmap threshold (128 KiB, `shoal_sys::process::tune_malloc`): at 256 KiB every buffer was
/// mapped afresh, and the page faults and zeroing were ~10% of a quic-bundle sender's samples
/// on the 1 Gbit/s link, ~14% on loopback. The buffers are pooled.
const STAGING: usize = 64 << 10;

/// Sends the whole run and returns the receiver's completion report and where sending
/// waited.
pub(crate) async fn run<R, W>(
    rd: R,
    mut wr: W,
    hello: &Hello,
    mut reader: Reader,
    wait_per_file: bool,
    hooks: TestHooks,
    counters: Arc<Counters>,
) -> Result<Sent>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: RecordSink,
{
    let mut replies = Replies::spawn(rd);
    let mut waits = Waits::default();
    let failure = replies.failure();
    let sent = tokio::select! {
        biased;
        sent = send_records(
            &mut wr,
            hello,
            &mut reader,
            &mut replies,
            wait_per_file,
            hooks,
            &mut waits,
            counters,
        ) => sent,
        () = failure => Err(crate::finish::stopped_by_receiver()),
    };
    // Content bytes this connection carried (its end marker's count).
    let bytes = *sent.as_ref().unwrap_or(&0);
    let result = finish_with_reply(sent.map(drop), reader.finish(), &mut replies).await;
    let _ = wr.shutdown().await;
    result.map(|done| Sent {
        completion: done.completion,
        completed_at: done.decoded_at,
        fsync: done.fsync,
        peak_streams: 0,
        bytes,
        waits,
    })
}

/// Sends the hello, every record and the end marker; returns the content bytes sent.
// The run's state travels as arguments, as in the receiver's loops.
#[allow(clippy::too_many_arguments)]
async fn send_records<W: RecordSink>(
    wr: &mut W,
    hello: &Hello,
    reader: &mut Reader,
    replies: &mut Replies,
    wait_per_file: bool,
    hooks: TestHooks,
    waits: &mut Waits,
    counters: Arc<Counters>,
) -> Result<u64> {
    // Enough idle buffers for the default send window, then some (a larger window only means
    // that buffers past these are freed, not kept).
    let window = shoal_transport::config::FlowConfig::default().send_window as usize;
    let pool = BufPool::new(STAGING, window / STAGING + 64);
    let mut staging = pool.take();
    codec::encode_hello(hello, &mut staging);
    let mut tally = Tally::new(counters);
    // What the receiver has acknowledged (stop-and-wait arm), for the receiver's series.
    let mut acked = (0, 0);
    // A chunk whose first part filled the last write: the rest starts the next one.
    let mut held: Option<Chunk> = None;
    loop {
        let (chunk, counted) = match held.take() {
            Some(c) => (c, true),
            None => {
                // The socket pushes back through the reader's budget, so a wait here is the
                // source side's (a full socket leaves the channel full and this returns at
                // once).
                let waiting = Instant::now();
                let Some(chunk) = reader.chunks.recv().await else {
                    break;
                };
                waits.read += waiting.elapsed();
                (chunk, false)
            }
        };
        let mut next = Some((chunk, counted));
        let mut file_done = false;
        // Gather whatever is already read, up to the staging size, into one write; the
        // stop-and-wait arm writes each file on its own instead.
        while let Some((mut c, counted)) = next {
            if !counted {
                tally.count(&c);
                c.stamp_sent_at();
                hooks.apply(&mut c);
            }
            file_done = matches!(c.kind, ChunkKind::File { last: true, .. });
            if staging.is_empty() && c.bytes.len() >= STAGING {
                // A large chunk (a whole read of a large file) goes out as it is: copying it
                // into the staging buffer was one more pass over every byte of large files
                // (quic-bundle, one 64 MiB file: 67 M of the sender's 662 M instructions).
                // It holds its read-ahead room until written, as staged bytes do.
                wr.write_owned(c.take_bytes())
                    .await
                    .context("sending records failed")?;
                break;
            }
            let room = STAGING - staging.len();
            if c.bytes.len() > room {
                // Growing the buffer would copy it. Fill it to the brim instead, and the rest
                // of the chunk starts the next write: QUIC keeps every written buffer until it
                // is acknowledged, so a buffer cut short holds its unused room that long too.
                staging.extend_from_slice(&c.bytes[..room]);
                c.bytes.advance(room);
                file_done = false;
                held = Some(c);
                break;
            }
            staging.extend_from_slice(&c.bytes);
            next = if staging.len() < STAGING && !(wait_per_file && file_done) {
                reader.chunks.try_recv().map(|c| (c, false))
            } else {
                None
            };
        }
        if !staging.is_empty() {
            let bytes = take_staged(&mut staging, &pool, W::KEEPS_BUFFERS);
            wr.write_owned(bytes)
                .await
                .context("sending records failed")?;
        }
        if wait_per_file && file_done {
            wr.flush().await.context("sending records failed")?;
            if !replies.wait_acks(tally.files).await? {
                anyhow::bail!(
                    "the receiver stopped acknowledging after {} files",
                    tally.files
                );
            }
            tally
                .progress
                .ready
                .add(tally.files - acked.0, tally.bytes - acked.1);
            acked = (tally.files, tally.bytes);
        }
    }
    // The reader's channel closed: it read everything, or it failed (and then no end
    // marker goes out, so the receiver cannot mistake a partial run for a whole one).
    reader.finish()?;
    codec::encode_end(&tally.end(), &mut staging);
    wr.write_owned(pool.freeze(staging))
        .await
        .context("sending records failed")?;
    wr.flush().await.context("sending records failed")?;
    Ok(tally.bytes)
}

/// The staged records as one write, and `staging` ready for the next records.
///
/// Mostly the staged buffer leaves as it is and the next records go into another buffer of
/// the pool (one the transport is done with, once the pool has a window's worth). But a sink
/// that keeps each written buffer until its bytes are acknowledged (QUIC: a round trip or
/// more) would keep a whole 64 KiB buffer for the few records it holds when the reader had no
/// more for now, which an empty send window makes common (it takes writes faster than small
/// files are read, as at a run's start): 392 pool buffers, 25.7 MB, held a 20 MiB window of
/// small files on the 141 ms link. Records filling
/// less than half the buffer are copied out instead, and the buffer stays for the next ones.
/// (Waiting for the reader to fill the buffer instead made loopback runs 4–6% slower: ratios
/// of medians, same docs section.)
fn take_staged(staging: &mut Vec<u8>, pool: &Arc<BufPool>, keeps_buffers: bool) -> Bytes {
    if keeps_buffers && staging.len() < STAGING / 2 {
        let copy = Bytes::copy_from_slice(staging);
        staging.clear();
        copy
    } else {
        pool.freeze(std::mem::replace(staging, pool.take()))
    }
}

/// Records (files and blocks) and content bytes sent so far, for the end marker (and the
/// run's progress).
#[derive(Debug)]
pub(crate) struct Tally {
    pub files: u64,
    pub bytes: u64,
    pub progress: Arc<Counters>,
}

impl Tally {
    pub(crate) fn new(progress: Arc<Counters>) -> Self {
        Tally {
            files: 0,
            bytes: 0,
            progress,
        }
    }

    /// Counts `chunk`, about to be handed to the transport.
    pub(crate) fn count(&mut self, chunk: &Chunk) {
        // A file counts as sent with its last chunk; a file in blocks, with the last chunk of
        // the block that ends it (its other blocks may still be on their way).
        let last = match chunk.kind {
            ChunkKind::File {
                last: true,
                block: None,
                ..
            } => true,
            ChunkKind::File {
                last: true,
                block: Some((offset, len)),
                size,
                ..
            } => offset + len == size,
            _ => false,
        };
        self.progress.sent(chunk.bytes.len(), last);
        if let ChunkKind::File {
            size,
            first: true,
            block,
            ..
        } = chunk.kind
        {
            self.files += 1;
            self.bytes += match block {
                Some((_, len)) => len,
                None => size,
            };
        }
    }

    pub(crate) fn end(&self) -> EndMarker {
        EndMarker {
            files: self.files,
            bytes: self.bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Staged records filling less than half a buffer leave as a copy of their own size when
    /// the sink keeps its buffers, and the buffer stays for the next records; anything else
    /// leaves in its pool buffer, which comes back to the pool once the sink drops it.
    #[test]
    fn few_records_leave_as_a_copy_only_for_a_sink_that_keeps_buffers() {
        let pool = BufPool::new(STAGING, 8);
        let mut staging = pool.take();
        staging.extend_from_slice(&[1; 100]);
        let few = take_staged(&mut staging, &pool, true);
        assert_eq!(&few[..], &[1; 100][..]);
        assert!(staging.is_empty() && staging.capacity() == STAGING);
        drop(few);
        assert_eq!(pool.idle(), 0, "a copy is not the pool's");

        staging.extend_from_slice(&[2; STAGING / 2]);
        let half = take_staged(&mut staging, &pool, true);
        assert_eq!(half.len(), STAGING / 2);
        assert!(staging.is_empty() && staging.capacity() == STAGING);
        drop(half);
        assert_eq!(
            pool.idle(),
            1,
            "half full: the pool buffer itself was written"
        );

        staging.extend_from_slice(&[3; 100]);
        let copied_by_the_sink = take_staged(&mut staging, &pool, false);
        assert_eq!(copied_by_the_sink.len(), 100);
        drop(copied_by_the_sink);
        assert_eq!(
            pool.idle(),
            1,
            "the idle buffer was taken for staging, this one returned"
        );
    }
}
