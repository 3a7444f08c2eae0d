//! The node arena (spec `mf-classification.md` §1.3): fixed 32-byte node records indexed by
//! `u32`, a free list of nodes that deletion released, and the training point ids a leaf
//! holds (in its record when few, in a list of its own otherwise).

use serde::{Deserialize, Serialize};

use super::boxes::NO_BOX;
use super::{MondrianTree, NodeStatistics};
use crate::process::Feature;

/// Point ids a leaf's own list has room for when it is made: the allocator's smallest
/// block holds six, so an online leaf that takes a few more points grows without moving.
pub(super) const LEAF_ROOM: usize = 6;

/// Sentinel for "no node".
pub const NO_NODE: u32 = u32::MAX;

/// The fields of a node a root-to-leaf walk reads, packed into 32 bytes so that one cache
/// line serves a step and names the node's box (the box and the statistics live in their
/// own flat buffers). A leaf has no split: its record holds its point ids instead, when
/// they are few (most leaves hold one or two points), so an insertion that ends there finds
/// them in the line it has just loaded, and no leaf needs a list of its own.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[repr(C)]
pub(super) struct Node {
    /// Absolute split time τ; λ for leaves.
    pub(super) tau: f64,
    pub(super) parent: u32,
    /// The left child; `NO_NODE` marks a leaf.
    pub(super) left: u32,
    /// Internal node: the right child and the bits of the split location. Leaf: its
    /// first [`Node::count`] point ids, or the index of its list in `lists`.
    pub(super) pair: [u32; 2],
    /// Internal node: the split dimension. Leaf: how many point ids `pair` holds, or
    /// [`SPILLED`]; with [`PAUSED`] set on a paused leaf.
    pub(super) split_dim: u32,
    /// The index of the node's box in `bounds` (in boxes of 2·D floats), or
    /// `POINT_BOX | i` for a leaf whose box is training point `i`, or `SET_BOX | s` for a
    /// node whose box is the bounding box of the points of set slot `s`, or `NO_BOX` while
    /// unset (see [`Slot`]).
    pub(super) slot: u32,
}

// One record per cache-line half: a walk step loads one line.
const _: () = assert!(std::mem::size_of::<Node>() == 32);

/// Flag in [`Node::split_dim`] of a paused leaf.
pub(super) const PAUSED: u32 = 1 << 31;

/// How many point ids a leaf keeps in its record.
pub(super) const INLINE_POINTS: usize = 2;

/// [`Node::count`] of a leaf whose points are in `lists`.
pub(super) const SPILLED: u32 = INLINE_POINTS as u32 + 1;

impl Node {
    #[inline(always)]
    pub(super) fn dim(&self) -> usize {
        (self.split_dim & !PAUSED) as usize
    }
    /// The right child of an internal node.
    #[inline(always)]
    pub(super) fn right(&self) -> u32 {
        self.pair[0]
    }
    /// The child of an internal node that is not `child`.
    #[inline(always)]
    pub(super) fn other_child(&self, child: u32) -> u32 {
        if self.left == child {
            self.right()
        } else {
            self.left
        }
    }
    /// The split location of an internal node.
    #[inline(always)]
    pub(super) fn split_loc(&self) -> Feature {
        Feature::from_bits(self.pair[1])
    }
    /// Sets an internal node's split.
    pub(super) fn set_split(&mut self, dim: usize, loc: Feature) {
        self.split_dim = dim as u32;
        self.pair[1] = loc.to_bits();
    }
    /// A leaf's inline point count, or [`SPILLED`].
    #[inline(always)]
    pub(super) fn count(&self) -> u32 {
        self.split_dim & !PAUSED
    }
    pub(super) fn set_count(&mut self, count: u32) {
        self.split_dim = (self.split_dim & PAUSED) | count;
    }
    #[inline(always)]
    pub(super) fn paused(&self) -> bool {
        self.split_dim & PAUSED != 0
    }
    #[inline(always)]
    pub(super) fn set_paused(&mut self, paused: bool) {
        if paused {
            self.split_dim |= PAUSED;
        } else {
            self.split_dim &= !PAUSED;
        }
    }
}

impl MondrianTree {
    pub(super) fn take_leaf_points(&mut self, node: u32) -> Vec<u32> {
        let j = node as usize;
        let record = self.nodes[j];
        self.nodes[j].set_count(0);
        match record.count() {
            SPILLED => {
                let k = record.pair[0] as usize;
                let list = self.lists.swap_remove(k);
                self.list_owner.swap_remove(k);
                // The list that filled the hole tells its leaf where it went.
                if let Some(&moved) = self.list_owner.get(k) {
                    self.nodes[moved as usize].pair[0] = k as u32;
                }
                list
            }
            n => record.pair[..n as usize].to_vec(),
        }
    }

    /// Makes `points` leaf `node`'s points (it must hold none): in its record if they fit,
    /// else in a list of its own.
    pub(super) fn put_leaf_points(&mut self, node: u32, points: &[u32]) {
        let j = node as usize;
        debug_assert_eq!(self.nodes[j].count(), 0, "leaf {node} already holds points");
        if points.len() <= INLINE_POINTS {
            self.nodes[j].pair[..points.len()].copy_from_slice(points);
            self.nodes[j].set_count(points.len() as u32);
        } else {
            // Room to grow without moving: the allocator's smallest block holds six ids.
            let mut list = Vec::with_capacity(points.len().max(LEAF_ROOM));
            list.extend_from_slice(points);
            self.spill(node, list);
        }
    }

    /// [`put_leaf_points`](Self::put_leaf_points) taking the list itself, kept as the
    /// leaf's own when the ids do not fit in the record.
    pub(super) fn put_leaf_vec(&mut self, node: u32, points: Vec<u32>) {
        if points.len() <= INLINE_POINTS {
            self.put_leaf_points(node, &points);
        } else {
            debug_assert_eq!(self.nodes[node as usize].count(), 0);
            self.spill(node, points);
        }
    }

    /// Moves leaf `node`'s points to `list`, which then belongs to it.
    pub(super) fn spill(&mut self, node: u32, list: Vec<u32>) {
        let j = node as usize;
        self.nodes[j].pair[0] = self.lists.len() as u32;
        self.nodes[j].set_count(SPILLED);
        self.lists.push(list);
        self.list_owner.push(node);
    }

    /// Adds `ids` to leaf `node`'s points, in its record while they fit.
    pub(super) fn append_leaf_points(
        &mut self,
        node: u32,
        ids: impl ExactSizeIterator<Item = u32>,
    ) {
        let j = node as usize;
        let w = ids.len();
        match self.nodes[j].count() {
            SPILLED => {
                let k = self.nodes[j].pair[0] as usize;
                self.lists[k].extend(ids);
            }
            n if n as usize + w <= INLINE_POINTS => {
                let n = n as usize;
                for (slot, id) in self.nodes[j].pair[n..n + w].iter_mut().zip(ids) {
                    *slot = id;
                }
                self.nodes[j].set_count((n + w) as u32);
            }
            n => {
                let n = n as usize;
                let mut list = Vec::with_capacity((n + w).max(LEAF_ROOM));
                list.extend_from_slice(&self.nodes[j].pair[..n]);
                list.extend(ids);
                self.spill(node, list);
            }
        }
    }

    /// Adds `weight` copies of `point` to leaf `node`'s points.
    pub(super) fn push_leaf_point(&mut self, node: u32, point: u32, weight: u32) {
        self.append_leaf_points(node, std::iter::repeat_n(point, weight as usize));
    }

    /// Number of points (with multiplicity) leaf `node` holds; 0 off leaves.
    pub(super) fn leaf_len(&self, node: u32) -> usize {
        self.leaf_points(node).len()
    }
    /// A new node whose box the caller sets ([`fit_box`](Self::fit_box) or a copy).
    pub(super) fn new_node<S: NodeStatistics>(&mut self, parent: u32, stats: &mut S) -> u32 {
        self.push_node(parent, NO_BOX, stats)
    }
    /// The node record, slot and statistics of a new node: a leaf without points. A node
    /// deletion freed is reused before the arena grows (its statistics are set by the
    /// caller, as a new node's are).
    pub(super) fn push_node<S: NodeStatistics>(
        &mut self,
        parent: u32,
        slot: u32,
        stats: &mut S,
    ) -> u32 {
        let record = Node {
            tau: self.lifetime,
            parent,
            left: NO_NODE,
            pair: [NO_NODE; 2],
            split_dim: 0,
            slot,
        };
        if let Some(id) = self.free_nodes.pop() {
            self.nodes[id as usize] = record;
            return id;
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(record);
        stats.resize(self.nodes.len());
        id
    }

    /// The record of a node on the free list.
    pub(super) fn free_record(lifetime: f64) -> Node {
        Node {
            tau: lifetime,
            parent: NO_NODE,
            left: NO_NODE,
            pair: [NO_NODE; 2],
            split_dim: 0,
            slot: NO_BOX,
        }
    }

    /// Frees `node` (a leaf's points, its box or set, its record) for reuse; the caller has
    /// unlinked it from the tree.
    pub(super) fn free_node(&mut self, node: u32) {
        if self.nodes[node as usize].left == NO_NODE {
            self.take_leaf_points(node);
        }
        self.release_box(node);
        self.nodes[node as usize] = Self::free_record(self.lifetime);
        self.free_nodes.push(node);
    }

    /// Makes `node`, which holds no points, a leaf holding `points`.
    pub(super) fn make_leaf(&mut self, node: u32, points: &[u32], paused: bool) {
        let j = node as usize;
        debug_assert!(self.nodes[j].left != NO_NODE || self.nodes[j].count() == 0);
        self.nodes[j].tau = self.lifetime;
        self.nodes[j].left = NO_NODE;
        self.nodes[j].split_dim = 0;
        self.nodes[j].set_paused(paused);
        self.put_leaf_points(node, points);
    }
}

#[cfg(test)]
mod tests {
    use super::super::boxes::NO_BOX;
    use super::*;
    use crate::tree::{NoStats, PauseRule};
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Random puts, pushes and takes on 24 leaves keep every leaf's points equal to a plain
    /// per-leaf list, whether they sit in the record or in a list, and keep the lists one
    /// per spilled leaf (the fix-up after a list is swapped into a hole included).
    #[test]
    fn leaf_points_match_a_plain_list_per_leaf() {
        let mut tree = MondrianTree::new(1, f64::INFINITY, PauseRule::NEVER);
        let n = 24u32;
        for _ in 0..n {
            tree.push_node(NO_NODE, NO_BOX, &mut NoStats);
        }
        let mut plain: Vec<Vec<u32>> = vec![Vec::new(); n as usize];
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let (mut spills, mut takes_of_lists) = (0, 0);
        for step in 0..5000u32 {
            let j = rng.gen_range(0..n);
            let ju = j as usize;
            match rng.gen_range(0..4) {
                0 | 1 => {
                    let weight = rng.gen_range(1..4);
                    let before = tree.nodes[ju].count();
                    tree.push_leaf_point(j, step, weight);
                    plain[ju].extend(std::iter::repeat_n(step, weight as usize));
                    spills += usize::from(before != SPILLED && tree.nodes[ju].count() == SPILLED);
                }
                2 => {
                    takes_of_lists += usize::from(tree.nodes[ju].count() == SPILLED);
                    assert_eq!(tree.take_leaf_points(j), std::mem::take(&mut plain[ju]));
                }
                _ => {
                    let taken = tree.take_leaf_points(j);
                    let len = rng.gen_range(0..5);
                    let fresh: Vec<u32> = (0..len).map(|k| step * 8 + k).collect();
                    tree.put_leaf_points(j, &fresh);
                    assert_eq!(taken, std::mem::replace(&mut plain[ju], fresh));
                }
            }
            for k in 0..n {
                assert_eq!(
                    tree.leaf_points(k),
                    plain[k as usize].as_slice(),
                    "leaf {k}"
                );
                assert_eq!(tree.leaf_len(k), plain[k as usize].len());
            }
            assert_eq!(tree.lists.len(), tree.list_owner.len());
            for (k, &owner) in tree.list_owner.iter().enumerate() {
                let record = &tree.nodes[owner as usize];
                assert!(record.count() == SPILLED && record.pair[0] as usize == k);
                assert!(tree.lists[k].len() > INLINE_POINTS);
            }
        }
        // Both roads were taken many times.
        assert!(
            spills > 500 && takes_of_lists > 500,
            "{spills} {takes_of_lists}"
        );
    }
}
