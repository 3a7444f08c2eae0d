//! Exact deletion (spec `mondrian-polya-forest.md` §7.3; issue: one core with exact
//! deletion): insert-then-delete gives back the tree it started from, statistics after
//! deletions equal a recomputation from scratch, and deleting points gives trees distributed
//! as batch trees on the points that remain (the Mondrian's projectivity), with pausing
//! included (a block the pause rule holds for after a deletion collapses into a paused
//! leaf).
//!
//! The statistical tests run at the suite's family-wise level α = 1e-3 (see
//! `common/mod.rs`), with the comparisons of `sampler.rs`: χ² homogeneity of the canonical
//! signature, the leaf count and the depth of every point, and two-sample KS of the root
//! split time.

mod common;

use std::collections::BTreeMap;

use common::*;
use mondrian::process::Feature;
use mondrian::stats::gaussian::{Moments, TargetMoments};
use mondrian::stats::label::LabelCounts;
use mondrian::tree::{MondrianTree, PauseRule, TrainingPoints};
use rand::seq::SliceRandom;
use rand::Rng;

const INF: f64 = f64::INFINITY;

/// `n` points in `d` features on a coarse grid (values repeat, so boxes are often shared
/// by several points and point-id sets form on wide data), with labels in 0..k.
fn grid_data(n: usize, d: usize, k: u32, seed: u64) -> Data {
    let mut r = rng(seed);
    let rows: Vec<Vec<Feature>> = (0..n)
        .map(|_| (0..d).map(|_| r.gen_range(0..5) as Feature / 4.0).collect())
        .collect();
    let refs: Vec<&[Feature]> = rows.iter().map(Vec::as_slice).collect();
    let y: Vec<u32> = (0..n).map(|_| r.gen_range(0..k)).collect();
    Data::new(&refs, &y, k as usize)
}

const MSS3: PauseRule = PauseRule {
    pause_on_pure: false,
    min_samples_split: 3,
};
const MSS3_PURE: PauseRule = PauseRule {
    pause_on_pure: true,
    min_samples_split: 3,
};

/// A canonical description of a tree, independent of node ids: preorder, left first, each
/// node with its time, split, pause flag, box values, sorted leaf points and the given
/// statistics.
fn canonical<S>(
    tree: &MondrianTree,
    stats: &S,
    features: &[Feature],
    node_stats: impl Fn(&S, u32) -> String,
) -> Vec<String> {
    let Some(root) = tree.root() else {
        return Vec::new();
    };
    tree.subtree_preorder(root)
        .into_iter()
        .map(|j| {
            let (lo, hi) = tree.data_box(j, features);
            let shape = match tree.children(j) {
                Some(_) => format!(
                    "split d{} x{:x}",
                    tree.split_dimension(j),
                    tree.split_location(j).to_bits()
                ),
                None => {
                    let mut p = tree.leaf_points(j).to_vec();
                    p.sort_unstable();
                    format!("leaf {p:?} paused {}", tree.is_paused(j))
                }
            };
            format!(
                "τ{:x} {shape} box {lo:?} {hi:?} {}",
                tree.split_time(j).to_bits(),
                node_stats(stats, j)
            )
        })
        .collect()
}

fn label_stats(c: &LabelCounts, j: u32) -> String {
    format!("{:?}", c.node(j))
}

/// Random sequences of insertions and deletions that end on the points they started from
/// give back the tree they started from: structure, times, cuts, boxes, pause flags, leaf
/// points and label counts, for every lifetime/pause combination, on narrow data and on
/// wide data (point-id sets), point by point and as sets.
#[test]
fn insert_then_delete_restores_the_tree_with_label_counts() {
    let configs = [
        (INF, NO_PAUSE),
        (1.5, NO_PAUSE),
        (INF, PAUSE_PURE),
        (2.0, PAUSE_PURE),
        (INF, MSS3),
        (2.0, MSS3_PURE),
    ];
    let mut restored = 0;
    for (di, data) in [grid_data(40, 3, 3, 1), grid_data(40, 70, 2, 2)]
        .iter()
        .enumerate()
    {
        let points = data.points();
        for (ci, &(lifetime, pause)) in configs.iter().enumerate() {
            for rep in 0..8u64 {
                let seed = 1000 * di as u64 + 100 * ci as u64 + rep;
                let mut r = rng(seed);
                let mut ids = data.ids();
                ids.shuffle(&mut r);
                let (base, extra) = ids.split_at(25);
                let (mut tree, mut counts) =
                    build_batch(data, base.to_vec(), lifetime, pause, &mut r);
                let before = canonical(&tree, &counts, &data.x, label_stats);
                // Insert the extras, one by one or as sets, and delete them in a fresh
                // order, with some deletions interleaved with the insertions.
                let mut pending: Vec<u32> = Vec::new();
                let mut inserted = vec![0u32; data.n()];
                base.iter().for_each(|&i| inserted[i as usize] = 1);
                for chunk in extra.chunks(1 + rep as usize % 3) {
                    if chunk.len() == 1 {
                        tree.extend(chunk[0], 1, &points, &mut counts, &mut r);
                    } else {
                        tree.extend_many(chunk.to_vec(), &points, &mut counts, &mut r);
                    }
                    chunk.iter().for_each(|&i| inserted[i as usize] = 1);
                    pending.extend_from_slice(chunk);
                    if r.gen_bool(0.3) {
                        let k = r.gen_range(0..pending.len());
                        let gone = pending.swap_remove(k);
                        assert_eq!(tree.delete(gone, &points, &mut counts), 1);
                        inserted[gone as usize] = 0;
                        check_tree(&tree, &counts, data, &inserted).expect("after a deletion");
                    }
                }
                pending.shuffle(&mut r);
                for gone in pending {
                    assert_eq!(tree.delete(gone, &points, &mut counts), 1);
                    inserted[gone as usize] = 0;
                    check_tree(&tree, &counts, data, &inserted).expect("after a deletion");
                    tree.check_invariants(&points, &counts).expect("invariants");
                }
                let after = canonical(&tree, &counts, &data.x, label_stats);
                assert_eq!(before, after, "data {di}, config {ci}, rep {rep}");
                restored += 1;
            }
        }
    }
    assert_eq!(restored, 2 * 6 * 8);
}

/// The same with the regressor's target moments (min_samples_split pausing, as the
/// regressor has it): structure, times, cuts, boxes and pause flags come back exactly; the
/// moments come back to within rounding (a block the insertion un-paused is set again from
/// its points in another order: Welford's updates then round differently, by a relative
/// 1e-15 or so per point; 1e-9 is far above that and far below any real change).
#[test]
fn insert_then_delete_restores_the_tree_with_target_moments() {
    let data = grid_data(40, 3, 2, 3);
    let targets: Vec<f64> = (0..data.n())
        .map(|i| (i as f64 * 0.37).sin() * 5.0)
        .collect();
    let points = TrainingPoints {
        features: &data.x,
        n_features: data.d,
        targets: &targets,
    };
    let moments = |m: &TargetMoments, j: u32| {
        let v = m.get(j);
        format!("n{}", v.n)
    };
    for (lifetime, mss) in [(INF, 0), (INF, 5), (1.5, 10)] {
        let pause = PauseRule {
            pause_on_pure: false,
            min_samples_split: mss,
        };
        for rep in 0..10u64 {
            let mut r = rng(500 + rep + mss as u64);
            let mut ids = data.ids();
            ids.shuffle(&mut r);
            let (base, extra) = ids.split_at(20);
            let mut tree = MondrianTree::new(data.d, lifetime, pause);
            let mut m = TargetMoments::new();
            tree.fit(base.to_vec(), &points, &mut m, &mut r);
            let before = canonical(&tree, &m, &data.x, moments);
            let snapshot: Vec<Moments> = preorder_moments(&tree, &m);
            for &i in extra {
                tree.extend(i, 1, &points, &mut m, &mut r);
            }
            let mut order = extra.to_vec();
            order.shuffle(&mut r);
            for i in order {
                assert_eq!(tree.delete(i, &points, &mut m), 1);
            }
            assert_eq!(before, canonical(&tree, &m, &data.x, moments));
            for (a, b) in snapshot.iter().zip(preorder_moments(&tree, &m)) {
                let scale = 5.0;
                assert_eq!(a.n, b.n);
                assert!((a.mean - b.mean).abs() <= 1e-9 * scale, "{a:?} {b:?}");
                assert!(
                    (a.m2 - b.m2).abs() <= 1e-9 * a.n * scale * scale,
                    "{a:?} {b:?}"
                );
            }
        }
    }
}

fn preorder_moments(tree: &MondrianTree, m: &TargetMoments) -> Vec<Moments> {
    tree.root()
        .map(|r| tree.subtree_preorder(r))
        .unwrap_or_default()
        .into_iter()
        .map(|j| m.get(j))
        .collect()
}

/// Statistics after any sequence of deletions from a batch-grown tree equal a
/// recomputation from scratch over the points that remain: label counts against the
/// independent recount of `check_tree` (leaf histograms, internal min(c,1) sums), target
/// moments against a post-order recomputation (Welford at leaves in list order, pairwise
/// merges above), bit for bit.
#[test]
fn statistics_after_deletions_equal_a_recomputation() {
    let data = grid_data(60, 4, 3, 5);
    let points = data.points();
    let targets: Vec<f64> = (0..data.n()).map(|i| (i as f64).sqrt() - 3.0).collect();
    let reg_points = TrainingPoints {
        features: &data.x,
        n_features: data.d,
        targets: &targets,
    };
    for (lifetime, pause) in [(INF, PAUSE_PURE), (2.0, MSS3_PURE), (INF, NO_PAUSE)] {
        for rep in 0..6u64 {
            let mut r = rng(900 + rep);
            let (mut tree, mut counts) = build_batch(&data, data.ids(), lifetime, pause, &mut r);
            let reg_pause = PauseRule {
                pause_on_pure: false,
                ..pause
            };
            let mut reg = MondrianTree::new(data.d, lifetime, reg_pause);
            let mut m = TargetMoments::new();
            reg.fit(data.ids(), &reg_points, &mut m, &mut r);
            let mut inserted = vec![1u32; data.n()];
            let mut order = data.ids();
            order.shuffle(&mut r);
            for (step, &i) in order.iter().enumerate().take(50) {
                assert_eq!(tree.delete(i, &points, &mut counts), 1);
                assert_eq!(reg.delete(i, &reg_points, &mut m), 1);
                inserted[i as usize] = 0;
                check_tree(&tree, &counts, &data, &inserted)
                    .unwrap_or_else(|e| panic!("step {step}: {e}"));
                tree.check_invariants(&points, &counts).expect("invariants");
                reg.check_invariants(&reg_points, &m).expect("invariants");
                assert_moments_recomputed(&reg, &m, &targets);
            }
        }
    }
}

fn assert_moments_recomputed(tree: &MondrianTree, m: &TargetMoments, targets: &[f64]) {
    let Some(root) = tree.root() else {
        return;
    };
    let mut exact: BTreeMap<u32, Moments> = BTreeMap::new();
    for &j in tree.subtree_preorder(root).iter().rev() {
        let v = match tree.children(j) {
            Some((l, r)) => Moments::merge(exact[&l], exact[&r]),
            None => {
                let mut v = Moments::default();
                for &i in tree.leaf_points(j) {
                    v.push(targets[i as usize], 1.0);
                }
                v
            }
        };
        assert_eq!(m.get(j), v, "node {j}");
        exact.insert(j, v);
    }
}

/// Deleting a point the tree does not hold (never given, or given to other trees only
/// under bagging) changes nothing.
#[test]
fn deleting_a_point_the_tree_does_not_hold_changes_nothing() {
    let data = grid_data(30, 3, 2, 7);
    let points = data.points();
    let mut r = rng(8);
    let (mut tree, mut counts) = build_batch(&data, (0..20).collect(), INF, PAUSE_PURE, &mut r);
    let before = canonical(&tree, &counts, &data.x, label_stats);
    for i in 20..30 {
        assert_eq!(tree.delete(i, &points, &mut counts), 0);
    }
    assert_eq!(before, canonical(&tree, &counts, &data.x, label_stats));
    // The last point leaves an empty tree, which grows again.
    let mut single = MondrianTree::new(3, INF, PAUSE_PURE);
    let mut c = LabelCounts::new(2);
    single.extend(4, 3, &points, &mut c, &mut r);
    assert_eq!(single.delete(4, &points, &mut c), 3);
    assert!(single.root().is_none());
    single.extend(5, 1, &points, &mut c, &mut r);
    single.check_invariants(&points, &c).expect("invariants");
}

/// A block that becomes label-pure, or falls below min_samples_split, collapses into a
/// paused leaf, as batch training on the remaining points would have left it. Three
/// points share a corner (labels 0, 0, 1) far from the others; with purity pausing, the
/// block over them splits; deleting the label-1 point leaves the other two a pure block,
/// which must be one paused leaf holding both. With min_samples_split 3, deleting one of
/// the three leaves a block of two, which must be paused too.
#[test]
fn a_block_left_pure_or_small_collapses_into_a_paused_leaf() {
    let data = Data::new(
        &[
            &[0.0, 0.0],
            &[0.05, 0.02],
            &[0.02, 0.06],
            &[1.0, 1.0],
            &[0.9, 0.8],
            &[1.0, 0.7],
        ],
        &[0, 0, 1, 1, 1, 0],
        2,
    );
    let points = data.points();
    let paused_leaf_of = |tree: &MondrianTree, ids: &[u32]| {
        let leaf = tree.leaf_of(data.row(ids[0]));
        let mut held = tree.leaf_points(leaf).to_vec();
        held.sort_unstable();
        (held == ids, tree.is_paused(leaf))
    };
    let mut collapsed = [0, 0];
    for seed in 0..200u64 {
        for (case, (pause, gone, rest)) in [
            (PAUSE_PURE, 2u32, vec![0u32, 1]),
            (MSS3, 0u32, vec![1u32, 2]),
        ]
        .into_iter()
        .enumerate()
        {
            let mut r = rng(seed);
            let (mut tree, mut counts) = build_batch(&data, data.ids(), INF, pause, &mut r);
            // Is the corner block split before the deletion?
            let split_before = !tree.is_leaf(tree.leaf_of(data.row(0)))
                || tree.leaf_of(data.row(0)) != tree.leaf_of(data.row(1))
                || tree.leaf_of(data.row(0)) != tree.leaf_of(data.row(2));
            assert_eq!(tree.delete(gone, &points, &mut counts), 1);
            let mut inserted = vec![1u32; 6];
            inserted[gone as usize] = 0;
            check_tree(&tree, &counts, &data, &inserted).expect("checks");
            tree.check_invariants(&points, &counts).expect("invariants");
            // Where the two remaining corner points form a block of their own, batch on the
            // five remaining points pauses it: the deletion must leave one paused leaf.
            let lowest_common = common_block(&tree, data.row(rest[0]), data.row(rest[1]));
            let block_points = points_below(&tree, lowest_common);
            // Batch on the remaining points would have paused every block the predicate
            // holds for; so would the deletion: no internal node may satisfy it.
            assert_no_internal_node_pauses(&tree, &data, pause);
            if block_points == rest {
                let (same, paused) = paused_leaf_of(&tree, &rest);
                assert!(same && paused, "seed {seed}, case {case}");
                collapsed[case] += usize::from(split_before);
            }
        }
    }
    // The collapse itself happened often in both cases.
    assert!(collapsed.iter().all(|&c| c > 50), "{collapsed:?}");
}

fn common_block(tree: &MondrianTree, a: &[Feature], b: &[Feature]) -> u32 {
    let mut j = tree.root().expect("a tree");
    while let Some((l, r)) = tree.children(j) {
        let (ja, jb) = (tree.route(j, a), tree.route(j, b));
        if ja != jb {
            return j;
        }
        j = if ja == l { l } else { r };
    }
    j
}

fn points_below(tree: &MondrianTree, node: u32) -> Vec<u32> {
    let mut p: Vec<u32> = tree
        .subtree_preorder(node)
        .into_iter()
        .flat_map(|j| tree.leaf_points(j).to_vec())
        .collect();
    p.sort_unstable();
    p
}

fn assert_no_internal_node_pauses(tree: &MondrianTree, data: &Data, pause: PauseRule) {
    let Some(root) = tree.root() else {
        return;
    };
    for j in tree.subtree_preorder(root) {
        if tree.children(j).is_some() {
            let below = points_below(tree, j);
            let pure = below
                .iter()
                .all(|&i| data.y[i as usize] == data.y[below[0] as usize]);
            assert!(
                !(pause.pause_on_pure && pure) && below.len() >= pause.min_samples_split,
                "internal node {j} over {below:?} should have been paused"
            );
        } else if points_below(tree, j).len() < pause.min_samples_split {
            assert!(
                tree.is_paused(j),
                "leaf {j} below min_samples_split not paused"
            );
        }
    }
}

/// How a tree on the remaining points is obtained in the distribution test.
enum Road {
    /// Batch on the remaining points.
    Batch,
    /// Batch on all points, then the deleted ones removed in a fresh random order.
    BatchThenDelete,
    /// All points inserted online in a fresh order, then the deleted ones removed.
    OnlineThenDelete,
    /// Batch on the remaining points, then the deleted ones inserted and deleted again
    /// one at a time.
    InsertDeleteCycles,
}

/// Deleting a fixed half of the points gives trees distributed as batch trees on the
/// other half (projectivity; spec `mondrian-polya-forest.md` §7.3, §11 item 17), with and
/// without pausing, finite and infinite lifetime.
fn assert_deletion_equals_batch(name: &str, data: &Data, lifetime: f64, pause: PauseRule) {
    let n = data.n();
    let points = data.points();
    let all = data.ids();
    let mut half = permutation(&all, 41);
    half.truncate(n / 2);
    let rest: Vec<u32> = all.iter().copied().filter(|i| !half.contains(i)).collect();
    let n_trees = 6000;
    let roads = [
        Road::Batch,
        Road::BatchThenDelete,
        Road::OnlineThenDelete,
        Road::InsertDeleteCycles,
    ];
    let mut signatures = Vec::new();
    let mut leaves = Vec::new();
    let mut depths: Vec<Vec<BTreeMap<usize, u64>>> = Vec::new();
    let mut root_tau: Vec<Vec<f64>> = Vec::new();
    for (ri, road) in roads.iter().enumerate() {
        let mut r = rng(7000 + ri as u64);
        let (mut sig, mut lv) = (BTreeMap::new(), BTreeMap::new());
        let mut dp = vec![BTreeMap::new(); n];
        let mut tau = Vec::with_capacity(n_trees);
        for it in 0..n_trees {
            let (tree, counts) = match road {
                Road::Batch => build_batch(data, rest.clone(), lifetime, pause, &mut r),
                Road::BatchThenDelete | Road::OnlineThenDelete => {
                    let (mut t, mut c) = match road {
                        Road::BatchThenDelete => {
                            build_batch(data, all.clone(), lifetime, pause, &mut r)
                        }
                        _ => {
                            let mut order = all.clone();
                            order.shuffle(&mut r);
                            build_online(data, &order, lifetime, pause, &mut r)
                        }
                    };
                    let mut gone = half.clone();
                    gone.shuffle(&mut r);
                    for i in gone {
                        assert_eq!(t.delete(i, &points, &mut c), 1);
                    }
                    (t, c)
                }
                Road::InsertDeleteCycles => {
                    let (mut t, mut c) = build_batch(data, rest.clone(), lifetime, pause, &mut r);
                    for &i in &half {
                        t.extend(i, 1, &points, &mut c, &mut r);
                        assert_eq!(t.delete(i, &points, &mut c), 1);
                    }
                    (t, c)
                }
            };
            if it < 100 {
                let mut inserted = vec![0u32; n];
                rest.iter().for_each(|&i| inserted[i as usize] = 1);
                check_tree(&tree, &counts, data, &inserted).expect("checks");
            }
            *sig.entry(signature(&tree)).or_insert(0u64) += 1;
            *lv.entry(count_leaves(&tree)).or_insert(0u64) += 1;
            for &i in &rest {
                let d = point_depths(&tree, n)[i as usize];
                *dp[i as usize].entry(d).or_insert(0u64) += 1;
            }
            tau.push(tree.split_time(tree.root().expect("a tree")));
        }
        signatures.push(sig);
        leaves.push(lv);
        depths.push(dp);
        root_tau.push(tau);
    }
    let mut fam = Family::new(&format!("deletion = batch on the rest: {name}"));
    fam.push("signature", chi2_homogeneity(&signatures));
    fam.push(
        format!("leaf count {:?}", leaves[0]),
        chi2_homogeneity(&leaves),
    );
    for &i in &rest {
        let d: Vec<_> = depths.iter().map(|s| s[i as usize].clone()).collect();
        fam.push(format!("depth of point {i}"), chi2_homogeneity(&d));
    }
    for ri in 1..roads.len() {
        fam.push(
            format!("root τ: batch vs road {ri}"),
            ks_two_sample(&root_tau[0], &root_tau[ri]),
        );
    }
    fam.assert();
}

#[test]
fn deletion_equals_batch_no_pausing() {
    let data = grid_data(12, 2, 3, 11);
    assert_deletion_equals_batch("no pausing, λ = ∞", &data, INF, NO_PAUSE);
    assert_deletion_equals_batch("no pausing, λ = 1.5", &data, 1.5, NO_PAUSE);
}

#[test]
fn deletion_equals_batch_with_pausing() {
    let data = labelled_with_duplicates();
    let doubled = {
        // Fourteen points: the seven twice over, shifted, so that deleting half leaves
        // pure and small blocks often.
        let mut rows: Vec<Vec<Feature>> = (0..7).map(|i| data.row(i).to_vec()).collect();
        rows.extend((0..7).map(|i| data.row(i).iter().map(|v| v * 0.5 + 0.3).collect()));
        let refs: Vec<&[Feature]> = rows.iter().map(Vec::as_slice).collect();
        let mut y = data.y.clone();
        y.extend(data.y.iter().map(|c| (c + 1) % 3));
        Data::new(&refs, &y, 3)
    };
    assert_deletion_equals_batch("pause on pure, λ = ∞", &doubled, INF, PAUSE_PURE);
    assert_deletion_equals_batch(
        "pure + min_samples_split 3, λ = 2",
        &doubled,
        2.0,
        MSS3_PURE,
    );
}

/// Through insertions and deletions of a sliding window the arena stays within a bound set
/// by the window (freed nodes, boxes and sets are reused), on narrow and on wide data.
#[test]
fn a_sliding_window_keeps_the_arena_bounded() {
    for d in [3, 70] {
        let data = grid_data(600, d, 3, 13);
        let points = data.points();
        let mut r = rng(14);
        let mut tree = MondrianTree::new(d, INF, PAUSE_PURE);
        let mut counts = LabelCounts::new(3);
        let w = 50;
        let mut most = 0;
        for i in 0..data.n() as u32 {
            tree.extend(i, 1, &points, &mut counts, &mut r);
            if i as usize >= w {
                assert_eq!(tree.delete(i - w as u32, &points, &mut counts), 1);
            }
            most = most.max(tree.n_nodes());
            if i % 97 == 0 {
                tree.check_invariants(&points, &counts).expect("invariants");
            }
        }
        assert!(tree.n_live_nodes() < 2 * w, "{}", tree.n_live_nodes());
        // At most 2W − 1 live nodes, plus nodes an insertion takes before the deletion
        // that follows it gives them back.
        assert!(
            most <= 2 * w + 2,
            "arena grew to {most} for a window of {w}"
        );
        assert!(
            tree.heap_bytes() < 2 * (2 * w + 2) * (32 + 8 * d + 64),
            "{}",
            tree.heap_bytes()
        );
    }
}
