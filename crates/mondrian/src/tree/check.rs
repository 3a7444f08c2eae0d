//! Shape checks of a decoded tree: a model file whose checksum is right can still hold a
//! tree no training could grow (a hand-edited or foreign file), and every walk over the
//! arena assumes the invariants checked here.

use super::{
    MondrianTree, Node, Slot, INLINE_POINTS, NO_NODE, NO_POINT, SET_MIN_FEATURES, SET_POINTS,
    SPILLED,
};

impl MondrianTree {
    /// Checks a tree read from a file: one box per node and a node for every stored box,
    /// leaves whose points are in their record or in a list of their own, a root without
    /// parent, every node reached exactly once from it (so no cycle and no orphan), each
    /// internal node with two children that name it as parent and a split dimension below
    /// the width, finite boxes, cuts and split times that grow down every path and end at
    /// the lifetime (leaves at it, splits before it), and leaf point ids below `n_points`.
    /// Reports the first problem found.
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
        for (j, &Node { slot, .. }) in self.nodes.iter().enumerate() {
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
        if seen.contains(&false) {
            return Err("a tree holds nodes outside it".into());
        }
        Ok(())
    }
}
