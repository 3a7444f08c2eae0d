//! Batch sampling in increasing split time, and reading a tree at a smaller lifetime
//! (spec `mondrian-kernel.md` §3.1–3.2 and Appendix C).
//!
//! [`fit`](MondrianTree::fit) samples depth-first: whether a node splits decides which
//! draws its descendants consume, so the same generator gives unrelated trees at two
//! lifetimes. Here nodes split in the order of their split times and every node draws its
//! whole cut (time, then dimension, then location) when it is created, whether or not the
//! cut comes before the lifetime. The draws of a tree sampled at lifetime λ are then a
//! prefix of those of the same generator at any Λ > λ, and the tree at λ is *bit for bit*
//! the tree at Λ with the cuts at times ≥ λ removed: a lifetime sweep read off one tree at
//! Λ gives exactly the trees sampled directly at each λ. The law is the Mondrian's either
//! way (the order in which independent subtrees are sampled does not change it).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rand::Rng;

use super::sample::partition_into_boxes;
use super::{MondrianTree, NodeStatistics, TrainingPoints};
use crate::process::{
    linear_dimension, sample_side, sample_uniform_half_open, split_time, Feature,
};

/// A heap entry that `BinaryHeap` (a max-heap) pops earliest first: by time, then by the
/// smaller key (ties have probability zero but must be broken the same way every run).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Earliest<K, V> {
    /// The time.
    pub(crate) tau: f64,
    /// What breaks ties.
    pub(crate) key: K,
    /// What the entry carries.
    pub(crate) value: V,
}

impl<K: Ord, V> PartialEq for Earliest<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<K: Ord, V> Eq for Earliest<K, V> {}
impl<K: Ord, V> PartialOrd for Earliest<K, V> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<K: Ord, V> Ord for Earliest<K, V> {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .tau
            .total_cmp(&self.tau)
            .then_with(|| other.key.cmp(&self.key))
    }
}

/// A cut drawn for a node, waiting for its time: dimension, location, and the node's range
/// of the index buffer.
#[derive(Debug, Clone, Copy)]
struct Cut {
    dim: usize,
    loc: Feature,
    start: usize,
    end: usize,
}

/// A queued cut, keyed by its node.
type Pending = Earliest<u32, Cut>;

impl MondrianTree {
    /// Batch sampling `MT(λ, D)` on the given points in increasing split time (spec
    /// `mondrian-kernel.md` Appendix C), replacing whatever the tree held. Same law as
    /// [`fit`](Self::fit); in addition the tree sampled with a generator at lifetime λ is
    /// the one sampled with the same generator at any larger lifetime, with the cuts at
    /// times ≥ λ removed, node ids included. Each node draws `E`, then the dimension, then
    /// the location, one uniform each (nothing if its box is a point); a split draws its
    /// left child's cut before its right child's. Pausing is not supported (the rule must
    /// never hold): a paused leaf would make the draws depend on the lifetime.
    pub fn fit_in_time_order<S: NodeStatistics, R: Rng + ?Sized>(
        &mut self,
        points: Vec<u32>,
        data: &TrainingPoints<S::Target>,
        stats: &mut S,
        rng: &mut R,
    ) {
        if !self.start_fit(points.len(), stats) {
            return;
        }
        let mut indices = points;
        self.fit_box(self.root, &indices, data);
        let mut hull = std::mem::take(&mut self.hull);
        let mut heap = BinaryHeap::new();
        let mut order = vec![self.root];
        let n = indices.len();
        self.draw_cut(
            self.root, 0, n, 0.0, data, &mut hull, rng, &mut heap, &indices,
        );
        let d = self.n_features;
        let mut child_boxes = vec![0.0; 4 * d];
        while let Some(cut) = heap.pop() {
            let Earliest {
                tau,
                key: j,
                value:
                    Cut {
                        dim,
                        loc,
                        start,
                        end,
                    },
            } = cut;
            let set = &mut indices[start..end];
            let n_left = partition_into_boxes(set, dim, loc, &mut child_boxes, data);
            let (left_box, right_box) = child_boxes.split_at(2 * d);
            let (left_set, right_set) = set.split_at(n_left);
            let l = self.new_node_with_box(j, left_set, left_box, stats);
            let r = self.new_node_with_box(j, right_set, right_box, stats);
            let ju = j as usize;
            self.nodes[ju].tau = tau;
            self.nodes[ju].set_split(dim, loc);
            self.nodes[ju].left = l;
            self.nodes[ju].pair[0] = r;
            order.extend([l, r]);
            let mid = start + n_left;
            self.draw_cut(
                l, start, mid, tau, data, &mut hull, rng, &mut heap, &indices,
            );
            self.draw_cut(r, mid, end, tau, data, &mut hull, rng, &mut heap, &indices);
        }
        // Parents come before children in `order`: backwards, children are set first.
        for &j in order.iter().rev() {
            match self.children(j) {
                Some((l, r)) => {
                    stats.set_internal(j, l, r);
                }
                None => stats.set_leaf(j, self.leaf_points(j), data.targets),
            }
        }
        self.hull = hull;
    }

    /// Draws the cut of `node` (over `indices[start..end]`, born at `born`): queued if it
    /// comes before the lifetime, else the node becomes a leaf.
    #[allow(clippy::too_many_arguments)]
    fn draw_cut<T: Copy, R: Rng + ?Sized>(
        &mut self,
        node: u32,
        start: usize,
        end: usize,
        born: f64,
        data: &TrainingPoints<T>,
        hull: &mut Vec<Feature>,
        rng: &mut R,
        heap: &mut BinaryHeap<Pending>,
        indices: &[u32],
    ) {
        let (lower, upper) = self.box_in(node, data.features, hull);
        let extent = linear_dimension(lower, upper);
        let mut cut = None;
        if extent > 0.0 {
            let tau = born + split_time(rng, extent);
            let dim = sample_side(rng, lower, upper, extent);
            let loc = sample_uniform_half_open(rng, lower[dim], upper[dim]);
            cut = (tau < self.lifetime).then_some(Earliest {
                tau,
                key: node,
                value: Cut {
                    dim,
                    loc,
                    start,
                    end,
                },
            });
        }
        match cut {
            Some(c) => heap.push(c),
            None => self.make_leaf(node, &indices[start..end], false),
        }
    }

    /// The cell holding `x` in the tree read at lifetime `lifetime` (at most the tree's):
    /// the node where the walk from the root meets a leaf or a cut at time ≥ `lifetime`
    /// (spec `mondrian-kernel.md` §3.2, "querying features"). For a training point it is
    /// the ancestor of its leaf alive at that lifetime. The tree must not be empty.
    pub fn cell_at(&self, x: &[Feature], lifetime: f64) -> u32 {
        let mut j = self.root;
        while !self.is_leaf(j) && self.nodes[j as usize].tau < lifetime {
            j = self.route(j, x);
        }
        j
    }
}
