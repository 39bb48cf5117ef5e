//! Stage 2, the ends' own floors with no network: the sample tree (the user's tree, a part of
//! it, or a generated one), how fast it reads at this host (as found, then warm), how fast the
//! receiver's own writers create files of its shape (`write-floor`), and both ends' CPUs.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use shoal_proto::control::Reply;
use shoal_remote::Remote;
use shoal_verdict::{CpuObs, FloorRate, SampleObs, SizeSummary};

/// Seed of a generated sample's content, as `shoal gen --seed 1`.
const SAMPLE_SEED: u64 = 1;

/// Files per folder in a generated sample.
const FILES_PER_DIR: u64 = 256;

/// The tree being diagnosed: its files (relative path, size), read or generated.
pub struct Tree {
    /// `--src`, when the tree is the user's.
    pub root: Option<PathBuf>,
    pub files: Vec<(PathBuf, u64)>,
}

impl Tree {
    /// The user's tree, walked (regular files only).
    pub fn read(root: &Path) -> Result<Tree> {
        let mut files = Vec::new();
        for e in walkdir::WalkDir::new(root).sort_by_file_name() {
            let e = e.with_context(|| format!("reading {}", root.display()))?;
            if e.file_type().is_file() {
                let rel = e.path().strip_prefix(root)?.to_path_buf();
                files.push((rel, e.metadata()?.len()));
            }
        }
        if files.is_empty() {
            bail!("{} holds no files", root.display());
        }
        Ok(Tree {
            root: Some(root.to_path_buf()),
            files,
        })
    }

    /// A generated tree of `files` × `size`, 256 files per folder.
    pub fn generated(files: u64, size: u64) -> Tree {
        let files = (0..files)
            .map(|i| {
                (
                    PathBuf::from(format!("d{:04}/f{i:06}", i / FILES_PER_DIR)),
                    size,
                )
            })
            .collect();
        Tree { root: None, files }
    }

    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.1).sum()
    }

    pub fn sizes(&self) -> SizeSummary {
        let mut v: Vec<u64> = self.files.iter().map(|f| f.1).collect();
        v.sort_unstable();
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        SizeSummary {
            min: v[0],
            median: at(0.5),
            p90: at(0.9),
            max: v[v.len() - 1],
            mean: self.bytes() as f64 / v.len() as f64,
        }
    }

    /// Every k-th file, `n` in all (the whole tree when it has no more).
    pub fn pick(&self, n: u64) -> Vec<(PathBuf, u64)> {
        let total = self.files.len() as u64;
        if n >= total {
            return self.files.clone();
        }
        (0..n)
            .map(|i| self.files[(i * total / n) as usize].clone())
            .collect()
    }

    /// Folders the sample's files sit in.
    pub fn dirs_of(files: &[(PathBuf, u64)]) -> u32 {
        let mut d: Vec<&Path> = files
            .iter()
            .map(|f| f.0.parent().unwrap_or(Path::new("")))
            .collect();
        d.sort();
        d.dedup();
        d.len().max(1) as u32
    }
}

/// The sample's files in `dir`: copied from the user's tree (reading each as found, timed), or
/// generated. Returns the as-found read floor when there was one.
pub fn make_sample(
    tree: &Tree,
    picked: &[(PathBuf, u64)],
    dir: &Path,
) -> Result<Option<FloorRate>> {
    // Only the reads of the user's files are timed: writing the copy is not the source's cost.
    let mut read_s = 0.0;
    let mut bytes = 0u64;
    let mut fill = Vec::new();
    for (i, (rel, size)) in picked.iter().enumerate() {
        let to = dir.join(rel);
        if let Some(p) = to.parent() {
            std::fs::create_dir_all(p)?;
        }
        match &tree.root {
            Some(root) => {
                let t0 = Instant::now();
                let data = std::fs::read(root.join(rel))
                    .with_context(|| format!("reading {}", root.join(rel).display()))?;
                read_s += t0.elapsed().as_secs_f64();
                bytes += data.len() as u64;
                std::fs::write(&to, data)?;
            }
            None => {
                // Incompressible, different in every file: `shoal gen`'s content.
                fill.resize(*size as usize, 0);
                shoal_pipeline::tree::fill_content(SAMPLE_SEED, i as u64, &mut fill);
                std::fs::write(&to, &fill)?;
            }
        }
    }
    let s = read_s.max(1e-9);
    Ok(tree.root.as_ref().map(|_| FloorRate {
        files_per_s: picked.len() as f64 / s,
        bytes_per_s: bytes as f64 / s,
        cpu_busy: None,
    }))
}

/// Reads every file of `dir` (as the sender's readers would), timed.
pub fn read_floor(dir: &Path) -> Result<FloorRate> {
    let t0 = Instant::now();
    let (mut files, mut bytes) = (0u64, 0u64);
    let mut buf = vec![0u8; 256 << 10];
    for e in walkdir::WalkDir::new(dir) {
        let e = e?;
        if e.file_type().is_file() {
            let mut f = std::fs::File::open(e.path())?;
            loop {
                let n = f.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                bytes += n as u64;
            }
            files += 1;
        }
    }
    let s = t0.elapsed().as_secs_f64().max(1e-9);
    Ok(FloorRate {
        files_per_s: files as f64 / s,
        bytes_per_s: bytes as f64 / s,
        cpu_busy: None,
    })
}

/// Files the scout of the receiver's write floor creates.
const SCOUT_FILES: u64 = 200;

/// The receiver's write floor for the sample's shape.
pub fn write_floor(remote: &Remote, sample: &SampleObs, dirs: u32) -> Result<FloorRate> {
    let file_bytes = sample.sample_bytes / sample.sample_files.max(1);
    floor_of(remote, sample.sample_files, file_bytes, dirs)
}

/// A first write floor on a few files of the tree's mean size, before the sample is sized: a
/// destination creating a few hundred files a second must shrink the sample, or its floor
/// and every arm would outlast the budget.
pub fn scout_write_floor(remote: &Remote, tree: &Tree) -> Result<FloorRate> {
    let n = tree.files.len().max(1) as u64;
    floor_of(remote, SCOUT_FILES.min(n), tree.bytes() / n, 1)
}

fn floor_of(remote: &Remote, files: u64, file_bytes: u64, dirs: u32) -> Result<FloorRate> {
    let r = remote.write_floor(&fresh_run_id(), files, file_bytes, dirs)?;
    let fact = |k: &str| r.facts.get(k).and_then(|v| v.parse::<f64>().ok());
    Ok(FloorRate {
        files_per_s: fact("files_per_s").unwrap_or(0.0),
        bytes_per_s: fact("bytes_per_s").unwrap_or(0.0),
        cpu_busy: fact("cpu_busy"),
    })
}

/// 32 hex digits from the clock and the process id: a folder name nobody used.
fn fresh_run_id() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{:016x}{:08x}{:08x}",
        t as u64,
        std::process::id(),
        0xd1a6u32
    )
}

/// This host's processors: count, cgroup quota, and steal over `steal_span` (s) since
/// `steal0` (`cpu_steal_seconds` then).
pub fn local_cpu(steal0: Option<f64>, span: f64) -> CpuObs {
    let cpus = shoal_row::hostfacts::cpus().max(1) as u32;
    let steal = match (steal0, shoal_row::hostfacts::cpu_steal_seconds()) {
        (Some(a), Some(b)) if span > 0.0 => Some(((b - a) / (span * f64::from(cpus))).max(0.0)),
        _ => None,
    };
    CpuObs {
        cpus: Some(cpus),
        quota_cores: shoal_row::hostfacts::cpu_quota_cores(),
        steal,
    }
}

/// The receiver's processors, from its `info` facts and two `counters` replies `span` s apart.
pub fn remote_cpu(info: &Reply, c0: Option<&Reply>, c1: Option<&Reply>, span: f64) -> CpuObs {
    let cpus = info
        .facts
        .get("facts.cpus")
        .and_then(|v| v.parse::<u32>().ok());
    let steal = |r: Option<&Reply>| {
        r.and_then(|r| r.facts.get("cpu_steal_seconds"))
            .and_then(|v| v.parse::<f64>().ok())
    };
    let steal = match (steal(c0), steal(c1), cpus) {
        (Some(a), Some(b), Some(n)) if span > 0.0 && n > 0 => {
            Some(((b - a) / (span * f64::from(n))).max(0.0))
        }
        _ => None,
    };
    CpuObs {
        cpus,
        quota_cores: info
            .facts
            .get("cpu_quota_cores")
            .and_then(|v| v.parse().ok()),
        steal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_picks_evenly_and_counts_its_folders() {
        let t = Tree::generated(1000, 4096);
        assert_eq!(t.bytes(), 4_096_000);
        let p = t.pick(100);
        assert_eq!(p.len(), 100);
        assert_eq!(p[1].0, PathBuf::from("d0000/f000010"));
        assert_eq!(Tree::dirs_of(&p), 4);
        assert_eq!(t.pick(5000).len(), 1000);
        assert_eq!(t.sizes().median, 4096);
        assert_eq!(fresh_run_id().len(), 32);
    }
}
