//! Box storage and its three encodings (spec `mf-classification.md` §1.3: a node's data box
//! is the bounding box of the points below it). A node's `slot` names a stored box in the
//! flat buffer `bounds` (lower corner then upper, D floats each), or a training point whose
//! row is the box (a leaf over one distinct point), or, on data of
//! [`SET_MIN_FEATURES`] features or more, a set of at most [`SET_POINTS`] point ids whose rows'
//! bounding box is the box, computed where it is read. Boxes and sets that no node names
//! any more wait on free lists for reuse.

use std::borrow::Cow;

use super::{MondrianTree, NodeStatistics, TrainingPoints};
use crate::process::{grow_box, hull_extension_rate, Feature};
use crate::simd::Kernels;

/// Flag of a slot that names a training point whose row is the node's (degenerate) box.
pub(super) const POINT_BOX: u32 = 1 << 31;
/// Flag of a slot (with [`POINT_BOX`] clear) that names a run of [`SET_POINTS`] entries of
/// `sets`: the node's box is the bounding box of those training points' rows.
pub(super) const SET_BOX: u32 = 1 << 30;
/// Slot of a node whose box is not set yet.
pub(super) const NO_BOX: u32 = u32::MAX;
/// Point ids a set slot holds (filled from the front; unused entries are `NO_POINT`):
/// 16 bytes where a box takes 8·D. A box read from a set costs a bounding box of at most
/// this many rows, from the training features, which are far smaller than the boxes.
pub(super) const SET_POINTS: usize = 4;
/// An unused entry of a set slot.
pub(super) const NO_POINT: u32 = u32::MAX;
/// Trees over at least this many features name a few points' ids instead of storing their
/// box. On narrower data a box is a line or two, which the ids and then the rows they name
/// cost more to read than they save (measured: online and prediction slower on letter and
/// satimage, memory −15–30 %); from here on a box is eight lines or more.
pub const SET_MIN_FEATURES: usize = 64;

/// What a node's `slot` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    /// Not set yet.
    Unset,
    /// Training point `i`: the box is its row.
    Point(u32),
    /// Set slot `s` of `sets`: the box is the bounding box of its points' rows.
    Set(u32),
    /// Box `b` of `bounds`.
    Stored(u32),
}

impl Slot {
    #[inline(always)]
    pub(super) fn of(slot: u32) -> Slot {
        if slot & (POINT_BOX | SET_BOX) == 0 {
            Slot::Stored(slot)
        } else if slot == NO_BOX {
            Slot::Unset
        } else if slot & POINT_BOX != 0 {
            Slot::Point(slot & !POINT_BOX)
        } else {
            Slot::Set(slot & !SET_BOX)
        }
    }
}

impl MondrianTree {
    /// The node's data box `(lower, upper)`. `features` are the training features the tree
    /// indexes into (row-major, D per row): a leaf holding a single training point stores
    /// no box, its box is that point's row; a node over a few points keeps their ids, and
    /// its box is computed here (owned).
    pub fn data_box<'a>(
        &'a self,
        node: u32,
        features: &'a [Feature],
    ) -> (Cow<'a, [Feature]>, Cow<'a, [Feature]>) {
        match Slot::of(self.nodes[node as usize].slot) {
            Slot::Set(_) => {
                let mut hull = Vec::new();
                self.hull_into(node, features, &mut hull);
                let upper = hull.split_off(self.n_features);
                (Cow::Owned(hull), Cow::Owned(upper))
            }
            _ => {
                let (lower, upper) = self.box_slices(node, features);
                (Cow::Borrowed(lower), Cow::Borrowed(upper))
            }
        }
    }

    /// The box of a node whose box is a row or stored (not a set's).
    #[inline]
    pub(super) fn box_slices<'a>(
        &'a self,
        node: u32,
        features: &'a [Feature],
    ) -> (&'a [Feature], &'a [Feature]) {
        let d = self.n_features;
        match Slot::of(self.nodes[node as usize].slot) {
            Slot::Point(i) => {
                let row = self.row(features, i);
                (row, row)
            }
            Slot::Stored(b) => {
                let b = b as usize;
                self.bounds[2 * d * b..2 * d * (b + 1)].split_at(d)
            }
            slot => unreachable!("node {node}: no box in place ({slot:?})"),
        }
    }

    /// The node's box as slices, computed into `scratch` (lower then upper) if it is a
    /// set's.
    #[inline]
    pub(super) fn box_in<'a>(
        &'a self,
        node: u32,
        features: &'a [Feature],
        scratch: &'a mut Vec<Feature>,
    ) -> (&'a [Feature], &'a [Feature]) {
        match Slot::of(self.nodes[node as usize].slot) {
            Slot::Set(_) => {
                self.hull_into(node, features, scratch);
                scratch.split_at(self.n_features)
            }
            _ => self.box_slices(node, features),
        }
    }

    /// The point ids of set slot `s`.
    #[inline]
    pub(super) fn set_ids(&self, s: u32) -> &[u32] {
        let ids = &self.sets[s as usize * SET_POINTS..(s as usize + 1) * SET_POINTS];
        let n = ids
            .iter()
            .position(|&i| i == NO_POINT)
            .unwrap_or(SET_POINTS);
        &ids[..n]
    }

    /// Training row `i` of `features`.
    #[inline]
    pub(super) fn row<'a>(&self, features: &'a [Feature], i: u32) -> &'a [Feature] {
        let d = self.n_features;
        &features[i as usize * d..(i as usize + 1) * d]
    }

    /// The rows of the ids `ids` (at most [`SET_POINTS`]), on the stack.
    #[inline]
    pub(super) fn rows_of<'a>(
        &self,
        features: &'a [Feature],
        ids: &[u32],
    ) -> [&'a [Feature]; SET_POINTS] {
        let mut rows: [&[Feature]; SET_POINTS] = [&[]; SET_POINTS];
        for (row, &i) in rows.iter_mut().zip(ids) {
            *row = self.row(features, i);
        }
        rows
    }

    /// Writes the bounding box of a set node's rows to `out` (lower then upper).
    pub(super) fn hull_into(&self, node: u32, features: &[Feature], out: &mut Vec<Feature>) {
        let Slot::Set(s) = Slot::of(self.nodes[node as usize].slot) else {
            unreachable!("node {node} has no set");
        };
        let ids = self.set_ids(s);
        let first = self.row(features, ids[0]);
        out.clear();
        out.extend_from_slice(first);
        out.extend_from_slice(first);
        let (lower, upper) = out.split_at_mut(self.n_features);
        for &i in &ids[1..] {
            grow_box(lower, upper, self.row(features, i));
        }
    }

    /// `η` of `x` at `node`: the L1 distance from `x` to its box (spec §2.4).
    /// The kernels are inlined into loops compiled for them ([`Kernels`]).
    #[inline(always)]
    pub(crate) fn eta_with<K: Kernels>(
        &self,
        kernels: K,
        node: u32,
        x: &[Feature],
        features: &[Feature],
    ) -> f64 {
        match Slot::of(self.nodes[node as usize].slot) {
            Slot::Set(s) => self.set_eta(s, x, features),
            _ => {
                let (lower, upper) = self.box_slices(node, features);
                kernels.extension_rate(lower, upper, x)
            }
        }
    }

    /// [`eta`](Self::eta) of a set's box, from its rows ([`hull_extension_rate`]).
    #[inline(never)]
    pub(super) fn set_eta(&self, s: u32, x: &[Feature], features: &[Feature]) -> f64 {
        let ids = self.set_ids(s);
        hull_extension_rate(&self.rows_of(features, ids)[..ids.len()], x)
    }

    /// The upper bound of the node's box in dimension `dim`.
    pub(super) fn upper_at(&self, node: u32, dim: usize, features: &[Feature]) -> Feature {
        match Slot::of(self.nodes[node as usize].slot) {
            Slot::Set(s) => {
                let d = self.n_features;
                self.set_ids(s)
                    .iter()
                    .map(|&i| features[i as usize * d + dim])
                    .fold(Feature::NEG_INFINITY, Feature::max)
            }
            _ => self.box_slices(node, features).1[dim],
        }
    }

    /// A new node over the training points `set` whose bounding box is `bounds` (lower then
    /// upper): stored once in fresh memory, or not at all when `set` is one point (its row)
    /// or a few (their ids).
    pub(super) fn new_node_with_box<S: NodeStatistics>(
        &mut self,
        parent: u32,
        set: &[u32],
        bounds: &[Feature],
        stats: &mut S,
    ) -> u32 {
        debug_assert_eq!(bounds.len(), 2 * self.n_features);
        let slot = match Self::point_slot(set) {
            Some(slot) => slot,
            None => match self.few_distinct(set) {
                Some(ids) => self.store_set(&ids),
                None => self.store_box(bounds),
            },
        };
        self.push_node(parent, slot, stats)
    }

    /// How many point ids a set of this tree may hold: [`SET_POINTS`] on wide data, none
    /// below [`SET_MIN_FEATURES`] features.
    #[inline]
    pub(super) fn set_capacity(&self) -> usize {
        if self.n_features >= SET_MIN_FEATURES {
            SET_POINTS
        } else {
            0
        }
    }

    /// The distinct ids of `set` if a set of this tree can hold them (and `set` is not
    /// empty).
    pub(super) fn few_distinct(&self, set: &[u32]) -> Option<PointIds> {
        let capacity = self.set_capacity();
        if capacity == 0 {
            return None;
        }
        let mut ids = PointIds::default();
        for &i in set {
            if !ids.contains(i) {
                if ids.len == capacity {
                    return None;
                }
                ids.push(i);
            }
        }
        (ids.len > 0).then_some(ids)
    }

    /// Appends a set slot holding `ids` (at most [`SET_POINTS`], padded with [`NO_POINT`])
    /// and returns its slot.
    pub(super) fn store_set(&mut self, ids: &[u32]) -> u32 {
        debug_assert!(!ids.is_empty() && ids.len() <= SET_POINTS);
        if let Some(s) = self.free_sets.pop() {
            self.write_set(s, ids);
            return SET_BOX | s;
        }
        let s = self.sets.len() / SET_POINTS;
        assert!(s < SET_BOX as usize, "more sets than a tree can index");
        self.sets.extend_from_slice(ids);
        self.sets
            .extend(std::iter::repeat_n(NO_POINT, SET_POINTS - ids.len()));
        SET_BOX | s as u32
    }

    /// Points `node` at a set slot holding `ids`, rewriting its own set slot if it has one.
    pub(super) fn set_box_ids(&mut self, node: u32, ids: &[u32]) {
        match Slot::of(self.nodes[node as usize].slot) {
            Slot::Set(s) => self.write_set(s, ids),
            _ => self.nodes[node as usize].slot = self.store_set(ids),
        }
    }

    /// Makes set slot `s` hold `ids`.
    pub(super) fn write_set(&mut self, s: u32, ids: &[u32]) {
        let run = &mut self.sets[s as usize * SET_POINTS..(s as usize + 1) * SET_POINTS];
        run.fill(NO_POINT);
        run[..ids.len()].copy_from_slice(ids);
    }

    /// The slot naming the single training point of `set` as its box, if `set` holds one
    /// point (possibly repeated) with an id that fits beside the flag.
    pub(super) fn point_slot(set: &[u32]) -> Option<u32> {
        let first = *set.first()?;
        (first < NO_BOX & !POINT_BOX && set.iter().all(|&i| i == first))
            .then_some(POINT_BOX | first)
    }

    /// The slot of the next box appended to `bounds`.
    pub(super) fn fresh_slot(&self) -> u32 {
        let slot = self.bounds.len() / (2 * self.n_features).max(1);
        assert!(slot < SET_BOX as usize, "more boxes than a tree can index");
        slot as u32
    }

    /// Stores a box (lower then upper) and returns its slot: one a freed node left, if any,
    /// else a new one at the end of `bounds`.
    pub(super) fn store_box(&mut self, bounds: &[Feature]) -> u32 {
        if let Some(b) = self.free_boxes.pop() {
            let span = 2 * self.n_features;
            self.bounds[span * b as usize..span * (b as usize + 1)].copy_from_slice(bounds);
            return b;
        }
        let slot = self.fresh_slot();
        self.bounds.extend_from_slice(bounds);
        slot
    }

    /// A slot for a copy of `node`'s box: a stored copy of a stored box, a set of the same
    /// points otherwise (the copy then grows as its own).
    pub(super) fn copy_box(&mut self, node: u32, features: &[Feature]) -> u32 {
        let d = self.n_features;
        match Slot::of(self.nodes[node as usize].slot) {
            Slot::Stored(b) => {
                let s = 2 * d * b as usize;
                if let Some(f) = self.free_boxes.pop() {
                    self.bounds.copy_within(s..s + 2 * d, 2 * d * f as usize);
                    return f;
                }
                let fresh = self.fresh_slot();
                self.bounds.extend_from_within(s..s + 2 * d);
                fresh
            }
            Slot::Point(i) if self.set_capacity() > 0 => self.store_set(&[i]),
            Slot::Point(_) => self.materialize_box(node, features),
            Slot::Set(s) => {
                let ids = PointIds::from_slice(self.set_ids(s));
                self.store_set(&ids)
            }
            Slot::Unset => unreachable!("node {node} has no box"),
        }
    }

    /// Stores `node`'s box (a row or a set's bounding box until now) and returns its slot.
    pub(super) fn materialize_box(&mut self, node: u32, features: &[Feature]) -> u32 {
        let mut hull = std::mem::take(&mut self.hull);
        match Slot::of(self.nodes[node as usize].slot) {
            Slot::Point(i) => {
                let row = self.row(features, i);
                hull.clear();
                hull.extend_from_slice(row);
                hull.extend_from_slice(row);
            }
            Slot::Set(_) => self.hull_into(node, features, &mut hull),
            slot => unreachable!("node {node}: nothing to store ({slot:?})"),
        }
        let b = self.store_box(&hull);
        self.hull = hull;
        b
    }

    /// Gives `node`'s stored box or set slot back for reuse (its slot is then unset).
    pub(super) fn release_box(&mut self, node: u32) {
        match Slot::of(self.nodes[node as usize].slot) {
            Slot::Stored(b) => self.free_boxes.push(b),
            Slot::Set(s) => self.free_sets.push(s),
            Slot::Point(_) | Slot::Unset => {}
        }
        self.nodes[node as usize].slot = NO_BOX;
    }

    /// The node's box for writing; a box that is a training point's row or a set's (or
    /// unset) is first stored, as it is (or zeros). A set slot left behind is reused by
    /// the next set.
    pub(super) fn box_mut(
        &mut self,
        node: u32,
        features: &[Feature],
    ) -> (&mut [Feature], &mut [Feature]) {
        let (d, j) = (self.n_features, node as usize);
        let slot = match Slot::of(self.nodes[j].slot) {
            Slot::Unset => self.store_box(&vec![0.0; 2 * d]),
            Slot::Point(_) => self.materialize_box(node, features),
            Slot::Set(s) => {
                let b = self.materialize_box(node, features);
                self.free_sets.push(s);
                b
            }
            Slot::Stored(b) => b,
        };
        self.nodes[j].slot = slot;
        let s = slot as usize;
        self.bounds[2 * d * s..2 * d * (s + 1)].split_at_mut(d)
    }

    /// Sets the node's box to the bounding box of `points`: the row itself (nothing stored)
    /// for a single point, or their ids for a few, on a node without a stored box.
    pub(super) fn fit_box<T: Copy>(&mut self, node: u32, points: &[u32], data: &TrainingPoints<T>) {
        if !self.stores_box(node) {
            if let Some(slot) = Self::point_slot(points) {
                self.nodes[node as usize].slot = slot;
                return;
            }
            if let Some(ids) = self.few_distinct(points) {
                self.set_box_ids(node, &ids);
                return;
            }
        }
        let (lower, upper) = self.box_mut(node, data.features);
        lower.copy_from_slice(data.row(points[0]));
        upper.copy_from_slice(data.row(points[0]));
        for &i in &points[1..] {
            grow_box(lower, upper, data.row(i));
        }
    }
    /// Grows the box of `node` to contain training point `point` (`outside`: whether it
    /// lies outside the box). A box that is already that point stays as it is; a row or a
    /// set takes the point's id if it widens the box and there is room (see
    /// [`widen_set`](Self::widen_set)); a stored box grows.
    pub(super) fn extend_box<T: Copy>(
        &mut self,
        node: u32,
        point: u32,
        data: &TrainingPoints<T>,
        outside: bool,
    ) {
        if self.nodes[node as usize].slot == POINT_BOX | point
            || self.widen_set(node, &[point], data.features, Some(outside))
        {
            return;
        }
        let (lower, upper) = self.box_mut(node, data.features);
        grow_box(lower, upper, data.row(point));
    }

    /// Widens the box of a node that is a row or a set (not a stored box) by `points`: the
    /// ids of those that lie outside the box so far (`outside`, if known, answers for all;
    /// else each is measured) join its set. False, with nothing changed, if the node stores
    /// a box or the set would overflow. A point inside joins no set: the bounding box of
    /// the ids stays that of all points below, and sets fill only with points that widen
    /// them.
    pub(super) fn widen_set(
        &mut self,
        node: u32,
        points: &[u32],
        features: &[Feature],
        outside: Option<bool>,
    ) -> bool {
        let capacity = self.set_capacity();
        let mut ids = match Slot::of(self.nodes[node as usize].slot) {
            Slot::Point(i) if capacity > 1 => PointIds::from_slice(&[i]),
            Slot::Set(s) if capacity > 0 => PointIds::from_slice(self.set_ids(s)),
            _ => return false,
        };
        let held = ids.len;
        for &i in points {
            if ids.contains(i) {
                continue;
            }
            let widens = outside.unwrap_or_else(|| {
                let rows = self.rows_of(features, &ids);
                hull_extension_rate(&rows[..ids.len], self.row(features, i)) > 0.0
            });
            if widens {
                if ids.len == capacity {
                    return false;
                }
                ids.push(i);
            }
        }
        // A row becomes a set even when nothing joins it (its leaf now holds other ids).
        if ids.len > held || matches!(Slot::of(self.nodes[node as usize].slot), Slot::Point(_)) {
            self.set_box_ids(node, &ids);
        }
        true
    }
    /// Grows the box of `node` by the box `[lo, hi]`.
    pub(super) fn grow_box_by(
        &mut self,
        node: u32,
        lo: &[Feature],
        hi: &[Feature],
        set: &[u32],
        features: &[Feature],
    ) {
        if Self::point_slot(set) == Some(self.nodes[node as usize].slot) {
            // The box is the one point all of `set` repeats.
            return;
        }
        if self.widen_set(node, set, features, None) {
            return;
        }
        let (lower, upper) = self.box_mut(node, features);
        grow_box(lower, upper, lo);
        grow_box(lower, upper, hi);
    }
}

/// Up to [`SET_POINTS`] point ids, on the stack.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct PointIds {
    pub(super) ids: [u32; SET_POINTS],
    pub(super) len: usize,
}

impl PointIds {
    pub(super) fn from_slice(ids: &[u32]) -> Self {
        let mut out = PointIds::default();
        ids.iter().for_each(|&i| out.push(i));
        out
    }
    pub(super) fn contains(&self, i: u32) -> bool {
        self.ids[..self.len].contains(&i)
    }
    pub(super) fn push(&mut self, i: u32) {
        self.ids[self.len] = i;
        self.len += 1;
    }
}

impl std::ops::Deref for PointIds {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        &self.ids[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{NoStats, PauseRule};
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// On wide data a node over a few points names them instead of storing a box: its box
    /// (the bounding box of their rows) and its η for any row are bit for bit those of the
    /// stored box it replaces, in a batch fit and after online insertions (which turn rows
    /// into sets, grow sets and store a box once a set is full).
    #[test]
    fn point_sets_measure_like_the_boxes_they_replace() {
        let d = 150; // three parts of the η of a set: 64, 64 and 22 features
        let n = 90;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        // A coarse grid, so that points repeat in some features and differ in others.
        let features: Vec<Feature> = (0..n * d)
            .map(|_| rng.gen_range(0..6) as Feature / 5.0)
            .collect();
        let targets = vec![(); n];
        let data = TrainingPoints {
            features: &features,
            n_features: d,
            targets: &targets,
        };
        let queries: Vec<Feature> = (0..20 * d).map(|_| rng.gen_range(-0.5..1.5)).collect();
        // Batch, batch then points, points, batch then sets of 7 points (the set road).
        for (online_from, batch) in [(n, 1), (30, 1), (0, 1), (30, 7)] {
            let mut tree = MondrianTree::new(d, f64::INFINITY, PauseRule::NEVER);
            let first: Vec<u32> = (0..online_from as u32).collect();
            if !first.is_empty() {
                tree.fit(first, &data, &mut NoStats, &mut rng);
            }
            let rest: Vec<u32> = (online_from as u32..n as u32).collect();
            for part in rest.chunks(batch) {
                match part {
                    [i] => tree.extend(*i, 1, &data, &mut NoStats, &mut rng),
                    _ => tree.extend_many(part.to_vec(), &data, &mut NoStats, &mut rng),
                }
            }
            tree.check_invariants(&data, &NoStats).expect("invariants");
            let kinds: Vec<Slot> = tree.nodes.iter().map(|r| Slot::of(r.slot)).collect();
            let sets = kinds.iter().filter(|k| matches!(k, Slot::Set(_))).count();
            let stored = kinds
                .iter()
                .filter(|k| matches!(k, Slot::Stored(_)))
                .count();
            assert!(
                sets > 10 && stored > 10,
                "{online_from}: {sets} sets, {stored} boxes"
            );
            for j in 0..tree.n_nodes() as u32 {
                let (lower, upper) = tree.data_box(j, &features);
                for x in queries.chunks_exact(d).chain(features.chunks_exact(d)) {
                    assert_eq!(
                        tree.eta_with(crate::simd::Dispatched, j, x, &features)
                            .to_bits(),
                        crate::process::extension_rate(&lower, &upper, x).to_bits(),
                        "{online_from}: node {j} ({:?})",
                        kinds[j as usize]
                    );
                }
                if !tree.is_leaf(j) {
                    let dim = tree.split_dimension(j);
                    assert_eq!(tree.upper_at(j, dim, &features), upper[dim]);
                }
            }
        }
    }

    /// Online, a point that does not widen a set's box joins no set: twenty copies of one
    /// row under distinct ids leave one leaf whose set names the first and no stored box
    /// (a set that took every id would fill and store a box of zero extent).
    #[test]
    fn points_inside_a_set_box_join_no_set() {
        let d = SET_MIN_FEATURES;
        let features: Vec<Feature> = (0..20 * d).map(|k| (k % d) as Feature).collect();
        let targets = vec![(); 20];
        let data = TrainingPoints {
            features: &features,
            n_features: d,
            targets: &targets,
        };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let mut tree = MondrianTree::new(d, f64::INFINITY, PauseRule::NEVER);
        for i in 0..20 {
            tree.extend(i, 1, &data, &mut NoStats, &mut rng);
        }
        tree.check_invariants(&data, &NoStats).expect("invariants");
        assert_eq!(tree.n_nodes(), 1);
        assert_eq!(tree.leaf_points(0).len(), 20);
        assert!(tree.bounds.is_empty(), "a box was stored");
        match Slot::of(tree.nodes[0].slot) {
            Slot::Set(s) => assert_eq!(tree.set_ids(s), [0]),
            slot => panic!("{slot:?}"),
        }
    }
}
