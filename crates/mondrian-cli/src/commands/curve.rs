//! `mondrian curve`: the paper's streaming protocol (spec §8.1), a classification forest
//! extended online one mini-batch at a time and scored on a test set after each. `demo`
//! runs the same protocol.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use mondrian::MondrianForestClassifier;
use serde::Serialize;

use super::classify::{self, evaluate, Labelled, TrainTest};
use super::forest::{ForestArgs, TaskArg};
use super::{lifetime_text, progress, with_summary, CliError};

#[derive(Args)]
pub(crate) struct CurveArgs {
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
}

/// The scores after one mini-batch; `train_seconds` adds up over the batches so far.
#[derive(Serialize)]
pub(crate) struct CurveStep {
    pub(crate) n_seen: usize,
    pub(crate) fraction: f64,
    pub(crate) accuracy: f64,
    pub(crate) log_loss: f64,
    pub(crate) train_seconds: f64,
    pub(crate) predict_seconds: f64,
}

pub(crate) fn run(args: &CurveArgs) -> Result<(), CliError> {
    // The protocol scores class predictions; a regression forest has its own report.
    if args.forest.model.task == TaskArg::Regression {
        return Err(CliError::Usage(
            "curve reports classification accuracy; for regression use eval --task regression"
                .into(),
        ));
    }
    classify::check_flags(&args.forest)?;
    let data = TrainTest::read(&args.train, &args.test)?;
    let ends = equal_batches(data.train.data.n_rows(), args.batches)?;
    let bar = progress(args.batches as u64, "mini-batches");
    let (steps, forest) = learning_curve(&data, &ends, &args.forest, |s| {
        bar.inc(1);
        if !args.json {
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
    if args.json {
        let out = serde_json::json!({
            "n_train": data.train.data.n_rows(),
            "n_test": data.test.data.n_rows(),
            "trees": forest.params().n_trees,
            "lifetime": lifetime_text(forest.params().lifetime),
            "discount_factor": args.forest.model.discount_factor,
            "gamma": forest.gamma(),
            "seed": args.forest.model.seed,
            "threads": args.forest.model.threads,
            "steps": steps,
        });
        let (window, held) = (forest.params().window, forest.n_points());
        println!("{}", with_summary(out, &forest.summary(), window, held));
    }
    Ok(())
}

/// Streams the shuffled training set in mini-batches ending at `ends`: batch `fit` on the
/// first, `partial_fit` on each next one (spec §8.1), evaluating on the test set after
/// each.
pub(crate) fn learning_curve(
    data: &TrainTest,
    ends: &[usize],
    args: &ForestArgs,
    mut report: impl FnMut(&CurveStep),
) -> Result<(Vec<CurveStep>, MondrianForestClassifier), CliError> {
    let train: &Labelled = &data.train;
    let n = train.data.n_rows();
    let d = train.data.n_features;
    let order = shuffled(n, args.model.seed);
    let x: Vec<f64> = order
        .iter()
        .flat_map(|&i| train.data.x[i * d..(i + 1) * d].iter().copied())
        .collect();
    let y: Vec<usize> = order.iter().map(|&i| train.classes[i]).collect();
    let params = classify::params(args, &train.data, data.values.len())?;
    let mut forest = MondrianForestClassifier::new(params)?;
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
        let ev = evaluate(&forest, &data.test)?;
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
