//! Sample weights and online bagging: how many copies of a training row each tree takes.
//!
//! A tree holds a point as many times as its multiplicity (its id repeated in its leaf), and
//! every road of growth, deletion and statistics counts the copies, so a row of integer
//! weight k is exactly k copies of the row. Without bagging a tree takes k; with bagging each
//! copy takes its own Poisson(1) (spec `bayesian-trees.md` §6.2), so the tree takes
//! Poisson(k). A fractional weight w is taken `⌊w⌋ + Bernoulli(w − ⌊w⌋)` times without
//! bagging (unbiased random rounding) and Poisson(w) times with it: the expected count is w
//! either way. Every draw comes from a counter-based generator keyed by (seed, tree, point
//! id), so it depends on nothing else: not the thread count, not the other rows, not the
//! order trees are grown in (a forest given more trees later draws for them what a larger
//! forest would have).

use super::mix64;
use crate::data::{FeatureValue, Rows};
use crate::error::{MondrianError, Result};

/// Largest sample weight. A row of weight w is held about w times by every tree (its id
/// repeated in its leaf), so memory grows with the weights' sum.
pub const MAX_SAMPLE_WEIGHT: f64 = 1_048_576.0;

/// Largest Poisson mean drawn by one inversion; larger means add independent pieces.
const POISSON_PIECE: f64 = 16.0;

/// Key of the bagging draws (the first piece of a Poisson count).
const BAGGING_SALT: u64 = 0x5851_f42d_4c95_7f2d;
/// Key of the rounding of fractional weights.
const ROUNDING_SALT: u64 = 0x2545_f491_4f6c_dd1d;

/// Checks sample weights: one per row, each finite, ≥ 0 and at most [`MAX_SAMPLE_WEIGHT`].
pub fn check_sample_weights(weights: &[f64], n_rows: usize) -> Result<()> {
    if weights.len() != n_rows {
        return Err(MondrianError::SampleWeightLength {
            n_rows,
            n_weights: weights.len(),
        });
    }
    match weights
        .iter()
        .position(|w| !(w.is_finite() && (0.0..=MAX_SAMPLE_WEIGHT).contains(w)))
    {
        Some(row) => Err(MondrianError::InvalidSampleWeight {
            row,
            value: weights[row],
            max: MAX_SAMPLE_WEIGHT,
        }),
        None => Ok(()),
    }
}

/// A uniform on [0, 1) that depends only on `(seed, salt, tree, example)`.
fn unit(seed: u64, salt: u64, tree: usize, example: u64) -> f64 {
    let h = mix64(
        mix64(seed ^ salt) ^ mix64(tree as u64) ^ example.wrapping_mul(0xa076_1d64_78bd_642f),
    );
    (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// `k ~ Poisson(mean)` by inversion of the uniform `u` (mean at most [`POISSON_PIECE`]).
fn poisson_inverse(u: f64, mean: f64) -> u32 {
    // The walk stops where the CDF's tail is far below the uniform's resolution (30 for
    // mean 1, as before weights existed).
    let cap = if mean <= 1.0 {
        30
    } else {
        30 + (4.0 * mean) as u32
    };
    // P(k) = e^{-mean} mean^k / k!; walk the CDF.
    let mut p = (-mean).exp();
    let mut cdf = p;
    let mut k = 0u32;
    while u >= cdf && k < cap {
        k += 1;
        p *= mean / f64::from(k);
        cdf += p;
    }
    k
}

/// Online-bagging multiplicity `k ~ Poisson(1)` of example `example` in tree `tree`
/// (spec `bayesian-trees.md` §6.2), drawn by inversion from a uniform that depends only on
/// `(seed, tree, example)`.
pub fn poisson_weight(seed: u64, tree: usize, example: u64) -> u32 {
    poisson_count(seed, tree, example, 1.0)
}

/// `k ~ Poisson(mean)` for example `example` in tree `tree`: the sum of independent
/// Poisson pieces of mean at most 16, each drawn by inversion from its own keyed uniform
/// (the first piece from the uniform of [`poisson_weight`]).
pub fn poisson_count(seed: u64, tree: usize, example: u64, mean: f64) -> u32 {
    let mut left = mean;
    let mut k = 0u32;
    let mut piece = 0u64;
    while left > 0.0 {
        let m = left.min(POISSON_PIECE);
        let salt = BAGGING_SALT ^ piece.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        k = k.saturating_add(poisson_inverse(unit(seed, salt, tree, example), m));
        left -= m;
        piece += 1;
    }
    k
}

/// How many copies of the example with id `example` and sample weight `weight` tree `tree`
/// takes (see the module's documentation): `weight` itself for an integer weight without
/// bagging, its random rounding for a fractional one, Poisson(`weight`) with bagging.
pub fn multiplicity(seed: u64, tree: usize, example: u64, weight: f64, bagging: bool) -> u32 {
    if bagging {
        return poisson_count(seed, tree, example, weight);
    }
    let whole = weight.floor();
    let frac = weight - whole;
    let up = frac > 0.0 && unit(seed, ROUNDING_SALT, tree, example) < frac;
    whole as u32 + u32::from(up)
}

/// The rows of a call whose weight is not 0, with their targets and weights, when some
/// row has weight 0 (`None` otherwise): what a first training call fixes (the scaling,
/// learnt feature weights, calibration) comes from these alone, as if the others had not
/// been given.
pub(crate) fn drop_zero_weights<T: FeatureValue, Y: Copy>(
    rows: &Rows<T>,
    y: &[Y],
    weights: Option<&[f64]>,
) -> Option<(Vec<T>, Vec<Y>, Vec<f64>)> {
    let w = weights.filter(|w| w.contains(&0.0))?;
    let keep = || (0..rows.n_rows()).filter(|&i| w[i] > 0.0);
    Some((
        keep().flat_map(|i| rows.row(i).iter().copied()).collect(),
        keep().map(|i| y[i]).collect(),
        keep().map(|i| w[i]).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// χ² statistic of draws `ks` against Poisson(mean), binned as k ≤ lo, each k
    /// strictly between, and k ≥ hi (hi − lo + 1 bins, every expected count large).
    fn poisson_chi2(ks: impl Iterator<Item = u32>, mean: f64, lo: u32, hi: u32) -> f64 {
        let bins = (hi - lo + 1) as usize;
        let bin = |k: u32| (k.clamp(lo, hi) - lo) as usize;
        let mut counts = vec![0f64; bins];
        for k in ks {
            counts[bin(k)] += 1.0;
        }
        let n: f64 = counts.iter().sum();
        let mut probs = vec![0f64; bins];
        let mut p = (-mean).exp();
        for k in 0..hi {
            probs[bin(k)] += p;
            p *= mean / f64::from(k + 1);
        }
        probs[bins - 1] = 1.0 - probs[..bins - 1].iter().sum::<f64>();
        counts
            .iter()
            .zip(&probs)
            .map(|(&o, &p)| (o - p * n).powi(2) / (p * n))
            .sum()
    }

    #[test]
    fn poisson_weights_follow_poisson_one() {
        // Chi-square goodness of fit for k = 0..4 and ≥ 5 over 200k draws, α = 1e-3
        // (critical value of χ²₅ is 20.52).
        let chi2 = poisson_chi2((0..200_000u64).map(|e| poisson_weight(7, 3, e)), 1.0, 0, 5);
        assert!(chi2 < 20.52, "chi2 = {chi2}");
    }

    #[test]
    fn poisson_counts_follow_their_mean_across_pieces() {
        // Means within one piece (3), exactly one (16) and over three (37.5), 100k draws
        // each, bins chosen so every expected count is at least 300. α = 1e-3: χ²₉ 27.88,
        // χ²₂₀ 45.31, χ²₃₂ 62.49.
        for (mean, lo, hi, critical) in [
            (3.0, 0, 9, 27.88),
            (16.0, 6, 26, 45.31),
            (37.5, 22, 54, 62.49),
        ] {
            let draws = (0..100_000u64).map(|e| poisson_count(11, 2, e, mean));
            let chi2 = poisson_chi2(draws, mean, lo, hi);
            assert!(chi2 < critical, "mean {mean}: chi2 = {chi2}");
        }
    }

    #[test]
    fn rounding_is_unbiased_and_integers_are_exact() {
        // Weight 2.3 without bagging: 2 or 3, with P(3) = 0.3; over 100k draws the share
        // of 3s has sd √(0.3·0.7/1e5) = 0.00145, so ±0.0075 is more than 5 sd.
        let n = 100_000u64;
        let threes = (0..n)
            .map(|e| multiplicity(5, 1, e, 2.3, false))
            .inspect(|&k| assert!(k == 2 || k == 3))
            .filter(|&k| k == 3)
            .count() as f64;
        assert!((threes / n as f64 - 0.3).abs() < 0.0075, "{threes}");
        for w in [0.0, 1.0, 4.0, 1000.0] {
            assert!((0..1000).all(|e| multiplicity(5, 1, e, w, false) == w as u32));
        }
        // Weight 1 with bagging is the Poisson(1) draw of bagging without weights.
        assert!((0..1000).all(|e| multiplicity(9, 4, e, 1.0, true) == poisson_weight(9, 4, e)));
        assert!((0..1000).all(|e| multiplicity(9, 4, e, 0.0, true) == 0));
    }

    #[test]
    fn bad_weights_are_refused() {
        assert!(check_sample_weights(&[1.0, 0.0, 2.5], 3).is_ok());
        for bad in [-1.0, f64::NAN, f64::INFINITY, MAX_SAMPLE_WEIGHT * 2.0] {
            let e = check_sample_weights(&[1.0, bad], 2).unwrap_err();
            assert!(
                matches!(e, MondrianError::InvalidSampleWeight { row: 1, .. }),
                "{e}"
            );
        }
        assert!(matches!(
            check_sample_weights(&[1.0], 2),
            Err(MondrianError::SampleWeightLength { .. })
        ));
    }
}
