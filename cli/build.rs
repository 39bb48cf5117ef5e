//! Compiles in which commit the binary was built from and whether the tree had uncommitted
//! changes (`shoal --version`, every result row, meta.json). Reads the local git checkout
//! only; outside one (a source tarball) both read `unknown`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = match git(&["status", "--porcelain", "--untracked-files=no"]) {
        Some(s) => (!s.is_empty()).to_string(),
        None => "unknown".into(),
    };
    println!("cargo:rustc-env=SHOAL_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=SHOAL_GIT_DIRTY={dirty}");
    let suffix = if dirty == "false" { "" } else { ", dirty tree" };
    println!(
        "cargo:rustc-env=SHOAL_LONG_VERSION={} (commit {commit}{suffix})",
        env!("CARGO_PKG_VERSION")
    );
    // Re-run when the commit, the index or any source of the workspace changes (a directory
    // here means every file under it).
    let root = "..";
    for p in [
        ".git/HEAD",
        ".git/index",
        ".git/refs",
        "Cargo.toml",
        "Cargo.lock",
        "common",
        "sender",
        "receiver",
        "link",
        "sweep",
        "cli/src",
        "vendor",
    ] {
        println!("cargo:rerun-if-changed={root}/{p}");
    }
}
