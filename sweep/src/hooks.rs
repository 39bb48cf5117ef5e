//! The sweep's test hooks (documented in docs/sweep.md): tamper with a destination, kill a
//! sender.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Test hooks, read from the environment only by the sweep (documented in docs/sweep.md):
/// `SHOAL_SWEEP_TEST_TAMPER=all|1,3` changes a destination file of those runs (by order)
/// after the transfer and before hashing; `SHOAL_SWEEP_TEST_KILL=2s@all|2s@1,3` kills the
/// sender of those runs that long after it started.
#[derive(Clone, Debug, Default)]
pub struct Hooks {
    pub tamper: Option<Vec<usize>>,
    pub kill: Option<(Duration, Option<Vec<usize>>)>,
}

pub fn parse_orders(s: &str) -> Option<Vec<usize>> {
    if s.trim() == "all" {
        None
    } else {
        Some(s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
    }
}

impl Hooks {
    pub fn from_env() -> Hooks {
        let mut h = Hooks::default();
        if let Ok(v) = std::env::var("SHOAL_SWEEP_TEST_TAMPER") {
            h.tamper = Some(parse_orders(&v).unwrap_or_default());
            if v.trim() == "all" {
                h.tamper = Some(Vec::new());
            }
        }
        if let Ok(v) = std::env::var("SHOAL_SWEEP_TEST_KILL") {
            let (d, which) = v.split_once('@').unwrap_or((v.as_str(), "all"));
            if let Ok(d) = shoal_proto::units::parse_duration(d) {
                h.kill = Some((d, parse_orders(which)));
            }
        }
        h
    }

    pub fn tamper(&self, order: usize) -> bool {
        match &self.tamper {
            Some(v) => v.is_empty() || v.contains(&order),
            None => false,
        }
    }

    pub fn kill_after(&self, order: usize) -> Option<Duration> {
        match &self.kill {
            Some((d, None)) => Some(*d),
            Some((d, Some(v))) if v.contains(&order) => Some(*d),
            _ => None,
        }
    }
}

/// Changes the destination after a transfer (test hook): flips the first byte of the first
/// file, or creates a stray file when there is none.
pub fn tamper(dest: &Path) -> String {
    let mut files: Vec<PathBuf> = Vec::new();
    let mut stack = vec![dest.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                let p = e.path();
                match e.file_type() {
                    Ok(t) if t.is_dir() => stack.push(p),
                    Ok(t) if t.is_file() => files.push(p),
                    _ => {}
                }
            }
        }
    }
    files.sort();
    match files.first() {
        Some(f) => {
            let mut b = std::fs::read(f).unwrap_or_default();
            if b.is_empty() {
                b.push(0);
            } else {
                b[0] ^= 0xff;
            }
            let _ = std::fs::write(f, b);
            format!("tampered {}", f.display())
        }
        None => {
            let _ = std::fs::create_dir_all(dest);
            let _ = std::fs::write(dest.join("tampered"), b"x");
            "tampered: added a stray file".into()
        }
    }
}
