//! Tree-parallel shards of the classifier (see `forest/shard.rs` for why shards grow the
//! trees of the whole forest, and how state over all trees is handled): creation, split,
//! merge, shard files, and class probabilities combined without merging.

use std::ops::Range;

use super::{ClassifierParams, ClassifierState, MondrianForestClassifier};
use crate::data::FeatureValue;
use crate::error::Result;
use crate::forest::shard::{cover, mismatch, persistent_forest, ShardFiles};
use crate::forest::{check_same, Forest, TreeRange};
use crate::stats::label::LabelCounts;

/// One shard's part of the class probabilities
/// ([`predict_proba_sum`](MondrianForestClassifier::predict_proba_sum)).
#[derive(Debug, Clone, PartialEq)]
pub struct ProbaSum {
    /// Global index of the shard's first tree.
    pub first_tree: usize,
    /// Trees in the shard.
    pub n_shard_trees: usize,
    /// Trees in the whole forest.
    pub n_trees: usize,
    /// Columns of `sums`.
    pub n_classes: usize,
    /// Per row (row-major `n_rows × n_classes`), the shard's part of the forest's average:
    /// the sum over its trees, in tree order, of each tree's class probabilities divided
    /// by `n_trees` (not capped at 1).
    pub sums: Vec<f64>,
}

impl MondrianForestClassifier {
    /// An untrained shard: the trees `first_tree..first_tree + n_shard_trees` of the forest
    /// that `params` describe (`params.n_trees` is the whole forest's count). Trained on
    /// the same rows as the other shards, with the same calls, the shards merge into the
    /// forest one process would grow ([`merge`](Self::merge)).
    pub fn new_shard(
        params: ClassifierParams,
        first_tree: usize,
        n_shard_trees: usize,
    ) -> Result<Self> {
        let mut model = Self::new(params)?;
        let n = model.params.n_trees;
        model.forest.set_range(first_tree, n_shard_trees, n)?;
        Ok(model)
    }

    /// Global indices of the trees this model holds (`0..n_trees` for a whole forest).
    pub fn shard_range(&self) -> Range<usize> {
        self.forest.tree_range(self.params.n_trees)
    }

    /// Whether this model holds only part of its forest's trees.
    pub fn is_shard(&self) -> bool {
        self.forest.is_shard()
    }

    /// Cuts this model (fitted or not, whole or itself a shard) into `k` shards of
    /// contiguous tree ranges whose sizes differ by at most one, each with a copy of the
    /// points: the inverse of [`merge`](Self::merge).
    pub fn split(self, k: usize) -> Result<Vec<Self>> {
        let n = self.params.n_trees;
        let (params, n_classes) = (self.params, self.n_classes);
        Ok(self
            .forest
            .split(k, n)?
            .into_iter()
            .map(|forest| MondrianForestClassifier {
                params: params.clone(),
                n_classes,
                forest,
            })
            .collect())
    }

    /// One model from shards given in any order: their parameters (thread count and memory
    /// budget aside), class counts and points must agree and their ranges tile a
    /// contiguous range; with all the trees it is the whole forest, bit for bit.
    pub fn merge(shards: Vec<Self>) -> Result<Self> {
        if shards.is_empty() {
            return Err(mismatch("no shards to merge"));
        }
        check_same(&shards, "parameters", |s| ClassifierParams {
            n_threads: 0,
            max_memory: None,
            ..s.params.clone()
        })?;
        check_same(&shards, "class counts", |s| s.n_classes)?;
        let (params, n_classes) = (shards[0].params.clone(), shards[0].n_classes);
        let forests: Vec<Forest<LabelCounts>> = shards.into_iter().map(|s| s.forest).collect();
        let forest = Forest::merge(forests, params.n_trees)?;
        Ok(MondrianForestClassifier {
            params,
            n_classes,
            forest,
        })
    }

    /// This shard's part of [`predict_proba`](Self::predict_proba): per row, the sum of its
    /// trees' class probabilities over the whole forest's tree count M, in tree order, as
    /// `predict_proba` adds them; [`combine_proba`](Self::combine_proba) joins the parts.
    pub fn predict_proba_sum<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
    ) -> Result<ProbaSum> {
        let range = self.shard_range();
        Ok(ProbaSum {
            first_tree: range.start,
            n_shard_trees: range.len(),
            n_trees: self.params.n_trees,
            n_classes: self.n_classes,
            sums: self.proba_sums(x, n_features, true)?,
        })
    }

    /// The whole forest's class probabilities from the parts of shards covering all its
    /// trees (in any order): the parts summed in tree-range order, capped at 1. The merged
    /// forest's `predict_proba` adds each tree's scaled probabilities one at a time in tree
    /// order, so one part (the whole forest's) combines to it bit for bit; several parts
    /// are summed first within each shard, which differs from it by rounding only
    /// (relative error below M·ε, M the tree count).
    pub fn combine_proba(mut parts: Vec<ProbaSum>) -> Result<Vec<f64>> {
        parts.sort_by_key(|p| p.first_tree);
        let Some(first) = parts.first() else {
            return Err(mismatch("no shard predictions to combine"));
        };
        let (m, k, len) = (first.n_trees, first.n_classes, first.sums.len());
        if parts
            .iter()
            .any(|p| (p.n_trees, p.n_classes, p.sums.len()) != (m, k, len))
        {
            return Err(mismatch(
                "the predictions have different tree counts, class counts or rows",
            ));
        }
        cover(parts.iter().map(|p| (p.first_tree, p.n_shard_trees)), m)?;
        let mut out = vec![0.0; len];
        for p in &parts {
            out.iter_mut().zip(&p.sums).for_each(|(o, s)| *o += s);
        }
        out.iter_mut().for_each(|p| *p = p.min(1.0));
        Ok(out)
    }
}

persistent_forest!(MondrianForestClassifier, "mondrian-forest-classifier");

impl ShardFiles for MondrianForestClassifier {
    const SHARD_KIND: &'static str = "mondrian-forest-classifier-shard";
    type State = ClassifierState;
    fn range(&self) -> Option<TreeRange> {
        self.forest.range
    }
    fn forest_trees(state: &ClassifierState) -> usize {
        state.params.n_trees
    }
    fn from_state(mut s: ClassifierState, range: Option<TreeRange>) -> Result<Self> {
        s.forest.range = range;
        Self::try_from(s).map_err(|e| e.0)
    }
}
