//! The Gaussian hierarchy of Mondrian regression trees (spec `mf-regression.md` §2–3):
//! label moments per node, the hyper-parameter heuristic, exact belief propagation and the
//! per-tree predictive mixture with branch-off.
//!
//! Each node j has a latent mean μ_j; μ_root ~ N(μ_H, φ_root), μ_j | μ_parent ~ N(μ_parent, φ_j)
//! with `φ_j = γ1 [σ(γ2 τ_j) − σ(γ2 τ_parent)]` (a Brownian motion in sigmoid-transformed
//! time), and the labels of a leaf are N(μ_leaf, σ_y²). Messages are kept in
//! (mean, variance) form with Kalman-gain combinations, which stay defined when a variance
//! underflows to 0 (§2.3).

mod mixture;
mod theta;

pub use crate::stats::moments::{Moments, TargetMoments};
pub(crate) use mixture::erfcc_series;
pub use mixture::{
    component_cdf, mixture_cdf, mixture_log_density, mixture_moments, mixture_quantile, normal_cdf,
    weighted_log_density,
};
pub use theta::{estimate_theta, Estimate, HyperSettings, NoiseRule, Theta};

use serde::{Deserialize, Serialize};

use crate::tree::{MondrianTree, PathStep};

/// The upward (likelihood) message of a node: `p(labels below j | μ_j) ∝ N(lm; μ_j, lv)`,
/// and `uv = φ_j + lv`, its variance as a message to the parent (§2.3.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Upward {
    /// Mean λm.
    pub lm: f64,
    /// Variance λv.
    pub lv: f64,
    /// φ_j, the prior variance of the edge above j.
    pub phi: f64,
    /// φ_j + λv.
    pub uv: f64,
}

/// Product of two Gaussian factors in μ given as (mean, variance): the mean and variance of
/// the normalised product, by a Kalman gain (defined when one variance is 0).
#[inline]
fn combine(m1: f64, v1: f64, m2: f64, v2: f64) -> (f64, f64) {
    let s = v1 + v2;
    if s <= 0.0 {
        return ((m1 + m2) / 2.0, 0.0);
    }
    let k = v1 / s;
    (m1 + k * (m2 - m1), v1 * v2 / s)
}

/// Which predictive the regression forest uses (§3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum PredictionMode {
    /// The exact model: belief propagation and the posterior of the branch-off node at its
    /// expected time (Mode E, plug-in).
    #[default]
    Exact,
    /// The exact model averaged over the branch-off time by 16-point Gauss–Legendre
    /// quadrature instead of the plug-in (Mode E-quad): each branch-off node contributes 16
    /// components.
    ExactQuadrature,
    /// The fast empirical approximation: each node predicts N(ȳ_j, s_j² + σ_y²) (§2.6).
    Fast,
}

/// One Gaussian of a predictive mixture.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Component {
    /// Mixture weight.
    pub weight: f64,
    /// Mean.
    pub mean: f64,
    /// Variance.
    pub var: f64,
}

/// The Gaussian label model of one forest: θ and the prediction mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaussianModel {
    /// Hyper-parameters.
    pub theta: Theta,
    /// Exact or fast.
    pub mode: PredictionMode,
}

/// Expected time from the parent to a branch-off above node j: the mean of Exp(η)
/// truncated to [0, Δ] (untruncated when Δ = ∞), in forms that neither overflow nor cancel
/// (§3.2, §5 item 8).
pub fn expected_branch_gap(eta: f64, delta: f64) -> f64 {
    if delta.is_infinite() {
        return 1.0 / eta;
    }
    let a = eta * delta;
    if a < 1e-5 {
        delta * (0.5 - a / 12.0)
    } else {
        1.0 / eta - delta * (-a).exp() / -(-a).exp_m1()
    }
}

impl GaussianModel {
    /// Upward messages of every node of `tree` (§2.3.1), children before parents.
    pub fn upward(&self, tree: &MondrianTree, moments: &TargetMoments) -> Vec<Upward> {
        let mut msgs = vec![Upward::default(); tree.n_nodes()];
        let Some(root) = tree.root() else {
            return msgs;
        };
        let theta = &self.theta;
        for &j in tree.subtree_preorder(root).iter().rev() {
            let (lm, lv) = match tree.children(j) {
                None => {
                    let m = moments.get(j);
                    (m.mean, theta.noise_var / m.n)
                }
                Some((a, b)) => {
                    let (ma, mb) = (msgs[a as usize], msgs[b as usize]);
                    combine(ma.lm, ma.uv, mb.lm, mb.uv)
                }
            };
            let phi = theta.edge_variance(tree.parent_split_time(j), delta_of(tree, j));
            msgs[j as usize] = Upward {
                lm,
                lv,
                phi,
                uv: phi + lv,
            };
        }
        msgs
    }

    /// log p(Y | θ, T), the exact log marginal likelihood of the labels under the tree
    /// (§2.3.4), from the upward messages.
    pub fn log_marginal(
        &self,
        tree: &MondrianTree,
        moments: &TargetMoments,
        msgs: &[Upward],
    ) -> f64 {
        let Some(root) = tree.root() else {
            return 0.0;
        };
        let ln_2pi = (2.0 * std::f64::consts::PI).ln();
        let ln_normal = |x: f64, m: f64, v: f64| -0.5 * (ln_2pi + v.ln() + (x - m).powi(2) / v);
        let s2 = self.theta.noise_var;
        let mut log_c = vec![0.0; tree.n_nodes()];
        for &j in tree.subtree_preorder(root).iter().rev() {
            log_c[j as usize] = match tree.children(j) {
                None => {
                    let m = moments.get(j);
                    -(m.n / 2.0) * (ln_2pi + s2.ln()) - m.m2 / (2.0 * s2)
                        + 0.5 * (ln_2pi + (s2 / m.n).ln())
                }
                Some((a, b)) => {
                    let (ua, ub) = (msgs[a as usize], msgs[b as usize]);
                    log_c[a as usize] + log_c[b as usize] + ln_normal(ua.lm, ub.lm, ua.uv + ub.uv)
                }
            };
        }
        let u = msgs[root as usize];
        log_c[root as usize] + ln_normal(u.lm, self.theta.mu_h, u.phi + u.lv)
    }

    /// Posterior (mean, variance) of μ_j at every node (§2.3.2–2.3.3): a full downward pass.
    pub fn posteriors(&self, tree: &MondrianTree, msgs: &[Upward]) -> Vec<(f64, f64)> {
        let mut post = vec![(0.0, 0.0); tree.n_nodes()];
        let Some(root) = tree.root() else {
            return post;
        };
        let theta = &self.theta;
        // (πm, πv) of each node, filled parents first.
        let mut prior = vec![(0.0, 0.0); tree.n_nodes()];
        prior[root as usize] = (theta.mu_h, theta.edge_variance(0.0, delta_of(tree, root)));
        for j in tree.subtree_preorder(root) {
            let (pm, pv) = prior[j as usize];
            let u = msgs[j as usize];
            post[j as usize] = combine(pm, pv, u.lm, u.lv);
            if let Some((a, b)) = tree.children(j) {
                for (c, s) in [(a, b), (b, a)] {
                    let sib = msgs[s as usize];
                    let (cm, cv) = combine(pm, pv, sib.lm, sib.uv);
                    prior[c as usize] = (cm, cv + msgs[c as usize].phi);
                }
            }
        }
        post
    }

    /// The predictive mixture of one tree at a (scaled) point, given the path `steps` of
    /// [`MondrianTree::path_steps`] (§3.1–3.2, Algorithm 6.5 with the on-the-fly downward
    /// pass of §2.4). Components are appended to `out`; their weights sum to 1.
    pub fn tree_components(
        &self,
        tree: &MondrianTree,
        moments: &TargetMoments,
        msgs: &[Upward],
        steps: &[PathStep],
        out: &mut Vec<Component>,
    ) {
        let theta = &self.theta;
        let noise = theta.noise_var;
        // Cavity at the parent of the current node (excluding it), and its prior.
        let (mut cm, mut cv) = (theta.mu_h, 0.0);
        let mut tau_parent = 0.0;
        let exact = self.mode != PredictionMode::Fast;
        for (k, step) in steps.iter().enumerate() {
            let j = step.node;
            // The fast mode keeps no messages.
            let u = if exact {
                msgs[j as usize]
            } else {
                Upward::default()
            };
            if exact && k > 0 {
                // Move the cavity from the parent p = steps[k-1] to j: the parent's prior
                // times the message of j's sibling.
                let p = steps[k - 1].node;
                let (pm, pv) = (cm, cv + msgs[p as usize].phi);
                let (a, b) = tree.children(p).expect("a path step has a parent");
                let s = if a == j { b } else { a };
                let sib = msgs[s as usize];
                (cm, cv) = combine(pm, pv, sib.lm, sib.uv);
            }
            if step.branch_weight > 0.0 {
                let w = step.branch_weight;
                // The posterior of the branch-off node ĵ inserted at time t between the
                // parent and j, plus the edge to the new leaf and the noise (§3.2).
                let at = |gap: f64| {
                    let t = tau_parent + gap;
                    let phi_a = theta.edge_variance(tau_parent, gap);
                    let phi_b = theta.edge_variance(t, step.delta - gap);
                    let phi_leaf = theta.edge_variance(t, f64::INFINITY);
                    let (m, v) = combine(cm, cv + phi_a, u.lm, u.lv + phi_b);
                    (m, v + phi_leaf + noise)
                };
                match self.mode {
                    PredictionMode::Fast => {
                        let m = moments.get(j);
                        out.push(Component {
                            weight: w,
                            mean: m.mean,
                            var: m.variance() + noise,
                        });
                    }
                    PredictionMode::Exact => {
                        let (mean, var) = at(expected_branch_gap(step.eta, step.delta));
                        out.push(Component {
                            weight: w,
                            mean,
                            var,
                        });
                    }
                    PredictionMode::ExactQuadrature => {
                        // Δ̃(u) = −log1p(−u F)/η inverts the truncated Exp(η) law.
                        let f = if step.delta.is_infinite() {
                            1.0
                        } else {
                            -(-step.eta * step.delta).exp_m1()
                        };
                        for &(node, weight) in gauss_legendre_16() {
                            let (mean, var) = at(-(-node * f).ln_1p() / step.eta);
                            out.push(Component {
                                weight: w * weight,
                                mean,
                                var,
                            });
                        }
                    }
                }
            }
            if step.leaf_weight > 0.0 {
                let (mean, var) = match self.mode {
                    PredictionMode::Fast => {
                        let m = moments.get(j);
                        (m.mean, m.variance() + noise)
                    }
                    PredictionMode::Exact | PredictionMode::ExactQuadrature => {
                        let (m, v) = combine(cm, cv + u.phi, u.lm, u.lv);
                        (m, v + noise)
                    }
                };
                out.push(Component {
                    weight: step.leaf_weight,
                    mean,
                    var,
                });
            }
            tau_parent = tree.split_time(j);
        }
    }
}

/// Nodes and weights of 16-point Gauss–Legendre quadrature mapped to (0, 1) (weights sum
/// to 1), computed once by Newton's method on the Legendre polynomial P16.
fn gauss_legendre_16() -> &'static [(f64, f64); 16] {
    static RULE: std::sync::OnceLock<[(f64, f64); 16]> = std::sync::OnceLock::new();
    RULE.get_or_init(|| {
        const Q: usize = 16;
        let mut rule = [(0.0, 0.0); Q];
        for (i, slot) in rule.iter_mut().enumerate() {
            // Chebyshev-like first guess for the i-th root on (−1, 1), then Newton.
            let mut z = (std::f64::consts::PI * (i as f64 + 0.75) / (Q as f64 + 0.5)).cos();
            let mut dp = 0.0;
            for _ in 0..100 {
                let (mut p0, mut p1) = (1.0, z);
                for k in 2..=Q {
                    let k = k as f64;
                    (p0, p1) = (p1, ((2.0 * k - 1.0) * z * p1 - (k - 1.0) * p0) / k);
                }
                dp = Q as f64 * (z * p1 - p0) / (z * z - 1.0);
                let step = p1 / dp;
                z -= step;
                if step.abs() < 1e-16 {
                    break;
                }
            }
            let w = 2.0 / ((1.0 - z * z) * dp * dp);
            *slot = ((1.0 - z) / 2.0, w / 2.0);
        }
        rule
    })
}

/// Δ_j = τ_j − τ_parent(j), `+∞` at leaves (λ = ∞).
fn delta_of(tree: &MondrianTree, node: u32) -> f64 {
    tree.split_time(node) - tree.parent_split_time(node)
}
