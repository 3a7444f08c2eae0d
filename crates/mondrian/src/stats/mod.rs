//! Node statistics: what each model hangs off the shared Mondrian tree (DESIGN.md: one tree,
//! many statistics).
//!
//! The tree calls the hooks of [`NodeStatistics`] whenever the data under a node changes:
//! it sets a node from scratch (a leaf from its points, an internal node from its
//! children), absorbs a point on its way in and releases it on its way out. Label purity,
//! which the classifier's pause rule needs, is an opt-in capability: statistics that can
//! tell a pure block override the three purity hooks; the others never pause on it.
//! [`NoStats`] keeps nothing, for models that only need the partition (the Mondrian
//! kernel).

pub mod counts;
pub mod gaussian;
pub mod label;
pub mod moments;

/// The statistics a model keeps per node of a [`MondrianTree`](crate::tree::MondrianTree).
///
/// Node ids index the tree's arena; [`resize`](Self::resize) follows the arena's length.
/// A node the tree reuses after a deletion is always set again (by `set_leaf`,
/// `set_internal` or `set_parent_of`) before it is read.
pub trait NodeStatistics {
    /// What a training point carries besides its features (a class, a real target, …).
    type Target: Copy;

    /// Make room for `n_nodes` nodes; new nodes start empty.
    fn resize(&mut self, n_nodes: usize);
    /// Capacity hint: the tree is about to grow to at most `n_nodes` nodes.
    fn reserve(&mut self, n_nodes: usize) {
        let _ = n_nodes;
    }
    /// Set leaf `node`'s statistics from its points (with multiplicity).
    fn set_leaf(&mut self, node: u32, points: &[u32], targets: &[Self::Target]);
    /// Set internal `node`'s statistics from its children; returns whether they changed.
    fn set_internal(&mut self, node: u32, left: u32, right: u32) -> bool;
    /// Set a new internal `node`'s statistics as if `child` were its only child.
    fn set_parent_of(&mut self, node: u32, child: u32);
    /// A point (with multiplicity `weight`) joined leaf `node`; returns whether the change
    /// reaches the parent.
    fn absorb_leaf(&mut self, node: u32, target: Self::Target, weight: u32) -> bool;
    /// A child of internal `node` gained a point; returns whether the change reaches the
    /// parent.
    fn absorb_internal(&mut self, node: u32, target: Self::Target, weight: u32) -> bool;
    /// The inverse of [`absorb_leaf`](Self::absorb_leaf): a point (with multiplicity
    /// `weight`) left leaf `node`, which now holds `points`; returns whether the change
    /// reaches the parent. The default sets the leaf from its points again, which is
    /// exact whatever the arithmetic of the statistics.
    fn release_leaf(
        &mut self,
        node: u32,
        target: Self::Target,
        weight: u32,
        points: &[u32],
        targets: &[Self::Target],
    ) -> bool {
        let _ = (target, weight);
        self.set_leaf(node, points, targets);
        true
    }
    /// The inverse of [`absorb_internal`](Self::absorb_internal): a point left a child of
    /// internal `node` (children `left`, `right`, already updated); returns whether the
    /// change reaches the parent. The default sets the node from its children again, so
    /// that statistics after any sequence of deletions equal a recomputation rather than
    /// accumulate rounding (a running sum that takes and gives back every point of an
    /// endless stream would drift).
    fn release_internal(
        &mut self,
        node: u32,
        left: u32,
        right: u32,
        target: Self::Target,
        weight: u32,
    ) -> bool {
        let _ = (target, weight);
        self.set_internal(node, left, right)
    }
    /// Whether the points all carry one target (the label-purity pause, spec
    /// `mf-classification.md` §2.3). Opt-in: the default says no, so statistics without
    /// labels never pause on purity.
    fn is_pure(&self, points: &[u32], targets: &[Self::Target]) -> bool {
        let _ = (points, targets);
        false
    }
    /// Whether leaf `node`'s points plus one more with `target` all carry one target: the
    /// purity test of an online insertion in O(1) from the leaf's statistics. Opt-in, as
    /// [`is_pure`](Self::is_pure).
    fn stays_pure(&self, node: u32, target: Self::Target) -> bool {
        let _ = (node, target);
        false
    }
    /// Whether the points below `node` (leaf or internal, statistics up to date) all carry
    /// one target: the purity test of a deletion, which may leave a block pure. Opt-in, as
    /// [`is_pure`](Self::is_pure).
    fn node_is_pure(&self, node: u32) -> bool {
        let _ = node;
        false
    }
    /// Heap bytes the statistics take per node (for size reports).
    fn bytes_per_node(&self) -> usize;
    /// Asks the cache for `node`'s statistics, which an insertion is about to read.
    #[inline(always)]
    fn prefetch(&self, node: u32) {
        let _ = node;
    }
}

/// Statistics that keep nothing: the partition alone (which leaf a point falls in, at which
/// time), as the Mondrian kernel reads it. Training points carry no target (`()`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NoStats;

impl NodeStatistics for NoStats {
    type Target = ();
    #[inline]
    fn resize(&mut self, _: usize) {}
    #[inline]
    fn set_leaf(&mut self, _: u32, _: &[u32], _: &[()]) {}
    #[inline]
    fn set_internal(&mut self, _: u32, _: u32, _: u32) -> bool {
        false
    }
    #[inline]
    fn set_parent_of(&mut self, _: u32, _: u32) {}
    #[inline]
    fn absorb_leaf(&mut self, _: u32, _: (), _: u32) -> bool {
        false
    }
    #[inline]
    fn absorb_internal(&mut self, _: u32, _: (), _: u32) -> bool {
        false
    }
    #[inline]
    fn release_leaf(&mut self, _: u32, _: (), _: u32, _: &[u32], _: &[()]) -> bool {
        false
    }
    #[inline]
    fn release_internal(&mut self, _: u32, _: u32, _: u32, _: (), _: u32) -> bool {
        false
    }
    fn bytes_per_node(&self) -> usize {
        0
    }
}
