//! Label statistics for classification: the hierarchical normalized stable process with the
//! interpolated Kneser–Ney approximation (spec `mf-classification.md` §3–4).

use serde::{Deserialize, Serialize};

use crate::process::{expected_discount, Feature};
use crate::tree::{MondrianTree, NodeStatistics};

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
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LabelCounts {
    n_classes: usize,
    counts: Vec<u32>,
}

impl LabelCounts {
    /// Counts for `n_classes` classes and no nodes.
    pub fn new(n_classes: usize) -> Self {
        LabelCounts {
            n_classes,
            counts: Vec::new(),
        }
    }

    /// Number of classes K.
    pub fn n_classes(&self) -> usize {
        self.n_classes
    }

    /// Grows K (a new class appeared); existing counts keep their class indices.
    pub fn grow_classes(&mut self, n_classes: usize) {
        if n_classes <= self.n_classes {
            return;
        }
        let n_nodes = self.counts.len() / self.n_classes.max(1);
        let mut counts = vec![0u32; n_nodes * n_classes];
        if self.n_classes > 0 {
            for (new, old) in counts
                .chunks_exact_mut(n_classes)
                .zip(self.counts.chunks_exact(self.n_classes))
            {
                new[..self.n_classes].copy_from_slice(old);
            }
        }
        self.counts = counts;
        self.n_classes = n_classes;
    }

    /// The counts `c_{j,·}` of a node.
    #[inline]
    pub fn node(&self, node: u32) -> &[u32] {
        let k = self.n_classes;
        &self.counts[node as usize * k..(node as usize + 1) * k]
    }

    #[inline]
    fn node_mut(&mut self, node: u32) -> &mut [u32] {
        let k = self.n_classes;
        &mut self.counts[node as usize * k..(node as usize + 1) * k]
    }

    /// Heap bytes per node.
    pub fn bytes_per_node(&self) -> usize {
        self.n_classes * 4
    }
}

impl NodeStatistics for LabelCounts {
    type Target = u32;

    fn resize(&mut self, n_nodes: usize) {
        self.counts.resize(n_nodes * self.n_classes, 0);
    }

    fn set_leaf(&mut self, node: u32, points: &[u32], targets: &[u32]) {
        let c = self.node_mut(node);
        c.fill(0);
        for &i in points {
            c[targets[i as usize] as usize] += 1;
        }
    }

    fn set_internal(&mut self, node: u32, left: u32, right: u32) -> bool {
        let k = self.n_classes;
        let mut changed = false;
        for y in 0..k {
            let v = self.counts[left as usize * k + y].min(1)
                + self.counts[right as usize * k + y].min(1);
            let slot = &mut self.counts[node as usize * k + y];
            // Only presence (tables) reaches the parent.
            changed |= (*slot).min(1) != v.min(1);
            *slot = v;
        }
        changed
    }

    fn set_parent_of(&mut self, node: u32, child: u32) {
        let k = self.n_classes;
        for y in 0..k {
            self.counts[node as usize * k + y] = self.counts[child as usize * k + y].min(1);
        }
    }

    fn absorb_leaf(&mut self, node: u32, target: u32, weight: u32) -> bool {
        let c = &mut self.node_mut(node)[target as usize];
        let was_present = *c > 0;
        *c += weight;
        !was_present
    }

    fn absorb_internal(&mut self, node: u32, target: u32, _weight: u32) -> bool {
        // Spec §3.4 (corrected Alg. 6): the child's table for `target` just appeared.
        let c = &mut self.node_mut(node)[target as usize];
        *c += 1;
        *c == 1
    }

    fn is_pure(&self, points: &[u32], targets: &[u32]) -> bool {
        let first = targets[points[0] as usize];
        points.iter().all(|&i| targets[i as usize] == first)
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

/// Scratch buffers for [`LabelModel::predict_tree`], reused across calls.
#[derive(Debug, Clone, Default)]
pub struct LabelScratch {
    parent_mean: Vec<f64>,
    mean: Vec<f64>,
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
        match self.branch_counts {
            BranchCounts::Paper => {
                let tables = counts.iter().filter(|&&c| c > 0).count() as f64;
                for ((o, &c), &g) in out.iter_mut().zip(counts).zip(parent) {
                    let tab = if c > 0 { 1.0 } else { 0.0 };
                    *o += weight * ((1.0 - mean_discount) * tab / tables + mean_discount * g);
                }
            }
            BranchCounts::Reference => {
                let total: u32 = counts.iter().sum();
                let tables = counts.iter().filter(|&&c| c > 0).count() as f64;
                let inv = 1.0 / f64::from(total);
                for ((o, &c), &g) in out.iter_mut().zip(counts).zip(parent) {
                    let tab = if c > 0 { 1.0 } else { 0.0 };
                    *o += weight
                        * (f64::from(c) - mean_discount * tab + mean_discount * tables * g)
                        * inv;
                }
            }
        }
    }

    /// Adds `scale · p_T(y | x, D)` for one tree to `out` (spec §4.4, Predict with
    /// branch-off); an empty tree contributes the uniform base measure.
    pub fn predict_tree(
        &self,
        tree: &MondrianTree,
        counts: &LabelCounts,
        x: &[Feature],
        scale: f64,
        scratch: &mut LabelScratch,
        out: &mut [f64],
    ) {
        let k = counts.n_classes();
        let base = 1.0 / k as f64;
        if tree.root().is_none() {
            out.iter_mut().for_each(|o| *o += scale * base);
            return;
        }
        scratch.parent_mean.clear();
        scratch.parent_mean.resize(k, base);
        scratch.mean.resize(k, 0.0);
        tree.walk_path(x, |step| {
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
