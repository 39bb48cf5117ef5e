//! The `shoal` axis (docs/sweep.md, "Two builds in one sweep"): each configuration's runs use
//! the binary its label names at both ends, the label names the arm, and meta.json records
//! each build; a label without a binary, or a binary that is no shoal, is refused up front.

use crate::support;

use std::process::Stdio;

use support::sweep::sweep;
use support::{needs_root, rows, serial, shoal, shoal_bin};

fn matrix(link: &str, binaries: &str) -> String {
    format!(
        "[sweep]\ntimeout = \"2m\"\n\
         [link]\nname = \"{link}\"\nrtt = \"10ms\"\nrate = \"200mbit\"\ncheck = false\n\
         [payload.p]\nfiles = 100\nsize = \"4KiB\"\ndirs = 2\nseed = 3\n\
         [binaries]\n{binaries}\n\
         [axes]\nshoal = [\"new\", \"old\"]\nmode = [\"quic-bundle\"]\n"
    )
}

#[test]
#[ignore = "needs root"]
fn each_label_runs_its_own_binary_at_both_ends() {
    needs_root();
    let _l = serial();
    let link = format!("stall{}b", std::process::id() % 100);
    let t = tempfile::tempdir().unwrap();
    // A second copy of this build under another path: the rows show which one ran.
    let old = t.path().join("old-shoal");
    std::fs::copy(shoal_bin(), &old).unwrap();
    let m = matrix(&link, &format!("new = {:?}\nold = {:?}", shoal_bin(), old));
    let s = sweep(t.path(), "out", &m, &link, &["--runs", "1"], &[]);
    let rs = rows(&s.out.join("runs.csv"));
    assert_eq!(rs.len(), 2, "{}", s.stderr);
    for r in &rs {
        assert_eq!(r["status"], "ok", "{r:?}");
        let label = &r["param_shoal"];
        assert!(r["config"].contains(&format!("shoal={label}")), "{r:?}");
        let want = if label == "old" {
            old.clone()
        } else {
            shoal_bin()
        };
        assert!(
            r["command"].starts_with(&want.display().to_string()),
            "{label}: {}",
            r["command"]
        );
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.out.join("meta.json")).unwrap()).unwrap();
    assert_eq!(
        meta["binaries"]["old"]["binary"],
        old.display().to_string(),
        "{meta}"
    );
    assert!(meta["binaries"]["new"]["sha256"].is_string(), "{meta}");
}

#[test]
fn a_label_without_a_shoal_binary_is_refused_before_anything_runs() {
    let t = tempfile::tempdir().unwrap();
    for (binaries, want) in [
        (
            "new = \"/bin/true\"",
            "[binaries] new = /bin/true: `--version` did not name a shoal build",
        ),
        ("new = \"/nonexistent/shoal\"", "cannot run it"),
    ] {
        let p = t.path().join("m.toml");
        let b = format!("{binaries}\nold = {:?}", shoal_bin());
        std::fs::write(&p, matrix("sbin", &b)).unwrap();
        let o = shoal()
            .args(["sweep", "--dry-run", "--matrix"])
            .arg(&p)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{binaries}: accepted");
        assert!(err.contains(want), "{binaries}: {err}");
    }
}
