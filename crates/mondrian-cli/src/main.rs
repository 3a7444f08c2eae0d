//! `mondrian`: train, evaluate and demo Mondrian forests from the shell.
//!
//! A thin edge over the `mondrian` library: it reads files, calls the library and prints.
//! This file is the command line's shape and the hand-off to `commands/`, where each
//! command family is one module: a new family is a module there and a variant here.

mod commands;
mod io;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use commands::{curve, demo, forest};

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
    /// Stream a real data set (shipped inside the binary) through an online forest and show
    /// test accuracy growing with the data seen.
    Demo,
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Train(args) => forest::train(&args),
        Command::Predict(args) => forest::predict(&args),
        Command::Eval(args) => forest::eval(&args),
        Command::Curve(args) => curve::run(&args),
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
