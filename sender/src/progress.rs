//! Live progress of a run (`send --interval`): counters the sending loops bump, and a task
//! that prints one line per interval on stderr (text, or one JSON object per line), plus the
//! "so far" line of an interrupted run.

use crate::ready::Ready;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shoal_pipeline::queue::WorkQueue;
use shoal_proto::units::human_bytes;
use shoal_transport::config::Mode;
use shoal_transport::stats::ConnStats;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::stats_handle::StatsHandle;

/// How `send --interval` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressConfig {
    pub every: Duration,
    /// One JSON object per line instead of text.
    pub json: bool,
}

/// What the sending loops have done so far, over every connection of the run.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Files whose last byte was handed to the transport.
    files_sent: AtomicU64,
    /// Record bytes handed to the transport (file contents plus a few bytes of framing per
    /// file and folder; shown capped at the run's content bytes).
    bytes_sent: AtomicU64,
    /// What the receiver reported ready (tcp-wait acknowledgements; per-file streams the
    /// receiver finished; the completion report): read by the progress lines and sampled into
    /// the receiver's series. The bundled modes have no per-file reply.
    pub ready: Arc<Ready>,
}

impl Counters {
    pub(crate) fn sent(&self, bytes: usize, file_done: bool) {
        self.bytes_sent.fetch_add(bytes as u64, Ordering::Relaxed);
        if file_done {
            self.files_sent.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The run's totals: what the walk has found so far (all of the tree once it is over).
#[derive(Debug, Clone)]
pub(crate) struct Totals {
    walk: Arc<WorkQueue>,
    /// Whether the mode has per-file replies (so `files_ready` means something).
    pub ready_known: bool,
}

impl Totals {
    pub(crate) fn new(mode: Mode, walk: Arc<WorkQueue>) -> Self {
        Totals {
            walk,
            ready_known: ready_known(mode),
        }
    }
}

/// Whether `mode` has per-file replies.
pub(crate) fn ready_known(mode: Mode) -> bool {
    matches!(mode, Mode::TcpWait | Mode::TcpStreams | Mode::QuicStreams)
}

/// One interval's figures.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Line {
    /// "interval", or "interrupted" for the figures of a run stopped by Ctrl-C.
    pub event: &'static str,
    /// Seconds since the run started connecting.
    pub t_s: f64,
    pub files_sent: u64,
    /// `None` in the bundled modes (no per-file reply).
    pub files_ready: Option<u64>,
    pub files_total: u64,
    pub bytes_sent: u64,
    pub bytes_total: u64,
    /// Whether the walk is over: until then the totals are what it found so far.
    pub walk_done: bool,
    /// Bytes the receiver acknowledged so far, summed over connections (the row's
    /// `bytes_acked`: TCP payload; QUIC acknowledged packets, headers included).
    pub bytes_acked: u64,
    /// Delivered over this interval, as iperf3 counts: 10^6 bytes/s and 10^6 bit/s of
    /// `bytes_acked`, not of bytes handed to the transport.
    pub mb_per_s: f64,
    pub mbit_per_s: f64,
    /// Bytes left at the average rate so far; `None` before anything was sent.
    pub eta_s: Option<f64>,
    pub connections: u64,
    /// Summed over connections.
    pub cwnd_bytes: u64,
    /// Averaged over connections.
    pub rtt_ms: f64,
    /// Summed over connections: over this interval, and since the start.
    pub retransmits: u64,
    pub retransmits_total: u64,
}

/// What the previous line read: its time, acknowledged bytes and retransmits.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Last {
    t_s: f64,
    acked: u64,
    retransmits: u64,
}

impl Line {
    fn take(
        t0: Instant,
        counters: &Counters,
        totals: &Totals,
        probes: &Mutex<Vec<(u16, StatsHandle)>>,
        last: &mut Last,
    ) -> Line {
        let t_s = t0.elapsed().as_secs_f64();
        let found = totals.walk.found();
        // The framing makes the records a little longer than the contents: never past 100%.
        let bytes_sent = counters.bytes_sent.load(Ordering::Relaxed).min(found.bytes);
        let stats: Vec<ConnStats> = probes
            .lock()
            .expect("probes")
            .iter()
            .map(|(_, p)| p.stats())
            .collect();
        let acked: u64 = stats.iter().map(|s| s.bytes_acked).sum();
        let retransmits: u64 = stats.iter().map(|s| s.retransmits).sum();
        let before = std::mem::replace(
            last,
            Last {
                t_s,
                acked,
                retransmits,
            },
        );
        let rate = acked.saturating_sub(before.acked) as f64 / (t_s - before.t_s).max(1e-3);
        let average = bytes_sent as f64 / t_s.max(1e-3);
        let left = found.bytes.saturating_sub(bytes_sent) as f64;
        let n = stats.len().max(1) as f64;
        Line {
            event: "interval",
            t_s,
            files_sent: counters.files_sent.load(Ordering::Relaxed),
            files_ready: totals.ready_known.then(|| counters.ready.get().0),
            files_total: found.files,
            bytes_sent,
            bytes_total: found.bytes,
            walk_done: found.done,
            bytes_acked: acked,
            mb_per_s: rate / 1e6,
            mbit_per_s: rate * 8.0 / 1e6,
            // Before the walk is over the totals are what it found so far: no ETA yet.
            eta_s: (bytes_sent > 0 && found.done).then(|| left / average),
            connections: stats.len() as u64,
            cwnd_bytes: stats.iter().map(|s| s.cwnd_bytes).sum(),
            rtt_ms: stats.iter().map(|s| s.rtt_ms).sum::<f64>() / n,
            retransmits: retransmits.saturating_sub(before.retransmits),
            retransmits_total: retransmits,
        }
    }

    /// The text form, e.g. `  3.0 s  files 1200/8192 ready  4.7 MiB/32.0 MiB  delivered
    /// 1.58 MB/s 12.6 Mbit/s  ETA 17 s  cwnd 310.2 KiB  RTT 101.4 ms  retransmits 0 (0 in all)`.
    pub(crate) fn text(&self) -> String {
        // "+": the walk is still finding files.
        let more = if self.walk_done { "" } else { "+" };
        let files = match self.files_ready {
            Some(ready) => format!("files {ready}/{}{more} ready", self.files_total),
            None => format!("files {}/{}{more} sent", self.files_sent, self.files_total),
        };
        let eta = match self.eta_s {
            Some(s) if s < 10.0 => format!("ETA {s:.1} s"),
            Some(s) => format!("ETA {s:.0} s"),
            None => "ETA -".into(),
        };
        format!(
            "{:5.1} s  {files}  {}/{}{more}  delivered {:.2} MB/s {:.1} Mbit/s  {eta}  cwnd {}  RTT {:.1} ms  retransmits {} ({} in all)",
            self.t_s,
            human_bytes(self.bytes_sent),
            human_bytes(self.bytes_total),
            self.mb_per_s,
            self.mbit_per_s,
            human_bytes(self.cwnd_bytes),
            self.rtt_ms,
            self.retransmits,
            self.retransmits_total
        )
    }

    pub(crate) fn print(&self, json: bool) {
        let out = match json {
            true => serde_json::to_string(self).expect("a progress line serializes"),
            false => self.text(),
        };
        // One write per line: lines from this task never interleave with each other.
        let _ = writeln!(std::io::stderr().lock(), "{out}");
    }
}

/// The progress of one run: counters, and the printing task if `--interval` is on.
pub(crate) struct Progress {
    pub counters: Arc<Counters>,
    totals: Totals,
    probes: Arc<Mutex<Vec<(u16, StatsHandle)>>>,
    t0: Instant,
    ticker: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
}

impl Progress {
    /// Starts the printing task when `config` asks for one.
    pub(crate) fn start(
        config: Option<ProgressConfig>,
        totals: Totals,
        probes: Arc<Mutex<Vec<(u16, StatsHandle)>>>,
        t0: Instant,
    ) -> Self {
        let counters = Arc::new(Counters::default());
        let ticker = config.map(|c| {
            let (stop, mut stopped) = oneshot::channel::<()>();
            let (counters, probes, totals) = (counters.clone(), probes.clone(), totals.clone());
            let task = tokio::spawn(async move {
                let every = c.every.max(Duration::from_millis(10));
                let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
                let mut last = Last::default();
                loop {
                    tokio::select! {
                        _ = tick.tick() => {}
                        _ = &mut stopped => return,
                    }
                    Line::take(t0, &counters, &totals, &probes, &mut last).print(c.json);
                }
            });
            (stop, task)
        });
        Progress {
            counters,
            totals,
            probes,
            t0,
            ticker,
        }
    }

    /// Stops printing (no line after this returns).
    pub(crate) async fn stop(&mut self) {
        if let Some((stop, task)) = self.ticker.take() {
            let _ = stop.send(());
            let _ = task.await;
        }
    }

    /// Prints the figures of an interrupted run (rates averaged from the start).
    pub(crate) fn print_interrupted(&self, json: bool) {
        let mut line = Line::take(
            self.t0,
            &self.counters,
            &self.totals,
            &self.probes,
            &mut Last::default(),
        );
        line.event = "interrupted";
        match json {
            true => line.print(true),
            false => eprintln!("interrupted; so far: {}", line.text().trim_start()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(files_ready: Option<u64>) -> Line {
        Line {
            event: "interval",
            t_s: 3.0,
            files_sent: 1300,
            files_ready,
            files_total: 8192,
            bytes_sent: 5 << 20,
            bytes_total: 32 << 20,
            walk_done: true,
            bytes_acked: 4 << 20,
            mb_per_s: 1.58,
            mbit_per_s: 12.64,
            eta_s: Some(16.6),
            connections: 1,
            cwnd_bytes: 310 << 10,
            rtt_ms: 101.44,
            retransmits: 0,
            retransmits_total: 0,
        }
    }

    #[test]
    fn a_line_says_ready_only_where_the_mode_confirms_files() {
        let ready = line(Some(1200)).text();
        assert!(ready.contains("files 1200/8192 ready"), "{ready}");
        assert!(
            ready.contains("delivered 1.58 MB/s 12.6 Mbit/s  ETA 17 s"),
            "{ready}"
        );
        assert!(
            ready.contains("RTT 101.4 ms  retransmits 0 (0 in all)"),
            "{ready}"
        );
        let soon = Line {
            eta_s: Some(2.34),
            ..line(None)
        };
        assert!(soon.text().contains("ETA 2.3 s"), "{}", soon.text());
        let sent = line(None).text();
        assert!(sent.contains("files 1300/8192 sent"), "{sent}");
        let json: serde_json::Value = serde_json::to_value(line(None)).unwrap();
        assert_eq!(json["files_ready"], serde_json::Value::Null);
        assert_eq!(json["event"], "interval");
        assert!(ready_known(Mode::TcpStreams));
        assert!(!ready_known(Mode::QuicBundle));
        let walking = Line {
            walk_done: false,
            ..line(None)
        }
        .text();
        assert!(
            walking.contains("files 1300/8192+ sent  5.0 MiB/32.0 MiB+"),
            "{walking}"
        );
    }
}
