//! Prediction tests with closed forms (spec `mf-classification.md` §3.5, §4, §6, §8.5
//! items 1–3): the expected discount, one training point, duplicates that tell the Paper
//! and Reference variants apart, the exact two-point forest limit, the empty tree, and
//! values that overflow the feature type. Monte-Carlo consistency of `Predict` with sampled
//! extensions, agreement with a reference implementation, normalisation and the limits
//! γ = 0, γ → ∞, λ = 0 are in `prediction_general.rs`.
//!
//! Expected values are derived in the comments (closed forms) or computed by code written
//! from the spec (the reference label model of `common/reference.rs`), never copied from
//! the library's output. Statistical comparisons run at family-wise level α = 1e-3 (see
//! `common::Family`) with fixed seeds.

mod common;

use common::reference::*;
use common::*;
use mondrian::process::{expected_discount, Feature};
use mondrian::stats::label::{BranchCounts, LabelCounts};
use mondrian::tree::MondrianTree;
use mondrian::{ClassifierParams, MondrianForestClassifier, Scaling};
use rand::Rng;

const INF: f64 = f64::INFINITY;

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
// §6: the empty tree, values overflowing the feature type
// ---------------------------------------------------------------------------------------

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
