//! The Gaussian label model of regression trees written from the spec (`mf-regression.md`
//! §2–3), for the regression tests; nothing here calls the library's Gaussian code:
//! * a tree's path, boxes and branch-off weights by brute force from the training rows
//!   under each node ([`path_weights`]);
//! * the fast mode's mixture from the training targets under each node
//!   ([`fast_components`]);
//! * the hierarchy as a dense Gaussian process over the training labels,
//!   `Cov(μ_a, μ_b) = γ1 [σ(γ2 τ_lca(a,b)) − ½]`, conditioned by a Cholesky solve
//!   ([`Dense`], [`exact_components`]): every posterior and predictive without belief
//!   propagation;
//! * the thesis heuristic θ (§2.5) and mixture moments and densities in closed form.

use mondrian::process::Feature;
use mondrian::stats::gaussian::Theta;
use mondrian::tree::MondrianTree;

/// One Gaussian component of a predictive mixture: (weight, mean, variance).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comp {
    pub weight: f64,
    pub mean: f64,
    pub var: f64,
}

/// The training points under node `j` (leaf lists, with multiplicity).
pub fn points_below(tree: &MondrianTree, j: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut stack = vec![j];
    while let Some(k) = stack.pop() {
        match tree.children(k) {
            Some((a, b)) => stack.extend([a, b]),
            None => out.extend_from_slice(tree.leaf_points(k)),
        }
    }
    out
}

/// The route of `x` from the root to its leaf, by the splits (`x[δ] ≤ ξ` goes left).
pub fn route(tree: &MondrianTree, x: &[Feature]) -> Vec<u32> {
    let mut j = tree.root().expect("a fitted tree");
    let mut path = vec![j];
    while let Some((left, right)) = tree.children(j) {
        j = if x[tree.split_dimension(j)] <= tree.split_location(j) {
            left
        } else {
            right
        };
        path.push(j);
    }
    path
}

/// One node of a weighed path: Δ = τ_j − τ_parent, η = L1 distance from x to the bounding
/// box of the rows under j, the probability `branch` that x branches off just above j,
/// and at the leaf the probability `leaf` that it never branched off.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub node: u32,
    pub delta: f64,
    pub eta: f64,
    pub branch: f64,
    pub leaf: f64,
}

/// The weighed path of `x` (spec §3.1): with S the probability of not having branched off
/// above j, `branch_j = S (1 − e^{−η_j Δ_j})` and then `S ← S e^{−η_j Δ_j}`; a leaf has
/// Δ = ∞ (λ = ∞), so it takes all of S by branching off when η > 0 and holds it otherwise.
/// Boxes are the bounding boxes of the rows under each node, in f64.
pub fn path_weights(tree: &MondrianTree, features: &[Feature], x: &[Feature]) -> Vec<Step> {
    let d = x.len();
    let mut survive = 1.0;
    let mut tau_parent = 0.0;
    let mut out = Vec::new();
    for j in route(tree, x) {
        let below = points_below(tree, j);
        let mut eta = 0.0;
        for (dim, &v) in x.iter().enumerate() {
            let vals = below
                .iter()
                .map(|&i| f64::from(features[i as usize * d + dim]));
            let lo = vals.clone().fold(f64::INFINITY, f64::min);
            let hi = vals.fold(f64::NEG_INFINITY, f64::max);
            let v = f64::from(v);
            eta += (lo - v).max(0.0) + (v - hi).max(0.0);
        }
        let tau = tree.split_time(j);
        let delta = tau - tau_parent;
        // (p, 1 − p), each without rounding the other away.
        let (p, stay) = if eta == 0.0 {
            (0.0, 1.0)
        } else if delta.is_infinite() {
            (1.0, 0.0)
        } else {
            (-(-eta * delta).exp_m1(), (-eta * delta).exp())
        };
        let branch = survive * p;
        survive *= stay;
        let leaf = if tree.is_leaf(j) { survive } else { 0.0 };
        out.push(Step {
            node: j,
            delta,
            eta,
            branch,
            leaf,
        });
        tau_parent = tau;
    }
    out
}

/// Mean and population variance of the targets of `points`.
pub fn label_moments(targets: &[f64], points: &[u32]) -> (f64, f64) {
    let n = points.len() as f64;
    let mean = points.iter().map(|&i| targets[i as usize]).sum::<f64>() / n;
    let var = points
        .iter()
        .map(|&i| (targets[i as usize] - mean).powi(2))
        .sum::<f64>()
        / n;
    (mean, var)
}

/// The fast mode's mixture (spec §2.6, Mode F): a branch-off above j and the leaf each give
/// the empirical mean and variance of the labels under the node, plus the noise σ_y².
pub fn fast_components(
    tree: &MondrianTree,
    features: &[Feature],
    targets: &[f64],
    noise_var: f64,
    x: &[Feature],
) -> Vec<Comp> {
    let mut out = Vec::new();
    for s in path_weights(tree, features, x) {
        for w in [s.branch, s.leaf] {
            if w > 0.0 {
                let (mean, var) = label_moments(targets, &points_below(tree, s.node));
                out.push(Comp {
                    weight: w,
                    mean,
                    var: var + noise_var,
                });
            }
        }
    }
    out
}

/// `E[Δ̃]` for Δ̃ ~ Exp(η) truncated to [0, Δ]: `1/η − Δ/(e^{ηΔ} − 1)` (`1/η` for Δ = ∞),
/// by its series `Δ/2 − ηΔ²/12` where the difference would cancel.
pub fn truncated_exp_mean(eta: f64, delta: f64) -> f64 {
    if delta.is_infinite() {
        return 1.0 / eta;
    }
    let a = eta * delta;
    if a < 1e-4 {
        delta * (0.5 - a / 12.0)
    } else {
        1.0 / eta - delta / a.exp_m1()
    }
}

/// γ1 [σ(γ2 τ) − ½], the prior variance of μ at time τ (γ1/2 at τ = ∞).
pub fn var_at(theta: &Theta, tau: f64) -> f64 {
    if tau.is_infinite() {
        theta.gamma1 / 2.0
    } else {
        theta.gamma1 * (1.0 / (1.0 + (-theta.gamma2 * tau).exp()) - 0.5)
    }
}

/// `j` and its ancestors, bottom up.
pub fn ancestors(tree: &MondrianTree, mut j: u32) -> Vec<u32> {
    let mut out = vec![j];
    while let Some(p) = tree.parent(j) {
        out.push(p);
        j = p;
    }
    out
}

pub fn lca(tree: &MondrianTree, a: u32, b: u32) -> u32 {
    let up = ancestors(tree, a);
    *ancestors(tree, b)
        .iter()
        .find(|n| up.contains(n))
        .expect("same tree")
}

pub fn cov_nodes(tree: &MondrianTree, theta: &Theta, a: u32, b: u32) -> f64 {
    var_at(theta, tree.split_time(lca(tree, a, b)))
}

/// Lower Cholesky factor of the SPD matrix `a` (n × n, row-major).
fn cholesky(a: &[f64], n: usize) -> Vec<f64> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            l[i * n + j] = if i == j { s.sqrt() } else { s / l[j * n + j] };
        }
    }
    l
}

/// Solves `L Lᵀ x = b`.
fn cholesky_solve(l: &[f64], b: &[f64]) -> Vec<f64> {
    let n = b.len();
    let mut z = b.to_vec();
    for i in 0..n {
        for k in 0..i {
            z[i] -= l[i * n + k] * z[k];
        }
        z[i] /= l[i * n + i];
    }
    for i in (0..n).rev() {
        for k in i + 1..n {
            z[i] -= l[k * n + i] * z[k];
        }
        z[i] /= l[i * n + i];
    }
    z
}

/// The GP view of one tree: the training labels (leaf lists, with multiplicity) with the
/// leaf of each, and `K + σ² I` factored once.
pub struct Dense<'a> {
    pub tree: &'a MondrianTree,
    pub theta: Theta,
    pub ys: Vec<f64>,
    /// Leaf of each training label (in the order of `ys`).
    pub leaf_of: Vec<u32>,
    /// Cholesky factor of K + σ² I.
    factor: Vec<f64>,
    /// (K + σ² I)⁻¹ (y − μ_H).
    alpha: Vec<f64>,
}

impl<'a> Dense<'a> {
    pub fn new(tree: &'a MondrianTree, theta: Theta, targets: &[f64]) -> Self {
        let leaves = tree.leaves();
        let mut ys = Vec::new();
        let mut leaf_index = Vec::new();
        for (li, &leaf) in leaves.iter().enumerate() {
            for &i in tree.leaf_points(leaf) {
                ys.push(targets[i as usize]);
                leaf_index.push(li);
            }
        }
        // Covariances depend on the leaves only: one lowest common ancestor per pair.
        let nl = leaves.len();
        let mut leaf_cov = vec![0.0; nl * nl];
        for a in 0..nl {
            for b in 0..=a {
                let c = cov_nodes(tree, &theta, leaves[a], leaves[b]);
                leaf_cov[a * nl + b] = c;
                leaf_cov[b * nl + a] = c;
            }
        }
        let n = ys.len();
        let mut kn = vec![0.0; n * n];
        for a in 0..n {
            for b in 0..n {
                kn[a * n + b] = leaf_cov[leaf_index[a] * nl + leaf_index[b]]
                    + if a == b { theta.noise_var } else { 0.0 };
            }
        }
        let factor = cholesky(&kn, n);
        let r: Vec<f64> = ys.iter().map(|y| y - theta.mu_h).collect();
        let alpha = cholesky_solve(&factor, &r);
        Dense {
            tree,
            theta,
            ys,
            leaf_of: leaf_index.iter().map(|&li| leaves[li]).collect(),
            factor,
            alpha,
        }
    }

    /// Posterior (mean, variance) of a latent with prior variance `var` and covariances `k`
    /// with the labels.
    pub fn condition(&self, k: &[f64], var: f64) -> (f64, f64) {
        let m = self.theta.mu_h + k.iter().zip(&self.alpha).map(|(a, b)| a * b).sum::<f64>();
        let v = var
            - k.iter()
                .zip(cholesky_solve(&self.factor, k))
                .map(|(a, b)| a * b)
                .sum::<f64>();
        (m, v)
    }

    /// Posterior (mean, variance) of node j's μ.
    pub fn node_posterior(&self, j: u32) -> (f64, f64) {
        let k: Vec<f64> = self
            .leaf_of
            .iter()
            .map(|&l| cov_nodes(self.tree, &self.theta, j, l))
            .collect();
        self.condition(&k, var_at(&self.theta, self.tree.split_time(j)))
    }

    /// log N(y; μ_H 1, K + σ² I).
    pub fn log_marginal(&self) -> f64 {
        let n = self.ys.len();
        let logdet: f64 = (0..n).map(|i| 2.0 * self.factor[i * n + i].ln()).sum();
        let quad: f64 = self
            .ys
            .iter()
            .zip(&self.alpha)
            .map(|(y, a)| (y - self.theta.mu_h) * a)
            .sum();
        -0.5 * (n as f64 * (2.0 * std::f64::consts::PI).ln() + logdet + quad)
    }
}

/// The exact mode's mixture at `x` (spec §3.1–3.2, Mode E): each branch-off above a path
/// node j, at the plug-in time τ_parent + E[Δ̃], is a new leaf whose label is conditioned on
/// the training labels (covariance `var_at(t)` with the labels under j, and that of
/// parent(j)'s lowest common ancestor with the others); the leaf is the leaf's latent
/// conditioned likewise; both add the noise σ_y².
pub fn exact_components(dense: &Dense, features: &[Feature], x: &[Feature]) -> Vec<Comp> {
    let (tree, theta) = (dense.tree, &dense.theta);
    let mut out = Vec::new();
    let mut tau_parent = 0.0;
    for s in path_weights(tree, features, x) {
        if s.branch > 0.0 {
            let t = tau_parent + truncated_exp_mean(s.eta, s.delta);
            let k: Vec<f64> = dense
                .leaf_of
                .iter()
                .map(|&l| {
                    if ancestors(tree, l).contains(&s.node) {
                        var_at(theta, t)
                    } else {
                        let p = tree.parent(s.node).expect("the root holds every label");
                        cov_nodes(tree, theta, p, l)
                    }
                })
                .collect();
            let (mean, var) = dense.condition(&k, theta.gamma1 / 2.0);
            out.push(Comp {
                weight: s.branch,
                mean,
                var: var + theta.noise_var,
            });
        }
        if s.leaf > 0.0 {
            let k: Vec<f64> = dense
                .leaf_of
                .iter()
                .map(|&l| cov_nodes(tree, theta, s.node, l))
                .collect();
            let (mean, var) = dense.condition(&k, theta.gamma1 / 2.0);
            out.push(Comp {
                weight: s.leaf,
                mean,
                var: var + theta.noise_var,
            });
        }
        tau_parent = tree.split_time(s.node);
    }
    out
}

/// The thesis heuristic of §2.5 for labels `y` over `d` features: μ_H = ȳ, s² the
/// population variance, K = min(2000, 2N), γ1 = 2Ks²/(K + 2), σ_y² = γ1/K,
/// γ2 = D/(20 max(1, log2 N)).
pub fn heuristic_theta(y: &[f64], d: usize) -> Theta {
    let n = y.len() as f64;
    let mean = y.iter().sum::<f64>() / n;
    let s2 = y.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    let k = (2.0 * n).min(2000.0);
    let gamma1 = 2.0 * k * s2 / (k + 2.0);
    Theta {
        mu_h: mean,
        gamma1,
        gamma2: d as f64 / (20.0 * n.log2().max(1.0)),
        noise_var: gamma1 / k,
    }
}

/// Mean and variance of a mixture whose weights sum to 1: `Σ w m` and `Σ w (v + m²) − E²`.
pub fn moments(comps: &[Comp]) -> (f64, f64) {
    let mean: f64 = comps.iter().map(|c| c.weight * c.mean).sum();
    let second: f64 = comps
        .iter()
        .map(|c| c.weight * (c.var + c.mean * c.mean))
        .sum();
    (mean, second - mean * mean)
}

/// The normal density N(y; m, v).
pub fn normal_pdf(y: f64, mean: f64, var: f64) -> f64 {
    (-(y - mean).powi(2) / (2.0 * var)).exp() / (2.0 * std::f64::consts::PI * var).sqrt()
}

/// The density of a mixture at y, summed directly.
pub fn density(comps: &[Comp], y: f64) -> f64 {
    comps
        .iter()
        .map(|c| c.weight * normal_pdf(y, c.mean, c.var))
        .sum()
}
