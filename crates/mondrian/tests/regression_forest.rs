//! `MondrianForestRegressor` as a whole (spec `mf-regression.md` §6.6 T5, T8, T11, T13,
//! T15–T17): the far-field limit, online ≡ batch, equivariance, growing uncertainty away
//! from the data, calibration, the NLPD, the variance parts, determinism, persistence and
//! bad input. The tests on data drawn from the model itself are in
//! `regression_from_the_model.rs`.

mod common;

use common::{chi2_homogeneity, histogram, ks_two_sample, rng, t_test, Family};
use mondrian::stats::gaussian::{GaussianModel, Moments, TargetMoments};
use mondrian::tree::{MondrianTree, NodeStatistics, PauseRule, TrainingPoints};
use mondrian::Persistent;
use mondrian::{
    MondrianError, MondrianForestRegressor, NoiseRule, PredictionMode, RegressorParams,
};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_distr::{Distribution, Normal};

fn regressor(mode: PredictionMode, n_trees: usize, seed: u64) -> MondrianForestRegressor {
    MondrianForestRegressor::new(RegressorParams {
        n_trees,
        mode,
        seed,
        ..RegressorParams::thesis()
    })
    .unwrap()
}

/// y = sin(3 x1) cos(2 x2) + x1 + N(0, 0.1²), x ~ U[0,1]² (spec T17).
fn smooth_2d(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut r = rng(seed);
    let noise = Normal::new(0.0, 0.1).unwrap();
    let mut x = Vec::with_capacity(2 * n);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let (a, b): (f64, f64) = (r.gen(), r.gen());
        x.extend([a, b]);
        y.push((3.0 * a).sin() * (2.0 * b).cos() + a + noise.sample(&mut r));
    }
    (x, y)
}

#[test]
fn far_from_the_data_the_prediction_is_the_prior() {
    // T5: Mode E → N(ȳ, s²) = N(μ_H, γ1/2 + σ²); Mode F → N(ȳ, s² + σ²).
    let (x, y) = smooth_2d(300, 1);
    let labels = Moments::of(&y);
    for mode in [
        PredictionMode::Exact,
        PredictionMode::ExactQuadrature,
        PredictionMode::Fast,
    ] {
        let mut f = regressor(mode, 10, 3);
        f.fit(&x, 2, &y).unwrap();
        let theta = f.theta().unwrap();
        let p = f.predict(&[1e8, -1e8, -3e7, 5e7], 2).unwrap();
        let want_var = match mode {
            PredictionMode::Exact | PredictionMode::ExactQuadrature => {
                theta.gamma1 / 2.0 + theta.noise_var
            }
            PredictionMode::Fast => labels.variance() + theta.noise_var,
        };
        for i in 0..2 {
            assert!(
                (p.mean[i] - labels.mean).abs() <= 1e-6 * labels.mean.abs(),
                "{mode:?}"
            );
            assert!(
                (p.variance[i] - want_var).abs() <= 1e-6 * want_var,
                "{mode:?}"
            );
        }
        if mode == PredictionMode::Exact {
            assert!((want_var - labels.variance()).abs() < 1e-12);
        }
    }
}

#[test]
fn equivariant_under_affine_maps_of_the_labels() {
    // T13: the trees do not look at labels, so y' = a·y + b gives E' = aE + b,
    // Var' = a²Var and NLPD' = NLPD + log|a|.
    let (x, y) = smooth_2d(200, 2);
    let (a, b) = (-3.5, 12.0);
    let y2: Vec<f64> = y.iter().map(|v| a * v + b).collect();
    let (xt, yt) = smooth_2d(50, 3);
    let yt2: Vec<f64> = yt.iter().map(|v| a * v + b).collect();
    let mut xq = xt.clone();
    xq.extend([2.0, 2.0, -1.0, 0.5]);
    for mode in [PredictionMode::Exact, PredictionMode::Fast] {
        let mut f1 = regressor(mode, 5, 9);
        let mut f2 = regressor(mode, 5, 9);
        f1.fit(&x, 2, &y).unwrap();
        f2.fit(&x, 2, &y2).unwrap();
        let (p1, p2) = (f1.predict(&xq, 2).unwrap(), f2.predict(&xq, 2).unwrap());
        for i in 0..p1.mean.len() {
            let e = a * p1.mean[i] + b;
            assert!(
                (p2.mean[i] - e).abs() < 1e-9 * e.abs().max(1.0),
                "{mode:?} {i}"
            );
            let v = a * a * p1.variance[i];
            assert!((p2.variance[i] - v).abs() < 1e-9 * v, "{mode:?} {i}");
        }
        let l1 = f1.log_density(&xt, 2, &yt).unwrap();
        let l2 = f2.log_density(&xt, 2, &yt2).unwrap();
        for (u, v) in l1.iter().zip(&l2) {
            assert!((-v - (-u + a.abs().ln())).abs() < 1e-9, "{mode:?}");
        }
    }
}

#[test]
fn means_stay_within_the_label_range() {
    // T16: every component mean is a convex combination of label means.
    let (x, y) = smooth_2d(400, 4);
    let (lo, hi) = y
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
            (l.min(v), h.max(v))
        });
    let mut r = rng(7);
    let q: Vec<f64> = (0..2000).map(|_| r.gen_range(-2.0..3.0)).collect();
    for mode in [PredictionMode::Exact, PredictionMode::Fast] {
        let mut f = regressor(mode, 10, 1);
        f.fit(&x, 2, &y).unwrap();
        let p = f.predict(&q, 2).unwrap();
        for (&m, &v) in p.mean.iter().zip(&p.variance) {
            assert!(
                m >= lo - 1e-9 && m <= hi + 1e-9,
                "{mode:?}: {m} not in [{lo}, {hi}]"
            );
            assert!(v > 0.0 && v.is_finite());
        }
    }
}

#[test]
fn uncertainty_grows_away_from_the_data() {
    // T15: x ~ U([−5,5]²), y = sin(x1) + N(0, 0.1²), N = 1000, M = 25, mss = 10; query
    // (g, 0) for g ∈ [−10, 10]. The mean log-variance over |g| ≥ 7 exceeds that over
    // |g| ≤ 4 by ≥ 0.5 nats, and at |g| = 10 the variance is within 10% of the far field.
    let mut r = rng(15);
    let noise = Normal::new(0.0, 0.1).unwrap();
    let mut x = Vec::new();
    let mut y = Vec::new();
    for _ in 0..1000 {
        let (a, b) = (r.gen_range(-5.0..5.0), r.gen_range(-5.0..5.0));
        x.extend([a, b]);
        y.push(f64::sin(a) + noise.sample(&mut r));
    }
    let grid: Vec<f64> = (0..=200).map(|i| -10.0 + i as f64 * 0.1).collect();
    let q: Vec<f64> = grid.iter().flat_map(|&g| [g, 0.0]).collect();
    for mode in [PredictionMode::Exact, PredictionMode::Fast] {
        let mut f = regressor(mode, 25, 2);
        f.fit(&x, 2, &y).unwrap();
        let p = f.predict(&q, 2).unwrap();
        let mean_log = |keep: &dyn Fn(f64) -> bool| {
            let v: Vec<f64> = grid
                .iter()
                .zip(&p.variance)
                .filter(|(g, _)| keep(g.abs()))
                .map(|(_, v)| v.ln())
                .collect();
            v.iter().sum::<f64>() / v.len() as f64
        };
        let outside = mean_log(&|g| g >= 7.0);
        let inside = mean_log(&|g| g <= 4.0);
        assert!(outside - inside >= 0.5, "{mode:?}: {outside} vs {inside}");
        let far = f.predict(&[1e9, 0.0], 2).unwrap().variance[0];
        for end in [0, grid.len() - 1] {
            assert!(
                (p.variance[end].ln() - far.ln()).abs() <= 0.1,
                "{mode:?}: {} vs far field {far}",
                p.variance[end]
            );
        }
    }
}

fn coverage(f: &MondrianForestRegressor, x: &[f64], y: &[f64], level: f64) -> f64 {
    let p = f.predict(x, 2).unwrap();
    let (lo, hi) = p.interval(level).unwrap();
    let inside = y
        .iter()
        .zip(lo.iter().zip(&hi))
        .filter(|(v, (l, h))| **v >= **l && **v <= **h)
        .count();
    inside as f64 / y.len() as f64
}

#[test]
fn fast_mode_is_calibrated() {
    // T17: N = 2000, M = 10, mss = 10, 1000 in-distribution test points: |observed − z| ≤ 0.1
    // at every z = 0.1…0.9 (the spec's prototype reached 0.04). Mode E is only required to
    // give a finite NLPD and an RMSE within 1.5× of Mode F's; its NLPD is checked against
    // the mixture and the true noise here.
    let (x, y) = smooth_2d(2000, 17);
    let (xt, yt) = smooth_2d(1000, 18);
    let mut fast = regressor(PredictionMode::Fast, 10, 5);
    fast.fit(&x, 2, &y).unwrap();
    for z in 1..=9 {
        let level = z as f64 / 10.0;
        let c = coverage(&fast, &xt, &yt, level);
        assert!((c - level).abs() <= 0.1, "z = {level}: coverage {c}");
    }
    let rmse = |f: &MondrianForestRegressor| {
        let p = f.predict(&xt, 2).unwrap();
        (p.mean
            .iter()
            .zip(&yt)
            .map(|(m, v)| (m - v).powi(2))
            .sum::<f64>()
            / yt.len() as f64)
            .sqrt()
    };
    let mut exact = regressor(PredictionMode::Exact, 10, 5);
    exact.fit(&x, 2, &y).unwrap();
    let log_q = exact.log_density(&xt, 2, &yt).unwrap();
    assert_nlpd_is_the_mixture_and_above_the_noise(&exact, &x, &xt, &yt, &log_q);
    assert!(
        rmse(&exact) <= 1.5 * rmse(&fast),
        "{} vs {}",
        rmse(&exact),
        rmse(&fast)
    );
}

/// Checks the forest's log predictive densities `log_q` at test rows `xt`, `yt` of
/// [`smooth_2d`] (the forest trained on rows `x`, whose ranges scale the features) two
/// ways (the spec asks only for a finite NLPD):
/// * each is the log of the forest's mixture density, the equal-weight average over the
///   trees of their components (`tree_components`, which `regression_model.rs` checks
///   against the dense Gaussian oracle), summed directly here: relative 1e-9;
/// * Gibbs' inequality against the law that drew the labels, p(y | x) = N(f(x), 0.1²):
///   E[log q(y|x) − log p(y|x)] = −KL(p ‖ q) ≤ 0, so the mean of the 1000 differences may
///   exceed 0 by at most z·se, one-sided at α = 1e-3 (z = 3.09, se from their spread).
///   A density that does not integrate to 1, or is too sharp, fails.
fn assert_nlpd_is_the_mixture_and_above_the_noise(
    f: &MondrianForestRegressor,
    x: &[f64],
    xt: &[f64],
    yt: &[f64],
    log_q: &[f64],
) {
    use common::gaussian::normal_pdf;
    use mondrian::{Rows, Scaling};
    let scaler = Scaling::FirstBatch
        .scaler_for(&Rows::new(x, 2).unwrap())
        .unwrap();
    let mut scaled = Vec::new();
    scaler
        .transform_into(&Rows::new(xt, 2).unwrap(), &mut scaled)
        .unwrap();
    let model = GaussianModel {
        theta: f.theta().unwrap(),
        mode: f.params().mode,
    };
    let features = f.training_points().features;
    let n_trees = f.params().n_trees;
    let messages: Vec<_> = (0..n_trees)
        .map(|t| {
            let (tree, stats) = f.tree(t).unwrap();
            model.upward(tree, stats)
        })
        .collect();
    let mut diffs = Vec::with_capacity(yt.len());
    for (((row, point), &y), &lq) in xt
        .chunks_exact(2)
        .zip(scaled.chunks_exact(2))
        .zip(yt)
        .zip(log_q)
    {
        let mut q = 0.0;
        for (t, msgs) in messages.iter().enumerate() {
            let (tree, stats) = f.tree(t).unwrap();
            let (mut steps, mut comps) = (Vec::new(), Vec::new());
            tree.path_steps(point, features, &mut steps);
            model.tree_components(tree, stats, msgs, &steps, &mut comps);
            q += comps
                .iter()
                .map(|c| c.weight * normal_pdf(y, c.mean, c.var))
                .sum::<f64>()
                / n_trees as f64;
        }
        assert!(
            (lq - q.ln()).abs() <= 1e-9 * q.ln().abs().max(1.0),
            "row {row:?}: log density {lq} vs the mixture's {}",
            q.ln()
        );
        let truth = (3.0 * row[0]).sin() * (2.0 * row[1]).cos() + row[0];
        diffs.push(lq - normal_pdf(y, truth, 0.01).ln());
    }
    let n = diffs.len() as f64;
    let mean = diffs.iter().sum::<f64>() / n;
    let sd = (diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let nlpd = -log_q.iter().sum::<f64>() / n;
    eprintln!(
        "NLPD {nlpd:.4}; mean log q/p {mean:.4} (se {:.4})",
        sd / n.sqrt()
    );
    assert!(
        mean <= 3.09 * sd / n.sqrt(),
        "the forest beats the true law: mean log q/p = {mean} (se {})",
        sd / n.sqrt()
    );
}

/// Regression trees on D-dimensional data with one duplicated row (spec T8).
fn t8_data(n: usize, d: usize, seed: u64) -> (Vec<f32>, Vec<f64>) {
    let mut r = rng(seed);
    let mut x: Vec<f32> = (0..n * d).map(|_| r.gen()).collect();
    let dup: Vec<f32> = x[..d].to_vec();
    x[d..2 * d].copy_from_slice(&dup);
    let y = (0..n).map(|_| r.gen()).collect();
    (x, y)
}

fn root_time_and_leaves(tree: &MondrianTree) -> (f64, usize) {
    let root = tree.root().unwrap();
    (tree.split_time(root), tree.n_leaves())
}

#[test]
fn online_trees_have_the_batch_distribution() {
    // T8: 3000 batch trees against 3000 trees grown online in random orders, point by point
    // and in sets (`extend_many`), for mss ∈ {2, 5}
    // with a duplicated point: KS on the root split time and χ² on the number of leaves,
    // at a family-wise level of 1e-3. T11: the moments of every node equal a recount.
    let mut family = Family::new("regression online ≡ batch");
    for mss in [2usize, 5] {
        let (x, y) = t8_data(30, 2, 40 + mss as u64);
        let data = TrainingPoints {
            features: &x,
            n_features: 2,
            targets: &y,
        };
        let pause = PauseRule {
            pause_on_pure: false,
            min_samples_split: mss,
        };
        let ids: Vec<u32> = (0..30).collect();
        let mut r = rng(100 + mss as u64);
        let (mut batch, mut online, mut sets) = (Vec::new(), Vec::new(), Vec::new());
        for rep in 0..3000 {
            let mut tree = MondrianTree::new(2, f64::INFINITY, pause);
            let mut stats = TargetMoments::new();
            tree.fit(ids.clone(), &data, &mut stats, &mut r);
            batch.push(root_time_and_leaves(&tree));

            let mut order = ids.clone();
            order.shuffle(&mut r);
            let mut tree = MondrianTree::new(2, f64::INFINITY, pause);
            let mut stats = TargetMoments::new();
            for &i in &order {
                tree.extend(i, 1, &data, &mut stats, &mut r);
            }
            online.push(root_time_and_leaves(&tree));
            if rep < 50 {
                check_moments(&tree, &stats, &y);
            }

            // The same order in sets of 4, 8, 16 and the rest (`extend_many`).
            let mut tree = MondrianTree::new(2, f64::INFINITY, pause);
            let mut stats = TargetMoments::new();
            for range in [0..4, 4..12, 12..28, 28..30] {
                tree.extend_many(order[range].to_vec(), &data, &mut stats, &mut r);
            }
            sets.push(root_time_and_leaves(&tree));
            if rep < 50 {
                check_moments(&tree, &stats, &y);
            }
        }
        let times = |v: &[(f64, usize)]| v.iter().map(|p| p.0).collect::<Vec<_>>();
        family.push(
            format!("mss {mss}: root time KS"),
            ks_two_sample(&times(&batch), &times(&online)),
        );
        family.push(
            format!("mss {mss}: root time KS, sets"),
            ks_two_sample(&times(&batch), &times(&sets)),
        );
        family.push(
            format!("mss {mss}: leaves χ²"),
            chi2_homogeneity(&[
                histogram(batch.iter().map(|p| p.1)),
                histogram(online.iter().map(|p| p.1)),
                histogram(sets.iter().map(|p| p.1)),
            ]),
        );
    }
    family.assert();
}

fn check_moments(tree: &MondrianTree, stats: &TargetMoments, y: &[f64]) {
    let root = tree.root().unwrap();
    for j in tree.subtree_preorder(root) {
        let mut ys = Vec::new();
        let mut stack = vec![j];
        while let Some(k) = stack.pop() {
            match tree.children(k) {
                Some((a, b)) => stack.extend([a, b]),
                None => ys.extend(tree.leaf_points(k).iter().map(|&i| y[i as usize])),
            }
        }
        let want = Moments::of(&ys);
        let got = stats.get(j);
        assert_eq!(got.n, want.n);
        assert!((got.mean - want.mean).abs() <= 1e-9 * want.mean.abs().max(1.0));
        assert!((got.m2 - want.m2).abs() <= 1e-9 * want.m2.abs().max(1.0));
    }
    assert!(stats.bytes_per_node() > 0);
}

/// Online ≡ batch (spec §2.6, T8) seen through the predictions: on each of 32 data sets
/// a fast-mode forest fitted in one batch and one fed the same rows one at a time (the same
/// fixed scaling, so their trees have the same law) have RMSEs on 400 test rows whose
/// difference has mean exactly 0 (the fast mode's means depend on the trees and the labels
/// only, not on θ). Two-sided paired t-test at α = 1e-3 over the data sets, the tolerance
/// coming from the spread of the differences (measured sd 0.0018: a systematic gap above
/// about 0.0012 is found). The same seeds on 1 and 2 threads give the same model.
#[test]
fn streaming_matches_batch_quality_and_is_thread_independent() {
    let mut diffs = Vec::new();
    for s in 0..32u64 {
        let (x, y) = smooth_2d(800, 500 + 2 * s);
        let (xt, yt) = smooth_2d(400, 501 + 2 * s);
        let rmse = |f: &MondrianForestRegressor| {
            let p = f.predict(&xt, 2).unwrap();
            (p.mean
                .iter()
                .zip(&yt)
                .map(|(m, v)| (m - v).powi(2))
                .sum::<f64>()
                / yt.len() as f64)
                .sqrt()
        };
        let params = RegressorParams {
            n_trees: 10,
            mode: PredictionMode::Fast,
            seed: s,
            scaling: mondrian::Scaling::Ranges(vec![(0.0, 1.0); 2]),
            ..RegressorParams::thesis()
        };
        let mut batch = MondrianForestRegressor::new(params.clone()).unwrap();
        batch.fit(&x, 2, &y).unwrap();
        let mut online = MondrianForestRegressor::new(RegressorParams {
            seed: 1000 + s,
            ..params
        })
        .unwrap();
        for (xi, yi) in x.chunks(2).zip(&y) {
            online.partial_fit(xi, 2, &[*yi]).unwrap();
        }
        assert_eq!(online.n_samples_seen(), 800);
        diffs.push(rmse(&online) - rmse(&batch));
    }
    let mut family = Family::new("RMSE online − batch, paired over data sets");
    family.push(format!("differences {diffs:.4?}"), t_test(&diffs, 0.0));
    family.assert();

    let (x, y) = smooth_2d(1500, 50);
    let (xt, _) = smooth_2d(500, 51);
    let mut one = regressor(PredictionMode::Exact, 12, 3);
    let mut many = MondrianForestRegressor::new(RegressorParams {
        n_trees: 12,
        seed: 3,
        n_threads: 2,
        ..RegressorParams::thesis()
    })
    .unwrap();
    one.set_n_threads(1);
    one.fit(&x, 2, &y).unwrap();
    many.fit(&x, 2, &y).unwrap();
    assert_eq!(one.predict(&xt, 2).unwrap(), many.predict(&xt, 2).unwrap());
}

#[test]
fn save_and_load_give_the_same_predictions() {
    let (x, y) = smooth_2d(300, 60);
    let mut f = regressor(PredictionMode::Exact, 6, 1);
    f.fit(&x, 2, &y).unwrap();
    let bytes = f.to_bytes().unwrap();
    let g = MondrianForestRegressor::from_bytes(&bytes).unwrap();
    let q = [0.3, 0.4, 2.0, -1.0];
    assert_eq!(f.predict(&q, 2).unwrap(), g.predict(&q, 2).unwrap());
    let mut corrupt = bytes.clone();
    let mid = corrupt.len() / 2;
    corrupt[mid] ^= 0x40;
    assert!(MondrianForestRegressor::from_bytes(&corrupt).is_err());
    assert!(MondrianForestRegressor::from_bytes(&bytes[..bytes.len() - 3]).is_err());
    // A classifier file is not a regressor.
    let mut c = mondrian::MondrianForestClassifier::new(Default::default()).unwrap();
    c.fit(&[0.0, 1.0], 1, &[0, 1]).unwrap();
    assert!(MondrianForestRegressor::from_bytes(&c.to_bytes().unwrap()).is_err());
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let mut f = regressor(PredictionMode::Exact, 3, 0);
    assert!(matches!(
        f.predict(&[0.0], 1),
        Err(MondrianError::NotFitted)
    ));
    assert!(matches!(
        f.fit::<f64>(&[], 1, &[]),
        Err(MondrianError::EmptyData(_))
    ));
    assert!(matches!(
        f.fit(&[0.0, f64::NAN], 1, &[1.0, 2.0]),
        Err(MondrianError::NonFinite { row: 1, .. })
    ));
    assert!(matches!(
        f.fit(&[0.0, 1.0], 1, &[1.0, f64::INFINITY]),
        Err(MondrianError::NonFiniteTarget { row: 1, .. })
    ));
    assert!(matches!(
        f.fit(&[0.0, 1.0], 1, &[1.0]),
        Err(MondrianError::LengthMismatch { .. })
    ));
    assert!(matches!(
        f.fit(&[0.0, 1.0, 2.0], 2, &[1.0]),
        Err(MondrianError::RaggedMatrix { .. })
    ));
    f.fit(&[0.0, 0.0, 1.0, 1.0], 2, &[1.0, 2.0]).unwrap();
    let before = f.predict(&[0.5, 0.5], 2).unwrap();
    assert!(matches!(
        f.partial_fit(&[0.5], 1, &[1.0]),
        Err(MondrianError::WidthMismatch { .. })
    ));
    assert!(f.partial_fit(&[0.5, 0.5], 2, &[f64::NAN]).is_err());
    assert!(f.partial_fit(&[1e300, 0.5], 2, &[1.0]).is_err());
    assert_eq!(f.n_samples_seen(), 2);
    assert_eq!(f.predict(&[0.5, 0.5], 2).unwrap(), before);
    assert!(before.interval(1.0).is_err() && before.interval(0.0).is_err());
    for bad in [
        RegressorParams {
            n_trees: 0,
            ..RegressorParams::thesis()
        },
        RegressorParams {
            min_samples_split: 0,
            ..RegressorParams::thesis()
        },
        RegressorParams {
            hyper: mondrian::HyperSettings {
                noise: NoiseRule::Fixed(-1.0),
                ..Default::default()
            },
            ..RegressorParams::thesis()
        },
        RegressorParams {
            hyper: mondrian::HyperSettings {
                k_cap: f64::NAN,
                ..Default::default()
            },
            ..RegressorParams::thesis()
        },
    ] {
        assert!(matches!(
            MondrianForestRegressor::new(bad),
            Err(MondrianError::InvalidParameter { .. })
        ));
    }
}

#[test]
fn constant_labels_and_a_single_point() {
    // §5 items 2, 3, 10: zero label variance is floored; one point makes a root leaf.
    let mut f = regressor(PredictionMode::Exact, 4, 0);
    f.fit(&[0.1, 0.5, 0.9], 1, &[2.0, 2.0, 2.0]).unwrap();
    let p = f.predict(&[0.5, 7.0], 1).unwrap();
    for (m, v) in p.mean.iter().zip(&p.variance) {
        assert!((m - 2.0).abs() < 1e-9 && v.is_finite() && *v >= 0.0);
    }
    let mut g = regressor(PredictionMode::Fast, 4, 0);
    g.fit(&[0.3, 0.3], 2, &[5.0]).unwrap();
    let p = g.predict(&[0.3, 0.3, 4.0, 4.0], 2).unwrap();
    assert!(p.mean.iter().all(|m| (m - 5.0).abs() < 1e-12));
    assert!(p.variance.iter().all(|v| v.is_finite()));
}

/// §3.3: the forest's mean is the trees' mean, its variance the mean of the trees'
/// variances plus the variance of their means (law of total variance over equal-weight
/// trees), and `between_trees` that last part. Every tree's mixture is recomputed here
/// without the library's Gaussian code (`common::gaussian`): the path, boxes and weights
/// from the rows under each node, θ from the thesis heuristic, the fast mode's components
/// from the training targets under each node, the exact mode's by conditioning the dense
/// Gaussian process of the tree's labels; the mixture moments in closed form.
#[test]
fn variance_splits_into_within_and_between_trees() {
    use common::gaussian::{exact_components, fast_components, heuristic_theta, moments, Dense};
    let (mut x, mut y) = smooth_2d(300, 31);
    // Two corners make the training ranges [0, 1]², so the forest's scaling is the identity.
    x.extend([0.0, 0.0, 1.0, 1.0]);
    y.extend([0.0, 1.0]);
    let (mut xt, _) = smooth_2d(40, 32);
    xt.extend([2.0, -1.0, 0.5, 3.0, -0.3, 0.5]);
    let theta = heuristic_theta(&y, 2);
    let n_trees = 7;
    let mut outside = 0;
    for mode in [PredictionMode::Fast, PredictionMode::Exact] {
        let mut f = regressor(mode, n_trees, 3);
        f.fit(&x, 2, &y).unwrap();
        let data = f.training_points();
        let trees: Vec<&MondrianTree> = (0..n_trees).map(|t| f.tree(t).unwrap().0).collect();
        let dense: Vec<Dense> = match mode {
            PredictionMode::Fast => Vec::new(),
            _ => trees
                .iter()
                .map(|t| Dense::new(t, theta, data.targets))
                .collect(),
        };
        let p = f.predict(&xt, 2).unwrap();
        for (i, row) in xt.chunks_exact(2).enumerate() {
            let point: Vec<f32> = row.iter().map(|&v| v as f32).collect();
            let (mut means, mut vars) = (Vec::new(), Vec::new());
            for (t, tree) in trees.iter().enumerate() {
                let comps = match mode {
                    PredictionMode::Fast => {
                        fast_components(tree, data.features, data.targets, theta.noise_var, &point)
                    }
                    _ => exact_components(&dense[t], data.features, &point),
                };
                outside += usize::from(comps.len() > 1);
                let (m, v) = moments(&comps);
                means.push(m);
                vars.push(v);
            }
            let k = n_trees as f64;
            let mean = means.iter().sum::<f64>() / k;
            let between = means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / k;
            let within = vars.iter().sum::<f64>() / k;
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-8 * b.abs().max(1e-3);
            assert!(
                close(p.mean[i], mean),
                "{mode:?} row {i}: {} vs {mean}",
                p.mean[i]
            );
            assert!(
                close(p.between_trees[i], between),
                "{mode:?} row {i}: {} vs {between}",
                p.between_trees[i]
            );
            assert!(
                close(p.variance[i], within + between),
                "{mode:?} row {i}: {} vs {}",
                p.variance[i],
                within + between
            );
        }
    }
    // Branch-off components were part of the comparison, not only leaves.
    assert!(outside >= 100, "{outside} mixtures with branch-offs");
}

/// A block of rows is predicted as each row alone, bit for bit (means, variances and
/// log-densities), for blocks that end inside, at and past the groups a prediction walks in
/// lockstep, on narrow data and on data wide enough for nodes to keep point-id sets, in
/// both prediction modes.
#[test]
fn block_prediction_equals_row_by_row() {
    let mut r = rng(4242);
    for d in [2usize, 70] {
        let n = 300;
        // Coarse values, so that points repeat in some features and sets form.
        let x: Vec<f64> = (0..n * d)
            .map(|_| f64::from(r.gen_range(0u8..6)) / 5.0)
            .collect();
        let y: Vec<f64> = (0..n)
            .map(|i| x[i * d] * 2.0 + r.gen::<f64>() * 0.1)
            .collect();
        let queries: Vec<f64> = (0..200 * d).map(|_| r.gen_range(-0.2..1.2)).collect();
        let qy: Vec<f64> = (0..200).map(|_| r.gen_range(-0.5..2.5)).collect();
        for mode in [PredictionMode::Exact, PredictionMode::Fast] {
            let mut f = regressor(mode, 5, 77);
            f.fit(&x, d, &y).unwrap();
            for rows in [0usize, 1, 31, 32, 33, 64, 97, 200] {
                let block = f.predict(&queries[..rows * d], d).unwrap();
                let dens = f.log_density(&queries[..rows * d], d, &qy[..rows]).unwrap();
                for i in 0..rows {
                    let one = f.predict(&queries[i * d..(i + 1) * d], d).unwrap();
                    let one_dens = f
                        .log_density(&queries[i * d..(i + 1) * d], d, &qy[i..i + 1])
                        .unwrap();
                    assert_eq!(
                        block.mean[i].to_bits(),
                        one.mean[0].to_bits(),
                        "D {d} row {i}"
                    );
                    assert_eq!(block.variance[i].to_bits(), one.variance[0].to_bits());
                    assert_eq!(dens[i].to_bits(), one_dens[0].to_bits());
                }
            }
        }
    }
}
