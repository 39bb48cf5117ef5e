//! The kernel's cached per-destination TCP metrics across two hosts: refused, or flushed
//! before every run.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// Across two hosts nothing resets the kernel's per-destination TCP metrics (ssthresh, RTT)
/// between runs, so one run's slow start would depend on the run before it. The emulated link
/// sets `net.ipv4.tcp_no_metrics_save = 1` in its namespaces; across hosts the sending end
/// must have it, or be root so the sweep can flush the metrics before every run (else the
/// sweep refuses, naming the sysctl). The receiving end does the same for itself when it
/// prepares each run (`recv --control`). Returns whether to flush before each run.
pub fn guard_tcp_metrics(
    receiver_facts: &BTreeMap<String, String>,
    meta: &mut serde_json::Value,
) -> Result<bool> {
    let local = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_no_metrics_save")
        .map(|t| t.trim().to_string())
        .unwrap_or_default();
    let remote = receiver_facts
        .get("facts.tcp_no_metrics_save")
        .cloned()
        .unwrap_or_default();
    let flush = local != "1";
    let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self")?) == 0;
    if flush && !root {
        bail!(
            "net.ipv4.tcp_no_metrics_save is {local:?} on this sending host: the kernel would carry TCP metrics (ssthresh, RTT) from one run into the next; set it with `sysctl -w net.ipv4.tcp_no_metrics_save=1`, or run the sweep as root so it flushes them (`ip tcp_metrics flush`) before every run"
        );
    }
    meta["tcp_metrics"] = serde_json::json!({
        "sender_tcp_no_metrics_save": local,
        "receiver_tcp_no_metrics_save": remote,
        "flushed_at_sender_before_each_run": flush,
        "receiver": "flushed by the receiver before each run unless its tcp_no_metrics_save is 1; a receiver that cannot flush refuses the run",
    });
    Ok(flush)
}

/// Forgets the kernel's cached TCP metrics in this namespace (see `guard_tcp_metrics`).
pub fn flush_tcp_metrics() -> Result<()> {
    let st = Command::new("ip")
        .args(["tcp_metrics", "flush", "all"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("running ip tcp_metrics flush")?;
    // Exit 2 when there was nothing to flush is fine.
    if !st.success() && st.code() != Some(2) {
        bail!("ip tcp_metrics flush failed ({st})");
    }
    Ok(())
}
