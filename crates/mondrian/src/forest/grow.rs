//! Growing a forest's trees on new points, in parallel, and letting old ones go: the
//! roads of spec `mf-classification.md` §2.6 (batch sampling of an empty tree, set
//! extension of a large batch, interleaved point-by-point insertion), and the deletions of
//! a sliding window in the same pass.

use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

use super::pool::Pool;
use super::{helpers, multiplicity, Growth, Progress, TreeUnit};
use crate::process::Feature;
use crate::tree::{NodeStatistics, TrainingPoints, NO_NODE};

/// Most trees that take a training point with interleaved descents (more descents in
/// flight overlap more cache misses); a group is also the unit of parallel work, so
/// [`Pool::tree_group`] sizes groups to spread the trees evenly over the threads.
pub(super) const TREE_GROUP: usize = 32;
// Trees of a group are named by a `u8` in the descents' work list.
const _: () = assert!(TREE_GROUP <= 256);
/// How many statistics records at the bottom of an insertion's route are prefetched.
const STATS_AHEAD: usize = 2;
/// How many levels above a deleted point's leaf have their sibling's box and statistics
/// prefetched before the deletion's upward pass (a boundary point usually moves a few boxes).
const SIBLINGS_AHEAD: usize = 6;
/// Most new points of one call that [`grow_trees`] gives to the stream helpers
/// ([`helpers`]) rather than to the pool.
const STREAM_POINTS: usize = 4;
/// Fewest trees whose streamed points are shared with the helpers: below, the work of a
/// point is too small to split.
const STREAM_MIN_TREES: usize = 16;

/// Mini-batches of at least this many points, and at least as many as the trees already
/// hold, extend each tree as one set ([`MondrianTree::extend_many`]); the others take the
/// interleaved per-point road, which is faster where a batch's points part ways high in
/// the tree (`experiments/benchmarks.md`, "Mini-batches as sets").
const SET_EXTENSION_MIN: usize = 2;

/// The points one call hands to [`grow_trees`].
pub(crate) struct Change<'a> {
    /// Points that leave every tree first (exact deletion), by slot.
    pub(crate) leaving: &'a [u32],
    /// New points, (slot, id) in arrival order.
    pub(crate) arriving: &'a [(u32, u64)],
    /// Points the trees hold once the leaving ones are gone (a batch at least as large
    /// goes in as a set).
    pub(crate) held: usize,
    /// The forest's index of the first tree given (tree t's draws are keyed by it).
    pub(crate) first_tree: usize,
    /// Sample weight of each slot; empty when all are 1.
    pub(crate) weights: &'a [f64],
}

/// Updates every tree, in parallel: the leaving points are deleted from it (spec
/// `mondrian-polya-forest.md` §7.3), then the arriving ones inserted: an empty tree is
/// batch-sampled on them ([P] Alg. 1), any other is extended by them as one set
/// ([`MondrianTree::extend_many`](crate::tree::MondrianTree::extend_many), for a large
/// batch) or point by point in order (Alg. 3); all give the same distribution (spec §2.6).
/// The point with id `i` in slot `s` counts `multiplicity(seed, tree, i, weight of s,
/// bagging)` times in every road (1 without weights or bagging). `data` must hold the rows
/// of both. `progress` hears of each group of trees done.
pub(crate) fn grow_trees<S>(
    trees: &mut [TreeUnit<S>],
    data: &TrainingPoints<S::Target>,
    change: Change<'_>,
    growth: Growth,
    pool: &Pool,
    progress: Option<&Progress>,
) where
    S: NodeStatistics + Send,
    S::Target: Sync,
{
    let Change {
        leaving,
        arriving,
        held,
        first_tree: offset,
        weights,
    } = change;
    let Growth {
        seed,
        bagging,
        time_ordered,
        ..
    } = growth;
    let plain = weights.is_empty() && !bagging;
    let weight = move |t: usize, slot: u32, id: u64| {
        if plain {
            1
        } else {
            let w = weights.get(slot as usize).copied().unwrap_or(1.0);
            multiplicity(seed, offset + t, id, w, bagging)
        }
    };
    // The batch as tree `t` sees it: each point repeated by its weight.
    let multiset = move |t: usize| -> Vec<u32> {
        arriving
            .iter()
            .flat_map(|&(slot, id)| std::iter::repeat_n(slot, weight(t, slot, id) as usize))
            .collect()
    };
    let n_trees = trees.len();
    let done = AtomicUsize::new(0);
    let report = |n: usize| {
        if let Some(p) = progress {
            p.report(done.fetch_add(n, Ordering::Relaxed) + n, n_trees);
        }
    };
    // Trees go in chunks; within a chunk the descents of each point interleave so that
    // the trees' cache misses overlap (a descent waits on each node it loads).
    let group = pool.tree_group(trees.len());
    let grow = |(c, chunk): (usize, &mut [TreeUnit<S>])| {
        let first_tree = c * group;
        for &slot in leaving {
            descend::<S, true>(chunk, data.row(slot), data.features, |_| true);
            // The upward pass of a deletion reads each route node's other child, box and
            // statistics: ask for those of every tree before the first pass starts.
            for unit in chunk.iter() {
                for sibling in unit.tree.route_siblings(SIBLINGS_AHEAD) {
                    unit.tree.prefetch_box(sibling, data.features);
                    unit.stats.prefetch(sibling);
                }
            }
            for unit in chunk.iter_mut() {
                unit.tree.delete_routed(slot, data, &mut unit.stats);
            }
        }
        if arriving.is_empty() {
            return;
        }
        if arriving.len() >= SET_EXTENSION_MIN.max(held) {
            // A mini-batch at least as large as what the trees hold extends each tree as
            // one set: the top of the tree is visited once per batch instead of once per
            // point (same law, spec §2.6). Smaller batches spread over distinct deep paths,
            // where the per-point road below, with its interleaved descents, is faster.
            for (t, unit) in chunk.iter_mut().enumerate() {
                let points = multiset(first_tree + t);
                if time_ordered && unit.tree.root().is_none() {
                    unit.tree
                        .fit_in_time_order(points, data, &mut unit.stats, &mut unit.rng);
                } else {
                    unit.tree
                        .extend_many(points, data, &mut unit.stats, &mut unit.rng);
                }
            }
            return;
        }
        // An empty tree is batch-sampled on the whole batch and then sits it out.
        let mut sampled = [false; TREE_GROUP];
        for (t, unit) in chunk.iter_mut().enumerate() {
            if unit.tree.root().is_none() {
                let points = multiset(first_tree + t);
                if time_ordered {
                    unit.tree
                        .fit_in_time_order(points, data, &mut unit.stats, &mut unit.rng);
                } else {
                    unit.tree.fit(points, data, &mut unit.stats, &mut unit.rng);
                }
                sampled[t] = true;
            }
        }
        let mut weights = [0u32; TREE_GROUP];
        for &(slot, id) in arriving {
            for (t, w) in weights.iter_mut().enumerate().take(chunk.len()) {
                *w = if sampled[t] {
                    0
                } else {
                    weight(first_tree + t, slot, id)
                };
            }
            descend::<S, false>(chunk, data.row(slot), data.features, |t| weights[t] > 0);
            for (unit, &w) in chunk.iter_mut().zip(weights.iter()) {
                if w > 0 {
                    unit.tree
                        .extend_routed(slot, w, data, &mut unit.stats, &mut unit.rng);
                }
            }
        }
    };
    let work = |(c, chunk): (usize, &mut [TreeUnit<S>])| {
        let n = chunk.len();
        grow((c, chunk));
        report(n);
    };
    // A point (or a few) of a stream goes to the helpers if there are any and enough
    // trees to share; without them it stays on this thread, as does work of one group.
    let streamed = arriving.len() <= STREAM_POINTS;
    let helpers = match streamed && trees.len() >= STREAM_MIN_TREES {
        true => pool.helpers(),
        false => None,
    };
    if let Some(helpers) = helpers {
        // The caller and each helper take an equal share of whole groups.
        let share = trees.len().div_ceil(group).div_ceil(helpers.shares()) * group;
        let work = &work;
        let mut shares: Vec<_> = trees
            .chunks_mut(share)
            .enumerate()
            .map(|(p, part)| {
                move || {
                    for (c, chunk) in part.chunks_mut(group).enumerate() {
                        work((p * share / group + c, chunk));
                    }
                }
            })
            .collect();
        let mut jobs: Vec<&mut helpers::Job<'_>> = shares
            .iter_mut()
            .map(|share| share as &mut helpers::Job<'_>)
            .collect();
        helpers.run(&mut jobs);
    } else if pool.is_serial() || streamed || trees.len() <= TREE_GROUP {
        trees.chunks_mut(group).enumerate().for_each(work);
    } else {
        pool.install(|| trees.par_chunks_mut(group).enumerate().for_each(work));
    }
}

/// Routes `x` to its leaf in each tree `t` of `chunk` with `wanted(t)`, recording the
/// routes for [`extend_routed`](crate::tree::MondrianTree::extend_routed) or
/// [`delete_routed`](crate::tree::MondrianTree::delete_routed). The descents advance in
/// lockstep, one level each in turn, so that the trees' cache misses overlap (a descent
/// waits on each node it loads); a tree that reaches its leaf leaves the list, so later
/// rounds visit only trees with work.
#[inline(always)]
fn descend<S: NodeStatistics, const DELETING: bool>(
    chunk: &mut [TreeUnit<S>],
    x: &[Feature],
    features: &[Feature],
    wanted: impl Fn(usize) -> bool,
) {
    let mut live = [(0u8, NO_NODE); TREE_GROUP];
    let mut n_live = 0;
    for (t, unit) in chunk.iter_mut().enumerate() {
        if wanted(t) {
            let root = unit.tree.route_begin();
            if root != NO_NODE {
                live[n_live] = (t as u8, root);
                n_live += 1;
            }
        }
    }
    while n_live > 0 {
        let mut k = 0;
        while k < n_live {
            let (t, node) = live[k];
            let unit = &mut chunk[t as usize];
            let next = unit.tree.route_advance(node, x, features);
            if next == NO_NODE {
                // The statistics an update reads: the leaf's and its parents'.
                for j in unit.tree.route_tail(STATS_AHEAD) {
                    unit.stats.prefetch(j);
                }
                n_live -= 1;
                live[k] = live[n_live];
            } else {
                if DELETING {
                    unit.tree.prefetch_sibling(node, next);
                }
                live[k].1 = next;
                k += 1;
            }
        }
    }
}
