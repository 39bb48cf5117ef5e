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
    // Re-run when the commit, the index, the manifests or any source of a workspace member
    // changes (a directory here means every file under it). The members are read from the
    // workspace manifest, so a new crate is covered without editing this list.
    let manifest = std::fs::read_to_string("../Cargo.toml").unwrap_or_default();
    let mut watched: Vec<String> = [
        ".git/HEAD",
        ".git/index",
        ".git/refs",
        "Cargo.toml",
        "Cargo.lock",
        "vendor",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    watched.extend(workspace_members(&manifest));
    for p in watched {
        println!("cargo:rerun-if-changed=../{p}");
    }
}

/// The `members = [...]` entries of the workspace manifest.
fn workspace_members(manifest: &str) -> Vec<String> {
    let Some(start) = manifest.find("members = [") else {
        return Vec::new();
    };
    let list = &manifest[start + "members = [".len()..];
    let list = &list[..list.find(']').unwrap_or(list.len())];
    list.split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect()
}
