//! Mondrian process primitives on an axis-aligned box (spec `mf-classification.md` §2.1).
//!
//! Every random draw the Mondrian tree makes goes through this module: the exponential
//! split time, the split dimension chosen in proportion to the side lengths, the uniform
//! split location on a half-open interval, and the cut that separates a new point from an
//! existing box during online extension (§2.4).

use crate::simd;
use rand::Rng;

/// Feature storage type. Boxes and split locations share it, so routing a training point
/// through a split compares exactly the values the split was drawn between.
pub type Feature = f32;

/// Linear dimension `L = Σ_d (u_d − ℓ_d)` of the box `[lower, upper]` (§1.2).
///
/// Summed in four lanes (lane k takes the sides `d ≡ k mod 4`, then the lanes are added
/// pairwise): a single running sum is a chain of dependent additions, which on wide data
/// made this and the dimension draw ([`sample_side`]) a fifth of a batch fit.
#[inline]
pub fn linear_dimension(lower: &[Feature], upper: &[Feature]) -> f64 {
    let n = lower.len().min(upper.len());
    let mut acc = [0.0f64; 4];
    let mut d = 0;
    while d + 4 <= n {
        let s = sides4(lower, upper, d);
        for (a, s) in acc.iter_mut().zip(s) {
            *a += s;
        }
        d += 4;
    }
    for k in d..n {
        acc[k - d] += side(lower, upper, k);
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

#[inline(always)]
fn side(lower: &[Feature], upper: &[Feature], d: usize) -> f64 {
    f64::from(upper[d]) - f64::from(lower[d])
}

/// The side lengths of features `d..d + 4` (differences of f32 in f64 are exact).
#[inline(always)]
fn sides4(lower: &[Feature], upper: &[Feature], d: usize) -> [f64; 4] {
    let (l, u) = (&lower[d..d + 4], &upper[d..d + 4]);
    [
        f64::from(u[0]) - f64::from(l[0]),
        f64::from(u[1]) - f64::from(l[1]),
        f64::from(u[2]) - f64::from(l[2]),
        f64::from(u[3]) - f64::from(l[3]),
    ]
}

/// Draws a split dimension of the box `[lower, upper]` with probability proportional to
/// its side length (§2.1), never a side of length 0. `total` must be the box's
/// [`linear_dimension`] and positive.
///
/// [`sample_proportional`] over the sides, four at a time: the running sum advances by
/// the sum of four sides and is walked side by side only inside the group where it passes
/// the target, so the chain of dependent additions is a quarter as long.
pub fn sample_side<R: Rng + ?Sized>(
    rng: &mut R,
    lower: &[Feature],
    upper: &[Feature],
    total: f64,
) -> usize {
    let target = rng.gen::<f64>() * total;
    let n = lower.len().min(upper.len());
    let sides = |from: usize, to: usize| (from..to).map(move |k| (k, side(lower, upper, k)));
    let mut cumulative = 0.0;
    let mut last_positive = 0;
    let mut d = 0;
    while d + 4 <= n {
        let s = sides4(lower, upper, d);
        let group = (s[0] + s[1]) + (s[2] + s[3]);
        if group > 0.0 {
            if target < cumulative + group {
                // Rounding may leave the side-by-side sum short of the group's: the last
                // positive side of the group then takes the target.
                return walk_to(target, cumulative, sides(d, d + 4), &mut last_positive)
                    .unwrap_or(last_positive);
            }
            cumulative += group;
            last_positive = d + s.iter().rposition(|&w| w > 0.0).unwrap_or(0);
        }
        d += 4;
    }
    // Rounding may leave the target past the sum: the last positive side wins.
    walk_to(target, cumulative, sides(d, n), &mut last_positive).unwrap_or(last_positive)
}

/// Adds the positive weights to `before` in order until the sum passes `target`, and
/// returns the index of the weight that did; `None` if none did. `last_positive` is left
/// at the last positive weight seen.
#[inline]
fn walk_to(
    target: f64,
    mut before: f64,
    weights: impl Iterator<Item = (usize, f64)>,
    last_positive: &mut usize,
) -> Option<usize> {
    for (d, w) in weights {
        if w > 0.0 {
            before += w;
            *last_positive = d;
            if target < before {
                return Some(d);
            }
        }
    }
    None
}

/// Draws `E ~ Exp(rate)`. Rate 0 gives `+∞` without consuming a draw (§2.1).
#[inline]
pub fn sample_exponential<R: Rng + ?Sized>(rng: &mut R, rate: f64) -> f64 {
    if rate <= 0.0 {
        return f64::INFINITY;
    }
    // U in (0, 1]: gen::<f64>() is in [0, 1), so 1 − U is in (0, 1].
    let u: f64 = 1.0 - rng.gen::<f64>();
    -u.ln() / rate
}

/// Split time offset of a block with linear dimension `linear_dimension`: `Exp(L)`.
#[inline]
pub fn split_time<R: Rng + ?Sized>(rng: &mut R, linear_dimension: f64) -> f64 {
    sample_exponential(rng, linear_dimension)
}

/// Draws an index `d` with probability `weights[d] / Σ weights`, never one of weight 0.
///
/// `total` must equal the sum of the weights and be positive.
pub fn sample_proportional<R: Rng + ?Sized>(
    rng: &mut R,
    weights: impl Iterator<Item = f64> + Clone,
    total: f64,
) -> usize {
    let target = rng.gen::<f64>() * total;
    let mut last_positive = 0;
    // Rounding may leave the target past the cumulative sum: the last positive weight wins.
    walk_to(target, 0.0, weights.enumerate(), &mut last_positive).unwrap_or(last_positive)
}

/// Draws `ξ ~ Uniform[a, b)` for `a < b`, rounded to [`Feature`] and kept inside `[a, b)`.
#[inline]
pub fn sample_uniform_half_open<R: Rng + ?Sized>(rng: &mut R, a: Feature, b: Feature) -> Feature {
    debug_assert!(a < b, "empty split interval [{a}, {b})");
    let (a64, b64) = (f64::from(a), f64::from(b));
    let xi = (a64 + rng.gen::<f64>() * (b64 - a64)) as Feature;
    if xi >= b {
        // Rounding reached the open end: the largest float below b lies in [a, b).
        next_down(b)
    } else if xi < a {
        a
    } else {
        xi
    }
}

/// The largest [`Feature`] strictly below `b` (b finite).
#[inline]
fn next_down(b: Feature) -> Feature {
    if b == 0.0 {
        return -Feature::from_bits(1);
    }
    let bits = b.to_bits();
    if b > 0.0 {
        Feature::from_bits(bits - 1)
    } else {
        Feature::from_bits(bits + 1)
    }
}

/// Rate `η = Σ_d max(ℓ_d − x_d, 0) + max(x_d − u_d, 0)`: the L1 distance from `x` to the box
/// (§2.4 step 1, §4.1). Zero iff `x` lies in the closed box.
///
/// Summed in four lanes, lane k taking the features `d ≡ k mod 4`; the form that runs
/// (portable or SIMD) is chosen at run time and gives the same bits ([`crate::simd`]).
#[inline]
pub fn extension_rate(lower: &[Feature], upper: &[Feature], x: &[Feature]) -> f64 {
    simd::extension_rate(lower, upper, x)
}

/// [`extension_rate`] of `x` against the bounding box of `rows` (at least one, all of
/// `x`'s length), without forming the box: each group of four features takes its minimum
/// and maximum over the rows, then adds to the same lanes as the box would, so the result is
/// bit for bit that of [`extension_rate`] on the box.
#[inline]
pub fn hull_extension_rate(rows: &[&[Feature]], x: &[Feature]) -> f64 {
    simd::hull_extension_rate(rows, x)
}

/// Grows the box `[lower, upper]` to contain `x` (all three of one length).
///
/// The hot loop of batch sampling: every level of a tree passes each of its points through
/// here. Explicit SIMD where the CPU has it ([`crate::simd`]), because the compiler turns
/// the portable form into masked stores that stall the next row's loads.
#[inline]
pub fn grow_box(lower: &mut [Feature], upper: &mut [Feature], x: &[Feature]) {
    debug_assert!(lower.len() == x.len() && upper.len() == x.len());
    simd::grow_box(lower, upper, x)
}

/// A cut separating a new point from an existing box (§2.4 step 3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExtensionCut {
    /// Split dimension δ.
    pub dimension: usize,
    /// Split location ξ.
    pub location: Feature,
    /// True when the new point lies above the box in dimension δ (it goes right).
    pub point_goes_right: bool,
}

/// Draws the cut that separates `x` from the box `[lower, upper]`, given that one occurs:
/// δ ∝ the box's protrusion `e^ℓ_d + e^u_d`, ξ uniform on the gap between box and point.
/// `eta` is [`extension_rate`] and must be positive. The one-point case of
/// [`sample_set_extension_cut`] (a point protrudes on one side only, so no side is drawn).
pub fn sample_extension_cut<R: Rng + ?Sized>(
    rng: &mut R,
    lower: &[Feature],
    upper: &[Feature],
    x: &[Feature],
    eta: f64,
) -> ExtensionCut {
    sample_set_extension_cut(rng, lower, upper, x, x, eta)
}

/// Linear extension `η = Σ_d (ℓ_d − lo_d)⁺ + (hi_d − u_d)⁺` of the box `[lower, upper]`
/// by a set of points with bounding box `[lo, hi]`: the rate of the first cut of the grown
/// box that misses the old one (the set version of [`extension_rate`]).
pub fn set_extension_rate(
    lower: &[Feature],
    upper: &[Feature],
    lo: &[Feature],
    hi: &[Feature],
) -> f64 {
    (0..lower.len())
        .map(|d| protrusion(lower, upper, lo, hi, d))
        .map(|(below, above)| below + above)
        .sum()
}

/// How far `[lo, hi]` protrudes below and above `[lower, upper]` in dimension `d`.
#[inline]
fn protrusion(
    lower: &[Feature],
    upper: &[Feature],
    lo: &[Feature],
    hi: &[Feature],
    d: usize,
) -> (f64, f64) {
    (
        f64::from((lower[d] - lo[d]).max(0.0)),
        f64::from((hi[d] - upper[d]).max(0.0)),
    )
}

/// The cut that separates the points with bounding box `[lo, hi]` from the box
/// `[lower, upper]`, given that one occurs: δ ∝ the protrusion `e^ℓ_d + e^u_d`, ξ uniform on
/// the protruding parts of dimension δ (the side chosen ∝ its length, then uniform within
/// it). `point_goes_right` says that the points beyond the cut lie above the box. `eta` is
/// [`set_extension_rate`] and must be positive.
pub fn sample_set_extension_cut<R: Rng + ?Sized>(
    rng: &mut R,
    lower: &[Feature],
    upper: &[Feature],
    lo: &[Feature],
    hi: &[Feature],
    eta: f64,
) -> ExtensionCut {
    let gaps = (0..lower.len()).map(|d| {
        let (below, above) = protrusion(lower, upper, lo, hi, d);
        below + above
    });
    let dimension = sample_proportional(rng, gaps, eta);
    let (below, above) = protrusion(lower, upper, lo, hi, dimension);
    // Only a dimension protruding on both sides costs a draw for the side.
    let goes_above = if below > 0.0 && above > 0.0 {
        rng.gen::<f64>() * (below + above) >= below
    } else {
        above > 0.0
    };
    if goes_above {
        ExtensionCut {
            dimension,
            location: sample_uniform_half_open(rng, upper[dimension], hi[dimension]),
            point_goes_right: true,
        }
    } else {
        ExtensionCut {
            dimension,
            location: sample_uniform_half_open(rng, lo[dimension], lower[dimension]),
            point_goes_right: false,
        }
    }
}

/// Expected discount `d̄ = E[exp(−γ Δ̃)]` of a branch-off node whose offset Δ̃ is `Exp(η)`
/// truncated to `[0, Δ]` (spec `mf-classification.md` §4.2):
/// `d̄ = η/(η+γ) · expm1(−(η+γ)Δ) / expm1(−ηΔ)`, with `Δ = ∞` giving `η/(η+γ)`.
///
/// Requires `η > 0` and `Δ > 0`; `γ = 0` gives exactly 1.
pub fn expected_discount(eta: f64, gamma: f64, delta: f64) -> f64 {
    debug_assert!(eta > 0.0 && delta > 0.0);
    if gamma == 0.0 {
        return 1.0;
    }
    let ratio = eta / (eta + gamma);
    if delta.is_infinite() {
        return ratio;
    }
    let num = (-(eta + gamma) * delta).exp_m1();
    let den = (-eta * delta).exp_m1();
    if den == 0.0 {
        // ηΔ underflowed below the smallest subnormal: the uniform-on-[0,Δ] limit.
        return -(-gamma * delta).exp_m1() / (gamma * delta);
    }
    ratio * num / den
}

/// [`expected_discount`] from quantities the prediction path already holds:
/// `p_split = −expm1(−ηΔ)` and `discount = exp(−γΔ)`, saving two exponentials per node.
/// Equal to [`expected_discount`] up to rounding.
#[inline]
pub fn expected_discount_given(
    eta: f64,
    gamma: f64,
    delta: f64,
    p_split: f64,
    discount: f64,
) -> f64 {
    if gamma == 0.0 {
        return 1.0;
    }
    let ratio = eta / (eta + gamma);
    if delta.is_infinite() {
        return ratio;
    }
    let rate_time = (eta + gamma) * delta;
    // exp(−(η+γ)Δ) = exp(−ηΔ)·exp(−γΔ); the subtraction is safe once the exponent is
    // not small, below that expm1 keeps the digits.
    let num = if rate_time > 0.5 {
        (1.0 - p_split) * discount - 1.0
    } else {
        (-rate_time).exp_m1()
    };
    if p_split == 0.0 {
        return -(-gamma * delta).exp_m1() / (gamma * delta);
    }
    -ratio * num / p_split
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn expected_discount_reference_values() {
        // Values from spec §4.2 (computed there independently of this code).
        assert!((expected_discount(1.0, 2.0, 0.5) - 0.6581367003).abs() < 1e-9);
        assert!((expected_discount(1.0, 2.0, f64::INFINITY) - 1.0 / 3.0).abs() < 1e-15);
        assert!((expected_discount(3.0, 3.0, 1.0) - 0.5248935342).abs() < 1e-9);
        assert!((expected_discount(1e-12, 2.0, 0.5) - 0.6321205588).abs() < 1e-9);
        assert_eq!(expected_discount(1.0, 0.0, 0.5), 1.0);
    }

    #[test]
    fn expected_discount_matches_quadrature_and_bounds() {
        for &(eta, gamma, delta) in &[
            (0.3, 5.0, 2.0),
            (4.0, 0.1, 0.7),
            (2.0, 2.0, 3.0),
            (1e-6, 10.0, 0.01),
            (50.0, 160.0, 0.2),
        ] {
            // Midpoint rule on the truncated exponential density.
            let n = 200_000;
            let h = delta / n as f64;
            let norm = -(-eta * delta).exp_m1();
            let mut integral = 0.0;
            for i in 0..n {
                let t = (i as f64 + 0.5) * h;
                integral += eta * (-eta * t).exp() / norm * (-gamma * t).exp() * h;
            }
            let d = expected_discount(eta, gamma, delta);
            assert!(
                (d - integral).abs() < 1e-7,
                "{eta} {gamma} {delta}: {d} vs {integral}"
            );
            let lower = (-gamma * delta).exp().max(eta / (eta + gamma));
            assert!(d >= lower - 1e-12 && d <= 1.0 + 1e-12);
            assert!(expected_discount(eta, gamma * 1.5, delta) <= d);
        }
    }

    #[test]
    fn expected_discount_given_agrees() {
        for &(eta, gamma, delta) in &[
            (1.0, 2.0, 0.5),
            (3.0, 3.0, 1.0),
            (1e-12, 2.0, 0.5),
            (0.3, 5.0, 2.0),
            (40.0, 160.0, 0.01),
            (1e-3, 2560.0, 1e-4),
            (7.0, 1.0, 30.0),
        ] {
            let (eta, gamma, delta): (f64, f64, f64) = (eta, gamma, delta);
            let p = -(-eta * delta).exp_m1();
            let d = (-gamma * delta).exp();
            let a = expected_discount(eta, gamma, delta);
            let b = expected_discount_given(eta, gamma, delta, p, d);
            assert!(
                (a - b).abs() <= 1e-12 * a.max(1e-300),
                "{eta} {gamma} {delta}: {a} {b}"
            );
        }
    }

    #[test]
    fn extension_rate_is_the_l1_distance_to_the_box() {
        for n in [1usize, 5, 8, 16, 37, 256] {
            let x: Vec<Feature> = (0..n).map(|i| (i as Feature * 0.71).sin() * 2.0).collect();
            let lower: Vec<Feature> = (0..n).map(|i| (i as Feature * 0.13).cos() - 0.5).collect();
            let upper: Vec<Feature> = lower.iter().map(|v| v + 0.7).collect();
            let exact: f64 = (0..n)
                .map(|i| {
                    let (l, u, v) = (f64::from(lower[i]), f64::from(upper[i]), f64::from(x[i]));
                    (l - v).max(0.0) + (v - u).max(0.0)
                })
                .sum();
            let got = extension_rate(&lower, &upper, &x);
            assert!(
                (got - exact).abs() <= 1e-12 * exact.max(1.0),
                "{n}: {got} vs {exact}"
            );
            assert_eq!(
                crate::simd::portable::extension_rate(&lower, &upper, &x) == 0.0,
                exact == 0.0
            );
            assert_eq!(extension_rate(&lower, &upper, &lower), 0.0);
        }
    }

    /// The distance to the bounding box of a few rows, taken without forming the box, is
    /// bit for bit the distance to the box (1–4 rows, widths with and without a tail of
    /// fewer than four features, points inside, outside and on the faces).
    #[test]
    fn hull_extension_rate_is_the_rate_of_the_bounding_box() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
        for d in [1, 3, 4, 7, 64, 150] {
            for n_rows in 1..=4 {
                for _ in 0..50 {
                    let rows: Vec<Vec<Feature>> = (0..n_rows)
                        .map(|_| {
                            (0..d)
                                .map(|_| rng.gen_range(0..5) as Feature / 4.0)
                                .collect()
                        })
                        .collect();
                    let (mut lower, mut upper) = (rows[0].clone(), rows[0].clone());
                    for r in &rows[1..] {
                        grow_box(&mut lower, &mut upper, r);
                    }
                    let refs: Vec<&[Feature]> = rows.iter().map(Vec::as_slice).collect();
                    let x: Vec<Feature> = (0..d)
                        .map(|k| match rng.gen_range(0..3) {
                            0 => rows[0][k],
                            _ => rng.gen_range(-0.5..1.5),
                        })
                        .collect();
                    assert_eq!(
                        hull_extension_rate(&refs, &x).to_bits(),
                        extension_rate(&lower, &upper, &x).to_bits(),
                        "D = {d}, {n_rows} rows"
                    );
                }
            }
        }
    }

    #[test]
    fn grow_box_is_elementwise_min_max() {
        for n in [1usize, 7, 16, 17, 33, 256] {
            let x: Vec<Feature> = (0..n).map(|i| (i as Feature * 0.37).sin()).collect();
            let mut lower: Vec<Feature> = (0..n).map(|i| (i as Feature * 0.11).cos()).collect();
            let mut upper: Vec<Feature> = lower.iter().map(|v| v + 0.5).collect();
            let (l0, u0) = (lower.clone(), upper.clone());
            grow_box(&mut lower, &mut upper, &x);
            for i in 0..n {
                assert_eq!(lower[i], l0[i].min(x[i]));
                assert_eq!(upper[i], u0[i].max(x[i]));
            }
        }
    }

    #[test]
    fn uniform_half_open_stays_inside() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let (a, b) = (1.0f32, 1.0f32 + f32::EPSILON);
        for _ in 0..1000 {
            let x = sample_uniform_half_open(&mut rng, a, b);
            assert!(x >= a && x < b);
        }
        assert!(next_down(0.0) < 0.0);
        assert!(next_down(-1.0) < -1.0);
        assert!(next_down(1.0) < 1.0);
    }

    #[test]
    fn proportional_never_picks_zero_weight() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let w = [0.0, 1.0, 0.0, 3.0, 0.0];
        let mut counts = [0usize; 5];
        for _ in 0..40_000 {
            counts[sample_proportional(&mut rng, w.iter().copied(), 4.0)] += 1;
        }
        assert_eq!(counts[0] + counts[2] + counts[4], 0);
        // Binomial(40000, 1/4): sd ≈ 86.6; 5 sd band.
        assert!((counts[1] as f64 - 10_000.0).abs() < 5.0 * 86.6);
    }

    #[test]
    fn exponential_rate_zero_is_infinite() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        assert!(sample_exponential(&mut rng, 0.0).is_infinite());
        assert!(sample_exponential(&mut rng, 2.0).is_finite());
    }
}
