//! Exact deletion of a training point (spec `mondrian-polya-forest.md` §7.1, §7.3, as
//! resolved there; the Mondrian's projectivity).
//!
//! A Mondrian tree restricted to a set of points, restricted further to a subset, keeps
//! exactly the cuts that still separate points of the subset, each at its own time (the
//! restriction property behind \[P\] Lemma 2.1): so deleting a point is deterministic. Its
//! copies leave their leaf; a leaf left empty is spliced out with its parent, whose cut
//! then separates nothing, and its sibling takes the parent's place; boxes shrink to the
//! bounding boxes of what remains, and statistics are recomputed up the path. No split
//! time changes.
//!
//! With pausing (spec `mf-classification.md` §2.3) the tree is the Mondrian truncated at
//! the blocks the pause predicate holds for. The predicate is monotone (a subset of a pure
//! set is pure; fewer points are fewer), so after a deletion the highest block on the path
//! that it now holds for becomes a paused leaf over all its points, exactly what batch
//! training on the remaining points would have left there: the part below it is hidden
//! again, to be sampled afresh from its parent's time if it ever un-pauses.
//!
//! Insertion followed by deletion of the same point gives back the tree it started from
//! (node ids aside): the insertion added a parent and a leaf, which the splice removes, or
//! grew boxes, which the deletion shrinks back, or un-paused a block, which collapses again.

use super::boxes::{PointIds, Slot};
use super::{MondrianTree, NodeStatistics, TrainingPoints, NO_NODE};
use crate::process::{grow_box, Feature};
use crate::simd::{max_like_x86, min_like_x86};

impl MondrianTree {
    /// Removes every copy of training point `point` from the tree, which is then
    /// distributed as a tree grown on the remaining points (spec `mondrian-polya-forest.md`
    /// §7.3). Returns how many copies the tree held: 0 (the tree unchanged) when it never
    /// took the point, as under online bagging.
    ///
    /// `data` must still hold the point's row and target: the caller frees the point only
    /// once every tree has let it go.
    pub fn delete<S: NodeStatistics>(
        &mut self,
        point: u32,
        data: &TrainingPoints<S::Target>,
        stats: &mut S,
    ) -> u32 {
        // A training point lies in the leaf its row routes to: every road of insertion and
        // sampling sends it by the same rule.
        let x = data.row(point);
        let mut node = self.route_begin();
        while node != NO_NODE {
            node = self.route_advance(node, x, data.features);
        }
        self.delete_routed(point, data, stats)
    }

    /// [`delete`](Self::delete) after the point's route was recorded by
    /// [`route_begin`](Self::route_begin) / [`route_advance`](Self::route_advance) (which
    /// lets a caller interleave the descents of several trees).
    pub fn delete_routed<S: NodeStatistics>(
        &mut self,
        point: u32,
        data: &TrainingPoints<S::Target>,
        stats: &mut S,
    ) -> u32 {
        let Some(&(leaf, _)) = self.path.last() else {
            return 0;
        };
        let weight = self
            .leaf_points(leaf)
            .iter()
            .filter(|&&i| i == point)
            .count() as u32;
        if weight == 0 {
            return 0;
        }
        let x = data.row(point);
        let target = data.target(point);
        let mut path = std::mem::take(&mut self.path);
        path.pop();
        // A point strictly inside its leaf's box in every feature leaves the box, and so
        // every box above, as it was: the common case, which spares a pass over the
        // leaf's points (a paused leaf may hold thousands).
        let inside = self.strictly_inside(leaf, x, data.features);
        if weight as usize == self.leaf_len(leaf) {
            self.take_leaf_points(leaf);
            if !self.splice_out(leaf, &mut path) {
                // The tree held this point alone.
                *self = MondrianTree::new(self.n_features, self.lifetime, self.pause);
                stats.resize(0);
                return weight;
            }
        } else {
            let mut points = self.take_leaf_points(leaf);
            points.retain(|&i| i != point);
            if !inside || self.set_names(leaf, point) {
                self.refit_leaf_box(leaf, &points, data);
            }
            stats.release_leaf(leaf, target, weight, &points, data.targets);
            if !self.nodes[leaf as usize].paused() && self.pause.holds(&points, stats, data.targets)
            {
                // Batch training on what remains would not have split it either.
                self.nodes[leaf as usize].set_paused(true);
            }
            self.put_leaf_vec(leaf, points);
        }
        let collapse = self.shrink_ancestors(&path, point, target, weight, !inside, data, stats);
        if let Some(block) = collapse {
            self.collapse(block, data, stats);
            self.propagate_recompute(self.nodes[block as usize].parent, stats);
        }
        self.path = path;
        weight
    }

    /// Splices the empty leaf `leaf` out with its parent, the last node of `path`, which
    /// is dropped from it: the sibling takes the parent's place. False, with nothing
    /// changed, if the leaf is the root.
    fn splice_out(&mut self, leaf: u32, path: &mut Vec<(u32, f64)>) -> bool {
        let Some((parent, _)) = path.pop() else {
            return false;
        };
        let p = &self.nodes[parent as usize];
        let sibling = p.other_child(leaf);
        let grandparent = p.parent;
        if grandparent == NO_NODE {
            self.root = sibling;
        } else if self.nodes[grandparent as usize].left == parent {
            self.nodes[grandparent as usize].left = sibling;
        } else {
            self.nodes[grandparent as usize].pair[0] = sibling;
        }
        self.nodes[sibling as usize].parent = grandparent;
        self.free_node(leaf);
        self.free_node(parent);
        true
    }

    /// The upward pass of a deletion over `path` (the ancestors of the point's leaf, root
    /// first): each box becomes the union of its children's, each statistics record is
    /// recomputed from its children, and the highest block the pause rule now holds for is
    /// returned, to be collapsed into a paused leaf.
    #[allow(clippy::too_many_arguments)]
    fn shrink_ancestors<S: NodeStatistics>(
        &mut self,
        path: &[(u32, f64)],
        point: u32,
        target: S::Target,
        weight: u32,
        mut boxes_moved: bool,
        data: &TrainingPoints<S::Target>,
        stats: &mut S,
    ) -> Option<u32> {
        let rule = self.pause;
        let mut pausable = rule.pause_on_pure || rule.min_samples_split > 1;
        let mut stats_moved = true;
        let mut collapse = None;
        for &(node, _) in path.iter().rev() {
            let (left, right) = self.children(node).expect("an ancestor has children");
            // A box that did not move leaves every box above it as it was, but a set above
            // may still name the point (its copies can sit inside the box).
            // A box the point lay strictly inside keeps its extent, and so do those above.
            if boxes_moved && self.strictly_inside(node, data.row(point), data.features) {
                boxes_moved = false;
            }
            if boxes_moved || self.set_names(node, point) {
                boxes_moved = self.refit_internal_box(node, left, right, point, data.features);
            }
            if stats_moved {
                stats_moved = stats.release_internal(node, left, right, target, weight);
            }
            // Monotone: once a block keeps its split, every block above it does.
            if pausable {
                let pure = rule.pause_on_pure && stats.node_is_pure(node);
                // An internal node has two leaves below, each with a point: fewer than
                // min_samples_split ≤ 2 points is impossible, and needs no count.
                let small = rule.min_samples_split > 2
                    && self.count_below(node, rule.min_samples_split) < rule.min_samples_split;
                if pure || small {
                    collapse = Some(node);
                } else {
                    pausable = false;
                }
            }
        }
        collapse
    }

    /// Whether `x` lies strictly inside `node`'s box in every feature.
    fn strictly_inside(&mut self, node: u32, x: &[Feature], features: &[Feature]) -> bool {
        let mut hull = std::mem::take(&mut self.hull);
        let inside = {
            let (lo, hi) = self.box_in(node, features, &mut hull);
            lo.iter()
                .zip(hi)
                .zip(x)
                .all(|((&l, &h), &v)| l < v && v < h)
        };
        self.hull = hull;
        inside
    }

    /// Points (with multiplicity) below `node`, counted up to `cap`.
    fn count_below(&self, node: u32, cap: usize) -> usize {
        let mut count = 0;
        let mut stack = vec![node];
        while let Some(j) = stack.pop() {
            match self.children(j) {
                Some((l, r)) => {
                    stack.push(r);
                    stack.push(l);
                }
                None => {
                    count += self.leaf_len(j);
                    if count >= cap {
                        break;
                    }
                }
            }
        }
        count
    }

    /// Makes internal `node` a paused leaf over all the points below it (its box stays the
    /// bounding box of those points); the nodes below are freed.
    fn collapse<S: NodeStatistics>(
        &mut self,
        node: u32,
        data: &TrainingPoints<S::Target>,
        stats: &mut S,
    ) {
        let below = self.subtree_preorder(node);
        let mut points = Vec::new();
        for &j in &below[1..] {
            if self.is_leaf(j) {
                points.extend_from_slice(self.leaf_points(j));
            }
            self.free_node(j);
        }
        self.make_leaf(node, &[], true);
        self.refit_leaf_box(node, &points, data);
        stats.set_leaf(node, &points, data.targets);
        self.put_leaf_vec(node, points);
    }

    /// Whether `node`'s box is a set naming `point`.
    fn set_names(&self, node: u32, point: u32) -> bool {
        match Slot::of(self.nodes[node as usize].slot) {
            Slot::Set(s) => self.set_ids(s).contains(&point),
            _ => false,
        }
    }

    /// Sets leaf `node`'s box to the bounding box of `points` (not empty), in the cheapest
    /// encoding: the row of a single point, a set of a few ids on wide data, else a stored
    /// box (the one the node has, if any).
    pub(super) fn refit_leaf_box<T: Copy>(
        &mut self,
        node: u32,
        points: &[u32],
        data: &TrainingPoints<T>,
    ) {
        let one = Self::point_slot(points).is_some();
        let few = one || self.few_distinct(points).is_some();
        // What the node names now is given back where fit_box would not reuse it.
        match Slot::of(self.nodes[node as usize].slot) {
            Slot::Stored(_) if few => self.release_box(node),
            Slot::Set(_) if one => self.release_box(node),
            _ => {}
        }
        self.fit_box(node, points, data);
    }

    /// Sets internal `node`'s box to the union of its children's boxes; returns whether
    /// the box moved. A set that names `point` (being deleted) is rewritten even if not.
    fn refit_internal_box(
        &mut self,
        node: u32,
        left: u32,
        right: u32,
        point: u32,
        features: &[Feature],
    ) -> bool {
        if let Some(moved) = self.union_in_place(node, left, right, features) {
            return moved;
        }
        let d = self.n_features;
        let mut union = std::mem::take(&mut self.union);
        let mut hull = std::mem::take(&mut self.hull);
        union.clear();
        {
            let (lo, hi) = self.box_in(left, features, &mut hull);
            union.extend_from_slice(lo);
            union.extend_from_slice(hi);
        }
        {
            let (lo, hi) = self.box_in(right, features, &mut hull);
            let (ul, uh) = union.split_at_mut(d);
            grow_box(ul, uh, lo);
            grow_box(ul, uh, hi);
        }
        let moved = {
            let (lo, hi) = self.box_in(node, features, &mut hull);
            lo != &union[..d] || hi != &union[d..]
        };
        self.hull = hull;
        match Slot::of(self.nodes[node as usize].slot) {
            Slot::Stored(b) => {
                if moved {
                    self.bounds[2 * d * b as usize..2 * d * (b as usize + 1)]
                        .copy_from_slice(&union);
                }
            }
            Slot::Set(s) => {
                if moved || self.set_ids(s).contains(&point) {
                    match self.children_ids(left, right) {
                        Some(ids) => self.write_set(s, &ids),
                        None => {
                            self.release_box(node);
                            self.nodes[node as usize].slot = self.store_box(&union);
                        }
                    }
                }
            }
            slot => unreachable!("internal node {node}: {slot:?}"),
        }
        self.union = union;
        moved
    }

    /// [`refit_internal_box`](Self::refit_internal_box) where no set is involved: a stored
    /// box refitted from two stored boxes or rows, read and written in place (the common
    /// case, with no copy, call or scratch buffer). `None`, with nothing done, otherwise.
    /// Gives the bits of the general form: `min(min(ℓ_l, ℓ_r), u_r)` and
    /// `max(max(u_l, ℓ_r), u_r)`, written only if some bound moved.
    fn union_in_place(
        &mut self,
        node: u32,
        left: u32,
        right: u32,
        features: &[Feature],
    ) -> Option<bool> {
        let d = self.n_features;
        let Slot::Stored(b) = Slot::of(self.nodes[node as usize].slot) else {
            return None;
        };
        let place = |child: u32| match Slot::of(self.nodes[child as usize].slot) {
            Slot::Stored(c) => Some((true, 2 * d * c as usize)),
            Slot::Point(i) => Some((false, d * i as usize)),
            _ => None,
        };
        let (l, r) = (place(left)?, place(right)?);
        let start = 2 * d * b as usize;
        let (before, rest) = self.bounds.split_at_mut(start);
        let (own, after) = rest.split_at_mut(2 * d);
        // A child's lower and upper bounds: a stored box lies before or after the node's
        // own (boxes never overlap), a row is both bounds.
        let view = |(stored, at): (bool, usize)| -> (&[Feature], &[Feature]) {
            if !stored {
                let row = &features[at..at + d];
                (row, row)
            } else if at < start {
                before[at..at + 2 * d].split_at(d)
            } else {
                let at = at - start - 2 * d;
                after[at..at + 2 * d].split_at(d)
            }
        };
        let ((ll, lu), (rl, ru)) = (view(l), view(r));
        let (ol, ou) = own.split_at_mut(d);
        let lower = |k: usize| min_like_x86(min_like_x86(ll[k], rl[k]), ru[k]);
        let upper = |k: usize| max_like_x86(max_like_x86(lu[k], rl[k]), ru[k]);
        let moved = (0..d).any(|k| lower(k) != ol[k] || upper(k) != ou[k]);
        if moved {
            for k in 0..d {
                ol[k] = lower(k);
                ou[k] = upper(k);
            }
        }
        Some(moved)
    }

    /// The ids of both children's boxes, if both are rows or sets and a set holds them all:
    /// their rows' bounding box is the union of the children's boxes.
    fn children_ids(&self, left: u32, right: u32) -> Option<PointIds> {
        let capacity = self.set_capacity();
        let mut ids = PointIds::default();
        for child in [left, right] {
            let single;
            let own: &[u32] = match Slot::of(self.nodes[child as usize].slot) {
                Slot::Point(i) => {
                    single = [i];
                    &single
                }
                Slot::Set(s) => self.set_ids(s),
                _ => return None,
            };
            for &i in own {
                if !ids.contains(i) {
                    if ids.len == capacity {
                        return None;
                    }
                    ids.push(i);
                }
            }
        }
        Some(ids)
    }
}
