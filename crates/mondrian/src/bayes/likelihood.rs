//! Leaf models of the Bayesian decision tree (spec `bayesian-trees.md` §2.1): conjugate
//! priors whose leaf parameter is integrated out, so a leaf is scored by its marginal
//! likelihood ℓ(Y_{N_j}) alone. Every value is a natural logarithm.
//!
//! A model works on [`SufficientStats`] that add and subtract, so a split's two children
//! are scored by one sweep over the parent's points, and the stats of the left part give
//! the right part's by subtraction.

use std::fmt::Debug;

use serde::{Deserialize, Serialize};

use super::special::{ln_gamma, LN_2PI};
use crate::error::{MondrianError, Result};

/// Sufficient statistics of a set of targets: add, remove, merge and subtract.
pub trait SufficientStats<Y>: Clone + Debug + Send + Sync {
    /// Adds one target.
    fn add(&mut self, y: Y);
    /// Removes one target that was added.
    fn remove(&mut self, y: Y);
    /// Adds the targets of `other` (a disjoint set).
    fn merge(&mut self, other: &Self);
    /// Removes the targets of `other` (a subset).
    fn subtract(&mut self, other: &Self);
    /// Number of targets.
    fn count(&self) -> usize;
    /// Adds the targets of `rows` (indices into `targets`).
    fn add_rows(&mut self, targets: &[Y], rows: &[u32])
    where
        Y: Copy,
    {
        for &r in rows {
            self.add(targets[r as usize]);
        }
    }
    /// Sends each of `rows` to `left` or `right` by `goes_left` and returns the
    /// statistics of both sides, starting from `empty`. `self` summarises the parent
    /// node's targets, possibly under an older residual: an implementation may use it as
    /// a reference point, never as data.
    fn split_rows(
        &self,
        empty: Self,
        targets: &[Y],
        rows: &[u32],
        mut goes_left: impl FnMut(u32) -> bool,
        left: &mut Vec<u32>,
        right: &mut Vec<u32>,
    ) -> (Self, Self)
    where
        Y: Copy,
    {
        for &r in rows {
            if goes_left(r) {
                left.push(r);
            } else {
                right.push(r);
            }
        }
        let (mut l, mut r) = (empty.clone(), empty);
        l.add_rows(targets, left);
        r.add_rows(targets, right);
        (l, r)
    }
}

/// A conjugate leaf model: the log marginal likelihood of a leaf's targets and the
/// log posterior predictive density of a new target.
pub trait LeafModel: Clone + Debug + Send + Sync {
    /// What a training row's target is.
    type Target: Copy + Debug + Send + Sync;
    /// The statistics a leaf keeps.
    type Stats: SufficientStats<Self::Target>;

    /// Statistics of the empty set.
    fn empty_stats(&self) -> Self::Stats;
    /// log ℓ(Y): the marginal likelihood of the targets summarised by `s` (0 for none).
    fn log_marginal(&self, s: &Self::Stats) -> f64;
    /// log p(y | Y): the posterior predictive of one more target, so that
    /// log ℓ(Y ∪ {y}) = log ℓ(Y) + log p(y | Y) (the chain rule of §2.1).
    fn log_predictive(&self, s: &Self::Stats, y: Self::Target) -> f64;

    /// Statistics of some targets.
    fn stats_of(&self, targets: impl IntoIterator<Item = Self::Target>) -> Self::Stats {
        let mut s = self.empty_stats();
        for y in targets {
            s.add(y);
        }
        s
    }
}

/// A leaf model of real targets whose predictive has a mean and a variance.
pub trait RegressionLeafModel: LeafModel<Target = f64, Stats = Moments> {
    /// Mean and variance of the posterior predictive of a new target (the variance is
    /// +∞ where the Student-t predictive has no finite variance).
    fn predictive_mean_variance(&self, s: &Moments) -> (f64, f64);
}

fn bad(name: &'static str, reason: &str) -> MondrianError {
    MondrianError::InvalidParameter {
        name,
        reason: reason.into(),
    }
}

fn positive_finite(name: &'static str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(bad(name, &format!("{v} is not a positive finite number")))
    }
}

// ---------------------------------------------------------------------------------------
// Classification
// ---------------------------------------------------------------------------------------

/// Label counts of a leaf: c_k for classes 0..K.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassCounts {
    counts: Vec<u32>,
    total: u32,
}

impl ClassCounts {
    /// The count of each class.
    pub fn counts(&self) -> &[u32] {
        &self.counts
    }
}

impl SufficientStats<usize> for ClassCounts {
    fn add(&mut self, y: usize) {
        self.counts[y] += 1;
        self.total += 1;
    }
    fn remove(&mut self, y: usize) {
        self.counts[y] -= 1;
        self.total -= 1;
    }
    fn merge(&mut self, other: &Self) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
    }
    fn subtract(&mut self, other: &Self) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a -= b;
        }
        self.total -= other.total;
    }
    fn count(&self) -> usize {
        self.total as usize
    }
}

/// Dirichlet–multinomial leaves (§2.1, (3.2)): θ_j ~ Dirichlet(α/K, …, α/K) with α the
/// *total* concentration (A2), labels i.i.d. Cat(θ_j). ℓ is the probability of the label
/// sequence (no multinomial coefficient).
#[derive(Debug, Clone, PartialEq)]
pub struct DirichletMultinomial {
    alpha: f64,
    n_classes: usize,
    /// lnΓ(α/K), lnΓ(α), ln(α/K): the constants of every evaluation.
    ln_gamma_share: f64,
    ln_gamma_alpha: f64,
}

impl DirichletMultinomial {
    /// The model with total concentration `alpha` > 0 over `n_classes` ≥ 1 classes.
    pub fn new(alpha: f64, n_classes: usize) -> Result<Self> {
        positive_finite("alpha", alpha)?;
        if n_classes == 0 {
            return Err(bad("n_classes", "must be at least 1"));
        }
        if n_classes > u32::MAX as usize {
            return Err(bad("n_classes", "too many classes"));
        }
        let share = alpha / n_classes as f64;
        Ok(DirichletMultinomial {
            alpha,
            n_classes,
            ln_gamma_share: ln_gamma(share),
            ln_gamma_alpha: ln_gamma(alpha),
        })
    }

    /// The total concentration α.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// K.
    pub fn n_classes(&self) -> usize {
        self.n_classes
    }

    /// Adds `weight` × the posterior predictive p(y = k) = (c_k + α/K)/(n + α) to `out[k]`.
    pub fn add_probabilities(&self, s: &ClassCounts, weight: f64, out: &mut [f64]) {
        let share = self.alpha / self.n_classes as f64;
        let scale = weight / (s.total as f64 + self.alpha);
        for (o, &c) in out.iter_mut().zip(&s.counts) {
            *o += (c as f64 + share) * scale;
        }
    }
}

impl LeafModel for DirichletMultinomial {
    type Target = usize;
    type Stats = ClassCounts;

    fn empty_stats(&self) -> ClassCounts {
        ClassCounts {
            counts: vec![0; self.n_classes],
            total: 0,
        }
    }

    fn log_marginal(&self, s: &ClassCounts) -> f64 {
        // Empty classes contribute lnΓ(α/K) − lnΓ(α/K) = 0, so only the others are summed.
        let share = self.alpha / self.n_classes as f64;
        let classes: f64 = s
            .counts
            .iter()
            .filter(|&&c| c > 0)
            .map(|&c| ln_gamma(c as f64 + share) - self.ln_gamma_share)
            .sum();
        self.ln_gamma_alpha - ln_gamma(s.total as f64 + self.alpha) + classes
    }

    fn log_predictive(&self, s: &ClassCounts, y: usize) -> f64 {
        let share = self.alpha / self.n_classes as f64;
        ((s.counts[y] as f64 + share) / (s.total as f64 + self.alpha)).ln()
    }
}

// ---------------------------------------------------------------------------------------
// Regression
// ---------------------------------------------------------------------------------------

/// Count, mean and sum of squared deviations of real targets (Welford form, §2.1: the
/// sums Σy and Σy² cancel catastrophically in the marginals).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Moments {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Moments {
    /// Number of targets.
    pub fn n(&self) -> u64 {
        self.n
    }
    /// Their mean (0 for none).
    pub fn mean(&self) -> f64 {
        self.mean
    }
    /// Σ (y − ȳ)².
    pub fn m2(&self) -> f64 {
        self.m2
    }
}

impl SufficientStats<f64> for Moments {
    fn add(&mut self, y: f64) {
        self.n += 1;
        let delta = y - self.mean;
        self.mean += delta / self.n as f64;
        self.m2 += delta * (y - self.mean);
    }
    fn remove(&mut self, y: f64) {
        if self.n <= 1 {
            *self = Moments::default();
            return;
        }
        let n = self.n as f64;
        let mean = (n * self.mean - y) / (n - 1.0);
        self.m2 = (self.m2 - (y - mean) * (y - self.mean)).max(0.0);
        self.mean = mean;
        self.n -= 1;
    }
    fn merge(&mut self, other: &Self) {
        if other.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *other;
            return;
        }
        let (na, nb) = (self.n as f64, other.n as f64);
        let n = na + nb;
        let delta = other.mean - self.mean;
        self.mean += delta * nb / n;
        self.m2 += other.m2 + delta * delta * na * nb / n;
        self.n += other.n;
    }
    fn subtract(&mut self, other: &Self) {
        if other.n == 0 {
            return;
        }
        if other.n >= self.n {
            *self = Moments::default();
            return;
        }
        let (n, nb) = (self.n as f64, other.n as f64);
        let na = n - nb;
        let mean = (n * self.mean - nb * other.mean) / na;
        let delta = other.mean - mean;
        self.m2 = (self.m2 - other.m2 - delta * delta * na * nb / n).max(0.0);
        self.mean = mean;
        self.n -= other.n;
    }
    fn count(&self) -> usize {
        self.n as usize
    }
    /// One pass of sums shifted by the first target, then a merge: the shift keeps the
    /// cancellation in Σ(y − c)² − (Σ(y − c))²/n to the order of (ȳ − c)²/var, where the
    /// plain sums Σy, Σy² would lose everything to a large mean (§2.1).
    fn add_rows(&mut self, targets: &[f64], rows: &[u32]) {
        let Some(&first) = rows.first() else {
            return;
        };
        let shift = targets[first as usize];
        let (mut s, mut q) = (0.0, 0.0);
        for &r in rows {
            let d = targets[r as usize] - shift;
            s += d;
            q += d * d;
        }
        self.merge(&Moments::from_shifted_sums(rows.len(), shift, s, q));
    }
    /// One pass over the rows for the comparison and both sides' sums, shifted by the
    /// first row's target as in [`add_rows`](Self::add_rows) (so rows whose targets are
    /// all equal get that value as their mean exactly).
    fn split_rows(
        &self,
        _empty: Self,
        targets: &[f64],
        rows: &[u32],
        mut goes_left: impl FnMut(u32) -> bool,
        left: &mut Vec<u32>,
        right: &mut Vec<u32>,
    ) -> (Self, Self) {
        let shift = rows.first().map_or(0.0, |&r| targets[r as usize]);
        let (n_left0, n_right0) = (left.len(), right.len());
        let (mut sl, mut ql, mut sr, mut qr) = (0.0, 0.0, 0.0, 0.0);
        for &r in rows {
            let d = targets[r as usize] - shift;
            if goes_left(r) {
                left.push(r);
                sl += d;
                ql += d * d;
            } else {
                right.push(r);
                sr += d;
                qr += d * d;
            }
        }
        (
            Moments::from_shifted_sums(left.len() - n_left0, shift, sl, ql),
            Moments::from_shifted_sums(right.len() - n_right0, shift, sr, qr),
        )
    }
}

impl Moments {
    /// The moments of n values y with Σ(y − c) = s and Σ(y − c)² = q.
    fn from_shifted_sums(n: usize, c: f64, s: f64, q: f64) -> Moments {
        if n == 0 {
            return Moments::default();
        }
        let nf = n as f64;
        Moments {
            n: n as u64,
            mean: c + s / nf,
            m2: (q - s * s / nf).max(0.0),
        }
    }
}

/// Normal leaves with known noise variance (§2.1 R1, the BART node marginal (4.9)):
/// y_i | μ ~ N(μ, σ²), μ ~ N(m, s²).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NormalKnownVariance {
    /// Prior mean m of the leaf value.
    pub mean: f64,
    /// Prior variance s² of the leaf value.
    pub prior_variance: f64,
    /// Noise variance σ² (BART resamples it between sweeps).
    pub noise_variance: f64,
}

impl NormalKnownVariance {
    /// Checks the variances are positive and finite and the mean finite.
    pub fn validate(&self) -> Result<()> {
        if !self.mean.is_finite() {
            return Err(bad("mean", "must be finite"));
        }
        positive_finite("prior_variance", self.prior_variance)?;
        positive_finite("noise_variance", self.noise_variance)
    }

    /// Posterior precision τ_n and mean m_n of μ.
    fn posterior(&self, s: &Moments) -> (f64, f64) {
        let lambda = 1.0 / self.noise_variance;
        let tau = 1.0 / self.prior_variance;
        let n = s.n as f64;
        let tau_n = tau + n * lambda;
        (tau_n, (tau * self.mean + lambda * n * s.mean) / tau_n)
    }
}

impl LeafModel for NormalKnownVariance {
    type Target = f64;
    type Stats = Moments;

    fn empty_stats(&self) -> Moments {
        Moments::default()
    }

    fn log_marginal(&self, s: &Moments) -> f64 {
        if s.n == 0 {
            return 0.0;
        }
        // The spec's form −(λ/2)Q − (τ/2)m² + (τ_n/2)m_n² rewritten around the mean,
        // where nothing cancels: −(λ/2)M2 − ½(nλτ/τ_n)(ȳ − m)².
        let lambda = 1.0 / self.noise_variance;
        let tau = 1.0 / self.prior_variance;
        let n = s.n as f64;
        let tau_n = tau + n * lambda;
        let dev = s.mean - self.mean;
        0.5 * n * (lambda.ln() - LN_2PI) + 0.5 * (tau / tau_n).ln()
            - 0.5 * lambda * s.m2
            - 0.5 * n * lambda * tau / tau_n * dev * dev
    }

    fn log_predictive(&self, s: &Moments, y: f64) -> f64 {
        let (mean, var) = self.predictive_mean_variance(s);
        let d = y - mean;
        -0.5 * (LN_2PI + var.ln() + d * d / var)
    }
}

impl RegressionLeafModel for NormalKnownVariance {
    fn predictive_mean_variance(&self, s: &Moments) -> (f64, f64) {
        let (tau_n, mean) = self.posterior(s);
        (mean, 1.0 / tau_n + self.noise_variance)
    }
}

/// Normal–inverse-gamma leaves (§2.1 R2): y_i | μ, σ_j² ~ N(μ, σ_j²),
/// μ | σ_j² ~ N(m0, σ_j²/κ0), σ_j² ~ IG(a0, b0), each leaf with its own noise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NormalInverseGamma {
    /// Prior mean m0.
    pub m0: f64,
    /// Prior pseudo-count κ0 of the mean.
    pub kappa0: f64,
    /// Shape a0 of the noise variance's prior.
    pub a0: f64,
    /// Scale b0 of the noise variance's prior.
    pub b0: f64,
}

impl NormalInverseGamma {
    /// Checks m0 is finite and κ0, a0, b0 positive and finite.
    pub fn validate(&self) -> Result<()> {
        if !self.m0.is_finite() {
            return Err(bad("m0", "must be finite"));
        }
        positive_finite("kappa0", self.kappa0)?;
        positive_finite("a0", self.a0)?;
        positive_finite("b0", self.b0)
    }

    /// The spec's recommended defaults (§2.1 R2 [REC]) for targets `y`: m0 = mean(y),
    /// κ0 = 1/3, a0 = ν/2 and b0 = νλ/2 with ν = 3 and λ = σ̂²·χ²_ν⁻¹(1 − q)/ν for
    /// q = 0.9 (§4.1), σ̂² the sample variance of y (1 when y has fewer than two distinct
    /// values, so the prior stays proper).
    pub fn calibrated(y: &[f64]) -> Self {
        const NU: f64 = 3.0;
        const Q: f64 = 0.9;
        let mut m = Moments::default();
        for &v in y {
            m.add(v);
        }
        let var = if m.n > 1 {
            m.m2 / (m.n - 1) as f64
        } else {
            0.0
        };
        let var = if var > 0.0 && var.is_finite() {
            var
        } else {
            1.0
        };
        let lambda = var * super::special::chi_square_quantile(1.0 - Q, NU) / NU;
        NormalInverseGamma {
            m0: m.mean,
            kappa0: 1.0 / 3.0,
            a0: NU / 2.0,
            b0: NU * lambda / 2.0,
        }
    }

    /// (κ_n, a_n, b_n, m_n).
    fn posterior(&self, s: &Moments) -> (f64, f64, f64, f64) {
        let n = s.n as f64;
        let kappa_n = self.kappa0 + n;
        let a_n = self.a0 + 0.5 * n;
        let dev = s.mean - self.m0;
        let b_n = self.b0 + 0.5 * s.m2 + self.kappa0 * n * dev * dev / (2.0 * kappa_n);
        let m_n = (self.kappa0 * self.m0 + n * s.mean) / kappa_n;
        (kappa_n, a_n, b_n, m_n)
    }
}

impl LeafModel for NormalInverseGamma {
    type Target = f64;
    type Stats = Moments;

    fn empty_stats(&self) -> Moments {
        Moments::default()
    }

    fn log_marginal(&self, s: &Moments) -> f64 {
        if s.n == 0 {
            return 0.0;
        }
        let (kappa_n, a_n, b_n, _) = self.posterior(s);
        ln_gamma(a_n) - ln_gamma(self.a0) + self.a0 * self.b0.ln() - a_n * b_n.ln()
            + 0.5 * (self.kappa0 / kappa_n).ln()
            - 0.5 * s.n as f64 * LN_2PI
    }

    fn log_predictive(&self, s: &Moments, y: f64) -> f64 {
        // Student-t with 2a_n degrees of freedom, location m_n, squared scale
        // b_n(κ_n + 1)/(a_n κ_n).
        let (kappa_n, a_n, b_n, m_n) = self.posterior(s);
        let dof = 2.0 * a_n;
        let scale2 = b_n * (kappa_n + 1.0) / (a_n * kappa_n);
        let z = (y - m_n) * (y - m_n) / (dof * scale2);
        ln_gamma(0.5 * (dof + 1.0))
            - ln_gamma(0.5 * dof)
            - 0.5 * (dof * std::f64::consts::PI * scale2).ln()
            - 0.5 * (dof + 1.0) * z.ln_1p()
    }
}

impl RegressionLeafModel for NormalInverseGamma {
    fn predictive_mean_variance(&self, s: &Moments) -> (f64, f64) {
        let (kappa_n, a_n, b_n, m_n) = self.posterior(s);
        let dof = 2.0 * a_n;
        let scale2 = b_n * (kappa_n + 1.0) / (a_n * kappa_n);
        let var = if dof > 2.0 {
            scale2 * dof / (dof - 2.0)
        } else {
            f64::INFINITY
        };
        (m_n, var)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(y: &[f64]) -> Moments {
        let mut m = Moments::default();
        for &v in y {
            m.add(v);
        }
        m
    }

    #[test]
    fn chain_rule_holds_for_every_model() {
        // T1: ℓ is the product of the sequential predictives.
        let dm = DirichletMultinomial::new(5.0, 3).unwrap();
        let labels = [0, 2, 2, 1, 0, 0, 2];
        let mut s = dm.empty_stats();
        let mut chain = 0.0;
        for &y in &labels {
            chain += dm.log_predictive(&s, y);
            s.add(y);
        }
        assert!((chain - dm.log_marginal(&s)).abs() < 1e-12);

        let ys = [0.3, -0.1, 0.5, 2.0, -1.2];
        let nkv = NormalKnownVariance {
            mean: 0.1,
            prior_variance: 0.5,
            noise_variance: 0.2,
        };
        let nig = NormalInverseGamma {
            m0: 0.2,
            kappa0: 0.5,
            a0: 2.0,
            b0: 1.0,
        };
        for model in [&nkv as &dyn Check, &nig] {
            model.check_chain(&ys);
        }
    }

    trait Check {
        fn check_chain(&self, ys: &[f64]);
    }
    impl<L: LeafModel<Target = f64, Stats = Moments>> Check for L {
        fn check_chain(&self, ys: &[f64]) {
            let mut s = self.empty_stats();
            let mut chain = 0.0;
            for &y in ys {
                chain += self.log_predictive(&s, y);
                s.add(y);
            }
            assert!((chain - self.log_marginal(&s)).abs() < 1e-12);
            assert_eq!(self.log_marginal(&Moments::default()), 0.0);
        }
    }

    #[test]
    fn moments_add_remove_merge_subtract() {
        let all = [1.5, -2.0, 3.25, 0.0, 7.0, -1.0];
        let whole = moments(&all);
        let left = moments(&all[..2]);
        let right = moments(&all[2..]);
        let mut merged = left;
        merged.merge(&right);
        assert_eq!(merged.n, whole.n);
        assert!((merged.mean - whole.mean).abs() < 1e-12);
        assert!((merged.m2 - whole.m2).abs() < 1e-12);
        let mut diff = whole;
        diff.subtract(&left);
        assert!((diff.mean - right.mean).abs() < 1e-12);
        assert!((diff.m2 - right.m2).abs() < 1e-12);
        let mut removed = whole;
        for &y in &all[..2] {
            removed.remove(y);
        }
        assert!((removed.mean - right.mean).abs() < 1e-12);
        assert!((removed.m2 - right.m2).abs() < 1e-12);
    }

    #[test]
    fn calibrated_nig_matches_spec_constants() {
        // b0 = νλ/2 = 1.5 · 0.194791 σ̂² = 0.292187 σ̂² (§4.1) for σ̂² = var(y).
        let y = [1.0, 2.0, 4.0, 7.0];
        let var = moments(&y).m2 / 3.0;
        let nig = NormalInverseGamma::calibrated(&y);
        assert!((nig.b0 / var - 0.292_187).abs() < 1e-6, "{}", nig.b0 / var);
        assert_eq!(nig.a0, 1.5);
        assert!((nig.m0 - 3.5).abs() < 1e-15);
        nig.validate().unwrap();
        assert!(NormalInverseGamma::calibrated(&[2.0]).validate().is_ok());
    }
}
