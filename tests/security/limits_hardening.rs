//! The control channel, run ids and limits, as a hostile sender or a careless user
//! would meet them. Each test names its case in docs/security.md.

use std::path::Path;

use crate::support::*;
use shoal_remote::Remote;
use shoal_transport::identity::Identity;

/// A control-channel client for `rx` (a receiver started with `--control`).
fn remote(rx: &ReceiverProc, id: &Path) -> Remote {
    let (pin, _) = Identity::read_credentials(id).unwrap();
    Remote::new(&rx.addr, Some(&pin.to_string()), Some(&id.join("token"))).unwrap()
}

/// `cmd`'s output, killed (by its PID) if it has not ended within `secs` seconds.
fn output_within(mut cmd: std::process::Command, secs: u64) -> std::process::Output {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    child.wait_with_output().unwrap()
}

/// A prepared run id takes exactly one data run: the second is refused before anything is
/// written, naming the first; the folder holds the first run's files alone.
#[test]
fn a_prepared_run_id_takes_one_run() {
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    let dst = t.path().join("incoming");
    let rx = ReceiverProc::start(&id, &dst, &["--control", "--allow-baselines"]);
    let remote = remote(&rx, &id);
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    gen(&a, 4, "1KiB", 1, 81);
    gen(&b, 6, "2KiB", 2, 82);
    let run = "44444444444444444444444444444444";
    remote.prepare(run).unwrap();
    let out = rx.send(&a, &["--run-id", run]);
    assert!(out.status.success(), "{}", text(&out));
    let out = rx.send(&b, &["--run-id", run]);
    let said = text(&out);
    assert!(
        !out.status.success(),
        "a second run into {run} reported ok: {said}"
    );
    assert!(
        said.contains("was prepared for one run, and the tcp-bundle run of 1 connection(s)"),
        "{said}"
    );
    assert!(
        trees_identical(&a, &dst.join(run)),
        "the first run's files alone"
    );
    remote.cleanup(run).unwrap();
}

/// A refused `prepare` leaves nothing: here the TCP-metrics flush fails (a stand-in `ip`
/// that exits 1, as on a receiver that is not root), and the same id can be prepared again
/// once it works.
#[test]
fn a_refused_prepare_leaves_nothing() {
    if std::fs::read_to_string("/proc/sys/net/ipv4/tcp_no_metrics_save")
        .is_ok_and(|s| s.trim() == "1")
    {
        eprintln!("skipped: tcp_no_metrics_save is 1, so prepare does not flush");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    let dst = t.path().join("incoming");
    let bin = t.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let ip = bin.join("ip");
    std::fs::write(&ip, "#!/bin/sh\necho 'flush refused' >&2\nexit 1\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ip, std::fs::Permissions::from_mode(0o755)).unwrap();
    let rx = ReceiverProc::start_with_path(&id, &dst, &["--control"], &bin);
    let remote = remote(&rx, &id);
    let run = "55555555555555555555555555555555";
    let e = format!("{:#}", remote.prepare(run).unwrap_err());
    assert!(e.contains("flush refused"), "{e}");
    assert!(
        !dst.join(run).exists(),
        "a refused prepare left {run}/ behind"
    );
    // Again: the same refusal, not `File exists`.
    let e = format!("{:#}", remote.prepare(run).unwrap_err());
    assert!(
        e.contains("flush refused") && !e.contains("File exists"),
        "{e}"
    );
    assert!(entries(&dst).is_empty(), "{:?}", entries(&dst));
}

/// No setting can stall a run: below its floor a flag is refused with exit 2 and the reason,
/// and the control channel refuses the same per-run values by the same rule.
#[test]
fn settings_below_their_floor_are_refused_with_the_reason() {
    let t = tempfile::tempdir().unwrap();
    let dst = t.path().join("never");
    for (cmd, flag, value) in [
        ("recv", "--conn-window", "1"),
        ("recv", "--stream-window", "4KiB"),
        ("recv", "--rcvbuf", "4096"),
        ("recv", "--sndbuf", "1"),
        ("recv", "--write-budget", "1"),
        ("send", "--send-window", "1"),
        ("send", "--rcvbuf", "4096"),
        ("send", "--block-size", "0"),
        ("send", "--block-size", "1"),
    ] {
        let mut c = shoal();
        c.arg(cmd).args([flag, value]);
        match cmd {
            "recv" => c.args(["--listen", "127.0.0.1:0", "--dest"]).arg(&dst),
            _ => c.args(["--to", "127.0.0.1:9", "--src"]).arg(t.path()),
        };
        let out = output_within(c, 20);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(2), "{cmd} {flag} {value}: {said}");
        assert!(
            said.contains(&format!("{flag} {}", value.replace("4KiB", "4096")))
                && said.contains("is below 65536 bytes:"),
            "{cmd} {flag} {value}: {said}"
        );
    }
    assert!(!dst.exists());

    let id = t.path().join("id");
    let incoming = t.path().join("incoming");
    let rx = ReceiverProc::start(&id, &incoming, &["--control"]);
    let remote = remote(&rx, &id);
    for (flag, value) in [("conn-window", 1u64), ("rcvbuf", 4096), ("sndbuf", 1)] {
        let mut s = shoal_proto::control::RecvSettings::default();
        match flag {
            "conn-window" => s.conn_window = Some(value),
            "rcvbuf" => s.rcvbuf = Some(value),
            _ => s.sndbuf = Some(value),
        }
        let run = "66666666666666666666666666666666";
        let e = format!("{:#}", remote.prepare_run(run, s).unwrap_err());
        assert!(
            e.contains(&format!("recv --{flag} {value} is below 65536 bytes:")),
            "{flag}: {e}"
        );
        assert!(
            entries(&incoming).is_empty(),
            "{flag}: {:?}",
            entries(&incoming)
        );
    }
}

/// An output file that cannot be written fails the command (exit 2) naming it, as --csv
/// does: --latency-out and --stats-out into /dev/full.
#[test]
fn an_output_that_cannot_be_written_fails_the_command() {
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    let src = t.path().join("src");
    gen(&src, 3, "1KiB", 1, 83);
    let rx = ReceiverProc::start(&id, &t.path().join("dst"), &[]);
    for extra in [
        &["--latency-out", "/dev/full"][..],
        &["--stats-out", "/dev/full", "--stats-interval", "50ms"][..],
        &["--csv", "/dev/full"][..],
    ] {
        let out = rx.send(&src, extra);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {said}");
        assert!(said.contains("/dev/full"), "{extra:?}: {said}");
    }
}

/// The path-state folder: a FIFO or an oversized file under a key's name is refused at once
/// (`path show` names it, never hangs nor reads it whole), and `path forget --all` removes
/// every entry it can and names the one it cannot.
#[test]
fn path_state_entries_are_read_bounded_and_forgotten_one_by_one() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("path-state");
    std::fs::create_dir_all(&dir).unwrap();
    sys::mkfifo(&dir.join("fifo.json")).unwrap();
    std::fs::File::create(dir.join("huge.json"))
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    std::fs::write(dir.join("junk.json"), b"{}").unwrap();
    // A folder under a key's name: `forget` cannot remove it as a file.
    std::fs::create_dir_all(dir.join("afolder.json/inside")).unwrap();

    let mut show = shoal();
    show.args(["path", "show", "--path-state"]).arg(&dir);
    show.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = show.spawn().unwrap();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`path show` hangs on a FIFO under a key's name");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("fifo") && said.contains("not a regular file"),
        "{said}"
    );
    assert!(
        said.contains("huge") && said.contains("larger than 16384 bytes"),
        "{said}"
    );

    let out = run(&[
        "path",
        "forget",
        "--all",
        "--path-state",
        dir.to_str().unwrap(),
    ]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("forgot 3 record(s)"), "{said}");
    assert!(
        said.contains("could not remove 1 entry(ies): afolder:"),
        "{said}"
    );
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, ["afolder.json"]);
}

/// `recv --max-folders` bounds the folder records a run brings, counted as they arrive and
/// refused before the folder past it is created, in every mode.
#[test]
fn folder_records_are_bounded_before_they_are_created() {
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    let src = t.path().join("src");
    gen(&src, 3, "1KiB", 1, 84);
    for i in 0..20 {
        std::fs::create_dir_all(src.join(format!("empty{i:02}"))).unwrap();
    }
    for mode in all_modes() {
        let dst = t.path().join(format!("dst-{mode}"));
        let rx = ReceiverProc::start(&id, &dst, &["--max-folders", "5"]);
        let out = rx.send(&src, &["--mode", mode]);
        let said = text(&out);
        assert!(!out.status.success(), "{mode}: {said}");
        assert!(said.contains("(recv --max-folders)"), "{mode}: {said}");
        let folders = std::fs::read_dir(&dst)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("empty")
            })
            .count();
        assert!(folders <= 5, "{mode}: {folders} empty folders made");
    }
}

/// A failed run's report counts only the bytes of the files kept: the partial file it
/// removed is not in `bytes_ready` (the receiver's run line and the sender's row).
#[test]
fn a_failed_run_counts_only_the_bytes_it_kept() {
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    let src = t.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    for i in 0..9 {
        std::fs::write(src.join(format!("a{i}")), vec![7u8; 4096]).unwrap();
    }
    let big = src.join("big");
    std::fs::write(&big, vec![5u8; 48 << 20]).unwrap();
    let dst = t.path().join("dst");
    let rx = ReceiverProc::start(&id, &dst, &["--json"]);
    // As in tests/integrity.rs: the receiver stays stopped until the file has shrunk, so the
    // sender has sent part of it and no more.
    let paused = sys::Paused::new(rx.child.id());
    let sender = rx
        .send_command(
            &src,
            &["--mode", "tcp-bundle", "--read-ahead", "1MiB", "--json"],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(sys::wait_opened(&big, std::time::Duration::from_secs(30)));
    std::fs::OpenOptions::new()
        .append(true)
        .open(&big)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    drop(paused);
    let out = sender.wait_with_output().unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    let line: serde_json::Value = serde_json::from_str(&rx.next_run_line()).unwrap();
    let kept: u64 = std::fs::read_dir(&dst)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert_eq!(kept, 9 * 4096, "only the small files are kept");
    assert_eq!(line["status"], "failed", "{line}");
    assert_eq!(line["bytes_ready"], kept, "{line}");
}

/// A run that makes no progress fails after the idle timeout whatever the cause: here a
/// peer trickles a file record's header a byte at a time, each read well within the idle
/// timeout, no record ever complete.
#[test]
fn a_run_without_progress_fails_after_the_idle_timeout() {
    use tokio::io::AsyncWriteExt;
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    let dst = t.path().join("dst");
    let rx = ReceiverProc::start(&id, &dst, &["--idle-timeout", "2s", "--json"]);
    let (_, token) = Identity::read_credentials(&id).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let addr = rx.addr.clone();
    let trickle = rt.spawn(async move {
        let mut tls = crate::support::raw::connect(&addr, &id).await;
        let mut s = crate::support::raw::hello(&token, codec_unknown(), codec_unknown());
        crate::support::raw::raw_file(&mut s, &[b'n'; 200], 1, b"x");
        let hello_len = s.len() - (1 + 2 + 200 + 8 + 8 + 1);
        if tls.write_all(&s[..hello_len]).await.is_err() {
            return;
        }
        let _ = tls.flush().await;
        // At most 15 s of trickle (50 bytes), far short of the record's end.
        for b in &s[hello_len..hello_len + 50] {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            if tls.write_all(&[*b]).await.is_err() || tls.flush().await.is_err() {
                return;
            }
        }
    });
    let line = rx
        .lines
        .recv_timeout(std::time::Duration::from_secs(12))
        .expect("the receiver gave up on the run within 12 s");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["status"], "failed", "{line}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("no record accepted for 2.0 s"),
        "{line}"
    );
    trickle.abort();
}

fn codec_unknown() -> u64 {
    shoal_proto::codec::TOTALS_UNKNOWN
}
