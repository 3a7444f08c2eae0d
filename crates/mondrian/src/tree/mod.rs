//! The Mondrian tree: one arena-backed structure shared by every model
//! (spec `mf-classification.md` §1.3, §2).
//!
//! The tree knows geometry and time only: boxes, split dimensions and locations, split
//! times and the training points held by leaves. Everything that depends on the targets
//! (label counts, Gaussian sums, point counts, …) lives in a [`NodeStatistics`]
//! implementation that the tree keeps up to date through a handful of callbacks, so the
//! classifier, the regressor, density and kernel models share one sampler.
//!
//! The tree is split by concern, one file each:
//!
//! | file | what | spec |
//! |---|---|---|
//! | `arena.rs` | node records, the free list, the point ids a leaf holds | §1.3 |
//! | `boxes.rs` | box storage and its encodings (stored, a point's row, a few points' ids) | §1.3 |
//! | `sample.rs` | batch sampling restricted to data, with pausing | §2.2–2.3 |
//! | `extend.rs` | online insertion (the conditional Mondrian extension) | §2.4–2.6 |
//! | `delete.rs` | exact deletion (projectivity) | `mondrian-polya-forest.md` §7.3 |
//! | `descend.rs` | routing, recorded routes, branch-off paths; lockstep and prefetching | §1.2, §4 |
//! | `check.rs` | invariants of grown and decoded trees | §1.6 |
//! | `timed.rs` | sampling in split-time order; a tree read at a smaller lifetime | `mondrian-kernel.md` App. C |
//!
//! Layout: nodes are `u32` indices into the node records and, through them, the other
//! per-tree buffers. A node's box lives in the flat buffer `bounds` at the position its
//! record's `slot` names, except for a leaf whose points are all one training point (its
//! box is that point's row) and, on data of 64 features or more, a node over at most four
//! distinct points, which keeps their ids instead (see `boxes.rs`). A leaf keeps up to two
//! point ids in its own record; only a leaf with more has a list in `lists`. Nodes, boxes
//! and sets that deletion frees wait on free lists and are reused before the buffers grow,
//! so a tree over a sliding window stays within a bound set by the window.

mod arena;
mod boxes;
mod check;
mod delete;
mod descend;
mod extend;
mod sample;
mod timed;

pub use crate::stats::{NoStats, NodeStatistics};
pub use arena::NO_NODE;
pub use boxes::SET_MIN_FEATURES;
pub use descend::{PathStep, LOCKSTEP};
pub(crate) use timed::Earliest;

use serde::{Deserialize, Serialize};

use crate::process::Feature;
use arena::{Node, SPILLED};
use boxes::Slot;
use sample::BlockScratch;

/// Hints the cache to load `lines` 64-byte lines from `ptr`; no effect on memory, never
/// faults, whatever the pointer.
#[inline(always)]
pub fn prefetch_lines(ptr: *const u8, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    for line in 0..lines {
        #[allow(unused_unsafe)]
        // SAFETY: a prefetch is a hint: it never faults and has no architectural effect.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch(ptr.wrapping_add(64 * line) as *const i8, _MM_HINT_T0);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (ptr, lines);
}

/// Read-only view of the training points a tree indexes into: row-major features and one
/// target per row.
#[derive(Debug, Clone, Copy)]
pub struct TrainingPoints<'a, T> {
    /// Row-major features, `n_features` per row.
    pub features: &'a [Feature],
    /// Number of features per row.
    pub n_features: usize,
    /// One target per row.
    pub targets: &'a [T],
}

impl<'a, T: Copy> TrainingPoints<'a, T> {
    /// Row `i` of the features.
    #[inline]
    pub fn row(&self, i: u32) -> &'a [Feature] {
        let d = self.n_features;
        &self.features[i as usize * d..(i as usize + 1) * d]
    }

    /// Target of row `i`.
    #[inline]
    pub fn target(&self, i: u32) -> T {
        self.targets[i as usize]
    }
}
/// The shape of a tree for [`MondrianTree::from_layout`].
#[derive(Debug, Clone, PartialEq)]
pub enum Layout {
    /// A leaf holding these training points.
    Leaf(Vec<u32>),
    /// An internal node: split time, dimension and location, children.
    Split {
        /// Absolute split time τ.
        tau: f64,
        /// Split dimension.
        dim: usize,
        /// Split location: `x[dim] ≤ loc` goes left.
        loc: Feature,
        /// Left subtree.
        left: Box<Layout>,
        /// Right subtree.
        right: Box<Layout>,
    },
}

impl Layout {
    /// All points below.
    pub fn points(&self) -> Vec<u32> {
        match self {
            Layout::Leaf(p) => p.clone(),
            Layout::Split { left, right, .. } => {
                let mut p = left.points();
                p.extend(right.points());
                p
            }
        }
    }
}

/// The pause predicate `P(S) = (pause_on_pure ∧ S pure) ∨ |S| < min_samples_split`
/// (spec §2.3). Both parts are monotone, which keeps online ≡ batch (§2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseRule {
    /// Pause blocks whose points all share one target.
    pub pause_on_pure: bool,
    /// Pause blocks with fewer points than this (counting multiplicity).
    pub min_samples_split: usize,
}

impl PauseRule {
    /// No pausing at all: the plain Mondrian tree of spec §2.2 / §2.4.
    pub const NEVER: PauseRule = PauseRule {
        pause_on_pure: false,
        min_samples_split: 0,
    };

    fn holds<S: NodeStatistics>(&self, points: &[u32], stats: &S, targets: &[S::Target]) -> bool {
        points.len() < self.min_samples_split
            || (self.pause_on_pure && stats.is_pure(points, targets))
    }

    /// [`holds`](Self::holds) for a paused leaf of `n_points` points about to take `weight`
    /// copies of a point with `target`, without reading the points.
    fn holds_after<S: NodeStatistics>(
        &self,
        n_points: usize,
        weight: u32,
        stats: &S,
        leaf: u32,
        target: S::Target,
    ) -> bool {
        n_points + (weight as usize) < self.min_samples_split
            || (self.pause_on_pure && stats.stays_pure(leaf, target))
    }
}

/// A Mondrian tree restricted to the data (spec §1.2–1.3), stored as an arena.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MondrianTree {
    n_features: usize,
    lifetime: f64,
    pause: PauseRule,
    root: u32,
    nodes: Vec<Node>,
    bounds: Vec<Feature>,
    /// Point ids of the nodes whose box is their bounding box, [`SET_POINTS`] per slot.
    sets: Vec<u32>,
    /// Set slots no node names any more (their node's box came to be stored, or the node
    /// was freed), reused before `sets` grows.
    free_sets: Vec<u32>,
    /// Nodes deletion released, reused before `nodes` grows.
    free_nodes: Vec<u32>,
    /// Stored boxes no node names any more, reused before `bounds` grows.
    free_boxes: Vec<u32>,
    /// The point lists of leaves holding more than [`INLINE_POINTS`] ids (a leaf with at
    /// most that many keeps them in its record), in no order, each with the leaf that owns
    /// it.
    lists: Vec<Vec<u32>>,
    list_owner: Vec<u32>,
    /// Whether [`compact`](Self::compact) dropped the leaves' point ids: the tree then
    /// predicts as before but cannot be trained.
    compact: bool,
    /// Reused buffer for the route of the point being inserted: each node with the point's
    /// η there (filled from the first node outside down).
    #[serde(skip)]
    path: Vec<(u32, f64)>,
    /// Buffers [`sample_block`](Self::sample_block) reuses: an online tree re-samples
    /// small blocks often (every leaf that un-pauses).
    #[serde(skip)]
    block: BlockScratch,
    /// Reused buffer for the box of a set slot (lower then upper) where a caller needs it
    /// whole.
    #[serde(skip)]
    hull: Vec<Feature>,
    /// Reused buffer for the union of two children's boxes (deletion).
    #[serde(skip)]
    union: Vec<Feature>,
}

impl MondrianTree {
    /// An empty tree over `n_features` features with lifetime `lifetime` (may be `+∞`).
    pub fn new(n_features: usize, lifetime: f64, pause: PauseRule) -> Self {
        MondrianTree {
            n_features,
            lifetime,
            pause,
            root: NO_NODE,
            nodes: Vec::new(),
            bounds: Vec::new(),
            sets: Vec::new(),
            free_sets: Vec::new(),
            free_nodes: Vec::new(),
            free_boxes: Vec::new(),
            lists: Vec::new(),
            list_owner: Vec::new(),
            compact: false,
            path: Vec::new(),
            block: BlockScratch::default(),
            hull: Vec::new(),
            union: Vec::new(),
        }
    }

    /// Number of features.
    pub fn n_features(&self) -> usize {
        self.n_features
    }
    /// Lifetime λ.
    pub fn lifetime(&self) -> f64 {
        self.lifetime
    }
    /// The pause rule.
    pub fn pause_rule(&self) -> PauseRule {
        self.pause
    }
    /// Root node, `None` while the tree is empty.
    pub fn root(&self) -> Option<u32> {
        (self.root != NO_NODE).then_some(self.root)
    }
    /// Length of the arena: the range of node ids, nodes on the free list included
    /// (statistics are indexed by it).
    pub fn n_nodes(&self) -> usize {
        self.nodes.len()
    }
    /// Nodes in the tree (the arena without the nodes deletion freed).
    pub fn n_live_nodes(&self) -> usize {
        self.nodes.len() - self.free_nodes.len()
    }
    /// Whether `node` is a leaf.
    #[inline]
    pub fn is_leaf(&self, node: u32) -> bool {
        self.nodes[node as usize].left == NO_NODE
    }
    /// Whether `node` is a paused leaf.
    pub fn is_paused(&self, node: u32) -> bool {
        self.nodes[node as usize].paused()
    }
    /// Children `(left, right)` of an internal node.
    pub fn children(&self, node: u32) -> Option<(u32, u32)> {
        let l = self.nodes[node as usize].left;
        (l != NO_NODE).then(|| (l, self.nodes[node as usize].right()))
    }
    /// Parent of `node`.
    pub fn parent(&self, node: u32) -> Option<u32> {
        let p = self.nodes[node as usize].parent;
        (p != NO_NODE).then_some(p)
    }
    /// Split dimension δ of an internal node.
    pub fn split_dimension(&self, node: u32) -> usize {
        debug_assert!(!self.is_leaf(node), "a leaf has no split");
        self.nodes[node as usize].dim()
    }
    /// Split location ξ of an internal node.
    pub fn split_location(&self, node: u32) -> Feature {
        debug_assert!(!self.is_leaf(node), "a leaf has no split");
        self.nodes[node as usize].split_loc()
    }
    /// Absolute split time τ (λ for leaves).
    pub fn split_time(&self, node: u32) -> f64 {
        self.nodes[node as usize].tau
    }
    /// τ of the parent, 0 for the root.
    #[inline]
    pub fn parent_split_time(&self, node: u32) -> f64 {
        match self.nodes[node as usize].parent {
            NO_NODE => 0.0,
            p => self.nodes[p as usize].tau,
        }
    }
    /// Whether the node's box is stored (rather than being the row of its single point or
    /// the bounding box of a few points' rows).
    pub fn stores_box(&self, node: u32) -> bool {
        matches!(Slot::of(self.nodes[node as usize].slot), Slot::Stored(_))
    }
    /// Training point ids held by a leaf (with multiplicity); empty for internal nodes.
    pub fn leaf_points(&self, node: u32) -> &[u32] {
        let record = &self.nodes[node as usize];
        if record.left != NO_NODE {
            return &[];
        }
        match record.count() {
            SPILLED => &self.lists[record.pair[0] as usize],
            n => &record.pair[..n as usize],
        }
    }

    /// Takes leaf `node`'s points out of it (the leaf then holds none).
    /// Ids of all leaves.
    pub fn leaves(&self) -> Vec<u32> {
        self.subtree_preorder(self.root)
            .into_iter()
            .filter(|&j| self.is_leaf(j))
            .collect()
    }
    /// Number of leaves.
    pub fn n_leaves(&self) -> usize {
        // Every internal node has two children: leaves = internal + 1.
        if self.root == NO_NODE {
            0
        } else {
            self.n_live_nodes().div_ceil(2)
        }
    }
    /// Depth of every leaf (root depth 0) with the number of points it holds.
    pub fn leaf_depths(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        if self.root == NO_NODE {
            return out;
        }
        let mut stack = vec![(self.root, 0usize)];
        while let Some((j, depth)) = stack.pop() {
            match self.children(j) {
                Some((l, r)) => {
                    stack.push((r, depth + 1));
                    stack.push((l, depth + 1));
                }
                None => out.push((depth, self.leaf_len(j))),
            }
        }
        out
    }
    /// Average leaf depth weighted by the points in each leaf (spec §7, the depth table).
    pub fn weighted_depth(&self) -> f64 {
        let depths = self.leaf_depths();
        let total: usize = depths.iter().map(|&(_, n)| n).sum();
        if total == 0 {
            return 0.0;
        }
        depths.iter().map(|&(d, n)| (d * n) as f64).sum::<f64>() / total as f64
    }
    /// Drops what only training reads: the point ids of every leaf, except the one id of
    /// a leaf whose box is that point's row (it names the box), and the buffers' spare
    /// capacity. Prediction reads the structure, the boxes and the statistics, so it is
    /// unchanged; insertion and deletion need the ids, so a compact tree is not trained
    /// again (its model refuses). Leaves then report no points ([`leaf_points`](Self::leaf_points)).
    pub fn compact(&mut self) {
        for leaf in self.leaves() {
            self.take_leaf_points(leaf);
            if let Slot::Point(i) = Slot::of(self.nodes[leaf as usize].slot) {
                self.put_leaf_points(leaf, &[i]);
            }
        }
        self.lists = Vec::new();
        self.list_owner = Vec::new();
        self.nodes.shrink_to_fit();
        self.bounds.shrink_to_fit();
        self.sets.shrink_to_fit();
        self.compact = true;
    }

    /// Whether [`compact`](Self::compact) made this tree a prediction-only one.
    pub fn is_compact(&self) -> bool {
        self.compact
    }

    /// Heap bytes held by the structure (node records, stored boxes, the point lists of
    /// leaves whose ids do not fit in their record).
    pub fn heap_bytes(&self) -> usize {
        let per_list = std::mem::size_of::<Vec<u32>>() + std::mem::size_of::<u32>();
        self.n_nodes() * std::mem::size_of::<Node>()
            + std::mem::size_of_val(self.bounds.as_slice())
            + std::mem::size_of_val(self.sets.as_slice())
            + self.lists.len() * per_list
            + self.lists.iter().map(|p| p.len() * 4).sum::<usize>()
    }

    /// Nodes of the subtree rooted at `node`, parents before children, left before right.
    pub fn subtree_preorder(&self, node: u32) -> Vec<u32> {
        let mut order = Vec::new();
        if node == NO_NODE {
            return order;
        }
        let mut stack = vec![node];
        while let Some(j) = stack.pop() {
            order.push(j);
            if let Some((l, r)) = self.children(j) {
                stack.push(r);
                stack.push(l);
            }
        }
        order
    }
}
