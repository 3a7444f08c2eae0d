//! The hyper-parameters of a [`MondrianForestRegressor`](super::MondrianForestRegressor)
//! and how its intervals are calibrated.

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::MondrianForestRegressor;

use crate::data::{validate_sizes, FeatureWeights, Scaling};
use crate::error::{MondrianError, Result};
use crate::stats::gaussian::{HyperSettings, PredictionMode};

/// Hyper-parameters of a [`MondrianForestRegressor`] (spec §8). The defaults were chosen by
/// measurement (see [`Default`](#impl-Default-for-RegressorParams)); [`thesis`](Self::thesis)
/// gives the thesis' settings.
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
    ///
    /// Not saved with the model, so that model files do not depend on it: a loaded model
    /// uses every core until `set_n_threads` says otherwise.
    #[serde(skip)]
    pub n_threads: usize,
    /// A memory budget in bytes for training: a call whose forest would need more (by
    /// [`memory::forest_bytes`](crate::memory::forest_bytes)) is refused with
    /// [`MondrianError::MemoryLimit`](crate::MondrianError::MemoryLimit) before anything
    /// grows. `None` uses what the machine has left ([`memory::machine_room`](crate::memory::machine_room)).
    /// Not saved with the model.
    #[serde(skip)]
    pub max_memory: Option<u64>,
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

/// Most trees of the forests a regressor fits on cross-validation folds (to choose the
/// relevance power of [`FeatureWeights::RelevanceCv`] and to compute the PITs of
/// [`Calibration::Cv`]). The cost grows with every tree, while on the UCI sets the powers
/// chosen and the coverage of the recalibrated intervals were the same with 15, 20, 25 or
/// 100 trees per fold forest (`experiments/regression/notes.md`).
pub const CV_MAX_TREES: usize = 20;

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
    /// of the same parameters (at most [`CV_MAX_TREES`] trees) fitted by 5-fold
    /// cross-validation without the row: with [`FeatureWeights::RelevanceCv`] the forests
    /// of the chosen power that the cross-validation of the power has already fitted (their
    /// weights learnt on the other folds), else forests with the weights the call fixes,
    /// about `5 · CV_MAX_TREES / n_trees` fits' extra work. Later `partial_fit` calls keep
    /// those PITs; [`MondrianForestRegressor::calibrate`] replaces them.
    Cv,
    /// [`Cv`](Self::Cv) when the first training call holds at least
    /// [`AUTO_MIN_ROWS`](crate::AUTO_MIN_ROWS) rows, [`None`](Self::None) otherwise (so a
    /// stream can start from one point).
    Auto,
}

impl Calibration {
    /// Reads `none`, `cv` or `auto`, as the CLI and the Python package spell it.
    pub fn parse(spec: &str) -> Result<Calibration> {
        match spec.trim() {
            "none" => Ok(Calibration::None),
            "cv" => Ok(Calibration::Cv),
            "auto" => Ok(Calibration::Auto),
            other => Err(MondrianError::InvalidParameter {
                name: "calibration",
                reason: format!("`{other}` is not `none`, `cv` or `auto`"),
            }),
        }
    }

    /// Whether a first training call of `n_rows` rows computes cross-validated PITs.
    pub fn applies_to(self, n_rows: usize) -> bool {
        match self {
            Calibration::None => false,
            Calibration::Cv => true,
            Calibration::Auto => n_rows >= crate::AUTO_MIN_ROWS,
        }
    }
}

impl Default for RegressorParams {
    /// The defaults chosen by measurement on eight UCI sets
    /// (`experiments/regression/defaults.py`): 100 trees, blocks of fewer than 5 points are
    /// leaves, the fast predictive, relevance feature weights whose power is chosen by
    /// cross-validation and intervals recalibrated by the same cross-validation, both
    /// when the first training call holds at least [`AUTO_MIN_ROWS`](crate::AUTO_MIN_ROWS)
    /// rows ([`FeatureWeights::Auto`], [`Calibration::Auto`]). [`thesis`](Self::thesis)
    /// gives the thesis' settings.
    fn default() -> Self {
        RegressorParams {
            n_trees: 100,
            min_samples_split: 5,
            mode: PredictionMode::Fast,
            feature_weights: FeatureWeights::Auto,
            calibration: Calibration::Auto,
            ..RegressorParams::thesis()
        }
    }
}

impl RegressorParams {
    /// The thesis' settings (ch. 6; spec §8): 10 trees, min_samples_split 10, the exact
    /// predictive, uniform feature weights and the predictive's own intervals.
    pub fn thesis() -> Self {
        RegressorParams {
            n_trees: 10,
            min_samples_split: 10,
            mode: PredictionMode::Exact,
            hyper: HyperSettings::default(),
            seed: 0,
            n_threads: 0,
            max_memory: None,
            bagging: false,
            scaling: Scaling::FirstBatch,
            feature_weights: FeatureWeights::Uniform,
            calibration: Calibration::None,
            window: None,
        }
    }

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
