//! Congestion controllers, several connections per run, and transport statistics, with real
//! sender and receiver processes over loopback.

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::*;

/// Every controller × {1, 4} connections for one mode: the tree verifies and the row shows
/// what was in effect.
fn every_cc_and_connection_count(mode: &str) {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, 2000, "4KiB", 20, 21);

    let mut run = 0;
    for cc in ["cubic", "bbr", "reno"] {
        for conns in ["1", "4"] {
            run += 1;
            // A fresh destination per run, by a receiver of its own.
            let dst = t.path().join(format!("dst-{run}"));
            let rx_run = ReceiverProc::start(&t.path().join("id"), &dst, &[]);
            let out = rx_run.send(
                &src,
                &["--mode", mode, "--cc", cc, "--connections", conns, "--json"],
            );
            assert!(out.status.success(), "{mode} {cc} ×{conns}: {}", text(&out));
            let row = json(&out);
            // The controller read back, and whose implementation ran it.
            let (expect_cc, expect_impl) = if mode.starts_with("quic") {
                (if cc == "reno" { "newreno" } else { cc }, "quinn")
            } else {
                (cc, "linux")
            };
            assert_eq!(row["cc"], expect_cc, "{mode} {cc}: controller read back");
            assert_eq!(row["cc_impl"], expect_impl, "{mode} {cc}: implementation");
            assert_eq!(row["cc_requested"], cc);
            assert_eq!(row["connections"].as_u64(), Some(conns.parse().unwrap()));
            assert_eq!(
                row["receiver_connections"].as_u64(),
                Some(conns.parse().unwrap())
            );
            assert!(
                row["rtt_ms"].as_f64().unwrap() > 0.0,
                "{mode} {cc}: RTT on every connection"
            );
            if !mode.starts_with("quic") {
                // quinn takes send and ack times from one driver tick, so on loopback its
                // minimum RTT can truly be 0; the smoothed RTT above cannot.
                assert!(row["min_rtt_ms"].as_f64().unwrap() > 0.0);
            }
            assert!(row["cwnd_bytes"].as_u64().unwrap() > 0, "{mode} {cc}: cwnd");
            assert!(
                row["sent_packets"].as_u64().unwrap() > 0,
                "{mode} {cc}: packets"
            );
            assert!(row["retransmits"].is_u64(), "retransmit count present");
            if mode.starts_with("quic") {
                // QUIC windows are for the path: the run's connections share them. A
                // connection seated after another one finished gets a larger share (the
                // window divided by the connections still carrying data), never more.
                let n = conns.parse::<u64>().unwrap();
                let share = (20u64 << 20) / n;
                assert_eq!(row["send_window"].as_u64(), Some(share), "{mode} ×{conns}");
                let got = row["conn_window"].as_u64().unwrap();
                assert!(
                    (1..=n).any(|carrying| got == (20u64 << 20) / carrying),
                    "{mode} ×{conns}: receive window {got} is no share of 20 MiB"
                );
            }
            if mode.starts_with("quic") {
                // Sized for the path: at least 2 MiB, at most the connection's share.
                let least = row["receiver_conn_window_min"].as_u64().unwrap();
                let got = row["conn_window"].as_u64().unwrap();
                assert!((2 << 20..=got).contains(&least), "{mode}: {least} of {got}");
            } else {
                assert!(row["receiver_conn_window_min"].is_null(), "{mode}");
            }
            assert!(trees_identical(&src, &dst), "{mode} {cc} ×{conns}");
        }
    }
}

/// `recv --fixed-window` gives a QUIC connection its whole window from the start; by default
/// a loopback connection starts near 2 MiB (common/src/window_tune.rs).
#[test]
fn quic_window_sized_for_the_path_unless_fixed() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, 200, "4KiB", 4, 5);
    let runs = [
        ("quic-bundle", true),
        ("quic-bundle", false),
        ("quic-streams", true),
        ("quic-streams", false),
    ];
    for (run, (mode, fixed)) in runs.into_iter().enumerate() {
        let dst = t.path().join(format!("dst-{run}"));
        let args: &[&str] = if fixed { &["--fixed-window"] } else { &[] };
        let rx = ReceiverProc::start(&t.path().join("id"), &dst, args);
        let out = rx.send(&src, &["--mode", mode, "--json"]);
        assert!(out.status.success(), "{}", text(&out));
        let row = json(&out);
        let whole = row["conn_window"].as_u64().unwrap();
        let least = row["receiver_conn_window_min"].as_u64().unwrap();
        assert_eq!(whole, 20 << 20);
        if fixed {
            assert_eq!(least, whole);
        } else {
            // Twice what 10 Gbit/s holds over the handshake's round trip: 20 MiB would take a
            // loopback handshake of 8.4 ms.
            assert!((2 << 20..whole).contains(&least), "{least}");
        }
        assert!(trees_identical(&src, &dst));
    }
}

#[test]
fn tcp_bundle_every_cc_and_connections() {
    every_cc_and_connection_count("tcp-bundle");
}

#[test]
fn tcp_streams_every_cc_and_connections() {
    every_cc_and_connection_count("tcp-streams");
}

#[test]
fn quic_bundle_every_cc_and_connections() {
    every_cc_and_connection_count("quic-bundle");
}

#[test]
fn quic_streams_every_cc_and_connections() {
    every_cc_and_connection_count("quic-streams");
}

#[test]
fn tcp_wait_every_cc_and_connections() {
    every_cc_and_connection_count("tcp-wait");
}

#[test]
fn unknown_cc_fails_before_connecting_naming_the_available_ones() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, 3, "1KiB", 1, 1);
    // Nothing listens there: an error about connecting would mean it tried.
    let out = shoal()
        .args(["send", "--to", "127.0.0.1:9", "--src"])
        .arg(&src)
        .args([
            "--cc",
            "nosuch",
            "--pin",
            &format!("sha256:{}", "00".repeat(32)),
            "--token-file",
        ])
        .arg(t.path().join("missing-token"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown congestion controller 'nosuch'"),
        "{err}"
    );
    let offered =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap();
    for cc in offered.split_whitespace() {
        assert!(err.contains(cc), "names {cc}: {err}");
    }
    assert!(!err.contains("cannot connect"), "{err}");
}

/// TCP sockets that process `pid` holds, ESTABLISHED to remote port `port` (from the
/// process's descriptors matched to /proc/net/tcp{,6} by inode): what it really has open.
fn established_by(pid: u32, port: u16) -> usize {
    let inodes: std::collections::HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().to_string();
                    l.strip_prefix("socket:[")?
                        .strip_suffix(']')
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    // /proc/net/tcp is read in pieces while the kernel's socket table changes, so one socket
    // can be listed twice: count distinct sockets (inodes), not lines.
    let mut seen = std::collections::HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(remote), Some(state), Some(inode)) = (f.get(2), f.get(3), f.get(9)) else {
                continue;
            };
            let remote_port = remote
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            if remote_port == Some(port) && *state == "01" && inodes.contains(*inode) {
                seen.insert(inode.to_string());
            }
        }
    }
    seen.len()
}

#[test]
fn four_connections_are_really_open() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    // Enough files that the run lasts well beyond the sampling interval even on a busy machine.
    gen(&src, 10_000, "1KiB", 40, 8);
    let dst = t.path().join("dst");
    let rx = ReceiverProc::start(&t.path().join("id"), &dst, &[]);
    let port: u16 = rx.addr.rsplit(':').next().unwrap().parse().unwrap();
    // The stop-and-wait arm keeps the run going long enough to sample it many times.
    let mut child = shoal()
        .args(["send", "--to", &rx.addr, "--src"])
        .arg(&src)
        .arg("--identity")
        .arg(&rx.identity)
        .args(["--mode", "tcp-wait", "--connections", "4", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut peak = 0;
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(120) {
        peak = peak.max(established_by(child.id(), port));
        std::thread::sleep(Duration::from_millis(2));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        peak, 4,
        "ESTABLISHED sockets the sender held to the receiver during the run"
    );
    assert_eq!(json(&out)["connections"], 4);
    assert!(trees_identical(&src, &dst));
}

#[test]
fn stats_time_series_samples_every_connection() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, 3000, "4KiB", 30, 9);
    let rx = ReceiverProc::start(&t.path().join("id"), &t.path().join("dst"), &[]);
    let series = t.path().join("stats.csv");
    let out = rx.send(
        &src,
        &[
            "--mode",
            "tcp-wait",
            "--connections",
            "2",
            "--stats-interval",
            "20ms",
            "--stats-out",
            series.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    check_series(&series);
}

fn check_series(series: &Path) {
    let mut r = csv::Reader::from_path(series).unwrap();
    let headers = r.headers().unwrap().clone();
    assert_eq!((&headers[0], &headers[1]), ("run_id", "t_s"));
    assert!(headers.iter().any(|h| h == "cwnd_bytes"));
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    assert!(rows.len() >= 4, "{} samples", rows.len());
    let conns: std::collections::BTreeSet<String> = rows.iter().map(|r| r[2].to_string()).collect();
    assert_eq!(conns.len(), 2, "both connections sampled");
    let rtt_col = headers.iter().position(|h| h == "rtt_ms").unwrap();
    assert!(rows
        .iter()
        .any(|r| r[rtt_col].parse::<f64>().unwrap() > 0.0));
}

#[test]
fn a_once_receiver_lets_every_connection_get_its_reply() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, 512, "4KiB", 8, 10);
    for mode in ["tcp-bundle", "quic-streams"] {
        let dst = t.path().join(format!("dst-{mode}"));
        let mut rx = ReceiverProc::start(&t.path().join("id"), &dst, &["--once"]);
        let out = rx.send(&src, &["--mode", mode, "--connections", "8", "--json"]);
        assert!(out.status.success(), "{mode}: {}", text(&out));
        assert_eq!(json(&out)["connections"], 8);
        let status = rx.child.wait().unwrap();
        assert!(status.success(), "{mode}: --once receiver exit {status:?}");
        assert!(trees_identical(&src, &dst));
    }
}
