//! Sample weights (`fit_weighted`, `partial_fit_weighted`), growing more trees on a fitted
//! forest (`add_trees`), leaf indices (`apply`) and the progress observer.
//!
//! The reference for a weight is repetition: a row of integer weight k is k copies of the
//! row. Without bagging a batch fit on weighted rows draws exactly what a batch fit on the
//! repeated rows draws (the same random numbers in the same order: the sampler sees the
//! same multiset of positions), so those are compared bit for bit. With bagging each copy
//! of a repeated row takes its own Poisson(1) while a weighted row takes one Poisson(k),
//! and online insertion draws differently from a batch fit, so there the laws are compared:
//! two-sample KS tests of predictions at fixed points over 200 independent seeds each, at
//! the family-wise level α = 1e-3 (Bonferroni over the family).

mod common;

use std::sync::{Arc, Mutex};

use common::{chi2_gof, ks_two_sample, Family};
use mondrian::forest::{MAX_SAMPLE_WEIGHT, NO_LEAF};
use mondrian::{
    ClassifierParams, FeatureWeights, MondrianError, MondrianForestClassifier,
    MondrianForestRegressor, Persistent, Progress, RegressorParams, Scaling,
};

/// 24 points in 2-D with labels 0/1 (class 1 on the right, a few exceptions), weights
/// 0–3, and a real target.
struct Weighted {
    x: Vec<f64>,
    y: Vec<usize>,
    t: Vec<f64>,
    w: Vec<f64>,
}

fn data() -> Weighted {
    let (mut x, mut y, mut t, mut w) = (vec![], vec![], vec![], vec![]);
    for i in 0..24u64 {
        let a = ((i * 37 + 11) % 97) as f64 / 97.0;
        let b = ((i * 53 + 29) % 89) as f64 / 89.0;
        x.extend([a, b]);
        y.push(usize::from((a > 0.5) != (i % 7 == 3)));
        t.push((4.0 * a).sin() + b);
        w.push([1.0, 2.0, 3.0, 1.0, 0.0, 3.0][i as usize % 6]);
    }
    Weighted { x, y, t, w }
}

impl Weighted {
    /// The rows repeated by their (integer) weights, in order.
    fn repeated(&self) -> (Vec<f64>, Vec<usize>, Vec<f64>) {
        let (mut x, mut y, mut t) = (vec![], vec![], vec![]);
        for (i, &w) in self.w.iter().enumerate() {
            for _ in 0..w as usize {
                x.extend_from_slice(&self.x[2 * i..2 * i + 2]);
                y.push(self.y[i]);
                t.push(self.t[i]);
            }
        }
        (x, y, t)
    }
}

const QUERIES: [f64; 6] = [0.3, 0.4, 0.55, 0.5, 0.8, 0.2];

fn classifier(n_trees: usize, seed: u64, bagging: bool) -> MondrianForestClassifier {
    MondrianForestClassifier::new(ClassifierParams {
        n_trees,
        seed,
        bagging,
        n_threads: 1,
        ..Default::default()
    })
    .unwrap()
}

fn regressor(n_trees: usize, seed: u64, bagging: bool) -> MondrianForestRegressor {
    MondrianForestRegressor::new(RegressorParams {
        n_trees,
        seed,
        bagging,
        min_samples_split: 2,
        n_threads: 1,
        ..RegressorParams::thesis()
    })
    .unwrap()
}

#[test]
fn integer_weights_are_repeated_rows_bit_for_bit_in_a_batch_fit() {
    let d = data();
    let (rx, ry, rt) = d.repeated();
    for seed in 0..5 {
        let mut a = classifier(8, seed, false);
        a.fit_weighted(&d.x, 2, &d.y, &d.w).unwrap();
        let mut b = classifier(8, seed, false);
        b.fit(&rx, 2, &ry).unwrap();
        assert_eq!(
            a.predict_proba(&QUERIES, 2).unwrap(),
            b.predict_proba(&QUERIES, 2).unwrap()
        );
        let mut a = regressor(4, seed, false);
        a.fit_weighted(&d.x, 2, &d.t, &d.w).unwrap();
        let mut b = regressor(4, seed, false);
        b.fit(&rx, 2, &rt).unwrap();
        let (pa, pb) = (
            a.predict(&QUERIES, 2).unwrap(),
            b.predict(&QUERIES, 2).unwrap(),
        );
        // θ comes from the target moments, summed per row (weighted) or per copy.
        let theta = (a.theta().unwrap(), b.theta().unwrap());
        assert!((theta.0.mu_h - theta.1.mu_h).abs() < 1e-12);
        for (u, v) in pa.mean.iter().zip(&pb.mean) {
            assert!((u - v).abs() < 1e-9, "{u} vs {v}");
        }
    }
}

/// Predictions at the query points of 200 one-tree forests, one per seed from `base`.
fn spread(base: u64, fit: impl Fn(u64) -> Vec<f64>) -> Vec<Vec<f64>> {
    let runs: Vec<Vec<f64>> = (0..200).map(|s| fit(base + s)).collect();
    (0..runs[0].len())
        .map(|q| runs.iter().map(|r| r[q]).collect())
        .collect()
}

fn proba_of_one(m: &MondrianForestClassifier) -> Vec<f64> {
    m.predict_proba(&QUERIES, 2)
        .unwrap()
        .chunks(2)
        .map(|p| p[1])
        .collect()
}

#[test]
fn integer_weights_have_the_law_of_repeated_rows_with_bagging_and_online() {
    let d = data();
    let (rx, ry, rt) = d.repeated();
    let mut family = Family::new("weight k vs k copies");
    // The reference: batch fits on the repeated rows with bagging.
    let copies = spread(0, |s| {
        let mut m = classifier(1, s, true);
        m.fit(&rx, 2, &ry).unwrap();
        proba_of_one(&m)
    });
    let weighted_batch = spread(10_000, |s| {
        let mut m = classifier(1, s, true);
        m.fit_weighted(&d.x, 2, &d.y, &d.w).unwrap();
        proba_of_one(&m)
    });
    let weighted_online = spread(20_000, |s| {
        let mut m = classifier(1, s, true);
        for i in 0..d.y.len() {
            m.partial_fit_weighted(&d.x[2 * i..2 * i + 2], 2, &d.y[i..=i], &d.w[i..=i])
                .unwrap();
        }
        proba_of_one(&m)
    });
    for q in 0..3 {
        family.push(
            format!("classifier batch, query {q}"),
            ks_two_sample(&weighted_batch[q], &copies[q]),
        );
        family.push(
            format!("classifier online, query {q}"),
            ks_two_sample(&weighted_online[q], &copies[q]),
        );
    }
    let reg_copies = spread(30_000, |s| {
        let mut m = regressor(1, s, true);
        m.fit(&rx, 2, &rt).unwrap();
        m.predict(&QUERIES, 2).unwrap().mean
    });
    let reg_weighted = spread(40_000, |s| {
        let mut m = regressor(1, s, true);
        m.fit_weighted(&d.x, 2, &d.t, &d.w).unwrap();
        m.predict(&QUERIES, 2).unwrap().mean
    });
    for q in 0..3 {
        family.push(
            format!("regressor batch, query {q}"),
            ks_two_sample(&reg_weighted[q], &reg_copies[q]),
        );
    }
    family.assert();

    // The test has power: ignoring the weights (all 1) fails it, at the level each of the
    // nine comparisons above is held to.
    let ignored = spread(50_000, |s| {
        let mut m = classifier(1, s, true);
        let kept: Vec<usize> = (0..d.y.len()).filter(|&i| d.w[i] > 0.0).collect();
        let x: Vec<f64> = kept
            .iter()
            .flat_map(|&i| d.x[2 * i..2 * i + 2].to_vec())
            .collect();
        let y: Vec<usize> = kept.iter().map(|&i| d.y[i]).collect();
        m.fit(&x, 2, &y).unwrap();
        proba_of_one(&m)
    });
    let smallest = (0..3)
        .map(|q| ks_two_sample(&ignored[q], &copies[q]).p)
        .fold(1.0, f64::min);
    assert!(
        smallest < common::ALPHA / 9.0,
        "weights ignored would pass the family: p = {smallest}"
    );
}

#[test]
fn weight_zero_is_a_row_never_given() {
    let d = data();
    let kept: Vec<usize> = (0..d.y.len()).filter(|&i| d.w[i] > 0.0).collect();
    let mut x: Vec<f64> = kept
        .iter()
        .flat_map(|&i| d.x[2 * i..2 * i + 2].to_vec())
        .collect();
    let y: Vec<usize> = kept.iter().map(|&i| d.y[i]).collect();
    let t: Vec<f64> = kept.iter().map(|&i| d.t[i]).collect();
    let w: Vec<f64> = kept.iter().map(|&i| d.w[i]).collect();
    // The zero-weight rows are moved far away: were they in the scaling, every scaled
    // feature would change.
    let mut far = d.x.clone();
    for i in (0..d.y.len()).filter(|&i| d.w[i] == 0.0) {
        far[2 * i] = 50.0;
        far[2 * i + 1] = -30.0;
    }
    let mut a = classifier(6, 3, false);
    a.fit_weighted(&far, 2, &d.y, &d.w).unwrap();
    let mut b = classifier(6, 3, false);
    b.fit_weighted(&x, 2, &y, &w).unwrap();
    assert_eq!(
        a.predict_proba(&QUERIES, 2).unwrap(),
        b.predict_proba(&QUERIES, 2).unwrap()
    );
    let mut a = regressor(3, 3, false);
    a.fit_weighted(&far, 2, &d.t, &d.w).unwrap();
    let mut b = regressor(3, 3, false);
    b.fit_weighted(&x, 2, &t, &w).unwrap();
    assert_eq!(
        a.predict(&QUERIES, 2).unwrap(),
        b.predict(&QUERIES, 2).unwrap()
    );
    // A zero-weight row keeps its id (the ids stay row numbers) without being held.
    assert_eq!(a.n_samples_seen(), 24);
    assert_eq!(a.n_points(), 20);
    let expected: Vec<u64> = kept.iter().map(|&i| i as u64).collect();
    assert_eq!(a.point_ids(), expected);

    // With bagging the draws are keyed by id: zero-weight rows at the end leave every
    // other row's draws as they were.
    let mut w_end = vec![1.0; 24];
    w_end[20..].fill(0.0);
    x.clear();
    x.extend_from_slice(&d.x[..40]);
    let mut a = classifier(6, 9, true);
    a.fit_weighted(&d.x, 2, &d.y, &w_end).unwrap();
    let mut b = classifier(6, 9, true);
    b.fit(&x, 2, &d.y[..20]).unwrap();
    assert_eq!(
        a.predict_proba(&QUERIES, 2).unwrap(),
        b.predict_proba(&QUERIES, 2).unwrap()
    );
    // Weight 1 everywhere is no weights at all.
    let mut a = classifier(6, 9, true);
    a.fit_weighted(&d.x, 2, &d.y, &[1.0; 24]).unwrap();
    let mut b = classifier(6, 9, true);
    b.fit(&d.x, 2, &d.y).unwrap();
    assert_eq!(a.to_bytes().unwrap(), b.to_bytes().unwrap());
}

/// How many copies of slot `slot` tree `t` holds.
fn copies(m: &MondrianForestClassifier, t: usize, slot: u32) -> usize {
    let (tree, _) = m.tree(t).unwrap();
    tree.leaves()
        .iter()
        .map(|&l| tree.leaf_points(l).iter().filter(|&&p| p == slot).count())
        .sum()
}

#[test]
fn each_tree_takes_its_copies_by_the_weight_rule() {
    let x = [0.1, 0.9, 0.5, 0.3];
    let y = [0, 1, 0, 1];
    let n_trees = 2000;
    let mut family = Family::new("copies per tree");
    // Without bagging: weight 3 is 3 copies in every tree; 2.5 is 2 or 3, 3 with
    // probability 1/2 (exact binomial test over the trees).
    let mut m = classifier(n_trees, 1, false);
    m.fit_weighted(&x, 1, &y, &[3.0, 2.5, 1.0, 0.25]).unwrap();
    let mut threes = 0;
    let mut ones = 0;
    for t in 0..n_trees {
        assert_eq!(copies(&m, t, 0), 3);
        assert_eq!(copies(&m, t, 2), 1);
        match copies(&m, t, 1) {
            3 => threes += 1,
            2 => {}
            k => panic!("weight 2.5 gave {k} copies"),
        }
        ones += copies(&m, t, 3);
    }
    family.push(
        "2.5 rounds up half the time",
        common::binomial_test(threes as u64, n_trees as u64, 0.5),
    );
    family.push(
        "0.25 rounds up a quarter of the time",
        common::binomial_test(ones as u64, n_trees as u64, 0.25),
    );
    // With bagging: weight 3 is Poisson(3) copies per tree (χ² over k = 0..6 and ≥ 7).
    let mut m = classifier(n_trees, 2, true);
    m.fit_weighted(&x, 1, &y, &[3.0, 1.0, 1.0, 1.0]).unwrap();
    let mut observed = [0u64; 8];
    for t in 0..n_trees {
        observed[copies(&m, t, 0).min(7)] += 1;
    }
    let mut probs = [0.0; 8];
    let mut p = (-3.0f64).exp();
    for (k, slot) in probs.iter_mut().enumerate().take(7) {
        *slot = p;
        p *= 3.0 / (k + 1) as f64;
    }
    probs[7] = 1.0 - probs[..7].iter().sum::<f64>();
    family.push(
        "bagging weight 3 is Poisson(3)",
        chi2_gof(&observed, &probs),
    );
    family.assert();
}

#[test]
fn forgetting_a_weighted_point_removes_all_its_copies() {
    let d = data();
    let mut m = classifier(10, 4, false);
    m.fit_weighted(&d.x, 2, &d.y, &d.w).unwrap();
    m.forget(&[1, 2, 5]).unwrap(); // weights 2, 3 and 3
    let points = m.training_points();
    for t in 0..10 {
        let (tree, counts) = m.tree(t).unwrap();
        tree.check_invariants(&points, counts).unwrap();
        // Rows of weight 0 take no slot: the others fill slots in order.
        let mut slot = 0u32;
        for (row, &w) in d.w.iter().enumerate() {
            if w == 0.0 {
                continue;
            }
            let want = if [1, 2, 5].contains(&row) {
                0
            } else {
                w as usize
            };
            assert_eq!(copies(&m, t, slot), want, "tree {t}, row {row}");
            slot += 1;
        }
    }
    // The regressor's θ follows the weighted targets of the points held: the same as a
    // fit on what remains (the scaling given, so that it does not move).
    let params = RegressorParams {
        n_trees: 3,
        scaling: Scaling::Identity,
        ..RegressorParams::thesis()
    };
    let mut a = MondrianForestRegressor::new(params.clone()).unwrap();
    a.fit_weighted(&d.x, 2, &d.t, &d.w).unwrap();
    a.forget(&[1, 2, 5]).unwrap();
    let rest: Vec<usize> = (0..24).filter(|i| ![1, 2, 5].contains(i)).collect();
    let x: Vec<f64> = rest
        .iter()
        .flat_map(|&i| d.x[2 * i..2 * i + 2].to_vec())
        .collect();
    let t: Vec<f64> = rest.iter().map(|&i| d.t[i]).collect();
    let w: Vec<f64> = rest.iter().map(|&i| d.w[i]).collect();
    let mut b = MondrianForestRegressor::new(params).unwrap();
    b.fit_weighted(&x, 2, &t, &w).unwrap();
    let (ta, tb) = (a.theta().unwrap(), b.theta().unwrap());
    for (u, v) in [
        (ta.mu_h, tb.mu_h),
        (ta.gamma1, tb.gamma1),
        (ta.gamma2, tb.gamma2),
        (ta.noise_var, tb.noise_var),
    ] {
        assert!((u - v).abs() <= 1e-12 * v.abs().max(1.0), "{u} vs {v}");
    }
    // Learning a weighted point and forgetting it gives the predictions back.
    let before = a.predict(&QUERIES, 2).unwrap();
    a.partial_fit_weighted(&[0.45, 0.5], 2, &[7.0], &[4.0])
        .unwrap();
    assert_ne!(a.predict(&QUERIES, 2).unwrap(), before);
    a.forget(&[24]).unwrap();
    let after = a.predict(&QUERIES, 2).unwrap();
    for (u, v) in after.mean.iter().zip(&before.mean) {
        assert!((u - v).abs() < 1e-9, "{u} vs {v}");
    }
}

#[test]
fn weighted_models_save_and_go_on_learning() {
    let d = data();
    let mut m = classifier(5, 8, true);
    m.fit_weighted(&d.x, 2, &d.y, &d.w).unwrap();
    let mut back = MondrianForestClassifier::from_bytes(&m.to_bytes().unwrap()).unwrap();
    for model in [&mut m, &mut back] {
        model
            .partial_fit_weighted(&[0.7, 0.7], 2, &[1], &[2.5])
            .unwrap();
        model.forget(&[2]).unwrap();
    }
    assert_eq!(m.to_bytes().unwrap(), back.to_bytes().unwrap());
}

#[test]
fn bad_weights_are_refused_and_change_nothing() {
    let d = data();
    let mut m = classifier(4, 0, false);
    m.fit(&d.x, 2, &d.y).unwrap();
    let before = m.to_bytes().unwrap();
    let mut w = vec![1.0; 24];
    for bad in [-0.5, f64::NAN, f64::INFINITY, 2.0 * MAX_SAMPLE_WEIGHT] {
        w[7] = bad;
        let e = m.fit_weighted(&d.x, 2, &d.y, &w).unwrap_err();
        assert!(
            matches!(e, MondrianError::InvalidSampleWeight { row: 7, .. }),
            "{e}"
        );
        let e = m.partial_fit_weighted(&d.x, 2, &d.y, &w).unwrap_err();
        assert!(matches!(e, MondrianError::InvalidSampleWeight { .. }));
    }
    let e = m.fit_weighted(&d.x, 2, &d.y, &[1.0; 3]).unwrap_err();
    assert!(matches!(e, MondrianError::SampleWeightLength { .. }), "{e}");
    let e = m.fit_weighted(&d.x, 2, &d.y, &[0.0; 24]).unwrap_err();
    assert!(matches!(e, MondrianError::EmptyData(_)), "{e}");
    let mut r = regressor(2, 0, false);
    let e = r.fit_weighted(&d.x, 2, &d.t, &w).unwrap_err();
    assert!(matches!(e, MondrianError::InvalidSampleWeight { .. }));
    assert_eq!(m.to_bytes().unwrap(), before);
}

#[test]
fn learnt_feature_weights_see_the_sample_weights() {
    // The pilot forest behind relevance weights is fitted with the sample weights, so on
    // integer weights it is the pilot of the repeated rows.
    let d = data();
    let (rx, ry, _) = d.repeated();
    let params = ClassifierParams {
        n_trees: 8,
        feature_weights: FeatureWeights::RELEVANCE,
        ..Default::default()
    };
    let mut a = MondrianForestClassifier::new(params.clone()).unwrap();
    a.fit_weighted(&d.x, 2, &d.y, &d.w).unwrap();
    let mut b = MondrianForestClassifier::new(params).unwrap();
    b.fit(&rx, 2, &ry).unwrap();
    assert_eq!(a.feature_weights(), b.feature_weights());
    // Cross-validated choices run with weights too (folds keep a row's copies together).
    let mut c = MondrianForestRegressor::new(RegressorParams {
        n_trees: 3,
        feature_weights: FeatureWeights::RelevanceCv,
        calibration: mondrian::Calibration::Cv,
        ..RegressorParams::thesis()
    })
    .unwrap();
    c.fit_weighted(&d.x, 2, &d.t, &d.w).unwrap();
    let pits = c.calibration().unwrap();
    // Each held-out row's PIT counts as many times as its (integer) weight.
    assert_eq!(pits.len(), d.w.iter().sum::<f64>() as usize);
    assert!(c.relevance_choice().is_some());
}

#[test]
fn added_trees_are_those_of_a_larger_fit_and_leave_the_old_ones_alone() {
    let d = data();
    for bagging in [false, true] {
        let mut small = classifier(3, 12, bagging);
        small.fit_weighted(&d.x, 2, &d.y, &d.w).unwrap();
        let leaves_before = small.apply(&QUERIES, 2).unwrap();
        small.add_trees(4).unwrap();
        assert_eq!(small.params().n_trees, 7);
        let mut large = classifier(7, 12, bagging);
        large.fit_weighted(&d.x, 2, &d.y, &d.w).unwrap();
        assert_eq!(
            small.predict_proba(&QUERIES, 2).unwrap(),
            large.predict_proba(&QUERIES, 2).unwrap()
        );
        let leaves_after = small.apply(&QUERIES, 2).unwrap();
        for q in 0..3 {
            assert_eq!(
                leaves_after[q * 7..q * 7 + 3],
                leaves_before[q * 3..q * 3 + 3]
            );
        }
        let mut small = regressor(2, 12, bagging);
        small.fit_weighted(&d.x, 2, &d.t, &d.w).unwrap();
        small.add_trees(3).unwrap();
        let mut large = regressor(5, 12, bagging);
        large.fit_weighted(&d.x, 2, &d.t, &d.w).unwrap();
        assert_eq!(
            small.predict(&QUERIES, 2).unwrap(),
            large.predict(&QUERIES, 2).unwrap()
        );
    }
    // An unfitted forest has nothing to grow trees on; too many trees is refused.
    assert!(matches!(
        classifier(2, 0, false).add_trees(1),
        Err(MondrianError::NotFitted)
    ));
    let mut m = classifier(2, 0, false);
    m.fit(&d.x, 2, &d.y).unwrap();
    assert!(matches!(
        m.add_trees(usize::MAX),
        Err(MondrianError::InvalidParameter { .. })
    ));
    assert_eq!(m.params().n_trees, 2);
}

#[test]
fn apply_names_the_leaf_that_holds_each_training_point() {
    let d = data();
    let mut m = classifier(5, 2, false);
    m.fit(&d.x, 2, &d.y).unwrap();
    let leaves = m.apply(&d.x, 2).unwrap();
    assert_eq!(leaves.len(), 24 * 5);
    for (i, row) in leaves.chunks(5).enumerate() {
        for (t, &leaf) in row.iter().enumerate() {
            let (tree, _) = m.tree(t).unwrap();
            assert!(tree.is_leaf(leaf));
            assert!(
                tree.leaf_points(leaf).contains(&(i as u32)),
                "row {i}, tree {t}"
            );
        }
    }
    // Any point reaches a leaf, far away too; a forest whose trees hold nothing says so.
    assert!(m
        .apply(&[40.0, -3.0], 2)
        .unwrap()
        .iter()
        .all(|&l| l != NO_LEAF));
    let mut empty = classifier(3, 0, false);
    empty.fit_weighted(&[0.5, 0.5], 2, &[1], &[0.25]).unwrap();
    let row = empty.apply(&[0.5, 0.5], 2).unwrap();
    for (t, &leaf) in row.iter().enumerate() {
        let holds = copies(&empty, t, 0) > 0;
        assert_eq!(leaf != NO_LEAF, holds);
    }
    assert!(matches!(
        classifier(2, 0, false).apply(&[0.5, 0.5], 2),
        Err(MondrianError::NotFitted)
    ));
}

#[test]
fn progress_hears_every_tree_once_and_changes_nothing() {
    let d = data();
    for threads in [1, 2] {
        let heard: Arc<Mutex<Vec<(usize, usize)>>> = Arc::default();
        let sink = Arc::clone(&heard);
        let mut m = MondrianForestClassifier::new(ClassifierParams {
            n_trees: 70,
            n_threads: threads,
            ..Default::default()
        })
        .unwrap();
        m.set_progress(Some(Progress::new(move |done, total| {
            sink.lock().unwrap().push((done, total));
        })));
        m.fit(&d.x, 2, &d.y).unwrap();
        let calls = std::mem::take(&mut *heard.lock().unwrap());
        assert!(calls.iter().all(|&(_, total)| total == 70));
        let mut done: Vec<usize> = calls.iter().map(|&(d, _)| d).collect();
        done.sort_unstable();
        done.dedup();
        assert_eq!(done.len(), calls.len(), "a count heard twice: {calls:?}");
        assert_eq!(done.last(), Some(&70));
        // add_trees reports on its own pass.
        m.add_trees(5).unwrap();
        let calls = std::mem::take(&mut *heard.lock().unwrap());
        assert_eq!(calls.last().map(|c| c.1), Some(5));
        let mut plain = MondrianForestClassifier::new(ClassifierParams {
            n_trees: 75,
            n_threads: threads,
            ..Default::default()
        })
        .unwrap();
        plain.fit(&d.x, 2, &d.y).unwrap();
        assert_eq!(
            plain.predict_proba(&QUERIES, 2).unwrap(),
            m.predict_proba(&QUERIES, 2).unwrap()
        );
    }
}
