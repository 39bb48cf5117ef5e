//! `--stats-interval`: samples every connection's statistics into a time-series CSV, so a
//! user can plot cwnd and RTT over a run.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::probe::Probe;

pub(crate) struct Sampler {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

/// Starts sampling `probes` every `every` into `out` (CSV, header first).
pub(crate) fn spawn(
    every: Duration,
    out: &Path,
    probes: Arc<Mutex<Vec<(u16, Probe)>>>,
    t0: Instant,
) -> Result<Sampler> {
    let mut w =
        csv::Writer::from_path(out).with_context(|| format!("cannot create {}", out.display()))?;
    w.write_record([
        "t_s",
        "conn",
        "rtt_ms",
        "min_rtt_ms",
        "cwnd_bytes",
        "retransmits",
        "lost_bytes",
        "congestion_events",
        "sent_packets",
        "delivery_rate_bytes_per_s",
        "bytes_sent",
        "bytes_acked",
    ])?;
    let (stop, mut stopped) = oneshot::channel();
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(every.max(Duration::from_millis(1)));
        loop {
            let last = tokio::select! {
                _ = tick.tick() => false,
                _ = &mut stopped => true,
            };
            let t = t0.elapsed().as_secs_f64();
            let snapshot: Vec<(u16, Probe)> = probes.lock().expect("probes").clone();
            for (conn, probe) in snapshot {
                let s = probe.stats();
                let _ = w.write_record([
                    format!("{t:.3}"),
                    conn.to_string(),
                    format!("{:.3}", s.rtt_ms),
                    format!("{:.3}", s.min_rtt_ms),
                    s.cwnd_bytes.to_string(),
                    s.retransmits.to_string(),
                    s.lost_bytes.to_string(),
                    s.congestion_events.to_string(),
                    s.sent_packets.to_string(),
                    s.delivery_rate.to_string(),
                    s.bytes_sent.to_string(),
                    s.bytes_acked.to_string(),
                ]);
            }
            if last {
                let _ = w.flush();
                return;
            }
        }
    });
    Ok(Sampler { stop, task })
}

impl Sampler {
    /// Takes a last sample and closes the file.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}
