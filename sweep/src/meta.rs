//! meta.json: what the sweep ran, on what, built by what.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use shoal_row::metrics;

use crate::options::Options;
use crate::payload::Payload;
use shoal_matrix::matrix::Matrix;
use shoal_matrix::plan::Planned;

/// Writes meta.json whole (a temporary file renamed over it): a sweep killed while writing
/// leaves the previous version, which `--continue` reads.
pub fn write_meta(out: &Path, meta: &serde_json::Value) -> Result<()> {
    let tmp = out.join("meta.json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(meta)?).context("writing meta.json")?;
    std::fs::rename(&tmp, out.join("meta.json")).context("writing meta.json")
}

/// The build of `bin`: what `bin --version` says it was built from, and its SHA-256.
pub fn binary_provenance(bin: &Path) -> serde_json::Value {
    let version = Command::new(bin)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    // "shoal 0.1.0 (commit <hex>[, dirty tree])"
    let commit = version.split("commit ").nth(1).map(|r| {
        r.trim_end_matches(')')
            .split(',')
            .next()
            .unwrap_or("")
            .to_string()
    });
    serde_json::json!({
        "binary": bin.display().to_string(),
        "version": version,
        "commit": commit,
        "dirty": version.contains("dirty tree"),
        "sha256": shoal_row::provenance::file_sha256(bin).ok(),
    })
}

/// Checks the `[binaries]` of the `shoal` axis before anything is touched: each must run
/// (`BIN --version`) and say it is shoal.
pub fn check_binaries(matrix: &Matrix) -> anyhow::Result<()> {
    for (label, bin) in &matrix.binaries {
        let out = Command::new(bin).arg("--version").output();
        match out {
            Ok(o)
                if o.status.success()
                    && String::from_utf8_lossy(&o.stdout).starts_with("shoal ") => {}
            Ok(o) => anyhow::bail!(
                "[binaries] {label} = {}: `--version` did not name a shoal build ({}): {}",
                bin.display(),
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => anyhow::bail!("[binaries] {label} = {}: cannot run it: {e}", bin.display()),
        }
    }
    Ok(())
}

/// What meta.json records before the first run.
pub struct Start<'a> {
    pub opts: &'a Options,
    pub matrix: &'a Matrix,
    pub sweep_id: &'a str,
    pub started_at: &'a str,
    pub work_run: &'a PathBuf,
    pub payloads: &'a BTreeMap<String, Payload>,
    pub plan: &'a [Planned],
}

/// meta.json as it stands before the link is up: the sweep, the build, the host, the plan.
pub fn initial(s: &Start) -> serde_json::Value {
    serde_json::json!({
        "sweep_id": s.sweep_id,
        "started": s.started_at,
        "shoal_version": env!("CARGO_PKG_VERSION"),
        // The build that ran the runs (not the git state of the folder the sweep started in).
        "shoal": match &s.opts.continuation {
            Some(c) => c.binary.clone(),
            None => binary_provenance(&s.opts.shoal_bin),
        },
        "kernel": metrics::kernel_release(),
        "host": metrics::host_name(),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "matrix": s.opts.matrix_path.display().to_string(),
        "runs_per_config": s.opts.runs,
        "order_seed": s.opts.seed,
        "timeout_s": s.opts.timeout.as_secs_f64(),
        "quiet_wait": s.opts.quiet_wait,
        "quiet_load": s.opts.quiet_load,
        "work": s.work_run.display().to_string(),
        "shoal_bin": s.opts.shoal_bin.display().to_string(),
        // The `shoal` axis: each label's build (both ends of its runs use it).
        "binaries": s.matrix.binaries.iter().map(|(l, b)| (l.clone(), binary_provenance(b))).collect::<serde_json::Map<_, _>>(),
        "configs": s.matrix.configs.iter().map(|c| serde_json::json!({"id": c.id, "config": c.label()})).collect::<Vec<_>>(),
        "payloads": s.payloads.values().map(|p| serde_json::json!({
            "name": p.name, "files": p.files, "bytes": p.bytes, "root": p.root.display().to_string(), "origin": p.origin,
        })).collect::<Vec<_>>(),
        "link_spec": s.matrix.link,
        "order": s.plan.iter().map(|p| format!("{}#{}", s.matrix.configs[p.config].id, p.run)).collect::<Vec<_>>(),
        "preread": "every source file read in full right before each run (after the source manifest was built once per payload)",
        "destinations": "a new folder per run under the work area; none deleted during the sweep unless free space ran low (then in bulk, with a settle pause); all deleted in bulk at the end unless --keep, then sync",
        "settle_s": s.opts.settle.as_secs_f64(),
        // The receiver's destination file system: `dir` (folders on the work file system) or a
        // fresh volume per run (rows: dest_fs_kind, dest_fs, dest_mount_options).
        "dest_fs": s.matrix.dest_fs,
        "dest_fs_size": s.matrix.dest_fs_size,
    })
}
