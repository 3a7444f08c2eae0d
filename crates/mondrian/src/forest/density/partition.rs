//! The batch Mondrian Pólya tree (bMPT, spec `mondrian-polya-forest.md` §3): a Pólya tree
//! on a partition drawn from the Mondrian **process** on a fixed domain box, not restricted
//! to the data. The partition does not depend on the points, so inserting or deleting one
//! only moves the counts on its path (§3.2), exactly.
//!
//! The cells are never stored: a node keeps its split dimension, its location and the
//! share `f₀` of its cell's extent left of the cut, which is all the Pólya reading needs
//! (`α_k = γ(d+1)² f_k + n_k`, §3.2), and its point count.

use std::sync::OnceLock;

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::polya::{Evaluation, LeafKind, PolyaLeaf, Step};
use crate::process::{sample_exponential, sample_proportional};

const NO_CHILD: u32 = u32::MAX;

/// The largest `f32` at most `v` (`v` within the `f32` range).
fn f32_at_most(v: f64) -> f32 {
    let t = v as f32;
    if f64::from(t) > v {
        t.next_down()
    } else {
        t
    }
}

/// A leaf's evaluation from the running products and logarithms of its path's mass
/// shares and cell fractions, `(mass, fraction, log_mass, log_fraction)`.
fn leaf_evaluation(path: (f64, f64, f64, f64), log_domain: f64, depth: usize) -> Evaluation {
    let (mass, fraction, log_mass, log_fraction) = path;
    Evaluation {
        log_mass: log_mass + mass.ln(),
        log_volume: log_domain + log_fraction + fraction.ln(),
        kind: if depth == 0 {
            LeafKind::Root
        } else {
            LeafKind::TypeI
        },
    }
}

/// One bMPT: the partition (sampled once) and the counts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Partition {
    /// Left child per node (the right is `left + 1`); [`NO_CHILD`] for a leaf.
    left: Vec<u32>,
    dim: Vec<u32>,
    loc: Vec<f64>,
    /// Share of the node's cell left of the cut.
    share_left: Vec<f64>,
    count: Vec<u32>,
    /// The same cuts packed for routing many rows ([`Route`]), built on first use.
    #[serde(skip)]
    route: OnceLock<Route>,
}

/// The partition packed for routing many rows at once: one small node per step, and
/// leaves that loop to themselves behind a threshold no feature exceeds, so that every
/// row takes exactly `depth` steps and a group of rows walks down together, without a
/// branch per row.
#[derive(Debug, Clone)]
struct Route {
    nodes: Vec<RouteNode>,
    /// The deepest leaf's depth.
    depth: usize,
}

#[derive(Debug, Clone, Copy)]
struct RouteNode {
    /// The largest `f32` at most the cut's location: for an `f32` feature `v`,
    /// `v > threshold` exactly when `f64::from(v) > loc`.
    threshold: f32,
    dim: u32,
    /// The left child (the right is next to it); the node itself for a leaf.
    next: u32,
}

/// Rows routed side by side through a tree.
const LANES: usize = 8;

impl Partition {
    /// A Mondrian process on the box `[lower, upper]` with lifetime `lifetime`, cut down to
    /// depth `max_depth` (§3.1); one of the two must be finite. Dimensions of zero extent
    /// are never cut.
    pub(crate) fn sample<R: Rng + ?Sized>(
        lower: &[f64],
        upper: &[f64],
        lifetime: f64,
        max_depth: Option<usize>,
        rng: &mut R,
    ) -> Self {
        let mut p = Partition {
            left: vec![NO_CHILD],
            dim: vec![0],
            loc: vec![0.0],
            share_left: vec![0.0],
            count: vec![0],
            route: OnceLock::new(),
        };
        // (node, depth, parent time, cell)
        let mut stack = vec![(0u32, 0usize, 0.0f64, lower.to_vec(), upper.to_vec())];
        while let Some((j, depth, tau_parent, lo, hi)) = stack.pop() {
            if max_depth.is_some_and(|m| depth >= m) {
                continue;
            }
            let sides = lo.iter().zip(&hi).map(|(l, u)| u - l);
            let linear: f64 = sides.clone().sum();
            let tau = tau_parent + sample_exponential(rng, linear);
            if tau >= lifetime || tau.is_nan() {
                continue;
            }
            let d = sample_proportional(rng, sides, linear);
            // ξ uniform on the open interval (l, u) (§12 A10), redrawn on an end. A side so
            // narrow that no float lies strictly inside it (a domain far narrower than its
            // coordinates' magnitude, cut deep) cannot be cut: the cell stays a leaf, where
            // redrawing would never end.
            if lo[d].next_up() >= hi[d] {
                continue;
            }
            let xi = loop {
                let v = lo[d] + rng.gen::<f64>() * (hi[d] - lo[d]);
                if v > lo[d] && v < hi[d] {
                    break v;
                }
            };
            let first = p.left.len() as u32;
            let i = j as usize;
            p.left[i] = first;
            p.dim[i] = d as u32;
            p.loc[i] = xi;
            p.share_left[i] = (xi - lo[d]) / (hi[d] - lo[d]);
            for _ in 0..2 {
                p.left.push(NO_CHILD);
                p.dim.push(0);
                p.loc.push(0.0);
                p.share_left.push(0.0);
                p.count.push(0);
            }
            let (mut hi_l, mut lo_r) = (hi.clone(), lo.clone());
            hi_l[d] = xi;
            lo_r[d] = xi;
            stack.push((first + 1, depth + 1, tau, lo_r, hi));
            stack.push((first, depth + 1, tau, lo, hi_l));
        }
        p
    }

    /// Adds `delta` to the counts on the path of `x` (in the domain).
    pub(crate) fn add(&mut self, x: &[f32], delta: i64) {
        let mut j = 0usize;
        loop {
            self.count[j] = (i64::from(self.count[j]) + delta) as u32;
            let l = self.left[j];
            if l == NO_CHILD {
                return;
            }
            j = (l + u32::from(f64::from(x[self.dim[j] as usize]) > self.loc[j])) as usize;
        }
    }

    fn route(&self) -> &Route {
        self.route.get_or_init(|| {
            let n = self.left.len();
            let mut nodes = Vec::with_capacity(n);
            let mut depth = vec![0usize; n];
            for j in 0..n {
                nodes.push(match self.left[j] {
                    NO_CHILD => RouteNode {
                        threshold: f32::INFINITY,
                        dim: 0,
                        next: j as u32,
                    },
                    l => {
                        depth[l as usize] = depth[j] + 1;
                        depth[l as usize + 1] = depth[j] + 1;
                        RouteNode {
                            threshold: f32_at_most(self.loc[j]),
                            dim: self.dim[j],
                            next: l,
                        }
                    }
                });
            }
            Route {
                nodes,
                depth: depth.into_iter().max().unwrap_or(0),
            }
        })
    }

    /// The leaf of each `d`-feature row of `x`, into `leaves`.
    pub(crate) fn route_rows(&self, x: &[f32], d: usize, leaves: &mut [u32]) {
        let Route { nodes, depth } = self.route();
        let mut groups = leaves.chunks_exact_mut(LANES);
        let mut rows = x.chunks_exact(LANES * d);
        for (out, x) in (&mut groups).zip(&mut rows) {
            let mut j = [0u32; LANES];
            for _ in 0..*depth {
                for (k, j) in j.iter_mut().enumerate() {
                    let n = nodes[*j as usize];
                    *j = n.next + u32::from(x[k * d + n.dim as usize] > n.threshold);
                }
            }
            out.copy_from_slice(&j);
        }
        for (out, x) in groups
            .into_remainder()
            .iter_mut()
            .zip(rows.remainder().chunks_exact(d))
        {
            let mut j = 0u32;
            for _ in 0..*depth {
                let n = nodes[j as usize];
                j = n.next + u32::from(x[n.dim as usize] > n.threshold);
            }
            *out = j;
        }
    }

    /// Adds `delta` to the counts of every `d`-feature row of `x` (all in the domain): on
    /// each path for a few rows, else at the leaves and then up the tree.
    pub(crate) fn add_rows(&mut self, x: &[f32], d: usize, delta: i64) {
        let n = x.len() / d.max(1);
        if d == 0 || n * 4 < self.left.len() {
            for row in x.chunks_exact(d.max(1)).take(n) {
                self.add(row, delta);
            }
            return;
        }
        let mut leaves = vec![0u32; n];
        self.route_rows(x, d, &mut leaves);
        self.count_leaves(&leaves, delta);
    }

    /// Adds `delta` to the counts of rows in these leaves ([`route_rows`](Self::route_rows))
    /// and to their ancestors'.
    pub(crate) fn count_leaves(&mut self, leaves: &[u32], delta: i64) {
        for &l in leaves {
            let c = &mut self.count[l as usize];
            *c = (i64::from(*c) + delta) as u32;
        }
        // Children lie after their parent: one backward sweep sums them up.
        for j in (0..self.left.len()).rev() {
            if let Some(l) = self.children(j) {
                self.count[j] = self.count[l] + self.count[l + 1];
            }
        }
    }

    /// The leaves' node indices.
    pub(crate) fn leaf_ids(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.left.len()).filter(|&j| self.left[j] == NO_CHILD)
    }

    /// The cut at node `j` (depth `depth`, with children from `c0`), read on `side`: the
    /// side's share `f` of the cell and its Pólya share of the mass,
    /// `(γ(depth+1)² f + n_child) / (γ(depth+1)² + n_j)` (§3.2).
    fn cut_share(&self, j: usize, side: u32, depth: usize, gamma: f64) -> (f64, f64) {
        let f = match side {
            0 => self.share_left[j],
            _ => 1.0 - self.share_left[j],
        };
        let c = self.left[j] as usize + side as usize;
        let a = gamma * ((depth + 1) as f64).powi(2);
        let share = (a * f + f64::from(self.count[c])) / (a + f64::from(self.count[j]));
        (f, share)
    }

    fn children(&self, j: usize) -> Option<usize> {
        match self.left[j] {
            NO_CHILD => None,
            l => Some(l as usize),
        }
    }

    /// The evaluation of every leaf, indexed by node (internal nodes hold
    /// [`Evaluation::OUTSIDE`]): what [`evaluate`](Self::evaluate) returns for a point in
    /// that leaf, computed with the same operations in the same order, so bit for bit.
    pub(crate) fn leaf_table(&self, gamma: f64, log_domain: f64) -> Vec<Evaluation> {
        let n = self.left.len();
        let mut out = vec![Evaluation::OUTSIDE; n];
        // (mass, fraction, log_mass, log_fraction, depth) on the way down to each node.
        let mut state = vec![(1.0f64, 1.0f64, 0.0f64, 0.0f64, 0usize); n];
        for j in 0..n {
            let (mass, fraction, log_mass, log_fraction, depth) = state[j];
            let Some(l) = self.children(j) else {
                out[j] =
                    leaf_evaluation((mass, fraction, log_mass, log_fraction), log_domain, depth);
                continue;
            };
            for side in 0..2 {
                let c = l + side as usize;
                let (f, share) = self.cut_share(j, side, depth, gamma);
                let (mut m, mut fr) = (mass * share, fraction * f);
                let (mut lm, mut lf) = (log_mass, log_fraction);
                if m < 1e-200 || fr < 1e-200 {
                    (lm, lf) = (lm + m.ln(), lf + fr.ln());
                    (m, fr) = (1.0, 1.0);
                }
                state[c] = (m, fr, lm, lf, depth + 1);
            }
        }
        out
    }

    /// Evaluates the tree at `x` (inside the domain, whose ln-volume is `log_domain`),
    /// §3.2; `record` hears each cut.
    pub(crate) fn evaluate(
        &self,
        x: &[f32],
        gamma: f64,
        log_domain: f64,
        mut record: Option<&mut Vec<Step>>,
    ) -> Evaluation {
        let (mut j, mut depth) = (0usize, 0usize);
        // Running products, one logarithm each at the end (moved into the logs whenever
        // they get small, for deep trees of a finite lifetime).
        let (mut mass, mut fraction) = (1.0f64, 1.0f64);
        let (mut log_mass, mut log_fraction) = (0.0f64, 0.0f64);
        while self.left[j] != NO_CHILD {
            let side = u8::from(f64::from(x[self.dim[j] as usize]) > self.loc[j]);
            let c = (self.left[j] + u32::from(side)) as usize;
            let (f, share) = self.cut_share(j, u32::from(side), depth, gamma);
            mass *= share;
            fraction *= f;
            if mass < 1e-200 || fraction < 1e-200 {
                (log_mass, log_fraction) = (log_mass + mass.ln(), log_fraction + fraction.ln());
                (mass, fraction) = (1.0, 1.0);
            }
            if let Some(r) = record.as_deref_mut() {
                r.push(Step::Cut {
                    dim: self.dim[j] as usize,
                    threshold: self.loc[j],
                    side,
                    share,
                });
            }
            j = c;
            depth += 1;
        }
        leaf_evaluation((mass, fraction, log_mass, log_fraction), log_domain, depth)
    }

    /// Every leaf cell with its mass and volume (§11 item 2).
    pub(crate) fn leaves(&self, gamma: f64, log_domain: f64) -> Vec<PolyaLeaf> {
        let mut out = Vec::new();
        let mut stack = vec![(0usize, 0usize, 0.0f64, log_domain, String::new())];
        while let Some((j, depth, log_mass, log_volume, code)) = stack.pop() {
            if self.left[j] == NO_CHILD {
                out.push(PolyaLeaf {
                    log_mass,
                    log_volume,
                    kind: if depth == 0 {
                        LeafKind::Root
                    } else {
                        LeafKind::TypeI
                    },
                    encoding: code,
                });
                continue;
            }
            for side in 0..2u32 {
                let c = (self.left[j] + side) as usize;
                let (f, share) = self.cut_share(j, side, depth, gamma);
                stack.push((
                    c,
                    depth + 1,
                    log_mass + share.ln(),
                    log_volume + f.ln(),
                    format!("{code}{side}"),
                ));
            }
        }
        out
    }

    /// Whether the arrays agree in length, children lie after their parent, and counts add
    /// up (for decoded models).
    pub(crate) fn is_consistent(&self, n_features: usize) -> bool {
        let n = self.left.len();
        if [
            self.dim.len(),
            self.loc.len(),
            self.share_left.len(),
            self.count.len(),
        ]
        .iter()
        .any(|&m| m != n)
            || n == 0
        {
            return false;
        }
        (0..n).all(|j| match self.left[j] {
            NO_CHILD => true,
            l => {
                let l = l as usize;
                l > j
                    && l + 1 < n
                    && (self.dim[j] as usize) < n_features
                    && self.share_left[j] > 0.0
                    && self.share_left[j] < 1.0
                    && self.count[j] == self.count[l] + self.count[l + 1]
            }
        })
    }
}
