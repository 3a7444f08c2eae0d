//! The lifetime path (spec `mondrian-kernel.md` §3.1–3.2): the trees of one
//! [`MondrianKernel`] sampled to a terminal lifetime Λ, read at every lifetime below it.

use std::collections::BinaryHeap;

use super::features::{Csr, MondrianKernel};
use crate::error::{MondrianError, Result};
use crate::tree::{Earliest, MondrianTree};

/// One cut of the sweep: at time `tau`, the cell of feature `parent` in tree `tree` splits
/// into the cells of features `left` and `right` (spec §3.2; ids in creation order: the M
/// roots are 0..M−1, event k creates `M + 2(k − 1)` and `M + 2(k − 1) + 1`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Event {
    /// Split time τ.
    pub tau: f64,
    /// The tree.
    pub tree: usize,
    /// The feature that retires.
    pub parent: u32,
    /// The feature of the cell on the `x[dim] ≤ loc` side.
    pub left: u32,
    /// The feature of the other cell.
    pub right: u32,
}

/// A cut waiting in the global event heap, keyed by (tree, node): ties go to the lower
/// tree, then node (spec §3.2).
type Pending = Earliest<(u32, u32), ()>;

/// The feature map of a [`MondrianKernel`] at every lifetime from 0 to the kernel's own
/// (Λ), one cut at a time, in increasing time across all trees (a global event heap).
///
/// At lifetime 0 each tree is one cell and every point has the M root features. Each event
/// retires one feature and opens two, so after k events `M + k` features are active
/// ([`n_active`](Self::n_active)). The state after the events with `τ < λ` is the feature
/// map at λ; since the kernel's trees are sampled in split-time order, it is bit for bit
/// the map of a kernel fitted directly at λ with the same seed (test T10). The points are
/// the rows the kernel was fitted on, in order.
///
/// ```
/// use mondrian::kernel::{KernelParams, LifetimePath, MondrianKernel};
/// let x: Vec<f64> = (0..40).map(|i| (i as f64 * 0.37).sin()).collect();
/// let mut kernel = MondrianKernel::new(KernelParams { n_trees: 3, lifetime: 8.0, ..Default::default() })?;
/// kernel.fit(&x, 2)?;
/// let mut path = LifetimePath::new(&kernel)?;
/// assert_eq!(path.n_active(), 3);
/// let events = path.advance_to(4.0);
/// assert_eq!(path.n_active(), 3 + events.len());
/// # Ok::<(), mondrian::MondrianError>(())
/// ```
#[derive(Debug, Clone)]
pub struct LifetimePath<'a> {
    trees: Vec<&'a MondrianTree>,
    n_points: usize,
    /// Per tree, the points in depth-first order: every node's points are a range of it.
    order: Vec<Vec<u32>>,
    /// Per tree and node, its range of `order`.
    range: Vec<Vec<(u32, u32)>>,
    /// Per tree and node, its feature id once active (`u32::MAX` before).
    id_of: Vec<Vec<u32>>,
    /// (tree, node) of each feature id.
    node_of: Vec<(u32, u32)>,
    /// Whether each feature id is active.
    active: Vec<bool>,
    /// The current feature of point n in tree m, at `n·M + m`.
    assign: Vec<u32>,
    heap: BinaryHeap<Pending>,
    /// Time of the last event taken (0 before any).
    time: f64,
}

impl<'a> LifetimePath<'a> {
    /// The path of a fitted kernel, at lifetime 0.
    pub fn new(kernel: &'a MondrianKernel) -> Result<Self> {
        if !kernel.is_fitted() {
            return Err(MondrianError::NotFitted);
        }
        let trees = kernel.trees();
        let m = trees.len();
        let n_points = kernel.n_points();
        let mut order = Vec::with_capacity(m);
        let mut range = Vec::with_capacity(m);
        let mut id_of = Vec::with_capacity(m);
        let mut node_of = Vec::new();
        let mut heap = BinaryHeap::new();
        for (t, tree) in trees.iter().enumerate() {
            let n_nodes = tree.n_nodes();
            let mut pts = Vec::with_capacity(n_points);
            let mut rng = vec![(0u32, 0u32); n_nodes];
            let root = tree.root().expect("a fitted kernel's trees hold points");
            // Depth-first, left before right; a node's range is set when it is left.
            let mut stack = vec![(root, false)];
            while let Some((j, done)) = stack.pop() {
                match (tree.children(j), done) {
                    (None, _) => {
                        let start = pts.len() as u32;
                        pts.extend_from_slice(tree.leaf_points(j));
                        rng[j as usize] = (start, pts.len() as u32);
                    }
                    (Some((l, r)), false) => {
                        stack.extend([(j, true), (r, false), (l, false)]);
                    }
                    (Some((l, r)), true) => {
                        rng[j as usize] = (rng[l as usize].0, rng[r as usize].1);
                    }
                }
            }
            let mut ids = vec![u32::MAX; n_nodes];
            ids[root as usize] = t as u32;
            node_of.push((t as u32, root));
            if !tree.is_leaf(root) {
                heap.push(Pending {
                    tau: tree.split_time(root),
                    key: (t as u32, root),
                    value: (),
                });
            }
            order.push(pts);
            range.push(rng);
            id_of.push(ids);
        }
        let assign = (0..n_points)
            .flat_map(|_| 0..m as u32)
            .collect::<Vec<u32>>();
        Ok(LifetimePath {
            trees,
            n_points,
            order,
            range,
            id_of,
            active: vec![true; m],
            node_of,
            assign,
            heap,
            time: 0.0,
        })
    }

    /// Trees M.
    pub fn n_trees(&self) -> usize {
        self.order.len()
    }
    /// Points on the path.
    pub fn n_points(&self) -> usize {
        self.n_points
    }
    /// Features active now: M plus the events taken.
    pub fn n_active(&self) -> usize {
        self.n_trees() + (self.node_of.len() - self.n_trees()) / 2
    }
    /// Feature ids given so far (retired ones included).
    pub fn n_ids(&self) -> usize {
        self.node_of.len()
    }
    /// Time of the last event taken (0 before any).
    pub fn time(&self) -> f64 {
        self.time
    }
    /// Time of the next event, if the trees have one before Λ.
    pub fn next_time(&self) -> Option<f64> {
        self.heap.peek().map(|p| p.tau)
    }
    /// Whether feature `id` is active.
    pub fn is_active(&self, id: u32) -> bool {
        self.active[id as usize]
    }
    /// The (tree, node) of feature `id` in the kernel's trees.
    pub fn node_of(&self, id: u32) -> (usize, u32) {
        let (t, j) = self.node_of[id as usize];
        (t as usize, j)
    }
    /// The current feature of every point in every tree, `n·M + m` (the CSR indices of the
    /// feature matrix, spec §1.5).
    pub fn assign(&self) -> &[u32] {
        &self.assign
    }
    /// The points in the cell of an active (or retired) feature.
    pub fn points_of(&self, id: u32) -> &[u32] {
        let (t, j) = self.node_of[id as usize];
        let (a, b) = self.range[t as usize][j as usize];
        &self.order[t as usize][a as usize..b as usize]
    }

    /// Takes the next event: the cell splits, its points move to the two new features.
    pub fn next_event(&mut self) -> Option<Event> {
        let Pending {
            tau,
            key: (tree, node),
            ..
        } = self.heap.pop()?;
        let t = tree as usize;
        let tr = self.trees[t];
        let (l, r) = tr.children(node).expect("queued nodes are internal");
        let parent = self.id_of[t][node as usize];
        let left = self.node_of.len() as u32;
        let right = left + 1;
        let m = self.n_trees();
        for (child, id) in [(l, left), (r, right)] {
            self.id_of[t][child as usize] = id;
            self.node_of.push((tree, child));
            self.active.push(true);
            let (a, b) = self.range[t][child as usize];
            for &p in &self.order[t][a as usize..b as usize] {
                self.assign[p as usize * m + t] = id;
            }
            if !tr.is_leaf(child) {
                self.heap.push(Pending {
                    tau: tr.split_time(child),
                    key: (tree, child),
                    value: (),
                });
            }
        }
        self.active[parent as usize] = false;
        self.time = tau;
        Some(Event {
            tau,
            tree: t,
            parent,
            left,
            right,
        })
    }

    /// Takes every event with `τ < lifetime`; the state is then the feature map at
    /// `lifetime` (or at Λ, for a larger one).
    pub fn advance_to(&mut self, lifetime: f64) -> Vec<Event> {
        let mut events = Vec::new();
        while self.next_time().is_some_and(|tau| tau < lifetime) {
            events.extend(self.next_event());
        }
        events
    }

    /// The feature matrix now, columns by feature id (retired ids are empty columns).
    pub fn features(&self) -> Csr {
        let m = self.n_trees();
        let mut indices = self.assign.clone();
        for row in indices.chunks_exact_mut(m) {
            row.sort_unstable();
        }
        Csr {
            n_rows: self.n_points,
            n_cols: self.n_ids(),
            indptr: (0..=self.n_points).map(|i| i * m).collect(),
            indices,
            value: 1.0 / (m as f64).sqrt(),
        }
    }
}
