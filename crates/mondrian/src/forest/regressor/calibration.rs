//! Calibrated intervals (spec `mf-regression.md` §3.3 and [`Calibration`]): PITs by
//! cross-validation or from held-out rows, and the probabilities they turn a level into.

use super::{Calibration, MondrianForestRegressor, RegressorParams};
use crate::data::{FeatureValue, FeatureWeights, Rows};
use crate::error::{MondrianError, Result};

impl MondrianForestRegressor {
    /// Sorted PITs of the rows by 5-fold cross-validation with forests of this forest's
    /// parameters and the given feature weights ([`Calibration::Cv`]). With sample
    /// weights the forests are fitted with them and each held-out row's PIT counts as many
    /// times as the trees would take it without bagging (its weight, rounded at random).
    pub(super) fn cv_pits<T: FeatureValue>(
        &self,
        rows: &Rows<T>,
        y: &[f64],
        sample: Option<&[f64]>,
        feature_weights: FeatureWeights,
    ) -> Result<Vec<f64>> {
        let (n, d) = (rows.n_rows(), rows.n_features());
        let seed = crate::forest::pilot_seed(self.params.seed);
        let folds = crate::forest::cv_folds(n, seed, ("calibration", "calibration cv"))?;
        let params = self.fold_params(feature_weights);
        let mut pits = Vec::with_capacity(n);
        for held in &folds {
            let (fit_x, fit_y, val_x, val_y) = crate::forest::split_rows(rows, y, held);
            let (fit_w, _) = crate::forest::split_weights(sample, held);
            let mut forest = MondrianForestRegressor::new(params.clone())?;
            forest.train(&fit_x, d, &fit_y, true, fit_w.as_deref())?;
            let fold_pits = forest.log_density_and_cdf(&val_x, d, &val_y)?.1;
            pits.extend(crate::forest::weighted_pits(fold_pits, held, sample, seed));
        }
        pits.sort_by(f64::total_cmp);
        Ok(pits)
    }

    /// The parameters of the forests a cross-validation fits on each fold: this forest's,
    /// without calibration, with the given feature weights and at most
    /// [`CV_MAX_TREES`](super::CV_MAX_TREES) trees.
    pub(super) fn fold_params(&self, feature_weights: FeatureWeights) -> RegressorParams {
        RegressorParams {
            calibration: Calibration::None,
            feature_weights,
            n_trees: self.params.n_trees.min(super::CV_MAX_TREES),
            ..self.params.clone()
        }
    }

    /// Sorted PITs of these rows by 5-fold cross-validation with forests of this forest's
    /// parameters (at most [`CV_MAX_TREES`](super::CV_MAX_TREES) trees), without training
    /// this forest. A stream can compute them from a sample and hand them to
    /// [`set_calibration`](Self::set_calibration). They equal what [`Calibration::Cv`]
    /// computes when the feature weights are uniform or given; learnt weights are learnt
    /// again in each fold here (with `relevance:cv`, a batch fit takes the PITs of the
    /// chosen power's fold forests instead).
    pub fn cross_validated_pits<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[f64],
    ) -> Result<Vec<f64>> {
        let rows = Rows::new(x, n_features)?;
        rows.validate(None)?;
        Self::check_training_targets(y, rows.n_rows())?;
        self.cv_pits(&rows, y, None, self.params.feature_weights.clone())
    }

    /// Recalibrates the intervals from rows the forest was not trained on: their PITs
    /// under the current forest replace any earlier calibration ([`Calibration`]).
    pub fn calibrate<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[f64],
    ) -> Result<()> {
        let pits = self.cdf(x, n_features, y)?;
        self.set_calibration(Some(pits))
    }

    /// Sets (or with `None` removes) the PITs that recalibrate the intervals; each must
    /// lie in [0, 1], and there must be at least one.
    pub fn set_calibration(&mut self, pits: Option<Vec<f64>>) -> Result<()> {
        if let Some(p) = &pits {
            check_pits(p)?;
        }
        self.calibration = pits.map(|mut p| {
            p.sort_by(f64::total_cmp);
            p
        });
        Ok(())
    }

    /// The sorted PITs recalibrating the intervals, if any ([`Calibration`]).
    pub fn calibration(&self) -> Option<&[f64]> {
        self.calibration.as_deref()
    }

    /// The probabilities whose mixture quantiles bound the central interval at `level`:
    /// `((1 − level)/2, (1 + level)/2)`, or with a calibration the PITs' order statistics
    /// of [`Calibration`].
    pub fn interval_probabilities(&self, level: f64) -> Result<(f64, f64)> {
        if !(level > 0.0 && level < 1.0) {
            return Err(MondrianError::InvalidParameter {
                name: "level",
                reason: format!("{level} is not in (0, 1)"),
            });
        }
        let a = (1.0 - level) / 2.0;
        Ok(match &self.calibration {
            None => (a, 1.0 - a),
            Some(u) => {
                let n = u.len();
                // u_(k), with u_(0) = 0 and u_(k) = 1 beyond the sample.
                let rank = |r: f64| match r as usize {
                    0 => 0.0,
                    k if k > n => 1.0,
                    k => u[k - 1],
                };
                // Ranks are integers; the slack keeps a level such as 0.8 from losing one
                // to rounding ((1 − 0.8)/2 · 10 = 0.99999…).
                let lo = rank((a * (n + 1) as f64 + 1e-9).floor());
                let hi = rank(((1.0 - a) * (n + 1) as f64 - 1e-9).ceil());
                (lo, hi)
            }
        })
    }
}

/// PITs must be probabilities, and at least one.
pub(super) fn check_pits(pits: &[f64]) -> Result<()> {
    if pits.is_empty() {
        return Err(MondrianError::InvalidParameter {
            name: "calibration",
            reason: "needs at least one PIT".into(),
        });
    }
    match pits.iter().find(|p| !(0.0..=1.0).contains(*p)) {
        Some(p) => Err(MondrianError::InvalidParameter {
            name: "calibration",
            reason: format!("PIT {p} is not in [0, 1]"),
        }),
        None => Ok(()),
    }
}
