//! A connection's end of its part in a run: waiting for the others, giving up on them after
//! the idle timeout, and the run's one completion.

use std::time::Duration;

use shoal_proto::codec::Completion;
use tokio::io::AsyncWrite;

use super::{merge_facts, ConnEnd, Finished, Hub, Membership};
use crate::run;

impl Membership {
    /// Ends this connection's part and, once the run has ended, sends its sender the run's
    /// completion (then, with `--fsync`, the sync's report); returns the completion.
    pub(crate) async fn finish_and_reply<W: AsyncWrite + Unpin>(
        self,
        hub: &Hub,
        end: ConnEnd,
        idle: Duration,
        wr: &mut W,
    ) -> Completion {
        let Finished {
            mut completion,
            sync,
        } = self.finish(hub, end, idle).await;
        run::reply(wr, &mut completion, sync).await;
        completion
    }

    /// Ends this connection's part; returns the run's end once every connection has ended (or
    /// the run failed or gave up waiting).
    async fn finish(self, hub: &Hub, end: ConnEnd, idle: Duration) -> Finished {
        let Membership { run, batches } = self;
        // This connection's writer handle must go before the writer can finish.
        drop(batches);
        let finalize = {
            let mut st = run.state.lock().expect("run lock");
            st.finished += 1;
            st.peak_streams = st.peak_streams.max(end.peak_streams);
            merge_facts(&mut st.facts, end.facts);
            if !end.errors.is_empty() || end.stopped {
                st.errors.extend(end.errors);
                st.closed = true;
                run.cancel.cancel();
            }
            run.take_finalize(&mut st)
        };
        if finalize {
            return run.finalize(hub).await;
        }
        let mut done = run.done.subscribe();
        if let Ok(Ok(c)) = tokio::time::timeout(idle, done.wait_for(Option::is_some)).await {
            return c.clone().expect("waited for Some");
        }
        // The other connections did not all arrive or finish in time: give up on them.
        let finalize = {
            let mut st = run.state.lock().expect("run lock");
            if !st.closed {
                let missing = run.hello.conn_count - st.joined;
                let message = format!(
                    "gave up after {} s: {} of {} connections arrived, {} finished",
                    idle.as_secs(),
                    st.joined,
                    run.hello.conn_count,
                    st.finished
                );
                st.errors.push(message);
                if missing == 0 {
                    st.errors.push("a connection stalled".into());
                }
                st.closed = true;
            }
            run.cancel.cancel();
            run.take_finalize(&mut st)
        };
        if finalize {
            return run.finalize(hub).await;
        }
        // Someone else finalizes once the cancelled connections have ended.
        let c = done.wait_for(Option::is_some).await;
        match c {
            Ok(c) => c.clone().expect("waited for Some"),
            Err(_) => Finished::failed("the run ended without a completion"),
        }
    }
}
