//! Checks before a sweep runs: a failed link check stops the sweep before any run, its failing
//! rows printed, unless `--accept-failed-check`, after which runs.csv, medians.csv, the
//! summary and report.html say so (root: the emulated link; the failure comes from the test hook
//! `SHOAL_SWEEP_TEST_CHECK=fail`); a misspelt axis is named before the reference; the dry run
//! warns of TCP and QUIC under different controllers.

use crate::support;

use support::sweep::sweep_any;
use support::{needs_root, rows, serial};

const MATRIX: &str = "[sweep]\ntimeout = \"1m\"\n\
    [link]\nname = \"htmlchk\"\nrtt = \"10ms\"\nrate = \"100mbit\"\ncheck = true\n\
    [payload.p]\nfiles = 20\nsize = \"4KiB\"\ndirs = 1\nseed = 3\n\
    [axes]\nmode = [\"tcp-bundle\"]\n";

#[test]
#[ignore = "needs root"]
fn a_failed_link_check_stops_the_sweep_unless_accepted() {
    needs_root();
    let _l = serial();
    let t = tempfile::tempdir().unwrap();
    let env = [("SHOAL_SWEEP_TEST_CHECK", "fail")];
    let s = sweep_any(t.path(), "stop", MATRIX, "htmlchk", &["--runs", "1"], &env);
    assert!(
        !s.ok,
        "the sweep went on after a failed check\n{}",
        s.stdout
    );
    assert!(
        s.stdout.contains("link check: FAIL")
            && s.stdout
                .contains("idle RTT (median): measured SHOAL_SWEEP_TEST_CHECK=fail"),
        "{}",
        s.stdout
    );
    assert!(s.stderr.contains("--accept-failed-check"), "{}", s.stderr);
    let runs = s.out.join("runs.csv");
    assert!(
        !runs.exists() || rows(&runs).is_empty(),
        "a run was started"
    );

    let s = sweep_any(
        t.path(),
        "go",
        MATRIX,
        "htmlchk",
        &["--runs", "1", "--accept-failed-check"],
        &env,
    );
    assert!(s.ok, "{}\n{}", s.stdout, s.stderr);
    let r = rows(&s.out.join("runs.csv"));
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["link_check"], "FAILED, accepted");
    let m = rows(&s.out.join("medians.csv"));
    assert_eq!(m[0]["link_check"], "FAILED, accepted");
    assert!(
        s.stdout
            .contains("warning: link check FAILED and the sweep went on"),
        "{}",
        s.stdout
    );
    let html = std::fs::read_to_string(s.out.join("report.html")).unwrap();
    assert!(html.contains("link check FAILED") && html.contains("LINK CHECK FAILED"));
    let svg = std::fs::read_to_string(s.out.join("throughput.svg")).unwrap();
    assert!(svg.contains("LINK CHECK FAILED"), "the chart's subtitle");
}

/// `shoal sweep --dry-run` of `matrix` in `dir`: (success, stdout, stderr).
fn dry_run(dir: &std::path::Path, matrix: &str) -> (bool, String, String) {
    let m = dir.join("m.toml");
    std::fs::write(&m, matrix).unwrap();
    let o = support::shoal()
        .args(["sweep", "--dry-run", "--matrix"])
        .arg(&m)
        .arg("--work")
        .arg(dir.join("work"))
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const NO_LINK: &str = "[link]\nname = \"never\"\nrtt = \"20ms\"\nrate = \"100mbit\"\n\
                       [payload.p]\nfiles = 2\nsize = \"1KiB\"\n";

#[test]
fn a_misspelt_axis_is_named_before_the_reference_that_spells_it_right() {
    let t = tempfile::tempdir().unwrap();
    let m = format!(
        "[sweep]\nreference = {{ mode = \"tcp-bundle\", connections = 1 }}\n{NO_LINK}\
         [axes]\nmode = [\"tcp-bundle\", \"quic-bundle\"]\nconections = [1, 8]\n"
    );
    let (ok, _, err) = dry_run(t.path(), &m);
    assert!(!ok);
    assert!(
        err.contains("unexpected argument '--conections'") && !err.contains("reference"),
        "{err}"
    );
    // Spelt right, the reference is checked as before.
    let (ok, out, err) = dry_run(
        t.path(),
        &m.replace("conections", "connections")
            .replace("connections = 1 }", "connections = 2 }"),
    );
    assert!(!ok, "{out}");
    assert!(err.contains("no configuration matches"), "{err}");
}

#[test]
fn the_dry_run_warns_of_tcp_and_quic_under_different_controllers() {
    let t = tempfile::tempdir().unwrap();
    let m = format!("{NO_LINK}[axes]\nmode = [\"tcp-bundle\", \"quic-bundle\"]\n");
    let (ok, out, err) = dry_run(t.path(), &m);
    assert!(ok, "{err}");
    // TCP takes the host's default; QUIC quinn's CUBIC.
    let host =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap_or_default();
    let warned = out.contains("different congestion controllers") && out.contains("add a cc axis");
    assert_eq!(warned, host.trim() != "cubic", "host default {host}: {out}");
    // With a cc axis, no warning.
    let (ok, out, _) = dry_run(t.path(), &format!("{m}cc = [\"cubic\", \"bbr\"]\n"));
    assert!(
        ok && !out.contains("different congestion controllers"),
        "{out}"
    );
}
