//! A connection's end: what its sending loop reports, and the receiver's verdict read after
//! the last byte (its stated reason wins over a local "broken pipe").

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use shoal_pipeline::queue::WalkError;
use shoal_pipeline::reader::SourceFileError;
use shoal_proto::codec::{Completion, Reply};

use crate::replies::Replies;
use crate::waits::Waits;

/// What one connection's sending loop (bundle or per-file streams) reports.
pub(crate) struct Sent {
    /// The receiver's completion report.
    pub completion: Completion,
    /// When the completion report was decoded (see `clock`).
    pub completed_at: Instant,
    /// The receiver's `--fsync` time, reported after the completion.
    pub fsync: Option<Duration>,
    /// Most per-file streams outstanding at once (0 in bundle modes).
    pub peak_streams: u64,
    /// Content bytes this connection carried (its end marker's count).
    pub bytes: u64,
    pub waits: Waits,
}

/// Sending stopped because the receiver's final reply, a failure, came first (its reason
/// follows from [`finish_with_reply`]).
pub(crate) fn stopped_by_receiver() -> anyhow::Error {
    anyhow!("the receiver ended the run before every file was sent")
}

/// How long to wait for the receiver's reason after a write fails.
const REASON_GRACE: Duration = Duration::from_secs(3);

/// The receiver's verdict on one connection.
pub(crate) struct Completed {
    pub completion: Completion,
    /// When the completion report was decoded: the run's clock stops here.
    pub decoded_at: Instant,
    /// `--fsync` at the receiver: its report follows the completion.
    pub fsync: Option<Duration>,
}

/// Turns what happened on the sending side plus the receiver's final reply into the run's
/// result: the receiver's stated reason wins over a local "broken pipe".
pub(crate) async fn finish_with_reply(
    sent: Result<()>,
    reader_result: Result<()>,
    replies: &mut Replies,
) -> Result<Completed> {
    let last = match (sent, reader_result) {
        (Ok(()), Ok(())) => replies.final_reply().await,
        (_, Err(e)) => return Err(e),
        // A source file that cannot be read, or a walk that failed, is our failure, not the
        // receiver's: no reason to wait for one (the reader's error reaches here through
        // `sent`). Waiting let a receiver's idle timeout answer first and hide the cause.
        (Err(e), Ok(())) if SourceFileError::is_in(&e) || WalkError::is_in(&e) => return Err(e),
        (Err(e), Ok(())) => match tokio::time::timeout(REASON_GRACE, replies.final_reply()).await {
            Ok(last) if last.reply.is_some() => last,
            _ => return Err(e),
        },
    };
    let completion = final_reply(last.reply)?;
    let fsync = match completion.sync_follows {
        false => None,
        true => Some(sync_reply(replies.sync_reply().await)?),
    };
    Ok(Completed {
        completion,
        decoded_at: last.decoded_at,
        fsync,
    })
}

/// Turns the receiver's final reply into the run's result.
fn final_reply(reply: Option<Reply>) -> Result<Completion> {
    match reply {
        Some(Reply::Completion(c)) if c.errors.is_empty() => anyhow::Ok(c),
        Some(Reply::Completion(c)) => bail!("receiver reported: {}", c.errors.join("; ")),
        Some(Reply::Error(msg)) => bail!("receiver refused the run: {msg}"),
        Some(Reply::Ack(_)) => bail!("receiver sent an acknowledgement where a report was due"),
        Some(Reply::Synced(_)) => bail!("receiver sent a sync report before its completion"),
        None => Err(anyhow!(
            "receiver closed the connection without a completion report"
        )),
    }
    .context("transfer failed")
}

/// The reply after a completion that announced a sync (`--fsync`).
fn sync_reply(reply: Option<Reply>) -> Result<Duration> {
    match reply {
        Some(Reply::Synced(micros)) => anyhow::Ok(Duration::from_micros(micros)),
        Some(Reply::Error(msg)) => bail!("receiver reported: {msg}"),
        Some(_) => bail!("receiver sent something else where its sync report was due"),
        None => bail!("receiver closed the connection before its sync report"),
    }
    .context("transfer failed after every file was ready")
}
