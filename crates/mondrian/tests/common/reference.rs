//! The label model written from the spec, for the prediction tests (`prediction.rs`,
//! `prediction_general.rs`): discounts, posterior means ([P] Eq. 4), a reference
//! Predict(T, x) of §4.4 ([P] Eq. 5–6), the leaf mean along a path, and small helpers
//! (the library's per-tree prediction, tolerant comparison, one-hot vectors, mixtures).
//! Nothing here is copied from the library's output.

use mondrian::process::Feature;
use mondrian::stats::label::{BranchCounts, LabelCounts, LabelModel, LabelScratch};
use mondrian::tree::MondrianTree;

/// d_j = exp(−γΔ) with γ = 0 ⇒ 1 and Δ = ∞ ⇒ 0 (§3.1).
pub fn discount(gamma: f64, delta: f64) -> f64 {
    if gamma == 0.0 {
        1.0
    } else if delta.is_infinite() {
        0.0
    } else {
        (-gamma * delta).exp()
    }
}

/// d̄ = E[e^{−γΔ̃}], Δ̃ ~ Exp(η) truncated to [0, Δ] (§4.2).
pub fn mean_discount(eta: f64, gamma: f64, delta: f64) -> f64 {
    if gamma == 0.0 {
        return 1.0;
    }
    let ratio = eta / (eta + gamma);
    if delta.is_infinite() {
        ratio
    } else {
        ratio * (-(eta + gamma) * delta).exp_m1() / (-eta * delta).exp_m1()
    }
}

/// Ḡ_j = (c − d·tab + d·T·Ḡ_parent) / C, or Ḡ_parent when C = 0 ([P] Eq. 4, §3.5).
pub fn posterior_mean(c: &[u32], d: f64, parent: &[f64]) -> Vec<f64> {
    let total: f64 = c.iter().map(|&v| f64::from(v)).sum();
    if total == 0.0 {
        return parent.to_vec();
    }
    let tables = c.iter().filter(|&&v| v > 0).count() as f64;
    c.iter()
        .zip(parent)
        .map(|(&ck, &g)| {
            let tab = if ck > 0 { 1.0 } else { 0.0 };
            (f64::from(ck) - d * tab + d * tables * g) / total
        })
        .collect()
}

pub fn tables(c: &[u32]) -> Vec<u32> {
    c.iter().map(|&v| v.min(1)).collect()
}

/// Mean of the branch-off node above j (§4.3): Paper uses c_j̃ = tab_j, Reference c_j.
pub fn branch_mean(c: &[u32], d_bar: f64, parent: &[f64], variant: BranchCounts) -> Vec<f64> {
    match variant {
        BranchCounts::Paper => posterior_mean(&tables(c), d_bar, parent),
        BranchCounts::Reference => posterior_mean(c, d_bar, parent),
    }
}

/// η_j(x): L1 distance from x to the node's box, in f64 (`f`: the training features).
pub fn eta(tree: &MondrianTree, f: &[Feature], j: u32, x: &[Feature]) -> f64 {
    let mut s = 0.0;
    let (lower, upper) = tree.data_box(j, f);
    for ((&l, &u), &v) in lower.iter().zip(upper.iter()).zip(x) {
        let (l, u, v) = (f64::from(l), f64::from(u), f64::from(v));
        s += (l - v).max(0.0) + (v - u).max(0.0);
    }
    s
}

/// Predict(T, x) of §4.4 written from the spec (with [P] Eq. 5–6).
pub fn reference_predict(
    tree: &MondrianTree,
    counts: &LabelCounts,
    f: &[Feature],
    x: &[Feature],
    gamma: f64,
    variant: BranchCounts,
) -> Vec<f64> {
    let k = counts.n_classes();
    let h = vec![1.0 / k as f64; k];
    let Some(mut j) = tree.root() else {
        return h;
    };
    let mut s = vec![0.0; k];
    let mut not_branched = 1.0;
    let mut g_par = h;
    let mut tau_par = 0.0;
    loop {
        let delta = tree.split_time(j) - tau_par;
        let e = eta(tree, f, j, x);
        let mut p_split = 0.0;
        if e > 0.0 && delta > 0.0 {
            p_split = if delta.is_infinite() {
                1.0
            } else {
                -(-e * delta).exp_m1()
            };
            let g_branch = branch_mean(
                counts.node(j),
                mean_discount(e, gamma, delta),
                &g_par,
                variant,
            );
            for (sk, gk) in s.iter_mut().zip(&g_branch) {
                *sk += not_branched * p_split * gk;
            }
        }
        let g = posterior_mean(counts.node(j), discount(gamma, delta), &g_par);
        if tree.is_leaf(j) {
            for (sk, gk) in s.iter_mut().zip(&g) {
                *sk += not_branched * (1.0 - p_split) * gk;
            }
            return s;
        }
        not_branched *= 1.0 - p_split;
        g_par = g;
        tau_par = tree.split_time(j);
        j = tree.route(j, x);
    }
}

/// Ḡ of the leaf x is routed to, along its path, no branch-off (§3.5).
pub fn leaf_mean(tree: &MondrianTree, counts: &LabelCounts, x: &[Feature], gamma: f64) -> Vec<f64> {
    let k = counts.n_classes();
    let mut g = vec![1.0 / k as f64; k];
    let mut j = tree.root().unwrap();
    let mut tau_par = 0.0;
    loop {
        g = posterior_mean(
            counts.node(j),
            discount(gamma, tree.split_time(j) - tau_par),
            &g,
        );
        if tree.is_leaf(j) {
            return g;
        }
        tau_par = tree.split_time(j);
        j = tree.route(j, x);
    }
}

/// The library's p_T(y | x) for one tree.
pub fn predict(
    tree: &MondrianTree,
    counts: &LabelCounts,
    f: &[Feature],
    x: &[Feature],
    gamma: f64,
    variant: BranchCounts,
) -> Vec<f64> {
    let mut out = vec![0.0; counts.n_classes()];
    let model = LabelModel {
        gamma,
        branch_counts: variant,
    };
    model.predict_tree(
        tree,
        counts,
        f,
        x,
        1.0,
        &mut LabelScratch::default(),
        &mut out,
    );
    out
}

pub fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= tol,
            "{what}: got {got:?}, want {want:?} (tol {tol:e})"
        );
    }
}

pub fn one_hot(k: usize, y: usize) -> Vec<f64> {
    (0..k).map(|i| if i == y { 1.0 } else { 0.0 }).collect()
}

pub fn mix(a: f64, u: &[f64], b: f64, v: &[f64]) -> Vec<f64> {
    u.iter().zip(v).map(|(x, y)| a * x + b * y).collect()
}
