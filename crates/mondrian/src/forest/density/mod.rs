//! `MondrianPolyaForest`: density estimation and anomaly scores with Mondrian Pólya
//! forests (spec `mondrian-polya-forest.md`), batch (bMPF, §3) or streaming (sMPF, §4).
//!
//! | file | what |
//! |---|---|
//! | `params.rs` | parameters and the paper's defaults (§9.1) |
//! | `polya.rs` | the sMPT read off an engine tree with point counts (§4) |
//! | `partition.rs` | the bMPT: a Mondrian process partition with counts (§3) |
//! | `batch.rs` | the batch forest's trees, domain and fused fit-and-score |
//! | `decode.rs` | checks of a decoded forest |
//! | `explain.rs` | explanations of a score (§8.4, an extension) |
//! | `stream.rs` | `score_stream`: windowed insert-then-score, row by row (§7.6) |
//! | `shard.rs` | tree-parallel shards: split, merge, partial scores and their combination |
//!
//! The streaming forest is the engine's [`Forest`] with [`PointCounts`]: its insertions,
//! exact deletions and windows are the engine's own. The batch forest keeps its points in
//! the engine's point store (ids, windows, `forget`) and its partitions beside it.
//!
//! **What the scores mean (§8.2).** A tree's mass `m_i(x)` is the posterior predictive
//! probability, under its finite Pólya tree, that the next observation falls in the same
//! cell as `x`; the forest score `s(x)` averages it over random partitions. A threshold ε
//! reads "x lies in a region given at most ε predictive probability". None of this is a
//! p-value: there is no null distribution behind it.

mod batch;
mod decode;
mod explain;
mod params;
mod partition;
mod polya;
mod shard;
mod stream;

pub use explain::{Explanation, TreeExplanation};
pub use params::{PolyaParams, PolyaVariant, SCALE_FROM_FEATURES};
pub use polya::{Evaluation, LeafKind, PolyaLeaf, Step};
pub use shard::PolyaSum;

use std::sync::OnceLock;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{tree_rng, Forest, Growth, PointStore, Pool, TreeRange, TreeUnit};
use crate::data::{FeatureValue, Rows, MAX_THREADS};
use crate::error::{MondrianError, Result};
use crate::model::{Checked, Forget, Model, Params};
use crate::process::Feature;
use crate::stats::counts::PointCounts;
use crate::tree::PauseRule;
use batch::BatchTrees;
use partition::Partition;
use polya::StreamingView;
use shard::reduce_row;

/// The forest's verdict on one row.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct RowScore {
    /// The mean leaf mass over the trees, `s(x)` (§5): lower is more anomalous.
    pub mass: f64,
    /// ln of the forest density `p̂(x) = (1/M) Σ m_i/vol_i` in the raw features' units,
    /// over the dimensions where the domain has extent (−∞ outside the domain). It is +∞
    /// where a tree's leaf has positive mass and zero volume: a degenerate root (the
    /// points are copies of one point, so no dimension has extent), or, in a streaming
    /// tree, the points on a cut that `f32` rounding put on their box's lowest coordinate
    /// (values one `f32` step apart, with no float between them to cut at).
    pub log_density: f64,
    /// Whether the row lies outside the domain of every tree (§8.5).
    pub out_of_domain: bool,
}

impl RowScore {
    /// The anomaly score the CLI writes: `−log10 s(x)`, higher meaning more anomalous
    /// (`+∞` outside the domain).
    pub fn anomaly_score(&self) -> f64 {
        -self.mass.log10()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
enum Trees {
    Empty,
    Streaming(Forest<PointCounts>),
    Batch(BatchTrees),
}

/// A Mondrian Pólya forest (spec `mondrian-polya-forest.md`): density estimation and
/// anomaly scores, batch or streaming, with exact deletion and sliding windows.
///
/// ```
/// use mondrian::{MondrianPolyaForest, PolyaParams};
/// let x: Vec<f64> = (0..400).map(|i| ((i * 7919) % 1000) as f64 / 1000.0).collect();
/// let mut f = MondrianPolyaForest::new(PolyaParams { n_trees: 20, ..Default::default() })?;
/// f.fit(&x, 2)?;
/// let near = f.evaluate(&[0.5, 0.5], 2)?[0];
/// let far = f.evaluate(&[5.0, 5.0], 2)?[0];
/// assert!(far.out_of_domain && far.mass == 0.0 && near.mass > 0.0);
/// # Ok::<(), mondrian::MondrianError>(())
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "decode::PolyaState")]
pub struct MondrianPolyaForest {
    params: PolyaParams,
    trees: Trees,
    /// The trees held, if this forest is a shard (`shard.rs`); not saved in the model's
    /// body, so a whole forest's encoding is unchanged (a shard's file holds it beside).
    #[serde(skip)]
    range: Option<TreeRange>,
}

impl MondrianPolyaForest {
    /// An unfitted forest; the parameters are checked here.
    pub fn new(params: PolyaParams) -> Result<Self> {
        Ok(Self::with_params(params.check()?))
    }

    /// The parameters.
    pub fn params(&self) -> &PolyaParams {
        &self.params
    }

    /// Trains on these rows only (row-major, `n_features` per row), replacing what the
    /// forest held.
    pub fn fit<T: FeatureValue>(&mut self, x: &[T], n_features: usize) -> Result<()> {
        let rows = Rows::new(x, n_features)?;
        rows.validate(None)?;
        if rows.n_rows() == 0 {
            return Err(MondrianError::EmptyData("fit needs at least one row"));
        }
        let mut fresh = Self::with_params(self.params.clone().check()?);
        fresh.range = self.range;
        fresh.train(&rows)?;
        *self = fresh;
        Ok(())
    }

    /// Trains on these rows, as [`fit`](Self::fit), and returns each row's score under the
    /// trained forest, as [`evaluate`](Self::evaluate) on the same rows would, up to the
    /// rounding of sums added in another order. A batch forest that holds every row sends
    /// each row down each tree once, for its count and its score, instead of twice.
    pub fn fit_evaluate<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
    ) -> Result<Vec<RowScore>> {
        self.whole_only("fit_evaluate")?;
        let rows = Rows::new(x, n_features)?;
        let n = rows.n_rows();
        let holds_all = self.params.window.is_none_or(|w| w >= n);
        if self.params.variant != PolyaVariant::Batch || !holds_all {
            self.fit(x, n_features)?;
            return self.evaluate(x, n_features);
        }
        rows.validate(None)?;
        if n == 0 {
            return Err(MondrianError::EmptyData("fit needs at least one row"));
        }
        let mut fresh = Self::with_params(self.params.clone().check()?);
        fresh.check_memory(n, n_features)?;
        fresh.start(&rows)?;
        let gamma = fresh.params.gamma;
        let Trees::Batch(b) = &mut fresh.trees else {
            unreachable!("a batch forest")
        };
        let scaled = b.store.scale(&rows)?;
        let take: Vec<usize> = (0..n).collect();
        b.store.admit(&scaled, &vec![(); n], None, &take);
        // Every row lies in the domain, the box of these rows.
        let sums = b.count_and_sum(&scaled, gamma);
        *self = fresh;
        let Some((mass, density)) = sums else {
            return self.evaluate(x, n_features);
        };
        let jac = self.log_jacobian(&self.active());
        let m = self.params.n_trees as f64;
        Ok(mass
            .iter()
            .zip(&density)
            .map(|(&s, &p)| RowScore {
                mass: s / m,
                log_density: p.ln() - m.ln() + jac,
                out_of_domain: false,
            })
            .collect())
    }

    /// Adds rows to the forest (the first call fixes the width, the scaling and, for a
    /// batch forest, the domain). With a window the oldest points leave first.
    pub fn partial_fit<T: FeatureValue>(&mut self, x: &[T], n_features: usize) -> Result<()> {
        let rows = match self.store() {
            Some(s) => s.rows(x, n_features)?,
            None => {
                let r = Rows::new(x, n_features)?;
                r.validate(None)?;
                r
            }
        };
        if rows.n_rows() == 0 {
            return Ok(());
        }
        self.train(&rows)
    }

    fn growth(&self) -> Growth {
        Growth {
            seed: self.params.seed,
            bagging: false,
            window: self.params.window,
            time_ordered: false,
        }
    }

    fn check_memory(&self, n_rows: usize, n_features: usize) -> Result<()> {
        let held = self.store().map_or(0, |s| s.len());
        let shape = crate::memory::ForestShape {
            n_trees: match self.params.variant {
                PolyaVariant::Streaming => self.held_trees(),
                PolyaVariant::Batch => 0,
            },
            n_points: n_rows,
            n_features,
            stats_bytes_per_node: std::mem::size_of::<u32>(),
            min_samples_split: 1,
        };
        super::check_memory(held, shape, self.params.window, self.params.max_memory)
    }

    fn train<T: FeatureValue>(&mut self, rows: &Rows<T>) -> Result<()> {
        self.check_memory(rows.n_rows(), rows.n_features())?;
        if matches!(self.trees, Trees::Empty) {
            self.start(rows)?;
        }
        let targets = vec![(); rows.n_rows()];
        let growth = self.growth();
        match &mut self.trees {
            Trees::Empty => unreachable!("started above"),
            Trees::Streaming(forest) => {
                let scaled = forest.store.scale(rows)?;
                forest.learn(&scaled, &targets, None, growth);
            }
            Trees::Batch(b) => {
                let scaled = b.store.scale(rows)?;
                let n = rows.n_rows();
                let mut take: Vec<usize> = (0..n).collect();
                if let Some(w) = growth.window {
                    take.drain(..n.saturating_sub(w));
                }
                let leaving_count = growth
                    .window
                    .map_or(0, |w| (b.store.len() + take.len()).saturating_sub(w));
                let leaving = b.store.detach_oldest(leaving_count);
                b.count(&leaving, -1);
                let arriving: Vec<u32> = b
                    .store
                    .admit(&scaled, &targets, None, &take)
                    .into_iter()
                    .map(|(s, _)| s)
                    .collect();
                b.count(&arriving, 1);
                b.store.release(&leaving);
            }
        }
        Ok(())
    }

    /// The first call: the width, the scaling, and the trees (a batch forest samples its
    /// partitions on the box of these rows).
    fn start<T: FeatureValue>(&mut self, rows: &Rows<T>) -> Result<()> {
        let d = rows.n_features();
        let scaling = self.params.scaling_for(d);
        let (range, held) = (self.range, self.shard_range());
        let p = &self.params;
        self.trees = match p.variant {
            PolyaVariant::Streaming => {
                let mut forest = Forest::new(p.n_threads);
                forest.range = range;
                forest.store.start(rows, &scaling)?;
                forest.plant(
                    p.n_trees,
                    p.lifetime,
                    PauseRule::NEVER,
                    p.seed,
                    PointCounts::default,
                );
                Trees::Streaming(forest)
            }
            PolyaVariant::Batch => {
                let mut store = PointStore::new();
                store.start(rows, &scaling)?;
                let scaled = store.scale(rows)?;
                let (mut lower, mut upper) = (vec![f64::INFINITY; d], vec![f64::NEG_INFINITY; d]);
                for row in scaled.chunks_exact(d.max(1)) {
                    for (k, &v) in row.iter().enumerate() {
                        lower[k] = lower[k].min(f64::from(v));
                        upper[k] = upper[k].max(f64::from(v));
                    }
                }
                let pool = Pool::new(p.n_threads);
                let (lifetime, max_depth, seed) = (p.lifetime, p.max_depth, p.seed);
                let trees = pool.install(|| {
                    held.into_par_iter()
                        .map(|t| {
                            let mut rng = tree_rng(seed, t);
                            Partition::sample(&lower, &upper, lifetime, max_depth, &mut rng)
                        })
                        .collect()
                });
                Trees::Batch(BatchTrees {
                    store,
                    trees,
                    lower,
                    upper,
                    pool,
                    tables: OnceLock::new(),
                })
            }
        };
        Ok(())
    }

    fn store(&self) -> Option<&PointStore<()>> {
        match &self.trees {
            Trees::Empty => None,
            Trees::Streaming(f) => Some(&f.store),
            Trees::Batch(b) => Some(&b.store),
        }
    }

    fn pool(&self) -> Option<&Pool> {
        match &self.trees {
            Trees::Empty => None,
            Trees::Streaming(f) => Some(&f.pool),
            Trees::Batch(b) => Some(&b.pool),
        }
    }

    /// A streaming tree read as an sMPT with this forest's γ and depth cap.
    fn view<'a>(
        &self,
        unit: &'a TreeUnit<PointCounts>,
        features: &'a [Feature],
    ) -> StreamingView<'a> {
        StreamingView {
            tree: &unit.tree,
            counts: &unit.stats,
            features,
            gamma: self.params.gamma,
            max_depth: self.params.max_depth,
        }
    }

    /// Number of features (once trained).
    pub fn n_features(&self) -> Option<usize> {
        self.store().and_then(|s| s.n_features)
    }

    /// Number of trees.
    pub fn n_trees(&self) -> usize {
        self.params.n_trees
    }

    /// ln of the factor that turns a density in the trees' space into one in raw units
    /// over the active dimensions.
    fn log_jacobian(&self, active: &[bool]) -> f64 {
        let Some(scaler) = self.store().and_then(|s| s.scaler.as_ref()) else {
            return 0.0;
        };
        scaler
            .factors()
            .iter()
            .zip(active)
            .filter(|(_, &a)| a)
            .map(|(f, _)| f.ln())
            .sum()
    }

    /// Evaluates every tree at each scaled row; `reduce` turns the row's evaluations into
    /// one output.
    fn each_row<R: Send + Copy + Default>(
        &self,
        scaled: &[Feature],
        n_rows: usize,
        reduce: impl Fn(&[Evaluation]) -> R + Sync + Send,
    ) -> Result<Vec<R>> {
        let (Some(pool), Some(d)) = (self.pool(), self.n_features()) else {
            return Err(MondrianError::NotFitted);
        };
        let mut out = vec![R::default(); n_rows];
        let block = pool.prediction_block_rows(n_rows, std::mem::size_of::<R>().max(8));
        let m = self.held_trees();
        let tables = match &self.trees {
            Trees::Batch(b) => b.tables(n_rows, self.params.gamma),
            _ => None,
        };
        let evaluate_block = |out: &mut [R], x: &[Feature]| {
            let mut evals = vec![Evaluation::OUTSIDE; TREE_MAJOR_ROWS * m];
            for (out, x) in out
                .chunks_mut(TREE_MAJOR_ROWS)
                .zip(x.chunks(TREE_MAJOR_ROWS * d.max(1)))
            {
                let evals = &mut evals[..out.len() * m];
                self.evaluate_tree_major(x, evals, tables);
                for (o, row) in out.iter_mut().zip(evals.chunks_exact(m)) {
                    *o = reduce(row);
                }
            }
        };
        pool.for_each_block(&mut out, block, scaled, block * d, evaluate_block);
        Ok(out)
    }

    /// Every tree's evaluation at each scaled row of `x`, row-major into `out` (`n_rows ×
    /// n_trees`), one tree at a time so that its nodes stay in cache; a batch forest with
    /// `tables` routes the rows to their leaves and reads the leaves' evaluations.
    fn evaluate_tree_major(
        &self,
        x: &[Feature],
        out: &mut [Evaluation],
        tables: Option<&[Vec<Evaluation>]>,
    ) {
        let (gamma, m) = (self.params.gamma, self.held_trees());
        let d = self.n_features().unwrap_or(0).max(1);
        match &self.trees {
            Trees::Empty => {}
            Trees::Streaming(f) => {
                let features = f.store.data().features;
                for (t, unit) in f.trees.iter().enumerate() {
                    let view = self.view(unit, features);
                    for (r, xi) in x.chunks_exact(d).enumerate() {
                        out[r * m + t] = view.evaluate(xi, None);
                    }
                }
            }
            Trees::Batch(b) => {
                let log_domain = b.log_domain();
                let inside: Vec<bool> = x.chunks_exact(d).map(|xi| b.contains(xi)).collect();
                if let Some(tables) = tables {
                    let mut leaves = vec![0u32; inside.len()];
                    for (t, (tree, table)) in b.trees.iter().zip(tables).enumerate() {
                        tree.route_rows(x, d, &mut leaves);
                        for (r, (&leaf, &inside)) in leaves.iter().zip(&inside).enumerate() {
                            out[r * m + t] = match inside {
                                true => table[leaf as usize],
                                false => Evaluation::OUTSIDE,
                            };
                        }
                    }
                    return;
                }
                for (t, tree) in b.trees.iter().enumerate() {
                    for (r, xi) in x.chunks_exact(d).enumerate() {
                        out[r * m + t] = match inside[r] {
                            true => tree.evaluate(xi, gamma, log_domain, None),
                            false => Evaluation::OUTSIDE,
                        };
                    }
                }
            }
        }
    }

    /// Every tree's evaluation at the scaled row `x`, each with the steps of its path if
    /// `steps` is given.
    fn evaluate_trees(
        &self,
        x: &[Feature],
        out: &mut Vec<Evaluation>,
        mut steps: Option<&mut Vec<Vec<Step>>>,
    ) {
        let gamma = self.params.gamma;
        match &self.trees {
            Trees::Empty => {}
            Trees::Streaming(f) => {
                let features = f.store.data().features;
                for unit in &f.trees {
                    let view = self.view(unit, features);
                    let record = steps.as_deref_mut().map(|s| {
                        s.push(Vec::new());
                        s.last_mut().expect("pushed")
                    });
                    out.push(view.evaluate(x, record));
                }
            }
            Trees::Batch(b) => {
                let inside = b.contains(x);
                let log_domain = b.log_domain();
                for t in &b.trees {
                    let record = steps.as_deref_mut().map(|s| {
                        s.push(Vec::new());
                        s.last_mut().expect("pushed")
                    });
                    out.push(match inside {
                        true => t.evaluate(x, gamma, log_domain, record),
                        false => Evaluation::OUTSIDE,
                    });
                }
            }
        }
    }

    /// The active dimensions: where the domain (the first tree's root box for a
    /// streaming forest) has extent.
    fn active(&self) -> Vec<bool> {
        match &self.trees {
            Trees::Empty => Vec::new(),
            Trees::Streaming(f) => f
                .trees
                .first()
                .and_then(|u| self.view(u, f.store.data().features).active())
                .unwrap_or_default(),
            Trees::Batch(b) => b.active(),
        }
    }

    /// Scaled, validated rows.
    fn scaled<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<(Vec<Feature>, usize)> {
        let store = self.store().ok_or(MondrianError::NotFitted)?;
        let rows = store.rows(x, n_features)?;
        Ok((store.scale(&rows)?, rows.n_rows()))
    }

    /// The forest's mass, log-density and domain flag per row (§5, §8.3). A shard
    /// refuses (its trees are part of the average): combine the shards'
    /// [`evaluate_sum`](Self::evaluate_sum) parts, or merge them first.
    pub fn evaluate<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<RowScore>> {
        self.whole_only("evaluate")?;
        let (scaled, n) = self.scaled(x, n_features)?;
        let jac = self.log_jacobian(&self.active());
        let m = self.params.n_trees as f64;
        self.each_row(&scaled, n, |evals| reduce_row(evals, m, jac))
    }

    /// The mean leaf mass per row, `s(x)` (§5): lower is more anomalous.
    pub fn score<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<f64>> {
        Ok(self
            .evaluate(x, n_features)?
            .iter()
            .map(|r| r.mass)
            .collect())
    }

    /// ln of the forest density per row, in raw units (§5, §8.3).
    pub fn log_density<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<f64>> {
        Ok(self
            .evaluate(x, n_features)?
            .iter()
            .map(|r| r.log_density)
            .collect())
    }

    /// Each tree's leaf mass per row, row-major `n_rows × n_trees` (§8.3). A shard gives
    /// only its own trees' columns (`n_rows × shard_range().len()`), so the shards' outputs
    /// put side by side in range order are the whole forest's: from them a distributed
    /// caller can take order statistics over all M trees.
    pub fn mass_per_tree<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<f64>> {
        let (scaled, n) = self.scaled(x, n_features)?;
        let d = n_features.max(1);
        let mut out = Vec::with_capacity(n * self.held_trees());
        let mut evals = Vec::new();
        for xi in scaled.chunks_exact(d) {
            evals.clear();
            self.evaluate_trees(xi, &mut evals, None);
            out.extend(evals.iter().map(|e| e.log_mass.exp()));
        }
        Ok(out)
    }

    /// The ⌈φ·M⌉-th smallest tree mass per row (§5): a row is an (ε, φ)-anomaly iff this
    /// is at most ε.
    pub fn order_stat_score<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        phi: f64,
    ) -> Result<Vec<f64>> {
        // The rank is over all M trees: a shard's own would be a wrong answer.
        self.whole_only("order_stat_score")?;
        let k = order_rank(phi, self.params.n_trees)?;
        let (scaled, n) = self.scaled(x, n_features)?;
        self.each_row(&scaled, n, |evals| {
            let mut masses: Vec<f64> = evals.iter().map(|e| e.log_mass.exp()).collect();
            let (_, kth, _) = masses.select_nth_unstable_by(k - 1, f64::total_cmp);
            *kth
        })
    }

    /// Whether each row is an (ε, φ)-anomaly (Def. 3.2): its mass is at most ε in at
    /// least φ·M trees. φ must lie in (0, 1]; ε in [0, 1].
    pub fn is_anomaly<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        epsilon: f64,
        phi: f64,
    ) -> Result<Vec<bool>> {
        self.whole_only("is_anomaly")?;
        if !(0.0..=1.0).contains(&epsilon) {
            return Err(MondrianError::InvalidParameter {
                name: "epsilon",
                reason: format!("{epsilon} is not a probability in [0, 1]"),
            });
        }
        let k = order_rank(phi, self.params.n_trees)?;
        let (scaled, n) = self.scaled(x, n_features)?;
        self.each_row(&scaled, n, |evals| {
            evals.iter().filter(|e| e.log_mass.exp() <= epsilon).count() >= k
        })
    }

    /// Every Pólya leaf of tree `t` with its mass and volume (in the trees' space). `t` is
    /// the tree's global index: a shard has only the trees of its
    /// [`shard_range`](Self::shard_range).
    pub fn leaves(&self, t: usize) -> Result<Vec<PolyaLeaf>> {
        let gamma = self.params.gamma;
        let held = self.shard_range();
        let missing = || MondrianError::InvalidParameter {
            name: "tree",
            reason: format!("no tree {t} (trees held: {}..{})", held.start, held.end),
        };
        let local = t.checked_sub(held.start).filter(|_| held.contains(&t));
        match &self.trees {
            Trees::Empty => Err(MondrianError::NotFitted),
            Trees::Streaming(f) => {
                let unit = local.and_then(|i| f.trees.get(i)).ok_or_else(missing)?;
                Ok(self.view(unit, f.store.data().features).leaves())
            }
            Trees::Batch(b) => {
                let tree = local.and_then(|i| b.trees.get(i)).ok_or_else(missing)?;
                Ok(tree.leaves(gamma, b.log_domain()))
            }
        }
    }

    /// Why one row (`n_features` values) scores as it does (§8.4, an extension): each
    /// tree's path with its shares, the critical step, the out-of-box dimensions and the
    /// per-feature attribution. Thresholds are in raw units.
    pub fn explain<T: FeatureValue>(&self, x: &[T]) -> Result<Explanation> {
        self.whole_only("explain")?;
        let d = x.len();
        let (scaled, _) = self.scaled(x, d)?;
        let mut evals = Vec::new();
        let mut steps = Vec::new();
        self.evaluate_trees(&scaled, &mut evals, Some(&mut steps));
        let jac = self.log_jacobian(&self.active());
        let score = reduce_row(&evals, self.params.n_trees as f64, jac);
        if let Some(scaler) = self.store().and_then(|s| s.scaler.as_ref()) {
            for step in steps.iter_mut().flatten() {
                if let Step::Cut { dim, threshold, .. } = step {
                    *threshold = scaler.unscale(*dim, *threshold);
                }
            }
        }
        Ok(Explanation::new(score, &evals, steps, d))
    }

    /// The points held, by id (arrival index).
    pub fn point_ids(&self) -> Vec<u64> {
        self.store().map_or(Vec::new(), |s| s.live_ids().collect())
    }

    /// Number of points held.
    pub fn n_points(&self) -> usize {
        self.store().map_or(0, |s| s.len())
    }

    /// Sets the worker threads (results do not depend on it).
    pub fn set_n_threads(&mut self, n_threads: usize) -> Result<()> {
        if n_threads == 0 || n_threads > MAX_THREADS {
            return Err(MondrianError::InvalidParameter {
                name: "n_threads",
                reason: format!("must be between 1 and {MAX_THREADS}"),
            });
        }
        self.params.n_threads = n_threads;
        match &mut self.trees {
            Trees::Empty => {}
            Trees::Streaming(f) => f.pool = Pool::new(n_threads),
            Trees::Batch(b) => b.pool = Pool::new(n_threads),
        }
        Ok(())
    }
}

/// Rows from which a batch forest's evaluation builds leaf tables (below, it walks each
/// row's path unless the tables are already built).
const TABLE_MIN_ROWS: usize = 256;

/// Rows evaluated together, one tree at a time ([`MondrianPolyaForest::evaluate_tree_major`]).
const TREE_MAJOR_ROWS: usize = 256;

fn log_factor(factors: &[f64], active: &[bool]) -> f64 {
    factors
        .iter()
        .zip(active)
        .filter(|(_, &a)| a)
        .map(|(f, _)| f.ln())
        .sum()
}

/// `⌈φ·M⌉`, for φ in (0, 1]: the fewest trees k whose fraction k/M is at least φ, the
/// fraction compared as a float. The product φ·M can round above an integer (0.07 · 100
/// is 7.000000000000001, 0.55 · 100 is 55.00000000000001), and its ceiling would then ask
/// for one tree more than the φ the user wrote.
fn order_rank(phi: f64, n_trees: usize) -> Result<usize> {
    if !(phi > 0.0 && phi <= 1.0) {
        return Err(MondrianError::InvalidParameter {
            name: "phi",
            reason: format!(
                "{phi} is not in (0, 1]: φ = 0 would flag every point (an anomaly in at least \
                 0 trees)"
            ),
        });
    }
    let m = n_trees as f64;
    let mut k = ((phi * m).ceil() as usize).clamp(1, n_trees);
    while k > 1 && (k - 1) as f64 / m >= phi {
        k -= 1;
    }
    while k < n_trees && (k as f64 / m) < phi {
        k += 1;
    }
    Ok(k)
}

impl Model for MondrianPolyaForest {
    type Params = PolyaParams;
    type Target = ();
    fn with_params(params: Checked<PolyaParams>) -> Self {
        MondrianPolyaForest {
            params: params.into_inner(),
            trees: Trees::Empty,
            range: None,
        }
    }
    fn params(&self) -> &PolyaParams {
        &self.params
    }
}

impl Forget for MondrianPolyaForest {
    /// Removes these points (ids = arrival indices): the forest is then distributed as one
    /// trained on the rest (§7.3). An id not held is an error, with nothing changed.
    fn forget(&mut self, ids: &[u64]) -> Result<()> {
        let growth = self.growth();
        match &mut self.trees {
            Trees::Empty => Err(MondrianError::NotFitted),
            Trees::Streaming(f) => f.forget(ids, growth).map(|_| ()),
            Trees::Batch(b) => {
                let leaving = b.store.detach_ids(ids)?;
                b.count(&leaving, -1);
                b.store.release(&leaving);
                Ok(())
            }
        }
    }
    fn n_points(&self) -> usize {
        MondrianPolyaForest::n_points(self)
    }
    fn point_ids(&self) -> Vec<u64> {
        MondrianPolyaForest::point_ids(self)
    }
}
