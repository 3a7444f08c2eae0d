//! `mondrian`: train, evaluate and demo Mondrian forests from the shell.
//!
//! A thin edge over the `mondrian` library: it reads files, calls the library and prints.

mod io;
mod regression;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use mondrian::metrics::{accuracy, log_loss};
use mondrian::{
    BranchCounts, ClassifierParams, FeatureWeights, MondrianError, MondrianForestClassifier,
    RelevanceChoice, Scaling,
};
use serde::{Deserialize, Serialize};

use io::{integer_labels, read_dataset, read_features, DataError, Dataset};

#[derive(Parser)]
#[command(
    name = "mondrian",
    version,
    about = "Mondrian forests: online random forests with the distribution of batch ones"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train a classifier (or with `--task regression` a regressor) on a labelled file and
    /// save it.
    Train {
        /// Training data: CSV (header, label in the last column; .csv.gz too) or LIBSVM.
        #[arg(long)]
        train: PathBuf,
        /// Where to write the model.
        #[arg(long)]
        model: PathBuf,
        #[command(flatten)]
        forest: ForestArgs,
    },
    /// Predict every row of a file with a saved model: class labels (or probabilities), or
    /// for a regression model the predictive mean and standard deviation.
    Predict {
        /// The model written by `mondrian train`.
        #[arg(long)]
        model: PathBuf,
        /// Rows to predict: CSV with the model's features (a trailing label column is
        /// ignored) or LIBSVM.
        #[arg(long)]
        input: PathBuf,
        /// Write predictions here instead of standard output.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Print class probabilities (one column per class) instead of labels.
        #[arg(long)]
        proba: bool,
        /// Regression models: also print the central interval at this level (e.g. 0.9).
        #[arg(long)]
        interval: Option<f64>,
        /// Worker threads (0 = all cores).
        #[arg(long, default_value_t = 0, value_parser = parse_threads)]
        threads: usize,
    },
    /// Train on one file, evaluate on another.
    Eval {
        /// Training data.
        #[arg(long)]
        train: PathBuf,
        /// Test data (same columns).
        #[arg(long)]
        test: PathBuf,
        #[command(flatten)]
        forest: ForestArgs,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The paper's streaming protocol: shuffle, split into mini-batches, train on the first
    /// and extend online with each next one, and report test accuracy after every batch.
    Curve {
        /// Training data.
        #[arg(long)]
        train: PathBuf,
        /// Test data.
        #[arg(long)]
        test: PathBuf,
        /// Number of mini-batches.
        #[arg(long, default_value_t = 100)]
        batches: usize,
        #[command(flatten)]
        forest: ForestArgs,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Stream a real data set (shipped inside the binary) through an online forest and show
    /// test accuracy growing with the data seen.
    Demo,
}

#[derive(Args, Clone)]
struct ForestArgs {
    /// What to learn: class labels (integers) or real-valued targets.
    #[arg(long, value_enum, default_value_t = Task::Classification)]
    task: Task,
    /// Number of trees [default: 100 for classification, 10 for regression].
    #[arg(long)]
    trees: Option<usize>,
    /// Lifetime λ: `inf` or a number > 0.
    #[arg(long, default_value = "inf", value_parser = parse_lifetime)]
    lifetime: f64,
    /// Discount rate γ = factor × number of features.
    #[arg(long, default_value_t = 10.0)]
    discount_factor: f64,
    /// Master seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Worker threads (0 = all cores); the model does not depend on it.
    #[arg(long, default_value_t = 0, value_parser = parse_threads)]
    threads: usize,
    /// Stream the training data one point at a time through online training.
    #[arg(long)]
    online: bool,
    /// Online bagging: every tree takes every point Poisson(1) times.
    #[arg(long)]
    bagging: bool,
    /// Do not pause label-pure blocks.
    #[arg(long)]
    no_pause: bool,
    /// Pause blocks with fewer points than this [default: 2 for classification, 10 for
    /// regression].
    #[arg(long, value_parser = parse_min_samples_split)]
    min_samples_split: Option<usize>,
    /// Counts of the branch-off node in prediction (classification).
    #[arg(long, value_enum, default_value_t = BranchArg::Paper)]
    branch_counts: BranchArg,
    /// Predictive of the regression forest.
    #[arg(long, value_enum, default_value_t = ModeArg::Exact)]
    mode: ModeArg,
    /// How the regression forest sets its hyper-parameters θ.
    #[arg(long, value_enum, default_value_t = ThetaArg::Heuristic)]
    theta: ThetaArg,
    /// Per-feature stretch of the trees' space: `uniform`, `relevance` (learnt from a pilot
    /// forest on the training data; `relevance:P` raises the learnt weights to the power
    /// P; `relevance:cv` chooses P among 0, 0.25, 0.5, 1, 2 by 5-fold cross-validation of
    /// the held-out log-loss or NLPD, about 30 fits' work) or one weight per feature,
    /// comma-separated.
    #[arg(long, default_value = "uniform", value_parser = parse_feature_weights)]
    feature_weights: FeatureWeights,
    /// Regression: `cv` recalibrates the prediction intervals by 5-fold cross-validation
    /// of the training data (quantile recalibration; about 5 fits' extra work); `none`
    /// keeps the forest's own quantiles [default: none].
    #[arg(long, value_enum)]
    calibration: Option<CalibrationArg>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CalibrationArg {
    /// The quantiles of the forest's predictive mixture.
    None,
    /// Quantile recalibration from cross-validated PITs.
    Cv,
}

fn parse_feature_weights(s: &str) -> Result<FeatureWeights, String> {
    FeatureWeights::parse(s).map_err(|e| e.to_string())
}

#[derive(Clone, Copy, ValueEnum)]
enum ThetaArg {
    /// The thesis' closed-form heuristic from the target moments (default).
    Heuristic,
    /// Maximise the trees' marginal likelihood of the targets (empirical Bayes).
    MarginalLikelihood,
}

impl ForestArgs {
    fn n_trees(&self) -> usize {
        self.trees.unwrap_or(100)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Task {
    /// Integer class labels.
    Classification,
    /// Real-valued targets, with predictive uncertainty.
    Regression,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    /// Exact Gaussian belief propagation, branch-off at its expected time (default).
    Exact,
    /// Exact, averaging the branch-off time by 16-point quadrature.
    Quadrature,
    /// The fast empirical approximation (mean and variance of each node's targets).
    Fast,
}

#[derive(Clone, Copy, ValueEnum)]
enum BranchArg {
    /// As in the paper's Algorithm 8 (default).
    Paper,
    /// As in the authors' released code.
    Reference,
}

fn parse_lifetime(s: &str) -> Result<f64, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "inf" | "infinity" | "∞" => Ok(f64::INFINITY),
        other => match other.parse::<f64>() {
            // λ = 0 would grow trees that never split: a model that only knows the prior.
            Ok(v) if v > 0.0 => Ok(v),
            _ => Err(format!("`{s}` is not `inf` or a number > 0")),
        },
    }
}

fn parse_threads(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n <= mondrian::data::MAX_THREADS => Ok(n),
        _ => Err(format!(
            "`{s}` is not a thread count from 0 (all cores) to {}",
            mondrian::data::MAX_THREADS
        )),
    }
}

fn parse_min_samples_split(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("`{s}` is not a whole number ≥ 1")),
    }
}

#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(transparent)]
    Model(#[from] MondrianError),
    #[error("{0}")]
    Usage(String),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What `mondrian train` saves: the forest plus the original label values of its classes.
#[derive(Serialize, Deserialize)]
struct SavedClassifier {
    classes: Vec<i64>,
    feature_names: Vec<String>,
    forest: MondrianForestClassifier,
}

const SAVED_KIND: &str = "mondrian-cli-classifier";

/// A labelled file with its labels mapped to class indices.
struct Labelled {
    data: Dataset,
    classes: Vec<usize>,
}

/// Sorted distinct label values of the training file: class `k` is `values[k]`.
fn class_values(labels: &[i64]) -> Vec<i64> {
    let mut values = labels.to_vec();
    values.sort_unstable();
    values.dedup();
    values
}

/// Maps labels to class indices; an unknown label maps to `values.len()` (never predicted).
fn class_indices(labels: &[i64], values: &[i64]) -> Vec<usize> {
    labels
        .iter()
        .map(|v| values.binary_search(v).unwrap_or(values.len()))
        .collect()
}

fn read_labelled(
    path: &Path,
    n_features: Option<usize>,
    values: Option<&[i64]>,
) -> Result<(Labelled, Vec<i64>), CliError> {
    let data = read_dataset(path, n_features)?;
    if data.n_rows() == 0 {
        return Err(CliError::Usage(format!("{} holds no rows", path.display())));
    }
    let labels = integer_labels(&data, path)?;
    let values = values
        .map(<[i64]>::to_vec)
        .unwrap_or_else(|| class_values(&labels));
    let classes = class_indices(&labels, &values);
    Ok((Labelled { data, classes }, values))
}

/// Per-feature (min, max) of a training file. The scaling is fixed from the whole file, as
/// a user who knows the feature ranges would fix it for a stream; batch and online runs
/// then see identical features.
fn training_ranges(train: &Dataset) -> Vec<(f64, f64)> {
    let d = train.n_features;
    let mut ranges = vec![(f64::INFINITY, f64::NEG_INFINITY); d];
    for row in train.x.chunks_exact(d) {
        for (r, &v) in ranges.iter_mut().zip(row) {
            r.0 = r.0.min(v);
            r.1 = r.1.max(v);
        }
    }
    ranges
}

fn params_from(args: &ForestArgs, train: &Dataset, n_classes: usize) -> ClassifierParams {
    let ranges = training_ranges(train);
    ClassifierParams {
        n_trees: args.n_trees(),
        lifetime: args.lifetime,
        discount_factor: args.discount_factor,
        seed: args.seed,
        n_threads: args.threads,
        bagging: args.bagging,
        pause_on_pure: !args.no_pause,
        min_samples_split: args.min_samples_split.unwrap_or(2),
        branch_counts: match args.branch_counts {
            BranchArg::Paper => BranchCounts::Paper,
            BranchArg::Reference => BranchCounts::Reference,
        },
        n_classes: Some(n_classes),
        scaling: Scaling::Ranges(ranges),
        feature_weights: args.feature_weights.clone(),
    }
}

fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({per_sec}, eta {eta})")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// Runs `train(None)` (one batch call) or, with `online`, `train(Some(i))` for every row in
/// order behind a progress bar; returns the seconds taken.
fn timed_training<E>(
    online: bool,
    n_rows: usize,
    what: &str,
    mut train: impl FnMut(Option<usize>) -> Result<(), E>,
) -> Result<f64, E> {
    let start = Instant::now();
    if online {
        let bar = progress(n_rows as u64, "online training");
        for i in 0..n_rows {
            train(Some(i))?;
            if i % 256 == 0 {
                bar.set_position(i as u64);
            }
        }
        bar.finish_and_clear();
    } else {
        let bar = ProgressBar::new_spinner();
        bar.set_message(what.to_string());
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        train(None)?;
        bar.finish_and_clear();
    }
    Ok(start.elapsed().as_secs_f64())
}

/// Trains by batch `fit`, or point by point through `partial_fit` with `--online`.
fn train_forest(
    args: &ForestArgs,
    train: &Labelled,
    n_classes: usize,
) -> Result<(MondrianForestClassifier, f64, Option<RelevanceChoice>), CliError> {
    let mut params = params_from(args, &train.data, n_classes);
    let d = train.data.n_features;
    let (x, y) = (&train.data.x, &train.classes);
    // Like the ranges, relevance weights come from the whole training file, so a stream
    // sees the features a batch fit sees (a first point alone could not teach them).
    let mut choice = None;
    if args.online {
        let learnt =
            MondrianForestClassifier::new(params.clone())?.learn_feature_weights(x, d, y)?;
        (params.feature_weights, choice) = learnt;
    }
    let mut forest = MondrianForestClassifier::new(params)?;
    let secs = timed_training(
        args.online,
        train.data.n_rows(),
        &format!("fitting {} trees", args.n_trees()),
        |row| match row {
            Some(i) => forest.partial_fit(&x[i * d..(i + 1) * d], d, &y[i..=i]),
            None => forest.fit(x, d, y),
        },
    )?;
    let choice = choice.or_else(|| forest.relevance_choice().cloned());
    Ok((forest, secs, choice))
}

/// `--calibration` only means something for a regression forest.
fn refuse_calibration(args: &ForestArgs) -> Result<(), CliError> {
    match args.calibration {
        Some(_) => Err(CliError::Usage(
            "--calibration recalibrates regression intervals; add --task regression".into(),
        )),
        None => Ok(()),
    }
}

fn run_train(train: &Path, model: &Path, args: &ForestArgs) -> Result<(), CliError> {
    if args.task == Task::Regression {
        return regression::run_train(train, model, args);
    }
    refuse_calibration(args)?;
    let (data, values) = read_labelled(train, None, None)?;
    let (forest, secs, _) = train_forest(args, &data, values.len())?;
    let saved = SavedClassifier {
        classes: values,
        feature_names: data.data.feature_names.clone(),
        forest,
    };
    save_model(&saved, SAVED_KIND, model)?;
    let s = saved.forest.summary();
    eprintln!(
        "trained {} trees on {} rows × {} features, {} classes in {:.2}s; {} nodes, saved to {}",
        s.n_trees,
        data.data.n_rows(),
        data.data.n_features,
        saved.classes.len(),
        secs,
        s.n_nodes,
        model.display()
    );
    Ok(())
}

/// Writes a model file (the library's versioned, checksummed format) for kind `kind`.
fn save_model<T: Serialize>(value: &T, kind: &str, path: &Path) -> Result<(), CliError> {
    let file = std::fs::File::create(path).map_err(|source| CliError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    mondrian::persist::save(value, kind, std::io::BufWriter::new(file))?;
    Ok(())
}

fn read_model(model: &Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(model)
        .map_err(|e| CliError::Usage(format!("cannot open model {}: {e}", model.display())))
}

fn load_saved(bytes: &[u8]) -> Result<SavedClassifier, CliError> {
    let saved: SavedClassifier = mondrian::persist::load_whole(SAVED_KIND, bytes)?;
    if saved.classes.len() != saved.forest.n_classes() {
        return Err(
            MondrianError::CorruptModel("class list does not match the model".into()).into(),
        );
    }
    Ok(saved)
}

fn run_predict(
    model: &Path,
    input: &Path,
    output: Option<&Path>,
    proba: bool,
    threads: usize,
    interval: Option<f64>,
) -> Result<(), CliError> {
    let bytes = read_model(model)?;
    let text = if mondrian::persist::kind_of(&bytes).as_deref() == Some(regression::SAVED_KIND) {
        if proba {
            return Err(CliError::Usage(format!(
                "--proba needs a classification model, but {} holds a regression model \
                 (it predicts mean,std; add --interval L for intervals)",
                model.display()
            )));
        }
        regression::predict_text(&bytes, input, threads, interval)?
    } else {
        if interval.is_some() {
            load_saved(&bytes)?; // a file that is no model at all says so first
            return Err(CliError::Usage(format!(
                "--interval needs a regression model, but {} holds a classification model \
                 (use --proba for class probabilities)",
                model.display()
            )));
        }
        classify_text(&bytes, input, proba, threads)?
    };
    match output {
        Some(path) => std::fs::write(path, text).map_err(|source| CliError::Write {
            path: path.to_path_buf(),
            source,
        })?,
        None => print!("{text}"),
    }
    Ok(())
}

fn classify_text(
    bytes: &[u8],
    input: &Path,
    proba: bool,
    threads: usize,
) -> Result<String, CliError> {
    let mut saved = load_saved(bytes)?;
    saved.forest.set_n_threads(threads);
    let d = saved.forest.n_features().ok_or(MondrianError::NotFitted)?;
    let data = read_features(input, d)?;
    let mut text = String::new();
    if proba {
        let p = saved.forest.predict_proba(&data.x, d)?;
        let header: Vec<String> = saved.classes.iter().map(|c| format!("p_{c}")).collect();
        text.push_str(&header.join(","));
        text.push('\n');
        for row in p.chunks_exact(saved.classes.len()) {
            let cells: Vec<String> = row.iter().map(|v| format!("{v:.6}")).collect();
            text.push_str(&cells.join(","));
            text.push('\n');
        }
    } else {
        text.push_str("label\n");
        for k in saved.forest.predict(&data.x, d)? {
            text.push_str(&saved.classes[k].to_string());
            text.push('\n');
        }
    }
    Ok(text)
}

struct Evaluation {
    accuracy: f64,
    log_loss: f64,
    seconds: f64,
}

fn evaluate(forest: &MondrianForestClassifier, test: &Labelled) -> Result<Evaluation, CliError> {
    let start = Instant::now();
    let d = test.data.n_features;
    let proba = forest.predict_proba(&test.data.x, d)?;
    let seconds = start.elapsed().as_secs_f64();
    let k = forest.n_classes();
    let predicted: Vec<usize> = proba
        .chunks_exact(k)
        .map(mondrian::metrics::argmax)
        .collect();
    Ok(Evaluation {
        accuracy: accuracy(&predicted, &test.classes),
        log_loss: log_loss(&proba, k, &test.classes),
        seconds,
    })
}

fn run_eval(train: &Path, test: &Path, args: &ForestArgs, json: bool) -> Result<(), CliError> {
    if args.task == Task::Regression {
        return regression::run_eval(train, test, args, json);
    }
    refuse_calibration(args)?;
    let (train_set, values) = read_labelled(train, None, None)?;
    let (test_set, _) = read_labelled(test, Some(train_set.data.n_features), Some(&values))?;
    check_width(&train_set, &test_set, test)?;
    let (forest, train_seconds, choice) = train_forest(args, &train_set, values.len())?;
    let ev = evaluate(&forest, &test_set)?;
    let s = forest.summary();
    if json {
        let out = serde_json::json!({
            "accuracy": ev.accuracy,
            "log_loss": ev.log_loss,
            "train_seconds": train_seconds,
            "predict_seconds": ev.seconds,
            "n_train": train_set.data.n_rows(),
            "n_test": test_set.data.n_rows(),
            "n_features": train_set.data.n_features,
            "n_classes": values.len(),
            "trees": args.n_trees(),
            "lifetime": lifetime_text(args.lifetime),
            "discount_factor": args.discount_factor,
            "gamma": forest.gamma(),
            "feature_weights": forest.feature_weights(),
            "relevance_choice": choice,
            "feature_importances": forest.feature_importances(),
            "seed": args.seed,
            "bagging": args.bagging,
            "online": args.online,
            "threads": args.threads,
        });
        println!("{}", with_summary(out, &s));
    } else {
        println!(
            "accuracy {:.4}  log-loss {:.4}  train {:.2}s ({})  predict {:.2}s  n_train {}  n_test {}  trees {}  depth {:.1} ± {:.1}",
            ev.accuracy,
            ev.log_loss,
            train_seconds,
            if args.online { "online" } else { "batch" },
            ev.seconds,
            train_set.data.n_rows(),
            test_set.data.n_rows(),
            args.n_trees(),
            s.depth_mean,
            s.depth_std
        );
        print_features(
            &train_set.data.feature_names,
            forest.feature_weights(),
            &forest.feature_importances(),
            choice.as_ref(),
        );
    }
    Ok(())
}

/// Text reports: the features that explain most, with their weights when they are not 1,
/// and the relevance power cross-validation chose, if it ran.
fn print_features(
    names: &[String],
    weights: Option<&[f64]>,
    importances: &[f64],
    choice: Option<&RelevanceChoice>,
) {
    if let Some(c) = choice {
        let losses: Vec<String> = c
            .losses
            .iter()
            .map(|(p, l)| format!("{p}: {l:.4}"))
            .collect();
        println!(
            "relevance power {} by 5-fold cross-validation (held-out loss per row: {})",
            c.power,
            losses.join(", ")
        );
    }
    const SHOWN: usize = 10;
    let mut order: Vec<usize> = (0..importances.len()).collect();
    order.sort_by(|&a, &b| importances[b].total_cmp(&importances[a]));
    let weighted = weights.filter(|w| w.iter().any(|&v| v != 1.0));
    let heading = match weighted {
        Some(_) => "feature importance (feature weight)",
        None => "feature importance",
    };
    let shown: Vec<String> = order
        .iter()
        .take(SHOWN)
        .map(|&i| {
            let name = names.get(i).map_or("?", String::as_str);
            match weighted {
                Some(w) => format!("{name} {:.3} ({:.2})", importances[i], w[i]),
                None => format!("{name} {:.3}", importances[i]),
            }
        })
        .collect();
    let more = match importances.len().saturating_sub(SHOWN) {
        0 => String::new(),
        n => format!(", … {n} more"),
    };
    println!("{heading}: {}{more}", shown.join(", "));
}

/// λ for JSON, which has no infinity.
fn lifetime_text(lifetime: f64) -> String {
    if lifetime.is_infinite() {
        "inf".into()
    } else {
        lifetime.to_string()
    }
}

/// Adds the forest's shape (spec §7 depth, size) and the settings to a JSON report.
fn with_summary(mut out: serde_json::Value, s: &mondrian::ForestSummary) -> serde_json::Value {
    let extra = serde_json::json!({
        "depth_mean": s.depth_mean,
        "depth_std": s.depth_std,
        "n_nodes": s.n_nodes,
        "n_leaves": s.n_leaves,
        "bytes_per_node": s.bytes_per_node,
        "store_bytes": s.store_bytes,
        "model_bytes": s.total_bytes,
    });
    if let (Some(o), Some(e)) = (out.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    out
}

fn check_width(train: &Labelled, test: &Labelled, path: &Path) -> Result<(), CliError> {
    if train.data.n_features != test.data.n_features {
        return Err(CliError::Usage(format!(
            "{} has {} features but the training data has {}",
            path.display(),
            test.data.n_features,
            train.data.n_features
        )));
    }
    Ok(())
}

#[derive(Serialize)]
struct CurveStep {
    n_seen: usize,
    fraction: f64,
    accuracy: f64,
    log_loss: f64,
    train_seconds: f64,
    predict_seconds: f64,
}

/// Streams the shuffled training set in mini-batches: batch `fit` on the first, `partial_fit`
/// on each next one (spec §8.1), evaluating on the test set after each.
fn learning_curve(
    train: &Labelled,
    test: &Labelled,
    n_classes: usize,
    ends: &[usize],
    args: &ForestArgs,
    mut report: impl FnMut(&CurveStep),
) -> Result<(Vec<CurveStep>, MondrianForestClassifier), CliError> {
    let n = train.data.n_rows();
    let d = train.data.n_features;
    let order = shuffled(n, args.seed);
    let x: Vec<f64> = order
        .iter()
        .flat_map(|&i| train.data.x[i * d..(i + 1) * d].iter().copied())
        .collect();
    let y: Vec<usize> = order.iter().map(|&i| train.classes[i]).collect();
    let mut forest = MondrianForestClassifier::new(params_from(args, &train.data, n_classes))?;
    let mut steps = Vec::with_capacity(ends.len());
    let mut train_seconds = 0.0;
    let mut lo = 0;
    for (b, &hi) in ends.iter().enumerate() {
        let start = Instant::now();
        if b == 0 {
            forest.fit(&x[lo * d..hi * d], d, &y[lo..hi])?;
        } else {
            forest.partial_fit(&x[lo * d..hi * d], d, &y[lo..hi])?;
        }
        train_seconds += start.elapsed().as_secs_f64();
        let ev = evaluate(&forest, test)?;
        let step = CurveStep {
            n_seen: hi,
            fraction: hi as f64 / n as f64,
            accuracy: ev.accuracy,
            log_loss: ev.log_loss,
            train_seconds,
            predict_seconds: ev.seconds,
        };
        report(&step);
        steps.push(step);
        lo = hi;
    }
    Ok((steps, forest))
}

/// Ends of `batches` mini-batches of ⌊n/batches⌋ points, the last taking the remainder
/// (spec §8.1).
fn equal_batches(n: usize, batches: usize) -> Result<Vec<usize>, CliError> {
    if batches == 0 || batches > n {
        return Err(CliError::Usage(format!(
            "--batches must be between 1 and the {n} training rows"
        )));
    }
    let size = n / batches;
    Ok((1..=batches)
        .map(|b| if b == batches { n } else { b * size })
        .collect())
}

/// A permutation of `0..n` from the seed (Fisher–Yates on SplitMix64).
fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut state = seed ^ 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

fn run_curve(
    train: &Path,
    test: &Path,
    batches: usize,
    args: &ForestArgs,
    json: bool,
) -> Result<(), CliError> {
    if args.task == Task::Regression {
        return Err(CliError::Usage(
            "curve reports classification accuracy; for regression use eval --task regression"
                .into(),
        ));
    }
    refuse_calibration(args)?;
    let (train_set, values) = read_labelled(train, None, None)?;
    let (test_set, _) = read_labelled(test, Some(train_set.data.n_features), Some(&values))?;
    check_width(&train_set, &test_set, test)?;
    let ends = equal_batches(train_set.data.n_rows(), batches)?;
    let bar = progress(batches as u64, "mini-batches");
    let (steps, forest) = learning_curve(&train_set, &test_set, values.len(), &ends, args, |s| {
        bar.inc(1);
        if !json {
            bar.suspend(|| {
                println!(
                    "{:>7} seen ({:>5.1}%)  accuracy {:.4}  log-loss {:.4}  train {:.2}s",
                    s.n_seen,
                    100.0 * s.fraction,
                    s.accuracy,
                    s.log_loss,
                    s.train_seconds
                )
            });
        }
    })?;
    bar.finish_and_clear();
    if json {
        let out = serde_json::json!({
            "n_train": train_set.data.n_rows(),
            "n_test": test_set.data.n_rows(),
            "trees": args.n_trees(),
            "lifetime": lifetime_text(args.lifetime),
            "discount_factor": args.discount_factor,
            "gamma": forest.gamma(),
            "seed": args.seed,
            "threads": args.threads,
            "steps": steps,
        });
        println!("{}", with_summary(out, &forest.summary()));
    }
    Ok(())
}

const DEMO_TRAIN: &[u8] = include_bytes!("../../../datasets/satimage_train.csv.gz");
const DEMO_TEST: &[u8] = include_bytes!("../../../datasets/satimage_test.csv.gz");

fn run_demo() -> Result<(), CliError> {
    let dir = std::env::temp_dir().join(format!("mondrian-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|source| CliError::Write {
        path: dir.clone(),
        source,
    })?;
    let write = |name: &str, bytes: &[u8]| -> Result<PathBuf, CliError> {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|source| CliError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    };
    let train_path = write("satimage_train.csv.gz", DEMO_TRAIN)?;
    let test_path = write("satimage_test.csv.gz", DEMO_TEST)?;
    let loaded = read_labelled(&train_path, None, None).and_then(|(train, values)| {
        let (test, _) = read_labelled(&test_path, Some(train.data.n_features), Some(&values))?;
        Ok((train, test, values))
    });
    let _ = std::fs::remove_dir_all(&dir);
    let (train, test, values) = loaded?;
    println!(
        "Mondrian forest demo: satimage (Statlog Landsat, UCI). {} training rows arrive in growing\n\
         mini-batches and the forest learns each online; accuracy is measured on {} held-out rows.\n\
         {} features, {} classes; 100 trees, lifetime ∞, γ = 10·D.\n",
        train.data.n_rows(),
        test.data.n_rows(),
        train.data.n_features,
        values.len()
    );
    println!(
        "{:>8} {:>9} {:>9} {:>9}  accuracy",
        "seen", "accuracy", "log-loss", "train s"
    );
    let args = ForestArgs {
        task: Task::Classification,
        trees: Some(100),
        lifetime: f64::INFINITY,
        discount_factor: 10.0,
        seed: 1,
        threads: 0,
        online: true,
        bagging: false,
        no_pause: false,
        min_samples_split: Some(2),
        branch_counts: BranchArg::Paper,
        mode: ModeArg::Exact,
        theta: ThetaArg::Heuristic,
        feature_weights: FeatureWeights::Uniform,
        calibration: None,
    };
    // Mini-batches that grow along the stream, so the early learning shows.
    let n = train.data.n_rows();
    let mut ends: Vec<usize> = [
        0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    ]
    .iter()
    .map(|f| ((f * n as f64).round() as usize).clamp(1, n))
    .collect();
    ends.dedup();
    let (_, forest) = learning_curve(&train, &test, values.len(), &ends, &args, |s| {
        let bar = "#".repeat(((s.accuracy - 0.5).max(0.0) * 100.0).round() as usize);
        println!(
            "{:>8} {:>9.4} {:>9.4} {:>9.2}  {bar}",
            s.n_seen, s.accuracy, s.log_loss, s.train_seconds
        );
    })?;
    let s = forest.summary();
    println!(
        "\n{} nodes over {} trees, mean leaf depth {:.1} ± {:.1}; the online forest has the\n\
         distribution of a batch forest on the same data, so the curve is what batch refits\n\
         would give, at a fraction of the cost.",
        s.n_nodes, s.n_trees, s.depth_mean, s.depth_std
    );
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Train {
            train,
            model,
            forest,
        } => run_train(train, model, forest),
        Command::Predict {
            model,
            input,
            output,
            proba,
            interval,
            threads,
        } => run_predict(model, input, output.as_deref(), *proba, *threads, *interval),
        Command::Eval {
            train,
            test,
            forest,
            json,
        } => run_eval(train, test, forest, *json),
        Command::Curve {
            train,
            test,
            batches,
            forest,
            json,
        } => run_curve(train, test, *batches, forest, *json),
        Command::Demo => run_demo(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
