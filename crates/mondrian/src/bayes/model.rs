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
    RegressionLeafModel,
};
use super::shared::{check_labels, check_targets, no_fit};
use super::smc::{SmcParams, SmcPosterior};
use super::tree::Features;
use crate::data::{FeatureValue, Rows};
use crate::error::{MondrianError, Result};
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

    /// For each row, `init` then `add(row index, leaf statistics, weight, out)` over the
    /// weighted trees, into `width` outputs per row.
    fn accumulate<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        width: usize,
        init: f64,
        add: impl Fn(usize, &L::Stats, f64, &mut [f64]) + Sync,
    ) -> Result<Vec<f64>> {
        let rows = Rows::new(x, n_features)?;
        rows.validate(Some(self.n_features))?;
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
        Ok(out)
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
            alpha: 5.0,
            n_classes: None,
        }
    }
}

impl Params for SmcClassifierParams {
    fn validate(&self) -> Result<()> {
        self.smc.validate()?;
        DirichletMultinomial::new(self.alpha, self.n_classes.unwrap_or(1)).map(|_| ())
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
        if y.len() != n_rows {
            return Err(MondrianError::LengthMismatch {
                n_rows,
                n_labels: y.len(),
            });
        }
        let n_classes = match self.params.n_classes {
            Some(k) => {
                if let Some(row) = y.iter().position(|&l| l >= k) {
                    return Err(MondrianError::LabelOutOfRange {
                        row,
                        label: y[row],
                        n_classes: k,
                    });
                }
                k
            }
            None => {
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
        let model = DirichletMultinomial::new(self.params.alpha, n_classes)?;
        self.fitted = None;
        self.fitted = Some(Fitted::fit(&self.params.smc, x, n_features, y, model)?);
        Ok(())
    }

    /// Posterior predictive class probabilities, K per row (row-major):
    /// p(y = k | x) = Σ_c w̄_c (c_{leaf_c(x),k} + α/K)/(n_{leaf_c(x)} + α).
    pub fn predict_proba<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<f64>> {
        let f = self.fitted.as_ref().ok_or_else(no_fit)?;
        let k = f.model.n_classes();
        f.accumulate(x, n_features, k, 0.0, |_, s, w, out| {
            f.model.add_probabilities(s, w, out)
        })
    }

    /// The most probable class of each row (the lowest index on ties).
    pub fn predict<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<usize>> {
        let p = self.predict_proba(x, n_features)?;
        let k = self.n_classes().ok_or_else(no_fit)?;
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

    /// log p(y_i | x_i) of each row under the posterior predictive (the "test log p(y|x)"
    /// of §3.8 is their mean, A7).
    pub fn log_predictive<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[usize],
    ) -> Result<Vec<f64>> {
        let k = self.n_classes().ok_or_else(no_fit)?;
        let p = self.predict_proba(x, n_features)?;
        check_labels(y, p.len() / k, k)?;
        Ok(y.iter()
            .enumerate()
            .map(|(i, &l)| p[i * k + l].ln())
            .collect())
    }

    /// log Ẑ, the SMC estimate of the evidence p(Y | X).
    pub fn log_evidence(&self) -> Result<f64> {
        Ok(self.posterior()?.log_evidence())
    }

    /// The weighted trees.
    pub fn posterior(&self) -> Result<&SmcPosterior<ClassCounts>> {
        Ok(&self.fitted.as_ref().ok_or_else(no_fit)?.posterior)
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
        match &self.leaf {
            RegressionLeaf::Calibrated => Ok(()),
            RegressionLeaf::NormalInverseGamma(m) => m.validate(),
            RegressionLeaf::KnownVariance(m) => m.validate(),
        }
    }
}

#[derive(Debug, Clone)]
pub(super) enum FittedRegression {
    Nig(Fitted<NormalInverseGamma>),
    Known(Fitted<NormalKnownVariance>),
}

/// A Bayesian regression tree fitted by top-down SMC (§3 with the leaves of §2.1).
#[derive(Debug, Clone)]
pub struct SmcTreeRegressor {
    pub(super) params: Checked<SmcRegressorParams>,
    pub(super) fitted: Option<FittedRegression>,
}

fn mean_variance<L: RegressionLeafModel, T: FeatureValue>(
    f: &Fitted<L>,
    x: &[T],
    n_features: usize,
) -> Result<(Vec<f64>, Vec<f64>)> {
    // Mixture moments: E[y] = Σ w m_c, Var[y] = Σ w (v_c + m_c²) − E[y]².
    let raw = f.accumulate(x, n_features, 2, 0.0, |_, s: &Moments, w, out| {
        let (m, v) = f.model.predictive_mean_variance(s);
        out[0] += w * m;
        out[1] += w * (v + m * m);
    })?;
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
    let n_rows = Rows::new(x, n_features)?.n_rows();
    check_targets(y, n_rows)?;
    f.accumulate(x, n_features, 1, f64::NEG_INFINITY, |i, s, w, out| {
        out[0] = super::special::log_add_exp(out[0], w.ln() + f.model.log_predictive(s, y[i]));
    })
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
        self.fitted = Some(match &self.params.leaf {
            RegressionLeaf::Calibrated => FittedRegression::Nig(Fitted::fit(
                smc,
                x,
                n_features,
                y,
                NormalInverseGamma::calibrated(y),
            )?),
            RegressionLeaf::NormalInverseGamma(m) => {
                FittedRegression::Nig(Fitted::fit(smc, x, n_features, y, m.clone())?)
            }
            RegressionLeaf::KnownVariance(m) => {
                FittedRegression::Known(Fitted::fit(smc, x, n_features, y, m.clone())?)
            }
        });
        Ok(())
    }

    /// Posterior predictive mean and variance of each row (the weighted particle mixture).
    pub fn predict_mean_variance<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        match self.fitted.as_ref().ok_or_else(no_fit)? {
            FittedRegression::Nig(f) => mean_variance(f, x, n_features),
            FittedRegression::Known(f) => mean_variance(f, x, n_features),
        }
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
        match self.fitted.as_ref().ok_or_else(no_fit)? {
            FittedRegression::Nig(f) => log_density(f, x, n_features, y),
            FittedRegression::Known(f) => log_density(f, x, n_features, y),
        }
    }

    /// log Ẑ, the SMC estimate of the evidence p(Y | X).
    pub fn log_evidence(&self) -> Result<f64> {
        Ok(self.posterior()?.log_evidence())
    }

    /// The weighted trees.
    pub fn posterior(&self) -> Result<&SmcPosterior<Moments>> {
        match self.fitted.as_ref().ok_or_else(no_fit)? {
            FittedRegression::Nig(f) => Ok(&f.posterior),
            FittedRegression::Known(f) => Ok(&f.posterior),
        }
    }

    /// The width of the training rows, once fitted.
    pub fn n_features(&self) -> Option<usize> {
        match self.fitted.as_ref()? {
            FittedRegression::Nig(f) => Some(f.n_features),
            FittedRegression::Known(f) => Some(f.n_features),
        }
    }
}

impl_model!(SmcTreeRegressor, SmcRegressorParams, f64);
