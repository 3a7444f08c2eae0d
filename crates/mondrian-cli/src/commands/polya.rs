//! What `mondrian anomaly` and `mondrian density` share: the Pólya forest's flags, the
//! feature columns of a file, and the runs that push rows through forests (spec
//! `mondrian-polya-forest.md` §3–§7), in groups of trees when the whole forest would not fit
//! in memory.

use std::path::Path;
use std::time::Instant;

use clap::{Args, ValueEnum};
use indicatif::ProgressBar;
use mondrian::memory::{check_growth, forest_bytes, ForestShape};
use mondrian::{MondrianPolyaForest, PolyaParams, PolyaVariant, RowScore, Scaling};

use super::forest::{parse_lifetime, parse_memory, parse_threads, training_scaling};
use super::{progress, CliError};
use crate::io::{read_unlabelled, Dataset};

/// The Pólya forest's own settings (spec §9.1: the defaults are the paper's).
#[derive(Args, Clone)]
pub(crate) struct PolyaArgs {
    /// Number of trees M [default: 100].
    #[arg(long)]
    pub(crate) trees: Option<usize>,
    /// Depth cap of every tree: a depth ≥ 1, or `none` for no cap [default: 10].
    #[arg(long, value_name = "K|none", value_parser = parse_depth)]
    pub(crate) max_depth: Option<Depth>,
    /// Lifetime λ of the Mondrian process: `inf` or a number > 0 [default: inf].
    #[arg(long, value_parser = parse_lifetime, allow_negative_numbers = true)]
    pub(crate) lifetime: Option<f64>,
    /// Prior strength γ of the Pólya trees (> 0) [default: 1].
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) gamma: Option<f64>,
    /// Master seed: tree t draws from (seed, t) [default: 0].
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Worker threads (0 = all cores); the scores do not depend on it.
    #[arg(long, default_value_t = 0, value_parser = parse_threads)]
    pub(crate) threads: usize,
    /// Memory budget, e.g. 500M, 4G or 4GiB: a forest estimated to need more is grown in
    /// groups of fewer trees, one group at a time [default: what the machine has left].
    #[arg(long, value_parser = parse_memory)]
    pub(crate) max_memory: Option<u64>,
}

/// A depth cap, or none.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Depth(Option<usize>);

fn parse_depth(s: &str) -> Result<Depth, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "none" | "inf" => Ok(Depth(None)),
        other => match other.parse::<usize>() {
            Ok(k) => Ok(Depth(Some(k))),
            Err(_) => Err(format!("`{s}` is not a depth (a whole number) or `none`")),
        },
    }
}

/// Which Pólya forest (spec §0).
#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
pub(crate) enum VariantArg {
    /// bMPF: a Pólya tree on a Mondrian process partition of the data's box (§3).
    Batch,
    /// sMPF: a Pólya tree on each Mondrian tree of the data (§4); takes insertions and
    /// deletions.
    Streaming,
}

impl VariantArg {
    pub(crate) fn variant(self) -> PolyaVariant {
        match self {
            VariantArg::Batch => PolyaVariant::Batch,
            VariantArg::Streaming => PolyaVariant::Streaming,
        }
    }
}

/// The name of a variant in reports.
pub(crate) fn variant_name(v: PolyaVariant) -> &'static str {
    match v {
        PolyaVariant::Batch => "batch",
        PolyaVariant::Streaming => "streaming",
    }
}

impl PolyaArgs {
    /// The flags that set a new forest's parameters, by name, if any was given (a loaded
    /// model keeps its own).
    pub(crate) fn first_model_flag(&self) -> Option<&'static str> {
        [
            (self.trees.is_some(), "--trees"),
            (self.max_depth.is_some(), "--max-depth"),
            (self.lifetime.is_some(), "--lifetime"),
            (self.gamma.is_some(), "--gamma"),
            (self.seed.is_some(), "--seed"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }

    pub(crate) fn seed(&self) -> u64 {
        self.seed.unwrap_or(0)
    }

    /// The parameters of a forest for `data`, checked by the library (so a bad value is
    /// refused before the data are read further).
    pub(crate) fn params(
        &self,
        variant: PolyaVariant,
        window: Option<usize>,
        data: &Dataset,
    ) -> Result<PolyaParams, CliError> {
        let defaults = PolyaParams::default();
        let params = PolyaParams {
            variant,
            n_trees: self.trees.unwrap_or(defaults.n_trees),
            max_depth: self.max_depth.map_or(defaults.max_depth, |Depth(k)| k),
            lifetime: self.lifetime.unwrap_or(defaults.lifetime),
            gamma: self.gamma.unwrap_or(defaults.gamma),
            scaling: Some(paper_scaling(data)),
            seed: self.seed(),
            n_threads: self.threads,
            window,
            max_memory: self.max_memory,
        };
        MondrianPolyaForest::new(params.clone())?;
        Ok(params)
    }
}

/// The paper's scaling (§9.1), from the whole file: min–max over the file's ranges when it
/// has at least [`mondrian::SCALE_FROM_FEATURES`] features, the raw features otherwise. The
/// ranges are the file's, not the first row's, so a stream sees the features a batch fit
/// sees.
fn paper_scaling(data: &Dataset) -> Scaling {
    if data.n_features >= mondrian::SCALE_FROM_FEATURES {
        training_scaling(data)
    } else {
        Scaling::Identity
    }
}

// ---------------------------------------------------------------------------------
// Feature columns

/// Which columns of a file are not features.
#[derive(Args, Clone)]
pub(crate) struct ColumnArgs {
    /// A column that is not a feature (a label or a regression target), by its header
    /// name.
    #[arg(long, value_name = "NAME", conflicts_with = "drop_last")]
    pub(crate) target: Option<String>,
    /// The last column is not a feature.
    #[arg(long)]
    pub(crate) drop_last: bool,
}

/// The header name of a last column that is an anomaly label, never a feature.
pub(crate) const LABEL_COLUMN: &str = "anomaly";

/// Reads the feature columns of `path`: every column but the one `--target` names, the
/// last with `--drop-last`, and a last column named `anomaly` (the anomaly sets' label)
/// without either. LIBSVM files are all features (their labels are not).
pub(crate) fn read_feature_columns(path: &Path, columns: &ColumnArgs) -> Result<Dataset, CliError> {
    let data = read_unlabelled(path)?;
    let names = &data.feature_names;
    if !data.named && (columns.target.is_some() || columns.drop_last) {
        return Err(CliError::Usage(format!(
            "{}: --target and --drop-last name columns of a CSV file, but this file has no \
             header (LIBSVM), whose labels are not features anyway",
            path.display()
        )));
    }
    let drop = match &columns.target {
        Some(name) => Some(names.iter().position(|c| c == name).ok_or_else(|| {
            CliError::Usage(format!(
                "{}: no column is named `{name}` (the header has {})",
                path.display(),
                names.join(", ")
            ))
        })?),
        None if data.named
            && (columns.drop_last || names.last().is_some_and(|c| c == LABEL_COLUMN)) =>
        {
            Some(data.n_features - 1)
        }
        None => None,
    };
    match drop {
        Some(j) => without_column(data, j, path),
        None => Ok(data),
    }
}

/// `data` without column `j`.
fn without_column(data: Dataset, j: usize, path: &Path) -> Result<Dataset, CliError> {
    let d = data.n_features;
    if d == 1 {
        return Err(CliError::Usage(format!(
            "{}: leaving out column `{}` leaves no feature column",
            path.display(),
            data.feature_names[j]
        )));
    }
    let x = data
        .x
        .chunks_exact(d)
        .flat_map(|row| row[..j].iter().chain(&row[j + 1..]))
        .copied()
        .collect();
    let mut feature_names = data.feature_names;
    feature_names.remove(j);
    Ok(Dataset {
        x,
        n_features: d - 1,
        labels: Vec::new(),
        feature_names,
        named: data.named,
    })
}

// ---------------------------------------------------------------------------------
// Runs

/// How the rows go through a forest.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Protocol {
    /// Fit on every row at once, then score every row (the paper's protocol, §9.1).
    Fit,
    /// Insert the rows one at a time in order, then score every row after the stream (the
    /// paper's sMPF protocol).
    Stream,
    /// Each row in turn: with a window the oldest point leaves, the row is inserted, then
    /// scored (`score_stream`, §7.6).
    OnArrival,
}

impl Protocol {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Protocol::Fit => "fit-then-score",
            Protocol::Stream => "stream-then-score",
            Protocol::OnArrival => "insert-then-score",
        }
    }
}

/// Every row's score, and how it was computed.
pub(crate) struct Scored {
    pub(crate) scores: Vec<RowScore>,
    /// The trees of each group: one entry when the whole forest was grown at once.
    pub(crate) groups: Vec<usize>,
    /// Wall time of fitting and scoring.
    pub(crate) seconds: f64,
}

/// Where the scores of a run go, a chunk of rows at a time, in row order: a command that
/// writes or reduces them as they come holds nothing per row.
pub(crate) type Sink<'a> = dyn FnMut(&[RowScore]) -> Result<(), CliError> + 'a;

/// Rows per call of the chunked scoring and streaming loops (the progress bar moves
/// between calls; the library's stream works in chunks of this size too).
const CHUNK: usize = 4096;

/// Runs `protocol` on the `n × d` rows `x` with forests of `params`, in groups of trees if
/// the whole forest would not fit in memory (see [`tree_groups`]), and returns the score of
/// every row of `x`, or with `held_out` (after fitting on `x`) of every row of `held_out`.
pub(crate) fn run(
    params: &PolyaParams,
    x: &[f64],
    d: usize,
    protocol: Protocol,
    held_out: Option<&[f64]>,
) -> Result<Scored, CliError> {
    let groups = tree_groups(params, x.len() / d, d)?;
    let mut scores = Vec::with_capacity(held_out.unwrap_or(x).len() / d);
    let seconds = run_groups(params, &groups, x, d, protocol, held_out, &mut |s| {
        scores.extend_from_slice(s);
        Ok(())
    })?;
    Ok(Scored {
        scores,
        groups,
        seconds,
    })
}

/// [`run`] with the groups given (from [`tree_groups`]), the scores going to `sink`; returns
/// the wall time of fitting, scoring and the sink. One group passes each chunk on as it is
/// scored; several must sum every row's scores over the groups first, so they pass all the
/// rows on at the end.
pub(crate) fn run_groups(
    params: &PolyaParams,
    groups: &[usize],
    x: &[f64],
    d: usize,
    protocol: Protocol,
    held_out: Option<&[f64]>,
    sink: &mut Sink,
) -> Result<f64, CliError> {
    let start = Instant::now();
    if let [_] = groups {
        let mut forest = MondrianPolyaForest::new(params.clone())?;
        run_one_into(&mut forest, x, d, protocol, held_out, "", sink)?;
        return Ok(start.elapsed().as_secs_f64());
    }
    let mut combined: Option<Vec<RowScore>> = None;
    for (g, &trees) in groups.iter().enumerate() {
        let mut forest = MondrianPolyaForest::new(PolyaParams {
            n_trees: trees,
            seed: group_seed(params.seed, g),
            ..params.clone()
        })?;
        let what = format!("group {}/{}: ", g + 1, groups.len());
        let scores = run_one(&mut forest, x, d, protocol, held_out, &what)?;
        combined = Some(match combined {
            None => scores.iter().map(|s| weighted(s, trees)).collect(),
            Some(mut acc) => {
                for (a, s) in acc.iter_mut().zip(&scores) {
                    add(a, &weighted(s, trees));
                }
                acc
            }
        });
    }
    let mut scores = combined.unwrap_or_default();
    let m = params.n_trees as f64;
    for s in &mut scores {
        s.mass /= m;
        s.log_density -= m.ln();
    }
    sink(&scores)?;
    Ok(start.elapsed().as_secs_f64())
}

/// Runs `protocol` on one forest, behind progress bars labelled after `what`; scores the
/// rows `held_out` instead of `x` if given (not with [`Protocol::OnArrival`], which
/// scores each row as it arrives).
pub(crate) fn run_one(
    forest: &mut MondrianPolyaForest,
    x: &[f64],
    d: usize,
    protocol: Protocol,
    held_out: Option<&[f64]>,
    what: &str,
) -> Result<Vec<RowScore>, CliError> {
    let mut out = Vec::with_capacity(held_out.unwrap_or(x).len() / d);
    run_one_into(forest, x, d, protocol, held_out, what, &mut |s| {
        out.extend_from_slice(s);
        Ok(())
    })?;
    Ok(out)
}

/// [`run_one`] with each chunk's scores going to `sink` as soon as they are computed.
pub(crate) fn run_one_into(
    forest: &mut MondrianPolyaForest,
    x: &[f64],
    d: usize,
    protocol: Protocol,
    held_out: Option<&[f64]>,
    what: &str,
    sink: &mut Sink,
) -> Result<(), CliError> {
    let n = x.len() / d;
    let scored = held_out.unwrap_or(x);
    match protocol {
        Protocol::Fit => {
            let bar = ProgressBar::new_spinner();
            bar.set_message(format!("{what}fitting {} trees", forest.n_trees()));
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
            let scores = match held_out {
                // In-sample: each row goes down each tree once, to count and to score.
                None => Some(forest.fit_evaluate(x, d)?),
                Some(_) => {
                    forest.fit(x, d)?;
                    None
                }
            };
            bar.finish_and_clear();
            match scores {
                Some(s) => s.chunks(CHUNK).try_for_each(&mut *sink),
                None => evaluate_into(forest, scored, d, what, sink),
            }
        }
        Protocol::Stream => {
            insert_in_order(forest, x, d, what)?;
            evaluate_into(forest, scored, d, what, sink)
        }
        Protocol::OnArrival => {
            let bar = progress(n as u64, &format!("{what}streaming"));
            for chunk in x.chunks(CHUNK * d) {
                sink(&forest.score_stream(chunk, d, false)?)?;
                bar.inc((chunk.len() / d) as u64);
            }
            bar.finish_and_clear();
            Ok(())
        }
    }
}

/// Every row's score by the forest as it is, in chunks behind a progress bar, each chunk
/// going to `sink`.
pub(crate) fn evaluate_into(
    forest: &MondrianPolyaForest,
    x: &[f64],
    d: usize,
    what: &str,
    sink: &mut Sink,
) -> Result<(), CliError> {
    let bar = progress((x.len() / d) as u64, &format!("{what}scoring"));
    for chunk in x.chunks(CHUNK * d) {
        sink(&forest.evaluate(chunk, d)?)?;
        bar.inc((chunk.len() / d) as u64);
    }
    bar.finish_and_clear();
    Ok(())
}

/// Inserts the rows into the forest in order. Each call takes fewer rows than the trees
/// already hold, which the engine inserts one point at a time in their order (spec §7.2;
/// one call per row gives the same trees, with more overhead per row).
fn insert_in_order(
    forest: &mut MondrianPolyaForest,
    x: &[f64],
    d: usize,
    what: &str,
) -> Result<(), CliError> {
    let n = x.len() / d;
    let bar = progress(n as u64, &format!("{what}streaming"));
    let mut start = 0;
    while start < n {
        let take = forest
            .n_points()
            .saturating_sub(1)
            .clamp(1, CHUNK)
            .min(n - start);
        forest.partial_fit(&x[start * d..(start + take) * d], d)?;
        start += take;
        bar.set_position(start as u64);
    }
    bar.finish_and_clear();
    Ok(())
}

/// The trees of each group the forest is grown in: all `params.n_trees` at once if the
/// memory guard (`--max-memory`, or what the machine has left) lets a streaming forest
/// over these rows grow, else the fewest equal groups (halving the group size) that it
/// lets grow one at a time. A group's masses are the mean over its trees, so the weighted
/// mean over groups is the forest's score (§5); each group has its own seed
/// ([`group_seed`]), so the trees differ from one forest's but have the same law. A
/// batch forest's cells take little memory: it is never split.
pub(crate) fn tree_groups(
    params: &PolyaParams,
    n_rows: usize,
    d: usize,
) -> Result<Vec<usize>, CliError> {
    let m = params.n_trees;
    if params.variant == PolyaVariant::Batch {
        return Ok(vec![m]);
    }
    let held = params.window.map_or(n_rows, |w| w.min(n_rows));
    let check = |trees: usize| {
        // The shape the library's own guard estimates for a streaming forest.
        let shape = ForestShape {
            n_trees: trees,
            n_points: held,
            n_features: d,
            stats_bytes_per_node: std::mem::size_of::<u32>(),
            min_samples_split: 1,
        };
        check_growth(0, forest_bytes(shape), params.max_memory, || {
            format!("a forest of {trees} trees over {held} points of {d} features")
        })
    };
    let refusal = match check(m) {
        Ok(()) => return Ok(vec![m]),
        Err(e) => e,
    };
    let mut size = m;
    while size > 1 {
        size = size.div_ceil(2);
        match check(size) {
            Ok(()) => break,
            Err(e) if size == 1 => return Err(e.into()),
            Err(_) => {}
        }
    }
    if size == m {
        // One tree alone does not fit.
        return Err(refusal.into());
    }
    let k = m.div_ceil(size);
    let groups: Vec<usize> = (0..k).map(|g| m / k + usize::from(g < m % k)).collect();
    eprintln!("note: {refusal}");
    eprintln!(
        "note: growing the {m} trees in {k} groups of at most {size}, one group at a time, \
         each with a seed derived from the master seed, and averaging their scores"
    );
    Ok(groups)
}

/// The seed of group `g`: the master seed for the first group (so an unsplit forest is
/// the one `--seed` names), a SplitMix64 mix of it and `g` for the others.
fn group_seed(seed: u64, g: usize) -> u64 {
    if g == 0 {
        return seed;
    }
    let mut z = seed.wrapping_add((g as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A group's score as a sum over its `trees` trees: the mass times the trees, the
/// log-density plus ln(trees).
fn weighted(s: &RowScore, trees: usize) -> RowScore {
    RowScore {
        mass: s.mass * trees as f64,
        log_density: s.log_density + (trees as f64).ln(),
        out_of_domain: s.out_of_domain,
    }
}

/// Adds the sums `s` to `acc` (the densities on the linear scale); a row is outside the
/// domain only if it is outside every group's.
fn add(acc: &mut RowScore, s: &RowScore) {
    acc.mass += s.mass;
    acc.log_density = log_add_exp(acc.log_density, s.log_density);
    acc.out_of_domain &= s.out_of_domain;
}

/// ln(eᵃ + eᵇ), exact at ±∞.
fn log_add_exp(a: f64, b: f64) -> f64 {
    let top = a.max(b);
    if top.is_infinite() {
        return top;
    }
    top + ((a - top).exp() + (b - top).exp()).ln()
}

/// Sets the worker threads of a loaded forest: `0` is every core.
pub(crate) fn set_threads(
    forest: &mut MondrianPolyaForest,
    threads: usize,
) -> Result<(), CliError> {
    let n = match threads {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    };
    Ok(forest.set_n_threads(n.min(mondrian::data::MAX_THREADS))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_average_as_one_forest() {
        // Two groups of 3 and 1 trees with mean masses 0.2 and 0.6: the forest's mean over
        // 4 trees is (3·0.2 + 0.6)/4 = 0.3; densities e^-1 and e^-2 average to
        // (3e^-1 + e^-2)/4.
        let a = RowScore {
            mass: 0.2,
            log_density: -1.0,
            out_of_domain: false,
        };
        let b = RowScore {
            mass: 0.6,
            log_density: -2.0,
            out_of_domain: true,
        };
        let mut acc = weighted(&a, 3);
        add(&mut acc, &weighted(&b, 1));
        assert!((acc.mass / 4.0 - 0.3).abs() < 1e-15);
        let want = ((3.0 * (-1f64).exp() + (-2f64).exp()) / 4.0).ln();
        assert!((acc.log_density - 4f64.ln() - want).abs() < 1e-14);
        assert!(!acc.out_of_domain);
        assert_eq!(log_add_exp(f64::NEG_INFINITY, -3.0), -3.0);
        assert_eq!(log_add_exp(f64::INFINITY, -3.0), f64::INFINITY);
        assert_eq!(group_seed(7, 0), 7);
        assert_ne!(group_seed(7, 1), group_seed(7, 2));
    }
}
