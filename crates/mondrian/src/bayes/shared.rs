//! Plumbing the Bayesian-tree models share: the target and label checks, the [`Model`],
//! [`Fit`] and [`Predict`] impls that forward to a model's own `fit` and `predict`, and
//! what the single-tree SMC (spec `bayesian-trees.md` §3.8) and MCMC (§3.11) models have
//! in common: their leaf settings and the predictive of a [`TreeMixture`].
//!
//! [`Model`]: crate::model::Model
//! [`Fit`]: crate::model::Fit
//! [`Predict`]: crate::model::Predict

use super::likelihood::{
    DirichletMultinomial, LeafModel, Moments, NormalInverseGamma, NormalKnownVariance,
    RegressionLeafModel,
};
use super::model::{RegressionLeaf, MAX_INFERRED_CLASSES};
use super::special::log_add_exp;
use super::tree::Features;
use crate::data::{FeatureValue, Rows, MAX_TARGET};
use crate::error::{MondrianError, Result};

/// One target or label per row.
fn check_length(n_labels: usize, n_rows: usize) -> Result<()> {
    if n_labels != n_rows {
        return Err(MondrianError::LengthMismatch { n_rows, n_labels });
    }
    Ok(())
}

/// One finite target of magnitude at most [`MAX_TARGET`] per row.
pub(crate) fn check_targets(y: &[f64], n_rows: usize) -> Result<()> {
    check_length(y.len(), n_rows)?;
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
    check_length(n_targets, features.n_rows())
}

/// One class label below `k` per row.
pub(crate) fn check_labels(y: &[usize], n_rows: usize, k: usize) -> Result<()> {
    check_length(y.len(), n_rows)?;
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

// ---------------------------------------------------------------------------------------
// The single-tree models: SMC (§3.8) and MCMC (§3.11)
// ---------------------------------------------------------------------------------------

/// α of the Dirichlet–multinomial leaves by default (§3.10).
pub(crate) const DEFAULT_ALPHA: f64 = 5.0;

/// Checks the classifier leaf settings α and K (an inferred K is checked as 1).
pub(crate) fn validate_class_leaves(alpha: f64, n_classes: Option<usize>) -> Result<()> {
    DirichletMultinomial::new(alpha, n_classes.unwrap_or(1)).map(|_| ())
}

/// The Dirichlet–multinomial leaves (α/K per class) for the labels `y` of `n_rows` rows:
/// K = `n_classes` when given (every label below it), else the largest label + 1, at most
/// [`MAX_INFERRED_CLASSES`].
pub(crate) fn class_leaves(
    alpha: f64,
    n_classes: Option<usize>,
    y: &[usize],
    n_rows: usize,
) -> Result<DirichletMultinomial> {
    let k = match n_classes {
        Some(k) => {
            check_labels(y, n_rows, k)?;
            k
        }
        None => {
            check_length(y.len(), n_rows)?;
            let (row, max) = y
                .iter()
                .copied()
                .enumerate()
                .max_by_key(|&(_, l)| l)
                .unwrap_or((0, 0));
            if max >= MAX_INFERRED_CLASSES {
                return Err(MondrianError::InvalidParameter {
                    name: "y",
                    reason: format!(
                        "label {max} at row {row} would mean more than \
                         {MAX_INFERRED_CLASSES} classes; give n_classes to allow it"
                    ),
                });
            }
            max + 1
        }
    };
    DirichletMultinomial::new(alpha, k)
}

/// A fitted single-tree posterior with its leaf model: SMC's weighted particles (§3.8) or
/// the trees an MCMC chain visited, weighted by their share of the iterations (§3.11).
/// Either way the posterior predictive at x is Σ_t w_t p(y | leaf_t(x)).
pub(crate) trait TreeMixture {
    /// The leaf model.
    type Leaf: LeafModel;
    /// The weighted trees as the model hands them out.
    type Posterior;

    /// The leaf model.
    fn leaf_model(&self) -> &Self::Leaf;
    /// The width of the training rows.
    fn n_features(&self) -> usize;
    /// The weighted trees.
    fn posterior(&self) -> &Self::Posterior;
    /// For each row of `rows` (of the training width), `add(row index, leaf statistics,
    /// weight, out)` over the weighted trees, into `width` outputs per row that start at
    /// `init`.
    fn accumulate<T: FeatureValue>(
        &self,
        rows: &Rows<'_, T>,
        width: usize,
        init: f64,
        add: impl Fn(usize, &<Self::Leaf as LeafModel>::Stats, f64, &mut [f64]) + Sync,
    ) -> Vec<f64>;
}

/// Row-major `x` as rows of the training width.
fn rows_of<'a, F: TreeMixture, T: FeatureValue>(
    f: &F,
    x: &'a [T],
    n_features: usize,
) -> Result<Rows<'a, T>> {
    let rows = Rows::new(x, n_features)?;
    rows.validate(Some(f.n_features()))?;
    Ok(rows)
}

/// Predictive class probabilities, K per row (row-major):
/// p(y = k | x) = Σ_t w_t (c_{leaf_t(x),k} + α/K)/(n_{leaf_t(x)} + α).
pub(crate) fn class_probabilities<F, T>(f: &F, x: &[T], n_features: usize) -> Result<Vec<f64>>
where
    F: TreeMixture<Leaf = DirichletMultinomial>,
    T: FeatureValue,
{
    let rows = rows_of(f, x, n_features)?;
    let model = f.leaf_model();
    Ok(f.accumulate(&rows, model.n_classes(), 0.0, |_, s, w, out| {
        model.add_probabilities(s, w, out)
    }))
}

/// The most probable class of each row (the lowest index on ties).
pub(crate) fn predict_classes<F, T>(f: &F, x: &[T], n_features: usize) -> Result<Vec<usize>>
where
    F: TreeMixture<Leaf = DirichletMultinomial>,
    T: FeatureValue,
{
    let p = class_probabilities(f, x, n_features)?;
    Ok(p.chunks(f.leaf_model().n_classes())
        .map(|row| {
            row.iter()
                .enumerate()
                .fold(
                    (0, f64::NEG_INFINITY),
                    |b, (i, &v)| if v > b.1 { (i, v) } else { b },
                )
                .0
        })
        .collect())
}

/// log p(y_i | x_i) of each row under the predictive class probabilities.
pub(crate) fn class_log_predictive<F, T>(
    f: &F,
    x: &[T],
    n_features: usize,
    y: &[usize],
) -> Result<Vec<f64>>
where
    F: TreeMixture<Leaf = DirichletMultinomial>,
    T: FeatureValue,
{
    let k = f.leaf_model().n_classes();
    let p = class_probabilities(f, x, n_features)?;
    check_labels(y, p.len() / k, k)?;
    Ok(y.iter()
        .enumerate()
        .map(|(i, &l)| p[i * k + l].ln())
        .collect())
}

/// Predictive mean and variance of each row, the moments of the mixture:
/// E[y] = Σ w_t m_t, Var[y] = Σ w_t (v_t + m_t²) − E[y]².
fn mean_variance<F, T>(f: &F, x: &[T], n_features: usize) -> Result<(Vec<f64>, Vec<f64>)>
where
    F: TreeMixture,
    F::Leaf: RegressionLeafModel,
    T: FeatureValue,
{
    let rows = rows_of(f, x, n_features)?;
    let model = f.leaf_model();
    let raw = f.accumulate(&rows, 2, 0.0, |_, s: &Moments, w, out| {
        let (m, v) = model.predictive_mean_variance(s);
        out[0] += w * m;
        out[1] += w * (v + m * m);
    });
    Ok(raw
        .chunks(2)
        .map(|o| (o[0], (o[1] - o[0] * o[0]).max(0.0)))
        .unzip())
}

/// log p(y_i | x_i) of each row under the mixture: log Σ_t w_t p(y_i | leaf_t(x_i)).
fn log_density<F, T>(f: &F, x: &[T], n_features: usize, y: &[f64]) -> Result<Vec<f64>>
where
    F: TreeMixture,
    F::Leaf: RegressionLeafModel,
    T: FeatureValue,
{
    let rows = Rows::new(x, n_features)?;
    check_targets(y, rows.n_rows())?;
    rows.validate(Some(f.n_features()))?;
    let model = f.leaf_model();
    Ok(f.accumulate(&rows, 1, f64::NEG_INFINITY, |i, s, w, out| {
        out[0] = log_add_exp(out[0], w.ln() + model.log_predictive(s, y[i]));
    }))
}

/// One thing per leaf model a [`RegressionLeaf`] can name (§2.1): the model itself, or a
/// posterior fitted under it.
#[derive(Debug, Clone)]
pub(crate) enum ByLeaf<N, K> {
    /// Normal–inverse-gamma leaves (R2), given or calibrated.
    Nig(N),
    /// Normal leaves with a known noise variance (R1).
    Known(K),
}

impl RegressionLeaf {
    /// Checks the given hyper-parameters.
    pub(crate) fn validate(&self) -> Result<()> {
        match self {
            RegressionLeaf::Calibrated => Ok(()),
            RegressionLeaf::NormalInverseGamma(m) => m.validate(),
            RegressionLeaf::KnownVariance(m) => m.validate(),
        }
    }

    /// The leaf model for the (checked) training targets `y`: calibrated from them by
    /// default ([`NormalInverseGamma::calibrated`], §2.1 R2 [REC]), else the given one.
    pub(crate) fn model(&self, y: &[f64]) -> ByLeaf<NormalInverseGamma, NormalKnownVariance> {
        match self {
            RegressionLeaf::Calibrated => ByLeaf::Nig(NormalInverseGamma::calibrated(y)),
            RegressionLeaf::NormalInverseGamma(m) => ByLeaf::Nig(m.clone()),
            RegressionLeaf::KnownVariance(m) => ByLeaf::Known(m.clone()),
        }
    }
}

impl<N, K, P> ByLeaf<N, K>
where
    N: TreeMixture<Leaf = NormalInverseGamma, Posterior = P>,
    K: TreeMixture<Leaf = NormalKnownVariance, Posterior = P>,
{
    /// Predictive mean and variance of each row (the mixture over the weighted trees).
    pub(crate) fn mean_variance<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        match self {
            ByLeaf::Nig(f) => mean_variance(f, x, n_features),
            ByLeaf::Known(f) => mean_variance(f, x, n_features),
        }
    }

    /// log p(y_i | x_i) of each row under the mixture over the weighted trees.
    pub(crate) fn log_predictive<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[f64],
    ) -> Result<Vec<f64>> {
        match self {
            ByLeaf::Nig(f) => log_density(f, x, n_features, y),
            ByLeaf::Known(f) => log_density(f, x, n_features, y),
        }
    }

    /// The weighted trees.
    pub(crate) fn posterior(&self) -> &P {
        match self {
            ByLeaf::Nig(f) => f.posterior(),
            ByLeaf::Known(f) => f.posterior(),
        }
    }

    /// The width of the training rows.
    pub(crate) fn n_features(&self) -> usize {
        match self {
            ByLeaf::Nig(f) => f.n_features(),
            ByLeaf::Known(f) => f.n_features(),
        }
    }
}
