//! Fit and predict with SMC decision trees (spec `bayesian-trees.md` §3.8): the posterior
//! predictive is the weighted average over the final particles of each particle's leaf
//! predictive at leaf(x).
//!
//! ```
//! use mondrian::bayes::{SmcClassifierParams, SmcParams, SmcTreeClassifier};
//! let params = SmcClassifierParams {
//!     smc: SmcParams { particles: 50, seed: 7, ..Default::default() },
//!     ..Default::default()
//! };
//! let mut model = SmcTreeClassifier::new(params)?;
//! let x = [0.1, 0.2, 0.3, 0.7, 0.8, 0.9];
//! model.fit(&x, 1, &[0, 0, 0, 1, 1, 1])?;
//! let p = model.predict_proba(&[0.15, 0.85], 1)?; // rows of K = 2 probabilities
//! assert!(p[0] > 0.5 && p[3] > 0.5);
//! assert!(model.log_evidence()?.is_finite());
//! # Ok::<(), mondrian::MondrianError>(())
//! ```

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::likelihood::{
    ClassCounts, DirichletMultinomial, LeafModel, Moments, NormalInverseGamma, NormalKnownVariance,
};
use super::shared::{
    check_targets, class_leaves, class_log_predictive, class_probabilities, no_fit,
    predict_classes, validate_class_leaves, ByLeaf, TreeMixture, DEFAULT_ALPHA,
};
use super::smc::{SmcParams, SmcPosterior};
use super::tree::Features;
use crate::data::{FeatureValue, Rows};
use crate::error::Result;
use crate::model::{Checked, Model, Params};

/// Most classes inferred from the labels when `n_classes` is not given.
pub const MAX_INFERRED_CLASSES: usize = 1 << 16;

/// Rows per block of parallel prediction.
const PREDICTION_BLOCK: usize = 64;

/// A fitted posterior with its leaf model.
#[derive(Debug, Clone)]
pub(super) struct Fitted<L: LeafModel> {
    pub(super) model: L,
    pub(super) n_features: usize,
    /// Predict on the caller's thread (`n_threads == 1`).
    pub(super) serial: bool,
    pub(super) posterior: SmcPosterior<L::Stats>,
}

impl<L: LeafModel> Fitted<L> {
    /// `params` were checked with the model's parameters.
    fn fit<T: FeatureValue>(
        params: &SmcParams,
        x: &[T],
        n_features: usize,
        targets: &[L::Target],
        model: L,
    ) -> Result<Self> {
        let features = Features::new(x, n_features)?;
        let posterior = SmcPosterior::sample_checked(params, &features, targets, &model)?;
        Ok(Fitted {
            model,
            n_features,
            serial: params.n_threads == 1,
            posterior,
        })
    }
}

impl<L: LeafModel> TreeMixture for Fitted<L> {
    type Leaf = L;
    type Posterior = SmcPosterior<L::Stats>;

    fn leaf_model(&self) -> &L {
        &self.model
    }

    fn n_features(&self) -> usize {
        self.n_features
    }

    fn posterior(&self) -> &Self::Posterior {
        &self.posterior
    }

    /// The weights are the particles' normalised weights w̄_c.
    fn accumulate<T: FeatureValue>(
        &self,
        rows: &Rows<'_, T>,
        width: usize,
        init: f64,
        add: impl Fn(usize, &L::Stats, f64, &mut [f64]) + Sync,
    ) -> Vec<f64> {
        let mut out = vec![init; rows.n_rows() * width];
        let trees: Vec<_> = self.posterior.trees().collect();
        // Trees outer, the block's rows inner: a tree's nodes stay in cache for the whole
        // block. Each row still takes the trees in order, so the sums are the same bits.
        let block = |(b, chunk): (usize, &mut [f64])| {
            for t in &trees {
                for (k, o) in chunk.chunks_mut(width).enumerate() {
                    let i = b * PREDICTION_BLOCK + k;
                    let leaf = &t.tree.nodes()[t.tree.leaf_of(rows.row(i))];
                    add(i, leaf.stats(), t.weight, o);
                }
            }
        };
        let chunks = PREDICTION_BLOCK * width;
        if self.serial {
            out.chunks_mut(chunks).enumerate().for_each(block);
        } else {
            out.par_chunks_mut(chunks).enumerate().for_each(block);
        }
        out
    }
}

// ---------------------------------------------------------------------------------------
// Classification
// ---------------------------------------------------------------------------------------

/// Settings of [`SmcTreeClassifier`]: the sampler and the Dirichlet–multinomial leaves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SmcClassifierParams {
    /// The particle system and the tree prior.
    pub smc: SmcParams,
    /// α: the Dirichlet's total concentration, α/K per class (§3.10 default 5).
    pub alpha: f64,
    /// K; `None` takes the largest training label + 1.
    pub n_classes: Option<usize>,
}

impl Default for SmcClassifierParams {
    fn default() -> Self {
        SmcClassifierParams {
            smc: SmcParams::default(),
            alpha: DEFAULT_ALPHA,
            n_classes: None,
        }
    }
}

impl Params for SmcClassifierParams {
    fn validate(&self) -> Result<()> {
        self.smc.validate()?;
        validate_class_leaves(self.alpha, self.n_classes)
    }
}

/// A Bayesian decision-tree classifier fitted by top-down SMC (§3): a weighted set of
/// trees approximating p(T | Y, X) under the CGM prior and Dirichlet–multinomial leaves.
#[derive(Debug, Clone)]
pub struct SmcTreeClassifier {
    pub(super) params: Checked<SmcClassifierParams>,
    pub(super) fitted: Option<Fitted<DirichletMultinomial>>,
}

impl SmcTreeClassifier {
    /// An unfitted classifier; the parameters are checked here.
    pub fn new(params: SmcClassifierParams) -> Result<Self> {
        Ok(Self::with_params(params.check()?))
    }

    /// Fits to row-major `x` (`n_features` columns) and labels 0..K, replacing any
    /// previous fit.
    pub fn fit<T: FeatureValue>(&mut self, x: &[T], n_features: usize, y: &[usize]) -> Result<()> {
        let n_rows = Rows::new(x, n_features)?.n_rows();
        let p = &self.params;
        let model = class_leaves(p.alpha, p.n_classes, y, n_rows)?;
        self.fitted = None;
        self.fitted = Some(Fitted::fit(&p.smc, x, n_features, y, model)?);
        Ok(())
    }

    fn fitted(&self) -> Result<&Fitted<DirichletMultinomial>> {
        self.fitted.as_ref().ok_or_else(no_fit)
    }

    /// Posterior predictive class probabilities, K per row (row-major):
    /// p(y = k | x) = Σ_c w̄_c (c_{leaf_c(x),k} + α/K)/(n_{leaf_c(x)} + α).
    pub fn predict_proba<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<f64>> {
        class_probabilities(self.fitted()?, x, n_features)
    }

    /// The most probable class of each row (the lowest index on ties).
    pub fn predict<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<usize>> {
        predict_classes(self.fitted()?, x, n_features)
    }

    /// log p(y_i | x_i) of each row under the posterior predictive (the "test log p(y|x)"
    /// of §3.8 is their mean, A7).
    pub fn log_predictive<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[usize],
    ) -> Result<Vec<f64>> {
        class_log_predictive(self.fitted()?, x, n_features, y)
    }

    /// log Ẑ, the SMC estimate of the evidence p(Y | X).
    pub fn log_evidence(&self) -> Result<f64> {
        Ok(self.posterior()?.log_evidence())
    }

    /// The weighted trees.
    pub fn posterior(&self) -> Result<&SmcPosterior<ClassCounts>> {
        Ok(&self.fitted()?.posterior)
    }

    /// K, once fitted.
    pub fn n_classes(&self) -> Option<usize> {
        self.fitted.as_ref().map(|f| f.model.n_classes())
    }

    /// The width of the training rows, once fitted.
    pub fn n_features(&self) -> Option<usize> {
        self.fitted.as_ref().map(|f| f.n_features)
    }
}

impl_model!(SmcTreeClassifier, SmcClassifierParams, usize);

// ---------------------------------------------------------------------------------------
// Regression
// ---------------------------------------------------------------------------------------

/// The leaf model of [`SmcTreeRegressor`] (§2.1).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub enum RegressionLeaf {
    /// Normal–inverse-gamma leaves with the hyper-parameters of
    /// [`NormalInverseGamma::calibrated`] from the training targets (§2.1 R2 [REC]).
    #[default]
    Calibrated,
    /// Normal–inverse-gamma leaves with given hyper-parameters.
    NormalInverseGamma(NormalInverseGamma),
    /// Normal leaves with a known noise variance (R1).
    KnownVariance(NormalKnownVariance),
}

/// Settings of [`SmcTreeRegressor`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SmcRegressorParams {
    /// The particle system and the tree prior.
    pub smc: SmcParams,
    /// The leaf model.
    pub leaf: RegressionLeaf,
}

impl Params for SmcRegressorParams {
    fn validate(&self) -> Result<()> {
        self.smc.validate()?;
        self.leaf.validate()
    }
}

/// A fit under the leaf model [`SmcRegressorParams::leaf`] names.
pub(super) type FittedRegression = ByLeaf<Fitted<NormalInverseGamma>, Fitted<NormalKnownVariance>>;

/// A Bayesian regression tree fitted by top-down SMC (§3 with the leaves of §2.1).
#[derive(Debug, Clone)]
pub struct SmcTreeRegressor {
    pub(super) params: Checked<SmcRegressorParams>,
    pub(super) fitted: Option<FittedRegression>,
}

impl SmcTreeRegressor {
    /// An unfitted regressor; the parameters are checked here.
    pub fn new(params: SmcRegressorParams) -> Result<Self> {
        Ok(Self::with_params(params.check()?))
    }

    /// Fits to row-major `x` and finite targets `y`, replacing any previous fit.
    pub fn fit<T: FeatureValue>(&mut self, x: &[T], n_features: usize, y: &[f64]) -> Result<()> {
        let n_rows = Rows::new(x, n_features)?.n_rows();
        check_targets(y, n_rows)?;
        self.fitted = None;
        let smc = &self.params.smc;
        self.fitted = Some(match self.params.leaf.model(y) {
            ByLeaf::Nig(m) => ByLeaf::Nig(Fitted::fit(smc, x, n_features, y, m)?),
            ByLeaf::Known(m) => ByLeaf::Known(Fitted::fit(smc, x, n_features, y, m)?),
        });
        Ok(())
    }

    fn fitted(&self) -> Result<&FittedRegression> {
        self.fitted.as_ref().ok_or_else(no_fit)
    }

    /// Posterior predictive mean and variance of each row (the weighted particle mixture).
    pub fn predict_mean_variance<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        self.fitted()?.mean_variance(x, n_features)
    }

    /// Posterior predictive mean of each row.
    pub fn predict<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<f64>> {
        Ok(self.predict_mean_variance(x, n_features)?.0)
    }

    /// log p(y_i | x_i) of each row under the posterior predictive mixture.
    pub fn log_predictive<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[f64],
    ) -> Result<Vec<f64>> {
        self.fitted()?.log_predictive(x, n_features, y)
    }

    /// log Ẑ, the SMC estimate of the evidence p(Y | X).
    pub fn log_evidence(&self) -> Result<f64> {
        Ok(self.posterior()?.log_evidence())
    }

    /// The weighted trees.
    pub fn posterior(&self) -> Result<&SmcPosterior<Moments>> {
        Ok(self.fitted()?.posterior())
    }

    /// The width of the training rows, once fitted.
    pub fn n_features(&self) -> Option<usize> {
        self.fitted.as_ref().map(|f| f.n_features())
    }
}

impl_model!(SmcTreeRegressor, SmcRegressorParams, f64);
