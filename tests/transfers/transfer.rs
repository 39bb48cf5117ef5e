//! Real sender and receiver processes over loopback TLS/TCP.

use crate::support;

use std::io::Write;

use support::*;

#[test]
fn bundle_moves_small_files_and_a_large_one_and_verifies() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, 2000, "4KiB", 20, 7);
    // One 64 MiB file beside the small ones.
    let mut big = std::fs::File::create(src.join("big.bin")).unwrap();
    let mut block = vec![0u8; 1 << 20];
    for i in 0..64u32 {
        block
            .iter_mut()
            .enumerate()
            .for_each(|(j, b)| *b = (j as u32 ^ i.wrapping_mul(2654435761)) as u8);
        big.write_all(&block).unwrap();
    }
    drop(big);
    std::fs::create_dir_all(src.join("empty/inner")).unwrap();
    let rx = ReceiverProc::start(&t.path().join("id"), &t.path().join("dst"), &[]);
    let csv = t.path().join("rows.csv");
    let out = rx.send(
        &src,
        &[
            "--mode",
            "tcp-bundle",
            "--csv",
            csv.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let row: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(row["status"], "ok");
    assert_eq!(row["files"], 2001);
    assert_eq!(row["bytes"], 2000 * 4096 + (64u64 << 20));
    assert_eq!(row["files_ready"], 2001);
    assert!(row["seconds"].as_f64().unwrap() > 0.0);
    assert!(row["receiver_peak_rss_bytes"].as_u64().unwrap() > 0);
    assert!(rx.next_run_line().contains(": ok,"));
    assert!(trees_identical(&src, &t.path().join("dst")));
    assert!(
        t.path().join("dst/empty/inner").is_dir(),
        "empty folders are transferred"
    );
    let csv_text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(csv_text.lines().count(), 2, "header + one row");
    assert!(csv_text.starts_with("timestamp,"));

    // A second run to the same receiver appends to the CSV without a second header.
    let dst2 = t.path().join("dst"); // same destination: files are rewritten in place
    let out = rx.send(&src, &["--csv", csv.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("ok: 2001 files"));
    assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 3);
    // The next step: the run's id, its folder and the command that checks it (issue 41).
    let id = rows(&csv)[1]["run_id"].clone();
    let next = format!(
        "run {id}: on the receiver in DEST/{id}/ (DEST: its --dest; with recv --flat, DEST itself); check it: shoal verify {} DEST/{id}",
        src.display()
    );
    assert!(stdout.lines().any(|l| l == next), "{stdout}");
    assert!(!stdout.contains("resume:"), "{stdout}");
    // A --resume run says what it started from: here no path state, a cold start.
    let state = t.path().join("path-state");
    let out = rx.send(
        &src,
        &[
            "--mode",
            "quic-bundle",
            "--resume",
            "--path-state",
            state.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("resume: no fresh path state for this receiver, a cold start")),
        "{stdout}"
    );
    assert!(trees_identical(&src, &dst2));
}

#[test]
fn wrong_token_is_refused_before_anything_is_created() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, 50, "4KiB", 2, 1);
    let dst = t.path().join("dst");
    let rx = ReceiverProc::start(&t.path().join("id"), &dst, &[]);
    let pin = std::fs::read_to_string(t.path().join("id/pin")).unwrap();
    let wrong = t.path().join("wrong-token");
    std::fs::write(&wrong, "not-the-token\n").unwrap();
    let out = shoal()
        .args(["send", "--to", &rx.addr, "--src"])
        .arg(&src)
        .args(["--pin", pin.trim(), "--token-file"])
        .arg(&wrong)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("wrong token"), "{}", text(&out));
    assert!(entries(&dst).is_empty(), "destination must stay empty");
    // The receiver keeps serving: the right token works.
    let ok = rx.send(&src, &[]);
    assert!(ok.status.success(), "{}", text(&ok));
}

#[test]
fn wrong_pin_is_refused_by_the_sender_before_sending() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, 10, "1KiB", 1, 1);
    let dst = t.path().join("dst");
    let rx = ReceiverProc::start(&t.path().join("id"), &dst, &[]);
    let token = t.path().join("id/token");
    let bad_pin = format!("sha256:{}", "ab".repeat(32));
    let out = shoal()
        .args(["send", "--to", &rx.addr, "--src"])
        .arg(&src)
        .args(["--pin", &bad_pin, "--token-file"])
        .arg(&token)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("pin mismatch"), "{}", text(&out));
    assert!(entries(&dst).is_empty());
}

#[test]
fn destination_symlink_is_never_followed() {
    let t = tempfile::tempdir().unwrap();
    let outside = t.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let dst = t.path().join("dst");
    std::fs::create_dir_all(&dst).unwrap();
    std::os::unix::fs::symlink(&outside, dst.join("d")).unwrap();
    let src = t.path().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    std::fs::write(src.join("d/f"), b"payload").unwrap();
    let rx = ReceiverProc::start(&t.path().join("id"), &dst, &[]);
    let out = rx.send(&src, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("symbolic link") || stdout.contains("not a folder"),
        "{}",
        text(&out)
    );
    assert!(
        stdout.contains("\\\"d\\\"") || stdout.contains("\"d\""),
        "names the path: {stdout}"
    );
    assert!(
        entries(&outside).is_empty(),
        "nothing written outside the destination"
    );
}

#[test]
fn verify_reports_differences_and_exits_1() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    gen(&a, 20, "100", 2, 3);
    let b = t.path().join("b");
    gen(&b, 20, "100", 2, 3);
    assert!(trees_identical(&a, &b));
    std::fs::write(b.join("d0/f00"), b"changed").unwrap();
    std::fs::remove_file(b.join("d1/f19")).unwrap();
    std::fs::write(b.join("extra"), b"x").unwrap();
    let o = run(&["verify", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("missing: d1/f19"), "{s}");
    assert!(s.contains("differs: d0/f00"), "{s}");
    assert!(s.contains("extra: extra"), "{s}");
}

#[test]
fn gen_is_reproducible_by_seed() {
    let t = tempfile::tempdir().unwrap();
    gen(&t.path().join("a"), 100, "1KiB", 4, 99);
    gen(&t.path().join("b"), 100, "1KiB", 4, 99);
    assert!(trees_identical(&t.path().join("a"), &t.path().join("b")));
    let o = run(&[
        "gen",
        "--out",
        t.path().join("c").to_str().unwrap(),
        "--files",
        "3",
        "--size",
        "4KiB",
    ]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("seed "),
        "{}",
        text(&o)
    );
}

/// Issue 20, item 1: with `--interval --json` the sender prints one JSON object per interval
/// on stderr while the run goes on (here a receiver held stopped for a while), then the row.
#[test]
fn interval_lines_are_json_lines_while_the_run_goes_on() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, 300, "16KiB", 3, 41);
    let rx = ReceiverProc::start(&t.path().join("id"), &t.path().join("dst"), &[]);
    signal(rx.child.id(), "STOP");
    let send = Watched::spawn(rx.send_command(
        &src,
        &["--mode", "tcp-streams", "--interval", "100ms", "--json"],
    ));
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(send.next_line());
    }
    signal(rx.child.id(), "CONT");
    let (out, rest) = send.finish();
    assert!(out.status.success(), "{}", text(&out));
    let row = json(&out);
    assert_eq!(row["status"], "ok");
    seen.extend(rest.into_iter().map(|(_, l)| l));
    let mut last_t = 0.0;
    let (mut last_acked, mut retransmits) = (0u64, 0u64);
    for line in &seen {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(v["event"], "interval", "{line}");
        assert_eq!(v["files_total"], 300, "{line}");
        assert_eq!(v["bytes_total"], 300 * 16384, "{line}");
        for k in [
            "files_sent",
            "files_ready",
            "bytes_sent",
            "mb_per_s",
            "mbit_per_s",
            "connections",
            "cwnd_bytes",
            "rtt_ms",
            "retransmits",
            "bytes_acked",
            "retransmits_total",
        ] {
            assert!(v[k].is_number(), "{k} in {line}");
        }
        assert!(v.get("eta_s").is_some(), "{line}");
        let t_s = v["t_s"].as_f64().unwrap();
        assert!(t_s > last_t, "{line}");
        // The rate is what the receiver acknowledged in the interval, as iperf3 shows it,
        // and retransmits are the interval's (issue 41).
        let acked = v["bytes_acked"].as_u64().unwrap();
        let rate = acked.saturating_sub(last_acked) as f64 / (t_s - last_t) / 1e6;
        let mb_per_s = v["mb_per_s"].as_f64().unwrap();
        assert!(
            (mb_per_s - rate).abs() <= 1e-6 * rate.max(1.0),
            "{rate} in {line}"
        );
        retransmits += v["retransmits"].as_u64().unwrap();
        assert_eq!(v["retransmits_total"].as_u64(), Some(retransmits), "{line}");
        (last_t, last_acked) = (t_s, acked);
    }
    assert!(seen.len() >= 3);
}

/// Issue 20, item 1: Ctrl-C (SIGINT) on `send` prints the figures so far on stderr, prints
/// and appends a failed row whose error is "interrupted", and exits with status 130.
#[test]
fn ctrl_c_on_send_appends_an_interrupted_row_and_exits_130() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, 100, "16KiB", 1, 42);
    let rx = ReceiverProc::start(&t.path().join("id"), &t.path().join("dst"), &[]);
    // A receiver that does not answer: the run cannot end on its own.
    signal(rx.child.id(), "STOP");
    let csv = t.path().join("runs.csv");
    let send = Watched::spawn({
        let mut cmd = rx.send_command(&src, &["--interval", "100ms", "--csv"]);
        cmd.arg(&csv);
        cmd
    });
    let first = send.next_line();
    assert!(first.contains("files 0/100 sent"), "{first}");
    signal(send.child.id(), "INT");
    let (out, rest) = send.finish();
    signal(rx.child.id(), "CONT");
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    let stderr: Vec<String> = rest.into_iter().map(|(_, l)| l).collect();
    assert!(
        stderr
            .iter()
            .any(|l| l.starts_with("interrupted; so far:") && l.contains("/100 sent")),
        "{stderr:#?}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("interrupted"), "{stdout}");
    let rows = rows(&csv);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["status"], "failed");
    assert_eq!(rows[0]["error"], "interrupted");
    assert_eq!(rows[0]["files"], "100");
    // Unknown is empty, never 0 (issue 41): the receiver never reported its figures, and a
    // bundle run has no per-file reply to count ready files by.
    for k in [
        "files_ready",
        "bytes_ready",
        "receiver_seconds",
        "receiver_connections",
        "receiver_peak_rss_bytes",
        "latency_p50_ms",
        "latency_max_ms",
        "read_wait_ms",
    ] {
        assert_eq!(rows[0][k], "", "{k}: {:?}", rows[0]);
    }
}
