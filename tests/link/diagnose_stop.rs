//! Ctrl-C in the middle of `shoal diagnose`'s transfers (loopback; no root): the terminal's
//! SIGINT reaches the whole process group, the diagnosis ends its sweep, exits 130, says which
//! stages were done, and the receiver's destination holds nothing it wrote.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::*;

#[test]
fn ctrl_c_in_the_pilot_exits_130_names_the_stages_done_and_leaves_nothing() {
    let _serial = serial();
    let t = tempfile::tempdir().unwrap();
    let (dst, id) = (t.path().join("dst"), t.path().join("id"));
    let rx = ReceiverProc::start(&id, &dst, &["--control"]);
    let (pin, token) = credentials(&rx);
    let mut cmd = shoal();
    cmd.args(["diagnose", &rx.addr, "--pin", &pin, "--token-file"])
        .arg(&token)
        .args(["--files", "40000", "--budget", "90s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().expect("start shoal diagnose");
    let pgid = child.id();
    let (tx, lines) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let mut said = Vec::new();
    let t0 = Instant::now();
    // Wait for the pilot, then for its run's folder on the receiver: the middle of stage 3.
    let mut in_pilot = false;
    let mut wrote = false;
    while t0.elapsed() < Duration::from_secs(80) && !wrote {
        while let Ok(l) = lines.try_recv() {
            in_pilot |= l.contains("stage 3, transfers");
            said.push(l);
        }
        wrote = in_pilot && !entries(&dst).is_empty();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(wrote, "the pilot never wrote on the receiver: {said:#?}");
    let sig = std::process::Command::new("kill")
        .args(["-INT", "--", &format!("-{pgid}")])
        .status()
        .unwrap();
    assert!(sig.success());
    let o = wait_limited(child, Duration::from_secs(60));
    said.extend(lines.try_iter());
    let err = said.join("\n");
    eprintln!(
        "{err}\nexit {:?} after {:.1} s",
        o.status.code(),
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(
        err.contains("interrupted; stages done: path (") && err.contains("ends ("),
        "{err}"
    );
    assert!(
        o.stdout.is_empty(),
        "a verdict after Ctrl-C: {:?}",
        o.stdout
    );
    // The receiver removes an ended run's folder when its sweep asks; give it a moment.
    let t1 = Instant::now();
    while !entries(&dst).is_empty() && t1.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(entries(&dst).is_empty(), "{:?}", entries(&dst));
}
