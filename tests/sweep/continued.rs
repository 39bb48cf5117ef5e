//! `shoal sweep --continue DIR` (docs/sweep.md, "Continuing a sweep"): a sweep killed with
//! SIGKILL after its third run, continued, holds every run exactly once in the order an
//! uninterrupted sweep with that seed has, and its medians and charts are those of its rows.
//! A two-host sweep against a `shoal recv --control` on loopback: no link, no namespace.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use support::{rows, shoal, ReceiverProc};

fn matrix(dir: &Path, rx: &ReceiverProc) -> std::path::PathBuf {
    let pin = std::fs::read_to_string(rx.identity.join("pin")).unwrap();
    let m = format!(
        "[sweep]\ntimeout = \"1m\"\nprobe = false\nruns = 3\nseed = 11\n\
         [link]\nreceiver = \"{}\"\npin = \"{}\"\ntoken_file = \"{}\"\n\
         [payload.p]\nfiles = 60\nsize = \"4KiB\"\ndirs = 3\n\
         [axes]\nmode = [\"tcp-bundle\", \"quic-bundle\"]\n",
        rx.addr,
        pin.trim(),
        rx.identity.join("token").display()
    );
    let p = dir.join("m.toml");
    std::fs::write(&p, m).unwrap();
    p
}

fn sweep_cmd(dir: &Path, args: &[&str]) -> std::process::Command {
    let mut c = shoal();
    c.arg("sweep")
        .args(args)
        .arg("--work")
        .arg(dir.join("work"))
        .args(["--settle", "0s"])
        .stdin(Stdio::null());
    c
}

fn run_ok(mut c: std::process::Command) -> String {
    let o = c.output().unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "shoal sweep failed:\n{text}");
    text
}

/// (order, config_id, run) of each row, in file order.
fn plan_of(out: &Path) -> Vec<(usize, String, String)> {
    rows(&out.join("runs.csv"))
        .into_iter()
        .map(|r| {
            (
                r["order"].parse().unwrap(),
                r["config_id"].clone(),
                r["run"].clone(),
            )
        })
        .collect()
}

fn data_rows(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count().saturating_sub(1))
        .unwrap_or(0)
}

#[test]
fn a_sweep_killed_after_its_third_run_and_continued_has_every_run_once_in_the_seeded_order() {
    let t = tempfile::tempdir().unwrap();
    let rx = ReceiverProc::start_at(
        "127.0.0.1:0",
        None,
        &t.path().join("id"),
        &t.path().join("incoming"),
        &["--control"],
    );
    let m = matrix(t.path(), &rx);
    let whole = t.path().join("whole");
    let m_arg = m.to_str().unwrap();
    run_ok(sweep_cmd(
        t.path(),
        &["--matrix", m_arg, "--out", whole.to_str().unwrap()],
    ));
    let expect = plan_of(&whole);
    assert_eq!(expect.len(), 6);

    // The same sweep, killed with SIGKILL once its third row is in runs.csv.
    let cut = t.path().join("cut");
    let mut c = sweep_cmd(
        t.path(),
        &["--matrix", m_arg, "--out", cut.to_str().unwrap()],
    );
    let mut child = c
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while data_rows(&cut.join("runs.csv")) < 3 {
        assert!(t0.elapsed() < Duration::from_secs(300), "no third row");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = data_rows(&cut.join("runs.csv"));
    assert!((3..6).contains(&before), "{before} rows when killed");
    // A machine crash could cut a row: such a torn last line is dropped, with a note.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(cut.join("runs.csv"))
        .unwrap();
    std::io::Write::write_all(&mut f, b"cut,c01,torn").unwrap();
    drop(f);

    // Something else than the sweep began with is refused, naming it.
    let o = sweep_cmd(
        t.path(),
        &["--continue", cut.to_str().unwrap(), "--seed", "12"],
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("order seed: was 11, is now 12"), "{err}");

    // --force goes on, recording the difference (a longer time limit changes no order).
    let said = run_ok(sweep_cmd(
        t.path(),
        &[
            "--continue",
            cut.to_str().unwrap(),
            "--timeout",
            "2m",
            "--force",
        ],
    ));
    assert!(said.contains("torn last row"), "{said}");
    assert!(
        said.contains(&format!("{before} of 6 runs recorded")),
        "{said}"
    );
    assert_eq!(plan_of(&cut), expect, "every run once, in the seeded order");
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(cut.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["continued"][0]["runs_recorded_before"], before);
    assert_eq!(meta["continued"][0]["torn_row_dropped_bytes"], 12);
    assert_eq!(meta["runs_done"], 6);
    assert_eq!(
        meta["continued"][0]["forced_differences"][0],
        "time limit (s): was 60, is now 120"
    );

    // Medians and charts are those of all the rows: shoal report on a copy says the same.
    let copy = t.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    for f in ["runs.csv", "meta.json", "matrix.toml"] {
        std::fs::copy(cut.join(f), copy.join(f)).unwrap();
    }
    let o = shoal().arg("report").arg(&copy).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in ["medians.csv", "throughput.svg"] {
        let (a, b) = (
            std::fs::read(cut.join(f)).unwrap(),
            std::fs::read(copy.join(f)).unwrap(),
        );
        assert!(a == b, "{f} differs from shoal report's");
    }
    let per_config = |out: &Path| -> BTreeMap<String, String> {
        rows(&out.join("medians.csv"))
            .into_iter()
            .map(|r| {
                (
                    r["config_id"].clone(),
                    format!("{}/{}", r["runs_ok"], r["runs"]),
                )
            })
            .collect()
    };
    assert_eq!(per_config(&cut), per_config(&whole));
}
