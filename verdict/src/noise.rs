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

/// Runs each arm needs before the rank test replaces the range rule: with 4 against 4 the
/// test can separate arms with one pair of runs out of order (p = 2/70); with fewer runs the
/// stricter range rule keeps its half-range guard against one wild run.
pub const RANK_MIN_RUNS: usize = 4;

/// The one-sided rank-sum p at or below which two arms' runs separate.
pub const RANK_P: f64 = 0.05;

/// Compares `arm` with `reference`. With [`RANK_MIN_RUNS`] runs or more in each, a difference
/// counts when the runs' ranks separate the arms (exact one-sided Mann–Whitney p ≤ [`RANK_P`])
/// and the medians differ by at least [`MIN_GAIN`] of the slower one: one lucky run of a
/// bimodal arm (random loss, an early timeout) then no longer hides a difference the other
/// runs all show. With fewer runs, the two arms' run ranges must not overlap, the difference
/// of medians must exceed each arm's half-range and reach [`MIN_GAIN`]
/// ([`SINGLE_RUN_MIN_GAIN`] when an arm has one run). Both arms must have been measured.
pub fn compare(arm: &ArmObs, reference: &ArmObs) -> Compare {
    if arm.runs.len() >= RANK_MIN_RUNS && reference.runs.len() >= RANK_MIN_RUNS {
        return compare_ranks(arm, reference);
    }
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

/// [`compare`] for arms with enough runs: the rank test, then the minimum gain.
fn compare_ranks(arm: &ArmObs, reference: &ArmObs) -> Compare {
    let (Some(a), Some(r)) = (arm.median_s(), reference.median_s()) else {
        return Compare::Noise("not measured".into());
    };
    let xs: Vec<f64> = arm.runs.iter().map(|r| r.seconds).collect();
    let ys: Vec<f64> = reference.runs.iter().map(|r| r.seconds).collect();
    // The direction the medians point to is the one tested.
    let p = if a < r {
        rank_sum_p(&xs, &ys)
    } else {
        rank_sum_p(&ys, &xs)
    };
    if p > RANK_P {
        return Compare::Noise(format!(
            "the runs' ranks do not separate them: one-sided rank-sum p = {p:.3} over {} and {} runs, above {RANK_P}",
            xs.len(),
            ys.len()
        ));
    }
    let diff = (r - a).abs();
    let slower = a.max(r);
    if slower <= 0.0 || diff / slower < MIN_GAIN {
        return Compare::Noise(format!(
            "the difference {:.1}% is below {:.0}% (rank-sum p = {p:.3})",
            100.0 * diff / slower.max(f64::MIN_POSITIVE),
            100.0 * MIN_GAIN
        ));
    }
    if a < r {
        Compare::Faster { gain: diff / r }
    } else {
        Compare::Slower { loss: diff / a }
    }
}

/// The exact one-sided Mann–Whitney p that `fast`'s runs are shorter than `slow`'s: the
/// chance, with every ordering of the runs equally likely, of at most as many pairs in which
/// `fast`'s run is the longer (a tie counts as such a pair: the test stays conservative).
pub fn rank_sum_p(fast: &[f64], slow: &[f64]) -> f64 {
    let (n, m) = (fast.len(), slow.len());
    if n == 0 || m == 0 {
        return 1.0;
    }
    let u = fast
        .iter()
        .map(|x| slow.iter().filter(|y| x >= *y).count())
        .sum::<usize>();
    // ways[i][j][k]: orderings of i runs of one and j of the other with k such pairs. The
    // longest of the i + j runs is either one of the i (longer than all j: k gains j) or not.
    let max = n * m;
    let mut ways = vec![vec![vec![0f64; max + 1]; m + 1]; n + 1];
    for (i, row) in ways.iter_mut().enumerate() {
        for (j, cell) in row.iter_mut().enumerate() {
            if i == 0 || j == 0 {
                cell[0] = 1.0;
            }
        }
    }
    for i in 1..=n {
        for j in 1..=m {
            for k in 0..=i * j {
                let with_i = if k >= j { ways[i - 1][j][k - j] } else { 0.0 };
                ways[i][j][k] = with_i + ways[i][j - 1][k];
            }
        }
    }
    let all: f64 = ways[n][m].iter().sum();
    ways[n][m][..=u].iter().sum::<f64>() / all
}

fn range_text(lo: f64, hi: f64) -> String {
    format!("{}–{}", secs(lo), secs(hi))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::obs::ArmKind;

    fn arm(times: &[f64]) -> ArmObs {
        ArmObs::with_seconds(ArmKind::Base, &[], times)
    }

    #[test]
    fn the_rank_sum_p_is_exact_for_small_samples() {
        // 3 against 3, fully separated: 1 ordering of 20.
        assert!((rank_sum_p(&[1.0, 1.1, 1.2], &[2.0, 2.1, 2.2]) - 0.05).abs() < 1e-12);
        // 4 against 4, one pair out of order: 2 orderings of 70.
        let p = rank_sum_p(&[1.0, 1.1, 1.2, 2.05], &[2.0, 2.1, 2.2, 2.3]);
        assert!((p - 2.0 / 70.0).abs() < 1e-12, "{p}");
        // The wrong direction is never significant.
        assert!(rank_sum_p(&[2.0, 2.1, 2.2], &[1.0, 1.1, 1.2]) > 0.9);
    }

    #[test]
    fn one_lucky_base_run_no_longer_hides_a_gain_the_other_runs_show() {
        // A CUBIC base under random loss: one run without an early loss, the rest slow. Six
        // runs each: with one pair out of order, p = 30/924.
        let base = arm(&[0.47, 1.0, 1.2, 1.6, 1.1, 0.9]);
        let bbr = arm(&[0.51, 0.5, 0.52, 0.49, 0.5, 0.53]);
        match compare(&bbr, &base) {
            Compare::Faster { gain } => assert!(gain > 0.4, "{gain}"),
            other => panic!("{other:?}"),
        }
        // With two runs the range rule still holds: the lucky run overlaps.
        assert!(matches!(
            compare(&arm(&[0.51, 0.5]), &arm(&[0.47, 1.6])),
            Compare::Noise(_)
        ));
        // Interleaved runs stay noise.
        let p = compare(&arm(&[1.0, 1.2, 0.9, 1.05]), &arm(&[1.1, 0.95, 1.15, 1.0]));
        assert!(
            matches!(p, Compare::Noise(ref w) if w.contains("rank-sum")),
            "{p:?}"
        );
    }
}
