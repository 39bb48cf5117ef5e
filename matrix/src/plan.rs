//! The plan: every run of every configuration, in one order shuffled with a recorded seed.

use std::time::Duration;

/// One run of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Index into `Matrix::configs`.
    pub config: usize,
    /// 1-based run number within its configuration.
    pub run: u32,
}

/// A duration as people read it in a plan or a progress line: `45s`, `3m05s`, `2h10m`.
pub fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// SplitMix64: a tiny, fixed generator, so a seed reproduces the order in every version.
struct SplitMix(u64);

impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        // Rejection sampling: no modulo bias.
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let x = self.next();
            if x < zone {
                return x % n;
            }
        }
    }
}

/// Every run of every configuration, shuffled (Fisher–Yates) with `seed`.
pub fn plan(configs: usize, runs: u32, seed: u64) -> Vec<Planned> {
    let mut v: Vec<Planned> = (0..configs)
        .flat_map(|c| (1..=runs).map(move |r| Planned { config: c, run: r }))
        .collect();
    let mut rng = SplitMix(seed);
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

/// A random seed when none was given (recorded in runs.csv and meta.json).
pub fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish() % 1_000_000_000
}

/// A random 64-bit value.
fn random_u64() -> u64 {
    random_seed().wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ random_seed()
}

/// A fresh run id: 32 hex digits.
pub fn run_id() -> String {
    format!("{:016x}{:016x}", random_u64(), random_u64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub fn plan_is_a_seeded_permutation() {
        let a = plan(2, 3, 42);
        let b = plan(2, 3, 42);
        assert_eq!(a, b);
        assert_eq!(a.len(), 6);
        let in_order: Vec<Planned> = (0..2)
            .flat_map(|c| (1..=3).map(move |r| Planned { config: c, run: r }))
            .collect();
        let mut sorted = a.clone();
        sorted.sort_by_key(|p| (p.config, p.run));
        assert_eq!(sorted, in_order, "every run exactly once");
        assert_ne!(a, in_order);
        assert_ne!(plan(2, 3, 43), a);
    }
}
