//! Batch sampling of a Mondrian tree restricted to data (spec `mf-classification.md`
//! §2.2–2.3, \[P\] Alg. 1–2 and 9), with pausing, and trees of a given layout.

use rand::Rng;

use super::{
    prefetch_lines, Layout, MondrianTree, NodeStatistics, PauseRule, TrainingPoints, NO_NODE,
};
use crate::process::{
    linear_dimension, sample_side, sample_uniform_half_open, split_time, Feature,
};
use crate::simd::{self, Dispatched, Kernels};

/// The work lists of [`MondrianTree::sample_block`].
#[derive(Debug, Clone, Default)]
pub(super) struct BlockScratch {
    /// Nodes still to sample, each with its range of the index buffer and its parent's time.
    stack: Vec<(u32, usize, usize, f64)>,
    /// The two children's boxes of the split being made.
    child_boxes: Vec<Feature>,
    /// The nodes of the new block, parents before children.
    order: Vec<u32>,
}

/// Buffers of [`BlockScratch`] larger than this many entries (left by a batch fit) are
/// dropped rather than kept with the tree.
pub(super) const SCRATCH_KEEP: usize = 1024;

impl MondrianTree {
    /// A tree with a given structure (for golden tests and for importing trees): boxes are
    /// the bounding boxes of the points below each node, statistics are set from them.
    /// Fails unless every split time exceeds its parent's, every split lies inside its
    /// node's box and sends each of the node's points to the child that holds it.
    pub fn from_layout<S: NodeStatistics>(
        n_features: usize,
        lifetime: f64,
        pause: PauseRule,
        layout: &Layout,
        data: &TrainingPoints<S::Target>,
        stats: &mut S,
    ) -> Result<Self, String> {
        let mut tree = MondrianTree::new(n_features, lifetime, pause);
        stats.resize(0);
        tree.root = tree.new_node(NO_NODE, stats);
        let mut stack = vec![(tree.root, layout, 0.0f64)];
        while let Some((j, part, tau_parent)) = stack.pop() {
            let points = part.points();
            if points.is_empty() {
                return Err("a node without points".into());
            }
            tree.fit_box(j, &points, data);
            match part {
                Layout::Leaf(p) => tree.make_leaf(j, p, pause.holds(p, stats, data.targets)),
                Layout::Split {
                    tau,
                    dim,
                    loc,
                    left,
                    right,
                } => {
                    if !(*tau > tau_parent && *tau < lifetime) || *dim >= n_features {
                        return Err(format!("node {j}: bad split time or dimension"));
                    }
                    for (side, child) in [(true, left), (false, right)] {
                        if child
                            .points()
                            .iter()
                            .any(|&i| (data.row(i)[*dim] <= *loc) != side)
                        {
                            return Err(format!("node {j}: a point is on the wrong side"));
                        }
                    }
                    let node = &mut tree.nodes[j as usize];
                    node.tau = *tau;
                    node.set_split(*dim, *loc);
                    let l = tree.new_node(j, stats);
                    let r = tree.new_node(j, stats);
                    tree.nodes[j as usize].left = l;
                    tree.nodes[j as usize].pair[0] = r;
                    stack.push((r, right, *tau));
                    stack.push((l, left, *tau));
                }
            }
        }
        for &j in tree.subtree_preorder(tree.root).iter().rev() {
            match tree.children(j) {
                Some((l, r)) => {
                    stats.set_internal(j, l, r);
                }
                None => stats.set_leaf(j, tree.leaf_points(j), data.targets),
            }
        }
        Ok(tree)
    }

    /// Batch sampling `MT(λ, D)` on the given points (spec §2.2–2.3, \[P\] Alg. 1–2 and 9),
    /// replacing whatever the tree held. Point ids may repeat (multiplicity).
    pub fn fit<S: NodeStatistics, R: Rng + ?Sized>(
        &mut self,
        points: Vec<u32>,
        data: &TrainingPoints<S::Target>,
        stats: &mut S,
        rng: &mut R,
    ) {
        if self.start_fit(points.len(), stats) {
            self.sample_block(self.root, points, 0.0, data, stats, rng);
        }
    }

    /// Empties the tree for a batch fit on `n_points` points and, unless there are none,
    /// makes the root; returns whether it did.
    pub(super) fn start_fit<S: NodeStatistics>(&mut self, n_points: usize, stats: &mut S) -> bool {
        *self = MondrianTree::new(self.n_features, self.lifetime, self.pause);
        stats.resize(0);
        if n_points == 0 {
            return false;
        }
        // A binary tree over n points has at most 2n − 1 nodes: reserve once instead of
        // copying the arena at every doubling. Unused capacity is never touched.
        let max_nodes = 2 * n_points - 1;
        self.nodes.reserve(max_nodes);
        self.bounds.reserve(max_nodes * 2 * self.n_features);
        self.sets.reserve(max_nodes * self.set_capacity());
        stats.reserve(max_nodes);
        self.root = self.new_node(NO_NODE, stats);
        true
    }

    /// `SampleMondrianBlock` with pausing ([P] Alg. 9) on an existing node slot, iteratively,
    /// depth-first and left before right (spec §2.1 draw order). Statistics of the new
    /// subtree are filled by one post-order pass (§3.3).
    pub(super) fn sample_block<S: NodeStatistics, R: Rng + ?Sized>(
        &mut self,
        node: u32,
        points: Vec<u32>,
        tau_parent: f64,
        data: &TrainingPoints<S::Target>,
        stats: &mut S,
        rng: &mut R,
    ) {
        // One index buffer partitioned in place; each node owns a range of it. A split
        // computes both children's boxes in the same pass that partitions the range, so
        // every level reads each row once.
        let mut indices = points;
        self.fit_box(node, &indices, data);
        let mut scratch = std::mem::take(&mut self.block);
        let BlockScratch {
            stack,
            child_boxes,
            order,
        } = &mut scratch;
        let mut hull = std::mem::take(&mut self.hull);
        stack.clear();
        stack.push((node, 0usize, indices.len(), tau_parent));
        child_boxes.resize(4 * self.n_features, 0.0);
        order.clear();
        while let Some((j, start, end, tp)) = stack.pop() {
            order.push(j);
            let ju = j as usize;
            let set = &mut indices[start..end];
            if self.pause.holds(set, stats, data.targets) {
                self.make_leaf(j, set, true);
                continue;
            }
            let (lower, upper) = self.box_in(j, data.features, &mut hull);
            let extent = linear_dimension(lower, upper);
            let t = tp + split_time(rng, extent);
            if t >= self.lifetime {
                self.make_leaf(j, set, false);
                continue;
            }
            let dim = sample_side(rng, lower, upper, extent);
            let loc = sample_uniform_half_open(rng, lower[dim], upper[dim]);
            self.nodes[ju].tau = t;
            self.nodes[ju].set_split(dim, loc);
            let n_left = partition_into_boxes(set, dim, loc, child_boxes, data);
            let (left_box, right_box) = child_boxes.split_at(2 * self.n_features);
            let (left_set, right_set) = set.split_at(n_left);
            let l = self.new_node_with_box(j, left_set, left_box, stats);
            let r = self.new_node_with_box(j, right_set, right_box, stats);
            self.nodes[ju].left = l;
            self.nodes[ju].pair[0] = r;
            stack.push((r, start + n_left, end, t));
            stack.push((l, start, start + n_left, t));
        }
        // Children after parents in `order`: backwards, each node's children are set first.
        for &j in order.iter().rev() {
            match self.children(j) {
                Some((l, r)) => {
                    stats.set_internal(j, l, r);
                }
                None => stats.set_leaf(j, self.leaf_points(j), data.targets),
            }
        }
        if order.capacity() > SCRATCH_KEEP || stack.capacity() > SCRATCH_KEEP {
            scratch = BlockScratch::default();
        }
        self.block = scratch;
        self.hull = hull;
    }
}

/// How many rows ahead [`partition_into_boxes`] prefetches.
pub(super) const PARTITION_AHEAD: usize = 4;

/// Moves the points with `x[dim] ≤ loc` to the front of `set` and writes the bounding boxes
/// of the two parts to `boxes` (left lower, left upper, right lower, right upper, D each);
/// returns the left count. Both parts must be non-empty.
pub(super) fn partition_into_boxes<T: Copy>(
    set: &mut [u32],
    dim: usize,
    loc: Feature,
    boxes: &mut [Feature],
    data: &TrainingPoints<T>,
) -> usize {
    #[cfg(target_arch = "x86_64")]
    if let Some(k) = simd::avx() {
        // SAFETY: an `Avx` exists only when the CPU has AVX.
        return unsafe { partition_avx(k, set, dim, loc, boxes, data) };
    }
    partition_with(Dispatched, set, dim, loc, boxes, data)
}

/// [`partition_into_boxes`] compiled for AVX, with the box growth inlined.
///
/// # Safety
/// The CPU has AVX (`k` proves it).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn partition_avx<T: Copy>(
    k: simd::Avx,
    set: &mut [u32],
    dim: usize,
    loc: Feature,
    boxes: &mut [Feature],
    data: &TrainingPoints<T>,
) -> usize {
    partition_with(k, set, dim, loc, boxes, data)
}

#[inline(always)]
fn partition_with<K: Kernels, T: Copy>(
    kernels: K,
    set: &mut [u32],
    dim: usize,
    loc: Feature,
    boxes: &mut [Feature],
    data: &TrainingPoints<T>,
) -> usize {
    let d = data.n_features;
    let row_lines = (d * std::mem::size_of::<Feature>()).div_ceil(64);
    // Empty boxes: the first point of each side sets them (features are finite).
    for side in boxes[..4 * d].chunks_exact_mut(2 * d) {
        let (lower, upper) = side.split_at_mut(d);
        lower.fill(Feature::INFINITY);
        upper.fill(Feature::NEG_INFINITY);
    }
    let mut n_left = 0;
    for k in 0..set.len() {
        // Rows are visited in the order of the partitioned ids, all over memory: ask for a
        // row a few steps before it is read (swaps below only touch positions up to k).
        if let Some(&ahead) = set.get(k + PARTITION_AHEAD) {
            prefetch_lines(data.row(ahead).as_ptr() as *const u8, row_lines);
        }
        let i = set[k];
        let row = data.row(i);
        // Branch-free: which side a point falls on is a coin flip the predictor cannot
        // learn, so the swap and the choice of box are selects rather than jumps.
        let left = row[dim] <= loc;
        let other = set[n_left];
        set[n_left] = if left { i } else { other };
        set[k] = if left { other } else { i };
        n_left += usize::from(left);
        let off = if left { 0 } else { 2 * d };
        let (lower, upper) = boxes[off..off + 2 * d].split_at_mut(d);
        kernels.grow_box(lower, upper, row);
    }
    debug_assert!(
        n_left > 0 && n_left < set.len(),
        "a split left a side empty"
    );
    n_left
}
