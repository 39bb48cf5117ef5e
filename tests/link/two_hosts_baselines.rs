//! Baseline arms across two hosts (`shoal recv --control --allow-baselines`, `[link] ssh`):
//! two network namespaces stand in for hosts A and B (root), and on loopback (no root) the
//! receiving end of `tar-tcp` is driven through the control channel directly.

use crate::support;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use shoal_pipeline::verify::Manifest;
use shoal_proto::control::Request;
use shoal_remote::Remote;
use shoal_transport::identity::Identity;
use support::sweep::sweep_in;
use support::*;

/// The address B has on the link between the two namespaces.
const B: &str = "198.18.0.2";

fn control_of(rx: &ReceiverProc) -> Remote {
    let (pin, _) = Identity::read_credentials(&rx.identity).unwrap();
    let token = rx.identity.join("token");
    Remote::new(&rx.addr, Some(&pin.to_string()), Some(&token)).unwrap()
}

fn matrix(rx: &ReceiverProc, link_extra: &str, axes: &str) -> String {
    let (pin, _) = Identity::read_credentials(&rx.identity).unwrap();
    format!(
        "[sweep]\ntimeout = \"1m\"\nprobe = false\n\
         [link]\nreceiver = \"{}\"\npin = \"{pin}\"\ntoken_file = \"{}\"\n{link_extra}\n\
         [payload.p]\nfiles = 60\nsize = \"4KiB\"\ndirs = 3\n{axes}\n",
        rx.addr,
        rx.identity.join("token").display()
    )
}

#[test]
#[ignore = "needs root"]
fn two_namespaces_as_two_hosts_run_every_baseline_verified_on_b() {
    needs_root();
    needs_tools(&["sshd", "rsync", "sftp", "socat", "tar"]);
    let _serial = serial();
    let name = unique("tb");
    let _link = link_up(&shoal_link::UpConfig::new(
        &name,
        Duration::from_millis(10),
        100_000_000,
    ));
    let (a_ns, b_ns) = (format!("{name}-snd"), format!("{name}-rcv"));
    let t = tempfile::tempdir().unwrap();
    let incoming = t.path().join("incoming");
    // Host B: the receiver with its control channel and baselines allowed, and an sshd with a
    // throw-away key (the one the local baselines use), both in B's namespace.
    let rx = ReceiverProc::start_at(
        &format!("{B}:0"),
        Some(&b_ns),
        &t.path().join("id"),
        &incoming,
        &["--control", "--allow-baselines"],
    );
    let sshd = shoal_sweep::baseline::Sshd::start(&t.path().join("ssh"), &b_ns, &a_ns, B)
        .expect("sshd in B's namespace");
    let key = sshd.dir.join("user_ed25519");
    let ssh = format!(
        "ssh = \"root@{B}\"\nssh_opts = [\"-i\", \"{}\", \"-o\", \"IdentitiesOnly=yes\", \
         \"-o\", \"UserKnownHostsFile=/dev/null\", \"-o\", \"StrictHostKeyChecking=no\", \
         \"-o\", \"LogLevel=ERROR\"]",
        key.display()
    );
    let m = matrix(
        &rx,
        &ssh,
        "[axes]\nkind = [\"tar-tcp\", \"tar-ssh\", \"rsync-ssh\", \"sftp\", \"shoal\"]\n\
         mode = [\"tcp-bundle\"]",
    );
    // Host A: the sweep, in A's namespace. Run 2 has its destination changed on B between
    // the transfer and the hashing: verification on B must catch it, whatever the arm.
    let s = sweep_in(
        Some(&a_ns),
        t.path(),
        "two",
        &m,
        "unused",
        &["--runs", "1", "--seed", "3"],
        &[("SHOAL_SWEEP_TEST_TAMPER", "2")],
    );
    assert!(s.ok, "stdout:\n{}\nstderr:\n{}", s.stdout, s.stderr);
    let r = rows(&s.out.join("runs.csv"));
    assert_eq!(r.len(), 5, "{}", s.stdout);
    let mut folders = std::collections::BTreeSet::new();
    for row in &r {
        let dest = PathBuf::from(&row["dest"]);
        assert_eq!(dest.parent(), Some(incoming.as_path()), "{row:?}");
        assert!(folders.insert(dest), "every run has its own folder on B");
        if row["order"] == "2" {
            assert_eq!(row["status"], "failed", "{row:?}");
            assert_eq!(row["verified"], "false");
            assert!(row["error"].contains("verification failed"), "{row:?}");
            assert_eq!(row["mb_per_s"], "0");
            continue;
        }
        assert_eq!(row["status"], "ok", "{row:?}");
        assert_eq!(row["verified"], "true", "{row:?}");
        assert_eq!(row["verify_result"], "identical");
        assert_eq!(row["files_verified"], "60");
        // At least one 10 ms round trip of the link.
        assert!(row["seconds"].parse::<f64>().unwrap() > 0.01, "{row:?}");
        match row["kind"].as_str() {
            "tar-tcp" => {
                let (host, port) = row["receiver"].rsplit_once(':').unwrap();
                assert_eq!(host, B, "{row:?}");
                assert!(port.parse::<u16>().unwrap() > 0, "{row:?}");
                assert!(row["command"].contains("socat"), "{row:?}");
                assert!(
                    row["receiver_report"].contains("tar -x exited 0 after"),
                    "{row:?}"
                );
                assert!(!row["cc"].is_empty(), "{row:?}");
            }
            "tar-ssh" | "rsync-ssh" | "sftp" => {
                assert_eq!(row["receiver"], format!("root@{B}"), "{row:?}");
                assert!(row["command"].contains("BatchMode=yes"), "{row:?}");
                // (sftp names the folder in its batch file.)
                if row["kind"] != "sftp" {
                    assert!(row["command"].contains(&row["dest"]), "{row:?}");
                }
            }
            _ => assert_eq!(row["kind"], "shoal"),
        }
    }
    // Every run folder was removed through the control channel at the end.
    let left: Vec<_> = std::fs::read_dir(&incoming).unwrap().collect();
    assert!(left.is_empty(), "run folders left on B: {left:?}");
    sshd.stop();
}

/// A receiver on loopback with `extra` flags, and a tree to send it.
fn loopback(t: &Path, extra: &[&str]) -> (ReceiverProc, PathBuf) {
    let src = t.join("src");
    gen(&src, 20, "4KiB", 2, 9);
    let rx = ReceiverProc::start(&t.join("id"), &t.join("incoming"), extra);
    (rx, src)
}

fn run_id(n: u8) -> String {
    format!("{n:02x}").repeat(16)
}

/// `tar -cf -` of `src`'s contents with `args` added.
fn archive(src: &Path, args: &[&str]) -> Vec<u8> {
    let o = Command::new("tar")
        .arg("-C")
        .arg(src)
        .args(args)
        .args(["-cf", "-", "."])
        .output()
        .unwrap();
    assert!(o.status.success());
    o.stdout
}

/// Connects to B's tar port from `from` (a loopback address) and sends `bytes`.
fn send_from(from: &str, port: u16, bytes: &[u8]) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let std_stream = rt.block_on(async {
        let sock = tokio::net::TcpSocket::new_v4()?;
        sock.bind(format!("{from}:0").parse().unwrap())?;
        let s = sock
            .connect(format!("127.0.0.1:{port}").parse().unwrap())
            .await?;
        s.into_std()
    })?;
    let mut s = std_stream;
    s.set_nonblocking(false)?;
    s.write_all(bytes)?;
    s.shutdown(std::net::Shutdown::Write)?;
    // Until B closes: a refused peer is closed at once.
    let mut rest = Vec::new();
    s.read_to_end(&mut rest)?;
    Ok(())
}

#[test]
fn the_tar_tcp_port_takes_one_connection_from_the_sweeps_host_and_stays_inside_the_run() {
    let _serial = serial();
    let t = tempfile::tempdir().unwrap();
    let (rx, src) = loopback(t.path(), &["--control", "--allow-baselines"]);
    let c = control_of(&rx);
    let wait = |id: &str, stop: bool| {
        let req = Request::TarTcpWait {
            run_id: id.into(),
            stop,
        };
        c.post(&req, Duration::from_secs(30))
            .and_then(|p| p.reply())
    };

    // Not prepared: refused.
    let e = c
        .tar_tcp_start(&run_id(1), Duration::from_secs(30))
        .unwrap_err();
    assert!(format!("{e:#}").contains("was not prepared"), "{e:#}");

    // A prepared run: another host's connection is closed unread, the sweep host's unpacked.
    let id = run_id(2);
    let folder = PathBuf::from(c.prepare(&id).unwrap());
    let port = c.tar_tcp_start(&id, Duration::from_secs(30)).unwrap().port;
    assert!(port > 0);
    let _ = send_from("127.0.0.2", port, &archive(&src, &[]));
    assert!(std::fs::read_dir(&folder).unwrap().next().is_none());
    send_from("127.0.0.1", port, &archive(&src, &[])).unwrap();
    let report = wait(&id, false).unwrap();
    assert!(
        report.facts["report"].contains("tar -x exited 0"),
        "{report:?}"
    );
    let (m, _) = c.hash(&id).unwrap();
    assert_eq!(m.entries, Manifest::build(&src, 1).unwrap().entries);
    // One connection only: the port is closed now.
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());

    // Names that climb out of the folder are refused (GNU tar: "Member name contains '..'"),
    // and the run fails.
    let id = run_id(3);
    let folder = PathBuf::from(c.prepare(&id).unwrap());
    let port = c.tar_tcp_start(&id, Duration::from_secs(30)).unwrap().port;
    let climbing = archive(&src, &["--transform", "s,^\\./,../../escaped-,"]);
    send_from("127.0.0.1", port, &climbing).unwrap();
    let e = wait(&id, false).unwrap_err();
    assert!(format!("{e:#}").contains("tar -x exit"), "{e:#}");
    // `../../` from the run folder is the test's folder, `../` the receiver's --dest.
    for beside in [t.path(), folder.parent().unwrap()] {
        let escaped: Vec<_> = std::fs::read_dir(beside)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("escaped-"))
            .collect();
        assert!(escaped.is_empty(), "{escaped:?} outside the run folder");
    }
    assert!(std::fs::read_dir(&folder).unwrap().next().is_none());

    // A run the sweep stops: tar never ran, and the wait says why.
    let id = run_id(4);
    c.prepare(&id).unwrap();
    let port = c.tar_tcp_start(&id, Duration::from_secs(30)).unwrap().port;
    // Its folder cannot be hashed while its tar may still write.
    let e = c.hash(&id).unwrap_err();
    assert!(format!("{e:#}").contains("in progress"), "{e:#}");
    let e = wait(&id, true).unwrap_err();
    assert!(
        format!("{e:#}").contains("stopped before any connection"),
        "{e:#}"
    );
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn without_allow_baselines_a_tar_tcp_arm_is_refused_before_any_run() {
    let _serial = serial();
    let t = tempfile::tempdir().unwrap();
    let (rx, _) = loopback(t.path(), &["--control"]);
    let c = control_of(&rx);
    let id = run_id(5);
    c.prepare(&id).unwrap();
    let e = c.tar_tcp_start(&id, Duration::from_secs(30)).unwrap_err();
    assert!(format!("{e:#}").contains("--allow-baselines"), "{e:#}");
    c.cleanup(&id).unwrap();

    let m = matrix(
        &rx,
        "",
        "[axes]\nkind = [\"tar-tcp\", \"shoal\"]\nmode = [\"tcp-bundle\"]",
    );
    let s = sweep_in(None, t.path(), "refused", &m, "unused", &[], &[]);
    assert!(!s.ok);
    assert!(s.stderr.contains("--allow-baselines"), "{}", s.stderr);
    assert!(!s.out.join("runs.csv").exists() || rows(&s.out.join("runs.csv")).is_empty());
    let left: Vec<_> = std::fs::read_dir(t.path().join("incoming"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "no run was prepared: {left:?}");

    // The ssh arms need a login to copy through; tar-local has no place across hosts.
    for (kind, says) in [("sftp", "[link] ssh"), ("tar-local", "one host")] {
        let m = matrix(&rx, "", &format!("[axes]\nkind = [\"{kind}\"]"));
        let s = sweep_in(None, t.path(), kind, &m, "unused", &["--dry-run"], &[]);
        assert!(!s.ok && s.stderr.contains(says), "{kind}: {}", s.stderr);
    }
    let m = matrix(
        &rx,
        "ssh = \"-oProxyCommand=x\"",
        "[axes]\nkind = [\"sftp\"]",
    );
    let s = sweep_in(None, t.path(), "badssh", &m, "unused", &["--dry-run"], &[]);
    assert!(
        !s.ok && s.stderr.contains("expected user@host"),
        "{}",
        s.stderr
    );
}
