//! `shoal diagnose`: its arguments; the stages live in the `shoal-diagnose` crate.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

/// Name what holds a small-file transfer back on the path to a remote `shoal recv --control`,
/// with the figures that show it and the fix that removes it (see docs/diagnose.md).
#[derive(Debug, Args)]
pub struct DiagnoseArgs {
    /// The receiver's address, as `shoal send --to` takes it; it must run `shoal recv
    /// --control`.
    pub receiver: String,
    /// The receiver's certificate pin (`sha256:…`, printed by `shoal recv`) [default: the
    /// default identity's, for a receiver on this host].
    #[arg(long, requires = "token_file")]
    pub pin: Option<String>,
    /// File holding the receiver's token [default: the default identity's].
    #[arg(long, requires = "pin")]
    pub token_file: Option<PathBuf>,
    /// Diagnose this tree (its file count and sizes are read; a sample of it is transferred).
    #[arg(long, conflicts_with_all = ["files", "size"])]
    pub src: Option<PathBuf>,
    /// Without --src: files in the generated tree.
    #[arg(long, default_value_t = 65_536)]
    pub files: u64,
    /// Without --src: size of each generated file.
    #[arg(long, default_value = "4KiB", value_parser = shoal_proto::units::parse_size)]
    pub size: u64,
    /// Longest the whole diagnosis may take; arms that do not fit are skipped and named.
    #[arg(long, default_value = "5m", value_parser = shoal_proto::units::parse_duration)]
    pub budget: Duration,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Keep every arm's rows, the report (diagnose.json) and the summary here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn run(a: DiagnoseArgs) -> Result<ExitCode> {
    if a.budget < Duration::from_secs(20) {
        anyhow::bail!(
            "--budget {:?} is too short: the path probe alone takes about 10 s",
            a.budget
        );
    }
    let opts = shoal_diagnose::Options {
        receiver: a.receiver,
        pin: a.pin,
        token_file: a.token_file,
        src: a.src,
        files: a.files.max(1),
        size: a.size,
        budget: a.budget,
        json: a.json,
        out: a.out,
        shoal: std::env::current_exe().context("the shoal binary's path")?,
    };
    Ok(if shoal_diagnose::run(&opts)? {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(130)
    })
}
