//! Label statistics for classification: the hierarchical normalized stable process with the
//! interpolated Kneser–Ney approximation (spec `mf-classification.md` §3–4).

use serde::{Deserialize, Serialize};

use crate::process::{expected_discount, expected_discount_given, Feature};
use crate::tree::{MondrianTree, NodeStatistics, PathStep};

/// Which counts the branch-off node uses in prediction (spec §4.3, §9 item 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum BranchCounts {
    /// `c_j̃ = tab_j`, as in the paper's Algorithm 8: IKN-consistent and equal to the
    /// Monte-Carlo average over sampled extensions.
    #[default]
    Paper,
    /// `c_j̃ = c_j`, as in the authors' released code.
    Reference,
}

/// IKN customer counts `c_{j,k}` per node (spec §3.2): the label histogram at leaves and
/// `tab_left + tab_right ∈ {0,1,2}` at internal nodes; tables are `min(c, 1)`.
///
/// Each node's record is `[C_j, T_j, c_{j,0}, …, c_{j,K−1}]` (total customers, tables,
/// counts), so prediction reads one contiguous run and never re-sums the counts.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LabelCounts {
    n_classes: usize,
    records: Vec<u32>,
}

impl LabelCounts {
    /// Counts for `n_classes` classes and no nodes.
    pub fn new(n_classes: usize) -> Self {
        LabelCounts {
            n_classes,
            records: Vec::new(),
        }
    }

    /// Number of classes K.
    pub fn n_classes(&self) -> usize {
        self.n_classes
    }

    #[inline]
    fn stride(&self) -> usize {
        self.n_classes + 2
    }

    /// Grows K (a new class appeared); existing counts keep their class indices.
    pub fn grow_classes(&mut self, n_classes: usize) {
        if n_classes <= self.n_classes {
            return;
        }
        let (old, new) = (self.stride(), n_classes + 2);
        let n_nodes = self.records.len() / old;
        let mut records = vec![0u32; n_nodes * new];
        for (dst, src) in records
            .chunks_exact_mut(new)
            .zip(self.records.chunks_exact(old))
        {
            dst[..old].copy_from_slice(src);
        }
        self.records = records;
        self.n_classes = n_classes;
    }

    /// The counts `c_{j,·}` of a node.
    #[inline]
    pub fn node(&self, node: u32) -> &[u32] {
        let s = self.stride();
        &self.records[node as usize * s + 2..(node as usize + 1) * s]
    }

    /// Total customers `C_j = Σ_k c_{j,k}`.
    #[inline]
    pub fn total(&self, node: u32) -> u32 {
        self.records[node as usize * self.stride()]
    }

    /// Tables `T_j = Σ_k min(c_{j,k}, 1)`: the number of labels present under the node.
    #[inline]
    pub fn tables(&self, node: u32) -> u32 {
        self.records[node as usize * self.stride() + 1]
    }

    #[inline]
    fn record_mut(&mut self, node: u32) -> &mut [u32] {
        let s = self.stride();
        &mut self.records[node as usize * s..(node as usize + 1) * s]
    }

    /// Checks counts read from a file: one record per node for `n_classes` classes, each
    /// with totals that match its counts.
    pub(crate) fn check_decoded(&self, n_nodes: usize, n_classes: usize) -> Result<(), String> {
        if self.n_classes != n_classes
            || Some(self.records.len()) != n_nodes.checked_mul(self.stride())
        {
            return Err("label counts do not match the tree".into());
        }
        let consistent = self.records.chunks_exact(self.stride()).all(|r| {
            let counts = &r[2..];
            u64::from(r[0]) == counts.iter().map(|&c| u64::from(c)).sum::<u64>()
                && r[1] as usize == counts.iter().filter(|&&c| c > 0).count()
        });
        match consistent {
            true => Ok(()),
            false => Err("label counts disagree with their totals".into()),
        }
    }

    /// Asks the cache for a node's record ahead of use.
    #[inline(always)]
    pub fn prefetch(&self, node: u32) {
        let start = node as usize * self.stride();
        if let Some(first) = self.records.get(start) {
            let lines = (self.stride() * 4).div_ceil(64).min(2);
            crate::tree::prefetch_lines(first as *const u32 as *const u8, lines);
        }
    }
}

fn set_summaries(record: &mut [u32]) {
    let (head, counts) = record.split_at_mut(2);
    head[0] = counts.iter().sum();
    head[1] = counts.iter().filter(|&&c| c > 0).count() as u32;
}

impl NodeStatistics for LabelCounts {
    type Target = u32;

    fn resize(&mut self, n_nodes: usize) {
        let s = self.stride();
        self.records.resize(n_nodes * s, 0);
    }

    fn reserve(&mut self, n_nodes: usize) {
        let wanted = n_nodes * self.stride();
        self.records
            .reserve(wanted.saturating_sub(self.records.len()));
    }

    fn set_leaf(&mut self, node: u32, points: &[u32], targets: &[u32]) {
        let r = self.record_mut(node);
        r.fill(0);
        for &i in points {
            r[2 + targets[i as usize] as usize] += 1;
        }
        set_summaries(r);
    }

    #[inline(always)]
    fn prefetch(&self, node: u32) {
        LabelCounts::prefetch(self, node);
    }

    fn set_internal(&mut self, node: u32, left: u32, right: u32) -> bool {
        let s = self.stride();
        let (j, l, r) = (node as usize * s, left as usize * s, right as usize * s);
        let mut changed = false;
        for y in 2..s {
            let v = self.records[l + y].min(1) + self.records[r + y].min(1);
            let slot = &mut self.records[j + y];
            // Only presence (tables) reaches the parent.
            changed |= (*slot).min(1) != v.min(1);
            *slot = v;
        }
        set_summaries(&mut self.records[j..j + s]);
        changed
    }

    fn set_parent_of(&mut self, node: u32, child: u32) {
        let s = self.stride();
        let (j, c) = (node as usize * s, child as usize * s);
        for y in 2..s {
            self.records[j + y] = self.records[c + y].min(1);
        }
        set_summaries(&mut self.records[j..j + s]);
    }

    fn absorb_leaf(&mut self, node: u32, target: u32, weight: u32) -> bool {
        let r = self.record_mut(node);
        let c = &mut r[2 + target as usize];
        let was_present = *c > 0;
        *c += weight;
        r[0] += weight;
        if !was_present {
            r[1] += 1;
        }
        !was_present
    }

    fn absorb_internal(&mut self, node: u32, target: u32, _weight: u32) -> bool {
        // Spec §3.4 (corrected Alg. 6): the child's table for `target` just appeared.
        let r = self.record_mut(node);
        let c = &mut r[2 + target as usize];
        *c += 1;
        let new_table = *c == 1;
        r[0] += 1;
        if new_table {
            r[1] += 1;
        }
        new_table
    }

    fn is_pure(&self, points: &[u32], targets: &[u32]) -> bool {
        let first = targets[points[0] as usize];
        points.iter().all(|&i| targets[i as usize] == first)
    }

    fn stays_pure(&self, node: u32, target: u32) -> bool {
        match self.tables(node) {
            0 => true,
            1 => self.node(node)[target as usize] > 0,
            _ => false,
        }
    }

    fn release_leaf(
        &mut self,
        node: u32,
        target: u32,
        weight: u32,
        _points: &[u32],
        _targets: &[u32],
    ) -> bool {
        // The exact inverse of absorb_leaf: counts are integers.
        let r = self.record_mut(node);
        r[2 + target as usize] -= weight;
        r[0] -= weight;
        let gone = r[2 + target as usize] == 0;
        if gone {
            r[1] -= 1;
        }
        gone
    }

    fn node_is_pure(&self, node: u32) -> bool {
        // At an internal node too: its count of a class is the children's tables of it, so
        // its tables are the classes present below (spec §3.2).
        self.tables(node) <= 1
    }

    fn bytes_per_node(&self) -> usize {
        self.stride() * 4
    }
}

/// Hyper-parameters of the label model used in prediction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LabelModel {
    /// Discount rate γ: `d_j = exp(−γ Δ_j)`.
    pub gamma: f64,
    /// Branch-off node counts.
    pub branch_counts: BranchCounts,
}

/// The uniform base measure H: added (scaled) to `out` for an empty tree, which predicts
/// H (spec §6), and returned as `Some(1/K)` otherwise.
fn base_measure_if_empty(
    tree: &MondrianTree,
    counts: &LabelCounts,
    scale: f64,
    out: &mut [f64],
) -> Option<f64> {
    let base = 1.0 / counts.n_classes() as f64;
    if tree.root().is_none() {
        out.iter_mut().for_each(|o| *o += scale * base);
        return None;
    }
    Some(base)
}

/// Coefficients below this are dropped in [`LabelModel::predict_tree`]: each term they
/// scale is at most 1 per class, so the prediction moves by less than depth × 1e-18, far
/// below the rounding of the sum itself.
const NEGLIGIBLE: f64 = 1e-18;

/// Scratch buffers for [`LabelModel::predict_tree`], reused across calls.
#[derive(Debug, Clone, Default)]
pub struct LabelScratch {
    parent_mean: Vec<f64>,
    mean: Vec<f64>,
    steps: Vec<PathStep>,
    coefficients: Vec<(f64, f64, f64)>,
    many: Vec<Vec<PathStep>>,
}

impl LabelModel {
    /// Discount `d_j = exp(−γΔ)` with `γ = 0 ⇒ 1` and `Δ = ∞ ⇒ 0` (spec §3.1).
    #[inline]
    fn discount(&self, delta: f64) -> f64 {
        if self.gamma == 0.0 {
            1.0
        } else if delta.is_infinite() {
            0.0
        } else {
            (-self.gamma * delta).exp()
        }
    }

    /// Adds `scale · p_T(y | x, D)` for one tree to `out` (spec §4.4, Predict with
    /// branch-off); an empty tree contributes the uniform base measure.
    ///
    /// Every quantity of §4.4 is affine in the posterior means, `Ḡ_j = A_j + β_j Ḡ_parent`
    /// with `A_j = (c_j − d_j tab_j)/C_j` and `β_j = d_j T_j / C_j`, so the prediction is
    /// `Σ_j (w_j · branch_j + g_j · A_j) + ρ · H` with scalar coefficients `g_j` found by one
    /// backward pass over the path. That touches each node's counts once, only where a label
    /// is present, and never forms a K-vector per node.
    /// [`predict_tree_direct`](Self::predict_tree_direct) is the literal algorithm; tests
    /// hold the two equal.
    #[allow(clippy::too_many_arguments)]
    pub fn predict_tree(
        &self,
        tree: &MondrianTree,
        counts: &LabelCounts,
        features: &[Feature],
        x: &[Feature],
        scale: f64,
        scratch: &mut LabelScratch,
        out: &mut [f64],
    ) {
        let Some(base) = base_measure_if_empty(tree, counts, scale, out) else {
            return;
        };
        let steps = &mut scratch.steps;
        tree.path_steps(x, features, steps);
        self.combine_path(counts, base, scale, steps, &mut scratch.coefficients, out);
    }

    /// [`predict_tree`](Self::predict_tree) for a block of rows (row-major, D columns;
    /// `out` row-major with K columns): the rows descend [`LOCKSTEP`](crate::tree::LOCKSTEP) at a time in lockstep,
    /// two groups in flight (`MondrianTree::weighed_paths`).
    #[allow(clippy::too_many_arguments)]
    pub fn predict_tree_rows(
        &self,
        tree: &MondrianTree,
        counts: &LabelCounts,
        features: &[Feature],
        xs: &[Feature],
        scale: f64,
        scratch: &mut LabelScratch,
        out: &mut [f64],
    ) {
        // An empty tree adds H to every entry.
        let Some(base) = base_measure_if_empty(tree, counts, scale, out) else {
            return;
        };
        let k = counts.n_classes();
        let LabelScratch {
            many, coefficients, ..
        } = scratch;
        tree.weighed_paths(
            xs,
            features,
            many,
            |node| counts.prefetch(node),
            |start, paths| {
                let rows = out[start * k..].chunks_exact_mut(k);
                for (steps, o) in paths.iter().zip(rows) {
                    self.combine_path(counts, base, scale, steps, coefficients, o);
                }
            },
        );
    }

    /// Adds `scale ·` the prediction of a weighed path to `out` (the two passes described
    /// at [`predict_tree`](Self::predict_tree)).
    fn combine_path(
        &self,
        counts: &LabelCounts,
        base: f64,
        scale: f64,
        steps: &[PathStep],
        coefficients: &mut Vec<(f64, f64, f64)>,
        out: &mut [f64],
    ) {
        coefficients.clear();
        coefficients.resize(steps.len(), (0.0, 0.0, 0.0));
        // Above the topmost node that takes mass itself (a branch-off or the leaf), a
        // negligible g stays as it is up to the root: the passes can stop there.
        let top = steps
            .iter()
            .position(|s| s.branch_weight > 0.0 || s.leaf_weight > 0.0)
            .unwrap_or(0);
        let mut first = steps.len();
        // Backward pass: g_i is the coefficient on Ḡ_i, rho the one on Ḡ_parent(i).
        let mut rho = 0.0;
        for (i, (step, coef)) in steps.iter().zip(coefficients.iter_mut()).enumerate().rev() {
            let g = step.leaf_weight + rho;
            if g < NEGLIGIBLE && step.branch_weight == 0.0 {
                // β ≤ 1, so nothing above can gain more than g: skip reading the counts.
                rho = g;
                if i <= top {
                    break;
                }
                continue;
            }
            first = i;
            let (total, tables) = (counts.total(step.node), counts.tables(step.node));
            if total == 0 {
                // An empty node copies its parent (spec §3.5).
                rho = g + step.branch_weight;
                *coef = (0.0, 0.0, 0.0);
                continue;
            }
            let occupancy = f64::from(tables) / f64::from(total);
            let d = self.discount(step.delta);
            let d_bar = if step.branch_weight > 0.0 {
                expected_discount_given(step.eta, self.gamma, step.delta, step.p_split, d)
            } else {
                0.0
            };
            let to_parent = match self.branch_counts {
                BranchCounts::Paper => d_bar,
                BranchCounts::Reference => d_bar * occupancy,
            };
            rho = d * occupancy * g + step.branch_weight * to_parent;
            *coef = (g, d, d_bar);
        }
        if rho != 0.0 {
            let h = scale * rho * base;
            out.iter_mut().for_each(|o| *o += h);
        }
        for (step, &(g, d, d_bar)) in steps.iter().zip(coefficients.iter()).skip(first) {
            let w = step.branch_weight;
            if g < NEGLIGIBLE && w == 0.0 {
                continue;
            }
            let (total, tables) = (counts.total(step.node), counts.tables(step.node));
            if total == 0 {
                continue;
            }
            let inv_total = 1.0 / f64::from(total);
            // Per present label: g·(c − d)/C + w·(branch mean without the parent part).
            let (branch_const, branch_per_count) = match self.branch_counts {
                BranchCounts::Paper => ((1.0 - d_bar) / f64::from(tables), 0.0),
                BranchCounts::Reference => (-d_bar * inv_total, inv_total),
            };
            let (g_scaled, w_scaled) = (scale * g * inv_total, scale * w);
            for (o, &c) in out.iter_mut().zip(counts.node(step.node)) {
                // Adds 0 for an absent label rather than skipping it: a conditional update
                // compiles to masked stores, which stall the next loads on some cores.
                let cf = f64::from(c);
                let term = g_scaled * (cf - d) + w_scaled * (branch_const + branch_per_count * cf);
                *o += if c > 0 { term } else { 0.0 };
            }
        }
    }

    /// Posterior mean `Ḡ_j = (c − d·tab + d·T·Ḡ_parent) / C` ([P] Eq. 4), written to `out`.
    fn posterior_mean(counts: &[u32], discount: f64, parent: &[f64], out: &mut [f64]) {
        let total: u32 = counts.iter().sum();
        if total == 0 {
            out.copy_from_slice(parent);
            return;
        }
        let tables = counts.iter().filter(|&&c| c > 0).count() as f64;
        let inv = 1.0 / f64::from(total);
        for ((o, &c), &g) in out.iter_mut().zip(counts).zip(parent) {
            let tab = if c > 0 { 1.0 } else { 0.0 };
            *o = (f64::from(c) - discount * tab + discount * tables * g) * inv;
        }
    }

    /// Adds `weight ·` the expected mean of the branch-off node above `counts`' node (§4.3).
    fn add_branch_mean(
        &self,
        counts: &[u32],
        mean_discount: f64,
        parent: &[f64],
        weight: f64,
        out: &mut [f64],
    ) {
        let total: u32 = counts.iter().sum();
        let tables = counts.iter().filter(|&&c| c > 0).count() as f64;
        if total == 0 {
            out.iter_mut()
                .zip(parent)
                .for_each(|(o, &g)| *o += weight * g);
            return;
        }
        for ((o, &c), &g) in out.iter_mut().zip(counts).zip(parent) {
            let tab = if c > 0 { 1.0 } else { 0.0 };
            *o += weight
                * match self.branch_counts {
                    BranchCounts::Paper => (1.0 - mean_discount) * tab / tables + mean_discount * g,
                    BranchCounts::Reference => {
                        (f64::from(c) - mean_discount * tab + mean_discount * tables * g)
                            / f64::from(total)
                    }
                };
        }
    }

    /// The prediction of [`predict_tree`](Self::predict_tree) computed literally as spec
    /// §4.4 writes it: posterior means top-down along the path, one K-vector per node.
    /// Slower; kept as the reference the fast path is tested against.
    #[allow(clippy::too_many_arguments)]
    pub fn predict_tree_direct(
        &self,
        tree: &MondrianTree,
        counts: &LabelCounts,
        features: &[Feature],
        x: &[Feature],
        scale: f64,
        scratch: &mut LabelScratch,
        out: &mut [f64],
    ) {
        let Some(base) = base_measure_if_empty(tree, counts, scale, out) else {
            return;
        };
        let k = counts.n_classes();
        scratch.parent_mean.clear();
        scratch.parent_mean.resize(k, base);
        scratch.mean.resize(k, 0.0);
        tree.walk_path(x, features, |step| {
            let c = counts.node(step.node);
            if step.branch_weight > 0.0 {
                let d_bar = expected_discount(step.eta, self.gamma, step.delta);
                self.add_branch_mean(
                    c,
                    d_bar,
                    &scratch.parent_mean,
                    scale * step.branch_weight,
                    out,
                );
            }
            Self::posterior_mean(
                c,
                self.discount(step.delta),
                &scratch.parent_mean,
                &mut scratch.mean,
            );
            if step.is_leaf {
                if step.leaf_weight > 0.0 {
                    let w = scale * step.leaf_weight;
                    out.iter_mut()
                        .zip(&scratch.mean)
                        .for_each(|(o, &g)| *o += w * g);
                }
            } else {
                std::mem::swap(&mut scratch.parent_mean, &mut scratch.mean);
            }
        });
    }
}
