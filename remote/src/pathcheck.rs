//! A two-host sweep's path measurements: the path through the receiving host is probed
//! ([`crate::probe`]) before the first run and after the last (`[sweep] probe = false` or
//! `--no-probe` skips both), both are kept in meta.json → `path_probe`, and a path that
//! changed between them is a warning in the sweep's summary.

use std::path::Path;

use crate::probe::{probe, ProbeOptions};
use crate::Remote;
use shoal_report::pathreport::{changes, PathProbe};

/// One probe, or why it failed (a failed probe does not stop the sweep; it is recorded).
pub type Outcome = Result<PathProbe, String>;

/// Probes the path and says what it found (`when`: "before the first run", …).
pub fn measure(remote: &Remote, when: &str) -> Outcome {
    println!("probing the path to {} {when}…", remote.addr());
    match probe(remote, &ProbeOptions::default()) {
        Ok(p) => {
            print!("{}", p.text());
            Ok(p)
        }
        Err(e) => {
            let msg = format!("{e:#}");
            eprintln!("shoal sweep: path probe {when} failed: {msg}");
            Err(msg)
        }
    }
}

/// meta.json's `path_probe`: both probes (or their errors) and what changed between them.
pub fn to_meta(start: &Outcome, end: &Outcome) -> serde_json::Value {
    let side = |o: &Outcome| match o {
        Ok(p) => serde_json::to_value(p).unwrap_or_default(),
        Err(e) => serde_json::json!({ "error": e }),
    };
    let changed = match (start, end) {
        (Ok(s), Ok(e)) => changes(s, e),
        _ => Vec::new(),
    };
    serde_json::json!({
        "method": "shoal probe through the receiver's control channel: idle RTT = control round trips on one TLS connection; a bulk TLS/TCP flow each way (goodput = bytes the sending end saw acknowledged after the warm-up, over that interval; loss_fraction = retransmitted / sent segments after the warm-up in the sending end's TCP_INFO, the warm-up's apart); RTT under load = control round trips on a second connection during each flow",
        "start": side(start),
        "end": side(end),
        "changed": changed,
        "tolerance": { "idle_rtt": shoal_report::pathreport::RTT_TOLERANCE, "goodput": shoal_report::pathreport::GOODPUT_TOLERANCE },
    })
}

/// The summary's lines about the path, from a sweep folder's meta.json (none when it has no
/// `path_probe`): both probes' figures, and a warning per figure that moved past its
/// tolerance.
pub fn summary_lines(out: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read(out.join("meta.json")) else {
        return Vec::new();
    };
    let Ok(meta) = serde_json::from_slice::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    let p = &meta["path_probe"];
    if p.is_null() {
        return Vec::new();
    }
    let mut lines = Vec::new();
    for when in ["start", "end"] {
        let side = &p[when];
        if let Some(e) = side["error"].as_str() {
            lines.push(format!("path at the {when}: not measured ({e})"));
            continue;
        }
        let f = |d: &str, k: &str| side[d][k].as_f64().unwrap_or(f64::NAN);
        // Folders written before the units were named keep `goodput_mbps` and `loss`.
        let mbit = |d: &str| match side[d]["goodput_bit_s"].as_f64() {
            Some(b) => b / 1e6,
            None => f(d, "goodput_mbps"),
        };
        let loss = |d: &str| match side[d]["loss_fraction"].as_f64() {
            Some(l) => l,
            None => f(d, "loss"),
        };
        lines.push(format!(
            "path at the {when}: idle RTT {:.2} ms, goodput {:.1} Mbit/s to the receiver and {:.1} Mbit/s back, loss {:.3}% / {:.3}%",
            side["idle_rtt"]["min_ms"].as_f64().unwrap_or(f64::NAN),
            mbit("up"),
            mbit("down"),
            loss("up") * 100.0,
            loss("down") * 100.0,
        ));
    }
    for c in p["changed"].as_array().into_iter().flatten() {
        if let Some(c) = c.as_str() {
            lines.push(format!(
                "warning: the path changed during the sweep: {c} (meta.json → path_probe)"
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_both_probes_and_warns_of_a_changed_path() {
        let mut a = PathProbe::default();
        a.idle_rtt.min_ms = 40.0;
        a.up.goodput_bit_s = 100e6;
        a.down.goodput_bit_s = 100e6;
        let mut b = a.clone();
        b.idle_rtt.min_ms = 50.0;
        let dir = tempfile::tempdir().unwrap();
        let meta = serde_json::json!({ "path_probe": to_meta(&Ok(a.clone()), &Ok(b)) });
        std::fs::write(dir.path().join("meta.json"), meta.to_string()).unwrap();
        let lines = summary_lines(dir.path());
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].starts_with("path at the start: idle RTT 40.00 ms, goodput 100.0"));
        assert!(lines[2].starts_with("warning: the path changed during the sweep: idle RTT"));

        let meta = serde_json::json!({ "path_probe": to_meta(&Ok(a), &Err("refused".into())) });
        std::fs::write(dir.path().join("meta.json"), meta.to_string()).unwrap();
        let lines = summary_lines(dir.path());
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[1], "path at the end: not measured (refused)");
        // No probe (a local sweep, or probe = false): nothing said.
        std::fs::write(dir.path().join("meta.json"), "{}").unwrap();
        assert!(summary_lines(dir.path()).is_empty());
    }
}
