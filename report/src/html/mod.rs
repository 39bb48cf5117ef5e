//! `report.html`: a sweep's report in one self-contained page — the answer first (the fastest
//! arm per payload and its ratios with intervals), then the medians, the charts (inline SVG),
//! the warnings, the link check's figures and the provenance — readable offline: nothing in
//! it names a file or address outside itself. `shoal compare A B --html FILE` writes the same
//! for a comparison (`compare`). Every text taken from a file is escaped (`page::esc`).

mod compare;
pub mod page;
pub mod sweep;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::report::Report;
use page::Page;

pub use compare::write_compare;

/// What each chart shows, by its file's stem.
fn caption(stem: &str) -> &'static str {
    match stem {
        "throughput" | "throughput-mbit" => {
            "Speed per configuration: bars at the median of the verified runs, a dot per \
             verified run, a red cross per failed run at its partial rate (an upper bound), the \
             dashed line the link's TCP goodput ceiling."
        }
        "latency-cdf" => {
            "Per-file latency (first byte sent to file ready) of each Shoal configuration's \
             median run."
        }
        "timeseries" => {
            "The median runs over time: congestion window, smoothed RTT and goodput, with the \
             link's rate."
        }
        _ => "",
    }
}

/// Writes `dir/report.html` for the sweep whose runs.csv gave `rep`, inlining the SVG charts
/// among `files` (just drawn from the same runs.csv); returns its path.
pub fn write_sweep(dir: &Path, rep: &Report, files: &[PathBuf]) -> Result<PathBuf> {
    let facts = crate::facts::facts(dir, rep);
    let medians = crate::warnings::read_medians(dir);
    let warnings = crate::warnings::sweep_warnings(dir, rep, &facts);
    let mut page = Page::default();
    let name = facts.meta["sweep_id"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| dir.display().to_string());
    page.heading(1, &format!("Sweep {name}"), "top");
    if !facts.link.is_empty() {
        page.para(&facts.link, "note");
    }
    page.heading(2, "The answer", "answer");
    page.list("answer", &sweep::answer(rep));
    if warnings.iter().any(|w| w.alarm) {
        page.para(
            "Read the warnings below before these figures: at least one puts them in doubt.",
            "bad",
        );
    }
    sweep::medians_section(&mut page, &medians);
    page.heading(2, "Charts", "charts");
    for f in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "svg"))
    {
        let svg =
            std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
        let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or("chart");
        page.svg(&format!("chart-{stem}"), caption(stem), &svg);
    }
    sweep::warnings_section(&mut page, &warnings);
    sweep::link_check_section(&mut page, &facts.meta);
    sweep::provenance_section(&mut page, &facts, "Provenance", "provenance");
    let path = dir.join("report.html");
    std::fs::write(&path, page.finish(&format!("Shoal sweep {name}")))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}
