//! Reading a peer's bytes under the receiver's deadlines: the hello, and bounded reads.

use std::time::Duration;

use anyhow::{Context, Result};
use bytes::BytesMut;
use shoal_proto::codec::{Hello, Record, RecordDecoder};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::config::ReceiverConfig;

/// [`read_hello`] under the connection's hello deadline: a peer that trickles bytes cannot
/// hold a connection past it.
pub(crate) async fn read_hello_by<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    decoder: &mut RecordDecoder,
    config: &ReceiverConfig,
    deadline: tokio::time::Instant,
) -> Result<Hello> {
    match tokio::time::timeout_at(deadline, read_hello(rd, buf, decoder, config.idle_timeout)).await
    {
        Ok(r) => r,
        Err(_) => Err(hello_late(config)),
    }
}

/// The error for a peer that did not complete its hello in time.
pub(crate) fn hello_late(config: &ReceiverConfig) -> anyhow::Error {
    anyhow::anyhow!(
        "no complete hello within {:.1} s of connecting (recv --hello-timeout); dropped",
        config.hello_timeout.as_secs_f64()
    )
}

/// Reads until the hello is decoded; every read is bounded by the idle timeout.
pub(crate) async fn read_hello<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    decoder: &mut RecordDecoder,
    timeout: Duration,
) -> Result<Hello> {
    loop {
        if let Some((Record::Hello(h), n)) = decoder.decode(buf)? {
            let _ = buf.split_to(n);
            return Ok(h);
        }
        if read_some(rd, buf, timeout).await? == 0 {
            decoder.finish()?;
        }
    }
}

/// Bytes asked of a stream per read: under glibc's mmap threshold (128 KiB, `cli/src/sys.rs`)
/// so each read buffer is reused from the heap rather than mapped (and zeroed) afresh.
pub(crate) const READ_SIZE: usize = 64 << 10;

/// One read into `buf`, bounded by `timeout`; 0 at end of stream.
pub(crate) async fn read_some<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    timeout: Duration,
) -> Result<usize> {
    read_sized(rd, buf, READ_SIZE, timeout).await
}

/// Like [`read_some`] with room for `want` more bytes: per-file streams size their reads to
/// the file, so thousands of open streams do not each hold a large buffer.
pub(crate) async fn read_sized<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    want: usize,
    timeout: Duration,
) -> Result<usize> {
    buf.reserve(want);
    match tokio::time::timeout(timeout, rd.read_buf(buf)).await {
        Ok(r) => Ok(r.context("connection failed")?),
        Err(_) => anyhow::bail!(
            "peer idle for {:.1} s (recv --idle-timeout); dropped",
            timeout.as_secs_f64()
        ),
    }
}
