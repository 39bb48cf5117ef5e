//! Transfers across the emulated long link between two namespaces (needs root): the link
//! carries a real transfer that verifies, and its delay is real and per packet.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use shoal_link::{check, CheckOptions, Launcher, LinkGuard, UpConfig};
use support::*;

/// Timing on a 2-core machine: one link test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn launcher() -> Launcher {
    Launcher {
        exe: env!("CARGO_BIN_EXE_shoal").into(),
        prefix: vec!["link".into(), "forward".into()],
    }
}

fn unique(prefix: &str) -> String {
    format!("{prefix}{}", std::process::id() % 100_000)
}

/// `shoal send` run inside namespace `ns`.
fn send_in(ns: &str, rx: &ReceiverProc, src: &Path, extra: &[&str]) -> Output {
    let mut cmd = shoal();
    cmd.args(["send", "--to", &rx.addr, "--src"])
        .arg(src)
        .arg("--identity")
        .arg(&rx.identity)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    shoal_link::spawn_in_netns(ns, &mut cmd)
        .expect("start sender")
        .wait_with_output()
        .expect("sender output")
}

/// Generates `files` × 4 KiB, sends them from `NAME-snd` to a receiver in `NAME-rcv` with
/// `--mode MODE --json`, checks the run succeeded and the tree verifies, returns the row.
fn transfer_across(name: &str, files: u64, seed: u64, mode: &str) -> serde_json::Value {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, files, "4KiB", files.div_ceil(100), seed);
    let dst = t.path().join("dst");
    let rx = ReceiverProc::start_at(
        "198.18.0.2:0",
        Some(&format!("{name}-rcv")),
        &t.path().join("id"),
        &dst,
        &[],
    );
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

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(out)))
}

#[test]
fn transfer_across_a_checked_100ms_link_then_nothing_is_left() {
    if !is_root() {
        println!("skipped: needs root");
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = unique("xa");
    let cfg = UpConfig::new(&name, Duration::from_millis(100), 200_000_000);
    let guard = LinkGuard::up_with(&cfg, &launcher()).expect("link up");
    let pid = guard
        .state()
        .forwarder_pid
        .expect("tun backend has a forwarder");

    let report = check(&name, &CheckOptions::default()).expect("check runs");
    println!("{}", report.table());
    assert!(report.pass, "link check failed:\n{}", report.table());

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
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "forwarder {pid} still running"
    );
}

#[test]
fn stop_and_wait_pays_one_round_trip_per_file() {
    if !is_root() {
        println!("skipped: needs root");
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = unique("xb");
    let rtt = Duration::from_millis(50);
    let cfg = UpConfig::new(&name, rtt, 200_000_000);
    let guard = LinkGuard::up_with(&cfg, &launcher()).expect("link up");
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
