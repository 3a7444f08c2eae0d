//! `--task regression`: real-valued targets, predicted with their uncertainty by a
//! `MondrianForestRegressor`.

use std::path::Path;
use std::time::Instant;

use mondrian::described::DescribedRegressor;
use mondrian::{
    Calibration, Estimate, ForestSummary, HyperSettings, MondrianError, MondrianForestRegressor,
    Persistent, PredictionMode, RegressorParams, RelevanceChoice,
};

use super::forest::{
    training_scaling, CalibrationArg, EvalArgs, ForestArgs, ModeArg, ModelArgs, PredictArgs, Task,
    ThetaArg, TrainArgs,
};
use super::stream::{Held, Metric, Score, StreamArgs, Streamer};
use super::{
    check_names, held_text, names_to_keep, print_features, save_model, timed_training,
    with_summary, CliError, ModelFile,
};
use crate::io::{read_dataset, read_features, Dataset};

/// The regression task.
pub(crate) struct Regress;

/// Refuses the flags that only mean something for a classification forest and that the
/// regressor would otherwise ignore.
pub(crate) fn check_flags(args: &ModelArgs) -> Result<(), CliError> {
    // The regressor's trees have no lifetime (λ = ∞; blocks with fewer than
    // min_samples_split points stay leaves), so a --lifetime would be silently ignored.
    if args.lifetime.is_some() {
        return Err(CliError::Usage(
            "--lifetime applies to classification: regression trees grow until their blocks \
             hold fewer than --min-samples-split points"
                .into(),
        ));
    }
    Ok(())
}

/// The regressor the flags ask for, scaled to the training file's ranges.
fn params(args: &ForestArgs, train: &Dataset) -> Result<RegressorParams, CliError> {
    let defaults = RegressorParams::default();
    let model = &args.model;
    Ok(RegressorParams {
        n_trees: model.trees.unwrap_or(defaults.n_trees),
        min_samples_split: model
            .min_samples_split
            .unwrap_or(defaults.min_samples_split),
        mode: match model.mode {
            None => defaults.mode,
            Some(ModeArg::Exact) => PredictionMode::Exact,
            Some(ModeArg::Quadrature) => PredictionMode::ExactQuadrature,
            Some(ModeArg::Fast) => PredictionMode::Fast,
        },
        seed: model.seed,
        n_threads: model.threads,
        max_memory: model.max_memory,
        bagging: model.bagging,
        scaling: training_scaling(train),
        hyper: HyperSettings {
            estimate: match model.theta {
                ThetaArg::Heuristic => Estimate::Heuristic,
                ThetaArg::MarginalLikelihood => Estimate::MarginalLikelihood,
            },
            ..Default::default()
        },
        feature_weights: args
            .feature_weights
            .clone()
            .unwrap_or(defaults.feature_weights),
        calibration: match args.calibration {
            None => defaults.calibration,
            Some(CalibrationArg::Cv) => Calibration::Cv,
            Some(CalibrationArg::Auto) => Calibration::Auto,
            Some(CalibrationArg::None) => Calibration::None,
        },
        window: model.window_for(train.n_rows())?,
    })
}

/// Online training on row `i` of `data` alone; an error names the file's row, not the row
/// within the one-row call.
fn learn_row(
    forest: &mut MondrianForestRegressor,
    data: &Dataset,
    i: usize,
) -> Result<(), MondrianError> {
    forest
        .partial_fit(data.row(i), data.n_features, &data.labels[i..=i])
        .map_err(|e| match e {
            MondrianError::TargetOverflow { value, max, .. } => {
                MondrianError::TargetOverflow { row: i, value, max }
            }
            other => other,
        })
}

/// Trains by batch `fit`, or point by point with `--online`.
fn train_forest(
    args: &ForestArgs,
    train: &Dataset,
) -> Result<(MondrianForestRegressor, f64, Option<RelevanceChoice>), CliError> {
    let mut params = params(args, train)?;
    let d = train.n_features;
    let (x, y) = (&train.x, &train.labels);
    // As for the classifier: weights from the whole file, like the ranges.
    let mut choice = None;
    let mut pits = None;
    if args.online {
        // And the calibration a batch fit would compute, then the stream keeps it.
        let learnt = MondrianForestRegressor::new(params.clone())?.learn_first_call(x, d, y)?;
        (params.feature_weights, choice, pits) = learnt;
        params.calibration = Calibration::None;
    }
    let mut forest = MondrianForestRegressor::new(params)?;
    let secs = timed_training(
        args.online,
        train.n_rows(),
        "fitting regression trees",
        |row| match row {
            Some(i) => learn_row(&mut forest, train, i),
            None => forest.fit(x, d, y),
        },
    )?;
    if pits.is_some() {
        forest.set_calibration(pits)?;
    }
    let choice = choice.or_else(|| forest.relevance_choice().cloned());
    Ok((forest, secs, choice))
}

/// Saves `forest`, trained on `data`, to `path` in the file `predict` reads.
fn save(forest: MondrianForestRegressor, data: &Dataset, path: &Path) -> Result<(), CliError> {
    let saved = DescribedRegressor::new(forest, names_to_keep(data))?;
    save_model(&saved, DescribedRegressor::KIND, saved.encoding(), path)
}

/// `stream`'s regressor and the file it learns.
struct RegressorStream {
    data: Dataset,
    forest: MondrianForestRegressor,
    /// The first target learnt.
    first_target: Option<f64>,
    /// Whether a target other than the first has been learnt.
    varied: bool,
}

impl Streamer for RegressorStream {
    fn metric(&self) -> Metric {
        Metric::Rmse
    }

    fn data(&self) -> &Dataset {
        &self.data
    }

    fn score(&self, row: usize) -> Result<Option<Score>, CliError> {
        // θ, which sets every spread of the predictive, comes from the variance of the
        // targets learnt: while they are all equal the predictive is a spike at the library's
        // variance floor, and its density (~1e8 nats off) would swamp the mean NLPD.
        if !self.varied {
            return Ok(None);
        }
        let (x, d, y) = (
            self.data.row(row),
            self.data.n_features,
            &self.data.labels[row..=row],
        );
        let mean = self.forest.predict(x, d)?.mean[0];
        let log_p = self.forest.log_density(x, d, y)?[0];
        Ok(Some(Score {
            point: (mean - y[0]).powi(2),
            loss: -log_p,
        }))
    }

    fn learn(&mut self, row: usize) -> Result<(), CliError> {
        learn_row(&mut self.forest, &self.data, row)?;
        let y = self.data.labels[row];
        match self.first_target {
            None => self.first_target = Some(y),
            Some(first) => self.varied |= first != y,
        }
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
        None
    }

    fn save(self: Box<Self>, path: &Path) -> Result<(), CliError> {
        save(self.forest, &self.data, path)
    }
}

impl Task for Regress {
    fn train(&self, args: &TrainArgs) -> Result<(), CliError> {
        check_flags(&args.forest.model)?;
        let data = read_dataset(&args.train, None)?;
        let (mut forest, secs, _) = train_forest(&args.forest, &data)?;
        let s = forest.summary();
        if args.compact {
            forest.compact()?;
        }
        let held = held_text(forest.params().window, forest.n_points());
        save(forest, &data, &args.model)?;
        eprintln!(
            "trained {} regression trees on {} rows × {} features in {secs:.2}s; {} nodes, {held}, saved to {}",
            s.n_trees,
            data.n_rows(),
            data.n_features,
            s.n_nodes,
            args.model.display()
        );
        Ok(())
    }

    fn eval(&self, args: &EvalArgs) -> Result<(), CliError> {
        check_flags(&args.forest.model)?;
        let train_set = read_dataset(&args.train, None)?;
        // Read at the training file's width, or refused naming the line.
        let test_set = read_dataset(&args.test, Some(train_set.n_features))?;
        let (forest, train_seconds, choice) = train_forest(&args.forest, &train_set)?;
        let d = test_set.n_features;
        let start = Instant::now();
        let p = forest.predict(&test_set.x, d)?;
        let log_p = forest.log_density(&test_set.x, d, &test_set.labels)?;
        let predict_seconds = start.elapsed().as_secs_f64();
        let y = &test_set.labels;
        let n = y.len() as f64;
        let rmse = (p
            .mean
            .iter()
            .zip(y)
            .map(|(m, v)| (m - v).powi(2))
            .sum::<f64>()
            / n)
            .sqrt();
        let nlpd = -log_p.iter().sum::<f64>() / n;
        let inside = |(lo, hi): (Vec<f64>, Vec<f64>)| {
            y.iter()
                .zip(lo.iter().zip(&hi))
                .filter(|(v, (l, h))| **v >= **l && **v <= **h)
                .count() as f64
                / n
        };
        // Intervals from the forest's full predictive mixture (its quantiles), and from its
        // Gaussian moment match as the thesis' calibration table uses.
        let coverage = |level: f64| -> Result<f64, CliError> {
            Ok(inside(forest.mixture_interval(&test_set.x, d, level)?))
        };
        let coverage_gaussian =
            |level: f64| -> Result<f64, CliError> { Ok(inside(p.interval(level)?)) };
        let coverage_90 = coverage(0.9)?;
        let coverage_90_gaussian = coverage_gaussian(0.9)?;
        let s = forest.summary();
        let theta = forest.theta().ok_or(MondrianError::NotFitted)?;
        if args.json {
            let calibration = |cover: &dyn Fn(f64) -> Result<f64, CliError>| {
                (1..=9)
                    .map(|z| cover(z as f64 / 10.0).map(|c| c - z as f64 / 10.0))
                    .collect::<Result<Vec<f64>, _>>()
            };
            let (cal_mixture, cal_gaussian) =
                (calibration(&coverage)?, calibration(&coverage_gaussian)?);
            let out = serde_json::json!({
                "rmse": rmse,
                "nlpd": nlpd,
                "coverage_90": coverage_90,
                "coverage_90_gaussian": coverage_90_gaussian,
                "calibration": cal_mixture,
                "calibration_gaussian": cal_gaussian,
                "train_seconds": train_seconds,
                "predict_seconds": predict_seconds,
                "n_train": train_set.n_rows(),
                "n_test": test_set.n_rows(),
                "n_features": d,
                "trees": forest.params().n_trees,
                "min_samples_split": forest.params().min_samples_split,
                "mode": format!("{:?}", forest.params().mode),
                "theta_estimate": format!("{:?}", forest.params().hyper.estimate),
                "feature_weights": forest.feature_weights(),
                "relevance_choice": choice,
                "interval_probabilities_90": forest.interval_probabilities(0.9)?,
                "calibration_pits": forest.calibration().map(<[f64]>::len),
                "feature_importances": forest.feature_importances(),
                "mu_h": theta.mu_h,
                "gamma1": theta.gamma1,
                "gamma2": theta.gamma2,
                "noise_var": theta.noise_var,
                "seed": args.forest.model.seed,
                "online": args.forest.online,
                "threads": args.forest.model.threads,
            });
            println!(
                "{}",
                with_summary(out, &s, forest.params().window, forest.n_points())
            );
        } else {
            println!(
                "rmse {rmse:.4}  nlpd {nlpd:.4}  coverage(90%) {coverage_90:.3} (gaussian {coverage_90_gaussian:.3})  train {train_seconds:.2}s ({})  predict {predict_seconds:.2}s  n_train {}  n_test {}  trees {}  {}",
                if args.forest.online { "online" } else { "batch" },
                train_set.n_rows(),
                test_set.n_rows(),
                forest.params().n_trees,
                held_text(forest.params().window, forest.n_points()),
            );
            if let Some(pits) = forest.calibration() {
                let (lo, hi) = forest.interval_probabilities(0.9)?;
                println!(
                    "intervals recalibrated from {} cross-validated PITs: the 90% interval runs \
                     between the mixture's {lo:.3} and {hi:.3} quantiles",
                    pits.len()
                );
            }
            print_features(
                &train_set.feature_names,
                forest.feature_weights(),
                &forest.feature_importances(),
                choice.as_ref(),
            );
        }
        Ok(())
    }

    /// `mean,std` per row, with `--interval L` also the central interval at level `L`.
    fn predict(&self, model: ModelFile, args: &PredictArgs) -> Result<String, CliError> {
        if args.proba {
            return Err(CliError::Usage(format!(
                "--proba needs a classification model, but {} holds a regression model \
                 (it predicts mean,std; add --interval L for intervals)",
                args.model.display()
            )));
        }
        let mut saved: DescribedRegressor =
            mondrian::persist::load_whole(DescribedRegressor::KIND, model)?;
        saved.forest.set_n_threads(args.threads);
        let d = saved.forest.n_features().ok_or(MondrianError::NotFitted)?;
        let data = read_features(&args.input, d)?;
        check_names(&saved.feature_names, &data, &args.input, args.ignore_names)?;
        let p = saved.forest.predict(&data.x, d)?;
        let std = p.std();
        let mut text = String::from("mean,std");
        let bounds = match args.interval {
            Some(level) => {
                text.push_str(",lower,upper");
                Some(saved.forest.mixture_interval(&data.x, d, level)?)
            }
            None => None,
        };
        text.push('\n');
        for i in 0..p.mean.len() {
            text.push_str(&format!("{:.9},{:.9}", p.mean[i], std[i]));
            if let Some((lo, hi)) = &bounds {
                text.push_str(&format!(",{:.9},{:.9}", lo[i], hi[i]));
            }
            text.push('\n');
        }
        Ok(text)
    }

    fn streamer(&self, args: &StreamArgs) -> Result<Box<dyn Streamer>, CliError> {
        check_flags(&args.forest)?;
        let data = read_dataset(&args.input, None)?;
        let forest =
            MondrianForestRegressor::new(params(&ForestArgs::streaming(&args.forest), &data)?)?;
        Ok(Box::new(RegressorStream {
            data,
            forest,
            first_target: None,
            varied: false,
        }))
    }
}
