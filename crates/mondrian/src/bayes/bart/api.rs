//! Fit and predict with BART (spec `bayesian-trees.md` §4.1, §4.4): [`BartRegressor`] on
//! targets rescaled to [−0.5, 0.5], and the probit [`BartClassifier`] for two classes.
//! Both are [`Persistent`](crate::Persistent): `decode.rs` saves the kept draws and
//! traces and checks them on load.
//!
//! ```
//! use mondrian::bayes::{BartParams, BartRegressor};
//! let params = BartParams { n_trees: 10, n_iter: 200, burn_in: 100, seed: 3, ..Default::default() };
//! let mut model = BartRegressor::new(params)?;
//! let x: Vec<f64> = (0..40).map(|i| i as f64 / 40.0).collect();
//! let y: Vec<f64> = x.iter().map(|&v| if v < 0.5 { -1.0 } else { 1.0 }).collect();
//! model.fit(&x, 1, &y)?;
//! let f = model.predict(&[0.1, 0.9], 1)?;
//! assert!(f[0] < -0.5 && f[1] > 0.5);
//! let (lo, hi) = model.predict_interval(&[0.1], 1, 0.9)?;
//! assert!(lo[0] < f[0] && f[0] < hi[0]);
//! # Ok::<(), mondrian::MondrianError>(())
//! ```

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

use super::backfit::{run_probit, run_regression, Run};
use super::params::{BartParams, SigmaHat};
use super::random::normal_cdf_fast;
use super::traces::Traces;
use crate::bayes::shared::check_targets;
use crate::bayes::special::bisect_quantile;
use crate::bayes::tree::Features;
use crate::data::{FeatureValue, Rows};
use crate::error::{MondrianError, Result};
use crate::forest::mix64;
use crate::metrics::normal_quantile;
use crate::model::{Checked, Model, Params};

/// A fitted chain: kept draws on the internal scale and the map back, y = offset + scale·y′.
#[derive(Debug, Clone)]
pub(super) struct Fitted {
    pub(super) n_features: usize,
    pub(super) offset: f64,
    pub(super) scale: f64,
    pub(super) run: Run,
    /// Threads for prediction: 1 the caller's, 0 rayon's pool, n > 1 a pool of n; not
    /// saved.
    pub(super) n_threads: usize,
}

impl Fitted {
    /// For each row, `f(draw values, draw σ)` on the original scale.
    fn per_row<T: FeatureValue, O: Send>(
        &self,
        x: &[T],
        n_features: usize,
        f: impl Fn(&[f64], &[f64]) -> O + Sync,
    ) -> Result<Vec<O>> {
        let rows = Rows::new(x, n_features)?;
        rows.validate(Some(self.n_features))?;
        let sigma: Vec<f64> = self.run.sigma.iter().map(|s| s * self.scale).collect();
        let one = |i: usize| {
            let row: Vec<f64> = rows.row(i).iter().map(|v| v.to_f64()).collect();
            let values: Vec<f64> = self
                .run
                .draws
                .iter()
                .map(|d| self.offset + self.scale * d.eval(&row))
                .collect();
            f(&values, &sigma)
        };
        let all = || (0..rows.n_rows()).into_par_iter().map(one).collect();
        Ok(match self.n_threads {
            1 => (0..rows.n_rows()).map(one).collect(),
            0 => all(),
            n => match rayon::ThreadPoolBuilder::new().num_threads(n).build() {
                Ok(pool) => pool.install(all),
                // Rows are independent: the caller's pool gives the same values.
                Err(_) => all(),
            },
        })
    }

    /// Draw-major values: draw s of row i at s·n + i.
    fn draws<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<f64>> {
        let per_row = self.per_row(x, n_features, |v, _| v.to_vec())?;
        let (n, s) = (per_row.len(), self.run.draws.len());
        let mut out = vec![0.0; n * s];
        for (i, v) in per_row.iter().enumerate() {
            for (k, &value) in v.iter().enumerate() {
                out[k * n + i] = value;
            }
        }
        Ok(out)
    }
}

fn seeded(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(mix64(seed ^ 0xb5ad_4ece_da1c_e2a9))
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// The p-quantile of the mixture (1/S) Σ_s N(means_s, sds_s²), by bisection. It lies
/// between the smallest and the largest of the components' p-quantiles (there every
/// component's CDF is ≤ p, here ≥ p), and 36 halvings of that bracket leave it within
/// 10⁻¹⁰ of the bracket's width.
fn mixture_quantile(means: &[f64], sds: &[f64], p: f64) -> f64 {
    let cdf = |t: f64| {
        means
            .iter()
            .zip(sds)
            .map(|(m, s)| normal_cdf_fast((t - m) / s))
            .sum::<f64>()
            / means.len() as f64
    };
    let z = normal_quantile(p);
    let (lo, hi) = means
        .iter()
        .zip(sds)
        .map(|(m, s)| m + s * z)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), q| {
            (lo.min(q), hi.max(q))
        });
    if lo >= hi {
        return lo;
    }
    // Φ⁻¹ and Φ here are approximations (relative errors near 1e-9 and 1e-7): pad the
    // bracket so it still holds the root.
    let pad = 1e-6 * (hi - lo);
    bisect_quantile(cdf, p, lo - pad, hi + pad, 36)
}

/// √(RSS/(N − D − 1)) of the least-squares fit of y on (1, X), through the normal
/// equations of the centred columns (Cholesky).
fn ols_residual_sd(features: &Features, y: &[f64]) -> Result<f64> {
    let (n, d) = (features.n_rows(), features.n_features());
    let refuse = |reason: String| MondrianError::InvalidParameter {
        name: "sigma_hat",
        reason,
    };
    if n <= d + 1 {
        return Err(refuse(format!(
            "the OLS residual sd needs more than D + 1 = {} rows, got {n}",
            d + 1
        )));
    }
    let xm: Vec<f64> = (0..d)
        .map(|k| (0..n).map(|i| features.value(i, k)).sum::<f64>() / n as f64)
        .collect();
    let ym = mean(y);
    let mut a = vec![0.0; d * d];
    let mut b = vec![0.0; d];
    for (i, &yi) in y.iter().enumerate() {
        let row: Vec<f64> = (0..d).map(|k| features.value(i, k) - xm[k]).collect();
        for p in 0..d {
            b[p] += row[p] * (yi - ym);
            for q in 0..=p {
                a[p * d + q] += row[p] * row[q];
            }
        }
    }
    // Cholesky A = L Lᵀ in place (lower triangle).
    for p in 0..d {
        for q in 0..=p {
            let mut s = a[p * d + q];
            for k in 0..q {
                s -= a[p * d + k] * a[q * d + k];
            }
            if p == q {
                if s <= 1e-12 * a[p * d + p].abs().max(f64::MIN_POSITIVE) {
                    return Err(refuse(
                        "the design of the OLS fit is rank-deficient; use SampleSd".into(),
                    ));
                }
                a[p * d + p] = s.sqrt();
            } else {
                a[p * d + q] = s / a[q * d + q];
            }
        }
    }
    let mut beta = b;
    for p in 0..d {
        let s: f64 = (0..p).map(|k| a[p * d + k] * beta[k]).sum();
        beta[p] = (beta[p] - s) / a[p * d + p];
    }
    for p in (0..d).rev() {
        let s: f64 = (p + 1..d).map(|k| a[k * d + p] * beta[k]).sum();
        beta[p] = (beta[p] - s) / a[p * d + p];
    }
    let rss: f64 = y
        .iter()
        .enumerate()
        .map(|(i, &yi)| {
            let fit: f64 = (0..d)
                .map(|k| beta[k] * (features.value(i, k) - xm[k]))
                .sum();
            let r = yi - ym - fit;
            r * r
        })
        .sum();
    Ok((rss / (n - d - 1) as f64).sqrt())
}

// ---------------------------------------------------------------------------------------
// Regression
// ---------------------------------------------------------------------------------------

/// BART regression (§4): y = Σ_{m=1}^{M} g(x; T_m, μ_m) + e, e ~ N(0, σ²), sampled by
/// Bayesian backfitting with the chosen tree kernel. Targets are rescaled internally to
/// y′ = (y − y_min)/(y_max − y_min) − 0.5, where the priors are calibrated (§4.1);
/// everything returned is on the original scale.
#[derive(Debug, Clone)]
pub struct BartRegressor {
    pub(super) params: Checked<BartParams>,
    pub(super) fitted: Option<Fitted>,
}

impl BartRegressor {
    /// An unfitted regressor; the parameters are checked here.
    pub fn new(params: BartParams) -> Result<Self> {
        Ok(Self::with_params(params.check()?))
    }

    /// Runs the chain on row-major `x` (`n_features` columns) and finite targets `y`,
    /// replacing any previous fit. Needs at least two distinct target values.
    pub fn fit<T: FeatureValue>(&mut self, x: &[T], n_features: usize, y: &[f64]) -> Result<()> {
        self.fit_with_progress(x, n_features, y, &mut |_, _| {})
    }

    /// As [`fit`](Self::fit), calling `progress(i, n_iter)` after each iteration i.
    pub fn fit_with_progress<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[f64],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<()> {
        let features = Features::new(x, n_features)?;
        check_targets(y, features.n_rows())?;
        let lo = y.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = y.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if hi <= lo {
            return Err(MondrianError::InvalidParameter {
                name: "y",
                reason: "the targets are all equal: BART's priors are calibrated on their \
                         range, which is 0"
                    .into(),
            });
        }
        let scale = hi - lo;
        let offset = lo + 0.5 * scale;
        let scaled: Vec<f64> = y.iter().map(|v| (v - offset) / scale).collect();
        let sigma_hat = match self.params.sigma_hat {
            SigmaHat::SampleSd => {
                let m = mean(&scaled);
                let ss: f64 = scaled.iter().map(|v| (v - m) * (v - m)).sum();
                (ss / (scaled.len() - 1) as f64).sqrt()
            }
            SigmaHat::OlsResidualSd => ols_residual_sd(&features, &scaled)?,
        };
        if !(sigma_hat > 0.0 && sigma_hat.is_finite()) {
            return Err(MondrianError::InvalidParameter {
                name: "sigma_hat",
                reason: format!("σ̂ = {sigma_hat} on the rescaled targets; it must be > 0"),
            });
        }
        self.fitted = None;
        let mut rng = seeded(self.params.seed);
        let run = run_regression(
            &features,
            &scaled,
            &self.params,
            sigma_hat,
            scale,
            &mut rng,
            progress,
        );
        self.fitted = Some(Fitted {
            n_features,
            offset,
            scale,
            run,
            n_threads: self.params.n_threads,
        });
        Ok(())
    }

    fn fitted(&self) -> Result<&Fitted> {
        self.fitted.as_ref().ok_or(MondrianError::NotFitted)
    }

    /// Posterior mean of f(x) = Σ_m g(x; T_m, μ_m) over the kept draws (§4.4).
    pub fn predict<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<f64>> {
        self.fitted()?.per_row(x, n_features, |v, _| mean(v))
    }

    /// Mean and sd of the posterior predictive (1/S) Σ_s N(f_s(x), σ_s²) of each row: the
    /// sd includes the noise, Var = mean(σ_s² + f_s²) − mean(f_s)².
    pub fn predict_mean_std<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        let out = self.fitted()?.per_row(x, n_features, |v, s| {
            let m = mean(v);
            let second: f64 =
                v.iter().zip(s).map(|(f, s)| s * s + f * f).sum::<f64>() / v.len() as f64;
            (m, (second - m * m).max(0.0).sqrt())
        })?;
        Ok(out.into_iter().unzip())
    }

    /// The central posterior predictive interval of probability `level` ∈ (0, 1) of each
    /// row: the (1 ± level)/2 quantiles of the mixture (1/S) Σ_s N(f_s(x), σ_s²).
    pub fn predict_interval<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        level: f64,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        if !(level > 0.0 && level < 1.0) {
            return Err(MondrianError::InvalidParameter {
                name: "level",
                reason: format!("{level} is not in (0, 1)"),
            });
        }
        let a = 0.5 * (1.0 - level);
        let out = self.fitted()?.per_row(x, n_features, |v, s| {
            (mixture_quantile(v, s, a), mixture_quantile(v, s, 1.0 - a))
        })?;
        Ok(out.into_iter().unzip())
    }

    /// f_s(x) of every kept draw s and row i, draw-major (at s·rows + i), original scale.
    pub fn posterior_draws<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<f64>> {
        self.fitted()?.draws(x, n_features)
    }

    /// σ of every kept draw, original scale.
    pub fn sigma_draws(&self) -> Result<Vec<f64>> {
        let f = self.fitted()?;
        Ok(f.run.sigma.iter().map(|s| s * f.scale).collect())
    }

    /// The chain's traces.
    pub fn traces(&self) -> Result<&Traces> {
        Ok(&self.fitted()?.run.traces)
    }

    /// Kept draws S = n_iter − burn_in, once fitted.
    pub fn n_draws(&self) -> Option<usize> {
        self.fitted.as_ref().map(|f| f.run.draws.len())
    }

    /// Width of the rows, once fitted.
    pub fn n_features(&self) -> Option<usize> {
        self.fitted.as_ref().map(|f| f.n_features)
    }
}

impl_model!(BartRegressor, BartParams, f64);

// ---------------------------------------------------------------------------------------
// Classification
// ---------------------------------------------------------------------------------------

/// Probit BART for two classes (Chipman et al. 2010 §4; Albert & Chib 1993):
/// P(y = 1 | x) = Φ(Σ_m g(x; T_m, μ_m)), sampled through latent z ~ N(f(x), 1) truncated
/// by the label's sign, with σ fixed at 1 and leaf prior sd 3/(k√M).
#[derive(Debug, Clone)]
pub struct BartClassifier {
    pub(super) params: Checked<BartParams>,
    pub(super) fitted: Option<Fitted>,
}

impl BartClassifier {
    /// An unfitted classifier; the parameters are checked here.
    pub fn new(params: BartParams) -> Result<Self> {
        Ok(Self::with_params(params.check()?))
    }

    /// Runs the chain on row-major `x` and labels in {0, 1}, replacing any previous fit.
    pub fn fit<T: FeatureValue>(&mut self, x: &[T], n_features: usize, y: &[usize]) -> Result<()> {
        self.fit_with_progress(x, n_features, y, &mut |_, _| {})
    }

    /// As [`fit`](Self::fit), calling `progress(i, n_iter)` after each iteration i.
    pub fn fit_with_progress<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[usize],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<()> {
        let features = Features::new(x, n_features)?;
        if y.len() != features.n_rows() {
            return Err(MondrianError::LengthMismatch {
                n_rows: features.n_rows(),
                n_labels: y.len(),
            });
        }
        if let Some(row) = y.iter().position(|&l| l > 1) {
            return Err(MondrianError::LabelOutOfRange {
                row,
                label: y[row],
                n_classes: 2,
            });
        }
        let labels: Vec<bool> = y.iter().map(|&l| l == 1).collect();
        self.fitted = None;
        let mut rng = seeded(self.params.seed);
        let run = run_probit(&features, &labels, &self.params, &mut rng, progress);
        self.fitted = Some(Fitted {
            n_features,
            offset: 0.0,
            scale: 1.0,
            run,
            n_threads: self.params.n_threads,
        });
        Ok(())
    }

    fn fitted(&self) -> Result<&Fitted> {
        self.fitted.as_ref().ok_or(MondrianError::NotFitted)
    }

    /// Posterior predictive class probabilities, 2 per row (row-major):
    /// P(y = 1 | x) = (1/S) Σ_s Φ(f_s(x)).
    pub fn predict_proba<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<f64>> {
        let p = self.fitted()?.per_row(x, n_features, |v, _| {
            v.iter().map(|&f| normal_cdf_fast(f)).sum::<f64>() / v.len() as f64
        })?;
        Ok(p.into_iter().flat_map(|p| [1.0 - p, p]).collect())
    }

    /// The more probable class of each row (0 on a tie).
    pub fn predict<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<usize>> {
        let p = self.predict_proba(x, n_features)?;
        Ok(p.chunks(2).map(|r| usize::from(r[1] > r[0])).collect())
    }

    /// f_s(x) on the probit scale for every kept draw s and row i, at s·rows + i.
    pub fn posterior_draws<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<f64>> {
        self.fitted()?.draws(x, n_features)
    }

    /// The chain's traces.
    pub fn traces(&self) -> Result<&Traces> {
        Ok(&self.fitted()?.run.traces)
    }

    /// Kept draws S = n_iter − burn_in, once fitted.
    pub fn n_draws(&self) -> Option<usize> {
        self.fitted.as_ref().map(|f| f.run.draws.len())
    }

    /// Width of the rows, once fitted.
    pub fn n_features(&self) -> Option<usize> {
        self.fitted.as_ref().map(|f| f.n_features)
    }
}

impl_model!(BartClassifier, BartParams, usize);

#[cfg(test)]
mod tests {
    use statrs::distribution::{ContinuousCDF, Normal};

    use super::mixture_quantile;

    #[test]
    fn mixture_quantiles_solve_the_mixture_cdf() {
        // Against statrs' normal CDF: F(q) = p to the accuracy of the fast Φ used inside
        // (1.3e-7 relative), for spread-out, overlapping and single components.
        let cases: [(&[f64], &[f64]); 3] = [
            (&[-3.0, 0.5, 10.0], &[1.0, 0.2, 4.0]),
            (&[1.0, 1.1, 0.9, 1.05], &[0.3, 0.31, 0.29, 0.3]),
            (&[2.0], &[0.5]),
        ];
        for (means, sds) in cases {
            for p in [0.05, 0.5, 0.95] {
                let q = mixture_quantile(means, sds, p);
                let f = means
                    .iter()
                    .zip(sds)
                    .map(|(&m, &s)| Normal::new(m, s).unwrap().cdf(q))
                    .sum::<f64>()
                    / means.len() as f64;
                assert!((f - p).abs() < 1e-6, "p {p}: F(q) = {f}");
            }
        }
        let single = mixture_quantile(&[2.0], &[0.5], 0.95);
        assert!((single - (2.0 + 0.5 * 1.644_853_626_951_472_2)).abs() < 1e-6);
    }
}
