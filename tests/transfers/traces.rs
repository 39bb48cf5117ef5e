//! Per-run traces: `shoal send`'s series on loopback (QUIC goodput from acknowledged data), and
//! a sweep that keeps one trace folder per run for `shoal report`'s charts (root, emulated link).

use crate::support;

use std::path::Path;

use support::sweep::sweep;
use support::{gen, json, needs_root, rows, serial, shoal, text, ReceiverProc};

fn number(row: &std::collections::BTreeMap<String, String>, col: &str) -> f64 {
    row[col]
        .parse()
        .unwrap_or_else(|_| panic!("{col} = {:?}", row[col]))
}

#[test]
fn quic_series_has_acknowledged_bytes_and_interval_goodput() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, 120, "256KiB", 4, 21);
    let rx = ReceiverProc::start(&t.path().join("id"), &t.path().join("dst"), &[]);
    let series = t.path().join("series.csv");
    let out = rx.send(
        &src,
        &[
            "--mode",
            "quic-bundle",
            "--stats-interval",
            "100ms",
            "--stats-out",
            series.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let row = json(&out);
    let run_id = row["run_id"].as_str().unwrap();
    assert!(
        row["bytes_acked"].as_u64().unwrap() >= 120 * 256 * 1024,
        "{row}"
    );
    let s = rows(&series);
    assert!(!s.is_empty());
    assert!(s.iter().all(|r| r["run_id"] == run_id), "{s:?}");
    assert!(s.iter().any(|r| number(r, "bytes_acked") > 0.0), "{s:?}");
    assert!(
        s.iter().any(|r| number(r, "interval_goodput_mbit_s") > 0.0),
        "{s:?}"
    );
    // Every row has the interval's retransmits as a whole count (a missing or fractional cell
    // fails here).
    assert!(
        s.iter()
            .all(|r| number(r, "interval_retransmits").fract() == 0.0),
        "{s:?}"
    );
}

#[test]
fn trace_dir_holds_three_files_with_the_run_id() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, 300, "16KiB", 4, 22);
    let rx = ReceiverProc::start(&t.path().join("id"), &t.path().join("dst"), &[]);
    let dir = t.path().join("traces/c01-r1");
    let out = rx.send(
        &src,
        &[
            "--mode",
            "quic-streams",
            "--trace-dir",
            dir.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let run_id = json(&out)["run_id"].as_str().unwrap().to_string();
    check_trace_dir(&dir, &run_id);
    let r = rows(&dir.join("receiver-series.csv"));
    let last = r.last().unwrap();
    assert_eq!(
        (&*last["files_closed"], &*last["bytes_closed"]),
        ("300", "4915200")
    );
    // Without an output for the series, --stats-interval is refused by the parser.
    let o = shoal()
        .args(["send", "--to", &rx.addr, "--src"])
        .arg(&src)
        .args(["--stats-interval", "100ms"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--trace-dir"),
        "{}",
        text(&o)
    );
}

/// The three files of a run's trace folder, every row carrying `run_id`.
fn check_trace_dir(dir: &Path, run_id: &str) {
    for (f, cols) in [
        (
            "sender-series.csv",
            &["t_s", "conn", "cwnd_bytes", "interval_goodput_mbit_s"][..],
        ),
        ("latency.csv", &["value_ms", "percentile"][..]),
        (
            "receiver-series.csv",
            &[
                "t_s",
                "files_closed",
                "bytes_closed",
                "interval_goodput_mbit_s",
            ][..],
        ),
    ] {
        let p = dir.join(f);
        let r = rows(&p);
        assert!(!r.is_empty(), "{} has no rows", p.display());
        let header = support::read_text(&p);
        assert!(header.starts_with("run_id,"), "{}", p.display());
        for c in cols {
            assert!(r[0].contains_key(*c), "{}: no {c}", p.display());
        }
        assert!(
            r.iter().all(|row| row["run_id"] == run_id),
            "{}: rows of another run",
            p.display()
        );
    }
}

#[test]
#[ignore = "needs root"]
fn a_sweep_keeps_one_trace_folder_per_run_and_report_charts_them() {
    needs_root();
    let _l = serial();
    let t = tempfile::tempdir().unwrap();
    let m = "[sweep]\ntimeout = \"1m\"\n\
             [link]\nname = \"swtr1\"\nrtt = \"20ms\"\nrate = \"200mbit\"\ncheck = false\n\
             [payload.p]\nfiles = 200\nsize = \"16KiB\"\ndirs = 2\nseed = 3\n\
             [axes]\nmode = [\"tcp-bundle\", \"quic-streams\"]\n";
    let s = sweep(
        t.path(),
        "tr",
        m,
        "swtr1",
        &["--runs", "3", "--seed", "4"],
        &[],
    );
    let runs = rows(&s.out.join("runs.csv"));
    assert_eq!(runs.len(), 6, "{}", s.stderr);
    for r in &runs {
        assert_eq!(r["status"], "ok", "{r:?}");
        let dir = s
            .out
            .join("traces")
            .join(format!("{}-r{}", r["config_id"], r["run"]));
        check_trace_dir(&dir, &r["run_id"]);
    }
    let folders = std::fs::read_dir(s.out.join("traces")).unwrap().count();
    assert_eq!(folders, 6, "one folder per run");
    // `shoal report` draws the trace charts from the folders alone.
    let charts = [
        "latency-cdf.svg",
        "latency-cdf.png",
        "timeseries.svg",
        "timeseries.png",
    ];
    for f in charts {
        let _ = std::fs::remove_file(s.out.join(f));
    }
    let o = shoal().arg("report").arg(&s.out).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    for f in charts {
        let len = s.out.join(f).metadata().map(|m| m.len()).unwrap_or(0);
        assert!(len > 1000, "{f}: {len} bytes");
    }
}
