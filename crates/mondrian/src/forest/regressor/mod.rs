//! `MondrianForestRegressor`: the Mondrian forest regression of spec `mf-regression.md`
//! (thesis ch. 6), on the same engine as the classifier with Gaussian node statistics.

mod calibration;
mod params;
mod predict;
mod shard;

pub use params::{Calibration, RegressorParams, CV_MAX_TREES};
pub use predict::RegressionPrediction;
pub use shard::RegressionSums;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::data::{FeatureValue, FeatureWeights, RelevanceChoice, Rows, MAX_TARGET, MAX_THREADS};
use crate::error::{MondrianError, Result};
use crate::forest::weights::drop_zero_weights;
use crate::forest::{
    check_sample_weights, initial_weights, learn_feature_weights, learn_relevance, made_a_split,
    pilot_seed, shares, split_relevance, Forest, ForestSummary, Growth, HeldOut, Initial,
    PointStore, Pool, Progress, Weighed,
};
use crate::model::{Checked, Fit, Forget, Model, Params, PartialFit, Predict, WeightedFit};
use crate::stats::gaussian::{
    estimate_theta, Estimate, GaussianModel, HyperSettings, Moments, PredictionMode, TargetMoments,
    Theta, Upward,
};
use crate::tree::{MondrianTree, PauseRule, TrainingPoints};

/// An online Mondrian forest for regression with calibrated predictive uncertainty
/// (Lakshminarayanan, Roy & Teh 2016; spec `mf-regression.md`).
///
/// Trees are Mondrian trees with λ = ∞ whose blocks with fewer than `min_samples_split`
/// points are leaves (paused, so online training has the batch distribution). Each tree
/// carries a Gaussian hierarchy over node means; prediction at any x mixes the posterior
/// at the leaf with branch-off components, so the variance grows away from the data and
/// far from it the prediction returns to the prior N(ȳ, s²).
///
/// ```
/// use mondrian::{MondrianForestRegressor, RegressorParams};
/// let x: Vec<f64> = (0..40).map(|i| i as f64 / 40.0).collect();
/// let y: Vec<f64> = x.iter().map(|v| (6.0 * v).sin()).collect();
/// let mut forest = MondrianForestRegressor::new(RegressorParams::default())?;
/// forest.fit(&x, 1, &y)?;
/// let p = forest.predict(&[0.5, 25.0], 1)?;
/// assert!(p.variance[1] > p.variance[0]); // far from the data: less sure
/// # Ok::<(), mondrian::MondrianError>(())
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "RegressorState")]
pub struct MondrianForestRegressor {
    params: RegressorParams,
    /// The trees, the scaled training points with their targets, the pool.
    forest: Forest<TargetMoments>,
    /// Moments of the labels of the points held, each counted by its sample weight (once,
    /// whatever the bagging draws).
    labels: Moments,
    /// Labels taken out of `labels` by the inverse update since it was last summed afresh
    /// (saved, so that a loaded model sums afresh when the one saved would have).
    labels_released: u64,
    /// Sorted PITs of held-out rows that recalibrate the intervals ([`Calibration`]).
    calibration: Option<Vec<f64>>,
    /// θ from the heuristic, refreshed after each training call.
    #[serde(skip)]
    theta: Option<Theta>,
    /// Exact mode: each tree's upward messages under θ.
    #[serde(skip)]
    messages: Vec<Vec<Upward>>,
}

/// The stored fields of a regressor; they are checked and θ and the messages derived again
/// on reading, so a regressor inside any serde structure comes back safe and ready to
/// predict.
#[derive(Deserialize)]
pub(crate) struct RegressorState {
    params: RegressorParams,
    forest: Forest<TargetMoments>,
    labels: Moments,
    labels_released: u64,
    calibration: Option<Vec<f64>>,
}

impl TryFrom<RegressorState> for MondrianForestRegressor {
    type Error = super::DecodeError;

    fn try_from(s: RegressorState) -> std::result::Result<Self, Self::Error> {
        let mut forest = s.forest;
        forest.pool = Pool::new(s.params.n_threads);
        let mut model = MondrianForestRegressor {
            params: s.params,
            forest,
            labels: s.labels,
            labels_released: s.labels_released,
            calibration: s.calibration,
            theta: None,
            messages: Vec::new(),
        };
        model.check_decoded()?;
        model.refresh();
        Ok(model)
    }
}

impl MondrianForestRegressor {
    /// An untrained forest.
    pub fn new(params: RegressorParams) -> Result<Self> {
        Ok(Self::with_params(params.check()?))
    }

    /// The hyper-parameters.
    pub fn params(&self) -> &RegressorParams {
        &self.params
    }
    /// Number of features, once trained.
    pub fn n_features(&self) -> Option<usize> {
        self.forest.store.n_features
    }
    /// Number of training rows given so far (since the last `fit`), kept or not.
    pub fn n_samples_seen(&self) -> usize {
        self.forest.store.seen() as usize
    }
    /// Number of training points the forest holds: those seen, less those forgotten or
    /// out of the window.
    pub fn n_points(&self) -> usize {
        self.forest.store.len()
    }
    /// The ids of the points held, oldest first (the ids [`forget`](Self::forget) takes).
    pub fn point_ids(&self) -> Vec<u64> {
        self.forest.store.live_ids().collect()
    }

    /// Removes the training points with these ids from every tree; the model is then as
    /// if it had never seen them, as for
    /// [`MondrianForestClassifier::forget`](crate::MondrianForestClassifier::forget). θ and
    /// the messages are derived again from the points that remain. An id the model does
    /// not hold is an error, and the model is then unchanged.
    pub fn forget(&mut self, ids: &[u64]) -> Result<()> {
        self.forest.check_trainable()?;
        let gone = self.forest.forget(ids, self.growth())?;
        self.release_labels(&gone);
        self.refresh();
        Ok(())
    }

    /// How the forest takes points.
    fn growth(&self) -> Growth {
        Growth {
            seed: self.params.seed,
            bagging: self.params.bagging,
            window: self.params.window,
            time_ordered: false,
        }
    }

    /// Takes the targets (with their weights) of points that left out of the label
    /// moments: by the inverse update, summed afresh from the points held once as many have
    /// left as are held, so that an endless window cannot drift (amortised O(1) per point).
    fn release_labels(&mut self, gone: &[(f64, f64)]) {
        for &(y, w) in gone {
            self.labels.remove(y, w);
        }
        self.labels_released += gone.len() as u64;
        if self.labels_released > self.forest.store.len() as u64 {
            self.labels = Moments::default();
            for (y, w) in self.forest.store.live_weighted_targets() {
                self.labels.push(y, w);
            }
            self.labels_released = 0;
        }
    }
    /// θ in use (after training).
    pub fn theta(&self) -> Option<Theta> {
        self.theta
    }
    /// Tree `index` with its label moments.
    pub fn tree(&self, index: usize) -> Option<(&MondrianTree, &TargetMoments)> {
        self.forest.trees.get(index).map(|u| (&u.tree, &u.stats))
    }
    /// The scaled training points the trees index into.
    pub fn training_points(&self) -> TrainingPoints<'_, f64> {
        self.forest.store.data()
    }
    /// Changes the worker thread count (0 = all cores); the model is unaffected. Counts
    /// above [`MAX_THREADS`] are lowered to it, the most a saved model accepts.
    pub fn set_n_threads(&mut self, n_threads: usize) {
        let n_threads = n_threads.min(MAX_THREADS);
        self.params.n_threads = n_threads;
        self.forest.pool = Pool::new(n_threads);
    }
    /// Switches between exact and fast prediction; the trees do not depend on it.
    pub fn set_mode(&mut self, mode: PredictionMode) {
        self.params.mode = mode;
        self.refresh();
    }

    /// [`check_targets`](Self::check_targets) for training: also refuses targets whose
    /// squares would overflow the Gaussian statistics (|y| > [`MAX_TARGET`]).
    fn check_training_targets(y: &[f64], n_rows: usize) -> Result<()> {
        Self::check_targets(y, n_rows)?;
        match y.iter().position(|v| v.abs() > MAX_TARGET) {
            Some(row) => Err(MondrianError::TargetOverflow {
                row,
                value: y[row],
                max: MAX_TARGET,
            }),
            None => Ok(()),
        }
    }

    fn check_targets(y: &[f64], n_rows: usize) -> Result<()> {
        if y.len() != n_rows {
            return Err(MondrianError::LengthMismatch {
                n_rows,
                n_labels: y.len(),
            });
        }
        match y.iter().position(|v| !v.is_finite()) {
            Some(row) => Err(MondrianError::NonFiniteTarget { row, value: y[row] }),
            None => Ok(()),
        }
    }

    /// Batch training (Alg. 6.1–6.2): discards previous state, fixes the scaling from `x`
    /// (unless ranges were given), samples every tree and computes θ from `y` (§2.5).
    pub fn fit<T: FeatureValue>(&mut self, x: &[T], n_features: usize, y: &[f64]) -> Result<()> {
        self.train(x, n_features, y, true, None)
    }

    /// [`fit`](Self::fit) with a sample weight per row, as for the classifier's
    /// [`fit_weighted`](crate::MondrianForestClassifier::fit_weighted): integer weight k
    /// counts as k copies of the row (in the trees and in the target moments behind θ),
    /// weight 0 as no row. Relevance weights and CV calibration are computed with the
    /// weights (folds keep a row's copies together; a held-out row's PIT counts as many
    /// times as its weight, rounded as in the trees).
    pub fn fit_weighted<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[f64],
        sample_weight: &[f64],
    ) -> Result<()> {
        self.train(x, n_features, y, true, Some(sample_weight))
    }

    /// [`partial_fit`](Self::partial_fit) with a sample weight per row.
    pub fn partial_fit_weighted<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[f64],
        sample_weight: &[f64],
    ) -> Result<()> {
        self.train(x, n_features, y, false, Some(sample_weight))
    }

    /// Online training (Alg. 6.3 with pausing, §1.6) on one point or a mini-batch (a large
    /// batch goes in as one set, a smaller one in row order; the law is the same, see
    /// [`MondrianForestClassifier::partial_fit`](crate::MondrianForestClassifier::partial_fit)).
    /// The first call fixes the width and, with [`Scaling::FirstBatch`](crate::Scaling::FirstBatch), the scaling.
    /// θ is re-estimated from all labels seen after every call, so in exact mode each call
    /// also refreshes every node's messages (O(nodes)); stream point by point with
    /// [`PredictionMode::Fast`], whose cost per point is O(depth).
    pub fn partial_fit<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[f64],
    ) -> Result<()> {
        self.train(x, n_features, y, false, None)
    }

    /// Every check and the scaling run before the model changes, so a refused input leaves
    /// it untouched.
    fn train<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[f64],
        fresh: bool,
        weights: Option<&[f64]>,
    ) -> Result<()> {
        if !fresh {
            self.forest.check_trainable()?;
        }
        let starting = fresh || self.forest.store.n_features.is_none();
        let empty = PointStore::new();
        let rows = if starting { &empty } else { &self.forest.store }.rows(x, n_features)?;
        Self::check_training_targets(y, rows.n_rows())?;
        if let Some(w) = weights {
            check_sample_weights(w, rows.n_rows())?;
        }
        if rows.n_rows() == 0 {
            return match fresh {
                true => Err(MondrianError::EmptyData("fit needs at least one row")),
                false => Ok(()),
            };
        }
        let shape = crate::memory::ForestShape {
            // A shard grows only its own trees.
            n_trees: self.forest.tree_range(self.params.n_trees).len(),
            n_points: rows.n_rows(),
            n_features,
            stats_bytes_per_node: std::mem::size_of::<Moments>(),
            min_samples_split: self.params.min_samples_split,
        };
        let held = if starting { 0 } else { self.forest.store.len() };
        super::check_memory(held, shape, self.params.window, self.params.max_memory)?;
        // What the first call fixes comes from the rows of positive weight.
        let kept = match starting {
            true => drop_zero_weights(&rows, y, weights),
            false => None,
        };
        let (first_rows, first_y, first_w) = match &kept {
            Some((x, y, w)) => (Rows::new(x, n_features)?, &y[..], Some(&w[..])),
            None => (rows, y, weights),
        };
        if starting && first_rows.n_rows() == 0 {
            return Err(MondrianError::EmptyData("every sample weight is 0"));
        }
        let (new_store, pits) = match starting {
            true => {
                let (store, pits) = self.start_store(&first_rows, first_y, first_w)?;
                (Some(store), pits)
            }
            false => (None, None),
        };
        let scaled = new_store
            .as_ref()
            .unwrap_or(&self.forest.store)
            .scale(&rows)?;
        if let Some(store) = new_store {
            let pool = std::mem::take(&mut self.forest.pool);
            let progress = self.forest.progress.take();
            let range = self.forest.range;
            self.forest = Forest::new(self.params.n_threads);
            self.forest.range = range;
            self.forest.pool = pool;
            self.forest.progress = progress;
            self.forest.store = store;
            self.labels = Moments::default();
            self.labels_released = 0;
            self.calibration = pits;
            self.init_trees();
        }
        let learned = self.forest.learn(&scaled, y, weights, self.growth());
        for &i in &learned.kept {
            self.labels.push(y[i], weights.map_or(1.0, |w| w[i]));
        }
        self.release_labels(&learned.gone);
        self.refresh();
        Ok(())
    }

    /// A store whose scaling and feature weights the first rows fix, and the calibration
    /// PITs they give.
    fn start_store<T: FeatureValue>(
        &self,
        rows: &Rows<T>,
        y: &[f64],
        sample: Option<&[f64]>,
    ) -> Result<(PointStore<f64>, Option<Vec<f64>>)> {
        let mut store = PointStore::new();
        store.start(rows, &self.params.scaling)?;
        let initial = self.first_call(rows, y, sample)?;
        if let Some(w) = &initial.weights {
            store.reweight(w)?;
        }
        store.relevance = initial.choice;
        Ok((store, initial.pits))
    }

    /// What the first training call fixes besides the scaling: the feature weights (and the
    /// cross-validated choice behind them) and, with [`Calibration::Cv`], the PITs: those of
    /// the relevance power's cross-validation if it ran, else those of forests with the
    /// weights this call fixes (not learnt afresh on each fold).
    fn first_call<T: FeatureValue>(
        &self,
        rows: &Rows<T>,
        y: &[f64],
        sample: Option<&[f64]>,
    ) -> Result<Initial> {
        let mut initial = initial_weights(self, rows, y, sample)?;
        if initial.pits.is_none() && self.params.calibration.applies_to(rows.n_rows()) {
            let weights = initial
                .weights
                .clone()
                .map_or(FeatureWeights::Uniform, FeatureWeights::Given);
            initial.pits = Some(self.cv_pits(rows, y, sample, weights)?);
        }
        Ok(initial)
    }

    /// What this forest's first training call would fix on these rows besides the scaling,
    /// without training it: the feature weights (learnt ones as [`FeatureWeights::Given`]),
    /// the cross-validated choice of their power if one ran, and the calibration PITs if
    /// the calibration asks for them. A stream can start from them (the weights as
    /// parameters, the PITs through [`set_calibration`](Self::set_calibration)) and have
    /// the weights and intervals a batch fit of these rows would have.
    pub fn learn_first_call<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[f64],
    ) -> Result<(FeatureWeights, Option<RelevanceChoice>, Option<Vec<f64>>)> {
        let rows = Rows::new(x, n_features)?;
        rows.validate(None)?;
        Self::check_training_targets(y, rows.n_rows())?;
        let initial = self.first_call(&rows, y, None)?;
        let weights = initial
            .weights
            .map_or(FeatureWeights::Uniform, FeatureWeights::Given);
        Ok((weights, initial.choice, initial.pits))
    }

    /// Squared error of the training targets that the forest's splits remove, summed per
    /// feature over every split of every tree (`m2(node) − m2(left) − m2(right)`); empty
    /// before training. The splits ignore the targets, so a feature scores by what random
    /// cuts along it explain (and, under feature weights, by how often it is cut).
    pub fn split_scores(&self) -> Vec<f64> {
        split_relevance(
            &self.forest.trees,
            self.forest.store.n_features.unwrap_or(0),
            |u| {
                (0..u.tree.n_nodes() as u32)
                    .map(|j| u.stats.get(j).m2)
                    .collect()
            },
        )
    }

    /// When blocks pause: below `min_samples_split` points (§1.6).
    fn pause_rule(&self) -> PauseRule {
        PauseRule {
            pause_on_pure: false,
            min_samples_split: self.params.min_samples_split,
        }
    }

    fn init_trees(&mut self) {
        self.forest.plant(
            self.params.n_trees,
            f64::INFINITY,
            self.pause_rule(),
            self.params.seed,
            TargetMoments::new,
        );
    }

    /// Grows `n_more` trees on the points the forest holds and adds them (warm start), as
    /// the classifier's [`add_trees`](crate::MondrianForestClassifier::add_trees); θ and
    /// the messages are then derived again. A calibration is kept as it was.
    /// A shard refuses (its new trees would take the indices of the next shard's).
    pub fn add_trees(&mut self, n_more: usize) -> Result<()> {
        if self.forest.store.n_features.is_none() {
            return Err(MondrianError::NotFitted);
        }
        crate::forest::shard::refuse_on_shard(self.is_shard())?;
        let mut params = self.params.clone();
        params.n_trees = params.n_trees.saturating_add(n_more);
        params.validate()?;
        let (pause, growth) = (self.pause_rule(), self.growth());
        self.forest
            .add_trees(n_more, f64::INFINITY, pause, growth, TargetMoments::new);
        self.params = params;
        self.refresh();
        Ok(())
    }

    /// The leaf each row reaches in each tree (row-major `n_rows × n_trees`), as the
    /// classifier's [`apply`](crate::MondrianForestClassifier::apply).
    pub fn apply<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<u32>> {
        self.forest.apply(x, n_features)
    }

    /// Sets (or with `None` removes) the observer of training passes, as the classifier's
    /// [`set_progress`](crate::MondrianForestClassifier::set_progress).
    pub fn set_progress(&mut self, progress: Option<Progress>) {
        self.forest.progress = progress;
    }

    /// Re-estimates θ from the labels (by the heuristic, or by maximising the marginal
    /// likelihood) and, in the exact modes, every tree's upward messages.
    fn refresh(&mut self) {
        let Some(d) = self.forest.store.n_features else {
            return;
        };
        if self.forest.store.len() == 0 {
            // Every point was forgotten: no labels, so no θ; prediction says so.
            self.theta = None;
            self.messages.clear();
            return;
        }
        let extent = self
            .forest
            .store
            .scaler
            .as_ref()
            .map_or(d as f64, |s| s.effective_dimension());
        let mut theta = Theta::heuristic_for_extent(self.labels, extent, &self.params.hyper);
        let trees = &self.forest.trees;
        let upward = |theta: Theta| -> Vec<Vec<Upward>> {
            let model = GaussianModel {
                theta,
                mode: PredictionMode::Exact,
            };
            trees
                .par_iter()
                .map(|u| model.upward(&u.tree, &u.stats))
                .collect()
        };
        if self.params.hyper.theta.is_none()
            && self.params.hyper.estimate == Estimate::MarginalLikelihood
        {
            theta = self.forest.pool.install(|| {
                estimate_theta(theta, |t| {
                    let model = GaussianModel {
                        theta: *t,
                        mode: PredictionMode::Exact,
                    };
                    trees
                        .par_iter()
                        .map(|u| {
                            let msgs = model.upward(&u.tree, &u.stats);
                            model.log_marginal(&u.tree, &u.stats, &msgs)
                        })
                        .sum()
                })
            });
        }
        self.theta = Some(theta);
        self.messages = match self.params.mode {
            PredictionMode::Exact | PredictionMode::ExactQuadrature => {
                self.forest.pool.install(|| upward(theta))
            }
            PredictionMode::Fast => Vec::new(),
        };
    }

    /// The weights [`FeatureWeights::Relevance`] would learn from these rows, without
    /// training this forest (as for the classifier's
    /// [`learn_relevance`](crate::MondrianForestClassifier::learn_relevance)).
    pub fn learn_relevance<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[f64],
        power: f64,
    ) -> Result<Vec<f64>> {
        learn_relevance(self, x, n_features, y, power)
    }

    /// The weights this forest's first training call would fix on these rows (as for the
    /// classifier's
    /// [`learn_feature_weights`](crate::MondrianForestClassifier::learn_feature_weights)).
    pub fn learn_feature_weights<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[f64],
    ) -> Result<(FeatureWeights, Option<RelevanceChoice>)> {
        learn_feature_weights(self, x, n_features, y)
    }

    /// The cross-validated choice of [`FeatureWeights::RelevanceCv`], once trained with it.
    pub fn relevance_choice(&self) -> Option<&RelevanceChoice> {
        self.forest.store.relevance.as_ref()
    }

    /// [`split_scores`](Self::split_scores) divided by their sum: the share of explained
    /// squared error per feature.
    pub fn feature_importances(&self) -> Vec<f64> {
        shares(self.split_scores())
    }

    /// The feature weights in use, once trained (all 1 unless set or learnt).
    pub fn feature_weights(&self) -> Option<&[f64]> {
        self.forest.store.scaler.as_ref().map(|s| s.weights())
    }

    /// Drops the state only training needs and marks the model prediction-only, as the
    /// classifier's [`compact`](crate::MondrianForestClassifier::compact) does: every
    /// prediction (mean, variance, density, intervals) stays exactly the same, and
    /// `partial_fit` and `forget` are refused.
    pub fn compact(&mut self) -> Result<()> {
        self.forest.compact()
    }

    /// Whether [`compact`](Self::compact) made the model prediction-only.
    pub fn is_compact(&self) -> bool {
        self.forest.is_compact()
    }

    /// Size and depth statistics.
    pub fn summary(&self) -> ForestSummary {
        self.forest.summary()
    }

    /// Checks a decoded model before anything is derived from it.
    fn check_decoded(&self) -> Result<()> {
        self.params.validate()?;
        let store = &self.forest.store;
        // The store's own shape first: the label check below walks its slots.
        store.check()?;
        let targets_ok = store
            .targets
            .iter()
            .all(|y| y.is_finite() && y.abs() <= MAX_TARGET);
        let mut exact = Moments::default();
        let mut scale = 0.0f64;
        for (y, w) in store.live_weighted_targets() {
            exact.push(y, w);
            scale = scale.max(y.abs());
        }
        if !targets_ok || !self.labels.is_valid() || !self.labels.agrees_with(&exact, scale) {
            return Err(MondrianError::CorruptModel(
                "the stored targets do not match the model".into(),
            ));
        }
        self.forest
            .check_decoded(self.params.n_trees, f64::INFINITY, |stats, tree| {
                stats.check_decoded(tree, &store.targets)
            })?;
        match &self.calibration {
            Some(p) if calibration::check_pits(p).is_err() || !p.is_sorted() => {
                Err(MondrianError::CorruptModel(
                    "the calibration PITs are not sorted values in [0, 1]".into(),
                ))
            }
            _ => Ok(()),
        }
    }
}

impl Params for RegressorParams {
    fn validate(&self) -> Result<()> {
        RegressorParams::validate(self)
    }
}

impl Model for MondrianForestRegressor {
    type Target = f64;
    type Params = RegressorParams;

    fn with_params(params: Checked<RegressorParams>) -> Self {
        let params = params.into_inner();
        MondrianForestRegressor {
            forest: Forest::new(params.n_threads),
            params,
            labels: Moments::default(),
            labels_released: 0,
            calibration: None,
            theta: None,
            messages: Vec::new(),
        }
    }
    fn params(&self) -> &RegressorParams {
        &self.params
    }
}

impl<T: FeatureValue> Fit<T> for MondrianForestRegressor {
    fn fit(&mut self, x: &[T], n_features: usize, y: &[f64]) -> Result<()> {
        MondrianForestRegressor::fit(self, x, n_features, y)
    }
}

impl<T: FeatureValue> PartialFit<T> for MondrianForestRegressor {
    fn partial_fit(&mut self, x: &[T], n_features: usize, y: &[f64]) -> Result<()> {
        MondrianForestRegressor::partial_fit(self, x, n_features, y)
    }
}

impl<T: FeatureValue> WeightedFit<T> for MondrianForestRegressor {
    fn fit_weighted(&mut self, x: &[T], d: usize, y: &[f64], w: &[f64]) -> Result<()> {
        MondrianForestRegressor::fit_weighted(self, x, d, y, w)
    }
    fn partial_fit_weighted(&mut self, x: &[T], d: usize, y: &[f64], w: &[f64]) -> Result<()> {
        MondrianForestRegressor::partial_fit_weighted(self, x, d, y, w)
    }
}

impl<T: FeatureValue> Predict<T> for MondrianForestRegressor {
    type Prediction = RegressionPrediction;
    fn predict(&self, x: &[T], n_features: usize) -> Result<RegressionPrediction> {
        MondrianForestRegressor::predict(self, x, n_features)
    }
}

impl Forget for MondrianForestRegressor {
    fn forget(&mut self, ids: &[u64]) -> Result<()> {
        MondrianForestRegressor::forget(self, ids)
    }
    fn n_points(&self) -> usize {
        MondrianForestRegressor::n_points(self)
    }
    fn point_ids(&self) -> Vec<u64> {
        MondrianForestRegressor::point_ids(self)
    }
}

impl Weighed for MondrianForestRegressor {
    fn weight_setting(&self) -> &FeatureWeights {
        &self.params.feature_weights
    }
    fn pilot_params(&self) -> RegressorParams {
        RegressorParams {
            seed: pilot_seed(self.params.seed),
            feature_weights: FeatureWeights::Uniform,
            // The pilot only needs its trees: the fast mode skips the messages, and no
            // intervals, so no calibration.
            mode: PredictionMode::Fast,
            hyper: HyperSettings::default(),
            calibration: Calibration::None,
            ..self.params.clone()
        }
    }
    /// This forest's own parameters, without calibration, with at most
    /// [`CV_MAX_TREES`] trees.
    fn cv_params(&self, _y: &[f64]) -> RegressorParams {
        self.fold_params(self.params.feature_weights.clone())
    }
    fn with_weights(params: &RegressorParams, weights: FeatureWeights) -> RegressorParams {
        RegressorParams {
            feature_weights: weights,
            ..params.clone()
        }
    }
    fn with_seed(params: &RegressorParams, seed: u64) -> RegressorParams {
        RegressorParams {
            seed,
            ..params.clone()
        }
    }
    fn wants_cv_pits(&self, n_rows: usize) -> bool {
        self.params.calibration.applies_to(n_rows)
    }
    fn seed(&self) -> u64 {
        self.params.seed
    }
    fn split_scores(&self) -> Vec<f64> {
        MondrianForestRegressor::split_scores(self)
    }
    fn made_a_split(&self) -> bool {
        made_a_split(&self.forest.trees)
    }
    /// Negative log predictive density of held-out rows, weighted and summed (the NLPD's
    /// numerator), and their PITs.
    fn held_out<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[f64],
        weights: Option<&[f64]>,
        pits: bool,
    ) -> Result<HeldOut> {
        let (log_p, cdf) = self.log_density_and_cdf(x, n_features, y)?;
        let loss = -match weights {
            Some(w) => log_p.iter().zip(w).map(|(l, w)| w * l).sum::<f64>(),
            None => log_p.iter().sum::<f64>(),
        };
        Ok(HeldOut {
            loss,
            pits: if pits { cdf } else { Vec::new() },
        })
    }
    fn fit_rows<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[f64],
        weights: Option<&[f64]>,
    ) -> Result<()> {
        self.train(x, n_features, y, true, weights)
    }
}
