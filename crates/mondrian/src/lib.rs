//! Mondrian processes restricted to data, and the models built on them.
//!
//! One engine ([`tree::MondrianTree`] over the primitives of [`process`]) carries every
//! model; a model contributes the statistics it keeps per node ([`tree::NodeStatistics`]).
//! The specifications cited in the docs (`spec/…`) are the project's implementable
//! readings of the papers.
//!
//! * [`MondrianForestClassifier`]: online Mondrian forests with hierarchical label
//!   smoothing (Lakshminarayanan, Roy & Teh 2014; spec `mf-classification.md`).
#![warn(missing_docs)]

pub mod data;
pub mod error;
pub mod forest;
pub mod metrics;
pub mod persist;
pub mod process;
pub mod simd;
pub mod stats;
pub mod tree;

pub use data::{
    FeatureScaler, FeatureValue, FeatureWeights, RelevanceChoice, Rows, Scaling,
    RELEVANCE_CV_FOLDS, RELEVANCE_CV_POWERS,
};
pub use error::{MondrianError, Result};
pub use forest::{
    Calibration, ClassifierParams, ForestSummary, MondrianForestClassifier,
    MondrianForestRegressor, RegressionPrediction, RegressorParams,
};
pub use stats::gaussian::{Estimate, HyperSettings, NoiseRule, PredictionMode};
pub use stats::label::BranchCounts;
