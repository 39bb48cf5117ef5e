//! Receiver resource limits (issue 7): each one exceeded gives the sender a clear error that
//! names the option, and the receiver serves the next run. The run's size is enforced on the
//! running counts as files arrive (the sender announces no totals, protocol 4): what a refused
//! run leaves is complete files within the limits, never one over them.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use shoal_transport::identity::{self, Identity};
use support::*;
use tokio::io::AsyncReadExt;

fn refused(out: &std::process::Output, cause: &str) {
    assert!(!out.status.success(), "expected a refusal: {}", text(out));
    let all = text(out);
    assert!(all.contains(cause), "expected {cause:?} in:\n{all}");
}

/// After a run refused on its size: `dst` holds only complete copies of files of `src`, at
/// most `max_files` of them and `max_bytes` together (no file over a limit is kept under its
/// name, nor a partial one); then `dst` is emptied for the next run.
fn kept_within(src: &std::path::Path, dst: &std::path::Path, max_files: usize, max_bytes: u64) {
    // The sender may have its refusal (a late connection is refused at once) while the
    // receiver still ends the run (closing files, removing partial ones): wait until what
    // `dst` holds stops changing and is only files of `src` (a bounded wait, not a timing).
    let settled = || {
        let mut e = entries(dst);
        e.sort();
        e
    };
    let mut last = settled();
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(200));
        let now = settled();
        let foreign = now
            .iter()
            .any(|p| p.is_file() && !src.join(p.strip_prefix(dst).unwrap()).is_file());
        if now == last && !foreign {
            break;
        }
        last = now;
    }
    let files = only_complete_copies_of(src, dst);
    let bytes: u64 = entries(dst)
        .iter()
        .filter(|e| e.is_file())
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(
        files <= max_files && bytes <= max_bytes,
        "kept {files} files, {bytes} bytes"
    );
    clear(dst);
}

#[test]
fn run_size_and_path_limits_refuse_with_the_option_named() {
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    let dst = t.path().join("dst");
    let rx = ReceiverProc::start(
        &id,
        &dst,
        &[
            "--max-files",
            "20",
            "--max-bytes",
            "64KiB",
            "--max-path-len",
            "40",
            "--max-depth",
            "3",
        ],
    );

    // Too many files: refused at the 21st, before it is created.
    let many = t.path().join("many");
    gen(&many, 21, "1KiB", 2, 1);
    refused(
        &rx.send(&many, &[]),
        "would be the run's file number 21; this receiver accepts at most 20 files per run (recv --max-files)",
    );
    kept_within(&many, &dst, 20, 64 << 10);

    // Too many bytes: 5 × 16 KiB = 80 KiB > 64 KiB, refused at the fifth file.
    let big = t.path().join("big");
    gen(&big, 5, "16KiB", 1, 2);
    refused(
        &rx.send(&big, &[]),
        "(16384 bytes) would take the run past 65536 bytes, after 65536 bytes already; this receiver accepts at most 65536 bytes per run (recv --max-bytes)",
    );
    kept_within(&big, &dst, 4, 64 << 10);

    // A path past --max-path-len.
    let long = t.path().join("long");
    std::fs::create_dir_all(&long).unwrap();
    std::fs::write(long.join("n".repeat(41)), b"x").unwrap();
    refused(
        &rx.send(&long, &[]),
        "path is 41 bytes, longer than the limit of 40",
    );
    // A path past --max-depth.
    let deep = t.path().join("deep");
    std::fs::create_dir_all(deep.join("a/b/c")).unwrap();
    std::fs::write(deep.join("a/b/c/d"), b"x").unwrap();
    refused(
        &rx.send(&deep, &[]),
        "path is 4 levels deep, deeper than the limit of 3",
    );
    assert!(entries(&dst).is_empty(), "{:?}", entries(&dst));

    // Within every limit: 20 files, 20 KiB, depth 2.
    let ok = t.path().join("ok");
    gen(&ok, 20, "1KiB", 2, 3);
    let out = rx.send(&ok, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(trees_identical(&ok, &dst));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_limit_are_refused_and_served_once_one_leaves() {
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    let dst = t.path().join("dst");
    let rx = ReceiverProc::start(&id, &dst, &["--max-connections", "1"]);
    let src = t.path().join("src");
    gen(&src, 10, "1KiB", 1, 4);

    // One connection holds the only slot (TLS up, no hello yet).
    let (pin, _) = Identity::read_credentials(&id).unwrap();
    let connector =
        tokio_rustls::TlsConnector::from(Arc::new(identity::client_config(pin).unwrap()));
    let tcp = tokio::net::TcpStream::connect(&rx.addr).await.unwrap();
    let holder = connector
        .connect(identity::server_name(), tcp)
        .await
        .unwrap();

    let send_mode = |rx_addr: String, id: std::path::PathBuf, src: std::path::PathBuf, mode| {
        tokio::task::spawn_blocking(move || {
            shoal()
                .args(["send", "--to", &rx_addr, "--mode", mode, "--src"])
                .arg(&src)
                .arg("--identity")
                .arg(&id)
                .output()
                .unwrap()
        })
    };
    let send = |rx_addr, id, src| send_mode(rx_addr, id, src, "tcp-bundle");
    // Both TCP framings learn the reason: tcp-streams has switched to yamux by the time the
    // refusal (a plain reply, the mode unknown to the receiver yet) arrives.
    for mode in ["tcp-bundle", "tcp-streams"] {
        let out = send_mode(rx.addr.clone(), id.clone(), src.clone(), mode)
            .await
            .unwrap();
        refused(
            &out,
            "too many connections: this receiver serves at most 1 at once (recv --max-connections)",
        );
    }
    assert!(entries(&dst).is_empty());

    // The holder leaves; its slot frees and the next run goes through.
    drop(holder);
    let mut ok = None;
    for _ in 0..20 {
        let out = send(rx.addr.clone(), id.clone(), src.clone())
            .await
            .unwrap();
        if out.status.success() {
            ok = Some(out);
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(ok.is_some(), "the freed slot was never reused");
    assert!(trees_identical(&src, &dst));

    // A plain TCP client over the limit is closed too (the slot is free now, so take it
    // with one client and check a second one is closed promptly).
    let first = tokio::net::TcpStream::connect(&rx.addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut second = tokio::net::TcpStream::connect(&rx.addr).await.unwrap();
    let mut sink = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), second.read_to_end(&mut sink)).await;
    assert!(closed.is_ok(), "a connection over the limit was kept open");
    drop(first);
}

/// The same refusals in every other mode: per-file streams (the refusal travels on the control
/// stream) and QUIC.
#[test]
fn limits_hold_in_every_mode() {
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    let dst = t.path().join("dst");
    let rx = ReceiverProc::start(&id, &dst, &["--max-files", "20", "--max-depth", "3"]);
    let many = t.path().join("many");
    gen(&many, 21, "1KiB", 2, 1);
    let deep = t.path().join("deep");
    std::fs::create_dir_all(deep.join("a/b/c")).unwrap();
    std::fs::write(deep.join("a/b/c/d"), b"x").unwrap();
    let ok = t.path().join("ok");
    gen(&ok, 20, "1KiB", 2, 3);
    for mode in ["tcp-streams", "quic-bundle", "quic-streams", "tcp-wait"] {
        let args = ["--mode", mode];
        refused(&rx.send(&many, &args), "(recv --max-files)");
        kept_within(&many, &dst, 20, 20 << 10);
        refused(
            &rx.send(&deep, &args),
            "path is 4 levels deep, deeper than the limit of 3",
        );
        assert!(entries(&dst).is_empty(), "{mode}: {:?}", entries(&dst));
        let out = rx.send(&ok, &args);
        assert!(out.status.success(), "{mode}: {}", text(&out));
        assert!(trees_identical(&ok, &dst), "{mode}");
        std::fs::remove_dir_all(&dst).unwrap();
        std::fs::create_dir(&dst).unwrap();
    }
}

/// A wrong token in every mode: refused by name before anything is created. In tcp-streams
/// the sender's file streams are dropped unread while the refusal travels on the control
/// stream.
#[test]
fn wrong_token_is_refused_in_every_mode() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, 300, "16KiB", 4, 9);
    let dst = t.path().join("dst");
    let rx = ReceiverProc::start(&t.path().join("id"), &dst, &[]);
    let pin = std::fs::read_to_string(t.path().join("id/pin")).unwrap();
    let wrong = t.path().join("wrong-token");
    std::fs::write(&wrong, "not-the-token\n").unwrap();
    for mode in all_modes() {
        let out = shoal()
            .args(["send", "--to", &rx.addr, "--mode", mode, "--src"])
            .arg(&src)
            .args(["--pin", pin.trim(), "--token-file"])
            .arg(&wrong)
            .output()
            .unwrap();
        refused(&out, "authentication failed: wrong token");
        assert!(
            entries(&dst).is_empty(),
            "{mode}: destination must stay empty"
        );
    }
    let ok = rx.send(&src, &["--mode", "tcp-streams"]);
    assert!(ok.status.success(), "{}", text(&ok));
    assert!(trees_identical(&src, &dst));
}

/// Every outstanding per-file stream is an open file at the receiver: a run that could hold
/// more files open than the receiver's open-files limit is refused up front, by name, instead
/// of failing midway with "Too many open files" (as 8 connections × 4,096 streams did against
/// a 20,000-file limit in the study's first pass).
#[test]
fn a_run_that_would_open_more_files_than_the_limit_is_refused_up_front() {
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    let dst = t.path().join("dst");
    // A host with `ulimit -n 4096`: 4,096 streams + 1,024 kept for sockets do not fit.
    let rx = ReceiverProc::start_with_open_files_limit(&id, &dst, &[], 4096);
    let src = t.path().join("src");
    gen(&src, 10, "1KiB", 1, 5);
    for mode in ["tcp-streams", "quic-streams"] {
        let out = rx.send(&src, &["--mode", mode, "--max-streams", "4096"]);
        refused(
            &out,
            "4096 outstanding streams × 1 connections = 4096 files open at once, more than this receiver's open-files limit allows (4096",
        );
        assert!(entries(&dst).is_empty(), "{mode}");
    }
    // The same receiver then takes a run that fits: 2,048 streams over two connections.
    let out = rx.send(
        &src,
        &[
            "--mode",
            "quic-streams",
            "--max-streams",
            "2048",
            "--connections",
            "2",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(trees_identical(&src, &dst));
}

/// A tree over the receiver's `--max-files` or `--max-bytes`, in every mode, over one and two
/// connections: the sender announces no totals (protocol 4), so the receiver refuses the run
/// on its running counts, across the run's connections, naming the limit; what it keeps is
/// complete files within the limits.
#[test]
fn running_counts_refuse_a_tree_over_the_limits_in_every_mode() {
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    let dst = t.path().join("dst");
    let rx = ReceiverProc::start(&id, &dst, &["--max-files", "30", "--max-bytes", "48KiB"]);
    // 40 files of 512 bytes: 20 KiB, within the bytes, over the files.
    let files = t.path().join("files");
    gen(&files, 40, "512", 4, 1);
    // 8 files of 8 KiB: 64 KiB, within the files, over the bytes.
    let bytes = t.path().join("bytes");
    gen(&bytes, 8, "8KiB", 2, 2);
    for mode in all_modes() {
        for connections in ["1", "2"] {
            let args = ["--mode", mode, "--connections", connections];
            let what = format!("{mode} × {connections}");
            let out = rx.send(&files, &args);
            refused(
                &out,
                "this receiver accepts at most 30 files per run (recv --max-files)",
            );
            kept_within(&files, &dst, 30, 48 << 10);
            let out = rx.send(&bytes, &args);
            refused(
                &out,
                "this receiver accepts at most 49152 bytes per run (recv --max-bytes)",
            );
            kept_within(&bytes, &dst, 8, 48 << 10);
            eprintln!("{what}: refused on running counts");
        }
    }
    // The receiver still serves a run within its limits.
    let ok = t.path().join("ok");
    gen(&ok, 30, "1KiB", 2, 3);
    let out = rx.send(&ok, &["--connections", "2"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(trees_identical(&ok, &dst));
}
