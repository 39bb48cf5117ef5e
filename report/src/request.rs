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
        crate::chart::ChartOptions { mbit: a.mbit },
    )?;
    for f in files {
        println!("{}", f.display());
    }
    print_spread_warnings(&a.dir);
    Ok(ExitCode::SUCCESS)
}

/// `shoal compare`.
pub fn run_compare(a: CompareRequest) -> Result<ExitCode> {
    let result = crate::compare::compare(&a.dir_a, &a.dir_b)?;
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

/// Prints the summary's warnings about spread and outliers.
pub fn print_spread_warnings(dir: &std::path::Path) {
    if let Ok(ws) = crate::report::spread_warnings(&dir.join("medians.csv")) {
        for w in ws {
            println!("warning: {w}");
        }
    }
}
