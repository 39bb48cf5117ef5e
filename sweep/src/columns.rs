//! The columns of `runs.csv`: the sweep's own, the configuration's parameters, every field of
//! Shoal's result row ([`RunRow`], whatever it holds in this build), verification, the run's
//! environment and the link. Documented in docs/sweep.md.

use std::collections::BTreeMap;

use shoal_common::row::RunRow;

/// One row of runs.csv: column → cell. Missing columns are written empty ("not measured").
pub type Row = BTreeMap<String, String>;

/// Columns before the parameters.
pub const LEAD: &[&str] = &[
    "sweep_id",
    "config_id",
    "config",
    "run",
    "order",
    "order_seed",
    "reference",
    "kind",
    "payload",
    "payload_files",
    "payload_bytes",
];

/// Columns after RunRow's: the verdict, verification and the run's environment.
pub const TAIL: &[&str] = &[
    "send_status",
    "send_error",
    "exit_code",
    "timed_out",
    "verified",
    "verify_result",
    "verify_seconds",
    "files_verified",
    "bytes_verified",
    "partial_mb_per_s",
    "sweep_load_1m_start",
    "quiet_wait_seconds",
    "host_busy_cores_p90",
    "host_busy_cores_mean",
    "host_all_cores_busy_share",
    "preread_seconds",
    "timeout_s",
    "dest",
    "dest_fs",
    "dest_prepared",
    "receiver_host",
    "receiver_kernel",
    "receiver_version",
    "receiver_cpu_seconds",
    "receiver_udp_rcvbuf_errors",
    "receiver_udp_in_errors",
    "receiver_cpu_steal_seconds",
    "receiver_report",
    "command",
    "link_name",
    "link_backend",
    "link_rtt_ms",
    "link_rate_bps",
    "link_down_rate_bps",
    "link_queue_bytes",
    "link_loss",
    "link_mtu",
    "link_offload",
    "link_snd_tcp_wmem",
    "link_snd_tcp_rmem",
    "link_rcv_tcp_rmem",
    "link_rcv_tcp_wmem",
    "link_rmem_max",
    "link_wmem_max",
    "tun_tx_dropped_snd",
    "tun_tx_dropped_rcv",
    "link_dropped_queue",
    "link_dropped_loss",
    "link_dropped_blackhole",
    "link_late_over_1ms",
    "link_late_max_us",
    "link_cpu_seconds",
    "link_up_after",
];

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

/// The CSV column of an axis: `param_` + the axis name with `-` and `.` as `_`.
pub fn param_column(axis: &str) -> String {
    format!("param_{}", axis.replace(['-', '.'], "_"))
}

/// The full header of runs.csv for a matrix with these axes.
pub fn header(axes: &[String]) -> Vec<String> {
    let mut h: Vec<String> = LEAD.iter().map(|s| s.to_string()).collect();
    for a in axes {
        if a != "payload" && a != "kind" {
            h.push(param_column(a));
        }
    }
    for c in runrow_columns() {
        if !h.contains(&c) {
            h.push(c);
        }
    }
    for c in TAIL {
        if !h.iter().any(|x| x == c) {
            h.push(c.to_string());
        }
    }
    h
}

/// Fills `row` with RunRow's fields from the JSON object `shoal send --json` printed.
pub fn put_send_json(row: &mut Row, json: &serde_json::Value) {
    if let Some(obj) = json.as_object() {
        for (k, v) in obj {
            let cell = match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Null => String::new(),
                other => other.to_string(),
            };
            row.insert(k.clone(), cell);
        }
    }
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
        let rec: Vec<&str> = self
            .header
            .iter()
            .map(|c| row.get(c).map(String::as_str).unwrap_or(""))
            .collect();
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
    }
}
