//! Online boosting of Mondrian trees (experimental, Cargo feature `experimental`): the
//! corrected OzaBoost of spec `bayesian-trees.md` §6.3, not the report's "rolling weight
//! boosting", whose update is undefined (P1), wrongly normalised (P2) and whose weights
//! degenerate (P3–P4).
//!
//! Each example enters tree t Poisson(e) times, where its weight e starts at 1 and, after
//! tree t has taken it, is rescaled by how tree t now classifies it (Oza and Russell 2001):
//! `e ← e (λ_c + λ_w) / (2 λ_c)` if right and `e ← e (λ_c + λ_w) / (2 λ_w)` if wrong, where
//! `λ_c`, `λ_w` are the weights tree t has classified right and wrong so far. Prediction
//! weights tree t's class probabilities by `β_t = ln((1 − ε_t)/ε_t) + ln(K − 1)` (SAMME's
//! term for K > 2), `ε_t = λ_w / (λ_c + λ_w)` floored at 1e-6, over the trees with
//! `ε_t < 1/2`, and normalises.
//!
//! Unlike the forest and its online bagging, the result depends on the order of the
//! examples, has no batch equivalent (a tree's examples depend on the other trees and on
//! the labels) and updates the trees one after another; it is here to be measured against
//! them, not as a default.

use super::{mix64, multiplicity, ClassifierParams, MondrianForestClassifier};
use crate::data::{FeatureScaler, FeatureValue, Rows, Scaling};
use crate::error::{MondrianError, Result};
use crate::forest::MAX_SAMPLE_WEIGHT;

/// Floor of a tree's weighted error in the prediction weights (§6.3 [REC]).
pub const EPSILON_FLOOR: f64 = 1e-6;

/// The OzaBoost bookkeeping: per tree, the weight classified right (`λ_c`) and wrong
/// (`λ_w`) so far (§6.3, P2).
#[derive(Debug, Clone, PartialEq)]
pub struct OzaState {
    right: Vec<f64>,
    wrong: Vec<f64>,
}

impl OzaState {
    /// No example seen by any of `n_trees` trees.
    pub fn new(n_trees: usize) -> Self {
        Self {
            right: vec![0.0; n_trees],
            wrong: vec![0.0; n_trees],
        }
    }

    /// Records that tree `t` classified an example of weight `e` right or wrong, and
    /// returns the example's weight for the next tree.
    pub fn update(&mut self, t: usize, e: f64, correct: bool) -> f64 {
        if correct {
            self.right[t] += e;
            e * (self.right[t] + self.wrong[t]) / (2.0 * self.right[t])
        } else {
            self.wrong[t] += e;
            e * (self.right[t] + self.wrong[t]) / (2.0 * self.wrong[t])
        }
    }

    /// Tree `t`'s weighted error `λ_w / (λ_c + λ_w)`, floored at [`EPSILON_FLOOR`]; `None`
    /// before it has seen any weight.
    pub fn epsilon(&self, t: usize) -> Option<f64> {
        let total = self.right[t] + self.wrong[t];
        (total > 0.0).then(|| (self.wrong[t] / total).max(EPSILON_FLOOR))
    }

    /// Tree `t`'s vote `ln((1 − ε)/ε) + ln(K − 1)` for `k` classes, or `None` if it has
    /// seen nothing or `ε ≥ 1/2` (it is left out).
    pub fn beta(&self, t: usize, k: usize) -> Option<f64> {
        let eps = self.epsilon(t)?;
        (eps < 0.5).then(|| ((1.0 - eps) / eps).ln() + ((k.max(2) - 1) as f64).ln())
    }
}

/// An online-boosted ensemble of Mondrian trees (see the module's documentation). Each tree
/// is a one-tree [`MondrianForestClassifier`] with the given parameters.
#[derive(Debug)]
pub struct OzaBoostClassifier {
    params: ClassifierParams,
    trees: Vec<MondrianForestClassifier>,
    state: OzaState,
    n_features: Option<usize>,
    seen: u64,
}

impl OzaBoostClassifier {
    /// A booster of `params.n_trees` trees. `params.n_classes` must be given (the weights
    /// compare predicted and true classes from the first example on); bagging is refused
    /// (boosting draws its own Poisson counts).
    pub fn new(params: ClassifierParams) -> Result<Self> {
        params.validate()?;
        if params.n_classes.is_none() {
            return Err(MondrianError::InvalidParameter {
                name: "n_classes",
                reason: "online boosting needs the number of classes up front".into(),
            });
        }
        if params.bagging {
            return Err(MondrianError::InvalidParameter {
                name: "bagging",
                reason: "boosting draws its own Poisson counts; turn bagging off".into(),
            });
        }
        Ok(Self {
            state: OzaState::new(params.n_trees),
            params,
            trees: Vec::new(),
            n_features: None,
            seen: 0,
        })
    }

    /// The bookkeeping of every tree.
    pub fn state(&self) -> &OzaState {
        &self.state
    }

    /// Discards what was learnt, then learns `x` in row order (boosting is online: a batch
    /// fit is the stream in the given order).
    pub fn fit<T: FeatureValue>(&mut self, x: &[T], n_features: usize, y: &[usize]) -> Result<()> {
        let mut fresh = Self::new(self.params.clone())?;
        fresh.partial_fit(x, n_features, y)?;
        *self = fresh;
        Ok(())
    }

    /// Learns the rows of `x` one after another (§6.3). The first call fixes the feature
    /// scaling of every tree (from this batch, under [`Scaling::FirstBatch`]).
    pub fn partial_fit<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[usize],
    ) -> Result<()> {
        let rows = Rows::new(x, n_features)?;
        rows.validate(self.n_features)?;
        if y.len() != rows.n_rows() {
            return Err(MondrianError::LengthMismatch {
                n_rows: rows.n_rows(),
                n_labels: y.len(),
            });
        }
        let k = self.params.n_classes.expect("checked in new");
        if let Some(&label) = y.iter().find(|&&l| l >= k) {
            return Err(MondrianError::InvalidParameter {
                name: "labels",
                reason: format!("label {label} is not below n_classes = {k}"),
            });
        }
        if rows.n_rows() == 0 {
            return Ok(());
        }
        if self.trees.is_empty() {
            self.start(&rows)?;
        }
        for (i, &label) in y.iter().enumerate() {
            let row = rows.row(i);
            let mut e = 1.0;
            for t in 0..self.trees.len() {
                let copies = multiplicity(self.params.seed, t, self.seen, e, true);
                let copies = f64::from(copies).min(MAX_SAMPLE_WEIGHT);
                let tree = &mut self.trees[t];
                if copies > 0.0 {
                    tree.partial_fit_weighted(row, n_features, &[label], &[copies])?;
                }
                // A tree that has taken nothing yet cannot classify: it counts as wrong.
                let correct = match tree.predict(row, n_features) {
                    Ok(p) => p[0] == label,
                    Err(MondrianError::NotFitted) => false,
                    Err(other) => return Err(other),
                };
                e = self.state.update(t, e, correct);
            }
            self.seen += 1;
        }
        Ok(())
    }

    /// One-tree classifiers sharing the scaling of the first batch, seeded per tree.
    fn start<T: FeatureValue>(&mut self, rows: &Rows<T>) -> Result<()> {
        let scaling = match &self.params.scaling {
            Scaling::FirstBatch => {
                let s = FeatureScaler::fit(rows);
                Scaling::Ranges(
                    (0..rows.n_features())
                        .map(|d| {
                            let (lo, hi) = (s.unscale(d, 0.0), s.unscale(d, 1.0));
                            (lo, if hi > lo { hi } else { lo + 1.0 })
                        })
                        .collect(),
                )
            }
            other => other.clone(),
        };
        self.trees = (0..self.params.n_trees)
            .map(|t| {
                MondrianForestClassifier::new(ClassifierParams {
                    n_trees: 1,
                    seed: mix64(self.params.seed ^ mix64(t as u64 + 1)),
                    n_threads: 1,
                    scaling: scaling.clone(),
                    window: None,
                    ..self.params.clone()
                })
            })
            .collect::<Result<_>>()?;
        self.n_features = Some(rows.n_features());
        Ok(())
    }

    /// Class probabilities, row-major (one row of K per input row): the β-weighted mean of
    /// the trees' probabilities over trees with ε < 1/2; the plain mean of the trained
    /// trees when none qualifies.
    pub fn predict_proba<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<f64>> {
        let k = self.params.n_classes.expect("checked in new");
        let trained: Vec<usize> = (0..self.trees.len())
            .filter(|&t| self.state.epsilon(t).is_some() && self.trees[t].n_features().is_some())
            .collect();
        if trained.is_empty() {
            return Err(MondrianError::NotFitted);
        }
        let mut votes: Vec<(usize, f64)> = trained
            .iter()
            .filter_map(|&t| self.state.beta(t, k).map(|b| (t, b)))
            .collect();
        if votes.is_empty() {
            votes = trained.iter().map(|&t| (t, 1.0)).collect();
        }
        let total: f64 = votes.iter().map(|v| v.1).sum();
        let mut out = vec![0.0; x.len() / n_features.max(1) * k];
        for &(t, beta) in &votes {
            let p = self.trees[t].predict_proba(x, n_features)?;
            for (o, q) in out.iter_mut().zip(&p) {
                *o += beta / total * q;
            }
        }
        Ok(out)
    }

    /// The class of highest probability for each row.
    pub fn predict<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<usize>> {
        let k = self.params.n_classes.expect("checked in new");
        Ok(self
            .predict_proba(x, n_features)?
            .chunks_exact(k)
            .map(|p| {
                (0..k)
                    .max_by(|&a, &b| p[a].total_cmp(&p[b]).then(b.cmp(&a)))
                    .expect("k ≥ 1")
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The OzaBoost recursion on a scripted sequence, against numbers worked by hand from
    /// the update of §6.3 P2.
    #[test]
    fn recursion_matches_hand_worked_numbers() {
        let mut s = OzaState::new(2);
        // Example 1: tree 0 right (λc0 = 1, e = 1·1/2), tree 1 wrong (λw1 = ½, e = ½·½/1).
        let e = s.update(0, 1.0, true);
        assert_eq!(e, 0.5);
        let e = s.update(1, e, false);
        assert_eq!(e, 0.25);
        // Example 2: tree 0 wrong: λw0 = 1, e = 1·2/2 = 1; tree 1 right: λc1 = 1,
        // e = 1·1.5/2 = 0.75.
        let e = s.update(0, 1.0, false);
        assert_eq!(e, 1.0);
        let e = s.update(1, e, true);
        assert_eq!(e, 0.75);
        // Example 3: tree 0 right: λc0 = 2, e = 1·3/4; tree 1 right: λc1 = 1.75,
        // e = ¾·2.25/3.5 = 27/56.
        let e = s.update(0, 1.0, true);
        assert_eq!(e, 0.75);
        let e = s.update(1, e, true);
        assert!((e - 27.0 / 56.0).abs() < 1e-15);
        // ε0 = 1/3, ε1 = 0.5/2.25 = 2/9; votes for K = 3: ln 2 + ln 2 and ln(7/2) + ln 2.
        assert!((s.epsilon(0).unwrap() - 1.0 / 3.0).abs() < 1e-15);
        assert!((s.epsilon(1).unwrap() - 2.0 / 9.0).abs() < 1e-15);
        assert!((s.beta(0, 3).unwrap() - 4f64.ln()).abs() < 1e-12);
        assert!((s.beta(1, 3).unwrap() - 7f64.ln()).abs() < 1e-12);
        // K = 2 drops the SAMME term; ε ≥ ½ and unseen trees do not vote; ε = 0 is floored.
        assert!((s.beta(0, 2).unwrap() - 2f64.ln()).abs() < 1e-12);
        let mut t = OzaState::new(3);
        t.update(0, 1.0, false);
        t.update(1, 1.0, true);
        assert_eq!(t.beta(0, 2), None);
        assert_eq!(t.beta(2, 2), None);
        assert_eq!(t.epsilon(1), Some(EPSILON_FLOOR));
        assert!((t.beta(1, 2).unwrap() - ((1.0 - 1e-6) / 1e-6f64).ln()).abs() < 1e-9);
    }
}
