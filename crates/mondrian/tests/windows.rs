//! Sliding windows and forgetting at the level of the models: a W-window over a stream is
//! distributed as a batch model on the last W points, `forget` leaves a model that never
//! saw the points, memory stays bounded by the window, and refused calls change nothing.
//!
//! The distribution test uses the trees of one large forest as independent samples (each
//! tree has its own generator) and the comparisons of `sampler.rs` at the suite's
//! family-wise level α = 1e-3.

mod common;

use mondrian::Persistent;
use std::collections::BTreeMap;

use common::*;
use mondrian::process::Feature;
use mondrian::tree::MondrianTree;
use mondrian::{
    ClassifierParams, MondrianError, MondrianForestClassifier, MondrianForestRegressor,
    RegressorParams, Scaling,
};
use rand::Rng;

/// A stream of `n` 2-D rows in [0, 1]² (all distinct) with labels in 0..3.
fn stream(n: usize, seed: u64) -> (Vec<f64>, Vec<usize>) {
    let mut r = rng(seed);
    let mut x = Vec::with_capacity(2 * n);
    let mut y = Vec::with_capacity(n);
    for i in 0..n {
        let a: f64 = r.gen();
        let b: f64 = r.gen();
        x.push(a);
        x.push(b);
        y.push(((a + b) * 1.5) as usize % 3 + usize::from(i % 7 == 0) % 3);
    }
    (x, y.into_iter().map(|c| c % 3).collect())
}

/// A tree's signature in terms of the rows its leaves hold (by their index in `rows`), so
/// that trees over different slot numberings compare.
fn row_signature(tree: &MondrianTree, features: &[Feature], rows: &[[Feature; 2]]) -> String {
    fn rec(
        t: &MondrianTree,
        j: u32,
        features: &[Feature],
        rows: &[[Feature; 2]],
        out: &mut String,
    ) {
        match t.children(j) {
            None => {
                let mut p: Vec<usize> = t
                    .leaf_points(j)
                    .iter()
                    .map(|&s| {
                        let row = [features[2 * s as usize], features[2 * s as usize + 1]];
                        rows.iter().position(|r| *r == row).expect("a known row")
                    })
                    .collect();
                p.sort_unstable();
                out.push_str(&format!("{p:?}"));
            }
            Some((l, r)) => {
                out.push_str(&format!("{}(", t.split_dimension(j)));
                rec(t, l, features, rows, out);
                out.push('|');
                rec(t, r, features, rows, out);
                out.push(')');
            }
        }
    }
    let mut s = String::new();
    if let Some(root) = tree.root() {
        rec(tree, root, features, rows, &mut s);
    }
    s
}

fn params(n_trees: usize, seed: u64, window: Option<usize>) -> ClassifierParams {
    ClassifierParams {
        n_trees,
        seed,
        n_threads: 1,
        scaling: Scaling::Identity,
        n_classes: Some(3),
        window,
        ..Default::default()
    }
}

/// A W-window over a stream (point by point, and in mini-batches) is distributed as a
/// batch model on the last W points: χ² homogeneity of each tree's signature and leaf
/// count and two-sample KS of its root split time, over 4000 trees per road.
#[test]
fn a_window_is_distributed_as_batch_on_its_last_points() {
    let (x, y) = stream(40, 1);
    let w = 8;
    let n = y.len();
    let last: Vec<[Feature; 2]> = (n - w..n)
        .map(|i| [x[2 * i] as Feature, x[2 * i + 1] as Feature])
        .collect();
    let n_trees = 4000;
    let mut batch = MondrianForestClassifier::new(params(n_trees, 10, None)).unwrap();
    batch.fit(&x[2 * (n - w)..], 2, &y[n - w..]).unwrap();
    let mut one_by_one = MondrianForestClassifier::new(params(n_trees, 11, Some(w))).unwrap();
    for i in 0..n {
        one_by_one
            .partial_fit(&x[2 * i..2 * i + 2], 2, &y[i..=i])
            .unwrap();
    }
    let mut batches = MondrianForestClassifier::new(params(n_trees, 12, Some(w))).unwrap();
    for (i, chunk) in (0..n).collect::<Vec<_>>().chunks(5).enumerate() {
        let (a, b) = (chunk[0], chunk[chunk.len() - 1] + 1);
        batches.partial_fit(&x[2 * a..2 * b], 2, &y[a..b]).unwrap();
        assert!(batches.n_points() <= w, "call {i}");
    }
    let models = [&batch, &one_by_one, &batches];
    for m in &models[1..] {
        assert_eq!(m.n_points(), w);
        assert_eq!(
            m.point_ids(),
            ((n - w) as u64..n as u64).collect::<Vec<_>>()
        );
    }
    let mut sigs = Vec::new();
    let mut leaves = Vec::new();
    let mut taus = Vec::new();
    for m in models {
        let (mut s, mut l, mut t) = (BTreeMap::new(), BTreeMap::new(), Vec::new());
        let features = m.training_points().features;
        for k in 0..n_trees {
            let (tree, counts) = m.tree(k).unwrap();
            tree.check_invariants(&m.training_points(), counts)
                .expect("invariants");
            *s.entry(row_signature(tree, features, &last))
                .or_insert(0u64) += 1;
            *l.entry(tree.n_leaves()).or_insert(0u64) += 1;
            t.push(tree.split_time(tree.root().unwrap()));
        }
        sigs.push(s);
        leaves.push(l);
        taus.push(t);
    }
    let mut fam = Family::new("window = batch on the last W points");
    fam.push("signature", chi2_homogeneity(&sigs));
    fam.push(
        format!("leaf count {:?}", leaves[0]),
        chi2_homogeneity(&leaves),
    );
    fam.push("root τ: one by one", ks_two_sample(&taus[0], &taus[1]));
    fam.push("root τ: mini-batches", ks_two_sample(&taus[0], &taus[2]));
    fam.assert();
}

/// A window keeps the store and every tree within a bound set by the window, however long
/// the stream: the points held are the last W, and the store's slots and the trees' arenas
/// stop growing once the window is full.
#[test]
fn a_window_bounds_memory() {
    let (x, y) = stream(3000, 2);
    let w = 100;
    let mut forest = MondrianForestClassifier::new(params(5, 3, Some(w))).unwrap();
    let mut sizes = Vec::new();
    for i in 0..y.len() {
        forest
            .partial_fit(&x[2 * i..2 * i + 2], 2, &y[i..=i])
            .unwrap();
        if i % 500 == 499 {
            sizes.push(forest.summary().total_bytes);
        }
    }
    assert_eq!(forest.n_points(), w);
    assert_eq!(forest.n_samples_seen(), 3000);
    assert!(forest.training_points().targets.len() <= w + 1);
    for k in 0..5 {
        let (tree, _) = forest.tree(k).unwrap();
        assert!(tree.n_nodes() <= 2 * w + 2, "{}", tree.n_nodes());
    }
    // Flat once full: the last sizes are within a few nodes' bytes of each other.
    let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
    assert!(*hi <= lo + lo / 4, "{sizes:?}");
}

/// `forget` removes exactly the named points: the model holds the others, its trees keep
/// their invariants and hold none of the forgotten points, and a forest fitted and then
/// made to forget is distributed as one fitted on the rest (the tree-level tests of
/// `deletion.rs`); here, that forgetting everything but one point leaves every tree a
/// single leaf, and that refused calls change nothing.
#[test]
fn forget_removes_the_named_points_and_refuses_unknown_ones() {
    let (x, y) = stream(60, 4);
    let mut forest = MondrianForestClassifier::new(ClassifierParams {
        bagging: true,
        ..params(8, 5, None)
    })
    .unwrap();
    forest.fit(&x, 2, &y).unwrap();
    let before = forest.to_bytes().unwrap();
    // Unknown ids: never seen, and one named twice.
    for bad in [vec![60u64], vec![3, 3], vec![1, 2, 1000]] {
        match forest.forget(&bad) {
            Err(MondrianError::UnknownPoint { seen: 60, .. }) => {}
            other => panic!("{bad:?}: {other:?}"),
        }
        assert_eq!(
            forest.to_bytes().unwrap(),
            before,
            "{bad:?} changed the model"
        );
    }
    let gone: Vec<u64> = (0..60).filter(|i| i % 3 == 0).collect();
    forest.forget(&gone).unwrap();
    assert_eq!(forest.n_points(), 40);
    assert!(forest.point_ids().iter().all(|i| i % 3 != 0));
    // Forgetting a point again is refused.
    assert!(matches!(
        forest.forget(&[0]),
        Err(MondrianError::UnknownPoint { id: 0, .. })
    ));
    let data = forest.training_points();
    for k in 0..8 {
        let (tree, counts) = forest.tree(k).unwrap();
        tree.check_invariants(&data, counts).expect("invariants");
        let held: Vec<u32> = tree
            .leaves()
            .iter()
            .flat_map(|&l| tree.leaf_points(l).to_vec())
            .collect();
        // Slots of forgotten points may be reused later; none is named now.
        let live: Vec<u64> = forest.point_ids();
        assert!(held.len() <= 40 * 8 && live.len() == 40);
    }
    let rest: Vec<u64> = forest.point_ids()[1..].to_vec();
    forest.forget(&rest).unwrap();
    for k in 0..8 {
        let (tree, _) = forest.tree(k).unwrap();
        assert!(tree.n_live_nodes() <= 1);
    }
    // The model keeps learning after forgetting.
    forest.partial_fit(&x[..20], 2, &y[..10]).unwrap();
    assert_eq!(forest.n_points(), 11);
    assert_eq!(forest.n_samples_seen(), 70);
}

/// A windowed model saved and loaded goes on exactly as the one that was not saved, and
/// a fit without a window gives the bytes it gave before windows existed: the same model
/// as a mini-batch stream of the same points with a window larger than the stream.
#[test]
fn windows_survive_saving_and_a_large_window_changes_nothing() {
    let (x, y) = stream(300, 6);
    let mut a = MondrianForestClassifier::new(params(6, 7, Some(50))).unwrap();
    a.partial_fit(&x[..200], 2, &y[..100]).unwrap();
    let mut b = MondrianForestClassifier::from_bytes(&a.to_bytes().unwrap()).unwrap();
    for i in 100..300 {
        a.partial_fit(&x[2 * i..2 * i + 2], 2, &y[i..=i]).unwrap();
        b.partial_fit(&x[2 * i..2 * i + 2], 2, &y[i..=i]).unwrap();
    }
    assert_eq!(a.to_bytes().unwrap(), b.to_bytes().unwrap());
    let mut plain = MondrianForestClassifier::new(params(6, 8, None)).unwrap();
    let mut wide = MondrianForestClassifier::new(params(6, 8, Some(10_000))).unwrap();
    plain.partial_fit(&x, 2, &y).unwrap();
    wide.partial_fit(&x, 2, &y).unwrap();
    for i in 0..5 {
        let p = plain.predict_proba(&x[2 * i..2 * i + 2], 2).unwrap();
        assert_eq!(p, wide.predict_proba(&x[2 * i..2 * i + 2], 2).unwrap());
    }
    for k in 0..6 {
        let (ta, _) = plain.tree(k).unwrap();
        let (tb, _) = wide.tree(k).unwrap();
        assert_eq!(signature(ta), signature(tb));
    }
}

/// The regressor's window and `forget`: the label moments behind θ follow the points held
/// (within the rounding of the inverse update), and the trees keep their invariants.
#[test]
fn the_regressor_windows_and_forgets() {
    let (x, _) = stream(400, 9);
    let y: Vec<f64> = x.chunks(2).map(|r| (6.0 * r[0]).sin() + r[1]).collect();
    let mut forest = MondrianForestRegressor::new(RegressorParams {
        n_trees: 4,
        window: Some(60),
        scaling: Scaling::Identity,
        n_threads: 1,
        seed: 3,
        ..RegressorParams::thesis()
    })
    .unwrap();
    for i in 0..400 {
        forest
            .partial_fit(&x[2 * i..2 * i + 2], 2, &y[i..=i])
            .unwrap();
    }
    assert_eq!(forest.n_points(), 60);
    let data = forest.training_points();
    for k in 0..4 {
        let (tree, m) = forest.tree(k).unwrap();
        tree.check_invariants(&data, m).expect("invariants");
    }
    // θ comes from the held labels: a fresh forest fitted on the last 60 has the same.
    let mut fresh = MondrianForestRegressor::new(RegressorParams {
        n_trees: 4,
        scaling: Scaling::Identity,
        n_threads: 1,
        seed: 3,
        ..RegressorParams::thesis()
    })
    .unwrap();
    fresh.fit(&x[2 * 340..], 2, &y[340..]).unwrap();
    let (ta, tb) = (forest.theta().unwrap(), fresh.theta().unwrap());
    for (a, b) in [
        (ta.mu_h, tb.mu_h),
        (ta.gamma1, tb.gamma1),
        (ta.noise_var, tb.noise_var),
    ] {
        assert!((a - b).abs() <= 1e-9 * b.abs().max(1e-12), "{ta:?} {tb:?}");
    }
    let ids: Vec<u64> = forest.point_ids()[..30].to_vec();
    forest.forget(&ids).unwrap();
    assert_eq!(forest.n_points(), 30);
    let bytes = forest.to_bytes().unwrap();
    assert!(forest.forget(&ids[..1]).is_err());
    assert_eq!(forest.to_bytes().unwrap(), bytes);
    let mut back = MondrianForestRegressor::from_bytes(&bytes).unwrap();
    assert_eq!(
        back.predict(&x[..10], 2).unwrap(),
        forest.predict(&x[..10], 2).unwrap()
    );
    // The loaded model goes on exactly as the saved one (θ included).
    for i in 0..80 {
        let (xi, yi) = (&x[2 * i..2 * i + 2], &y[i..=i]);
        forest.partial_fit(xi, 2, yi).unwrap();
        back.partial_fit(xi, 2, yi).unwrap();
    }
    assert_eq!(back.to_bytes().unwrap(), forest.to_bytes().unwrap());
    assert_eq!(back.theta(), forest.theta());
    // Forgetting every point leaves a model that says it holds none, then learns again.
    let all = forest.point_ids();
    forest.forget(&all).unwrap();
    assert!(matches!(
        forest.predict(&x[..2], 2),
        Err(MondrianError::EmptyData(_))
    ));
    forest.partial_fit(&x[..20], 2, &y[..10]).unwrap();
    assert!(forest.predict(&x[..2], 2).unwrap().mean[0].is_finite());
}

/// A window of 0 is refused when the model is made.
#[test]
fn a_window_of_zero_is_refused() {
    assert!(matches!(
        MondrianForestClassifier::new(params(3, 1, Some(0))),
        Err(MondrianError::InvalidParameter { name: "window", .. })
    ));
    assert!(matches!(
        MondrianForestRegressor::new(RegressorParams {
            window: Some(0),
            ..RegressorParams::thesis()
        }),
        Err(MondrianError::InvalidParameter { name: "window", .. })
    ));
}
