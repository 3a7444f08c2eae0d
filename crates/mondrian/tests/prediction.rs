//! Prediction tests (spec `mf-classification.md` §3.5, §4, §6, §8.5): closed forms, the
//! exact two-point forest limit, Monte-Carlo consistency of `Predict` with sampled
//! extensions, normalisation, and the limits γ = 0, γ → ∞, λ = 0.
//!
//! Expected values are derived in the comments (closed forms) or computed by code written
//! here from the spec (a reference posterior-mean routine and an extension sampler), never
//! copied from the library's output. Statistical comparisons run at family-wise level
//! α = 1e-3 (see `common::Family`) with fixed seeds.

mod common;

use common::*;
use mondrian::process::{expected_discount, Feature};
use mondrian::stats::label::{BranchCounts, LabelCounts, LabelModel, LabelScratch};
use mondrian::tree::{MondrianTree, PauseRule};
use mondrian::{ClassifierParams, MondrianForestClassifier, Scaling};
use rand::Rng;

const INF: f64 = f64::INFINITY;

// ---------------------------------------------------------------------------------------
// Reference label model, written from the spec
// ---------------------------------------------------------------------------------------

/// d_j = exp(−γΔ) with γ = 0 ⇒ 1 and Δ = ∞ ⇒ 0 (§3.1).
fn discount(gamma: f64, delta: f64) -> f64 {
    if gamma == 0.0 {
        1.0
    } else if delta.is_infinite() {
        0.0
    } else {
        (-gamma * delta).exp()
    }
}

/// d̄ = E[e^{−γΔ̃}], Δ̃ ~ Exp(η) truncated to [0, Δ] (§4.2).
fn mean_discount(eta: f64, gamma: f64, delta: f64) -> f64 {
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
fn posterior_mean(c: &[u32], d: f64, parent: &[f64]) -> Vec<f64> {
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

fn tables(c: &[u32]) -> Vec<u32> {
    c.iter().map(|&v| v.min(1)).collect()
}

/// Mean of the branch-off node above j (§4.3): Paper uses c_j̃ = tab_j, Reference c_j.
fn branch_mean(c: &[u32], d_bar: f64, parent: &[f64], variant: BranchCounts) -> Vec<f64> {
    match variant {
        BranchCounts::Paper => posterior_mean(&tables(c), d_bar, parent),
        BranchCounts::Reference => posterior_mean(c, d_bar, parent),
    }
}

/// η_j(x): L1 distance from x to the node's box, in f64 (`f`: the training features).
fn eta(tree: &MondrianTree, f: &[Feature], j: u32, x: &[Feature]) -> f64 {
    let mut s = 0.0;
    let (lower, upper) = tree.data_box(j, f);
    for ((&l, &u), &v) in lower.iter().zip(upper.iter()).zip(x) {
        let (l, u, v) = (f64::from(l), f64::from(u), f64::from(v));
        s += (l - v).max(0.0) + (v - u).max(0.0);
    }
    s
}

/// Predict(T, x) of §4.4 written from the spec (with [P] Eq. 5–6).
fn reference_predict(
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
fn leaf_mean(tree: &MondrianTree, counts: &LabelCounts, x: &[Feature], gamma: f64) -> Vec<f64> {
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
fn predict(
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

fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= tol,
            "{what}: got {got:?}, want {want:?} (tol {tol:e})"
        );
    }
}

fn one_hot(k: usize, y: usize) -> Vec<f64> {
    (0..k).map(|i| if i == y { 1.0 } else { 0.0 }).collect()
}

fn mix(a: f64, u: &[f64], b: f64, v: &[f64]) -> Vec<f64> {
    u.iter().zip(v).map(|(x, y)| a * x + b * y).collect()
}

// ---------------------------------------------------------------------------------------
// §8.5 item 1: expected discount
// ---------------------------------------------------------------------------------------

/// Spec §8.5 item 1 / §4.2: d̄(η, γ, Δ) against the spec's reference values and against
/// composite Simpson quadrature of ∫_0^Δ e^{−γt} η e^{−ηt} dt / (1 − e^{−ηΔ}); bounds max(e^{−γΔ}, η/(η+γ)) ≤ d̄ ≤ 1 and
/// monotone decrease in γ.
#[test]
fn expected_discount_values_bounds_and_quadrature() {
    assert!((expected_discount(1.0, 2.0, 0.5) - 0.6581367003).abs() < 1e-9);
    assert!((expected_discount(1.0, 2.0, INF) - 1.0 / 3.0).abs() < 1e-15);
    assert!((expected_discount(3.0, 3.0, 1.0) - 0.5248935342).abs() < 1e-9);
    assert!((expected_discount(1e-12, 2.0, 0.5) - 0.6321205588).abs() < 1e-9);
    assert_eq!(expected_discount(0.7, 0.0, 2.0), 1.0);
    assert_eq!(expected_discount(0.7, 0.0, INF), 1.0);
    // Composite Simpson on [0, b] of the smooth integrand η e^{−(η+γ)t} / (1 − e^{−ηΔ}),
    // truncated at b = min(Δ, 60/(η+γ)) (the neglected tail is below e^{−60} relative).
    // Simpson's error is (b/n)⁴/180 · max|f⁗| ≤ (60/n)⁴/180 relative to f(0).
    let quadrature = |eta: f64, gamma: f64, delta: f64| {
        let norm = if delta.is_infinite() {
            1.0
        } else {
            -(-eta * delta).exp_m1()
        };
        let f = |t: f64| eta * (-(eta + gamma) * t).exp() / norm;
        let b = delta.min(60.0 / (eta + gamma));
        let n = 20_000;
        let h = b / n as f64;
        let mut s = f(0.0) + f(b);
        for i in 1..n {
            s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
        }
        s * h / 3.0
    };
    for &eta in &[1e-6, 0.01, 0.3, 1.0, 4.0, 50.0] {
        for &gamma in &[0.05, 1.0, 3.0, 20.0, 160.0] {
            for &delta in &[1e-3, 0.1, 0.5, 2.0, 10.0, INF] {
                let d = expected_discount(eta, gamma, delta);
                let q = quadrature(eta, gamma, delta);
                assert!(
                    (d - q).abs() < 1e-9 * d.max(1e-3),
                    "d̄({eta}, {gamma}, {delta}) = {d}, quadrature {q}"
                );
                let lower = discount(gamma, delta).max(eta / (eta + gamma));
                assert!(
                    d >= lower * (1.0 - 1e-12) && d <= 1.0 + 1e-15,
                    "bounds at ({eta}, {gamma}, {delta})"
                );
                assert!(expected_discount(eta, gamma * 1.3, delta) <= d * (1.0 + 1e-12));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// §8.5 item 2 / §6: one training point
// ---------------------------------------------------------------------------------------

/// Spec §6 (single training point (x₁, y₁), K = 3): the tree is a root leaf with a
/// zero-size box and τ = λ, counts e_{y₁}, so Ḡ_root = (1 − d)e_{y₁} + dH with
/// d = e^{−γλ} (C = T = 1). For a test x with η = ‖x − x₁‖₁ > 0:
/// * λ = ∞: p^s = 1 and d̄ = η/(η+γ): p = (γ/(η+γ)) e_{y₁} + (η/(η+γ)) H;
/// * finite λ: p = p^s[(1−d̄)e_{y₁} + d̄H] + (1−p^s)[(1−e^{−γλ})e_{y₁} + e^{−γλ}H] with
///   p^s = 1 − e^{−λη}, d̄ = (η/(η+γ))(1 − e^{−(η+γ)λ})/(1 − e^{−ηλ});
/// * x = x₁: Ḡ_root (one-hot when λ = ∞ and γ > 0; H when γ = 0, where d ≡ 1);
/// * λ = 0: p^s = 0 and d = 1, so p = H for every x.
///
/// Coordinates are dyadic so that η is exact in f32.
#[test]
fn single_training_point_closed_form() {
    let data = Data::new(&[&[0.25, 0.75]], &[1], 3);
    let k = 3;
    let h = vec![1.0 / 3.0; 3];
    let e_y = one_hot(k, 1);
    let tests: [[Feature; 2]; 5] = [
        [0.25, 0.75],
        [0.375, 0.5],
        [-2.0, 0.75],
        [0.25, 64.0],
        [1e6, -1e6],
    ];
    for &lambda in &[INF, 0.5, 2.0, 0.0] {
        for pause in [PAUSE_PURE, NO_PAUSE] {
            for (mi, m) in [Method::Batch, Method::Online(vec![0])].iter().enumerate() {
                let (tree, counts) = m.build(&data, &[0], lambda, pause, &mut rng(mi as u64));
                assert_eq!(tree.n_nodes(), 1);
                for &gamma in &[0.0, 0.5, 3.0, 20.0] {
                    for x in &tests {
                        let eta = (f64::from(x[0]) - 0.25).abs() + (f64::from(x[1]) - 0.75).abs();
                        let d_root = discount(gamma, lambda);
                        let g_root = mix(1.0 - d_root, &e_y, d_root, &h);
                        let want = if eta == 0.0 || lambda == 0.0 {
                            g_root
                        } else if lambda.is_infinite() {
                            mix(gamma / (eta + gamma), &e_y, eta / (eta + gamma), &h)
                        } else {
                            let ps = 1.0 - (-lambda * eta).exp();
                            let d_bar = if gamma == 0.0 {
                                1.0
                            } else {
                                (eta / (eta + gamma)) * (1.0 - (-(eta + gamma) * lambda).exp())
                                    / (1.0 - (-eta * lambda).exp())
                            };
                            let branch = mix(1.0 - d_bar, &e_y, d_bar, &h);
                            mix(ps, &branch, 1.0 - ps, &g_root)
                        };
                        if gamma > 0.0 && lambda.is_infinite() && eta == 0.0 {
                            assert_eq!(want, e_y);
                        }
                        if lambda == 0.0 || gamma == 0.0 {
                            assert_close(&want, &h, 1e-15, "λ = 0 or γ = 0 gives H");
                        }
                        for variant in [BranchCounts::Paper, BranchCounts::Reference] {
                            let got = predict(&tree, &counts, &data.x, x, gamma, variant);
                            assert_close(
                                &got,
                                &want,
                                1e-12,
                                &format!(
                                    "λ = {lambda}, γ = {gamma}, x = {x:?}, {variant:?}, {}",
                                    m.name()
                                ),
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Spec §8.5 item 2: five duplicates of (x₁, y) with λ = ∞ form one leaf with c = 5e_y,
/// tab = e_y, Δ = ∞. A test point at distance η branches off with p^s = 1 and
/// d̄ = η/(η+γ):
/// * Paper (c_j̃ = tab): (1 − d̄)e_y + d̄H = γ/(η+γ) e_y + η/(η+γ) H;
/// * Reference (c_j̃ = c): (c − d̄ tab + d̄ T H)/C = (1 − d̄/5) e_y + (d̄/5) H.
///
/// The two differ, so this test tells the variants apart. Batch, one-by-one online and a
/// single weighted insertion (weight 5) all give the same leaf; also through the forest.
#[test]
fn duplicates_distinguish_paper_and_reference() {
    let rows: Vec<&[Feature]> = vec![&[0.25, 0.75]; 5];
    let data = Data::new(&rows, &[2; 5], 3);
    let h = vec![1.0 / 3.0; 3];
    let e_y = one_hot(3, 2);
    let x: [Feature; 2] = [0.375, 0.5];
    let eta = 0.375;
    for pause in [PAUSE_PURE, NO_PAUSE] {
        let mut trees = vec![
            build_batch(&data, data.ids(), INF, pause, &mut rng(1)),
            build_online(&data, &data.ids(), INF, pause, &mut rng(2)),
        ];
        let mut t = MondrianTree::new(2, INF, pause);
        let mut c = LabelCounts::new(3);
        t.extend(0, 5, &data.points(), &mut c, &mut rng(3));
        trees.push((t, c));
        for (tree, counts) in &trees {
            assert_eq!(tree.n_nodes(), 1);
            assert_eq!(counts.node(tree.root().unwrap()), &[0, 0, 5]);
            for &gamma in &[0.5, 1.5, 20.0] {
                let d_bar = eta / (eta + gamma);
                let paper = mix(1.0 - d_bar, &e_y, d_bar, &h);
                let reference = mix(1.0 - d_bar / 5.0, &e_y, d_bar / 5.0, &h);
                // paper_y − reference_y = (2/3)(4/5)·d̄: the variants differ by O(d̄).
                assert!((paper[2] - reference[2]).abs() > 0.5 * d_bar);
                assert_close(
                    &predict(tree, counts, &data.x, &x, gamma, BranchCounts::Paper),
                    &paper,
                    1e-12,
                    "Paper",
                );
                assert_close(
                    &predict(tree, counts, &data.x, &x, gamma, BranchCounts::Reference),
                    &reference,
                    1e-12,
                    "Reference",
                );
                // Inside the (zero-size) box: Ḡ_leaf = c/C = e_y for both.
                assert_close(
                    &predict(
                        tree,
                        counts,
                        &data.x,
                        &[0.25, 0.75],
                        gamma,
                        BranchCounts::Reference,
                    ),
                    &e_y,
                    0.0,
                    "inside",
                );
            }
        }
    }
    // Same through the forest API (γ = discount_factor × D = 0.75 × 2 = 1.5).
    let mut forest = MondrianForestClassifier::new(ClassifierParams {
        n_trees: 3,
        discount_factor: 0.75,
        n_threads: 1,
        n_classes: Some(3),
        scaling: Scaling::Identity,
        ..ClassifierParams::default()
    })
    .unwrap();
    forest.fit(&[0.25, 0.75].repeat(5), 2, &[2; 5]).unwrap();
    let d_bar = eta / (eta + 1.5);
    let p = forest.predict_proba(&[0.375, 0.5], 2).unwrap();
    assert_close(
        &p,
        &mix(1.0 - d_bar, &e_y, d_bar, &h),
        1e-12,
        "forest, Paper",
    );
    forest.set_branch_counts(BranchCounts::Reference);
    let p = forest.predict_proba(&[0.375, 0.5], 2).unwrap();
    assert_close(
        &p,
        &mix(1.0 - d_bar / 5.0, &e_y, d_bar / 5.0, &h),
        1e-12,
        "forest, Reference",
    );
}

// ---------------------------------------------------------------------------------------
// §8.5 item 3: exact forest limit on two points
// ---------------------------------------------------------------------------------------

/// Spec §8.5 item 3. 1-D, x = 0 with label a = 0, x = 1 with label b = 1, K = 3, λ = ∞,
/// pausing, γ = discount_factor × D = 1. Every tree: root split at τ ~ Exp(1) (L = 1),
/// ξ ~ U[0,1) independent of τ, two single-point paused leaves with Δ = ∞. Root counts
/// c = (1,1,0), d = e^{−τ}: Ḡ_root = (1/2 − d/6, 1/2 − d/6, d/3), and E[d] = E[e^{−τ}] = 1/2
/// so E[Ḡ_root] = (5/12, 5/12, 1/6).
/// * x = 0.25 lies in the root box (no root branch-off). With probability P(ξ ≥ 0.25) =
///   3/4 it goes to leaf a at distance 0.25: d̄ = 0.25/1.25 = 0.2, branch mean
///   0.8 e_a + 0.2 Ḡ_root; otherwise to leaf b at distance 0.75: d̄ = 3/7, mean
///   (4/7) e_b + (3/7) Ḡ_root. Hence p = (0.707142857, 0.25, 0.042857143).
/// * x = −0.5 lies left of the root box (η = 0.5, Δ = τ) and always routes to leaf a
///   (η = 0.5, d̄ = 1/3). With η = 0.5, γ = 1: E[p^s d̄] = E[(η/(η+γ))(1 − e^{−(η+γ)τ})] =
///   η/(1+η+γ) = 1/5, E[p^s] = 1 − 1/(1+η) = 1/3, E[e^{−ητ}] = 2/3,
///   E[e^{−ητ} Ḡ_root] = (1/3 − 1/15, 1/3 − 1/15, 2/15) using E[e^{−1.5τ}] = 2/5, so
///   p = (2/15)(1/2,1/2,0) + (1/5)H + (2/3)(2/3)e_a + (1/3)(4/15,4/15,2/15) = (2/3, 2/9, 1/9).
///
/// The forest average of M = 40 000 trees is compared per class by a z-test with the
/// sample standard deviation of the per-tree predictions (the "≈ 4/√M" of the spec made
/// exact). Both variants coincide here (every leaf holds one point).
#[test]
fn exact_two_point_forest_limit() {
    let m = 40_000;
    let mut forest = MondrianForestClassifier::new(ClassifierParams {
        n_trees: m,
        lifetime: INF,
        discount_factor: 1.0,
        seed: 2014,
        n_threads: 1,
        pause_on_pure: true,
        n_classes: Some(3),
        scaling: Scaling::Identity,
        ..ClassifierParams::default()
    })
    .unwrap();
    forest.fit(&[0.0, 1.0], 1, &[0, 1]).unwrap();
    assert_eq!(forest.gamma(), 1.0);
    let cases: [(f64, [f64; 3]); 2] = [
        (
            0.25,
            [0.707_142_857_142_857_1, 0.25, 0.042_857_142_857_142_86],
        ),
        (-0.5, [2.0 / 3.0, 2.0 / 9.0, 1.0 / 9.0]),
    ];
    let mut fam = Family::new("§8.5.3 two-point forest limit");
    for (x, want) in cases {
        assert!((want.iter().sum::<f64>() - 1.0).abs() < 1e-15);
        let p = forest.predict_proba(&[x], 1).unwrap();
        let per_tree: Vec<Vec<f64>> = (0..m)
            .map(|t| {
                let (tree, counts) = forest.tree(t).unwrap();
                let f = forest.training_points().features;
                predict(tree, counts, f, &[x as Feature], 1.0, BranchCounts::Paper)
            })
            .collect();
        for c in 0..3 {
            let values: Vec<f64> = per_tree.iter().map(|v| v[c]).collect();
            let mean = values.iter().sum::<f64>() / m as f64;
            assert!(
                (mean - p[c]).abs() < 1e-12,
                "forest average = mean of the trees"
            );
            fam.push(
                format!("x = {x}, class {c}: forest {:.6} vs {:.6}", p[c], want[c]),
                z_test(&values, want[c]),
            );
        }
        let mut reference = forest.clone();
        reference.set_branch_counts(BranchCounts::Reference);
        assert_close(
            &reference.predict_proba(&[x], 1).unwrap(),
            &p,
            1e-12,
            "Paper = Reference here",
        );
    }
    fam.assert();
}

// ---------------------------------------------------------------------------------------
// §8.5 item 4: Monte-Carlo consistency of Predict
// ---------------------------------------------------------------------------------------

/// One draw of Ḡ_{leaf'(x)} in an extension T' ~ MTx(λ, T, x) by an unlabelled x (spec
/// §2.4, pausing ignored as in §4.1): walking down from the root, a cut separating x from
/// B^x_j arrives after E ~ Exp(η_j(x)); if τ_parent(j) + E < τ_j a node j̃ is inserted at
/// that time with children j and an empty leaf {x}. The IKN counts of T' are those of T
/// plus c_j̃ = tab_j (the empty leaf has no tables), so x's leaf mean is
/// Ḡ_{new leaf} = Ḡ_j̃ = ((1 − d)tab_j + d·T_j·Ḡ_parent)/T_j with d = e^{−γE}. Otherwise x
/// joins B^x_j (unlabelled: no count changes) and continues to its child; reaching a leaf
/// without a cut gives Ḡ_leaf.
fn sample_extension_mean(
    tree: &MondrianTree,
    counts: &LabelCounts,
    f: &[Feature],
    x: &[Feature],
    gamma: f64,
    rng: &mut TestRng,
) -> Vec<f64> {
    let k = counts.n_classes();
    let mut g_par = vec![1.0 / k as f64; k];
    let mut j = tree.root().unwrap();
    let mut tau_par = 0.0;
    loop {
        let e = eta(tree, f, j, x);
        let wait = if e > 0.0 {
            -(1.0 - rng.gen::<f64>()).ln() / e
        } else {
            INF
        };
        if tau_par + wait < tree.split_time(j) {
            return posterior_mean(&tables(counts.node(j)), discount(gamma, wait), &g_par);
        }
        let g = posterior_mean(
            counts.node(j),
            discount(gamma, tree.split_time(j) - tau_par),
            &g_par,
        );
        if tree.is_leaf(j) {
            return g;
        }
        g_par = g;
        tau_par = tree.split_time(j);
        j = tree.route(j, x);
    }
}

/// Labelled clusters (K = 3): pure clusters become multi-point paused leaves, where the
/// Paper and Reference variants differ.
fn clusters() -> Data {
    Data::new(
        &[
            &[0.05, 0.05],
            &[0.1, 0.15],
            &[0.15, 0.1],
            &[0.1, 0.05],
            &[0.12, 0.12],
            &[0.85, 0.9],
            &[0.9, 0.85],
            &[0.95, 0.95],
            &[0.9, 0.9],
            &[0.1, 0.9],
            &[0.15, 0.85],
            &[0.5, 0.3],
            &[0.6, 0.5],
        ],
        &[0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 1, 0],
        3,
    )
}

/// Spec §8.5 item 4 and §4.3: for a fixed tree and x, the average of Ḡ_{leaf'(x)} over
/// R = 100 000 sampled extensions (sampler above, written from §2.4) must equal
/// Predict(T, x) with the Paper variant (z-test per class with the sample standard
/// deviation; when every draw is identical, exact equality to 1e-12). Finite and infinite
/// λ, several x (outside the root box, between clusters, inside a leaf box). Power check:
/// the same Monte-Carlo averages must reject the Reference variant where it differs.
#[test]
fn monte_carlo_extensions_match_predict() {
    let data = clusters();
    let xs: [[Feature; 2]; 6] = [
        [0.3, 0.3],
        [-0.5, 1.5],
        [0.2, 0.2],
        [0.1, 0.1],
        [0.5, 0.5],
        [0.7, 0.95],
    ];
    let r_samples = 100_000;
    let mut fam = Family::new("§8.5.4 Monte-Carlo extensions = Predict (Paper)");
    let mut reference_z: f64 = 0.0;
    for (li, &(lambda, gamma)) in [(INF, 1.0), (2.5, 2.0), (INF, 20.0)].iter().enumerate() {
        let (tree, counts) = build_batch(
            &data,
            data.ids(),
            lambda,
            PAUSE_PURE,
            &mut rng(40 + li as u64),
        );
        assert!(tree.leaves().iter().any(|&l| tree.leaf_points(l).len() > 1));
        let mut r = rng(4000 + li as u64);
        for x in &xs {
            let want = predict(&tree, &counts, &data.x, x, gamma, BranchCounts::Paper);
            let reference = predict(&tree, &counts, &data.x, x, gamma, BranchCounts::Reference);
            let draws: Vec<Vec<f64>> = (0..r_samples)
                .map(|_| sample_extension_mean(&tree, &counts, &data.x, x, gamma, &mut r))
                .collect();
            for c in 0..3 {
                let values: Vec<f64> = draws.iter().map(|v| v[c]).collect();
                let res = z_test(&values, want[c]);
                fam.push(
                    format!("λ = {lambda}, γ = {gamma}, x = {x:?}, class {c}: MC {:.6} vs Predict {:.6}", res.statistic, want[c]),
                    res,
                );
                if res.df > 0.0 {
                    reference_z = reference_z.max((res.statistic - reference[c]).abs() / res.df);
                }
            }
        }
    }
    fam.assert();
    assert!(
        reference_z > 10.0,
        "the Monte-Carlo averages should reject the Reference variant somewhere (max |z| = {reference_z})"
    );
}

// ---------------------------------------------------------------------------------------
// §8.5 items 5–7 and the general formula
// ---------------------------------------------------------------------------------------

/// Random labelled data on a dyadic grid (exact f32 differences) and random trees.
fn random_case(r: &mut TestRng) -> (Data, f64, PauseRule) {
    let n = r.gen_range(1..30);
    let d = r.gen_range(1..4);
    let k = r.gen_range(1..5);
    let rows: Vec<Vec<Feature>> = (0..n)
        .map(|_| {
            (0..d)
                .map(|_| r.gen_range(0..17) as Feature / 16.0)
                .collect()
        })
        .collect();
    let refs: Vec<&[Feature]> = rows.iter().map(|v| v.as_slice()).collect();
    let y: Vec<u32> = (0..n).map(|_| r.gen_range(0..k as u32)).collect();
    let lifetime = [INF, 0.0, 0.3, 2.0, 8.0][r.gen_range(0..5)];
    let pause = [
        NO_PAUSE,
        PAUSE_PURE,
        PauseRule {
            pause_on_pure: true,
            min_samples_split: 4,
        },
    ][r.gen_range(0..3)];
    (Data::new(&refs, &y, k), lifetime, pause)
}

fn random_x(r: &mut TestRng, d: usize) -> Vec<Feature> {
    let scale = [1.0, 4.0, 1024.0, 1e6][r.gen_range(0..4)];
    (0..d)
        .map(|_| (r.gen_range(-16i32..33) as Feature / 16.0) * scale)
        .collect()
}

/// The library's Predict against the reference implementation of §4.4 written above, on
/// random trees (batch and online, all pause rules, λ ∈ {0, 0.3, 2, 8, ∞}) and random x
/// (near and far), for γ ∈ {0, 0.1, 1, 20, 1e3} and both variants. Dyadic coordinates make
/// η exact in f32, so the two must agree to rounding (1e-10).
#[test]
fn predict_matches_reference_implementation() {
    let mut r = rng(500);
    for _ in 0..300 {
        let (data, lifetime, pause) = random_case(&mut r);
        let m = if r.gen_bool(0.5) {
            Method::Batch
        } else {
            Method::Shuffled
        };
        let (tree, counts) = m.build(&data, &data.ids(), lifetime, pause, &mut r);
        for _ in 0..10 {
            let x = random_x(&mut r, data.d);
            for &gamma in &[0.0, 0.1, 1.0, 20.0, 1e3] {
                for variant in [BranchCounts::Paper, BranchCounts::Reference] {
                    let got = predict(&tree, &counts, &data.x, &x, gamma, variant);
                    let want = reference_predict(&tree, &counts, &data.x, &x, gamma, variant);
                    assert_close(
                        &got,
                        &want,
                        1e-10,
                        &format!("x = {x:?}, γ = {gamma}, λ = {lifetime}, {variant:?}"),
                    );
                }
            }
        }
    }
}

/// Spec §8.5 item 5: Σ_k p_k = 1 (to 1e-9) and p_k ≥ 0, finite, for random trees, random x
/// including far-away points (up to 1e6 per coordinate) and γ from 0 to 1e12. For
/// γ ≤ 1 on these grid data sets and x outside B^x_leaf(x), every p_k > 0 (some p^s > 0,
/// d̄ > 0 and the parent means are positive; no underflow of e^{−γΔ} is possible here
/// unless Δ > 700, probability < e^{−40} per node). Also through the forest API.
#[test]
fn probabilities_are_normalised_nonnegative_and_positive_off_box() {
    let mut r = rng(600);
    for _ in 0..300 {
        let (data, lifetime, pause) = random_case(&mut r);
        let m = if r.gen_bool(0.5) {
            Method::Batch
        } else {
            Method::Shuffled
        };
        let (tree, counts) = m.build(&data, &data.ids(), lifetime, pause, &mut r);
        for _ in 0..10 {
            let x = random_x(&mut r, data.d);
            let leaf = tree.leaf_of(&x);
            let outside = eta(&tree, &data.x, leaf, &x) > 0.0;
            for &gamma in &[0.0, 1e-3, 0.5, 1.0, 20.0, 1e3, 1e8, 1e12] {
                for variant in [BranchCounts::Paper, BranchCounts::Reference] {
                    let p = predict(&tree, &counts, &data.x, &x, gamma, variant);
                    let what =
                        format!("x = {x:?}, γ = {gamma}, λ = {lifetime}, {variant:?}: {p:?}");
                    assert!(p.iter().all(|v| v.is_finite() && *v >= 0.0), "{what}");
                    assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{what}");
                    if outside && gamma > 0.0 && gamma <= 1.0 && lifetime > 0.0 {
                        assert!(
                            p.iter().all(|&v| v > 0.0),
                            "off-box prediction has a zero: {what}"
                        );
                    }
                }
            }
        }
    }
    // Forest API: far-away rows and a huge discount factor.
    let mut f = MondrianForestClassifier::new(ClassifierParams {
        n_trees: 20,
        discount_factor: 1e9,
        n_threads: 1,
        ..ClassifierParams::default()
    })
    .unwrap();
    let x: Vec<f64> = (0..80).map(|_| r.gen::<f64>()).collect();
    let y: Vec<usize> = (0..40).map(|i| (x[2 * i] * 3.0) as usize).collect();
    f.fit(&x, 2, &y).unwrap();
    let test = [0.5, 0.5, -1e6, 3e6, 1e30, -1e30, 0.0, 1.0];
    for gf in [1e9, 10.0, 0.0] {
        f.set_discount_factor(gf).unwrap();
        let p = f.predict_proba(&test, 2).unwrap();
        for row in p.chunks(f.n_classes()) {
            assert!(
                row.iter().all(|v| v.is_finite() && *v >= 0.0),
                "factor {gf}: {row:?}"
            );
            assert!(
                (row.iter().sum::<f64>() - 1.0).abs() < 1e-9,
                "factor {gf}: {row:?}"
            );
        }
    }
}

/// Spec §8.5 item 6 / §4.1: the boxes are nested, so x inside its leaf's box has η = 0 on
/// the whole path, no branch-off, and p = Ḡ_leaf (computed here along the path from
/// Eq. 4). Checked at every training point and at the centre of every leaf box (which lies
/// in that box, and routes to that leaf since the splits separate boxes), both variants.
#[test]
fn inside_leaf_box_prediction_is_leaf_mean() {
    let mut r = rng(700);
    for _ in 0..300 {
        let (data, lifetime, pause) = random_case(&mut r);
        let m = if r.gen_bool(0.5) {
            Method::Batch
        } else {
            Method::Shuffled
        };
        let (tree, counts) = m.build(&data, &data.ids(), lifetime, pause, &mut r);
        let mut xs: Vec<Vec<Feature>> =
            (0..data.n() as u32).map(|i| data.row(i).to_vec()).collect();
        for leaf in tree.leaves() {
            let (lower, upper) = tree.data_box(leaf, &data.x);
            let centre: Vec<Feature> = lower
                .iter()
                .zip(upper.iter())
                .map(|(l, u)| (l + u) / 2.0)
                .collect();
            assert_eq!(tree.leaf_of(&centre), leaf);
            xs.push(centre);
        }
        for x in &xs {
            for &gamma in &[0.0, 0.7, 20.0] {
                let want = leaf_mean(&tree, &counts, x, gamma);
                for variant in [BranchCounts::Paper, BranchCounts::Reference] {
                    assert_close(
                        &predict(&tree, &counts, &data.x, x, gamma, variant),
                        &want,
                        1e-12,
                        "inside leaf box",
                    );
                }
            }
        }
    }
}

/// Spec §8.5 item 7, limits, on random trees:
/// * γ = 0: every d and d̄ is 1, so Ḡ_j = (c_j − tab_j + T_j Ḡ_parent)/C_j and the Paper
///   branch mean is (1 − 1)·tab/T + 1·Ḡ_parent = Ḡ_parent(j);
/// * γ → ∞ (γ = 1e15 with every Δ ≥ 1e-6 and η ≥ 1/16 or 0 on the path): d → 0 and d̄ → 0
///   (d̄ ≤ (η/(η+γ))/(1 − e^{−ηΔ}) ≤ 1e-6 here), so Ḡ_j = c_j/C_j and the branch mean is
///   tab_j/T_j (Paper) or c_j/C_j (Reference): tolerance 1e-5;
/// * λ = 0: one root leaf with τ = 0, Δ = 0 ⇒ p^s = 0 and d = 1: p = (c − tab + T·H)/C for
///   every x.
///
/// The path weights w_j = Π_{ancestors}(e^{−η Δ}) (1 − e^{−η_j Δ_j}) are recomputed here.
#[test]
fn limits_gamma_zero_gamma_infinite_lifetime_zero() {
    let mut r = rng(800);
    let mut checked_large = 0;
    for _ in 0..300 {
        let (data, lifetime, pause) = random_case(&mut r);
        let m = if r.gen_bool(0.5) {
            Method::Batch
        } else {
            Method::Shuffled
        };
        let (tree, counts) = m.build(&data, &data.ids(), lifetime, pause, &mut r);
        let k = data.k;
        let h = vec![1.0 / k as f64; k];
        for _ in 0..5 {
            let x = random_x(&mut r, data.d);
            // Path with weights.
            let mut path = Vec::new(); // (node, branch weight, leaf weight)
            let mut j = tree.root().unwrap();
            let (mut nb, mut tp) = (1.0, 0.0);
            let mut min_delta = INF;
            loop {
                let delta = tree.split_time(j) - tp;
                min_delta = min_delta.min(delta);
                let e = eta(&tree, &data.x, j, &x);
                let ps = if e > 0.0 && delta > 0.0 {
                    if delta.is_infinite() {
                        1.0
                    } else {
                        1.0 - (-e * delta).exp()
                    }
                } else {
                    0.0
                };
                let leaf_w = if tree.is_leaf(j) {
                    nb * (1.0 - ps)
                } else {
                    0.0
                };
                path.push((j, nb * ps, leaf_w));
                if tree.is_leaf(j) {
                    break;
                }
                nb *= 1.0 - ps;
                tp = tree.split_time(j);
                j = tree.route(j, &x);
            }
            // γ = 0.
            let mut want = vec![0.0; k];
            let mut g_par = h.clone();
            for &(j, bw, lw) in &path {
                let c = counts.node(j);
                let g: Vec<f64> = {
                    let cc: f64 = c.iter().map(|&v| f64::from(v)).sum();
                    let t = c.iter().filter(|&&v| v > 0).count() as f64;
                    (0..k)
                        .map(|i| (f64::from(c[i]) - f64::from(c[i].min(1)) + t * g_par[i]) / cc)
                        .collect()
                };
                for i in 0..k {
                    want[i] += bw * g_par[i] + lw * g[i];
                }
                g_par = g;
            }
            assert_close(
                &predict(&tree, &counts, &data.x, &x, 0.0, BranchCounts::Paper),
                &want,
                1e-10,
                "γ = 0",
            );
            // γ → ∞.
            if min_delta >= 1e-6 {
                checked_large += 1;
                for variant in [BranchCounts::Paper, BranchCounts::Reference] {
                    let mut want = vec![0.0; k];
                    for &(j, bw, lw) in &path {
                        let c = counts.node(j);
                        let cc: f64 = c.iter().map(|&v| f64::from(v)).sum();
                        let t = c.iter().filter(|&&v| v > 0).count() as f64;
                        for i in 0..k {
                            let branch = match variant {
                                BranchCounts::Paper => f64::from(c[i].min(1)) / t,
                                BranchCounts::Reference => f64::from(c[i]) / cc,
                            };
                            want[i] += bw * branch + lw * f64::from(c[i]) / cc;
                        }
                    }
                    assert_close(
                        &predict(&tree, &counts, &data.x, &x, 1e15, variant),
                        &want,
                        1e-5,
                        "γ → ∞",
                    );
                }
            }
        }
        // λ = 0.
        let (tree0, counts0) = m.build(&data, &data.ids(), 0.0, pause, &mut r);
        assert_eq!(tree0.n_nodes(), 1);
        let c = counts0.node(tree0.root().unwrap());
        let cc: f64 = c.iter().map(|&v| f64::from(v)).sum();
        let t = c.iter().filter(|&&v| v > 0).count() as f64;
        for _ in 0..5 {
            let x = random_x(&mut r, data.d);
            for &gamma in &[0.0, 1.0, 1e3] {
                let want: Vec<f64> = (0..k)
                    .map(|i| (f64::from(c[i]) - f64::from(c[i].min(1)) + t * h[i]) / cc)
                    .collect();
                for variant in [BranchCounts::Paper, BranchCounts::Reference] {
                    assert_close(
                        &predict(&tree0, &counts0, &data.x, &x, gamma, variant),
                        &want,
                        1e-12,
                        "λ = 0",
                    );
                }
            }
        }
    }
    assert!(
        checked_large > 500,
        "γ → ∞ limit checked on {checked_large} paths"
    );
}

/// Spec §6: an empty tree predicts H; an unfitted forest refuses to predict.
#[test]
fn empty_tree_predicts_base_measure() {
    let tree = MondrianTree::new(2, INF, PAUSE_PURE);
    let counts = LabelCounts::new(4);
    assert_eq!(
        predict(&tree, &counts, &[], &[0.5, 0.5], 1.0, BranchCounts::Paper),
        vec![0.25; 4]
    );
    let forest = MondrianForestClassifier::new(ClassifierParams::default()).unwrap();
    assert!(forest.predict_proba(&[0.5, 0.5], 2).is_err());
}

/// Spec §1.5 / §6: features must be finite, and non-finite features are rejected with an
/// error. A value that is finite in f64 but overflows the f32 feature store after scaling
/// (|x| > 3.4e38, e.g. x = 1e39 with identity-like scaling, or x = 1 on a feature whose
/// training range is 1e-300) must be rejected with an error or handled (e.g. clamped); it
/// must never produce NaN probabilities or a corrupt tree.
#[test]
fn values_overflowing_the_feature_type_are_rejected_or_handled() {
    let mut r = rng(900);
    let x: Vec<f64> = (0..80).map(|_| r.gen::<f64>()).collect();
    let y: Vec<usize> = (0..40).map(|i| (x[2 * i] * 3.0) as usize).collect();
    let finite_and_normalised = |p: &[f64]| {
        p.iter().all(|v| v.is_finite() && *v >= 0.0) && (p.iter().sum::<f64>() - 1.0).abs() < 1e-9
    };
    for lifetime in [INF, 3.0] {
        let params = ClassifierParams {
            n_trees: 5,
            lifetime,
            n_threads: 1,
            ..ClassifierParams::default()
        };
        let mut f = MondrianForestClassifier::new(params.clone()).unwrap();
        f.fit(&x, 2, &y).unwrap();
        for huge in [1e39, -1e39, 1e300] {
            if let Ok(p) = f.predict_proba(&[huge, 0.5], 2) {
                assert!(
                    finite_and_normalised(&p),
                    "λ = {lifetime}: predict_proba([{huge}, 0.5]) = {p:?}"
                );
            }
        }
        // The library refuses such values with a typed error and keeps the model as it was.
        assert!(matches!(
            f.predict_proba(&[1e39, 0.5], 2),
            Err(mondrian::MondrianError::FeatureOverflow {
                row: 0,
                feature: 0,
                ..
            })
        ));
        let mut refused = f.clone();
        assert!(refused.partial_fit(&[1e39, 0.5], 2, &[1]).is_err());
        assert_eq!(refused.n_samples_seen(), f.n_samples_seen());
        let mut g = f.clone();
        if g.partial_fit(&[1e39, 0.5], 2, &[1]).is_ok() {
            let pts = g.training_points();
            assert!(
                pts.features.iter().all(|v| v.is_finite()),
                "a non-finite feature was stored"
            );
            for t in 0..5 {
                let (tree, counts) = g.tree(t).unwrap();
                tree.check_invariants(&pts, counts).unwrap_or_else(|e| {
                    panic!("λ = {lifetime}: after partial_fit([1e39, 0.5]): {e}")
                });
            }
            let p = g.predict_proba(&[0.5, 0.5], 2).unwrap();
            assert!(
                finite_and_normalised(&p),
                "λ = {lifetime}: after partial_fit([1e39, 0.5]): {p:?}"
            );
        }
        // A feature with a tiny training range: x = 1 scales to 1e300.
        let mut tiny = MondrianForestClassifier::new(params).unwrap();
        tiny.fit(&[0.0, 0.0, 1e-300, 1.0], 2, &[0, 1]).unwrap();
        if let Ok(p) = tiny.predict_proba(&[1.0, 0.5], 2) {
            assert!(
                finite_and_normalised(&p),
                "λ = {lifetime}: tiny-range feature, x = 1: {p:?}"
            );
        }
    }
}
