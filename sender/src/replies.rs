//! The receiver's replies on a connection: acknowledgements (stop-and-wait arm) and the final
//! completion or error.

use std::time::Instant;

use anyhow::Result;
use bytes::BytesMut;
use shoal_proto::codec::{Reply, ReplyDecoder};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// Replies arriving on one stream, read by a background task.
pub(crate) struct Replies {
    /// Files the receiver has closed so far, from its acknowledgements.
    pub acks: watch::Receiver<u64>,
    final_reply: Option<oneshot::Receiver<FinalReply>>,
    /// The reply after a completion that announced a sync (`--fsync`).
    sync_reply: Option<oneshot::Receiver<Option<Reply>>>,
    /// Becomes true when the final reply is a failure (a refusal, a write error): sending
    /// stops at once instead of running into a window or a socket the receiver stopped
    /// reading.
    failed: watch::Receiver<bool>,
    task: JoinHandle<()>,
}

/// The receiver's final reply and when it was decoded (the run's clock stops at a completion's).
pub(crate) struct FinalReply {
    /// `None`: the connection closed without one.
    pub reply: Option<Reply>,
    pub decoded_at: Instant,
}

impl Replies {
    pub(crate) fn spawn<R: AsyncRead + Unpin + Send + 'static>(rd: R) -> Self {
        let (ack_tx, acks) = watch::channel(0);
        let (final_tx, final_rx) = oneshot::channel();
        let (sync_tx, sync_rx) = oneshot::channel();
        let (failed_tx, failed) = watch::channel(false);
        let task = tokio::spawn(read_replies(rd, ack_tx, final_tx, sync_tx, failed_tx));
        Self {
            acks,
            final_reply: Some(final_rx),
            sync_reply: Some(sync_rx),
            failed,
            task,
        }
    }

    /// Ready once the receiver's final reply is a failure; pending for ever otherwise. The
    /// sending loops race it: a refusal or a write error at the receiver reaches the sender
    /// as soon as its reply does.
    pub(crate) fn failure(&self) -> impl std::future::Future<Output = ()> + 'static {
        let mut failed = self.failed.clone();
        async move {
            if failed.wait_for(|&f| f).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Waits for the final reply.
    pub(crate) async fn final_reply(&mut self) -> FinalReply {
        let closed = || FinalReply {
            reply: None,
            decoded_at: Instant::now(),
        };
        match self.final_reply.take() {
            Some(rx) => rx.await.unwrap_or_else(|_| closed()),
            None => closed(),
        }
    }

    /// After a completion with `sync_follows`: waits for the sync's report (`None`: the
    /// connection closed without one).
    pub(crate) async fn sync_reply(&mut self) -> Option<Reply> {
        match self.sync_reply.take() {
            Some(rx) => rx.await.ok().flatten(),
            None => None,
        }
    }

    /// Waits until the receiver acknowledged `files` files; false if the stream ended first.
    pub(crate) async fn wait_acks(&mut self, files: u64) -> Result<bool> {
        Ok(self.acks.wait_for(|&n| n >= files).await.is_ok())
    }
}

impl Drop for Replies {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn read_replies<R: AsyncRead + Unpin>(
    mut rd: R,
    acks: watch::Sender<u64>,
    final_tx: oneshot::Sender<FinalReply>,
    sync_tx: oneshot::Sender<Option<Reply>>,
    failed: watch::Sender<bool>,
) {
    let mut decoder = ReplyDecoder;
    let mut buf = BytesMut::with_capacity(4096);
    let reply = next_final(&mut rd, &mut decoder, &mut buf, &acks).await;
    let sync_follows = matches!(&reply, Some(Reply::Completion(c)) if c.sync_follows);
    let failure = match &reply {
        Some(Reply::Error(_)) => true,
        Some(Reply::Completion(c)) => !c.errors.is_empty(),
        _ => false,
    };
    let _ = final_tx.send(FinalReply {
        reply,
        decoded_at: Instant::now(),
    });
    if failure {
        failed.send_replace(true);
    }
    if sync_follows {
        let _ = sync_tx.send(next_final(&mut rd, &mut decoder, &mut buf, &acks).await);
    }
}

/// Reads up to the next reply that is not an acknowledgement (`None`: the stream ended).
async fn next_final<R: AsyncRead + Unpin>(
    rd: &mut R,
    decoder: &mut ReplyDecoder,
    buf: &mut BytesMut,
    acks: &watch::Sender<u64>,
) -> Option<Reply> {
    loop {
        match decoder.decode(buf) {
            Ok(Some((Reply::Ack(n), used))) => {
                let _ = buf.split_to(used);
                acks.send_replace(n);
                continue;
            }
            Ok(Some((reply, used))) => {
                let _ = buf.split_to(used);
                return Some(reply);
            }
            Ok(None) => {}
            Err(e) => return Some(Reply::Error(format!("unreadable reply: {e}"))),
        }
        match rd.read_buf(buf).await {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// What a failed run's error reply says the receiver kept: "kept K complete file(s) (B
/// bytes)", which the receiver appends to every failure it reports after a run started.
pub(crate) fn kept_by_receiver(message: &str) -> Option<(u64, u64)> {
    let at = message.rfind(KEPT)?;
    let rest = &message[at + KEPT.len()..];
    let (files, rest) = rest.split_once(" complete file(s) (")?;
    let (bytes, _) = rest.split_once(" bytes)")?;
    Some((files.parse().ok()?, bytes.parse().ok()?))
}

const KEPT: &str = "the receiver kept ";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_the_receiver_kept() {
        let m = "receiver refused the run: cannot write \"a\": disk full; the receiver kept 38 complete file(s) (155648 bytes)";
        assert_eq!(kept_by_receiver(m), Some((38, 155_648)));
        assert_eq!(kept_by_receiver("peer idle"), None);
    }
}
