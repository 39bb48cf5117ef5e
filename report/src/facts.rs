//! What a sweep folder says about the conditions it ran in (its link, build, kernel, load and
//! matrix), from runs.csv and meta.json, and what differs between two sweeps: `shoal compare`
//! names every difference and refuses to compare sweeps over different links.

use std::collections::BTreeSet;
use std::path::Path;

use crate::columns::col;
use crate::report::Report;

/// One sweep's conditions.
#[derive(Clone, Debug, Default)]
pub struct SweepFacts {
    /// meta.json (`Null` when the folder has none or it does not parse).
    pub meta: serde_json::Value,
    /// The link settings of the rows (`link 141 ms RTT, 300 Mbit/s, …`), distinct ones joined.
    pub link: String,
    /// The build: commit, and whether its tree was dirty.
    pub commit: String,
    /// The kernel of each end (sender, and the receiver's where it is another host).
    pub kernel: String,
    /// The 1-minute load at the runs' starts, lowest and highest.
    pub load: Option<(f64, f64)>,
    /// The sending host's cores (meta.json `cpus`).
    pub cpus: Option<f64>,
    /// The configurations (payload, label) in matrix order, and the runs each was given.
    pub configs: Vec<(String, String)>,
    pub runs_per_config: String,
}

fn distinct<'a>(cells: impl Iterator<Item = &'a str>) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for c in cells.filter(|c| !c.is_empty()) {
        if !seen.contains(&c) {
            seen.push(c);
        }
    }
    seen.join("; ")
}

/// Reads the facts of the sweep in `dir`, whose runs.csv gave `rep`.
pub fn facts(dir: &Path, rep: &Report) -> SweepFacts {
    let meta: serde_json::Value = std::fs::read(dir.join("meta.json"))
        .ok()
        .and_then(|t| serde_json::from_slice(&t).ok())
        .unwrap_or_default();
    let cells = |k: &'static str| rep.raw.iter().map(move |r| r.get(k).map_or("", |s| s));
    // `shoal` since the binary's own version is recorded; `git` in older folders.
    let build = if meta["shoal"]["commit"].is_string() {
        &meta["shoal"]
    } else {
        &meta["git"]
    };
    let commit = match build["commit"].as_str() {
        Some(c) => format!(
            "{c}{}",
            if build["dirty"] == true {
                " (dirty tree)"
            } else {
                ""
            }
        ),
        None => distinct(cells("shoal_commit")),
    };
    let sender_kernel = distinct(cells(col::KERNEL.name()));
    let receiver_kernel = distinct(cells(col::RECEIVER_KERNEL.name()));
    let kernel = if receiver_kernel.is_empty() || receiver_kernel == sender_kernel {
        sender_kernel
    } else {
        format!("sender {sender_kernel}, receiver {receiver_kernel}")
    };
    let loads: Vec<f64> = cells(col::SWEEP_LOAD_1M_START.name())
        .filter_map(|c| c.parse::<f64>().ok())
        .filter(|x| x.is_finite())
        .collect();
    let load = loads
        .iter()
        .copied()
        .reduce(f64::min)
        .zip(loads.iter().copied().reduce(f64::max));
    let mut runs: BTreeSet<usize> = rep.configs.iter().map(|c| c.runs.len()).collect();
    if let Some(n) = meta["runs_per_config"].as_u64() {
        runs = BTreeSet::from([n as usize]);
    }
    // Across two hosts there is no emulated link: the receiving host stands for the path.
    let mut link = distinct(rep.configs.iter().map(|c| c.link.as_str()));
    if link.is_empty() {
        let hosts = distinct(cells(col::RECEIVER_HOST.name()));
        if !hosts.is_empty() {
            link = format!("remote receiver {hosts}");
        }
    }
    SweepFacts {
        link,
        commit,
        kernel,
        load,
        cpus: meta["cpus"].as_f64(),
        configs: rep
            .configs
            .iter()
            .map(|c| (c.payload.clone(), c.config.clone()))
            .collect(),
        runs_per_config: runs
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join("/"),
        meta,
    }
}

/// One way two sweeps differ.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// `link`, `commit`, `kernel`, `load` or `matrix`.
    pub what: &'static str,
    pub a: String,
    pub b: String,
}

impl Difference {
    pub fn text(&self) -> String {
        format!("{} differs: A {}; B {}", self.what, self.a, self.b)
    }
}

fn load_text(l: Option<(f64, f64)>) -> String {
    match l {
        Some((lo, hi)) => format!("1-minute load {lo:.1}–{hi:.1} at run starts"),
        None => "load not recorded".into(),
    }
}

fn matrix_text(f: &SweepFacts) -> String {
    format!(
        "{} configurations, {} run(s) each",
        f.configs.len(),
        f.runs_per_config
    )
}

/// What differs between A and B, in the order link, commit, kernel, load, matrix. Loads differ
/// when their ranges do not overlap; matrices when their configurations or runs differ.
pub fn differences(a: &SweepFacts, b: &SweepFacts) -> Vec<Difference> {
    let or_none = |s: &str| {
        if s.is_empty() {
            "not recorded".to_string()
        } else {
            s.to_string()
        }
    };
    let mut out = Vec::new();
    for (what, x, y) in [
        ("link", &a.link, &b.link),
        ("commit", &a.commit, &b.commit),
        ("kernel", &a.kernel, &b.kernel),
    ] {
        if x != y {
            out.push(Difference {
                what,
                a: or_none(x),
                b: or_none(y),
            });
        }
    }
    let overlap = match (a.load, b.load) {
        (Some((a0, a1)), Some((b0, b1))) => a0 <= b1 && b0 <= a1,
        (None, None) => true,
        _ => false,
    };
    if !overlap {
        out.push(Difference {
            what: "load",
            a: load_text(a.load),
            b: load_text(b.load),
        });
    }
    if a.configs != b.configs || a.runs_per_config != b.runs_per_config {
        out.push(Difference {
            what: "matrix",
            a: matrix_text(a),
            b: matrix_text(b),
        });
    }
    out
}

/// The facts two sweeps share, named (`link, kernel`), for the line after the differences.
pub fn same(diffs: &[Difference]) -> Vec<&'static str> {
    ["link", "commit", "kernel", "load", "matrix"]
        .into_iter()
        .filter(|w| !diffs.iter().any(|d| d.what == *w))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_name_link_commit_kernel_load_and_matrix() {
        let a = SweepFacts {
            link: "link 50 ms RTT".into(),
            commit: "abc".into(),
            kernel: "6.1".into(),
            load: Some((0.5, 1.0)),
            configs: vec![("p".into(), "x".into())],
            runs_per_config: "3".into(),
            ..Default::default()
        };
        assert!(differences(&a, &a).is_empty());
        let b = SweepFacts {
            link: "link 100 ms RTT".into(),
            commit: "def".into(),
            kernel: "6.2".into(),
            load: Some((4.0, 6.0)),
            configs: vec![("p".into(), "y".into())],
            runs_per_config: "3".into(),
            ..Default::default()
        };
        let d = differences(&a, &b);
        let what: Vec<&str> = d.iter().map(|d| d.what).collect();
        assert_eq!(what, ["link", "commit", "kernel", "load", "matrix"]);
        assert_eq!(
            d[0].text(),
            "link differs: A link 50 ms RTT; B link 100 ms RTT"
        );
        // Overlapping loads are the same conditions.
        let c = SweepFacts {
            load: Some((0.9, 2.0)),
            ..a.clone()
        };
        assert!(differences(&a, &c).is_empty());
        assert_eq!(same(&d[..1]), ["commit", "kernel", "load", "matrix"]);
    }
}
