//! The Gaussian hierarchy of Mondrian regression trees (spec `mf-regression.md` §2–3):
//! label moments per node, the hyper-parameter heuristic, exact belief propagation and the
//! per-tree predictive mixture with branch-off.
//!
//! Each node j has a latent mean μ_j; μ_root ~ N(μ_H, φ_root), μ_j | μ_parent ~ N(μ_parent, φ_j)
//! with `φ_j = γ1 [σ(γ2 τ_j) − σ(γ2 τ_parent)]` (a Brownian motion in sigmoid-transformed
//! time), and the labels of a leaf are N(μ_leaf, σ_y²). Messages are kept in
//! (mean, variance) form with Kalman-gain combinations, which stay defined when a variance
//! underflows to 0 (§2.3).

use serde::{Deserialize, Serialize};

use crate::error::{MondrianError, Result};
use crate::tree::{MondrianTree, NodeStatistics, PathStep};

/// Count, mean and sum of squared deviations of a set of labels (Welford; §1.2). The count
/// includes multiplicity (online bagging).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Moments {
    /// Number of labels.
    pub n: f64,
    /// Their mean.
    pub mean: f64,
    /// Σ (y − mean)².
    pub m2: f64,
}

impl Moments {
    /// Finite, with a count and a sum of squares ≥ 0 (checks of decoded models).
    pub(crate) fn is_valid(&self) -> bool {
        self.n.is_finite()
            && self.n >= 0.0
            && self.mean.is_finite()
            && self.m2.is_finite()
            && self.m2 >= 0.0
    }

    /// Whether these moments equal `exact` up to rounding, for targets of magnitude at
    /// most `scale` (the relative tolerance 1e-6 is far above the rounding of any
    /// summation order and far below anything that could matter to a prediction).
    pub(crate) fn agrees_with(&self, exact: &Moments, scale: f64) -> bool {
        const TOL: f64 = 1e-6;
        let scale = scale.max(f64::MIN_POSITIVE);
        self.n == exact.n
            && (self.mean - exact.mean).abs() <= TOL * scale
            && (self.m2 - exact.m2).abs() <= TOL * exact.n * scale * scale
    }

    /// Adds `weight` copies of `y`.
    #[inline]
    pub fn push(&mut self, y: f64, weight: f64) {
        let n = self.n + weight;
        let d = y - self.mean;
        let mean = self.mean + d * weight / n;
        self.m2 += weight * d * (y - mean);
        self.mean = mean;
        self.n = n;
    }

    /// Takes out `weight` copies of `y`, which must have been pushed: the inverse of
    /// [`push`](Self::push) (`m2` is kept ≥ 0 against rounding; the last copy out leaves
    /// empty moments).
    #[inline]
    pub fn remove(&mut self, y: f64, weight: f64) {
        let n = self.n - weight;
        if n <= 0.0 {
            *self = Moments::default();
            return;
        }
        let mean = (self.n * self.mean - weight * y) / n;
        self.m2 = (self.m2 - weight * (y - mean) * (y - self.mean)).max(0.0);
        self.mean = mean;
        self.n = n;
    }

    /// The moments of the union of two disjoint sets (Chan et al.'s pairwise update).
    pub fn merge(a: Moments, b: Moments) -> Moments {
        if a.n == 0.0 {
            return b;
        }
        if b.n == 0.0 {
            return a;
        }
        let n = a.n + b.n;
        let d = b.mean - a.mean;
        Moments {
            n,
            mean: a.mean + d * b.n / n,
            m2: a.m2 + b.m2 + d * d * a.n * b.n / n,
        }
    }

    /// Population variance m2 / n (0 for an empty or single-label set).
    pub fn variance(&self) -> f64 {
        if self.n > 0.0 {
            (self.m2 / self.n).max(0.0)
        } else {
            0.0
        }
    }

    /// The moments of `ys`.
    pub fn of(ys: &[f64]) -> Moments {
        let mut m = Moments::default();
        for &y in ys {
            m.push(y, 1.0);
        }
        m
    }
}

/// Label moments at every node of a tree: the leaf likelihood of exact BP and the whole
/// predictive of the fast approximation (§2.6).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TargetMoments {
    nodes: Vec<Moments>,
}

impl TargetMoments {
    /// No nodes yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The moments of `node`.
    #[inline]
    pub fn get(&self, node: u32) -> Moments {
        self.nodes[node as usize]
    }

    /// Checks moments read from a file: one per node of `tree`, each valid and equal, up to
    /// rounding, to the moments of the stored `targets` its subtree holds. A forged mean or
    /// sum of squares far outside the targets' range would otherwise load and turn the
    /// predictions into infinities.
    pub(crate) fn check_decoded(
        &self,
        tree: &MondrianTree,
        targets: &[f64],
    ) -> std::result::Result<(), String> {
        if self.nodes.len() != tree.n_nodes() {
            return Err("target moments do not match the tree".into());
        }
        if !self.nodes.iter().all(Moments::is_valid) {
            return Err("target moments are not finite".into());
        }
        let scale = targets.iter().fold(0.0f64, |m, y| m.max(y.abs()));
        let mut recomputed = vec![Moments::default(); self.nodes.len()];
        let Some(root) = tree.root() else {
            return Ok(());
        };
        // Children come after their parent in preorder: the reverse meets them first.
        for &j in tree.subtree_preorder(root).iter().rev() {
            let m = match tree.children(j) {
                Some((l, r)) => Moments::merge(recomputed[l as usize], recomputed[r as usize]),
                None => {
                    let mut m = Moments::default();
                    for &i in tree.leaf_points(j) {
                        m.push(targets[i as usize], 1.0);
                    }
                    m
                }
            };
            if !self.get(j).agrees_with(&m, scale) {
                return Err("target moments do not match the stored targets".into());
            }
            recomputed[j as usize] = m;
        }
        Ok(())
    }
}

impl NodeStatistics for TargetMoments {
    type Target = f64;

    fn resize(&mut self, n_nodes: usize) {
        self.nodes.resize(n_nodes, Moments::default());
    }

    fn reserve(&mut self, n_nodes: usize) {
        self.nodes.reserve(n_nodes.saturating_sub(self.nodes.len()));
    }

    fn set_leaf(&mut self, node: u32, points: &[u32], targets: &[f64]) {
        let mut m = Moments::default();
        for &i in points {
            m.push(targets[i as usize], 1.0);
        }
        self.nodes[node as usize] = m;
    }

    fn set_internal(&mut self, node: u32, left: u32, right: u32) -> bool {
        let merged = Moments::merge(self.get(left), self.get(right));
        let changed = merged != self.nodes[node as usize];
        self.nodes[node as usize] = merged;
        changed
    }

    fn set_parent_of(&mut self, node: u32, child: u32) {
        self.nodes[node as usize] = self.get(child);
    }

    fn absorb_leaf(&mut self, node: u32, target: f64, weight: u32) -> bool {
        self.nodes[node as usize].push(target, f64::from(weight));
        true
    }

    fn absorb_internal(&mut self, node: u32, target: f64, weight: u32) -> bool {
        self.nodes[node as usize].push(target, f64::from(weight));
        true
    }

    fn bytes_per_node(&self) -> usize {
        std::mem::size_of::<Moments>()
    }

    #[inline(always)]
    fn prefetch(&self, node: u32) {
        if let Some(m) = self.nodes.get(node as usize) {
            crate::tree::prefetch_lines(m as *const Moments as *const u8, 1);
        }
    }
}

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

/// `log Σ_k w_k N(y; m_k, v_k)` by log-sum-exp (§3.3).
pub fn mixture_log_density(components: &[Component], y: f64) -> f64 {
    let logs: Vec<f64> = components
        .iter()
        .filter(|c| c.weight > 0.0)
        .map(|c| {
            let v = c.var.max(f64::MIN_POSITIVE);
            c.weight.ln() - 0.5 * ((2.0 * std::f64::consts::PI * v).ln() + (y - c.mean).powi(2) / v)
        })
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
    let poly = -x * x - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    0.5 * if x >= 0.0 { erfc } else { 2.0 - erfc }
}

/// `P(Y ≤ y)` under a Gaussian mixture (weights need not be normalised); a component of
/// variance 0 is a point mass.
pub fn mixture_cdf(components: &[Component], y: f64) -> f64 {
    let total: f64 = components.iter().map(|c| c.weight).sum();
    components
        .iter()
        .map(|c| {
            let sd = c.var.max(0.0).sqrt();
            let below = if sd > 0.0 {
                normal_cdf((y - c.mean) / sd)
            } else if y >= c.mean {
                1.0
            } else {
                0.0
            };
            c.weight * below
        })
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
