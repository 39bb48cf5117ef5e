//! `shoal gen`: a payload of random files.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use shoal_pipeline::tree::{self, GenSpec, DEFAULT_FILES_PER_DIR};
use shoal_proto::units::{human_bytes, parse_size};

#[derive(Debug, Args)]
pub(crate) struct GenArgs {
    /// Folder to create (must be absent or empty).
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Number of files.
    #[arg(long)]
    pub(crate) files: u64,
    /// Size of each file: 4096, 4KiB, 256MiB, 1GB…
    #[arg(long, value_parser = parse_size)]
    pub(crate) size: u64,
    /// Number of folders the files are spread over [default: one per 256 files].
    #[arg(long)]
    pub(crate) dirs: Option<u64>,
    /// Random seed; the same seed gives the same tree [default: random, printed].
    #[arg(long)]
    pub(crate) seed: Option<u64>,
}

pub(crate) fn gen(a: GenArgs) -> Result<ExitCode> {
    let seed = a.seed.unwrap_or_else(rand::random);
    let spec = GenSpec {
        files: a.files,
        size: a.size,
        dirs: a.dirs,
        seed,
    };
    let started = std::time::Instant::now();
    tree::generate(&a.out, &spec)?;
    println!(
        "generated {} files of {} ({} total) in {} folders under {} in {:.1} s; seed {seed}",
        a.files,
        human_bytes(a.size),
        human_bytes(a.files * a.size),
        spec.dir_count(),
        a.out.display(),
        started.elapsed().as_secs_f64()
    );
    if a.dirs.is_none() && a.files > DEFAULT_FILES_PER_DIR {
        println!("({DEFAULT_FILES_PER_DIR} files per folder; --dirs changes that)");
    }
    Ok(ExitCode::SUCCESS)
}
