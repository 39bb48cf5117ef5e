//! `shoal report` and `shoal compare`: the requests as given and their entry points.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

/// What `shoal report` is asked to do.
#[derive(Clone, Debug, Default)]
pub struct ReportRequest {
    /// The sweep's output folder (holding runs.csv).
    pub dir: PathBuf,
    /// Reference selector for the ratio column (`mode=tcp-bundle,cc=cubic`); `None`: the rows
    /// marked reference in runs.csv.
    pub reference: Option<String>,
    /// The bar chart's axis in Mbit/s instead of MB/s.
    pub mbit: bool,
    /// Also write `report.html`.
    pub html: bool,
}

/// What `shoal compare` is asked to do.
#[derive(Clone, Debug, Default)]
pub struct CompareRequest {
    /// A, the baseline sweep's folder.
    pub dir_a: PathBuf,
    /// B, compared against A.
    pub dir_b: PathBuf,
    /// Also write the comparison as CSV here (`-`: standard output, instead of the table).
    pub csv: Option<PathBuf>,
    /// Also write the comparison as one self-contained HTML page here.
    pub html: Option<PathBuf>,
    /// Compare sweeps over different links all the same.
    pub force: bool,
}

/// `shoal report`.
pub fn run_report(a: ReportRequest) -> Result<ExitCode> {
    let sel = a
        .reference
        .as_deref()
        .map(crate::report::parse_selector)
        .transpose()?;
    let files = crate::table::write_report(
        &a.dir,
        sel.as_deref(),
        crate::chart::ChartOptions {
            mbit: a.mbit,
            html: a.html,
        },
    )?;
    if let Ok(t) = crate::table::medians_table(&a.dir) {
        println!("medians of the verified runs (MB = 10^6 bytes; × ref = reference median seconds / this one's):\n{t}");
    }
    print_spread_warnings(&a.dir);
    for f in files {
        println!("{}", f.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `shoal compare`.
pub fn run_compare(a: CompareRequest) -> Result<ExitCode> {
    let sweeps = crate::compare::load(&a.dir_a, &a.dir_b)?;
    let result = crate::compare::compare_loaded(&sweeps);
    if let Some(d) = result.differences.iter().find(|d| d.what == "link") {
        if !a.force {
            anyhow::bail!(
                "{}: sweeps over different links measure different things; --force compares \
                 them anyway",
                d.text()
            );
        }
    }
    if let Some(p) = &a.html {
        crate::html::write_compare(p, &sweeps, &result, &a.dir_a, &a.dir_b)?;
    }
    match a.csv.as_deref() {
        Some(p) if p.as_os_str() == "-" => {
            crate::compare::write_csv(&result, &mut std::io::stdout().lock())?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(p) => {
            let mut f = std::fs::File::create(p)
                .with_context(|| format!("cannot write {}", p.display()))?;
            crate::compare::write_csv(&result, &mut f)?;
        }
        None => {}
    }
    print!(
        "{}",
        crate::compare::table(
            &result,
            &a.dir_a.display().to_string(),
            &a.dir_b.display().to_string()
        )
    );
    if result.rows.is_empty() {
        anyhow::bail!(
            "{} and {} share no configuration (payload and label)",
            a.dir_a.display(),
            a.dir_b.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the summary's warnings: spread and outliers, arms loaded beyond the core count, a
/// failed link check, TCP and QUIC under different controllers, the receiving host's clock
/// (saturated arms are named under the medians table).
pub fn print_spread_warnings(dir: &std::path::Path) {
    let Ok(rep) = crate::report::load(&dir.join("runs.csv"), None) else {
        return;
    };
    let facts = crate::facts::facts(dir, &rep);
    for w in crate::warnings::sweep_warnings(dir, &rep, &facts) {
        if w.text.contains("SATURATED machine") {
            continue;
        }
        println!("warning: {}", w.text);
    }
}
