//! The commands behind `main.rs`, one module per command family, and what they share: the
//! error every command ends in, model and output files, progress, and the parts of the
//! reports that do not depend on the task.

pub(crate) mod anomaly;
pub(crate) mod bart;
pub(crate) mod classify;
pub(crate) mod curve;
pub(crate) mod demo;
pub(crate) mod density;
pub(crate) mod forest;
pub(crate) mod kernel;
pub(crate) mod polya;
pub(crate) mod regress;
pub(crate) mod shuffle;
pub(crate) mod smc;
pub(crate) mod stream;

use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use mondrian::{MondrianError, RelevanceChoice};
use serde::Serialize;

use crate::io::{read_dataset, DataError, Dataset};

/// Why a command failed; `main` prints it and exits with status 2.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
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

impl CliError {
    /// The `map_err` of a failed write to `path`.
    fn write(path: &Path) -> impl FnOnce(std::io::Error) -> CliError + '_ {
        |source| CliError::Write {
            path: path.to_path_buf(),
            source,
        }
    }
}

// ---------------------------------------------------------------------------------
// Files

/// Writes a model file (the library's versioned, checksummed format) for kind `kind`,
/// crash-safe: the old file stays whole until the new one is (`persist::save_file`).
pub(crate) fn save_model<T: Serialize>(
    value: &T,
    kind: &str,
    encoding: mondrian::persist::Encoding,
    path: &Path,
) -> Result<(), CliError> {
    mondrian::persist::save_file_encoded(value, kind, encoding, path).map_err(|e| match e {
        MondrianError::Io(source) => CliError::Write {
            path: path.to_path_buf(),
            source,
        },
        other => other.into(),
    })
}

/// The feature names a model file keeps for `data`: its columns' names if the file named
/// them (a CSV header), none otherwise (LIBSVM), so that `predict` checks only real names.
pub(crate) fn names_to_keep(data: &Dataset) -> Vec<String> {
    match data.named {
        true => data.feature_names.clone(),
        false => Vec::new(),
    }
}

/// Refuses prediction input whose column names differ from those of the training file
/// (`trained`, empty if it named none), naming the first column that differs; input
/// without names (LIBSVM) and `--ignore-names` pass.
pub(crate) fn check_names(
    trained: &[String],
    input: &Dataset,
    path: &Path,
    ignore: bool,
) -> Result<(), CliError> {
    if ignore || trained.is_empty() || !input.named {
        return Ok(());
    }
    match trained
        .iter()
        .zip(&input.feature_names)
        .position(|(a, b)| a != b)
    {
        Some(j) => Err(CliError::Usage(format!(
            "{}: column {} is `{}`, but the model was trained with `{}` there; the columns \
             must be the training file's, in its order (--ignore-names predicts by position)",
            path.display(),
            j + 1,
            input.feature_names[j],
            trained[j]
        ))),
        None => Ok(()),
    }
}

/// The bytes of a model file; the task that reads them checks them.
/// The model file, opened for reading as a stream: models are decoded as they are read, so
/// no copy of the file is ever held in memory.
pub(crate) fn read_model(model: &Path) -> Result<ModelFile, CliError> {
    std::fs::File::open(model)
        .map(|f| std::io::BufReader::with_capacity(1 << 16, f))
        .map_err(|e| CliError::Usage(format!("cannot open model {}: {e}", model.display())))
}

/// An open model file (see [`read_model`]).
pub(crate) type ModelFile = std::io::BufReader<std::fs::File>;

/// Writes `bytes` to a new file at `path`.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    std::fs::write(path, bytes).map_err(CliError::write(path))
}

/// `text` to `path`, or to standard output without one.
pub(crate) fn write_output(path: Option<&Path>, text: &str) -> Result<(), CliError> {
    match path {
        Some(path) => write_file(path, text.as_bytes()),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

// ---------------------------------------------------------------------------------
// Train and test files (the `eval` commands of `smc`, `bart` and `kernel`)

/// The training file, then the test file, which must have the training file's feature
/// columns.
pub(crate) fn read_train_test(train: &Path, test: &Path) -> Result<(Dataset, Dataset), CliError> {
    let train = read_dataset(train, None)?;
    let test_set = read_dataset(test, Some(train.n_features))?;
    if test_set.n_features != train.n_features {
        return Err(CliError::Usage(format!(
            "{}: {} feature columns, but the training file has {}",
            test.display(),
            test_set.n_features,
            train.n_features
        )));
    }
    Ok((train, test_set))
}

/// Whether every label is an exact integer (|v| ≤ 2^53), which makes classification the
/// default task.
pub(crate) fn integer_valued(labels: &[f64]) -> bool {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    labels.iter().all(|v| v.fract() == 0.0 && v.abs() <= EXACT)
}

/// The class of each label: its index among `values` (sorted); a label not among them is
/// refused, naming its row of `path`.
pub(crate) fn classes_of(
    labels: &[i64],
    values: &[i64],
    path: &Path,
) -> Result<Vec<usize>, CliError> {
    labels
        .iter()
        .enumerate()
        .map(|(i, v)| {
            values.binary_search(v).map_err(|_| {
                CliError::Usage(format!(
                    "{}: data row {} has label {v}, which no training row has; the classes \
                     are the training file's ({})",
                    path.display(),
                    i + 1,
                    values
                        .iter()
                        .map(i64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------
// Progress

/// A bar of `len` steps, labelled `what`; it draws only on a terminal.
pub(crate) fn progress(len: u64, what: &str) -> ProgressBar {
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
pub(crate) fn timed_training<E>(
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

// ---------------------------------------------------------------------------------
// Reports

/// Text reports: the features that explain most, with their weights when they are not 1,
/// and the relevance power cross-validation chose, if it ran.
pub(crate) fn print_features(
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
pub(crate) fn lifetime_text(lifetime: f64) -> String {
    if lifetime.is_infinite() {
        "inf".into()
    } else {
        lifetime.to_string()
    }
}

/// Text reports: the training points a model holds, and its window if it has one.
pub(crate) fn held_text(window: Option<usize>, n_points: usize) -> String {
    match window {
        Some(w) => format!("{n_points} points held (window {w})"),
        None => format!("{n_points} points held"),
    }
}

/// Adds the forest's shape (spec §7 depth, size), its window (`null` without one) and the
/// training points it holds to a JSON report.
pub(crate) fn with_summary(
    mut out: serde_json::Value,
    s: &mondrian::ForestSummary,
    window: Option<usize>,
    n_points: usize,
) -> serde_json::Value {
    let extra = serde_json::json!({
        "window": window,
        "n_points": n_points,
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
