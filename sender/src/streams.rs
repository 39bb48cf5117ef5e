//! One stream per file (yamux over TLS/TCP, or QUIC unidirectional streams), up to
//! `max_streams` outstanding. A control stream carries the hello, empty folders, the end
//! marker and the receiver's replies. The sender opens the next file's stream without waiting
//! for earlier files: a stream stops counting as outstanding when the receiver has the whole
//! file (yamux: the receiver closes its side after closing the file; QUIC: the stream is
//! acknowledged).

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;

use anyhow::{anyhow, bail, Context, Result};
use bytes::BytesMut;
use shoal_common::codec::{self, Completion, Hello};
use shoal_common::pipeline::reader::{ChunkKind, Reader};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::compat::{Compat, FuturesAsyncReadCompatExt, TokioAsyncReadCompatExt};

use crate::bundle::Tally;
use crate::net::BoxIo;
use crate::replies::Replies;
use crate::{finish_with_reply, TestHooks};

type YamuxRequest = oneshot::Sender<Result<yamux::Stream, yamux::ConnectionError>>;

/// Opens per-file streams on one connection.
pub(crate) enum Opener {
    Yamux(mpsc::Sender<YamuxRequest>),
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
            Opener::Yamux(requests) => {
                let (tx, rx) = oneshot::channel();
                requests
                    .send(tx)
                    .await
                    .map_err(|_| anyhow!("the yamux connection has ended"))?;
                let stream = rx
                    .await
                    .map_err(|_| anyhow!("the yamux connection has ended"))?
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

/// What the streams transport measured besides the completion.
pub(crate) struct StreamsOutcome {
    pub completion: Completion,
    pub peak_streams: u64,
}

/// Sends the whole run over per-file streams.
pub(crate) async fn run<R, W>(
    control_rd: R,
    mut control_wr: W,
    opener: Opener,
    hello: &Hello,
    mut reader: Reader,
    hooks: TestHooks,
) -> Result<StreamsOutcome>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin,
{
    let mut replies = Replies::spawn(control_rd);
    let mut peak = 0u64;
    let sent = send_files(
        &mut control_wr,
        &opener,
        hello,
        &mut reader,
        hooks,
        &mut peak,
    )
    .await;
    let completion = finish_with_reply(sent, reader.finish(), &mut replies).await;
    let _ = control_wr.shutdown().await;
    Ok(StreamsOutcome {
        completion: completion?,
        peak_streams: peak,
    })
}

async fn send_files<W: AsyncWrite + Unpin>(
    control: &mut W,
    opener: &Opener,
    hello: &Hello,
    reader: &mut Reader,
    hooks: TestHooks,
    peak: &mut u64,
) -> Result<()> {
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
    let outstanding = Arc::new(Semaphore::new(limit));
    let mut tails: JoinSet<Result<()>> = JoinSet::new();
    let mut current: Option<(FileStream, OwnedSemaphorePermit)> = None;
    let mut tally = Tally::default();
    while let Some(mut chunk) = reader.chunks.recv().await {
        tally.count(reader, &chunk);
        match chunk.kind {
            ChunkKind::Dir => control
                .write_all(&chunk.bytes)
                .await
                .context("control stream write failed")?,
            ChunkKind::File { first, last, .. } => {
                if first {
                    let permit = outstanding
                        .clone()
                        .acquire_owned()
                        .await
                        .expect("semaphore never closed");
                    *peak = (*peak).max((limit - outstanding.available_permits()) as u64);
                    let stream = opener.open().await?;
                    chunk.stamp_sent_at();
                    current = Some((stream, permit));
                }
                hooks.apply(&mut chunk);
                let (stream, _) = current
                    .as_mut()
                    .expect("a file's first chunk opens its stream");
                stream.write_all(&chunk.bytes).await?;
                if last {
                    let (stream, permit) = current.take().expect("open stream");
                    tails.spawn(async move {
                        let r = stream.finish().await;
                        drop(permit);
                        r
                    });
                }
            }
        }
        drop(chunk);
        while let Some(done) = tails.try_join_next() {
            done.context("file stream task failed")??;
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
    while let Some(done) = tails.join_next().await {
        done.context("file stream task failed")??;
    }
    Ok(())
}

/// Starts the task that owns a yamux client connection: it keeps polling inbound (which is
/// what moves bytes) and serves requests for new outbound streams.
pub(crate) fn spawn_yamux_client(
    io: BoxIo,
    max_streams: u32,
) -> (Opener, JoinHandle<Result<(), yamux::ConnectionError>>) {
    let conn = yamux::Connection::new(
        io.compat(),
        shoal_common::transport::yamux_config(shoal_common::transport::yamux_streams(max_streams)),
        yamux::Mode::Client,
    );
    let (tx, rx) = mpsc::channel::<YamuxRequest>(64);
    (Opener::Yamux(tx), tokio::spawn(drive_client(conn, rx)))
}

async fn drive_client(
    mut conn: yamux::Connection<Compat<BoxIo>>,
    mut requests: mpsc::Receiver<YamuxRequest>,
) -> Result<(), yamux::ConnectionError> {
    let mut pending: Option<YamuxRequest> = None;
    let mut requests_open = true;
    poll_fn(|cx| {
        loop {
            if pending.is_none() && requests_open {
                match requests.poll_recv(cx) {
                    Poll::Ready(Some(tx)) => pending = Some(tx),
                    Poll::Ready(None) => requests_open = false,
                    Poll::Pending => {}
                }
            }
            let Some(tx) = pending.take() else { break };
            match conn.poll_new_outbound(cx) {
                Poll::Ready(r) => {
                    let _ = tx.send(r);
                }
                Poll::Pending => {
                    pending = Some(tx);
                    break;
                }
            }
        }
        loop {
            match conn.poll_next_inbound(cx) {
                // The receiver opens no streams; drop any it does.
                Poll::Ready(Some(Ok(_))) => continue,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    })
    .await
}
