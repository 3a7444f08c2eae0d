//! Special functions the Bayesian trees need, written out so the library carries no
//! numerics crate: lnΓ, log-sum-exp, the regularised incomplete gamma function and the
//! χ² quantile (for the σ² prior calibration of spec `bayesian-trees.md` §4.1).

/// ln 2π.
pub const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// lnΓ(x) for x > 0 (+∞ at 0, NaN below): Stirling's series once the argument is at
/// least 10, reached by the recurrence Γ(x + 1) = xΓ(x). Absolute error below 1e-14 for
/// x up to 1e6 (tested against `statrs`).
pub fn ln_gamma(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::INFINITY;
    }
    if x.is_infinite() {
        return f64::INFINITY;
    }
    let mut z = x;
    let mut product = 1.0;
    while z < 10.0 {
        product *= z;
        z += 1.0;
    }
    stirling(z) - product.ln()
}

/// lnΓ(z) for z ≥ 10 by Stirling's series; the first omitted term is below 4e-17 there.
fn stirling(z: f64) -> f64 {
    let r = 1.0 / z;
    let r2 = r * r;
    // Bernoulli terms B_2k / (2k(2k−1) z^(2k−1)), k = 1..7.
    let series = r
        * (1.0 / 12.0
            + r2 * (-1.0 / 360.0
                + r2 * (1.0 / 1260.0
                    + r2 * (-1.0 / 1680.0
                        + r2 * (1.0 / 1188.0 + r2 * (-691.0 / 360_360.0 + r2 / 156.0))))));
    (z - 0.5) * z.ln() - z + 0.5 * LN_2PI + series
}

/// log Σ exp(vᵢ), −∞ for an empty slice or one of only −∞.
pub fn log_sum_exp(values: &[f64]) -> f64 {
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY || max.is_nan() {
        return max;
    }
    if max == f64::INFINITY {
        return f64::INFINITY;
    }
    max + values.iter().map(|v| (v - max).exp()).sum::<f64>().ln()
}

/// log(eᵃ + eᵇ).
pub fn log_add_exp(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a >= b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY {
        return hi;
    }
    hi + (lo - hi).exp().ln_1p()
}

/// The regularised lower incomplete gamma function P(a, x) = γ(a, x)/Γ(a), for a > 0 and
/// x ≥ 0: the series for x < a + 1, the continued fraction of Q = 1 − P beyond
/// (Numerical Recipes §6.2).
pub fn regularized_gamma_p(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let log_prefactor = -x + a * x.ln() - ln_gamma(a);
    if x < a + 1.0 {
        let mut ap = a;
        let mut term = 1.0 / a;
        let mut sum = term;
        for _ in 0..10_000 {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * 1e-17 {
                break;
            }
        }
        (sum.ln() + log_prefactor).exp().min(1.0)
    } else {
        // Modified Lentz on the continued fraction of Q.
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..10_000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < tiny {
                d = tiny;
            }
            c = b + an / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let delta = d * c;
            h *= delta;
            if (delta - 1.0).abs() < 1e-16 {
                break;
            }
        }
        (1.0 - (h.ln() + log_prefactor).exp()).max(0.0)
    }
}

/// The p-quantile of the χ² distribution with `dof` degrees of freedom (p in (0, 1)), by
/// bisection on P(dof/2, x/2) to the last bit.
pub fn chi_square_quantile(p: f64, dof: f64) -> f64 {
    if !(p > 0.0 && p < 1.0) || dof.is_nan() || dof <= 0.0 {
        return f64::NAN;
    }
    let cdf = |x: f64| regularized_gamma_p(0.5 * dof, 0.5 * x);
    let mut hi = dof.max(1.0);
    while cdf(hi) < p {
        hi *= 2.0;
    }
    bisect_quantile(cdf, p, 0.0, hi, 2000)
}

/// The p-quantile of the distribution function `cdf` bracketed by [`lo`, `hi`], by at most
/// `max_steps` bisections (fewer once the bracket holds no double between its ends).
pub(crate) fn bisect_quantile(
    cdf: impl Fn(f64) -> f64,
    p: f64,
    mut lo: f64,
    mut hi: f64,
    max_steps: usize,
) -> f64 {
    for _ in 0..max_steps {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if cdf(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_gamma_matches_statrs() {
        let mut x = 1e-6;
        while x < 1e6 {
            let exact = statrs::function::gamma::ln_gamma(x);
            let got = ln_gamma(x);
            assert!(
                (got - exact).abs() <= 1e-14 * exact.abs().max(1.0) + 2e-14,
                "x = {x}: {got} vs {exact}"
            );
            x *= 1.37;
        }
        for n in 1..30u32 {
            let factorial: f64 = (1..n).map(f64::from).product();
            assert!((ln_gamma(n as f64) - factorial.ln()).abs() < 1e-13);
        }
        assert!((ln_gamma(0.5) - 0.5 * std::f64::consts::PI.ln()).abs() < 1e-14);
        assert_eq!(ln_gamma(0.0), f64::INFINITY);
        assert!(ln_gamma(-1.0).is_nan());
    }

    #[test]
    fn log_sum_exp_is_stable() {
        assert_eq!(log_sum_exp(&[]), f64::NEG_INFINITY);
        assert!((log_sum_exp(&[1000.0, 1000.0]) - (1000.0 + 2f64.ln())).abs() < 1e-12);
        assert!((log_add_exp(-1e308, 0.0)).abs() < 1e-300);
        assert_eq!(log_add_exp(f64::NEG_INFINITY, 3.0), 3.0);
    }

    #[test]
    fn incomplete_gamma_and_chi_square_quantile_match_statrs() {
        use statrs::distribution::{ChiSquared, ContinuousCDF};
        for &dof in &[1.0, 2.0, 3.0, 7.5, 30.0, 200.0] {
            let chi = ChiSquared::new(dof).unwrap();
            for &p in &[1e-6, 0.01, 0.1, 0.5, 0.9, 0.999] {
                let q = chi_square_quantile(p, dof);
                assert!((chi.cdf(q) - p).abs() < 1e-12, "dof {dof} p {p}: q {q}");
            }
        }
        // The spec's σ² calibration constant (§4.1): χ²₃⁻¹(0.1) = 0.584374.
        assert!((chi_square_quantile(0.1, 3.0) - 0.584_374).abs() < 5e-7);
    }
}
