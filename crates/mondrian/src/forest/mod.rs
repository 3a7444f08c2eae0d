//! Ensembles of Mondrian trees: seeding, online bagging and the thread pool.
//!
//! Every tree owns a generator seeded from `(seed, tree index)`, and online-bagging counts
//! come from a counter-based generator keyed by `(seed, tree index, example index)`, so a
//! forest is bit-identical whatever the number of threads (DESIGN.md principle 3).

mod classifier;
mod helpers;
mod regressor;

pub use classifier::{ClassifierParams, MondrianForestClassifier};
pub use regressor::{Calibration, MondrianForestRegressor, RegressionPrediction, RegressorParams};

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::data::{
    FeatureScaler, FeatureValue, RelevanceChoice, Rows, Scaling, RELEVANCE_CV_FOLDS,
};
use crate::error::{MondrianError, Result};
use crate::process::Feature;
use crate::tree::{MondrianTree, NodeStatistics, PauseRule, TrainingPoints, NO_NODE};

/// Most trees that take a training point with interleaved descents (more descents in
/// flight overlap more cache misses); a group is also the unit of parallel work, so
/// [`Pool::tree_group`] sizes groups to spread the trees evenly over the threads.
const TREE_GROUP: usize = 32;
// Trees of a group are named by a `u8` in the descents' work list.
const _: () = assert!(TREE_GROUP <= 256);
/// How many statistics records at the bottom of an insertion's route are prefetched.
const STATS_AHEAD: usize = 2;
/// Most new points of one call that [`grow_trees`] gives to the stream helpers
/// ([`helpers`]) rather than to the pool.
const STREAM_POINTS: usize = 4;
/// Fewest trees whose streamed points are shared with the helpers: below, the work of a
/// point is too small to split.
const STREAM_MIN_TREES: usize = 16;

/// One tree of a forest with the statistics its model hangs off the nodes and its own
/// generator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TreeUnit<S> {
    pub(crate) tree: MondrianTree,
    pub(crate) stats: S,
    pub(crate) rng: Xoshiro256PlusPlus,
}

/// `n_trees` empty trees over `d` features, tree t seeded by (seed, t).
pub(crate) fn new_trees<S>(
    n_trees: usize,
    d: usize,
    lifetime: f64,
    pause: PauseRule,
    seed: u64,
    stats: impl Fn() -> S,
) -> Vec<TreeUnit<S>> {
    (0..n_trees)
        .map(|t| TreeUnit {
            tree: MondrianTree::new(d, lifetime, pause),
            stats: stats(),
            rng: tree_rng(seed, t),
        })
        .collect()
}

/// Feature scores for [`FeatureWeights::Relevance`](crate::data::FeatureWeights): the
/// impurity each split removes, `I(node) − I(left) − I(right)` clamped at 0, summed by split
/// dimension over every split of every tree. `impurity(unit)` gives one tree's `I` indexed
/// by node (squared error for regression, n·Gini for classification).
pub(crate) fn split_relevance<S>(
    trees: &[TreeUnit<S>],
    n_features: usize,
    impurity: impl Fn(&TreeUnit<S>) -> Vec<f64>,
) -> Vec<f64> {
    let mut score = vec![0.0; n_features];
    for unit in trees {
        let Some(root) = unit.tree.root() else {
            continue;
        };
        let imp = impurity(unit);
        for j in unit.tree.subtree_preorder(root) {
            if let Some((l, r)) = unit.tree.children(j) {
                let removed = imp[j as usize] - imp[l as usize] - imp[r as usize];
                score[unit.tree.split_dimension(j)] += removed.max(0.0);
            }
        }
    }
    score
}

/// The methods every forest has around feature weights: the relevance pilot (built from
/// the forest's parameters by `$pilot`), its cross-validated power, `learn_relevance`,
/// `learn_feature_weights`, `feature_importances` and `feature_weights`. The model supplies
/// `split_scores`, `cv_params` (its parameters for the cross-validation's forests) and
/// `held_out_loss`.
macro_rules! relevance_methods {
    ($model:ident, $params:ident, $target:ty, |$p:ident| $pilot:expr) => {
        impl $model {
            /// The weights the first training call fixes on `rows` (`None`: all 1), with
            /// the cross-validated choice behind them if there was one.
            fn initial_weights<T: FeatureValue>(
                &self,
                rows: &Rows<T>,
                y: &[$target],
            ) -> Result<(Option<Vec<f64>>, Option<RelevanceChoice>)> {
                Ok(match &self.params.feature_weights {
                    FeatureWeights::Uniform => (None, None),
                    FeatureWeights::Given(w) => (Some(w.clone()), None),
                    FeatureWeights::Relevance { power } => {
                        (Some(self.relevance(rows, y, *power)?), None)
                    }
                    FeatureWeights::RelevanceCv => {
                        let (w, choice) = self.relevance_cv(rows, y)?;
                        (Some(w), Some(choice))
                    }
                })
            }

            /// A pilot forest with uniform weights grown on the rows; its
            /// [`split_scores`](Self::split_scores) give the relevance weights.
            fn pilot<T: FeatureValue>(&self, rows: &Rows<T>, y: &[$target]) -> Result<Self> {
                let $p = $params {
                    seed: super::pilot_seed(self.params.seed),
                    feature_weights: FeatureWeights::Uniform,
                    ..self.params.clone()
                };
                let mut pilot = $model::new($pilot)?;
                pilot.fit(rows.values(), rows.n_features(), y)?;
                Ok(pilot)
            }

            /// [`FeatureWeights::Relevance`](crate::FeatureWeights) at `power` (0: all 1).
            fn relevance<T: FeatureValue>(
                &self,
                rows: &Rows<T>,
                y: &[$target],
                power: f64,
            ) -> Result<Vec<f64>> {
                if power == 0.0 {
                    return Ok(vec![1.0; rows.n_features()]);
                }
                let pilot = self.pilot(rows, y)?;
                super::pilot_weights(&pilot.trees, pilot.split_scores(), rows.n_rows(), power)
            }

            /// [`FeatureWeights::RelevanceCv`](crate::FeatureWeights): the power by
            /// cross-validation, then the weights at that power on all rows.
            fn relevance_cv<T: FeatureValue>(
                &self,
                rows: &Rows<T>,
                y: &[$target],
            ) -> Result<(Vec<f64>, RelevanceChoice)> {
                let (n, d) = (rows.n_rows(), rows.n_features());
                let folds = super::cv_folds(
                    n,
                    super::pilot_seed(self.params.seed),
                    ("feature_weights", "relevance:cv"),
                )?;
                let base = self.cv_params(y);
                let mut loss = vec![0.0; RELEVANCE_CV_POWERS.len()];
                for held in &folds {
                    let (fit_x, fit_y, val_x, val_y) = super::split_rows(rows, y, held);
                    let fit_rows = Rows::new(&fit_x, d)?;
                    let pilot = self.pilot(&fit_rows, &fit_y)?;
                    let scores = pilot.split_scores();
                    for (total, &power) in loss.iter_mut().zip(&RELEVANCE_CV_POWERS) {
                        let weights = match power {
                            0.0 => FeatureWeights::Uniform,
                            _ => FeatureWeights::Given(super::pilot_weights(
                                &pilot.trees,
                                scores.clone(),
                                fit_rows.n_rows(),
                                power,
                            )?),
                        };
                        let mut forest = $model::new($params {
                            feature_weights: weights,
                            ..base.clone()
                        })?;
                        forest.fit(&fit_x, d, &fit_y)?;
                        *total += forest.held_out_loss(&val_x, d, &val_y)?;
                    }
                }
                let choice = RelevanceChoice::best_of(
                    RELEVANCE_CV_POWERS
                        .iter()
                        .zip(&loss)
                        .map(|(&p, &l)| (p, l / n as f64))
                        .collect(),
                );
                Ok((self.relevance(rows, y, choice.power)?, choice))
            }

            /// The weights [`FeatureWeights::Relevance`](crate::FeatureWeights) would learn
            /// from these rows (the pilot forest of this forest's parameters), without
            /// training this forest. A stream can learn them from a sample and pass them
            /// as [`FeatureWeights::Given`](crate::FeatureWeights).
            pub fn learn_relevance<T: FeatureValue>(
                &self,
                x: &[T],
                n_features: usize,
                y: &[$target],
                power: f64,
            ) -> Result<Vec<f64>> {
                FeatureWeights::Relevance { power }.validate(None)?;
                self.relevance(&Rows::new(x, n_features)?, y, power)
            }

            /// The weights this forest's first training call would fix on these rows, as
            /// weights to give a stream up front so that it sees the features a batch fit
            /// sees: learnt ones (`Relevance`, `RelevanceCv`) become
            /// [`FeatureWeights::Given`](crate::FeatureWeights), with the cross-validated
            /// choice if one ran; other settings come back unchanged.
            pub fn learn_feature_weights<T: FeatureValue>(
                &self,
                x: &[T],
                n_features: usize,
                y: &[$target],
            ) -> Result<(FeatureWeights, Option<RelevanceChoice>)> {
                let rows = Rows::new(x, n_features)?;
                rows.validate(None)?;
                if y.len() != rows.n_rows() {
                    return Err(MondrianError::LengthMismatch {
                        n_rows: rows.n_rows(),
                        n_labels: y.len(),
                    });
                }
                let (weights, choice) = self.initial_weights(&rows, y)?;
                Ok((
                    weights.map_or(FeatureWeights::Uniform, FeatureWeights::Given),
                    choice,
                ))
            }

            /// The cross-validated choice of [`FeatureWeights::RelevanceCv`]
            /// (crate::FeatureWeights), once trained with it.
            pub fn relevance_choice(&self) -> Option<&RelevanceChoice> {
                self.store.relevance.as_ref()
            }

            /// [`split_scores`](Self::split_scores) divided by their sum (all 0 when no
            /// split removed anything): the share of explained impurity per feature.
            pub fn feature_importances(&self) -> Vec<f64> {
                super::shares(self.split_scores())
            }

            /// The feature weights in use, once trained (all 1 unless set or learnt).
            pub fn feature_weights(&self) -> Option<&[f64]> {
                self.store.scaler.as_ref().map(|s| s.weights())
            }
        }
    };
}
pub(crate) use relevance_methods;

/// The relevance weights of a fitted pilot forest, `w_d = (score_d / max score)^power` with
/// weights below [`MIN_WEIGHT`](crate::data::MIN_WEIGHT) set to 0; all 1 when no split
/// removed anything (constant targets). An error when none of its trees could split (too
/// few points, or a single label), since its scores would then say nothing about the
/// features.
pub(crate) fn pilot_weights<S>(
    pilot: &[TreeUnit<S>],
    scores: Vec<f64>,
    n_rows: usize,
    power: f64,
) -> Result<Vec<f64>> {
    let split = pilot
        .iter()
        .any(|u| u.tree.root().is_some_and(|r| u.tree.children(r).is_some()));
    if !split {
        return Err(MondrianError::InvalidParameter {
            name: "feature_weights",
            reason: format!(
                "relevance weights are learnt from the first training call, and a pilot \
                 forest on its {n_rows} row(s) made no split; give a larger first batch \
                 (or learn the weights from a sample) or give the weights"
            ),
        });
    }
    let top = scores.iter().copied().fold(0.0f64, f64::max);
    if !(top > 0.0 && top.is_finite()) {
        return Ok(vec![1.0; scores.len()]);
    }
    Ok(scores
        .iter()
        .map(|s| (s / top).powf(power))
        .map(|w| if w < crate::data::MIN_WEIGHT { 0.0 } else { w })
        .collect())
}

/// The held-out folds of [`FeatureWeights::RelevanceCv`](crate::data::FeatureWeights):
/// a seeded permutation of the `n` rows cut into [`RELEVANCE_CV_FOLDS`] near-equal parts,
/// each in row order.
pub(crate) fn cv_folds(
    n: usize,
    seed: u64,
    (name, setting): (&'static str, &str),
) -> Result<Vec<Vec<usize>>> {
    let k = RELEVANCE_CV_FOLDS;
    if n < 2 * k {
        return Err(MondrianError::InvalidParameter {
            name,
            reason: format!(
                "{setting} needs at least {} rows in the first training call, got {n}",
                2 * k
            ),
        });
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut rng);
    Ok((0..k)
        .map(|f| {
            let mut fold = order[f * n / k..(f + 1) * n / k].to_vec();
            fold.sort_unstable();
            fold
        })
        .collect())
}

/// The rows (and targets) outside the sorted row list `held`, then those in it.
pub(crate) fn split_rows<T: FeatureValue, Y: Copy>(
    rows: &Rows<T>,
    y: &[Y],
    held: &[usize],
) -> (Vec<T>, Vec<Y>, Vec<T>, Vec<Y>) {
    let (mut fit_x, mut fit_y, mut val_x, mut val_y) = (vec![], vec![], vec![], vec![]);
    let mut next = held.iter().peekable();
    for (i, &target) in y.iter().enumerate().take(rows.n_rows()) {
        let (x, t) = if next.next_if_eq(&&i).is_some() {
            (&mut val_x, &mut val_y)
        } else {
            (&mut fit_x, &mut fit_y)
        };
        x.extend_from_slice(rows.row(i));
        t.push(target);
    }
    (fit_x, fit_y, val_x, val_y)
}

/// Scores divided by their sum; all 0 when the sum is not positive.
pub(crate) fn shares(mut scores: Vec<f64>) -> Vec<f64> {
    let total: f64 = scores.iter().sum();
    if total > 0.0 && total.is_finite() {
        scores.iter_mut().for_each(|s| *s /= total);
    } else {
        scores.iter_mut().for_each(|s| *s = 0.0);
    }
    scores
}

/// The error of a model that failed its checks while being decoded: the problem itself,
/// without the "cannot load model" that the decoder's own error adds again.
#[derive(Debug)]
pub(crate) struct DecodeError(pub(crate) MondrianError);

impl From<MondrianError> for DecodeError {
    fn from(e: MondrianError) -> Self {
        DecodeError(e)
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            MondrianError::CorruptModel(m) => f.write_str(m),
            other => other.fmt(f),
        }
    }
}

/// Checks every decoded tree against the forest: its width, its lifetime, its structure
/// (points below `n_points`) and, through `stats`, the statistics it carries.
pub(crate) fn check_decoded_trees<S>(
    trees: &[TreeUnit<S>],
    n_features: usize,
    lifetime: f64,
    n_points: usize,
    stats: impl Fn(&S, &MondrianTree) -> std::result::Result<(), String>,
) -> Result<()> {
    for unit in trees {
        let tree = &unit.tree;
        let checked = if tree.n_features() != n_features || tree.lifetime() != lifetime {
            Err("a tree does not match the forest's shape".to_string())
        } else {
            tree.check_decoded(n_points)
                .and_then(|()| stats(&unit.stats, tree))
        };
        checked.map_err(MondrianError::CorruptModel)?;
    }
    Ok(())
}

/// Size and shape of a fitted forest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ForestSummary {
    /// Number of trees.
    pub n_trees: usize,
    /// Nodes over all trees.
    pub n_nodes: usize,
    /// Leaves over all trees.
    pub n_leaves: usize,
    /// Mean over trees of the point-weighted average leaf depth (spec §7).
    pub depth_mean: f64,
    /// Standard deviation over trees of that depth.
    pub depth_std: f64,
    /// Heap bytes per node: structure, box and statistics, leaf point ids spread over nodes.
    pub bytes_per_node: f64,
    /// Heap bytes of the training points the forest keeps (paused leaves refer to them).
    pub store_bytes: usize,
    /// Heap bytes of all trees and the store.
    pub total_bytes: usize,
}

/// Size and depth statistics of `trees`, which keep `store_bytes` of training points.
pub(crate) fn summarize<S: NodeStatistics>(
    trees: &[TreeUnit<S>],
    store_bytes: usize,
) -> ForestSummary {
    let depths: Vec<f64> = trees.iter().map(|u| u.tree.weighted_depth()).collect();
    let m = depths.len().max(1) as f64;
    let mean = depths.iter().sum::<f64>() / m;
    let var = depths.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / m;
    let n_nodes: usize = trees.iter().map(|u| u.tree.n_live_nodes()).sum();
    let tree_bytes: usize = trees
        .iter()
        .map(|u| u.tree.heap_bytes() + u.tree.n_nodes() * u.stats.bytes_per_node())
        .sum();
    ForestSummary {
        n_trees: trees.len(),
        n_nodes,
        n_leaves: trees.iter().map(|u| u.tree.n_leaves()).sum(),
        depth_mean: mean,
        depth_std: var.sqrt(),
        bytes_per_node: tree_bytes as f64 / n_nodes.max(1) as f64,
        store_bytes,
        total_bytes: tree_bytes + store_bytes,
    }
}

/// The scaled training points a forest keeps (paused leaves are re-sampled from them) and
/// the frozen scaling that maps raw rows into the trees' space.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PointStore<T> {
    pub(crate) n_features: Option<usize>,
    pub(crate) scaler: Option<FeatureScaler>,
    pub(crate) features: Vec<Feature>,
    pub(crate) targets: Vec<T>,
    /// How [`FeatureWeights::RelevanceCv`](crate::data::FeatureWeights) chose the weights.
    pub(crate) relevance: Option<RelevanceChoice>,
}

impl<T: Copy> PointStore<T> {
    pub(crate) fn new() -> Self {
        PointStore {
            n_features: None,
            scaler: None,
            features: Vec::new(),
            targets: Vec::new(),
            relevance: None,
        }
    }

    /// A validated view of caller rows: the model's width once fixed, finite values.
    pub(crate) fn rows<'a, V: FeatureValue>(
        &self,
        x: &'a [V],
        n_features: usize,
    ) -> Result<Rows<'a, V>> {
        let rows = Rows::new(x, n_features)?;
        rows.validate(self.n_features)?;
        Ok(rows)
    }

    /// Fixes the width and the scaling from the first rows (nothing stored yet).
    pub(crate) fn start<V: FeatureValue>(
        &mut self,
        rows: &Rows<V>,
        scaling: &Scaling,
    ) -> Result<()> {
        self.scaler = Some(scaling.scaler_for(rows)?);
        self.n_features = Some(rows.n_features());
        Ok(())
    }

    /// Stretches the features by `weights` (before any point is stored).
    pub(crate) fn reweight(&mut self, weights: &[f64]) -> Result<()> {
        debug_assert!(self.features.is_empty());
        let scaler = self.scaler.as_ref().ok_or(MondrianError::NotFitted)?;
        self.scaler = Some(scaler.weighted(weights)?);
        Ok(())
    }

    /// Rows mapped into the trees' space.
    pub(crate) fn scale<V: FeatureValue>(&self, rows: &Rows<V>) -> Result<Vec<Feature>> {
        let scaler = self.scaler.as_ref().ok_or(MondrianError::NotFitted)?;
        let mut out = Vec::new();
        scaler.transform_into(rows, &mut out)?;
        Ok(out)
    }

    /// Appends already scaled rows and their targets.
    pub(crate) fn push(&mut self, scaled: Vec<Feature>, targets: impl IntoIterator<Item = T>) {
        self.features.extend(scaled);
        self.targets.extend(targets);
    }

    pub(crate) fn data(&self) -> TrainingPoints<'_, T> {
        TrainingPoints {
            features: &self.features,
            n_features: self.n_features.unwrap_or(0),
            targets: &self.targets,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.targets.len()
    }

    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of_val(self.features.as_slice())
            + std::mem::size_of_val(self.targets.as_slice())
    }

    /// Shape checks after loading a model.
    pub(crate) fn check(&self) -> Result<()> {
        let d = self.n_features.unwrap_or(0);
        let bad = |m: &str| Err(MondrianError::CorruptModel(m.to_string()));
        if self.n_features.is_some() != self.scaler.is_some() {
            return bad("scaler and feature count disagree");
        }
        if self
            .scaler
            .as_ref()
            .is_some_and(|s| s.n_features() != d || !s.is_consistent())
            || Some(self.features.len()) != self.targets.len().checked_mul(d)
        {
            return bad("stored points do not match the feature count");
        }
        if self.features.iter().any(|v| !v.is_finite()) {
            return bad("a stored point is not finite");
        }
        if self.relevance.as_ref().is_some_and(|c| !c.is_valid()) {
            return bad("the relevance choice is not valid");
        }
        Ok(())
    }
}

/// Mini-batches of at least this many points, and at least as many as the trees already
/// hold, extend each tree as one set ([`MondrianTree::extend_many`]); the others take the
/// interleaved per-point road, which is faster where a batch's points part ways high in
/// the tree (`experiments/benchmarks.md`, "Mini-batches as sets").
const SET_EXTENSION_MIN: usize = 2;

/// Trains every tree, in parallel, on the stored points from `start` on: an empty tree
/// is batch-sampled on them ([P] Alg. 1), any other is extended by them as one set
/// ([`MondrianTree::extend_many`], for a large batch) or point by point in order (Alg. 3);
/// all give the same distribution (spec §2.6). With bagging, point `i` counts
/// `poisson_weight(seed, tree, i)` times in either road.
pub(crate) fn grow_trees<S>(
    trees: &mut [TreeUnit<S>],
    data: &TrainingPoints<S::Target>,
    start: usize,
    seed: u64,
    bagging: bool,
    pool: &Pool,
) where
    S: NodeStatistics + Send,
    S::Target: Sync,
{
    let end = data.targets.len();
    let weight = move |t: usize, i: usize| {
        if bagging {
            poisson_weight(seed, t, i as u64)
        } else {
            1
        }
    };
    // The batch as tree `t` sees it: each point repeated by its weight.
    let multiset = move |t: usize| -> Vec<u32> {
        (start..end)
            .flat_map(|i| std::iter::repeat_n(i as u32, weight(t, i) as usize))
            .collect()
    };
    // Trees go in chunks; within a chunk the descents of each point interleave so that
    // the trees' cache misses overlap (a descent waits on each node it loads).
    let group = pool.tree_group(trees.len());
    let work = |(c, chunk): (usize, &mut [TreeUnit<S>])| {
        let first_tree = c * group;
        if end - start >= SET_EXTENSION_MIN.max(start) {
            // A mini-batch at least as large as what the trees hold extends each tree as
            // one set: the top of the tree is visited once per batch instead of once per
            // point (same law, spec §2.6). Smaller batches spread over distinct deep paths,
            // where the per-point road below, with its interleaved descents, is faster.
            for (t, unit) in chunk.iter_mut().enumerate() {
                let points = multiset(first_tree + t);
                unit.tree
                    .extend_many(points, data, &mut unit.stats, &mut unit.rng);
            }
            return;
        }
        // An empty tree is batch-sampled on the whole batch and then sits it out.
        let mut sampled = [false; TREE_GROUP];
        for (t, unit) in chunk.iter_mut().enumerate() {
            if unit.tree.root().is_none() {
                let points = multiset(first_tree + t);
                unit.tree.fit(points, data, &mut unit.stats, &mut unit.rng);
                sampled[t] = true;
            }
        }
        let mut weights = [0u32; TREE_GROUP];
        // The trees whose descent is still going, with the node each stands at; a tree
        // that reaches its leaf leaves the list, so later rounds visit only trees with work.
        let mut live = [(0u8, NO_NODE); TREE_GROUP];
        for i in start..end {
            let x = data.row(i as u32);
            let mut n_live = 0;
            for (t, unit) in chunk.iter_mut().enumerate() {
                weights[t] = if sampled[t] {
                    0
                } else {
                    weight(first_tree + t, i)
                };
                if weights[t] > 0 {
                    let root = unit.tree.route_begin();
                    if root != NO_NODE {
                        live[n_live] = (t as u8, root);
                        n_live += 1;
                    }
                }
            }
            while n_live > 0 {
                let mut k = 0;
                while k < n_live {
                    let (t, node) = live[k];
                    let unit = &mut chunk[t as usize];
                    let next = unit.tree.route_advance(node, x, data.features);
                    if next == NO_NODE {
                        // The statistics the insertion updates: the leaf's and those of
                        // the ancestors a new label reaches.
                        for j in unit.tree.route_tail(STATS_AHEAD) {
                            unit.stats.prefetch(j);
                        }
                        n_live -= 1;
                        live[k] = live[n_live];
                    } else {
                        live[k].1 = next;
                        k += 1;
                    }
                }
            }
            for (unit, &w) in chunk.iter_mut().zip(weights.iter()) {
                if w > 0 {
                    unit.tree
                        .extend_routed(i as u32, w, data, &mut unit.stats, &mut unit.rng);
                }
            }
        }
    };
    // A point (or a few) of a stream goes to the helpers if there are any and enough
    // trees to share; without them it stays on this thread, as does work of one group.
    let streamed = end - start <= STREAM_POINTS;
    let helpers = match streamed && trees.len() >= STREAM_MIN_TREES {
        true => pool.helpers(),
        false => None,
    };
    if let Some(helpers) = helpers {
        // The caller and each helper take an equal share of whole groups.
        let share = trees.len().div_ceil(group).div_ceil(helpers.shares()) * group;
        let work = &work;
        let mut shares: Vec<_> = trees
            .chunks_mut(share)
            .enumerate()
            .map(|(p, part)| {
                move || {
                    for (c, chunk) in part.chunks_mut(group).enumerate() {
                        work((p * share / group + c, chunk));
                    }
                }
            })
            .collect();
        let mut jobs: Vec<&mut helpers::Job<'_>> = shares
            .iter_mut()
            .map(|share| share as &mut helpers::Job<'_>)
            .collect();
        helpers.run(&mut jobs);
    } else if pool.is_serial() || streamed || trees.len() <= TREE_GROUP {
        trees.chunks_mut(group).enumerate().for_each(work);
    } else {
        pool.install(|| trees.par_chunks_mut(group).enumerate().for_each(work));
    }
}

/// Seed of the pilot forest behind [`FeatureWeights::Relevance`](crate::data::FeatureWeights),
/// kept apart from the forest's own trees.
pub(crate) fn pilot_seed(seed: u64) -> u64 {
    mix64(seed ^ 0x5049_4c4f_5421_0001)
}

/// SplitMix64 finaliser: a bijective mix of 64 bits.
#[inline]
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The generator of tree `index` in a forest with master seed `seed`.
pub fn tree_rng(seed: u64, index: usize) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(mix64(seed ^ mix64(index as u64 + 0x9e37_79b9_7f4a_7c15)))
}

/// Online-bagging multiplicity `k ~ Poisson(1)` of example `example` in tree `tree`
/// (spec `bayesian-trees.md` §6.2), drawn by inversion from a uniform that depends only on
/// `(seed, tree, example)`.
pub fn poisson_weight(seed: u64, tree: usize, example: u64) -> u32 {
    let h = mix64(
        mix64(seed ^ 0x5851_f42d_4c95_7f2d)
            ^ mix64(tree as u64)
            ^ example.wrapping_mul(0xa076_1d64_78bd_642f),
    );
    let u = (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
    // P(k) = e^{-1} / k!; walk the CDF.
    let mut p = (-1.0f64).exp();
    let mut cdf = p;
    let mut k = 0u32;
    while u >= cdf && k < 30 {
        k += 1;
        p /= f64::from(k);
        cdf += p;
    }
    k
}

/// A lazily built rayon pool with a fixed number of threads (0 = all cores).
#[derive(Default)]
pub(crate) struct Pool {
    threads: usize,
    /// The number of workers, once known (see `workers`).
    workers: std::sync::OnceLock<usize>,
    pool: std::sync::OnceLock<Option<rayon::ThreadPool>>,
    /// Threads beside the caller for a stream's points, started on first use.
    helpers: std::sync::OnceLock<Option<helpers::Helpers>>,
}

impl Pool {
    pub(crate) fn new(threads: usize) -> Self {
        Pool {
            threads,
            workers: std::sync::OnceLock::new(),
            pool: std::sync::OnceLock::new(),
            helpers: std::sync::OnceLock::new(),
        }
    }

    /// One thread: work runs on the calling thread, with no hand-off to a pool (a
    /// point-by-point stream would otherwise pay a wake-up per point).
    pub(crate) fn is_serial(&self) -> bool {
        self.threads == 1
    }

    pub(crate) fn install<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        let pool = self.pool.get_or_init(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(self.threads)
                .build()
                .ok()
        });
        match pool {
            Some(pool) => pool.install(work),
            None => work(),
        }
    }
}

/// Most bytes of per-row prediction state (outputs and scratch) one block of rows keeps;
/// see [`Pool::prediction_block_rows`].
const PREDICTION_BLOCK_BYTES: usize = 4 << 20;
/// Fewest rows a prediction block has (unless the input has fewer): smaller blocks would
/// pay a hand-off to the pool for little work.
const MIN_PREDICTION_BLOCK: usize = 256;

impl Pool {
    /// Trees per group of [`grow_trees`]: at most [`TREE_GROUP`], in a number of groups
    /// that is a multiple of the workers (100 trees on 2 threads: 4 groups of 25, 50 trees
    /// each, where groups of 32 would give 64 against 36).
    fn tree_group(&self, n_trees: usize) -> usize {
        let workers = if self.is_serial() { 1 } else { self.workers() };
        let groups = workers * n_trees.div_ceil(workers * TREE_GROUP);
        n_trees.div_ceil(groups.max(1)).max(1)
    }

    /// One helper thread fewer than the workers, beside the caller (none for one worker).
    fn helpers(&self) -> Option<&helpers::Helpers> {
        self.helpers
            .get_or_init(|| match self.workers() {
                0 | 1 => None,
                n => helpers::Helpers::start(n - 1),
            })
            .as_ref()
    }

    /// Threads that will run parallel work (all cores for 0).
    fn workers(&self) -> usize {
        // Asked once: the standard library reads the cgroup files on every call (tens of
        // microseconds, as much as a streamed point's whole work on a small forest).
        *self.workers.get_or_init(|| match self.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        })
    }

    /// Rows per block for a prediction that walks every tree over a block of rows
    /// (tree-major), with `row_bytes` of outputs and scratch per row. One block per worker
    /// is best: each tree's nodes, boxes and statistics then come from memory once per
    /// worker instead of once per block (letter, one thread: 5 blocks of 1024 rows took
    /// 1.4–1.8× as long as one of 5000). Blocks stop growing once their per-row state
    /// reaches [`PREDICTION_BLOCK_BYTES`], so that it stays in cache while the trees pass.
    pub(crate) fn prediction_block_rows(&self, n_rows: usize, row_bytes: usize) -> usize {
        let per_worker = n_rows.div_ceil(self.workers());
        let cap = (PREDICTION_BLOCK_BYTES / row_bytes.max(1)).max(MIN_PREDICTION_BLOCK);
        per_worker.clamp(MIN_PREDICTION_BLOCK, cap)
    }

    /// Runs `work` on matching blocks of `out` (`out_block` items each) and `input`
    /// (`in_block` each), blocks in parallel; a single block runs on the calling thread,
    /// which spares a one-row prediction the hand-off to the pool.
    pub(crate) fn for_each_block<A: Send, B: Sync>(
        &self,
        out: &mut [A],
        out_block: usize,
        input: &[B],
        in_block: usize,
        work: impl Fn(&mut [A], &[B]) + Sync + Send,
    ) {
        if out.len() <= out_block {
            work(out, input);
        } else if self.is_serial() {
            out.chunks_mut(out_block)
                .zip(input.chunks(in_block))
                .for_each(|(o, i)| work(o, i));
        } else {
            self.install(|| {
                out.par_chunks_mut(out_block)
                    .zip(input.par_chunks(in_block))
                    .for_each(|(o, i)| work(o, i))
            });
        }
    }
}

impl Clone for Pool {
    fn clone(&self) -> Self {
        Pool::new(self.threads)
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pool({} threads)", self.threads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_weights_follow_poisson_one() {
        // Chi-square goodness of fit for k = 0..4 and ≥ 5 over 200k draws, α = 1e-3
        // (critical value of χ²₅ is 20.52).
        let n = 200_000u64;
        let mut counts = [0f64; 6];
        for e in 0..n {
            let k = poisson_weight(7, 3, e) as usize;
            counts[k.min(5)] += 1.0;
        }
        let e1 = (-1.0f64).exp();
        let mut probs = [e1, e1, e1 / 2.0, e1 / 6.0, e1 / 24.0, 0.0];
        probs[5] = 1.0 - probs[..5].iter().sum::<f64>();
        let chi2: f64 = counts
            .iter()
            .zip(&probs)
            .map(|(&o, &p)| (o - p * n as f64).powi(2) / (p * n as f64))
            .sum();
        assert!(chi2 < 20.52, "chi2 = {chi2}, counts {counts:?}");
    }

    const RCV: (&str, &str) = ("feature_weights", "relevance:cv");

    #[test]
    fn cv_folds_partition_the_rows_in_near_equal_parts() {
        let folds = cv_folds(23, 9, RCV).unwrap();
        let mut all: Vec<usize> = folds.concat();
        all.sort_unstable();
        assert_eq!(all, (0..23).collect::<Vec<_>>());
        assert!(folds.iter().all(|f| (4..=5).contains(&f.len())));
        assert!(folds.iter().all(|f| f.windows(2).all(|w| w[0] < w[1])));
        assert_ne!(folds, cv_folds(23, 10, RCV).unwrap());
        assert!(cv_folds(9, 1, RCV).is_err());
    }

    #[test]
    fn cv_losses_equal_a_recomputation_from_public_calls() {
        // Each reported loss is Σ over folds of the held-out −log p of a forest with this
        // forest's parameters and the weights `learn_relevance` gives on the other folds
        // (uniform for power 0), divided by the row count. Rebuilt here from public calls
        // with the same folds.
        use crate::data::{FeatureWeights, RELEVANCE_CV_POWERS};
        use crate::stats::gaussian::PredictionMode;
        use crate::{MondrianForestRegressor, RegressorParams};
        let n = 60;
        let x: Vec<f64> = (0..n * 3)
            .map(|i| ((i * 37 % 101) as f64) / 101.0)
            .collect();
        let y: Vec<f64> = x
            .chunks(3)
            .map(|r| (5.0 * r[0]).sin() + 0.1 * r[2])
            .collect();
        let params = RegressorParams {
            n_trees: 6,
            min_samples_split: 3,
            mode: PredictionMode::Fast,
            seed: 11,
            feature_weights: FeatureWeights::RelevanceCv,
            ..Default::default()
        };
        let mut cv = MondrianForestRegressor::new(params.clone()).unwrap();
        cv.fit(&x, 3, &y).unwrap();
        let choice = cv.relevance_choice().unwrap();
        let folds = cv_folds(n, pilot_seed(params.seed), RCV).unwrap();
        for (&power, &(p, loss)) in RELEVANCE_CV_POWERS.iter().zip(&choice.losses) {
            assert_eq!(power, p);
            let mut total = 0.0;
            for held in &folds {
                let part = |keep: bool| -> (Vec<f64>, Vec<f64>) {
                    let rows: Vec<usize> = (0..n).filter(|i| held.contains(i) != keep).collect();
                    let xs = rows.iter().flat_map(|&i| x[3 * i..3 * i + 3].to_vec());
                    (xs.collect(), rows.iter().map(|&i| y[i]).collect())
                };
                let ((fx, fy), (vx, vy)) = (part(true), part(false));
                let probe = MondrianForestRegressor::new(params.clone()).unwrap();
                let weights = match power {
                    0.0 => FeatureWeights::Uniform,
                    _ => FeatureWeights::Given(probe.learn_relevance(&fx, 3, &fy, power).unwrap()),
                };
                let mut f = MondrianForestRegressor::new(RegressorParams {
                    feature_weights: weights,
                    ..params.clone()
                })
                .unwrap();
                f.fit(&fx, 3, &fy).unwrap();
                total -= f.log_density(&vx, 3, &vy).unwrap().iter().sum::<f64>();
            }
            let expected = total / n as f64;
            assert!(
                (loss - expected).abs() <= 1e-12 * expected.abs().max(1.0),
                "{power}: {loss} vs {expected}"
            );
        }
    }

    #[test]
    fn cv_pits_equal_a_recomputation_from_public_calls() {
        // Calibration::Cv keeps, sorted, each row's predictive CDF value under a forest of
        // the same parameters (and the feature weights the call fixed) fitted on the other
        // folds. Rebuilt here from public calls with the same folds, for learnt weights.
        use crate::data::FeatureWeights;
        use crate::stats::gaussian::PredictionMode;
        use crate::{Calibration, MondrianForestRegressor, RegressorParams};
        let n = 50;
        let x: Vec<f64> = (0..n * 2).map(|i| ((i * 41 % 97) as f64) / 97.0).collect();
        let y: Vec<f64> = x.chunks(2).map(|r| (4.0 * r[0]).cos() + r[1]).collect();
        let params = RegressorParams {
            n_trees: 5,
            min_samples_split: 3,
            mode: PredictionMode::Fast,
            seed: 5,
            feature_weights: FeatureWeights::RELEVANCE,
            calibration: Calibration::Cv,
            ..Default::default()
        };
        let mut cal = MondrianForestRegressor::new(params.clone()).unwrap();
        cal.fit(&x, 2, &y).unwrap();
        let weights = FeatureWeights::Given(cal.feature_weights().unwrap().to_vec());
        let fold_params = RegressorParams {
            feature_weights: weights,
            calibration: Calibration::None,
            ..params.clone()
        };
        let mut expected = Vec::new();
        for held in cv_folds(n, pilot_seed(params.seed), RCV).unwrap() {
            let part = |keep: bool| -> (Vec<f64>, Vec<f64>) {
                let rows: Vec<usize> = (0..n).filter(|i| held.contains(i) != keep).collect();
                let xs = rows.iter().flat_map(|&i| x[2 * i..2 * i + 2].to_vec());
                (xs.collect(), rows.iter().map(|&i| y[i]).collect())
            };
            let ((fx, fy), (vx, vy)) = (part(true), part(false));
            let mut f = MondrianForestRegressor::new(fold_params.clone()).unwrap();
            f.fit(&fx, 2, &fy).unwrap();
            expected.extend(f.cdf(&vx, 2, &vy).unwrap());
        }
        expected.sort_by(f64::total_cmp);
        assert_eq!(cal.calibration().unwrap(), &expected[..]);
        // The trees are those of the same forest without calibration.
        let mut plain = MondrianForestRegressor::new(RegressorParams {
            calibration: Calibration::None,
            ..params
        })
        .unwrap();
        plain.fit(&x, 2, &y).unwrap();
        assert_eq!(plain.predict(&x, 2).unwrap(), cal.predict(&x, 2).unwrap());
        assert!(plain.calibration().is_none());
    }
}
