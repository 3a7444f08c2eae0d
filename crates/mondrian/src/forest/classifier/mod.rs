//! `MondrianForestClassifier`: the online Mondrian forest of spec `mf-classification.md`.

mod params;
mod predict;
mod shard;

pub use params::ClassifierParams;
pub use shard::ProbaSum;

use serde::{Deserialize, Serialize};

use super::weights::drop_zero_weights;
use super::{
    check_sample_weights, initial_weights, learn_feature_weights, learn_relevance, made_a_split,
    pilot_seed, shares, Forest, ForestSummary, Growth, HeldOut, Pool, Progress, Weighed,
};
use crate::data::{
    FeatureScaler, FeatureValue, FeatureWeights, RelevanceChoice, Rows, MAX_THREADS,
};
use crate::error::{MondrianError, Result};
use crate::model::{Checked, Fit, Forget, Model, Params, PartialFit, Predict, WeightedFit};
use crate::stats::label::{BranchCounts, LabelCounts};
use crate::tree::{MondrianTree, PauseRule, TrainingPoints};

/// An online Mondrian forest classifier (\[P\] Lakshminarayanan et al. 2014; spec
/// `mf-classification.md`).
///
/// Trees are trained independently (in parallel) and the forest predicts the average of
/// the trees' hierarchically smoothed label distributions, branch-off included (§4).
/// Online training through [`partial_fit`](Self::partial_fit) gives trees with exactly the
/// distribution of batch training on the same points (§2.6).
///
/// The forest keeps every training point (scaled, as `f32`) because a paused leaf is
/// re-sampled from its points when it un-pauses: memory is O(N·D) for the points plus
/// O(nodes · (D + K)) for the trees, with N the points held. With a
/// [`window`](ClassifierParams::window) of W points, N ≤ W and every tree has fewer than 2W
/// nodes, whatever the length of the stream.
///
/// [`forget`](Self::forget) removes given training points: the model is then as if it had
/// never seen them (each tree is distributed as one grown on the other points; the deletion
/// is exact, not an approximation), which serves data-removal requests.
///
/// ```
/// use mondrian::{ClassifierParams, MondrianForestClassifier};
/// let x = [0.0, 0.0, 0.1, 0.2, 1.0, 1.0, 0.9, 0.8];
/// let y = [0, 0, 1, 1];
/// let params = ClassifierParams { n_trees: 10, ..Default::default() };
/// let mut forest = MondrianForestClassifier::new(params)?;
/// forest.fit(&x, 2, &y)?;
/// forest.partial_fit(&[0.95, 0.9], 2, &[1])?;
/// let p = forest.predict_proba(&[0.05, 0.1], 2)?;
/// assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9);
/// assert_eq!(forest.predict(&[0.05, 0.1], 2)?, vec![0]);
/// # Ok::<(), mondrian::MondrianError>(())
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "ClassifierState")]
pub struct MondrianForestClassifier {
    params: ClassifierParams,
    n_classes: usize,
    /// The trees, the scaled training points with their class indices, the pool.
    forest: Forest<LabelCounts>,
}

/// The stored fields of a classifier. Decoding checks them (see `check_decoded`), so a
/// classifier read inside any serde structure (the CLI's model files) is as safe to use as
/// one read by [`MondrianForestClassifier::load`].
#[derive(Deserialize)]
pub(crate) struct ClassifierState {
    params: ClassifierParams,
    n_classes: usize,
    forest: Forest<LabelCounts>,
}

impl TryFrom<ClassifierState> for MondrianForestClassifier {
    type Error = super::DecodeError;

    fn try_from(s: ClassifierState) -> std::result::Result<Self, Self::Error> {
        let mut forest = s.forest;
        forest.pool = Pool::new(s.params.n_threads);
        let model = MondrianForestClassifier {
            params: s.params,
            n_classes: s.n_classes,
            forest,
        };
        model.check_decoded()?;
        Ok(model)
    }
}

impl MondrianForestClassifier {
    /// An untrained forest.
    pub fn new(params: ClassifierParams) -> Result<Self> {
        Ok(Self::with_params(params.check()?))
    }

    /// The hyper-parameters.
    pub fn params(&self) -> &ClassifierParams {
        &self.params
    }
    /// Number of features, once fitted.
    pub fn n_features(&self) -> Option<usize> {
        self.forest.store.n_features
    }
    /// Number of classes K (columns of [`predict_proba`](Self::predict_proba)).
    pub fn n_classes(&self) -> usize {
        self.n_classes
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
    /// The ids of the points held, oldest first: each point's arrival index among the
    /// training rows given since the last `fit` (the ids [`forget`](Self::forget) takes).
    pub fn point_ids(&self) -> Vec<u64> {
        self.forest.store.live_ids().collect()
    }
    /// The discount rate γ = discount_factor × D, with D the linear dimension of the unit
    /// box in the trees' space (Σ_d w_d under feature weights; the number of features
    /// without them).
    pub fn gamma(&self) -> f64 {
        let extent = self
            .forest
            .store
            .scaler
            .as_ref()
            .map_or(0.0, |s| s.effective_dimension());
        self.params.discount_factor * extent
    }
    /// The frozen feature scaler, once fitted.
    pub fn scaler(&self) -> Option<&FeatureScaler> {
        self.forest.store.scaler.as_ref()
    }
    /// Changes the worker thread count (0 = all cores); the model is unaffected. Counts
    /// above [`MAX_THREADS`] are lowered to it, the most a saved model accepts.
    pub fn set_n_threads(&mut self, n_threads: usize) {
        let n_threads = n_threads.min(MAX_THREADS);
        self.params.n_threads = n_threads;
        self.forest.pool = Pool::new(n_threads);
    }
    /// Changes the branch-off counts used in prediction; the trees are unaffected.
    pub fn set_branch_counts(&mut self, branch_counts: BranchCounts) {
        self.params.branch_counts = branch_counts;
    }
    /// Changes the discount factor (γ = factor × D); the trees do not depend on it (§3.2).
    pub fn set_discount_factor(&mut self, discount_factor: f64) -> Result<()> {
        let mut p = self.params.clone();
        p.discount_factor = discount_factor;
        p.validate()?;
        self.params = p;
        Ok(())
    }

    /// Tree `index` with its label counts and the scaled training points, for inspection
    /// and tests.
    pub fn tree(&self, index: usize) -> Option<(&MondrianTree, &LabelCounts)> {
        self.forest.trees.get(index).map(|u| (&u.tree, &u.stats))
    }
    /// The scaled training points the trees index into.
    pub fn training_points(&self) -> TrainingPoints<'_, u32> {
        self.forest.store.data()
    }

    fn check_labels(&self, labels: &[usize], n_rows: usize) -> Result<usize> {
        if labels.len() != n_rows {
            return Err(MondrianError::LengthMismatch {
                n_rows,
                n_labels: labels.len(),
            });
        }
        let mut max = 0;
        for (row, &label) in labels.iter().enumerate() {
            if let Some(k) = self.params.n_classes {
                if label >= k {
                    return Err(MondrianError::LabelOutOfRange {
                        row,
                        label,
                        n_classes: k,
                    });
                }
            }
            if label >= u32::MAX as usize {
                return Err(MondrianError::LabelOutOfRange {
                    row,
                    label,
                    n_classes: u32::MAX as usize,
                });
            }
            max = max.max(label);
        }
        Ok(max + 1)
    }

    /// Batch training (\[P\] Alg. 1): discards any previous state, fixes the scaling from
    /// `x` (unless ranges were given) and samples every tree from `MT(λ, D)`.
    /// `x` is row-major with `n_features` columns; `y` holds class indices.
    pub fn fit<T: FeatureValue>(&mut self, x: &[T], n_features: usize, y: &[usize]) -> Result<()> {
        self.fit_with(x, n_features, y, None)
    }

    /// [`fit`](Self::fit) with a sample weight per row: a row of integer weight k counts as
    /// k copies of the row (the trees have exactly the law of a fit on the rows repeated),
    /// a row of weight 0 is counted (it has an id) but not learnt, and a fractional weight
    /// is rounded at random per tree, unbiased; with bagging a tree takes Poisson(w)
    /// copies (see [`multiplicity`](crate::forest::multiplicity)). The scaling, learnt
    /// feature weights and class count come from the rows of positive weight. A negative,
    /// NaN or infinite weight, or one above
    /// [`MAX_SAMPLE_WEIGHT`](crate::forest::MAX_SAMPLE_WEIGHT), is an error.
    pub fn fit_weighted<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[usize],
        sample_weight: &[f64],
    ) -> Result<()> {
        self.fit_with(x, n_features, y, Some(sample_weight))
    }

    fn fit_with<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[usize],
        weights: Option<&[f64]>,
    ) -> Result<()> {
        let rows = Rows::new(x, n_features)?;
        rows.validate(None)?;
        if rows.n_rows() == 0 {
            return Err(MondrianError::EmptyData("fit needs at least one row"));
        }
        // Build into a fresh model so that a refused input leaves this one untouched.
        let mut fresh = MondrianForestClassifier::new(self.params.clone())?;
        fresh.forest.range = self.forest.range;
        let k = fresh.check_labels(y, rows.n_rows())?;
        fresh.check_memory(rows.n_rows(), n_features, k)?;
        if let Some(w) = weights {
            check_sample_weights(w, rows.n_rows())?;
        }
        fresh.initialise(&rows, k, y, weights)?;
        let scaled = fresh.forest.store.scale(&rows)?;
        fresh.forest.pool = std::mem::take(&mut self.forest.pool);
        fresh.forest.progress = self.forest.progress.take();
        *self = fresh;
        self.learn(&scaled, y, weights);
        Ok(())
    }

    /// Online training (\[P\] Alg. 3) on one point or a mini-batch: the trees keep the law of
    /// batch training on all points seen (spec §2.6). A batch at least as large as what the
    /// forest holds goes in as one set ([`MondrianTree::extend_many`](crate::tree::MondrianTree::extend_many)),
    /// a smaller one point by point in row order.
    ///
    /// The first call fixes the number of features and, with [`Scaling::FirstBatch`](crate::Scaling::FirstBatch), the
    /// feature scaling (so a first mini-batch should be representative, or ranges should
    /// be given through [`Scaling::Ranges`](crate::Scaling::Ranges)); the scaling is never moved afterwards, because
    /// that would bend the trees already grown. Points outside the first batch's range are
    /// fine: the trees extend to them.
    ///
    /// When `n_classes` was not declared, a label never seen before grows K: every node gets
    /// a zero count for the new class and the base measure becomes uniform over the larger K,
    /// so predictions shift mass to the new class only where the model is uncertain.
    pub fn partial_fit<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[usize],
    ) -> Result<()> {
        self.partial_fit_with(x, n_features, y, None)
    }

    /// [`partial_fit`](Self::partial_fit) with a sample weight per row, as in
    /// [`fit_weighted`](Self::fit_weighted).
    pub fn partial_fit_weighted<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[usize],
        sample_weight: &[f64],
    ) -> Result<()> {
        self.partial_fit_with(x, n_features, y, Some(sample_weight))
    }

    fn partial_fit_with<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[usize],
        weights: Option<&[f64]>,
    ) -> Result<()> {
        self.forest.check_trainable()?;
        let rows = self.forest.store.rows(x, n_features)?;
        let k = self.check_labels(y, rows.n_rows())?;
        if let Some(w) = weights {
            check_sample_weights(w, rows.n_rows())?;
        }
        if rows.n_rows() == 0 {
            return Ok(());
        }
        self.check_memory(rows.n_rows(), n_features, k.max(self.n_classes))?;
        // Every check runs before the model changes: a refused batch leaves it untouched.
        let scaled = if self.forest.store.n_features.is_none() {
            let mut fresh = MondrianForestClassifier::new(self.params.clone())?;
            fresh.forest.range = self.forest.range;
            fresh.initialise(&rows, k, y, weights)?;
            let scaled = fresh.forest.store.scale(&rows)?;
            fresh.forest.pool = std::mem::take(&mut self.forest.pool);
            fresh.forest.progress = self.forest.progress.take();
            *self = fresh;
            scaled
        } else {
            let scaled = self.forest.store.scale(&rows)?;
            if k > self.n_classes {
                self.n_classes = k;
                for unit in &mut self.forest.trees {
                    unit.stats.grow_classes(k);
                }
            }
            scaled
        };
        self.learn(&scaled, y, weights);
        Ok(())
    }

    /// Removes the training points with these ids (their arrival indices among the rows
    /// given since the last `fit`, as [`point_ids`](Self::point_ids) lists them) from every
    /// tree. The model is then as if it had never seen them: each tree is distributed as a
    /// tree grown on the remaining points (exact deletion, spec `mondrian-polya-forest.md`
    /// §7.3), and no trace of the points is kept. An id the model does not hold (never
    /// given, already forgotten, out of the window, or named twice) is an error, and the
    /// model is then unchanged.
    pub fn forget(&mut self, ids: &[u64]) -> Result<()> {
        self.forest.check_trainable()?;
        let growth = self.growth();
        self.forest.forget(ids, growth).map(drop)
    }

    /// Refuses a call bringing `n_new` points with `k` classes that would outgrow the
    /// memory budget or the machine ([`crate::memory`]).
    fn check_memory(&self, n_new: usize, n_features: usize, k: usize) -> Result<()> {
        let shape = crate::memory::ForestShape {
            // A shard grows only its own trees.
            n_trees: self.forest.tree_range(self.params.n_trees).len(),
            n_points: n_new,
            n_features,
            stats_bytes_per_node: (k + 2) * 4,
            min_samples_split: self.params.min_samples_split,
        };
        let held = self.forest.store.len();
        super::check_memory(held, shape, self.params.window, self.params.max_memory)
    }

    /// Drops the state only training needs (the leaves' point ids, spare capacity) and
    /// marks the model prediction-only: every prediction stays exactly the same, a saved
    /// compact model is written compressed (see [`crate::persist`]), and further training
    /// (`partial_fit`, `forget`) is refused with [`MondrianError::CompactModel`]; `fit`
    /// starts a new model. Feature importances of a compact model are computed from its
    /// leaves' label counts. An unfitted model is an error.
    pub fn compact(&mut self) -> Result<()> {
        self.forest.compact()
    }

    /// Whether [`compact`](Self::compact) made the model prediction-only.
    pub fn is_compact(&self) -> bool {
        self.forest.is_compact()
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

    /// Takes scaled rows, their labels and sample weights into the forest.
    fn learn(&mut self, scaled: &[crate::process::Feature], y: &[usize], weights: Option<&[f64]>) {
        let labels: Vec<u32> = y.iter().map(|&k| k as u32).collect();
        let growth = self.growth();
        self.forest.learn(scaled, &labels, weights, growth);
    }

    /// When blocks pause (spec §2.3, §5).
    fn pause_rule(&self) -> PauseRule {
        PauseRule {
            pause_on_pure: self.params.pause_on_pure,
            min_samples_split: self.params.min_samples_split,
        }
    }

    /// Fixes what the first training call fixes (the scaling and feature weights, from the
    /// rows of positive weight) and plants the trees.
    fn initialise<T: FeatureValue>(
        &mut self,
        rows: &Rows<T>,
        n_classes: usize,
        y: &[usize],
        weights: Option<&[f64]>,
    ) -> Result<()> {
        let kept = drop_zero_weights(rows, y, weights);
        let (rows, y, weights) = match &kept {
            Some((x, y, w)) => (Rows::new(x, rows.n_features())?, &y[..], Some(&w[..])),
            None => (*rows, y, weights),
        };
        if rows.n_rows() == 0 {
            return Err(MondrianError::EmptyData("every sample weight is 0"));
        }
        self.forest.store.start(&rows, &self.params.scaling)?;
        let initial = initial_weights(self, &rows, y, weights)?;
        if let Some(w) = initial.weights {
            self.forest.store.reweight(&w)?;
        }
        self.forest.store.relevance = initial.choice;
        self.n_classes = self.params.n_classes.unwrap_or(n_classes).max(n_classes);
        let k = self.n_classes;
        self.forest.plant(
            self.params.n_trees,
            self.params.lifetime,
            self.pause_rule(),
            self.params.seed,
            || LabelCounts::new(k),
        );
        Ok(())
    }

    /// Grows `n_more` trees on the points the forest holds and adds them (warm start); the
    /// trees it had are unchanged. Tree t is seeded by (seed, t) and takes each point's
    /// copies by (seed, t, id), so after a single `fit` the forest is the one a fit with
    /// the larger tree count would have given; after online training or forgetting, each
    /// new tree has the law of a tree batch-fitted on the points held (spec §2.6).
    /// A shard refuses (its new trees would take the indices of the next shard's).
    pub fn add_trees(&mut self, n_more: usize) -> Result<()> {
        if self.forest.store.n_features.is_none() {
            return Err(MondrianError::NotFitted);
        }
        crate::forest::shard::refuse_on_shard(self.is_shard())?;
        let mut params = self.params.clone();
        params.n_trees = params.n_trees.saturating_add(n_more);
        params.validate()?;
        let (k, pause, growth) = (self.n_classes, self.pause_rule(), self.growth());
        self.forest
            .add_trees(n_more, params.lifetime, pause, growth, || {
                LabelCounts::new(k)
            });
        self.params = params;
        Ok(())
    }

    /// Sets (or with `None` removes) the observer that hears how far each training pass
    /// over the trees has got; the model does not depend on it, and it is not saved.
    pub fn set_progress(&mut self, progress: Option<Progress>) {
        self.forest.progress = progress;
    }

    /// The weights [`FeatureWeights::Relevance`] would learn from these rows (the pilot
    /// forest of this forest's parameters), without training this forest. A stream can
    /// learn them from a sample and pass them as [`FeatureWeights::Given`].
    pub fn learn_relevance<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[usize],
        power: f64,
    ) -> Result<Vec<f64>> {
        learn_relevance(self, x, n_features, y, power)
    }

    /// The weights this forest's first training call would fix on these rows, as weights
    /// to give a stream up front so that it sees the features a batch fit sees: learnt ones
    /// (`Relevance`, `RelevanceCv`) become [`FeatureWeights::Given`], with the
    /// cross-validated choice if one ran; other settings come back unchanged.
    pub fn learn_feature_weights<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[usize],
    ) -> Result<(FeatureWeights, Option<RelevanceChoice>)> {
        learn_feature_weights(self, x, n_features, y)
    }

    /// The cross-validated choice of [`FeatureWeights::RelevanceCv`], once trained with it.
    pub fn relevance_choice(&self) -> Option<&RelevanceChoice> {
        self.forest.store.relevance.as_ref()
    }

    /// [`split_scores`](Self::split_scores) divided by their sum (all 0 when no split
    /// removed anything): the share of explained impurity per feature.
    pub fn feature_importances(&self) -> Vec<f64> {
        shares(self.split_scores())
    }

    /// The feature weights in use, once trained (all 1 unless set or learnt).
    pub fn feature_weights(&self) -> Option<&[f64]> {
        self.forest.store.scaler.as_ref().map(|s| s.weights())
    }

    /// Size and depth statistics.
    pub fn summary(&self) -> ForestSummary {
        self.forest.summary()
    }

    /// Checks a decoded model.
    fn check_decoded(&self) -> Result<()> {
        let bad = |m: &str| Err(MondrianError::CorruptModel(m.to_string()));
        self.params.validate()?;
        if self.params.n_classes.is_some_and(|k| k != self.n_classes)
            || self.n_classes > u32::MAX as usize
        {
            return bad("the class count does not match the parameters");
        }
        if self
            .forest
            .store
            .targets
            .iter()
            .any(|&y| y as usize >= self.n_classes)
        {
            return bad("a stored label exceeds the class count");
        }
        let k = self.n_classes;
        self.forest
            .check_decoded(self.params.n_trees, self.params.lifetime, |stats, tree| {
                stats.check_decoded(tree.n_nodes(), k)
            })
    }
}

impl Model for MondrianForestClassifier {
    type Target = usize;
    type Params = ClassifierParams;

    fn with_params(params: Checked<ClassifierParams>) -> Self {
        let params = params.into_inner();
        MondrianForestClassifier {
            n_classes: params.n_classes.unwrap_or(0),
            forest: Forest::new(params.n_threads),
            params,
        }
    }
    fn params(&self) -> &ClassifierParams {
        &self.params
    }
}

impl<T: FeatureValue> Fit<T> for MondrianForestClassifier {
    fn fit(&mut self, x: &[T], n_features: usize, y: &[usize]) -> Result<()> {
        MondrianForestClassifier::fit(self, x, n_features, y)
    }
}

impl<T: FeatureValue> PartialFit<T> for MondrianForestClassifier {
    fn partial_fit(&mut self, x: &[T], n_features: usize, y: &[usize]) -> Result<()> {
        MondrianForestClassifier::partial_fit(self, x, n_features, y)
    }
}

impl<T: FeatureValue> WeightedFit<T> for MondrianForestClassifier {
    fn fit_weighted(&mut self, x: &[T], d: usize, y: &[usize], w: &[f64]) -> Result<()> {
        MondrianForestClassifier::fit_weighted(self, x, d, y, w)
    }
    fn partial_fit_weighted(&mut self, x: &[T], d: usize, y: &[usize], w: &[f64]) -> Result<()> {
        MondrianForestClassifier::partial_fit_weighted(self, x, d, y, w)
    }
}

/// Predicts class probabilities, row-major `n_rows × n_classes`
/// ([`predict_proba`](MondrianForestClassifier::predict_proba)).
impl<T: FeatureValue> Predict<T> for MondrianForestClassifier {
    type Prediction = Vec<f64>;
    fn predict(&self, x: &[T], n_features: usize) -> Result<Vec<f64>> {
        self.predict_proba(x, n_features)
    }
}

impl Forget for MondrianForestClassifier {
    fn forget(&mut self, ids: &[u64]) -> Result<()> {
        MondrianForestClassifier::forget(self, ids)
    }
    fn n_points(&self) -> usize {
        MondrianForestClassifier::n_points(self)
    }
    fn point_ids(&self) -> Vec<u64> {
        MondrianForestClassifier::point_ids(self)
    }
}

impl Weighed for MondrianForestClassifier {
    fn weight_setting(&self) -> &FeatureWeights {
        &self.params.feature_weights
    }
    fn pilot_params(&self) -> ClassifierParams {
        ClassifierParams {
            seed: pilot_seed(self.params.seed),
            feature_weights: FeatureWeights::Uniform,
            ..self.params.clone()
        }
    }
    fn with_weights(params: &ClassifierParams, weights: FeatureWeights) -> ClassifierParams {
        ClassifierParams {
            feature_weights: weights,
            ..params.clone()
        }
    }
    fn with_seed(params: &ClassifierParams, seed: u64) -> ClassifierParams {
        ClassifierParams {
            seed,
            ..params.clone()
        }
    }
    fn seed(&self) -> u64 {
        self.params.seed
    }
    fn split_scores(&self) -> Vec<f64> {
        MondrianForestClassifier::split_scores(self)
    }
    fn made_a_split(&self) -> bool {
        made_a_split(&self.forest.trees)
    }

    /// The parameters of the forests [`FeatureWeights::RelevanceCv`] compares: this
    /// forest's own, with every class of `y` declared, so that a class missing from a
    /// fold's training rows still gets a probability for its held-out rows.
    fn cv_params(&self, y: &[usize]) -> ClassifierParams {
        let k = y.iter().max().map_or(0, |&c| c + 1);
        ClassifierParams {
            n_classes: Some(self.params.n_classes.unwrap_or(0).max(k)),
            ..self.params.clone()
        }
    }

    /// Log-loss of held-out rows, weighted and summed: `−Σ w log p(y | x)` (no PITs: labels
    /// have no order).
    fn held_out<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[usize],
        weights: Option<&[f64]>,
        _pits: bool,
    ) -> Result<HeldOut> {
        let k = self.n_classes;
        let proba = self.predict_proba(x, n_features)?;
        let loss = -proba
            .chunks_exact(k)
            .zip(y)
            .enumerate()
            .map(|(i, (p, &c))| {
                let w = weights.map_or(1.0, |w| w[i]);
                w * p.get(c).copied().unwrap_or(0.0).max(f64::MIN_POSITIVE).ln()
            })
            .sum::<f64>();
        Ok(HeldOut { loss, pits: vec![] })
    }

    fn fit_rows<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[usize],
        weights: Option<&[f64]>,
    ) -> Result<()> {
        self.fit_with(x, n_features, y, weights)
    }
}
