//! A failed link check stops the sweep before any run, its failing rows printed, unless
//! `--accept-failed-check`, after which runs.csv, the summary and report.html say so (root:
//! the emulated link; the failure comes from the test hook `SHOAL_SWEEP_TEST_CHECK=fail`).

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
