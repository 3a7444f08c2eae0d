//! `mondrian density`: the held-out log-density of a Mondrian Pólya forest (spec
//! `mondrian-polya-forest.md` §5, §8.3, §8.5).

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::polya::{
    read_feature_columns, run, variant_name, ColumnArgs, PolyaArgs, Protocol, VariantArg,
};
use super::{lifetime_text, CliError};

#[derive(Args)]
pub(crate) struct DensityArgs {
    /// The sample the forest is fit on: CSV with a header (.csv.gz too) or LIBSVM; `-`
    /// reads standard input.
    #[arg(long)]
    train: PathBuf,
    /// Held-out rows whose log-density is reported, with the training file's columns.
    #[arg(long)]
    test: PathBuf,
    /// The forest: batch (bMPF) or streaming (sMPF) [default: batch].
    #[arg(long, value_enum)]
    variant: Option<VariantArg>,
    #[command(flatten)]
    polya: PolyaArgs,
    #[command(flatten)]
    columns: ColumnArgs,
    /// Print one JSON object as the last line instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run_command(args: &DensityArgs) -> Result<(), CliError> {
    let train = read_feature_columns(&args.train, &args.columns)?;
    let test = read_feature_columns(&args.test, &args.columns)?;
    let d = train.n_features;
    if test.n_features != d {
        return Err(CliError::Usage(format!(
            "{}: {} feature columns, but {} has {d}",
            args.test.display(),
            test.n_features,
            args.train.display()
        )));
    }
    if train.named && test.named {
        if let Some(j) = (0..d).find(|&j| train.feature_names[j] != test.feature_names[j]) {
            return Err(CliError::Usage(format!(
                "{}: column {} is `{}`, but {} has `{}` there; the columns must be the \
                 training file's, in its order",
                args.test.display(),
                j + 1,
                test.feature_names[j],
                args.train.display(),
                train.feature_names[j]
            )));
        }
    }
    let variant = args.variant.unwrap_or(VariantArg::Batch).variant();
    let params = args.polya.params(variant, None, &train)?;
    let scored = run(&params, &train.x, d, Protocol::Fit, Some(&test.x))?;
    let log_p: Vec<f64> = scored.scores.iter().map(|s| s.log_density).collect();
    let n = log_p.len();
    let finite: Vec<f64> = log_p.iter().copied().filter(|v| v.is_finite()).collect();
    let outside = scored.scores.iter().filter(|s| s.out_of_domain).count();
    // A point outside the domain has density 0: the mean over every point is then −∞.
    let mean_all = log_p.iter().sum::<f64>() / n as f64;
    let mean_finite = finite.iter().sum::<f64>() / finite.len() as f64;
    if args.json {
        let out = json!({
            "mean_log_density": number_or_text(mean_all),
            "mean_log_density_finite": (!finite.is_empty()).then_some(mean_finite),
            "n_finite": finite.len(),
            "n_out_of_domain": outside,
            "n": n,
            "n_train": train.n_rows(),
            "n_features": d,
            "seconds": scored.seconds,
            "variant": variant_name(variant),
            "trees": params.n_trees,
            "seed": params.seed,
            "groups": scored.groups,
            "max_depth": params.max_depth,
            "gamma": params.gamma,
            "lifetime": lifetime_text(params.lifetime),
            "threads": params.n_threads,
        });
        println!("{out}");
    } else {
        println!(
            "mean log-density {mean_all:.4} over {n} test rows ({outside} outside the domain; \
             {mean_finite:.4} over the {} with a finite density)  {} forest, {} trees, fit on \
             {} rows in {:.2}s",
            finite.len(),
            variant_name(variant),
            params.n_trees,
            train.n_rows(),
            scored.seconds
        );
    }
    Ok(())
}

/// A number for JSON, which has no infinities: `"-inf"` or `"inf"` for them.
fn number_or_text(v: f64) -> serde_json::Value {
    if v.is_finite() || v.is_nan() {
        json!(v)
    } else if v > 0.0 {
        json!("inf")
    } else {
        json!("-inf")
    }
}
