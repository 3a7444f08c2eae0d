//! `MondrianForestRegressor` as a whole (spec `mf-regression.md` §6.6 T5, T8, T11, T13,
//! T15–T17): the far-field limit, online ≡ batch, equivariance, growing uncertainty away
//! from the data, calibration, determinism, persistence and bad input.

mod common;

use common::{chi2_homogeneity, histogram, ks_two_sample, rng, Family};
use mondrian::stats::gaussian::{
    estimate_theta, mixture_moments, GaussianModel, Moments, TargetMoments, Theta,
};
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
    // give a finite NLPD and an RMSE within 1.5× of Mode F's.
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
    let nlpd: f64 = -exact.log_density(&xt, 2, &yt).unwrap().iter().sum::<f64>() / 1000.0;
    assert!(nlpd.is_finite());
    assert!(
        rmse(&exact) <= 1.5 * rmse(&fast),
        "{} vs {}",
        rmse(&exact),
        rmse(&fast)
    );
}

/// One data set drawn from the model itself (§2.1): a Mondrian tree with λ = ∞ and
/// min_samples_split `mss` on all `n` uniform points of [0,1]², node means by the Gaussian
/// hierarchy under `theta`, labels with noise σ_y². Returns features and labels.
fn draw_from_model(
    n: usize,
    mss: usize,
    theta: &Theta,
    r: &mut common::TestRng,
) -> (Vec<f64>, Vec<f64>) {
    let (x, y, _, _) = draw_with_tree(n, mss, theta, r);
    (x, y)
}

/// [`draw_from_model`] that also returns the generating tree with the label moments of
/// its nodes.
fn draw_with_tree(
    n: usize,
    mss: usize,
    theta: &Theta,
    r: &mut common::TestRng,
) -> (Vec<f64>, Vec<f64>, MondrianTree, TargetMoments) {
    let x: Vec<f32> = (0..2 * n).map(|_| r.gen()).collect();
    let zeros = vec![0.0; n];
    let data = TrainingPoints {
        features: &x,
        n_features: 2,
        targets: &zeros,
    };
    let pause = PauseRule {
        pause_on_pure: false,
        min_samples_split: mss,
    };
    let mut tree = MondrianTree::new(2, f64::INFINITY, pause);
    let mut stats = TargetMoments::new();
    tree.fit((0..n as u32).collect(), &data, &mut stats, r);
    let std = Normal::new(0.0, 1.0).unwrap();
    let mut mu = vec![0.0; tree.n_nodes()];
    let mut y = vec![0.0; n];
    for j in tree.subtree_preorder(tree.root().unwrap()) {
        let (base, tau_p) = match tree.parent(j) {
            Some(p) => (mu[p as usize], tree.split_time(p)),
            None => (theta.mu_h, 0.0),
        };
        let phi = theta.edge_variance(tau_p, tree.split_time(j) - tau_p);
        mu[j as usize] = base + phi.sqrt() * std.sample(r);
        if tree.is_leaf(j) {
            for &i in tree.leaf_points(j) {
                y[i as usize] = mu[j as usize] + theta.noise_var.sqrt() * std.sample(r);
            }
        }
    }
    let mut moments = TargetMoments::new();
    moments.resize(tree.n_nodes());
    for &j in tree.subtree_preorder(tree.root().unwrap()).iter().rev() {
        match tree.children(j) {
            Some((a, b)) => {
                moments.set_internal(j, a, b);
            }
            None => moments.set_leaf(j, tree.leaf_points(j), &y),
        }
    }
    (x.iter().map(|&v| f64::from(v)).collect(), y, tree, moments)
}

#[test]
fn ninety_percent_intervals_cover_ninety_percent_of_data_from_the_model() {
    // Twenty data sets drawn from the model (θ below, min_samples_split 10); the forest with
    // its defaults (exact mode, heuristic θ, min–max scaling, mss 10, 20 trees) is trained
    // on 500 points of each and predicts the other 200, whose labels came from the same
    // tree. The forest is not the exact Bayesian predictive (its trees are drawn given the
    // inputs only, not reweighted by the labels, and intervals are Gaussian moment
    // matches), so coverage is only close to the level: the tolerance ±0.05
    // applies; the binomial s.d. of 4000 points is 0.005.
    let theta = Theta {
        mu_h: 1.0,
        gamma1: 2.0,
        gamma2: 0.5,
        noise_var: 0.05,
    };
    let mss = 10;
    let mut r = rng(77);
    let (mut inside, mut total) = (0usize, 0usize);
    for rep in 0..20 {
        let (x, y) = draw_from_model(700, mss, &theta, &mut r);
        let mut f = MondrianForestRegressor::new(RegressorParams {
            n_trees: 20,
            min_samples_split: mss,
            seed: rep,
            ..RegressorParams::thesis()
        })
        .unwrap();
        f.fit(&x[..1000], 2, &y[..500]).unwrap();
        let c = coverage(&f, &x[1000..], &y[500..], 0.9);
        inside += (c * 200.0).round() as usize;
        total += 200;
    }
    let c = inside as f64 / total as f64;
    assert!((c - 0.9).abs() <= 0.05, "coverage {c}");
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

#[test]
fn streaming_matches_batch_quality_and_is_thread_independent() {
    let (x, y) = smooth_2d(1500, 50);
    let (xt, yt) = smooth_2d(500, 51);
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
    let mut batch = regressor(PredictionMode::Fast, 10, 8);
    batch.fit(&x, 2, &y).unwrap();
    let mut online = MondrianForestRegressor::new(RegressorParams {
        n_trees: 10,
        mode: PredictionMode::Fast,
        seed: 8,
        scaling: mondrian::Scaling::Ranges(vec![(0.0, 1.0); 2]),
        ..RegressorParams::thesis()
    })
    .unwrap();
    for (xi, yi) in x.chunks(2).zip(&y) {
        online.partial_fit(xi, 2, &[*yi]).unwrap();
    }
    assert_eq!(online.n_samples_seen(), 1500);
    // Same distribution of trees; a loose sanity margin on one draw.
    assert!(
        (rmse(&online) - rmse(&batch)).abs() < 0.05,
        "{} vs {}",
        rmse(&online),
        rmse(&batch)
    );

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

#[test]
fn marginal_likelihood_recovers_the_noise_under_the_true_tree() {
    // Data drawn from the model with σ² = 0.05; under the generating tree, maximising the
    // marginal likelihood from the heuristic's θ (σ² ≈ s²/1000) finds σ² within 25 % of the
    // truth: about 1500 − 450 within-leaf degrees of freedom give a relative s.d. near 4.4 %.
    let theta = Theta {
        mu_h: 1.0,
        gamma1: 2.0,
        gamma2: 0.5,
        noise_var: 0.05,
    };
    let mut r = rng(91);
    let (_, y, tree, moments) = draw_with_tree(1500, 5, &theta, &mut r);
    let start = Theta::heuristic(Moments::of(&y), 2, &mondrian::HyperSettings::default());
    let objective = |t: &Theta| {
        let model = GaussianModel {
            theta: *t,
            mode: PredictionMode::Exact,
        };
        model.log_marginal(&tree, &moments, &model.upward(&tree, &moments))
    };
    let est = estimate_theta(start, objective);
    assert!(objective(&est) > objective(&start));
    assert!(
        (est.noise_var / theta.noise_var - 1.0).abs() < 0.25,
        "σ² = {} (heuristic {})",
        est.noise_var,
        start.noise_var
    );
}

#[test]
fn marginal_likelihood_estimate_raises_the_forest_objective() {
    // On the forest's own trees (drawn without the labels) the estimate can only improve
    // the summed log marginal likelihood over the heuristic's θ, where the search starts.
    // It also inflates σ² beyond the truth: the noise then absorbs the mismatch between
    // these trees and the generating one.
    let theta = Theta {
        mu_h: 1.0,
        gamma1: 2.0,
        gamma2: 0.5,
        noise_var: 0.05,
    };
    let mut r = rng(92);
    let (x, y) = draw_from_model(1500, 5, &theta, &mut r);
    let fit = |estimate| {
        let mut f = MondrianForestRegressor::new(RegressorParams {
            n_trees: 10,
            min_samples_split: 5,
            seed: 2,
            scaling: mondrian::Scaling::Identity,
            hyper: mondrian::HyperSettings {
                estimate,
                ..Default::default()
            },
            ..RegressorParams::thesis()
        })
        .unwrap();
        f.fit(&x, 2, &y).unwrap();
        f
    };
    let heuristic = fit(mondrian::Estimate::Heuristic);
    let ml = fit(mondrian::Estimate::MarginalLikelihood);
    let total = |f: &MondrianForestRegressor, theta: Theta| {
        let model = GaussianModel {
            theta,
            mode: PredictionMode::Exact,
        };
        (0..10)
            .map(|t| {
                let (tree, stats) = f.tree(t).unwrap();
                model.log_marginal(tree, stats, &model.upward(tree, stats))
            })
            .sum::<f64>()
    };
    // Same trees (labels do not shape them), two θs.
    let (th, tm) = (heuristic.theta().unwrap(), ml.theta().unwrap());
    assert!(total(&heuristic, tm) > total(&heuristic, th));
    assert!(tm.noise_var > theta.noise_var);
}

#[test]
fn variance_splits_into_within_and_between_trees() {
    // Var = mean of the trees' variances + variance of their means (law of total variance
    // over the equal-weight trees, §3.3), recomputed here from each tree's own mixture with
    // a two-pass variance instead of the forest's running one.
    let (mut x, mut y) = smooth_2d(300, 31);
    // Two corners make the training ranges [0, 1]², so the forest's scaling is the identity.
    x.extend([0.0, 0.0, 1.0, 1.0]);
    y.extend([0.0, 1.0]);
    let (mut xt, _) = smooth_2d(40, 32);
    xt.extend([2.0, -1.0, 0.5, 3.0]);
    let n_trees = 7;
    for mode in [PredictionMode::Fast, PredictionMode::Exact] {
        let mut f = regressor(mode, n_trees, 3);
        f.fit(&x, 2, &y).unwrap();
        let model = GaussianModel {
            theta: f.theta().unwrap(),
            mode,
        };
        let p = f.predict(&xt, 2).unwrap();
        for (i, row) in xt.chunks_exact(2).enumerate() {
            let point: Vec<f32> = row.iter().map(|&v| v as f32).collect();
            let (mut means, mut vars) = (Vec::new(), Vec::new());
            for t in 0..n_trees {
                let (tree, stats) = f.tree(t).unwrap();
                let msgs = match mode {
                    PredictionMode::Fast => Vec::new(),
                    _ => model.upward(tree, stats),
                };
                let (mut steps, mut comps) = (Vec::new(), Vec::new());
                tree.path_steps(&point, f.training_points().features, &mut steps);
                model.tree_components(tree, stats, &msgs, &steps, &mut comps);
                let (m, v) = mixture_moments(&comps);
                means.push(m);
                vars.push(v);
            }
            let k = n_trees as f64;
            let mean = means.iter().sum::<f64>() / k;
            let between = means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / k;
            let within = vars.iter().sum::<f64>() / k;
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1e-12);
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
