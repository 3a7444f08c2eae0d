//! Shape checks of a decoded tree: a model file whose checksum is right can still hold a
//! tree no training could grow (a hand-edited or foreign file), and every walk over the
//! arena assumes the invariants checked here.

use super::arena::{INLINE_POINTS, SPILLED};
use super::boxes::{NO_POINT, SET_POINTS};
use super::{MondrianTree, Node, NodeStatistics, Slot, TrainingPoints, NO_NODE, SET_MIN_FEATURES};
use crate::process::{linear_dimension, Feature};

impl MondrianTree {
    /// Checks a tree read from a file: one box per node and a node for every stored box,
    /// leaves whose points are in their record or in a list of their own, a root without
    /// parent, every node reached exactly once from it (so no cycle and no orphan), each
    /// internal node with two children that name it as parent and a split dimension below
    /// the width, finite boxes, cuts and split times that grow down every path and end at
    /// the lifetime (leaves at it, splits before it), and leaf point ids below `n_points`;
    /// free lists naming each free node, box and set once, nodes on it blank and out of
    /// the tree. Reports the first problem found.
    pub(crate) fn check_decoded(&self, n_points: usize) -> Result<(), String> {
        let (n, d) = (self.nodes.len(), self.n_features);
        if self.lifetime.is_nan() || self.lifetime < 0.0 {
            return Err("a tree's lifetime is not ≥ 0".into());
        }
        if n >= NO_NODE as usize
            || self.lists.len() != self.list_owner.len()
            || !self.bounds.len().is_multiple_of((2 * d).max(1))
            || self.bounds.len() / (2 * d).max(1) > n
            || !self.sets.len().is_multiple_of(SET_POINTS)
        {
            return Err("a tree's node arrays disagree in length".into());
        }
        // Free nodes: named once each, blank, and (checked below) reached from nowhere.
        let mut free = vec![false; n];
        for &j in &self.free_nodes {
            match free.get_mut(j as usize) {
                Some(f) if !*f && self.nodes[j as usize] == Self::free_record(self.lifetime) => {
                    *f = true
                }
                _ => return Err("a tree's free list names a node in use".into()),
            }
        }
        // Each list belongs to the one leaf that names it and holds more ids than a record
        // can, and a leaf holds its points inline (at most INLINE_POINTS) or in its list.
        for (k, &owner) in self.list_owner.iter().enumerate() {
            match self.nodes.get(owner as usize) {
                Some(node)
                    if node.left == NO_NODE
                        && node.count() == SPILLED
                        && node.pair[0] as usize == k
                        && self.lists[k].len() > INLINE_POINTS => {}
                _ => return Err("a tree's point lists do not match its leaves".into()),
            }
        }
        for (j, node) in self.nodes.iter().enumerate() {
            let fits = match node.count() {
                SPILLED => self.list_owner.get(node.pair[0] as usize) == Some(&(j as u32)),
                count => count as usize <= INLINE_POINTS,
            };
            if node.left == NO_NODE && !fits {
                return Err("a tree's point lists do not match its leaves".into());
            }
        }
        // Each stored box belongs to one node; a box that is a point belongs to a leaf
        // holding only that point; a set slot belongs to at most one node (sets left behind
        // by a node whose box came to be stored are unused) and names points the model has.
        let mut owned = vec![false; self.bounds.len() / (2 * d).max(1)];
        let mut set_owned = vec![false; self.sets.len() / SET_POINTS];
        // A free box or set counts as owned by the free list, once.
        for (list, owned) in [
            (&self.free_boxes, &mut owned),
            (&self.free_sets, &mut set_owned),
        ] {
            for &b in list {
                match owned.get_mut(b as usize) {
                    Some(o) if !*o => *o = true,
                    _ => return Err("a tree's free lists name a slot twice".into()),
                }
            }
        }
        for (j, &Node { slot, .. }) in self.nodes.iter().enumerate() {
            if free[j] {
                continue;
            }
            match Slot::of(slot) {
                Slot::Stored(b) => match owned.get_mut(b as usize) {
                    Some(o) if !*o => *o = true,
                    _ => return Err("a tree's box slots are not one per node".into()),
                },
                Slot::Set(s) => {
                    if d < SET_MIN_FEATURES {
                        return Err("a tree this narrow names point sets as boxes".into());
                    }
                    match set_owned.get_mut(s as usize) {
                        Some(o) if !*o => *o = true,
                        _ => return Err("a tree's box slots are not one per node".into()),
                    }
                    let run = &self.sets[s as usize * SET_POINTS..(s as usize + 1) * SET_POINTS];
                    let held = run.iter().take_while(|&&i| i != NO_POINT).count();
                    if held == 0 || run[held..].iter().any(|&i| i != NO_POINT) {
                        return Err("a tree node's point set is malformed".into());
                    }
                    if run[..held].iter().any(|&i| i as usize >= n_points) {
                        return Err("a tree node's box names points the model does not have".into());
                    }
                }
                Slot::Point(i) => {
                    let points = self.leaf_points(j as u32);
                    if i as usize >= n_points
                        || points.is_empty()
                        || points.iter().any(|&p| p != i)
                        || self.nodes[j].left != NO_NODE
                    {
                        return Err("a tree node's box names a point it does not hold".into());
                    }
                }
                Slot::Unset => return Err("a tree node has no box".into()),
            }
        }
        if owned.contains(&false) {
            return Err("a tree's box slots are not one per node".into());
        }
        if n == 0 {
            return match self.root {
                NO_NODE => Ok(()),
                _ => Err("an empty tree names a root".into()),
            };
        }
        let root = self.root as usize;
        if root >= n || self.nodes[root].parent != NO_NODE {
            return Err("a tree's root is not a node without parent".into());
        }
        let mut seen = vec![false; n];
        let mut stack = vec![root];
        while let Some(j) = stack.pop() {
            if std::mem::replace(&mut seen[j], true) {
                return Err("a tree node is reached twice".into());
            }
            let node = &self.nodes[j];
            let tau_parent = match node.parent {
                NO_NODE => 0.0,
                p => self.nodes[p as usize].tau,
            };
            if node.tau.is_nan() || node.tau < tau_parent {
                return Err("a tree's split times do not grow down a path".into());
            }
            // A box that is a point is a stored row, which the store checks.
            let (lower, upper) = match self.stores_box(j as u32) {
                true => self.box_slices(j as u32, &[]),
                false => (&[][..], &[][..]),
            };
            if lower
                .iter()
                .zip(upper)
                .any(|(lo, hi)| !(lo.is_finite() && hi.is_finite() && lo <= hi))
            {
                return Err("a tree node's box is not finite".into());
            }
            // Leaves end at the lifetime, splits come before it (a forged time would load,
            // then make the next insertion grow a tree its own checks refuse).
            if (node.left == NO_NODE) != (node.tau == self.lifetime) || node.tau > self.lifetime {
                return Err("a tree's split times do not end at its lifetime".into());
            }
            if node.left == NO_NODE {
                if self
                    .leaf_points(j as u32)
                    .iter()
                    .any(|&i| i as usize >= n_points)
                {
                    return Err("a tree leaf holds a point the model does not have".into());
                }
                continue;
            }
            if !node.tau.is_finite()
                || node.split_dim as usize >= d
                || !node.split_loc().is_finite()
            {
                return Err("a tree's split is not valid".into());
            }
            for child in [node.left, node.right()] {
                if child as usize >= n || self.nodes[child as usize].parent as usize != j {
                    return Err("a tree's children do not match their parent".into());
                }
                stack.push(child as usize);
            }
        }
        if seen.iter().zip(&free).any(|(&s, &f)| s == f) {
            return Err("a tree holds nodes outside it".into());
        }
        Ok(())
    }

    /// Checks the structural invariants of spec §1.6 (items 1–4, 7, 8) against the data;
    /// returns a description of the first violation.
    pub fn check_invariants<S: NodeStatistics>(
        &self,
        data: &TrainingPoints<S::Target>,
        stats: &S,
    ) -> Result<(), String> {
        // The structure a decoded file must have: lists and boxes owned one per node,
        // every node reached once from the root, times that end at the lifetime.
        self.check_decoded(data.targets.len())?;
        if self.root == NO_NODE {
            return Ok(());
        }
        let order = self.subtree_preorder(self.root);
        let d = self.n_features;
        let f = data.features;
        // Points under each node, bottom-up.
        let mut under: Vec<Vec<u32>> = vec![Vec::new(); self.n_nodes()];
        for &j in order.iter().rev() {
            let ju = j as usize;
            match self.children(j) {
                Some((l, r)) => {
                    let dim = self.nodes[ju].dim();
                    let loc = self.nodes[ju].split_loc();
                    let (lower, upper) = self.data_box(j, f);
                    if !(lower[dim] <= loc && loc < upper[dim]) {
                        return Err(format!("node {j}: split {loc} outside its box"));
                    }
                    if !matches!(
                        Slot::of(self.nodes[ju].slot),
                        Slot::Stored(_) | Slot::Set(_)
                    ) {
                        return Err(format!("internal node {j} has neither a box nor a set"));
                    }
                    if self.data_box(l, f).1[dim] > loc || self.data_box(r, f).0[dim] <= loc {
                        return Err(format!("node {j}: children on the wrong side of the split"));
                    }
                    let mut all = std::mem::take(&mut under[l as usize]);
                    all.extend(std::mem::take(&mut under[r as usize]));
                    under[ju] = all;
                }
                None => {
                    if self.leaf_points(j).is_empty() {
                        return Err(format!("leaf {j} is empty"));
                    }
                    let pauses = self.pause.holds(self.leaf_points(j), stats, data.targets);
                    if self.nodes[ju].paused() && !pauses {
                        return Err(format!("paused leaf {j} fails the pause predicate"));
                    }
                    let (lower, upper) = self.data_box(j, f);
                    if self.lifetime.is_infinite()
                        && !pauses
                        && linear_dimension(&lower, &upper) > 0.0
                    {
                        return Err(format!("leaf {j} with λ = ∞ has a positive extent"));
                    }
                    under[ju] = self.leaf_points(j).to_vec();
                }
            }
            // A set names points below and is not free (online, a point that does not widen
            // a set's box joins no set: the bounding box of the set stays that of all points
            // below, checked next).
            if let Slot::Set(set) = Slot::of(self.nodes[ju].slot) {
                if self.set_ids(set).iter().any(|i| !under[ju].contains(i)) {
                    return Err(format!("node {j}: its set names points it does not hold"));
                }
                if self.free_sets.contains(&set) {
                    return Err(format!("node {j}: its set slot is marked free"));
                }
            }
            // Box equals the bounding box of the points below.
            let (lower, upper) = self.data_box(j, f);
            for dim in 0..d {
                let lo = under[ju]
                    .iter()
                    .map(|&i| data.row(i)[dim])
                    .fold(Feature::INFINITY, Feature::min);
                let hi = under[ju]
                    .iter()
                    .map(|&i| data.row(i)[dim])
                    .fold(Feature::NEG_INFINITY, Feature::max);
                if lo != lower[dim] || hi != upper[dim] {
                    return Err(format!(
                        "node {j}: box is not the bounding box in dim {dim}"
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::NoStats;
    use crate::tree::{Layout, PauseRule, SET_MIN_FEATURES};

    /// A decoded tree whose leaves and point lists disagree is refused, not used.
    #[test]
    fn decoding_refuses_point_lists_that_do_not_match_their_leaves() {
        // Wide enough for nodes over a few points to keep their ids: feature 0 is the
        // point's index, the others 0.
        let d = SET_MIN_FEATURES;
        let features: Vec<Feature> = (0..5 * d)
            .map(|k| if k % d == 0 { (k / d) as Feature } else { 0.0 })
            .collect();
        let targets = [(); 5];
        let data = TrainingPoints {
            features: &features,
            n_features: d,
            targets: &targets,
        };
        let layout = Layout::Split {
            tau: 0.5,
            dim: 0,
            loc: 2.5,
            left: Box::new(Layout::Leaf(vec![0, 1, 2])),
            right: Box::new(Layout::Leaf(vec![3, 4])),
        };
        let tree = MondrianTree::from_layout(
            d,
            f64::INFINITY,
            PauseRule::NEVER,
            &layout,
            &data,
            &mut NoStats,
        )
        .expect("layout");
        tree.check_decoded(5).expect("a grown tree passes");
        let (left, right) = tree.children(tree.root().unwrap()).unwrap();
        assert_eq!(tree.nodes[left as usize].count(), SPILLED);
        assert_eq!(tree.leaf_points(right), [3, 4]);
        // Each edit gets the tree and the left and right leaves.
        type Forgery = fn(&mut MondrianTree, usize, usize);
        let forgeries: [(&str, Forgery); 10] = [
            ("list owned by an inline leaf", |t, _, r| {
                t.list_owner[0] = r as u32
            }),
            ("list owned by an internal node", |t, _, _| {
                t.list_owner[0] = t.root
            }),
            ("inline count above two", |t, _, r| {
                t.nodes[r].set_count(SPILLED + 4)
            }),
            ("list index out of range", |t, l, _| t.nodes[l].pair[0] = 1),
            ("a second leaf naming the list", |t, _, r| {
                t.nodes[r].set_count(SPILLED);
                t.nodes[r].pair[0] = 0;
            }),
            ("a leaf ending before the lifetime", |t, _, r| {
                t.nodes[r].tau = 1.0
            }),
            ("a split at the lifetime", |t, _, _| {
                t.nodes[t.root as usize].tau = f64::INFINITY
            }),
            ("a stored box no node owns", |t, _, _| {
                // The root moves to a copy of its box, leaving the first one to no node.
                let root = t.root as usize;
                t.nodes[root].slot = t.copy_box(t.root, &[]);
            }),
            ("a set naming a point the model does not have", |t, l, _| {
                let Slot::Set(s) = Slot::of(t.nodes[l].slot) else {
                    panic!("a three-point leaf keeps a set")
                };
                t.sets[s as usize * SET_POINTS] = 99;
            }),
            ("two nodes naming one set", |t, l, r| {
                t.nodes[r].slot = t.nodes[l].slot
            }),
        ];
        for (what, forge) in forgeries {
            let mut forged = tree.clone();
            forge(&mut forged, left as usize, right as usize);
            assert!(forged.check_decoded(5).is_err(), "{what} passed");
        }
    }
}
