//! The columns of `runs.csv`: the sweep's own, the configuration's parameters, every field of
//! Shoal's result row ([`RunRow`], whatever it holds in this build), verification, the run's
//! environment and the link. Documented in docs/sweep.md.

use std::collections::BTreeMap;

use shoal_row::row::RunRow;

use shoal_matrix::axis;

/// A column of runs.csv. Every column the sweep writes is a constant of [`col`], defined there
/// once; a row is set only through them (and [`Row::set_param`] for the axes, and
/// [`Row::put_send_json`] for `shoal send`'s own row).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Col(&'static str);

impl Col {
    /// The column's name in the CSV header.
    pub const fn name(self) -> &'static str {
        self.0
    }
}

/// The three columns of a `min default max` sysctl: `NAME_min_bytes`, `NAME_default_bytes`,
/// `NAME_max_bytes`.
macro_rules! triple {
    ($name:literal) => {
        [
            Col(concat!($name, "_min_bytes")),
            Col(concat!($name, "_default_bytes")),
            Col(concat!($name, "_max_bytes")),
        ]
    };
}

/// Every column the sweep writes itself.
pub mod col {
    use super::Col;

    // Before the parameters.
    pub const SWEEP_ID: Col = Col("sweep_id");
    pub const CONFIG_ID: Col = Col("config_id");
    pub const CONFIG: Col = Col("config");
    pub const RUN: Col = Col("run");
    pub const ORDER: Col = Col("order");
    pub const ORDER_SEED: Col = Col("order_seed");
    pub const REFERENCE: Col = Col("reference");
    pub const KIND: Col = Col("kind");
    pub const PAYLOAD: Col = Col("payload");
    pub const PAYLOAD_FILES: Col = Col("payload_files");
    pub const PAYLOAD_BYTES: Col = Col("payload_bytes");

    // Fields of Shoal's result row (RunRow) the sweep fills for runs that printed none
    // (baselines, killed runs), or computes itself (verdict and speed).
    pub const TIMESTAMP: Col = Col("timestamp");
    pub const RUN_ID: Col = Col("run_id");
    pub const MODE: Col = Col("mode");
    pub const TLS: Col = Col("tls");
    pub const FILES: Col = Col("files");
    pub const BYTES: Col = Col("bytes");
    pub const LOAD_1M_START: Col = Col("load_1m_start");
    pub const KERNEL: Col = Col("kernel");
    pub const HOST: Col = Col("host");
    pub const SENDER_PEAK_RSS_BYTES: Col = Col("sender_peak_rss_bytes");
    pub const SENDER_CPU_SECONDS: Col = Col("sender_cpu_seconds");
    pub const RECEIVER_PEAK_RSS_BYTES: Col = Col("receiver_peak_rss_bytes");
    pub const CC: Col = Col("cc");
    /// Who implements `cc`: `linux` (the kernel's TCP) or `quinn` (QUIC).
    pub const CC_IMPL: Col = Col("cc_impl");
    pub const RECEIVER: Col = Col("receiver");
    pub const SECONDS: Col = Col("seconds");
    pub const STATUS: Col = Col("status");
    pub const ERROR: Col = Col("error");
    pub const FILES_READY: Col = Col("files_ready");
    pub const BYTES_READY: Col = Col("bytes_ready");
    pub const RETRANSMITS: Col = Col("retransmits");
    pub const MB_PER_S: Col = Col("mb_per_s");
    pub const FILES_PER_S: Col = Col("files_per_s");
    pub const INITIAL_WINDOW_BYTES: Col = Col("initial_window_bytes");
    pub const RESUME_SAVED_WINDOW_BYTES: Col = Col("resume_saved_window_bytes");
    pub const RESUME_SAVED_WINDOW_CAP: Col = Col("resume_saved_window_cap");

    // After RunRow's: the verdict, verification and the run's environment.
    pub const SEND_STATUS: Col = Col("send_status");
    pub const SEND_ERROR: Col = Col("send_error");
    pub const EXIT_CODE: Col = Col("exit_code");
    pub const TIMED_OUT: Col = Col("timed_out");
    pub const VERIFIED: Col = Col("verified");
    pub const VERIFY_RESULT: Col = Col("verify_result");
    pub const VERIFY_SECONDS: Col = Col("verify_seconds");
    pub const FILES_VERIFIED: Col = Col("files_verified");
    pub const BYTES_VERIFIED: Col = Col("bytes_verified");
    pub const PARTIAL_MB_PER_S: Col = Col("partial_mb_per_s");
    pub const SWEEP_LOAD_1M_START: Col = Col("sweep_load_1m_start");
    pub const QUIET_WAIT_SECONDS: Col = Col("quiet_wait_seconds");
    pub const HOST_BUSY_CORES_P90: Col = Col("host_busy_cores_p90");
    pub const HOST_BUSY_CORES_MEAN: Col = Col("host_busy_cores_mean");
    pub const HOST_ALL_CORES_BUSY_SHARE: Col = Col("host_all_cores_busy_share");
    pub const DATA_BUSY_CORES_MEAN: Col = Col("data_busy_cores_mean");
    pub const DATA_ALL_CORES_BUSY_SHARE: Col = Col("data_all_cores_busy_share");
    pub const DATA_CPU_SAMPLES: Col = Col("data_cpu_samples");
    pub const PREREAD_SECONDS: Col = Col("preread_seconds");
    pub const TIMEOUT_S: Col = Col("timeout_s");
    pub const DEST: Col = Col("dest");
    pub const DEST_FS: Col = Col("dest_fs");
    pub const DEST_PREPARED: Col = Col("dest_prepared");
    pub const DEST_FS_KIND: Col = Col("dest_fs_kind");
    pub const DEST_FS_SIZE_BYTES: Col = Col("dest_fs_size_bytes");
    pub const DEST_MOUNT_OPTIONS: Col = Col("dest_mount_options");
    pub const RECEIVER_HOST: Col = Col("receiver_host");
    pub const RECEIVER_KERNEL: Col = Col("receiver_kernel");
    pub const RECEIVER_VERSION: Col = Col("receiver_version");
    pub const RECEIVER_SETTINGS: Col = Col("receiver_settings");
    pub const RECEIVER_TCP_METRICS: Col = Col("receiver_tcp_metrics");
    pub const INITCWND_SEGMENTS: Col = Col("initcwnd_segments");
    pub const INITRWND_SEGMENTS: Col = Col("initrwnd_segments");
    pub const INITIAL_RCV_WINDOW_BYTES: Col = Col("initial_rcv_window_bytes");
    pub const RECEIVER_CPU_SECONDS: Col = Col("receiver_cpu_seconds");
    pub const RECEIVER_UDP_RCVBUF_ERRORS: Col = Col("receiver_udp_rcvbuf_errors");
    pub const RECEIVER_UDP_IN_ERRORS: Col = Col("receiver_udp_in_errors");
    pub const RECEIVER_CPU_STEAL_SECONDS: Col = Col("receiver_cpu_steal_seconds");
    pub const RECEIVER_CPU_CGROUP: Col = Col("receiver_cpu_cgroup");
    pub const RECEIVER_CPU_QUOTA_US: Col = Col("receiver_cpu_quota_us");
    pub const RECEIVER_CPU_PERIOD_US: Col = Col("receiver_cpu_period_us");
    pub const RECEIVER_CPU_PERIODS: Col = Col("receiver_cpu_periods");
    pub const RECEIVER_CPU_THROTTLED: Col = Col("receiver_cpu_throttled");
    pub const RECEIVER_CPU_THROTTLED_SECONDS: Col = Col("receiver_cpu_throttled_seconds");
    pub const RECEIVER_CPU_HOG_CPU_SECONDS: Col = Col("receiver_cpu_hog_cpu_seconds");
    pub const RECEIVER_STALL_LENGTH_MS: Col = Col("receiver_stall_length_ms");
    pub const RECEIVER_STALL_EVERY_MS: Col = Col("receiver_stall_every_ms");
    pub const RECEIVER_STALLS_APPLIED: Col = Col("receiver_stalls_applied");
    pub const RECEIVER_STALLED_MS_TOTAL: Col = Col("receiver_stalled_ms_total");
    pub const RECEIVER_STALL_CGROUP: Col = Col("receiver_stall_cgroup");
    pub const SENDER_STALL_LENGTH_MS: Col = Col("sender_stall_length_ms");
    pub const SENDER_STALL_EVERY_MS: Col = Col("sender_stall_every_ms");
    pub const SENDER_STALLS_APPLIED: Col = Col("sender_stalls_applied");
    pub const SENDER_STALLED_MS_TOTAL: Col = Col("sender_stalled_ms_total");
    pub const SENDER_STALL_CGROUP: Col = Col("sender_stall_cgroup");
    pub const RECEIVER_REPORT: Col = Col("receiver_report");
    pub const CLOCK_OFFSET_MS: Col = Col("clock_offset_ms");
    pub const CLOCK_OFFSET_RTT_MS: Col = Col("clock_offset_rtt_ms");
    pub const COMMAND: Col = Col("command");
    pub const LINK_NAME: Col = Col("link_name");
    /// The link check before the first run: `pass`, `FAILED, accepted`, `not run`, `could not
    /// run`.
    pub const LINK_CHECK: Col = Col("link_check");
    pub const LINK_BACKEND: Col = Col("link_backend");
    pub const LINK_RTT_MS: Col = Col("link_rtt_ms");
    pub const LINK_RATE_BPS: Col = Col("link_rate_bps");
    pub const LINK_DOWN_RATE_BPS: Col = Col("link_down_rate_bps");
    pub const LINK_QUEUE_BYTES: Col = Col("link_queue_bytes");
    pub const LINK_LOSS_PERCENT: Col = Col("link_loss_percent");
    pub const LINK_MTU: Col = Col("link_mtu");
    pub const LINK_OFFLOAD: Col = Col("link_offload");
    /// `tcp_wmem`/`tcp_rmem` of each namespace: min, default, max (bytes), one column each.
    pub const LINK_SND_TCP_WMEM: [Col; 3] = triple!("link_snd_tcp_wmem");
    pub const LINK_SND_TCP_RMEM: [Col; 3] = triple!("link_snd_tcp_rmem");
    pub const LINK_RCV_TCP_RMEM: [Col; 3] = triple!("link_rcv_tcp_rmem");
    pub const LINK_RCV_TCP_WMEM: [Col; 3] = triple!("link_rcv_tcp_wmem");
    pub const LINK_RMEM_MAX: Col = Col("link_rmem_max");
    pub const LINK_WMEM_MAX: Col = Col("link_wmem_max");
    pub const TUN_TX_DROPPED_SND: Col = Col("tun_tx_dropped_snd");
    pub const TUN_TX_DROPPED_RCV: Col = Col("tun_tx_dropped_rcv");
    pub const LINK_DROPPED_QUEUE: Col = Col("link_dropped_queue");
    pub const LINK_DROPPED_LOSS: Col = Col("link_dropped_loss");
    pub const LINK_DROPPED_BLACKHOLE: Col = Col("link_dropped_blackhole");
    pub const LINK_LATE_OVER_1MS: Col = Col("link_late_over_1ms");
    pub const LINK_LATE_MAX_SINCE_UP_US: Col = Col("link_late_max_since_up_us");
    pub const LINK_CPU_SECONDS: Col = Col("link_cpu_seconds");
    pub const LINK_UP_AFTER: Col = Col("link_up_after");
}

/// RunRow's per-file latency columns (sender's send stamp → receiver's close stamp).
pub const LATENCY_COLUMNS: &[&str] = &[
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p99_ms",
    "latency_max_ms",
];

/// Columns before the parameters.
pub const LEAD: &[Col] = &[
    col::SWEEP_ID,
    col::CONFIG_ID,
    col::CONFIG,
    col::RUN,
    col::ORDER,
    col::ORDER_SEED,
    col::REFERENCE,
    col::KIND,
    col::PAYLOAD,
    col::PAYLOAD_FILES,
    col::PAYLOAD_BYTES,
];

/// RunRow columns the sweep itself fills (each must be one of RunRow's; tested).
pub const RUNROW_FILLED: &[Col] = &[
    col::TIMESTAMP,
    col::RUN_ID,
    col::MODE,
    col::TLS,
    col::FILES,
    col::BYTES,
    col::LOAD_1M_START,
    col::KERNEL,
    col::HOST,
    col::SENDER_PEAK_RSS_BYTES,
    col::SENDER_CPU_SECONDS,
    col::RECEIVER_PEAK_RSS_BYTES,
    col::CC,
    col::CC_IMPL,
    col::RECEIVER,
    col::SECONDS,
    col::STATUS,
    col::ERROR,
    col::FILES_READY,
    col::BYTES_READY,
    col::MB_PER_S,
    col::FILES_PER_S,
    col::INITIAL_WINDOW_BYTES,
    col::RESUME_SAVED_WINDOW_BYTES,
    col::RESUME_SAVED_WINDOW_CAP,
];

/// Columns after RunRow's: the verdict, verification and the run's environment.
pub const TAIL: &[Col] = &[
    col::SEND_STATUS,
    col::SEND_ERROR,
    col::EXIT_CODE,
    col::TIMED_OUT,
    col::VERIFIED,
    col::VERIFY_RESULT,
    col::VERIFY_SECONDS,
    col::FILES_VERIFIED,
    col::BYTES_VERIFIED,
    col::PARTIAL_MB_PER_S,
    col::SWEEP_LOAD_1M_START,
    col::QUIET_WAIT_SECONDS,
    col::HOST_BUSY_CORES_P90,
    col::HOST_BUSY_CORES_MEAN,
    col::HOST_ALL_CORES_BUSY_SHARE,
    col::DATA_BUSY_CORES_MEAN,
    col::DATA_ALL_CORES_BUSY_SHARE,
    col::DATA_CPU_SAMPLES,
    col::PREREAD_SECONDS,
    col::TIMEOUT_S,
    col::DEST,
    col::DEST_FS,
    col::DEST_PREPARED,
    col::DEST_FS_KIND,
    col::DEST_FS_SIZE_BYTES,
    col::DEST_MOUNT_OPTIONS,
    col::RECEIVER_HOST,
    col::RECEIVER_KERNEL,
    col::RECEIVER_VERSION,
    col::RECEIVER_SETTINGS,
    col::RECEIVER_TCP_METRICS,
    col::INITCWND_SEGMENTS,
    col::INITRWND_SEGMENTS,
    col::INITIAL_RCV_WINDOW_BYTES,
    col::RECEIVER_CPU_SECONDS,
    col::RECEIVER_UDP_RCVBUF_ERRORS,
    col::RECEIVER_UDP_IN_ERRORS,
    col::RECEIVER_CPU_STEAL_SECONDS,
    col::RECEIVER_CPU_CGROUP,
    col::RECEIVER_CPU_QUOTA_US,
    col::RECEIVER_CPU_PERIOD_US,
    col::RECEIVER_CPU_PERIODS,
    col::RECEIVER_CPU_THROTTLED,
    col::RECEIVER_CPU_THROTTLED_SECONDS,
    col::RECEIVER_CPU_HOG_CPU_SECONDS,
    col::RECEIVER_STALL_LENGTH_MS,
    col::RECEIVER_STALL_EVERY_MS,
    col::RECEIVER_STALLS_APPLIED,
    col::RECEIVER_STALLED_MS_TOTAL,
    col::RECEIVER_STALL_CGROUP,
    col::SENDER_STALL_LENGTH_MS,
    col::SENDER_STALL_EVERY_MS,
    col::SENDER_STALLS_APPLIED,
    col::SENDER_STALLED_MS_TOTAL,
    col::SENDER_STALL_CGROUP,
    col::RECEIVER_REPORT,
    col::CLOCK_OFFSET_MS,
    col::CLOCK_OFFSET_RTT_MS,
    col::COMMAND,
    col::LINK_NAME,
    col::LINK_CHECK,
    col::LINK_BACKEND,
    col::LINK_RTT_MS,
    col::LINK_RATE_BPS,
    col::LINK_DOWN_RATE_BPS,
    col::LINK_QUEUE_BYTES,
    col::LINK_LOSS_PERCENT,
    col::LINK_MTU,
    col::LINK_OFFLOAD,
    col::LINK_SND_TCP_WMEM[0],
    col::LINK_SND_TCP_WMEM[1],
    col::LINK_SND_TCP_WMEM[2],
    col::LINK_SND_TCP_RMEM[0],
    col::LINK_SND_TCP_RMEM[1],
    col::LINK_SND_TCP_RMEM[2],
    col::LINK_RCV_TCP_RMEM[0],
    col::LINK_RCV_TCP_RMEM[1],
    col::LINK_RCV_TCP_RMEM[2],
    col::LINK_RCV_TCP_WMEM[0],
    col::LINK_RCV_TCP_WMEM[1],
    col::LINK_RCV_TCP_WMEM[2],
    col::LINK_RMEM_MAX,
    col::LINK_WMEM_MAX,
    col::TUN_TX_DROPPED_SND,
    col::TUN_TX_DROPPED_RCV,
    col::LINK_DROPPED_QUEUE,
    col::LINK_DROPPED_LOSS,
    col::LINK_DROPPED_BLACKHOLE,
    col::LINK_LATE_OVER_1MS,
    col::LINK_LATE_MAX_SINCE_UP_US,
    col::LINK_CPU_SECONDS,
    col::LINK_UP_AFTER,
];

/// One row of runs.csv: column → cell. Missing columns are written empty ("not measured").
#[derive(Clone, Debug, Default)]
pub struct Row(BTreeMap<String, String>);

impl Row {
    pub fn new() -> Row {
        Row::default()
    }

    pub fn set(&mut self, c: Col, value: impl Into<String>) {
        self.0.insert(c.name().to_string(), value.into());
    }

    pub fn get(&self, c: Col) -> Option<&str> {
        self.0.get(c.name()).map(String::as_str)
    }

    /// The cell of `c`, empty when not set.
    pub fn text(&self, c: Col) -> String {
        self.get(c).unwrap_or_default().to_string()
    }

    /// Sets the three columns of a `min default max` sysctl from its text (all three empty
    /// when it is not three numbers).
    pub fn set_triple(&mut self, cols: [Col; 3], text: &str) {
        for (c, v) in cols.into_iter().zip(triple(text)) {
            self.set(c, v);
        }
    }

    /// Sets an axis's column ([`param_column`]).
    pub fn set_param(&mut self, axis: &str, value: String) {
        self.0.insert(param_column(axis), value);
    }

    /// Sets every cell `other` has.
    pub fn extend(&mut self, other: &Row) {
        self.0.extend(other.0.clone());
    }

    /// Fills RunRow's fields from the JSON object `shoal send --json` printed.
    pub fn put_send_json(&mut self, json: &serde_json::Value) {
        if let Some(obj) = json.as_object() {
            for (k, v) in obj {
                let cell = match v {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Null => String::new(),
                    other => other.to_string(),
                };
                self.0.insert(k.clone(), cell);
            }
        }
    }

    /// Per-file latency measured from a sender stamp to a receiver stamp on another host,
    /// corrected by the receiver's clock offset (receiver − sender, ms): every latency column
    /// `shoal send` reported shifts by the same amount.
    pub fn correct_latency(&mut self, offset_ms: f64) {
        for name in LATENCY_COLUMNS {
            if let Some(v) = self.0.get(*name).and_then(|v| v.parse::<f64>().ok()) {
                self.0
                    .insert(name.to_string(), format!("{:.3}", v - offset_ms));
            }
        }
    }

    /// The cell under a header name, empty when not set (for writing the CSV).
    pub fn cell(&self, name: &str) -> &str {
        self.0.get(name).map(String::as_str).unwrap_or("")
    }
}

/// The three cells of a `min default max` sysctl; three empty cells when it is not one.
pub fn triple(text: &str) -> [String; 3] {
    let n: Vec<&str> = text.split_whitespace().collect();
    if n.len() == 3 && n.iter().all(|x| x.parse::<u64>().is_ok()) {
        [n[0].into(), n[1].into(), n[2].into()]
    } else {
        Default::default()
    }
}

/// A cell with three decimals (seconds, MB/s).
pub fn f3(x: f64) -> String {
    format!("{x:.3}")
}

/// RunRow's column names in struct order (from the CSV header serde writes for it).
pub fn runrow_columns() -> Vec<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.serialize(RunRow::default()).expect("RunRow serialises");
    let bytes = w.into_inner().expect("in memory");
    let text = String::from_utf8(bytes).expect("utf-8");
    let header = text.lines().next().unwrap_or_default();
    csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(header.as_bytes())
        .records()
        .next()
        .and_then(|r| r.ok())
        .map(|r| r.iter().map(str::to_string).collect())
        .unwrap_or_default()
}

/// What every parameter column's name starts with.
pub const PARAM_PREFIX: &str = "param_";

/// The CSV column of an axis: `param_` + the axis name with `-` and `.` as `_`.
pub fn param_column(axis: &str) -> String {
    format!("{PARAM_PREFIX}{}", axis.replace(['-', '.'], "_"))
}

/// The full header of runs.csv for a matrix with these axes.
pub fn header(axes: &[String]) -> Vec<String> {
    let mut h: Vec<String> = LEAD.iter().map(|c| c.name().to_string()).collect();
    for a in axes {
        if a != axis::PAYLOAD && a != axis::KIND {
            h.push(param_column(a));
        }
    }
    for c in runrow_columns() {
        if !h.contains(&c) {
            h.push(c);
        }
    }
    for c in TAIL {
        if !h.iter().any(|x| x == c.name()) {
            h.push(c.name().to_string());
        }
    }
    h
}

/// A CSV writer that writes the header once and flushes every row (a partial sweep is usable).
pub struct RunsCsv {
    header: Vec<String>,
    w: csv::Writer<std::fs::File>,
}

impl RunsCsv {
    pub fn create(path: &std::path::Path, header: Vec<String>) -> anyhow::Result<RunsCsv> {
        use anyhow::Context;
        let f = std::fs::File::create(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let mut w = csv::Writer::from_writer(f);
        w.write_record(&header)?;
        w.flush()?;
        Ok(RunsCsv { header, w })
    }

    pub fn write(&mut self, row: &Row) -> anyhow::Result<()> {
        let rec: Vec<&str> = self.header.iter().map(|c| row.cell(c)).collect();
        self.w.write_record(&rec)?;
        self.w.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_holds_runrow_and_params() {
        let h = header(&["payload".into(), "kind".into(), "max-streams".into()]);
        assert_eq!(h[0], "sweep_id");
        assert!(h.contains(&"param_max_streams".to_string()));
        for c in [
            "seconds",
            "mb_per_s",
            "status",
            "error",
            "receiver_peak_rss_bytes",
        ] {
            assert!(h.contains(&c.to_string()), "{c}");
        }
        let set: std::collections::BTreeSet<_> = h.iter().collect();
        assert_eq!(set.len(), h.len(), "no duplicate columns");
        let runrow = runrow_columns();
        for c in RUNROW_FILLED {
            assert!(
                runrow.iter().any(|r| r == c.name()),
                "{c:?} is not RunRow's"
            );
        }
        for c in LATENCY_COLUMNS {
            assert!(runrow.iter().any(|r| r == c), "{c} is not RunRow's");
        }
        // The sweep's own columns are not RunRow's: each name is defined once.
        for c in LEAD.iter().chain(TAIL) {
            assert!(!runrow.iter().any(|r| r == c.name()), "{c:?} is RunRow's");
        }
    }
}
