//! Statistical tests of the tree sampler against the exact laws of Mondrian trees (spec
//! `mf-classification.md` §1.6, §2, §8.4 items 1–5), and of the test machinery itself.
//!
//! Every expected distribution below is derived from the mathematics of the Mondrian
//! process restricted to data, never from the library's output:
//! * the root of `MT(λ, D)` splits after `E ~ Exp(L)` with L the linear dimension of the
//!   data's bounding box, in dimension d with probability range_d / L, at a uniform
//!   location (spec §2.2);
//! * projectivity: the restriction of the tree to two points is the Mondrian tree of those
//!   two points, which splits after `Exp(‖x_a − x_b‖₁)` (spec §8.4 item 4);
//! * in 1-D the cuts made before time λ are a Poisson process of intensity λ (item 5).
//!
//! Online extension in any order, from any batch prefix and by sets of points has the
//! batch law (§2.6, tested in `sampler.rs`), so every law is checked on batch, online and
//! set-extended trees alike. The deterministic invariants are in `sampler_invariants.rs`.
//!
//! Each test function is a family of KS / χ² / exact binomial tests at family-wise level
//! α = 1e-3 (Bonferroni, see `common::Family`), with fixed seeds.

mod common;

use std::collections::BTreeMap;

use common::*;
use mondrian::process::Feature;
use mondrian::tree::PauseRule;
use rand::Rng;

const INF: f64 = f64::INFINITY;

/// Six distinct 2-D points. Bounding box [0.05, 0.90]², L = 1.7.
fn d2() -> Data {
    Data::distinct_labels(&[
        &[0.10, 0.20],
        &[0.35, 0.90],
        &[0.60, 0.05],
        &[0.90, 0.55],
        &[0.45, 0.40],
        &[0.05, 0.75],
    ])
}

/// Five 4-D points with side lengths (1, 0.5, 2, 0): the last feature is constant.
fn d4_zero_range() -> Data {
    Data::distinct_labels(&[
        &[0.0, 0.0, 0.0, 3.0],
        &[1.0, 0.5, 0.25, 3.0],
        &[0.3, 0.125, 2.0, 3.0],
        &[0.7, 0.375, 1.125, 3.0],
        &[0.5, 0.25, 0.625, 3.0],
    ])
}

fn exp_cdf(rate: f64) -> impl Fn(f64) -> f64 {
    move |t| if t <= 0.0 { 0.0 } else { -(-rate * t).exp_m1() }
}

/// The methods every sampler property is checked with: batch, online in a fixed order,
/// online in a fresh order per tree, batch prefix then online, and extension by sets
/// (`extend_many`) of 2 and of 3 points (the first set batch-samples the empty tree; a
/// set left with one point takes the per-point road).
fn standard_methods(ids: &[u32], seed: u64) -> Vec<Method> {
    vec![
        Method::Batch,
        Method::Online(permutation(ids, seed)),
        Method::Shuffled,
        Method::Prefix(permutation(ids, seed + 1), ids.len() / 2),
        Method::Sets(permutation(ids, seed + 2), 2),
        Method::Sets(permutation(ids, seed + 3), 3),
    ]
}

// ---------------------------------------------------------------------------------------
// The test machinery itself must be able to fail.
// ---------------------------------------------------------------------------------------

/// Sanity check of the helpers: they accept a true hypothesis and reject a false one on
/// synthetic samples (so the sampler tests below have power).
#[test]
fn helpers_accept_true_and_reject_false_hypotheses() {
    let mut r = rng(1);
    let exp = |r: &mut TestRng, rate: f64| -(1.0 - r.gen::<f64>()).ln() / rate;
    let xs: Vec<f64> = (0..20_000).map(|_| exp(&mut r, 2.0)).collect();
    let ys: Vec<f64> = (0..20_000).map(|_| exp(&mut r, 2.0)).collect();
    let zs: Vec<f64> = (0..20_000).map(|_| exp(&mut r, 2.2)).collect();
    assert!(ks_one_sample(&xs, exp_cdf(2.0)).p > ALPHA);
    assert!(ks_one_sample(&xs, exp_cdf(2.2)).p < 1e-6);
    assert!(ks_two_sample(&xs, &ys).p > ALPHA);
    assert!(ks_two_sample(&xs, &zs).p < 1e-6);
    // A fair die, and one whose face 0 has probability 0.19 instead of 1/6.
    let fair: Vec<u64> = {
        let mut c = vec![0u64; 6];
        (0..30_000).for_each(|_| c[r.gen_range(0..6)] += 1);
        c
    };
    let loaded: Vec<u64> = {
        let mut c = vec![0u64; 6];
        (0..30_000).for_each(|_| {
            let u: f64 = r.gen();
            c[if u < 0.19 {
                0
            } else {
                1 + ((u - 0.19) / 0.81 * 5.0) as usize
            }] += 1
        });
        c
    };
    assert!(chi2_gof(&fair, &[1.0 / 6.0; 6]).p > ALPHA);
    assert!(chi2_gof(&loaded, &[1.0 / 6.0; 6]).p < 1e-6);
    let as_map = |c: &[u64]| {
        c.iter()
            .enumerate()
            .map(|(i, &v)| (i, v))
            .collect::<BTreeMap<_, _>>()
    };
    let fair2: Vec<u64> = {
        let mut c = vec![0u64; 6];
        (0..30_000).for_each(|_| c[r.gen_range(0..6)] += 1);
        c
    };
    assert!(chi2_homogeneity(&[as_map(&fair), as_map(&fair2)]).p > ALPHA);
    assert!(chi2_homogeneity(&[as_map(&fair), as_map(&loaded)]).p < 1e-6);
    let hits = (0..20_000).filter(|_| r.gen::<f64>() < 0.3).count() as u64;
    assert!(binomial_test(hits, 20_000, 0.3).p > ALPHA);
    assert!(binomial_test(hits, 20_000, 0.32).p < 1e-6);
    // Pooling: a geometric-like tail with many tiny cells is still a valid test.
    let probs: Vec<f64> = (0..40)
        .map(|i| 0.5f64.powi(i + 1))
        .chain([0.5f64.powi(40)])
        .collect();
    let mut c = vec![0u64; 41];
    for _ in 0..20_000 {
        let mut i = 0;
        while i < 40 && r.gen::<bool>() {
            i += 1;
        }
        c[i] += 1;
    }
    assert!(chi2_gof(&c, &probs).p > ALPHA);
    let pmf = one_plus_poisson_binomial(&[0.5, 0.25]);
    assert_eq!(pmf.len(), 4);
    assert!((pmf[1] - 0.375).abs() < 1e-15 && (pmf[2] - 0.5).abs() < 1e-15);
    assert!((pmf[3] - 0.125).abs() < 1e-15 && pmf[0] == 0.0);
}

// ---------------------------------------------------------------------------------------
// §8.4 item 1: root split time
// ---------------------------------------------------------------------------------------

/// The split dimension of a wide box is drawn with probability side_d / L (spec §2.1)
/// across groups of four sides, zero sides anywhere (whole zero groups too) and a
/// remainder past the last group, and L is the sum of the sides.
#[test]
fn split_dimension_of_a_wide_box_is_proportional_to_its_sides() {
    use mondrian::process::{linear_dimension, sample_side};
    let sides = [
        0.0, 0.5, 0.0, 0.0, 1.0, 2.0, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.1, 0.0, 0.7, 0.0, 1.3,
        0.0,
    ];
    let lower: Vec<Feature> = (0..sides.len()).map(|d| 0.1 * d as Feature - 0.5).collect();
    let upper: Vec<Feature> = lower
        .iter()
        .zip(&sides)
        .map(|(&l, &s)| l + s as Feature)
        .collect();
    let exact: Vec<f64> = lower
        .iter()
        .zip(&upper)
        .map(|(&l, &u)| f64::from(u) - f64::from(l))
        .collect();
    let total: f64 = exact.iter().sum();
    let l = linear_dimension(&lower, &upper);
    assert!((l - total).abs() <= 1e-12 * total, "{l} vs {total}");
    let mut r = rng(77);
    let mut counts = vec![0u64; sides.len()];
    for _ in 0..200_000 {
        counts[sample_side(&mut r, &lower, &upper, l)] += 1;
    }
    let positive: Vec<usize> = (0..sides.len()).filter(|&d| exact[d] > 0.0).collect();
    for d in 0..sides.len() {
        if exact[d] == 0.0 {
            assert_eq!(counts[d], 0, "side {d} has length 0 but was drawn");
        }
    }
    let observed: Vec<u64> = positive.iter().map(|&d| counts[d]).collect();
    let probs: Vec<f64> = positive.iter().map(|&d| exact[d] / total).collect();
    let test = chi2_gof(&observed, &probs);
    assert!(test.p > ALPHA, "p = {}, counts {counts:?}", test.p);
}

/// Spec §8.4 item 1 (λ = ∞): τ_root ~ Exp(L), L = Σ_d range_d of the data's bounding box.
/// Derivation: `SampleMondrianBlock` on the root draws E ~ Exp(L) with τ_parent = 0 (§2.2);
/// by online = batch (§2.6) the same holds for online trees, where the root is whichever
/// node was inserted last above the old root. With pausing and all-distinct labels only
/// single points pause, which leaves the law unchanged. KS against 1 − e^{−Lt}.
#[test]
fn root_split_time_is_exponential() {
    let data = d2();
    let ids = data.ids();
    let l = data.linear_dimension(&ids);
    assert!((l - 1.7).abs() < 1e-6);
    let n_trees = 20_000;
    let mut fam = Family::new("§8.4.1 root split time ~ Exp(L), λ = ∞");
    let mut cases: Vec<(Method, PauseRule)> = standard_methods(&ids, 11)
        .into_iter()
        .map(|m| (m, NO_PAUSE))
        .collect();
    cases.push((Method::Shuffled, PAUSE_PURE));
    for (ci, (m, pause)) in cases.iter().enumerate() {
        let mut r = rng(1000 + ci as u64);
        let taus: Vec<f64> = (0..n_trees)
            .map(|_| {
                let (t, _) = m.build(&data, &ids, INF, *pause, &mut r);
                t.split_time(t.root().unwrap())
            })
            .collect();
        fam.push(
            format!("{} {pause:?}", m.name()),
            ks_one_sample(&taus, exp_cdf(l)),
        );
    }
    fam.assert();
}

/// Spec §8.4 item 1 (finite λ): the root is internal iff E < λ, so P(internal) =
/// 1 − e^{−λL} (exact two-sided binomial test), and τ_root given internal is Exp(L)
/// truncated to [0, λ): F(t) = (1 − e^{−Lt}) / (1 − e^{−Lλ}) (KS). λ = 1/L makes
/// P(internal) = 1 − e^{−1}. A root leaf has τ = λ. λ = 0 gives a root leaf always.
#[test]
fn root_split_time_finite_lifetime() {
    let data = d2();
    let ids = data.ids();
    let l = data.linear_dimension(&ids);
    let lambda = 1.0 / l;
    let n_trees = 20_000;
    let p_internal = -(-lambda * l).exp_m1();
    let mut fam = Family::new("§8.4.1 root split, finite λ");
    for (mi, m) in standard_methods(&ids, 21).iter().enumerate() {
        let mut r = rng(2000 + mi as u64);
        let mut internal = Vec::new();
        for _ in 0..n_trees {
            let (t, _) = m.build(&data, &ids, lambda, NO_PAUSE, &mut r);
            let root = t.root().unwrap();
            if t.is_leaf(root) {
                assert_eq!(t.split_time(root), lambda, "a leaf root has τ = λ");
                assert_eq!(t.leaf_points(root).len(), ids.len());
            } else {
                internal.push(t.split_time(root));
            }
        }
        fam.push(
            format!("{} P(root internal) = {p_internal:.5}", m.name()),
            binomial_test(internal.len() as u64, n_trees as u64, p_internal),
        );
        let norm = -(-l * lambda).exp_m1();
        fam.push(
            format!("{} τ_root | internal ~ truncated Exp(L)", m.name()),
            ks_one_sample(&internal, |t| exp_cdf(l)(t) / norm),
        );
    }
    fam.assert();
    // λ = 0: Exp(L) ≥ 0 = λ always, so every tree is a single root leaf (§5).
    let mut r = rng(2100);
    for m in standard_methods(&ids, 22) {
        let (t, c) = m.build(&data, &ids, 0.0, NO_PAUSE, &mut r);
        assert_eq!(t.n_nodes(), 1, "{}", m.name());
        assert_eq!(t.split_time(t.root().unwrap()), 0.0);
        check_tree(&t, &c, &data, &vec![1; ids.len()]).unwrap();
    }
}

// ---------------------------------------------------------------------------------------
// §8.4 item 2: root split dimension and location
// ---------------------------------------------------------------------------------------

/// Spec §8.4 item 2: P(δ_root = d) = range_d / L (χ² goodness of fit over the dimensions
/// of positive range; a zero-range dimension must never be chosen, §6), and
/// (ξ − ℓ_δ)/(u_δ − ℓ_δ) given δ is Uniform[0, 1) (KS per dimension). Derivation: §2.2
/// step 3 for batch trees; online and set-extended trees have the batch law (§2.6) even
/// though their root may have been inserted late by an extension cut (ξ uniform on the gap
/// to the new point, or on the part of the set's bounding box that protrudes from the old
/// box). Every road is checked, sets with and without pausing.
#[test]
fn root_split_dimension_and_location() {
    let data = d4_zero_range();
    let ids = data.ids();
    let ranges = data.ranges(&ids);
    let sides: Vec<f64> = ranges.iter().map(|(lo, hi)| hi - lo).collect();
    assert_eq!(sides, vec![1.0, 0.5, 2.0, 0.0]);
    let l: f64 = sides.iter().sum();
    let n_trees = 20_000;
    let mut fam = Family::new("§8.4.2 root split dimension ∝ range, location uniform");
    let mut cases: Vec<(Method, PauseRule)> = standard_methods(&ids, 31)
        .into_iter()
        .map(|m| (m, NO_PAUSE))
        .collect();
    cases.push((Method::Shuffled, PAUSE_PURE));
    cases.push((Method::Sets(permutation(&ids, 35), 2), PAUSE_PURE));
    for (ci, (m, pause)) in cases.iter().enumerate() {
        let mut r = rng(3000 + ci as u64);
        let mut dims = vec![0u64; 4];
        let mut locs: Vec<Vec<f64>> = vec![Vec::new(); 4];
        for _ in 0..n_trees {
            let (t, _) = m.build(&data, &ids, INF, *pause, &mut r);
            let root = t.root().unwrap();
            let d = t.split_dimension(root);
            let xi = f64::from(t.split_location(root));
            dims[d] += 1;
            locs[d].push((xi - ranges[d].0) / sides[d]);
        }
        assert_eq!(dims[3], 0, "{}: split on the zero-range feature", m.name());
        let probs: Vec<f64> = sides[..3].iter().map(|s| s / l).collect();
        fam.push(
            format!("{} dimension counts {dims:?}", m.name()),
            chi2_gof(&dims[..3], &probs),
        );
        for (d, loc) in locs.iter().enumerate().take(3) {
            fam.push(
                format!("{} location | δ = {d}", m.name()),
                ks_one_sample(loc, |u| u.clamp(0.0, 1.0)),
            );
        }
    }
    fam.assert();
}

/// The cut that separates a set of points from a box (`sample_set_extension_cut`, used by
/// `extend_many`): for box [0.5, 0.6] × [0.2, 0.8] and a set with bounding box
/// [0.2, 0.7] × [0.2, 0.9], the protrusions are (0.3 below + 0.1 above) and (0 + 0.1), so
/// δ = 0 with probability 0.8 and ξ | δ = 0 is uniform on [0.2, 0.5) ∪ [0.6, 0.7) (CDF
/// piecewise linear, 3/4 of the mass below the box), ξ | δ = 1 uniform on [0.8, 0.9); the
/// points beyond the cut lie above the box exactly when ξ is above it. χ² on δ, KS on ξ.
#[test]
fn set_extension_cut_is_uniform_on_the_protrusion() {
    use mondrian::process::{sample_set_extension_cut, set_extension_rate};
    let (lower, upper): ([Feature; 2], [Feature; 2]) = ([0.5, 0.2], [0.6, 0.8]);
    let (lo, hi): ([Feature; 2], [Feature; 2]) = ([0.2, 0.2], [0.7, 0.9]);
    let eta = set_extension_rate(&lower, &upper, &lo, &hi);
    assert!((eta - 0.5).abs() < 1e-6, "η = {eta}");
    let mut r = rng(4100);
    let (mut dims, mut loc0, mut loc1) = ([0u64; 2], Vec::new(), Vec::new());
    for _ in 0..40_000 {
        let cut = sample_set_extension_cut(&mut r, &lower, &upper, &lo, &hi, eta);
        let xi = f64::from(cut.location);
        assert_eq!(cut.point_goes_right, xi >= 0.6 - 1e-7, "side of ξ = {xi}");
        dims[cut.dimension] += 1;
        if cut.dimension == 0 {
            loc0.push(xi);
        } else {
            loc1.push(xi);
        }
    }
    let mut fam = Family::new("set extension cut: δ ∝ protrusion, ξ uniform on it");
    fam.push(format!("δ counts {dims:?}"), chi2_gof(&dims, &[0.8, 0.2]));
    let cdf0 = |x: f64| {
        if x < 0.2 {
            0.0
        } else if x < 0.5 {
            0.75 * (x - 0.2) / 0.3
        } else if x < 0.6 {
            0.75
        } else {
            (0.75 + 0.25 * (x - 0.6) / 0.1).min(1.0)
        }
    };
    fam.push("ξ | δ = 0".to_string(), ks_one_sample(&loc0, cdf0));
    fam.push(
        "ξ | δ = 1".to_string(),
        ks_one_sample(&loc1, |x| ((x - 0.8) / 0.1).clamp(0.0, 1.0)),
    );
    fam.assert();
}

// ---------------------------------------------------------------------------------------
// §8.4 item 3: Markov property at the root's children
// ---------------------------------------------------------------------------------------

/// Spec §8.4 item 3: given the root's partition, a child c with L_c > 0 has
/// τ_c − τ_root ~ Exp(L_c), censored at λ − τ_root (c is a leaf iff the draw is ≥ that).
/// Test: the randomized probability integral transform U = 1 − e^{−L_c (τ_c − τ_root)} for
/// an internal child, and U ~ Uniform[1 − e^{−L_c(λ − τ_root)}, 1) (auxiliary seeded draw)
/// for a leaf child, is exactly Uniform(0,1). The children's draws are independent given
/// the partition, and which children are tested (L_c > 0) depends on the partition only,
/// so the pooled U's are i.i.d. Uniform(0,1): KS. Trees with a leaf root are skipped.
#[test]
fn children_of_root_have_markov_split_times() {
    let data = d2();
    let ids = data.ids();
    let n_trees = 20_000;
    let mut fam = Family::new("§8.4.3 children split times (randomized PIT)");
    let mut cases: Vec<(Method, f64)> = standard_methods(&ids, 41)
        .into_iter()
        .map(|m| (m, 1.0))
        .collect();
    cases.push((Method::Shuffled, INF));
    cases.push((Method::Batch, INF));
    for (ci, (m, lambda)) in cases.iter().enumerate() {
        let mut r = rng(4000 + ci as u64);
        let mut aux = rng(4100 + ci as u64);
        let mut us = Vec::new();
        for _ in 0..n_trees {
            let (t, _) = m.build(&data, &ids, *lambda, NO_PAUSE, &mut r);
            let root = t.root().unwrap();
            let Some((a, b)) = t.children(root) else {
                continue;
            };
            let tr = t.split_time(root);
            for c in [a, b] {
                let pts: Vec<u32> = t
                    .subtree_preorder(c)
                    .into_iter()
                    .filter(|&j| t.is_leaf(j))
                    .flat_map(|j| t.leaf_points(j).to_vec())
                    .collect();
                let lc = data.linear_dimension(&pts);
                if lc == 0.0 {
                    assert!(t.is_leaf(c));
                    continue;
                }
                if t.is_leaf(c) {
                    assert!(
                        lambda.is_finite(),
                        "a block of positive extent is a leaf at λ = ∞"
                    );
                    let u_max = -(-lc * (lambda - tr)).exp_m1();
                    us.push(u_max + (1.0 - u_max) * aux.gen::<f64>());
                } else {
                    us.push(-(-lc * (t.split_time(c) - tr)).exp_m1());
                }
            }
        }
        fam.push(
            format!("{} λ = {lambda} ({} children)", m.name(), us.len()),
            ks_one_sample(&us, |u| u.clamp(0.0, 1.0)),
        );
    }
    fam.assert();
}

// ---------------------------------------------------------------------------------------
// §8.4 item 4: pairwise separation
// ---------------------------------------------------------------------------------------

/// Spec §8.4 item 4 (finite λ, no pausing): for every pair of training points,
/// P(same leaf) = exp(−λ‖x_a − x_b‖₁). Derivation: by projectivity the tree restricted to
/// {x_a, x_b} is MT(λ, {x_a, x_b}), whose root (L = ‖x_a − x_b‖₁) stays a leaf iff
/// Exp(L) ≥ λ. Exact two-sided binomial test for each of the 15 pairs and each method;
/// the paused variant uses all-distinct labels (only single points pause).
#[test]
fn pairwise_same_leaf_probability() {
    let data = d2();
    let ids = data.ids();
    let lambda = 1.5;
    let n_trees = 20_000u64;
    let mut fam = Family::new("§8.4.4 P(same leaf) = exp(−λ‖Δx‖₁)");
    let cases = [
        (Method::Batch, NO_PAUSE),
        (Method::Shuffled, NO_PAUSE),
        (Method::Prefix(permutation(&ids, 51), 3), NO_PAUSE),
        (Method::Shuffled, PAUSE_PURE),
    ];
    let pairs: Vec<(u32, u32)> = (0..6)
        .flat_map(|a| (a + 1..6).map(move |b| (a, b)))
        .collect();
    for (ci, (m, pause)) in cases.iter().enumerate() {
        let mut r = rng(5000 + ci as u64);
        let mut same = vec![0u64; pairs.len()];
        for _ in 0..n_trees {
            let (t, _) = m.build(&data, &ids, lambda, *pause, &mut r);
            for (pi, &(a, b)) in pairs.iter().enumerate() {
                if t.leaf_of(data.row(a)) == t.leaf_of(data.row(b)) {
                    same[pi] += 1;
                }
            }
        }
        for (pi, &(a, b)) in pairs.iter().enumerate() {
            let p = (-lambda * data.l1(a, b)).exp();
            fam.push(
                format!("{} {pause:?} pair ({a},{b}) p = {p:.4}", m.name()),
                binomial_test(same[pi], n_trees, p),
            );
        }
    }
    fam.assert();
}

/// Spec §8.4 item 4 (λ = ∞): the split time of the lowest common ancestor of x_a and x_b
/// is Exp(‖x_a − x_b‖₁) (same projectivity argument: it is the root split time of the
/// two-point tree). KS for each of the 15 pairs, batch and online.
#[test]
fn pairwise_separation_time_is_exponential() {
    let data = d2();
    let ids = data.ids();
    let n_trees = 20_000;
    let mut fam = Family::new("§8.4.4 LCA split time ~ Exp(‖Δx‖₁)");
    let pairs: Vec<(u32, u32)> = (0..6)
        .flat_map(|a| (a + 1..6).map(move |b| (a, b)))
        .collect();
    for (mi, m) in [Method::Batch, Method::Shuffled].iter().enumerate() {
        let mut r = rng(5500 + mi as u64);
        let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(n_trees); pairs.len()];
        for _ in 0..n_trees {
            let (t, _) = m.build(&data, &ids, INF, NO_PAUSE, &mut r);
            for (pi, &(a, b)) in pairs.iter().enumerate() {
                times[pi].push(separation_time(&t, data.row(a), data.row(b)));
            }
        }
        for (pi, &(a, b)) in pairs.iter().enumerate() {
            fam.push(
                format!("{} pair ({a},{b})", m.name()),
                ks_one_sample(&times[pi], exp_cdf(data.l1(a, b))),
            );
        }
    }
    fam.assert();
}

// ---------------------------------------------------------------------------------------
// §8.4 item 5: 1-D leaf count
// ---------------------------------------------------------------------------------------

/// Spec §8.4 item 5: in 1-D the cuts made before time λ form a Poisson process of
/// intensity λ on the line, so the gap g_i between consecutive sorted points holds a cut
/// with probability 1 − e^{−λ g_i}, independently over gaps, and the number of leaves is
/// 1 + Σ_i Bernoulli(1 − e^{−λ g_i}). The exact pmf (Poisson-binomial convolution) is
/// compared by χ² (cells expecting < 5 pooled). The data include a duplicate (g = 0).
#[test]
fn one_dimensional_leaf_count_is_poisson_binomial() {
    let xs: [Feature; 9] = [0.0, 0.3, 0.35, 0.35, 0.9, 1.4, 2.0, 2.1, 3.0];
    let rows: Vec<&[Feature]> = xs.iter().map(std::slice::from_ref).collect();
    let data = Data::distinct_labels(&rows);
    let ids = data.ids();
    let lambda = 1.2;
    let gaps: Vec<f64> = xs
        .windows(2)
        .map(|w| f64::from(w[1]) - f64::from(w[0]))
        .collect();
    let ps: Vec<f64> = gaps.iter().map(|g| -(-lambda * g).exp_m1()).collect();
    let pmf = one_plus_poisson_binomial(&ps);
    let n_trees = 20_000;
    let mut fam = Family::new("§8.4.5 1-D leaf count");
    let mut cases: Vec<(Method, PauseRule)> = standard_methods(&ids, 61)
        .into_iter()
        .map(|m| (m, NO_PAUSE))
        .collect();
    cases.push((Method::Shuffled, PAUSE_PURE));
    for (ci, (m, pause)) in cases.iter().enumerate() {
        let mut r = rng(6000 + ci as u64);
        let mut counts = vec![0u64; pmf.len()];
        for _ in 0..n_trees {
            let (t, _) = m.build(&data, &ids, lambda, *pause, &mut r);
            counts[count_leaves(&t)] += 1;
        }
        fam.push(
            format!("{} {pause:?} counts {counts:?}", m.name()),
            chi2_gof(&counts, &pmf),
        );
    }
    fam.assert();
}
