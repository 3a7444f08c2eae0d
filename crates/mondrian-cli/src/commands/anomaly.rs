//! `mondrian anomaly score` and `mondrian anomaly eval`: anomaly scores of Mondrian Pólya
//! forests (spec `mondrian-polya-forest.md` §5, §8), batch (bMPF) or streaming (sMPF).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use mondrian::metrics::{average_precision, roc_auc};
use mondrian::{Explanation, MondrianPolyaForest, Persistent, PolyaVariant, RowScore};
use serde_json::json;

use super::polya::{
    read_feature_columns, run, run_one, set_threads, tree_groups, variant_name, ColumnArgs,
    PolyaArgs, Protocol, VariantArg,
};
use super::{lifetime_text, progress, read_model, save_model, CliError};
use crate::io::{binary_labels, is_stdin, read_dataset, Dataset};

#[derive(Args)]
pub(crate) struct AnomalyArgs {
    #[command(subcommand)]
    command: AnomalyCommand,
}

#[derive(Subcommand)]
enum AnomalyCommand {
    /// Write one anomaly score per row: −log10 of the forest's mean leaf mass, higher
    /// meaning more anomalous (+inf outside the domain).
    ///
    /// Every column of the input is a feature except a last column named `anomaly` (the
    /// label of the anomaly data sets, ignored so that the same file serves `eval`), the
    /// column --target names, or the last with --drop-last. The output is CSV with one
    /// line per input row, in order: `score` (−log10 mass), `mass` (the mean leaf mass
    /// s(x), the predictive probability of the row's cell averaged over the trees; not a
    /// p-value), `log_density` (ln of the forest density in the input's units, -inf
    /// outside the domain) and `out_of_domain` (1 when the row lies outside every tree's
    /// domain). Without --stream the forest is fit on every row, then scores them all (the
    /// paper's protocol); with --stream each row is inserted, then scored (with --window W
    /// the oldest point leaves first). --explain adds, per row, the number of trees whose
    /// leaf is a complement (a region without data), the feature in which the row lies
    /// furthest outside the box of the data there (with that distance, relative to the
    /// box's side), and the three features that lost the row most mass (their shares sum
    /// to 1 over all features): a descriptive reading of the trees' paths, an extension
    /// of the paper.
    Score(ScoreArgs),
    /// Evaluate anomaly scores against labels: ROC-AUC and average precision.
    ///
    /// The last column is the anomaly label, 0 (normal) or 1 (anomaly); the others are
    /// the features. By default a batch forest (bMPF) is fit on every row and scores them
    /// all (the paper's protocol). --stream grows a streaming forest (sMPF) by inserting
    /// the rows one at a time, in file order or in the order of --shuffle, and scores
    /// every row after the whole stream; with --window W each row is instead scored as it
    /// arrives (the oldest point leaves, the row is inserted, then scored). `seconds` is
    /// the wall time of fitting and scoring, without reading the file. With --json the
    /// last line of the output is one JSON object: `roc_auc`, `average_precision`, `n`,
    /// `n_anomalies`, `seconds`, `rows_per_second`, `variant`, `protocol`, `trees`,
    /// `seed`, `shuffle`, `window`, `n_out_of_domain`, `groups` (the trees of each group,
    /// see --max-memory) and the forest's settings.
    ///
    /// A streaming forest holds every point (about 2n nodes per tree). When the memory
    /// guard (--max-memory, or what the machine has left) refuses all the trees at once,
    /// they are grown in the fewest equal groups it allows, one group after the other,
    /// each group a forest with a seed derived from --seed, and their scores averaged (the
    /// forest's score is the mean over its trees, so this is the same model, with other
    /// random trees); a note on standard error says so.
    Eval(EvalArgs),
}

#[derive(Args)]
pub(crate) struct ScoreArgs {
    /// Rows to score: CSV with a header (.csv.gz too) or LIBSVM; `-` reads standard input.
    #[arg(long)]
    input: PathBuf,
    /// Write the scores here (replaced whole, only once every row is scored) instead of
    /// to standard output; `-` is standard output.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Insert the rows one at a time and score each right after its insertion.
    #[arg(long)]
    stream: bool,
    /// With --stream: keep only the last W points; older ones are deleted exactly.
    #[arg(long, value_name = "W")]
    window: Option<usize>,
    /// Add per-row explanations (see above).
    #[arg(long)]
    explain: bool,
    /// Score with this saved forest (from --save-model) instead of fitting one; with
    /// --stream the rows continue its stream. Its settings are kept.
    #[arg(long, value_name = "IN")]
    model: Option<PathBuf>,
    /// Save the forest after scoring (for --model).
    #[arg(long, value_name = "OUT")]
    save_model: Option<PathBuf>,
    /// The forest: batch (bMPF) or streaming (sMPF) [default: batch; streaming with
    /// --stream, which needs it].
    #[arg(long, value_enum)]
    variant: Option<VariantArg>,
    #[command(flatten)]
    polya: PolyaArgs,
    #[command(flatten)]
    columns: ColumnArgs,
}

#[derive(Args)]
pub(crate) struct EvalArgs {
    /// Labelled rows: CSV with a header and the 0/1 anomaly label in the last column
    /// (.csv.gz too) or LIBSVM; `-` reads standard input.
    #[arg(long)]
    input: PathBuf,
    /// The streaming forest (sMPF), fed one row at a time; without it the batch forest
    /// (bMPF).
    #[arg(long)]
    stream: bool,
    /// With --stream: keep only the last W points, and score each row as it arrives.
    #[arg(long, value_name = "W")]
    window: Option<usize>,
    /// Put the rows in a random order first, the permutation drawn from this seed.
    #[arg(long, value_name = "SEED")]
    shuffle: Option<u64>,
    #[command(flatten)]
    polya: PolyaArgs,
    /// Print one JSON object as the last line instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run_command(args: &AnomalyArgs) -> Result<(), CliError> {
    match &args.command {
        AnomalyCommand::Score(a) => score(a),
        AnomalyCommand::Eval(a) => eval(a),
    }
}

/// Refuses `--window` without `--stream`.
fn check_window(window: Option<usize>, stream: bool) -> Result<(), CliError> {
    if window.is_some() && !stream {
        return Err(CliError::Usage(
            "--window needs --stream: the window slides along a stream".into(),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// score

fn score(args: &ScoreArgs) -> Result<(), CliError> {
    check_window(args.window, args.stream)?;
    if args.stream && args.variant == Some(VariantArg::Batch) {
        return Err(CliError::Usage(
            "--stream needs the streaming forest: a batch forest's cells are drawn once, on \
             the box of its first rows, and a stream's first row is a single point"
                .into(),
        ));
    }
    if args.model.is_some() {
        let given = args
            .polya
            .first_model_flag()
            .or(args.variant.map(|_| "--variant"))
            .or(args.window.map(|_| "--window"))
            .or(args.polya.max_memory.map(|_| "--max-memory"));
        if let Some(flag) = given {
            return Err(CliError::Usage(format!(
                "{flag} sets up a new forest; a --model keeps the settings it was saved with"
            )));
        }
    }
    let data = read_feature_columns(&args.input, &args.columns)?;
    let d = data.n_features;
    let (scores, explanations, about) = match &args.model {
        Some(path) => score_with_model(args, path, &data)?,
        None => score_new(args, &data)?,
    };
    let text = scores_csv(&scores, explanations.as_deref(), &data.feature_names);
    match args.output.as_deref().filter(|p| !is_stdin(p)) {
        Some(path) => {
            mondrian::persist::replace_file(path, |w| {
                std::io::Write::write_all(w, text.as_bytes()).map_err(Into::into)
            })
            .map_err(|e| match e {
                mondrian::MondrianError::Io(source) => CliError::Write {
                    path: path.to_path_buf(),
                    source,
                },
                other => other.into(),
            })?;
        }
        None => print!("{text}"),
    }
    let outside = scores.iter().filter(|s| s.out_of_domain).count();
    eprintln!(
        "scored {} rows × {d} features ({about}); {outside} outside the domain{}",
        scores.len(),
        match args.output.as_deref().filter(|p| !is_stdin(p)) {
            Some(p) => format!("; written to {}", p.display()),
            None => String::new(),
        }
    );
    Ok(())
}

/// The scores (and explanations) of a saved forest, which with `--stream` takes the rows
/// in; saved again with `--save-model`.
type Output = (Vec<RowScore>, Option<Vec<Explanation>>, String);

fn score_with_model(args: &ScoreArgs, path: &Path, data: &Dataset) -> Result<Output, CliError> {
    let mut forest: MondrianPolyaForest =
        mondrian::persist::load_whole(MondrianPolyaForest::KIND, read_model(path)?)?;
    set_threads(&mut forest, args.polya.threads)?;
    let d = data.n_features;
    if let Some(width) = forest.n_features().filter(|&w| w != d) {
        return Err(CliError::Usage(format!(
            "{}: {d} feature columns, but the model {} was trained on {width}{}",
            args.input.display(),
            path.display(),
            if data.named {
                format!(" (features: {})", data.feature_names.join(", "))
            } else {
                String::new()
            }
        )));
    }
    if args.stream && forest.params().variant == PolyaVariant::Batch {
        return Err(CliError::Usage(format!(
            "--stream needs a streaming forest, but {} holds a batch forest (its cells are \
             fixed; score without --stream)",
            path.display()
        )));
    }
    let protocol = args.stream.then_some(Protocol::OnArrival);
    let start = std::time::Instant::now();
    let (scores, explanations) = scored_forest(&mut forest, &data.x, d, protocol, args.explain)?;
    let about = format!(
        "{}, {} trees from {}, {:.2}s",
        variant_name(forest.params().variant),
        forest.n_trees(),
        path.display(),
        start.elapsed().as_secs_f64()
    );
    if let Some(out) = &args.save_model {
        save_model(&forest, MondrianPolyaForest::KIND, forest.encoding(), out)?;
    }
    Ok((scores, explanations, about))
}

fn score_new(args: &ScoreArgs, data: &Dataset) -> Result<Output, CliError> {
    let variant = match (args.variant, args.stream) {
        (Some(v), _) => v.variant(),
        (None, true) => PolyaVariant::Streaming,
        (None, false) => PolyaVariant::Batch,
    };
    let params = args.polya.params(variant, args.window, data)?;
    let protocol = match args.stream {
        true => Protocol::OnArrival,
        false => Protocol::Fit,
    };
    let d = data.n_features;
    let about = |seconds: f64, groups: usize| {
        format!(
            "{} forest, {} trees{}, {}{}, {seconds:.2}s",
            variant_name(variant),
            params.n_trees,
            match groups {
                1 => String::new(),
                k => format!(" in {k} groups"),
            },
            protocol.name(),
            params
                .window
                .map_or(String::new(), |w| format!(" with a window of {w}")),
        )
    };
    if !args.explain && args.save_model.is_none() {
        let scored = run(&params, &data.x, d, protocol, None)?;
        let about = about(scored.seconds, scored.groups.len());
        return Ok((scored.scores, None, about));
    }
    // One forest with every tree: an explanation reads all the trees, a saved model is
    // one forest.
    let groups = tree_groups(&params, data.n_rows(), d)?;
    if groups.len() > 1 {
        return Err(CliError::Usage(format!(
            "{} needs all {} trees in memory at once; use fewer trees (--trees) or a larger \
             --max-memory",
            if args.explain {
                "--explain"
            } else {
                "--save-model"
            },
            params.n_trees
        )));
    }
    let mut forest = MondrianPolyaForest::new(params.clone())?;
    let start = std::time::Instant::now();
    let (scores, explanations) = if args.explain {
        if protocol == Protocol::Fit {
            forest.fit(&data.x, d)?;
        }
        scored_forest(&mut forest, &data.x, d, Some(protocol), true)?
    } else {
        let scores = run_one(&mut forest, &data.x, d, protocol, None, "")?;
        (scores, None)
    };
    let about = about(start.elapsed().as_secs_f64(), 1);
    if let Some(out) = &args.save_model {
        save_model(&forest, MondrianPolyaForest::KIND, forest.encoding(), out)?;
    }
    Ok((scores, explanations, about))
}

/// Scores the rows with `forest` (fit already, unless it streams): as they are without a
/// protocol or with [`Protocol::Fit`], each inserted then scored with
/// [`Protocol::OnArrival`]; with `explain` every row is explained, one at a time.
fn scored_forest(
    forest: &mut MondrianPolyaForest,
    x: &[f64],
    d: usize,
    protocol: Option<Protocol>,
    explain: bool,
) -> Result<(Vec<RowScore>, Option<Vec<Explanation>>), CliError> {
    let stream = protocol == Some(Protocol::OnArrival);
    if !explain {
        let scores = match stream {
            true => run_one(forest, x, d, Protocol::OnArrival, None, "")?,
            false => super::polya::evaluate(forest, x, d, "")?,
        };
        return Ok((scores, None));
    }
    let n = x.len() / d;
    let bar = progress(n as u64, "explaining");
    let mut scores = Vec::with_capacity(n);
    let mut explanations = Vec::with_capacity(n);
    for row in x.chunks_exact(d) {
        if stream {
            forest.partial_fit(row, d)?;
        }
        let e = forest.explain(row)?;
        scores.push(e.score);
        explanations.push(e);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok((scores, Some(explanations)))
}

/// Features named in the `--explain` columns, by attribution.
const TOP_FEATURES: usize = 3;

/// The CSV `anomaly score` writes. Numbers are written in full (they read back to the
/// same values), infinities as `inf` and `-inf`.
fn scores_csv(
    scores: &[RowScore],
    explanations: Option<&[Explanation]>,
    names: &[String],
) -> String {
    let top = TOP_FEATURES.min(names.len());
    let mut text = String::from("score,mass,log_density,out_of_domain");
    if explanations.is_some() {
        text.push_str(",n_complement,out_of_box_feature,out_of_box");
        for k in 1..=top {
            let _ = write!(text, ",top_feature_{k},top_share_{k}");
        }
    }
    text.push('\n');
    for (i, s) in scores.iter().enumerate() {
        let _ = write!(
            text,
            "{},{},{},{}",
            // + 0.0 writes a mass of 1 as 0 rather than -0.
            s.anomaly_score() + 0.0,
            s.mass,
            s.log_density,
            u8::from(s.out_of_domain)
        );
        if let Some(e) = explanations.map(|e| &e[i]) {
            let furthest = e
                .out_of_box
                .iter()
                .enumerate()
                .filter(|(_, &v)| v > 0.0)
                .max_by(|a, b| a.1.total_cmp(b.1));
            let (name, excess) = match furthest {
                Some((j, &v)) => (csv_cell(&names[j]), v),
                None => (String::new(), 0.0),
            };
            let _ = write!(text, ",{},{name},{excess}", e.n_complement);
            for (j, share) in e.top_features().into_iter().take(top) {
                match share > 0.0 {
                    true => {
                        let _ = write!(text, ",{},{share}", csv_cell(&names[j]));
                    }
                    false => text.push_str(",,0"),
                }
            }
        }
        text.push('\n');
    }
    text
}

/// A CSV cell: quoted when it holds a comma, a quote or a line break.
fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

// ---------------------------------------------------------------------------------
// eval

fn eval(args: &EvalArgs) -> Result<(), CliError> {
    check_window(args.window, args.stream)?;
    let mut data = read_dataset(&args.input, None)?;
    let mut labels = binary_labels(&data, &args.input)?;
    let n = labels.len();
    let n_anomalies = labels.iter().filter(|&&a| a).count();
    if n_anomalies == 0 || n_anomalies == n {
        return Err(CliError::Usage(format!(
            "{}: every label is {}; ROC-AUC and average precision need both normal (0) and \
             anomalous (1) rows",
            args.input.display(),
            u8::from(n_anomalies == n)
        )));
    }
    if let Some(seed) = args.shuffle {
        let order = super::shuffle::permutation(n, seed);
        data = reordered(&data, &order);
        labels = order.iter().map(|&i| labels[i]).collect();
    }
    let variant = match args.stream {
        true => PolyaVariant::Streaming,
        false => PolyaVariant::Batch,
    };
    let params = args.polya.params(variant, args.window, &data)?;
    let protocol = match (args.stream, args.window) {
        (false, _) => Protocol::Fit,
        (true, None) => Protocol::Stream,
        (true, Some(_)) => Protocol::OnArrival,
    };
    let scored = run(&params, &data.x, data.n_features, protocol, None)?;
    let scores: Vec<f64> = scored.scores.iter().map(RowScore::anomaly_score).collect();
    // Both classes are present and no score is NaN (a mass is in [0, 1]).
    let auc = roc_auc(&scores, &labels).unwrap_or(f64::NAN);
    let ap = average_precision(&scores, &labels).unwrap_or(f64::NAN);
    let outside = scored.scores.iter().filter(|s| s.out_of_domain).count();
    let seconds = scored.seconds;
    if args.json {
        let out = json!({
            "roc_auc": auc,
            "average_precision": ap,
            "n": n,
            "n_anomalies": n_anomalies,
            "n_features": data.n_features,
            "seconds": seconds,
            "rows_per_second": n as f64 / seconds,
            "variant": variant_name(variant),
            "protocol": protocol.name(),
            "trees": params.n_trees,
            "seed": params.seed,
            "shuffle": args.shuffle,
            "window": params.window,
            "n_out_of_domain": outside,
            "groups": scored.groups,
            "max_depth": params.max_depth,
            "gamma": params.gamma,
            "lifetime": lifetime_text(params.lifetime),
            "threads": params.n_threads,
        });
        println!("{out}");
    } else {
        println!(
            "roc-auc {auc:.4}  average precision {ap:.4}  ({n} rows, {n_anomalies} anomalies, \
             {outside} outside the domain)  {} {} trees, {}{}{} in {seconds:.2}s ({:.0} rows/s)",
            match variant {
                PolyaVariant::Batch => "bMPF",
                PolyaVariant::Streaming => "sMPF",
            },
            params.n_trees,
            protocol.name(),
            params
                .window
                .map_or(String::new(), |w| format!(", window {w}")),
            args.shuffle
                .map_or(String::new(), |s| format!(", shuffled by seed {s}")),
            n as f64 / seconds,
        );
    }
    Ok(())
}

/// `data`'s rows in the order `order` (its labels are dropped: the caller keeps them).
fn reordered(data: &Dataset, order: &[usize]) -> Dataset {
    let x = order.iter().flat_map(|&i| data.row(i)).copied().collect();
    Dataset {
        x,
        n_features: data.n_features,
        labels: Vec::new(),
        feature_names: data.feature_names.clone(),
        named: data.named,
    }
}
