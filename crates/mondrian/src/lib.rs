//! Mondrian processes restricted to data, and the models built on them.
//!
//! One engine ([`tree::MondrianTree`] over the primitives of [`process`]) carries every
//! model; a model contributes the statistics it keeps per node ([`tree::NodeStatistics`]).
//! The specifications cited in the docs (`spec/…`) are the project's implementable
//! readings of the papers.
//!
//! * [`MondrianForestClassifier`]: online Mondrian forests with hierarchical label
//!   smoothing (Lakshminarayanan, Roy & Teh 2014; spec `mf-classification.md`).
//! * [`MondrianForestRegressor`]: Mondrian forest regression with predictive uncertainty
//!   (Lakshminarayanan, Roy & Teh 2016; spec `mf-regression.md`).
//!
//! Models save and load through [`Persistent`]; [`described`] adds files that keep the
//! data's label values and feature names, and reads a file of any kind.
//!
//! Trees grow by batch sampling or point by point with the same distribution, and shed
//! points by exact deletion ([`tree::MondrianTree::delete`]), so every model can keep a
//! sliding window of its last W points or [`forget`](model::Forget) given ones and stay
//! distributed as if trained on what it holds. The operations every model offers are the
//! traits of [`model`]; `ARCHITECTURE.md` draws the modules.
//!
//! ```
//! use mondrian::{ClassifierParams, MondrianForestClassifier};
//! // Keep the last 3 points of a stream.
//! let params = ClassifierParams { n_trees: 10, window: Some(3), ..Default::default() };
//! let mut forest = MondrianForestClassifier::new(params)?;
//! for (i, x) in [0.1, 0.2, 0.8, 0.9, 0.15].iter().enumerate() {
//!     forest.partial_fit(&[*x], 1, &[usize::from(*x > 0.5)])?;
//!     assert_eq!(forest.n_points(), (i + 1).min(3));
//! }
//! assert_eq!(forest.point_ids(), vec![2, 3, 4]);
//! forest.forget(&[3])?; // as if the point 0.9 had never been seen
//! assert_eq!(forest.point_ids(), vec![2, 4]);
//! # Ok::<(), mondrian::MondrianError>(())
//! ```
#![warn(missing_docs)]

/// Bayesian decision trees: the CGM prior, conjugate leaves, top-down SMC (spec `bayesian-trees.md`).
pub mod bayes;
pub mod data;
pub mod described;
pub mod error;
pub mod forest;
pub mod kernel;
pub mod memory;
pub mod metrics;
pub mod model;
pub mod persist;
pub mod process;
pub mod simd;
pub mod stats;
pub mod tree;

pub use data::{
    FeatureScaler, FeatureValue, FeatureWeights, RelevanceChoice, Rows, Scaling, AUTO_MIN_ROWS,
    RELEVANCE_CV_FOLDS, RELEVANCE_CV_POWERS,
};
pub use error::{MondrianError, Result};
pub use forest::{
    Calibration, ClassifierParams, Evaluation, Explanation, ForestSummary, LeafKind,
    MondrianForestClassifier, MondrianForestRegressor, MondrianPolyaForest, PolyaLeaf, PolyaParams,
    PolyaSum, PolyaVariant, ProbaSum, Progress, RegressionPrediction, RegressionSums,
    RegressorParams, RowScore, Step, TreeExplanation, CV_MAX_TREES, SCALE_FROM_FEATURES,
};
pub use persist::Persistent;
pub use stats::gaussian::{Estimate, HyperSettings, NoiseRule, PredictionMode};
pub use stats::label::BranchCounts;
