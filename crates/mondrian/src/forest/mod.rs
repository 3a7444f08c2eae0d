//! Ensembles of Mondrian trees: the generic `Forest` every model wraps (trees with their
//! statistics and generators, the point store, the thread pool), seeding, online bagging,
//! sliding windows and forgetting.
//!
//! Every tree owns a generator seeded from `(seed, tree index)`, and online-bagging counts
//! come from a counter-based generator keyed by `(seed, tree index, point id)`, so a
//! forest is bit-identical whatever the number of threads (DESIGN.md principle 3).
//!
//! | file | what |
//! |---|---|
//! | `store.rs` | the point store: scaled rows in reusable slots, stable ids, the scaling |
//! | `grow.rs` | one parallel pass over the trees: deletions, then insertions |
//! | `pool.rs`, `helpers.rs` | the thread pool and the stream helpers |
//! | `relevance.rs` | relevance feature weights, generic over the models |
//! | `weights.rs` | sample weights and bagging: how many copies of a row each tree takes |
//! | `shard.rs` | tree-parallel shards: a forest's trees in ranges, split and merged |
//! | `classifier.rs`, `regressor.rs` | the models: parameters, statistics, prediction |

#[cfg(feature = "experimental")]
pub mod boost;
mod classifier;
mod density;
mod grow;
mod helpers;
mod pool;
mod regressor;
mod relevance;
mod shard;
mod store;
pub(crate) mod weights;

pub use classifier::{ClassifierParams, MondrianForestClassifier, ProbaSum};
pub use density::{
    Evaluation, Explanation, LeafKind, MondrianPolyaForest, PolyaLeaf, PolyaParams, PolyaSum,
    PolyaVariant, RowScore, Step, TreeExplanation, SCALE_FROM_FEATURES,
};
pub use regressor::{
    Calibration, MondrianForestRegressor, RegressionPrediction, RegressionSums, RegressorParams,
    CV_MAX_TREES,
};

pub(crate) use pool::Pool;
pub(crate) use relevance::{
    cv_folds, initial_weights, learn_feature_weights, learn_relevance, made_a_split, pilot_seed,
    shares, split_relevance, split_rows, split_weights, weighted_pits, HeldOut, Initial, Weighed,
};
pub(crate) use shard::{check_same, TreeRange};
pub(crate) use store::PointStore;
pub use weights::{
    check_sample_weights, multiplicity, poisson_count, poisson_weight, MAX_SAMPLE_WEIGHT,
};

use std::sync::Arc;

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use crate::data::FeatureValue;
use crate::error::{MondrianError, Result};
use crate::memory::{check_growth, forest_bytes, ForestShape};
use crate::process::Feature;
use crate::tree::{MondrianTree, NodeStatistics, PauseRule};
use grow::{grow_trees, Change};

/// The part of every Mondrian forest that does not depend on its statistics (DESIGN.md:
/// one engine; a model adds statistics): the trees, each with its statistics and
/// generator, the store of the points they index, and the thread pool. A model wraps one
/// and adds its parameters and prediction.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(bound(
    serialize = "S: Serialize, S::Target: Serialize",
    deserialize = "S: Deserialize<'de>, S::Target: Deserialize<'de>"
))]
pub(crate) struct Forest<S: NodeStatistics> {
    pub(crate) store: PointStore<S::Target>,
    pub(crate) trees: Vec<TreeUnit<S>>,
    #[serde(skip)]
    pub(crate) pool: Pool,
    /// The trees this forest holds when it is a shard of a larger one (`None`: all of
    /// them). Not in the derived encoding, so a full forest's bytes are as before; a
    /// model saves a shard's range beside it ([`shard`]).
    #[serde(skip)]
    pub(crate) range: Option<TreeRange>,
    /// Told how far each training pass over the trees has got.
    #[serde(skip)]
    pub(crate) progress: Option<Progress>,
}

/// An observer of training: called with (trees done, trees in the pass) as groups of trees
/// finish a training pass (a `fit`, a `partial_fit`, or trees added to a fitted forest).
/// Calls may come from any worker thread, and from two at once; the counts of one pass
/// only grow, though two calls may arrive out of order. The model does not depend on it.
#[derive(Clone)]
pub struct Progress(Arc<dyn Fn(usize, usize) + Send + Sync>);

impl Progress {
    /// An observer that calls `report(done, total)`.
    pub fn new(report: impl Fn(usize, usize) + Send + Sync + 'static) -> Self {
        Progress(Arc::new(report))
    }

    pub(crate) fn report(&self, done: usize, total: usize) {
        (self.0)(done, total)
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}

/// How a forest takes points: the seed of its bagging weights, whether it bags, and the
/// sliding window it keeps (all points if `None`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Growth {
    pub(crate) seed: u64,
    pub(crate) bagging: bool,
    pub(crate) window: Option<usize>,
    /// Whether an empty tree is batch-sampled in split-time order
    /// ([`MondrianTree::fit_in_time_order`]: the tree at a smaller lifetime is a prefix of
    /// its draws) rather than depth-first.
    pub(crate) time_ordered: bool,
}

/// What a training call changed in a forest's points, for a model's own running statistics.
#[derive(Debug)]
pub(crate) struct Learned<T> {
    /// The call's rows the forest took, in order (not those of weight 0, nor those that
    /// fell out of the window at once).
    pub(crate) kept: Vec<usize>,
    /// Targets and sample weights of the points that left (oldest first).
    pub(crate) gone: Vec<(T, f64)>,
}

impl<S> Forest<S>
where
    S: NodeStatistics + Send,
    S::Target: Sync,
{
    /// An empty forest with no trees yet ([`plant`](Self::plant) them once the width is
    /// known).
    pub(crate) fn new(n_threads: usize) -> Self {
        Forest {
            store: PointStore::new(),
            trees: Vec::new(),
            pool: Pool::new(n_threads),
            range: None,
            progress: None,
        }
    }

    /// `n_trees` empty trees over the store's width, tree t seeded by (seed, t); a shard
    /// plants only the trees of its range, each seeded by its index in the whole forest.
    pub(crate) fn plant(
        &mut self,
        n_trees: usize,
        lifetime: f64,
        pause: PauseRule,
        seed: u64,
        stats: impl Fn() -> S,
    ) {
        let d = self.store.n_features.unwrap_or(0);
        let range = self.tree_range(n_trees);
        self.trees = new_trees(range, d, lifetime, pause, seed, stats);
    }

    /// Takes scaled rows (row-major) with their targets and sample weights (`None`: all 1)
    /// into the store and every tree. A row of weight 0 is counted (it has an id) but not
    /// taken. With a window, the oldest points leave first, so that the forest holds the
    /// last `window` points and is distributed as a batch forest on them (deletion is
    /// exact, spec `mondrian-polya-forest.md` §7.3, §7.6); rows of this call that would
    /// leave at once are never inserted.
    pub(crate) fn learn(
        &mut self,
        scaled: &[Feature],
        targets: &[S::Target],
        weights: Option<&[f64]>,
        growth: Growth,
    ) -> Learned<S::Target> {
        let mut take: Vec<usize> = match weights {
            Some(w) => (0..targets.len()).filter(|&i| w[i] > 0.0).collect(),
            None => (0..targets.len()).collect(),
        };
        if let Some(w) = growth.window {
            take.drain(..take.len().saturating_sub(w));
        }
        let leaving_count = growth
            .window
            .map_or(0, |w| (self.store.len() + take.len()).saturating_sub(w));
        let leaving = self.store.detach_oldest(leaving_count);
        let held = self.store.len();
        let arriving = self.store.admit(scaled, targets, weights, &take);
        let gone = self.update(&leaving, &arriving, held, growth);
        Learned { kept: take, gone }
    }

    /// Removes the points with these ids (arrival indices) from the store and every tree:
    /// the forest is then as if it had never seen them (deletion is exact: each tree is
    /// distributed as one grown on the remaining points, whatever their weights: a tree
    /// finds a point's copies in its leaf). An id the forest does not hold is an error,
    /// with nothing changed. Returns the targets and weights of the points removed.
    pub(crate) fn forget(&mut self, ids: &[u64], growth: Growth) -> Result<Vec<(S::Target, f64)>> {
        let leaving = self.store.detach_ids(ids)?;
        let held = self.store.len();
        Ok(self.update(&leaving, &[], held, growth))
    }

    /// Deletes the detached `leaving` points from every tree, inserts the admitted
    /// `arriving` ones, and frees the slots of the first; returns their targets and
    /// weights.
    fn update(
        &mut self,
        leaving: &[u32],
        arriving: &[(u32, u64)],
        held: usize,
        growth: Growth,
    ) -> Vec<(S::Target, f64)> {
        let gone = leaving
            .iter()
            .map(|&s| (self.store.targets[s as usize], self.store.weight(s)))
            .collect();
        let data = self.store.data();
        grow_trees(
            &mut self.trees,
            &data,
            Change {
                leaving,
                arriving,
                held,
                first_tree: self.range.map_or(0, |r| r.first),
                weights: self.store.weights(),
            },
            growth,
            &self.pool,
            self.progress.as_ref(),
        );
        self.store.release(leaving);
        gone
    }

    /// Makes every tree prediction-only ([`MondrianTree::compact`]): predictions are
    /// unchanged, further training is refused. The store keeps its rows (leaves whose box
    /// is a single point read it). An unfitted forest is an error.
    pub(crate) fn compact(&mut self) -> Result<()> {
        if self.store.n_features.is_none() {
            return Err(MondrianError::NotFitted);
        }
        for unit in &mut self.trees {
            unit.tree.compact();
        }
        Ok(())
    }

    /// Whether [`compact`](Self::compact) made the forest prediction-only.
    pub(crate) fn is_compact(&self) -> bool {
        self.trees.first().is_some_and(|u| u.tree.is_compact())
    }

    /// Refuses training on a compact forest.
    pub(crate) fn check_trainable(&self) -> Result<()> {
        match self.is_compact() {
            true => Err(MondrianError::CompactModel),
            false => Ok(()),
        }
    }

    /// Grows `n_more` new trees on the points the forest holds (each with its sample
    /// weight and bagging draws), leaving the others as they are. Tree t is seeded by
    /// (seed, t) and draws its copies of each point by (seed, t, id), so after a single
    /// batch fit the new trees are those a forest fitted with more trees from the start
    /// would have; in any case each has the law of a tree batch-fitted on the points held.
    pub(crate) fn add_trees(
        &mut self,
        n_more: usize,
        lifetime: f64,
        pause: PauseRule,
        growth: Growth,
        stats: impl Fn() -> S,
    ) {
        let d = self.store.n_features.unwrap_or(0);
        let first = self.trees.len();
        self.trees.extend((first..first + n_more).map(|t| TreeUnit {
            tree: MondrianTree::new(d, lifetime, pause),
            stats: stats(),
            rng: tree_rng(growth.seed, t),
        }));
        let arriving = self.store.live_entries();
        let data = self.store.data();
        grow_trees(
            &mut self.trees[first..],
            &data,
            Change {
                leaving: &[],
                arriving: &arriving,
                held: 0,
                first_tree: first,
                weights: self.store.weights(),
            },
            growth,
            &self.pool,
            self.progress.as_ref(),
        );
    }

    /// The leaf each row (raw values, row-major) reaches in each tree, row-major `n_rows ×
    /// n_trees`; [`NO_LEAF`] for a tree that holds no point (bagging may leave a tree
    /// without one). The models' `apply`.
    pub(crate) fn apply<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<u32>>
    where
        S: Sync,
    {
        if self.store.scaler.is_none() {
            return Err(MondrianError::NotFitted);
        }
        let rows = self.store.rows(x, n_features)?;
        let scaled = self.store.scale(&rows)?;
        let n_rows = rows.n_rows();
        let m = self.trees.len();
        let d = self.store.n_features.unwrap_or(0);
        let mut out = vec![NO_LEAF; n_rows * m];
        let block = self.pool.prediction_block_rows(n_rows, m * 4);
        self.pool
            .for_each_block(&mut out, block * m, &scaled, block * d, |out, x| {
                for (t, unit) in self.trees.iter().enumerate() {
                    if unit.tree.root().is_none() {
                        continue;
                    }
                    for (row, xi) in x.chunks_exact(d.max(1)).enumerate() {
                        out[row * m + t] = unit.tree.leaf_of(xi);
                    }
                }
            });
        Ok(out)
    }

    /// Size and depth statistics.
    pub(crate) fn summary(&self) -> ForestSummary {
        summarize(&self.trees, self.store.bytes())
    }

    /// Checks a decoded forest: the store, then every tree against it (width, lifetime,
    /// structure, points it names) and, through `stats`, the statistics it carries.
    pub(crate) fn check_decoded(
        &self,
        n_trees: usize,
        lifetime: f64,
        stats: impl Fn(&S, &MondrianTree) -> std::result::Result<(), String>,
    ) -> Result<()> {
        self.store.check()?;
        let d = self.store.n_features.unwrap_or(0);
        let count = self.tree_range(n_trees).len();
        if self.trees.len() != self.store.n_features.map_or(0, |_| count) {
            return Err(MondrianError::CorruptModel(
                "the tree count does not match the parameters".into(),
            ));
        }
        check_decoded_trees(&self.trees, d, lifetime, self.store.n_slots(), stats)
    }
}

/// Refuses, before anything grows, a call that brings `shape.n_points` points to a forest
/// of `shape.n_trees` trees holding `held` whose memory would exceed `budget` or the machine's room
/// ([`crate::memory`]).
pub(crate) fn check_memory(
    held: usize,
    shape: ForestShape,
    window: Option<usize>,
    budget: Option<u64>,
) -> Result<()> {
    let after = (held + shape.n_points).min(window.unwrap_or(usize::MAX));
    let before = ForestShape {
        n_points: held,
        ..shape
    };
    let grown = ForestShape {
        n_points: after,
        ..shape
    };
    let bytes = |s: ForestShape| if s.n_points == 0 { 0 } else { forest_bytes(s) };
    check_growth(bytes(before), bytes(grown), budget, || {
        format!(
            "a forest of {} trees over {after} points of {} features",
            shape.n_trees, shape.n_features
        )
    })
}

/// What [`apply`](crate::MondrianForestClassifier::apply) reports for a tree without points.
pub const NO_LEAF: u32 = u32::MAX;

/// One tree of a forest with the statistics its model hangs off the nodes and its own
/// generator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TreeUnit<S> {
    pub(crate) tree: MondrianTree,
    pub(crate) stats: S,
    pub(crate) rng: Xoshiro256PlusPlus,
}

/// Empty trees over `d` features for the forest's trees `range`, tree t seeded by
/// (seed, t).
fn new_trees<S>(
    range: std::ops::Range<usize>,
    d: usize,
    lifetime: f64,
    pause: PauseRule,
    seed: u64,
    stats: impl Fn() -> S,
) -> Vec<TreeUnit<S>> {
    range
        .map(|t| TreeUnit {
            tree: MondrianTree::new(d, lifetime, pause),
            stats: stats(),
            rng: tree_rng(seed, t),
        })
        .collect()
}

/// The error of a model that failed its checks while being decoded: the problem itself,
/// without the "cannot load model" that the decoder's own error adds again.
#[derive(Debug)]
pub(crate) struct DecodeError(pub(crate) MondrianError);

impl From<MondrianError> for DecodeError {
    fn from(e: MondrianError) -> Self {
        DecodeError(e)
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            MondrianError::CorruptModel(m) => f.write_str(m),
            other => other.fmt(f),
        }
    }
}

/// Checks every decoded tree against the forest: its width, its lifetime, its structure
/// (points below `n_points`) and, through `stats`, the statistics it carries.
fn check_decoded_trees<S>(
    trees: &[TreeUnit<S>],
    n_features: usize,
    lifetime: f64,
    n_points: usize,
    stats: impl Fn(&S, &MondrianTree) -> std::result::Result<(), String>,
) -> Result<()> {
    for unit in trees {
        let tree = &unit.tree;
        let checked = if tree.n_features() != n_features || tree.lifetime() != lifetime {
            Err("a tree does not match the forest's shape".to_string())
        } else {
            tree.check_decoded(n_points)
                .and_then(|()| stats(&unit.stats, tree))
        };
        checked.map_err(MondrianError::CorruptModel)?;
    }
    Ok(())
}

/// Size and shape of a fitted forest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ForestSummary {
    /// Number of trees.
    pub n_trees: usize,
    /// Nodes over all trees.
    pub n_nodes: usize,
    /// Leaves over all trees.
    pub n_leaves: usize,
    /// Mean over trees of the point-weighted average leaf depth (spec §7).
    pub depth_mean: f64,
    /// Standard deviation over trees of that depth.
    pub depth_std: f64,
    /// Heap bytes per node: structure, box and statistics, leaf point ids spread over nodes.
    pub bytes_per_node: f64,
    /// Heap bytes of the training points the forest keeps (paused leaves refer to them).
    pub store_bytes: usize,
    /// Heap bytes of all trees and the store.
    pub total_bytes: usize,
}

/// Size and depth statistics of `trees`, which keep `store_bytes` of training points.
fn summarize<S: NodeStatistics>(trees: &[TreeUnit<S>], store_bytes: usize) -> ForestSummary {
    let depths: Vec<f64> = trees.iter().map(|u| u.tree.weighted_depth()).collect();
    let m = depths.len().max(1) as f64;
    let mean = depths.iter().sum::<f64>() / m;
    let var = depths.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / m;
    let n_nodes: usize = trees.iter().map(|u| u.tree.n_live_nodes()).sum();
    let tree_bytes: usize = trees
        .iter()
        .map(|u| u.tree.heap_bytes() + u.tree.n_nodes() * u.stats.bytes_per_node())
        .sum();
    ForestSummary {
        n_trees: trees.len(),
        n_nodes,
        n_leaves: trees.iter().map(|u| u.tree.n_leaves()).sum(),
        depth_mean: mean,
        depth_std: var.sqrt(),
        bytes_per_node: tree_bytes as f64 / n_nodes.max(1) as f64,
        store_bytes,
        total_bytes: tree_bytes + store_bytes,
    }
}

/// SplitMix64 finaliser: a bijective mix of 64 bits.
#[inline]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The generator of tree `index` in a forest with master seed `seed`.
pub fn tree_rng(seed: u64, index: usize) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(mix64(seed ^ mix64(index as u64 + 0x9e37_79b9_7f4a_7c15)))
}
