//! The hyper-parameters of the classifier and their checks.

use serde::{Deserialize, Serialize};

use crate::data::{validate_sizes, FeatureScaler, FeatureWeights, Scaling};
use crate::error::{MondrianError, Result};
use crate::model::Params;
use crate::stats::label::BranchCounts;

/// Hyper-parameters of a [`MondrianForestClassifier`](super::MondrianForestClassifier) (spec §1.5). The defaults are the
/// paper's experimental settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassifierParams {
    /// Number of trees M.
    pub n_trees: usize,
    /// Lifetime λ of the Mondrian process; `f64::INFINITY` grows trees until every block
    /// is paused or holds identical points.
    pub lifetime: f64,
    /// The discount rate is γ = `discount_factor` × D (spec §3.1: 10·D on \[0,1\] features),
    /// with D = Σ_d w_d under feature weights.
    pub discount_factor: f64,
    /// Master seed; tree t draws from a generator seeded by (seed, t).
    pub seed: u64,
    /// Worker threads for training and prediction; 0 uses every core. The fitted model
    /// does not depend on it. With more than one, a point-by-point stream of `partial_fit`
    /// calls has a helper thread per further core spin for up to half a millisecond after
    /// each call, ready for the next point (at most that much of a core per call).
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
    /// Online bagging: each tree takes each example Poisson(1) times (spec
    /// `bayesian-trees.md` §6.2). Keeps online ≡ batch.
    pub bagging: bool,
    /// Pause blocks whose labels are all equal (spec §2.3).
    pub pause_on_pure: bool,
    /// Pause blocks with fewer points than this (spec §5).
    pub min_samples_split: usize,
    /// Counts of the branch-off node in prediction (spec §4.3).
    pub branch_counts: BranchCounts,
    /// Number of classes, when known up front. Otherwise K grows with the largest label
    /// seen so far (see [`MondrianForestClassifier::partial_fit`](super::MondrianForestClassifier::partial_fit)).
    pub n_classes: Option<usize>,
    /// How features are scaled before they reach the trees.
    pub scaling: Scaling,
    /// Per-feature stretch after the scaling, fixed by the first training call;
    /// [`FeatureWeights::Relevance`] learns it from a pilot forest (n·Gini removed).
    pub feature_weights: FeatureWeights,
    /// Keep only the last `window` training points (a sliding window): older points are
    /// deleted exactly as newer ones arrive, so the forest is distributed as a batch forest
    /// on the last `window` points and its memory is bounded by them. `None` keeps all.
    pub window: Option<usize>,
}

impl Default for ClassifierParams {
    fn default() -> Self {
        ClassifierParams {
            n_trees: 100,
            lifetime: f64::INFINITY,
            discount_factor: 10.0,
            seed: 0,
            n_threads: 0,
            max_memory: None,
            bagging: false,
            pause_on_pure: true,
            min_samples_split: 2,
            branch_counts: BranchCounts::Paper,
            n_classes: None,
            scaling: Scaling::FirstBatch,
            feature_weights: FeatureWeights::Uniform,
            window: None,
        }
    }
}

impl ClassifierParams {
    /// Checks every value once, so training never meets an invalid setting.
    pub fn validate(&self) -> Result<()> {
        let bad = |name, reason: &str| {
            Err(MondrianError::InvalidParameter {
                name,
                reason: reason.to_string(),
            })
        };
        validate_sizes(self.n_trees, self.n_threads)?;
        if self.lifetime.is_nan() || self.lifetime <= 0.0 {
            return bad("lifetime", "must be > 0 (or infinite)");
        }
        if self.min_samples_split == 0 {
            return bad("min_samples_split", "must be at least 1");
        }
        crate::data::validate_window(self.window)?;
        if !self.discount_factor.is_finite() || self.discount_factor < 0.0 {
            return bad("discount_factor", "must be finite and ≥ 0");
        }
        if self.n_classes == Some(0) {
            return bad("n_classes", "must be at least 1");
        }
        if self.n_classes.is_some_and(|k| k > u32::MAX as usize) {
            return bad("n_classes", "too many classes");
        }
        if let Scaling::Ranges(r) = &self.scaling {
            FeatureScaler::from_ranges(r)?;
        }
        self.feature_weights.validate(None)
    }
}

impl Params for ClassifierParams {
    fn validate(&self) -> Result<()> {
        ClassifierParams::validate(self)
    }
}
