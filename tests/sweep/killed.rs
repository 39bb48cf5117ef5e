//! A sweep killed with SIGKILL leaves what it owned listed in its folder (`owned.jsonl`) and
//! its link claimed; the next sweep with that link releases all of it (docs/sweep.md, "What
//! a sweep owns"), and a sweep whose owner still runs is refused. Root only.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use shoal_hostctl::owned::{ident, List};
use support::{needs_root, needs_tools, serial, shoal};

fn matrix(name: &str) -> String {
    format!(
        "[sweep]\nruns = 1\nseed = 3\ntimeout = \"1m\"\ndest_fs = \"tmpfs\"\ndest_fs_size = \"64MiB\"\n\
         [link]\nname = \"{name}\"\nrtt = \"10ms\"\nrate = \"100mbit\"\ncheck = false\n\
         [payload.p]\nfiles = 40\nsize = \"4KiB\"\ndirs = 2\n\
         [axes]\npayload = [\"p\"]\nmode = [\"tcp-bundle\"]\nrecv-cpu-quota = [1.0]\n\
         [[also]]\nkind = [\"tar-ssh\"]\npayload = [\"p\"]\n"
    )
}

/// Every process below `root` (PID and start time).
fn descendants(root: u32) -> Vec<(u32, u64)> {
    let mut parent = BTreeMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            parent.insert(pid, ppid);
        }
    }
    let mut below = BTreeSet::from([root]);
    loop {
        let more: Vec<u32> = parent
            .iter()
            .filter(|(p, pp)| below.contains(pp) && !below.contains(p))
            .map(|(p, _)| *p)
            .collect();
        if more.is_empty() {
            break;
        }
        below.extend(more);
    }
    below.remove(&root);
    below
        .into_iter()
        .filter_map(|p| Some((p, ident::start_time(p)?)))
        .collect()
}

/// Processes holding /dev/cpu_dma_latency open.
fn latency_holders() -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(e.path().join("fd")) else {
            continue;
        };
        if fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|l| l == Path::new("/dev/cpu_dma_latency"))
        }) {
            out.push(pid);
        }
    }
    out
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

fn mounts_under(dir: &Path) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_string))
        .filter(|p| Path::new(p).starts_with(dir))
        .collect()
}

fn cgroups_of(pid: u32) -> Vec<PathBuf> {
    ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup"]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|r| r.flatten())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&format!("shoal-{pid}-")))
        })
        .collect()
}

struct Victim {
    pid: u32,
    out: PathBuf,
    procs: Vec<(u32, u64)>,
}

fn start(dir: &Path, m: &Path, out: &Path) -> (std::process::Child, PathBuf) {
    let log = out.with_extension("log");
    let f = std::fs::File::create(&log).unwrap();
    let child = shoal()
        .arg("sweep")
        .arg("--matrix")
        .arg(m)
        .arg("--out")
        .arg(out)
        .arg("--work")
        .arg(dir.join("work"))
        .args(["--settle", "0s"])
        .stdin(Stdio::null())
        .stdout(f.try_clone().unwrap())
        .stderr(f)
        .spawn()
        .unwrap();
    (child, log)
}

fn wait_for(log: &Path, what: &str, child: &mut std::process::Child, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if std::fs::read_to_string(log)
            .unwrap_or_default()
            .contains(what)
        {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
#[ignore = "needs root"]
fn a_sweep_killed_at_random_points_leaves_nothing_once_the_next_sweep_ran() {
    needs_root();
    needs_tools(&["sshd", "ssh", "tar"]);
    let _s = serial();
    // A matrix's link name has at most 8 characters.
    let name = format!("owner{}", std::process::id() % 1000);
    let t = tempfile::tempdir().unwrap();
    let m = t.path().join("m.toml");
    std::fs::write(&m, matrix(&name)).unwrap();
    let mut rng = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("kill points seeded with {rng}");
    let mut next = move |below: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % below
    };
    let mut victims = Vec::new();
    for trial in 0..10 {
        let out = t.path().join(format!("s{trial}"));
        let (mut child, log) = start(t.path(), &m, &out);
        if trial == 0 {
            // A second sweep on the same link while the first runs is refused, naming it.
            assert!(
                wait_for(
                    &log,
                    &format!("link {name}:"),
                    &mut child,
                    Duration::from_secs(120)
                ),
                "{}",
                std::fs::read_to_string(&log).unwrap()
            );
            let o = shoal()
                .arg("sweep")
                .arg("--matrix")
                .arg(&m)
                .arg("--out")
                .arg(t.path().join("second"))
                .arg("--work")
                .arg(t.path().join("work"))
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success());
            assert!(
                err.contains(&format!("still running (PID {},", child.id())),
                "{err}"
            );
        }
        // A random moment of a random phase: start-up and link up, the Shoal run (volume,
        // cgroup, both ends), the tar-ssh run (sshd), the tear-down.
        let (mark, within) = match next(4) {
            0 => (None, 9_000),
            1 => (Some(format!("link {name}:")), 1_500),
            2 => (Some("run 2/2 starting".to_string()), 1_500),
            _ => (Some("[2/2]".to_string()), 1_000),
        };
        if let Some(m) = &mark {
            wait_for(&log, m, &mut child, Duration::from_secs(120));
        }
        let delay = Duration::from_millis(next(within));
        let t0 = Instant::now();
        while t0.elapsed() < delay && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let procs = descendants(child.id());
        let pid = child.id();
        let _ = child.kill();
        child.wait().unwrap();
        eprintln!(
            "trial {trial}: killed {delay:?} after {}, {} processes below it; its log ends: {}",
            mark.as_deref().unwrap_or("its start"),
            procs.len(),
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .last()
                .unwrap_or_default()
        );
        victims.push(Victim { pid, out, procs });
    }

    // The next sweep runs, releasing what the killed ones left.
    let last = t.path().join("last");
    let (mut child, log) = start(t.path(), &m, &last);
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "the last sweep hangs"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let said = std::fs::read_to_string(&log).unwrap();
    let st = child.wait().unwrap();
    let _ = shoal()
        .args(["link", "down", "--name", &name])
        .stdout(Stdio::null())
        .status();
    assert!(st.success(), "{said}");
    assert!(said.contains("2 of 2 runs done, 2 ok"), "{said}");
    let released: usize = victims
        .iter()
        .chain([&Victim {
            pid: 0,
            out: last.clone(),
            procs: Vec::new(),
        }])
        .map(|v| {
            std::fs::read_to_string(v.out.with_extension("log"))
                .unwrap_or_default()
                .matches("released (owner")
                .count()
        })
        .sum();
    eprintln!("{released} things released in all");

    // Nothing of the killed sweeps remains.
    for v in &victims {
        for (p, start) in &v.procs {
            assert!(
                ident::start_time(*p) != Some(*start) || ident::live_group(*p).is_none(),
                "process {p} ({}) of killed sweep {} still runs",
                cmdline(*p),
                v.pid
            );
        }
        assert!(cgroups_of(v.pid).is_empty(), "{:?}", cgroups_of(v.pid));
        let list = List::read(&v.out.join("owned.jsonl")).unwrap();
        assert!(
            list.outstanding().is_empty(),
            "sweep {} still owns {:?}",
            v.pid,
            list.outstanding()
        );
    }
    assert!(
        mounts_under(t.path()).is_empty(),
        "{:?}",
        mounts_under(t.path())
    );
    for ns in [format!("{name}-snd"), format!("{name}-rcv")] {
        assert!(!Path::new("/run/netns").join(&ns).exists(), "{ns}");
    }
    let left: Vec<_> = std::fs::read_dir("/run/shoal")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f.starts_with(&format!("link-{name}.")))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let holders: Vec<u32> = latency_holders()
        .into_iter()
        .filter(|p| cmdline(*p).contains(&format!("--name {name} ")))
        .collect();
    assert!(
        holders.is_empty(),
        "/dev/cpu_dma_latency held by {holders:?}"
    );
    let work: Vec<_> = std::fs::read_dir(t.path().join("work"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f.starts_with("run-"))
        .collect();
    assert!(work.is_empty(), "work folders left: {work:?}");
}

/// `shoal sweep --clean DIR` releases what DIR's list holds once its owner is dead (here a
/// process group and a work folder), says so, and refuses while the owner runs.
#[test]
fn clean_releases_a_dead_owner_s_list_and_refuses_a_live_one() {
    use shoal_hostctl::owned::{append, Ident, Item, Line};
    use std::os::unix::process::CommandExt;
    let t = tempfile::tempdir().unwrap();
    let list = t.path().join("owned.jsonl");
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = Ident::of(gone.id()).unwrap();
    gone.wait().unwrap();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("60")
        .process_group(0)
        .spawn()
        .unwrap();
    let work = t.path().join("work/run-x-1");
    std::fs::create_dir_all(work.join("dest")).unwrap();
    let items = [
        Item::Process {
            pid: sleeper.id(),
            start: ident::start_time(sleeper.id()).unwrap(),
            what: "shoal recv".into(),
        },
        Item::WorkDir { path: work.clone() },
    ];
    let at = "t".to_string();
    append(
        &list,
        &Line::Owner {
            owner: dead.clone(),
            at: at.clone(),
        },
    )
    .unwrap();
    for (i, item) in items.into_iter().enumerate() {
        let owner = dead.clone();
        append(
            &list,
            &Line::Acquire {
                id: i as u64 + 1,
                owner,
                item,
            },
        )
        .unwrap();
    }
    // While a live process owns the folder, nothing is touched.
    let me = Ident::me();
    append(
        &list,
        &Line::Owner {
            owner: me.clone(),
            at: at.clone(),
        },
    )
    .unwrap();
    let o = shoal()
        .args(["sweep", "--clean"])
        .arg(t.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains(&format!("still running (PID {})", me.pid)),
        "{err}"
    );
    assert!(work.exists());

    append(&list, &Line::Owner { owner: dead, at }).unwrap();
    let o = shoal()
        .args(["sweep", "--clean"])
        .arg(t.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(said.contains("shoal recv: stopped process group"), "{said}");
    assert!(said.contains("work folder"), "{said}");
    assert!(
        sleeper.try_wait().unwrap().is_some(),
        "the process group was stopped"
    );
    assert!(!work.exists());
    assert!(List::read(&list).unwrap().outstanding().is_empty());
    let o = shoal()
        .args(["sweep", "--clean"])
        .arg(t.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("nothing left to release"));
}
