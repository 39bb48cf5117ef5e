//! The baselines a user would pick beside Shoal (root): `rclone copy` over SFTP to the sweep's
//! sshd, with its `rclone-transfers` axis and a time limit it cannot meet, and one `iperf3`
//! flow of a payload's bytes per controller, in a tiny sweep on a 20 ms, 100 Mbit/s link.

use crate::support;

use support::sweep::sweep;
use support::{needs_root, needs_tools, rows, serial};

#[test]
#[ignore = "needs root"]
fn rclone_and_iperf3_rows() {
    needs_root();
    needs_tools(&["sshd", "rclone", "iperf3"]);
    let _l = serial();
    let t = tempfile::tempdir().unwrap();
    let m = "[sweep]\ntimeout = \"2m\"\n\
         [link]\nname = \"tools1\"\nrtt = \"20ms\"\nrate = \"100mbit\"\ncheck = false\n\
         [payload.small]\nfiles = 300\nsize = \"4KiB\"\ndirs = 3\n\
         [payload.big]\nfiles = 1\nsize = \"24MiB\"\n\
         [axes]\nkind = [\"rclone\"]\npayload = [\"small\"]\nrclone-transfers = [4]\n\
         [[also]]\nkind = [\"rclone\"]\npayload = [\"small\"]\nrclone-transfers = [1]\ntimeout = \"5s\"\n\
         [[also]]\nkind = [\"iperf3\"]\npayload = [\"big\"]\ncc = [\"cubic\", \"bbr\"]\n";
    let s = sweep(t.path(), "tools", m, "tools1", &["--runs", "1"], &[]);
    let r = rows(&s.out.join("runs.csv"));
    assert_eq!(r.len(), 4, "{}", s.stderr);
    for row in &r {
        match (row["kind"].as_str(), row["param_rclone_transfers"].as_str()) {
            ("rclone", "4") => {
                assert_eq!(row["status"], "ok", "{row:?}");
                assert_eq!(row["verified"], "true", "{row:?}");
                assert_eq!(row["files_verified"], "300");
                assert_eq!(row["receiver"], "198.18.0.2:22");
                assert!(
                    row["command"].contains("--transfers 4 --checkers 4"),
                    "{row:?}"
                );
            }
            ("rclone", "1") => {
                // 300 files one at a time, several round trips each, cannot finish in 5 s: a
                // failure row with the share that arrived.
                assert_eq!(row["status"], "failed", "{row:?}");
                assert_eq!(row["timed_out"], "true", "{row:?}");
                assert!(row["error"].contains("killed"), "{row:?}");
                let done: u64 = row["files_verified"].parse().unwrap();
                assert!(done < 300, "{row:?}");
                assert!(row["partial_mb_per_s"].parse::<f64>().unwrap() >= 0.0);
            }
            ("iperf3", _) => {
                assert_eq!(row["status"], "ok", "{row:?}");
                // No files move: verification does not apply, and is not faked.
                assert_eq!(row["verified"], "", "{row:?}");
                assert!(
                    row["verify_result"].starts_with("not applicable"),
                    "{row:?}"
                );
                assert_eq!(row["files_verified"], "");
                assert_eq!(row["cc"], row["param_cc"], "{row:?}");
                assert!(row["command"].contains(&format!("-C {}", row["param_cc"])));
                assert_eq!(row["receiver"], "198.18.0.2:5201");
                // Below the link's 12.5 MB/s, above half of it.
                let mb: f64 = row["mb_per_s"].parse().unwrap();
                assert!(mb > 6.25 && mb < 12.5, "{mb}: {row:?}");
            }
            other => panic!("unexpected row {other:?}"),
        }
    }
    let med = rows(&s.out.join("medians.csv"));
    assert_eq!(med.len(), 4);
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.out.join("meta.json")).unwrap()).unwrap();
    assert!(meta["baseline_tools"]["rclone"]
        .as_str()
        .unwrap()
        .contains("rclone"));
    assert!(meta["baseline_tools"]["iperf3"]
        .as_str()
        .unwrap()
        .contains("iperf"));
}

/// Two namespaces as hosts A and B: rclone into the folder B prepared, through the ssh login
/// (its `-i` key translated for rclone's own SFTP client), verified on B; iperf3 with its
/// server started on B through that login, its row not verified.
#[test]
#[ignore = "needs root"]
fn rclone_and_iperf3_across_two_hosts() {
    use std::time::Duration;
    use support::sweep::sweep_in;
    use support::{link_up, ReceiverProc};
    const B: &str = "198.18.0.2";
    needs_root();
    needs_tools(&["sshd", "rclone", "iperf3"]);
    let _l = serial();
    let name = "toolsb";
    let _link = link_up(&shoal_link::UpConfig::new(
        name,
        Duration::from_millis(10),
        100_000_000,
    ));
    let (a_ns, b_ns) = (format!("{name}-snd"), format!("{name}-rcv"));
    let t = tempfile::tempdir().unwrap();
    let incoming = t.path().join("incoming");
    let rx = ReceiverProc::start_at(
        &format!("{B}:0"),
        Some(&b_ns),
        &t.path().join("id"),
        &incoming,
        &["--control"],
    );
    let sshd = shoal_sweep::baseline::Sshd::start(&t.path().join("ssh"), &b_ns, &a_ns, B)
        .expect("sshd in B's namespace");
    let (pin, _) = shoal_transport::identity::Identity::read_credentials(&rx.identity).unwrap();
    let m = format!(
        "[sweep]\ntimeout = \"1m\"\nprobe = false\n\
         [link]\nreceiver = \"{}\"\npin = \"{pin}\"\ntoken_file = \"{}\"\n\
         ssh = \"root@{B}\"\nssh_opts = [\"-i\", \"{}\", \"-o\", \"IdentitiesOnly=yes\", \
         \"-o\", \"UserKnownHostsFile=/dev/null\", \"-o\", \"StrictHostKeyChecking=no\"]\n\
         [payload.p]\nfiles = 60\nsize = \"4KiB\"\ndirs = 3\n\
         [axes]\nkind = [\"rclone\", \"iperf3\"]\ncc = [\"bbr\"]\n",
        rx.addr,
        rx.identity.join("token").display(),
        sshd.user_key().display()
    );
    let s = sweep_in(
        Some(&a_ns),
        t.path(),
        "two",
        &m,
        "unused",
        &["--runs", "1"],
        &[],
    );
    sshd.stop();
    assert!(s.ok, "stdout:\n{}\nstderr:\n{}", s.stdout, s.stderr);
    let r = rows(&s.out.join("runs.csv"));
    assert_eq!(r.len(), 2, "{}", s.stdout);
    for row in &r {
        assert_eq!(row["status"], "ok", "{row:?}");
        if row["kind"] == "rclone" {
            assert_eq!(row["verified"], "true", "{row:?}");
            assert_eq!(row["files_verified"], "60");
            assert_eq!(row["receiver"], format!("root@{B}"));
            assert!(row["command"].contains(&row["dest"]), "{row:?}");
            assert!(row["command"].contains("key_file="), "{row:?}");
        } else {
            assert_eq!(row["kind"], "iperf3");
            assert_eq!(row["verified"], "", "{row:?}");
            assert_eq!(row["cc"], "bbr", "{row:?}");
            assert_eq!(row["receiver"], format!("{B}:5201"));
            assert!(row["receiver_report"].contains("iperf3 -s -1"), "{row:?}");
            assert!(row["mb_per_s"].parse::<f64>().unwrap() > 0.0, "{row:?}");
        }
    }
    let left: Vec<_> = std::fs::read_dir(&incoming).unwrap().collect();
    assert!(left.is_empty(), "run folders left on B: {left:?}");
}
