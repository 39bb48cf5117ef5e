//! One stream per file (yamux over TLS/TCP, or QUIC unidirectional streams), up to
//! `max_streams` outstanding. A control stream carries the hello, empty folders, the end
//! marker and the receiver's replies. The sender opens the next file's stream without waiting
//! for earlier files: a stream stops counting as outstanding when the receiver has the whole
//! file (yamux: the receiver closes its side after closing the file; QUIC: the stream is
//! acknowledged).

use std::future::{poll_fn, Future};
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use bytes::BytesMut;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use shoal_pipeline::reader::{ChunkKind, Reader};
use shoal_proto::codec::{self, Hello};
use shoal_transport::mux;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::compat::{Compat, FuturesAsyncReadCompatExt};

use crate::bundle::Tally;
use crate::config::TestHooks;
use crate::finish::{finish_with_reply, Sent};
use crate::net::BoxIo;
use crate::progress::Counters;
use crate::replies::Replies;
use crate::waits::Waits;

/// A yamux client connection (see [`mux::ClientConn`]).
type YamuxConn = mux::ClientConn<BoxIo>;

/// Opens per-file streams on one connection.
pub(crate) enum Opener {
    Yamux(YamuxConn),
    Quic(quinn::Connection),
}

/// One file's stream.
enum FileStream {
    Yamux(Compat<yamux::Stream>),
    Quic(quinn::SendStream),
}

impl Opener {
    /// Opens the control stream: yamux's first stream, or a bidirectional QUIC stream.
    pub(crate) async fn open_control(&self) -> Result<BoxIo> {
        match self {
            Opener::Yamux(_) => match self.open().await? {
                FileStream::Yamux(s) => Ok(Box::new(s)),
                FileStream::Quic(_) => unreachable!("a yamux opener opens yamux streams"),
            },
            Opener::Quic(conn) => {
                let (send, recv) = conn.open_bi().await.context("cannot open a QUIC stream")?;
                Ok(Box::new(tokio::io::join(recv, send)))
            }
        }
    }

    async fn open(&self) -> Result<FileStream> {
        match self {
            Opener::Yamux(conn) => {
                let stream = poll_fn(|cx| match conn.lock().expect("yamux").as_mut() {
                    Some(c) => c.poll_new_outbound(cx).map_err(anyhow::Error::from),
                    None => Poll::Ready(Err(anyhow!("the yamux connection has ended"))),
                })
                .await
                .context("cannot open a yamux stream")?;
                Ok(FileStream::Yamux(stream.compat()))
            }
            Opener::Quic(conn) => Ok(FileStream::Quic(
                conn.open_uni().await.context("cannot open a QUIC stream")?,
            )),
        }
    }
}

impl FileStream {
    async fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        match self {
            FileStream::Yamux(s) => s
                .write_all(bytes)
                .await
                .context("yamux stream write failed"),
            FileStream::Quic(s) => quinn::SendStream::write_all(s, bytes)
                .await
                .context("QUIC stream write failed"),
        }
    }

    /// Ends the stream and waits until the receiver has the whole file.
    async fn finish(self) -> Result<()> {
        match self {
            FileStream::Yamux(mut s) => {
                s.shutdown().await.context("yamux stream close failed")?;
                // The receiver closes its side once the file is closed.
                let mut scrap = [0u8; 64];
                while s.read(&mut scrap).await.context("yamux stream failed")? > 0 {}
                Ok(())
            }
            FileStream::Quic(mut s) => {
                s.finish().context("QUIC stream finish failed")?;
                match s.stopped().await {
                    Ok(None) => Ok(()),
                    Ok(Some(code)) => bail!("receiver stopped a file stream (code {code})"),
                    Err(e) => Err(anyhow!("QUIC file stream failed: {e}")),
                }
            }
        }
    }
}

/// Sends the whole run over per-file streams.
pub(crate) async fn run<R, W>(
    control_rd: R,
    mut control_wr: W,
    opener: Opener,
    hello: &Hello,
    mut reader: Reader,
    hooks: TestHooks,
    counters: Arc<Counters>,
) -> Result<Sent>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin,
{
    let mut replies = Replies::spawn(control_rd);
    let mut peak = 0u64;
    let mut waits = Waits::default();
    let failure = replies.failure();
    let sent = tokio::select! {
        biased;
        sent = send_files(
            &mut control_wr,
            &opener,
            hello,
            &mut reader,
            hooks,
            &mut peak,
            &mut waits,
            counters,
        ) => sent,
        () = failure => Err(crate::finish::stopped_by_receiver()),
    };
    // Content bytes this connection carried (its end marker's count).
    let bytes = *sent.as_ref().unwrap_or(&0);
    let done = finish_with_reply(sent.map(drop), reader.finish(), &mut replies).await;
    let _ = control_wr.shutdown().await;
    let done = done?;
    Ok(Sent {
        completion: done.completion,
        completed_at: done.decoded_at,
        fsync: done.fsync,
        peak_streams: peak,
        bytes,
        waits,
    })
}

/// Sends the hello, every file and block on a stream of its own, folders and the end marker;
/// returns the content bytes sent.
// The run's state travels as arguments, as in the receiver's loops.
#[allow(clippy::too_many_arguments)]
async fn send_files<W: AsyncWrite + Unpin>(
    control: &mut W,
    opener: &Opener,
    hello: &Hello,
    reader: &mut Reader,
    hooks: TestHooks,
    peak: &mut u64,
    waits: &mut Waits,
    counters: Arc<Counters>,
) -> Result<u64> {
    // The hello opens the control stream, so it is the first stream the receiver sees (yamux
    // announces a stream only with its first frame).
    let mut head = BytesMut::new();
    codec::encode_hello(hello, &mut head);
    control
        .write_all(&head)
        .await
        .context("control stream write failed")?;
    control
        .flush()
        .await
        .context("control stream write failed")?;
    let limit = hello.max_streams.max(1) as usize;
    // Files (or blocks) whose bytes are all sent, waiting for the receiver to have them (each
    // yields the files and bytes it completes, for the receiver's series). They are polled in this task, not spawned: a task per
    // file cost two cross-thread wake-ups per file.
    let mut tails = FuturesUnordered::new();
    let mut current: Option<(FileStream, (u64, u64))> = None;
    let ready = counters.ready.clone();
    let done = |brought: Result<(u64, u64)>| brought.map(|(files, bytes)| ready.add(files, bytes));
    let mut tally = Tally::new(counters);
    loop {
        // Time in here is waiting for the reader (reaping a finished tail takes no time).
        let waiting = Instant::now();
        let next = tokio::select! {
            biased;
            Some(tail) = tails.next(), if !tails.is_empty() => {
                waits.read += waiting.elapsed();
                done(tail)?;
                continue;
            }
            next = reader.chunks.recv() => next,
        };
        waits.read += waiting.elapsed();
        let Some(mut chunk) = next else { break };
        tally.count(&chunk);
        match chunk.kind {
            ChunkKind::Dir => control
                .write_all(&chunk.bytes)
                .await
                .context("control stream write failed")?,
            ChunkKind::File {
                size,
                first,
                last,
                block,
                ..
            } => {
                if first {
                    // At most `limit` files outstanding, this one included.
                    let waiting = Instant::now();
                    while tails.len() >= limit {
                        done(tails.next().await.expect("tails is not empty"))?;
                    }
                    *peak = (*peak).max(tails.len() as u64 + 1);
                    let stream = opener.open().await?;
                    waits.stream += waiting.elapsed();
                    chunk.stamp_sent_at();
                    // What this stream brings the receiver, for the receiver's series: a whole
                    // file, or a block's bytes (the file counts with the block that ends it).
                    let brings = match block {
                        None => (1, size),
                        Some((offset, len)) => (u64::from(offset + len == size), len),
                    };
                    current = Some((stream, brings));
                }
                hooks.apply(&mut chunk);
                let (stream, _) = current
                    .as_mut()
                    .expect("a file's first chunk opens its stream");
                stream.write_all(&chunk.bytes).await?;
                if last {
                    let (stream, brings) = current.take().expect("open stream");
                    tails.push(stream.finish().map(move |r| r.map(|()| brings)));
                }
            }
        }
    }
    // The reader's channel closed: it read everything, or it failed (and then no end
    // marker goes out, so the receiver cannot mistake a partial run for a whole one).
    reader.finish()?;
    let mut end = BytesMut::new();
    codec::encode_end(&tally.end(), &mut end);
    control
        .write_all(&end)
        .await
        .context("control stream write failed")?;
    control
        .flush()
        .await
        .context("control stream write failed")?;
    while let Some(tail) = tails.next().await {
        done(tail)?;
    }
    Ok(tally.bytes)
}

/// Runs `work` with a yamux client connection over `io` (see [`mux::with_yamux_client`]),
/// its streams opened through an [`Opener`].
pub(crate) async fn with_yamux_client<T, F, Fut>(io: BoxIo, max_streams: u32, work: F) -> T
where
    F: FnOnce(Opener) -> Fut,
    Fut: Future<Output = T>,
{
    let streams = shoal_transport::transport::yamux_streams(max_streams);
    mux::with_yamux_client(io, streams, |conn| work(Opener::Yamux(conn))).await
}
