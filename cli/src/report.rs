//! `shoal report` and `shoal compare`: their arguments, handed to shoal-report as requests.

use std::path::PathBuf;

use clap::Args;
use shoal_report::request::{CompareRequest, ReportRequest};

/// Regenerate medians.csv and the charts of a sweep folder from its runs.csv alone.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The sweep's output folder (holding runs.csv).
    pub dir: PathBuf,
    /// Reference configuration for the ratio column, e.g. mode=tcp-bundle,cc=cubic (one per
    /// payload) [default: the rows marked reference in runs.csv].
    #[arg(long)]
    pub reference: Option<String>,
    /// Draw the bar chart's axis in Mbit/s (10^6 bits of file content per second) instead of
    /// MB/s, e.g. to read it against a link rate.
    #[arg(long)]
    pub mbit: bool,
    /// Also write report.html: the answer, medians, charts, warnings and provenance in one
    /// self-contained page, readable offline.
    #[arg(long)]
    pub html: bool,
}

/// Compare two sweeps configuration by configuration (matched by payload and label).
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The first sweep's output folder (holding runs.csv): A, the baseline.
    pub dir_a: PathBuf,
    /// The second sweep's output folder: B, compared against A.
    pub dir_b: PathBuf,
    /// Also write the comparison as CSV to this file (`-` for standard output, instead of the
    /// table).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Also write the comparison as one self-contained HTML page to this file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Compare sweeps that ran over different links (refused otherwise).
    #[arg(long)]
    pub force: bool,
}

impl From<ReportArgs> for ReportRequest {
    fn from(a: ReportArgs) -> ReportRequest {
        ReportRequest {
            dir: a.dir,
            reference: a.reference,
            mbit: a.mbit,
            html: a.html,
        }
    }
}

impl From<CompareArgs> for CompareRequest {
    fn from(a: CompareArgs) -> CompareRequest {
        CompareRequest {
            dir_a: a.dir_a,
            dir_b: a.dir_b,
            csv: a.csv,
            html: a.html,
            force: a.force,
        }
    }
}
