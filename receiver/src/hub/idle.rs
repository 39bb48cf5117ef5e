//! The idle watch of a run: no record accepted for the idle timeout fails it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Run;

/// Fails a run that accepts no record for `idle` (`recv --idle-timeout`), whatever keeps it
/// from progressing (a peer that trickles a record a byte at a time, a window that lets
/// nothing through, a writer that does not write): no run waits for ever. Ends with the run.
pub(super) async fn watch_progress(run: std::sync::Weak<Run>, idle: Duration) {
    let tick = (idle / 4).max(Duration::from_millis(50));
    let (mut seen, mut since) = (0, Instant::now());
    loop {
        tokio::time::sleep(tick).await;
        let Some(run) = run.upgrade() else { return };
        if run.cancel.is_cancelled() {
            return;
        }
        let now = run.accepted.load(Ordering::Relaxed);
        if now != seen {
            (seen, since) = (now, Instant::now());
            continue;
        }
        if since.elapsed() < idle {
            continue;
        }
        let mut st = run.state.lock().expect("run lock");
        if st.finalizing || st.closed {
            return;
        }
        st.errors.push(format!(
            "no record accepted for {:.1} s (recv --idle-timeout): the run made no progress",
            idle.as_secs_f64()
        ));
        st.closed = true;
        run.cancel.cancel();
        return;
    }
}
