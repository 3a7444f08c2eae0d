//! Feature weights (`FeatureWeights`, both forests): the forest under weights w is the
//! Mondrian process of the box stretched by w, and `Relevance` learns w from a target-blind
//! pilot forest.

mod common;

use common::{chi2_gof, chi2_homogeneity, histogram, ks_one_sample, ks_two_sample, rng, Family};
use mondrian::Persistent;
use mondrian::{
    ClassifierParams, FeatureWeights, MondrianError, MondrianForestClassifier,
    MondrianForestRegressor, PredictionMode, RegressorParams,
};
use rand::Rng;
use rand_distr::{Distribution, Normal};

fn forest(
    n_trees: usize,
    mss: usize,
    weights: FeatureWeights,
    seed: u64,
) -> MondrianForestRegressor {
    MondrianForestRegressor::new(RegressorParams {
        n_trees,
        min_samples_split: mss,
        mode: PredictionMode::Fast,
        seed,
        feature_weights: weights,
        ..RegressorParams::thesis()
    })
    .unwrap()
}

/// `n` points of U[0,1]^d plus the two corners, so every feature's range is exactly [0, 1].
fn unit_cube(n: usize, d: usize, seed: u64) -> Vec<f64> {
    let mut r = rng(seed);
    let mut x: Vec<f64> = (0..n * d).map(|_| r.gen()).collect();
    x.extend(std::iter::repeat_n(0.0, d));
    x.extend(std::iter::repeat_n(1.0, d));
    x
}

#[test]
fn weighted_trees_are_the_mondrian_process_of_the_stretched_box() {
    // Under weights w the root block is Π_d [0, w_d]: its split time is Exp(Σ w_d), its
    // dimension is d with probability w_d / Σ w, and its location is uniform on [0, w_d]
    // (spec mf-classification.md §1.4 on the stretched box). 4000 trees; KS and χ² at a
    // family-wise level of 1e-3.
    let w = [1.0, 2.0, 4.0];
    let total: f64 = w.iter().sum();
    let x = unit_cube(18, 3, 1);
    let y: Vec<f64> = (0..20).map(|i| i as f64).collect();
    let mut f = forest(4000, 2, FeatureWeights::Given(w.to_vec()), 7);
    f.fit(&x, 3, &y).unwrap();
    assert_eq!(f.feature_weights().unwrap(), &w);
    let mut times = Vec::new();
    let mut dims = [0u64; 3];
    let mut locs: [Vec<f64>; 3] = Default::default();
    for t in 0..4000 {
        let (tree, _) = f.tree(t).unwrap();
        let root = tree.root().unwrap();
        times.push(tree.split_time(root));
        let d = tree.split_dimension(root);
        dims[d] += 1;
        locs[d].push(f64::from(tree.split_location(root)));
    }
    let mut family = Family::new("weighted root block");
    family.push(
        "split time ~ Exp(Σw)",
        ks_one_sample(&times, |t| 1.0 - (-total * t).exp()),
    );
    family.push("dimension ∝ w", chi2_gof(&dims, &w.map(|v| v / total)));
    for (d, l) in locs.iter().enumerate() {
        let wd = w[d];
        family.push(
            format!("location on dim {d} ~ U[0, {wd}]"),
            ks_one_sample(l, move |v| (v / wd).clamp(0.0, 1.0)),
        );
    }
    family.assert();
}

#[test]
fn a_zero_weight_feature_is_never_cut_and_does_not_move_predictions() {
    let x = unit_cube(60, 2, 2);
    let y: Vec<f64> = x.chunks(2).map(|r| r[0] * 3.0 + r[1]).collect();
    let mut f = forest(20, 2, FeatureWeights::Given(vec![1.0, 0.0]), 3);
    f.fit(&x, 2, &y).unwrap();
    for t in 0..20 {
        let (tree, _) = f.tree(t).unwrap();
        for j in tree.subtree_preorder(tree.root().unwrap()) {
            if tree.children(j).is_some() {
                assert_eq!(
                    tree.split_dimension(j),
                    0,
                    "tree {t} cut the zero-weight feature"
                );
            }
        }
    }
    let a = f.predict(&[0.3, 0.1, 0.3, 0.9, 0.3, 40.0], 2).unwrap();
    assert_eq!(a.mean[0], a.mean[1]);
    assert_eq!(a.mean[0], a.mean[2]);
    assert_eq!(a.variance[0], a.variance[2]);
}

#[test]
fn the_time_scale_heuristic_uses_the_effective_dimension() {
    // γ2 = D/(20 log2 N) with D the linear dimension of the unit box in the trees' space,
    // Σ w_d (spec mf-regression.md §2.5, "τ is inversely proportional to D").
    let x = unit_cube(62, 3, 4);
    let y: Vec<f64> = (0..64).map(|i| (i as f64).sin()).collect();
    for (weights, extent) in [
        (FeatureWeights::Uniform, 3.0),
        (FeatureWeights::Given(vec![0.5, 0.25, 2.0]), 2.75),
    ] {
        let mut f = MondrianForestRegressor::new(RegressorParams {
            feature_weights: weights,
            ..RegressorParams::thesis()
        })
        .unwrap();
        f.fit(&x, 3, &y).unwrap();
        let expected = extent / (20.0 * 64f64.log2());
        assert!((f.theta().unwrap().gamma2 - expected).abs() < 1e-12);
    }
}

/// y = sin(6 x0) + N(0, 0.1²) on U[0,1]^5: only the first feature matters.
fn one_relevant_feature(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut r = rng(seed);
    let noise = Normal::new(0.0, 0.1).unwrap();
    let x: Vec<f64> = (0..n * 5).map(|_| r.gen()).collect();
    let y = x
        .chunks(5)
        .map(|row| (6.0 * row[0]).sin() + noise.sample(&mut r))
        .collect();
    (x, y)
}

fn rmse(f: &MondrianForestRegressor, x: &[f64], y: &[f64]) -> f64 {
    let p = f.predict(x, 5).unwrap();
    let se: f64 = p.mean.iter().zip(y).map(|(m, v)| (m - v).powi(2)).sum();
    (se / y.len() as f64).sqrt()
}

#[test]
fn relevance_finds_the_feature_the_target_depends_on() {
    // A random cut along an irrelevant feature removes about σ² = 0.01 of squared error
    // (one degree of freedom of noise); cuts along x0 remove the signal, whose variance is
    // about 0.5 over a few hundred points. The learnt weight of x0 is therefore 1 and the
    // others small; the weighted forest then predicts held-out data better.
    let (x, y) = one_relevant_feature(600, 5);
    let (xt, yt) = one_relevant_feature(400, 6);
    let mut learnt = forest(30, 5, FeatureWeights::RELEVANCE, 8);
    learnt.fit(&x, 5, &y).unwrap();
    let w = learnt.feature_weights().unwrap().to_vec();
    assert_eq!(w[0], 1.0);
    assert!(
        w[1..].iter().all(|&v| (0.0..0.2).contains(&v)),
        "weights {w:?}"
    );
    let mut uniform = forest(30, 5, FeatureWeights::Uniform, 8);
    uniform.fit(&x, 5, &y).unwrap();
    assert_eq!(uniform.feature_weights().unwrap(), &[1.0; 5]);
    let (r_learnt, r_uniform) = (rmse(&learnt, &xt, &yt), rmse(&uniform, &xt, &yt));
    assert!(r_learnt < 0.8 * r_uniform, "{r_learnt} vs {r_uniform}");
}

#[test]
fn learnt_weights_are_reproducible_thread_independent_and_saved() {
    let (x, y) = one_relevant_feature(300, 9);
    let fit = |threads: usize| {
        let mut f = MondrianForestRegressor::new(RegressorParams {
            n_trees: 12,
            n_threads: threads,
            seed: 4,
            feature_weights: FeatureWeights::RELEVANCE,
            ..RegressorParams::thesis()
        })
        .unwrap();
        f.fit(&x, 5, &y).unwrap();
        f
    };
    let (a, b) = (fit(1), fit(2));
    assert_eq!(a.feature_weights(), b.feature_weights());
    let probe = &x[..50];
    assert_eq!(a.predict(probe, 5).unwrap(), b.predict(probe, 5).unwrap());
    let back = MondrianForestRegressor::from_bytes(&a.to_bytes().unwrap()).unwrap();
    assert_eq!(back.feature_weights(), a.feature_weights());
    assert_eq!(
        back.predict(probe, 5).unwrap(),
        a.predict(probe, 5).unwrap()
    );
    // Online training keeps the weights the first call fixed.
    let mut online = fit(1);
    let before = online.feature_weights().unwrap().to_vec();
    online.partial_fit(&x[..10], 5, &y[..2]).unwrap();
    assert_eq!(online.feature_weights().unwrap(), before.as_slice());
}

#[test]
fn relevance_without_information_leaves_the_weights_uniform() {
    // Constant targets: no split removes anything, so the scores say nothing.
    let x = unit_cube(30, 3, 10);
    let mut f = forest(5, 2, FeatureWeights::RELEVANCE, 1);
    f.fit(&x, 3, &[2.5; 32]).unwrap();
    assert_eq!(f.feature_weights().unwrap(), &[1.0; 3]);
    // A first online call of one point cannot be split: the pilot has nothing to say, so
    // the call is refused (rather than fixing weight 1 for good) and nothing changes.
    let mut g = forest(5, 2, FeatureWeights::RELEVANCE, 1);
    let err = g.partial_fit(&x[..3], 3, &[1.0]).unwrap_err();
    assert!(err.to_string().contains("made no split"), "{err}");
    assert_eq!(g.n_samples_seen(), 0);
    // The weights can instead be learnt from a sample and given.
    let (xs, ys) = one_relevant_feature(300, 17);
    let w = g.learn_relevance(&xs, 5, &ys, 1.0).unwrap();
    assert_eq!(w[0], 1.0);
    let mut h = forest(5, 2, FeatureWeights::Given(w.clone()), 1);
    h.partial_fit(&xs[..5], 5, &ys[..1]).unwrap();
    assert_eq!(h.feature_weights().unwrap(), w.as_slice());
    // A classifier whose first batch holds one label cannot split either (pure blocks pause).
    let mut c = MondrianForestClassifier::new(ClassifierParams {
        n_trees: 3,
        feature_weights: FeatureWeights::RELEVANCE,
        ..Default::default()
    })
    .unwrap();
    assert!(c.fit(&x, 3, &[1; 32]).is_err());
}

#[test]
fn bad_weights_are_refused() {
    for bad in [
        vec![1.0, -0.5],
        vec![f64::NAN, 1.0],
        vec![f64::INFINITY, 1.0],
        vec![0.0, 0.0],
        vec![1.0, 1e300],
        vec![1.0, 1e-300],
    ] {
        let r = MondrianForestRegressor::new(RegressorParams {
            feature_weights: FeatureWeights::Given(bad.clone()),
            ..RegressorParams::thesis()
        });
        assert!(
            matches!(
                r,
                Err(MondrianError::InvalidParameter {
                    name: "feature_weights",
                    ..
                })
            ),
            "{bad:?} was accepted"
        );
    }
    // The width is known only at the first fit: a wrong count is refused there and the
    // model stays untrained.
    let mut f = forest(3, 2, FeatureWeights::Given(vec![1.0, 2.0]), 0);
    let err = f.fit(&unit_cube(5, 3, 0), 3, &[0.0; 7]).unwrap_err();
    assert!(
        err.to_string().contains("2 weights for 3 features"),
        "{err}"
    );
    assert_eq!(f.n_samples_seen(), 0);
    assert!(f.predict(&[0.0; 3], 3).is_err());
}

#[test]
fn the_relevance_power_sharpens_and_bad_powers_are_refused() {
    let (x, y) = one_relevant_feature(400, 11);
    let learn = |power: f64| {
        let mut f = forest(20, 5, FeatureWeights::Relevance { power }, 8);
        f.fit(&x, 5, &y).unwrap();
        f.feature_weights().unwrap().to_vec()
    };
    let (one, two) = (learn(1.0), learn(2.0));
    // Same pilot, so the weights are the squares.
    for (a, b) in one.iter().zip(&two) {
        assert!((a * a - b).abs() < 1e-12, "{one:?} {two:?}");
    }
    for power in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let r = MondrianForestRegressor::new(RegressorParams {
            feature_weights: FeatureWeights::Relevance { power },
            ..RegressorParams::thesis()
        });
        assert!(r.is_err(), "power {power} accepted");
    }
    assert_eq!(
        FeatureWeights::parse("relevance:2.5").unwrap(),
        FeatureWeights::Relevance { power: 2.5 }
    );
    assert_eq!(
        FeatureWeights::parse("relevance").unwrap(),
        FeatureWeights::RELEVANCE
    );
    assert_eq!(
        FeatureWeights::parse(" 1, 0.5 ").unwrap(),
        FeatureWeights::Given(vec![1.0, 0.5])
    );
    for bad in ["relevance:x", "relevance:0", "1,a", "", "0,0"] {
        assert!(FeatureWeights::parse(bad).is_err(), "{bad:?} accepted");
    }
}

/// Labels 1{x0 > 0.5} on U[0,1]^6 with 10 % flipped: only the first feature matters.
fn one_relevant_class(n: usize, seed: u64) -> (Vec<f64>, Vec<usize>) {
    let mut r = rng(seed);
    let x: Vec<f64> = (0..n * 6).map(|_| r.gen()).collect();
    let y = x
        .chunks(6)
        .map(|row| usize::from(row[0] > 0.5) ^ usize::from(r.gen::<f64>() < 0.1))
        .collect();
    (x, y)
}

#[test]
fn classifier_relevance_finds_the_feature_the_labels_depend_on() {
    // A label-blind cut along an irrelevant feature removes only chance Gini impurity;
    // cuts along x0 separate the classes. The learnt weights say so, γ = 10·Σw, and the
    // weighted forest classifies held-out data better.
    let (x, y) = one_relevant_class(500, 12);
    let (xt, yt) = one_relevant_class(500, 13);
    let fit = |weights: FeatureWeights| {
        let mut f = MondrianForestClassifier::new(ClassifierParams {
            n_trees: 20,
            seed: 3,
            feature_weights: weights,
            ..Default::default()
        })
        .unwrap();
        f.fit(&x, 6, &y).unwrap();
        f
    };
    let (learnt, plain) = (fit(FeatureWeights::RELEVANCE), fit(FeatureWeights::Uniform));
    let w = learnt.feature_weights().unwrap().to_vec();
    assert_eq!(w[0], 1.0);
    assert!(w[1..].iter().all(|&v| (0.0..0.5).contains(&v)), "{w:?}");
    assert!((learnt.gamma() - 10.0 * w.iter().sum::<f64>()).abs() < 1e-9);
    assert_eq!(plain.gamma(), 60.0);
    let accuracy = |f: &MondrianForestClassifier| {
        let p = f.predict(&xt, 6).unwrap();
        p.iter().zip(&yt).filter(|(a, b)| a == b).count() as f64 / yt.len() as f64
    };
    let (a_learnt, a_plain) = (accuracy(&learnt), accuracy(&plain));
    assert!(a_learnt > a_plain + 0.02, "{a_learnt} vs {a_plain}");
}

#[test]
fn weighted_online_trees_have_the_batch_distribution() {
    // Weights act before the engine, so online ≡ batch (spec §2.6) must hold under them
    // too: 2000 trees fitted in one batch against 2000 grown point by point, KS on the
    // root split time and χ² on the root dimension and the leaf count, family-wise 1e-3.
    let x = unit_cube(10, 3, 14);
    let y: Vec<f64> = x.chunks(3).map(|r| r[0] - r[2]).collect();
    let w = FeatureWeights::Given(vec![0.5, 1.0, 3.0]);
    let mut batch = forest(2000, 3, w.clone(), 21);
    batch.fit(&x, 3, &y).unwrap();
    let mut online = forest(2000, 3, w, 22);
    // Ranges come from the whole cube, as batch fit takes them, so both see one scaling.
    online.partial_fit(&x[30..36], 3, &y[10..12]).unwrap();
    for i in 0..10 {
        online
            .partial_fit(&x[3 * i..3 * i + 3], 3, &y[i..=i])
            .unwrap();
    }
    assert_eq!(online.n_samples_seen(), 12);
    let summary = |f: &MondrianForestRegressor| {
        let mut times = Vec::new();
        let (mut dims, mut leaves) = (Vec::new(), Vec::new());
        for t in 0..2000 {
            let (tree, _) = f.tree(t).unwrap();
            let root = tree.root().unwrap();
            times.push(tree.split_time(root));
            dims.push(tree.split_dimension(root));
            leaves.push(tree.n_leaves());
        }
        (times, histogram(dims), histogram(leaves))
    };
    let (tb, db, lb) = summary(&batch);
    let (to, d_o, lo) = summary(&online);
    let mut family = Family::new("weighted online ≡ batch");
    family.push("root time KS", ks_two_sample(&tb, &to));
    family.push("root dimension χ²", chi2_homogeneity(&[db, d_o]));
    family.push("leaves χ²", chi2_homogeneity(&[lb, lo]));
    family.assert();
}

/// Points below `node` (with multiplicity), from the leaves.
fn points_below(tree: &mondrian::tree::MondrianTree, node: u32) -> Vec<u32> {
    tree.subtree_preorder(node)
        .into_iter()
        .filter(|&j| tree.children(j).is_none())
        .flat_map(|j| tree.leaf_points(j).to_vec())
        .collect()
}

/// Split scores recomputed from the points below each node: Σ over splits along d of
/// I(node) − I(left) − I(right), with I from the labels directly.
fn brute_scores(
    trees: Vec<&mondrian::tree::MondrianTree>,
    d: usize,
    impurity: impl Fn(&[u32]) -> f64,
) -> Vec<f64> {
    let mut s = vec![0.0; d];
    for tree in trees {
        for j in tree.subtree_preorder(tree.root().unwrap()) {
            if let Some((l, r)) = tree.children(j) {
                let i = |n| impurity(&points_below(tree, n));
                s[tree.split_dimension(j)] += (i(j) - i(l) - i(r)).max(0.0);
            }
        }
    }
    s
}

#[test]
fn split_scores_equal_a_recount_and_importances_are_shares() {
    // Regression: squared error from the targets; classification: n·Gini from the labels.
    let (x, y) = one_relevant_feature(200, 15);
    let mut f = forest(5, 3, FeatureWeights::Uniform, 2);
    assert!(f.split_scores().is_empty());
    f.fit(&x, 5, &y).unwrap();
    let sse = |p: &[u32]| {
        let v: Vec<f64> = p.iter().map(|&i| y[i as usize]).collect();
        let m = v.iter().sum::<f64>() / v.len() as f64;
        v.iter().map(|a| (a - m).powi(2)).sum::<f64>()
    };
    let brute = brute_scores((0..5).map(|t| f.tree(t).unwrap().0).collect(), 5, sse);
    for (a, b) in f.split_scores().iter().zip(&brute) {
        assert!((a - b).abs() <= 1e-9 * b.max(1.0), "{a} vs {b}");
    }
    let imp = f.feature_importances();
    assert!((imp.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    assert_eq!(
        imp.iter().cloned().fold(0.0, f64::max),
        imp[0],
        "the relevant feature explains most: {imp:?}"
    );

    let (x, y) = one_relevant_class(200, 16);
    let mut c = MondrianForestClassifier::new(ClassifierParams {
        n_trees: 5,
        seed: 1,
        ..Default::default()
    })
    .unwrap();
    c.fit(&x, 6, &y).unwrap();
    let gini = |p: &[u32]| {
        let n = p.len() as f64;
        let ones = p.iter().filter(|&&i| y[i as usize] == 1).count() as f64;
        n - (ones * ones + (n - ones) * (n - ones)) / n
    };
    let brute = brute_scores((0..5).map(|t| c.tree(t).unwrap().0).collect(), 6, gini);
    for (a, b) in c.split_scores().iter().zip(&brute) {
        assert!((a - b).abs() <= 1e-9 * b.max(1.0), "{a} vs {b}");
    }
    assert!((c.feature_importances().iter().sum::<f64>() - 1.0).abs() < 1e-12);
    // Constant targets: nothing to explain.
    let mut k = forest(3, 2, FeatureWeights::Uniform, 0);
    k.fit(&x[..60], 6, &[1.0; 10]).unwrap();
    assert_eq!(k.feature_importances(), vec![0.0; 6]);
}

#[test]
fn the_cross_validated_power_is_the_best_held_out_one_and_the_forest_uses_it() {
    // With one relevant feature of five, stretching it helps held-out rows: the choice must
    // be a positive power, be the argmin of the reported losses, and the forest must then
    // be exactly the forest of `Relevance { power }` on all rows (same weights, same
    // predictions). The 5 powers are all reported, in order.
    let (x, y) = one_relevant_feature(300, 21);
    let mut cv = forest(20, 5, FeatureWeights::RelevanceCv, 3);
    cv.fit(&x, 5, &y).unwrap();
    let choice = cv.relevance_choice().unwrap().clone();
    let powers: Vec<f64> = choice.losses.iter().map(|&(p, _)| p).collect();
    assert_eq!(powers, mondrian::RELEVANCE_CV_POWERS.to_vec());
    assert!(choice.losses.iter().all(|&(_, l)| l.is_finite()));
    let best = choice
        .losses
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    assert_eq!(choice.power, best.0);
    assert!(choice.power > 0.0, "{choice:?}");
    // Uniform weights lose on held-out rows when one feature of five matters.
    assert!(choice.losses[0].1 > best.1 + 0.05, "{choice:?}");
    let mut fixed = forest(
        20,
        5,
        FeatureWeights::Relevance {
            power: choice.power,
        },
        3,
    );
    fixed.fit(&x, 5, &y).unwrap();
    assert_eq!(cv.feature_weights(), fixed.feature_weights());
    let probe = &x[..100];
    assert_eq!(
        cv.predict(probe, 5).unwrap(),
        fixed.predict(probe, 5).unwrap()
    );
    assert!(fixed.relevance_choice().is_none());
}

#[test]
fn the_cross_validated_choice_is_thread_independent_saved_and_learnable_for_streams() {
    let (x, y) = one_relevant_feature(200, 22);
    let fit = |threads: usize| {
        let mut f = MondrianForestRegressor::new(RegressorParams {
            n_trees: 8,
            n_threads: threads,
            seed: 5,
            mode: PredictionMode::Fast,
            feature_weights: FeatureWeights::RelevanceCv,
            ..RegressorParams::thesis()
        })
        .unwrap();
        f.fit(&x, 5, &y).unwrap();
        f
    };
    let (a, b) = (fit(1), fit(2));
    assert_eq!(a.relevance_choice(), b.relevance_choice());
    assert_eq!(a.feature_weights(), b.feature_weights());
    let back = MondrianForestRegressor::from_bytes(&a.to_bytes().unwrap()).unwrap();
    assert_eq!(back.relevance_choice(), a.relevance_choice());
    // A stream learns the same choice and weights up front.
    let (w, choice) = a.learn_feature_weights(&x, 5, &y).unwrap();
    assert_eq!(choice.as_ref(), a.relevance_choice());
    assert_eq!(
        w,
        FeatureWeights::Given(a.feature_weights().unwrap().to_vec())
    );
}

#[test]
fn the_classifier_cross_validates_its_power_even_with_a_class_in_one_fold() {
    // Class 2 has a single row, so one fold's forests never see it: it must still get a
    // probability (every class of the call is declared to the folds' forests), so every
    // loss stays finite.
    let (mut x, mut y) = one_relevant_class(200, 23);
    x.extend_from_slice(&[0.5; 6]);
    y.push(2);
    let mut f = MondrianForestClassifier::new(ClassifierParams {
        n_trees: 10,
        seed: 6,
        feature_weights: FeatureWeights::RelevanceCv,
        ..Default::default()
    })
    .unwrap();
    f.fit(&x, 6, &y).unwrap();
    let choice = f.relevance_choice().unwrap();
    assert!(
        choice.losses.iter().all(|&(_, l)| l.is_finite()),
        "{choice:?}"
    );
    assert!(choice.power > 0.0, "{choice:?}");
    assert_eq!(f.n_classes(), 3);
}

#[test]
fn cross_validation_needs_enough_rows_and_parses() {
    assert_eq!(
        FeatureWeights::parse("relevance:cv").unwrap(),
        FeatureWeights::RelevanceCv
    );
    let (x, y) = one_relevant_feature(9, 24);
    let mut f = forest(4, 2, FeatureWeights::RelevanceCv, 1);
    match f.fit(&x, 5, &y) {
        Err(MondrianError::InvalidParameter { name, reason }) => {
            assert_eq!(name, "feature_weights");
            assert!(reason.contains("at least 10 rows"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(f.learn_feature_weights(&x, 5, &y[..3]).is_err());
}
