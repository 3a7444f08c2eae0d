//! The random variates BART draws beyond uniforms (spec `bayesian-trees.md` §4.3): normal
//! leaf values, the inverse-gamma noise variance, and the truncated normal latent
//! variables of the probit classifier. The library depends on `rand` alone, so these are
//! written out here from their textbook algorithms.

use rand::Rng;

use crate::bayes::special::regularized_gamma_p;
use crate::stats::gaussian::erfcc_series;

/// A standard normal variate (Box–Muller; 1 − u keeps the logarithm's argument in (0, 1]).
pub(crate) fn standard_normal<R: Rng>(rng: &mut R) -> f64 {
    let u = 1.0 - rng.gen::<f64>();
    let v = rng.gen::<f64>();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// A Gamma(shape, 1) variate, shape > 0 (Marsaglia & Tsang 2000; shape < 1 by
/// Gamma(shape + 1) · U^(1/shape)).
pub(crate) fn gamma<R: Rng>(shape: f64, rng: &mut R) -> f64 {
    if shape < 1.0 {
        let boost = (1.0 - rng.gen::<f64>()).powf(1.0 / shape);
        return gamma(shape + 1.0, rng) * boost;
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = standard_normal(rng);
        let v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        let v = v * v * v;
        let u = 1.0 - rng.gen::<f64>();
        if u < 1.0 - 0.0331 * x * x * x * x || u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
            return d * v;
        }
    }
}

/// An inverse-gamma IG(shape, scale) variate: scale / Gamma(shape, 1), the density
/// ∝ s^(−shape−1) e^(−scale/s).
pub(crate) fn inverse_gamma<R: Rng>(shape: f64, scale: f64, rng: &mut R) -> f64 {
    scale / gamma(shape, rng)
}

/// Z ~ N(0, 1) conditioned on Z > a (Robert 1995): plain rejection from the normal when
/// a < 0.45 (acceptance ≥ 1/3), else the optimal translated-exponential proposal.
pub(crate) fn normal_above<R: Rng>(a: f64, rng: &mut R) -> f64 {
    if a < 0.45 {
        loop {
            let z = standard_normal(rng);
            if z > a {
                return z;
            }
        }
    }
    let rate = 0.5 * (a + (a * a + 4.0).sqrt());
    loop {
        let z = a - (1.0 - rng.gen::<f64>()).ln() / rate;
        let d = z - rate;
        if rng.gen::<f64>() < (-0.5 * d * d).exp() {
            return z;
        }
    }
}

/// The standard normal distribution function Φ(x), from erf(t) = P(½, t²) (to about
/// 1e-12 absolute).
pub fn normal_cdf(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    let p = regularized_gamma_p(0.5, 0.5 * x * x);
    if x >= 0.0 {
        0.5 + 0.5 * p
    } else {
        0.5 - 0.5 * p
    }
}

/// erfc(z) for z ≥ 0 with relative error below 1.2e-7 everywhere, tails included
/// (Numerical Recipes' Chebyshev-fitted `erfcc`), as log erfc(z).
fn log_erfc_nonnegative(z: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -1.265_512_23 + erfcc_series(t);
    t.ln() - z * z + poly
}

/// log Φ(x) without underflow in the lower tail (relative accuracy 1.2e-7 on Φ).
pub(crate) fn log_normal_cdf(x: f64) -> f64 {
    let z = x.abs() * std::f64::consts::FRAC_1_SQRT_2;
    let log_half_erfc = log_erfc_nonnegative(z) - std::f64::consts::LN_2;
    if x < 0.0 {
        log_half_erfc
    } else {
        (-log_half_erfc.exp()).ln_1p()
    }
}

/// Φ(x) to a relative accuracy of 1.2e-7, at the cost of one exponential: for the inner
/// loops of predictive quantiles and probabilities.
pub(crate) fn normal_cdf_fast(x: f64) -> f64 {
    let z = x.abs() * std::f64::consts::FRAC_1_SQRT_2;
    let half_erfc = 0.5 * log_erfc_nonnegative(z).exp();
    if x < 0.0 {
        half_erfc
    } else {
        1.0 - half_erfc
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;
    use statrs::distribution::{ContinuousCDF, Gamma, Normal};

    use super::*;

    /// The Kolmogorov–Smirnov statistic of a sample against a distribution function.
    fn ks(mut xs: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
        xs.sort_by(f64::total_cmp);
        let n = xs.len() as f64;
        xs.iter()
            .enumerate()
            .map(|(i, &x)| {
                let f = cdf(x);
                (f - i as f64 / n).abs().max((i as f64 + 1.0) / n - f)
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn variates_follow_their_laws() {
        // KS at the 0.1% level: D < 1.949/√n (asymptotic critical value).
        let n = 20_000;
        let crit = 1.949 / (n as f64).sqrt();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let normal = Normal::standard();
        let z: Vec<f64> = (0..n).map(|_| standard_normal(&mut rng)).collect();
        assert!(ks(z, |x| normal.cdf(x)) < crit);
        for shape in [0.3, 1.0, 1.5, 41.5] {
            let law = Gamma::new(shape, 1.0).unwrap();
            let g: Vec<f64> = (0..n).map(|_| gamma(shape, &mut rng)).collect();
            let d = ks(g, |x| law.cdf(x));
            assert!(d < crit, "shape {shape}: D = {d}");
        }
        for a in [-1.0, 0.3, 0.5, 2.0, 6.0] {
            let tail = normal.sf(a);
            let t: Vec<f64> = (0..n).map(|_| normal_above(a, &mut rng)).collect();
            assert!(t.iter().all(|&v| v > a));
            let d = ks(t, |x| 1.0 - normal.sf(x) / tail);
            assert!(d < crit, "a {a}: D = {d}");
        }
        for x in [-8.0, -2.5, -0.3, 0.0, 0.7, 3.0] {
            let e = (normal_cdf(x) - normal.cdf(x)).abs();
            assert!(e < 1e-12, "{x}: {e:e}");
            assert!(
                (normal_cdf_fast(x) / normal.cdf(x) - 1.0).abs() < 1.3e-7,
                "{x}"
            );
        }
        for x in [-30.0, -8.0, -1.0, 0.5, 6.0] {
            let exact = normal.cdf(x).ln();
            assert!(
                (log_normal_cdf(x) - exact).abs() < 1.3e-7 * exact.abs().max(1e-6),
                "{x}"
            );
        }
    }
}
