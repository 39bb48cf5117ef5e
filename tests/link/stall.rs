//! The stall condition end to end (docs/sweep.md, "Host profile, receiver
//! CPU cap, stalls, destination file system"): a receiver frozen on a duty cycle
//! by the sweep's timer, the time frozen as the timer counted it, and a sweep killed with
//! SIGKILL mid-stall leaving no end frozen and no group behind.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use support::sweep::sweep;
use support::{needs_root, rows, serial, shoal};

fn matrix(link: &str, files: u32, axes: &str) -> String {
    format!(
        "[sweep]\ntimeout = \"2m\"\n\
         [link]\nname = \"{link}\"\nrtt = \"20ms\"\nrate = \"100mbit\"\ncheck = false\n\
         [payload.p]\nfiles = {files}\nsize = \"16KiB\"\ndirs = 4\nseed = 5\n\
         [axes]\n{axes}\n"
    )
}

/// The stall groups of sweep `pid` (named `shoal-stall-PID-…`) under the freezer's root.
fn groups_of(pid: u32) -> Vec<PathBuf> {
    let root = if Path::new("/sys/fs/cgroup/freezer/tasks").exists() {
        PathBuf::from("/sys/fs/cgroup/freezer")
    } else {
        PathBuf::from("/sys/fs/cgroup")
    };
    let prefix = format!("shoal-stall-{pid}-");
    std::fs::read_dir(root)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
#[ignore = "needs root"]
fn stalled_ends_are_frozen_as_often_and_as_long_as_asked() {
    needs_root();
    let _l = serial();
    let link = format!("stall{}", std::process::id() % 1000);
    let t = tempfile::tempdir().unwrap();
    let m = matrix(
        &link,
        3000,
        "mode = [\"quic-bundle\"]\nrecv-stall = [\"20ms every 100ms\"]\n\
         send-stall = [\"30ms every 200ms\"]",
    );
    let s = sweep(t.path(), "out", &m, &link, &["--runs", "1"], &[]);
    let rs = rows(&s.out.join("runs.csv"));
    assert_eq!(rs.len(), 1, "{}", s.stderr);
    let r = &rs[0];
    assert_eq!(r["status"], "ok", "{r:?}");
    assert_eq!(r["param_recv_stall"], "20ms every 100ms");
    assert_eq!(r["receiver_stall_length_ms"], "20.000", "{r:?}");
    assert_eq!(r["receiver_stall_every_ms"], "100.000", "{r:?}");
    assert_eq!(r["sender_stall_every_ms"], "200.000", "{r:?}");
    for (end, length) in [("receiver", 20.0), ("sender", 30.0)] {
        let count: f64 = r[&format!("{end}_stalls_applied")].parse().unwrap();
        let total: f64 = r[&format!("{end}_stalled_ms_total")].parse().unwrap();
        eprintln!(
            "{end}: {count} stalls, {total} ms frozen, {} s",
            r["seconds"]
        );
        assert!(count >= 3.0, "{end}: a few stalls in the run: {r:?}");
        let want = length * count;
        assert!(
            (total - want).abs() <= 0.1 * want,
            "{end}: stalled {total} ms in {count} stalls of {length} ms: {r:?}"
        );
        // It froze the end's process, and the group is gone.
        let cgroup = &r[&format!("{end}_stall_cgroup")];
        assert!(!cgroup.contains("empty"), "{r:?}");
        let group = cgroup.split(' ').next_back().unwrap();
        assert!(group.contains("shoal-stall-"), "{r:?}");
        assert!(!Path::new(group).exists(), "{group} left behind");
    }
}

#[test]
#[ignore = "needs root"]
fn a_sweep_killed_mid_stall_leaves_nothing_frozen() {
    needs_root();
    let _l = serial();
    let link = format!("stall{}k", std::process::id() % 100);
    let t = tempfile::tempdir().unwrap();
    // Long stalls on a run long enough to be killed inside one.
    let m = matrix(
        &link,
        4000,
        "mode = [\"quic-bundle\"]\nrecv-stall = [\"1s every 1100ms\"]",
    );
    let mpath = t.path().join("m.toml");
    std::fs::write(&mpath, m).unwrap();
    let mut child = shoal()
        .arg("sweep")
        .arg("--matrix")
        .arg(&mpath)
        .arg("--out")
        .arg(t.path().join("out"))
        .arg("--work")
        .arg(t.path().join("work"))
        .args(["--settle", "0s", "--runs", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait for the group, then for a stall in it.
    let t0 = Instant::now();
    let frozen = loop {
        let frozen = groups_of(pid).into_iter().find(|g| {
            std::fs::read_to_string(g.join("freezer.state"))
                .or_else(|_| std::fs::read_to_string(g.join("cgroup.freeze")))
                .is_ok_and(|s| matches!(s.trim(), "FROZEN" | "FREEZING" | "1"))
        });
        if frozen.is_some() || t0.elapsed() > Duration::from_secs(120) {
            break frozen;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = child.kill();
    let _ = child.wait();
    let group = frozen.expect("a frozen stall group while the sweep ran");
    // The timer sees its owner gone: it thaws, empties and removes the group.
    let t1 = Instant::now();
    while group.exists() && t1.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = group.exists();
    // The run's processes the killed sweep left in the namespaces, then the link.
    for ns in ["snd", "rcv"] {
        let out = std::process::Command::new("ip")
            .args(["netns", "pids", &format!("{link}-{ns}")])
            .output()
            .unwrap();
        for p in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", p])
                .status();
        }
    }
    let _ = shoal()
        .args(["link", "down", "--name", &link])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    assert!(
        !left,
        "{} left behind after the sweep was killed",
        group.display()
    );
    assert!(groups_of(pid).is_empty(), "{:?}", groups_of(pid));
    // `link down` removes the dead sweep's claim on the name with its link.
    let claim = format!("/run/shoal/link-{link}.owner.json");
    assert!(!Path::new(&claim).exists(), "{claim} left behind");
}

#[test]
#[ignore = "needs root"]
fn a_cpu_hog_beside_the_quota_throttles_the_receivers_group() {
    needs_root();
    let _l = serial();
    let link = format!("stall{}h", std::process::id() % 100);
    let t = tempfile::tempdir().unwrap();
    let m = matrix(
        &link,
        1000,
        "mode = [\"tcp-bundle\"]\nrecv-cpu-quota = [0.5]\nrecv-cpu-hog = [true]\nsend-stall = [\"none\"]",
    );
    let s = sweep(t.path(), "out", &m, &link, &["--runs", "1"], &[]);
    let rs = rows(&s.out.join("runs.csv"));
    assert_eq!(rs.len(), 1, "{}", s.stderr);
    let r = &rs[0];
    assert_eq!(r["status"], "ok", "{r:?}");
    let hog: f64 = r["receiver_cpu_hog_cpu_seconds"].parse().unwrap();
    let secs: f64 = r["seconds"].parse().unwrap();
    eprintln!(
        "hog {hog} s of CPU in a {secs} s run; periods {} throttled {} for {} s",
        r["receiver_cpu_periods"], r["receiver_cpu_throttled"], r["receiver_cpu_throttled_seconds"]
    );
    assert!(hog > 0.1 * secs, "the hog ran: {r:?}");
    assert!(
        r["receiver_cpu_throttled"].parse::<u64>().unwrap() > 0,
        "{r:?}"
    );
    // `none` at the sender: the setting recorded, no stall.
    assert_eq!(r["sender_stall_length_ms"], "0.000", "{r:?}");
    assert_eq!(r["sender_stalls_applied"], "0", "{r:?}");
    assert_eq!(r["receiver_stall_length_ms"], "", "{r:?}");
}
