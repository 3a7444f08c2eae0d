//! Online bagging at the forest level (spec `bayesian-trees.md` §6.2): with
//! `bagging: true` each tree takes each training row k ~ Poisson(1) times, i.i.d. across
//! rows and trees, on every road a point can take into a tree (`mf-classification.md`
//! §2.6: batch sampling of an empty tree, a large mini-batch extending the trees as one
//! set, a stream of single rows); with `bagging: false` every tree takes every row once.
//!
//! A tree's multiplicity of a row is read from the tree itself: its leaves hold the slots
//! of the points with multiplicity, and a forest that never let a point go has slot = id
//! (= the row's arrival index). The laws are checked against their closed forms, not
//! against the library's Poisson sampler:
//! * per tree, and pooled over the forest, a χ² goodness of fit of the multiplicities to
//!   Poisson(1) on the bins 0, 1, 2, 3, ≥ 4;
//! * per pair of trees, the Pearson correlation r of their multiplicity vectors over the
//!   n rows: under independence r·√n is asymptotically N(0, 1).
//!
//! Each model's test is one [`Family`] at family-wise level α = 1e-3 (Bonferroni): with 5
//! trees, 5 + 1 χ² tests and 10 pairs make 16 comparisons at 6.25e-5 each, which for a pair
//! is |r| < 4.0/√n, the bound of the issue.

mod common;

use common::{chi2_gof, Family, TestResult};
use mondrian::model::{Fit, Forget, PartialFit};
use mondrian::tree::MondrianTree;
use mondrian::{
    ClassifierParams, MondrianForestClassifier, MondrianForestRegressor, RegressorParams,
};
use rand::Rng;
use statrs::distribution::{ContinuousCDF, Normal};

/// Rows trained in three stages, one per road: the first rows by `fit` (the classifier:
/// empty trees are batch-sampled on them) or one at a time from an empty forest (the
/// regressor: a tree that drew only zeros so far is batch-sampled on its first point of
/// weight > 0), then a `partial_fit` at least as large as what the trees hold (set
/// extension), then single rows (the per-point road).
const FIRST_ROWS: usize = 500;
const SET_ROWS: usize = 600;
const STREAM_ROWS: usize = 400;
const N_ROWS: usize = FIRST_ROWS + SET_ROWS + STREAM_ROWS;
/// Trees of the tested forests; on 2 threads they form two groups (3 + 2), so a tree's
/// index inside its group differs from its index in the forest.
const N_TREES: usize = 5;

/// Uniform 2-D rows with 3 random classes and a noisy regression target.
fn rows(seed: u64) -> (Vec<f64>, Vec<usize>, Vec<f64>) {
    let mut r = common::rng(seed);
    let x: Vec<f64> = (0..2 * N_ROWS).map(|_| r.gen()).collect();
    let labels = (0..N_ROWS).map(|_| r.gen_range(0..3)).collect();
    let targets = (0..N_ROWS)
        .map(|i| x[2 * i] + 0.1 * r.gen::<f64>())
        .collect();
    (x, labels, targets)
}

/// How often each of the `n` slots appears in the tree's leaves.
fn multiplicities(tree: &MondrianTree, n: usize) -> Vec<u32> {
    let mut m = vec![0u32; n];
    for leaf in tree.leaves() {
        for &slot in tree.leaf_points(leaf) {
            m[slot as usize] += 1;
        }
    }
    m
}

/// Poisson(1) probabilities of the bins 0, 1, 2, 3 and ≥ 4.
fn poisson_one_bins() -> [f64; 5] {
    let e = (-1.0f64).exp();
    let head = [e, e, e / 2.0, e / 6.0];
    [
        head[0],
        head[1],
        head[2],
        head[3],
        1.0 - head.iter().sum::<f64>(),
    ]
}

fn binned(m: &[u32]) -> [u64; 5] {
    let mut bins = [0u64; 5];
    for &k in m {
        bins[(k as usize).min(4)] += 1;
    }
    bins
}

/// Pearson correlation of two vectors (0 if either is constant).
fn pearson(a: &[u32], b: &[u32]) -> f64 {
    let n = a.len() as f64;
    let mean = |v: &[u32]| v.iter().map(|&k| f64::from(k)).sum::<f64>() / n;
    let (ma, mb) = (mean(a), mean(b));
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (&u, &v) in a.iter().zip(b) {
        let (du, dv) = (f64::from(u) - ma, f64::from(v) - mb);
        sab += du * dv;
        saa += du * du;
        sbb += dv * dv;
    }
    if saa == 0.0 || sbb == 0.0 {
        return 0.0;
    }
    sab / (saa * sbb).sqrt()
}

/// The χ² and correlation family of one forest's multiplicity vectors (one per tree).
fn bagging_family(name: &str, per_tree: &[Vec<u32>]) -> Family {
    let probs = poisson_one_bins();
    let mut fam = Family::new(name);
    let mut pooled = [0u64; 5];
    for (t, m) in per_tree.iter().enumerate() {
        let bins = binned(m);
        for (p, b) in pooled.iter_mut().zip(bins) {
            *p += b;
        }
        fam.push(format!("tree {t}: bins {bins:?}"), chi2_gof(&bins, &probs));
    }
    fam.push(format!("pooled bins {pooled:?}"), chi2_gof(&pooled, &probs));
    let std = Normal::new(0.0, 1.0).unwrap();
    for a in 0..per_tree.len() {
        for b in a + 1..per_tree.len() {
            let n = per_tree[a].len() as f64;
            let r = pearson(&per_tree[a], &per_tree[b]);
            let z = r * n.sqrt();
            fam.push(
                format!("trees {a}, {b}: r = {r:.4}, r·√n"),
                TestResult {
                    statistic: z,
                    df: n,
                    p: 2.0 * std.sf(z.abs()),
                },
            );
        }
    }
    fam
}

fn classifier(bagging: bool, seed: u64) -> MondrianForestClassifier {
    let (x, y, _) = rows(seed);
    let mut f = MondrianForestClassifier::new(ClassifierParams {
        n_trees: N_TREES,
        seed,
        bagging,
        n_threads: 2,
        ..Default::default()
    })
    .unwrap();
    train(&mut f, &x, &y, false);
    f
}

fn regressor(bagging: bool, seed: u64) -> MondrianForestRegressor {
    let (x, _, y) = rows(seed);
    let mut f = MondrianForestRegressor::new(RegressorParams {
        n_trees: N_TREES,
        seed,
        bagging,
        n_threads: 2,
        // Fixed, as a stream's first row cannot give the ranges.
        scaling: mondrian::Scaling::Ranges(vec![(0.0, 1.0); 2]),
        ..RegressorParams::thesis()
    })
    .unwrap();
    train(&mut f, &x, &y, true);
    f
}

/// The three roads in order: the first rows by `fit` (`streamed_start`: one at a time), one
/// large `partial_fit`, then single rows.
fn train<M>(model: &mut M, x: &[f64], y: &[M::Target], streamed_start: bool)
where
    M: Fit<f64> + PartialFit<f64> + Forget,
{
    let single = |model: &mut M, i: usize| model.partial_fit(&x[2 * i..2 * i + 2], 2, &y[i..i + 1]);
    if streamed_start {
        for i in 0..FIRST_ROWS {
            single(model, i).unwrap();
        }
    } else {
        model
            .fit(&x[..2 * FIRST_ROWS], 2, &y[..FIRST_ROWS])
            .unwrap();
    }
    let set_end = FIRST_ROWS + SET_ROWS;
    model
        .partial_fit(&x[2 * FIRST_ROWS..2 * set_end], 2, &y[FIRST_ROWS..set_end])
        .unwrap();
    for i in set_end..N_ROWS {
        single(model, i).unwrap();
    }
    assert_eq!(model.point_ids(), (0..N_ROWS as u64).collect::<Vec<_>>());
}

#[test]
fn classifier_bagging_is_poisson_one_and_independent_across_trees() {
    let f = classifier(true, 11);
    let per_tree: Vec<Vec<u32>> = (0..N_TREES)
        .map(|t| multiplicities(f.tree(t).unwrap().0, N_ROWS))
        .collect();
    bagging_family(
        "classifier: bagging multiplicities ~ Poisson(1), independent trees",
        &per_tree,
    )
    .assert();
}

#[test]
fn regressor_bagging_is_poisson_one_and_independent_across_trees() {
    let f = regressor(true, 12);
    let per_tree: Vec<Vec<u32>> = (0..N_TREES)
        .map(|t| multiplicities(f.tree(t).unwrap().0, N_ROWS))
        .collect();
    bagging_family(
        "regressor: bagging multiplicities ~ Poisson(1), independent trees",
        &per_tree,
    )
    .assert();
}

/// Without bagging every tree holds every row exactly once, on all three roads.
#[test]
fn without_bagging_every_row_counts_once() {
    let c = classifier(false, 13);
    let r = regressor(false, 14);
    for t in 0..N_TREES {
        for (model, tree) in [
            ("classifier", c.tree(t).unwrap().0),
            ("regressor", r.tree(t).unwrap().0),
        ] {
            let m = multiplicities(tree, N_ROWS);
            assert!(
                m.iter().all(|&k| k == 1),
                "{model} tree {t}: multiplicities {:?}",
                binned(&m)
            );
        }
    }
}

/// The χ² and correlation tests can fail: trees that share one set of Poisson(1) draws
/// (each tree's marginal law right, the trees dependent) are rejected by the correlations,
/// and all-ones multiplicities by the χ².
#[test]
fn the_bagging_family_rejects_shared_draws_and_missing_bagging() {
    let mut r = common::rng(15);
    let e = (-1.0f64).exp();
    let poisson = |r: &mut common::TestRng| {
        // Inversion of the Poisson(1) CDF.
        let u: f64 = r.gen();
        let (mut k, mut p, mut cdf) = (0u32, e, e);
        while u >= cdf {
            k += 1;
            p /= f64::from(k);
            cdf += p;
        }
        k
    };
    let draws: Vec<u32> = (0..N_ROWS).map(|_| poisson(&mut r)).collect();
    let independent: Vec<Vec<u32>> = (0..N_TREES)
        .map(|_| (0..N_ROWS).map(|_| poisson(&mut r)).collect())
        .collect();
    let shared = vec![draws; N_TREES];
    let ones = vec![vec![1u32; N_ROWS]; N_TREES];
    for (name, trees, passes) in [
        ("independent draws", independent, true),
        ("shared draws", shared, false),
        ("no bagging", ones, false),
    ] {
        let rejected = bagging_family(name, &trees).rejections();
        assert_eq!(rejected.is_empty(), passes, "{name}: {rejected:?}");
    }
}
