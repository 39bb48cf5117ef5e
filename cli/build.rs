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
    pack_relative_relocations();
}

/// Links the `shoal` binary with its relative relocations packed (`DT_RELR`) where the glibc
/// it will run on loads them (2.36 and later): the dynamic loader then reads a table of a few
/// KB at start instead of ~0.5 MB of `.rela.dyn`, and every Shoal process is ~0.5 MB smaller
/// resident, at no cost in speed (docs/decisions/0031-packed-relocations.md). Only for a
/// native GNU build, judged by the build host's glibc; elsewhere the binary links as before.
fn pack_relative_relocations() {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
        || var("HOST") != var("TARGET")
    {
        return;
    }
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return;
    };
    // "glibc 2.36"
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.trim().strip_prefix("glibc ").unwrap_or("");
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if (major, minor) >= (2, 36) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
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
