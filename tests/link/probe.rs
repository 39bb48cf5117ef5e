//! The path probe (`shoal probe`, a two-host sweep's path measurements) across the emulated
//! link, two namespaces standing in for two hosts: only the receiver's TLS port is used, and
//! what it reads matches the link's settings and `shoal link check`. Root only.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use shoal_link::{check, CheckOptions, UpConfig};
use support::*;

const RTT_MS: f64 = 40.0;
const RATE_BPS: u64 = 50_000_000;

fn within(what: &str, got: f64, reference: f64, fraction: f64) {
    assert!(
        (got - reference).abs() <= reference * fraction,
        "{what}: {got:.3} ms is not within {:.0}% of {reference:.3} ms",
        fraction * 100.0
    );
}

/// The figures one probe must show on this link.
fn probe_matches_the_link(p: &serde_json::Value, what: &str, check_idle_ms: f64) {
    let idle = p["idle_rtt"]["min_ms"].as_f64().expect("idle RTT");
    within(
        &format!("{what}: idle RTT vs the link's"),
        idle,
        RTT_MS,
        0.05,
    );
    within(
        &format!("{what}: idle RTT vs link check's"),
        idle,
        check_idle_ms,
        0.05,
    );
    for dir in ["up", "down"] {
        // Acknowledged bytes over the steady interval: at most the link's rate, and not far
        // below it on a quiet link.
        let g = p[dir]["goodput_bit_s"].as_f64().expect("goodput");
        assert!(
            g >= 0.85 * RATE_BPS as f64 && g <= RATE_BPS as f64,
            "{what} {dir}: goodput {g} bit/s (link {RATE_BPS} bit/s)"
        );
        assert!(p[dir]["interval_s"].as_f64().unwrap() >= 1.0, "{p}");
        assert!(p[dir]["samples"].as_u64().unwrap() >= 5, "{p}");
        assert_eq!(p[dir]["unreliable"], serde_json::json!([]), "{what} {dir}");
        let tcp = &p[dir]["bulk"]["sender_tcp"];
        assert!(
            tcp["segments_out"].as_u64().unwrap() > 0,
            "{what} {dir}: {p}"
        );
        // Loss is the sending end's retransmitted / sent segments after the warm-up, a
        // fraction; the link loses nothing, and slow start's overshoot is counted apart.
        let acked = &p[dir]["bulk"]["acked"];
        let (re, out) = (
            acked["steady_retransmits"].as_u64().unwrap() as f64,
            acked["steady_segments"].as_u64().unwrap() as f64,
        );
        let loss = p[dir]["loss_fraction"].as_f64().unwrap();
        assert!(
            (loss - re / out).abs() < 1e-9 && loss < 0.005,
            "{what} {dir}: loss {loss} against {re} / {out}"
        );
        // Under load the queue (1 BDP) adds to the RTT; never less than the idle path.
        let loaded = p[dir]["loaded_rtt"]["median_ms"].as_f64().unwrap();
        assert!(p[dir]["loaded_rtt"]["probes"].as_u64().unwrap() > 0);
        assert!(loaded >= idle * 0.95, "{what} {dir}: loaded {loaded} ms");
    }
}

#[test]
#[ignore = "needs root"]
fn probe_and_two_host_sweep_measure_the_emulated_link() {
    needs_root();
    let _serial = serial();
    let name = unique("pb");
    let cfg = UpConfig::new(&name, Duration::from_millis(RTT_MS as u64), RATE_BPS);
    let guard = link_up(&cfg);
    let (snd, rcv) = (format!("{name}-snd"), format!("{name}-rcv"));
    let t = tempfile::tempdir().unwrap();
    let incoming = t.path().join("incoming");
    let rx = ReceiverProc::start_at(
        "198.18.0.2:0",
        Some(&rcv),
        &t.path().join("id"),
        &incoming,
        &["--control"],
    );
    let (pin, token) = credentials(&rx);

    // What `link check` reads on the same link (short: 1 s warm-up, 2 s measured).
    let opts = CheckOptions {
        duration: Some(Duration::from_secs(3)),
        warmup: Some(Duration::from_secs(1)),
        loss_probes: 0,
        bulk_loss_max: Duration::ZERO,
    };
    let report = check(&name, &opts).expect("link check runs");
    println!("{}", report.table());
    let check_idle = report.idle_rtt.min_ms;

    // `shoal probe` from the sender's namespace, with only the receiver's address, pin, token.
    let mut cmd = shoal();
    cmd.args(["probe", &rx.addr, "--pin", &pin, "--token-file"])
        .arg(&token)
        .args(["--duration", "3s", "--warmup", "1s", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = shoal_link::spawn_in_netns(&snd, &mut cmd).expect("start shoal probe");
    let out = wait_limited(child, Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out));
    let p = json(&out);
    println!("{p:#}");
    probe_matches_the_link(&p, "shoal probe", check_idle);

    // A two-host sweep probes the path before its first run and after its last.
    let sweep_out = two_host_sweep(t.path(), &snd, &rx.addr, &pin, &token);
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sweep_out.join("meta.json")).unwrap()).unwrap();
    let pp = &meta["path_probe"];
    for end in ["start", "end"] {
        probe_matches_the_link(&pp[end], &format!("sweep {end}"), check_idle);
    }
    assert!(pp["changed"].is_array(), "{pp}");
    drop(rx);
    guard.down().expect("link down");
}

/// A one-run two-host sweep in namespace `ns` against the receiver at `addr`; its out folder.
fn two_host_sweep(dir: &Path, ns: &str, addr: &str, pin: &str, token: &Path) -> PathBuf {
    let matrix = format!(
        "[sweep]\nruns = 1\ntimeout = \"1m\"\n\
         [link]\nreceiver = \"{addr}\"\npin = \"{pin}\"\ntoken_file = \"{}\"\n\
         [payload.p]\nfiles = 50\nsize = \"4KiB\"\ndirs = 1\n\
         [axes]\nmode = [\"tcp-bundle\"]\ncc = [\"cubic\"]\n",
        token.display()
    );
    let mpath = dir.join("two-hosts.toml");
    std::fs::write(&mpath, matrix).unwrap();
    let out = dir.join("sweep");
    let mut cmd = shoal();
    cmd.arg("sweep")
        .arg("--matrix")
        .arg(&mpath)
        .arg("--out")
        .arg(&out)
        .arg("--work")
        .arg(dir.join("work"))
        .args(["--settle", "0s"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = shoal_link::spawn_in_netns(ns, &mut cmd).expect("start shoal sweep");
    let o = wait_limited(child, Duration::from_secs(180));
    let stdout = String::from_utf8_lossy(&o.stdout);
    println!("{stdout}");
    assert!(o.status.success(), "{}", text(&o));
    // The summary names both probes.
    assert!(stdout.contains("path at the start: idle RTT"), "{stdout}");
    assert!(stdout.contains("path at the end: idle RTT"), "{stdout}");
    let rows = rows(&out.join("runs.csv"));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["status"], "ok", "{:?}", rows[0]);
    out
}

/// Without the right token, or against a receiver without `--control`, the probe stops
/// before any flow and says why (loopback; no root needed).
#[test]
fn a_probe_names_a_wrong_token_and_a_receiver_without_control() {
    let t = tempfile::tempdir().unwrap();
    let dst = t.path().join("dst");
    let id = t.path().join("id");
    let rx = ReceiverProc::start(&id, &dst, &["--control"]);
    let (pin, _token) = credentials(&rx);
    let bad = t.path().join("bad-token");
    std::fs::write(&bad, "not-the-token\n").unwrap();
    let out = run(&[
        "probe",
        &rx.addr,
        "--pin",
        &pin,
        "--token-file",
        bad.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refused the token in") && err.contains("wrong token"),
        "{err}"
    );
    drop(rx);

    let plain = ReceiverProc::start(&id, &dst, &[]);
    let (pin, token) = credentials(&plain);
    let out = run(&[
        "probe",
        &plain.addr,
        "--pin",
        &pin,
        "--token-file",
        token.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("must run `shoal recv --control`"), "{err}");

    let out = run(&["probe", &plain.addr, "--duration", "31s"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("over the receiver's limit of 30 s"),
        "{}",
        text(&out)
    );
}
