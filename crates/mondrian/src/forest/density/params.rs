//! Parameters of [`MondrianPolyaForest`](super::MondrianPolyaForest) (spec
//! `mondrian-polya-forest.md` §9.1, §13).

use serde::{Deserialize, Serialize};

use crate::data::{validate_sizes, FeatureScaler, Scaling};
use crate::error::{MondrianError, Result};
use crate::model::Params;

/// Which of the two Pólya forests (spec §0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum PolyaVariant {
    /// sMPF (§4): a Pólya tree on each Mondrian tree of the data, cuts inside the boxes of
    /// the points; takes insertions and exact deletions anywhere, the domain grows with
    /// the data.
    #[default]
    Streaming,
    /// bMPF (§3): a Pólya tree on a Mondrian process partition of the first batch's box,
    /// which does not depend on the points; insertions and deletions move counts only,
    /// and later points outside that box are held but lie in no cell (mass 0).
    Batch,
}

impl PolyaVariant {
    /// Reads `streaming` or `batch` (also `smpf`, `bmpf`).
    pub fn parse(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "streaming" | "smpf" | "stream" => Ok(PolyaVariant::Streaming),
            "batch" | "bmpf" => Ok(PolyaVariant::Batch),
            other => Err(MondrianError::InvalidParameter {
                name: "variant",
                reason: format!("`{other}` is not `streaming` or `batch`"),
            }),
        }
    }
}

/// Parameters of a Mondrian Pólya forest; the defaults are the paper's (§9.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolyaParams {
    /// Streaming (sMPF, default) or batch (bMPF).
    pub variant: PolyaVariant,
    /// Trees M (100).
    pub n_trees: usize,
    /// Absolute depth cap: no node deeper (10; `None`: no cap).
    pub max_depth: Option<usize>,
    /// Lifetime λ (`+∞`). A batch forest needs λ or the depth cap finite.
    pub lifetime: f64,
    /// Prior strength γ of the Pólya tree (1).
    pub gamma: f64,
    /// How features map into the trees' space. `None` (default): the paper's rule,
    /// min–max scaling from the first batch when there are at least
    /// [`SCALE_FROM_FEATURES`] features, the raw features otherwise. The cut dimensions
    /// are drawn in proportion to side lengths, so scaling changes the model; masses do
    /// not depend on a uniform scale.
    pub scaling: Option<Scaling>,
    /// Master seed; tree t draws from (seed, t).
    pub seed: u64,
    /// Worker threads (results do not depend on it).
    pub n_threads: usize,
    /// Keep only the last `window` points (exact deletion of the older ones).
    pub window: Option<usize>,
    /// Refuse training that would need more memory than this many bytes (`None`: the
    /// machine's available memory).
    #[serde(skip)]
    pub max_memory: Option<u64>,
}

/// Features from which [`PolyaParams::scaling`]'s default min–max scales (the paper scales
/// Musk, Arrhythmia, Mnist, Optdigits and Speech, D ≥ 50; §9.1).
pub const SCALE_FROM_FEATURES: usize = 50;

impl Default for PolyaParams {
    fn default() -> Self {
        PolyaParams {
            variant: PolyaVariant::Streaming,
            n_trees: 100,
            max_depth: Some(10),
            lifetime: f64::INFINITY,
            gamma: 1.0,
            scaling: None,
            seed: 0,
            n_threads: 1,
            window: None,
            max_memory: None,
        }
    }
}

impl PolyaParams {
    /// The scaling used on data of `n_features` features.
    pub fn scaling_for(&self, n_features: usize) -> Scaling {
        match &self.scaling {
            Some(s) => s.clone(),
            None if n_features >= SCALE_FROM_FEATURES => Scaling::FirstBatch,
            None => Scaling::Identity,
        }
    }

    /// Checks every value once.
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
        if !(self.gamma.is_finite() && self.gamma > 0.0) {
            return bad("gamma", "must be finite and > 0");
        }
        if self.max_depth == Some(0) {
            return bad("max_depth", "must be at least 1 (or no cap)");
        }
        if self.max_depth.is_some_and(|m| m > 1000) {
            return bad("max_depth", "must be at most 1000 (or no cap)");
        }
        if self.variant == PolyaVariant::Batch
            && self.max_depth.is_none()
            && self.lifetime.is_infinite()
        {
            return bad(
                "max_depth",
                "a batch forest cuts its domain down to the depth cap or the lifetime: \
                 give a depth cap or a finite lifetime",
            );
        }
        if self.variant == PolyaVariant::Batch && self.max_depth.is_some_and(|m| m > 24) {
            return bad(
                "max_depth",
                "a batch forest has 2^depth cells per tree; at most 24 is allowed",
            );
        }
        crate::data::validate_window(self.window)?;
        if let Some(Scaling::Ranges(r)) = &self.scaling {
            FeatureScaler::from_ranges(r)?;
        }
        Ok(())
    }
}

impl Params for PolyaParams {
    fn validate(&self) -> Result<()> {
        PolyaParams::validate(self)
    }
}
