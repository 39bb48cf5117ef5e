//! docs/results.md's (and docs/resume-results.md's) generated regions (`<!-- generated: KIND
//! PATH -->` … `<!-- end -->`) and inline values (`<!--= EXPR -->` … `<!--/-->`) are exactly what
//! `scripts/study-tables.py` makes of the committed runs.csv files they name, docs/benchmarks.md's
//! are what `scripts/bench-tables.py` makes of the committed logs they name, and every chart
//! docs/results.md shows is what `shoal report` draws from its committed folder: every number
//! and figure comes from the data. No root needed.

use crate::support;

use std::process::Command;

use support::{shoal, workspace_root};

fn check(page: &std::path::Path) -> std::process::Output {
    let root = workspace_root();
    Command::new("python3")
        .arg(root.join("scripts/study-tables.py"))
        .arg("--page")
        .arg(page)
        .arg("--check")
        .current_dir(&root)
        .output()
        .expect("python3 (scripts/setup.sh installs it)")
}

#[test]
fn results_pages_are_generated_from_committed_runs() {
    for name in ["docs/results.md", "docs/resume-results.md"] {
        let page = workspace_root().join(name);
        let text = std::fs::read_to_string(&page).unwrap();
        assert!(
            text.matches("<!-- generated: ").count() >= 2,
            "{name} has no generated regions"
        );
        let o = check(&page);
        assert!(
            o.status.success(),
            "{name} differs from its data; run scripts/study-tables.py --page {name}\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn benchmarks_page_is_generated_from_committed_logs() {
    let root = workspace_root();
    let o = Command::new("python3")
        .arg(root.join("scripts/bench-tables.py"))
        .args(["--page", "docs/benchmarks.md", "--check"])
        .current_dir(&root)
        .output()
        .expect("python3 (scripts/setup.sh installs it)");
    assert!(
        o.status.success(),
        "docs/benchmarks.md differs from its data; run scripts/bench-tables.py --page docs/benchmarks.md\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The charts docs/results.md shows (`](../results/DIR/CHART.svg)`), as (DIR, CHART) with
/// CHART without its extension.
fn charts_shown(text: &str) -> Vec<(String, String)> {
    let mut charts: Vec<(String, String)> = text
        .match_indices("](../results/")
        .filter_map(|(i, m)| {
            let rest = &text[i + m.len()..];
            let link = &rest[..rest.find(')')?];
            let (dir, file) = link.rsplit_once('/')?;
            let chart = file.strip_suffix(".svg")?;
            Some((dir.to_string(), chart.to_string()))
        })
        .collect();
    charts.sort();
    charts.dedup();
    charts
}

#[test]
fn results_page_charts_are_what_shoal_report_draws() {
    let root = workspace_root();
    let text = std::fs::read_to_string(root.join("docs/results.md")).unwrap();
    let charts = charts_shown(&text);
    assert!(!charts.is_empty(), "docs/results.md shows no charts");
    let mut dirs: Vec<&String> = charts.iter().map(|(dir, _)| dir).collect();
    dirs.dedup();
    for dir in dirs {
        let committed = root.join("results").join(dir);
        let t = tempfile::tempdir().unwrap();
        let copy = t.path().join(dir);
        std::fs::create_dir_all(&copy).unwrap();
        // What `shoal report` reads: the rows, the run traces and the sweep's description.
        for entry in ["runs.csv", "meta.json", "matrix.toml", "traces"] {
            let from = committed.join(entry);
            if from.exists() {
                let st = Command::new("cp")
                    .arg("-r")
                    .arg(&from)
                    .arg(copy.join(entry))
                    .status()
                    .unwrap();
                assert!(st.success(), "copying {}", from.display());
            }
        }
        // Traces are committed compressed (`.csv.gz`).
        if copy.join("traces").exists() {
            let st = Command::new("gunzip")
                .args(["-r", "-q"])
                .arg(copy.join("traces"))
                .status()
                .unwrap();
            assert!(st.success(), "gunzip {}", copy.display());
        }
        let o = shoal().arg("report").arg(&copy).output().unwrap();
        assert!(
            o.status.success(),
            "shoal report {dir}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        // Every chart the page shows from this folder must be committed and be what `shoal
        // report` draws now.
        for (_, chart) in charts.iter().filter(|(d, _)| d == dir) {
            let svg = format!("{chart}.svg");
            let want = std::fs::read(committed.join(&svg))
                .unwrap_or_else(|e| panic!("results/{dir}/{svg}: {e}"));
            assert!(
                std::fs::read(copy.join(&svg)).unwrap() == want,
                "results/{dir}/{svg} is not what `shoal report results/{dir}` draws from its runs.csv and traces"
            );
        }
    }
}

#[test]
fn a_changed_number_in_a_generated_region_is_caught() {
    let text = std::fs::read_to_string(workspace_root().join("docs/results.md")).unwrap();
    let t = tempfile::tempdir().unwrap();
    let page = t.path().join("results.md");
    // The first table row inside the first generated region, its verified-run count changed.
    let start = text.find("<!-- generated: ").unwrap();
    let row = start + text[start..].find("| 5/5 |").unwrap();
    let edited = format!("{}| 4/5 |{}", &text[..row], &text[row + "| 5/5 |".len()..]);
    std::fs::write(&page, edited).unwrap();
    let o = check(&page);
    assert!(!o.status.success(), "an edited table passed the check");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("-") && out.contains("| 4/5 |"), "{out}");
}

#[test]
fn a_changed_number_in_a_sentence_is_caught() {
    let text = std::fs::read_to_string(workspace_root().join("docs/results.md")).unwrap();
    let t = tempfile::tempdir().unwrap();
    let page = t.path().join("results.md");
    // The first inline value (`<!--= EXPR -->VALUE<!--/-->`, all on one line), its VALUE
    // replaced.
    let (value, end) = text
        .match_indices("<!--= ")
        .find_map(|(start, _)| {
            let line = &text[start..start + text[start..].find('\n').unwrap_or(text.len() - start)];
            let value = start + line.find(" -->")? + " -->".len();
            let end = start + line.find("<!--/-->")?;
            (end >= value).then_some((value, end))
        })
        .expect("docs/results.md has no inline values");
    let edited = format!("{}123456.78{}", &text[..value], &text[end..]);
    std::fs::write(&page, edited).unwrap();
    let o = check(&page);
    assert!(
        !o.status.success(),
        "an edited inline value passed the check"
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("123456.78"));
}

/// `scripts/check/check-memory.py --quinn` checks a sweep's quic-bundle rows against the same
/// ceilings as docs/benchmarks.md's memory-vs-quinn table (issue 42: quinn's own ends + 6 MB,
/// 32 MB for a slow writer's receiver at one connection), so both count the same rows over.
#[test]
fn memory_check_against_quinn_counts_the_rows_the_page_counts() {
    let root = workspace_root();
    let o = Command::new("python3")
        .arg(root.join("scripts/check/check-memory.py"))
        .args([
            "--quinn",
            "results/bench-quic-link-memory/quic-link-memory-bc24114.log",
            "--quinn",
            "results/bench-quic-link-memory/quic-link-memory-bc24114-c8.log",
            "results/memory-link/quic-bundle-bc24114/runs.csv",
        ])
        .current_dir(&root)
        .output()
        .expect("python3 (scripts/setup.sh installs it)");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("16 rows checked, 9 over their ceiling"),
        "{out}"
    );
    let page = std::fs::read_to_string(root.join("docs/benchmarks.md")).unwrap();
    let region = page
        .split("<!-- generated: memory-vs-quinn results/memory-link/quic-bundle-bc24114/")
        .nth(1)
        .expect("the bc24114 memory-vs-quinn table");
    assert!(region.contains("9 of 16 rows over a ceiling"), "{region}");
}
