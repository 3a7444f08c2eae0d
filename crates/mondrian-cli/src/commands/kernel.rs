//! `mondrian kernel`: ridge regression on Mondrian kernel features, the lifetime search,
//! and the features themselves (spec `mondrian-kernel.md`).

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, Subcommand, ValueEnum};
use mondrian::kernel::{
    relative_error, Criterion, Csr, Extension, KernelParams, KernelRidgeParams, LifetimeSearch,
    MondrianKernel, MondrianKernelRidge,
};
use mondrian::persist::Persistent;
use serde_json::json;

use super::forest::parse_threads;
use super::{read_model, read_train_test, save_model, CliError};
use crate::io::{read_dataset, read_features};

#[derive(Args)]
pub(crate) struct KernelArgs {
    #[command(subcommand)]
    command: KernelCommand,
}

#[derive(Subcommand)]
enum KernelCommand {
    /// Fit ridge regression on the features of one file (last column: the target), with
    /// the lifetime given or searched, and report the error on another.
    Eval(EvalArgs),
    /// Fit ridge regression on a labelled file and save the model.
    Fit(FitArgs),
    /// Predict the targets of a file's rows with a saved model (one per line; with `--std`
    /// also the predictive standard deviation).
    Predict(PredictArgs),
    /// Write the features of a file's rows under a saved model, in LIBSVM format.
    Transform(TransformArgs),
}

/// What every fit takes.
#[derive(Args, Clone)]
struct ModelArgs {
    /// Trees M: non-zero features per row.
    #[arg(long, default_value_t = 50)]
    trees: usize,
    /// Ridge regulariser δ².
    #[arg(long, default_value_t = 1e-4, allow_negative_numbers = true)]
    delta2: f64,
    /// Master seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Worker threads (0: all cores); results do not depend on it.
    #[arg(long, default_value_t = 0, value_parser = parse_threads)]
    threads: usize,
    /// Most features the exact solver may hold (its factor takes 4·C² bytes).
    #[arg(long, default_value_t = 8192)]
    max_features: usize,
}

impl ModelArgs {
    fn params(&self, lifetime: f64) -> KernelRidgeParams {
        KernelRidgeParams {
            kernel: KernelParams {
                n_trees: self.trees,
                lifetime,
                seed: self.seed,
                n_threads: self.threads,
                extension: Extension::Sample,
            },
            delta2: self.delta2,
            max_features: self.max_features,
        }
    }
}

/// How the lifetime is chosen in a sweep.
#[derive(Clone, Copy, ValueEnum)]
enum CriterionArg {
    /// Squared error on a held-out fifth of the training rows.
    Validation,
    /// The log marginal likelihood of the training rows.
    Evidence,
}

#[derive(Args)]
struct EvalArgs {
    /// Training rows: CSV with a header and the target in the last column (.csv.gz too),
    /// or LIBSVM.
    #[arg(long)]
    train: PathBuf,
    /// Test rows, with the training file's columns.
    #[arg(long)]
    test: PathBuf,
    /// The lifetime λ (inverse width of the Laplace kernel, in the raw features' units).
    #[arg(long, conflicts_with = "sweep", allow_negative_numbers = true)]
    lifetime: Option<f64>,
    /// Search the lifetime over LO:HI (log-spaced, `--steps` values) along one sweep.
    #[arg(long, value_name = "LO:HI", allow_hyphen_values = true)]
    sweep: Option<String>,
    /// Lifetimes in the sweep.
    #[arg(long, default_value_t = 20)]
    steps: usize,
    /// How the sweep chooses.
    #[arg(long, value_enum, default_value = "validation")]
    criterion: CriterionArg,
    /// Stop the sweep after this many lifetimes in a row without a better score (the
    /// largest lifetimes cost the most); by default every lifetime is read.
    #[arg(long, requires = "sweep")]
    patience: Option<usize>,
    /// Sample the trees on the training and test rows together (no test labels are read),
    /// as the paper does, instead of placing the test rows by the exact extension.
    #[arg(long)]
    transductive: bool,
    #[command(flatten)]
    model: ModelArgs,
    /// Print one JSON object as the last line instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct FitArgs {
    /// Training rows (target in the last column).
    #[arg(long)]
    train: PathBuf,
    /// Where the model is saved.
    #[arg(long)]
    model: PathBuf,
    /// The lifetime λ.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    lifetime: f64,
    #[command(flatten)]
    args: ModelArgs,
}

#[derive(Args)]
struct PredictArgs {
    /// A model saved by `kernel fit`.
    #[arg(long)]
    model: PathBuf,
    /// Rows to predict (a last target column, if present, is ignored).
    #[arg(long)]
    input: PathBuf,
    /// Write here instead of standard output.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Also write the predictive standard deviation.
    #[arg(long)]
    std: bool,
}

#[derive(Args)]
struct TransformArgs {
    /// A model saved by `kernel fit`.
    #[arg(long)]
    model: PathBuf,
    /// Rows to transform (a last target column, if present, becomes the LIBSVM label).
    #[arg(long)]
    input: PathBuf,
    /// The LIBSVM file written (1-based feature indices).
    #[arg(long)]
    output: PathBuf,
    /// Follow the cuts only (every row gets M features) instead of the exact extension.
    #[arg(long)]
    route: bool,
}

pub(crate) fn run_command(args: &KernelArgs) -> Result<(), CliError> {
    match &args.command {
        KernelCommand::Eval(a) => eval(a),
        KernelCommand::Fit(a) => fit(a),
        KernelCommand::Predict(a) => predict(a),
        KernelCommand::Transform(a) => transform(a),
    }
}

/// `LO:HI` as `steps` log-spaced lifetimes.
fn sweep_grid(text: &str, steps: usize) -> Result<Vec<f64>, CliError> {
    let usage = || {
        CliError::Usage(format!(
            "--sweep {text}: expected LO:HI with 0 < LO < HI, e.g. 1e-7:1e-5"
        ))
    };
    let (lo, hi) = text.split_once(':').ok_or_else(usage)?;
    let lo: f64 = lo.trim().parse().map_err(|_| usage())?;
    let hi: f64 = hi.trim().parse().map_err(|_| usage())?;
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return Err(usage());
    }
    if !(2..=10_000).contains(&steps) {
        return Err(CliError::Usage(format!(
            "--steps {steps}: expected 2 to 10000 lifetimes (each reading predicts every row)"
        )));
    }
    let (a, b) = (lo.ln(), hi.ln());
    // The ends are LO and HI exactly (exp(ln HI) may exceed HI by an ulp or two).
    Ok((0..steps)
        .map(|i| match i {
            0 => lo,
            i if i == steps - 1 => hi,
            i => (a + (b - a) * i as f64 / (steps - 1) as f64).exp(),
        })
        .collect())
}

fn rmse(p: &[f64], y: &[f64]) -> f64 {
    (p.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum::<f64>() / y.len() as f64).sqrt()
}

fn eval(args: &EvalArgs) -> Result<(), CliError> {
    let (train, test) = read_train_test(&args.train, &args.test)?;
    let d = train.n_features;
    let start = Instant::now();
    let grid = match (&args.sweep, args.lifetime) {
        (Some(s), _) => Some(sweep_grid(s, args.steps)?),
        (None, Some(_)) => None,
        (None, None) => {
            return Err(CliError::Usage(
                "give the lifetime (--lifetime L) or a range to search (--sweep LO:HI)".into(),
            ))
        }
    };
    let mut scores = None;
    let mut model = match &grid {
        Some(grid) => {
            let criterion = match args.criterion {
                CriterionArg::Validation => Criterion::Validation,
                CriterionArg::Evidence => Criterion::Evidence,
            };
            let search = LifetimeSearch {
                lifetimes: grid.clone(),
                criterion,
                validation_fraction: 0.2,
                patience: args.patience,
            };
            let (model, s) = MondrianKernelRidge::fit_cv(
                args.model.params(grid[0]),
                &train.x,
                d,
                &train.labels,
                &search,
            )?;
            scores = Some(s);
            model
        }
        None => {
            let lifetime = args.lifetime.expect("checked above");
            let mut model = MondrianKernelRidge::new(args.model.params(lifetime))?;
            model.fit(&train.x, d, &train.labels)?;
            model
        }
    };
    if args.transductive {
        // The chosen lifetime's trees on train and test rows, the ridge on train rows.
        let params = model.params().clone();
        let mut all = train.x.clone();
        all.extend_from_slice(&test.x);
        model = MondrianKernelRidge::new(params)?;
        model.fit_transductive(&all, d, &train.labels)?;
    }
    let fit_seconds = start.elapsed().as_secs_f64();
    let predicted = model.predict(&test.x, d)?;
    let seconds = start.elapsed().as_secs_f64();
    let error = relative_error(&predicted, &test.labels);
    let r = rmse(&predicted, &test.labels);
    let lifetime = model.lifetime();
    if args.json {
        let mut out = json!({
            "rmse": r,
            "relative_error": error,
            "lifetime": lifetime,
            "n_features": model.n_features_out(),
            "seconds": seconds,
            "fit_seconds": fit_seconds,
            "n_train": train.n_rows(),
            "n_test": test.n_rows(),
            "trees": args.model.trees,
            "delta2": args.model.delta2,
            "seed": args.model.seed,
            "transductive": args.transductive,
        });
        if let (Some(grid), Some(scores)) = (&grid, &scores) {
            out["sweep"] = json!({
                "lifetimes": grid,
                "scores": scores,
                "criterion": match args.criterion {
                    CriterionArg::Validation => "validation_mse",
                    CriterionArg::Evidence => "minus_log_marginal_likelihood",
                },
            });
        }
        println!("{out}");
    } else {
        if let (Some(grid), Some(scores)) = (&grid, &scores) {
            let what = match args.criterion {
                CriterionArg::Validation => "validation MSE",
                CriterionArg::Evidence => "−log evidence",
            };
            println!("lifetime search ({what}, lower is better):");
            for (l, s) in grid.iter().zip(scores) {
                let mark = if *l == lifetime { "  <- chosen" } else { "" };
                println!("  λ = {l:<12.4e} {s:.6}{mark}");
            }
        }
        println!(
            "test RMSE {r:.4}, relative error {error:.3}% on {} rows; λ = {lifetime:e}, {} \
             trees, {} features; {seconds:.2}s",
            test.n_rows(),
            args.model.trees,
            model.n_features_out()
        );
    }
    Ok(())
}

fn fit(args: &FitArgs) -> Result<(), CliError> {
    let train = read_dataset(&args.train, None)?;
    let mut model = MondrianKernelRidge::new(args.args.params(args.lifetime))?;
    let start = Instant::now();
    model.fit(&train.x, train.n_features, &train.labels)?;
    save_model(
        &model,
        MondrianKernelRidge::KIND,
        model.encoding(),
        &args.model,
    )?;
    println!(
        "fit {} rows of {} features in {:.2}s: {} trees, λ = {:e}, {} features; saved to {}",
        train.n_rows(),
        train.n_features,
        start.elapsed().as_secs_f64(),
        args.args.trees,
        args.lifetime,
        model.n_features_out(),
        args.model.display()
    );
    Ok(())
}

fn load_ridge(path: &Path) -> Result<MondrianKernelRidge, CliError> {
    Ok(MondrianKernelRidge::load_from(read_model(path)?)?)
}

fn predict(args: &PredictArgs) -> Result<(), CliError> {
    let mut model = load_ridge(&args.model)?;
    let d = model
        .kernel()
        .n_features_in()
        .ok_or(mondrian::MondrianError::NotFitted)?;
    let input = read_features(&args.input, d)?;
    let mut text = String::new();
    if args.std {
        let (mean, std) = model.predict_with_std(&input.x, d)?;
        for (m, s) in mean.iter().zip(&std) {
            let _ = writeln!(text, "{m},{s}");
        }
    } else {
        for m in model.predict(&input.x, d)? {
            let _ = writeln!(text, "{m}");
        }
    }
    super::write_output(args.output.as_deref(), &text)
}

fn transform(args: &TransformArgs) -> Result<(), CliError> {
    let model = load_ridge(&args.model)?;
    let mut kernel: MondrianKernel = model.kernel().clone();
    if args.route {
        kernel.set_extension(Extension::Route);
    }
    let d = kernel
        .n_features_in()
        .ok_or(mondrian::MondrianError::NotFitted)?;
    let input = read_features(&args.input, d)?;
    let phi = kernel.transform(&input.x, d)?;
    write_libsvm(&args.output, &phi, &input.labels)?;
    println!(
        "{} rows, {} features ({} non-zero) written to {}",
        phi.n_rows,
        phi.n_cols,
        phi.nnz(),
        args.output.display()
    );
    Ok(())
}

/// `label idx:value …` per row, 1-based indices; label 0 where the input has none.
fn write_libsvm(path: &Path, phi: &Csr, labels: &[f64]) -> Result<(), CliError> {
    let file = std::fs::File::create(path).map_err(CliError::write(path))?;
    let mut out = BufWriter::new(file);
    let value = phi.value;
    let mut line = String::new();
    for i in 0..phi.n_rows {
        line.clear();
        let label = labels.get(i).copied().unwrap_or(0.0);
        let _ = write!(line, "{label}");
        for &c in phi.row(i) {
            let _ = write!(line, " {}:{value}", c + 1);
        }
        line.push('\n');
        out.write_all(line.as_bytes())
            .map_err(CliError::write(path))?;
    }
    out.flush().map_err(CliError::write(path))
}
