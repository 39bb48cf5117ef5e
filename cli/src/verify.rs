//! `shoal verify`: two trees compared by SHA-256 of every file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use shoal_pipeline::verify::{self, Manifest};
use shoal_proto::units::human_bytes;

#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// Source tree.
    pub(crate) src: PathBuf,
    /// Destination tree.
    pub(crate) dst: PathBuf,
    /// Hashing threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub(crate) threads: usize,
    /// Print the result as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) fn verify_trees(a: VerifyArgs) -> Result<ExitCode> {
    let (src, dst) = std::thread::scope(|s| {
        let src = s.spawn(|| Manifest::build(&a.src, a.threads));
        let dst = Manifest::build(&a.dst, a.threads);
        (src.join().expect("hash thread"), dst)
    });
    let (src, dst) = (src?, dst?);
    let diff = verify::compare(&src, &dst);
    if a.json {
        let out = serde_json::json!({
            "identical": diff.is_identical(),
            "files": src.files(),
            "bytes": src.bytes(),
            "missing": diff.missing,
            "extra": diff.extra,
            "differing": diff.differing,
        });
        println!("{out}");
    } else if diff.is_identical() {
        println!(
            "identical: {} files, {} folders, {}",
            src.files(),
            src.entries.len() - src.files(),
            human_bytes(src.bytes())
        );
    } else {
        for p in &diff.missing {
            println!("missing: {p}");
        }
        for p in &diff.extra {
            println!("extra: {p}");
        }
        for p in &diff.differing {
            println!("differs: {p}");
        }
        println!("DIFFERENT: {}", diff.summary());
    }
    Ok(if diff.is_identical() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
