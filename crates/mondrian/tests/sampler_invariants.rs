//! Deterministic properties of the tree sampler (spec `mf-classification.md` §1.6, §8.4
//! items 7–9, §8.5 item 8): the leaves of trees with λ = ∞, the structural invariants and
//! the counts after every insertion of random streams and of long ones, and trees that do
//! not depend on the discount γ. The sampler's laws are tested in `sampler_laws.rs` and
//! `sampler.rs`.

mod common;

use common::*;
use mondrian::process::Feature;
use mondrian::stats::label::LabelCounts;
use mondrian::tree::{MondrianTree, PauseRule};
use mondrian::{ClassifierParams, MondrianForestClassifier};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use rand::Rng;

const INF: f64 = f64::INFINITY;

// ---------------------------------------------------------------------------------------
// §8.4 item 7: λ = ∞ leaves
// ---------------------------------------------------------------------------------------

/// Spec §8.4 item 7 / §2.2: with λ = ∞ every block of positive extent splits (E < ∞), so
/// without pausing the leaves are exactly the groups of identical points: #leaves =
/// #distinct x and every leaf has zero linear dimension. With pausing on pure labels a
/// leaf is either label-pure (paused) or zero-range (identical points, mixed labels), and
/// #leaves ≤ #distinct x. Deterministic properties, checked on 300 random data sets
/// (grid values, so duplicates are frequent), batch and online.
#[test]
fn infinite_lifetime_leaves() {
    let mut r = rng(9000);
    for case in 0..300 {
        let n = r.gen_range(1..25);
        let d = r.gen_range(1..4);
        let rows: Vec<Vec<Feature>> = (0..n)
            .map(|_| {
                (0..d)
                    .map(|_| r.gen_range(0..4) as Feature * 0.25)
                    .collect()
            })
            .collect();
        let row_refs: Vec<&[Feature]> = rows.iter().map(|v| v.as_slice()).collect();
        let y: Vec<u32> = (0..n).map(|_| r.gen_range(0..3)).collect();
        let data = Data::new(&row_refs, &y, 3);
        let ids = data.ids();
        let mut distinct = rows.clone();
        distinct.sort_by(|a, b| a.partial_cmp(b).unwrap());
        distinct.dedup();
        for m in [Method::Batch, Method::Shuffled] {
            let (t, c) = m.build(&data, &ids, INF, NO_PAUSE, &mut r);
            check_tree(&t, &c, &data, &vec![1; n]).unwrap();
            assert_eq!(count_leaves(&t), distinct.len(), "case {case} {}", m.name());
            for leaf in t.leaves() {
                assert_eq!(data.linear_dimension(t.leaf_points(leaf)), 0.0);
            }
            let (t, c) = m.build(&data, &ids, INF, PAUSE_PURE, &mut r);
            check_tree(&t, &c, &data, &vec![1; n]).unwrap();
            assert!(count_leaves(&t) <= distinct.len());
            for leaf in t.leaves() {
                let pts = t.leaf_points(leaf);
                let pure = pts
                    .iter()
                    .all(|&i| data.y[i as usize] == data.y[pts[0] as usize]);
                assert!(
                    pure || data.linear_dimension(pts) == 0.0,
                    "case {case}: leaf {pts:?}"
                );
                assert_eq!(t.is_paused(leaf), pure);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// §8.4 item 8: invariants in long streams; §8.5 item 8: counts
// ---------------------------------------------------------------------------------------

/// Coordinates of the random streams: duplicates (small table), two values one ulp apart
/// (a split must fall in a one-ulp gap), and points far outside the current box.
const COORDS: [Feature; 7] = [0.0, 0.2, 0.200_000_02, 0.5, 1.0, -3000.0, 10_000.0];

fn stream_data(items: &[(usize, usize, u32, u32)], width: usize) -> Data {
    // Feature 2 and any after it are constant: zero-range features that must never be
    // split on. A width of 64 or more makes nodes over a few points keep their ids instead
    // of a box.
    let rows: Vec<Vec<Feature>> = items
        .iter()
        .map(|&(a, b, _, _)| {
            let mut row = vec![7.0; width.max(3)];
            (row[0], row[1]) = (COORDS[a], COORDS[b]);
            row
        })
        .collect();
    let refs: Vec<&[Feature]> = rows.iter().map(|r| r.as_slice()).collect();
    let y: Vec<u32> = items.iter().map(|&(_, _, y, _)| y).collect();
    Data::new(&refs, &y, 3)
}

/// Widths for [`stream_data`]: narrow, and wide enough for point-id sets.
const WIDTHS: [usize; 2] = [3, 70];

const LIFETIMES: [f64; 4] = [INF, 0.0, 0.7, 5.0];
const PAUSES: [PauseRule; 4] = [
    NO_PAUSE,
    PAUSE_PURE,
    PauseRule {
        pause_on_pure: false,
        min_samples_split: 3,
    },
    PauseRule {
        pause_on_pure: true,
        min_samples_split: 4,
    },
];

/// Batch prefix, then weighted online insertions; after every insertion: our independent
/// invariant check (§1.6 items 1–8, multiplicities, and counts = post-order recount:
/// leaves = histogram, internal = min(c_L,1) + min(c_R,1), §8.5 item 8) and the library's
/// own `check_invariants`.
fn run_stream(
    items: &[(usize, usize, u32, u32)],
    lifetime: f64,
    pause: PauseRule,
    prefix: usize,
    seed: u64,
    width: usize,
) {
    let data = stream_data(items, width);
    let mut r = rng(seed);
    let prefix = prefix.min(items.len());
    let mut inserted = vec![0u32; items.len()];
    let mut batch_ids = Vec::new();
    for (i, item) in items.iter().enumerate().take(prefix) {
        inserted[i] = item.3;
        batch_ids.extend(vec![i as u32; item.3 as usize]);
    }
    let (mut tree, mut counts) = build_batch(&data, batch_ids, lifetime, pause, &mut r);
    let check = |tree: &MondrianTree, counts: &LabelCounts, inserted: &[u32], step: usize| {
        if let Err(e) = check_tree(tree, counts, &data, inserted) {
            panic!("step {step}, λ = {lifetime}, {pause:?}, D = {width}: {e}");
        }
        if let Err(e) = tree.check_invariants(&data.points(), counts) {
            panic!(
                "step {step}, λ = {lifetime}, {pause:?}, D = {width}: library check_invariants: {e}"
            );
        }
    };
    check(&tree, &counts, &inserted, prefix);
    for (i, item) in items.iter().enumerate().skip(prefix) {
        tree.extend(i as u32, item.3, &data.points(), &mut counts, &mut r);
        inserted[i] = item.3;
        check(&tree, &counts, &inserted, i);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 96,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(0x0005_eed0_f7e5),
        ..ProptestConfig::default()
    })]

    /// Spec §8.4 item 8 and §8.5 item 8: invariants and counts after every insertion of a
    /// random stream with duplicates, one-ulp gaps, a zero-range feature and far-away
    /// points, for every lifetime / pause rule combination and batch prefixes.
    #[test]
    fn invariants_and_counts_after_every_insertion(
        items in prop::collection::vec((0usize..7, 0usize..7, 0u32..3, prop_oneof![4 => Just(1u32), 1 => 2u32..4]), 1..80),
        lifetime in 0usize..4,
        pause in 0usize..4,
        prefix in 0usize..6,
        seed in any::<u64>(),
        wide in any::<bool>(),
    ) {
        let width = WIDTHS[usize::from(wide)];
        run_stream(&items, LIFETIMES[lifetime], PAUSES[pause], prefix, seed, width);
    }
}

/// Spec §8.4 item 8: one long stream (1000 points) per lifetime / pause rule, checked
/// after every insertion, with duplicates, far-away points and a sorted run (deep trees).
#[test]
fn invariants_in_long_streams() {
    let mut r = rng(9500);
    let mut items: Vec<(usize, usize, u32, u32)> = (0..700)
        .map(|_| {
            (
                r.gen_range(0..7),
                r.gen_range(0..7),
                r.gen_range(0..3),
                if r.gen_bool(0.1) { 2 } else { 1 },
            )
        })
        .collect();
    // A sorted run along the table (increasing coordinates): worst-case depth.
    let sorted = [5usize, 0, 1, 2, 3, 4, 6];
    for k in 0..300 {
        items.push((sorted[k % 7], sorted[(k / 7) % 7], (k % 2) as u32, 1));
    }
    for (li, &lifetime) in LIFETIMES.iter().enumerate() {
        for (pi, &pause) in PAUSES.iter().enumerate() {
            for width in WIDTHS {
                run_stream(
                    &items,
                    lifetime,
                    pause,
                    5,
                    9600 + (4 * li + pi) as u64,
                    width,
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// §8.4 item 9: structure independent of γ
// ---------------------------------------------------------------------------------------

/// Spec §8.4 item 9 / §3.2: the tree sampler never reads γ, so forests with the same seed
/// and different discount factors hold bit-identical trees and counts (batch fit, then
/// online partial_fit; with and without bagging; finite and infinite λ), and a forest whose
/// γ is changed after training predicts exactly like a forest trained with that γ.
#[test]
fn structure_is_independent_of_gamma() {
    let mut r = rng(9900);
    let n = 60;
    let x: Vec<f64> = (0..2 * n).map(|_| r.gen::<f64>()).collect();
    let y: Vec<usize> = (0..n)
        .map(|i| ((x[2 * i] + x[2 * i + 1]) * 1.5) as usize)
        .collect();
    let test_x: Vec<f64> = (0..40).map(|_| r.gen_range(-0.5..1.5)).collect();
    let factors = [0.0, 0.3, 10.0, 1e6];
    for &bagging in &[false, true] {
        for &lifetime in &[INF, 2.0] {
            let forests: Vec<MondrianForestClassifier> = factors
                .iter()
                .map(|&g| {
                    let mut f = MondrianForestClassifier::new(ClassifierParams {
                        n_trees: 6,
                        lifetime,
                        discount_factor: g,
                        seed: 77,
                        n_threads: 1,
                        bagging,
                        ..ClassifierParams::default()
                    })
                    .unwrap();
                    f.fit(&x[..n], 2, &y[..n / 2]).unwrap();
                    f.partial_fit(&x[n..], 2, &y[n / 2..]).unwrap();
                    f
                })
                .collect();
            let prints = |f: &MondrianForestClassifier| -> Vec<String> {
                (0..6)
                    .map(|t| {
                        let (tree, counts) = f.tree(t).unwrap();
                        fingerprint(tree, counts)
                    })
                    .collect()
            };
            let reference = prints(&forests[0]);
            assert!(reference.iter().all(|s| !s.is_empty()));
            for (f, g) in forests.iter().zip(factors).skip(1) {
                assert_eq!(
                    prints(f),
                    reference,
                    "γ factor {g}, bagging {bagging}, λ = {lifetime}"
                );
            }
            for (b, gb) in factors.iter().enumerate() {
                let mut changed = forests[0].clone();
                changed.set_discount_factor(*gb).unwrap();
                let want = forests[b].predict_proba(&test_x, 2).unwrap();
                let got = changed.predict_proba(&test_x, 2).unwrap();
                assert_eq!(got, want, "γ changed after training to factor {gb}");
            }
        }
    }
}
