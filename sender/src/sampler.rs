//! `--stats-interval`: samples every connection's statistics into the sender's time series
//! (`--stats-out`), and what the receiver reported ready into the receiver's series
//! (`--trace-dir`'s `receiver-series.csv`), on one tick, so a user can plot cwnd, RTT and
//! goodput over a run. Every row starts with the run id; columns in docs/csv-schema.md.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::ready::Ready;
use crate::stats_handle::StatsHandle;

pub(crate) struct Sampler {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Vec<String>>,
}

/// What to sample and where to write it.
pub(crate) struct Sources<'a> {
    pub run_id: String,
    pub every: Duration,
    /// The run's clock started here (`t_s` counts from it).
    pub t0: Instant,
    pub probes: Arc<Mutex<Vec<(u16, StatsHandle)>>>,
    pub ready: Arc<Ready>,
    /// The run's connections: sampling ends with a sample after every one of them has its
    /// completion report (what follows, e.g. QUIC's closing handshake, is not the transfer).
    pub connections: u16,
    /// The sender's series (`--stats-out`).
    pub sender_out: Option<&'a Path>,
    /// The receiver's series.
    pub receiver_out: Option<&'a Path>,
}

const SENDER_COLUMNS: [&str; 15] = [
    "run_id",
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
    "interval_goodput_mbit_s",
    "interval_retransmits",
];

const RECEIVER_COLUMNS: [&str; 5] = [
    "run_id",
    "t_s",
    "files_closed",
    "bytes_closed",
    "interval_goodput_mbit_s",
];

fn writer(path: &Path, header: &[&str]) -> Result<csv::Writer<std::fs::File>> {
    let mut w = csv::Writer::from_path(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    w.write_record(header)?;
    Ok(w)
}

/// Keeps the first failure of each file (`what` names it).
fn note(lost: &mut Vec<String>, what: &str, r: Result<(), String>) {
    if let Err(e) = r {
        if !lost.iter().any(|l| l.starts_with(what)) {
            lost.push(format!("{what}: {e}"));
        }
    }
}

/// Mbit/s of `bytes` over `seconds` (0 for an empty interval).
fn mbit_s(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / 1e6 / seconds
    } else {
        0.0
    }
}

/// Starts sampling every `s.every` (files created, headers first).
pub(crate) fn spawn(s: Sources) -> Result<Sampler> {
    let mut sender = s
        .sender_out
        .map(|p| writer(p, &SENDER_COLUMNS))
        .transpose()?;
    let mut receiver = s
        .receiver_out
        .map(|p| writer(p, &RECEIVER_COLUMNS))
        .transpose()?;
    let name = |p: Option<&Path>| p.map(|p| format!("cannot write {}", p.display()));
    let sender_name = name(s.sender_out).unwrap_or_default();
    let receiver_name = name(s.receiver_out).unwrap_or_default();
    let Sources {
        run_id,
        every,
        t0,
        probes,
        ready,
        connections,
        ..
    } = s;
    let (stop, mut stopped) = oneshot::channel();
    let task = tokio::spawn(async move {
        // The first failure of each file (a full disk, /dev/full): reported, never dropped.
        let mut lost: Vec<String> = Vec::new();

        let mut tick = tokio::time::interval(every.max(Duration::from_millis(1)));
        // The previous sample: its time, each connection's (bytes acked, retransmits), and the
        // receiver's bytes.
        let mut prev_t = 0.0;
        let mut prev_conn: HashMap<u16, (u64, u64)> = HashMap::new();
        let mut prev_bytes = 0u64;
        loop {
            let last = tokio::select! {
                _ = tick.tick() => false,
                _ = &mut stopped => true,
            };
            let t = t0.elapsed().as_secs_f64();
            let dt = t - prev_t;
            if let Some(w) = sender.as_mut() {
                let snapshot: Vec<(u16, StatsHandle)> = probes.lock().expect("probes").clone();
                for (conn, probe) in snapshot {
                    let s = probe.stats();
                    let (acked0, retx0) = prev_conn
                        .insert(conn, (s.bytes_acked, s.retransmits))
                        .unwrap_or_default();
                    let r = w.write_record([
                        run_id.clone(),
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
                        format!("{:.3}", mbit_s(s.bytes_acked.saturating_sub(acked0), dt)),
                        s.retransmits.saturating_sub(retx0).to_string(),
                    ]);
                    note(&mut lost, &sender_name, r.map_err(|e| e.to_string()));
                }
            }
            if let Some(w) = receiver.as_mut() {
                let (files, bytes) = ready.get();
                let r = w.write_record([
                    run_id.clone(),
                    format!("{t:.3}"),
                    files.to_string(),
                    bytes.to_string(),
                    format!("{:.3}", mbit_s(bytes.saturating_sub(prev_bytes), dt)),
                ]);
                note(&mut lost, &receiver_name, r.map_err(|e| e.to_string()));
                prev_bytes = bytes;
            }
            prev_t = t;
            if last || ready.completions() >= u64::from(connections) {
                if let Some(w) = sender.as_mut() {
                    note(
                        &mut lost,
                        &sender_name,
                        w.flush().map_err(|e| e.to_string()),
                    );
                }
                if let Some(w) = receiver.as_mut() {
                    note(
                        &mut lost,
                        &receiver_name,
                        w.flush().map_err(|e| e.to_string()),
                    );
                }
                return lost;
            }
        }
    });
    Ok(Sampler { stop, task })
}

impl Sampler {
    /// Takes a last sample (unless sampling ended after every connection's completion report)
    /// and closes the files; returns what could not be written, one line per file.
    pub(crate) async fn stop(self) -> Vec<String> {
        let _ = self.stop.send(());
        self.task
            .await
            .unwrap_or_else(|e| vec![format!("the series writer failed: {e}")])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn both_series_carry_the_run_id_and_interval_goodput() {
        let t = tempfile::tempdir().unwrap();
        let (snd, rcv) = (t.path().join("s.csv"), t.path().join("r.csv"));
        let ready = Arc::new(Ready::default());
        let sampler = spawn(Sources {
            run_id: "ab12".into(),
            every: Duration::from_millis(20),
            t0: Instant::now(),
            probes: Arc::new(Mutex::new(Vec::new())),
            ready: ready.clone(),
            connections: 1,
            sender_out: Some(&snd),
            receiver_out: Some(&rcv),
        })
        .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        ready.add(2, 1_000_000);
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The completion report ends the sampling: no rows after it.
        ready.complete(2, 1_000_000);
        tokio::time::sleep(Duration::from_millis(80)).await;
        let rows_then = std::fs::read_to_string(&rcv).unwrap().lines().count();
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(
            std::fs::read_to_string(&rcv).unwrap().lines().count(),
            rows_then
        );
        sampler.stop().await;
        let s = std::fs::read_to_string(&snd).unwrap();
        assert!(s.starts_with("run_id,t_s,conn,"), "{s}");
        assert!(s
            .trim_end()
            .ends_with("interval_goodput_mbit_s,interval_retransmits"));
        let r = std::fs::read_to_string(&rcv).unwrap();
        let rows: Vec<&str> = r.lines().skip(1).collect();
        assert!(rows.len() >= 3, "{r}");
        assert!(rows.iter().all(|l| l.starts_with("ab12,")), "{r}");
        assert!(rows.last().unwrap().contains(",2,1000000,"), "{r}");
        let goodput: f64 = rows
            .iter()
            .map(|l| l.rsplit(',').next().unwrap().parse::<f64>().unwrap())
            .sum();
        assert!(goodput > 0.0, "{r}");
    }
}
