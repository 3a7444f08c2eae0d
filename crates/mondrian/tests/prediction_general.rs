//! Prediction tests on general trees (spec `mf-classification.md` §4, §8.5 items 4–7):
//! Monte-Carlo consistency of `Predict` with sampled extensions, agreement with a
//! reference implementation of §4.4 on random trees, normalisation, the prediction inside
//! a leaf's box, and the limits γ = 0, γ → ∞, λ = 0. The closed forms are in
//! `prediction.rs`.
//!
//! Expected values are computed by code written from the spec (the reference label model
//! of `common/reference.rs` and an extension sampler here), never copied from the
//! library's output. Statistical comparisons run at family-wise level α = 1e-3 (see
//! `common::Family`) with fixed seeds.

mod common;

use common::reference::*;
use common::*;
use mondrian::process::Feature;
use mondrian::stats::label::{BranchCounts, LabelCounts};
use mondrian::tree::{MondrianTree, PauseRule};
use mondrian::{ClassifierParams, MondrianForestClassifier};
use rand::Rng;

const INF: f64 = f64::INFINITY;

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
