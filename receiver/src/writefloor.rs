//! The receiver's write floor (`write-floor` on the control channel, for `shoal diagnose`):
//! how fast this host's destination takes files of a given shape through Shoal's own writer
//! pool, with no network involved. A fresh folder under `--dest` (named by a run id, never a
//! path from the peer) gets a small untimed warm-up and then the timed tree; the folder is
//! removed (and its file system synced, so the next stage does not pay for the removal) before
//! the reply, whatever happened.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use shoal_pipeline::writer::{
    file_id, remove_settled, WriteBatch, WriteOp, WriterDest, WriterOptions, WriterPool,
};
use shoal_proto::control::{Reply, MAX_FLOOR_BYTES, MAX_FLOOR_DIRS, MAX_FLOOR_FILES};
use shoal_proto::relpath::{PathLimits, RelPath};
use shoal_row::metrics;

use crate::config::ReceiverConfig;

/// Files per batch handed to the writers.
const BATCH_FILES: u64 = 64;
/// The untimed warm-up: this fraction of the files, at most [`WARMUP_MAX`].
const WARMUP_SHARE: u64 = 20;
const WARMUP_MAX: u64 = 200;

/// The shape a write floor creates.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub files: u64,
    pub file_bytes: u64,
    pub dirs: u32,
}

impl Shape {
    /// Refuses a shape over the request's bounds or the receiver's per-run limits.
    pub(crate) fn check(&self, config: &ReceiverConfig) -> Result<()> {
        let bytes = self.files.saturating_mul(self.file_bytes);
        let (max_files, max_bytes) = (
            MAX_FLOOR_FILES.min(config.max_files),
            MAX_FLOOR_BYTES.min(config.max_bytes),
        );
        if self.files == 0 || self.files > max_files {
            bail!(
                "write floor: {} files is outside 1..={max_files}",
                self.files
            );
        }
        if bytes > max_bytes {
            bail!("write floor: {bytes} bytes is over the limit of {max_bytes}");
        }
        if self.dirs == 0 || self.dirs > MAX_FLOOR_DIRS {
            bail!(
                "write floor: {} folders is outside 1..={MAX_FLOOR_DIRS}",
                self.dirs
            );
        }
        Ok(())
    }
}

/// Creates the tree in `dest/<run_id>`, times it, removes the folder, and reports.
pub(crate) async fn measure(config: &ReceiverConfig, run_id: &str, shape: Shape) -> Result<Reply> {
    shape.check(config)?;
    let root = config.dest.join(run_id);
    if let Some(free) = metrics::free_bytes(&config.dest) {
        if shape.files * shape.file_bytes > free / 2 {
            bail!("write floor: the destination has {free} bytes free, too few for the sample");
        }
    }
    let made = root.clone();
    let dest = config.dest.clone();
    tokio::task::spawn_blocking(move || -> Result<()> {
        std::fs::create_dir_all(&dest)
            .with_context(|| format!("cannot create {}", dest.display()))?;
        // A new folder nobody wrote before: an existing one is an error, not reused.
        std::fs::create_dir(&made).with_context(|| format!("cannot create {}", made.display()))?;
        for sub in ["warm-up", "timed"] {
            std::fs::create_dir(made.join(sub))?;
        }
        Ok(())
    })
    .await??;
    let outcome = timed(config, &root, shape).await;
    let gone = root.clone();
    let removed = tokio::task::spawn_blocking(move || remove_settled(&gone)).await?;
    let reply = outcome?;
    removed?;
    Ok(reply)
}

async fn timed(config: &ReceiverConfig, root: &Path, shape: Shape) -> Result<Reply> {
    let warm = Shape {
        files: (shape.files / WARMUP_SHARE).clamp(1, WARMUP_MAX),
        ..shape
    };
    write_tree(config, root.to_path_buf(), "warm-up", warm).await?;
    let cpu0 = metrics::cpu_seconds();
    let t0 = Instant::now();
    let written = write_tree(config, root.to_path_buf(), "timed", shape).await?;
    let seconds = t0.elapsed().as_secs_f64().max(1e-9);
    let cpu = metrics::cpu_seconds() - cpu0;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let busy = busy_share(cpu, seconds, cpus, shoal_row::hostfacts::cpu_quota_cores());
    let mut reply = Reply {
        ok: true,
        seconds,
        ..Default::default()
    };
    let f = &mut reply.facts;
    f.insert("files".into(), shape.files.to_string());
    f.insert("bytes".into(), written.to_string());
    f.insert("writers".into(), config.writers.to_string());
    f.insert(
        "files_per_s".into(),
        format!("{:.1}", shape.files as f64 / seconds),
    );
    f.insert(
        "bytes_per_s".into(),
        format!("{:.0}", written as f64 / seconds),
    );
    f.insert("cpu_busy".into(), format!("{busy:.3}"));
    Ok(reply)
}

/// Writes `shape` into `parent/name` through a writer pool; the bytes written.
async fn write_tree(
    config: &ReceiverConfig,
    parent: PathBuf,
    name: &str,
    shape: Shape,
) -> Result<u64> {
    let pool = WriterPool::spawn(WriterOptions {
        dest: WriterDest::Prepared {
            parent,
            name: name.to_string(),
        },
        fsync: config.fsync,
        tag: "f100".into(),
        on_fail: None,
        writers: config.writers,
    })?;
    let limits = PathLimits::default();
    let path = |s: String| RelPath::from_bytes(s.as_bytes(), &limits).expect("a plain name");
    let data = Bytes::from(vec![0u8; shape.file_bytes as usize]);
    let dirs: Vec<WriteOp> = (0..shape.dirs)
        .map(|d| WriteOp::Dir(path(format!("d{d}"))))
        .collect();
    let mut sent = pool
        .batches
        .send(WriteBatch {
            ops: dirs,
            permit: None,
        })
        .await
        .is_ok();
    let mut seq = 0u64;
    while sent && seq < shape.files {
        let end = (seq + BATCH_FILES).min(shape.files);
        let mut ops = Vec::with_capacity(((end - seq) * 3) as usize);
        for i in seq..end {
            let p = path(format!("d{}/f{i}", i % u64::from(shape.dirs)));
            let id = file_id(i, &p);
            ops.push(WriteOp::Open {
                id,
                path: p,
                size: shape.file_bytes,
                sent_at_us: 0,
            });
            if shape.file_bytes > 0 {
                ops.push(WriteOp::Data {
                    id,
                    bytes: data.clone(),
                });
            }
            ops.push(WriteOp::Close { id });
        }
        seq = end;
        sent = pool
            .batches
            .send(WriteBatch { ops, permit: None })
            .await
            .is_ok();
    }
    let report = pool.finish().await;
    if let Some(e) = report.error {
        return Err(e.context("write floor"));
    }
    if report.files_ready != shape.files {
        bail!(
            "write floor: {} of {} files written",
            report.files_ready,
            shape.files
        );
    }
    Ok(report.bytes_written)
}

/// The share of the CPU this process may use that `cpu_s` seconds of it filled in `seconds`:
/// against a cgroup quota where one is set and is below the CPUs (0.2 cores counts as 0.2,
/// where the standard library's parallelism rounds it up to one core, and a floor measured
/// with the quota full would read as 20% busy: a disk's floor rather than the CPU's).
fn busy_share(cpu_s: f64, seconds: f64, cpus: f64, quota: Option<f64>) -> f64 {
    let cores = quota.filter(|q| *q > 0.0).map_or(cpus, |q| q.min(cpus));
    (cpu_s / (seconds * cores).max(1e-9)).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::busy_share;

    #[test]
    fn busy_is_against_a_quota_below_the_cpus_and_the_cpus_otherwise() {
        // A fifth of a core used in full for 3 s.
        assert!((busy_share(0.6, 3.0, 1.0, Some(0.2)) - 1.0).abs() < 1e-9);
        assert!((busy_share(0.6, 3.0, 1.0, None) - 0.2).abs() < 1e-9);
        // A quota above the CPUs counts the CPUs.
        assert!((busy_share(3.0, 3.0, 2.0, Some(4.0)) - 0.5).abs() < 1e-9);
        assert_eq!(busy_share(1.0, 0.0, 2.0, None), 1.0);
    }
}
