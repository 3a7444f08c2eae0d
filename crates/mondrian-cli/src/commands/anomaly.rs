//! `mondrian anomaly score` and `mondrian anomaly eval`: anomaly scores of Mondrian Pólya
//! forests (spec `mondrian-polya-forest.md` §5, §8), batch (bMPF) or streaming (sMPF).

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use mondrian::metrics::{average_precision, roc_auc};
use mondrian::{
    Explanation, MondrianError, MondrianPolyaForest, Persistent, PolyaParams, PolyaVariant,
    RowScore,
};
use serde_json::json;

use super::polya::{
    evaluate_into, read_feature_columns, run_groups, run_one_into, set_threads, tree_groups,
    variant_name, ColumnArgs, PolyaArgs, Protocol, VariantArg,
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
    // Every refusal comes before the output is opened.
    let job = match &args.model {
        Some(path) => loaded_job(args, path, &data)?,
        None => new_job(args, &data)?,
    };
    let names = &data.feature_names;
    let output = args.output.as_deref().filter(|p| !is_stdin(p));
    let done = match output {
        Some(path) => replace_output(path, |w| {
            job.run(&data, ScoreWriter::new(w, path, names, args.explain)?)
        })?,
        None => {
            let path = Path::new("standard output");
            let mut w = BufWriter::new(std::io::stdout().lock());
            let done = job.run(&data, ScoreWriter::new(&mut w, path, names, args.explain)?)?;
            w.flush().map_err(CliError::write(path))?;
            done
        }
    };
    eprintln!(
        "scored {} rows × {d} features ({}); {} outside the domain{}",
        done.rows,
        done.about,
        done.outside,
        match output {
            Some(p) => format!("; written to {}", p.display()),
            None => String::new(),
        }
    );
    Ok(())
}

/// What `score` runs, decided (with every refusal) before the output is opened.
struct Job {
    how: How,
    /// The forest and protocol in the report, before the time taken.
    label: String,
}

enum How {
    /// One forest of every tree, loaded or new: scored as it is (`None`), fit on every row
    /// then scored ([`Protocol::Fit`]), or each row inserted then scored
    /// ([`Protocol::OnArrival`]); the scores are written as they come. Saved after if
    /// `save` names a file.
    One {
        forest: Box<MondrianPolyaForest>,
        protocol: Option<Protocol>,
        explain: bool,
        save: Option<PathBuf>,
    },
    /// A new streaming forest too large for memory, grown in groups of trees one after the
    /// other: every row's scores are summed over the groups, then written.
    Groups {
        params: PolyaParams,
        groups: Vec<usize>,
        protocol: Protocol,
    },
}

/// What `score` reports once the output is written.
struct Done {
    rows: usize,
    outside: usize,
    about: String,
}

impl Job {
    /// Scores the rows of `data`, each chunk written by `out` as soon as it is scored.
    fn run(self, data: &Dataset, mut out: ScoreWriter) -> Result<Done, CliError> {
        let (x, d) = (&data.x[..], data.n_features);
        let start = std::time::Instant::now();
        let seconds = match self.how {
            How::One {
                mut forest,
                protocol,
                explain,
                save,
            } => {
                match (explain, protocol) {
                    (true, _) => explained(&mut forest, x, d, protocol, &mut out)?,
                    (false, Some(p)) => {
                        run_one_into(&mut forest, x, d, p, None, "", &mut |s| out.rows(s, None))?
                    }
                    (false, None) => evaluate_into(&forest, x, d, "", &mut |s| out.rows(s, None))?,
                }
                let seconds = start.elapsed().as_secs_f64();
                if let Some(path) = save {
                    save_model(
                        &*forest,
                        MondrianPolyaForest::KIND,
                        forest.encoding(),
                        &path,
                    )?;
                }
                seconds
            }
            How::Groups {
                params,
                groups,
                protocol,
            } => run_groups(&params, &groups, x, d, protocol, None, &mut |s| {
                out.rows(s, None)
            })?,
        };
        Ok(Done {
            rows: out.rows,
            outside: out.outside,
            about: format!("{}, {seconds:.2}s", self.label),
        })
    }
}

/// A saved forest, which with `--stream` takes the rows in; saved again with
/// `--save-model`.
fn loaded_job(args: &ScoreArgs, path: &Path, data: &Dataset) -> Result<Job, CliError> {
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
    let label = format!(
        "{}, {} trees from {}",
        variant_name(forest.params().variant),
        forest.n_trees(),
        path.display(),
    );
    Ok(Job {
        how: How::One {
            forest: Box::new(forest),
            protocol: args.stream.then_some(Protocol::OnArrival),
            explain: args.explain,
            save: args.save_model.clone(),
        },
        label,
    })
}

/// A new forest, in groups of trees only when it does not fit in memory whole and needs
/// not be one forest (an explanation reads all the trees, a saved model is one forest).
fn new_job(args: &ScoreArgs, data: &Dataset) -> Result<Job, CliError> {
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
    let groups = tree_groups(&params, data.n_rows(), data.n_features)?;
    if groups.len() > 1 && (args.explain || args.save_model.is_some()) {
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
    let label = format!(
        "{} forest, {} trees{}, {}{}",
        variant_name(variant),
        params.n_trees,
        match groups.len() {
            1 => String::new(),
            k => format!(" in {k} groups"),
        },
        protocol.name(),
        params
            .window
            .map_or(String::new(), |w| format!(" with a window of {w}")),
    );
    let how = match groups.len() {
        1 => How::One {
            forest: Box::new(MondrianPolyaForest::new(params)?),
            protocol: Some(protocol),
            explain: args.explain,
            save: args.save_model.clone(),
        },
        _ => How::Groups {
            params,
            groups,
            protocol,
        },
    };
    Ok(Job { how, label })
}

/// Explains every row, one at a time, writing each as it is explained: with `protocol`
/// [`Protocol::Fit`] after fitting on every row, with [`Protocol::OnArrival`] each right
/// after its insertion, without one by the forest as it is.
fn explained(
    forest: &mut MondrianPolyaForest,
    x: &[f64],
    d: usize,
    protocol: Option<Protocol>,
    out: &mut ScoreWriter,
) -> Result<(), CliError> {
    if protocol == Some(Protocol::Fit) {
        forest.fit(x, d)?;
    }
    let stream = protocol == Some(Protocol::OnArrival);
    let bar = progress((x.len() / d) as u64, "explaining");
    for row in x.chunks_exact(d) {
        if stream {
            forest.partial_fit(row, d)?;
        }
        let e = forest.explain(row)?;
        out.rows(&[e.score], Some(std::slice::from_ref(&e)))?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(())
}

/// Runs `write` on a new file that takes the place of `path` only once `write` has
/// succeeded (`persist::replace_file`): after any error `path` is as it was.
fn replace_output<T>(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<T, CliError>,
) -> Result<T, CliError> {
    let (mut value, mut failure) = (None, None);
    let replaced = mondrian::persist::replace_file(path, |w| match write(w) {
        Ok(v) => {
            value = Some(v);
            Ok(())
        }
        Err(e) => {
            failure = Some(e);
            // Any error makes replace_file remove its temporary file; the real one is
            // returned below.
            Err(MondrianError::Io(std::io::Error::other("scoring failed")))
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    replaced.map_err(|e| match e {
        MondrianError::Io(source) => CliError::Write {
            path: path.to_path_buf(),
            source,
        },
        other => other.into(),
    })?;
    Ok(value.expect("replace_file succeeds only after its writer did"))
}

/// Features named in the `--explain` columns, by attribution.
const TOP_FEATURES: usize = 3;

/// Writes the CSV of `anomaly score` a chunk of rows at a time, as they are scored, so
/// that nothing per row is held once written. Numbers are written in full (they read back
/// to the same values), infinities as `inf` and `-inf`.
struct ScoreWriter<'a> {
    out: &'a mut dyn Write,
    /// Where `out` goes, for errors.
    path: &'a Path,
    /// The feature names as CSV cells, for the explanation columns.
    cells: Vec<String>,
    explain: bool,
    /// Rows written, and those outside the domain.
    rows: usize,
    outside: usize,
}

impl<'a> ScoreWriter<'a> {
    /// Writes the header: the score columns, and the explanation columns with `explain`.
    fn new(
        out: &'a mut dyn Write,
        path: &'a Path,
        names: &[String],
        explain: bool,
    ) -> Result<Self, CliError> {
        let mut header = String::from("score,mass,log_density,out_of_domain");
        if explain {
            header.push_str(",n_complement,out_of_box_feature,out_of_box");
            for k in 1..=TOP_FEATURES.min(names.len()) {
                let _ = write!(header, ",top_feature_{k},top_share_{k}");
            }
        }
        header.push('\n');
        out.write_all(header.as_bytes())
            .map_err(CliError::write(path))?;
        Ok(Self {
            out,
            path,
            cells: names.iter().map(|n| csv_cell(n)).collect(),
            explain,
            rows: 0,
            outside: 0,
        })
    }

    /// Writes one line per score; with explanation columns `explanations` holds the row's
    /// explanation, one per score.
    fn rows(
        &mut self,
        scores: &[RowScore],
        explanations: Option<&[Explanation]>,
    ) -> Result<(), CliError> {
        debug_assert_eq!(self.explain, explanations.is_some());
        let path = self.path;
        self.write_rows(scores, explanations)
            .map_err(CliError::write(path))
    }

    fn write_rows(
        &mut self,
        scores: &[RowScore],
        explanations: Option<&[Explanation]>,
    ) -> std::io::Result<()> {
        let top = TOP_FEATURES.min(self.cells.len());
        for (i, s) in scores.iter().enumerate() {
            write!(
                self.out,
                "{},{},{},{}",
                // + 0.0 writes a mass of 1 as 0 rather than -0.
                s.anomaly_score() + 0.0,
                s.mass,
                s.log_density,
                u8::from(s.out_of_domain)
            )?;
            if let Some(e) = explanations.map(|e| &e[i]) {
                let furthest = e
                    .out_of_box
                    .iter()
                    .enumerate()
                    .filter(|(_, &v)| v > 0.0)
                    .max_by(|a, b| a.1.total_cmp(b.1));
                let (name, excess) = match furthest {
                    Some((j, &v)) => (self.cells[j].as_str(), v),
                    None => ("", 0.0),
                };
                write!(self.out, ",{},{name},{excess}", e.n_complement)?;
                for (j, share) in e.top_features().into_iter().take(top) {
                    match share > 0.0 {
                        true => write!(self.out, ",{},{share}", self.cells[j])?,
                        false => self.out.write_all(b",,0")?,
                    }
                }
            }
            self.out.write_all(b"\n")?;
            self.rows += 1;
            self.outside += usize::from(s.out_of_domain);
        }
        Ok(())
    }
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
    let groups = tree_groups(&params, n, data.n_features)?;
    // The AUC needs every score; only the scores are kept (8 bytes a row).
    let (mut scores, mut outside) = (Vec::with_capacity(n), 0);
    let seconds = run_groups(
        &params,
        &groups,
        &data.x,
        data.n_features,
        protocol,
        None,
        &mut |chunk| {
            scores.extend(chunk.iter().map(RowScore::anomaly_score));
            outside += chunk.iter().filter(|s| s.out_of_domain).count();
            Ok(())
        },
    )?;
    // Both classes are present and no score is NaN (a mass is in [0, 1]).
    let auc = roc_auc(&scores, &labels).unwrap_or(f64::NAN);
    let ap = average_precision(&scores, &labels).unwrap_or(f64::NAN);
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
            "groups": groups,
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
