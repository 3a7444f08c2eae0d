//! The root-to-leaf path of a test point with its branch-off probabilities
//! (spec `mf-classification.md` §4.1, §4.4). Shared by every model that predicts with
//! branch-off; the model supplies what a node (or a branch-off node) predicts.

use super::{MondrianTree, NO_NODE};
use crate::process::{extension_rate, Feature};

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
    pub fn walk_path(&self, x: &[Feature], mut visit: impl FnMut(&PathStep)) {
        let mut node = self.root;
        if node == NO_NODE {
            return;
        }
        let mut not_branched = 1.0f64;
        let mut tau_parent = 0.0f64;
        loop {
            let j = node as usize;
            let is_leaf = self.is_leaf(node);
            if !is_leaf {
                self.prefetch(self.route(node, x));
            }
            let delta = self.nodes[j].tau - tau_parent;
            let eta = extension_rate(self.lower(node), self.upper(node), x);
            let p_split = Self::branch_off_probability(delta, eta);
            let step = PathStep {
                node,
                delta,
                eta,
                p_split,
                branch_weight: not_branched * p_split,
                leaf_weight: if is_leaf {
                    not_branched * (1.0 - p_split)
                } else {
                    0.0
                },
                is_leaf,
            };
            visit(&step);
            if is_leaf {
                return;
            }
            // 1 − p^s loses digits when p^s is close to 1: use exp(−ηΔ) there.
            if p_split > 0.0 {
                not_branched *= if p_split < 0.5 {
                    1.0 - p_split
                } else {
                    (-eta * delta).exp()
                };
            }
            if not_branched == 0.0 {
                return;
            }
            tau_parent = self.nodes[j].tau;
            node = self.route(node, x);
        }
    }
}
