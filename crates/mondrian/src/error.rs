//! The library's one error type.

use thiserror::Error;

/// Everything that can go wrong in the library. Every variant says what was wrong with the
/// caller's input in words a user can act on; no user input ever causes a panic.
#[derive(Debug, Error)]
pub enum MondrianError {
    /// A hyper-parameter is out of its valid range.
    #[error("invalid parameter `{name}`: {reason}")]
    InvalidParameter {
        /// Name of the parameter.
        name: &'static str,
        /// Why the value was refused.
        reason: String,
    },
    /// No rows were given where at least one is needed.
    #[error("empty data: {0}")]
    EmptyData(&'static str),
    /// A row has the wrong number of features.
    #[error("row {row} has {got} features, expected {expected}")]
    WidthMismatch {
        /// 0-based row index within the call.
        row: usize,
        /// Width the model expects.
        expected: usize,
        /// Width that was given.
        got: usize,
    },
    /// The feature matrix length is not a multiple of the number of features.
    #[error(
        "feature buffer of length {len} is not a whole number of rows of {n_features} features"
    )]
    RaggedMatrix {
        /// Buffer length.
        len: usize,
        /// Declared width.
        n_features: usize,
    },
    /// A feature is NaN or infinite.
    #[error("row {row}, feature {feature}: value {value} is not finite")]
    NonFinite {
        /// 0-based row index within the call.
        row: usize,
        /// 0-based feature index.
        feature: usize,
        /// The offending value.
        value: f64,
    },
    /// A regression target is NaN or infinite.
    #[error("row {row}: target {value} is not a finite number")]
    NonFiniteTarget {
        /// 0-based row index within the call.
        row: usize,
        /// The offending value.
        value: f64,
    },
    /// A finite regression target too large for the model's Gaussian statistics.
    #[error("row {row}: target {value:e} is too large (|y| must be at most {max:e}; rescale the targets)")]
    TargetOverflow {
        /// 0-based row index within the call.
        row: usize,
        /// The offending value.
        value: f64,
        /// Largest magnitude allowed.
        max: f64,
    },
    /// A finite feature too large for the trees' `f32` storage once scaled.
    #[error("row {row}, feature {feature}: value {value:e} is too large for the model's feature range once scaled (|x| must stay below about 3.4e38 after scaling)")]
    FeatureOverflow {
        /// 0-based row index within the call.
        row: usize,
        /// 0-based feature index.
        feature: usize,
        /// The offending value.
        value: f64,
    },
    /// Features and labels disagree in length.
    #[error("{n_rows} feature rows but {n_labels} labels")]
    LengthMismatch {
        /// Rows of features.
        n_rows: usize,
        /// Labels given.
        n_labels: usize,
    },
    /// Sample weights and rows disagree in length.
    #[error("{n_rows} feature rows but {n_weights} sample weights")]
    SampleWeightLength {
        /// Rows of features.
        n_rows: usize,
        /// Weights given.
        n_weights: usize,
    },
    /// A sample weight is negative, NaN, infinite or too large.
    #[error("row {row}: sample weight {value} is not a number from 0 to {max}")]
    InvalidSampleWeight {
        /// 0-based row index within the call.
        row: usize,
        /// The offending value.
        value: f64,
        /// Largest weight allowed.
        max: f64,
    },
    /// A label is outside the declared classes.
    #[error(
        "row {row}: label {label} is not one of the {n_classes} declared classes (0 to {})",
        .n_classes.saturating_sub(1)
    )]
    LabelOutOfRange {
        /// 0-based row index within the call.
        row: usize,
        /// The label.
        label: usize,
        /// Declared number of classes.
        n_classes: usize,
    },
    /// `forget` named a point the model does not hold.
    #[error(
        "point {id} is not in the model: training points are numbered by arrival from 0 \
         ({seen} so far), and a point forgotten, named twice, or out of the window is gone"
    )]
    UnknownPoint {
        /// The id asked for.
        id: u64,
        /// Rows given to training so far (ids run from 0 below this).
        seen: u64,
    },
    /// Prediction was asked of a model that has not seen any data.
    #[error("the model has not been fitted yet")]
    NotFitted,
    /// A saved model could not be read back.
    #[error("cannot load model: {0}")]
    CorruptModel(String),
    /// A saved model was written by an incompatible format version.
    #[error(
        "model file format version {found} is not supported (this build reads version {supported})"
    )]
    IncompatibleVersion {
        /// Version in the file.
        found: u32,
        /// Version this build reads.
        supported: u32,
    },
    /// A compact model (see `compact()`) keeps no training points, so it cannot be trained
    /// further.
    #[error("the model was compacted for prediction and keeps no training points, so it cannot be trained further (train a new model, or keep an uncompacted copy to train)")]
    CompactModel,
    /// A training call would need more memory than the limit allows; nothing was changed.
    #[error(
        "not enough memory: {what} would need about {}, more than {limited_by} ({}); use fewer trees or points, a larger min_samples_split, or a larger memory budget (the CLI's --max-memory, Python's max_memory=)",
        crate::memory::human_bytes(*needed),
        crate::memory::human_bytes(*limit)
    )]
    MemoryLimit {
        /// Estimated bytes the call needs.
        needed: u64,
        /// Bytes the limit allows.
        limit: u64,
        /// Where the limit comes from.
        limited_by: crate::memory::LimitSource,
        /// The forest being grown, in words.
        what: String,
    },
    /// Shards of a forest (or their partial predictions) that do not make up one forest:
    /// different parameters or points, overlapping or missing tree ranges, no shards.
    #[error("the shards do not make up one forest: {0}")]
    ShardMismatch(String),
    /// An I/O failure while saving or loading.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

/// Result alias used across the library.
pub type Result<T> = std::result::Result<T, MondrianError>;
