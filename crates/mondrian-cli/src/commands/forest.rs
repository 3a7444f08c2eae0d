//! The forest commands `train`, `eval` and `predict`: their flags, and the hand-off to the
//! task that does the work, chosen once by `--task` or by the kind of a model file.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use mondrian::described::DescribedRegressor;
use mondrian::{FeatureWeights, Persistent, Scaling};

use super::classify::Classify;
use super::regress::Regress;
use super::stream::{StreamArgs, Streamer};
use super::{read_model, write_output, CliError, ModelFile};
use crate::io::Dataset;

/// The half of `train`, `eval`, `predict` and `stream` that depends on the task: one
/// implementation per task (`classify.rs`, `regress.rs`), so that no command branches on it.
pub(crate) trait Task {
    /// Trains on `args.train` and saves the model to `args.model`.
    fn train(&self, args: &TrainArgs) -> Result<(), CliError>;
    /// Trains on `args.train` and prints the scores on `args.test`.
    fn eval(&self, args: &EvalArgs) -> Result<(), CliError>;
    /// The text `predict` writes: the predictions for `args.input` of the model in `model`.
    fn predict(&self, model: ModelFile, args: &PredictArgs) -> Result<String, CliError>;
    /// Reads `args.input` and makes the untrained model `stream` feeds its rows to.
    fn streamer(&self, args: &StreamArgs) -> Result<Box<dyn Streamer>, CliError>;
}

/// The implementation of the task `--task` names.
pub(crate) fn chosen(task: TaskArg) -> &'static dyn Task {
    match task {
        TaskArg::Classification => &Classify,
        TaskArg::Regression => &Regress,
    }
}

/// The task that reads a model file, by the kind the file names. Anything else, junk
/// included, goes to the classifier, whose loading error then says what is wrong.
fn task_of_model(model: &mut ModelFile) -> &'static dyn Task {
    use std::io::BufRead;
    // The header sits in the reader's first buffer: peek at it without consuming.
    let head = model.fill_buf().unwrap_or(&[]);
    match mondrian::persist::kind_of(head) {
        Some(kind) if kind == DescribedRegressor::KIND => &Regress,
        _ => &Classify,
    }
}

pub(crate) fn train(args: &TrainArgs) -> Result<(), CliError> {
    chosen(args.forest.model.task).train(args)
}

pub(crate) fn eval(args: &EvalArgs) -> Result<(), CliError> {
    chosen(args.forest.model.task).eval(args)
}

pub(crate) fn predict(args: &PredictArgs) -> Result<(), CliError> {
    let mut model = read_model(&args.model)?;
    let text = task_of_model(&mut model).predict(model, args)?;
    write_output(args.output.as_deref(), &text)
}

/// Per-feature (min, max) of a training file as the scaling. It is fixed from the whole
/// file, as a user who knows the feature ranges would fix it for a stream; batch and online
/// runs then see identical features.
pub(crate) fn training_scaling(train: &Dataset) -> Scaling {
    let d = train.n_features;
    let mut ranges = vec![(f64::INFINITY, f64::NEG_INFINITY); d];
    for row in train.x.chunks_exact(d) {
        for (r, &v) in ranges.iter_mut().zip(row) {
            r.0 = r.0.min(v);
            r.1 = r.1.max(v);
        }
    }
    Scaling::Ranges(ranges)
}

// ---------------------------------------------------------------------------------
// Flags

#[derive(Args)]
pub(crate) struct TrainArgs {
    /// Training data: CSV (header, label in the last column; .csv.gz too) or LIBSVM; `-`
    /// reads standard input.
    #[arg(long)]
    pub(crate) train: PathBuf,
    /// Where to write the model.
    #[arg(long)]
    pub(crate) model: PathBuf,
    /// Save a compact model: the same predictions from a file several times smaller
    /// (the state only training needs is dropped, the rest compressed), which cannot be
    /// trained further.
    #[arg(long)]
    pub(crate) compact: bool,
    #[command(flatten)]
    pub(crate) forest: ForestArgs,
}

#[derive(Args)]
pub(crate) struct PredictArgs {
    /// The model written by `mondrian train`.
    #[arg(long)]
    pub(crate) model: PathBuf,
    /// Rows to predict: CSV with the model's features (a trailing label column is
    /// ignored) or LIBSVM; `-` reads standard input.
    #[arg(long)]
    pub(crate) input: PathBuf,
    /// Write predictions here instead of standard output.
    #[arg(long)]
    pub(crate) output: Option<PathBuf>,
    /// Print class probabilities (one column per class) instead of labels.
    #[arg(long)]
    pub(crate) proba: bool,
    /// Regression models: also print the central interval at this level (e.g. 0.9).
    #[arg(long)]
    pub(crate) interval: Option<f64>,
    /// Worker threads (0 = all cores).
    #[arg(long, default_value_t = 0, value_parser = parse_threads)]
    pub(crate) threads: usize,
    /// Predict by column position even when the input's header names other columns than
    /// the training file's (by default that is an error naming the first column that
    /// differs).
    #[arg(long)]
    pub(crate) ignore_names: bool,
}

#[derive(Args)]
pub(crate) struct EvalArgs {
    /// Training data.
    #[arg(long)]
    pub(crate) train: PathBuf,
    /// Test data (same columns).
    #[arg(long)]
    pub(crate) test: PathBuf,
    #[command(flatten)]
    pub(crate) forest: ForestArgs,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The forest's settings, shared by `train`, `eval` and `curve`: the model's own
/// ([`ModelArgs`], which `stream` takes alone) and how training reads the file.
#[derive(Args, Clone)]
pub(crate) struct ForestArgs {
    #[command(flatten)]
    pub(crate) model: ModelArgs,
    /// Stream the training data one point at a time through online training.
    #[arg(long)]
    pub(crate) online: bool,
    /// Per-feature stretch of the trees' space: `uniform`, `relevance` (learnt from a pilot
    /// forest on the training data; `relevance:P` raises the learnt weights to the power
    /// P; `relevance:cv` chooses P among 0, 0.25, 0.5, 1, 2 by 5-fold cross-validation of
    /// the held-out log-loss or NLPD), `auto` (`relevance:cv` when the training data has at
    /// least 100 rows, else `uniform`) or one weight per feature, comma-separated
    /// [default: uniform for classification, auto for regression].
    #[arg(long, value_parser = parse_feature_weights)]
    pub(crate) feature_weights: Option<FeatureWeights>,
    /// Regression: `cv` recalibrates the prediction intervals by 5-fold cross-validation
    /// of the training data (quantile recalibration); `none` keeps the forest's own
    /// quantiles; `auto` is `cv` when the training data has at least 100 rows, else `none`
    /// [default: auto].
    #[arg(long, value_enum)]
    pub(crate) calibration: Option<CalibrationArg>,
}

impl ForestArgs {
    /// The settings of a model fed one row at a time from its first row: nothing learnt
    /// from the whole file beforehand (the default weights and calibration, which a first
    /// call of one row leaves uniform and off).
    pub(crate) fn streaming(model: &ModelArgs) -> ForestArgs {
        ForestArgs {
            model: model.clone(),
            online: true,
            feature_weights: None,
            calibration: None,
        }
    }
}

/// The settings of the forest itself, shared by `train`, `eval`, `curve` and `stream`.
#[derive(Args, Clone)]
pub(crate) struct ModelArgs {
    /// What to learn: class labels (integers) or real-valued targets.
    #[arg(long, value_enum, default_value_t = TaskArg::Classification)]
    pub(crate) task: TaskArg,
    /// Number of trees [default: 100].
    #[arg(long)]
    pub(crate) trees: Option<usize>,
    /// Lifetime λ of the classification forest: `inf` or a number > 0 [default: inf]. The
    /// regression forest has none (its trees grow until blocks hold fewer than
    /// --min-samples-split points) and refuses it.
    #[arg(long, value_parser = parse_lifetime, allow_negative_numbers = true)]
    pub(crate) lifetime: Option<f64>,
    /// Discount rate γ = factor × number of features.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) discount_factor: f64,
    /// Master seed.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Worker threads (0 = all cores); the model does not depend on it.
    #[arg(long, default_value_t = 0, value_parser = parse_threads)]
    pub(crate) threads: usize,
    /// Memory budget for training, e.g. 500M, 4G or 4GiB: a model estimated to need more
    /// is refused before it grows [default: what the machine has left]
    #[arg(long, value_parser = parse_memory)]
    pub(crate) max_memory: Option<u64>,
    /// Online bagging: every tree takes every point Poisson(1) times.
    #[arg(long)]
    pub(crate) bagging: bool,
    /// Do not pause label-pure blocks.
    #[arg(long)]
    pub(crate) no_pause: bool,
    /// Pause blocks with fewer points than this [default: 2 for classification, 5 for
    /// regression].
    #[arg(long)]
    pub(crate) min_samples_split: Option<usize>,
    /// Counts of the branch-off node in prediction (classification).
    #[arg(long, value_enum, default_value_t = BranchArg::Paper)]
    pub(crate) branch_counts: BranchArg,
    /// Predictive of the regression forest [default: fast].
    #[arg(long, value_enum)]
    pub(crate) mode: Option<ModeArg>,
    /// How the regression forest sets its hyper-parameters θ.
    #[arg(long, value_enum, default_value_t = ThetaArg::Heuristic)]
    pub(crate) theta: ThetaArg,
    /// Keep only the last W training points (a sliding window): older points are deleted
    /// exactly as newer ones arrive, so the model is a batch model on the last W rows. A
    /// batch fit keeps the file's last W rows; with --online (and in `stream`) the window
    /// slides along the rows. At least 1 and at most the number of training rows
    /// [default: keep every point].
    #[arg(long, value_name = "W")]
    pub(crate) window: Option<usize>,
}

impl ModelArgs {
    /// The `--window`, refused when it exceeds the `n_rows` training rows (it would keep
    /// every row, so it is surely not what was meant); the library refuses 0 itself.
    pub(crate) fn window_for(&self, n_rows: usize) -> Result<Option<usize>, CliError> {
        match self.window {
            Some(w) if w > n_rows => Err(CliError::Usage(format!(
                "--window {w} is larger than the {n_rows} training rows; it would keep every row"
            ))),
            window => Ok(window),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum TaskArg {
    /// Integer class labels.
    Classification,
    /// Real-valued targets, with predictive uncertainty.
    Regression,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CalibrationArg {
    /// The quantiles of the forest's predictive mixture.
    None,
    /// Quantile recalibration from cross-validated PITs.
    Cv,
    /// `cv` when the training data has at least 100 rows, else `none`.
    Auto,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum ThetaArg {
    /// The thesis' closed-form heuristic from the target moments (default).
    Heuristic,
    /// Maximise the trees' marginal likelihood of the targets (empirical Bayes).
    MarginalLikelihood,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum ModeArg {
    /// Exact Gaussian belief propagation, branch-off at its expected time (the thesis').
    Exact,
    /// Exact, averaging the branch-off time by 16-point quadrature.
    Quadrature,
    /// The fast empirical approximation (mean and variance of each node's targets).
    Fast,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum BranchArg {
    /// As in the paper's Algorithm 8 (default).
    Paper,
    /// As in the authors' released code.
    Reference,
}

fn parse_feature_weights(s: &str) -> Result<FeatureWeights, String> {
    FeatureWeights::parse(s).map_err(|e| e.to_string())
}

pub(crate) fn parse_lifetime(s: &str) -> Result<f64, String> {
    // The range (> 0) is the library's to check.
    match s.trim().to_ascii_lowercase().as_str() {
        "inf" | "infinity" | "∞" => Ok(f64::INFINITY),
        other => other
            .parse::<f64>()
            .map_err(|_| format!("`{s}` is not `inf` or a number")),
    }
}

pub(crate) fn parse_memory(s: &str) -> Result<u64, String> {
    mondrian::memory::parse_bytes(s).map_err(|e| match e {
        mondrian::MondrianError::InvalidParameter { reason, .. } => reason,
        other => other.to_string(),
    })
}

/// The library refuses more than MAX_THREADS when a forest is built, but only lowers the
/// count of a loaded model (`set_n_threads`), so `predict` would take any count; one
/// parser keeps the same message for every command.
pub(crate) fn parse_threads(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n <= mondrian::data::MAX_THREADS => Ok(n),
        _ => Err(format!(
            "`{s}` is not a thread count from 0 (all cores) to {}",
            mondrian::data::MAX_THREADS
        )),
    }
}
