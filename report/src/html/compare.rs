//! The comparison of two sweeps as one self-contained page: the answer (per payload, how B's
//! speeds stand against A's), what differs between the sweeps, the comparison table, both
//! sweeps' charts, their warnings and provenance.

use std::path::Path;

use anyhow::{Context, Result};

use super::page::Page;
use super::sweep;
use crate::compare::{CompareResult, Comparison, Sweeps};

fn row_text(c: &Comparison) -> String {
    let short = c
        .config
        .trim_start_matches(&format!("payload={} ", c.payload))
        .replace("kind=shoal ", "");
    match (c.ratio, c.ratio_ci, c.coverage) {
        (Some(r), Some(ci), Some(cov)) => format!(
            "{short}: B/A {r:.3} (interval {:.3}–{:.3}, coverage {}{})",
            ci.0,
            ci.1,
            cov.text(),
            c.rank_test
                .map(|t| format!(
                    "; rank test p {:.3}, the smallest {}+{} runs can give {:.3}",
                    t.p, c.runs_a, c.runs_b, c.smallest_p
                ))
                .unwrap_or_default()
        ),
        _ => format!("{short}: no ratio (a side has no verified run)"),
    }
}

/// One sentence per payload: the range of B / A and the configuration that moved most.
pub fn answer(result: &CompareResult) -> Vec<String> {
    let mut payloads: Vec<&str> = Vec::new();
    for c in &result.rows {
        if !payloads.contains(&c.payload.as_str()) {
            payloads.push(&c.payload);
        }
    }
    payloads
        .into_iter()
        .map(|p| {
            let rows: Vec<&Comparison> = result
                .rows
                .iter()
                .filter(|c| c.payload == p && c.ratio.is_some())
                .collect();
            let ratios: Vec<f64> = rows.iter().filter_map(|c| c.ratio).collect();
            let (Some(lo), Some(hi)) = (
                ratios.iter().copied().reduce(f64::min),
                ratios.iter().copied().reduce(f64::max),
            ) else {
                return format!("Payload {p}: no configuration has verified runs in both.");
            };
            let most = rows
                .iter()
                .max_by(|a, b| {
                    let d = |c: &&&Comparison| c.ratio.map_or(0.0, |r| r.ln().abs());
                    d(a).total_cmp(&d(b))
                })
                .map(|c| row_text(c))
                .unwrap_or_default();
            format!(
                "Payload {p}: B's median speed is {lo:.3}–{hi:.3} × A's over {} configuration(s); \
                 the largest change: {most}.",
                rows.len()
            )
        })
        .collect()
}

/// Writes the comparison page to `path`.
pub fn write_compare(
    path: &Path,
    sweeps: &Sweeps,
    result: &CompareResult,
    dir_a: &Path,
    dir_b: &Path,
) -> Result<()> {
    let (name_a, name_b) = (dir_a.display().to_string(), dir_b.display().to_string());
    let mut page = Page::default();
    page.heading(1, "Comparison of two sweeps", "top");
    page.list("names", &[format!("A = {name_a}"), format!("B = {name_b}")]);
    page.heading(2, "The answer", "answer");
    page.list("answer", &answer(result));
    page.heading(2, "What differs between A and B", "differences");
    let mut diffs: Vec<String> = result
        .differences
        .iter()
        .map(|d| {
            if d.what == "link" {
                format!("!{} (compared with --force)", d.text())
            } else {
                d.text()
            }
        })
        .collect();
    let same = crate::facts::same(&result.differences);
    if !same.is_empty() {
        diffs.push(format!("same in A and B: {}", same.join(", ")));
    }
    page.list("warn", &diffs);
    page.heading(2, "Configurations both sweeps ran", "medians");
    let rows: Vec<Vec<String>> = result.rows.iter().map(crate::compare::cells).collect();
    page.table(
        "medians-table",
        &[
            "configuration",
            "payload",
            "A MB/s (verified runs)",
            "B MB/s (verified runs)",
            "B / A",
            "interval (coverage)",
            "rank test p (smallest possible)",
        ],
        &rows,
    );
    let mut only: Vec<String> = Vec::new();
    for (p, c) in &result.only_a {
        only.push(format!("only in A: {c} [{p}]"));
    }
    for (p, c) in &result.only_b {
        only.push(format!("only in B: {c} [{p}]"));
    }
    if !only.is_empty() {
        page.list("only", &only);
    }
    page.para(
        "B / A: ratio of median MB/s over verified runs. Interval: percentile bootstrap, 95% \
         nominal; with so few runs that it can only return the runs' extremes (3 against 3), \
         the coverage shown is what it guarantees. p: two-sided Mann–Whitney U; in brackets the \
         smallest p these run counts can give.",
        "note",
    );
    page.heading(2, "Charts", "charts");
    for (which, rep) in [("A", &sweeps.a), ("B", &sweeps.b)] {
        if rep.configs.is_empty() {
            continue;
        }
        let svg = crate::chart::throughput_svg(rep, Default::default())?;
        page.svg(
            &format!("chart-throughput-{which}"),
            &format!("Sweep {which}: median and runs per configuration."),
            &svg,
        );
    }
    for (which, dir, rep, facts) in [
        ("A", dir_a, &sweeps.a, &sweeps.facts_a),
        ("B", dir_b, &sweeps.b, &sweeps.facts_b),
    ] {
        let ws = crate::warnings::sweep_warnings(dir, rep, facts);
        page.heading(
            2,
            &format!("Warnings of {which}"),
            &format!("warnings-{which}"),
        );
        sweep::warnings_section_body(&mut page, &ws);
    }
    sweep::provenance_section(
        &mut page,
        &sweeps.facts_a,
        "Provenance of A",
        "provenance-a",
    );
    sweep::provenance_section(
        &mut page,
        &sweeps.facts_b,
        "Provenance of B",
        "provenance-b",
    );
    std::fs::write(path, page.finish("Shoal: comparison of two sweeps"))
        .with_context(|| format!("cannot write {}", path.display()))
}
