//! The receiving host's side of the path probe (`shoal probe`, a two-host sweep's path
//! measurements): sinks or sources one bulk flow of probe frames on an authenticated control
//! connection. Bounded in time and bytes ([`MAX_PROBE_SECONDS`], [`MAX_PROBE_BYTES`]), nothing
//! written to disk; the frames go straight from the socket to nowhere and back.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::{Buf, BytesMut};
use shoal_proto::control::{self, Reply};
use shoal_proto::probe::{
    AckedFlow, BulkReport, GoodputMeter, KIND_PROBE_DATA, MAX_PROBE_BYTES, MAX_PROBE_FRAME,
    MAX_PROBE_SECONDS, PROBE_FRAME, SAMPLE_INTERVAL_MS,
};
use shoal_transport::stats;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::read::read_some;

/// Longest the source waits for its last bytes to be acknowledged before it reports.
const ACK_WAIT: Duration = Duration::from_secs(10);

/// `probe-sink`: reads probe frames until the empty one, and reports what arrived.
pub(crate) async fn sink<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    warmup_ms: u64,
    idle: Duration,
) -> Result<Reply> {
    let start = Instant::now();
    let now = || start.elapsed().as_secs_f64();
    let mut meter = GoodputMeter::new(warmup_ms.min(60_000) as f64 / 1e3);
    loop {
        while let Some((kind, body, n)) = control::decode_frame(buf, MAX_PROBE_FRAME)? {
            if kind != KIND_PROBE_DATA {
                bail!("probe sink: unexpected frame kind {kind} inside the flow");
            }
            let len = body.len() as u64;
            buf.advance(n);
            if len == 0 {
                return Ok(bulk_reply(meter.finish(now())));
            }
            meter.add(now(), len);
            if meter.bytes() > MAX_PROBE_BYTES {
                bail!("probe sink: more than {MAX_PROBE_BYTES} bytes; flow refused");
            }
        }
        if start.elapsed().as_secs_f64() > MAX_PROBE_SECONDS + 5.0 {
            bail!("probe sink: flow longer than {MAX_PROBE_SECONDS} s; refused");
        }
        if read_some(rd, buf, idle).await? == 0 {
            bail!("probe sink: connection closed inside the flow");
        }
    }
}

/// `probe-source`: sends probe frames for `duration_ms` (capped), the empty one, and reports
/// this end's TCP_INFO once every byte was acknowledged, with what it acknowledged over the
/// flow ([`AckedFlow`], after a warm-up of `warmup_ms`). A peer that stops reading for
/// `idle` ends the flow.
pub(crate) async fn source<W: AsyncWrite + Unpin>(
    wr: &mut W,
    duration_ms: u64,
    warmup_ms: u64,
    socket: Option<&OwnedFd>,
    idle: Duration,
) -> Result<Reply> {
    let duration =
        Duration::from_millis(duration_ms).min(Duration::from_secs_f64(MAX_PROBE_SECONDS));
    let mut frame = BytesMut::with_capacity(PROBE_FRAME + 5);
    control::encode_frame(KIND_PROBE_DATA, &vec![0u8; PROBE_FRAME], &mut frame);
    let start = Instant::now();
    let mut sent = 0u64;
    // TCP_INFO every SAMPLE_INTERVAL_MS on a second handle, while the writes may block.
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = socket.and_then(|s| s.try_clone().ok()).map(|sock| {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut out = Vec::new();
            let mut tick = tokio::time::interval(Duration::from_millis(SAMPLE_INTERVAL_MS));
            // Bounded by the flow's own limit, whatever happens to the writer.
            while !stop.load(Ordering::Relaxed)
                && start.elapsed().as_secs_f64() < MAX_PROBE_SECONDS + 20.0
            {
                out.extend(stats::probe_sample(&sock, start.elapsed().as_secs_f64()));
                tick.tick().await;
            }
            out
        })
    });
    while start.elapsed() < duration && sent < MAX_PROBE_BYTES {
        tokio::time::timeout(idle, wr.write_all(&frame))
            .await
            .map_err(|_| anyhow::anyhow!("probe source: peer not reading for {idle:?}"))?
            .context("probe source: sending")?;
        sent += PROBE_FRAME as u64;
    }
    let mut end = BytesMut::new();
    control::encode_frame(KIND_PROBE_DATA, &[], &mut end);
    wr.write_all(&end).await?;
    wr.flush().await?;
    let mut report = BulkReport {
        bytes: sent,
        seconds: start.elapsed().as_secs_f64(),
        ..Default::default()
    };
    if let Some(sock) = socket {
        // Retransmissions count only once the last segment is acknowledged.
        let waited = Instant::now();
        while !stats::tcp_all_acked(sock).unwrap_or(true) && waited.elapsed() < ACK_WAIT {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        report.sender_tcp = stats::probe_sender_tcp(sock);
        stop.store(true, Ordering::Relaxed);
        if let Some(task) = sampler {
            let mut samples = task.await.unwrap_or_default();
            samples.extend(stats::probe_sample(sock, start.elapsed().as_secs_f64()));
            report.acked = AckedFlow::of(&samples, warmup_ms.min(60_000) as f64 / 1e3);
        }
    }
    Ok(bulk_reply(report))
}

fn bulk_reply(report: BulkReport) -> Reply {
    Reply {
        ok: true,
        bulk: Some(report),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::control::KIND_JSON;
    use tokio::io::AsyncWriteExt;

    fn frame(kind: u8, body: &[u8]) -> BytesMut {
        let mut out = BytesMut::new();
        control::encode_frame(kind, body, &mut out);
        out
    }

    /// Feeds `bytes` to a sink (then closes the writing side) and returns its outcome.
    async fn sink_of(bytes: Vec<u8>) -> Result<Reply> {
        let (mut a, mut b) = tokio::io::duplex(1 << 20);
        let writer = tokio::spawn(async move {
            let _ = a.write_all(&bytes).await;
            let _ = a.shutdown().await;
        });
        let mut buf = BytesMut::new();
        let out = sink(&mut b, &mut buf, 0, Duration::from_secs(5)).await;
        writer.await.unwrap();
        out
    }

    #[tokio::test]
    async fn a_sink_counts_filler_until_the_empty_frame() {
        let mut bytes = Vec::new();
        for _ in 0..3 {
            bytes.extend_from_slice(&frame(KIND_PROBE_DATA, &[7u8; 1000]));
        }
        bytes.extend_from_slice(&frame(KIND_PROBE_DATA, &[]));
        let reply = sink_of(bytes).await.unwrap();
        assert!(reply.ok);
        assert_eq!(reply.bulk.unwrap().bytes, 3000);
    }

    #[tokio::test]
    async fn a_sink_refuses_other_frames_oversized_frames_and_a_cut_flow() {
        let mut json_inside = frame(KIND_PROBE_DATA, &[1u8; 10]).to_vec();
        json_inside.extend_from_slice(&frame(KIND_JSON, b"{\"op\":\"info\"}"));
        let e = sink_of(json_inside).await.unwrap_err();
        assert!(
            format!("{e:#}").contains("unexpected frame kind 1"),
            "{e:#}"
        );

        // Refused as soon as the length is in, before its bytes arrive.
        let e = sink_of((MAX_PROBE_FRAME + 1).to_be_bytes().to_vec())
            .await
            .unwrap_err();
        assert!(format!("{e:#}").contains("larger than the limit"), "{e:#}");

        let e = sink_of(frame(KIND_PROBE_DATA, &[1u8; 10]).to_vec())
            .await
            .unwrap_err();
        assert!(format!("{e:#}").contains("closed inside the flow"), "{e:#}");
    }
}
