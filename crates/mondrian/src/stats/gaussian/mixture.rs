//! Gaussian mixtures, the form of every predictive of the regression forest (spec
//! `mf-regression.md` §3.3): moments, log-density, CDF and quantiles.

use super::Component;

/// Mean and variance of a mixture (§3.3): `Σ w m` and `Σ w v + Σ w (m − E)²`.
pub fn mixture_moments(components: &[Component]) -> (f64, f64) {
    let total: f64 = components.iter().map(|c| c.weight).sum();
    if total <= 0.0 {
        return (f64::NAN, f64::NAN);
    }
    let mean = components.iter().map(|c| c.weight * c.mean).sum::<f64>() / total;
    let var = components
        .iter()
        .map(|c| c.weight * (c.var + (c.mean - mean).powi(2)))
        .sum::<f64>()
        / total;
    (mean, var.max(0.0))
}

/// `log w + log N(y; m, v)` of one component of positive weight (a variance of 0 counts as
/// the smallest positive one).
pub fn weighted_log_density(c: &Component, y: f64) -> f64 {
    let v = c.var.max(f64::MIN_POSITIVE);
    c.weight.ln() - 0.5 * ((2.0 * std::f64::consts::PI * v).ln() + (y - c.mean).powi(2) / v)
}

/// `log Σ_k w_k N(y; m_k, v_k)` by log-sum-exp (§3.3).
pub fn mixture_log_density(components: &[Component], y: f64) -> f64 {
    let logs: Vec<f64> = components
        .iter()
        .filter(|c| c.weight > 0.0)
        .map(|c| weighted_log_density(c, y))
        .collect();
    let max = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return max;
    }
    max + logs.iter().map(|l| (l - max).exp()).sum::<f64>().ln()
}

/// The standard normal CDF Φ(z), from a Chebyshev fit of erfc (fractional error below
/// 1.2e-7 everywhere).
pub fn normal_cdf(z: f64) -> f64 {
    let x = -z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    let poly = -x * x - 1.265_512_23 + erfcc_series(t);
    let erfc = t * poly.exp();
    0.5 * if x >= 0.0 { erfc } else { 2.0 - erfc }
}

/// The Chebyshev series of Numerical Recipes' `erfcc` past its constant term −1.26551223:
/// erfc(z) ≈ t·exp(−z² − 1.26551223 + `erfcc_series(t)`) with t = 1/(1 + z/2), z ≥ 0
/// (fractional error below 1.2e-7).
pub(crate) fn erfcc_series(t: f64) -> f64 {
    t * (1.000_023_68
        + t * (0.374_091_96
            + t * (0.096_784_18
                + t * (-0.186_288_06
                    + t * (0.278_868_07
                        + t * (-1.135_203_98
                            + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))))
}

/// `P(Y ≤ y)` under one component, unweighted; a component of variance 0 is a point mass.
pub fn component_cdf(c: &Component, y: f64) -> f64 {
    let sd = c.var.max(0.0).sqrt();
    if sd > 0.0 {
        normal_cdf((y - c.mean) / sd)
    } else if y >= c.mean {
        1.0
    } else {
        0.0
    }
}

/// `P(Y ≤ y)` under a Gaussian mixture (weights need not be normalised); a component of
/// variance 0 is a point mass.
pub fn mixture_cdf(components: &[Component], y: f64) -> f64 {
    let total: f64 = components.iter().map(|c| c.weight).sum();
    components
        .iter()
        .map(|c| c.weight * component_cdf(c, y))
        .sum::<f64>()
        / total
}

/// The `p`-quantile of a Gaussian mixture (weights need not be normalised), by bisection
/// on its CDF to a relative width of 1e-12.
pub fn mixture_quantile(components: &[Component], p: f64) -> f64 {
    let cdf = |y: f64| mixture_cdf(components, y);
    let (mut lo, mut hi) =
        components
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), c| {
                let sd = c.var.max(0.0).sqrt();
                (l.min(c.mean - 12.0 * sd), h.max(c.mean + 12.0 * sd))
            });
    if !(lo.is_finite() && hi.is_finite()) {
        return f64::NAN;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if cdf(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-12 * (lo.abs().max(hi.abs()).max(1e-300)) {
            break;
        }
    }
    0.5 * (lo + hi)
}
