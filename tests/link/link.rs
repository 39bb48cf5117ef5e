//! Transfers across the emulated long link between two namespaces (needs root): the link
//! carries a real transfer that verifies, its delay is real and per packet, and a link that
//! goes dark mid-run (`shoal link blackhole`) fails that run cleanly on both sides.

use crate::support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use shoal_link::{CheckOptions, UpConfig};
use support::*;

/// `shoal send` run inside namespace `ns`.
fn send_in(ns: &str, rx: &ReceiverProc, src: &Path, extra: &[&str]) -> Output {
    let mut cmd = rx.send_command(src, extra);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    shoal_link::spawn_in_netns(ns, &mut cmd)
        .expect("start sender")
        .wait_with_output()
        .expect("sender output")
}

/// A receiver in `NAME-rcv` writing into `dst`, its identity in `dir/id`.
fn receiver_across(name: &str, dir: &Path, dst: &Path, extra: &[&str]) -> ReceiverProc {
    let ns = format!("{name}-rcv");
    ReceiverProc::start_at("198.18.0.2:0", Some(&ns), &dir.join("id"), dst, extra)
}

/// Generates `files` × 4 KiB, sends them from `NAME-snd` to a receiver in `NAME-rcv` with
/// `--mode MODE --json`, checks the run succeeded and the tree verifies, returns the row.
fn transfer_across(name: &str, files: u64, seed: u64, mode: &str) -> serde_json::Value {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, files, "4KiB", files.div_ceil(100), seed);
    let dst = t.path().join("dst");
    let rx = receiver_across(name, t.path(), &dst, &[]);
    let out = send_in(
        &format!("{name}-snd"),
        &rx,
        &src,
        &["--mode", mode, "--json"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(trees_identical(&src, &dst));
    json(&out)
}

#[test]
#[ignore = "needs root"]
fn transfer_across_a_checked_100ms_link_then_nothing_is_left() {
    needs_root();
    let _serial = serial();
    let name = unique("xa");
    let cfg = UpConfig::new(&name, Duration::from_millis(100), 200_000_000);
    let guard = link_up(&cfg);
    let pid = guard
        .state()
        .forwarder_pid
        .expect("tun backend has a forwarder");

    check_passes_apart_from_lateness(&name, &CheckOptions::default());

    let row = transfer_across(&name, 2000, 31, "tcp-bundle");
    // The transfer really crossed the link: its RTT is the link's.
    let rtt = row["min_rtt_ms"].as_f64().unwrap();
    assert!(
        (95.0..130.0).contains(&rtt),
        "min RTT {rtt} ms on a 100 ms link"
    );

    guard.down().expect("link down");
    for ns in [format!("{name}-snd"), format!("{name}-rcv")] {
        assert!(
            !Path::new("/run/netns").join(&ns).exists(),
            "{ns} left behind"
        );
    }
    let links = Command::new("ip").args(["-o", "link"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&links.stdout).contains(&name),
        "a TUN device is left"
    );
    assert!(process_gone(pid), "forwarder {pid} still running");
}

#[test]
#[ignore = "needs root"]
fn stop_and_wait_pays_one_round_trip_per_file() {
    needs_root();
    let _serial = serial();
    let name = unique("xb");
    let rtt = Duration::from_millis(50);
    let cfg = UpConfig::new(&name, rtt, 200_000_000);
    let guard = link_up(&cfg);
    let row = transfer_across(&name, 200, 32, "tcp-wait");
    let seconds = row["seconds"].as_f64().unwrap();
    let floor = 200.0 * rtt.as_secs_f64();
    println!("tcp-wait: 200 files in {seconds:.3} s; 200 × RTT = {floor:.3} s");
    assert!(
        seconds >= floor,
        "{seconds} s is less than 200 × RTT: the delay is not real"
    );
    assert!(
        seconds <= 1.15 * floor,
        "{seconds} s is more than 1.15 × 200 × RTT"
    );
    guard.down().expect("link down");
}

/// A child process killed (by PID) and reaped if the test ends before it does.
struct Reaped(Option<std::process::Child>);

impl Reaped {
    /// Waits up to `limit` for the process to exit; its output if it did.
    fn wait_bounded(&mut self, limit: Duration) -> Option<Output> {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            let child = self.0.as_mut().expect("not waited yet");
            if child.try_wait().expect("try_wait").is_some() {
                return self.0.take().map(|c| c.wait_with_output().expect("output"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `shoal link status --json` of link `name`.
fn status(name: &str) -> serde_json::Value {
    let out = run(&["link", "status", "--name", name, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    json(&out)
}

#[test]
#[ignore = "needs root"]
fn a_link_blackhole_mid_run_fails_the_run_and_the_receiver_serves_the_next() {
    needs_root();
    let _serial = serial();
    let name = unique("xc");
    let cfg = UpConfig::new(&name, Duration::from_millis(20), 50_000_000);
    let guard = link_up(&cfg);
    let t = tempfile::tempdir().unwrap();
    // 3,000 × 16 KiB = 49 MB: ~8 s at 50 Mbit/s, so the run is well under way at the cut.
    let src = t.path().join("src");
    gen(&src, 3000, "16KiB", 30, 33);
    let dst = t.path().join("dst");
    let rx = ReceiverProc::start_at(
        "198.18.0.2:0",
        Some(&format!("{name}-rcv")),
        &t.path().join("id"),
        &dst,
        &["--idle-timeout", "3s"],
    );
    let mut cmd = shoal();
    cmd.args(["send", "--to", &rx.addr, "--src"])
        .arg(&src)
        .arg("--identity")
        .arg(&rx.identity)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut sender = Reaped(Some(
        shoal_link::spawn_in_netns(&format!("{name}-snd"), &mut cmd).expect("start sender"),
    ));

    // Cut the link (5 s, longer than the receiver's 3 s idle timeout) once files arrive.
    let t0 = Instant::now();
    while entries(&dst).len() < 100 {
        assert!(t0.elapsed() < Duration::from_secs(20), "no files arrived");
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = run(&["link", "blackhole", "--name", &name, "--for", "5s"]);
    assert!(out.status.success(), "{}", text(&out));
    let cut = Instant::now();
    println!("{}", String::from_utf8_lossy(&out.stdout).trim());
    assert_eq!(status(&name)["counters"]["blackhole"]["active"], true);

    // The receiver gives up on the silent peer, fails the run and removes its partial files.
    let line = loop {
        let left = Duration::from_secs(20).saturating_sub(cut.elapsed());
        let l = rx
            .lines
            .recv_timeout(left)
            .expect("the receiver reported the run within 20 s of the cut");
        if l.starts_with("run ") {
            break l;
        }
    };
    println!(
        "receiver after {:.1} s: {line}",
        cut.elapsed().as_secs_f64()
    );
    assert!(line.contains("FAILED") && line.contains("idle"), "{line}");

    // The sender fails with a clear error and a failure row, once the link is back.
    let out = sender
        .wait_bounded(Duration::from_secs(25).saturating_sub(cut.elapsed()))
        .expect("the sender ended within 25 s of the cut");
    println!(
        "sender after {:.1} s: {}",
        cut.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let row = json(&out);
    assert_eq!(row["status"], "failed", "{row}");
    let error = row["error"].as_str().unwrap().to_lowercase();
    println!("sender row error: {error}");
    assert!(
        ["idle", "reset", "timed out", "connection", "broken pipe"]
            .iter()
            .any(|w| error.contains(w)),
        "unclear error: {error}"
    );
    let kept = only_complete_copies_of(&src, &dst);
    assert!(kept < 3000, "the whole run arrived ({kept} files)");

    // The forwarder counted what it dropped, and the blackhole ends on time.
    let s = status(&name);
    let dropped = s["counters"]["up"]["dropped_blackhole"].as_u64().unwrap()
        + s["counters"]["down"]["dropped_blackhole"].as_u64().unwrap();
    println!("dropped by the blackhole: {dropped} packets");
    assert!(dropped > 0, "{s}");
    while status(&name)["counters"]["blackhole"]["active"] == true {
        assert!(
            cut.elapsed() < Duration::from_secs(8),
            "blackhole did not end"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // The same receiver takes a good run across the restored link.
    for e in std::fs::read_dir(&dst).unwrap().flatten() {
        std::fs::remove_dir_all(e.path()).unwrap();
    }
    let good = t.path().join("good");
    gen(&good, 300, "4KiB", 3, 34);
    let out = send_in(&format!("{name}-snd"), &rx, &good, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(trees_identical(&good, &dst));
    drop(rx);
    guard.down().expect("link down");
}

/// Round trips a one-file run needs before the sender holds the completion report: TCP + TLS
/// 1.3 take three (SYN, TLS, hello and data → completion), QUIC two (handshake, data →
/// completion), and the stop-and-wait arm one more (the file's acknowledgement before the end
/// marker goes out).
fn protocol_round_trips(mode: &str) -> f64 {
    match mode {
        "quic-bundle" | "quic-streams" => 2.0,
        "tcp-wait" => 4.0,
        _ => 3.0,
    }
}

/// `seconds` runs from the first connect to the decoded completion report, in every mode:
/// a one-file run takes its protocol's round trips (no more than 10% over, never under), and
/// a 32 MiB file's `seconds` exceed the receiver's own time by no more than the round trips
/// before its first byte and the report's way back, + 50 ms. The QUIC modes used to stop the
/// clock only after draining the endpoint, ~1 s later; `--fsync` used to be inside `seconds`.
#[test]
#[ignore = "needs root"]
fn the_clock_stops_at_the_completion_report_in_every_mode() {
    needs_root();
    let _serial = serial();
    let name = unique("ck");
    let rtt = 0.1;
    let cfg = UpConfig::new(&name, Duration::from_secs_f64(rtt), 300_000_000);
    let guard = link_up(&cfg);
    let t = tempfile::tempdir().unwrap();
    let tiny = t.path().join("tiny");
    std::fs::create_dir_all(&tiny).unwrap();
    std::fs::write(tiny.join("one"), [7u8; 100]).unwrap();
    let large = t.path().join("large");
    gen(&large, 1, "32MiB", 1, 5);
    let dst = t.path().join("dst");
    std::fs::create_dir_all(&dst).unwrap();
    // --fsync: the sync follows the completion report and is timed on its own.
    let rx = ReceiverProc::start_at(
        "198.18.0.2:0",
        Some(&format!("{name}-rcv")),
        &t.path().join("id"),
        &dst,
        &["--fsync"],
    );
    let mut table = String::new();
    let mut failures = Vec::new();
    for mode in all_modes() {
        let trips = protocol_round_trips(mode);
        for (tree, what) in [(&tiny, "one 100-byte file"), (&large, "one 32 MiB file")] {
            clear(&dst);
            let out = send_in(
                &format!("{name}-snd"),
                &rx,
                tree,
                &["--mode", mode, "--json"],
            );
            assert!(out.status.success(), "{mode}: {}", text(&out));
            assert!(trees_identical(tree, &dst), "{mode}: {what} differs");
            let row = json(&out);
            let seconds = row["seconds"].as_f64().unwrap();
            let receiver = row["receiver_seconds"].as_f64().unwrap();
            let fsync = row["fsync_seconds"].as_f64().unwrap();
            table += &format!(
                "{mode:>12} {what:>18}: seconds {seconds:.3} = {:.2} RTT, receiver {receiver:.3}, fsync {fsync:.3}\n",
                seconds / rtt
            );
            if fsync <= 0.0 {
                failures.push(format!("{mode} {what}: no fsync time with recv --fsync"));
            }
            if tree == &tiny {
                let floor = trips * rtt;
                if seconds > floor * 1.1 || seconds < floor * 0.97 {
                    failures.push(format!(
                        "{mode} {what}: {seconds:.3} s, outside {floor:.3} s (+10%, -3%)"
                    ));
                }
            } else {
                let overhead = seconds - receiver;
                let allowed = trips * rtt + 0.05;
                if overhead > allowed {
                    failures.push(format!(
                        "{mode} {what}: seconds − receiver_seconds = {overhead:.3} s > {allowed:.3} s"
                    ));
                }
                // The link's rate is a ceiling no run can beat.
                let mbit = 32.0 * 8.0 * 1.048576 / seconds;
                if mbit > 300.0 {
                    failures.push(format!(
                        "{mode} {what}: {mbit:.0} Mbit/s on a 300 Mbit/s link"
                    ));
                }
            }
        }
    }
    drop(rx);
    guard.down().expect("link down");
    println!("{table}");
    assert!(failures.is_empty(), "{}\n{table}", failures.join("\n"));
}

/// Issue 20, item 1: `send --interval` lines arrive while a transfer across the emulated link
/// runs: at least two before the end of a ~3-second transfer (30 files stop-and-wait over a
/// 100 ms RTT), each showing the files the receiver confirmed so far.
#[test]
#[ignore = "needs root"]
fn interval_lines_arrive_during_a_transfer_across_the_link() {
    needs_root();
    let _serial = serial();
    let name = unique("xp");
    let cfg = UpConfig::new(&name, Duration::from_millis(100), 50_000_000);
    let guard = link_up(&cfg);
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, 30, "4KiB", 1, 51);
    let dst = t.path().join("dst");
    let rx = receiver_across(&name, t.path(), &dst, &[]);
    let cmd = rx.send_command(
        &src,
        &["--mode", "tcp-wait", "--interval", "500ms", "--json"],
    );
    let started = Instant::now();
    let send = Watched::spawn_in(Some(&format!("{name}-snd")), cmd);
    let (out, lines) = send.finish();
    let ended = Instant::now();
    assert!(out.status.success(), "{}", text(&out));
    let row = json(&out);
    let seconds = row["seconds"].as_f64().unwrap();
    assert!(seconds >= 3.0, "30 round trips of 100 ms took {seconds} s");
    let mut during = 0;
    let mut partial = false;
    for (at, line) in &lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(v["event"], "interval", "{line}");
        let ready = v["files_ready"].as_u64().unwrap();
        partial |= (1..30).contains(&ready);
        // Printed while the run went on: well before the sender exited.
        if *at + Duration::from_millis(300) < ended && v["t_s"].as_f64().unwrap() < seconds {
            during += 1;
        }
        if v["connections"] == 1 {
            // The connection's RTT is the link's.
            assert!(v["rtt_ms"].as_f64().unwrap() >= 90.0, "{line}");
        }
    }
    println!(
        "{during} interval lines during a {seconds:.2} s run ({:.2} s with start-up)",
        ended.duration_since(started).as_secs_f64()
    );
    assert!(during >= 2, "{lines:#?}");
    assert!(partial, "no line showed the run part-way: {lines:#?}");
    assert!(trees_identical(&src, &dst));
    drop(rx);
    guard.down().expect("link down");
}
