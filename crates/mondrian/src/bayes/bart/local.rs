//! One tree seen against its current residual (spec `bayesian-trees.md` §4.2): the node
//! marginals ℓ(R_{N_j}) of the Normal–Normal model (4.9) are computed from the node's rows
//! and the residual R of this visit, never from statistics stored with the node, which
//! belong to the residual the node was built with.
//!
//! [`Local`] is generic over the leaf model: BART uses it with [`NormalKnownVariance`]
//! (the default) and its residual; the single-tree CGM sampler of Ch. 3 (§3.11,
//! [`crate::bayes::mcmc`]) uses it with any [`LeafModel`] and the training targets, which
//! never change, so there the stored statistics and the recomputed ones agree.
//!
//! Also here: trees written out by hand ([`TreeShape`], [`build_tree`]) and the compact,
//! prediction-only copy of a sum of trees that the posterior draws keep.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::bayes::likelihood::{LeafModel, NormalKnownVariance, SufficientStats};
use crate::bayes::prior::CgmPrior;
use crate::bayes::proposal::{Context, Proposal, SplitValue};
use crate::bayes::tree::{partition, BayesTree, Features, Kind, NodeData, NO_PARENT};
use crate::error::{MondrianError, Result};

/// Everything a tree kernel reads: the features, the targets the tree is scored against
/// (BART: the residual R), the leaf model (BART: with the current σ²) and the tree prior.
pub(crate) struct Local<'a, M: LeafModel = NormalKnownVariance> {
    pub(crate) features: &'a Features,
    /// R for BART; the training targets Y for a single tree.
    pub(crate) resid: &'a [M::Target],
    pub(crate) model: &'a M,
    pub(crate) prior: &'a CgmPrior,
    pub(crate) split_value: SplitValue,
}

impl<M: LeafModel> Local<'_, M> {
    /// Statistics of R over `rows`.
    pub(crate) fn stats(&self, rows: &[u32]) -> M::Stats {
        let mut s = self.model.empty_stats();
        for &r in rows {
            s.add(self.resid[r as usize]);
        }
        s
    }

    /// log ℓ(R_rows).
    pub(crate) fn log_ml(&self, rows: &[u32]) -> f64 {
        self.model.log_marginal(&self.stats(rows))
    }

    /// The children of a node's data split at x_dim ≤ threshold, scored against R.
    pub(crate) fn split(
        &self,
        data: &NodeData<M::Stats>,
        dim: usize,
        threshold: f64,
    ) -> (NodeData<M::Stats>, NodeData<M::Stats>) {
        partition(self.features, self.resid, self.model, data, dim, threshold)
    }

    /// The data of `rows` scored against R.
    pub(crate) fn scored(&self, rows: Box<[u32]>) -> NodeData<M::Stats> {
        NodeData::scored(self.model, self.resid, rows)
    }

    /// The root's data scored against R.
    pub(crate) fn root(&self) -> Arc<NodeData<M::Stats>> {
        let all: Vec<u32> = (0..self.features.n_rows() as u32).collect();
        Arc::new(NodeData::new(self.features, self.resid, self.model, all))
    }

    /// The prior-proposal context of the SMC machinery (§3.4a) on R.
    pub(crate) fn context(&self) -> Context<'_, M> {
        Context {
            features: self.features,
            targets: self.resid,
            model: self.model,
            prior: self.prior,
            proposal: Proposal::Prior,
            split_value: self.split_value,
        }
    }

    /// The threshold stored for a draw ξ from the prior rule at a node (A18): ξ itself,
    /// or the midpoint of the training column's gap that contains it. Either way the
    /// prior probability of the training partition is the same, and a global gap lies
    /// wholly inside or outside a node's extent, so the MH ratios do not change.
    pub(crate) fn threshold(&self, dim: usize, xi: f64) -> f64 {
        self.context().stored_threshold(dim, xi)
    }

    /// log(1 − s) for a node of this data at `depth`: s = p·1[it can split] (§4.5).
    pub(crate) fn log_not_split(&self, data: &NodeData<M::Stats>, depth: usize) -> f64 {
        if self.data_can_split(data) {
            (1.0 - self.prior.p_split(depth)).ln()
        } else {
            0.0
        }
    }

    /// Whether a node of this data can split (V_j ≠ ∅, and the size rule, A19).
    pub(crate) fn data_can_split(&self, data: &NodeData<M::Stats>) -> bool {
        self.prior.min_samples.is_none_or(|m| data.rows.len() >= m)
            && data.has_valid_dim(self.features)
    }
}

/// Indices of the leaves.
pub(crate) fn leaves<S>(tree: &BayesTree<S>) -> impl Iterator<Item = usize> + '_ {
    tree.nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.is_leaf())
        .map(|(j, _)| j)
}

/// Whether node j is internal with two leaf children (prunable, P(T) of §4.5).
pub(crate) fn is_prunable<S>(tree: &BayesTree<S>, j: usize) -> bool {
    match tree.nodes[j].children() {
        Some((a, b)) => tree.nodes[a].is_leaf() && tree.nodes[b].is_leaf(),
        None => false,
    }
}

/// Removes the two leaf children of node j, which becomes a leaf; the arena is compacted.
pub(crate) fn remove_children<S>(tree: &mut BayesTree<S>, j: usize) {
    let Some((a, b)) = tree.nodes[j].children() else {
        return;
    };
    let n = tree.nodes.len();
    let mut map = vec![u32::MAX; n];
    let mut nodes = Vec::with_capacity(n - 2);
    for (i, node) in tree.nodes.drain(..).enumerate() {
        if i != a && i != b {
            map[i] = nodes.len() as u32;
            nodes.push(node);
        }
    }
    for node in &mut nodes {
        if node.parent != NO_PARENT {
            node.parent = map[node.parent as usize];
        }
        if let Kind::Split { left, right, .. } = &mut node.kind {
            *left = map[*left as usize];
            *right = map[*right as usize];
        }
    }
    nodes[map[j] as usize].kind = Kind::Leaf;
    tree.nodes = nodes;
}

/// A tree written out by hand: leaves, and rules x_dim ≤ threshold going left.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TreeShape {
    /// A leaf.
    Leaf,
    /// An internal node.
    Split {
        /// δ.
        dim: usize,
        /// ξ.
        threshold: f64,
        /// The subtree of x_δ ≤ ξ.
        left: Box<TreeShape>,
        /// The subtree of x_δ > ξ.
        right: Box<TreeShape>,
    },
}

/// The tree of a [`TreeShape`] on training features, its nodes scored with `targets`
/// under `model`. Fails when a rule names a missing dimension, is not finite, or leaves
/// a child without training points.
pub fn build_tree<L: LeafModel>(
    features: &Features,
    targets: &[L::Target],
    model: &L,
    shape: &TreeShape,
) -> Result<BayesTree<L::Stats>> {
    if targets.len() != features.n_rows() {
        return Err(MondrianError::LengthMismatch {
            n_rows: features.n_rows(),
            n_labels: targets.len(),
        });
    }
    let all: Vec<u32> = (0..features.n_rows() as u32).collect();
    let root = Arc::new(NodeData::new(features, targets, model, all));
    let mut tree = BayesTree::with_root(root);
    let mut stack = vec![(0usize, shape)];
    while let Some((j, shape)) = stack.pop() {
        match shape {
            TreeShape::Leaf => tree.nodes[j].kind = Kind::Leaf,
            TreeShape::Split {
                dim,
                threshold,
                left,
                right,
            } => {
                let (dim, threshold) = (*dim, *threshold);
                if dim >= features.n_features() || !threshold.is_finite() {
                    return Err(MondrianError::InvalidParameter {
                        name: "shape",
                        reason: format!("rule x[{dim}] ≤ {threshold} is not usable"),
                    });
                }
                let (l, r) = partition(
                    features,
                    targets,
                    model,
                    &tree.nodes[j].data,
                    dim,
                    threshold,
                );
                if l.rows.is_empty() || r.rows.is_empty() {
                    return Err(MondrianError::InvalidParameter {
                        name: "shape",
                        reason: format!("rule x[{dim}] ≤ {threshold} leaves a child empty"),
                    });
                }
                let (a, b) = tree.split(j, dim, threshold, l, r);
                stack.push((a as usize, left));
                stack.push((b as usize, right));
            }
        }
    }
    Ok(tree)
}

/// A leaf in [`SumOfTrees`] has this `dim`.
pub(super) const LEAF: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(super) struct PredictionNode {
    pub(super) dim: u32,
    /// ξ of an internal node, μ of a leaf.
    pub(super) value: f64,
    pub(super) left: u32,
    pub(super) right: u32,
}

/// A sum of trees for prediction only: rules and leaf values, no training rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SumOfTrees {
    pub(super) nodes: Vec<PredictionNode>,
    pub(super) roots: Vec<u32>,
}

impl SumOfTrees {
    /// The trees with their leaf values (`mu[m][j]` for leaf j of tree m).
    pub(crate) fn new<S>(trees: &[BayesTree<S>], mu: &[Vec<f64>]) -> Self {
        let total = trees.iter().map(|t| t.nodes.len()).sum();
        let mut nodes = Vec::with_capacity(total);
        let mut roots = Vec::with_capacity(trees.len());
        for (tree, mu) in trees.iter().zip(mu) {
            let base = nodes.len() as u32;
            roots.push(base);
            for (j, node) in tree.nodes.iter().enumerate() {
                nodes.push(match node.kind {
                    Kind::Split {
                        dim,
                        threshold,
                        left,
                        right,
                    } => PredictionNode {
                        dim,
                        value: threshold,
                        left: base + left,
                        right: base + right,
                    },
                    _ => PredictionNode {
                        dim: LEAF,
                        value: mu[j],
                        left: 0,
                        right: 0,
                    },
                });
            }
        }
        SumOfTrees { nodes, roots }
    }

    /// Σ_m g(x; T_m, μ_m).
    pub(crate) fn eval(&self, x: &[f64]) -> f64 {
        let mut total = 0.0;
        for &root in &self.roots {
            let mut node = &self.nodes[root as usize];
            while node.dim != LEAF {
                let next = if x[node.dim as usize] <= node.value {
                    node.left
                } else {
                    node.right
                };
                node = &self.nodes[next as usize];
            }
            total += node.value;
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_build_prune_and_predict() {
        let x = [0.1, 0.5, 0.3, 0.2, 0.35, 0.9, 0.6, 0.4, 0.9, 0.7];
        let y = [0.2, -0.5, 0.9, 1.1, -0.3];
        let f = Features::new(&x, 2).unwrap();
        let model = NormalKnownVariance {
            mean: 0.0,
            prior_variance: 1.0,
            noise_variance: 0.1,
        };
        let shape = TreeShape::Split {
            dim: 0,
            threshold: 0.5,
            left: Box::new(TreeShape::Split {
                dim: 1,
                threshold: 0.3,
                left: Box::new(TreeShape::Leaf),
                right: Box::new(TreeShape::Leaf),
            }),
            right: Box::new(TreeShape::Leaf),
        };
        let mut tree = build_tree(&f, &y, &model, &shape).unwrap();
        assert_eq!(tree.n_leaves(), 3);
        let mu: Vec<f64> = (0..tree.nodes.len()).map(|j| j as f64).collect();
        let sum = SumOfTrees::new(std::slice::from_ref(&tree), std::slice::from_ref(&mu));
        for i in 0..5 {
            let row = f.row(i);
            assert_eq!(sum.eval(row), mu[tree.leaf_of(row)]);
        }
        let inner = tree.nodes[0].children().unwrap().0;
        assert!(is_prunable(&tree, inner) && !is_prunable(&tree, 0));
        remove_children(&mut tree, inner);
        assert_eq!(tree.nodes.len(), 3);
        assert_eq!(tree.n_leaves(), 2);
        let (a, b) = tree.nodes[0].children().unwrap();
        assert_eq!(tree.nodes[a].rows().len() + tree.nodes[b].rows().len(), 5);
        assert!(tree.nodes[a].parent() == Some(0) && tree.nodes[b].parent() == Some(0));
        let empty = TreeShape::Split {
            dim: 0,
            threshold: 5.0,
            left: Box::new(TreeShape::Leaf),
            right: Box::new(TreeShape::Leaf),
        };
        assert!(build_tree(&f, &y, &model, &empty).is_err());
    }
}
