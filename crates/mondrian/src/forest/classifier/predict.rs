//! The classifier's predictions: class probabilities (one tree at a time over a block of
//! rows), labels, the leaves rows reach, and the splits' label impurity per feature.

use super::MondrianForestClassifier;
use crate::data::FeatureValue;
use crate::error::{MondrianError, Result};
use crate::forest::split_relevance;
use crate::metrics::argmax;
use crate::stats::label::{LabelModel, LabelScratch};

impl MondrianForestClassifier {
    /// The leaf each row reaches in each tree (node ids, row-major `n_rows × n_trees`), as
    /// scikit-learn's forests `apply`; [`NO_LEAF`](crate::forest::NO_LEAF) for a tree that
    /// holds no point (bagging can leave one empty).
    pub fn apply<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<u32>> {
        self.forest.apply(x, n_features)
    }

    /// Gini impurity mass (`n·Gini = n − Σ_k c_k²/n`) of the training labels that the
    /// forest's splits remove, summed per feature over every split of every tree; empty
    /// before training. Class counts come from the points below each node (the nodes' own
    /// counts are the smoothing model's tables). The splits ignore the labels, so a feature
    /// scores by what random cuts along it explain (and, under feature weights, by how
    /// often it is cut).
    pub fn split_scores(&self) -> Vec<f64> {
        let k = self.n_classes;
        let targets = &self.forest.store.targets;
        split_relevance(
            &self.forest.trees,
            self.forest.store.n_features.unwrap_or(0),
            |u| {
                let tree = &u.tree;
                let mut impurity = vec![0.0; tree.n_nodes()];
                let Some(root) = tree.root() else {
                    return impurity;
                };
                // Reversed preorder visits both subtrees of a node before the node, right one
                // first, so the counts of finished subtrees form a stack (K values each, at
                // most depth + 1 of them): a node merges the top two.
                let mut stack: Vec<f64> = Vec::new();
                for j in tree.subtree_preorder(root).into_iter().rev() {
                    let top = stack.len();
                    if tree.children(j).is_some() {
                        let (rest, left) = stack.split_at_mut(top - k);
                        for (r, l) in rest[top - 2 * k..].iter_mut().zip(left.iter()) {
                            *r += *l;
                        }
                        stack.truncate(top - k);
                    } else if tree.is_compact() {
                        // A compact leaf keeps no ids; its counts are its points' labels
                        // (with multiplicity, as the ids were).
                        stack.extend(u.stats.node(j).iter().map(|&c| f64::from(c)));
                    } else {
                        stack.resize(top + k, 0.0);
                        for &i in tree.leaf_points(j) {
                            stack[top + targets[i as usize] as usize] += 1.0;
                        }
                    }
                    let c = &stack[stack.len() - k..];
                    let n: f64 = c.iter().sum();
                    if n > 0.0 {
                        impurity[j as usize] = n - c.iter().map(|v| v * v).sum::<f64>() / n;
                    }
                }
                impurity
            },
        )
    }

    /// Class probabilities, row-major `n_rows × n_classes` (spec §4.4): the average over
    /// trees of each tree's predictive with branch-off. Any x ∈ R^D is allowed.
    pub fn predict_proba<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<f64>> {
        self.proba_sums(x, n_features, false)
    }

    /// Class probabilities summed over the trees in tree order, each scaled by 1/(trees
    /// held) and the sums capped at 1 (`predict_proba`), or, with `part`, each scaled by 1/M
    /// (M the whole forest's trees) and not capped: a shard's part of the average.
    pub(super) fn proba_sums<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        part: bool,
    ) -> Result<Vec<f64>> {
        if self.forest.store.scaler.is_none() {
            return Err(MondrianError::NotFitted);
        }
        let rows = self.forest.store.rows(x, n_features)?;
        let scaled = self.forest.store.scale(&rows)?;
        let k = self.n_classes;
        let mut out = vec![0.0; rows.n_rows() * k];
        let model = LabelModel {
            gamma: self.gamma(),
            branch_counts: self.params.branch_counts,
        };
        let trees = &self.forest.trees;
        let features = self.forest.store.data().features;
        let scale = match part {
            true => 1.0 / self.params.n_trees as f64,
            false => 1.0 / trees.len() as f64,
        };
        let block = self
            .forest
            .pool
            .prediction_block_rows(rows.n_rows(), k * std::mem::size_of::<f64>());
        self.forest.pool.for_each_block(
            &mut out,
            block * k,
            &scaled,
            block * n_features,
            |out_block, x_block| {
                let mut scratch = LabelScratch::default();
                // Tree-major inside a block keeps one tree's nodes hot in cache.
                for unit in trees {
                    model.predict_tree_rows(
                        &unit.tree,
                        &unit.stats,
                        features,
                        x_block,
                        scale,
                        &mut scratch,
                        out_block,
                    );
                }
                // The average of M probabilities near 1 may round above it.
                if !part {
                    out_block.iter_mut().for_each(|p| *p = p.min(1.0));
                }
            },
        );
        Ok(out)
    }

    /// Most probable class per row (lowest index on ties).
    pub fn predict<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<usize>> {
        let k = self.n_classes;
        let proba = self.predict_proba(x, n_features)?;
        Ok(proba.chunks_exact(k).map(argmax).collect())
    }
}
