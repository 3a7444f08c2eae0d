//! The Ch. 3 MCMC baseline (spec `bayesian-trees.md` §3.11): one tree sampled by CGM
//! Metropolis–Hastings (grow / prune / change / swap, §4.5) with Dirichlet–multinomial or
//! Normal–inverse-gamma leaves, checked against the exact posterior over partitions,
//! found by brute-force enumeration of every tree on the tiny problems of §5.6 (written
//! in `common/enumerate.rs` from §2.2, not with the library's prior or tree code).
//!
//! Structures are keyed by partition: (δ, rows sent left) at every internal node. χ²
//! tests pool the cells of expected count < 5 and must not reject at the 1% level; z-tests
//! on averages over independent chains are Bonferroni-corrected to a family-wise 1e-3.
//! Seeds are fixed.

mod common;

use std::collections::HashMap;

use common::enumerate::{tree_key, Exact, Gapped, R5, X5, X6};
use mondrian::bayes::bart::{build_tree, step_tree, TreeSampler, TreeShape};
use mondrian::bayes::{
    sample_chain, BayesTree, CgmPrior, DirichletMultinomial, Features, LeafModel,
    McmcClassifierParams, McmcParams, McmcRegressorParams, McmcTreeClassifier, McmcTreeRegressor,
    NormalInverseGamma, NormalKnownVariance, RegressionLeaf,
};
use mondrian::model::Params;
use mondrian::MondrianError;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use statrs::distribution::{ContinuousCDF, Normal};

/// The classification analogue's labels (as in `bayes_smc.rs`).
const Y6: [usize; 6] = [0, 1, 0, 1, 1, 0];
/// α of the classification tests.
const ALPHA: f64 = 1.0;

fn classification() -> (Features, DirichletMultinomial, Exact) {
    let flat: Vec<f64> = X6.iter().flatten().copied().collect();
    let model = DirichletMultinomial::new(ALPHA, 2).unwrap();
    let log_ml = |rows: u32| {
        let ys = (0..6).filter(|i| rows >> i & 1 == 1).map(|i| Y6[i]);
        model.log_marginal(&model.stats_of(ys))
    };
    let exact = Exact::new(&X6, &CgmPrior::default(), &log_ml);
    (Features::new(&flat, 2).unwrap(), model, exact)
}

fn params(iterations: usize, seed: u64) -> McmcParams {
    McmcParams {
        iterations,
        seed,
        ..Default::default()
    }
}

/// Two-sided p-value of the mean of independent values against `expected`.
fn z_p_value(values: &[f64], expected: f64) -> f64 {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0);
    let z = (mean - expected) / (var / n).sqrt();
    2.0 * Normal::standard().sf(z.abs())
}

#[test]
fn enumeration_counts_the_spec_structures() {
    // T6: the toy classification problem has 2955 structures.
    let (_, _, exact) = classification();
    assert_eq!(exact.structures.len(), 2955);
    let total: f64 = exact.structures.iter().map(|(_, p)| p).sum();
    assert!((total - 1.0).abs() < 1e-12);
}

#[test]
fn one_move_leaves_the_dirichlet_multinomial_posterior_invariant() {
    // T10's protocol with Dirichlet–multinomial leaves: T ~ π exactly, one CGM move, the
    // output's law against π. Independent of mixing.
    let (features, model, exact) = classification();
    let draws = 40_000;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(31);
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut moved = 0usize;
    for i in 0..draws {
        let start = exact.draw(&mut rng);
        let shape = start.shape.draw(&mut rng);
        let tree = build_tree(&features, &Y6, &model, &shape).unwrap();
        assert_eq!(tree_key(&tree, 0), start.key);
        let p = params(1, 1_000_000 + i as u64).check().unwrap();
        let (out, trace) =
            sample_chain(&p, &features, &Y6, &model, Some(&tree), |_, _, _| {}).unwrap();
        moved += usize::from(trace.accepted[0]);
        *counts.entry(tree_key(&out, 0)).or_default() += 1;
    }
    let (stat, df, p) = exact.chi_square(&counts);
    let moved = moved as f64 / draws as f64;
    println!(
        "DM CGM, one move from π: {} structures, {draws} draws, χ² = {stat:.1} on {df} df, \
         p = {p:.3}, moved {moved:.3}",
        exact.structures.len()
    );
    assert!(p > 0.01, "χ² = {stat:.1} on {df} df, p = {p:.2e}");
    assert!(moved > 0.05, "the chain hardly moves ({moved})");
}

#[test]
fn chains_from_the_single_leaf_reach_the_exact_posterior() {
    // The §3.11 chain as used: from the single-node tree. The states after `len` moves of
    // independent chains are i.i.d.; their structures against π by χ² at 1%.
    let (features, model, exact) = classification();
    let (chains, len) = (5_000, 1_000);
    let mut counts: HashMap<String, usize> = HashMap::new();
    for c in 0..chains {
        let p = params(len, 2_000_000 + c as u64).check().unwrap();
        let (out, _) = sample_chain(&p, &features, &Y6, &model, None, |_, _, _| {}).unwrap();
        *counts.entry(tree_key(&out, 0)).or_default() += 1;
    }
    let (stat, df, p) = exact.chi_square(&counts);
    println!(
        "DM CGM, {chains} chains × {len} moves from the single leaf: χ² = {stat:.1} on {df} df, \
         p = {p:.3}"
    );
    assert!(p > 0.01, "χ² = {stat:.1} on {df} df, p = {p:.2e}");
}

#[test]
fn visited_structures_and_averaged_predictions_match_the_exact_posterior() {
    // Time averages over all iterations, burn-in kept (§3.11): across independent chains,
    // (a) the fraction of iterations spent on each structure of posterior mass ≥ 1% and
    // on each number of leaves, and (b) the classifier's averaged predictive p(y = 1 | x)
    // at four test points (the exact one integrates ξ over each gap, as in
    // `bayes_smc.rs`), are z-tested against the exact values.
    let (features, model, exact) = classification();
    let (chains, len) = (200, 20_000);
    let tests = [[0.2, 0.3], [0.5, 0.8], [0.95, 0.1], [0.32, 0.6]];
    let heavy: Vec<usize> = (0..exact.structures.len())
        .filter(|&i| exact.structures[i].1 >= 0.01)
        .collect();
    let leaves_of = |s: &Gapped| {
        fn count(s: &Gapped) -> usize {
            match s {
                Gapped::Leaf => 1,
                Gapped::Split { left, right, .. } => count(left) + count(right),
            }
        }
        count(s)
    };
    let max_leaves = 6;
    let mut exact_leaves = vec![0.0; max_leaves + 1];
    for (s, p) in &exact.structures {
        exact_leaves[leaves_of(&s.shape)] += p;
    }
    let leaf_p1 = |rows: u32| {
        let c = model.stats_of((0..6).filter(|i| rows >> i & 1 == 1).map(|i| Y6[i]));
        (c.counts()[1] as f64 + ALPHA / 2.0) / (c.counts().iter().sum::<u32>() as f64 + ALPHA)
    };
    let exact_p1: Vec<f64> = tests
        .iter()
        .map(|t| {
            exact
                .structures
                .iter()
                .map(|(s, p)| {
                    let mut leaves = Vec::new();
                    s.shape.leaf_probabilities(&X6, t, 63, &mut leaves, 1.0);
                    p * leaves.iter().map(|&(q, r)| q * leaf_p1(r)).sum::<f64>()
                })
                .sum()
        })
        .collect();
    // Per chain: structure and leaf-count visit fractions, and the averaged predictive
    // (the classifier's, as `predictions_average_every_iteration_of_the_same_chain` shows).
    let mut per_chain: Vec<Vec<f64>> = Vec::new();
    for c in 0..chains {
        let p = params(len, 3_000_000 + c as u64).check().unwrap();
        let mut visits = vec![0usize; exact.structures.len()];
        let mut leaves = vec![0usize; max_leaves + 1];
        let mut proba = vec![0.0; 2 * tests.len()];
        sample_chain(&p, &features, &Y6, &model, None, |_, tree, _| {
            visits[exact.index[&tree_key(tree, 0)]] += 1;
            leaves[tree.n_leaves()] += 1;
            for (k, t) in tests.iter().enumerate() {
                let leaf = &tree.nodes()[tree.leaf_of(t)];
                let out = &mut proba[2 * k..2 * k + 2];
                model.add_probabilities(leaf.stats(), 1.0 / len as f64, out);
            }
        })
        .unwrap();
        let mut row: Vec<f64> = heavy
            .iter()
            .map(|&i| visits[i] as f64 / len as f64)
            .collect();
        row.extend(leaves.iter().map(|&l| l as f64 / len as f64));
        row.extend((0..tests.len()).map(|k| proba[2 * k + 1]));
        per_chain.push(row);
    }
    let mut expected: Vec<f64> = heavy.iter().map(|&i| exact.structures[i].1).collect();
    expected.extend(&exact_leaves);
    expected.extend(&exact_p1);
    let mut p_values = Vec::new();
    let mut worst = (1.0, 0usize);
    for (k, &e) in expected.iter().enumerate() {
        let column: Vec<f64> = per_chain.iter().map(|r| r[k]).collect();
        if column.iter().all(|&v| v == e) {
            continue; // e.g. no tree has 0 leaves
        }
        let p = z_p_value(&column, e);
        if p < worst.0 {
            worst = (p, k);
        }
        p_values.push(p);
    }
    let means: Vec<f64> = (0..expected.len())
        .map(|k| per_chain.iter().map(|r| r[k]).sum::<f64>() / chains as f64)
        .collect();
    println!(
        "{chains} chains × {len}: {} structures of mass ≥ 1%; leaves exact {:.4?} chain {:.4?}; \
         p(y=1|x) exact {exact_p1:.4?} chain {:.4?}; smallest p-value {:.2e} (entry {})",
        heavy.len(),
        &exact_leaves[1..],
        &means[heavy.len() + 1..heavy.len() + max_leaves + 1],
        &means[heavy.len() + max_leaves + 1..],
        worst.0,
        worst.1
    );
    let level = 1e-3 / p_values.len() as f64;
    assert!(worst.0 > level, "p = {:.2e} < {level:.1e}", worst.0);
}

#[test]
fn predictions_average_every_iteration_of_the_same_chain() {
    // The classifier's predictive is (1/n) Σ_t p(y | x, T_t) over the trees of the chain
    // that `sample_chain` shows with the same seed; the held-out curve's last point is the
    // mean test log-predictive of that average.
    let (features, model, _) = classification();
    let flat: Vec<f64> = X6.iter().flatten().copied().collect();
    let tests = [[0.2, 0.3], [0.5, 0.8], [0.95, 0.1], [0.32, 0.6], [0.6, 0.4]];
    let test_flat: Vec<f64> = tests.iter().flatten().copied().collect();
    let test_y = [1usize, 0, 0, 1, 1];
    let n = 3000;
    let p = params(n, 77).check().unwrap();
    let mut manual = vec![0.0; 2 * tests.len()];
    let mut keys = Vec::new();
    let (_, trace) = sample_chain(&p, &features, &Y6, &model, None, |_, tree, _| {
        for (k, t) in tests.iter().enumerate() {
            let leaf = &tree.nodes()[tree.leaf_of(t)];
            model.add_probabilities(leaf.stats(), 1.0 / n as f64, &mut manual[2 * k..2 * k + 2]);
        }
        keys.push(tree_key(tree, 0));
    })
    .unwrap();
    let mut clf = McmcTreeClassifier::new(McmcClassifierParams {
        mcmc: params(n, 77),
        alpha: ALPHA,
        n_classes: Some(2),
    })
    .unwrap();
    let at = [1, 10, 100, 1000, n];
    let curve = clf
        .fit_with_holdout(&flat, 2, &Y6, Some((&test_flat, &test_y, &at)))
        .unwrap();
    let proba = clf.predict_proba(&test_flat, 2).unwrap();
    for (a, b) in proba.iter().zip(&manual) {
        assert!((a - b).abs() < 1e-12, "{proba:?} vs {manual:?}");
    }
    let post = clf.posterior().unwrap();
    let distinct = 1 + keys.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(post.n_visited() >= distinct && post.n_visited() > 10);
    assert_eq!(clf.trace().unwrap().accepted, trace.accepted);
    assert_eq!(clf.trace().unwrap().log_likelihood, trace.log_likelihood);
    assert_eq!(curve.len(), at.len());
    let lp = clf.log_predictive(&test_flat, 2, &test_y).unwrap();
    let mean = lp.iter().sum::<f64>() / lp.len() as f64;
    let last = curve.last().unwrap();
    assert_eq!(last.iteration, n);
    assert!((last.mean_log_predictive - mean).abs() < 1e-12);
    assert!(curve.windows(2).all(|w| w[0].seconds <= w[1].seconds));
    // The first point is the first tree alone.
    let mut first = McmcTreeClassifier::new(McmcClassifierParams {
        mcmc: params(1, 77),
        alpha: ALPHA,
        n_classes: Some(2),
    })
    .unwrap();
    first.fit(&flat, 2, &Y6).unwrap();
    let lp1 = first.log_predictive(&test_flat, 2, &test_y).unwrap();
    let m1 = lp1.iter().sum::<f64>() / lp1.len() as f64;
    assert!((curve[0].mean_log_predictive - m1).abs() < 1e-12);
    // The trace: the stump's log-likelihood before the first acceptance, and the joint.
    let tr = clf.trace().unwrap();
    assert_eq!(tr.len(), n);
    let stump = model.log_marginal(&model.stats_of(Y6));
    let first_move = tr.accepted.iter().position(|&a| a).unwrap();
    assert!(tr.log_likelihood[..first_move].iter().all(|&l| l == stump));
    assert!(tr.n_leaves.iter().all(|&l| (1..=6).contains(&l)));
    assert!(tr.acceptance_rate() > 0.05 && tr.acceptance_rate() < 1.0);
}

#[test]
fn bart_and_the_single_tree_sampler_share_one_kernel() {
    // With Normal known-variance leaves, one move of the single-tree chain is BART's CGM
    // kernel step on the same random stream: the same tree, bit for bit.
    let flat: Vec<f64> = X6[..5].iter().flatten().copied().collect();
    let features = Features::new(&flat, 2).unwrap();
    let model = NormalKnownVariance {
        mean: 0.0,
        prior_variance: 1.0,
        noise_variance: 0.1,
    };
    let prior = CgmPrior::default();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
    let mut tree = build_tree(&features, &R5, &model, &TreeShape::Leaf).unwrap();
    let mut moved = 0;
    for i in 0..500 {
        let seed = 40_000 + i;
        let p = params(1, seed).check().unwrap();
        let (a, _) = sample_chain(&p, &features, &R5, &model, Some(&tree), |_, _, _| {}).unwrap();
        let mut same = Xoshiro256PlusPlus::seed_from_u64(seed);
        let (b, outcome) = step_tree(
            &TreeSampler::cgm(),
            &prior,
            &features,
            &R5,
            &model,
            &tree,
            &mut same,
        )
        .unwrap();
        type Rules = Vec<(Option<(usize, f64)>, Vec<u32>)>;
        let rules = |t: &BayesTree<_>| -> Rules {
            t.nodes()
                .iter()
                .map(|n| (n.rule(), n.rows().to_vec()))
                .collect()
        };
        assert_eq!(rules(&a), rules(&b));
        moved += usize::from(outcome.moved);
        // Walk on: a fresh start every step keeps both sides on the same tree.
        if rng.gen::<f64>() < 0.9 {
            tree = a;
        }
    }
    assert!(moved > 50, "{moved}");
}

#[test]
fn normal_inverse_gamma_leaves_keep_their_posterior_invariant() {
    // The regression leaves of §2.1 R2 through the same kernel: one move from exact draws
    // on §5.6's five points.
    let flat: Vec<f64> = X6[..5].iter().flatten().copied().collect();
    let features = Features::new(&flat, 2).unwrap();
    let model = NormalInverseGamma {
        m0: 0.2,
        kappa0: 0.5,
        a0: 2.0,
        b0: 1.0,
    };
    let log_ml = |rows: u32| {
        let ys = (0..5).filter(|i| rows >> i & 1 == 1).map(|i| R5[i]);
        model.log_marginal(&model.stats_of(ys))
    };
    let exact = Exact::new(X5, &CgmPrior::default(), &log_ml);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(41);
    let mut counts: HashMap<String, usize> = HashMap::new();
    let draws = 40_000;
    for i in 0..draws {
        let start = exact.draw(&mut rng);
        let tree = build_tree(&features, &R5, &model, &start.shape.draw(&mut rng)).unwrap();
        let p = params(1, 5_000_000 + i as u64).check().unwrap();
        let (out, _) = sample_chain(&p, &features, &R5, &model, Some(&tree), |_, _, _| {}).unwrap();
        *counts.entry(tree_key(&out, 0)).or_default() += 1;
    }
    let (stat, df, p) = exact.chi_square(&counts);
    println!(
        "NIG CGM, one move from π: {} structures, χ² = {stat:.1} on {df} df, p = {p:.3}",
        exact.structures.len()
    );
    assert!(p > 0.01, "χ² = {stat:.1} on {df} df, p = {p:.2e}");
}

#[test]
fn the_regressor_fits_a_step_and_averages_its_predictive() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(12);
    let n = 200;
    let x: Vec<f64> = (0..n).map(|_| rng.gen::<f64>()).collect();
    let y: Vec<f64> = x
        .iter()
        .map(|&v| if v < 0.4 { -1.0 } else { 2.0 } + 0.1 * (rng.gen::<f64>() - 0.5))
        .collect();
    let mut reg = McmcTreeRegressor::new(McmcRegressorParams {
        mcmc: params(2000, 4),
        leaf: RegressionLeaf::Calibrated,
    })
    .unwrap();
    reg.fit(&x, 1, &y).unwrap();
    let (mean, var) = reg.predict_mean_variance(&[0.1, 0.9], 1).unwrap();
    assert!(
        (mean[0] + 1.0).abs() < 0.1 && (mean[1] - 2.0).abs() < 0.1,
        "{mean:?}"
    );
    assert!(var.iter().all(|&v| v > 0.0 && v < 0.1), "{var:?}");
    let lp = reg.log_predictive(&[0.1, 0.9], 1, &[-1.0, 2.0]).unwrap();
    assert!(lp.iter().all(|&l| l > 0.0), "{lp:?}");
    let tr = reg.trace().unwrap();
    assert!(tr.log_likelihood.last().unwrap() > &tr.log_likelihood[0]);
    assert!(reg.posterior().unwrap().mean_leaves() >= 1.9);
    // The same seed gives the same bits.
    let mut again = McmcTreeRegressor::new(McmcRegressorParams {
        mcmc: params(2000, 4),
        leaf: RegressionLeaf::Calibrated,
    })
    .unwrap();
    again.fit(&x, 1, &y).unwrap();
    assert_eq!(again.trace().unwrap().accepted, tr.accepted);
    assert_eq!(
        again.predict(&[0.1, 0.9], 1).unwrap(),
        reg.predict(&[0.1, 0.9], 1).unwrap()
    );
}

#[test]
fn bad_input_gives_errors() {
    let flat: Vec<f64> = X6.iter().flatten().copied().collect();
    let zero = McmcClassifierParams {
        mcmc: params(0, 1),
        ..Default::default()
    };
    assert!(matches!(
        McmcTreeClassifier::new(zero),
        Err(MondrianError::InvalidParameter {
            name: "iterations",
            ..
        })
    ));
    assert!(McmcTreeRegressor::new(McmcRegressorParams {
        mcmc: params(0, 1),
        ..Default::default()
    })
    .is_err());
    let bad_prior = McmcParams {
        prior: CgmPrior {
            alpha_s: 1.5,
            ..Default::default()
        },
        ..params(10, 1)
    };
    assert!(bad_prior.check().is_err());
    let mut clf = McmcTreeClassifier::new(McmcClassifierParams {
        mcmc: params(10, 1),
        n_classes: Some(2),
        ..Default::default()
    })
    .unwrap();
    assert!(matches!(
        clf.predict_proba(&flat, 2),
        Err(MondrianError::NotFitted)
    ));
    let mut with_nan = flat.clone();
    with_nan[3] = f64::NAN;
    assert!(clf.fit(&with_nan, 2, &Y6).is_err());
    assert!(matches!(
        clf.fit(&flat, 2, &[0, 1, 0, 1, 2, 0]),
        Err(MondrianError::LabelOutOfRange { .. })
    ));
    assert!(clf.fit(&flat, 2, &Y6[..5]).is_err());
    assert!(clf.fit(&flat[..11], 2, &Y6).is_err());
    // Held-out iterations out of range or not increasing; a NaN held-out row.
    for at in [&[0usize][..], &[5, 5], &[11]] {
        assert!(clf
            .fit_with_holdout(&flat, 2, &Y6, Some((&flat, &Y6, at)))
            .is_err());
    }
    assert!(clf
        .fit_with_holdout(&flat, 2, &Y6, Some((&with_nan, &Y6, &[10])))
        .is_err());
    clf.fit(&flat, 2, &Y6).unwrap();
    assert!(clf.predict_proba(&with_nan, 2).is_err());
    assert!(clf.predict_proba(&flat, 3).is_err());
    assert!(clf.log_predictive(&flat, 2, &[0, 1, 0, 1, 2, 0]).is_err());
    let mut reg = McmcTreeRegressor::new(McmcRegressorParams {
        mcmc: params(10, 1),
        ..Default::default()
    })
    .unwrap();
    let mut y: Vec<f64> = R5.iter().copied().chain([0.0]).collect();
    y[2] = f64::NAN;
    assert!(matches!(
        reg.fit(&flat, 2, &y),
        Err(MondrianError::NonFiniteTarget { row: 2, .. })
    ));
    y[2] = f64::INFINITY;
    assert!(reg.fit(&flat, 2, &y).is_err());
    // A start tree from other features.
    let (features, model, _) = classification();
    let other = Features::new(&flat[..10], 2).unwrap();
    let start = build_tree(&other, &Y6[..5], &model, &TreeShape::Leaf).unwrap();
    let p = params(5, 1).check().unwrap();
    assert!(sample_chain(&p, &features, &Y6, &model, Some(&start), |_, _, _| {}).is_err());
    assert!(sample_chain(&p, &features, &Y6[..5], &model, None, |_, _, _| {}).is_err());
}
