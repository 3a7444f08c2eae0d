//! Prediction of the regression forest (spec `mf-regression.md` §3): every tree's
//! predictive mixture with branch-off, pooled over the trees into moments, densities, CDFs
//! and intervals.

use super::MondrianForestRegressor;
use crate::data::FeatureValue;
use crate::error::{MondrianError, Result};
use crate::stats::gaussian::{
    component_cdf, mixture_cdf, mixture_log_density, mixture_moments, mixture_quantile,
    weighted_log_density, Component, GaussianModel, Moments, Upward,
};
use crate::tree::{NodeStatistics, PathStep};

/// Predictive moments of a forest at each row: the moments of the equal-weight mixture of
/// the trees' mixtures (§3.3).
#[derive(Debug, Clone, PartialEq)]
pub struct RegressionPrediction {
    /// Predictive mean E per row.
    pub mean: Vec<f64>,
    /// Predictive variance Var per row.
    pub variance: Vec<f64>,
    /// The part of `variance` that comes from the trees disagreeing: the variance of the
    /// trees' predictive means per row (law of total variance over the equal-weight trees;
    /// `variance − between_trees` is the mean of the trees' own variances).
    pub between_trees: Vec<f64>,
}

impl RegressionPrediction {
    /// Predictive standard deviation per row.
    pub fn std(&self) -> Vec<f64> {
        self.variance.iter().map(|v| v.sqrt()).collect()
    }

    /// Central interval `E ± z·sd` with `P(|Z| ≤ z) = level` per row: the Gaussian moment
    /// match of the forest mixture, as the thesis' calibration uses (§3.3).
    pub fn interval(&self, level: f64) -> Result<(Vec<f64>, Vec<f64>)> {
        if !(level > 0.0 && level < 1.0) {
            return Err(MondrianError::InvalidParameter {
                name: "level",
                reason: format!("{level} is not in (0, 1)"),
            });
        }
        let z = crate::metrics::normal_quantile(0.5 + level / 2.0);
        let half: Vec<f64> = self.std().iter().map(|s| z * s).collect();
        Ok((
            self.mean.iter().zip(&half).map(|(m, h)| m - h).collect(),
            self.mean.iter().zip(&half).map(|(m, h)| m + h).collect(),
        ))
    }
}

impl MondrianForestRegressor {
    /// Runs `visit(row, tree components)` for every row of `x` and every tree, rows in
    /// parallel blocks; `init(i)` makes row i's accumulator.
    pub(super) fn per_row<T: FeatureValue, R: Send>(
        &self,
        x: &[T],
        n_features: usize,
        init: impl Fn(usize) -> R,
        visit: impl Fn(&mut R, &[Component]) + Sync,
    ) -> Result<Vec<R>> {
        if self.forest.store.n_features.is_some() && self.forest.store.len() == 0 {
            return Err(MondrianError::EmptyData(
                "the model holds no points (every point was forgotten or left the window)",
            ));
        }
        let theta = self.theta.ok_or(MondrianError::NotFitted)?;
        let rows = self.forest.store.rows(x, n_features)?;
        let scaled = self.forest.store.scale(&rows)?;
        let model = GaussianModel {
            theta,
            mode: self.params.mode,
        };
        let mut out: Vec<R> = (0..rows.n_rows()).map(init).collect();
        let features = self.forest.store.data().features;
        let no_messages: Vec<Upward> = Vec::new();
        // Per row: its accumulator and the steps of its path (about 20 on the UCI sets).
        let row_bytes = std::mem::size_of::<R>() + 20 * std::mem::size_of::<PathStep>();
        let block = self
            .forest
            .pool
            .prediction_block_rows(rows.n_rows(), row_bytes);
        self.forest
            .pool
            .for_each_block(&mut out, block, &scaled, block * n_features, |acc, xs| {
                let mut steps: Vec<Vec<PathStep>> = Vec::new();
                let mut comps = Vec::new();
                for (t, unit) in self.forest.trees.iter().enumerate() {
                    let msgs = self.messages.get(t).unwrap_or(&no_messages);
                    unit.tree.weighed_paths(
                        xs,
                        features,
                        &mut steps,
                        |node| NodeStatistics::prefetch(&unit.stats, node),
                        |start, paths| {
                            for (a, s) in acc[start..].iter_mut().zip(paths) {
                                comps.clear();
                                model.tree_components(&unit.tree, &unit.stats, msgs, s, &mut comps);
                                visit(a, &comps);
                            }
                        },
                    );
                }
            });
        Ok(out)
    }

    /// Per row, Welford over the held trees' means plus the sum of their variances
    /// (§3.3): what a prediction, or a shard's part of one, is made from.
    pub(super) fn tree_moments<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
    ) -> Result<Vec<(Moments, f64)>> {
        self.per_row(
            x,
            n_features,
            |_| (Moments::default(), 0.0f64),
            |(means, var_sum), comps| {
                let (m, v) = mixture_moments(comps);
                means.push(m, 1.0);
                *var_sum += v;
            },
        )
    }

    /// Predictive mean and variance at each row of `x` (row-major, `n_features` columns);
    /// any x ∈ R^D is allowed (§3).
    pub fn predict<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
    ) -> Result<RegressionPrediction> {
        let stats = self.tree_moments(x, n_features)?;
        Ok(RegressionPrediction {
            mean: stats.iter().map(|(m, _)| m.mean).collect(),
            variance: stats.iter().map(|(m, v)| v / m.n + m.variance()).collect(),
            between_trees: stats.iter().map(|(m, _)| m.variance()).collect(),
        })
    }

    /// `log p(y | x)` of the full forest mixture at each row (the negative of the NLPD
    /// summand; §3.3), by log-sum-exp over every component of every tree.
    pub fn log_density<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[f64],
    ) -> Result<Vec<f64>> {
        let n_rows = x.len() / n_features.max(1);
        Self::check_targets(y, n_rows)?;
        let m = self.forest.trees.len() as f64;
        let pooled = self.per_row(
            x,
            n_features,
            |_| Vec::new(),
            |all: &mut Vec<Component>, comps| {
                all.extend(comps.iter().map(|c| Component {
                    weight: c.weight / m,
                    ..*c
                }))
            },
        )?;
        Ok(pooled
            .iter()
            .zip(y)
            .map(|(comps, &v)| mixture_log_density(comps, v))
            .collect())
    }

    /// The predictive CDF `P(Y ≤ y | x)` of the full forest mixture at each row (its
    /// probability integral transform, uniform on (0, 1) for a calibrated forest).
    pub fn cdf<T: FeatureValue>(&self, x: &[T], n_features: usize, y: &[f64]) -> Result<Vec<f64>> {
        let n_rows = x.len() / n_features.max(1);
        Self::check_targets(y, n_rows)?;
        Ok(self
            .pooled_components(x, n_features)?
            .iter()
            .zip(y)
            .map(|(comps, &v)| mixture_cdf(comps, v).clamp(0.0, 1.0))
            .collect())
    }

    /// `log p(y | x)` and the PIT `P(Y ≤ y | x)` at each row, from one pass over the trees
    /// that keeps no components: the values of [`log_density`](Self::log_density) (to
    /// rounding: the log-sum-exp runs as the components come) and of [`cdf`](Self::cdf)
    /// (exactly: the same sums in the same order).
    pub(super) fn log_density_and_cdf<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[f64],
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        let n_rows = x.len() / n_features.max(1);
        Self::check_targets(y, n_rows)?;
        let m = self.forest.trees.len() as f64;
        let scores = self.per_row(
            x,
            n_features,
            |i| Scores::new(y[i]),
            |s, comps| {
                for c in comps {
                    s.add(c, m);
                }
            },
        )?;
        Ok(scores.iter().map(|s| (s.log_density(), s.cdf())).unzip())
    }

    /// Central interval at `level` per row from the forest's full predictive mixture (its
    /// quantiles at [`interval_probabilities`](Self::interval_probabilities): `(1 − level)/2`
    /// and `(1 + level)/2`, or recalibrated ones, see [`Calibration`](super::Calibration)), rather than the
    /// Gaussian moment match of [`RegressionPrediction::interval`].
    pub fn mixture_interval<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        level: f64,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        let (lo, hi) = self.interval_probabilities(level)?;
        Ok(self
            .pooled_components(x, n_features)?
            .iter()
            .map(|c| (mixture_quantile(c, lo), mixture_quantile(c, hi)))
            .unzip())
    }

    /// Every tree's predictive components at each row, pooled: the forest's mixture.
    fn pooled_components<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
    ) -> Result<Vec<Vec<Component>>> {
        self.per_row(
            x,
            n_features,
            |_| Vec::new(),
            |all: &mut Vec<Component>, comps| all.extend_from_slice(comps),
        )
    }
}

/// A row's log density and CDF under the forest's mixture, accumulated component by
/// component.
struct Scores {
    /// The row's target.
    y: f64,
    /// Running log-sum-exp of the components' `log w + log N(y)`: `max + ln(sum)`.
    max: f64,
    sum: f64,
    /// `Σ w` and `Σ w P(Y ≤ y)` over the components, as [`mixture_cdf`] sums them.
    total: f64,
    below: f64,
}

impl Scores {
    fn new(y: f64) -> Scores {
        Scores {
            y,
            max: f64::NEG_INFINITY,
            sum: 0.0,
            total: 0.0,
            below: 0.0,
        }
    }

    /// Adds a component of one of `m` equally weighted trees.
    fn add(&mut self, c: &Component, m: f64) {
        self.total += c.weight;
        self.below += c.weight * component_cdf(c, self.y);
        if c.weight > 0.0 {
            let l = weighted_log_density(
                &Component {
                    weight: c.weight / m,
                    ..*c
                },
                self.y,
            );
            if l > self.max {
                self.sum = self.sum * (self.max - l).exp() + 1.0;
                self.max = l;
            } else {
                self.sum += (l - self.max).exp();
            }
        }
    }

    fn log_density(&self) -> f64 {
        match self.max {
            f64::NEG_INFINITY => f64::NEG_INFINITY,
            max => max + self.sum.ln(),
        }
    }

    fn cdf(&self) -> f64 {
        (self.below / self.total).clamp(0.0, 1.0)
    }
}
