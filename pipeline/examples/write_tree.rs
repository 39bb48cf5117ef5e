//! The receiver's writer alone, fed from memory: how fast Shoal's writer pool creates a copy of
//! a source tree with no network and no reader in the clock (`scripts/bench/create.sh`, arm
//! `writer`).
//!
//!     cargo run --release -p shoal-pipeline --example write_tree -- SRC DEST [WRITERS]
//!
//! Walks SRC and reads every file into memory (untimed), then times the writer pool creating
//! the tree in DEST (a folder that must not exist yet): from starting the writers to their end,
//! every file written, closed and under its final name, in batches of 64 files as a receiver
//! hands them over. WRITERS defaults to the receiver's default (one per core, at most 4). No
//! fsync. Prints one line: files, bytes, seconds, files/s.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use shoal_pipeline::tree::SourceTree;
use shoal_pipeline::writer::{
    default_writers, file_id, WriteBatch, WriteOp, WriterDest, WriterOptions, WriterPool,
};

/// Files per batch, as the receiver's stage hands them to the writers.
const BATCH_FILES: usize = 64;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (src, dest) = match &args[..] {
        [s, d] | [s, d, _] => (PathBuf::from(s), PathBuf::from(d)),
        _ => bail!("usage: write_tree SRC DEST [WRITERS]"),
    };
    let writers = match args.get(2) {
        Some(w) => w
            .parse()
            .with_context(|| format!("WRITERS {w:?} is not a count"))?,
        None => default_writers(),
    };
    if dest.exists() {
        bail!("{} exists: the writer needs a new folder", dest.display());
    }
    let tree = SourceTree::walk(&src)?;
    let mut files = Vec::with_capacity(tree.files.len());
    for f in &tree.files {
        let path = src.join(f.rel.as_path());
        let data = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        files.push((f.rel.clone(), Bytes::from(data)));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let t0 = Instant::now();
    let report = rt.block_on(async {
        let pool = WriterPool::spawn(WriterOptions {
            dest: WriterDest::Root(dest.clone()),
            fsync: false,
            tag: "be0c".into(),
            on_fail: None,
            writers,
        })?;
        let mut seq = 0u64;
        for chunk in files.chunks(BATCH_FILES) {
            let mut ops = Vec::with_capacity(chunk.len() * 3);
            for (rel, data) in chunk {
                let id = file_id(seq, rel);
                seq += 1;
                ops.push(WriteOp::Open {
                    id,
                    path: rel.clone(),
                    size: data.len() as u64,
                    sent_at_us: 0,
                });
                if !data.is_empty() {
                    ops.push(WriteOp::Data {
                        id,
                        bytes: data.clone(),
                    });
                }
                ops.push(WriteOp::Close { id });
            }
            if pool
                .batches
                .send(WriteBatch { ops, permit: None })
                .await
                .is_err()
            {
                break;
            }
        }
        anyhow::Ok(pool.finish().await)
    })?;
    let seconds = t0.elapsed().as_secs_f64();
    if let Some(e) = report.error {
        return Err(e.context(format!("writing into {}", dest.display())));
    }
    if report.files_ready != files.len() as u64 {
        bail!("{} of {} files written", report.files_ready, files.len());
    }
    println!(
        "writer: {} files, {} bytes in {seconds:.3} s, {:.0} files/s ({writers} writers)",
        files.len(),
        report.bytes_written,
        files.len() as f64 / seconds
    );
    Ok(())
}
