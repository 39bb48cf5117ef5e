//! Bundled records on one stream: hello, every file's record back to back, end marker.

use std::time::Duration;

use anyhow::{Context, Result};
use bytes::BytesMut;
use shoal_common::codec::{self, Completion, EndMarker, Hello, Reply, ReplyDecoder};
use shoal_common::pipeline::reader::{ChunkKind, Reader};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;

use crate::final_reply;

/// Bytes gathered before one write to the socket: many small records per TLS record batch.
const STAGING: usize = 256 << 10;

/// How long to wait for the receiver's reason after a write fails.
const REASON_GRACE: Duration = Duration::from_secs(3);

/// Sends the whole run on `stream` and returns the receiver's completion report.
pub(crate) async fn run<S>(stream: S, hello: &Hello, mut reader: Reader) -> Result<Completion>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (rd, mut wr) = tokio::io::split(stream);
    let (final_tx, final_rx) = oneshot::channel();
    let replies = tokio::spawn(read_final_reply(rd, final_tx));
    let sent = send_records(&mut wr, hello, &mut reader).await;
    let reader_result = reader.finish();
    let result = match (sent, reader_result) {
        (Ok(()), Ok(())) => final_reply(final_rx.await.ok().flatten()),
        (_, Err(e)) => Err(e),
        (Err(e), Ok(())) => {
            // A write failed: the receiver probably said why before it closed.
            match tokio::time::timeout(REASON_GRACE, final_rx).await {
                Ok(Ok(Some(reply))) => final_reply(Some(reply)),
                _ => Err(e),
            }
        }
    };
    replies.abort();
    result
}

async fn send_records<W: AsyncWrite + Unpin>(
    wr: &mut W,
    hello: &Hello,
    reader: &mut Reader,
) -> Result<()> {
    let mut staging = BytesMut::with_capacity(STAGING);
    codec::encode_hello(hello, &mut staging);
    let (mut files, mut bytes) = (0u64, 0u64);
    while let Some(chunk) = reader.chunks.recv().await {
        let mut next = Some(chunk);
        // Gather whatever is already read, up to the staging size, into one write.
        while let Some(c) = next {
            if let ChunkKind::File { index, first, .. } = c.kind {
                if first {
                    files += 1;
                    bytes += reader.tree().files[index].size;
                }
            }
            staging.extend_from_slice(&c.bytes);
            next = if staging.len() < STAGING {
                reader.chunks.try_recv().ok()
            } else {
                None
            };
        }
        wr.write_all(&staging)
            .await
            .context("sending records failed")?;
        staging.clear();
    }
    // The channel closed: either every item was read, or the reader failed (checked by the
    // caller before the end marker could matter — a failed reader means no end marker).
    if files != hello.file_count {
        anyhow::bail!(
            "the reader stopped after {files} of {} files",
            hello.file_count
        );
    }
    codec::encode_end(&EndMarker { files, bytes }, &mut staging);
    wr.write_all(&staging)
        .await
        .context("sending records failed")?;
    wr.flush().await.context("sending records failed")?;
    Ok(())
}

/// Reads replies until the final one (completion or error) and hands it over.
async fn read_final_reply<R: AsyncRead + Unpin>(mut rd: R, tx: oneshot::Sender<Option<Reply>>) {
    let mut decoder = ReplyDecoder;
    let mut buf = BytesMut::with_capacity(4096);
    let reply = loop {
        match decoder.decode(&buf) {
            Ok(Some((Reply::Ack(_), n))) => {
                let _ = buf.split_to(n);
                continue;
            }
            Ok(Some((reply, _))) => break Some(reply),
            Ok(None) => {}
            Err(e) => break Some(Reply::Error(format!("unreadable reply: {e}"))),
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break None,
            Ok(_) => {}
        }
    };
    let _ = tx.send(reply);
}
