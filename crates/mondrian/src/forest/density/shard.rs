//! Tree-parallel shards of the Mondrian Pólya forest (see `forest/shard.rs` for why a
//! shard grows exactly the trees of the whole forest): creation, split, merge, shard
//! files, and a forest's scores combined from its shards' partial sums without merging.
//!
//! Every shard sees every row and there is no bagging (spec `mondrian-polya-forest.md`
//! §4, §7: each tree holds all the points), so the state beside the trees is replicated:
//! the point store (scaling, ids, windows, `forget`), and for a batch forest the domain,
//! the box of the first rows (§3), which each shard computes from the same rows. Tree t
//! draws from `tree_rng(seed, t)` with its global index: a streaming shard's engine forest
//! plants its range only, and a batch shard samples the partitions of its range only.
//!
//! What a shard answers: [`evaluate_sum`](MondrianPolyaForest::evaluate_sum) (its exact
//! part of the forest's mean mass and density, §5),
//! [`mass_per_tree`](MondrianPolyaForest::mass_per_tree) (its own trees' columns) and
//! [`leaves`](MondrianPolyaForest::leaves) (by global index). What needs all M trees is
//! refused on a shard rather than answered with the shard's own tree count: `evaluate`
//! (and `score`, `log_density`), the order statistics of §5 (`order_stat_score`,
//! `is_anomaly`), `explain`, `fit_evaluate` and `score_stream`.

use std::ops::Range;
use std::sync::OnceLock;

use super::batch::BatchTrees;
use super::decode::PolyaState;
use super::polya::{Evaluation, LeafKind};
use super::{MondrianPolyaForest, PolyaParams, RowScore, Trees};
use crate::data::FeatureValue;
use crate::error::Result;
use crate::forest::shard::{cover, cut, mismatch, persistent_forest, tile, ShardFiles};
use crate::forest::{check_same, Forest, TreeRange};

/// One shard's part of the forest's scores
/// ([`evaluate_sum`](MondrianPolyaForest::evaluate_sum)); parts of shards covering all the
/// trees combine into [`evaluate`](MondrianPolyaForest::evaluate)'s output
/// ([`combine_evaluations`](MondrianPolyaForest::combine_evaluations)).
#[derive(Debug, Clone, PartialEq)]
pub struct PolyaSum {
    /// Global index of the shard's first tree.
    pub first_tree: usize,
    /// Trees in the shard.
    pub n_shard_trees: usize,
    /// Trees in the whole forest, M.
    pub n_trees: usize,
    /// Per row, the sum of the shard's tree masses `Σ m_i(x)` in tree order (not divided
    /// by M).
    pub mass_sum: Vec<f64>,
    /// Per row, ln of the sum of the shard's tree densities `Σ m_i/vol_i`, plus the
    /// log-Jacobian to raw units (not divided by M): `−∞` if every tree gives density 0,
    /// `+∞` if some tree's leaf has mass and no volume.
    pub log_density_sum: Vec<f64>,
    /// Per row, whether every tree of the shard puts the row outside its domain.
    pub all_outside: Vec<bool>,
}

/// One row's part of the score from some of the trees (see [`PolyaSum`]).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct RowPart {
    mass_sum: f64,
    log_density_sum: f64,
    all_outside: bool,
}

/// A row's part from its trees' evaluations (`jac` the log-Jacobian to raw units): the
/// masses summed in tree order, the densities by log-sum-exp from the largest.
fn part_of_row(evals: &[Evaluation], jac: f64) -> RowPart {
    let mass_sum = evals.iter().map(|e| e.log_mass.exp()).sum::<f64>();
    let top = evals
        .iter()
        .map(Evaluation::log_density)
        .fold(f64::NEG_INFINITY, f64::max);
    let log_density_sum = if top.is_infinite() {
        top
    } else {
        let s: f64 = evals.iter().map(|e| (e.log_density() - top).exp()).sum();
        top + s.ln() + jac
    };
    RowPart {
        mass_sum,
        log_density_sum,
        all_outside: evals.iter().all(|e| e.kind == LeafKind::OutOfDomain),
    }
}

/// The forest's row score (§5: the mean mass; ln of the mean density) from the parts of
/// all its `m` trees, in tree order. One part gives back its own sums divided by M
/// (`x + ln 1 = x`), so a whole forest's score is the same arithmetic whether it comes
/// from `evaluate` or from combining its single part.
fn combine_row(parts: &[RowPart], m: f64) -> RowScore {
    let mass = parts
        .iter()
        .map(|p| p.mass_sum)
        .reduce(|a, b| a + b)
        .unwrap_or(0.0)
        / m;
    let top = parts
        .iter()
        .map(|p| p.log_density_sum)
        .fold(f64::NEG_INFINITY, f64::max);
    let log_density = if top.is_infinite() {
        top
    } else {
        let s: f64 = parts.iter().map(|p| (p.log_density_sum - top).exp()).sum();
        top + s.ln() - m.ln()
    };
    RowScore {
        mass,
        log_density,
        out_of_domain: parts.iter().all(|p| p.all_outside),
    }
}

/// The forest's row score from all its trees' evaluations (`m` trees; `jac` the
/// log-Jacobian to raw units): the combination of the row's single part.
pub(super) fn reduce_row(evals: &[Evaluation], m: f64, jac: f64) -> RowScore {
    combine_row(&[part_of_row(evals, jac)], m)
}

/// The shards hold different points (or some are fitted and others not).
fn different_points() -> crate::error::MondrianError {
    mismatch("the shards hold different points (every shard must see every row)")
}

impl MondrianPolyaForest {
    /// An unfitted shard: the trees `first_tree..first_tree + n_shard_trees` of the forest
    /// that `params` describe (`params.n_trees` is the whole forest's M). Trained with the
    /// same calls on the same rows as the other shards, the shards merge into the forest
    /// one process would grow, bit for bit ([`merge`](Self::merge)).
    pub fn new_shard(params: PolyaParams, first_tree: usize, n_shard_trees: usize) -> Result<Self> {
        let mut model = Self::new(params)?;
        let n = model.params.n_trees;
        let range = TreeRange::new(first_tree, n_shard_trees, n)?;
        model.range = (n_shard_trees < n).then_some(range);
        Ok(model)
    }

    /// Global indices of the trees this model holds (`0..n_trees` for a whole forest).
    pub fn shard_range(&self) -> Range<usize> {
        self.range
            .map_or(0..self.params.n_trees, |r| r.first..r.first + r.count)
    }

    /// Whether this model holds only part of its forest's trees.
    pub fn is_shard(&self) -> bool {
        self.range.is_some()
    }

    /// Trees held (M for a whole forest).
    pub(super) fn held_trees(&self) -> usize {
        self.shard_range().len()
    }

    /// Refuses on a shard what needs all M trees (the mean over the forest, the order
    /// statistics of §5): answering with the shard's own trees would be a wrong answer.
    pub(super) fn whole_only(&self, what: &str) -> Result<()> {
        match self.range {
            None => Ok(()),
            Some(r) => Err(mismatch(format!(
                "`{what}` needs all {} trees, and this shard holds trees {}..{}: merge the \
                 shards first (scores: combine their `evaluate_sum` parts)",
                self.params.n_trees,
                r.first,
                r.first + r.count
            ))),
        }
    }

    /// A Pólya forest has no compact form: its files stay plain, as they always were
    /// (`persistent_forest!` asks).
    pub(crate) fn is_compact(&self) -> bool {
        false
    }

    /// Cuts this model (fitted or not, whole or itself a shard) into `k` shards of
    /// contiguous tree ranges whose sizes differ by at most one, each with a copy of the
    /// points (and, for a batch forest, of the domain): the inverse of
    /// [`merge`](Self::merge). An unfitted model's shards keep their ranges until their
    /// first fit plants their trees.
    pub fn split(self, k: usize) -> Result<Vec<Self>> {
        let n = self.params.n_trees;
        let held = self.shard_range();
        let parts = cut(
            TreeRange {
                first: held.start,
                count: held.len(),
            },
            k,
        )?;
        let params = self.params;
        let shard = |trees, range: Option<TreeRange>| MondrianPolyaForest {
            params: params.clone(),
            trees,
            range,
        };
        let range_of = |r: TreeRange| (r.count < n).then_some(r);
        Ok(match self.trees {
            Trees::Empty => parts
                .into_iter()
                .map(|r| shard(Trees::Empty, range_of(r)))
                .collect(),
            Trees::Streaming(forest) => forest
                .split(k, n)?
                .into_iter()
                .map(|f| {
                    let range = f.range;
                    shard(Trees::Streaming(f), range)
                })
                .collect(),
            Trees::Batch(b) => {
                let mut trees = b.trees.into_iter();
                parts
                    .into_iter()
                    .map(|r| {
                        let part = BatchTrees {
                            store: b.store.clone(),
                            trees: trees.by_ref().take(r.count).collect(),
                            lower: b.lower.clone(),
                            upper: b.upper.clone(),
                            pool: b.pool.clone(),
                            tables: OnceLock::new(),
                        };
                        shard(Trees::Batch(part), range_of(r))
                    })
                    .collect()
            }
        })
    }

    /// One model from shards given in any order: their parameters (thread count and memory
    /// budget aside), points and (batch) domains must agree and their ranges tile a
    /// contiguous range; with all the trees it is the whole forest, bit for bit.
    pub fn merge(mut shards: Vec<Self>) -> Result<Self> {
        if shards.is_empty() {
            return Err(mismatch("no shards to merge"));
        }
        check_same(&shards, "parameters", |s| PolyaParams {
            n_threads: 0,
            max_memory: None,
            ..s.params.clone()
        })?;
        // The variant is a parameter: the trees differ only in being planted or not.
        if !shards
            .iter()
            .all(|s| std::mem::discriminant(&s.trees) == std::mem::discriminant(&shards[0].trees))
        {
            return Err(different_points());
        }
        shards.sort_by_key(|s| s.shard_range().start);
        let held = tile(shards.iter().map(Self::shard_range))?;
        let params = shards[0].params.clone();
        let n = params.n_trees;
        let range = (held.len() < n).then_some(TreeRange {
            first: held.start,
            count: held.len(),
        });
        let trees = match &shards[0].trees {
            Trees::Empty => Trees::Empty,
            Trees::Streaming(_) => {
                let forests: Vec<_> = shards
                    .into_iter()
                    .filter_map(|s| match s.trees {
                        Trees::Streaming(f) => Some(f),
                        _ => None,
                    })
                    .collect();
                Trees::Streaming(Forest::merge(forests, n)?)
            }
            Trees::Batch(_) => {
                let batches: Vec<BatchTrees> = shards
                    .into_iter()
                    .filter_map(|s| match s.trees {
                        Trees::Batch(b) => Some(b),
                        _ => None,
                    })
                    .collect();
                Trees::Batch(merge_batches(batches)?)
            }
        };
        Ok(MondrianPolyaForest {
            params,
            trees,
            range,
        })
    }

    /// This model's part of [`evaluate`](Self::evaluate) (§5): per row, its trees' masses
    /// summed in tree order, ln of their densities summed (with the log-Jacobian), and
    /// whether they all put the row outside their domain.
    /// [`combine_evaluations`](Self::combine_evaluations) joins the parts of all shards.
    /// Every shard holds the same points, so its active dimensions, and the Jacobian, are
    /// the whole forest's.
    pub fn evaluate_sum<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<PolyaSum> {
        let (scaled, n) = self.scaled(x, n_features)?;
        let jac = self.log_jacobian(&self.active());
        let parts = self.each_row(&scaled, n, |evals| part_of_row(evals, jac))?;
        let held = self.shard_range();
        Ok(PolyaSum {
            first_tree: held.start,
            n_shard_trees: held.len(),
            n_trees: self.params.n_trees,
            mass_sum: parts.iter().map(|p| p.mass_sum).collect(),
            log_density_sum: parts.iter().map(|p| p.log_density_sum).collect(),
            all_outside: parts.iter().map(|p| p.all_outside).collect(),
        })
    }

    /// The whole forest's scores from the [`evaluate_sum`](Self::evaluate_sum) parts of
    /// shards covering all its trees, in any order: the mass sums added in tree-range
    /// order and divided by M, the log densities by log-sum-exp less ln M, the domain flag
    /// true where every part's is. One part (a whole forest's) gives exactly
    /// [`evaluate`](Self::evaluate)'s output (the same arithmetic); several differ from it
    /// by rounding only, as the sums are taken within each shard first.
    pub fn combine_evaluations(mut parts: Vec<PolyaSum>) -> Result<Vec<RowScore>> {
        parts.sort_by_key(|p| p.first_tree);
        let Some(first) = parts.first() else {
            return Err(mismatch("no shard evaluations to combine"));
        };
        let (m, len) = (first.n_trees, first.mass_sum.len());
        for p in &parts {
            if p.n_trees != m
                || p.mass_sum.len() != len
                || p.log_density_sum.len() != len
                || p.all_outside.len() != len
            {
                return Err(mismatch(
                    "the evaluations have different tree counts or rows",
                ));
            }
        }
        cover(parts.iter().map(|p| (p.first_tree, p.n_shard_trees)), m)?;
        let mut row = Vec::with_capacity(parts.len());
        Ok((0..len)
            .map(|i| {
                row.clear();
                row.extend(parts.iter().map(|p| RowPart {
                    mass_sum: p.mass_sum[i],
                    log_density_sum: p.log_density_sum[i],
                    all_outside: p.all_outside[i],
                }));
                combine_row(&row, m as f64)
            })
            .collect())
    }
}

/// Batch trees of shards sorted by range (already tiled): one store and domain, which must
/// be identical in every shard (same encoded bytes, as `Forest::merge` checks), and the
/// partitions concatenated in range order.
fn merge_batches(batches: Vec<BatchTrees>) -> Result<BatchTrees> {
    let encode = |b: &BatchTrees| {
        bincode::serialize(&b.store)
            .map_err(|e| mismatch(format!("cannot encode a point store: {e}")))
    };
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let store = encode(&batches[0])?;
    let (lower, upper) = (bits(&batches[0].lower), bits(&batches[0].upper));
    for b in &batches[1..] {
        if encode(b)? != store {
            return Err(different_points());
        }
        if bits(&b.lower) != lower || bits(&b.upper) != upper {
            return Err(mismatch(
                "the shards have different domains (every shard must fit the same first rows)",
            ));
        }
    }
    let mut batches = batches.into_iter();
    let mut merged = batches.next().expect("one shard at least");
    for b in batches {
        merged.trees.extend(b.trees);
    }
    merged.tables = OnceLock::new();
    Ok(merged)
}

persistent_forest!(MondrianPolyaForest, "mondrian-polya-forest");

impl ShardFiles for MondrianPolyaForest {
    const SHARD_KIND: &'static str = "mondrian-polya-forest-shard";
    type State = PolyaState;
    fn range(&self) -> Option<TreeRange> {
        self.range
    }
    fn forest_trees(state: &PolyaState) -> usize {
        state.params.n_trees
    }
    fn from_state(mut state: PolyaState, range: Option<TreeRange>) -> Result<Self> {
        state.range = range;
        Self::try_from(state).map_err(|e| e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Forget;
    use crate::persist::Persistent;
    use crate::PolyaVariant;

    /// Rows in [0, 1)³ whose feature 2 is constant in the first `flat` rows.
    fn rows(n: usize, flat: usize) -> Vec<f64> {
        (0..n)
            .flat_map(|i| {
                let u = |k: usize| ((i * 7919 + k * 104729) % 1000) as f64 / 1000.0;
                [u(0), u(1), if i < flat { 0.5 } else { u(2) }]
            })
            .collect()
    }

    /// Every tree of a streaming forest has the whole forest's active dimensions (they
    /// all hold every point), so a shard's log-Jacobian is the forest's: a one-tree shard
    /// of each tree has the whole forest's `active()`, through windows and `forget`.
    #[test]
    fn every_shard_has_the_forests_active_dimensions() {
        for window in [None, Some(25)] {
            let params = PolyaParams {
                n_trees: 6,
                seed: 3,
                window,
                ..Default::default()
            };
            let mut whole = MondrianPolyaForest::new(params).unwrap();
            let x = rows(60, 30);
            let check = |whole: &MondrianPolyaForest| {
                let active = whole.active();
                assert_eq!(active.len(), 3);
                for s in whole.clone().split(6).unwrap() {
                    assert_eq!(s.active(), active, "tree {:?}", s.shard_range());
                    assert_eq!(s.log_jacobian(&s.active()), whole.log_jacobian(&active));
                }
            };
            whole.partial_fit(&x[..30 * 3], 3).unwrap();
            assert_eq!(whole.active(), vec![true, true, false]);
            check(&whole);
            whole.partial_fit(&x[30 * 3..], 3).unwrap();
            check(&whole);
            let ids = whole.point_ids();
            whole.forget(&ids[ids.len() - 10..]).unwrap();
            check(&whole);
        }
        let mut batch = MondrianPolyaForest::new(PolyaParams {
            variant: PolyaVariant::Batch,
            n_trees: 4,
            ..Default::default()
        })
        .unwrap();
        batch.fit(&rows(40, 40), 3).unwrap();
        for s in batch.clone().split(4).unwrap() {
            assert_eq!(s.active(), batch.active());
        }
    }

    /// A whole forest's file is what the default `Persistent` wrote before shards (plain,
    /// under `mondrian-polya-forest`), so older files still load and newer ones load in
    /// older builds; a shard's file takes its own kind.
    #[test]
    fn a_whole_forests_file_format_is_unchanged() {
        for variant in [PolyaVariant::Streaming, PolyaVariant::Batch] {
            let mut f = MondrianPolyaForest::new(PolyaParams {
                variant,
                n_trees: 3,
                ..Default::default()
            })
            .unwrap();
            f.fit(&rows(30, 0), 3).unwrap();
            let mut before = Vec::new();
            crate::persist::save_encoded(
                &f,
                "mondrian-polya-forest",
                crate::persist::Encoding::Plain,
                &mut before,
            )
            .unwrap();
            assert_eq!(f.to_bytes().unwrap(), before);
            let shard = f.split(2).unwrap().remove(1);
            let bytes = shard.to_bytes().unwrap();
            assert_eq!(
                crate::persist::kind_of(&bytes).as_deref(),
                Some("mondrian-polya-forest-shard")
            );
            assert_eq!(
                MondrianPolyaForest::from_bytes(&bytes)
                    .unwrap()
                    .shard_range(),
                2..3
            );
        }
    }
}
