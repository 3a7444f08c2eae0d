//! Statistical tests that online extension has the batch law (spec `mf-classification.md`
//! §2.6, §8.4 item 6): trees grown online in any order, from a batch prefix or by sets of
//! points, and with bagging weights, are distributed as batch trees on the same
//! (multi)set. The laws of the split times, dimensions and locations are tested in
//! `sampler_laws.rs`, the deterministic invariants in `sampler_invariants.rs`.
//!
//! The comparisons are between samples of trees grown by each method (χ² homogeneity of
//! the canonical signature, the leaf count and each point's depth; two-sample KS of the
//! root split time), never against the library's output. Each test function is a family
//! of tests at family-wise level α = 1e-3 (Bonferroni, see `common::Family`), with fixed
//! seeds.

mod common;

use std::collections::BTreeMap;

use common::*;
use mondrian::stats::label::LabelCounts;
use mondrian::tree::{MondrianTree, PauseRule};
use rand::seq::SliceRandom;

const INF: f64 = f64::INFINITY;

// ---------------------------------------------------------------------------------------
// §8.4 item 6: online = batch = any order
// ---------------------------------------------------------------------------------------

/// Empirical laws of the signature, the leaf count and each point's depth.
type TreeLaw = (
    BTreeMap<String, u64>,
    BTreeMap<usize, u64>,
    Vec<BTreeMap<usize, u64>>,
);

struct MethodSample {
    signatures: BTreeMap<String, u64>,
    leaves: BTreeMap<usize, u64>,
    depths: Vec<BTreeMap<usize, u64>>,
    root_tau: Vec<f64>,
}

/// Grows `n_trees` trees per method and compares their laws: χ² homogeneity of the full
/// signature (nested leaf sets + split dimensions), of the leaf count and of each point's
/// depth, and two-sample KS of the root split time of each method against batch.
/// Spec §2.6: T ~ MT(λ, D_{1:N}), T' ~ MTx(λ, T, x) ⇒ T' ~ MT(λ, D_{1:N+1}), so every
/// insertion order and every batch/online mix gives the batch law; with pausing this needs
/// a monotone predicate, which pure labels and |S| < m are.
fn assert_online_equals_batch(name: &str, data: &Data, lifetime: f64, pause: PauseRule, seed: u64) {
    let ids = data.ids();
    let n = data.n();
    let n_trees = 12_000;
    let methods = [
        Method::Batch,
        Method::Online(permutation(&ids, seed + 1)),
        Method::Online(permutation(&ids, seed + 2)),
        Method::Online(permutation(&ids, seed + 3)),
        Method::Prefix(permutation(&ids, seed + 4), 3),
        Method::Shuffled,
        Method::Sets(permutation(&ids, seed + 5), 2),
        Method::Sets(permutation(&ids, seed + 6), 3),
    ];
    let mut samples = Vec::new();
    for (mi, m) in methods.iter().enumerate() {
        let mut r = rng(seed * 100 + mi as u64);
        let mut s = MethodSample {
            signatures: BTreeMap::new(),
            leaves: BTreeMap::new(),
            depths: vec![BTreeMap::new(); n],
            root_tau: Vec::with_capacity(n_trees),
        };
        for it in 0..n_trees {
            let (t, c) = m.build(data, &ids, lifetime, pause, &mut r);
            if it < 200 {
                check_tree(&t, &c, data, &vec![1; n])
                    .unwrap_or_else(|e| panic!("{}: {e}", m.name()));
            }
            *s.signatures.entry(signature(&t)).or_insert(0) += 1;
            *s.leaves.entry(count_leaves(&t)).or_insert(0) += 1;
            for (i, d) in point_depths(&t, n).into_iter().enumerate() {
                *s.depths[i].entry(d).or_insert(0) += 1;
            }
            s.root_tau.push(t.split_time(t.root().unwrap()));
        }
        samples.push(s);
    }
    let mut fam = Family::new(&format!("§8.4.6 online = batch: {name}"));
    let n_sig: std::collections::BTreeSet<&String> =
        samples.iter().flat_map(|s| s.signatures.keys()).collect();
    let sigs: Vec<_> = samples.iter().map(|s| s.signatures.clone()).collect();
    fam.push(
        format!("signature ({} distinct)", n_sig.len()),
        chi2_homogeneity(&sigs),
    );
    let leaves: Vec<_> = samples.iter().map(|s| s.leaves.clone()).collect();
    fam.push(
        format!("leaf count {:?}", samples[0].leaves),
        chi2_homogeneity(&leaves),
    );
    for i in 0..n {
        let d: Vec<_> = samples.iter().map(|s| s.depths[i].clone()).collect();
        fam.push(format!("depth of point {i}"), chi2_homogeneity(&d));
    }
    for (mi, m) in methods.iter().enumerate().skip(1) {
        fam.push(
            format!("root τ: batch vs {}", m.name()),
            ks_two_sample(&samples[0].root_tau, &samples[mi].root_tau),
        );
    }
    fam.assert();
}

/// §8.4 item 6 without pausing, finite λ (leaf count and structure are random).
#[test]
fn online_equals_batch_no_pausing_finite_lifetime() {
    assert_online_equals_batch(
        "no pausing, λ = 1.5",
        &labelled_with_duplicates(),
        1.5,
        NO_PAUSE,
        71,
    );
}

/// §8.4 item 6 with pausing on pure labels, λ = ∞, labelled data with duplicates.
#[test]
fn online_equals_batch_pausing_infinite_lifetime() {
    assert_online_equals_batch(
        "pause on pure, λ = ∞",
        &labelled_with_duplicates(),
        INF,
        PAUSE_PURE,
        72,
    );
}

/// §8.4 item 6 with pausing on pure labels and finite λ.
#[test]
fn online_equals_batch_pausing_finite_lifetime() {
    assert_online_equals_batch(
        "pause on pure, λ = 1.5",
        &labelled_with_duplicates(),
        1.5,
        PAUSE_PURE,
        73,
    );
}

/// §8.4 item 6 with min_samples_split = 3 (λ = ∞, no purity pausing; and with purity
/// pausing at finite λ).
#[test]
fn online_equals_batch_min_samples_split() {
    let data = labelled_with_duplicates();
    let m3 = PauseRule {
        pause_on_pure: false,
        min_samples_split: 3,
    };
    assert_online_equals_batch("min_samples_split = 3, λ = ∞", &data, INF, m3, 74);
    let m3_pure = PauseRule {
        pause_on_pure: true,
        min_samples_split: 3,
    };
    assert_online_equals_batch(
        "min_samples_split = 3 + pure, λ = 2",
        &data,
        2.0,
        m3_pure,
        75,
    );
}

/// Online bagging invariance: a point inserted online with multiplicity w (`extend`'s
/// weight), the same point inserted w times with weight 1, the repeats extended as two sets
/// (`extend_many`), and batch sampling with the id repeated w times all give the law
/// MT(λ, multiset). Multiplicity matters for the
/// min_samples_split predicate (|S| counts multiplicity), so the comparison has power.
/// χ² homogeneity of the signature (leaf multisets), leaf count and depths.
#[test]
fn online_bagging_weights_equal_repeated_points() {
    let data = labelled_with_duplicates();
    let weights: [u32; 7] = [1, 3, 0, 2, 1, 1, 2];
    let configs = [
        (
            "m = 3, λ = ∞",
            INF,
            PauseRule {
                pause_on_pure: false,
                min_samples_split: 3,
            },
        ),
        (
            "m = 4 + pure, λ = 2",
            2.0,
            PauseRule {
                pause_on_pure: true,
                min_samples_split: 4,
            },
        ),
    ];
    let repeated: Vec<u32> = weights
        .iter()
        .enumerate()
        .flat_map(|(i, &w)| vec![i as u32; w as usize])
        .collect();
    let weighted: Vec<(u32, u32)> = weights
        .iter()
        .enumerate()
        .filter(|(_, &w)| w > 0)
        .map(|(i, &w)| (i as u32, w))
        .collect();
    let n_trees = 10_000;
    let mut fam = Family::new("online bagging: weight w ≡ w repeats ≡ batch with repeats");
    for (ci, (name, lifetime, pause)) in configs.iter().enumerate() {
        let mut samples: Vec<TreeLaw> = Vec::new();
        for method in 0..5 {
            let mut r = rng(8000 + 10 * ci as u64 + method);
            let mut sig = BTreeMap::new();
            let mut leaves = BTreeMap::new();
            let mut depths = vec![BTreeMap::new(); data.n()];
            for it in 0..n_trees {
                let mut tree = MondrianTree::new(data.d, *lifetime, *pause);
                let mut counts = LabelCounts::new(data.k);
                let pts = data.points();
                match method {
                    0 => tree.fit(repeated.clone(), &pts, &mut counts, &mut r),
                    1 => {
                        let mut order = weighted.clone();
                        order.shuffle(&mut r);
                        for (i, w) in order {
                            tree.extend(i, w, &pts, &mut counts, &mut r);
                        }
                    }
                    2 => {
                        let mut order = repeated.clone();
                        order.shuffle(&mut r);
                        for i in order {
                            tree.extend(i, 1, &pts, &mut counts, &mut r);
                        }
                    }
                    3 => {
                        // Weighted points in two sets (`extend_many`), repeats as ids.
                        let mut order = weighted.clone();
                        order.shuffle(&mut r);
                        let ids: Vec<u32> = order
                            .iter()
                            .flat_map(|&(i, w)| vec![i; w as usize])
                            .collect();
                        let (head, tail) = ids.split_at(4);
                        tree.extend_many(head.to_vec(), &pts, &mut counts, &mut r);
                        tree.extend_many(tail.to_vec(), &pts, &mut counts, &mut r);
                    }
                    _ => {
                        // Batch on the repeats of a random half, then weighted extension.
                        let mut order = weighted.clone();
                        order.shuffle(&mut r);
                        let (head, tail) = order.split_at(order.len() / 2);
                        let prefix: Vec<u32> = head
                            .iter()
                            .flat_map(|&(i, w)| vec![i; w as usize])
                            .collect();
                        tree.fit(prefix, &pts, &mut counts, &mut r);
                        for &(i, w) in tail {
                            tree.extend(i, w, &pts, &mut counts, &mut r);
                        }
                    }
                }
                if it < 200 {
                    check_tree(&tree, &counts, &data, &weights)
                        .unwrap_or_else(|e| panic!("{name} m{method}: {e}"));
                }
                *sig.entry(signature(&tree)).or_insert(0) += 1;
                *leaves.entry(count_leaves(&tree)).or_insert(0) += 1;
                for (i, d) in point_depths(&tree, data.n()).into_iter().enumerate() {
                    *depths[i].entry(d).or_insert(0) += 1;
                }
            }
            samples.push((sig, leaves, depths));
        }
        let sigs: Vec<_> = samples.iter().map(|s| s.0.clone()).collect();
        fam.push(
            format!("{name}: signature ({} distinct)", samples[0].0.len()),
            chi2_homogeneity(&sigs),
        );
        let leaves: Vec<_> = samples.iter().map(|s| s.1.clone()).collect();
        fam.push(
            format!("{name}: leaf count {:?}", samples[0].1),
            chi2_homogeneity(&leaves),
        );
        for i in (0..data.n()).filter(|&i| weights[i] > 0) {
            let d: Vec<_> = samples.iter().map(|s| s.2[i].clone()).collect();
            fam.push(format!("{name}: depth of point {i}"), chi2_homogeneity(&d));
        }
    }
    fam.assert();
}
