//! The hyper-parameters θ of the Gaussian hierarchy (spec `mf-regression.md` §2.1, §2.5):
//! the settable heuristic and the empirical-Bayes estimate by Nelder–Mead.

use serde::{Deserialize, Serialize};

use super::Moments;
use crate::error::{MondrianError, Result};

/// How the observation noise σ_y² is set (§2.5, §7 A4).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub enum NoiseRule {
    /// σ_y² = γ1 / K = 2s²/(K + 2), the thesis' rule.
    #[default]
    Thesis,
    /// σ_y² = s² / K, the authors' released code.
    Reference,
    /// A known noise variance (> 0); γ1 then solves γ1/2 + σ_y² = s².
    Fixed(f64),
}

/// The constants of the hyper-parameter heuristic (§2.5), all settable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HyperSettings {
    /// K = min(`k_cap`, 2N) (thesis: 2000; reference code: 500).
    pub k_cap: f64,
    /// γ2 = D / (`gamma2_divisor` · max(1, log2 N)) (thesis: 20; reference code: 2).
    pub gamma2_divisor: f64,
    /// A fixed γ2 instead of the rule above.
    pub gamma2: Option<f64>,
    /// The noise rule.
    pub noise: NoiseRule,
    /// Relative floor on the label variance: s² ≥ `var_floor` · max(1, ȳ²) (§5 item 2).
    pub var_floor: f64,
    /// Known hyper-parameters, used as they are instead of the heuristic.
    pub theta: Option<Theta>,
    /// How θ is chosen when it is not given.
    pub estimate: Estimate,
}

/// How the forest chooses θ (§2.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Estimate {
    /// The thesis' closed-form heuristic from the label moments (§2.5).
    #[default]
    Heuristic,
    /// Empirical Bayes: the heuristic's μ_H, then γ1, γ2 and σ_y² maximising the sum over
    /// trees of the exact log marginal likelihood log p(Y | θ, T) (§2.3.4), the model's own
    /// criterion, which the thesis leaves as future work. Keeps γ1/2 + σ_y² = s² (the
    /// heuristic's total variance) and searches the noise share and γ2.
    MarginalLikelihood,
}

impl Default for HyperSettings {
    fn default() -> Self {
        HyperSettings {
            k_cap: 2000.0,
            gamma2_divisor: 20.0,
            gamma2: None,
            noise: NoiseRule::Thesis,
            var_floor: 1e-12,
            theta: None,
            estimate: Estimate::Heuristic,
        }
    }
}

impl HyperSettings {
    /// Checks every constant.
    pub fn validate(&self) -> Result<()> {
        let bad = |name, reason: &str| {
            Err(MondrianError::InvalidParameter {
                name,
                reason: reason.to_string(),
            })
        };
        if !(self.k_cap.is_finite() && self.k_cap >= 1.0) {
            return bad("k_cap", "must be a finite number ≥ 1");
        }
        if !(self.gamma2_divisor.is_finite() && self.gamma2_divisor > 0.0) {
            return bad("gamma2_divisor", "must be finite and > 0");
        }
        if self.gamma2.is_some_and(|g| !(g.is_finite() && g > 0.0)) {
            return bad("gamma2", "must be finite and > 0");
        }
        if let NoiseRule::Fixed(v) = self.noise {
            if !(v.is_finite() && v > 0.0) {
                return bad("noise variance", "must be finite and > 0");
            }
        }
        if !(self.var_floor.is_finite() && self.var_floor > 0.0) {
            return bad("var_floor", "must be finite and > 0");
        }
        if let Some(t) = self.theta {
            let ok = t.mu_h.is_finite()
                && t.gamma1.is_finite()
                && t.gamma1 >= 0.0
                && t.gamma2.is_finite()
                && t.gamma2 > 0.0
                && t.noise_var.is_finite()
                && t.noise_var > 0.0;
            if !ok {
                return bad("theta", "needs finite μ_H, γ1 ≥ 0, γ2 > 0 and σ_y² > 0");
            }
        }
        Ok(())
    }
}

/// Hyper-parameters θ of the Gaussian hierarchy, shared by all trees (§2.1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Theta {
    /// Prior mean μ_H of the root.
    pub mu_h: f64,
    /// Scale γ1 of the edge variances.
    pub gamma1: f64,
    /// Time scale γ2.
    pub gamma2: f64,
    /// Observation noise σ_y².
    pub noise_var: f64,
}

impl Theta {
    /// The heuristic of §2.5 from the moments of all training labels and the feature count:
    /// μ_H = ȳ, γ1 = 2Ks²/(K+2), σ_y² = γ1/K, γ2 = D/(20 log2 N), with K = min(2000, 2N).
    /// `settings.theta`, when given, is returned as it is.
    pub fn heuristic(labels: Moments, n_features: usize, settings: &HyperSettings) -> Theta {
        Self::heuristic_for_extent(labels, n_features as f64, settings)
    }

    /// [`heuristic`](Self::heuristic) with D replaced by `extent`, the linear dimension of
    /// the unit box in the trees' space: Σ_d w_d under feature weights, D without them. The
    /// γ2 rule scales split times by it because τ is inversely proportional to it.
    pub fn heuristic_for_extent(labels: Moments, extent: f64, settings: &HyperSettings) -> Theta {
        if let Some(theta) = settings.theta {
            return theta;
        }
        let n = labels.n.max(1.0);
        let mean = labels.mean;
        let s2 = labels
            .variance()
            .max(settings.var_floor * mean.powi(2).max(1.0));
        let k = settings.k_cap.min(2.0 * n);
        let (gamma1, noise_var) = match settings.noise {
            NoiseRule::Thesis => {
                let g1 = 2.0 * k * s2 / (k + 2.0);
                (g1, g1 / k)
            }
            NoiseRule::Reference => (2.0 * k * s2 / (k + 2.0), s2 / k),
            NoiseRule::Fixed(v) => (2.0 * (s2 - v).max(settings.var_floor * s2), v),
        };
        let gamma2 = settings
            .gamma2
            .unwrap_or(extent / (settings.gamma2_divisor * n.log2().max(1.0)));
        Theta {
            mu_h: mean,
            gamma1,
            gamma2,
            noise_var,
        }
    }

    /// `γ1 [σ(γ2 (τ_p + Δ)) − σ(γ2 τ_p)]` without subtracting sigmoids (§2.3.5); `Δ = ∞`
    /// gives `γ1 σ(−γ2 τ_p)`.
    #[inline]
    pub fn edge_variance(&self, tau_parent: f64, delta: f64) -> f64 {
        let b = self.gamma2 * tau_parent;
        let eb = (-b).exp();
        if delta.is_infinite() {
            return self.gamma1 * eb / (1.0 + eb);
        }
        let g = self.gamma2 * delta;
        if g <= 0.0 {
            return 0.0;
        }
        self.gamma1 * eb * -(-g).exp_m1() / ((1.0 + eb) * (1.0 + (-(b + g)).exp()))
    }
}

/// Empirical-Bayes θ ([`Estimate::MarginalLikelihood`]): starting from the heuristic θ0,
/// maximises `Σ_t log p(Y | θ, T_t)` over the noise share f = σ_y²/s² ∈ (0, 1) (with
/// γ1 = 2(1 − f)s², so the prior's total variance stays s²) and log γ2, by Nelder–Mead
/// from the heuristic's point. `objective(θ)` returns the summed log marginal likelihood.
pub fn estimate_theta(theta0: Theta, objective: impl Fn(&Theta) -> f64) -> Theta {
    let s2 = theta0.gamma1 / 2.0 + theta0.noise_var;
    if s2.is_nan() || s2 <= 0.0 {
        return theta0;
    }
    let make = |p: [f64; 2]| {
        // f = logistic(p0) keeps the noise share in (0, 1).
        let f = 1.0 / (1.0 + (-p[0]).exp());
        Theta {
            mu_h: theta0.mu_h,
            gamma1: 2.0 * (1.0 - f) * s2,
            gamma2: p[1].exp(),
            noise_var: f * s2,
        }
    };
    let f0 = (theta0.noise_var / s2).clamp(1e-6, 1.0 - 1e-6);
    let start = [(f0 / (1.0 - f0)).ln(), theta0.gamma2.ln()];
    let cost = |p: [f64; 2]| {
        let v = -objective(&make(p));
        if v.is_finite() {
            v
        } else {
            f64::INFINITY
        }
    };
    make(nelder_mead_2d(cost, start, [2.0, 1.0], 120))
}

/// Minimises `cost` over R² by the Nelder–Mead simplex from `start` with initial steps
/// `step`, for at most `evaluations` evaluations.
fn nelder_mead_2d(
    cost: impl Fn([f64; 2]) -> f64,
    start: [f64; 2],
    step: [f64; 2],
    evaluations: usize,
) -> [f64; 2] {
    let mut pts = [
        start,
        [start[0] + step[0], start[1]],
        [start[0], start[1] + step[1]],
    ];
    let mut vals = pts.map(&cost);
    let mut used = 3;
    let lerp =
        |a: [f64; 2], b: [f64; 2], t: f64| [a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1])];
    while used < evaluations {
        // Order best, middle, worst.
        let mut order = [0, 1, 2];
        order.sort_by(|&i, &j| vals[i].total_cmp(&vals[j]));
        pts = order.map(|i| pts[i]);
        vals = order.map(|i| vals[i]);
        if (vals[2] - vals[0]).abs() <= 1e-9 * (1.0 + vals[0].abs()) {
            break;
        }
        let centre = lerp(pts[0], pts[1], 0.5);
        let reflect = lerp(centre, pts[2], -1.0);
        let fr = cost(reflect);
        used += 1;
        if fr < vals[0] {
            let expand = lerp(centre, pts[2], -2.0);
            let fe = cost(expand);
            used += 1;
            (pts[2], vals[2]) = if fe < fr { (expand, fe) } else { (reflect, fr) };
        } else if fr < vals[1] {
            (pts[2], vals[2]) = (reflect, fr);
        } else {
            let contract = lerp(centre, pts[2], 0.5);
            let fc = cost(contract);
            used += 1;
            if fc < vals[2] {
                (pts[2], vals[2]) = (contract, fc);
            } else {
                for k in 1..3 {
                    pts[k] = lerp(pts[0], pts[k], 0.5);
                    vals[k] = cost(pts[k]);
                    used += 1;
                }
            }
        }
    }
    let best = (0..3)
        .min_by(|&i, &j| vals[i].total_cmp(&vals[j]))
        .unwrap_or(0);
    pts[best]
}
