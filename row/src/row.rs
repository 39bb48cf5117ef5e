//! The result row: one struct for the human line, JSON and CSV. Every column is documented in
//! `docs/csv-schema.md`; keep the two in step.

use std::fs::OpenOptions;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// One transfer, as measured by the sender.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RunRow {
    pub timestamp: String,
    pub run_id: String,
    pub mode: String,
    pub tls: bool,
    pub files: u64,
    pub bytes: u64,
    /// Sender starts connecting → receiver's completion report arrives.
    pub seconds: f64,
    /// Useful file bytes / `seconds`, MB = 10^6 bytes.
    pub mb_per_s: f64,
    pub files_per_s: f64,
    /// Receiver clock: end of the run's first handshake → last file closed.
    pub receiver_seconds: Option<f64>,
    /// `--fsync` time at the receiver, after its completion report (not in `seconds`).
    pub fsync_seconds: Option<f64>,
    /// What the receiver reported ready: its completion report, its error reply, or (a run
    /// stopped early in a mode with per-file replies) the files it confirmed so far. Empty
    /// when not known (an interrupted bundle run: no per-file reply).
    pub files_ready: Option<u64>,
    pub bytes_ready: Option<u64>,
    pub sender_peak_rss_bytes: u64,
    pub receiver_peak_rss_bytes: Option<u64>,
    pub sender_cpu_seconds: f64,
    pub load_1m_start: f64,
    pub read_ahead_bytes: u64,
    /// Connections the sender established / the receiver counted for this run.
    pub connections: Option<u64>,
    pub receiver_connections: Option<u64>,
    /// Per-file streams: outstanding limit asked for; most outstanding at the sender; most
    /// open at once at the receiver (0 in bundle modes).
    pub max_streams: u64,
    pub peak_streams: Option<u64>,
    pub receiver_peak_streams: Option<u64>,
    /// Receiver's stream and connection receive windows in effect (QUIC; yamux), bytes.
    /// `None` where they do not apply (tcp-bundle, tcp-wait) or were not reported (failed
    /// run). Every `Option` field is empty in CSV and null in JSON when `None`: a field that
    /// does not apply is never 0.
    pub stream_window: Option<u64>,
    pub conn_window: Option<u64>,
    /// QUIC send window asked for at the sender, bytes (`None` in TCP modes).
    pub send_window: Option<u64>,
    /// Sender socket send buffer read back from the kernel at the end of the run (TCP: after
    /// autotuning; QUIC: the UDP socket's), bytes.
    pub sndbuf_bytes: Option<u64>,
    /// Receiver socket receive buffer read back from the kernel, bytes.
    pub receiver_rcvbuf_bytes: Option<u64>,
    /// Congestion controller asked for (empty: system default) and the one in effect, as the
    /// kernel reports it (TCP) or as configured in quinn (QUIC: cubic, bbr, newreno), and who
    /// implements it: `linux` or `quinn`.
    pub cc_requested: String,
    pub cc: String,
    #[serde(default)]
    pub cc_impl: String,
    pub connections_requested: u64,
    /// Files larger than this were carried as blocks spread over the connections (0: files
    /// are never split, as in tcp-wait).
    #[serde(default)]
    pub block_size: u64,
    /// Files carried as blocks.
    #[serde(default)]
    pub files_in_blocks: u64,
    /// Connections that carried content bytes.
    #[serde(default)]
    pub connections_used: u64,
    /// Content bytes the connections carried together, and each one's, in connection order,
    /// as a JSON list (`[33554432]`: a string however many connections there are).
    #[serde(default)]
    pub connection_bytes_total: Option<u64>,
    #[serde(default)]
    pub connection_bytes_each: String,
    /// Why fewer connections were used than asked for (empty when all were).
    #[serde(default)]
    pub connections_note: String,
    /// Transport statistics at the end of the run, over all connections: RTTs and cwnd
    /// averaged, counts summed, min RTT the lowest (see docs/csv-schema.md). `None` for a
    /// failed run, and where the transport does not expose one (TCP: congestion_events;
    /// QUIC: delivery rate, bytes_acked, the *_limited times).
    pub rtt_ms: Option<f64>,
    pub min_rtt_ms: Option<f64>,
    pub cwnd_bytes: Option<u64>,
    pub retransmits: Option<u64>,
    pub lost_bytes: Option<u64>,
    pub congestion_events: Option<u64>,
    /// QUIC: congestion events that were persistent congestion; STREAM_DATA_BLOCKED and
    /// DATA_BLOCKED frames the sender sent (TCP: empty).
    pub persistent_congestion_events: Option<u64>,
    pub stream_data_blocked_frames: Option<u64>,
    pub data_blocked_frames: Option<u64>,
    pub sent_packets: Option<u64>,
    pub delivery_rate_bytes_per_s: Option<u64>,
    pub bytes_sent: Option<u64>,
    pub bytes_acked: Option<u64>,
    pub rwnd_limited_ms: Option<f64>,
    pub sndbuf_limited_ms: Option<f64>,
    /// Time the sending loops waited for the reader (source side) / for a per-file stream
    /// slot (the outstanding limit, or the receiver's stream credit), summed over
    /// connections, ms.
    pub read_wait_ms: Option<f64>,
    pub stream_wait_ms: Option<f64>,
    /// Per-file latency, sender starts sending the file → receiver closes it, ms.
    pub latency_p50_ms: Option<f64>,
    pub latency_p90_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    pub latency_max_ms: Option<f64>,
    pub skipped_symlinks: u64,
    /// Sockets, FIFOs and device nodes in the source, skipped.
    pub skipped_special: u64,
    pub receiver: String,
    pub kernel: String,
    pub host: String,
    /// The build that ran (see `provenance`): commit, uncommitted changes, binary SHA-256.
    #[serde(default)]
    pub shoal_commit: String,
    #[serde(default)]
    pub shoal_dirty: bool,
    #[serde(default)]
    pub shoal_sha256: String,
    /// UDP datagrams the sender's network namespace dropped during the run (receive buffer
    /// full; all undeliverable). Empty where not read.
    #[serde(default)]
    pub sender_udp_rcvbuf_errors: Option<u64>,
    #[serde(default)]
    pub sender_udp_in_errors: Option<u64>,
    /// CPU time the hypervisor stole from the sending machine during the run, all CPUs.
    #[serde(default)]
    pub cpu_steal_seconds: Option<f64>,
    /// `send --resume` (RFC 9959 Careful Resume, QUIC): `off` when not asked; else what
    /// became of the jump (docs/csv-schema.md): no-state, pending, refused-rtt,
    /// refused-loss, not-needed, taken, rate-limited, validated, retreated.
    #[serde(default)]
    pub resume: String,
    /// The jump window taken, bytes (0: none; empty without --resume or in TCP modes).
    #[serde(default)]
    pub resume_jump_bytes: Option<u64>,
    /// The initial congestion window in effect, bytes, read back from the controller quinn
    /// built (QUIC); empty in TCP modes.
    #[serde(default)]
    pub initial_window_bytes: Option<u64>,
    /// The saved window the run's start took from the path state (before halving: the jump
    /// is at most half of it), bytes, and what bounded it: `peak` (peak delivery rate × min
    /// RTT per connection), `goodput` (the same with whole-run goodput: a record without a
    /// peak) or `cwnd` (the cwnd the saving run ended with). Empty when no state was used.
    #[serde(default)]
    pub resume_saved_window_bytes: Option<u64>,
    #[serde(default)]
    pub resume_saved_window_cap: String,
    /// What became of the path state this run asked for, when it could not be used as saved:
    /// a record set aside (corrupt, truncated, empty, not UTF-8, values no path has) and the
    /// run started cold, or a saved window raised to the floor. Empty otherwise.
    #[serde(default)]
    pub path_state_note: String,
    /// The highest rate of newly acknowledged bytes over any window of at least one min RTT
    /// and 100 ms, summed over connections, bytes/s (sender/src/peak.rs); the path state saves
    /// it. Empty for a failed run or one too short to span a window.
    #[serde(default)]
    pub peak_delivery_bytes_per_s: Option<u64>,
    /// CPU (user + system) the receiver reported for the run, from its admission to its
    /// completion report (the whole receiving process: runs it serves at once share it), s.
    #[serde(default)]
    pub receiver_run_cpu_seconds: Option<f64>,
    /// Time the receiver's network side waited to hand bytes to its writers (write budget
    /// full, or the writers' queue), summed over connections and streams, s. Empty when the
    /// receiver did not report it.
    #[serde(default)]
    pub receiver_write_wait_seconds: Option<f64>,
    /// `sender_cpu_seconds` and `receiver_run_cpu_seconds` per GB (10^9 bytes) of payload.
    #[serde(default)]
    pub sender_cpu_s_per_gb: Option<f64>,
    #[serde(default)]
    pub receiver_cpu_s_per_gb: Option<f64>,
    /// QUIC: the UDP payload size in use at the end of the run (quinn's current path MTU),
    /// bytes, and the segments per `sendmsg` (GSO) and per `recvmsg` (GRO) quinn-udp reports
    /// for each end's UDP socket (1: no offload). Empty in TCP modes.
    #[serde(default)]
    pub udp_payload_bytes: Option<u64>,
    #[serde(default)]
    pub sender_gso_segments: Option<u64>,
    #[serde(default)]
    pub sender_gro_segments: Option<u64>,
    #[serde(default)]
    pub receiver_gso_segments: Option<u64>,
    #[serde(default)]
    pub receiver_gro_segments: Option<u64>,
    /// Threads of the sender's and of the receiver's async runtimes (`--threads` of `send` and
    /// `recv`, read back from each runtime): 1 runs every connection on one thread, the reader
    /// (sender) and writer (receiver) threads apart. Empty when the receiver did not report it.
    #[serde(default)]
    pub threads: Option<u64>,
    #[serde(default)]
    pub receiver_threads: Option<u64>,
    /// Writer threads the receiver ran the run with (`recv --writers`, from its completion
    /// report). Empty when the receiver did not report it.
    #[serde(default)]
    pub receiver_writers: Option<u64>,
    /// QUIC: the smallest connection receive window the receiver had in effect (it sizes
    /// the window for the path unless `recv --fixed-window`); equal to `conn_window` when that
    /// is the whole window. Empty in other modes and when the receiver did not report it.
    #[serde(default)]
    pub receiver_conn_window_min: Option<u64>,
    /// When the run's clock started (its first connect), µs since the Unix epoch: with
    /// `seconds`, the window the run was timed over, for lining it up with samples taken
    /// outside the process (the sweep's `data_*` host CPU columns).
    #[serde(default)]
    pub clock_start_unix_us: Option<u64>,
    /// `ok`, or `failed`.
    pub status: String,
    /// Why the run failed (empty when ok).
    pub error: String,
}

impl RunRow {
    pub fn is_ok(&self) -> bool {
        self.status == "ok"
    }

    /// Appends this row to `path`, writing the header first when the file is new or empty.
    pub fn append_csv(&self, path: &Path) -> Result<()> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open CSV file {}", path.display()))?;
        let is_new = file.metadata().map(|m| m.len() == 0).unwrap_or(true);
        let mut w = csv::WriterBuilder::new()
            .has_headers(is_new)
            .from_writer(file);
        w.serialize(self)
            .with_context(|| format!("cannot write to {}", path.display()))?;
        w.flush()
            .with_context(|| format!("cannot write to {}", path.display()))?;
        Ok(())
    }

    /// The one-line human summary.
    pub fn summary_line(&self) -> String {
        if self.is_ok() {
            format!(
                "ok: {} files, {} in {:.3} s = {:.2} MB/s ({:.0} files/s) over {}{}; receiver {:.3} s; peak RSS sender {} / receiver {}",
                self.files,
                shoal_proto::units::human_bytes(self.bytes),
                self.seconds,
                self.mb_per_s,
                self.files_per_s,
                self.mode,
                if self.tls { "" } else { " (plain)" },
                self.receiver_seconds.unwrap_or_default(),
                shoal_proto::units::human_bytes(self.sender_peak_rss_bytes),
                shoal_proto::units::human_bytes(self.receiver_peak_rss_bytes.unwrap_or_default()),
            )
        } else {
            let ready = match self.files_ready {
                Some(n) => format!("{n} of {} files ready", self.files),
                None => format!("{} files, how many ready not known", self.files),
            };
            format!(
                "FAILED after {:.3} s ({ready}): {}",
                self.seconds, self.error
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_header_once() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("rows.csv");
        let row = RunRow {
            mode: "tcp-bundle".into(),
            status: "ok".into(),
            ..Default::default()
        };
        row.append_csv(&p).unwrap();
        row.append_csv(&p).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.lines().count(), 3);
        assert!(text.starts_with("timestamp,run_id,mode,"));
        let mut r = csv::Reader::from_path(&p).unwrap();
        let back: Vec<RunRow> = r.deserialize().collect::<Result<_, _>>().unwrap();
        assert_eq!(back, vec![row.clone(), row]);
    }

    #[test]
    fn fields_that_do_not_apply_are_empty_in_csv_and_null_in_json() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("rows.csv");
        // A failed run: no transport statistics at all. A QUIC run: no bytes_acked.
        let failed = RunRow {
            status: "failed".into(),
            ..Default::default()
        };
        let quic = RunRow {
            status: "ok".into(),
            rtt_ms: Some(141.5),
            congestion_events: Some(0),
            ..Default::default()
        };
        failed.append_csv(&p).unwrap();
        quic.append_csv(&p).unwrap();
        let mut r = csv::Reader::from_path(&p).unwrap();
        let h = r.headers().unwrap().clone();
        let recs: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        let cell = |i: usize, k: &str| recs[i][h.iter().position(|c| c == k).unwrap()].to_string();
        for k in [
            "rtt_ms",
            "cwnd_bytes",
            "congestion_events",
            "bytes_acked",
            "stream_window",
        ] {
            assert_eq!(cell(0, k), "", "failed run: {k}");
        }
        assert_eq!(cell(1, "rtt_ms"), "141.5");
        assert_eq!(cell(1, "congestion_events"), "0", "a real 0 stays 0");
        assert_eq!(cell(1, "bytes_acked"), "");
        let j = serde_json::to_value(&failed).unwrap();
        assert!(j["rtt_ms"].is_null() && j["bytes_acked"].is_null(), "{j}");
        let mut r = csv::Reader::from_path(&p).unwrap();
        let back: Vec<RunRow> = r.deserialize().collect::<Result<_, _>>().unwrap();
        assert_eq!(back, vec![failed, quic]);
    }
}
