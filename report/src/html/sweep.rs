//! report.html of one sweep: the answer, the medians, the charts, the warnings, the link
//! check's figures and the provenance, in that order.

use std::collections::BTreeMap;

use super::page::Page;
use crate::facts::SweepFacts;
use crate::report::{ConfigSummary, Report};
use crate::spread;
use crate::warnings::Warning;

/// A configuration's label without what the panel or sentence already says.
pub fn label(c: &ConfigSummary) -> String {
    let s = c
        .config
        .trim_start_matches(&format!("payload={} ", c.payload))
        .replace("kind=shoal ", "")
        .replace(" kind=shoal", "");
    // The controller in effect, where the label does not name one.
    if !s.contains("cc=") && !c.cc.is_empty() {
        format!("{s} (cc {})", c.cc)
    } else {
        s
    }
}

fn ok_seconds(c: &ConfigSummary) -> Vec<f64> {
    c.runs.iter().filter(|r| r.ok).map(|r| r.seconds).collect()
}

fn ok_mb(c: &ConfigSummary) -> Vec<f64> {
    c.runs.iter().filter(|r| r.ok).map(|r| r.mb_per_s).collect()
}

/// `other`'s median seconds / `fast`'s, with its interval and coverage: "2.41× as fast as X
/// (interval 2.30–2.52, coverage ≥ 56%)".
fn ratio_text(fast: &ConfigSummary, other: &ConfigSummary, name: &str) -> String {
    let (f, o) = (ok_seconds(fast), ok_seconds(other));
    match (spread::median(&o), spread::median(&f)) {
        (Some(so), Some(sf)) if sf > 0.0 => {
            let ci = spread::ratio_of_medians_interval(&o, &f);
            format!(
                "{:.2}× as fast as {name}{}",
                so / sf,
                ci.map(|ci| format!(
                    " (interval {:.2}–{:.2}, coverage {})",
                    ci.0,
                    ci.1,
                    spread::ratio_interval_coverage(&o, &f, ci).text()
                ))
                .unwrap_or_default()
            )
        }
        _ => format!("{name}: no verified run to compare with"),
    }
}

fn payload_text(c: &ConfigSummary) -> String {
    let bytes: f64 = c.payload_bytes.parse().unwrap_or(0.0);
    format!(
        "{} ({} file{}, {:.1} MB)",
        c.payload,
        c.payload_files,
        if c.payload_files == "1" { "" } else { "s" },
        bytes / 1e6
    )
}

/// One sentence per payload: its fastest arm, the speed, and its ratio to the reference and
/// to each baseline (ratios of median seconds, with the bootstrap interval and its coverage).
pub fn answer(rep: &Report) -> Vec<String> {
    let mut payloads: Vec<&str> = Vec::new();
    for c in &rep.configs {
        if !payloads.contains(&c.payload.as_str()) {
            payloads.push(&c.payload);
        }
    }
    payloads
        .into_iter()
        .map(|p| {
            let cs: Vec<&ConfigSummary> = rep.configs.iter().filter(|c| c.payload == p).collect();
            let Some(fast) = cs
                .iter()
                .filter(|c| c.median_mb_per_s.is_some())
                .max_by(|a, b| {
                    let m = |c: &&&ConfigSummary| c.median_mb_per_s.unwrap_or(0.0);
                    m(a).total_cmp(&m(b))
                })
            else {
                return format!(
                    "Payload {}: no configuration has a verified run.",
                    payload_text(cs[0])
                );
            };
            let m = ok_mb(fast);
            let ci = spread::median_interval(&m);
            let mut s = format!(
                "Payload {}: fastest is {} at {:.2} MB/s (median of {} verified of {} runs{})",
                payload_text(fast),
                label(fast),
                fast.median_mb_per_s.unwrap_or(0.0),
                m.len(),
                fast.runs.len(),
                ci.filter(|_| m.len() > 1)
                    .map(|i| format!(
                        ", interval {:.2}–{:.2} covering {:.0}%",
                        i.low,
                        i.high,
                        i.coverage * 100.0
                    ))
                    .unwrap_or_default()
            );
            let mut ratios = Vec::new();
            match cs.iter().find(|c| c.is_reference) {
                Some(r) if r.id == fast.id => ratios.push("it is the reference".to_string()),
                Some(r) => ratios.push(ratio_text(fast, r, &format!("the reference {}", label(r)))),
                None => {}
            }
            for b in cs.iter().filter(|c| c.kind != "shoal" && c.id != fast.id) {
                ratios.push(ratio_text(fast, b, &b.kind));
            }
            if !ratios.is_empty() {
                s.push_str(": ");
                s.push_str(&ratios.join("; "));
            }
            s.push('.');
            s
        })
        .collect()
}

const MEDIANS_HEADER: [&str; 12] = [
    "configuration",
    "payload",
    "cc in effect",
    "ok / runs",
    "failed (timed out)",
    "median MB/s",
    "interval (coverage)",
    "min – max MB/s",
    "median s",
    "× reference (interval)",
    "load at start",
    "failures",
];

/// The medians table's rows, from medians.csv.
pub fn medians_rows(medians: &[BTreeMap<String, String>]) -> Vec<Vec<String>> {
    medians
        .iter()
        .map(|r| {
            let g = |k: &str| r.get(k).cloned().unwrap_or_default();
            let range = |lo: &str, hi: &str| {
                let (l, h) = (g(lo), g(hi));
                if l.is_empty() {
                    String::new()
                } else {
                    format!("{l} – {h}")
                }
            };
            let coverage = g("median_ci_coverage")
                .parse::<f64>()
                .map(|c| format!(" ({:.0}%)", c * 100.0))
                .unwrap_or_default();
            let ci = range("median_mb_per_s_ci_low", "median_mb_per_s_ci_high");
            let speedup = g("speedup_vs_reference");
            let sci = range("speedup_ci_low", "speedup_ci_high");
            vec![
                g("config")
                    .split(' ')
                    .filter(|p| !p.starts_with("payload=") && *p != "kind=shoal")
                    .collect::<Vec<_>>()
                    .join(" "),
                g("payload"),
                g("cc"),
                format!("{} / {}", g("runs_ok"), g("runs")),
                format!("{} ({})", g("runs_failed"), g("runs_timed_out")),
                g("median_mb_per_s"),
                if ci.is_empty() {
                    ci
                } else {
                    format!("{ci}{coverage}")
                },
                range("min_mb_per_s", "max_mb_per_s"),
                g("median_seconds"),
                if sci.is_empty() {
                    speedup
                } else {
                    format!("{speedup} ({sci})")
                },
                range("min_load_1m_start", "max_load_1m_start"),
                g("failures"),
            ]
        })
        .collect()
}

/// The medians section.
pub fn medians_section(page: &mut Page, medians: &[BTreeMap<String, String>]) {
    page.heading(2, "Medians of the verified runs", "medians");
    page.table("medians-table", &MEDIANS_HEADER, &medians_rows(medians));
    page.para(
        "MB = 10^6 bytes of file content. Interval: order statistics around the median, with \
         the probability it covers the true median (3 runs: 75%). × reference: the reference's \
         median seconds / this configuration's, with its bootstrap interval (95% nominal; with \
         3 runs or fewer a side it can only return the runs' extremes and covers less, as the \
         answer says). Failed runs count in runs, not in the medians.",
        "note",
    );
}

/// The warnings section ("none" when there are none).
pub fn warnings_section(page: &mut Page, ws: &[Warning]) {
    page.heading(2, "Warnings", "warnings");
    warnings_section_body(page, ws);
}

/// The warnings as a list, alarms marked.
pub fn warnings_section_body(page: &mut Page, ws: &[Warning]) {
    if ws.is_empty() {
        page.para("None.", "");
        return;
    }
    let items: Vec<String> = ws
        .iter()
        .map(|w| {
            if w.alarm {
                format!("!{}", w.text)
            } else {
                w.text.clone()
            }
        })
        .collect();
    page.list("warn", &items);
}

fn cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        serde_json::Value::Array(a) => a.iter().map(cell).collect::<Vec<_>>().join("; "),
        other => other.to_string(),
    }
}

/// The link check's figures (meta.json → link_check), when it ran.
pub fn link_check_section(page: &mut Page, meta: &serde_json::Value) {
    let c = &meta["link_check"];
    let Some(rows) = c["rows"].as_array() else {
        return;
    };
    page.heading(
        2,
        &format!(
            "Link check: {}",
            if c["pass"] == true { "pass" } else { "FAIL" }
        ),
        "link-check",
    );
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            ["metric", "expected", "measured", "tolerance", "verdict"]
                .iter()
                .map(|k| cell(&r[*k]))
                .collect()
        })
        .collect();
    page.table(
        "link-check-table",
        &["metric", "expected", "measured", "tolerance", "verdict"],
        &rows,
    );
}

/// Where the figures come from: the build, the sweep's settings, each end's host facts.
pub fn provenance_section(page: &mut Page, facts: &SweepFacts, title: &str, id: &str) {
    let m = &facts.meta;
    page.heading(2, title, id);
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut put = |k: &str, v: String| {
        if !v.is_empty() {
            rows.push(vec![k.to_string(), v]);
        }
    };
    put("shoal", cell(&m["shoal"]["version"]));
    put("binary", cell(&m["shoal"]["binary"]));
    put("binary SHA-256", cell(&m["shoal"]["sha256"]));
    put("commit", facts.commit.clone());
    put("sweep", cell(&m["sweep_id"]));
    put("started", cell(&m["started"]));
    put("matrix", cell(&m["matrix"]));
    put("order seed", cell(&m["order_seed"]));
    put("runs per configuration", facts.runs_per_config.clone());
    put("link", facts.link.clone());
    put("kernel", facts.kernel.clone());
    put("host", cell(&m["host"]));
    put("cores", cell(&m["cpus"]));
    if let Some(t) = m["baseline_tools"].as_object() {
        for (k, v) in t {
            put(&format!("baseline tool {k}"), cell(v));
        }
    }
    page.table(&format!("{id}-table"), &["what", "value"], &rows);
    let Some(ends) = m["ends"].as_object() else {
        return;
    };
    let names: Vec<&String> = ends.keys().collect();
    let mut keys: Vec<&String> = Vec::new();
    for e in ends.values() {
        for k in e.as_object().into_iter().flat_map(|o| o.keys()) {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    let rows: Vec<Vec<String>> = keys
        .iter()
        .map(|k| {
            std::iter::once(k.to_string())
                .chain(names.iter().map(|n| cell(&ends[*n][k.as_str()])))
                .collect()
        })
        .collect();
    let mut header = vec!["host fact"];
    header.extend(names.iter().map(|n| n.as_str()));
    page.table(&format!("{id}-ends"), &header, &rows);
}
