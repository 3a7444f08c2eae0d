//! `mondrian bart`: Bayesian additive regression trees (spec `bayesian-trees.md` §4), a
//! sum of M trees sampled by Bayesian backfitting with the particle Gibbs, CGM or
//! GrowPrune tree kernel, scored by its posterior predictive and the mixing of its chain.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand, ValueEnum};
use mondrian::bayes::{
    bart::Traces, BartClassifier, BartParams, BartRegressor, NoisePrior, PgInit, SigmaHat,
    TreeOrder, TreeSampler,
};
use mondrian::MondrianError;
use serde_json::json;

use super::forest::parse_threads;
use super::{classes_of, integer_valued, progress, read_train_test, CliError};
use crate::io::{integer_labels, Dataset};

#[derive(Args)]
pub(crate) struct BartArgs {
    #[command(subcommand)]
    command: BartCommand,
}

#[derive(Subcommand)]
enum BartCommand {
    /// Fit BART on one file and score its posterior predictive on another, with the
    /// effective sample size of the chain.
    ///
    /// The last column is the label. The task is classification (binary probit BART) when
    /// the training labels are integers of exactly two values, and regression otherwise,
    /// unless --task says. The defaults are the library's `BartParams::default()`
    /// (Chipman et al. 2010 as in spec §4.7): M = 200 trees, particle Gibbs with C = 10,
    /// 2000 iterations of which the first 1000 are burn-in, α_s = 0.95, β_s = 2, k = 2,
    /// ν = 3, q = 0.9. The kept draws are the iterations after the burn-in.
    ///
    /// With --json the last line is one JSON object. Regression: `rmse` of the posterior
    /// mean, `nlpd` (mean over the test rows of −log (1/S) Σ_s N(y; f_s(x), σ_s²), nats)
    /// and `coverage_90` (fraction of test targets inside the central 90% posterior
    /// predictive interval). Classification: `accuracy`, `log_loss` = `nlpd` (mean
    /// −log p(y), p clamped to ≥ 1e-15), `rmse` (root Brier score of P(y = 1)) and
    /// `coverage_90` null. Both: `ess` (CODA effective sample size of the training
    /// log-likelihood over the kept iterations), `ess_per_second` (ess / `kept_seconds`,
    /// the sampler's seconds in the kept iterations), `sampler_seconds` (all iterations),
    /// `seconds` (fit and predict wall time), `fit_seconds`, `mean_leaves` (leaves per
    /// tree, averaged over the kept iterations), the sizes and the settings. Progress goes
    /// to standard error.
    Eval(EvalArgs),
}

/// What to learn.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TaskArg {
    /// Real targets: y = Σ_m g(x; T_m, μ_m) + N(0, σ²).
    Regression,
    /// Two integer classes: P(y = 1 | x) = Φ(Σ_m g(x; T_m, μ_m)) (probit).
    Classification,
}

/// The Markov kernel that updates one tree given its residual.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SamplerArg {
    /// Particle Gibbs: one conditional-SMC sweep of --particles particles (§4.6).
    Pg,
    /// One grow, prune, change or swap Metropolis–Hastings move, ¼ each (§4.5).
    Cgm,
    /// One grow or prune Metropolis–Hastings move, ½ each.
    #[value(name = "growprune")]
    GrowPrune,
}

/// The over-estimate σ̂ of the noise sd that calibrates the σ² prior (regression).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SigmaHatArg {
    /// The sample sd of the targets.
    Sd,
    /// The residual sd of a least-squares fit on the features (needs rows > features + 1).
    Ols,
}

/// The σ² prior.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum NoisePriorArg {
    /// σ² ~ IG(ν/2, νλ/2) (Chipman, George & McCulloch).
    Chipman,
    /// Gamma(ν, β) on 1/σ², as the thesis' reference code.
    Refcode,
}

/// The order in which a sweep visits the trees.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TreeOrderArg {
    /// 1..M every iteration.
    Sequential,
    /// A fresh random permutation every iteration.
    Shuffled,
}

/// The library's default particle count of the PG kernel.
fn default_particles() -> usize {
    match TreeSampler::default() {
        TreeSampler::ParticleGibbs { particles, .. } => particles,
        _ => 10,
    }
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
    /// What to learn [default: classification when the training labels are integers of
    /// exactly two values, else regression].
    #[arg(long, value_enum)]
    task: Option<TaskArg>,
    /// M, the trees in the sum.
    #[arg(long, default_value_t = BartParams::default().n_trees)]
    trees: usize,
    /// The tree kernel.
    #[arg(long, value_enum, default_value = "pg")]
    sampler: SamplerArg,
    /// C, the particles of the PG kernel, the reference tree included (--sampler pg only)
    /// [default: 10].
    #[arg(long)]
    particles: Option<usize>,
    /// Iterations of the Gibbs sampler, burn-in included.
    #[arg(long, default_value_t = BartParams::default().n_iter)]
    iters: usize,
    /// Leading iterations left out of the posterior draws and the ESS; less than --iters.
    #[arg(long, default_value_t = BartParams::default().burn_in)]
    burn_in: usize,
    /// α_s of the tree prior: a node at depth d splits with probability α_s(1 + d)^(−β_s).
    #[arg(long, default_value_t = BartParams::default().prior.alpha_s, allow_negative_numbers = true)]
    alpha_s: f64,
    /// β_s of the tree prior (spec §5.3 hypercube: 1, 0.5, 0.4, 0.3, 0.25 for D = 2, 3, 4,
    /// 5, 7).
    #[arg(long, default_value_t = BartParams::default().prior.beta_s, allow_negative_numbers = true)]
    beta_s: f64,
    /// k: the leaf prior sd is 0.5/(k√M) on targets rescaled to [−0.5, 0.5] (3/(k√M) on
    /// the probit scale).
    #[arg(long, default_value_t = BartParams::default().k, allow_negative_numbers = true)]
    k: f64,
    /// ν, the degrees of freedom of the σ² prior (regression).
    #[arg(long, default_value_t = BartParams::default().nu, allow_negative_numbers = true)]
    nu: f64,
    /// q = P(σ ≤ σ̂) under the σ² prior, in (0, 1) (regression).
    #[arg(long, default_value_t = BartParams::default().q, allow_negative_numbers = true)]
    q: f64,
    /// How σ̂ is computed (regression).
    #[arg(long, value_enum, default_value = "sd")]
    sigma_hat: SigmaHatArg,
    /// The σ² prior (regression): Chipman et al.'s IG(ν/2, νλ/2), or the reference
    /// code's Gamma(ν) on the precision; both put P(σ ≤ σ̂) = q.
    #[arg(long, value_enum, default_value = "chipman")]
    noise_prior: NoisePriorArg,
    /// The order in which a sweep visits the trees.
    #[arg(long, value_enum, default_value = "sequential")]
    tree_order: TreeOrderArg,
    /// Master seed: the same seed gives the same chain.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Threads for prediction (the chain itself is sequential): 0 all cores, 1 the main
    /// thread, T > 1 at most T; results do not depend on it.
    #[arg(long, default_value_t = 0, value_parser = parse_threads)]
    threads: usize,
    /// Print one JSON object as the last line instead of text.
    #[arg(long)]
    json: bool,
}

impl EvalArgs {
    fn params(&self) -> Result<BartParams, CliError> {
        if self.trees == 0 {
            return Err(CliError::Usage(
                "--trees 0: the sum needs at least one tree".into(),
            ));
        }
        if self.iters == 0 {
            return Err(CliError::Usage(
                "--iters 0: the sampler needs at least one iteration".into(),
            ));
        }
        if self.burn_in >= self.iters {
            return Err(CliError::Usage(format!(
                "--burn-in {}: must be less than --iters ({}), or no iteration is kept",
                self.burn_in, self.iters
            )));
        }
        let sampler = match self.sampler {
            SamplerArg::Pg => {
                let particles = self.particles.unwrap_or_else(default_particles);
                if particles == 0 {
                    return Err(CliError::Usage(
                        "--particles 0: the PG kernel needs at least one particle".into(),
                    ));
                }
                let max_stages = match TreeSampler::default() {
                    TreeSampler::ParticleGibbs { max_stages, .. } => max_stages,
                    _ => 5000,
                };
                TreeSampler::ParticleGibbs {
                    particles,
                    max_stages,
                    init: PgInit::Empty,
                }
            }
            SamplerArg::Cgm | SamplerArg::GrowPrune if self.particles.is_some() => {
                return Err(CliError::Usage(
                    "--particles applies to --sampler pg only".into(),
                ))
            }
            SamplerArg::Cgm => TreeSampler::cgm(),
            SamplerArg::GrowPrune => TreeSampler::GrowPrune,
        };
        let defaults = BartParams::default();
        Ok(BartParams {
            n_trees: self.trees,
            k: self.k,
            nu: self.nu,
            q: self.q,
            prior: mondrian::bayes::CgmPrior {
                alpha_s: self.alpha_s,
                beta_s: self.beta_s,
                ..defaults.prior
            },
            sigma_hat: match self.sigma_hat {
                SigmaHatArg::Sd => SigmaHat::SampleSd,
                SigmaHatArg::Ols => SigmaHat::OlsResidualSd,
            },
            noise_prior: match self.noise_prior {
                NoisePriorArg::Chipman => NoisePrior::ChipmanIg,
                NoisePriorArg::Refcode => NoisePrior::RefCodeGamma,
            },
            sampler,
            n_iter: self.iters,
            burn_in: self.burn_in,
            tree_order: match self.tree_order {
                TreeOrderArg::Sequential => TreeOrder::Sequential,
                TreeOrderArg::Shuffled => TreeOrder::Shuffled,
            },
            seed: self.seed,
            n_threads: self.threads,
            ..defaults
        })
    }

    fn sampler_name(&self) -> String {
        self.sampler
            .to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }

    /// The settings as JSON fields.
    fn settings(&self) -> serde_json::Value {
        let name = |v: Option<clap::builder::PossibleValue>| v.map(|v| v.get_name().to_string());
        json!({
            "trees": self.trees,
            "sampler": self.sampler_name(),
            "particles": match self.sampler {
                SamplerArg::Pg => Some(self.particles.unwrap_or_else(default_particles)),
                _ => None,
            },
            "iters": self.iters,
            "burn_in": self.burn_in,
            "alpha_s": self.alpha_s,
            "beta_s": self.beta_s,
            "k": self.k,
            "nu": self.nu,
            "q": self.q,
            "sigma_hat": name(self.sigma_hat.to_possible_value()),
            "noise_prior": name(self.noise_prior.to_possible_value()),
            "tree_order": name(self.tree_order.to_possible_value()),
            "seed": self.seed,
            "threads": self.threads,
        })
    }
}

pub(crate) fn run_command(args: &BartArgs) -> Result<(), CliError> {
    match &args.command {
        BartCommand::Eval(a) => eval(a),
    }
}

/// A parameter the library refuses, named by its flag.
fn flag_error(e: MondrianError) -> CliError {
    match e {
        MondrianError::InvalidParameter { name, reason } => {
            let flag = match name {
                "n_trees" => "--trees",
                "alpha_s" => "--alpha-s",
                "beta_s" => "--beta-s",
                "k" => "--k",
                "nu" => "--nu",
                "q" => "--q",
                "particles" => "--particles",
                "n_iter" => "--iters",
                "burn_in" => "--burn-in",
                "n_threads" => "--threads",
                "sigma_hat" => "--sigma-hat",
                other => return CliError::Usage(format!("invalid parameter `{other}`: {reason}")),
            };
            CliError::Usage(format!("{flag}: {reason}"))
        }
        other => other.into(),
    }
}

/// Runs `fit` with a progress report on standard error: a bar on a terminal, else a line
/// at every 5% of the iterations that comes a second or more after the previous line; a
/// line before and after. Returns the wall seconds.
fn with_progress<E>(
    what: &str,
    n_iter: usize,
    fit: impl FnOnce(&mut dyn FnMut(usize, usize)) -> Result<(), E>,
) -> Result<f64, E> {
    eprintln!("bart: {what}");
    let bar = progress(n_iter as u64, "bart");
    let lines = bar.is_hidden();
    let start = Instant::now();
    let (mut shown, mut last) = (0, 0.0);
    let mut report = |i: usize, n: usize| {
        if lines {
            let step = i * 20 / n.max(1);
            let now = start.elapsed().as_secs_f64();
            if step > shown && i < n && now - last >= 1.0 {
                (shown, last) = (step, now);
                eprintln!("bart: iteration {i}/{n}, {now:.1} s");
            }
        } else {
            bar.set_position(i as u64);
        }
    };
    let result = fit(&mut report);
    bar.finish_and_clear();
    let seconds = start.elapsed().as_secs_f64();
    result?;
    eprintln!("bart: {n_iter} iterations in {seconds:.2} s");
    Ok(seconds)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// ESS and timing summaries of the chain, whatever the task.
fn chain_fields(traces: &Traces) -> serde_json::Value {
    let ess = traces.ess_log_likelihood();
    json!({
        "ess": ess,
        "ess_per_second": traces.ess_per_second_log_likelihood(),
        "sampler_seconds": traces.total_seconds(),
        "kept_seconds": traces.kept_seconds(),
        "mean_leaves": mean(traces.kept(&traces.mean_leaves)),
        "move_rate": mean(traces.kept(&traces.move_rate)),
    })
}

/// The common part of both reports: sizes, timings, chain summaries and settings.
struct Report<'a> {
    args: &'a EvalArgs,
    task: &'static str,
    traces: &'a Traces,
    fit_seconds: f64,
    seconds: f64,
    n_train: usize,
    n_test: usize,
    n_features: usize,
}

impl Report<'_> {
    fn json(&self, mut scores: serde_json::Value) -> String {
        let extra = json!({
            "task": self.task,
            "seconds": self.seconds,
            "fit_seconds": self.fit_seconds,
            "n_train": self.n_train,
            "n_test": self.n_test,
            "n_features": self.n_features,
            "n_draws": self.args.iters - self.args.burn_in,
        });
        if let Some(o) = scores.as_object_mut() {
            for part in [extra, chain_fields(self.traces), self.args.settings()] {
                if let Some(p) = part.as_object() {
                    o.extend(p.clone());
                }
            }
        }
        scores.to_string()
    }

    fn text(&self, scores: &str) -> String {
        let t = self.traces;
        format!(
            "{scores} on {} test rows; ESS of the log-likelihood {:.1} over {} kept \
             iterations ({:.2}/s); {} trees ({}), {:.2} leaves per tree; {:.2}s (fit {:.2}s)",
            self.n_test,
            t.ess_log_likelihood(),
            self.args.iters - self.args.burn_in,
            t.ess_per_second_log_likelihood(),
            self.args.trees,
            self.args.sampler_name(),
            mean(t.kept(&t.mean_leaves)),
            self.seconds,
            self.fit_seconds,
        )
    }
}

fn eval(args: &EvalArgs) -> Result<(), CliError> {
    let params = args.params()?;
    let (train, test) = read_train_test(&args.train, &args.test)?;
    if train.n_features == 0 {
        return Err(CliError::Usage(format!(
            "{}: no feature columns (the last column is the label)",
            args.train.display()
        )));
    }
    let task = match args.task {
        Some(t) => t,
        None => {
            let mut values = train.labels.clone();
            values.sort_by(f64::total_cmp);
            values.dedup();
            if values.len() == 2 && integer_valued(&values) {
                TaskArg::Classification
            } else {
                TaskArg::Regression
            }
        }
    };
    match task {
        TaskArg::Classification => classify(args, params, &train, &test),
        TaskArg::Regression => regress(args, params, &train, &test),
    }
}

fn what(args: &EvalArgs, train: &Dataset, task: &str) -> String {
    format!(
        "{task}, {} trees ({}), {} iterations ({} burn-in) on {} rows × {} features",
        args.trees,
        args.sampler_name(),
        args.iters,
        args.burn_in,
        train.n_rows(),
        train.n_features
    )
}

/// Log of (1/S) Σ_s N(y; f_s, σ_s²), by log-sum-exp.
fn log_mixture_density(
    y: f64,
    f: impl Iterator<Item = f64>,
    sigma: &[f64],
    terms: &mut Vec<f64>,
) -> f64 {
    terms.clear();
    terms.extend(f.zip(sigma).map(|(f, s)| {
        let z = (y - f) / s;
        -0.5 * z * z - s.ln() - 0.5 * std::f64::consts::TAU.ln()
    }));
    let top = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !top.is_finite() {
        return top;
    }
    top + (terms.iter().map(|t| (t - top).exp()).sum::<f64>() / terms.len() as f64).ln()
}

fn regress(
    args: &EvalArgs,
    params: BartParams,
    train: &Dataset,
    test: &Dataset,
) -> Result<(), CliError> {
    let d = train.n_features;
    let mut model = BartRegressor::new(params).map_err(flag_error)?;
    let start = Instant::now();
    let fit_seconds = with_progress(&what(args, train, "regression"), args.iters, |p| {
        model.fit_with_progress(&train.x, d, &train.labels, p)
    })
    .map_err(flag_error)?;
    // The posterior mean and the predictive density from the draws, a block of rows at
    // a time (draws × rows values each).
    let sigma = model.sigma_draws()?;
    let s = sigma.len().max(1);
    let block = ((1usize << 22) / s).max(1);
    let (mut sq, mut nlpd) = (0.0, 0.0);
    let mut terms = Vec::with_capacity(s);
    for (x, y) in test.x.chunks(block * d).zip(test.labels.chunks(block)) {
        let draws = model.posterior_draws(x, d)?;
        let n = y.len();
        for (i, &yi) in y.iter().enumerate() {
            let f = (0..sigma.len()).map(|k| draws[k * n + i]);
            let m = f.clone().sum::<f64>() / sigma.len() as f64;
            sq += (m - yi) * (m - yi);
            nlpd -= log_mixture_density(yi, f, &sigma, &mut terms);
        }
    }
    let (lo, hi) = model.predict_interval(&test.x, d, 0.9)?;
    let seconds = start.elapsed().as_secs_f64();
    let n_test = test.n_rows();
    let inside = test
        .labels
        .iter()
        .zip(lo.iter().zip(&hi))
        .filter(|(y, (l, h))| *l <= *y && *y <= *h)
        .count();
    let coverage = inside as f64 / n_test as f64;
    let rmse = (sq / n_test as f64).sqrt();
    let nlpd = nlpd / n_test as f64;
    let report = Report {
        args,
        task: "regression",
        traces: model.traces()?,
        fit_seconds,
        seconds,
        n_train: train.n_rows(),
        n_test,
        n_features: d,
    };
    if args.json {
        let scores = json!({
            "rmse": rmse,
            "nlpd": nlpd,
            "coverage_90": coverage,
            "sigma": mean(&sigma),
        });
        println!("{}", report.json(scores));
    } else {
        println!(
            "{}",
            report.text(&format!(
                "test RMSE {rmse:.4}, NLPD {nlpd:.4}, 90% interval coverage {coverage:.3}"
            ))
        );
    }
    Ok(())
}

fn classify(
    args: &EvalArgs,
    params: BartParams,
    train: &Dataset,
    test: &Dataset,
) -> Result<(), CliError> {
    let train_labels = integer_labels(train, &args.train)?;
    let test_labels = integer_labels(test, &args.test)?;
    let mut values = train_labels.clone();
    values.sort_unstable();
    values.dedup();
    if values.len() != 2 {
        let shown: Vec<String> = values.iter().take(10).map(i64::to_string).collect();
        return Err(CliError::Usage(format!(
            "{}: classification is binary probit BART and needs exactly two classes; the \
             training labels have {} ({}{})",
            args.train.display(),
            values.len(),
            shown.join(", "),
            if values.len() > 10 { ", …" } else { "" }
        )));
    }
    let y = classes_of(&train_labels, &values, &args.train)?;
    let yt = classes_of(&test_labels, &values, &args.test)?;
    let d = train.n_features;
    let mut model = BartClassifier::new(params).map_err(flag_error)?;
    let start = Instant::now();
    let fit_seconds = with_progress(&what(args, train, "classification"), args.iters, |p| {
        model.fit_with_progress(&train.x, d, &y, p)
    })
    .map_err(flag_error)?;
    let proba = model.predict_proba(&test.x, d)?;
    let seconds = start.elapsed().as_secs_f64();
    let n_test = yt.len();
    let (mut hits, mut log_loss, mut brier) = (0usize, 0.0, 0.0);
    for (p, &c) in proba.chunks(2).zip(&yt) {
        // The library's predict: class 1 when it is the more probable.
        hits += usize::from(usize::from(p[1] > p[0]) == c);
        log_loss -= p[c].max(1e-15).ln();
        brier += (p[1] - c as f64) * (p[1] - c as f64);
    }
    let accuracy = hits as f64 / n_test as f64;
    let log_loss = log_loss / n_test as f64;
    let rmse = (brier / n_test as f64).sqrt();
    let report = Report {
        args,
        task: "classification",
        traces: model.traces()?,
        fit_seconds,
        seconds,
        n_train: train.n_rows(),
        n_test,
        n_features: d,
    };
    if args.json {
        let scores = json!({
            "accuracy": accuracy,
            "log_loss": log_loss,
            "nlpd": log_loss,
            "rmse": rmse,
            "coverage_90": null,
            "classes": values,
        });
        println!("{}", report.json(scores));
    } else {
        println!(
            "{}",
            report.text(&format!(
                "test accuracy {accuracy:.4}, log-loss {log_loss:.4} (classes {} and {})",
                values[0], values[1]
            ))
        );
    }
    Ok(())
}
