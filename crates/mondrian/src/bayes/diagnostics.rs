//! MCMC output diagnostics (spec `bayesian-trees.md` §5.5): the effective sample size of a
//! chain as R-CODA's `effectiveSize` computes it, and ESS per second.

/// Effective sample size of a chain, matching R-CODA's `effectiveSize` (§5.5):
/// ESS = n · var(x) / S₀, with var's n − 1 denominator and S₀ the spectral density at
/// frequency 0 of an AR(p) fit (`spectrum0.ar`): Yule–Walker with the mean removed, p
/// chosen by AIC among p ≤ min(n − 1, ⌊10 log₁₀ n⌋) (R's `ar()` defaults), and
/// S₀ = σ²_p / (1 − Σφᵢ)² with R's `var.pred` = v_p · n/(n − p − 1).
///
/// A chain that is constant after removing a linear trend (residual sd ≤ 1.5e-8, R's
/// `all.equal` tolerance) has ESS 0, as in CODA; so has a chain of fewer than 3 values.
pub fn effective_size(x: &[f64]) -> f64 {
    let n = x.len();
    if n < 3 || x.iter().any(|v| !v.is_finite()) {
        return 0.0;
    }
    if detrended_sd(x) <= 1.5e-8 {
        return 0.0;
    }
    let spectrum = spectrum0_ar(x);
    if spectrum <= 0.0 {
        return 0.0;
    }
    let nf = n as f64;
    let mean = x.iter().sum::<f64>() / nf;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (nf - 1.0);
    nf * var / spectrum
}

/// ESS per second of sampler wall time.
pub fn ess_per_second(x: &[f64], seconds: f64) -> f64 {
    effective_size(x) / seconds
}

/// The sd (n − 1 denominator) of the residuals of the least-squares line through
/// (t, x_t), t = 1..n: CODA's test for a constant chain.
fn detrended_sd(x: &[f64]) -> f64 {
    let n = x.len() as f64;
    let t_mean = (n + 1.0) / 2.0;
    let x_mean = x.iter().sum::<f64>() / n;
    let (mut sxt, mut stt) = (0.0, 0.0);
    for (i, &v) in x.iter().enumerate() {
        let dt = i as f64 + 1.0 - t_mean;
        sxt += dt * (v - x_mean);
        stt += dt * dt;
    }
    let slope = sxt / stt;
    let ss: f64 = x
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let r = v - x_mean - slope * (i as f64 + 1.0 - t_mean);
            r * r
        })
        .sum();
    (ss / (n - 1.0)).sqrt()
}

/// The AR order chosen, its coefficients and the scaled innovation variance, as R's
/// `ar.yw(x, aic = TRUE)` returns them (`order`, `ar`, `var.pred`).
pub fn ar_yule_walker(x: &[f64]) -> (usize, Vec<f64>, f64) {
    let n = x.len();
    let nf = n as f64;
    let order_max = (n - 1).min((10.0 * nf.log10()).floor() as usize);
    let mean = x.iter().sum::<f64>() / nf;
    // Autocovariances with the 1/n denominator (R's acf(type = "covariance")).
    let r: Vec<f64> = (0..=order_max)
        .map(|k| {
            (0..n - k)
                .map(|t| (x[t] - mean) * (x[t + k] - mean))
                .sum::<f64>()
                / nf
        })
        .collect();
    // Levinson–Durbin: the coefficients and innovation variance of every order.
    let mut coefs: Vec<Vec<f64>> = vec![Vec::new()];
    let mut vars = vec![r[0]];
    for k in 1..=order_max {
        let prev = &coefs[k - 1];
        let v = vars[k - 1];
        let acc: f64 = (1..k).map(|j| prev[j - 1] * r[k - j]).sum();
        let kappa = (r[k] - acc) / v;
        let mut next: Vec<f64> = (1..k)
            .map(|j| prev[j - 1] - kappa * prev[k - j - 1])
            .collect();
        next.push(kappa);
        coefs.push(next);
        vars.push(v * (1.0 - kappa * kappa));
    }
    // AIC = n log v_p + 2p (+ 2 for the mean, common to all); the first minimum.
    let mut best = 0;
    let mut best_aic = f64::INFINITY;
    for (p, &v) in vars.iter().enumerate() {
        let aic = nf * v.ln() + 2.0 * p as f64;
        if aic < best_aic {
            best_aic = aic;
            best = p;
        }
    }
    let var_pred = vars[best] * nf / (nf - (best as f64 + 1.0));
    (best, coefs.swap_remove(best), var_pred)
}

/// S₀ = var.pred / (1 − Σφ)².
fn spectrum0_ar(x: &[f64]) -> f64 {
    let (_, ar, var_pred) = ar_yule_walker(x);
    let s: f64 = ar.iter().sum();
    var_pred / ((1.0 - s) * (1.0 - s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_and_trend_chains_have_no_information() {
        assert_eq!(effective_size(&[2.0; 100]), 0.0);
        let line: Vec<f64> = (0..100).map(|i| 3.0 + 0.5 * i as f64).collect();
        assert_eq!(effective_size(&line), 0.0);
        assert_eq!(effective_size(&[1.0, 2.0]), 0.0);
    }
}
