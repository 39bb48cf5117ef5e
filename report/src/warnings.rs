//! Every warning about a sweep, from its folder: the link check, saturated and loaded arms,
//! spread and outliers, failures, controllers that differ between TCP and QUIC, the receiving
//! host's clock and a path that changed. The terminal summary and report.html show the same.

use std::collections::BTreeMap;
use std::path::Path;

use crate::facts::SweepFacts;
use crate::report::Report;

/// One warning; an alarm is one that puts the figures themselves in doubt.
#[derive(Clone, Debug, PartialEq)]
pub struct Warning {
    pub alarm: bool,
    pub text: String,
}

fn warn(alarm: bool, text: String) -> Warning {
    Warning { alarm, text }
}

/// A medians.csv read as rows of column → cell.
pub fn read_medians(dir: &Path) -> Vec<BTreeMap<String, String>> {
    let Ok(mut r) = csv::Reader::from_path(dir.join("medians.csv")) else {
        return Vec::new();
    };
    let Ok(h) = r.headers().cloned() else {
        return Vec::new();
    };
    r.records()
        .filter_map(|rec| rec.ok())
        .map(|rec| {
            h.iter()
                .zip(rec.iter())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// The link check's failing rows (`metric: measured (expected …, tolerance …)`), or `None`
/// when it passed, did not run or is not recorded.
pub fn failed_check_rows(meta: &serde_json::Value) -> Option<Vec<String>> {
    let c = &meta["link_check"];
    if c["pass"] != false {
        return None;
    }
    Some(
        c["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["verdict"] == "fail")
            .map(|r| {
                let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
                format!(
                    "{}: measured {} (expected {}, tolerance {})",
                    s("metric"),
                    s("measured"),
                    s("expected"),
                    s("tolerance")
                )
            })
            .collect(),
    )
}

fn link_check(meta: &serde_json::Value, out: &mut Vec<Warning>) {
    let c = &meta["link_check"];
    if let Some(rows) = failed_check_rows(meta) {
        let accepted = meta["link_check_accepted"] == true;
        out.push(warn(
            true,
            format!(
                "link check FAILED{}: {}",
                if accepted {
                    " and the sweep went on (--accept-failed-check): the runs did not have the \
                     link the matrix asked for"
                } else {
                    ""
                },
                if rows.is_empty() {
                    "see meta.json → link_check".to_string()
                } else {
                    rows.join("; ")
                }
            ),
        ));
    } else if let Some(e) = c["error"].as_str() {
        out.push(warn(true, format!("link check could not run: {e}")));
    } else if let Some(s) = c.as_str() {
        out.push(warn(false, format!("link check {s}")));
    }
}

/// The controllers in effect among a payload's Shoal arms when no `cc` axis names them and
/// they differ (the host's BBR for TCP against quinn's CUBIC for QUIC): `(payload, ccs)`.
pub fn mixed_controllers(rep: &Report) -> Vec<(String, Vec<String>)> {
    let mut by_payload: Vec<(String, Vec<String>)> = Vec::new();
    for c in rep.configs.iter().filter(|c| c.kind == "shoal") {
        let has_axis = c
            .params
            .iter()
            .any(|(k, v)| k == "param_cc" && !v.is_empty());
        if has_axis || c.cc.is_empty() {
            continue;
        }
        let i = match by_payload.iter().position(|(p, _)| *p == c.payload) {
            Some(i) => i,
            None => {
                by_payload.push((c.payload.clone(), Vec::new()));
                by_payload.len() - 1
            }
        };
        for cc in c.cc.split('/') {
            if !by_payload[i].1.iter().any(|x| x == cc) {
                by_payload[i].1.push(cc.to_string());
            }
        }
    }
    by_payload.retain(|(_, ccs)| {
        let mut base: Vec<&str> = ccs.iter().map(|c| c.trim_start_matches("quinn-")).collect();
        base.sort();
        base.dedup();
        base.len() > 1
    });
    by_payload
}

/// The sentence the dry run and the summary print for [`mixed_controllers`].
pub use shoal_matrix::preflight::mixed_controllers_text;

/// Every warning about the sweep in `dir` (runs.csv gave `rep`; medians.csv is written).
pub fn sweep_warnings(dir: &Path, rep: &Report, facts: &SweepFacts) -> Vec<Warning> {
    let meta = &facts.meta;
    let mut out = Vec::new();
    link_check(meta, &mut out);
    let medians = read_medians(dir);
    let cell = |r: &BTreeMap<String, String>, k: &str| r.get(k).cloned().unwrap_or_default();
    let name = |r: &BTreeMap<String, String>| {
        let short: Vec<&str> = r
            .get("config")
            .map_or("", |s| s)
            .split(' ')
            .filter(|p| !p.starts_with("payload=") && *p != "kind=shoal")
            .collect();
        format!("{} [{}]", short.join(" "), cell(r, "payload"))
    };
    let mut loaded: Vec<String> = Vec::new();
    let mut saturated: Vec<String> = Vec::new();
    let mut two_runs: Vec<String> = Vec::new();
    for r in &medians {
        if cell(r, "host_saturated") == "true" {
            saturated.push(name(r));
        }
        if let (Some(cpus), Ok(load)) = (facts.cpus, cell(r, "max_load_1m_start").parse::<f64>()) {
            if load > cpus {
                loaded.push(format!("{} (up to {load:.2})", name(r)));
            }
        }
        let failed: usize = cell(r, "runs_failed").parse().unwrap_or(0);
        if failed > 0 {
            out.push(warn(
                false,
                format!(
                    "{}: {failed} of {} runs failed ({} timed out): {}",
                    name(r),
                    cell(r, "runs"),
                    cell(r, "runs_timed_out"),
                    cell(r, "failures")
                ),
            ));
        }
        if cell(r, "runs_ok") == "2" {
            two_runs.push(name(r));
        }
    }
    if !saturated.is_empty() {
        out.push(warn(
            true,
            format!(
                "SATURATED machine — every core was busy in at least half of the median run's \
                 100 ms samples, so these speeds may be CPU-bound: {}",
                saturated.join(", ")
            ),
        ));
    }
    if !loaded.is_empty() {
        out.push(warn(
            true,
            format!(
                "1-minute load above the {} cores at a run's start, so other work competed for \
                 the CPU (--quiet-wait waits for a quiet machine): {}",
                facts.cpus.unwrap_or(0.0),
                loaded.join(", ")
            ),
        ));
    }
    if !two_runs.is_empty() {
        out.push(warn(
            false,
            format!(
                "two verified runs: the median is the mean of the two, a speed no run had: {}",
                two_runs.join(", ")
            ),
        ));
    }
    if let Ok(ws) = crate::report::spread_warnings(&dir.join("medians.csv")) {
        out.extend(ws.into_iter().map(|w| warn(false, w)));
    }
    for (p, ccs) in mixed_controllers(rep) {
        out.push(warn(false, mixed_controllers_text(&p, &ccs)));
    }
    let clock = &meta["clock_offset"];
    if let Some(s) = clock["start"]["offset_ms"].as_f64() {
        let end = clock["end"]["offset_ms"].as_f64();
        let drift = end.map(|e| e - s);
        out.push(warn(
            drift.is_some_and(|d| d.abs() > 1.0),
            format!(
                "receiving host's clock: {s:+.3} ms from the sender's at the start{}; per-file \
                 latency is corrected by the start's offset",
                match (end, drift) {
                    (Some(e), Some(d)) => format!(", {e:+.3} ms at the end (drift {d:+.3} ms)"),
                    _ => String::new(),
                }
            ),
        ));
    }
    for c in meta["path_probe"]["changed"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(t) = c.as_str() {
            out.push(warn(
                true,
                format!("path between the first and last run: {t}"),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_check_names_its_failing_rows() {
        let meta = serde_json::json!({"link_check": {"pass": false, "rows": [
            {"metric": "idle RTT (median)", "measured": "102.07 ms", "expected": "50 ms",
             "tolerance": "±1 ms", "verdict": "fail"},
            {"metric": "x", "measured": "1", "expected": "1", "tolerance": "", "verdict": "pass"}
        ]}, "link_check_accepted": true});
        let rows = failed_check_rows(&meta).unwrap();
        assert_eq!(
            rows,
            ["idle RTT (median): measured 102.07 ms (expected 50 ms, tolerance ±1 ms)"]
        );
        let mut w = Vec::new();
        link_check(&meta, &mut w);
        assert!(w[0].alarm && w[0].text.contains("--accept-failed-check"));
        assert!(failed_check_rows(&serde_json::json!({"link_check": {"pass": true}})).is_none());
    }

    #[test]
    fn tcp_and_quic_under_different_controllers_are_named() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("runs.csv");
        std::fs::write(
            &p,
            "config_id,config,kind,payload,param_mode,cc,status,seconds,mb_per_s\n\
             c01,a,shoal,p,tcp-bundle,bbr,ok,1,10\n\
             c02,b,shoal,p,quic-bundle,quinn-cubic,ok,1,10\n",
        )
        .unwrap();
        let rep = crate::report::load(&p, None).unwrap();
        assert_eq!(
            mixed_controllers(&rep),
            [(
                "p".to_string(),
                vec!["bbr".to_string(), "quinn-cubic".to_string()]
            )]
        );
        // CUBIC on both sides is one controller.
        std::fs::write(
            &p,
            "config_id,config,kind,payload,param_mode,cc,status,seconds,mb_per_s\n\
             c01,a,shoal,p,tcp-bundle,cubic,ok,1,10\n\
             c02,b,shoal,p,quic-bundle,quinn-cubic,ok,1,10\n",
        )
        .unwrap();
        let rep = crate::report::load(&p, None).unwrap();
        assert!(mixed_controllers(&rep).is_empty());
    }
}
