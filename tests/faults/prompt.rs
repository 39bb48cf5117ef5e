//! Every refusal and failure reaches the sender within 0.5 s on loopback, in every mode: a
//! busy destination, a full disk (root: a small tmpfs), and Ctrl-C on a QUIC sender, whose
//! receiver logs the sender's reason instead of waiting out its idle timeout.

use std::time::{Duration, Instant};

use crate::support::*;
use crate::Tmpfs;

const PROMPT_S: f64 = 0.5;

/// The failed row of `out`, with how long the run took.
fn failed_row(out: &std::process::Output) -> (f64, String) {
    assert_eq!(out.status.code(), Some(1), "{}", text(out));
    let row = json(out);
    (
        row["seconds"].as_f64().unwrap(),
        row["error"].as_str().unwrap().to_string(),
    )
}

#[test]
fn a_refused_run_hears_it_within_half_a_second_in_every_mode() {
    let t = tempfile::tempdir().unwrap();
    let (id, dst) = (t.path().join("id"), t.path().join("dst"));
    let (small, mid) = (t.path().join("small"), t.path().join("mid"));
    gen(&small, 4, "4KiB", 1, 31);
    // Past the first flight's windows: the refused sender is still sending when told.
    gen(&mid, 32, "1MiB", 2, 32);
    // Each run into DEST/<run id>/ (not --flat): a run id's folder takes one run.
    let rx = ReceiverProc::start_per_run(&id, &dst, &[]);
    for (i, mode) in ["tcp-bundle", "tcp-streams", "quic-bundle", "quic-streams"]
        .iter()
        .enumerate()
    {
        let run_id = format!("{:032x}", 0xbb00 + i);
        let args = [
            "--mode",
            mode,
            "--json",
            "--run-id",
            &run_id,
            "--no-save-path-state",
        ];
        let out = rx.send(&small, &args);
        assert!(out.status.success(), "{}", text(&out));
        // The run's folder is taken: the second run into it is refused.
        let (seconds, error) = failed_row(&rx.send(&mid, &args));
        assert!(error.contains("exists already"), "{mode}: {error}");
        assert!(
            seconds < PROMPT_S,
            "{mode}: the refusal took {seconds:.3} s: {error}"
        );
    }
}

#[test]
#[ignore = "needs root"]
fn a_full_disk_reaches_the_sender_within_half_a_second_in_every_mode() {
    needs_root();
    let t = tempfile::tempdir().unwrap();
    let dst = t.path().join("dst");
    let Some(_fs) = Tmpfs::mount(&dst, "4m") else {
        panic!("cannot mount a tmpfs on {}", dst.display());
    };
    let (id, src) = (t.path().join("id"), t.path().join("src"));
    gen(&src, 32, "1MiB", 1, 33);
    let rx = ReceiverProc::start(&id, &dst, &[]);
    for mode in all_modes().filter(|m| *m != "tcp-wait") {
        for _ in 0..3 {
            let (seconds, error) =
                failed_row(&rx.send(&src, &["--mode", mode, "--json", "--no-save-path-state"]));
            assert!(error.contains("No space left on device"), "{mode}: {error}");
            assert!(
                seconds < PROMPT_S,
                "{mode}: the full disk took {seconds:.3} s to say so"
            );
            for e in std::fs::read_dir(&dst).unwrap().flatten() {
                std::fs::remove_dir_all(e.path()).unwrap();
            }
        }
    }
}

/// Whether `pid` has a handler for SIGINT (the sender's Ctrl-C watch is in place).
fn catches_sigint(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|m| m & (1 << 1) != 0)
}

#[test]
fn ctrl_c_on_a_quic_sender_closes_its_connection_with_the_reason() {
    let t = tempfile::tempdir().unwrap();
    let (id, dst, src) = (
        t.path().join("id"),
        t.path().join("dst"),
        t.path().join("src"),
    );
    gen(&src, 2, "256MiB", 1, 34);
    let rx = ReceiverProc::start(&id, &dst, &[]);
    for mode in ["quic-bundle", "quic-streams"] {
        let mut child = rx
            .send_command(&src, &["--mode", mode, "--no-save-path-state"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        let end = Instant::now() + Duration::from_secs(60);
        while !catches_sigint(pid) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(300));
        signal(pid, "INT");
        let status = child.wait().unwrap();
        let stopped = Instant::now();
        assert_eq!(status.code(), Some(130), "{mode}");
        let line = rx.next_run_line();
        let took = stopped.elapsed().as_secs_f64();
        assert!(
            line.contains("sender stopped: interrupted"),
            "{mode}: {line}"
        );
        assert!(
            took < PROMPT_S,
            "{mode}: the receiver heard of it after {took:.3} s: {line}"
        );
    }
}
