//! `mondrian`: train, evaluate and demo Mondrian forests from the shell.
//!
//! A thin edge over the `mondrian` library: it reads files, calls the library and prints.
//! This file is the command line's shape and the hand-off to `commands/`, where each
//! command family is one module: a new family is a module there and a variant here.

mod commands;
mod io;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use commands::{anomaly, bart, curve, demo, density, forest, kernel, smc, stream};

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
    Train(forest::TrainArgs),
    /// Predict every row of a file with a saved model: class labels (or probabilities), or
    /// for a regression model the predictive mean and standard deviation.
    Predict(forest::PredictArgs),
    /// Train on one file, evaluate on another.
    Eval(forest::EvalArgs),
    /// The paper's streaming protocol: shuffle, split into mini-batches, train on the first
    /// and extend online with each next one, and report test accuracy after every batch.
    Curve(curve::CurveArgs),
    /// Prequential (test-then-train) evaluation of a time-ordered file: every row is first
    /// predicted by the model trained on the rows before it, then learnt.
    ///
    /// The rows are learnt one `partial_fit` at a time; with --window W the model keeps the
    /// last W rows, sliding along the stream. A row is scored only when there is a model to
    /// predict it: classification scores every row but the first (n = rows − 1); regression
    /// every row after two different targets have been learnt (n = rows − 2 for continuous
    /// targets), since the forest takes every spread of its predictive from the variance of
    /// the targets learnt.
    ///
    /// Classification reports accuracy and mean log-loss. Its classes are the file's
    /// distinct labels (the whole file is read first); a row whose label the model has not
    /// learnt yet scores as a miss, with the log-loss of the small probability the model's
    /// smoothing gives every class. Regression reports the RMSE of the predictive mean and
    /// the mean NLPD (−log density of the forest's predictive mixture; --mode fast makes
    /// each update O(depth) rather than O(nodes)). Every report line also gives, in
    /// brackets, both scores of the rows scored since the previous line; a progress bar
    /// runs on a terminal's stderr. With --json the output is one JSON object: the scores, `n`
    /// (rows scored), `seconds` (wall time of the predict-then-learn loop, without
    /// reading the file or saving), `rows_per_second` (rows / seconds), `window`,
    /// `n_points` (points held at the end) and the reports as `steps`.
    ///
    /// Features are scaled by the file's ranges, as `train` does. A refused file or flag
    /// stops the command before anything is learnt, and --model is written only after the
    /// whole stream.
    Stream(stream::StreamArgs),
    /// Anomaly scores of Mondrian Pólya forests: `score` writes one per row, `eval`
    /// measures them against 0/1 labels.
    Anomaly(anomaly::AnomalyArgs),
    /// Fit a Mondrian Pólya forest on one file and report the mean log-density of another.
    ///
    /// Every column is a feature except a last column named `anomaly`, the column
    /// --target names, or the last with --drop-last (e.g. a regression target). The
    /// density is in the units of the input. A test row outside the forest's domain (the
    /// box of the training rows) has density 0, log-density −∞: the mean over every row is
    /// then −∞ (`"-inf"` in JSON), and the report adds the number of such rows and the
    /// mean over the rows with a finite log-density. With --json the last line is one
    /// JSON object: `mean_log_density`, `mean_log_density_finite`, `n_finite`,
    /// `n_out_of_domain`, `n` (test rows), `n_train`, `seconds` (fit and score), and the
    /// forest's settings.
    Density(density::DensityArgs),
    /// The Mondrian kernel: ridge regression on its random features for the Laplace
    /// kernel exp(−λ‖x − x′‖₁), the search of λ along one sweep, and the features as
    /// LIBSVM rows.
    Kernel(kernel::KernelArgs),
    /// Bayesian decision trees fitted by top-down sequential Monte Carlo: a weighted set
    /// of trees approximating the posterior p(T | Y, X) under the CGM tree prior, scored
    /// by their posterior predictive and the evidence p(Y | X).
    Smc(smc::SmcArgs),
    /// Bayesian additive regression trees (BART): a sum of trees sampled by Bayesian
    /// backfitting with the particle Gibbs, CGM or GrowPrune tree kernel, scored by its
    /// posterior predictive and the effective sample size of its chain.
    Bart(bart::BartArgs),
    /// Stream a real data set (shipped inside the binary) through an online forest and show
    /// test accuracy growing with the data seen.
    Demo,
}

/// Makes a write to a closed pipe (`mondrian predict … | head -1`) end the process quietly,
/// by SIGPIPE, as it ends other Unix tools: Rust ignores the signal by default, and
/// `println!` then panics on the broken pipe.
#[cfg(unix)]
fn end_quietly_on_closed_pipes() {
    // SAFETY: setting a signal's disposition to its default, before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    #[cfg(unix)]
    end_quietly_on_closed_pipes();
    let result = match Cli::parse().command {
        Command::Train(args) => forest::train(&args),
        Command::Predict(args) => forest::predict(&args),
        Command::Eval(args) => forest::eval(&args),
        Command::Curve(args) => curve::run(&args),
        Command::Stream(args) => stream::run(&args),
        Command::Anomaly(args) => anomaly::run_command(&args),
        Command::Density(args) => density::run_command(&args),
        Command::Kernel(args) => kernel::run_command(&args),
        Command::Smc(args) => smc::run_command(&args),
        Command::Bart(args) => bart::run_command(&args),
        Command::Demo => demo::run(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
