//! Online insertion: the conditional Mondrian extension of a tree by new points (spec
//! `mf-classification.md` §2.4–2.6, \[P\] Alg. 3–4 and 10), one point at a time or a set
//! at once, with the re-sampling of paused blocks that un-pause.

use rand::Rng;

use super::arena::INLINE_POINTS;
use super::{MondrianTree, NodeStatistics, TrainingPoints, NO_NODE};
use crate::process::{
    grow_box, sample_exponential, sample_extension_cut, sample_set_extension_cut,
    set_extension_rate, Feature,
};
use crate::simd::{self, Dispatched, Kernels};

impl MondrianTree {
    /// Online extension by training point `point` with multiplicity `weight ≥ 1`
    /// (spec §2.4–2.5, \[P\] Alg. 3–4 and 10 with the corrections of §9). The result has the
    /// distribution of batch sampling on all points seen so far (§2.6).
    pub fn extend<S: NodeStatistics, R: Rng + ?Sized>(
        &mut self,
        point: u32,
        weight: u32,
        data: &TrainingPoints<S::Target>,
        stats: &mut S,
        rng: &mut R,
    ) {
        let x = data.row(point);
        let mut node = self.route_begin();
        while node != NO_NODE {
            node = self.route_advance(node, x, data.features);
        }
        self.extend_routed(point, weight, data, stats, rng);
    }

    /// [`extend`](Self::extend) after the point's route was recorded by
    /// [`route_begin`](Self::route_begin) / [`route_advance`](Self::route_advance).
    pub fn extend_routed<S: NodeStatistics, R: Rng + ?Sized>(
        &mut self,
        point: u32,
        weight: u32,
        data: &TrainingPoints<S::Target>,
        stats: &mut S,
        rng: &mut R,
    ) {
        debug_assert!(weight >= 1);
        let x = data.row(point);
        let y = data.target(point);
        debug_assert!(self.path.last().is_none_or(|&(l, _)| self.is_leaf(l)));
        if self.root == NO_NODE {
            self.root = self.new_node(NO_NODE, stats);
            self.new_leaf(self.root, point, weight, data, stats);
            return;
        }
        // The loop follows the recorded route: until it stops, nothing it does moves a
        // split, so the point is routed exactly as recorded.
        let mut k = self.first_node_outside(x, data.features);
        loop {
            let j = self.path[k].0;
            let ju = j as usize;
            if self.nodes[ju].paused() {
                let stays_paused = self
                    .pause
                    .holds_after(self.leaf_len(j), weight, stats, j, y);
                self.extend_box(j, point, data, self.path[k].1 > 0.0);
                // Re-sampling the block below leaves the node's statistics those of its
                // points, the old ones plus this one: above it, the change is the point's.
                let reaches_parent = stats.absorb_leaf(j, y, weight);
                if stays_paused {
                    self.push_leaf_point(j, point, weight);
                } else {
                    let mut set = self.take_leaf_points(j);
                    set.extend(std::iter::repeat_n(point, weight as usize));
                    self.resample(j, set, data, stats, rng);
                }
                if reaches_parent {
                    self.propagate_absorb(self.nodes[ju].parent, y, weight, stats);
                }
                return;
            }
            let eta = self.path[k].1;
            let tp = self.parent_split_time(j);
            let e = sample_exponential(rng, eta);
            if tp + e < self.nodes[ju].tau {
                self.insert_parent(j, tp + e, eta, point, weight, data, stats, rng);
                return;
            }
            self.extend_box(j, point, data, eta > 0.0);
            if self.is_leaf(j) {
                self.push_leaf_point(j, point, weight);
                if stats.absorb_leaf(j, y, weight) {
                    self.propagate_absorb(self.nodes[ju].parent, y, weight, stats);
                }
                return;
            }
            k += 1;
        }
    }

    /// Online extension by a set of training points at once (ids may repeat: multiplicity).
    /// The result has the law of batch sampling on all points seen so far, like inserting
    /// them one by one with [`extend`](Self::extend) (spec §2.6), but each node is visited
    /// once per set instead of once per point.
    ///
    /// Why it holds: the Mondrian process of a grown box restricted to the old box is the
    /// old tree's process, so at node `j` with old box `B` and new points with bounding box
    /// `P`, the first cut of `bbox(B ∪ P)` that misses `B` comes after `Exp(η)` with `η` the
    /// linear extension of `B` by `P`, in a dimension ∝ its protrusion, uniform on the
    /// protruding part (the set version of \[P\] Alg. 4). If it comes before `τ_j`, a new
    /// parent holds it: the points beyond the cut form a fresh block sampled from that time
    /// (\[P\] Alg. 9), the others continue at `j` with the new parent's time (memorylessness).
    /// Otherwise `j`'s cut extends to the grown box and the points are routed by it. A
    /// paused leaf takes the points and re-samples its block once the pause no longer holds,
    /// as in Alg. 10. Each change of a node's statistics is carried up to the root, as far
    /// as it changes anything.
    pub fn extend_many<S: NodeStatistics, R: Rng + ?Sized>(
        &mut self,
        points: Vec<u32>,
        data: &TrainingPoints<S::Target>,
        stats: &mut S,
        rng: &mut R,
    ) {
        if points.is_empty() {
            return;
        }
        if self.root == NO_NODE {
            self.fit(points, data, stats, rng);
            return;
        }
        let d = self.n_features;
        let (mut lo, mut hi) = (vec![0.0; d], vec![0.0; d]);
        let mut stack = vec![(self.root, points, 0.0f64)];
        while let Some((j, set, tp)) = stack.pop() {
            let ju = j as usize;
            if set.len() == 1 {
                // One point left: the per-point road from here on (the same law), which
                // routes first and reads only the boxes the point lies outside (the
                // ancestors' boxes already contain it).
                let x = data.row(set[0]);
                let mut node = j;
                self.path.clear();
                while node != NO_NODE {
                    node = self.route_advance(node, x, data.features);
                }
                self.extend_routed(set[0], 1, data, stats, rng);
                continue;
            }
            lo.copy_from_slice(data.row(set[0]));
            hi.copy_from_slice(data.row(set[0]));
            for &i in &set[1..] {
                grow_box(&mut lo, &mut hi, data.row(i));
            }
            if self.nodes[ju].paused() {
                self.grow_box_by(j, &lo, &hi, &set, data.features);
                let mut all = self.take_leaf_points(j);
                all.extend_from_slice(&set);
                if self.pause.holds(&all, stats, data.targets) {
                    stats.set_leaf(j, &all, data.targets);
                    self.put_leaf_vec(j, all);
                } else {
                    self.resample(j, all, data, stats, rng);
                }
                self.propagate_recompute(self.nodes[ju].parent, stats);
                continue;
            }
            let mut hull = std::mem::take(&mut self.hull);
            let (lower, upper) = self.box_in(j, data.features, &mut hull);
            let eta = set_extension_rate(lower, upper, &lo, &hi);
            let t = tp + sample_exponential(rng, eta);
            let cut = (t < self.nodes[ju].tau)
                .then(|| sample_set_extension_cut(rng, lower, upper, &lo, &hi, eta));
            self.hull = hull;
            if let Some(cut) = cut {
                let (beyond, near): (Vec<u32>, Vec<u32>) = set.iter().partition(|&&i| {
                    (data.row(i)[cut.dimension] > cut.location) == cut.point_goes_right
                });
                let parent = self.insert_parent_above(
                    j,
                    t,
                    cut.dimension,
                    cut.location,
                    data.features,
                    stats,
                );
                self.grow_box_by(parent, &lo, &hi, &set, data.features);
                let sibling = self.new_node(parent, stats);
                let pu = parent as usize;
                if cut.point_goes_right {
                    self.nodes[pu].pair[0] = sibling;
                } else {
                    self.nodes[pu].left = sibling;
                }
                self.sample_block(sibling, beyond, t, data, stats, rng);
                self.propagate_recompute(parent, stats);
                if !near.is_empty() {
                    stack.push((j, near, t));
                }
                continue;
            }
            self.grow_box_by(j, &lo, &hi, &set, data.features);
            if self.is_leaf(j) {
                // A leaf at the end of its lifetime takes the points.
                self.append_leaf_points(j, set.iter().copied());
                stats.set_leaf(j, self.leaf_points(j), data.targets);
                self.propagate_recompute(self.nodes[ju].parent, stats);
                continue;
            }
            let (dim, loc) = (self.nodes[ju].dim(), self.nodes[ju].split_loc());
            let (left, right): (Vec<u32>, Vec<u32>) =
                set.iter().partition(|&&i| data.row(i)[dim] <= loc);
            let tau = self.nodes[ju].tau;
            if !right.is_empty() {
                stack.push((self.nodes[ju].right(), right, tau));
            }
            if !left.is_empty() {
                stack.push((self.nodes[ju].left, left, tau));
            }
        }
    }

    /// Re-samples paused leaf `node`'s block from its parent's time on `points` (\[P\]
    /// Alg. 10), which also sets the new subtree's statistics; the ancestors are the
    /// caller's to update.
    pub(super) fn resample<S: NodeStatistics, R: Rng + ?Sized>(
        &mut self,
        node: u32,
        points: Vec<u32>,
        data: &TrainingPoints<S::Target>,
        stats: &mut S,
        rng: &mut R,
    ) {
        debug_assert_eq!(
            self.leaf_len(node),
            0,
            "the caller takes the leaf's points first"
        );
        self.nodes[node as usize].set_paused(false);
        let tp = self.parent_split_time(node);
        self.sample_block(node, points, tp, data, stats, rng);
    }

    /// Inserts a new internal node above `node` at time `tau` with the given cut, `node` as
    /// its only child so far (on the side of the cut `node`'s box lies on) and `node`'s
    /// box; the caller adds the other child. Returns the new node.
    pub(super) fn insert_parent_above<S: NodeStatistics>(
        &mut self,
        node: u32,
        tau: f64,
        dim: usize,
        loc: Feature,
        features: &[Feature],
        stats: &mut S,
    ) -> u32 {
        let old_parent = self.nodes[node as usize].parent;
        let new_parent = self.new_node(old_parent, stats);
        let np = new_parent as usize;
        if old_parent == NO_NODE {
            self.root = new_parent;
        } else if self.nodes[old_parent as usize].left == node {
            self.nodes[old_parent as usize].left = new_parent;
        } else {
            self.nodes[old_parent as usize].pair[0] = new_parent;
        }
        self.nodes[np].set_split(dim, loc);
        self.nodes[np].tau = tau;
        self.nodes[np].slot = self.copy_box(node, features);
        if self.upper_at(node, dim, features) <= loc {
            self.nodes[np].left = node;
        } else {
            self.nodes[np].pair[0] = node;
        }
        self.nodes[node as usize].parent = new_parent;
        new_parent
    }

    /// Where an insertion of `x` starts to do anything: the first node on its path whose box
    /// does not contain `x`, or the leaf if every box does. Above it η = 0, so the walk of
    /// spec §2.4 would draw nothing, leave the boxes as they are and only route (boxes are
    /// nested: the nodes containing `x` form a prefix of the path). Routing to the leaf and
    /// measuring η upwards skips the D-dimensional distances of that prefix and draws
    /// exactly the same random numbers.
    ///
    /// Returns the position of that node on the recorded route, whose entries from there
    /// down then hold their η.
    pub(super) fn first_node_outside(&mut self, x: &[Feature], features: &[Feature]) -> usize {
        #[cfg(target_arch = "x86_64")]
        if let Some(k) = simd::avx() {
            // SAFETY: an `Avx` exists only when the CPU has AVX.
            return unsafe { self.first_node_outside_avx(k, x, features) };
        }
        self.first_node_outside_with(Dispatched, x, features)
    }

    /// [`first_node_outside`](Self::first_node_outside) compiled for AVX.
    ///
    /// # Safety
    /// The CPU has AVX (`k` proves it).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx")]
    unsafe fn first_node_outside_avx(
        &mut self,
        k: simd::Avx,
        x: &[Feature],
        features: &[Feature],
    ) -> usize {
        self.first_node_outside_with(k, x, features)
    }

    #[inline(always)]
    fn first_node_outside_with<K: Kernels>(
        &mut self,
        kernels: K,
        x: &[Feature],
        features: &[Feature],
    ) -> usize {
        let mut path = std::mem::take(&mut self.path);
        let n = path.len();
        let first = self.measure_upwards_with(
            kernels,
            x,
            features,
            &mut path,
            |&(node, _)| node,
            |entry, eta| {
                entry.1 = eta;
            },
        );
        self.path = path;
        // Every box contains x: the walk starts (and ends) at the leaf.
        first.min(n - 1)
    }
    /// Inserts a new parent above `node` at time `tau` whose other child is a new leaf
    /// holding `point` (spec §2.4 step 3).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn insert_parent<S: NodeStatistics, R: Rng + ?Sized>(
        &mut self,
        node: u32,
        tau: f64,
        eta: f64,
        point: u32,
        weight: u32,
        data: &TrainingPoints<S::Target>,
        stats: &mut S,
        rng: &mut R,
    ) {
        let x = data.row(point);
        let mut hull = std::mem::take(&mut self.hull);
        let (lower, upper) = self.box_in(node, data.features, &mut hull);
        let cut = sample_extension_cut(rng, lower, upper, x, eta);
        self.hull = hull;
        let old_parent = self.nodes[node as usize].parent;
        let new_parent =
            self.insert_parent_above(node, tau, cut.dimension, cut.location, data.features, stats);
        // The new parent's box is `node`'s, which the point lies outside.
        self.extend_box(new_parent, point, data, true);
        let leaf = self.new_node(new_parent, stats);
        self.new_leaf(leaf, point, weight, data, stats);
        let np = new_parent as usize;
        if cut.point_goes_right {
            self.nodes[np].pair[0] = leaf;
        } else {
            self.nodes[np].left = leaf;
        }
        stats.set_parent_of(new_parent, node);
        if stats.absorb_internal(new_parent, data.target(point), weight) {
            self.propagate_absorb(old_parent, data.target(point), weight, stats);
        }
    }

    /// Fills an allocated node as a single-point leaf (`SampleMondrianBlock` on `{x}`: no draw).
    pub(super) fn new_leaf<S: NodeStatistics>(
        &mut self,
        node: u32,
        point: u32,
        weight: u32,
        data: &TrainingPoints<S::Target>,
        stats: &mut S,
    ) {
        let w = weight as usize;
        let (few, many);
        let set: &[u32] = if w <= INLINE_POINTS {
            few = [point; INLINE_POINTS];
            &few[..w]
        } else {
            many = vec![point; w];
            &many
        };
        self.fit_box(node, set, data);
        let paused = self.pause.holds(set, stats, data.targets);
        stats.set_leaf(node, set, data.targets);
        self.make_leaf(node, set, paused);
    }

    pub(super) fn propagate_absorb<S: NodeStatistics>(
        &self,
        mut node: u32,
        target: S::Target,
        weight: u32,
        stats: &mut S,
    ) {
        while node != NO_NODE && stats.absorb_internal(node, target, weight) {
            node = self.nodes[node as usize].parent;
        }
    }

    pub(super) fn propagate_recompute<S: NodeStatistics>(&self, mut node: u32, stats: &mut S) {
        while node != NO_NODE {
            let j = node as usize;
            if !stats.set_internal(node, self.nodes[j].left, self.nodes[j].right()) {
                break;
            }
            node = self.nodes[j].parent;
        }
    }
}
