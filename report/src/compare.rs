//! `shoal compare DIR_A DIR_B`: the configurations two sweeps share, side by side — median
//! MB/s of each, the ratio B / A with its bootstrap interval, and a Mann–Whitney rank test of
//! the verified runs' MB/s (methods: `spread`). Configurations are matched by payload and
//! configuration label; those only one sweep has are listed, not compared.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};

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
    pub rank_test: Option<spread::RankTest>,
}

pub struct CompareResult {
    pub rows: Vec<Comparison>,
    /// Configurations only in A, only in B (payload, label).
    pub only_a: Vec<(String, String)>,
    pub only_b: Vec<(String, String)>,
}

fn ok_mb(c: &ConfigSummary) -> Vec<f64> {
    c.runs.iter().filter(|r| r.ok).map(|r| r.mb_per_s).collect()
}

pub fn compare(dir_a: &Path, dir_b: &Path) -> Result<CompareResult> {
    let load = |d: &Path| -> Result<BTreeMap<(String, String), ConfigSummary>> {
        let rep = report::load(&d.join("runs.csv"), None)
            .with_context(|| format!("sweep folder {}", d.display()))?;
        Ok(rep
            .configs
            .into_iter()
            .map(|c| ((c.payload.clone(), c.config.clone()), c))
            .collect())
    };
    let (a, b) = (load(dir_a)?, load(dir_b)?);
    let mut rows = Vec::new();
    let mut only_a = Vec::new();
    for (key, ca) in &a {
        let Some(cb) = b.get(key) else {
            only_a.push(key.clone());
            continue;
        };
        let (va, vb) = (ok_mb(ca), ok_mb(cb));
        let (ma, mb) = (spread::median(&va), spread::median(&vb));
        let ratio = match (ma, mb) {
            (Some(x), Some(y)) if x > 0.0 => Some(y / x),
            _ => None,
        };
        rows.push(Comparison {
            payload: key.0.clone(),
            config: key.1.clone(),
            runs_a: va.len(),
            runs_b: vb.len(),
            median_a: ma,
            median_b: mb,
            ratio,
            // An interval only where there is a ratio (as medians.csv's speedup interval).
            ratio_ci: ratio.and_then(|_| spread::ratio_of_medians_interval(&vb, &va)),
            rank_test: spread::mann_whitney(&vb, &va),
        });
    }
    let only_b = b.keys().filter(|k| !a.contains_key(*k)).cloned().collect();
    Ok(CompareResult {
        rows,
        only_a,
        only_b,
    })
}

fn f3(x: Option<f64>) -> String {
    x.map(|x| format!("{x:.3}")).unwrap_or_default()
}

pub const CSV_HEADER: [&str; 12] = [
    "payload",
    "config",
    "runs_ok_a",
    "runs_ok_b",
    "median_mb_per_s_a",
    "median_mb_per_s_b",
    "ratio_b_over_a",
    "ratio_ci_low",
    "ratio_ci_high",
    "mann_whitney_u",
    "mann_whitney_p",
    "p_method",
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
        c.rank_test.map(|t| format!("{}", t.u)).unwrap_or_default(),
        c.rank_test
            .map(|t| format!("{:.4}", t.p))
            .unwrap_or_default(),
        c.rank_test
            .map(|t| if t.exact { "exact" } else { "normal" }.to_string())
            .unwrap_or_default(),
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
pub fn table(result: &CompareResult, name_a: &str, name_b: &str) -> String {
    let mut t: Vec<Vec<String>> = vec![vec![
        "configuration".into(),
        "payload".into(),
        format!("A MB/s (n)"),
        format!("B MB/s (n)"),
        "B / A".into(),
        "95% interval".into(),
        "rank test p".into(),
    ]];
    for c in &result.rows {
        t.push(vec![
            c.config.clone(),
            c.payload.clone(),
            format!("{} ({})", f3(c.median_a), c.runs_a),
            format!("{} ({})", f3(c.median_b), c.runs_b),
            f3(c.ratio),
            c.ratio_ci
                .map(|(l, h)| format!("{l:.3} – {h:.3}"))
                .unwrap_or_default(),
            c.rank_test
                .map(|t| format!("{:.3}", t.p))
                .unwrap_or_default(),
        ]);
    }
    let widths: Vec<usize> = (0..t[0].len())
        .map(|i| t.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = format!("A = {name_a}\nB = {name_b}\n");
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
        "B / A: ratio of median MB/s over verified runs; interval: percentile bootstrap; \
         p: two-sided Mann–Whitney U (small p: the two sweeps' runs differ)\n",
    );
    out
}
