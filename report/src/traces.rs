//! Per-run traces of a sweep: where they live and how they are read back for the charts.
//!
//! Every run keeps its own folder, `OUT/traces/<config_id>-r<run>/`, holding (when the run
//! produced them; a baseline has none):
//! - `sender-series.csv`: the sender's transport time series (`shoal send --stats-out`): per
//!   sample and connection, cumulative counters and the interval's goodput and retransmits;
//! - `latency.csv`: the per-file latency distribution (`shoal send --latency-out`);
//! - `receiver-series.csv`: files and bytes the receiver closed over time.
//!
//! Each file may also be stored gzip-compressed under its name with `.gz` appended (as committed
//! results keep them); the report reads either, the plain file when both are there.
//!
//! Every file's rows carry the run id (`run_id`), so files copied out of their folder still
//! say which run they belong to.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::report::ConfigSummary;

pub use shoal_row::traces::{LATENCY, RECEIVER_SERIES, SENDER_SERIES};

/// The folder of one run's traces.
pub fn run_dir(out: &Path, config_id: &str, run: &str) -> PathBuf {
    out.join("traces").join(format!("{config_id}-r{run}"))
}

/// Compresses every `*.csv` of a run's trace folder to `*.csv.gz` (written beside it, then the
/// plain file removed): traces are most of a sweep folder's bytes, and pandas, polars and
/// [`trace_file`] read the compressed files directly.
pub fn compress_dir(dir: &Path) -> Result<()> {
    use std::io::Write;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for e in entries {
        let path = e?.path();
        if path.extension().is_none_or(|x| x != "csv") {
            continue;
        }
        let gz = path.with_extension("csv.gz");
        let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let part = path.with_extension("csv.gz.part");
        let f = File::create(&part).with_context(|| format!("creating {}", part.display()))?;
        let mut enc = flate2::write::GzEncoder::new(f, flate2::Compression::default());
        enc.write_all(&text)?;
        enc.finish()?.sync_all()?;
        std::fs::rename(&part, &gz)?;
        std::fs::remove_file(&path)?;
    }
    Ok(())
}

/// The verified run whose seconds are the median of the configuration's verified runs (the
/// lower of the middle two for an even count), as its `run` number.
pub fn median_run(c: &ConfigSummary) -> Option<&str> {
    let mut ok: Vec<(f64, &str)> = c
        .runs
        .iter()
        .filter(|r| r.ok && r.seconds.is_finite())
        .map(|r| (r.seconds, r.run.as_str()))
        .collect();
    ok.sort_by(|a, b| a.0.total_cmp(&b.0));
    ok.get(ok.len().saturating_sub(1) / 2).map(|x| x.1)
}

/// The trace `name` in a run's folder `dir`: the file itself, else its gzip-compressed
/// `NAME.gz`; `None` when neither is there.
pub fn trace_file(dir: &Path, name: &str) -> Option<PathBuf> {
    let plain = dir.join(name);
    if plain.exists() {
        return Some(plain);
    }
    let gz = dir.join(format!("{name}.gz"));
    gz.exists().then_some(gz)
}

/// Reads the trace `name` of `dir` (plain or `.gz`, [`trace_file`]) into rows of column →
/// number (cells that are not numbers are skipped).
fn numeric_rows(dir: &Path, name: &str) -> Result<Vec<BTreeMap<String, f64>>> {
    let path = trace_file(dir, name).unwrap_or_else(|| dir.join(name));
    let file = File::open(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let input: Box<dyn Read> = match path.extension().is_some_and(|e| e == "gz") {
        true => Box::new(flate2::read::MultiGzDecoder::new(file)),
        false => Box::new(file),
    };
    let mut r = csv::Reader::from_reader(input);
    let h = r.headers()?.clone();
    let mut out = Vec::new();
    for rec in r.records() {
        let rec = rec.with_context(|| format!("reading {}", path.display()))?;
        out.push(
            h.iter()
                .zip(rec.iter())
                .filter_map(|(k, v)| Some((k.to_string(), v.parse::<f64>().ok()?)))
                .collect(),
        );
    }
    Ok(out)
}

/// One point of a run's time series, summed (cwnd, goodput) or averaged (RTT) over its
/// connections.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SeriesPoint {
    pub t_s: f64,
    pub cwnd_bytes: f64,
    pub rtt_ms: f64,
    pub goodput_mbit_s: f64,
}

/// The run's series from `sender-series.csv`; goodput from `receiver-series.csv` when it is
/// there and reports files before its last sample (bytes ready at the destination), else the
/// sender's (bytes acknowledged). In bundle modes the receiver reports nothing per file, only
/// its completion, so its series is a single step at the end and the sender's goodput is
/// drawn instead.
pub fn read_series(dir: &Path) -> Result<Vec<SeriesPoint>> {
    let rows = numeric_rows(dir, SENDER_SERIES)?;
    let mut by_t: BTreeMap<u64, (SeriesPoint, u32)> = BTreeMap::new();
    for r in rows {
        let g = |k: &str| r.get(k).copied().unwrap_or(0.0);
        let key = (g("t_s") * 1000.0).round() as u64;
        let e = by_t.entry(key).or_insert((
            SeriesPoint {
                t_s: g("t_s"),
                ..Default::default()
            },
            0,
        ));
        e.0.cwnd_bytes += g("cwnd_bytes");
        e.0.rtt_ms += g("rtt_ms");
        e.0.goodput_mbit_s += g("interval_goodput_mbit_s");
        e.1 += 1;
    }
    let mut points: Vec<SeriesPoint> = by_t
        .into_values()
        .map(|(mut p, n)| {
            p.rtt_ms /= n.max(1) as f64;
            p
        })
        .collect();
    let rrows = match trace_file(dir, RECEIVER_SERIES) {
        Some(_) => numeric_rows(dir, RECEIVER_SERIES)?,
        None => Vec::new(),
    };
    let files = |r: &BTreeMap<String, f64>| r.get("files_closed").copied().unwrap_or(0.0);
    let reports_progress = rrows.split_last().is_some_and(|(last, before)| {
        before
            .iter()
            .any(|r| files(r) > 0.0 && files(r) < files(last))
    });
    if reports_progress {
        let at = |t: f64| -> f64 {
            // Receiver goodput of the interval ending at the nearest sample at or before t.
            rrows
                .iter()
                .rev()
                .find(|r| r.get("t_s").copied().unwrap_or(f64::MAX) <= t + 1e-9)
                .and_then(|r| r.get("interval_goodput_mbit_s").copied())
                .unwrap_or(0.0)
        };
        for p in &mut points {
            p.goodput_mbit_s = at(p.t_s);
        }
    }
    Ok(points)
}

/// The run's per-file latency distribution: (latency ms, percentile 0–100).
pub fn read_latency(dir: &Path) -> Result<Vec<(f64, f64)>> {
    Ok(numeric_rows(dir, LATENCY)?
        .into_iter()
        .filter_map(|r| Some((*r.get("value_ms")?, *r.get("percentile")?)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::RunPoint;

    fn config(runs: &[(&str, bool, f64)]) -> ConfigSummary {
        ConfigSummary {
            id: "c01".into(),
            config: String::new(),
            kind: "shoal".into(),
            payload: String::new(),
            payload_files: String::new(),
            payload_bytes: String::new(),
            params: Vec::new(),
            runs: runs
                .iter()
                .map(|&(run, ok, seconds)| RunPoint {
                    run: run.into(),
                    ok,
                    mb_per_s: 0.0,
                    seconds,
                    partial_mb_per_s: None,
                    error: String::new(),
                })
                .collect(),
            median_mb_per_s: None,
            cc: String::new(),
            is_reference: false,
            link: String::new(),
            goodput_ceiling_mb_per_s: None,
        }
    }

    #[test]
    fn the_median_run_is_a_verified_one() {
        let c = config(&[
            ("1", true, 3.0),
            ("2", false, 0.1),
            ("3", true, 1.0),
            ("4", true, 2.0),
        ]);
        assert_eq!(median_run(&c), Some("4"));
        let c = config(&[("1", true, 3.0), ("2", true, 1.0)]);
        assert_eq!(median_run(&c), Some("2"));
        assert_eq!(median_run(&config(&[("1", false, 1.0)])), None);
    }

    #[test]
    fn series_sum_connections_and_prefer_the_receiver_goodput() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(
            t.path().join(SENDER_SERIES),
            "run_id,t_s,conn,rtt_ms,cwnd_bytes,interval_goodput_mbit_s\n\
             ab,0.100,0,100,1000,5\nab,0.100,1,200,3000,7\nab,0.200,0,150,2000,9\n",
        )
        .unwrap();
        let s = read_series(t.path()).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].cwnd_bytes, s[0].rtt_ms, s[0].goodput_mbit_s),
            (4000.0, 150.0, 12.0)
        );
        std::fs::write(
            t.path().join(RECEIVER_SERIES),
            "run_id,t_s,files_closed,bytes_closed,interval_goodput_mbit_s\nab,0.1,1,10,3\nab,0.2,2,20,4\n",
        )
        .unwrap();
        let s = read_series(t.path()).unwrap();
        assert_eq!((s[0].goodput_mbit_s, s[1].goodput_mbit_s), (3.0, 4.0));
        // A receiver that reported only its completion (bundle modes): the sender's goodput.
        std::fs::write(
            t.path().join(RECEIVER_SERIES),
            "run_id,t_s,files_closed,bytes_closed,interval_goodput_mbit_s\nab,0.1,0,0,0\nab,0.2,2,20,80\n",
        )
        .unwrap();
        let s = read_series(t.path()).unwrap();
        assert_eq!((s[0].goodput_mbit_s, s[1].goodput_mbit_s), (12.0, 9.0));
    }

    /// Writes `text` gzip-compressed to `path`.
    fn write_gz(path: &Path, text: &str) {
        use std::io::Write;
        let f = File::create(path).unwrap();
        let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::default());
        gz.write_all(text.as_bytes()).unwrap();
        gz.finish().unwrap();
    }

    #[test]
    fn a_compressed_folder_reads_as_the_plain_one() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        let text = "run_id,value_ms,percentile\nab,1.5,50\nab,9,100\n";
        std::fs::write(d.join(LATENCY), text).unwrap();
        let before = read_latency(d).unwrap();
        compress_dir(d).unwrap();
        assert!(!d.join(LATENCY).exists());
        assert_eq!(
            trace_file(d, LATENCY),
            Some(d.join(format!("{LATENCY}.gz")))
        );
        assert_eq!(read_latency(d).unwrap(), before);
    }

    #[test]
    fn compressed_traces_are_read_and_the_plain_file_wins() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        assert_eq!(trace_file(d, LATENCY), None);
        assert!(read_latency(d).is_err());
        write_gz(
            &d.join(format!("{LATENCY}.gz")),
            "run_id,value_ms,percentile\nab,1.5,50\nab,9,100\n",
        );
        assert_eq!(read_latency(d).unwrap(), [(1.5, 50.0), (9.0, 100.0)]);
        write_gz(
            &d.join(format!("{SENDER_SERIES}.gz")),
            "run_id,t_s,conn,rtt_ms,cwnd_bytes,interval_goodput_mbit_s\nab,0.1,0,100,1000,5\n",
        );
        write_gz(
            &d.join(format!("{RECEIVER_SERIES}.gz")),
            "run_id,t_s,files_closed,bytes_closed,interval_goodput_mbit_s\nab,0.1,1,10,3\nab,0.2,2,20,4\n",
        );
        let s = read_series(d).unwrap();
        assert_eq!((s[0].cwnd_bytes, s[0].goodput_mbit_s), (1000.0, 3.0));
        // Both there: the plain file is read.
        std::fs::write(d.join(LATENCY), "run_id,value_ms,percentile\nab,2,100\n").unwrap();
        assert_eq!(trace_file(d, LATENCY), Some(d.join(LATENCY)));
        assert_eq!(read_latency(d).unwrap(), [(2.0, 100.0)]);
    }
}
