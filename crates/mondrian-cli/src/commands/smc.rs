//! `mondrian smc`: Bayesian decision trees fitted by top-down SMC (spec
//! `bayesian-trees.md` §3), a posterior over trees rather than a forest of random ones.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand, ValueEnum};
use mondrian::bayes::{
    CgmPrior, Expansion, IslandWeighting, Proposal, RegressionLeaf, Resampler, SmcClassifierParams,
    SmcParams, SmcPosterior, SmcRegressorParams, SmcTreeClassifier, SmcTreeRegressor,
};
use mondrian::MondrianError;
use serde_json::json;

use super::forest::parse_threads;
use super::{classes_of, integer_valued, read_train_test, CliError};
use crate::io::{integer_labels, Dataset};

#[derive(Args)]
pub(crate) struct SmcArgs {
    #[command(subcommand)]
    command: SmcCommand,
}

#[derive(Subcommand)]
enum SmcCommand {
    /// Fit SMC decision trees on one file and score the posterior predictive on another:
    /// accuracy (classification) or RMSE (regression), the mean log predictive probability
    /// (or density) of a test row and the log evidence log p(Y | X) of the training labels.
    ///
    /// The last column is the label. The task is classification when every training label
    /// is an integer (each distinct value a class) and regression otherwise, unless --task
    /// says. With --json the last line is one JSON object: `accuracy` or `rmse`,
    /// `log_predictive` (mean over the test rows, nats), `log_evidence`, `seconds` (fit and
    /// predict), `fit_seconds`, the sizes and the settings.
    Eval(EvalArgs),
}

/// What to learn.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TaskArg {
    /// Integer class labels (Dirichlet–multinomial leaves).
    Classification,
    /// Real targets (Normal–inverse-gamma leaves calibrated from the training targets).
    Regression,
}

/// How a particle proposes the decision at a node (§3.4).
#[derive(Clone, Copy, ValueEnum)]
enum ProposalArg {
    /// The CGM prior itself (the Bayesian bootstrap filter).
    Prior,
    /// As the prior, but the split falls in a gap between the node's data values.
    Empirical,
    /// The one-step optimal proposal (every split scored).
    Optimal,
}

/// Which open nodes a stage decides (§3.2).
#[derive(Clone, Copy, ValueEnum)]
enum ExpansionArg {
    /// One node per stage, the oldest in the queue.
    BreadthFirst,
    /// One node per stage, the one whose data fit worst (lowest marginal likelihood).
    MinMarginal,
    /// Every open node at once: a stage is a depth layer.
    LayerWise,
}

/// How ancestors are drawn when the particles are resampled.
#[derive(Clone, Copy, ValueEnum)]
enum ResamplerArg {
    Multinomial,
    Systematic,
}

/// How islands combine.
#[derive(Clone, Copy, ValueEnum)]
enum WeightingArg {
    /// Each island counts 1/I (an ensemble of I posteriors).
    Equal,
    /// Each island counts by its evidence (one consistent posterior).
    Evidence,
}

#[derive(Args)]
struct EvalArgs {
    /// Training rows: CSV with a header and the label in the last column (.csv.gz too), or
    /// LIBSVM; `-` reads standard input.
    #[arg(long)]
    train: PathBuf,
    /// Test rows, with the training file's columns.
    #[arg(long)]
    test: PathBuf,
    /// What to learn [default: classification when every training label is an integer,
    /// else regression].
    #[arg(long, value_enum)]
    task: Option<TaskArg>,
    /// C: particles in all, shared out among the islands.
    #[arg(long, default_value_t = 100)]
    particles: usize,
    /// I: independent particle systems, C/I particles each.
    #[arg(long, default_value_t = 1)]
    islands: usize,
    /// How a particle proposes each decision.
    #[arg(long, value_enum, default_value = "prior")]
    proposal: ProposalArg,
    /// Which open nodes a stage decides.
    #[arg(long, value_enum, default_value = "breadth-first")]
    expansion: ExpansionArg,
    /// α_s of the CGM prior: a node at depth d splits with probability α_s(1 + d)^(−β_s).
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true)]
    alpha_split: f64,
    /// β_s of the CGM prior.
    #[arg(long, default_value_t = 0.5, allow_negative_numbers = true)]
    beta_split: f64,
    /// A node of fewer training rows does not split [default: no such rule].
    #[arg(long)]
    min_samples: Option<usize>,
    /// Classification: the Dirichlet's total concentration α (α/K per class).
    #[arg(long, default_value_t = 5.0, allow_negative_numbers = true)]
    alpha: f64,
    /// Resample when the effective sample size falls below this fraction of an island's
    /// particles (0 never resamples).
    #[arg(long, default_value_t = 0.1, allow_negative_numbers = true)]
    ess_threshold: f64,
    /// How ancestors are drawn.
    #[arg(long, value_enum, default_value = "multinomial")]
    resampler: ResamplerArg,
    /// How islands combine.
    #[arg(long, value_enum, default_value = "equal")]
    island_weighting: WeightingArg,
    /// Master seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Worker threads (0: all cores); results do not depend on it.
    #[arg(long, default_value_t = 0, value_parser = parse_threads)]
    threads: usize,
    /// Print one JSON object as the last line instead of text.
    #[arg(long)]
    json: bool,
}

impl EvalArgs {
    fn smc(&self) -> Result<SmcParams, CliError> {
        if self.particles == 0 {
            return Err(CliError::Usage(
                "--particles 0: the sampler needs at least one particle".into(),
            ));
        }
        if self.islands == 0 || self.islands > self.particles {
            return Err(CliError::Usage(format!(
                "--islands {}: expected 1 to --particles ({}), at least one particle each",
                self.islands, self.particles
            )));
        }
        Ok(SmcParams {
            particles: self.particles,
            islands: self.islands,
            prior: CgmPrior {
                alpha_s: self.alpha_split,
                beta_s: self.beta_split,
                min_samples: self.min_samples,
            },
            proposal: match self.proposal {
                ProposalArg::Prior => Proposal::Prior,
                ProposalArg::Empirical => Proposal::Empirical,
                ProposalArg::Optimal => Proposal::Optimal,
            },
            expansion: match self.expansion {
                ExpansionArg::BreadthFirst => Expansion::NodeBreadthFirst,
                ExpansionArg::MinMarginal => Expansion::NodeMinMarginal,
                ExpansionArg::LayerWise => Expansion::LayerWise,
            },
            ess_threshold: self.ess_threshold,
            resampler: match self.resampler {
                ResamplerArg::Multinomial => Resampler::Multinomial,
                ResamplerArg::Systematic => Resampler::Systematic,
            },
            island_weighting: match self.island_weighting {
                WeightingArg::Equal => IslandWeighting::Equal,
                WeightingArg::Evidence => IslandWeighting::Evidence,
            },
            seed: self.seed,
            n_threads: self.threads,
            ..SmcParams::default()
        })
    }

    /// The settings as JSON fields.
    fn settings(&self) -> serde_json::Value {
        json!({
            "particles": self.particles,
            "islands": self.islands,
            "proposal": self.proposal.to_possible_value().map(|v| v.get_name().to_string()),
            "expansion": self.expansion.to_possible_value().map(|v| v.get_name().to_string()),
            "alpha_split": self.alpha_split,
            "beta_split": self.beta_split,
            "min_samples": self.min_samples,
            "ess_threshold": self.ess_threshold,
            "resampler": self.resampler.to_possible_value().map(|v| v.get_name().to_string()),
            "island_weighting": self
                .island_weighting
                .to_possible_value()
                .map(|v| v.get_name().to_string()),
            "seed": self.seed,
            "threads": self.threads,
        })
    }
}

pub(crate) fn run_command(args: &SmcArgs) -> Result<(), CliError> {
    match &args.command {
        SmcCommand::Eval(a) => eval(a),
    }
}

/// The task `--task` names, or the one the training labels suggest.
fn task_of(args: &EvalArgs, train: &Dataset) -> TaskArg {
    args.task.unwrap_or_else(|| {
        if integer_valued(&train.labels) {
            TaskArg::Classification
        } else {
            TaskArg::Regression
        }
    })
}

/// What every report has, whatever the task: the posterior's shape and the timings.
struct Run<'a, S> {
    posterior: &'a SmcPosterior<S>,
    log_evidence: f64,
    log_predictive: f64,
    fit_seconds: f64,
    seconds: f64,
    n_train: usize,
    n_test: usize,
    n_features: usize,
}

impl<S: Send + Sync> Run<'_, S> {
    fn json(&self, args: &EvalArgs, task: &str, mut scores: serde_json::Value) -> String {
        let trees: Vec<_> = self.posterior.trees().collect();
        let leaves: f64 = trees
            .iter()
            .map(|t| t.weight * t.tree.n_leaves() as f64)
            .sum();
        let depth: f64 = trees
            .iter()
            .map(|t| t.weight * t.tree.max_depth() as f64)
            .sum();
        let ess = 1.0 / trees.iter().map(|t| t.weight * t.weight).sum::<f64>();
        let extra = json!({
            "task": task,
            "log_predictive": self.log_predictive,
            "log_evidence": self.log_evidence,
            "seconds": self.seconds,
            "fit_seconds": self.fit_seconds,
            "n_train": self.n_train,
            "n_test": self.n_test,
            "n_features": self.n_features,
            "distinct_trees": trees.len(),
            "effective_trees": ess,
            "mean_leaves": leaves,
            "mean_depth": depth,
            "truncated": self.posterior.truncated(),
        });
        if let (Some(o), Some(e), Some(s)) = (
            scores.as_object_mut(),
            extra.as_object(),
            args.settings().as_object(),
        ) {
            o.extend(e.clone());
            o.extend(s.clone());
        }
        scores.to_string()
    }

    fn text(&self, args: &EvalArgs, scores: &str) -> String {
        let trees: Vec<_> = self.posterior.trees().collect();
        let leaves: f64 = trees
            .iter()
            .map(|t| t.weight * t.tree.n_leaves() as f64)
            .sum();
        format!(
            "{scores}, mean log predictive {:.4} on {} test rows; log evidence {:.2}; \
             {} particles in {} island(s), {} distinct trees of {leaves:.1} leaves on \
             average{}; {:.2}s (fit {:.2}s)",
            self.log_predictive,
            self.n_test,
            self.log_evidence,
            args.particles,
            args.islands,
            trees.len(),
            if self.posterior.truncated() {
                " (cut short at the stage limit)"
            } else {
                ""
            },
            self.seconds,
            self.fit_seconds,
        )
    }
}

/// Runs `fit` behind a spinner on stderr (drawn only on a terminal); its seconds.
fn timed<E>(what: &str, fit: impl FnOnce() -> Result<(), E>) -> Result<f64, E> {
    let mut fit = Some(fit);
    super::timed_training(false, 0, what, |_| match fit.take() {
        Some(f) => f(),
        None => Ok(()),
    })
}

/// A parameter the library refuses, named by its flag.
fn flag_error(e: MondrianError) -> CliError {
    match e {
        MondrianError::InvalidParameter { name, reason } => {
            let flag = match name {
                "alpha_s" => "--alpha-split",
                "beta_s" => "--beta-split",
                "ess_threshold" => "--ess-threshold",
                "alpha" => "--alpha",
                "particles" => "--particles",
                "islands" => "--islands",
                "n_threads" => "--threads",
                other => return CliError::Usage(format!("invalid parameter `{other}`: {reason}")),
            };
            CliError::Usage(format!("{flag}: {reason}"))
        }
        other => other.into(),
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn eval(args: &EvalArgs) -> Result<(), CliError> {
    let smc = args.smc()?;
    let (train, test) = read_train_test(&args.train, &args.test)?;
    let task = task_of(args, &train);
    match task {
        TaskArg::Classification => classify(args, smc, train, test),
        TaskArg::Regression => regress(args, smc, train, test),
    }
}

fn classify(
    args: &EvalArgs,
    smc: SmcParams,
    train: Dataset,
    test: Dataset,
) -> Result<(), CliError> {
    let train_labels = integer_labels(&train, &args.train)?;
    let test_labels = integer_labels(&test, &args.test)?;
    let mut values = train_labels.clone();
    values.sort_unstable();
    values.dedup();
    let k = values.len();
    let y = classes_of(&train_labels, &values, &args.train)?;
    let yt = classes_of(&test_labels, &values, &args.test)?;
    let d = train.n_features;
    let mut model = SmcTreeClassifier::new(SmcClassifierParams {
        smc,
        alpha: args.alpha,
        n_classes: Some(k),
    })
    .map_err(flag_error)?;
    let what = format!(
        "SMC trees: {} particles on {} rows",
        args.particles,
        train.n_rows()
    );
    let start = Instant::now();
    let fit_seconds = timed(&what, || model.fit(&train.x, d, &y))?;
    let predicted = model.predict(&test.x, d)?;
    let log_p = model.log_predictive(&test.x, d, &yt)?;
    let seconds = start.elapsed().as_secs_f64();
    let hits = predicted.iter().zip(&yt).filter(|(a, b)| a == b).count();
    let accuracy = hits as f64 / yt.len() as f64;
    let run = Run {
        posterior: model.posterior()?,
        log_evidence: model.log_evidence()?,
        log_predictive: mean(&log_p),
        fit_seconds,
        seconds,
        n_train: train.n_rows(),
        n_test: test.n_rows(),
        n_features: d,
    };
    if args.json {
        let scores = json!({
            "accuracy": accuracy,
            "n_classes": k,
            "alpha": args.alpha,
        });
        println!("{}", run.json(args, "classification", scores));
    } else {
        println!(
            "{}",
            run.text(args, &format!("test accuracy {accuracy:.4} ({k} classes)"))
        );
    }
    Ok(())
}

fn regress(args: &EvalArgs, smc: SmcParams, train: Dataset, test: Dataset) -> Result<(), CliError> {
    let d = train.n_features;
    let mut model = SmcTreeRegressor::new(SmcRegressorParams {
        smc,
        leaf: RegressionLeaf::Calibrated,
    })
    .map_err(flag_error)?;
    let what = format!(
        "SMC trees: {} particles on {} rows",
        args.particles,
        train.n_rows()
    );
    let start = Instant::now();
    let fit_seconds = timed(&what, || model.fit(&train.x, d, &train.labels))?;
    let (means, variances) = model.predict_mean_variance(&test.x, d)?;
    let log_p = model.log_predictive(&test.x, d, &test.labels)?;
    let seconds = start.elapsed().as_secs_f64();
    let sq: Vec<f64> = means
        .iter()
        .zip(&test.labels)
        .map(|(m, y)| (m - y) * (m - y))
        .collect();
    let rmse = mean(&sq).sqrt();
    let mean_std = mean(&variances.iter().map(|v| v.sqrt()).collect::<Vec<_>>());
    let run = Run {
        posterior: model.posterior()?,
        log_evidence: model.log_evidence()?,
        log_predictive: mean(&log_p),
        fit_seconds,
        seconds,
        n_train: train.n_rows(),
        n_test: test.n_rows(),
        n_features: d,
    };
    if args.json {
        let scores = json!({ "rmse": rmse, "mean_std": mean_std });
        println!("{}", run.json(args, "regression", scores));
    } else {
        println!(
            "{}",
            run.text(
                args,
                &format!("test RMSE {rmse:.4} (mean predictive std {mean_std:.4})")
            )
        );
    }
    Ok(())
}
