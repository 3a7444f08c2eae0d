//! Tree-parallel shards of the regressor (see `forest/shard.rs` for why shards grow the
//! trees of the whole forest, and how state over all trees is handled): creation, split,
//! merge, shard files, and predictive moments combined without merging.
//!
//! The label moments and calibration PITs are replicated (every shard sees every row and
//! computes the PITs from the parameters); θ and the messages are derived again by the
//! merged model from all its trees.

use std::ops::Range;

use super::{MondrianForestRegressor, RegressionPrediction, RegressorParams, RegressorState};
use crate::data::FeatureValue;
use crate::error::Result;
use crate::forest::shard::{cover, mismatch, persistent_forest, ShardFiles};
use crate::forest::{check_same, Forest, TreeRange};
use crate::stats::gaussian::{Estimate, Moments, TargetMoments};

/// One shard's part of the predictive moments
/// ([`predict_sums`](MondrianForestRegressor::predict_sums)): per row, the Welford moments
/// of its trees' predictive means and the sum of their predictive variances.
#[derive(Debug, Clone, PartialEq)]
pub struct RegressionSums {
    /// Global index of the shard's first tree.
    pub first_tree: usize,
    /// Trees in the shard.
    pub n_shard_trees: usize,
    /// Trees in the whole forest.
    pub n_trees: usize,
    /// Per row, the mean of the shard's trees' predictive means.
    pub mean: Vec<f64>,
    /// Per row, Σ (tree mean − `mean`)² over the shard's trees.
    pub m2: Vec<f64>,
    /// Per row, Σ over the shard's trees of their predictive variances.
    pub variance_sum: Vec<f64>,
}

impl MondrianForestRegressor {
    /// An untrained shard: the trees `first_tree..first_tree + n_shard_trees` of the forest
    /// that `params` describe, as
    /// [`MondrianForestClassifier::new_shard`](crate::MondrianForestClassifier::new_shard).
    pub fn new_shard(
        params: RegressorParams,
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

    /// Cuts this model into `k` shards of contiguous tree ranges of as equal sizes as
    /// possible: the inverse of [`merge`](Self::merge).
    pub fn split(self, k: usize) -> Result<Vec<Self>> {
        let n = self.params.n_trees;
        let forests = self.forest.split(k, n)?;
        let mut shards: Vec<Self> = forests
            .into_iter()
            .map(|forest| MondrianForestRegressor {
                params: self.params.clone(),
                forest,
                labels: self.labels,
                labels_released: self.labels_released,
                calibration: self.calibration.clone(),
                theta: None,
                messages: Vec::new(),
            })
            .collect();
        shards.iter_mut().for_each(|s| s.refresh());
        Ok(shards)
    }

    /// One model from shards given in any order: their parameters (thread count and memory
    /// budget aside), label moments, calibration and points must agree and their ranges
    /// tile a contiguous range; θ and the messages are derived again from all the trees.
    pub fn merge(shards: Vec<Self>) -> Result<Self> {
        if shards.is_empty() {
            return Err(mismatch("no shards to merge"));
        }
        check_same(&shards, "parameters", |s| RegressorParams {
            n_threads: 0,
            max_memory: None,
            ..s.params.clone()
        })?;
        check_same(&shards, "label moments", |s| (s.labels, s.labels_released))?;
        check_same(&shards, "calibrations", |s| s.calibration.clone())?;
        let first = &shards[0];
        let (params, labels, released, calibration) = (
            first.params.clone(),
            first.labels,
            first.labels_released,
            first.calibration.clone(),
        );
        let forests: Vec<Forest<TargetMoments>> = shards.into_iter().map(|s| s.forest).collect();
        let forest = Forest::merge(forests, params.n_trees)?;
        let mut model = MondrianForestRegressor {
            params,
            forest,
            labels,
            labels_released: released,
            calibration,
            theta: None,
            messages: Vec::new(),
        };
        model.refresh();
        Ok(model)
    }

    /// This shard's part of [`predict`](Self::predict), which
    /// [`combine_predictions`](Self::combine_predictions) joins. A shard whose θ is
    /// estimated by marginal likelihood refuses: that θ sums over all the trees, so merge
    /// the shards to predict.
    pub fn predict_sums<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
    ) -> Result<RegressionSums> {
        let hyper = &self.params.hyper;
        if self.is_shard()
            && hyper.theta.is_none()
            && hyper.estimate == Estimate::MarginalLikelihood
        {
            return Err(mismatch(
                "θ by marginal likelihood depends on every tree: merge the shards to predict",
            ));
        }
        let stats = self.tree_moments(x, n_features)?;
        let range = self.shard_range();
        Ok(RegressionSums {
            first_tree: range.start,
            n_shard_trees: range.len(),
            n_trees: self.params.n_trees,
            mean: stats.iter().map(|(m, _)| m.mean).collect(),
            m2: stats.iter().map(|(m, _)| m.m2).collect(),
            variance_sum: stats.iter().map(|(_, v)| *v).collect(),
        })
    }

    /// The whole forest's predictive moments from the parts of shards covering all its
    /// trees (in any order): the trees' means pooled by the parallel Welford update (Chan
    /// et al.) in tree-range order, the variances summed, as the law of total variance
    /// over equal-weight trees. With one part this is `predict` exactly; with several, it
    /// differs from the merged forest's `predict` (one Welford pass over the trees) by
    /// rounding only. Intervals follow through [`RegressionPrediction::interval`].
    pub fn combine_predictions(mut parts: Vec<RegressionSums>) -> Result<RegressionPrediction> {
        parts.sort_by_key(|p| p.first_tree);
        let Some(first) = parts.first() else {
            return Err(mismatch("no shard predictions to combine"));
        };
        let (m, len) = (first.n_trees, first.mean.len());
        if parts.iter().any(|p| {
            p.n_trees != m
                || p.mean.len() != len
                || p.m2.len() != len
                || p.variance_sum.len() != len
        }) {
            return Err(mismatch(
                "the predictions have different tree counts or rows",
            ));
        }
        cover(parts.iter().map(|p| (p.first_tree, p.n_shard_trees)), m)?;
        let mut means = vec![Moments::default(); len];
        let mut var_sum = vec![0.0; len];
        for p in &parts {
            for i in 0..len {
                let part = Moments {
                    n: p.n_shard_trees as f64,
                    mean: p.mean[i],
                    m2: p.m2[i],
                };
                means[i] = Moments::merge(means[i], part);
                var_sum[i] += p.variance_sum[i];
            }
        }
        Ok(RegressionPrediction {
            mean: means.iter().map(|s| s.mean).collect(),
            variance: means
                .iter()
                .zip(&var_sum)
                .map(|(s, v)| v / s.n + s.variance())
                .collect(),
            between_trees: means.iter().map(|s| s.variance()).collect(),
        })
    }
}

persistent_forest!(MondrianForestRegressor, "mondrian-forest-regressor");

impl ShardFiles for MondrianForestRegressor {
    const SHARD_KIND: &'static str = "mondrian-forest-regressor-shard";
    type State = RegressorState;
    fn range(&self) -> Option<TreeRange> {
        self.forest.range
    }
    fn forest_trees(state: &RegressorState) -> usize {
        state.params.n_trees
    }
    fn from_state(mut s: RegressorState, range: Option<TreeRange>) -> Result<Self> {
        s.forest.range = range;
        Self::try_from(s).map_err(|e| e.0)
    }
}
