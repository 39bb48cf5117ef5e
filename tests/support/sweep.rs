//! `shoal sweep` driven from a test: a matrix written to a file, the sweep run with a time
//! limit (a watchdog ends it by PID), the link brought down afterwards whatever happened.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{shoal, sys};

pub struct Sweep {
    pub out: PathBuf,
    pub stdout: String,
    pub stderr: String,
    pub ok: bool,
}

/// Runs `shoal sweep` with a time limit; brings the link down afterwards whatever happened;
/// the sweep must exit 0.
pub fn sweep(
    dir: &Path,
    name: &str,
    matrix: &str,
    link: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Sweep {
    let s = sweep_any(dir, name, matrix, link, extra, env);
    assert!(
        s.ok,
        "shoal sweep failed\nstdout:\n{}\nstderr:\n{}",
        s.stdout, s.stderr
    );
    s
}

/// [`sweep`], whatever its exit status.
pub fn sweep_any(
    dir: &Path,
    name: &str,
    matrix: &str,
    link: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Sweep {
    sweep_in(None, dir, name, matrix, link, extra, env)
}

/// [`sweep_any`], the sweep started inside network namespace `netns` if given (a sender
/// host of its own, for a two-host sweep across two namespaces).
pub fn sweep_in(
    netns: Option<&str>,
    dir: &Path,
    name: &str,
    matrix: &str,
    link: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Sweep {
    let mpath = dir.join(format!("{name}.toml"));
    std::fs::write(&mpath, matrix).unwrap();
    let out = dir.join(name);
    let mut cmd = shoal();
    cmd.arg("sweep")
        .arg("--matrix")
        .arg(&mpath)
        .arg("--out")
        .arg(&out)
        .arg("--work")
        .arg(dir.join("work"))
        .args(["--settle", "0s"])
        .args(extra)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = match netns {
        Some(ns) => shoal_link::spawn_in_netns(ns, &mut cmd),
        None => cmd.spawn(),
    }
    .expect("starting shoal sweep");
    let pid = child.id();
    // A watchdog ends the sweep (by its PID) if it hangs; the sweep cleans up on SIGTERM.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d2 = done.clone();
    let watchdog = std::thread::spawn(move || {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(400) {
            if d2.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        sys::terminate(pid);
    });
    let output = child.wait_with_output().expect("waiting for shoal sweep");
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = watchdog.join();
    let _ = shoal()
        .args(["link", "down", "--name", link])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let s = Sweep {
        out,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        ok: output.status.success(),
    };
    s
}
