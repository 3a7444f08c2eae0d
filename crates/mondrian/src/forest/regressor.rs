//! `MondrianForestRegressor`: the Mondrian forest regression of spec `mf-regression.md`
//! (thesis ch. 6), on the same engine as the classifier with Gaussian node statistics.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{split_relevance, Forest, ForestSummary, Growth, PointStore, Pool};
use crate::data::{
    validate_sizes, FeatureValue, FeatureWeights, RelevanceChoice, Rows, Scaling, MAX_TARGET,
    MAX_THREADS, RELEVANCE_CV_POWERS,
};
use crate::error::{MondrianError, Result};
use crate::stats::gaussian::{
    estimate_theta, mixture_cdf, mixture_log_density, mixture_moments, mixture_quantile, Component,
    Estimate, GaussianModel, HyperSettings, Moments, PredictionMode, TargetMoments, Theta, Upward,
};
use crate::tree::{MondrianTree, NodeStatistics, PathStep, PauseRule, TrainingPoints};

/// Hyper-parameters of a [`MondrianForestRegressor`] (spec §8); the defaults are the
/// thesis' settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegressorParams {
    /// Number of trees M.
    pub n_trees: usize,
    /// Blocks with fewer points are leaves (paused online, so online ≡ batch; §1.6).
    pub min_samples_split: usize,
    /// Exact Gaussian belief propagation or the fast empirical approximation (§2.6).
    pub mode: PredictionMode,
    /// Constants of the hyper-parameter heuristic (§2.5).
    pub hyper: HyperSettings,
    /// Master seed; tree t draws from a generator seeded by (seed, t).
    pub seed: u64,
    /// Worker threads (0 = all cores); the model does not depend on it. As for
    /// [`ClassifierParams::n_threads`](crate::ClassifierParams::n_threads), a stream of
    /// single points keeps helper threads spinning briefly between calls.
    pub n_threads: usize,
    /// Online bagging (Poisson(1) copies of each example per tree).
    pub bagging: bool,
    /// How features are scaled before they reach the trees (the heuristic γ2 assumes
    /// [0, 1]).
    pub scaling: Scaling,
    /// Per-feature stretch after the scaling, fixed by the first training call;
    /// [`FeatureWeights::Relevance`] learns it from a pilot forest.
    pub feature_weights: FeatureWeights,
    /// Whether the first training call recalibrates the prediction intervals by
    /// cross-validation ([`Calibration::Cv`]).
    pub calibration: Calibration,
    /// Keep only the last `window` training points (a sliding window), as
    /// [`ClassifierParams::window`](crate::ClassifierParams::window) does. `None` keeps all.
    pub window: Option<usize>,
}

/// How [`MondrianForestRegressor::mixture_interval`] turns a level into quantiles of the
/// forest's predictive mixture.
///
/// The forest's predictive tends to be too wide on real data (each tree's leaf spread and
/// the trees' disagreement both measure the target's local variation), so its own 90 %
/// intervals can cover 97 %. Quantile recalibration (Kuleshov, Fenner & Ermon 2018) keeps
/// the mixture's shape and corrects its probabilities: with `u_1 ≤ … ≤ u_n` the values
/// `F(y_i | x_i)` of the predictive CDF at held-out rows (probability integral transforms,
/// PITs), the central interval at level `α` runs between the mixture's quantiles at
/// `u_(⌊a(n+1)⌋)` and `u_(⌈(1−a)(n+1)⌉)`, `a = (1 − α)/2` (0 and 1 beyond the sample; the
/// mixture's quantile at 0 or 1 is returned as a finite far end, about 12 sd below or 8 sd
/// above the outermost component). If the PITs are exchangeable with the new row's (held-out
/// rows under this forest, [`MondrianForestRegressor::calibrate`]), each side misses with
/// probability at most `a`; cross-validated PITs come from forests fitted on 4/5 of the rows,
/// so there the bound is approximate (usually conservative). The density ([`log_density`](MondrianForestRegressor::log_density)), mean and
/// variance are the model's and do not change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Calibration {
    /// The quantiles of the forest's own predictive mixture (the thesis' predictive).
    #[default]
    None,
    /// The first training call (at least 10 rows) computes every row's PIT under a forest
    /// of the same parameters fitted by 5-fold cross-validation without the row (feature
    /// weights as the call fixes them), about 5 fits' extra work. Later `partial_fit` calls
    /// keep those PITs; [`MondrianForestRegressor::calibrate`] replaces them.
    Cv,
}

impl Calibration {
    /// Reads `none` or `cv`, as the CLI and the Python package spell it.
    pub fn parse(spec: &str) -> Result<Calibration> {
        match spec.trim() {
            "none" => Ok(Calibration::None),
            "cv" => Ok(Calibration::Cv),
            other => Err(MondrianError::InvalidParameter {
                name: "calibration",
                reason: format!("`{other}` is not `none` or `cv`"),
            }),
        }
    }
}

impl Default for RegressorParams {
    fn default() -> Self {
        RegressorParams {
            n_trees: 10,
            min_samples_split: 10,
            mode: PredictionMode::Exact,
            hyper: HyperSettings::default(),
            seed: 0,
            n_threads: 0,
            bagging: false,
            scaling: Scaling::FirstBatch,
            feature_weights: FeatureWeights::Uniform,
            calibration: Calibration::None,
            window: None,
        }
    }
}

impl RegressorParams {
    /// Checks every value.
    pub fn validate(&self) -> Result<()> {
        validate_sizes(self.n_trees, self.n_threads)?;
        if self.min_samples_split == 0 {
            return Err(MondrianError::InvalidParameter {
                name: "min_samples_split",
                reason: "must be at least 1".into(),
            });
        }
        crate::data::validate_window(self.window)?;
        if let Scaling::Ranges(r) = &self.scaling {
            crate::data::FeatureScaler::from_ranges(r)?;
        }
        self.feature_weights.validate(None)?;
        self.hyper.validate()
    }
}

/// Predictive moments of a forest at each row: the moments of the equal-weight mixture of
/// the trees' mixtures (§3.3).
#[derive(Debug, Clone, PartialEq)]
pub struct RegressionPrediction {
    /// Predictive mean E per row.
    pub mean: Vec<f64>,
    /// Predictive variance Var per row.
    pub variance: Vec<f64>,
    /// The part of `variance` that comes from the trees disagreeing: the variance of the
    /// trees' predictive means per row (law of total variance over the equal-weight trees;
    /// `variance − between_trees` is the mean of the trees' own variances).
    pub between_trees: Vec<f64>,
}

impl RegressionPrediction {
    /// Predictive standard deviation per row.
    pub fn std(&self) -> Vec<f64> {
        self.variance.iter().map(|v| v.sqrt()).collect()
    }

    /// Central interval `E ± z·sd` with `P(|Z| ≤ z) = level` per row: the Gaussian moment
    /// match of the forest mixture, as the thesis' calibration uses (§3.3).
    pub fn interval(&self, level: f64) -> Result<(Vec<f64>, Vec<f64>)> {
        if !(level > 0.0 && level < 1.0) {
            return Err(MondrianError::InvalidParameter {
                name: "level",
                reason: format!("{level} is not in (0, 1)"),
            });
        }
        let z = crate::metrics::normal_quantile(0.5 + level / 2.0);
        let half: Vec<f64> = self.std().iter().map(|s| z * s).collect();
        Ok((
            self.mean.iter().zip(&half).map(|(m, h)| m - h).collect(),
            self.mean.iter().zip(&half).map(|(m, h)| m + h).collect(),
        ))
    }
}

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
    /// Moments of the labels of the points held (each once, whatever the bagging weights).
    labels: Moments,
    /// Labels taken out of `labels` by the inverse update since it was last summed afresh.
    #[serde(skip)]
    labels_released: usize,
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
struct RegressorState {
    params: RegressorParams,
    forest: Forest<TargetMoments>,
    labels: Moments,
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
            labels_released: 0,
            calibration: s.calibration,
            theta: None,
            messages: Vec::new(),
        };
        model.check_decoded()?;
        model.refresh();
        Ok(model)
    }
}

super::relevance_methods!(MondrianForestRegressor, RegressorParams, f64, |p| {
    RegressorParams {
        // The pilot only needs its trees: the fast mode skips the messages,
        // and no intervals, so no calibration.
        mode: PredictionMode::Fast,
        hyper: HyperSettings::default(),
        calibration: Calibration::None,
        ..p
    }
});

crate::persist::persistent_model!(MondrianForestRegressor, "mondrian-forest-regressor");
impl MondrianForestRegressor {
    /// An untrained forest.
    pub fn new(params: RegressorParams) -> Result<Self> {
        params.validate()?;
        RegressorState {
            forest: Forest::new(params.n_threads),
            params,
            labels: Moments::default(),
            calibration: None,
        }
        .try_into()
        .map_err(|e: super::DecodeError| e.0)
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
        }
    }

    /// Takes the targets of points that left out of the label moments: by the inverse
    /// update, summed afresh from the points held once as many have left as are held, so
    /// that an endless window cannot drift (amortised O(1) per point).
    fn release_labels(&mut self, gone: &[f64]) {
        for &y in gone {
            self.labels.remove(y, 1.0);
        }
        self.labels_released += gone.len();
        if self.labels_released > self.forest.store.len() {
            self.labels = Moments::default();
            for y in self.forest.store.live_targets() {
                self.labels.push(y, 1.0);
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
        self.train(x, n_features, y, true)
    }

    /// Online training (Alg. 6.3 with pausing, §1.6) on one point or a mini-batch (a large
    /// batch goes in as one set, a smaller one in row order; the law is the same, see
    /// [`MondrianForestClassifier::partial_fit`](crate::MondrianForestClassifier::partial_fit)).
    /// The first call fixes the width and, with [`Scaling::FirstBatch`], the scaling.
    /// θ is re-estimated from all labels seen after every call, so in exact mode each call
    /// also refreshes every node's messages (O(nodes)); stream point by point with
    /// [`PredictionMode::Fast`], whose cost per point is O(depth).
    pub fn partial_fit<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[f64],
    ) -> Result<()> {
        self.train(x, n_features, y, false)
    }

    /// Every check and the scaling run before the model changes, so a refused input leaves
    /// it untouched.
    fn train<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[f64],
        fresh: bool,
    ) -> Result<()> {
        let starting = fresh || self.forest.store.n_features.is_none();
        let empty = PointStore::new();
        let rows = if starting { &empty } else { &self.forest.store }.rows(x, n_features)?;
        Self::check_training_targets(y, rows.n_rows())?;
        if rows.n_rows() == 0 {
            return match fresh {
                true => Err(MondrianError::EmptyData("fit needs at least one row")),
                false => Ok(()),
            };
        }
        let new_store = match starting {
            true => Some(self.start_store(&rows, y)?),
            false => None,
        };
        let scaled = new_store
            .as_ref()
            .unwrap_or(&self.forest.store)
            .scale(&rows)?;
        let pits = match (&new_store, self.params.calibration) {
            (Some(store), Calibration::Cv) => {
                // The folds' forests see the weights this call fixes, not a fresh learning.
                let weights = match (&self.params.feature_weights, &store.scaler) {
                    (FeatureWeights::Uniform | FeatureWeights::Given(_), _) | (_, None) => {
                        self.params.feature_weights.clone()
                    }
                    (_, Some(scaler)) => FeatureWeights::Given(scaler.weights().to_vec()),
                };
                Some(self.cv_pits(&rows, y, weights)?)
            }
            _ => None,
        };
        if let Some(store) = new_store {
            let pool = std::mem::take(&mut self.forest.pool);
            self.forest = Forest::new(self.params.n_threads);
            self.forest.pool = pool;
            self.forest.store = store;
            self.labels = Moments::default();
            self.labels_released = 0;
            self.calibration = pits;
            self.init_trees();
        }
        let learned = self.forest.learn(&scaled, y, self.growth());
        for &v in &y[learned.kept_from..] {
            self.labels.push(v, 1.0);
        }
        self.release_labels(&learned.gone);
        self.refresh();
        Ok(())
    }

    /// A store whose scaling (and feature weights) the first rows fix.
    fn start_store<T: FeatureValue>(&self, rows: &Rows<T>, y: &[f64]) -> Result<PointStore<f64>> {
        let mut store = PointStore::new();
        store.start(rows, &self.params.scaling)?;
        let (weights, choice) = self.initial_weights(rows, y)?;
        if let Some(w) = weights {
            store.reweight(&w)?;
        }
        store.relevance = choice;
        Ok(store)
    }

    /// Sorted PITs of the rows by 5-fold cross-validation with forests of this forest's
    /// parameters and the given feature weights ([`Calibration::Cv`]).
    fn cv_pits<T: FeatureValue>(
        &self,
        rows: &Rows<T>,
        y: &[f64],
        feature_weights: FeatureWeights,
    ) -> Result<Vec<f64>> {
        let (n, d) = (rows.n_rows(), rows.n_features());
        let folds = super::cv_folds(
            n,
            super::pilot_seed(self.params.seed),
            ("calibration", "calibration cv"),
        )?;
        let params = RegressorParams {
            calibration: Calibration::None,
            feature_weights,
            ..self.params.clone()
        };
        let mut pits = Vec::with_capacity(n);
        for held in &folds {
            let (fit_x, fit_y, val_x, val_y) = super::split_rows(rows, y, held);
            let mut forest = MondrianForestRegressor::new(params.clone())?;
            forest.fit(&fit_x, d, &fit_y)?;
            pits.extend(forest.cdf(&val_x, d, &val_y)?);
        }
        pits.sort_by(f64::total_cmp);
        Ok(pits)
    }

    /// Sorted PITs of these rows by 5-fold cross-validation with forests of this forest's
    /// parameters, without training this forest. A stream can compute them from a sample
    /// and hand them to [`set_calibration`](Self::set_calibration). They equal what
    /// [`Calibration::Cv`] computes when the feature weights are uniform or given; learnt
    /// weights are learnt again in each fold here, so to reproduce a batch fit pass the
    /// weights it fixes (from `learn_feature_weights`) as [`FeatureWeights::Given`].
    pub fn cross_validated_pits<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[f64],
    ) -> Result<Vec<f64>> {
        let rows = Rows::new(x, n_features)?;
        rows.validate(None)?;
        Self::check_training_targets(y, rows.n_rows())?;
        self.cv_pits(&rows, y, self.params.feature_weights.clone())
    }

    /// Recalibrates the intervals from rows the forest was not trained on: their PITs
    /// under the current forest replace any earlier calibration ([`Calibration`]).
    pub fn calibrate<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[f64],
    ) -> Result<()> {
        let pits = self.cdf(x, n_features, y)?;
        self.set_calibration(Some(pits))
    }

    /// Sets (or with `None` removes) the PITs that recalibrate the intervals; each must
    /// lie in [0, 1], and there must be at least one.
    pub fn set_calibration(&mut self, pits: Option<Vec<f64>>) -> Result<()> {
        if let Some(p) = &pits {
            check_pits(p)?;
        }
        self.calibration = pits.map(|mut p| {
            p.sort_by(f64::total_cmp);
            p
        });
        Ok(())
    }

    /// The sorted PITs recalibrating the intervals, if any ([`Calibration`]).
    pub fn calibration(&self) -> Option<&[f64]> {
        self.calibration.as_deref()
    }

    /// The probabilities whose mixture quantiles bound the central interval at `level`:
    /// `((1 − level)/2, (1 + level)/2)`, or with a calibration the PITs' order statistics
    /// of [`Calibration`].
    pub fn interval_probabilities(&self, level: f64) -> Result<(f64, f64)> {
        if !(level > 0.0 && level < 1.0) {
            return Err(MondrianError::InvalidParameter {
                name: "level",
                reason: format!("{level} is not in (0, 1)"),
            });
        }
        let a = (1.0 - level) / 2.0;
        Ok(match &self.calibration {
            None => (a, 1.0 - a),
            Some(u) => {
                let n = u.len();
                // u_(k), with u_(0) = 0 and u_(k) = 1 beyond the sample.
                let rank = |r: f64| match r as usize {
                    0 => 0.0,
                    k if k > n => 1.0,
                    k => u[k - 1],
                };
                // Ranks are integers; the slack keeps a level such as 0.8 from losing one
                // to rounding ((1 − 0.8)/2 · 10 = 0.99999…).
                let lo = rank((a * (n + 1) as f64 + 1e-9).floor());
                let hi = rank(((1.0 - a) * (n + 1) as f64 - 1e-9).ceil());
                (lo, hi)
            }
        })
    }

    /// The parameters of the forests [`FeatureWeights::RelevanceCv`] compares: this
    /// forest's own.
    fn cv_params(&self, _y: &[f64]) -> RegressorParams {
        RegressorParams {
            calibration: Calibration::None,
            ..self.params.clone()
        }
    }

    /// Negative log predictive density of held-out rows, summed (the NLPD's numerator).
    fn held_out_loss<T: FeatureValue>(&self, x: &[T], n_features: usize, y: &[f64]) -> Result<f64> {
        Ok(-self.log_density(x, n_features, y)?.iter().sum::<f64>())
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

    fn init_trees(&mut self) {
        let pause = PauseRule {
            pause_on_pure: false,
            min_samples_split: self.params.min_samples_split,
        };
        self.forest.plant(
            self.params.n_trees,
            f64::INFINITY,
            pause,
            self.params.seed,
            TargetMoments::new,
        );
    }

    /// Re-estimates θ from the labels (by the heuristic, or by maximising the marginal
    /// likelihood) and, in the exact modes, every tree's upward messages.
    fn refresh(&mut self) {
        let Some(d) = self.forest.store.n_features else {
            return;
        };
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

    /// Runs `visit(row, tree components)` for every row of `x` and every tree, rows in
    /// parallel blocks; `init` makes each row's accumulator.
    fn per_row<T: FeatureValue, R: Send>(
        &self,
        x: &[T],
        n_features: usize,
        init: impl Fn() -> R + Sync,
        visit: impl Fn(&mut R, &[Component]) + Sync,
    ) -> Result<Vec<R>> {
        let theta = self.theta.ok_or(MondrianError::NotFitted)?;
        let rows = self.forest.store.rows(x, n_features)?;
        let scaled = self.forest.store.scale(&rows)?;
        let model = GaussianModel {
            theta,
            mode: self.params.mode,
        };
        let mut out: Vec<R> = (0..rows.n_rows()).map(|_| init()).collect();
        let features = self.forest.store.data().features;
        let no_messages: Vec<Upward> = Vec::new();
        // Per row: its accumulator and the steps of its path (about 20 on the UCI sets).
        let row_bytes = std::mem::size_of::<R>() + 20 * std::mem::size_of::<PathStep>();
        let block = self
            .forest
            .pool
            .prediction_block_rows(rows.n_rows(), row_bytes);
        self.forest
            .pool
            .for_each_block(&mut out, block, &scaled, block * n_features, |acc, xs| {
                let mut steps: Vec<Vec<PathStep>> = Vec::new();
                let mut comps = Vec::new();
                for (t, unit) in self.forest.trees.iter().enumerate() {
                    let msgs = self.messages.get(t).unwrap_or(&no_messages);
                    unit.tree.weighed_paths(
                        xs,
                        features,
                        &mut steps,
                        |node| NodeStatistics::prefetch(&unit.stats, node),
                        |start, paths| {
                            for (a, s) in acc[start..].iter_mut().zip(paths) {
                                comps.clear();
                                model.tree_components(&unit.tree, &unit.stats, msgs, s, &mut comps);
                                visit(a, &comps);
                            }
                        },
                    );
                }
            });
        Ok(out)
    }

    /// Predictive mean and variance at each row of `x` (row-major, `n_features` columns);
    /// any x ∈ R^D is allowed (§3).
    pub fn predict<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
    ) -> Result<RegressionPrediction> {
        // Welford over the trees' means, plus the sum of their variances (§3.3).
        let stats = self.per_row(
            x,
            n_features,
            || (Moments::default(), 0.0f64),
            |(means, var_sum), comps| {
                let (m, v) = mixture_moments(comps);
                means.push(m, 1.0);
                *var_sum += v;
            },
        )?;
        Ok(RegressionPrediction {
            mean: stats.iter().map(|(m, _)| m.mean).collect(),
            variance: stats.iter().map(|(m, v)| v / m.n + m.variance()).collect(),
            between_trees: stats.iter().map(|(m, _)| m.variance()).collect(),
        })
    }

    /// `log p(y | x)` of the full forest mixture at each row (the negative of the NLPD
    /// summand; §3.3), by log-sum-exp over every component of every tree.
    pub fn log_density<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[f64],
    ) -> Result<Vec<f64>> {
        let n_rows = x.len() / n_features.max(1);
        Self::check_targets(y, n_rows)?;
        let m = self.forest.trees.len() as f64;
        let pooled = self.per_row(
            x,
            n_features,
            Vec::new,
            |all: &mut Vec<Component>, comps| {
                all.extend(comps.iter().map(|c| Component {
                    weight: c.weight / m,
                    ..*c
                }))
            },
        )?;
        Ok(pooled
            .iter()
            .zip(y)
            .map(|(comps, &v)| mixture_log_density(comps, v))
            .collect())
    }

    /// The predictive CDF `P(Y ≤ y | x)` of the full forest mixture at each row (its
    /// probability integral transform, uniform on (0, 1) for a calibrated forest).
    pub fn cdf<T: FeatureValue>(&self, x: &[T], n_features: usize, y: &[f64]) -> Result<Vec<f64>> {
        let n_rows = x.len() / n_features.max(1);
        Self::check_targets(y, n_rows)?;
        Ok(self
            .pooled_components(x, n_features)?
            .iter()
            .zip(y)
            .map(|(comps, &v)| mixture_cdf(comps, v).clamp(0.0, 1.0))
            .collect())
    }

    /// Central interval at `level` per row from the forest's full predictive mixture (its
    /// quantiles at [`interval_probabilities`](Self::interval_probabilities): `(1 − level)/2`
    /// and `(1 + level)/2`, or recalibrated ones, see [`Calibration`]), rather than the
    /// Gaussian moment match of [`RegressionPrediction::interval`].
    pub fn mixture_interval<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        level: f64,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        let (lo, hi) = self.interval_probabilities(level)?;
        Ok(self
            .pooled_components(x, n_features)?
            .iter()
            .map(|c| (mixture_quantile(c, lo), mixture_quantile(c, hi)))
            .unzip())
    }

    /// Every tree's predictive components at each row, pooled: the forest's mixture.
    fn pooled_components<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
    ) -> Result<Vec<Vec<Component>>> {
        self.per_row(
            x,
            n_features,
            Vec::new,
            |all: &mut Vec<Component>, comps| all.extend_from_slice(comps),
        )
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
        let held: Vec<f64> = store.live_targets().collect();
        let scale = held.iter().fold(0.0f64, |m, y| m.max(y.abs()));
        if !targets_ok
            || !self.labels.is_valid()
            || !self.labels.agrees_with(&Moments::of(&held), scale)
        {
            return Err(MondrianError::CorruptModel(
                "the stored targets do not match the model".into(),
            ));
        }
        self.forest
            .check_decoded(self.params.n_trees, f64::INFINITY, |stats, tree| {
                stats.check_decoded(tree, &store.targets)
            })?;
        match &self.calibration {
            Some(p) if check_pits(p).is_err() || !p.is_sorted() => {
                Err(MondrianError::CorruptModel(
                    "the calibration PITs are not sorted values in [0, 1]".into(),
                ))
            }
            _ => Ok(()),
        }
    }
}

/// PITs must be probabilities, and at least one.
fn check_pits(pits: &[f64]) -> Result<()> {
    if pits.is_empty() {
        return Err(MondrianError::InvalidParameter {
            name: "calibration",
            reason: "needs at least one PIT".into(),
        });
    }
    match pits.iter().find(|p| !(0.0..=1.0).contains(*p)) {
        Some(p) => Err(MondrianError::InvalidParameter {
            name: "calibration",
            reason: format!("PIT {p} is not in [0, 1]"),
        }),
        None => Ok(()),
    }
}
