//! How far to trust a median: quartiles, a distribution-free interval for the median, a
//! bootstrap interval for a ratio of medians, outliers, and the Mann–Whitney rank test.
//! Pure and deterministic (the bootstrap draws from a fixed-seed generator), so the same
//! runs.csv always gives the same medians.csv.
//!
//! Methods, as docs/sweep.md names them:
//! - quartiles: linear interpolation between order statistics (R's type 7, numpy's default);
//! - median interval: order statistics x(k) … x(n+1−k), the narrowest pair whose binomial
//!   coverage is at least 95%; with 5 runs or fewer no pair reaches 95%, so the interval is
//!   min … max and [`MedianInterval::coverage`] says what it covers (93.75% for 5 runs);
//! - ratio interval: percentile bootstrap, 10,000 resamples of each side, 2.5% and 97.5%;
//! - outliers: outside Tukey's fences (1.5 × IQR beyond the quartiles);
//! - rank test: two-sided Mann–Whitney U, exact distribution without ties for up to 30 runs a
//!   side, otherwise the normal approximation with tie correction.

/// Sorted copy, NaNs dropped.
fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(|a, b| a.total_cmp(b));
    s
}

/// The p-quantile (0 ≤ p ≤ 1) by linear interpolation (type 7).
pub fn quantile(v: &[f64], p: f64) -> Option<f64> {
    let s = sorted(v);
    if s.is_empty() {
        return None;
    }
    let h = (s.len() - 1) as f64 * p.clamp(0.0, 1.0);
    let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
    Some(s[lo] + (h - lo as f64) * (s[hi] - s[lo]))
}

pub fn median(v: &[f64]) -> Option<f64> {
    quantile(v, 0.5)
}

/// First and third quartiles.
pub fn quartiles(v: &[f64]) -> Option<(f64, f64)> {
    Some((quantile(v, 0.25)?, quantile(v, 0.75)?))
}

/// A distribution-free interval for the median and the probability it covers it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MedianInterval {
    pub low: f64,
    pub high: f64,
    pub coverage: f64,
}

/// P(Binomial(n, ½) ≤ k).
fn binomial_half_cdf(n: usize, k: usize) -> f64 {
    let mut term = 0.5f64.powi(n as i32); // C(n, 0) / 2^n
    let mut sum = 0.0;
    for i in 0..=k.min(n) {
        sum += term;
        term = term * (n - i) as f64 / (i + 1) as f64;
    }
    sum
}

/// The order-statistics interval for the median (see the module's methods).
pub fn median_interval(v: &[f64]) -> Option<MedianInterval> {
    let s = sorted(v);
    let n = s.len();
    if n == 0 {
        return None;
    }
    // x(k) … x(n+1−k) (1-based) covers the median with probability 1 − 2·P(B ≤ k−1).
    let mut best = MedianInterval {
        low: s[0],
        high: s[n - 1],
        coverage: 1.0 - 2.0 * binomial_half_cdf(n, 0),
    };
    for k in 2..=n.div_ceil(2) {
        let coverage = 1.0 - 2.0 * binomial_half_cdf(n, k - 1);
        if coverage < 0.95 {
            break;
        }
        best = MedianInterval {
            low: s[k - 1],
            high: s[n - k],
            coverage,
        };
    }
    Some(best)
}

/// Runs outside Tukey's fences.
pub fn outliers(v: &[f64]) -> usize {
    let Some((q1, q3)) = quartiles(v) else {
        return 0;
    };
    let fence = 1.5 * (q3 - q1);
    v.iter()
        .filter(|&&x| x < q1 - fence || x > q3 + fence)
        .count()
}

/// SplitMix64: a small, fixed generator, so the bootstrap gives the same bytes on every
/// machine and with every version of the `rand` crate.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64 * n as f64) as usize
    }
}

pub const BOOTSTRAP_RESAMPLES: usize = 10_000;

/// A 95% percentile-bootstrap interval for `median(numerator) / median(denominator)`.
pub fn ratio_of_medians_interval(numerator: &[f64], denominator: &[f64]) -> Option<(f64, f64)> {
    let (a, b) = (sorted(numerator), sorted(denominator));
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut rng = SplitMix64(0x05EE_D0F5_A0A1);
    let mut ratios = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    let (mut ra, mut rb) = (vec![0.0; a.len()], vec![0.0; b.len()]);
    for _ in 0..BOOTSTRAP_RESAMPLES {
        for x in ra.iter_mut() {
            *x = a[rng.below(a.len())];
        }
        for x in rb.iter_mut() {
            *x = b[rng.below(b.len())];
        }
        let (ma, mb) = (median(&ra)?, median(&rb)?);
        if mb > 0.0 {
            ratios.push(ma / mb);
        }
    }
    Some((quantile(&ratios, 0.025)?, quantile(&ratios, 0.975)?))
}

/// What a ratio-of-medians interval covers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RatioCoverage {
    /// The bootstrap's nominal 95%.
    Nominal95,
    /// With few runs the bootstrap can only return the runs' extremes (min ÷ max … max ÷ min):
    /// that interval holds the true ratio at least when each side's min … max holds its
    /// median, (1 − 2·½ⁿ) per side: 56% for 3 runs against 3.
    AtLeast(f64),
}

impl RatioCoverage {
    /// "95%", or "≥ 56%".
    pub fn text(self) -> String {
        match self {
            RatioCoverage::Nominal95 => "95%".into(),
            RatioCoverage::AtLeast(c) => format!("≥ {:.0}%", c * 100.0),
        }
    }
}

/// The coverage of [`ratio_of_medians_interval`]`(numerator, denominator)` = `ci`.
pub fn ratio_interval_coverage(
    numerator: &[f64],
    denominator: &[f64],
    ci: (f64, f64),
) -> RatioCoverage {
    let (a, b) = (sorted(numerator), sorted(denominator));
    let (Some(a0), Some(a1), Some(b0), Some(b1)) = (a.first(), a.last(), b.first(), b.last())
    else {
        return RatioCoverage::Nominal95;
    };
    let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * y.abs().max(1e-12);
    if *b0 > 0.0 && close(ci.0, a0 / b1) && close(ci.1, a1 / b0) {
        let side = |n: usize| 1.0 - 2.0 * 0.5f64.powi(n as i32);
        RatioCoverage::AtLeast(side(a.len()) * side(b.len()))
    } else {
        RatioCoverage::Nominal95
    }
}

/// The smallest two-sided p the exact Mann–Whitney test can give for `m` runs against `n`:
/// complete separation, 2 / C(m + n, m) (0.1 for 3 against 3).
pub fn smallest_rank_test_p(m: usize, n: usize) -> f64 {
    let mut c = 1.0f64;
    for i in 0..m.min(n) {
        c = c * (m + n - i) as f64 / (i + 1) as f64;
    }
    (2.0 / c).min(1.0)
}

/// The two-sided Mann–Whitney U test of two samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankTest {
    /// U of the first sample (the number of pairs in which it is larger, ties counting ½).
    pub u: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Whether p comes from the exact distribution (no ties, ≤ 30 a side).
    pub exact: bool,
}

/// Counts of rank sums: `ways[m][s]` = subsets of size m of {1..n} with rank sum
/// `s + m(m+1)/2`, i.e. the exact distribution of U for sizes (m, n − m).
fn exact_u_distribution(m: usize, n: usize) -> Vec<f64> {
    // f[j][u]: ways to choose j of the first i items with U = u, built item by item.
    let max_u = m * n;
    let mut f = vec![vec![0.0f64; max_u + 1]; m + 1];
    f[0][0] = 1.0;
    for i in 0..(m + n) {
        for j in (1..=m.min(i + 1)).rev() {
            // Item i (0-based) chosen as the j-th of the first sample: it exceeds the
            // (i − (j − 1)) items of the second sample placed before it.
            let gain = i + 1 - j;
            if gain > n {
                continue;
            }
            for u in (gain..=max_u).rev() {
                f[j][u] += f[j - 1][u - gain];
            }
        }
    }
    f.swap_remove(m)
}

fn normal_sf(z: f64) -> f64 {
    // Abramowitz–Stegun 7.1.26 for erfc, |error| < 1.5e-7: plenty for a p-value.
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erfc = poly * (-x * x).exp();
    let erfc = if x >= 0.0 { erfc } else { 2.0 - erfc };
    erfc / 2.0
}

pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<RankTest> {
    let (a, b) = (sorted(a), sorted(b));
    let (m, n) = (a.len(), b.len());
    if m == 0 || n == 0 {
        return None;
    }
    let mut u = 0.0;
    for x in &a {
        for y in &b {
            u += if x > y {
                1.0
            } else if x == y {
                0.5
            } else {
                0.0
            };
        }
    }
    // Ranks of the pooled sample, for the tie correction.
    let mut pooled: Vec<f64> = a.iter().chain(b.iter()).copied().collect();
    pooled.sort_by(|x, y| x.total_cmp(y));
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < pooled.len() {
        let mut j = i;
        while j + 1 < pooled.len() && pooled[j + 1] == pooled[i] {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    let mean = (m * n) as f64 / 2.0;
    if tie_term == 0.0 && m <= 30 && n <= 30 {
        let ways = exact_u_distribution(m, n);
        let total: f64 = ways.iter().sum();
        // Two-sided: the probability of a U at least as far from the mean as this one.
        let dist = (u - mean).abs();
        let p: f64 = ways
            .iter()
            .enumerate()
            .filter(|(k, _)| (*k as f64 - mean).abs() >= dist - 1e-9)
            .map(|(_, w)| w)
            .sum::<f64>()
            / total;
        return Some(RankTest {
            u,
            p: p.min(1.0),
            exact: true,
        });
    }
    let nn = (m + n) as f64;
    let var = (m * n) as f64 / 12.0 * ((nn + 1.0) - tie_term / (nn * (nn - 1.0)));
    let p = if var <= 0.0 {
        1.0
    } else {
        // Continuity correction of ½ towards the mean.
        let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
        (2.0 * normal_sf(z)).min(1.0)
    };
    Some(RankTest { u, p, exact: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(median(&v), Some(2.5));
        assert_eq!(quartiles(&v), Some((1.75, 3.25)));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn median_interval_by_order_statistics() {
        // Five runs: no pair reaches 95%, so min … max, covering 1 − 2/32.
        let i = median_interval(&[5.0, 1.0, 4.0, 2.0, 3.0]).unwrap();
        assert_eq!((i.low, i.high), (1.0, 5.0));
        assert!((i.coverage - 0.9375).abs() < 1e-12);
        // Ten runs: x(2) … x(9) covers 97.9%; x(3) … x(8) only 89.1%.
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let i = median_interval(&v).unwrap();
        assert_eq!((i.low, i.high), (2.0, 9.0));
        assert!((i.coverage - 0.978_515_625).abs() < 1e-9);
    }

    #[test]
    fn outliers_by_tukey_fences() {
        assert_eq!(outliers(&[10.0, 10.1, 9.9, 10.0, 30.0]), 1);
        assert_eq!(outliers(&[10.0, 10.1, 9.9, 10.0, 10.2]), 0);
    }

    #[test]
    fn ratio_interval_contains_the_ratio_and_repeats() {
        let a = [10.0, 11.0, 9.0, 10.5, 9.5];
        let b = [5.0, 5.5, 4.5, 5.2, 4.8];
        let (lo, hi) = ratio_of_medians_interval(&a, &b).unwrap();
        assert!(lo <= 2.0 && 2.0 <= hi, "{lo} {hi}");
        assert_eq!(ratio_of_medians_interval(&a, &b), Some((lo, hi)));
        // A sample against itself: the interval holds 1.
        let (lo, hi) = ratio_of_medians_interval(&a, &a).unwrap();
        assert!(lo <= 1.0 && 1.0 <= hi);
    }

    #[test]
    fn a_three_run_bootstrap_interval_is_the_extremes_and_says_its_coverage() {
        let a = [10.0, 11.0, 12.0];
        let b = [5.0, 6.0, 7.0];
        let ci = ratio_of_medians_interval(&a, &b).unwrap();
        assert!((ci.0 - 10.0 / 7.0).abs() < 1e-12 && (ci.1 - 12.0 / 5.0).abs() < 1e-12);
        let cov = ratio_interval_coverage(&a, &b, ci);
        assert_eq!(cov, RatioCoverage::AtLeast(0.5625));
        assert_eq!(cov.text(), "≥ 56%");
        // Ten runs a side: the bootstrap's own quantiles.
        let a: Vec<f64> = (0..10).map(|i| 10.0 + i as f64).collect();
        let ci = ratio_of_medians_interval(&a, &a).unwrap();
        assert_eq!(
            ratio_interval_coverage(&a, &a, ci),
            RatioCoverage::Nominal95
        );
        assert!((smallest_rank_test_p(3, 3) - 0.1).abs() < 1e-12);
        assert!((smallest_rank_test_p(5, 5) - 2.0 / 252.0).abs() < 1e-12);
    }

    #[test]
    fn mann_whitney_exact_and_normal() {
        // Identical samples: U at its mean, p = 1.
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let t = mann_whitney(&a, &a).unwrap();
        assert_eq!(t.u, 12.5);
        assert!(t.p > 0.99, "{t:?}");
        // Complete separation of 5 against 5: p = 2 / C(10, 5) = 2/252.
        let b = [6.0, 7.0, 8.0, 9.0, 10.0];
        let t = mann_whitney(&a, &b).unwrap();
        assert!(t.exact);
        assert_eq!(t.u, 0.0);
        assert!((t.p - 2.0 / 252.0).abs() < 1e-12, "{t:?}");
        // 3 against 4, one interleaving: U = 2 of 12; exact P(|U − 6| ≥ 4) = 2·P(U ≤ 2) =
        // 2 · 4/35.
        let t = mann_whitney(&[1.0, 2.0, 5.0], &[3.0, 4.0, 6.0, 7.0]).unwrap();
        assert_eq!(t.u, 2.0);
        assert!((t.p - 8.0 / 35.0).abs() < 1e-12, "{t:?}");
        // Ties: the normal approximation.
        let t = mann_whitney(&[1.0, 1.0, 2.0], &[1.0, 2.0, 2.0]).unwrap();
        assert!(!t.exact && t.p > 0.3);
    }
}
