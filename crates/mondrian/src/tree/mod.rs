//! The Mondrian tree: one arena-backed structure shared by every model
//! (spec `mf-classification.md` §1.3, §2).
//!
//! The tree knows geometry and time only: boxes, split dimensions and locations, split
//! times and the training points held by leaves. Everything that depends on the targets
//! (label counts, Gaussian sums, …) lives in a [`NodeStatistics`] implementation that the
//! tree keeps up to date through a handful of callbacks, so regression, density and kernel
//! models reuse the same sampler.
//!
//! Layout: nodes are `u32` indices into the node records and, through them, the other
//! per-tree buffers. A node's box lives in the flat buffer `bounds` (lower corner, then
//! upper, D floats each) at the position its record's `slot` names, except for a leaf
//! whose points are all one training point: its box is that point, and the slot names the
//! point instead (about a third of all nodes, so a third less box memory; the training
//! features are passed to whatever reads boxes). On data of 64 features or more, a node
//! over at most four distinct points keeps their ids in `sets` instead of a box: its box is
//! their rows' bounding box, computed where it is read (about half of the boxes of a fitted
//! tree, which would otherwise be most of its memory and of the fit's page faults). Online,
//! a point inside a set's box joins no set, and a set that must take a fifth point becomes
//! a stored box. A leaf keeps up
//! to two point ids in its own record (in the fields an internal node uses for its right
//! child and split location); only a leaf with more has a list in `lists`.

mod check;
mod path;

pub use path::{PathStep, LOCKSTEP};

use std::borrow::Cow;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::process::sample_exponential;
use crate::process::{
    extension_rate, grow_box, hull_extension_rate, linear_dimension, sample_extension_cut,
    sample_set_extension_cut, sample_side, sample_uniform_half_open, set_extension_rate,
    split_time, Feature,
};

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

/// Point ids a leaf's own list has room for when it is made: the allocator's smallest
/// block holds six, so an online leaf that takes a few more points grows without moving.
const LEAF_ROOM: usize = 6;

/// Sentinel for "no node".
pub const NO_NODE: u32 = u32::MAX;

/// Flag of a slot that names a training point whose row is the node's (degenerate) box.
const POINT_BOX: u32 = 1 << 31;
/// Flag of a slot (with [`POINT_BOX`] clear) that names a run of [`SET_POINTS`] entries of
/// `sets`: the node's box is the bounding box of those training points' rows.
const SET_BOX: u32 = 1 << 30;
/// Slot of a node whose box is not set yet.
const NO_BOX: u32 = u32::MAX;
/// Point ids a set slot holds (filled from the front; unused entries are `NO_POINT`):
/// 16 bytes where a box takes 8·D. A box read from a set costs a bounding box of at most
/// this many rows, from the training features, which are far smaller than the boxes.
const SET_POINTS: usize = 4;
/// An unused entry of a set slot.
const NO_POINT: u32 = u32::MAX;
/// Trees over at least this many features name a few points' ids instead of storing their
/// box. On narrower data a box is a line or two, which the ids and then the rows they name
/// cost more to read than they save (measured: online and prediction slower on letter and
/// satimage, memory −15–30 %); from here on a box is eight lines or more.
pub const SET_MIN_FEATURES: usize = 64;

/// What a node's `slot` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
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
    fn of(slot: u32) -> Slot {
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

/// The statistics a model hangs off the nodes of a [`MondrianTree`] (DESIGN.md: one tree,
/// many statistics). The tree calls these hooks whenever the data under a node changes.
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
    /// Whether the points all carry one target (the label-purity pause, spec §2.3).
    fn is_pure(&self, points: &[u32], targets: &[Self::Target]) -> bool;
    /// Whether leaf `node`'s points plus one more with `target` all carry one target: the
    /// purity test of an online insertion in O(1) from the leaf's statistics.
    fn stays_pure(&self, node: u32, target: Self::Target) -> bool;
    /// Heap bytes the statistics take per node (for size reports).
    fn bytes_per_node(&self) -> usize;
    /// Asks the cache for `node`'s statistics, which an insertion is about to read.
    #[inline(always)]
    fn prefetch(&self, node: u32) {
        let _ = node;
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
    /// Set slots no node names any more (their node's box came to be stored), reused
    /// before `sets` grows. Not saved: a loaded tree leaves them unused.
    #[serde(skip)]
    free_sets: Vec<u32>,
    /// The point lists of leaves holding more than [`INLINE_POINTS`] ids (a leaf with at
    /// most that many keeps them in its record), in no order, each with the leaf that owns
    /// it.
    lists: Vec<Vec<u32>>,
    list_owner: Vec<u32>,
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
}

/// The work lists of [`MondrianTree::sample_block`].
#[derive(Debug, Clone, Default)]
struct BlockScratch {
    /// Nodes still to sample, each with its range of the index buffer and its parent's time.
    stack: Vec<(u32, usize, usize, f64)>,
    /// The two children's boxes of the split being made.
    child_boxes: Vec<Feature>,
    /// The nodes of the new block, parents before children.
    order: Vec<u32>,
}

/// Buffers of [`BlockScratch`] larger than this many entries (left by a batch fit) are
/// dropped rather than kept with the tree.
const SCRATCH_KEEP: usize = 1024;

/// The fields of a node a root-to-leaf walk reads, packed into 32 bytes so that one cache
/// line serves a step and names the node's box (the box and the statistics live in their
/// own flat buffers). A leaf has no split: its record holds its point ids instead, when
/// they are few (most leaves hold one or two points), so an insertion that ends there finds
/// them in the line it has just loaded, and no leaf needs a list of its own.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[repr(C)]
struct Node {
    /// Absolute split time τ; λ for leaves.
    tau: f64,
    parent: u32,
    /// The left child; `NO_NODE` marks a leaf.
    left: u32,
    /// Internal node: the right child and the bits of the split location. Leaf: its
    /// first [`Node::count`] point ids, or the index of its list in `lists`.
    pair: [u32; 2],
    /// Internal node: the split dimension. Leaf: how many point ids `pair` holds, or
    /// [`SPILLED`]; with [`PAUSED`] set on a paused leaf.
    split_dim: u32,
    /// The index of the node's box in `bounds` (in boxes of 2·D floats), or
    /// `POINT_BOX | i` for a leaf whose box is training point `i`, or `SET_BOX | s` for a
    /// node whose box is the bounding box of the points of set slot `s`, or `NO_BOX` while
    /// unset (see [`Slot`]).
    slot: u32,
}

// One record per cache-line half: a walk step loads one line.
const _: () = assert!(std::mem::size_of::<Node>() == 32);

/// Flag in [`Node::split_dim`] of a paused leaf.
const PAUSED: u32 = 1 << 31;

/// How many point ids a leaf keeps in its record.
const INLINE_POINTS: usize = 2;

/// [`Node::count`] of a leaf whose points are in `lists`.
const SPILLED: u32 = INLINE_POINTS as u32 + 1;

impl Node {
    #[inline(always)]
    fn dim(&self) -> usize {
        (self.split_dim & !PAUSED) as usize
    }
    /// The right child of an internal node.
    #[inline(always)]
    fn right(&self) -> u32 {
        self.pair[0]
    }
    /// The split location of an internal node.
    #[inline(always)]
    fn split_loc(&self) -> Feature {
        Feature::from_bits(self.pair[1])
    }
    /// Sets an internal node's split.
    fn set_split(&mut self, dim: usize, loc: Feature) {
        self.split_dim = dim as u32;
        self.pair[1] = loc.to_bits();
    }
    /// A leaf's inline point count, or [`SPILLED`].
    #[inline(always)]
    fn count(&self) -> u32 {
        self.split_dim & !PAUSED
    }
    fn set_count(&mut self, count: u32) {
        self.split_dim = (self.split_dim & PAUSED) | count;
    }
    #[inline(always)]
    fn paused(&self) -> bool {
        self.split_dim & PAUSED != 0
    }
    #[inline(always)]
    fn set_paused(&mut self, paused: bool) {
        if paused {
            self.split_dim |= PAUSED;
        } else {
            self.split_dim &= !PAUSED;
        }
    }
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
            lists: Vec::new(),
            list_owner: Vec::new(),
            path: Vec::new(),
            block: BlockScratch::default(),
            hull: Vec::new(),
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
    /// Number of nodes in the arena.
    pub fn n_nodes(&self) -> usize {
        self.nodes.len()
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
    fn box_slices<'a>(
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
    fn box_in<'a>(
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
    fn set_ids(&self, s: u32) -> &[u32] {
        let ids = &self.sets[s as usize * SET_POINTS..(s as usize + 1) * SET_POINTS];
        let n = ids
            .iter()
            .position(|&i| i == NO_POINT)
            .unwrap_or(SET_POINTS);
        &ids[..n]
    }

    /// Training row `i` of `features`.
    #[inline]
    fn row<'a>(&self, features: &'a [Feature], i: u32) -> &'a [Feature] {
        let d = self.n_features;
        &features[i as usize * d..(i as usize + 1) * d]
    }

    /// The rows of the ids `ids` (at most [`SET_POINTS`]), on the stack.
    #[inline]
    fn rows_of<'a>(&self, features: &'a [Feature], ids: &[u32]) -> [&'a [Feature]; SET_POINTS] {
        let mut rows: [&[Feature]; SET_POINTS] = [&[]; SET_POINTS];
        for (row, &i) in rows.iter_mut().zip(ids) {
            *row = self.row(features, i);
        }
        rows
    }

    /// Writes the bounding box of a set node's rows to `out` (lower then upper).
    fn hull_into(&self, node: u32, features: &[Feature], out: &mut Vec<Feature>) {
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
    #[inline]
    pub(crate) fn eta(&self, node: u32, x: &[Feature], features: &[Feature]) -> f64 {
        match Slot::of(self.nodes[node as usize].slot) {
            Slot::Set(s) => self.set_eta(s, x, features),
            _ => {
                let (lower, upper) = self.box_slices(node, features);
                extension_rate(lower, upper, x)
            }
        }
    }

    /// [`eta`](Self::eta) of a set's box, from its rows ([`hull_extension_rate`]).
    #[inline(never)]
    fn set_eta(&self, s: u32, x: &[Feature], features: &[Feature]) -> f64 {
        let ids = self.set_ids(s);
        hull_extension_rate(&self.rows_of(features, ids)[..ids.len()], x)
    }

    /// The upper bound of the node's box in dimension `dim`.
    fn upper_at(&self, node: u32, dim: usize, features: &[Feature]) -> Feature {
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
    fn take_leaf_points(&mut self, node: u32) -> Vec<u32> {
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
    fn put_leaf_points(&mut self, node: u32, points: &[u32]) {
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
    fn put_leaf_vec(&mut self, node: u32, points: Vec<u32>) {
        if points.len() <= INLINE_POINTS {
            self.put_leaf_points(node, &points);
        } else {
            debug_assert_eq!(self.nodes[node as usize].count(), 0);
            self.spill(node, points);
        }
    }

    /// Moves leaf `node`'s points to `list`, which then belongs to it.
    fn spill(&mut self, node: u32, list: Vec<u32>) {
        let j = node as usize;
        self.nodes[j].pair[0] = self.lists.len() as u32;
        self.nodes[j].set_count(SPILLED);
        self.lists.push(list);
        self.list_owner.push(node);
    }

    /// Adds `ids` to leaf `node`'s points, in its record while they fit.
    fn append_leaf_points(&mut self, node: u32, ids: impl ExactSizeIterator<Item = u32>) {
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
    fn push_leaf_point(&mut self, node: u32, point: u32, weight: u32) {
        self.append_leaf_points(node, std::iter::repeat_n(point, weight as usize));
    }

    /// Number of points (with multiplicity) leaf `node` holds; 0 off leaves.
    fn leaf_len(&self, node: u32) -> usize {
        self.leaf_points(node).len()
    }
    /// The child `x` is routed to: left iff `x[δ] ≤ ξ` (spec §1.2).
    #[inline]
    pub fn route(&self, node: u32, x: &[Feature]) -> u32 {
        let j = node as usize;
        if x[self.nodes[j].dim()] <= self.nodes[j].split_loc() {
            self.nodes[j].left
        } else {
            self.nodes[j].right()
        }
    }
    /// The leaf `x` is routed to (the tree must not be empty).
    pub fn leaf_of(&self, x: &[Feature]) -> u32 {
        let mut j = self.root;
        while !self.is_leaf(j) {
            j = self.route(j, x);
        }
        j
    }
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
            self.n_nodes().div_ceil(2)
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

    /// A new node whose box the caller sets ([`fit_box`](Self::fit_box) or a copy).
    fn new_node<S: NodeStatistics>(&mut self, parent: u32, stats: &mut S) -> u32 {
        self.push_node(parent, NO_BOX, stats)
    }

    /// A new node over the training points `set` whose bounding box is `bounds` (lower then
    /// upper): stored once in fresh memory, or not at all when `set` is one point (its row)
    /// or a few (their ids).
    fn new_node_with_box<S: NodeStatistics>(
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
    fn set_capacity(&self) -> usize {
        if self.n_features >= SET_MIN_FEATURES {
            SET_POINTS
        } else {
            0
        }
    }

    /// The distinct ids of `set` if a set of this tree can hold them (and `set` is not
    /// empty).
    fn few_distinct(&self, set: &[u32]) -> Option<PointIds> {
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
    fn store_set(&mut self, ids: &[u32]) -> u32 {
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
    fn set_box_ids(&mut self, node: u32, ids: &[u32]) {
        match Slot::of(self.nodes[node as usize].slot) {
            Slot::Set(s) => self.write_set(s, ids),
            _ => self.nodes[node as usize].slot = self.store_set(ids),
        }
    }

    /// Makes set slot `s` hold `ids`.
    fn write_set(&mut self, s: u32, ids: &[u32]) {
        let run = &mut self.sets[s as usize * SET_POINTS..(s as usize + 1) * SET_POINTS];
        run.fill(NO_POINT);
        run[..ids.len()].copy_from_slice(ids);
    }

    /// The slot naming the single training point of `set` as its box, if `set` holds one
    /// point (possibly repeated) with an id that fits beside the flag.
    fn point_slot(set: &[u32]) -> Option<u32> {
        let first = *set.first()?;
        (first < NO_BOX & !POINT_BOX && set.iter().all(|&i| i == first))
            .then_some(POINT_BOX | first)
    }

    /// The slot of the next box appended to `bounds`.
    fn fresh_slot(&self) -> u32 {
        let slot = self.bounds.len() / (2 * self.n_features).max(1);
        assert!(slot < SET_BOX as usize, "more boxes than a tree can index");
        slot as u32
    }

    /// Appends a box (lower then upper) to `bounds` and returns its slot.
    fn store_box(&mut self, bounds: &[Feature]) -> u32 {
        let slot = self.fresh_slot();
        self.bounds.extend_from_slice(bounds);
        slot
    }

    /// A slot for a copy of `node`'s box: a stored copy of a stored box, a set of the same
    /// points otherwise (the copy then grows as its own).
    fn copy_box(&mut self, node: u32, features: &[Feature]) -> u32 {
        let d = self.n_features;
        match Slot::of(self.nodes[node as usize].slot) {
            Slot::Stored(b) => {
                let fresh = self.fresh_slot();
                let s = 2 * d * b as usize;
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
    fn materialize_box(&mut self, node: u32, features: &[Feature]) -> u32 {
        let fresh = self.fresh_slot();
        match Slot::of(self.nodes[node as usize].slot) {
            Slot::Point(i) => {
                let row = self.row(features, i);
                self.bounds.extend_from_slice(row);
                self.bounds.extend_from_slice(row);
            }
            Slot::Set(_) => {
                let mut hull = std::mem::take(&mut self.hull);
                self.hull_into(node, features, &mut hull);
                self.bounds.extend_from_slice(&hull);
                self.hull = hull;
            }
            slot => unreachable!("node {node}: nothing to store ({slot:?})"),
        }
        fresh
    }

    /// The node record, slot and statistics of a new node: a leaf without points.
    fn push_node<S: NodeStatistics>(&mut self, parent: u32, slot: u32, stats: &mut S) -> u32 {
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            tau: self.lifetime,
            parent,
            left: NO_NODE,
            pair: [NO_NODE; 2],
            split_dim: 0,
            slot,
        });
        stats.resize(self.nodes.len());
        id
    }

    /// Asks the cache for a node's record ahead of use: walks are bound by the latency of
    /// these dependent loads, and the next node is known before the current one is done.
    #[inline(always)]
    pub(crate) fn prefetch(&self, node: u32) {
        if let Some(record) = self.nodes.get(node as usize) {
            prefetch_lines(record as *const Node as *const u8, 1);
        }
    }

    /// Asks the cache for the start of a node's box (up to 16 lines, 1 KiB: on wide data
    /// the hardware's own stream prefetch takes over from there).
    #[inline(always)]
    pub(crate) fn prefetch_box(&self, node: u32, features: &[Feature]) {
        if let Some(&Node { slot, .. }) = self.nodes.get(node as usize) {
            let d = self.n_features;
            let (start, bytes) = match Slot::of(slot) {
                Slot::Stored(b) => (self.bounds.get(2 * d * b as usize), 8 * d),
                Slot::Point(i) => (features.get(d * i as usize), 4 * d),
                // The ids: the rows they name are known only once these arrive.
                Slot::Set(s) => {
                    if let Some(ids) = self.sets.get(s as usize * SET_POINTS) {
                        prefetch_lines(ids as *const u32 as *const u8, 1);
                    }
                    (None, 0)
                }
                Slot::Unset => (None, 0),
            };
            if let Some(first) = start {
                prefetch_lines(
                    first as *const Feature as *const u8,
                    bytes.div_ceil(64).min(16),
                );
            }
        }
    }

    /// Asks the cache for the rows the sets among the last [`path::BOTTOM`] steps of each
    /// path name: a set's ids arrive after its descent (see
    /// [`prefetch_box`](Self::prefetch_box)), its rows only once they are known.
    pub(crate) fn prefetch_set_rows(&self, paths: &[Vec<PathStep>], features: &[Feature]) {
        if self.set_capacity() == 0 {
            return;
        }
        let d = self.n_features;
        let lines = (4 * d).div_ceil(64).min(16);
        for steps in paths {
            for step in steps.iter().rev().take(path::BOTTOM) {
                if let Some(Slot::Set(s)) =
                    self.nodes.get(step.node as usize).map(|r| Slot::of(r.slot))
                {
                    for &i in self.set_ids(s) {
                        if let Some(row) = features.get(i as usize * d) {
                            prefetch_lines(row as *const Feature as *const u8, lines);
                        }
                    }
                }
            }
        }
    }

    /// The node's box for writing; a box that is a training point's row or a set's (or
    /// unset) is first stored, as it is (or zeros). A set slot left behind is reused by
    /// the next set.
    fn box_mut(&mut self, node: u32, features: &[Feature]) -> (&mut [Feature], &mut [Feature]) {
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
    fn fit_box<T: Copy>(&mut self, node: u32, points: &[u32], data: &TrainingPoints<T>) {
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

    /// Grows the box of `node` to contain training point `point` (`outside`: whether it
    /// lies outside the box). A box that is already that point stays as it is; a row or a
    /// set takes the point's id if it widens the box and there is room (see
    /// [`widen_set`](Self::widen_set)); a stored box grows.
    fn extend_box<T: Copy>(
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
    fn widen_set(
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

    /// Batch sampling `MT(λ, D)` on the given points (spec §2.2–2.3, \[P\] Alg. 1–2 and 9),
    /// replacing whatever the tree held. Point ids may repeat (multiplicity).
    pub fn fit<S: NodeStatistics, R: Rng + ?Sized>(
        &mut self,
        points: Vec<u32>,
        data: &TrainingPoints<S::Target>,
        stats: &mut S,
        rng: &mut R,
    ) {
        *self = MondrianTree::new(self.n_features, self.lifetime, self.pause);
        stats.resize(0);
        if points.is_empty() {
            return;
        }
        // A binary tree over n points has at most 2n − 1 nodes: reserve once instead of
        // copying the arena at every doubling. Unused capacity is never touched.
        let max_nodes = 2 * points.len() - 1;
        self.nodes.reserve(max_nodes);
        self.bounds.reserve(max_nodes * 2 * self.n_features);
        self.sets.reserve(max_nodes * self.set_capacity());
        stats.reserve(max_nodes);
        self.root = self.new_node(NO_NODE, stats);
        self.sample_block(self.root, points, 0.0, data, stats, rng);
    }

    /// `SampleMondrianBlock` with pausing ([P] Alg. 9) on an existing node slot, iteratively,
    /// depth-first and left before right (spec §2.1 draw order). Statistics of the new
    /// subtree are filled by one post-order pass (§3.3).
    fn sample_block<S: NodeStatistics, R: Rng + ?Sized>(
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

    /// Makes `node`, which holds no points, a leaf holding `points`.
    fn make_leaf(&mut self, node: u32, points: &[u32], paused: bool) {
        let j = node as usize;
        debug_assert!(self.nodes[j].left != NO_NODE || self.nodes[j].count() == 0);
        self.nodes[j].tau = self.lifetime;
        self.nodes[j].left = NO_NODE;
        self.nodes[j].split_dim = 0;
        self.nodes[j].set_paused(paused);
        self.put_leaf_points(node, points);
    }

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
    fn resample<S: NodeStatistics, R: Rng + ?Sized>(
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

    /// Grows the box of `node` by the box `[lo, hi]`.
    fn grow_box_by(
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

    /// Inserts a new internal node above `node` at time `tau` with the given cut, `node` as
    /// its only child so far (on the side of the cut `node`'s box lies on) and `node`'s
    /// box; the caller adds the other child. Returns the new node.
    fn insert_parent_above<S: NodeStatistics>(
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
    fn first_node_outside(&mut self, x: &[Feature], features: &[Feature]) -> usize {
        let mut path = std::mem::take(&mut self.path);
        let n = path.len();
        let first = self.measure_upwards(
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

    /// Starts routing a point to its leaf: clears the route buffer and returns the root
    /// (`NO_NODE` for an empty tree). With [`route_advance`](Self::route_advance) this lets
    /// a caller interleave the descents of several trees so their cache misses overlap;
    /// [`extend_routed`](Self::extend_routed) then inserts the point.
    #[inline]
    pub fn route_begin(&mut self) -> u32 {
        self.path.clear();
        self.root
    }

    /// Records `node` on the route of `x` and returns the next node, `NO_NODE` after the
    /// leaf. The next node's record is prefetched; at the leaf, the boxes at the bottom of
    /// the route, which the insertion measures first, are (`features`: the training rows).
    #[inline]
    pub fn route_advance(&mut self, node: u32, x: &[Feature], features: &[Feature]) -> u32 {
        self.path.push((node, 0.0));
        if self.is_leaf(node) {
            for &(j, _) in self.path.iter().rev().take(path::BOTTOM) {
                self.prefetch_box(j, features);
            }
            // The leaf's own point list, if its points are not in its record.
            let record = &self.nodes[node as usize];
            if record.count() == SPILLED {
                if let Some(list) = self.lists.get(record.pair[0] as usize) {
                    prefetch_lines(list as *const Vec<u32> as *const u8, 1);
                }
            }
            return NO_NODE;
        }
        let next = self.route(node, x);
        self.prefetch(next);
        next
    }

    /// The last `n` nodes of the recorded route, leaf first.
    pub(crate) fn route_tail(&self, n: usize) -> impl Iterator<Item = u32> + '_ {
        self.path.iter().rev().take(n).map(|&(node, _)| node)
    }

    /// Inserts a new parent above `node` at time `tau` whose other child is a new leaf
    /// holding `point` (spec §2.4 step 3).
    #[allow(clippy::too_many_arguments)]
    fn insert_parent<S: NodeStatistics, R: Rng + ?Sized>(
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
    fn new_leaf<S: NodeStatistics>(
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

    fn propagate_absorb<S: NodeStatistics>(
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

    fn propagate_recompute<S: NodeStatistics>(&self, mut node: u32, stats: &mut S) {
        while node != NO_NODE {
            let j = node as usize;
            if !stats.set_internal(node, self.nodes[j].left, self.nodes[j].right()) {
                break;
            }
            node = self.nodes[j].parent;
        }
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

/// Up to [`SET_POINTS`] point ids, on the stack.
#[derive(Debug, Clone, Copy, Default)]
struct PointIds {
    ids: [u32; SET_POINTS],
    len: usize,
}

impl PointIds {
    fn from_slice(ids: &[u32]) -> Self {
        let mut out = PointIds::default();
        ids.iter().for_each(|&i| out.push(i));
        out
    }
    fn contains(&self, i: u32) -> bool {
        self.ids[..self.len].contains(&i)
    }
    fn push(&mut self, i: u32) {
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

/// How many rows ahead [`partition_into_boxes`] prefetches.
const PARTITION_AHEAD: usize = 4;

/// Moves the points with `x[dim] ≤ loc` to the front of `set` and writes the bounding boxes
/// of the two parts to `boxes` (left lower, left upper, right lower, right upper, D each);
/// returns the left count. Both parts must be non-empty.
fn partition_into_boxes<T: Copy>(
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
        grow_box(lower, upper, row);
    }
    debug_assert!(
        n_left > 0 && n_left < set.len(),
        "a split left a side empty"
    );
    n_left
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Statistics that keep nothing: the point storage alone is under test.
    struct NoStats;

    impl NodeStatistics for NoStats {
        type Target = u32;
        fn resize(&mut self, _: usize) {}
        fn set_leaf(&mut self, _: u32, _: &[u32], _: &[u32]) {}
        fn set_internal(&mut self, _: u32, _: u32, _: u32) -> bool {
            false
        }
        fn set_parent_of(&mut self, _: u32, _: u32) {}
        fn absorb_leaf(&mut self, _: u32, _: u32, _: u32) -> bool {
            false
        }
        fn absorb_internal(&mut self, _: u32, _: u32, _: u32) -> bool {
            false
        }
        fn is_pure(&self, _: &[u32], _: &[u32]) -> bool {
            false
        }
        fn stays_pure(&self, _: u32, _: u32) -> bool {
            false
        }
        fn bytes_per_node(&self) -> usize {
            0
        }
    }

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
        let targets = vec![0u32; n];
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
                        tree.eta(j, x, &features).to_bits(),
                        extension_rate(&lower, &upper, x).to_bits(),
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
        let targets = vec![0u32; 20];
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

    /// A decoded tree whose leaves and point lists disagree is refused, not used.
    #[test]
    fn decoding_refuses_point_lists_that_do_not_match_their_leaves() {
        // Wide enough for nodes over a few points to keep their ids: feature 0 is the
        // point's index, the others 0.
        let d = SET_MIN_FEATURES;
        let features: Vec<Feature> = (0..5 * d)
            .map(|k| if k % d == 0 { (k / d) as Feature } else { 0.0 })
            .collect();
        let targets = [0u32; 5];
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
