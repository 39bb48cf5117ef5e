//! `shoal compare DIR_A DIR_B`: the configurations two sweeps share, side by side — median
//! MB/s of each, the ratio B / A with its bootstrap interval, and a Mann–Whitney rank test of
//! the verified runs' MB/s (methods: `spread`). Configurations are matched by payload and
//! configuration label, in A's matrix order; those only one sweep has are listed, not
//! compared. What differs between the sweeps' conditions (link, build, kernel, load, matrix) is
//! named first (`facts`).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};

use crate::facts;
use crate::report::{self, ConfigSummary};
use crate::spread;

/// One configuration both sweeps ran.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub payload: String,
    pub config: String,
    pub runs_a: usize,
    pub runs_b: usize,
    pub median_a: Option<f64>,
    pub median_b: Option<f64>,
    /// median MB/s of B / median MB/s of A.
    pub ratio: Option<f64>,
    pub ratio_ci: Option<(f64, f64)>,
    /// What the ratio's interval covers (a 3-against-3 bootstrap cannot reach 95%).
    pub coverage: Option<spread::RatioCoverage>,
    pub rank_test: Option<spread::RankTest>,
    /// The smallest p the rank test can give with these run counts.
    pub smallest_p: f64,
}

pub struct CompareResult {
    pub rows: Vec<Comparison>,
    /// Configurations only in A, only in B (payload, label).
    pub only_a: Vec<(String, String)>,
    pub only_b: Vec<(String, String)>,
    /// What differs between the two sweeps' conditions.
    pub differences: Vec<facts::Difference>,
}

fn ok_mb(c: &ConfigSummary) -> Vec<f64> {
    c.runs.iter().filter(|r| r.ok).map(|r| r.mb_per_s).collect()
}

/// Both sweeps, loaded.
pub struct Sweeps {
    pub a: report::Report,
    pub b: report::Report,
    pub facts_a: facts::SweepFacts,
    pub facts_b: facts::SweepFacts,
}

pub fn load(dir_a: &Path, dir_b: &Path) -> Result<Sweeps> {
    let load = |d: &Path| -> Result<report::Report> {
        report::load(&d.join("runs.csv"), None)
            .with_context(|| format!("sweep folder {}", d.display()))
    };
    let (a, b) = (load(dir_a)?, load(dir_b)?);
    let (facts_a, facts_b) = (facts::facts(dir_a, &a), facts::facts(dir_b, &b));
    Ok(Sweeps {
        a,
        b,
        facts_a,
        facts_b,
    })
}

pub fn compare(dir_a: &Path, dir_b: &Path) -> Result<CompareResult> {
    Ok(compare_loaded(&load(dir_a, dir_b)?))
}

/// The comparison, in A's matrix order (then what only B ran, in B's).
pub fn compare_loaded(s: &Sweeps) -> CompareResult {
    let key = |c: &ConfigSummary| (c.payload.clone(), c.config.clone());
    let b: BTreeMap<(String, String), &ConfigSummary> =
        s.b.configs.iter().map(|c| (key(c), c)).collect();
    let mut rows = Vec::new();
    let mut only_a = Vec::new();
    for ca in &s.a.configs {
        let Some(cb) = b.get(&key(ca)) else {
            only_a.push(key(ca));
            continue;
        };
        let (va, vb) = (ok_mb(ca), ok_mb(cb));
        let (ma, mb) = (spread::median(&va), spread::median(&vb));
        let ratio = match (ma, mb) {
            (Some(x), Some(y)) if x > 0.0 => Some(y / x),
            _ => None,
        };
        // An interval only where there is a ratio (as medians.csv's speedup interval).
        let ratio_ci = ratio.and_then(|_| spread::ratio_of_medians_interval(&vb, &va));
        rows.push(Comparison {
            payload: ca.payload.clone(),
            config: ca.config.clone(),
            runs_a: va.len(),
            runs_b: vb.len(),
            median_a: ma,
            median_b: mb,
            ratio,
            ratio_ci,
            coverage: ratio_ci.map(|ci| spread::ratio_interval_coverage(&vb, &va, ci)),
            rank_test: spread::mann_whitney(&vb, &va),
            smallest_p: spread::smallest_rank_test_p(va.len(), vb.len()),
        });
    }
    let a_keys: Vec<(String, String)> = s.a.configs.iter().map(key).collect();
    let only_b =
        s.b.configs
            .iter()
            .map(key)
            .filter(|k| !a_keys.contains(k))
            .collect();
    CompareResult {
        rows,
        only_a,
        only_b,
        differences: facts::differences(&s.facts_a, &s.facts_b),
    }
}

fn f3(x: Option<f64>) -> String {
    x.map(|x| format!("{x:.3}")).unwrap_or_default()
}

pub const CSV_HEADER: [&str; 14] = [
    "payload",
    "config",
    "runs_ok_a",
    "runs_ok_b",
    "median_mb_per_s_a",
    "median_mb_per_s_b",
    "ratio_b_over_a",
    "ratio_ci_low",
    "ratio_ci_high",
    "ratio_ci_coverage",
    "mann_whitney_u",
    "mann_whitney_p",
    "p_method",
    "smallest_p",
];

fn record(c: &Comparison) -> Vec<String> {
    vec![
        c.payload.clone(),
        c.config.clone(),
        c.runs_a.to_string(),
        c.runs_b.to_string(),
        f3(c.median_a),
        f3(c.median_b),
        f3(c.ratio),
        f3(c.ratio_ci.map(|i| i.0)),
        f3(c.ratio_ci.map(|i| i.1)),
        c.coverage.map(|v| v.text()).unwrap_or_default(),
        c.rank_test.map(|t| format!("{}", t.u)).unwrap_or_default(),
        c.rank_test
            .map(|t| format!("{:.4}", t.p))
            .unwrap_or_default(),
        c.rank_test
            .map(|t| if t.exact { "exact" } else { "normal" }.to_string())
            .unwrap_or_default(),
        format!("{:.4}", c.smallest_p),
    ]
}

pub fn write_csv(result: &CompareResult, out: &mut dyn std::io::Write) -> Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(CSV_HEADER)?;
    for c in &result.rows {
        w.write_record(record(c))?;
    }
    w.flush()?;
    Ok(())
}

/// The comparison as a table for the terminal.
/// One configuration's cells, as the text table and the HTML page show them: configuration,
/// payload, each side's median (verified runs), B / A, its interval (coverage), rank test p
/// (the smallest the run counts allow).
pub fn cells(c: &Comparison) -> Vec<String> {
    vec![
        c.config.clone(),
        c.payload.clone(),
        format!("{} ({})", f3(c.median_a), c.runs_a),
        format!("{} ({})", f3(c.median_b), c.runs_b),
        f3(c.ratio),
        match (c.ratio_ci, c.coverage) {
            (Some((l, h)), Some(v)) => format!("{l:.3} – {h:.3} ({})", v.text()),
            _ => String::new(),
        },
        c.rank_test
            .map(|t| format!("{:.3} ({:.3})", t.p, c.smallest_p))
            .unwrap_or_default(),
    ]
}

pub fn table(result: &CompareResult, name_a: &str, name_b: &str) -> String {
    let mut t: Vec<Vec<String>> = vec![vec![
        "configuration".into(),
        "payload".into(),
        format!("A MB/s (n)"),
        format!("B MB/s (n)"),
        "B / A".into(),
        "interval (coverage)".into(),
        "rank test p (smallest possible)".into(),
    ]];
    t.extend(result.rows.iter().map(cells));
    let widths: Vec<usize> = (0..t[0].len())
        .map(|i| t.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = format!("A = {name_a}\nB = {name_b}\n");
    for d in &result.differences {
        out.push_str(&d.text());
        out.push('\n');
    }
    let same = facts::same(&result.differences);
    if !same.is_empty() {
        out.push_str(&format!("same in A and B: {}\n", same.join(", ")));
    }
    for row in &t {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    for (p, c) in &result.only_a {
        out.push_str(&format!("only in A: {c} [{p}]\n"));
    }
    for (p, c) in &result.only_b {
        out.push_str(&format!("only in B: {c} [{p}]\n"));
    }
    out.push_str(
        "B / A: ratio of median MB/s over verified runs; interval: percentile bootstrap, 95% \
         nominal, or at least the coverage shown where so few runs leave it only the runs' \
         extremes (3 against 3: ≥ 56%); p: two-sided Mann–Whitney U (small p: the two \
         sweeps' runs differ), beside the smallest p these run counts can give (3 against 3: \
         0.100)\n",
    );
    out
}
