//! When one arm's time differs from another's beyond noise.

use crate::fmt::secs;
use crate::obs::ArmObs;

/// A gain (or loss) under this fraction of the reference's time is noise, whatever the
/// spread of the runs.
pub const MIN_GAIN: f64 = 0.05;

/// With a single run in either arm there is no measured spread: a difference must reach this
/// fraction instead.
pub const SINGLE_RUN_MIN_GAIN: f64 = 0.10;

/// How one arm compares with a reference arm.
#[derive(Debug, Clone, PartialEq)]
pub enum Compare {
    /// Faster beyond noise: `gain` is (reference − arm) / reference, from medians.
    Faster { gain: f64 },
    /// Slower beyond noise: `loss` is (arm − reference) / arm, from medians.
    Slower { loss: f64 },
    /// Within noise, and why.
    Noise(String),
}

/// Half the spread of an arm's runs (s).
pub fn half_range(arm: &ArmObs) -> f64 {
    arm.range_s().map_or(0.0, |(lo, hi)| (hi - lo) / 2.0)
}

/// Compares `arm` with `reference`: a difference counts only if the two arms' run ranges do
/// not overlap, the difference of medians exceeds each arm's half-range and is at least
/// [`MIN_GAIN`] of the slower one ([`SINGLE_RUN_MIN_GAIN`] when an arm has one run). Both
/// arms must have been measured.
pub fn compare(arm: &ArmObs, reference: &ArmObs) -> Compare {
    let (Some(a), Some(r), Some((alo, ahi)), Some((rlo, rhi))) = (
        arm.median_s(),
        reference.median_s(),
        arm.range_s(),
        reference.range_s(),
    ) else {
        return Compare::Noise("not measured".into());
    };
    let diff = (r - a).abs();
    let slower = a.max(r);
    if ahi >= rlo && rhi >= alo {
        return Compare::Noise(format!(
            "run ranges overlap ({} and {})",
            range_text(alo, ahi),
            range_text(rlo, rhi)
        ));
    }
    let hr = half_range(arm).max(half_range(reference));
    if diff <= hr {
        return Compare::Noise(format!(
            "the difference {} is within a half-range {}",
            secs(diff),
            secs(hr)
        ));
    }
    let min = if arm.runs.len() < 2 || reference.runs.len() < 2 {
        SINGLE_RUN_MIN_GAIN
    } else {
        MIN_GAIN
    };
    if slower <= 0.0 || diff / slower < min {
        return Compare::Noise(format!(
            "the difference {:.1}% is below {:.0}%{}",
            100.0 * diff / slower.max(f64::MIN_POSITIVE),
            100.0 * min,
            if min > MIN_GAIN {
                " (one run: no measured spread)"
            } else {
                ""
            }
        ));
    }
    if a < r {
        Compare::Faster { gain: diff / r }
    } else {
        Compare::Slower { loss: diff / a }
    }
}

fn range_text(lo: f64, hi: f64) -> String {
    format!("{}–{}", secs(lo), secs(hi))
}
