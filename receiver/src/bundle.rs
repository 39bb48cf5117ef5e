//! Bundled records on one stream (TLS/TCP, plain TCP, or one QUIC stream): the bytes go to the
//! records → write-ops stage (`stage`) until the end marker; then the completion. With `acks`
//! (the `tcp-wait` control arm) the receiver acknowledges files as they become ready.

use anyhow::anyhow;
use bytes::BytesMut;
use shoal_proto::codec::{self, RecordDecoder, StreamDecoder};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::claims::Claims;
use crate::config::ReceiverConfig;
use crate::hub::{ConnEnd, Membership};
use crate::read::read_some;
use crate::run::TransportFacts;
use crate::stage::{nothing_after_end, send_batch, Intake, PumpError};

/// Receives one connection's records after its hello, feeding the run's writer. With `acks`
/// (the stop-and-wait arm) each file is acknowledged once written and closed. Returns what the
/// connection saw and the write half, for the reply.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn receive<R, W>(
    config: &ReceiverConfig,
    member: &Membership,
    rd: &mut R,
    wr: W,
    buf: BytesMut,
    decoder: RecordDecoder,
    acks: bool,
    facts: TransportFacts,
) -> (ConnEnd, W)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    // The stop-and-wait arm: the writer signals each file after closing it; this task turns
    // the signals into acknowledgements while the pump keeps reading. The write half comes
    // back when the signals end.
    let (signal, acker) = if acks {
        let (tx, mut rx) = mpsc::unbounded_channel::<()>();
        let mut w = wr;
        let task = tokio::spawn(async move {
            let mut acked = 0u64;
            while rx.recv().await.is_some() {
                acked += 1;
                let mut out = BytesMut::new();
                codec::encode_ack(acked, &mut out);
                if w.write_all(&out).await.is_err() || w.flush().await.is_err() {
                    break;
                }
            }
            w
        });
        (Some(tx), Either::Task(task))
    } else {
        (None, Either::Ready(wr))
    };
    let pumped = pump(config, member, rd, buf, decoder, signal).await;
    let wr = match acker {
        Either::Ready(w) => w,
        // The pump dropped its signal sender; the last one goes with the writer's last op.
        Either::Task(task) => task.await.expect("acknowledgement task panicked"),
    };
    let (errors, stopped) = match pumped {
        Ok(()) => (Vec::new(), false),
        Err(PumpError::WriterGone) => (Vec::new(), true),
        Err(PumpError::Other(e)) => (vec![format!("{e:#}")], false),
    };
    let end = ConnEnd {
        errors,
        stopped,
        peak_streams: 0,
        facts,
    };
    (end, wr)
}

enum Either<T, W> {
    Task(tokio::task::JoinHandle<W>),
    Ready(T),
}

/// Feeds what arrives to the stage, one batch per read, until the end marker.
async fn pump<R: AsyncRead + Unpin>(
    config: &ReceiverConfig,
    member: &Membership,
    rd: &mut R,
    mut buf: BytesMut,
    decoder: RecordDecoder,
    signal: Option<mpsc::UnboundedSender<()>>,
) -> Result<(), PumpError> {
    let run = &member.run;
    // This connection's own tally, for its end marker; the run's tally is in `run.claims`.
    let mut mine = Claims::default();
    let mut intake = Intake::new(StreamDecoder::bundle(decoder), signal);
    loop {
        let mut batch = intake.take(run, &mut buf, &mut mine);
        let failed = batch.result();
        if !batch.ops.is_empty() {
            send_batch(
                config,
                &run.budget,
                &run.write_wait,
                &member.batches,
                batch.ops,
                batch.bytes,
            )
            .await?;
        }
        failed?;
        if let Some(end) = batch.end {
            mine.check_own_end(end)?;
        }
        if batch.end.is_some() {
            return nothing_after_end(&buf);
        }
        let read = tokio::select! {
            r = read_some(rd, &mut buf, config.idle_timeout) => r?,
            _ = run.cancel.cancelled() => return Err(if run.writer_failed() {
                // The writer's report names the cause; stop reading now rather than wait for
                // data the sender holds back (tcp-wait waits for an acknowledgement).
                PumpError::WriterGone
            } else {
                anyhow!("stopped: the run failed on another connection").into()
            }),
        };
        if read == 0 {
            intake.finish(&buf)?;
            return Err(anyhow!("stream closed early").into());
        }
    }
}
