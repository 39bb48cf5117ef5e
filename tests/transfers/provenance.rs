//! Every result says which build produced it: `shoal --version` names the commit and whether
//! the tree was dirty, and every row carries them with the SHA-256 of the binary that ran.

use crate::support;

use support::*;

#[test]
fn version_and_every_row_name_the_build() {
    let out = run(&["--version"]);
    assert!(out.status.success());
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let commit = version
        .split("commit ")
        .nth(1)
        .and_then(|r| r.get(..40))
        .unwrap_or_else(|| panic!("no commit in {version:?}"))
        .to_string();
    assert!(commit.chars().all(|c| c.is_ascii_hexdigit()), "{version}");

    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, 20, "1KiB", 2, 3);
    let rx = ReceiverProc::start(&t.path().join("id"), &t.path().join("dst"), &[]);
    let out = rx.send(&src, &["--mode", "quic-bundle", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let row: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(row["shoal_commit"], commit.as_str());
    assert_eq!(
        row["shoal_dirty"].as_bool().unwrap(),
        version.contains("dirty tree")
    );
    let sha = std::process::Command::new("sha256sum")
        .arg(env!("CARGO_BIN_EXE_shoal"))
        .output()
        .unwrap();
    let sha = String::from_utf8_lossy(&sha.stdout);
    assert_eq!(row["shoal_sha256"], sha.split_whitespace().next().unwrap());
    // QUIC rows say whether a namespace dropped datagrams during the run.
    assert!(row["sender_udp_rcvbuf_errors"].is_u64(), "{row}");
    assert!(row["sender_udp_in_errors"].is_u64(), "{row}");
    assert!(row["cpu_steal_seconds"].is_f64(), "{row}");
}
