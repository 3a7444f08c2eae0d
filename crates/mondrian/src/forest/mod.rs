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
//! | `classifier.rs`, `regressor.rs` | the models: parameters, statistics, prediction |

mod classifier;
mod grow;
mod helpers;
mod pool;
mod regressor;
mod relevance;
mod store;

pub use classifier::{ClassifierParams, MondrianForestClassifier};
pub use regressor::{
    Calibration, MondrianForestRegressor, RegressionPrediction, RegressorParams, CV_MAX_TREES,
};

pub(crate) use pool::Pool;
pub(crate) use relevance::{
    cv_folds, initial_weights, learn_feature_weights, learn_relevance, made_a_split, pilot_seed,
    shares, split_relevance, split_rows, HeldOut, Initial, Weighed,
};
pub(crate) use store::PointStore;

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use crate::error::{MondrianError, Result};
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
}

/// How a forest takes points: the seed of its bagging weights, whether it bags, and the
/// sliding window it keeps (all points if `None`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Growth {
    pub(crate) seed: u64,
    pub(crate) bagging: bool,
    pub(crate) window: Option<usize>,
}

/// What a training call changed in a forest's points, for a model's own running statistics.
#[derive(Debug)]
pub(crate) struct Learned<T> {
    /// The call's rows from this one on were kept (earlier ones fell out of the window
    /// at once).
    pub(crate) kept_from: usize,
    /// Targets of the points that left (oldest first).
    pub(crate) gone: Vec<T>,
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
        }
    }

    /// `n_trees` empty trees over the store's width, tree t seeded by (seed, t).
    pub(crate) fn plant(
        &mut self,
        n_trees: usize,
        lifetime: f64,
        pause: PauseRule,
        seed: u64,
        stats: impl Fn() -> S,
    ) {
        let d = self.store.n_features.unwrap_or(0);
        self.trees = new_trees(n_trees, d, lifetime, pause, seed, stats);
    }

    /// Takes scaled rows (row-major) with their targets into the store and every tree.
    /// With a window, the oldest points leave first, so that the forest holds the last
    /// `window` points and is distributed as a batch forest on them (deletion is exact,
    /// spec `mondrian-polya-forest.md` §7.3, §7.6); rows of this call that would leave at
    /// once are never inserted.
    pub(crate) fn learn(
        &mut self,
        scaled: &[Feature],
        targets: &[S::Target],
        growth: Growth,
    ) -> Learned<S::Target> {
        let d = self.store.n_features.unwrap_or(0);
        let n = targets.len();
        let kept_from = growth.window.map_or(0, |w| n.saturating_sub(w));
        self.store.skip(kept_from);
        let leaving_count = growth
            .window
            .map_or(0, |w| (self.store.len() + n - kept_from).saturating_sub(w));
        let leaving = self.store.detach_oldest(leaving_count);
        let held = self.store.len();
        let arriving = self.store.admit(
            &scaled[kept_from * d..],
            targets[kept_from..].iter().copied(),
        );
        let gone = self.update(&leaving, &arriving, held, growth);
        Learned { kept_from, gone }
    }

    /// Removes the points with these ids (arrival indices) from the store and every tree:
    /// the forest is then as if it had never seen them (deletion is exact: each tree is
    /// distributed as one grown on the remaining points). An id the forest does not hold
    /// is an error, with nothing changed. Returns the targets of the points removed.
    pub(crate) fn forget(&mut self, ids: &[u64], growth: Growth) -> Result<Vec<S::Target>> {
        let leaving = self.store.detach_ids(ids)?;
        let held = self.store.len();
        Ok(self.update(&leaving, &[], held, growth))
    }

    /// Deletes the detached `leaving` points from every tree, inserts the admitted
    /// `arriving` ones, and frees the slots of the first; returns their targets.
    fn update(
        &mut self,
        leaving: &[u32],
        arriving: &[(u32, u64)],
        held: usize,
        growth: Growth,
    ) -> Vec<S::Target> {
        let gone = leaving
            .iter()
            .map(|&s| self.store.targets[s as usize])
            .collect();
        let data = self.store.data();
        grow_trees(
            &mut self.trees,
            &data,
            Change {
                leaving,
                arriving,
                held,
            },
            growth.seed,
            growth.bagging,
            &self.pool,
        );
        self.store.release(leaving);
        gone
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
        if self.trees.len() != self.store.n_features.map_or(0, |_| n_trees) {
            return Err(MondrianError::CorruptModel(
                "the tree count does not match the parameters".into(),
            ));
        }
        check_decoded_trees(&self.trees, d, lifetime, self.store.n_slots(), stats)
    }
}

/// One tree of a forest with the statistics its model hangs off the nodes and its own
/// generator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TreeUnit<S> {
    pub(crate) tree: MondrianTree,
    pub(crate) stats: S,
    pub(crate) rng: Xoshiro256PlusPlus,
}

/// `n_trees` empty trees over `d` features, tree t seeded by (seed, t).
fn new_trees<S>(
    n_trees: usize,
    d: usize,
    lifetime: f64,
    pause: PauseRule,
    seed: u64,
    stats: impl Fn() -> S,
) -> Vec<TreeUnit<S>> {
    (0..n_trees)
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

/// Online-bagging multiplicity `k ~ Poisson(1)` of example `example` in tree `tree`
/// (spec `bayesian-trees.md` §6.2), drawn by inversion from a uniform that depends only on
/// `(seed, tree, example)`.
pub fn poisson_weight(seed: u64, tree: usize, example: u64) -> u32 {
    let h = mix64(
        mix64(seed ^ 0x5851_f42d_4c95_7f2d)
            ^ mix64(tree as u64)
            ^ example.wrapping_mul(0xa076_1d64_78bd_642f),
    );
    let u = (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
    // P(k) = e^{-1} / k!; walk the CDF.
    let mut p = (-1.0f64).exp();
    let mut cdf = p;
    let mut k = 0u32;
    while u >= cdf && k < 30 {
        k += 1;
        p /= f64::from(k);
        cdf += p;
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_weights_follow_poisson_one() {
        // Chi-square goodness of fit for k = 0..4 and ≥ 5 over 200k draws, α = 1e-3
        // (critical value of χ²₅ is 20.52).
        let n = 200_000u64;
        let mut counts = [0f64; 6];
        for e in 0..n {
            let k = poisson_weight(7, 3, e) as usize;
            counts[k.min(5)] += 1.0;
        }
        let e1 = (-1.0f64).exp();
        let mut probs = [e1, e1, e1 / 2.0, e1 / 6.0, e1 / 24.0, 0.0];
        probs[5] = 1.0 - probs[..5].iter().sum::<f64>();
        let chi2: f64 = counts
            .iter()
            .zip(&probs)
            .map(|(&o, &p)| (o - p * n as f64).powi(2) / (p * n as f64))
            .sum();
        assert!(chi2 < 20.52, "chi2 = {chi2}, counts {counts:?}");
    }
}
