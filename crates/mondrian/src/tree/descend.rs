//! Descents: routing a point to its leaf (spec `mf-classification.md` §1.2), the route an
//! insertion records, and the root-to-leaf path of a test point with its branch-off
//! probabilities (§4.1, §4.4), shared by every model that predicts with branch-off.
//!
//! The machinery that makes walks fast stays here, behind these methods: descents of
//! several rows (or trees) advance in lockstep with the next node prefetched, so that their
//! cache misses overlap, and the boxes and statistics at the bottom of a path are asked for
//! before they are read.

use super::arena::SPILLED;
use super::boxes::SET_POINTS;
use super::{prefetch_lines, MondrianTree, Node, Slot, NO_NODE};
use crate::process::Feature;
use crate::simd::{self, Dispatched, Kernels};

/// How many rows of a prediction block descend in lockstep
/// ([`MondrianTree::path_steps_many`]).
pub const LOCKSTEP: usize = 32;
// Rows of a lockstep group are named by a `u8` in the descents' work list.
const _: () = assert!(LOCKSTEP <= 256);

/// How many nodes at the bottom of a path are prefetched when its descent ends: the boxes
/// measured and the statistics combined are mostly there.
pub(crate) const BOTTOM: usize = 7;

/// One node on the path of `x`, with the probability mass the prediction puts on it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathStep {
    /// The node.
    pub node: u32,
    /// `Δ_j = τ_j − τ_parent(j)` (may be `+∞` at a leaf when λ = ∞).
    pub delta: f64,
    /// `η_j(x)`: L1 distance from `x` to the node's data box.
    pub eta: f64,
    /// Probability that `x` branches off just above this node:
    /// `Π_{ancestors}(1 − p^s) · p^s_j`, with `p^s_j = 1 − exp(−Δ_j η_j)`.
    pub branch_weight: f64,
    /// `p^s_j = 1 − exp(−Δ_j η_j)`.
    pub p_split: f64,
    /// At the leaf: the probability that `x` never branched off; 0 elsewhere.
    pub leaf_weight: f64,
    /// Whether the node is a leaf.
    pub is_leaf: bool,
}

impl MondrianTree {
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
            for step in steps.iter().rev().take(BOTTOM) {
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
    #[inline(always)]
    pub fn route_advance(&mut self, node: u32, x: &[Feature], features: &[Feature]) -> u32 {
        self.path.push((node, 0.0));
        if self.is_leaf(node) {
            for &(j, _) in self.path.iter().rev().take(BOTTOM) {
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

    /// Asks the cache for the record of the child of `node` that is not `next` (the route's
    /// next node): a deletion's upward pass reads that sibling's box and statistics.
    #[inline(always)]
    pub(crate) fn prefetch_sibling(&self, node: u32, next: u32) {
        self.prefetch(self.nodes[node as usize].other_child(next));
    }

    /// The siblings of the recorded route's last `n` nodes below the root, the leaf's
    /// first: what a deletion's upward pass reads besides the route.
    pub(crate) fn route_siblings(&self, n: usize) -> impl Iterator<Item = u32> + '_ {
        self.path
            .windows(2)
            .rev()
            .take(n)
            .map(|pair| self.nodes[pair[0].0 as usize].other_child(pair[1].0))
    }

    /// The last `n` nodes of the recorded route, leaf first.
    pub(crate) fn route_tail(&self, n: usize) -> impl Iterator<Item = u32> + '_ {
        self.path.iter().rev().take(n).map(|&(node, _)| node)
    }

    /// Probability that a new split separates `x` from the box of `node` below its parent:
    /// `p^s = 1 − exp(−Δ η)`, computed without forming `0·∞`.
    #[inline]
    pub fn branch_off_probability(delta: f64, eta: f64) -> f64 {
        if eta <= 0.0 || delta <= 0.0 {
            0.0
        } else if delta.is_infinite() {
            1.0
        } else {
            -(-eta * delta).exp_m1()
        }
    }

    /// Walks the path of `x` from the root, calling `visit` on each node in order. The
    /// branch and leaf weights of all steps sum to 1; the walk stops early (possibly before
    /// the leaf) once the probability of not having branched off underflows to 0.
    /// `features` are the training features the tree indexes into (see
    /// [`data_box`](Self::data_box)).
    pub fn walk_path(&self, x: &[Feature], features: &[Feature], visit: impl FnMut(&PathStep)) {
        let mut steps = Vec::new();
        self.path_steps(x, features, &mut steps);
        steps.iter().for_each(visit);
    }

    /// The steps of [`walk_path`](Self::walk_path), written to `steps` (cleared first).
    ///
    /// Boxes are nested, so the nodes whose box contains `x` (η = 0, no branch-off) form a
    /// prefix of the path. The walk therefore routes to the leaf first, then measures η from
    /// the leaf upwards only until it meets a box containing `x`: most of a path costs a
    /// comparison per node instead of a distance over D features.
    pub fn path_steps(&self, x: &[Feature], features: &[Feature], steps: &mut Vec<PathStep>) {
        self.path_steps_many(x, features, std::slice::from_mut(steps));
    }

    /// [`path_steps`](Self::path_steps) for several points at once (row-major `xs`, one
    /// output per row). The descents advance in lockstep, one level each in turn, with the
    /// next node prefetched, so the cache misses of different rows overlap instead of
    /// queueing: a single descent is bound by the latency of each dependent load.
    pub fn path_steps_many(
        &self,
        xs: &[Feature],
        features: &[Feature],
        steps: &mut [Vec<PathStep>],
    ) {
        let d = self.n_features;
        for (group, group_steps) in xs.chunks(LOCKSTEP * d).zip(steps.chunks_mut(LOCKSTEP)) {
            self.descend_many::<true>(group, features, group_steps, |_| {});
            self.weigh_many(group, features, group_steps);
        }
    }

    /// The routes alone of [`path_steps_many`](Self::path_steps_many): each row's nodes from
    /// the root to its leaf (one output per row of `xs`, at least as many as rows), in the
    /// same lockstep groups, with η, `p_split` and the weights left at 0. No box is measured
    /// or asked for. Every prediction and every insertion starts with such a descent;
    /// benchmarks time it apart from the rest.
    pub fn routes_many(&self, xs: &[Feature], features: &[Feature], steps: &mut [Vec<PathStep>]) {
        let d = self.n_features.max(1);
        assert!(steps.len() >= xs.len() / d, "one output per row");
        for (group, group_steps) in xs.chunks(LOCKSTEP * d).zip(steps.chunks_mut(LOCKSTEP)) {
            self.descend_many::<false>(group, features, group_steps, |_| {});
        }
    }

    /// The weighed paths of a block of rows (row-major `xs`), handed to `consume(first_row,
    /// paths)` a group of [`LOCKSTEP`] rows at a time, in order. Two groups are in flight:
    /// a group's paths are walked (asking for the boxes at their bottoms and, through
    /// `at_bottom(node)`, for whatever the caller reads there), then the next group's, and
    /// only then is the first weighed and consumed, giving what it reads a group's time to
    /// arrive. `buffers` holds the paths between calls.
    pub(crate) fn weighed_paths(
        &self,
        xs: &[Feature],
        features: &[Feature],
        buffers: &mut Vec<Vec<PathStep>>,
        at_bottom: impl Fn(u32),
        mut consume: impl FnMut(usize, &[Vec<PathStep>]),
    ) {
        let d = self.n_features.max(1);
        let n = xs.len() / d;
        let n_groups = n.div_ceil(LOCKSTEP);
        buffers.resize_with(2 * LOCKSTEP, Vec::new);
        let (first, second) = buffers.split_at_mut(LOCKSTEP);
        let halves = [first, second];
        let rows_of = |g: usize| (g * LOCKSTEP, (n - g * LOCKSTEP).min(LOCKSTEP));
        // One round past the last group flushes it.
        for g in 0..=n_groups {
            // The pending group's sets' ids have arrived by now: ask for their rows, which
            // the next descent gives time to come.
            if g > 0 {
                let (_, rows) = rows_of(g - 1);
                self.prefetch_set_rows(&halves[(g - 1) % 2][..rows], features);
            }
            if g < n_groups {
                let (start, rows) = rows_of(g);
                let group = &xs[start * d..(start + rows) * d];
                self.descend_many::<true>(group, features, &mut halves[g % 2][..rows], &at_bottom);
            }
            if g > 0 {
                let (start, rows) = rows_of(g - 1);
                let paths = &mut halves[(g - 1) % 2][..rows];
                self.weigh_many(&xs[start * d..(start + rows) * d], features, paths);
                consume(start, paths);
            }
        }
    }

    /// The first half of [`path_steps_many`](Self::path_steps_many) for at most
    /// [`LOCKSTEP`] rows: routes each row to its leaf, writing one unweighed step per node,
    /// and, with `ASK_BOTTOM`, asks the cache for the boxes [`weigh_many`](Self::weigh_many)
    /// will measure and, through `at_bottom(node)`, for whatever the caller will read at the
    /// last nodes of each path. A caller that has other work can do it between the two
    /// halves while those arrive.
    pub(crate) fn descend_many<const ASK_BOTTOM: bool>(
        &self,
        xs: &[Feature],
        features: &[Feature],
        steps: &mut [Vec<PathStep>],
        at_bottom: impl Fn(u32),
    ) {
        let d = self.n_features;
        let n = xs.len() / d;
        assert!(
            n <= LOCKSTEP && n <= steps.len(),
            "at most LOCKSTEP rows, one output each"
        );
        if self.root == NO_NODE {
            steps.iter_mut().take(n).for_each(Vec::clear);
            return;
        }
        // The rows still descending, by index, with where each stands; a row that reaches
        // its leaf leaves the list, so later rounds visit only rows with work.
        let mut live = [(0u8, self.root, 0.0f64); LOCKSTEP];
        for (r, (l, s)) in live.iter_mut().zip(steps.iter_mut()).take(n).enumerate() {
            s.clear();
            l.0 = r as u8;
        }
        let mut n_live = n;
        while n_live > 0 {
            let mut k = 0;
            while k < n_live {
                let (r, node, tau_parent) = live[k];
                let s = &mut steps[r as usize];
                let is_leaf = self.is_leaf(node);
                let tau = self.nodes[node as usize].tau;
                s.push(PathStep {
                    node,
                    delta: tau - tau_parent,
                    eta: 0.0,
                    p_split: 0.0,
                    branch_weight: 0.0,
                    leaf_weight: 0.0,
                    is_leaf,
                });
                if is_leaf {
                    if ASK_BOTTOM {
                        for step in s.iter().rev().take(BOTTOM) {
                            self.prefetch_box(step.node, features);
                            at_bottom(step.node);
                        }
                    }
                    n_live -= 1;
                    live[k] = live[n_live];
                } else {
                    let x = &xs[r as usize * d..(r as usize + 1) * d];
                    let next = self.route(node, x);
                    self.prefetch(next);
                    live[k] = (r, next, tau);
                    k += 1;
                }
            }
        }
    }

    /// The second half of [`path_steps_many`](Self::path_steps_many): weighs the routed
    /// paths of [`descend_many`](Self::descend_many).
    pub(crate) fn weigh_many(
        &self,
        xs: &[Feature],
        features: &[Feature],
        steps: &mut [Vec<PathStep>],
    ) {
        #[cfg(target_arch = "x86_64")]
        if let Some(k) = simd::avx() {
            // SAFETY: an `Avx` exists only when the CPU has AVX.
            return unsafe { self.weigh_many_avx(k, xs, features, steps) };
        }
        self.weigh_many_with(Dispatched, xs, features, steps);
    }

    /// [`weigh_many`](Self::weigh_many) compiled for AVX, with the box distances inlined.
    ///
    /// # Safety
    /// The CPU has AVX (`k` proves it).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx")]
    unsafe fn weigh_many_avx(
        &self,
        k: simd::Avx,
        xs: &[Feature],
        features: &[Feature],
        steps: &mut [Vec<PathStep>],
    ) {
        self.weigh_many_with(k, xs, features, steps);
    }

    #[inline(always)]
    fn weigh_many_with<K: Kernels>(
        &self,
        kernels: K,
        xs: &[Feature],
        features: &[Feature],
        steps: &mut [Vec<PathStep>],
    ) {
        for (s, x) in steps.iter_mut().zip(xs.chunks_exact(self.n_features)) {
            self.weigh_steps_with(kernels, x, features, s);
        }
    }

    /// Measures η of `x` along a routed path (`items`, root first, `node` giving each
    /// item's node) from the leaf upwards, passing each positive η to `record`, until a box
    /// contains `x`: boxes are nested, so every node above has η = 0. Shared by insertion
    /// and prediction. Returns the position of the topmost node whose box does not contain
    /// `x` (`items.len()` if even the leaf's box does).
    /// The kernels are inlined into loops compiled for them ([`Kernels`]).
    #[inline(always)]
    pub(crate) fn measure_upwards_with<K: Kernels, T>(
        &self,
        kernels: K,
        x: &[Feature],
        features: &[Feature],
        items: &mut [T],
        node: impl Fn(&T) -> u32,
        mut record: impl FnMut(&mut T, f64),
    ) -> usize {
        let mut first = items.len();
        for (k, item) in items.iter_mut().enumerate().rev() {
            let eta = self.eta_with(kernels, node(item), x, features);
            if eta == 0.0 {
                break;
            }
            record(item, eta);
            first = k;
        }
        first
    }

    /// Fills η, p^s and the weights of a routed path (see [`path_steps`](Self::path_steps)).
    #[inline(always)]
    fn weigh_steps_with<K: Kernels>(
        &self,
        kernels: K,
        x: &[Feature],
        features: &[Feature],
        steps: &mut Vec<PathStep>,
    ) {
        let outside_from = self.measure_upwards_with(
            kernels,
            x,
            features,
            steps,
            |s| s.node,
            |step, eta| {
                step.eta = eta;
                step.p_split = Self::branch_off_probability(step.delta, eta);
            },
        );
        if outside_from == steps.len() {
            // x lies in the leaf's box: the prediction is the leaf's alone.
            if let Some(leaf) = steps.last_mut() {
                leaf.leaf_weight = 1.0;
            }
            return;
        }
        let mut not_branched = 1.0f64;
        let mut end = steps.len();
        for (i, step) in steps.iter_mut().enumerate().skip(outside_from) {
            step.branch_weight = not_branched * step.p_split;
            if step.is_leaf {
                step.leaf_weight = not_branched * (1.0 - step.p_split);
                break;
            }
            // 1 − p^s loses digits when p^s is close to 1: use exp(−ηΔ) there.
            if step.p_split > 0.0 {
                not_branched *= if step.p_split < 0.5 {
                    1.0 - step.p_split
                } else {
                    (-step.eta * step.delta).exp()
                };
            }
            if not_branched == 0.0 {
                // Nothing below can receive any mass.
                end = i + 1;
                break;
            }
        }
        steps.truncate(end);
    }
}
