//! Bayesian kernel-width learning: the posterior over the lifetime λ from one sweep, and the
//! resulting predictive mixture (spec `mondrian-kernel.md` §3.5, A14).
//!
//! The feature map, hence the marginal likelihood `exp(L(λ))`, is constant on each interval
//! `[τ_c, τ_{c+1})` between sweep events, so a prior with CDF F on `[0, Λ]` gives interval
//! masses `π_c ∝ exp(L(τ_c)) (F(τ_{c+1}) − F(τ_c))`. `|L|` is of order N (e.g. about 4.6 N
//! from `−(N/2) ln δ²` at δ² = 1e-4), so everything runs in log space.

use std::fmt;

/// Invalid inputs to [`lifetime_posterior`]. Event indices are 1-based (`τ_1..τ_K`), interval
/// and log-likelihood indices 0-based (`c = 0..K`).
#[derive(Debug, Clone, PartialEq)]
pub enum BayesError {
    /// There must be one log marginal likelihood per interval: `taus + 1` of them.
    LengthMismatch {
        /// Number of event times K.
        taus: usize,
        /// Number of log marginal likelihoods given.
        log_liks: usize,
    },
    /// `τ_index` is not greater than the time before it (`τ_0 = 0`), or is NaN.
    NotIncreasing {
        /// 1-based event index.
        index: usize,
    },
    /// `τ_index` exceeds the terminal lifetime Λ.
    BeyondTerminal {
        /// 1-based event index.
        index: usize,
    },
    /// Λ is not a positive number.
    InvalidTerminal,
    /// The prior CDF gave NaN or a negative mass on interval `index`.
    InvalidPrior {
        /// 0-based interval index.
        index: usize,
    },
    /// The prior puts no mass on `[0, Λ]`.
    ZeroPriorMass,
    /// `L(τ_index)` is NaN or +∞.
    InvalidLogLik {
        /// 0-based interval index.
        index: usize,
    },
    /// Every interval with prior mass has likelihood 0 (`L = −∞`).
    ZeroEvidence,
}

impl fmt::Display for BayesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LengthMismatch { taus, log_liks } => {
                write!(
                    f,
                    "{taus} event times need {} log-likelihoods, got {log_liks}",
                    taus + 1
                )
            }
            Self::NotIncreasing { index } => write!(f, "event time {index} is not increasing"),
            Self::BeyondTerminal { index } => {
                write!(f, "event time {index} lies beyond the terminal lifetime")
            }
            Self::InvalidTerminal => write!(f, "the terminal lifetime must be positive"),
            Self::InvalidPrior { index } => {
                write!(f, "the prior CDF gives an invalid mass on interval {index}")
            }
            Self::ZeroPriorMass => write!(f, "the prior has no mass on [0, terminal]"),
            Self::InvalidLogLik { index } => write!(f, "log-likelihood {index} is NaN or +inf"),
            Self::ZeroEvidence => write!(f, "every interval with prior mass has zero likelihood"),
        }
    }
}

impl std::error::Error for BayesError {}

/// Posterior masses `π_c` of the intervals `[τ_c, τ_{c+1})`, `c = 0..=K`, with `τ_0 = 0` and
/// `τ_{K+1} = Λ` (spec §3.5, A14): `π_c ∝ exp(L(τ_c)) (F(τ_{c+1}) − F(τ_c))`, normalised by
/// log-sum-exp. Inputs: the event times `taus` (strictly increasing, positive, ≤ Λ), the
/// log marginal likelihoods `log_liks = L(τ_0..τ_K)`, `terminal = Λ` and the prior CDF F.
/// Returns `(π, ln Z)` with `Z = p(y | X) = Σ_c exp(L(τ_c)) (F(τ_{c+1}) − F(τ_c))`.
/// Intervals without prior mass get `π_c = 0` exactly; `L = −∞` is allowed.
pub fn lifetime_posterior(
    taus: &[f64],
    log_liks: &[f64],
    terminal: f64,
    prior_cdf: impl Fn(f64) -> f64,
) -> Result<(Vec<f64>, f64), BayesError> {
    if log_liks.len() != taus.len() + 1 {
        return Err(BayesError::LengthMismatch {
            taus: taus.len(),
            log_liks: log_liks.len(),
        });
    }
    if terminal.is_nan() || terminal <= 0.0 {
        return Err(BayesError::InvalidTerminal);
    }
    let mut prev = 0.0;
    for (i, &t) in taus.iter().enumerate() {
        if t.is_nan() || t <= prev {
            return Err(BayesError::NotIncreasing { index: i + 1 });
        }
        if t > terminal {
            return Err(BayesError::BeyondTerminal { index: i + 1 });
        }
        prev = t;
    }
    if let Some(index) = log_liks
        .iter()
        .position(|l| l.is_nan() || *l == f64::INFINITY)
    {
        return Err(BayesError::InvalidLogLik { index });
    }
    // ln(prior mass) + L per interval; −∞ where either factor is 0.
    let (mut terms, mut any_mass) = (Vec::with_capacity(log_liks.len()), false);
    let mut f_lo = prior_cdf(0.0);
    for (c, &l) in log_liks.iter().enumerate() {
        let f_hi = prior_cdf(taus.get(c).copied().unwrap_or(terminal));
        let mass = f_hi - f_lo;
        if mass.is_nan() || mass < 0.0 {
            return Err(BayesError::InvalidPrior { index: c });
        }
        any_mass |= mass > 0.0;
        terms.push(if mass > 0.0 {
            l + mass.ln()
        } else {
            f64::NEG_INFINITY
        });
        f_lo = f_hi;
    }
    if !any_mass {
        return Err(BayesError::ZeroPriorMass);
    }
    let top = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if top == f64::NEG_INFINITY {
        return Err(BayesError::ZeroEvidence);
    }
    // Every exponent is ≤ 0 and the largest is exactly 0, so the sum lies in [1, K + 1].
    terms.iter_mut().for_each(|x| *x = (*x - top).exp());
    let sum: f64 = terms.iter().sum();
    terms.iter_mut().for_each(|x| *x /= sum);
    Ok((terms, top + sum.ln()))
}

/// Mean and variance of a Gaussian mixture for one test point (spec §3.5): components
/// `(means[c], variances[c])` with weights `weights[c]` (normalised here by their sum). The
/// variance is the law of total variance, `Σ π_c (σ_c² + (μ_c − μ)²)`, summed in this
/// centred form to avoid cancellation. A component of the §3.5 predictive has mean
/// `y_mean + φ_c(x)ᵀŵ_c` and variance `δ² (1 + φ_c(x)ᵀ A_c⁻¹ φ_c(x))`.
///
/// # Panics
/// If the three slices differ in length.
pub fn mixture_moments(weights: &[f64], means: &[f64], variances: &[f64]) -> (f64, f64) {
    assert!(weights.len() == means.len() && means.len() == variances.len());
    let total: f64 = weights.iter().sum();
    let mean = weights.iter().zip(means).map(|(w, m)| w * m).sum::<f64>() / total;
    let spread = weights.iter().zip(means.iter().zip(variances));
    let var = spread
        .map(|(w, (m, v))| w * (v + (m - mean).powi(2)))
        .sum::<f64>()
        / total;
    (mean, var)
}

/// Running predictive mixture over many test points, fed one interval at a time during the
/// sweep with unnormalised log weights `L(τ_c) + ln(F(τ_{c+1}) − F(τ_c))` (spec §3.5: "or
/// accumulate a running log-sum-exp-weighted mixture"), in O(N_test) memory instead of
/// O(K N_test). Means and spreads use West's weighted update; the weights stay relative to
/// the largest log weight seen, so nothing overflows.
#[derive(Debug, Clone)]
pub struct MixtureAccumulator {
    log_top: f64,
    weight: f64,
    mean: Vec<f64>,
    m2: Vec<f64>,
}

impl MixtureAccumulator {
    /// An empty mixture over `n_points` test points.
    pub fn new(n_points: usize) -> Self {
        let z = vec![0.0; n_points];
        Self {
            log_top: f64::NEG_INFINITY,
            weight: 0.0,
            mean: z.clone(),
            m2: z,
        }
    }

    /// Adds one component with log weight `log_weight` (−∞ adds nothing) and per-point means
    /// and variances.
    pub fn add(&mut self, log_weight: f64, means: &[f64], variances: &[f64]) {
        assert!(means.len() == self.mean.len() && variances.len() == self.mean.len());
        assert!(
            !log_weight.is_nan() && log_weight < f64::INFINITY,
            "invalid log weight"
        );
        if log_weight == f64::NEG_INFINITY {
            return;
        }
        if log_weight > self.log_top {
            let shrink = (self.log_top - log_weight).exp();
            self.weight *= shrink;
            self.m2.iter_mut().for_each(|x| *x *= shrink);
            self.log_top = log_weight;
        }
        let w = (log_weight - self.log_top).exp();
        let total = self.weight + w;
        let (f, g) = (w / total, self.weight * w / total);
        let acc = self.mean.iter_mut().zip(self.m2.iter_mut());
        for ((mean, m2), (&mu, &var)) in acc.zip(means.iter().zip(variances)) {
            let d = mu - *mean;
            *mean += f * d;
            *m2 += w * var + g * d * d;
        }
        self.weight = total;
    }

    /// `ln Σ exp(log_weight)` over the components added (`ln Z` when the log weights are
    /// those of [`lifetime_posterior`]); −∞ while empty.
    pub fn log_total(&self) -> f64 {
        self.log_top + self.weight.ln()
    }

    /// Mixture means per test point.
    pub fn means(&self) -> &[f64] {
        &self.mean
    }

    /// Mixture variances per test point (law of total variance); NaN while empty.
    pub fn variances(&self) -> Vec<f64> {
        self.m2.iter().map(|m2| m2 / self.weight).collect()
    }
}

/// CDF of the log-uniform prior on `[lo, hi]`, `0 < lo < hi` (a scale-free prior on λ).
///
/// # Panics
/// Unless `0 < lo < hi < ∞`.
pub fn log_uniform_cdf(lo: f64, hi: f64) -> impl Fn(f64) -> f64 {
    assert!(
        lo > 0.0 && hi > lo && hi.is_finite(),
        "log_uniform_cdf needs 0 < lo < hi"
    );
    let span = (hi / lo).ln();
    move |t: f64| {
        if t <= lo {
            0.0
        } else if t >= hi {
            1.0
        } else {
            (t / lo).ln() / span
        }
    }
}

/// CDF of the uniform prior on `[0, hi]`.
///
/// # Panics
/// Unless `0 < hi < ∞`.
pub fn uniform_cdf(hi: f64) -> impl Fn(f64) -> f64 {
    assert!(hi > 0.0 && hi.is_finite(), "uniform_cdf needs 0 < hi < inf");
    move |t: f64| (t / hi).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    /// T17: π ≥ 0, Σπ = 1, and each π_c matches the brute-force formula (small |L|, where
    /// direct exponentiation is safe).
    #[test]
    fn weights_are_a_distribution_matching_brute_force() {
        let taus = [0.5, 1.0, 2.5, 4.0];
        let lls = [-3.0, -1.0, -0.5, -2.0, -4.0];
        let prior = log_uniform_cdf(0.1, 5.0);
        let (pi, log_z) = lifetime_posterior(&taus, &lls, 5.0, &prior).unwrap();
        let edges = [0.0, 0.5, 1.0, 2.5, 4.0, 5.0];
        let raw: Vec<f64> = (0..5)
            .map(|c| lls[c].exp() * (prior(edges[c + 1]) - prior(edges[c])))
            .collect();
        let z: f64 = raw.iter().sum();
        assert!(close(log_z, z.ln(), 1e-14));
        for (p, r) in pi.iter().zip(&raw) {
            assert!(*p >= 0.0 && close(*p, r / z, 1e-14));
        }
        assert!(close(pi.iter().sum(), 1.0, 1e-15));
        // Uniform prior: interval masses are lengths / Λ.
        let (pi, log_z) = lifetime_posterior(&taus, &lls, 5.0, uniform_cdf(5.0)).unwrap();
        let raw: Vec<f64> = (0..5)
            .map(|c| lls[c].exp() * (edges[c + 1] - edges[c]) / 5.0)
            .collect();
        let z: f64 = raw.iter().sum();
        assert!(close(log_z, z.ln(), 1e-14) && close(pi[2], raw[2] / z, 1e-14));
    }

    /// T17: a prior uniform on one interval puts all posterior mass there.
    #[test]
    fn prior_on_one_interval_selects_it() {
        let taus = [0.2, 0.7, 1.5];
        let lls = [-10.0, 3.0, -2.0, 7.0];
        for c in 0..4 {
            let lo = if c == 0 { 0.0 } else { taus[c - 1] };
            let hi = if c == 3 { 2.0 } else { taus[c] };
            let prior = move |t: f64| ((t - lo) / (hi - lo)).clamp(0.0, 1.0);
            let (pi, log_z) = lifetime_posterior(&taus, &lls, 2.0, prior).unwrap();
            for (j, p) in pi.iter().enumerate() {
                assert_eq!(*p, if j == c { 1.0 } else { 0.0 });
            }
            assert!(close(log_z, lls[c], 1e-15)); // Z = exp(L_c) · 1
        }
    }

    /// Log-likelihoods near −1e6 neither overflow nor underflow. By hand, L = (−1e6,
    /// −1e6 + ½, −1e6 − 1000) (exact in f64) with equal masses ⅓ gives π ∝ (1, e^½, e^-1000),
    /// so π_0 = 1/(1 + e^½), π_1 = e^½/(1 + e^½), π_2 ≈ 0, and ln Z = −1e6 + ln((1 + e^½)/3).
    #[test]
    fn huge_log_likelihoods_are_stable() {
        let lls = [-1e6, -1e6 + 0.5, -1e6 - 1000.0];
        let (pi, log_z) = lifetime_posterior(&[1.0, 2.0], &lls, 3.0, uniform_cdf(3.0)).unwrap();
        let e = 0.5f64.exp();
        assert!(close(pi[0], 1.0 / (1.0 + e), 1e-14) && close(pi[1], e / (1.0 + e), 1e-14));
        assert!(pi[2] >= 0.0 && pi[2] < 1e-300);
        assert!(
            close(log_z, -1e6 + ((1.0 + e) / 3.0).ln(), 1e-15),
            "{log_z}"
        );
        let (pi, _) = lifetime_posterior(&[1.0], &[1e6, 1e6 - 1.0], 2.0, uniform_cdf(2.0)).unwrap();
        assert!(close(pi[0], 1.0 / (1.0 + (-1f64).exp()), 1e-14));
    }

    #[test]
    fn invalid_inputs_are_rejected() {
        let u = uniform_cdf(2.0);
        let err = |t: &[f64], l: &[f64], lam: f64| lifetime_posterior(t, l, lam, &u).unwrap_err();
        let lm = BayesError::LengthMismatch {
            taus: 1,
            log_liks: 1,
        };
        assert_eq!(err(&[1.0], &[0.0], 2.0), lm);
        assert_eq!(
            err(&[1.0, 1.0], &[0.0; 3], 2.0),
            BayesError::NotIncreasing { index: 2 }
        );
        assert_eq!(
            err(&[0.0], &[0.0; 2], 2.0),
            BayesError::NotIncreasing { index: 1 }
        );
        assert_eq!(
            err(&[3.0], &[0.0; 2], 2.0),
            BayesError::BeyondTerminal { index: 1 }
        );
        assert_eq!(
            err(&[1.0], &[0.0; 2], f64::NAN),
            BayesError::InvalidTerminal
        );
        assert_eq!(
            err(&[1.0], &[0.0, f64::NAN], 2.0),
            BayesError::InvalidLogLik { index: 1 }
        );
        let none = |_: f64| 0.0;
        let r = lifetime_posterior(&[1.0], &[0.0; 2], 2.0, none);
        assert_eq!(r.unwrap_err(), BayesError::ZeroPriorMass);
        let r = lifetime_posterior(&[1.0], &[0.0; 2], 2.0, |t: f64| -t);
        assert_eq!(r.unwrap_err(), BayesError::InvalidPrior { index: 0 });
        let r = lifetime_posterior(&[1.0], &[f64::NEG_INFINITY; 2], 2.0, &u);
        assert_eq!(r.unwrap_err(), BayesError::ZeroEvidence);
        assert!(!BayesError::ZeroEvidence.to_string().is_empty());
    }

    /// T17: all mass on one component returns that component; two components match the law of
    /// total variance by hand: π = (¼, ¾), μ = (1, 3), σ² = (0.5, 2) → mean 2.5,
    /// variance ¼·0.5 + ¾·2 + ¼·(1 − 2.5)² + ¾·(3 − 2.5)² = 0.125 + 1.5 + 0.5625 + 0.1875 = 2.375.
    #[test]
    fn mixture_moments_by_hand() {
        assert_eq!(
            mixture_moments(&[0.0, 1.0, 0.0], &[5.0, -2.0, 9.0], &[1.0, 0.3, 4.0]),
            (-2.0, 0.3)
        );
        let (m, v) = mixture_moments(&[0.25, 0.75], &[1.0, 3.0], &[0.5, 2.0]);
        assert!(close(m, 2.5, 1e-15) && close(v, 2.375, 1e-15));
    }

    /// The running accumulator equals the batch posterior and mixture, with |log weights|
    /// around 1e6.
    #[test]
    fn accumulator_matches_batch_mixture() {
        let taus = [0.3, 0.9, 1.7];
        let lls = [-1e6 - 3.0, -1e6, -1e6 - 0.5, -1e6 - 40.0];
        let prior = uniform_cdf(2.0);
        let (pi, log_z) = lifetime_posterior(&taus, &lls, 2.0, &prior).unwrap();
        let means = [[0.1, 5.0], [0.4, 4.0], [-0.2, 6.0], [1.0, 0.0]];
        let vars = [[0.01, 0.2], [0.02, 0.1], [0.03, 0.3], [0.5, 0.5]];
        let mut acc = MixtureAccumulator::new(2);
        let edges = [0.0, 0.3, 0.9, 1.7, 2.0];
        for c in [2, 0, 3, 1] {
            acc.add(
                lls[c] + (prior(edges[c + 1]) - prior(edges[c])).ln(),
                &means[c],
                &vars[c],
            );
        }
        assert!(close(acc.log_total(), log_z, 1e-14));
        for i in 0..2 {
            let mu: Vec<f64> = means.iter().map(|m| m[i]).collect();
            let var: Vec<f64> = vars.iter().map(|v| v[i]).collect();
            let (m, v) = mixture_moments(&pi, &mu, &var);
            assert!(close(acc.means()[i], m, 1e-13) && close(acc.variances()[i], v, 1e-13));
        }
    }
}
