//! The single-tree MCMC models: [`McmcTreeClassifier`] and [`McmcTreeRegressor`] on the
//! chain of the parent module.

use serde::{Deserialize, Serialize};

use super::{Fitted, HoldoutPoint, McmcParams, McmcPosterior, McmcTrace};
use crate::bayes::likelihood::{
    ClassCounts, DirichletMultinomial, LeafModel, Moments, NormalInverseGamma, NormalKnownVariance,
};
use crate::bayes::model::RegressionLeaf;
use crate::bayes::shared::{
    check_labels, check_targets, class_leaves, class_log_predictive, class_probabilities, no_fit,
    predict_classes, validate_class_leaves, ByLeaf, TreeMixture, DEFAULT_ALPHA,
};
use crate::data::{FeatureValue, Rows};
use crate::error::Result;
use crate::model::{Checked, Model, Params};

impl<M: LeafModel> TreeMixture for Fitted<M> {
    type Leaf = M;
    type Posterior = McmcPosterior<M::Stats>;

    fn leaf_model(&self) -> &M {
        &self.model
    }

    fn n_features(&self) -> usize {
        self.n_features
    }

    fn posterior(&self) -> &Self::Posterior {
        &self.posterior
    }

    /// The weight of a visited tree is its share of the iterations.
    fn accumulate<T: FeatureValue>(
        &self,
        rows: &Rows<'_, T>,
        width: usize,
        init: f64,
        add: impl Fn(usize, &M::Stats, f64, &mut [f64]) + Sync,
    ) -> Vec<f64> {
        self.posterior.accumulate(rows, width, init, add)
    }
}

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
            alpha: DEFAULT_ALPHA,
            n_classes: None,
        }
    }
}

impl Params for McmcClassifierParams {
    fn validate(&self) -> Result<()> {
        self.mcmc.validate()?;
        validate_class_leaves(self.alpha, self.n_classes)
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
        let model = class_leaves(self.params.alpha, self.params.n_classes, y, n_rows)?;
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
        class_probabilities(self.fitted()?, x, n_features)
    }

    /// The most probable class of each row (the lowest index on ties).
    pub fn predict<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<usize>> {
        predict_classes(self.fitted()?, x, n_features)
    }

    /// log p(y_i | x_i) of each row under the averaged predictive.
    pub fn log_predictive<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[usize],
    ) -> Result<Vec<f64>> {
        class_log_predictive(self.fitted()?, x, n_features, y)
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
        self.leaf.validate()
    }
}

/// A chain run under the leaf model [`McmcRegressorParams::leaf`] names.
type FittedRegression = ByLeaf<Fitted<NormalInverseGamma>, Fitted<NormalKnownVariance>>;

/// A Bayesian regression tree sampled by CGM MCMC (§3.11 with the leaves of §2.1).
#[derive(Debug, Clone)]
pub struct McmcTreeRegressor {
    params: Checked<McmcRegressorParams>,
    fitted: Option<FittedRegression>,
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
        let (fitted, points) = match self.params.leaf.model(y) {
            ByLeaf::Nig(m) => {
                let (f, pts) = Fitted::fit(p, x, n_features, y, m, test)?;
                (ByLeaf::Nig(f), pts)
            }
            ByLeaf::Known(m) => {
                let (f, pts) = Fitted::fit(p, x, n_features, y, m, test)?;
                (ByLeaf::Known(f), pts)
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
        self.fitted()?.mean_variance(x, n_features)
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
        self.fitted()?.log_predictive(x, n_features, y)
    }

    /// The visited trees and the trace.
    pub fn posterior(&self) -> Result<&McmcPosterior<Moments>> {
        Ok(self.fitted()?.posterior())
    }

    /// Per-iteration records.
    pub fn trace(&self) -> Result<&McmcTrace> {
        Ok(self.posterior()?.trace())
    }
}

impl_model!(McmcTreeRegressor, McmcRegressorParams, f64);
