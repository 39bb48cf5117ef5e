//! `shoal diagnose` on the emulated link, one planted bottleneck at a time: the receiver runs
//! in the `rcv` namespace with `--control`, the diagnosis in `snd`, and the primary constraint
//! must name what was planted. Root only, and a few minutes in all: each case's budget is 90 s
//! or less. The error cases run on loopback.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::*;
use shoal_link::UpConfig;

const MIB: u64 = 1 << 20;
const ALLOWED: &str = "net.ipv4.tcp_allowed_congestion_control";

/// A link with a planted bottleneck, a receiver behind it, and what the diagnosis said.
struct Planted {
    name: String,
    guard: Option<shoal_link::LinkGuard>,
    rx: Option<ReceiverProc>,
    pin: String,
    token: PathBuf,
    dir: tempfile::TempDir,
    /// The host's allowed controllers before the test added one.
    allowed: Option<String>,
}

impl Planted {
    /// Brings `cfg` up (the sender's namespace with controller `cc`) and starts the receiver.
    fn up(cfg: UpConfig, cc: Option<&str>) -> Planted {
        Planted::up_at(cfg, cc, None)
    }

    /// As [`Planted::up`], the receiver writing into `dest` when given.
    fn up_at(cfg: UpConfig, cc: Option<&str>, dest: Option<&Path>) -> Planted {
        let name = cfg.name.clone();
        let guard = link_up(&cfg);
        let mut allowed = None;
        if let Some(cc) = cc {
            // A namespace may default only to a controller the host allows.
            let list = shoal_link::netns::read_sysctl(ALLOWED).expect("allowed controllers");
            if !list.split_whitespace().any(|c| c == cc) {
                shoal_link::netns::write_sysctl(ALLOWED, &format!("{list} {cc}")).unwrap();
                allowed = Some(list);
            }
            shoal_link::netns::set_sysctl_in(
                &format!("{name}-snd"),
                "net.ipv4.tcp_congestion_control",
                cc,
            )
            .expect("set the sender's controller");
        }
        let dir = tempfile::tempdir().unwrap();
        let rx = ReceiverProc::start_at(
            "198.18.0.2:0",
            Some(&format!("{name}-rcv")),
            &dir.path().join("id"),
            &dest.map_or_else(|| dir.path().join("incoming"), Path::to_path_buf),
            &["--control"],
        );
        let (pin, token) = credentials(&rx);
        Planted {
            name,
            guard: Some(guard),
            rx: Some(rx),
            pin,
            token,
            dir,
            allowed,
        }
    }

    fn addr(&self) -> String {
        self.rx.as_ref().unwrap().addr.clone()
    }

    /// `shoal diagnose --json` from the sender's namespace; the report and its wall time.
    fn diagnose(&self, files: u64, budget_s: u64) -> (serde_json::Value, f64) {
        let out = self.dir.path().join("diagnose");
        let mut cmd = shoal();
        cmd.args(["diagnose", &self.addr(), "--pin", &self.pin, "--token-file"])
            .arg(&self.token)
            .args(["--files", &files.to_string(), "--size", "4KiB"])
            .args(["--budget", &format!("{budget_s}s"), "--json", "--out"])
            .arg(&out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let t0 = Instant::now();
        let child = shoal_link::spawn_in_netns(&format!("{}-snd", self.name), &mut cmd)
            .expect("start shoal diagnose");
        let o = wait_limited(child, Duration::from_secs(budget_s + 60));
        let took = t0.elapsed().as_secs_f64();
        assert!(o.status.success(), "{}", text(&o));
        eprintln!("{}", String::from_utf8_lossy(&o.stderr));
        println!(
            "{}",
            std::fs::read_to_string(out.join("summary.txt")).unwrap_or_default()
        );
        (json(&o), took)
    }

    /// A real `shoal send` of a generated tree of `files` × 4 KiB with the diagnosis's best
    /// command (its `TREE` replaced): the transfer's seconds.
    fn send_best(&self, report: &serde_json::Value, files: u64) -> f64 {
        let tree = self.dir.path().join("tree");
        gen(&tree, files, "4KiB", files.div_ceil(256), 1);
        let best = report["best_command"].as_str().expect("best_command");
        let args: Vec<String> = best
            .split_whitespace()
            .skip(2) // `shoal send`
            .map(|a| a.trim_matches('\'').to_string())
            .map(|a| {
                if a == "TREE" {
                    tree.display().to_string()
                } else {
                    a
                }
            })
            .collect();
        let mut cmd = shoal();
        cmd.arg("send").args(&args).arg("--json");
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = shoal_link::spawn_in_netns(&format!("{}-snd", self.name), &mut cmd)
            .expect("start shoal send");
        let o = wait_limited(child, Duration::from_secs(300));
        assert!(o.status.success(), "{best}: {}", text(&o));
        let row = json(&o);
        row["seconds"].as_f64().expect("seconds")
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        drop(self.rx.take());
        if let Some(g) = self.guard.take() {
            let _ = g.down();
        }
        if let Some(list) = self.allowed.take() {
            let _ = shoal_link::netns::write_sysctl(ALLOWED, &list);
        }
    }
}

fn primary(report: &serde_json::Value) -> String {
    report["bottlenecks"][0]["kind"]
        .as_str()
        .unwrap_or("none")
        .to_string()
}

/// The whole tree's time predicted with the best command against a real run of it: how far
/// off the prediction was, as a fraction of the real time.
fn prediction_error(p: &Planted, report: &serde_json::Value, files: u64, what: &str) -> f64 {
    let predicted = report["predicted_seconds"].as_f64().expect("a prediction");
    let real = p.send_best(report, files);
    let off = (real - predicted) / real;
    println!(
        "{what}: predicted {predicted:.2} s for {files} files with `{}`, real {real:.2} s, predicted/real {:.3} ({:+.1}%)",
        report["best_command"],
        predicted / real,
        off * 100.0
    );
    off
}

#[test]
#[ignore = "needs root"]
fn a_slow_short_link_is_link_rate_and_nothing_claims_a_gain() {
    let _serial = serial();
    let cfg = UpConfig::new(&unique("diagr"), Duration::from_millis(10), 20_000_000);
    let p = Planted::up(cfg, None);
    let (r, took) = p.diagnose(20_000, 90);
    println!("link-rate case: {took:.1} s of a 90 s budget");
    assert_eq!(primary(&r), "link-rate", "{r:#}");
    for f in r["fixes"].as_array().unwrap() {
        assert!(
            f["measured_gain"].as_f64().unwrap_or(0.0) <= 0.0 || f["removes"].is_null(),
            "a fix claims a gain on a full link: {f}"
        );
    }
    let off = prediction_error(&p, &r, 20_000, "link-rate");
    assert!(off.abs() <= 0.15, "prediction off by {:.1}%", off * 100.0);
}

#[test]
#[ignore = "needs root"]
fn random_loss_with_cubic_is_loss() {
    let _serial = serial();
    let mut cfg = UpConfig::new(&unique("diagl"), Duration::from_millis(40), 50_000_000);
    cfg.loss = 0.01;
    let p = Planted::up(cfg, Some("cubic"));
    let (r, took) = p.diagnose(20_000, 90);
    println!("loss case: {took:.1} s of a 90 s budget");
    assert_eq!(primary(&r), "loss", "{r:#}");
    // The sample is sized from CUBIC's lossy probe (a few hundred files), and the fix's run of
    // it lasts a dozen round trips: a prediction from it must be called unreliable, or hold.
    let off = prediction_error(&p, &r, 20_000, "loss");
    let doubt = r["prediction_unreliable"].as_str();
    println!("loss: prediction_unreliable: {doubt:?}");
    assert!(
        off.abs() <= 0.15 || doubt.is_some(),
        "prediction off by {:.1}% and not called unreliable",
        off * 100.0
    );
}

#[test]
#[ignore = "needs root"]
fn kernel_buffers_below_the_bdp_are_window() {
    let _serial = serial();
    let mut cfg = UpConfig::new(&unique("diagw"), Duration::from_millis(100), 100_000_000);
    cfg.tcp_mem_max = MIB;
    let p = Planted::up(cfg, None);
    let (r, took) = p.diagnose(20_000, 90);
    println!("window case: {took:.1} s of a 90 s budget");
    assert_eq!(primary(&r), "window", "{r:#}");
}

#[test]
#[ignore = "needs root"]
fn a_tuned_long_fat_link_is_slow_start_and_a_saved_window_the_fix() {
    let _serial = serial();
    // 141 ms at 300 Mbit/s (what the 2-core machine forwards) with the link's tuned buffers
    // (64 MiB maxima at both ends, above its ~5 MiB BDP) and the whole 65,536 × 4 KiB tree:
    // no window holds the transfer, and slow start's ~9 round trips are a large share of a
    // sample of a few seconds. The receiver writes into /dev/shm, so its destination is no
    // floor; BBR at the sender, whatever the host's default.
    let dest = tempfile::tempdir_in("/dev/shm").unwrap();
    let cfg = UpConfig::new(&unique("diags"), Duration::from_millis(141), 300_000_000);
    let p = Planted::up_at(cfg, Some("bbr"), Some(&dest.path().join("incoming")));
    let (r, took) = p.diagnose(65_536, 90);
    println!("slow-start case: {took:.1} s of a 90 s budget");
    assert_eq!(primary(&r), "slow-start", "{r:#}");
    let fix = &r["fixes"][0];
    assert_eq!(fix["removes"], "slow-start", "{r:#}");
    assert!(
        fix["change"].as_str().unwrap().contains("--resume"),
        "{fix}"
    );
    // The best command starts from the path state the diagnosis left in `shoal send`'s
    // default folder: its first run resumes.
    assert!(r["path_state_saved"].is_string(), "{r:#}");
    let off = prediction_error(&p, &r, 65_536, "slow-start");
    assert!(off.abs() <= 0.15, "prediction off by {:.1}%", off * 100.0);
}

#[test]
#[ignore = "needs root"]
fn a_receiver_held_to_a_fifth_of_a_core_is_receiver_cpu() {
    let _serial = serial();
    // A fast short link, so the link is not the limit; the receiver's process is moved into
    // a cgroup capped at 0.2 core right after it starts (removed when `group` drops, after
    // the receiver: locals drop in reverse order).
    let name = unique("diagc");
    let group = shoal_hostctl::cpu_quota::QuotaGroup::create(
        &name,
        0.2,
        shoal_hostctl::cpu_quota::PERIOD_US,
    )
    .expect("a cgroup cpu controller");
    let cfg = UpConfig::new(&name, Duration::from_millis(2), 1_000_000_000);
    let p = Planted::up(cfg, None);
    group
        .add(p.rx.as_ref().unwrap().child.id() as i32)
        .expect("move the receiver into the group");
    let (r, took) = p.diagnose(20_000, 90);
    println!("receiver-cpu case: {took:.1} s of a 90 s budget");
    assert_eq!(primary(&r), "receiver-cpu", "{r:#}");
    drop(p);
    group.restore();
}

/// The cgroup v1 file that caps a block device's write operations per second (the root
/// group's cap holds every writer, the journal's thread included).
const WRITE_IOPS: &str = "/sys/fs/cgroup/blkio/blkio.throttle.write_iops_device";

/// An ext4 volume on a loop device over a sparse file in /dev/shm, mounted `-o sync` and held
/// to [`SyncVolume::IOPS`] writes a second: every file's creation waits for its writes and the
/// journal's, about 13 operations, so some 75 files a second against tens of thousands on the
/// host's disk. A sync mount alone varied from 200 to 8,000 files/s between runs (the journal
/// commits' timing), and at 3,000 writes/s the floor still varied by 25% between measurements;
/// a lower cap makes the wait per file dominate. Undone when dropped (only what it created).
struct SyncVolume {
    dir: tempfile::TempDir,
    loopdev: String,
    dev: Option<String>,
    mounted: bool,
}

impl SyncVolume {
    const IOPS: u32 = 400;

    fn new() -> SyncVolume {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let img = dir.path().join("volume.img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len(1024 * MIB)
            .unwrap();
        let out = std::process::Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&img)
            .output()
            .expect("losetup");
        assert!(out.status.success(), "losetup: {out:?}");
        let mut v = SyncVolume {
            loopdev: String::from_utf8_lossy(&out.stdout).trim().to_string(),
            dir,
            dev: None,
            mounted: false,
        };
        let mnt = v.mount_point();
        std::fs::create_dir(&mnt).unwrap();
        let ok = |c: &mut std::process::Command| c.status().is_ok_and(|s| s.success());
        assert!(ok(std::process::Command::new("mkfs.ext4")
            .args(["-q", &v.loopdev])
            .stdout(Stdio::null())));
        assert!(ok(std::process::Command::new("mount")
            .args(["-o", "sync", &v.loopdev])
            .arg(&mnt)));
        v.mounted = true;
        let base = v.loopdev.trim_start_matches("/dev/");
        let dev = std::fs::read_to_string(format!("/sys/block/{base}/dev")).unwrap();
        let dev = dev.trim().to_string();
        std::fs::write(WRITE_IOPS, format!("{dev} {}", SyncVolume::IOPS))
            .expect("a cgroup v1 blkio controller");
        v.dev = Some(dev);
        v
    }

    fn mount_point(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }
}

impl Drop for SyncVolume {
    fn drop(&mut self) {
        if let Some(dev) = self.dev.take() {
            let _ = std::fs::write(WRITE_IOPS, format!("{dev} 0"));
        }
        if self.mounted {
            let _ = std::process::Command::new("umount")
                .arg(self.mount_point())
                .status();
        }
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.loopdev])
            .status();
    }
}

#[test]
#[ignore = "needs root"]
fn a_destination_mounted_sync_is_receiver_fs() {
    let _serial = serial();
    // A fast short link, so neither the path nor a window is the limit; the receiver writes
    // into the sync volume (the volume drops after the receiver: locals drop in reverse order).
    // Its queue is 16 BDPs (800 KB): at the default one BDP (49 KB) the probe read 3.9% random
    // loss and the base retransmitted 22.5% of its segments (results/diagnose-predictions/
    // receiver-fs-400.log), a second constraint this case does not mean to plant.
    let vol = SyncVolume::new();
    let mut cfg = UpConfig::new(&unique("diagfs"), Duration::from_millis(2), 200_000_000);
    cfg.queue = shoal_link::parse::QueueSpec::Bdp(16.0);
    let p = Planted::up_at(cfg, None, Some(&vol.mount_point().join("incoming")));
    // At 400 writes/s the writer makes ~30 files/s, so even the smallest sample (200 files)
    // takes ~7 s at the floor, and a run's fixed costs (~0.5 s) leave the base well within the
    // 85% a floor binds from (at 1,000 writes/s the sample was sized to a ~4 s base, and the
    // base sat at 74-84% of its floor in three runs of seven). 1,000 files: the whole tree's
    // real run takes about half a minute.
    let (r, took) = p.diagnose(1_000, 90);
    println!("receiver-fs case: {took:.1} s of a 90 s budget");
    assert_eq!(primary(&r), "receiver-fs", "{r:#}");
    assert!(
        entries(&vol.mount_point().join("incoming")).is_empty(),
        "the diagnosis left files on the receiver"
    );
    let off = prediction_error(&p, &r, 1_000, "receiver-fs");
    assert!(off.abs() <= 0.15, "prediction off by {:.1}%", off * 100.0);
    drop(p);
}

/// Without `--control`, with a wrong token, or with nobody listening, the diagnosis stops
/// before any stage with `shoal probe`'s error (loopback; no root needed).
#[test]
fn a_diagnosis_names_a_wrong_token_a_receiver_without_control_and_an_unreachable_one() {
    let t = tempfile::tempdir().unwrap();
    let (dst, id) = (t.path().join("dst"), t.path().join("id"));
    let rx = ReceiverProc::start(&id, &dst, &["--control"]);
    let (pin, _token) = credentials(&rx);
    let bad = t.path().join("bad-token");
    std::fs::write(&bad, "not-the-token\n").unwrap();
    let args = |addr: &str, pin: &str, token: &Path| {
        vec![
            "diagnose".to_string(),
            addr.to_string(),
            "--pin".into(),
            pin.into(),
            "--token-file".into(),
            token.display().to_string(),
            "--budget".into(),
            "30s".into(),
        ]
    };
    let run_args = |a: Vec<String>| run(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let out = run_args(args(&rx.addr, &pin, &bad));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refused the token in") && err.contains("wrong token"),
        "{err}"
    );
    drop(rx);

    let plain = ReceiverProc::start(&id, &dst, &[]);
    let (pin, token) = credentials(&plain);
    let out = run_args(args(&plain.addr, &pin, &token));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("must run `shoal recv --control`"), "{err}");
    drop(plain);

    let out = run_args(args("127.0.0.1:1", &pin, &token));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach the receiver"), "{err}");
}

/// `write-floor` creates the tree in a fresh folder, reports its rates, and leaves nothing
/// behind; a shape over its bounds or a name that is not a run id is refused (loopback).
#[test]
fn the_write_floor_reports_its_rates_removes_its_tree_and_keeps_its_bounds() {
    let t = tempfile::tempdir().unwrap();
    let (dst, id) = (t.path().join("dst"), t.path().join("id"));
    let rx = ReceiverProc::start(&id, &dst, &["--control"]);
    let (pin, token) = credentials(&rx);
    let remote = shoal_remote::Remote::new(&rx.addr, Some(&pin), Some(&token)).unwrap();
    let run_id = "0123456789abcdef0123456789abcdef";
    let r = remote.write_floor(run_id, 500, 4096, 4).unwrap();
    assert!(r.ok && r.seconds > 0.0, "{r:?}");
    assert_eq!(r.facts["files"], "500");
    assert_eq!(r.facts["bytes"], (500 * 4096).to_string());
    assert!(
        r.facts["files_per_s"].parse::<f64>().unwrap() > 0.0,
        "{r:?}"
    );
    assert!(entries(&dst).is_empty(), "{:?}", entries(&dst));
    // The same name again is a fresh folder again (the first was removed).
    assert!(remote.write_floor(run_id, 1, 0, 1).is_ok());
    for (files, bytes, dirs, want) in [
        (200_001, 1, 1, "files is outside"),
        (2, 1 << 30, 1, "over the limit"),
        (1, 1, 0, "folders is outside"),
    ] {
        let e = remote.write_floor(run_id, files, bytes, dirs).unwrap_err();
        assert!(format!("{e:#}").contains(want), "{e:#}");
    }
    let e = remote.write_floor("../../etc", 1, 1, 1).unwrap_err();
    assert!(format!("{e:#}").contains("not a run id"), "{e:#}");
    assert!(entries(&dst).is_empty());
}

/// The shortest budget (20 s): the arms that do not fit are listed with the reason, nothing is
/// named from them, and nothing is left on the receiver (loopback).
#[test]
fn a_short_budget_names_nothing_from_arms_that_did_not_run_and_leaves_nothing() {
    let t = tempfile::tempdir().unwrap();
    let (dst, id) = (t.path().join("dst"), t.path().join("id"));
    let rx = ReceiverProc::start(&id, &dst, &["--control"]);
    let (pin, token) = credentials(&rx);
    let t0 = Instant::now();
    let out = run(&[
        "diagnose",
        &rx.addr,
        "--pin",
        &pin,
        "--token-file",
        token.to_str().unwrap(),
        "--files",
        "3000",
        "--budget",
        "20s",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(t0.elapsed() < Duration::from_secs(25), "{:?}", t0.elapsed());
    let r = json(&out);
    // Which arms ran depends on how fast this host is: a fast one fits the pilot in the
    // budget and may be decided by it. Either way nothing is named from an arm that did not
    // run, and every arm that did not run is listed with its reason. A bottleneck names its
    // arm by kind (`per-file-wait`), as each stage's arm carries it beside its name
    // (`tcp-wait`).
    let ran: Vec<serde_json::Value> = r["stages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["arms"].as_array().cloned().unwrap_or_default())
        .filter(|a| !a["rows"].as_array().map(|v| v.is_empty()).unwrap_or(true))
        .map(|a| a["kind"].clone())
        .collect();
    for b in r["bottlenecks"].as_array().unwrap() {
        if !b["arm"].is_null() {
            assert!(
                ran.contains(&b["arm"]),
                "{b} from an arm that did not run: {r:#}"
            );
        }
    }
    let skipped: Vec<String> = r["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        skipped.iter().any(|s| s.contains("did not run")),
        "no arm skipped within a 20 s budget: {r:#}"
    );
    for s in skipped.iter().filter(|s| s.contains("did not run")) {
        assert!(s.contains("nothing is named from it"), "{s}");
    }
    if ran.is_empty() {
        assert_eq!(r["bottlenecks"], serde_json::json!([]), "{r:#}");
        assert!(
            skipped.iter().any(|s| s.contains("the budget ran out")),
            "{skipped:?}"
        );
    }
    assert!(entries(&dst).is_empty(), "{:?}", entries(&dst));
}
