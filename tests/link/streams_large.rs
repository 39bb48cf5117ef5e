//! One large file in tcp-streams moves at the connection's rate (needs root): on one
//! connection it is one yamux stream, not a stream per 16 MiB block waiting a round trip for its
//! window (docs/decisions/0027-per-file-stream-blocks.md), and that stream is
//! granted a window sized for the record at once, instead of doubling it from 256 KiB round trip
//! by round trip (docs/decisions/0023-yamux-stream-grant.md).

use crate::support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use shoal_link::UpConfig;
use support::*;

/// One verified run of `mode` from `NAME-snd`; its MB/s and row.
fn one_run(name: &str, rx: &ReceiverProc, src: &Path, mode: &str) -> (f64, serde_json::Value) {
    let mut cmd = rx.send_command(src, &["--mode", mode, "--json"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let out = shoal_link::spawn_in_netns(&format!("{name}-snd"), &mut cmd)
        .expect("start sender")
        .wait_with_output()
        .expect("sender output");
    assert!(out.status.success(), "{mode}: {}", text(&out));
    assert!(trees_identical(src, &rx.dest), "{mode}: not verified");
    clear(&rx.dest);
    let row = json(&out);
    (row["mb_per_s"].as_f64().expect("mb_per_s"), row)
}

#[test]
#[ignore = "needs root"]
fn one_large_file_in_tcp_streams_moves_at_tcp_bundles_rate() {
    needs_root();
    let _serial = serial();
    // Link names are at most 11 characters.
    let name = format!("streams{}", std::process::id() % 10_000);
    let guard = link_up(&UpConfig::new(
        &name,
        Duration::from_millis(141),
        1_000_000_000,
    ));
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    // The study's large payload, on its link.
    gen(&src, 1, "256MiB", 1, 42);
    let dst = t.path().join("dst");
    let rx = ReceiverProc::start_at(
        "198.18.0.2:0",
        Some(&format!("{name}-rcv")),
        &t.path().join("id"),
        &dst,
        &[],
    );
    // Alternating pairs (which mode goes first alternates too); the median of their ratios.
    let mut ratios = Vec::new();
    for pass in 0..3 {
        let ((streams, row), (bundle, _)) = if pass % 2 == 0 {
            let s = one_run(&name, &rx, &src, "tcp-streams");
            (s, one_run(&name, &rx, &src, "tcp-bundle"))
        } else {
            let b = one_run(&name, &rx, &src, "tcp-bundle");
            (one_run(&name, &rx, &src, "tcp-streams"), b)
        };
        println!(
            "pass {pass}: tcp-streams {streams:.2} MB/s (stream window {}, peak streams {}), \
             tcp-bundle {bundle:.2} MB/s",
            row["stream_window"], row["peak_streams"]
        );
        // One stream, granted more than yamux's initial 256 KiB (read back); no blocks.
        assert!(
            row["stream_window"].as_u64().expect("stream_window") >= 16 << 20,
            "the file's stream was not granted its window: {}",
            row["stream_window"]
        );
        assert_eq!(row["block_size"], 0, "split into blocks on one connection");
        assert_eq!(row["peak_streams"], 1);
        ratios.push(streams / bundle);
    }
    ratios.sort_by(f64::total_cmp);
    let median = ratios[1];
    println!("tcp-streams / tcp-bundle: median {median:.3} of {ratios:?}");
    // In 16 MiB blocks, a stream each granted its block: 0.710 (release, three pairs,
    // results/ab-link/streams-large-1gbit-a2d468c.log); one stream: 1.072
    // (results/ab-link/streams-large-1gbit-c1226ae.log).
    assert!(
        median >= 0.95,
        "one large file in tcp-streams at {median:.3} × tcp-bundle's rate"
    );
    drop(rx);
    guard.down().expect("link down");
}
