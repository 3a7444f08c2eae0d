//! Plumbing the Bayesian-tree models share: the target check and the [`Model`], [`Fit`]
//! and [`Predict`] impls that forward to a model's own `fit` and `predict`.
//!
//! [`Model`]: crate::model::Model
//! [`Fit`]: crate::model::Fit
//! [`Predict`]: crate::model::Predict

use super::tree::Features;
use crate::data::MAX_TARGET;
use crate::error::{MondrianError, Result};

/// One finite target of magnitude at most [`MAX_TARGET`] per row.
pub(crate) fn check_targets(y: &[f64], n_rows: usize) -> Result<()> {
    if y.len() != n_rows {
        return Err(MondrianError::LengthMismatch {
            n_rows,
            n_labels: y.len(),
        });
    }
    if let Some(row) = y.iter().position(|v| !v.is_finite()) {
        return Err(MondrianError::NonFiniteTarget { row, value: y[row] });
    }
    if let Some(row) = y.iter().position(|v| v.abs() > MAX_TARGET) {
        return Err(MondrianError::TargetOverflow {
            row,
            value: y[row],
            max: MAX_TARGET,
        });
    }
    Ok(())
}

/// One target per row of `features`.
pub(crate) fn check_lengths(features: &Features, n_targets: usize) -> Result<()> {
    if n_targets != features.n_rows() {
        return Err(MondrianError::LengthMismatch {
            n_rows: features.n_rows(),
            n_labels: n_targets,
        });
    }
    Ok(())
}

/// One class label below `k` per row.
pub(crate) fn check_labels(y: &[usize], n_rows: usize, k: usize) -> Result<()> {
    if y.len() != n_rows {
        return Err(MondrianError::LengthMismatch {
            n_rows,
            n_labels: y.len(),
        });
    }
    match y.iter().position(|&l| l >= k) {
        Some(row) => Err(MondrianError::LabelOutOfRange {
            row,
            label: y[row],
            n_classes: k,
        }),
        None => Ok(()),
    }
}

/// The error of a model asked to predict before a fit.
pub(crate) fn no_fit() -> MondrianError {
    MondrianError::NotFitted
}

/// `Model`, `Fit<T>` and `Predict<T>` (prediction `Vec<$target>`) for a model struct with
/// fields `params: Checked<$params>` and `fitted: Option<_>`, forwarding to its inherent
/// `fit` and `predict`.
macro_rules! impl_model {
    ($model:ident, $params:ty, $target:ty) => {
        impl $crate::model::Model for $model {
            type Target = $target;
            type Params = $params;
            fn with_params(params: $crate::model::Checked<$params>) -> Self {
                $model {
                    params,
                    fitted: None,
                }
            }
            fn params(&self) -> &$params {
                &self.params
            }
        }

        impl<T: $crate::data::FeatureValue> $crate::model::Fit<T> for $model {
            fn fit(
                &mut self,
                x: &[T],
                n_features: usize,
                y: &[$target],
            ) -> $crate::error::Result<()> {
                $model::fit(self, x, n_features, y)
            }
        }

        impl<T: $crate::data::FeatureValue> $crate::model::Predict<T> for $model {
            type Prediction = Vec<$target>;
            fn predict(&self, x: &[T], n_features: usize) -> $crate::error::Result<Vec<$target>> {
                $model::predict(self, x, n_features)
            }
        }
    };
}
