//! `mondrian stream`: prequential (test-then-train) evaluation of a time-ordered file. Each
//! row is predicted by the model trained on the rows before it, then learnt by one
//! `partial_fit`; with a window the model keeps the last W rows as it goes. The loop and
//! the report are here; what depends on the task is a [`Streamer`] (`classify.rs`,
//! `regress.rs`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use mondrian::ForestSummary;
use serde_json::{json, Map, Value};

use super::forest::{chosen, ModelArgs};
use super::{held_text, progress, with_summary, CliError};
use crate::io::Dataset;

#[derive(Args)]
pub(crate) struct StreamArgs {
    /// Time-ordered rows: CSV (header, label or target in the last column; .csv.gz too) or
    /// LIBSVM, read whole before the stream starts; `-` reads standard input.
    #[arg(long)]
    pub(crate) input: PathBuf,
    /// Print the running scores every N rows [default: about 20 reports over the stream].
    #[arg(long, value_name = "N", value_parser = parse_every)]
    pub(crate) every: Option<usize>,
    /// Save the final model here, as `train` does (for `predict`); written only once the
    /// whole stream has succeeded.
    #[arg(long, value_name = "OUT")]
    pub(crate) model: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) forest: ModelArgs,
    /// Print one JSON object (the final scores, and every report as a step) instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// A model fed one row at a time, with the rows it is fed: one implementation per task.
pub(crate) trait Streamer {
    /// What a prediction scores.
    fn metric(&self) -> Metric;
    /// The whole file.
    fn data(&self) -> &Dataset;
    /// Scores row `row` with the model trained on the rows before it, or `None` while
    /// that model cannot predict yet (the row then counts in no score).
    fn score(&self, row: usize) -> Result<Option<Score>, CliError>;
    /// Trains on row `row` alone.
    fn learn(&mut self, row: usize) -> Result<(), CliError>;
    /// The training points the model holds.
    fn held(&self) -> Held;
    fn summary(&self) -> ForestSummary;
    /// Classification: the number of classes (the file's distinct labels).
    fn n_classes(&self) -> Option<usize>;
    /// Writes the model where `train` would.
    fn save(self: Box<Self>, path: &Path) -> Result<(), CliError>;
}

/// The training points a model holds, and the window it keeps them in.
pub(crate) struct Held {
    /// `None`: every point.
    pub(crate) window: Option<usize>,
    pub(crate) n_points: usize,
}

/// How a task's predictions score.
#[derive(Clone, Copy)]
pub(crate) enum Metric {
    /// The share of rows whose most probable class is the label; log-loss.
    Accuracy,
    /// Root mean squared error of the predictive mean; NLPD.
    Rmse,
}

impl Metric {
    /// The JSON keys of the metric and of the mean negative log-probability.
    fn keys(self) -> (&'static str, &'static str) {
        match self {
            Metric::Accuracy => ("accuracy", "log_loss"),
            Metric::Rmse => ("rmse", "nlpd"),
        }
    }

    /// Their names in text.
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Metric::Accuracy => ("accuracy", "log-loss"),
            Metric::Rmse => ("rmse", "nlpd"),
        }
    }

    /// The metric of the rows totalled in `t`.
    fn of(self, t: &Totals) -> f64 {
        let mean = t.point / t.n as f64;
        match self {
            Metric::Accuracy => mean,
            Metric::Rmse => mean.sqrt(),
        }
    }
}

/// One row's score.
pub(crate) struct Score {
    /// 1 for a hit and 0 for a miss (classification), or the squared error (regression).
    pub(crate) point: f64,
    /// −log p(y | x), the log-loss or the NLPD of the row.
    pub(crate) loss: f64,
}

/// Sums of the scores of `n` rows.
#[derive(Clone, Copy, Default)]
struct Totals {
    n: usize,
    point: f64,
    loss: f64,
}

impl Totals {
    fn add(&mut self, s: &Score) {
        self.n += 1;
        self.point += s.point;
        self.loss += s.loss;
    }

    /// The mean −log p(y | x): log-loss or NLPD.
    fn mean_loss(&self) -> f64 {
        self.loss / self.n as f64
    }

    /// The rows added since `earlier`.
    fn since(&self, earlier: &Totals) -> Totals {
        Totals {
            n: self.n - earlier.n,
            point: self.point - earlier.point,
            loss: self.loss - earlier.loss,
        }
    }
}

/// The running scores after `n_seen` rows, and those of the rows since the last report.
struct Step {
    n_seen: usize,
    total: Totals,
    recent: Totals,
    n_points: usize,
}

impl Step {
    fn text(&self, metric: Metric) -> String {
        let (name, loss) = metric.names();
        format!(
            "{:>8} rows  {name} {:.4}  {loss} {:.4}  (last {}: {:.4}, {:.4})  points {}",
            self.n_seen,
            metric.of(&self.total),
            self.total.mean_loss(),
            self.recent.n,
            metric.of(&self.recent),
            self.recent.mean_loss(),
            self.n_points
        )
    }

    fn json(&self, metric: Metric) -> Value {
        let (name, loss) = metric.keys();
        let mut step = Map::new();
        step.insert("n_seen".into(), json!(self.n_seen));
        step.insert("n_scored".into(), json!(self.total.n));
        step.insert(name.into(), json!(metric.of(&self.total)));
        step.insert(loss.into(), json!(self.total.mean_loss()));
        step.insert(format!("recent_{name}"), json!(metric.of(&self.recent)));
        step.insert(format!("recent_{loss}"), json!(self.recent.mean_loss()));
        step.insert("recent_n".into(), json!(self.recent.n));
        step.insert("n_points".into(), json!(self.n_points));
        Value::Object(step)
    }
}

pub(crate) fn run(args: &StreamArgs) -> Result<(), CliError> {
    let mut streamer = chosen(args.forest.task).streamer(args)?;
    let n_rows = streamer.data().n_rows();
    if n_rows < 2 {
        return Err(CliError::Usage(format!(
            "{}: a stream needs at least 2 rows (the first is only learnt)",
            args.input.display()
        )));
    }
    let every = args.every.unwrap_or(n_rows.div_ceil(20));
    let start = Instant::now();
    let (total, steps) = stream_rows(streamer.as_mut(), every, !args.json)?;
    let seconds = start.elapsed().as_secs_f64();

    let metric = streamer.metric();
    let summary = streamer.summary();
    let Held { window, n_points } = streamer.held();
    let (n_features, n_classes) = (streamer.data().n_features, streamer.n_classes());
    if let Some(path) = &args.model {
        streamer.save(path)?;
    }
    let rows_per_second = n_rows as f64 / seconds;
    let (score, loss) = (metric.of(&total), total.mean_loss());
    if args.json {
        let (score_key, loss_key) = metric.keys();
        let mut out = Map::new();
        out.insert(score_key.into(), json!(score));
        out.insert(loss_key.into(), json!(loss));
        if let Some(k) = n_classes {
            out.insert("n_classes".into(), json!(k));
        }
        let rest = json!({
            "n": total.n,
            "n_rows": n_rows,
            "seconds": seconds,
            "rows_per_second": rows_per_second,
            "every": every,
            "n_features": n_features,
            "trees": summary.n_trees,
            "seed": args.forest.seed,
            "threads": args.forest.threads,
            "steps": steps.iter().map(|s| s.json(metric)).collect::<Vec<_>>(),
        });
        if let Value::Object(rest) = rest {
            out.extend(rest);
        }
        let out = with_summary(Value::Object(out), &summary, window, n_points);
        println!("{out}");
    } else {
        let (score_name, loss_name) = metric.names();
        let saved = match &args.model {
            Some(path) => format!(", saved to {}", path.display()),
            None => String::new(),
        };
        println!(
            "{n_rows} rows streamed in {seconds:.2}s ({rows_per_second:.0} rows/s), {} scored: \
             {score_name} {score:.4}  {loss_name} {loss:.4}; {} trees, {}{saved}",
            total.n,
            summary.n_trees,
            held_text(window, n_points)
        );
    }
    Ok(())
}

/// Scores then learns every row in order behind a progress bar, and reports every `every`
/// rows and at the end (printing each report with `print`): the scores of the whole
/// stream and the reports.
fn stream_rows(
    streamer: &mut dyn Streamer,
    every: usize,
    print: bool,
) -> Result<(Totals, Vec<Step>), CliError> {
    let n_rows = streamer.data().n_rows();
    let metric = streamer.metric();
    let bar = progress(n_rows as u64, "streaming");
    let (mut total, mut reported) = (Totals::default(), Totals::default());
    let mut steps = Vec::new();
    for row in 0..n_rows {
        if let Some(score) = streamer.score(row)? {
            total.add(&score);
        }
        streamer.learn(row)?;
        let n_seen = row + 1;
        if n_seen % every == 0 || n_seen == n_rows {
            let step = Step {
                n_seen,
                total,
                recent: total.since(&reported),
                n_points: streamer.held().n_points,
            };
            reported = total;
            if print {
                bar.suspend(|| println!("{}", step.text(metric)));
            }
            steps.push(step);
        }
        if row % 64 == 0 {
            bar.set_position(row as u64);
        }
    }
    bar.finish_and_clear();
    Ok((total, steps))
}

/// A report interval: a whole number of rows ≥ 1.
fn parse_every(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("`{s}` is not a number of rows ≥ 1")),
    }
}
