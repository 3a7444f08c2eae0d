//! The batch forest's trees (bMPF, spec `mondrian-polya-forest.md` §3) with their
//! points and domain, and the fused fit-and-score of the rows they were fitted on.

use std::sync::OnceLock;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::partition::Partition;
use super::polya::Evaluation;
use super::TABLE_MIN_ROWS;
use crate::forest::{PointStore, Pool};
use crate::process::Feature;

/// The trees of a batch forest (bMPF) with their points and domain.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct BatchTrees {
    pub(super) store: PointStore<()>,
    pub(super) trees: Vec<Partition>,
    /// The domain in the trees' space (the box of the first batch).
    pub(super) lower: Vec<f64>,
    pub(super) upper: Vec<f64>,
    #[serde(skip)]
    pub(super) pool: Pool,
    /// Every tree's [`Partition::leaf_table`] for the current counts, built on first use
    /// by a large enough call and dropped when the counts move.
    #[serde(skip)]
    pub(super) tables: OnceLock<Vec<Vec<Evaluation>>>,
}

impl BatchTrees {
    pub(super) fn contains(&self, x: &[Feature]) -> bool {
        x.iter()
            .zip(self.lower.iter().zip(&self.upper))
            .all(|(&v, (&l, &u))| l <= f64::from(v) && f64::from(v) <= u)
    }
    pub(super) fn active(&self) -> Vec<bool> {
        self.lower
            .iter()
            .zip(&self.upper)
            .map(|(l, u)| u > l)
            .collect()
    }
    pub(super) fn log_domain(&self) -> f64 {
        let any = self.lower.iter().zip(&self.upper).any(|(l, u)| u > l);
        if !any {
            return f64::NEG_INFINITY;
        }
        self.lower
            .iter()
            .zip(&self.upper)
            .filter(|(l, u)| u > l)
            .map(|(l, u)| (u - l).ln())
            .sum()
    }
    /// Moves the counts of the points in `slots` by `delta` in every tree (points outside
    /// the domain lie in no cell).
    pub(super) fn count(&mut self, slots: &[u32], delta: i64) {
        self.tables = OnceLock::new();
        let data = self.store.data();
        let inside: Vec<Feature> = slots
            .iter()
            .map(|&s| data.row(s))
            .filter(|x| self.contains(x))
            .flatten()
            .copied()
            .collect();
        let d = self.lower.len();
        let trees = &mut self.trees;
        self.pool.install(|| {
            trees
                .par_iter_mut()
                .for_each(|t| t.add_rows(&inside, d, delta))
        });
    }

    /// The leaf tables, if built or worth building for a call on `n_rows` rows.
    pub(super) fn tables(&self, n_rows: usize, gamma: f64) -> Option<&[Vec<Evaluation>]> {
        if n_rows < TABLE_MIN_ROWS {
            return self.tables.get().map(Vec::as_slice);
        }
        let log_domain = self.log_domain();
        let tables = self.tables.get_or_init(|| {
            self.pool.install(|| {
                self.trees
                    .par_iter()
                    .map(|t| t.leaf_table(gamma, log_domain))
                    .collect()
            })
        });
        Some(tables)
    }
}

/// Leaf densities outside this range make the fused path hand over to the ordinary
/// evaluation (their sum could leave the range of `f64`).
const DENSITY_RANGE: (f64, f64) = (1e-250, 1e250);

impl BatchTrees {
    /// Counts the `d`-feature rows `x` (all in the domain, the forest empty before) into
    /// every tree and returns, per row, the sums over the trees of its leaf's mass and
    /// density: each row goes down each tree once, for its count and then for its leaf's
    /// reading ([`Partition::leaf_table`] on the tree's final counts, which depend on no
    /// other tree). Groups of trees run on their own threads and their sums are added
    /// at the end, so the order of the additions differs from one row's evaluation: the
    /// results agree with [`evaluate`](super::MondrianPolyaForest::evaluate) up to
    /// rounding. `None` if some leaf density lies outside [`DENSITY_RANGE`]; the counts
    /// are then in place and the caller evaluates the ordinary way.
    pub(super) fn count_and_sum(
        &mut self,
        x: &[Feature],
        gamma: f64,
    ) -> Option<(Vec<f64>, Vec<f64>)> {
        self.tables = OnceLock::new();
        let d = self.lower.len();
        let n = x.len() / d.max(1);
        let log_domain = self.log_domain();
        let per_group = self.trees.len().div_ceil(self.pool.workers()).max(1);
        let trees = &mut self.trees;
        let groups: Vec<Option<(Vec<f64>, Vec<f64>)>> = self.pool.install(|| {
            trees
                .par_chunks_mut(per_group)
                .map(|group| {
                    let (mut mass, mut density) = (vec![0.0; n], vec![0.0; n]);
                    let mut leaves = vec![0u32; n];
                    let mut in_range = true;
                    for t in group {
                        t.route_rows(x, d, &mut leaves);
                        t.count_leaves(&leaves, 1);
                        if !in_range {
                            continue;
                        }
                        let table: Vec<(f64, f64)> = t
                            .leaf_table(gamma, log_domain)
                            .iter()
                            .map(|e| (e.log_mass.exp(), e.log_density().exp()))
                            .collect();
                        in_range = t
                            .leaf_ids()
                            .all(|l| (DENSITY_RANGE.0..=DENSITY_RANGE.1).contains(&table[l].1));
                        for (r, &l) in leaves.iter().enumerate() {
                            let (m, p) = table[l as usize];
                            mass[r] += m;
                            density[r] += p;
                        }
                    }
                    in_range.then_some((mass, density))
                })
                .collect()
        });
        let mut total: Option<(Vec<f64>, Vec<f64>)> = None;
        for g in groups {
            let (m, p) = g?;
            total = Some(match total {
                None => (m, p),
                Some((mut tm, mut tp)) => {
                    tm.iter_mut().zip(&m).for_each(|(a, b)| *a += b);
                    tp.iter_mut().zip(&p).for_each(|(a, b)| *a += b);
                    (tm, tp)
                }
            });
        }
        total
    }
}
