//! End-to-end sweeps through the `shoal` binary on emulated links (root) and `shoal report` on
//! the committed sample (no root).
//!
//! Tests that need root are `#[ignore = "needs root"]`. Root tests run one at a time
//! (a lock), each with its own link name, work folder and output folder; the sweep tears its
//! link down itself, and the test runs `shoal link down` afterwards as a backstop.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use support::sweep::{sweep, sweep_any};
use support::{needs_root, needs_tools, rows, serial, shoal, shoal_bin, workspace_root};

/// `sha256sum FILE`, hex.
fn sha256sum(p: &Path) -> String {
    let o = Command::new("sha256sum").arg(p).output().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

fn matrix(link: &str, rtt: &str, rate: &str, payload: &str, axes: &str) -> String {
    format!(
        "[sweep]\ntimeout = \"2m\"\nreference = {{ mode = \"tcp-bundle\" }}\n\
         [link]\nname = \"{link}\"\nrtt = \"{rtt}\"\nrate = \"{rate}\"\ncheck = false\n\
         {payload}\n{axes}\n"
    )
}

#[test]
#[ignore = "needs root"]
fn two_configs_three_runs_verified_with_seeded_order() {
    needs_root();
    let _l = serial();
    let t = tempfile::tempdir().unwrap();
    let m = matrix(
        "swt1",
        "30ms",
        "200mbit",
        "[payload.p]\nfiles = 300\nsize = \"4KiB\"\ndirs = 3\nseed = 5",
        "[axes]\nmode = [\"tcp-bundle\", \"quic-bundle\"]",
    );
    let a = sweep(
        t.path(),
        "a",
        &m,
        "swt1",
        &["--runs", "3", "--seed", "11"],
        &[],
    );
    let ra = rows(&a.out.join("runs.csv"));
    assert_eq!(ra.len(), 6, "{}", a.stderr);
    for r in &ra {
        assert_eq!(r["status"], "ok", "{r:?}");
        assert_eq!(r["verified"], "true");
        assert_eq!(r["verify_result"], "identical");
        assert_eq!(r["files_verified"], "300");
        assert_eq!(r["order_seed"], "11");
        assert!(r["mb_per_s"].parse::<f64>().unwrap() > 0.0);
        assert_eq!(r["link_rtt_ms"], "30");
        assert_eq!(r["link_rate_bps"], "200000000");
        assert_eq!(r["tun_tx_dropped_rcv"], "0");
        assert!(!r["kernel"].is_empty() && !r["host"].is_empty());
        assert!(!r["sweep_load_1m_start"].is_empty());
        // Where the machine's CPU went: the receiver the sweep started, and the emulator
        // (a userspace forwarder unless the kernel has netem).
        assert!(
            r["receiver_cpu_seconds"].parse::<f64>().unwrap() > 0.0,
            "{r:?}"
        );
        let p90: f64 = r["host_busy_cores_p90"].parse().unwrap();
        assert!(p90 > 0.0, "a transfer keeps the machine busy: {r:?}");
        if r["link_backend"] == "tun" {
            assert!(
                r["link_cpu_seconds"].parse::<f64>().unwrap() >= 0.0,
                "{r:?}"
            );
        }
    }
    let order: Vec<(String, String)> = ra
        .iter()
        .map(|r| (r["config_id"].clone(), r["run"].clone()))
        .collect();
    let mut matrix_order = order.clone();
    matrix_order.sort();
    assert_ne!(order, matrix_order, "runs must be shuffled");
    // medians, charts, copies.
    let med = rows(&a.out.join("medians.csv"));
    assert_eq!(med.len(), 2);
    for m in &med {
        assert_eq!(m["runs_ok"], "3");
        assert_eq!(m["reference_config"], "c01");
        assert!(m["median_mb_per_s"].parse::<f64>().unwrap() > 0.0);
    }
    assert_eq!(med[0]["speedup_vs_reference"], "1.000");
    for f in [
        "throughput.svg",
        "throughput.png",
        "matrix.toml",
        "meta.json",
    ] {
        let p = a.out.join(f);
        assert!(
            p.metadata().map(|m| m.len() > 100).unwrap_or(false),
            "{f} missing"
        );
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.out.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["order_seed"], 11);
    assert_eq!(meta["runs_ok"], 6);
    // Provenance: the build that ran, in meta.json and every row.
    let sha = sha256sum(&shoal_bin());
    assert_eq!(meta["shoal"]["sha256"], sha.as_str(), "{}", meta["shoal"]);
    let commit = meta["shoal"]["commit"].as_str().unwrap().to_string();
    assert_eq!(commit.len(), 40, "{}", meta["shoal"]);
    for r in &ra {
        assert_eq!(r["shoal_sha256"], sha);
        assert_eq!(r["shoal_commit"], commit);
        assert!(r["shoal_dirty"] == "true" || r["shoal_dirty"] == "false");
        // UDP drops at both ends and CPU steal, counted over the run.
        for c in [
            "sender_udp_rcvbuf_errors",
            "sender_udp_in_errors",
            "receiver_udp_rcvbuf_errors",
            "receiver_udp_in_errors",
        ] {
            assert!(r[c].parse::<u64>().is_ok(), "{c}: {r:?}");
        }
        assert!(r["cpu_steal_seconds"].parse::<f64>().is_ok(), "{r:?}");
    }
    // Each end's settings, read inside its namespace.
    for end in ["sender", "receiver"] {
        let f = &meta["ends"][end];
        assert_eq!(f["tcp_no_metrics_save"], "1", "{end}: {f}");
        assert!(!f["tcp_rmem"].as_str().unwrap().is_empty(), "{end}: {f}");
        assert!(!f["interface"].as_str().unwrap().is_empty(), "{end}: {f}");
        assert!(!f["qdisc"].as_str().unwrap().is_empty(), "{end}: {f}");
        assert!(!f["offloads"].as_array().unwrap().is_empty(), "{end}: {f}");
    }
    assert!(!meta["ends"]["receiver"]["dest_fs"]
        .as_str()
        .unwrap()
        .is_empty());
    assert!(!meta["ends"]["host"]["udp_mem"].as_str().unwrap().is_empty());
    // The same seed reproduces the order.
    let b = sweep(
        t.path(),
        "b",
        &m,
        "swt1",
        &["--runs", "3", "--seed", "11"],
        &[],
    );
    let rb = rows(&b.out.join("runs.csv"));
    let order_b: Vec<(String, String)> = rb
        .iter()
        .map(|r| (r["config_id"].clone(), r["run"].clone()))
        .collect();
    assert_eq!(order, order_b);
    // Destinations were deleted at the end; the payload cache stays.
    let work: Vec<_> = std::fs::read_dir(t.path().join("work"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let mut work = work;
    work.sort();
    assert_eq!(work, [".last-bulk-delete", "payloads"], "{work:?}");
}

#[test]
#[ignore = "needs root"]
fn tampered_destination_and_killed_run_are_failures() {
    needs_root();
    let _l = serial();
    let t = tempfile::tempdir().unwrap();
    // Tampered: the transfer succeeds, a file is changed before hashing.
    let m = matrix(
        "swt2",
        "20ms",
        "200mbit",
        "[payload.p]\nfiles = 100\nsize = \"4KiB\"\ndirs = 2",
        "[axes]\nmode = [\"tcp-bundle\"]",
    );
    let s = sweep(
        t.path(),
        "tamper",
        &m,
        "swt2",
        &["--runs", "2", "--seed", "1"],
        &[("SHOAL_SWEEP_TEST_TAMPER", "2")],
    );
    let r = rows(&s.out.join("runs.csv"));
    assert_eq!(r.len(), 2);
    let (good, bad) = if r[0]["order"] == "2" {
        (&r[1], &r[0])
    } else {
        (&r[0], &r[1])
    };
    assert_eq!(good["status"], "ok");
    assert_eq!(bad["status"], "failed", "{bad:?}");
    assert_eq!(bad["send_status"], "ok", "the transfer itself reported ok");
    assert_eq!(bad["verified"], "false");
    assert_eq!(bad["mb_per_s"], "0", "a failure never carries a speed");
    assert!(
        bad["error"].contains("verification failed"),
        "{}",
        bad["error"]
    );
    assert!(
        bad["verify_result"].contains("1 differing"),
        "{}",
        bad["verify_result"]
    );
    assert_eq!(bad["files_verified"], "99");
    let med = rows(&s.out.join("medians.csv"));
    assert_eq!(med[0]["runs_ok"], "1");
    assert_eq!(med[0]["runs_failed"], "1");
    assert_eq!(med[0]["median_mb_per_s"], good["mb_per_s"]);

    // Killed mid-transfer: 600 × 16 KiB (9.8 MB) over 10 Mbit/s takes ~8 s; kill at 2.5 s.
    let m = matrix(
        "swt3",
        "20ms",
        "10mbit",
        "[payload.q]\nfiles = 600\nsize = \"16KiB\"\ndirs = 4",
        "[axes]\nmode = [\"tcp-bundle\"]\n[[also]]\nkind = [\"tar-ssh\"]",
    );
    let s = sweep_any(
        t.path(),
        "kill",
        &m,
        "swt3",
        &["--runs", "1", "--seed", "1"],
        &[("SHOAL_SWEEP_TEST_KILL", "2500ms@all")],
    );
    // Every run failed: the sweep says so and exits 1 (without --strict).
    assert!(!s.ok, "exit 0 although every run failed\n{}", s.stdout);
    assert!(s.stderr.contains("every run failed"), "{}", s.stderr);
    let r = rows(&s.out.join("runs.csv"));
    assert_eq!(r.len(), 2);
    for row in &r {
        assert_eq!(row["status"], "failed", "{row:?}");
        assert_eq!(row["timed_out"], "true");
        assert_eq!(row["mb_per_s"], "0");
        let files: u64 = row["files_verified"].parse().unwrap();
        let bytes: u64 = row["bytes_verified"].parse().unwrap();
        assert!(files > 0 && files < 600, "{} files completed", files);
        assert_eq!(bytes, files * 16384);
        let secs: f64 = row["seconds"].parse().unwrap();
        assert!((2.0..10.0).contains(&secs), "{secs}");
        let partial: f64 = row["partial_mb_per_s"].parse().unwrap();
        // Positive, and of the order of the 10 Mbit/s link (1.2 MB/s of goodput at most).
        assert!(partial > 0.0 && partial < 2.0, "{partial}: {row:?}");
        assert!(row["error"].contains("killed"), "{}", row["error"]);
    }
    let med = rows(&s.out.join("medians.csv"));
    assert!(med.iter().all(|m| m["runs_ok"] == "0"
        && m["median_mb_per_s"].is_empty()
        && !m["failed_median_partial_mb_per_s"].is_empty()));
}

#[test]
#[ignore = "needs root"]
fn baseline_arms_run_and_verify() {
    needs_root();
    needs_tools(&["sshd", "rsync", "sftp", "socat"]);
    let _l = serial();
    let t = tempfile::tempdir().unwrap();
    let m = matrix(
        "swt4",
        "20ms",
        "100mbit",
        "[payload.p]\nfiles = 60\nsize = \"4KiB\"\ndirs = 3",
        "[axes]\nkind = [\"tar-ssh\", \"rsync-ssh\", \"sftp\", \"tar-tcp\", \"tar-local\"]\nmode = [\"ignored-for-baselines\"]",
    )
    // No Shoal arm: a tcp-bundle reference would match nothing (refused).
    .replace("reference = { mode = \"tcp-bundle\" }\n", "");
    let s = sweep(t.path(), "base", &m, "swt4", &["--runs", "1"], &[]);
    let r = rows(&s.out.join("runs.csv"));
    assert_eq!(r.len(), 5, "{}", s.stderr);
    let mut kinds: Vec<&str> = r.iter().map(|x| x["kind"].as_str()).collect();
    kinds.sort();
    assert_eq!(
        kinds,
        ["rsync-ssh", "sftp", "tar-local", "tar-ssh", "tar-tcp"]
    );
    for row in &r {
        assert_eq!(row["status"], "ok", "{row:?}");
        assert_eq!(row["verified"], "true");
        assert_eq!(row["mode"], row["kind"]);
        let receiver = match row["kind"].as_str() {
            "tar-local" => "local",
            "tar-tcp" => "198.18.0.2:5399",
            _ => "198.18.0.2:22",
        };
        assert_eq!(row["receiver"], receiver);
        // Baselines do not choose a controller: the row names the namespace's default.
        assert_eq!(row["cc"].is_empty(), row["kind"] == "tar-local", "{row:?}");
        if row["kind"] == "tar-tcp" {
            // The receiving tar ran under the sweep, so its memory is measured too, and the
            // run lasted until it had written the last file (at least one 20 ms round trip).
            assert!(row["receiver_peak_rss_bytes"].parse::<u64>().unwrap() > 0);
            assert!(row["seconds"].parse::<f64>().unwrap() > 0.02, "{row:?}");
        }
        assert!(row["sender_peak_rss_bytes"].parse::<u64>().unwrap() > 0);
        assert!(
            row["param_mode"].is_empty(),
            "Shoal axes don't apply to baselines"
        );
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.out.join("meta.json")).unwrap()).unwrap();
    assert!(meta["baseline_tools"]["ssh"]
        .as_str()
        .unwrap()
        .contains("OpenSSH"));
    assert!(meta["baseline_tools"]["socat"]
        .as_str()
        .unwrap()
        .contains("socat version"));
}

#[test]
fn report_regenerates_the_committed_sample() {
    let sample = workspace_root().join("results/samples/quick");
    let t = tempfile::tempdir().unwrap();
    std::fs::copy(sample.join("runs.csv"), t.path().join("runs.csv")).unwrap();
    let out = shoal().arg("report").arg(t.path()).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = std::fs::read_to_string(sample.join("medians.csv")).unwrap();
    let got = std::fs::read_to_string(t.path().join("medians.csv")).unwrap();
    assert_eq!(got, want, "medians.csv regenerated from runs.csv differs");
    for f in ["throughput.svg", "throughput.png"] {
        assert!(t.path().join(f).metadata().unwrap().len() > 1000, "{f}");
    }
    let svg = std::fs::read_to_string(t.path().join("throughput.svg")).unwrap();
    assert!(svg.contains("MB/s"), "axis with units");
    assert!(svg.contains("Transfer speed"), "title");
    // The same medians as JSON, with the spread columns.
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(t.path().join("medians.json")).unwrap()).unwrap();
    let first = &json.as_array().expect("an array of configurations")[0];
    for k in [
        "median_mb_per_s",
        "q1_mb_per_s",
        "median_mb_per_s_ci_low",
        "median_ci_coverage",
    ] {
        assert!(first[k].is_number(), "{k} in {first}");
    }
    // --mbit draws the axis in Mbit/s, beside the MB/s chart.
    let out = shoal()
        .args(["report", "--mbit"])
        .arg(t.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let svg = std::fs::read_to_string(t.path().join("throughput-mbit.svg")).unwrap();
    assert!(svg.contains("Mbit/s"), "axis in Mbit/s");
}

/// `shoal compare A B` of a sweep with itself: every configuration at ratio 1, its interval
/// holding 1, and a rank test that finds no difference.
#[test]
fn compare_of_a_sweep_with_itself_finds_no_difference() {
    let sample = workspace_root().join("results/samples/quick");
    let t = tempfile::tempdir().unwrap();
    for side in ["a", "b"] {
        std::fs::create_dir(t.path().join(side)).unwrap();
        std::fs::copy(
            sample.join("runs.csv"),
            t.path().join(side).join("runs.csv"),
        )
        .unwrap();
    }
    let out = shoal()
        .current_dir(t.path())
        .args(["compare", "a", "b", "--csv", "cmp.csv"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", support::text(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("B / A"), "{table}");
    let rows = rows(&t.path().join("cmp.csv"));
    assert!(rows.len() >= 10, "one row per configuration: {rows:?}");
    // A configuration with no verified run (rclone at its limit) has no ratio to compare.
    for r in rows.iter().filter(|r| r["runs_ok_a"] != "0") {
        assert_eq!(r["ratio_b_over_a"], "1.000", "{r:?}");
        let lo: f64 = r["ratio_ci_low"].parse().unwrap();
        let hi: f64 = r["ratio_ci_high"].parse().unwrap();
        assert!(lo <= 1.0 && 1.0 <= hi, "{r:?}");
        let p: f64 = r["mann_whitney_p"].parse().unwrap();
        assert!(p >= 0.5, "{r:?}");
    }
}

/// A `shoal recv --control` on loopback stands in for host B.
struct ControlReceiver {
    child: std::process::Child,
    addr: String,
    pin: String,
    token_file: PathBuf,
}

impl ControlReceiver {
    fn start(dir: &Path, extra: &[&str]) -> ControlReceiver {
        let mut child = shoal()
            .args(["recv", "--listen", "127.0.0.1:0", "--dest"])
            .arg(dir.join("incoming"))
            .arg("--identity")
            .arg(dir.join("id"))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting shoal recv");
        let out = child.stdout.take().unwrap();
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(out));
        let (mut addr, mut pin, mut token_file) = (String::new(), String::new(), PathBuf::new());
        for line in lines.by_ref().take(6) {
            let line = line.unwrap();
            if let Some(a) = line.strip_prefix("listening on ") {
                addr = a.trim().to_string();
            } else if let Some(p) = line.strip_prefix("pin ") {
                pin = p.trim().to_string();
            } else if let Some(t) = line.strip_prefix("token file ") {
                token_file = PathBuf::from(t.trim());
            }
            if !addr.is_empty() && !pin.is_empty() && !token_file.as_os_str().is_empty() {
                break;
            }
        }
        // Keep draining its output so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        assert!(
            !addr.is_empty() && pin.starts_with("sha256:"),
            "receiver did not start"
        );
        ControlReceiver {
            child,
            addr,
            pin,
            token_file,
        }
    }

    fn matrix(&self, axes: &str) -> String {
        format!(
            "[sweep]\ntimeout = \"1m\"\nprobe = false\nreference = {{ mode = \"tcp-bundle\" }}\n\
             [link]\nreceiver = \"{}\"\npin = \"{}\"\ntoken_file = \"{}\"\n\
             [payload.p]\nfiles = 200\nsize = \"4KiB\"\ndirs = 4\n{axes}\n",
            self.addr,
            self.pin,
            self.token_file.display()
        )
    }
}

impl Drop for ControlReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn two_host_sweep_gets_fresh_verified_folders_through_the_control_channel() {
    let _l = serial();
    let t = tempfile::tempdir().unwrap();
    let rx = ControlReceiver::start(t.path(), &["--control"]);
    let m = rx.matrix("[axes]\nmode = [\"tcp-bundle\", \"quic-streams\"]");
    // Run 3 has a destination file changed between the transfer and the hashing.
    let s = sweep(
        t.path(),
        "remote",
        &m,
        "unused",
        &["--runs", "2", "--seed", "5"],
        &[("SHOAL_SWEEP_TEST_TAMPER", "3")],
    );
    let r = rows(&s.out.join("runs.csv"));
    assert_eq!(r.len(), 4, "{}", s.stdout);
    let incoming = t.path().join("incoming");
    let mut folders = std::collections::BTreeSet::new();
    for row in &r {
        let dest = PathBuf::from(&row["dest"]);
        assert_eq!(dest.parent(), Some(incoming.as_path()), "{row:?}");
        assert!(folders.insert(dest), "every run has its own folder");
        if row["order"] == "3" {
            assert_eq!(row["status"], "failed", "{row:?}");
            assert_eq!(row["verified"], "false");
            assert!(
                row["error"].contains("verification failed"),
                "{}",
                row["error"]
            );
            assert_eq!(row["mb_per_s"], "0");
        } else {
            assert_eq!(row["status"], "ok", "{row:?}");
            assert_eq!(row["verified"], "true");
            assert_eq!(row["verify_result"], "identical");
            assert_eq!(row["files_verified"], "200");
            assert!(!row["receiver_host"].is_empty());
            // The sender runs here: its traces too, whoever receives.
            let traces = s
                .out
                .join(format!("traces/{}-r{}", row["config_id"], row["run"]));
            for f in ["sender-series.csv", "latency.csv", "receiver-series.csv"] {
                // Compressed once the run is over (`.csv.gz`, read as they are).
                assert!(
                    traces.join(format!("{f}.gz")).exists(),
                    "{}/{f}.gz",
                    traces.display()
                );
            }
            // The receiving host's UDP drops and CPU steal over the run, via its control channel.
            assert!(
                row["receiver_udp_rcvbuf_errors"].parse::<u64>().is_ok(),
                "{row:?}"
            );
            assert!(
                row["receiver_udp_in_errors"].parse::<u64>().is_ok(),
                "{row:?}"
            );
            assert!(
                row["receiver_cpu_steal_seconds"].parse::<f64>().is_ok(),
                "{row:?}"
            );
        }
        // One host's two clocks: the estimated offset is 0 within 1 ms.
        let offset: f64 = row["clock_offset_ms"].parse().unwrap();
        assert!(offset.abs() < 1.0, "clock offset {offset} ms on one host");
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.out.join("meta.json")).unwrap()).unwrap();
    for end in ["start", "end"] {
        let o = meta["clock_offset"][end]["offset_ms"].as_f64().unwrap();
        assert!(o.abs() < 1.0, "meta.json clock_offset.{end} = {o} ms");
    }
    // Every run folder was removed through the control channel at the end.
    let left: Vec<_> = std::fs::read_dir(&incoming).unwrap().collect();
    assert!(
        left.is_empty(),
        "run folders left on the receiver: {left:?}"
    );
}

#[test]
fn a_two_host_sweep_needs_a_receiver_with_control() {
    let _l = serial();
    let t = tempfile::tempdir().unwrap();
    let rx = ControlReceiver::start(t.path(), &[]);
    let mpath = t.path().join("m.toml");
    std::fs::write(&mpath, rx.matrix("[axes]\nmode = [\"tcp-bundle\"]")).unwrap();
    let out = shoal()
        .args(["sweep", "--matrix"])
        .arg(&mpath)
        .arg("--out")
        .arg(t.path().join("out"))
        .arg("--work")
        .arg(t.path().join("work"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("shoal recv --control") && err.contains("start it with --control"),
        "{err}"
    );
}

#[test]
fn the_control_channel_stays_inside_its_destination_and_needs_the_token() {
    use shoal_remote::Remote;
    let t = tempfile::tempdir().unwrap();
    let rx = ControlReceiver::start(t.path(), &["--control"]);
    let incoming = t.path().join("incoming");
    let good = Remote::new(&rx.addr, Some(&rx.pin), Some(&rx.token_file)).unwrap();

    let wrong_token = t.path().join("wrong-token");
    std::fs::write(&wrong_token, "not-the-token\n").unwrap();
    let bad = Remote::new(&rx.addr, Some(&rx.pin), Some(&wrong_token)).unwrap();
    let e = format!(
        "{:#}",
        bad.prepare("00112233445566778899aabbccddeeff").unwrap_err()
    );
    assert!(e.contains("wrong token"), "{e}");
    assert!(!incoming.join("00112233445566778899aabbccddeeff").exists());

    for hostile in [
        "../../outside",
        "/etc",
        "00112233445566778899AABBCCDDEEFF",
        "",
    ] {
        let e = format!("{:#}", good.prepare(hostile).unwrap_err());
        assert!(e.contains("not a run id"), "{hostile}: {e}");
    }
    assert!(!t.path().join("outside").exists());

    let id = "0123456789abcdef0123456789abcdef";
    let e = format!("{:#}", good.hash(id).unwrap_err());
    assert!(e.contains("was not prepared here"), "{e}");
    let e = format!("{:#}", good.cleanup(id).unwrap_err());
    assert!(e.contains("was not prepared here"), "{e}");

    let folder = good.prepare(id).unwrap();
    assert_eq!(PathBuf::from(&folder), incoming.join(id));
    let e = format!("{:#}", good.prepare(id).unwrap_err());
    assert!(e.contains("prepared already"), "{e}");
    std::fs::write(incoming.join(id).join("f"), b"abc").unwrap();
    let (m, _) = good.hash(id).unwrap();
    assert_eq!(m.files(), 1);
    assert_eq!(m.bytes(), 3);
    // A neighbour folder the channel did not create is never touched.
    std::fs::create_dir_all(incoming.join("keep")).unwrap();
    good.cleanup(id).unwrap();
    assert!(!incoming.join(id).exists());
    assert!(incoming.join("keep").is_dir());
    // The receiver still serves after all of that.
    assert_eq!(
        good.info().unwrap().facts["dest"],
        incoming.display().to_string()
    );
}

/// `shoal sweep` with `args`; no link is involved (the matrix names a link that must never
/// come up: these sweeps stop before it).
fn sweep_no_link(dir: &Path, matrix: &str, args: &[&str]) -> (bool, String, String) {
    let mpath = dir.join("m.toml");
    std::fs::write(&mpath, matrix).unwrap();
    let out = shoal()
        .args(["sweep", "--matrix"])
        .arg(&mpath)
        .arg("--out")
        .arg(dir.join("out"))
        .arg("--work")
        .arg(dir.join("work"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const NO_LINK: &str = "[link]\nname = \"never\"\nrtt = \"20ms\"\nrate = \"100mbit\"\n\
                       [payload.p]\nfiles = 2\nsize = \"1KiB\"\n";

#[test]
fn typos_stop_the_sweep_before_it_touches_anything() {
    let t = tempfile::tempdir().unwrap();
    for (axes, says) in [
        ("mdoe = [\"tcp-bundle\"]", "unexpected argument '--mdoe'"),
        ("mode = [\"tcp-bundel\"]", "invalid value 'tcp-bundel'"),
        ("cc = [\"cubik\"]", "unknown congestion controller 'cubik'"),
        ("connections = [0]", "invalid value '0'"),
        (
            "\"recv.fsnyc\" = [true]",
            "shoal recv: error: unexpected argument '--fsnyc'",
        ),
    ] {
        let (ok, _, err) = sweep_no_link(
            t.path(),
            &format!("{NO_LINK}[axes]\nmode = [\"tcp-bundle\", \"quic-bundle\"]\n{axes}\n")
                .replace("mode = [\"tcp-bundle\", \"quic-bundle\"]\nmode", "mode"),
            &[],
        );
        assert!(!ok, "{axes}: the sweep ran\n{err}");
        assert!(err.contains(says), "{axes}: {err}");
        assert!(
            err.contains("c01 (payload=p kind=shoal"),
            "{axes}: names the configuration: {err}"
        );
        assert!(
            !t.path().join("out").exists(),
            "{axes}: wrote an output folder"
        );
        assert!(!t.path().join("work").exists(), "{axes}: made a payload");
    }
    // --runs 0 is refused by the parser; [sweep] runs = 0 by the matrix.
    let good = format!("{NO_LINK}[axes]\nmode = [\"tcp-bundle\"]\n");
    let (ok, _, err) = sweep_no_link(t.path(), &good, &["--runs", "0"]);
    assert!(!ok && err.contains("--runs"), "{err}");
    let (ok, _, err) = sweep_no_link(t.path(), &format!("[sweep]\nruns = 0\n{good}"), &[]);
    assert!(
        !ok && err.contains("runs must be a positive number"),
        "{err}"
    );
    assert!(!t.path().join("out").exists());
}

#[test]
fn dry_run_prints_the_plan_and_touches_nothing() {
    let t = tempfile::tempdir().unwrap();
    let m = format!(
        "{NO_LINK}[axes]\nmode = [\"tcp-bundle\", \"quic-streams\"]\ncc = [\"cubic\", \"bbr\"]\n\
         [[also]]\nkind = [\"tar-ssh\"]\n"
    );
    let (ok, out, err) = sweep_no_link(t.path(), &m, &["--dry-run", "--runs", "3", "--seed", "9"]);
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("plan: 5 configurations × 3 runs = 15 runs in one shuffled order (seed 9)"),
        "{out}"
    );
    assert!(
        out.contains("c04  payload=p kind=shoal mode=quic-streams cc=bbr"),
        "{out}"
    );
    assert!(out.contains("c05  payload=p kind=tar-ssh"), "{out}");
    assert!(out.contains("estimated time: about"), "{out}");
    assert!(!t.path().join("out").exists(), "wrote an output folder");
    assert!(!t.path().join("work").exists(), "made a payload");
}

#[test]
fn a_two_host_sweep_names_address_pin_and_token_errors_before_any_payload() {
    let _l = serial();
    let t = tempfile::tempdir().unwrap();
    let rx = ControlReceiver::start(t.path(), &["--control"]);
    let good = rx.matrix("[axes]\nmode = [\"tcp-bundle\"]");
    // Same form, another certificate's pin.
    let last = rx.pin.chars().last().unwrap();
    let other = format!(
        "{}{}",
        &rx.pin[..rx.pin.len() - 1],
        if last == '0' { '1' } else { '0' }
    );
    let wrong_token = t.path().join("wrong-token");
    std::fs::write(&wrong_token, "not-the-token\n").unwrap();
    for (matrix, says) in [
        (
            good.replace(&rx.addr, "127.0.0.1:1"),
            "cannot reach the receiver at 127.0.0.1:1",
        ),
        (
            good.replace(&rx.pin, &other),
            "is not the one [link] pin names",
        ),
        (
            good.replace(
                &rx.token_file.display().to_string(),
                &wrong_token.display().to_string(),
            ),
            "refused the token in",
        ),
    ] {
        let (ok, out, err) = sweep_no_link(t.path(), &matrix, &[]);
        assert!(!ok, "{says}: the sweep ran\n{out}");
        assert!(err.contains(says), "{says}: {err}");
        assert!(!err.contains("must run `shoal recv --control`"), "{err}");
        assert!(
            !t.path().join("work").join("payloads").exists(),
            "{says}: a payload was generated before the receiver was contacted"
        );
    }
}
