//! `--task classification` (the default): integer labels, which the model file keeps as the
//! training file spells them.

use std::path::Path;
use std::time::Instant;

use mondrian::described::DescribedClassifier;
use mondrian::metrics::{accuracy, argmax, log_loss};
use mondrian::{
    BranchCounts, ClassifierParams, ForestSummary, MondrianError, MondrianForestClassifier,
    Persistent, RelevanceChoice,
};

use super::forest::{
    training_scaling, BranchArg, EvalArgs, ForestArgs, PredictArgs, Task, TrainArgs,
};
use super::stream::{Held, Metric, Score, StreamArgs, Streamer};
use super::{
    check_names, held_text, lifetime_text, names_to_keep, print_features, save_model,
    timed_training, with_summary, CliError, ModelFile,
};
use crate::io::{integer_labels, read_dataset, read_features, Dataset};

/// The classification task.
pub(crate) struct Classify;

/// A labelled file with its labels mapped to class indices.
pub(crate) struct Labelled {
    pub(crate) data: Dataset,
    pub(crate) classes: Vec<usize>,
}

/// A training file and a test file read against it (same width, the training file's
/// classes), with the label value of each class.
pub(crate) struct TrainTest {
    pub(crate) train: Labelled,
    pub(crate) test: Labelled,
    /// Sorted distinct label values of the training file: class `k` is `values[k]`.
    pub(crate) values: Vec<i64>,
}

impl TrainTest {
    /// Reads `train`, then `test` at its width and with its classes.
    pub(crate) fn read(train: &Path, test: &Path) -> Result<TrainTest, CliError> {
        let (train_set, values) = read_labelled(train, None, None)?;
        // Read at the training file's width, or refused naming the line.
        let (test_set, _) = read_labelled(test, Some(train_set.data.n_features), Some(&values))?;
        Ok(TrainTest {
            train: train_set,
            test: test_set,
            values,
        })
    }
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

/// A labelled file, its labels mapped to the classes `values` (default: the file's own).
fn read_labelled(
    path: &Path,
    n_features: Option<usize>,
    values: Option<&[i64]>,
) -> Result<(Labelled, Vec<i64>), CliError> {
    let data = read_dataset(path, n_features)?;
    let labels = integer_labels(&data, path)?;
    let values = values
        .map(<[i64]>::to_vec)
        .unwrap_or_else(|| class_values(&labels));
    let classes = class_indices(&labels, &values);
    Ok((Labelled { data, classes }, values))
}

/// Refuses the flags that only mean something for a regression forest (the settings
/// themselves are the library's to check).
pub(crate) fn check_flags(args: &ForestArgs) -> Result<(), CliError> {
    if args.calibration.is_some() {
        return Err(CliError::Usage(
            "--calibration recalibrates regression intervals; add --task regression".into(),
        ));
    }
    Ok(())
}

/// The classifier the flags ask for, scaled to the training file's ranges.
pub(crate) fn params(
    args: &ForestArgs,
    train: &Dataset,
    n_classes: usize,
) -> Result<ClassifierParams, CliError> {
    let defaults = ClassifierParams::default();
    let model = &args.model;
    Ok(ClassifierParams {
        n_trees: model.trees.unwrap_or(defaults.n_trees),
        lifetime: model.lifetime.unwrap_or(defaults.lifetime),
        discount_factor: model.discount_factor,
        seed: model.seed,
        n_threads: model.threads,
        max_memory: model.max_memory,
        bagging: model.bagging,
        pause_on_pure: !model.no_pause,
        min_samples_split: model
            .min_samples_split
            .unwrap_or(defaults.min_samples_split),
        branch_counts: match model.branch_counts {
            BranchArg::Paper => BranchCounts::Paper,
            BranchArg::Reference => BranchCounts::Reference,
        },
        n_classes: Some(n_classes),
        scaling: training_scaling(train),
        feature_weights: args
            .feature_weights
            .clone()
            .unwrap_or(defaults.feature_weights),
        window: model.window_for(train.n_rows())?,
    })
}

/// Trains by batch `fit`, or point by point through `partial_fit` with `--online`.
fn train_forest(
    args: &ForestArgs,
    train: &Labelled,
    n_classes: usize,
) -> Result<(MondrianForestClassifier, f64, Option<RelevanceChoice>), CliError> {
    let mut params = params(args, &train.data, n_classes)?;
    let n_trees = params.n_trees;
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
        &format!("fitting {n_trees} trees"),
        |row| match row {
            Some(i) => forest.partial_fit(train.data.row(i), d, &y[i..=i]),
            None => forest.fit(x, d, y),
        },
    )?;
    let choice = choice.or_else(|| forest.relevance_choice().cloned());
    Ok((forest, secs, choice))
}

/// Test-set scores of a forest, and the seconds its predictions took.
pub(crate) struct Evaluation {
    pub(crate) accuracy: f64,
    pub(crate) log_loss: f64,
    pub(crate) seconds: f64,
}

/// Scores `forest` on `test`.
pub(crate) fn evaluate(
    forest: &MondrianForestClassifier,
    test: &Labelled,
) -> Result<Evaluation, CliError> {
    let start = Instant::now();
    let d = test.data.n_features;
    let proba = forest.predict_proba(&test.data.x, d)?;
    let seconds = start.elapsed().as_secs_f64();
    let k = forest.n_classes();
    let predicted: Vec<usize> = proba.chunks_exact(k).map(argmax).collect();
    Ok(Evaluation {
        accuracy: accuracy(&predicted, &test.classes),
        log_loss: log_loss(&proba, k, &test.classes),
        seconds,
    })
}

/// Saves `forest`, trained on `data` whose class `k` has label `values[k]`, to `path` in
/// the file `predict` reads.
pub(crate) fn save(
    forest: MondrianForestClassifier,
    values: &[i64],
    data: &Dataset,
    path: &Path,
) -> Result<(), CliError> {
    let saved = DescribedClassifier::new(forest, values.to_vec(), names_to_keep(data))?;
    save_model(&saved, DescribedClassifier::KIND, saved.encoding(), path)
}

/// `stream`'s classifier: the file, its classes, the forest and which classes it has learnt.
struct ClassifierStream {
    data: Labelled,
    values: Vec<i64>,
    forest: MondrianForestClassifier,
    learnt: Vec<bool>,
}

impl Streamer for ClassifierStream {
    fn metric(&self) -> Metric {
        Metric::Accuracy
    }

    fn data(&self) -> &Dataset {
        &self.data.data
    }

    fn score(&self, row: usize) -> Result<Option<Score>, CliError> {
        // Before the first row is learnt there is no model.
        if self.forest.n_features().is_none() {
            return Ok(None);
        }
        let proba = self
            .forest
            .predict_proba(self.data.data.row(row), self.data.data.n_features)?;
        let class = self.data.classes[row];
        // A class not learnt yet has only the smoothing's share of probability: a miss.
        let hit = self.learnt[class] && argmax(&proba) == class;
        Ok(Some(Score {
            point: if hit { 1.0 } else { 0.0 },
            loss: log_loss(&proba, proba.len(), &[class]),
        }))
    }

    fn learn(&mut self, row: usize) -> Result<(), CliError> {
        let classes = &self.data.classes[row..=row];
        let d = self.data.data.n_features;
        self.forest
            .partial_fit(self.data.data.row(row), d, classes)?;
        self.learnt[classes[0]] = true;
        Ok(())
    }

    fn held(&self) -> Held {
        Held {
            window: self.forest.params().window,
            n_points: self.forest.n_points(),
        }
    }

    fn summary(&self) -> ForestSummary {
        self.forest.summary()
    }

    fn n_classes(&self) -> Option<usize> {
        Some(self.values.len())
    }

    fn save(self: Box<Self>, path: &Path) -> Result<(), CliError> {
        save(self.forest, &self.values, &self.data.data, path)
    }
}

impl Task for Classify {
    fn train(&self, args: &TrainArgs) -> Result<(), CliError> {
        check_flags(&args.forest)?;
        let (data, values) = read_labelled(&args.train, None, None)?;
        let (mut forest, secs, _) = train_forest(&args.forest, &data, values.len())?;
        let s = forest.summary();
        if args.compact {
            forest.compact()?;
        }
        let held = held_text(forest.params().window, forest.n_points());
        save(forest, &values, &data.data, &args.model)?;
        eprintln!(
            "trained {} trees on {} rows × {} features, {} classes in {:.2}s; {} nodes, {held}, saved to {}",
            s.n_trees,
            data.data.n_rows(),
            data.data.n_features,
            values.len(),
            secs,
            s.n_nodes,
            args.model.display()
        );
        Ok(())
    }

    fn eval(&self, args: &EvalArgs) -> Result<(), CliError> {
        let forest_args = &args.forest;
        check_flags(forest_args)?;
        let TrainTest {
            train,
            test,
            values,
        } = TrainTest::read(&args.train, &args.test)?;
        let (forest, train_seconds, choice) = train_forest(forest_args, &train, values.len())?;
        let ev = evaluate(&forest, &test)?;
        let s = forest.summary();
        let n_trees = forest.params().n_trees;
        if args.json {
            let out = serde_json::json!({
                "accuracy": ev.accuracy,
                "log_loss": ev.log_loss,
                "train_seconds": train_seconds,
                "predict_seconds": ev.seconds,
                "n_train": train.data.n_rows(),
                "n_test": test.data.n_rows(),
                "n_features": train.data.n_features,
                "n_classes": values.len(),
                "trees": n_trees,
                "lifetime": lifetime_text(forest.params().lifetime),
                "discount_factor": forest_args.model.discount_factor,
                "gamma": forest.gamma(),
                "feature_weights": forest.feature_weights(),
                "relevance_choice": choice,
                "feature_importances": forest.feature_importances(),
                "seed": forest_args.model.seed,
                "bagging": forest_args.model.bagging,
                "online": forest_args.online,
                "threads": forest_args.model.threads,
            });
            println!(
                "{}",
                with_summary(out, &s, forest.params().window, forest.n_points())
            );
        } else {
            println!(
                "accuracy {:.4}  log-loss {:.4}  train {:.2}s ({})  predict {:.2}s  n_train {}  n_test {}  trees {}  depth {:.1} ± {:.1}  {}",
                ev.accuracy,
                ev.log_loss,
                train_seconds,
                if forest_args.online { "online" } else { "batch" },
                ev.seconds,
                train.data.n_rows(),
                test.data.n_rows(),
                n_trees,
                s.depth_mean,
                s.depth_std,
                held_text(forest.params().window, forest.n_points()),
            );
            print_features(
                &train.data.feature_names,
                forest.feature_weights(),
                &forest.feature_importances(),
                choice.as_ref(),
            );
        }
        Ok(())
    }

    /// Class labels, or with `--proba` one probability column per class.
    fn predict(&self, model: ModelFile, args: &PredictArgs) -> Result<String, CliError> {
        // Loaded first: a file that is no model at all says so before any flag is refused.
        let mut saved: DescribedClassifier =
            mondrian::persist::load_whole(DescribedClassifier::KIND, model)?;
        if args.interval.is_some() {
            return Err(CliError::Usage(format!(
                "--interval needs a regression model, but {} holds a classification model \
                 (use --proba for class probabilities)",
                args.model.display()
            )));
        }
        saved.forest.set_n_threads(args.threads);
        let d = saved.forest.n_features().ok_or(MondrianError::NotFitted)?;
        let data = read_features(&args.input, d)?;
        check_names(&saved.feature_names, &data, &args.input, args.ignore_names)?;
        let mut text = String::new();
        if args.proba {
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

    fn streamer(&self, args: &StreamArgs) -> Result<Box<dyn Streamer>, CliError> {
        let (data, values) = read_labelled(&args.input, None, None)?;
        let forest_args = ForestArgs::streaming(&args.forest);
        let forest =
            MondrianForestClassifier::new(params(&forest_args, &data.data, values.len())?)?;
        Ok(Box::new(ClassifierStream {
            learnt: vec![false; values.len()],
            data,
            values,
            forest,
        }))
    }
}
