//! The single-tree MCMC models: [`McmcTreeClassifier`] and [`McmcTreeRegressor`] on the
//! chain of the parent module.

use serde::{Deserialize, Serialize};

use super::{bad, Fitted, HoldoutPoint, McmcParams, McmcPosterior, McmcTrace};
use crate::bayes::likelihood::{
    ClassCounts, DirichletMultinomial, Moments, NormalInverseGamma, NormalKnownVariance,
    RegressionLeafModel,
};
use crate::bayes::model::{RegressionLeaf, MAX_INFERRED_CLASSES};
use crate::bayes::shared::{check_labels, check_targets, no_fit};
use crate::bayes::special::log_add_exp;
use crate::data::{FeatureValue, Rows};
use crate::error::Result;
use crate::model::{Checked, Model, Params};

// ---------------------------------------------------------------------------------------
// Classification
// ---------------------------------------------------------------------------------------

/// Settings of [`McmcTreeClassifier`]: the chain and the Dirichlet–multinomial leaves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McmcClassifierParams {
    /// The chain and the tree prior.
    pub mcmc: McmcParams,
    /// α: the Dirichlet's total concentration, α/K per class (§3.10 default 5).
    pub alpha: f64,
    /// K; `None` takes the largest training label + 1.
    pub n_classes: Option<usize>,
}

impl Default for McmcClassifierParams {
    fn default() -> Self {
        McmcClassifierParams {
            mcmc: McmcParams::default(),
            alpha: 5.0,
            n_classes: None,
        }
    }
}

impl Params for McmcClassifierParams {
    fn validate(&self) -> Result<()> {
        self.mcmc.validate()?;
        DirichletMultinomial::new(self.alpha, self.n_classes.unwrap_or(1)).map(|_| ())
    }
}

/// A Bayesian decision-tree classifier sampled by CGM MCMC (§3.11): the predictive is
/// the average over the chain's iterations of each tree's Dirichlet–multinomial leaf
/// predictive.
#[derive(Debug, Clone)]
pub struct McmcTreeClassifier {
    params: Checked<McmcClassifierParams>,
    fitted: Option<Fitted<DirichletMultinomial>>,
}

impl McmcTreeClassifier {
    /// An unfitted classifier; the parameters are checked here.
    pub fn new(params: McmcClassifierParams) -> Result<Self> {
        Ok(Self::with_params(params.check()?))
    }

    /// The leaf model for labels `y`: K given, or the largest label + 1.
    fn leaf_model(&self, y: &[usize]) -> Result<DirichletMultinomial> {
        let k = match self.params.n_classes {
            Some(k) => k,
            None => {
                let max = y.iter().copied().max().unwrap_or(0);
                if max >= MAX_INFERRED_CLASSES {
                    return Err(bad(
                        "y",
                        format!(
                            "label {max} would mean more than {MAX_INFERRED_CLASSES} classes; \
                             give n_classes to allow it"
                        ),
                    ));
                }
                max + 1
            }
        };
        DirichletMultinomial::new(self.params.alpha, k)
    }

    /// Runs the chain on row-major `x` (`n_features` columns) and labels 0..K, replacing
    /// any previous fit.
    pub fn fit<T: FeatureValue>(&mut self, x: &[T], n_features: usize, y: &[usize]) -> Result<()> {
        self.fit_with_holdout(x, n_features, y, None).map(|_| ())
    }

    /// [`fit`](Self::fit), also recording the held-out mean log p(y | x) of the running
    /// average at the iterations `at` (increasing, within 1..=n) of `test` = (x, y, at).
    pub fn fit_with_holdout<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[usize],
        test: Option<(&[T], &[usize], &[usize])>,
    ) -> Result<Vec<HoldoutPoint>> {
        let n_rows = Rows::new(x, n_features)?.n_rows();
        let model = self.leaf_model(y)?;
        check_labels(y, n_rows, model.n_classes())?;
        if let Some((xt, yt, _)) = test {
            check_labels(yt, Rows::new(xt, n_features)?.n_rows(), model.n_classes())?;
        }
        self.fitted = None;
        let (fitted, points) = Fitted::fit(&self.params.mcmc, x, n_features, y, model, test)?;
        self.fitted = Some(fitted);
        Ok(points)
    }

    fn fitted(&self) -> Result<&Fitted<DirichletMultinomial>> {
        self.fitted.as_ref().ok_or_else(no_fit)
    }

    /// Predictive class probabilities, K per row (row-major), averaged over iterations:
    /// p(y = k | x) = (1/n) Σ_t (c_{leaf_t(x),k} + α/K)/(n_{leaf_t(x)} + α).
    pub fn predict_proba<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<f64>> {
        let f = self.fitted()?;
        let rows = f.rows(x, n_features)?;
        let k = f.model.n_classes();
        Ok(f.posterior.accumulate(&rows, k, 0.0, |_, s, w, out| {
            f.model.add_probabilities(s, w, out)
        }))
    }

    /// The most probable class of each row (the lowest index on ties).
    pub fn predict<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<usize>> {
        let p = self.predict_proba(x, n_features)?;
        let k = self.fitted()?.model.n_classes();
        Ok(p.chunks(k)
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

    /// log p(y_i | x_i) of each row under the averaged predictive.
    pub fn log_predictive<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[usize],
    ) -> Result<Vec<f64>> {
        let k = self.fitted()?.model.n_classes();
        let p = self.predict_proba(x, n_features)?;
        check_labels(y, p.len() / k, k)?;
        Ok(y.iter()
            .enumerate()
            .map(|(i, &l)| p[i * k + l].ln())
            .collect())
    }

    /// The visited trees and the trace.
    pub fn posterior(&self) -> Result<&McmcPosterior<ClassCounts>> {
        Ok(&self.fitted()?.posterior)
    }

    /// Per-iteration records.
    pub fn trace(&self) -> Result<&McmcTrace> {
        Ok(self.posterior()?.trace())
    }

    /// K, once fitted.
    pub fn n_classes(&self) -> Option<usize> {
        self.fitted.as_ref().map(|f| f.model.n_classes())
    }
}

impl_model!(McmcTreeClassifier, McmcClassifierParams, usize);

// ---------------------------------------------------------------------------------------
// Regression
// ---------------------------------------------------------------------------------------

/// Settings of [`McmcTreeRegressor`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct McmcRegressorParams {
    /// The chain and the tree prior.
    pub mcmc: McmcParams,
    /// The leaf model (Normal–inverse-gamma calibrated from y by default, §2.1 R2).
    pub leaf: RegressionLeaf,
}

impl Params for McmcRegressorParams {
    fn validate(&self) -> Result<()> {
        self.mcmc.validate()?;
        match &self.leaf {
            RegressionLeaf::Calibrated => Ok(()),
            RegressionLeaf::NormalInverseGamma(m) => m.validate(),
            RegressionLeaf::KnownVariance(m) => m.validate(),
        }
    }
}

#[derive(Debug, Clone)]
enum FittedRegression {
    Nig(Fitted<NormalInverseGamma>),
    Known(Fitted<NormalKnownVariance>),
}

/// A Bayesian regression tree sampled by CGM MCMC (§3.11 with the leaves of §2.1).
#[derive(Debug, Clone)]
pub struct McmcTreeRegressor {
    params: Checked<McmcRegressorParams>,
    fitted: Option<FittedRegression>,
}

fn mean_variance<L: RegressionLeafModel, T: FeatureValue>(
    f: &Fitted<L>,
    x: &[T],
    n_features: usize,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let rows = f.rows(x, n_features)?;
    // Mixture moments: E[y] = Σ w m_t, Var[y] = Σ w (v_t + m_t²) − E[y]².
    let raw = f
        .posterior
        .accumulate(&rows, 2, 0.0, |_, s: &Moments, w, out| {
            let (m, v) = f.model.predictive_mean_variance(s);
            out[0] += w * m;
            out[1] += w * (v + m * m);
        });
    Ok(raw
        .chunks(2)
        .map(|o| (o[0], (o[1] - o[0] * o[0]).max(0.0)))
        .unzip())
}

fn log_density<L: RegressionLeafModel, T: FeatureValue>(
    f: &Fitted<L>,
    x: &[T],
    n_features: usize,
    y: &[f64],
) -> Result<Vec<f64>> {
    let rows = f.rows(x, n_features)?;
    check_targets(y, rows.n_rows())?;
    Ok(f.posterior
        .accumulate(&rows, 1, f64::NEG_INFINITY, |i, s, w, out| {
            out[0] = log_add_exp(out[0], w.ln() + f.model.log_predictive(s, y[i]));
        }))
}

impl McmcTreeRegressor {
    /// An unfitted regressor; the parameters are checked here.
    pub fn new(params: McmcRegressorParams) -> Result<Self> {
        Ok(Self::with_params(params.check()?))
    }

    /// Runs the chain on row-major `x` and finite targets `y`, replacing any previous fit.
    pub fn fit<T: FeatureValue>(&mut self, x: &[T], n_features: usize, y: &[f64]) -> Result<()> {
        self.fit_with_holdout(x, n_features, y, None).map(|_| ())
    }

    /// [`fit`](Self::fit), also recording the held-out mean log p(y | x) of the running
    /// average at the iterations `at` of `test` = (x, y, at).
    pub fn fit_with_holdout<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[f64],
        test: Option<(&[T], &[f64], &[usize])>,
    ) -> Result<Vec<HoldoutPoint>> {
        let n_rows = Rows::new(x, n_features)?.n_rows();
        check_targets(y, n_rows)?;
        if let Some((xt, yt, _)) = test {
            check_targets(yt, Rows::new(xt, n_features)?.n_rows())?;
        }
        self.fitted = None;
        let p = &self.params.mcmc;
        let (fitted, points) = match &self.params.leaf {
            RegressionLeaf::Calibrated => {
                let model = NormalInverseGamma::calibrated(y);
                let (f, pts) = Fitted::fit(p, x, n_features, y, model, test)?;
                (FittedRegression::Nig(f), pts)
            }
            RegressionLeaf::NormalInverseGamma(m) => {
                let (f, pts) = Fitted::fit(p, x, n_features, y, m.clone(), test)?;
                (FittedRegression::Nig(f), pts)
            }
            RegressionLeaf::KnownVariance(m) => {
                let (f, pts) = Fitted::fit(p, x, n_features, y, m.clone(), test)?;
                (FittedRegression::Known(f), pts)
            }
        };
        self.fitted = Some(fitted);
        Ok(points)
    }

    fn fitted(&self) -> Result<&FittedRegression> {
        self.fitted.as_ref().ok_or_else(no_fit)
    }

    /// Predictive mean and variance of each row (the mixture over iterations).
    pub fn predict_mean_variance<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        match self.fitted()? {
            FittedRegression::Nig(f) => mean_variance(f, x, n_features),
            FittedRegression::Known(f) => mean_variance(f, x, n_features),
        }
    }

    /// Predictive mean of each row.
    pub fn predict<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<f64>> {
        Ok(self.predict_mean_variance(x, n_features)?.0)
    }

    /// log p(y_i | x_i) of each row under the mixture over iterations.
    pub fn log_predictive<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[f64],
    ) -> Result<Vec<f64>> {
        match self.fitted()? {
            FittedRegression::Nig(f) => log_density(f, x, n_features, y),
            FittedRegression::Known(f) => log_density(f, x, n_features, y),
        }
    }

    /// The visited trees and the trace.
    pub fn posterior(&self) -> Result<&McmcPosterior<Moments>> {
        match self.fitted()? {
            FittedRegression::Nig(f) => Ok(&f.posterior),
            FittedRegression::Known(f) => Ok(&f.posterior),
        }
    }

    /// Per-iteration records.
    pub fn trace(&self) -> Result<&McmcTrace> {
        Ok(self.posterior()?.trace())
    }
}

impl_model!(McmcTreeRegressor, McmcRegressorParams, f64);
