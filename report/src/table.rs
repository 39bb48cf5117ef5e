//! A sweep folder's report files from its runs.csv, and the medians as a terminal table.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::{chart, report, trace_chart};

/// Writes `medians.csv`, `medians.json`, `throughput.svg` and `throughput.png` into `dir` from
/// `dir/runs.csv` (`throughput-mbit.*` with `--mbit`, so the MB/s chart is kept), the trace
/// charts when the sweep kept traces, and `report.html` when asked; returns the files written.
pub fn write_report(
    dir: &Path,
    reference: Option<&[(String, String)]>,
    charts: chart::ChartOptions,
) -> Result<Vec<PathBuf>> {
    let rep = report::load(&dir.join("runs.csv"), reference)?;
    let medians = dir.join("medians.csv");
    report::write_medians(&rep, &medians)?;
    let mut files = vec![medians.clone(), medians.with_extension("json")];
    if !rep.configs.is_empty() {
        let stem = if charts.mbit {
            "throughput-mbit"
        } else {
            "throughput"
        };
        files.extend(chart::write_charts(&rep, dir, stem, charts)?);
        files.extend(trace_chart::write_trace_charts(&rep, dir)?);
    }
    if charts.html {
        let page = crate::html::write_sweep(dir, &rep, &files)?;
        files.push(page);
    }
    Ok(files)
}

/// A short table of the medians in `dir/medians.csv`, for the terminal.
pub fn medians_table(dir: &Path) -> Result<String> {
    let mut r = csv::Reader::from_path(dir.join("medians.csv"))?;
    let h = r.headers()?.clone();
    let idx = |name: &str| h.iter().position(|c| c == name);
    let cols = [
        ("config", "configuration"),
        ("runs_ok", "ok"),
        ("runs", "runs"),
        ("median_mb_per_s", "MB/s"),
        ("min_mb_per_s", "min"),
        ("max_mb_per_s", "max"),
        ("median_seconds", "s"),
        ("failed_median_partial_mb_per_s", "failed: partial MB/s"),
        ("speedup_vs_reference", "× ref"),
    ];
    let mut table: Vec<Vec<String>> = vec![cols.iter().map(|(_, t)| t.to_string()).collect()];
    for rec in r.records() {
        let rec = rec?;
        table.push(
            cols.iter()
                .map(|(c, _)| {
                    idx(c)
                        .and_then(|i| rec.get(i))
                        .unwrap_or("")
                        .trim_start_matches("payload=")
                        .replace(" kind=shoal", "")
                        .to_string()
                })
                .collect(),
        );
    }
    let widths: Vec<usize> = (0..cols.len())
        .map(|i| {
            table
                .iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let saturated: Vec<String> = {
        let mut r = csv::Reader::from_path(dir.join("medians.csv"))?;
        let (id, sat) = (idx("config_id"), idx("host_saturated"));
        let mut v = Vec::new();
        for rec in r.records() {
            let rec = rec?;
            if sat.and_then(|i| rec.get(i)) == Some("true") {
                v.push(id.and_then(|i| rec.get(i)).unwrap_or("?").to_string());
            }
        }
        v
    };
    let mut out = String::new();
    for row in &table {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    if !saturated.is_empty() {
        out.push_str(&format!(
            "SATURATED machine: {} — every core was busy in at least {:.0}% of the median run's \
             100 ms samples (sender, receiver and emulator share the cores): these speeds may \
             be CPU-bound (host_all_cores_busy_share in runs.csv)\n",
            saturated.join(", "),
            report::SATURATED_SHARE * 100.0
        ));
    }
    Ok(out)
}
