//! `SmcClassifierCore` and `SmcRegressorCore`: Bayesian decision trees fitted by top-down
//! SMC (spec `bayesian-trees.md` §3) for `mondrian_ml.SMCTreeClassifier` and
//! `SMCTreeRegressor`; their shared methods come from `smc_methods!`.

use std::sync::atomic::AtomicUsize;

use mondrian::bayes::{
    CgmPrior, Expansion, IslandWeighting, Proposal, RegressionLeaf, Resampler, SmcClassifierParams,
    SmcParams, SmcPosterior, SmcRegressorParams, SmcTreeClassifier, SmcTreeRegressor,
};
use mondrian::model::Model;
use mondrian::{MondrianError, Persistent};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::{class_indices, labels, py_err, with_features, Features};

fn bad(name: &'static str, value: &str, expected: &str) -> PyErr {
    py_err(MondrianError::InvalidParameter {
        name,
        reason: format!("`{value}` is not {expected}"),
    })
}

/// The constructor of an SMC core: `$smc`, the sampler's settings from the arguments (the
/// library checks the ranges), then `$params`, the model's parameters made of them and of
/// the settings only this model takes: `$mid` after `min_samples_split`, `$end` last.
macro_rules! smc_new {
    (
        $core:ident,
        $model:ident,
        [$($mid:ident: $mid_ty:ty = $mid_default:tt),*],
        [$($end:ident: $end_ty:ty = $end_default:tt),*],
        |$smc:ident| $params:expr
    ) => {
        #[pymethods]
        impl $core {
            #[new]
            #[pyo3(signature = (
                n_particles = 100, n_islands = 1, proposal = "prior",
                expansion = "breadth_first", alpha_split = 0.95, beta_split = 0.5,
                min_samples_split = None, $($mid = $mid_default,)* ess_threshold = 0.1,
                resampler = "multinomial", island_weighting = "equal", seed = 0,
                n_threads = 1, $($end = $end_default,)*
            ))]
            #[allow(clippy::too_many_arguments)]
            fn new(
                n_particles: usize,
                n_islands: usize,
                proposal: &str,
                expansion: &str,
                alpha_split: f64,
                beta_split: f64,
                min_samples_split: Option<usize>,
                $($mid: $mid_ty,)*
                ess_threshold: f64,
                resampler: &str,
                island_weighting: &str,
                seed: u64,
                n_threads: usize,
                $($end: $end_ty,)*
            ) -> PyResult<Self> {
                let $smc = SmcParams {
                    particles: n_particles,
                    islands: n_islands,
                    prior: CgmPrior {
                        alpha_s: alpha_split,
                        beta_s: beta_split,
                        min_samples: min_samples_split,
                    },
                    proposal: match proposal {
                        "prior" => Proposal::Prior,
                        "empirical" => Proposal::Empirical,
                        "optimal" => Proposal::Optimal,
                        other => {
                            return Err(bad("proposal", other, "'prior', 'empirical' or 'optimal'"))
                        }
                    },
                    expansion: match expansion {
                        "breadth_first" => Expansion::NodeBreadthFirst,
                        "min_marginal" => Expansion::NodeMinMarginal,
                        "layer_wise" => Expansion::LayerWise,
                        other => {
                            return Err(bad(
                                "expansion",
                                other,
                                "'breadth_first', 'min_marginal' or 'layer_wise'",
                            ))
                        }
                    },
                    ess_threshold,
                    resampler: match resampler {
                        "multinomial" => Resampler::Multinomial,
                        "systematic" => Resampler::Systematic,
                        other => {
                            return Err(bad("resampler", other, "'multinomial' or 'systematic'"))
                        }
                    },
                    island_weighting: match island_weighting {
                        "equal" => IslandWeighting::Equal,
                        "evidence" => IslandWeighting::Evidence,
                        other => {
                            return Err(bad("island_weighting", other, "'equal' or 'evidence'"))
                        }
                    },
                    seed,
                    n_threads,
                    ..SmcParams::default()
                };
                Ok(Self::wrap($model::new($params).map_err(py_err)?))
            }
        }
    };
}

/// The sampler's parameters under the Python constructors' names (`random_state` the
/// seed, `n_threads` as the library has it), for an estimator made around a loaded core.
fn smc_dict<'py>(py: Python<'py>, p: &SmcParams) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("n_particles", p.particles)?;
    d.set_item("n_islands", p.islands)?;
    let proposal = match p.proposal {
        Proposal::Prior => "prior",
        Proposal::Empirical => "empirical",
        Proposal::Optimal => "optimal",
    };
    d.set_item("proposal", proposal)?;
    let expansion = match p.expansion {
        Expansion::NodeBreadthFirst => "breadth_first",
        Expansion::NodeMinMarginal => "min_marginal",
        Expansion::LayerWise => "layer_wise",
    };
    d.set_item("expansion", expansion)?;
    d.set_item("alpha_split", p.prior.alpha_s)?;
    d.set_item("beta_split", p.prior.beta_s)?;
    d.set_item("min_samples_split", p.prior.min_samples)?;
    d.set_item("ess_threshold", p.ess_threshold)?;
    let resampler = match p.resampler {
        Resampler::Multinomial => "multinomial",
        Resampler::Systematic => "systematic",
    };
    d.set_item("resampler", resampler)?;
    let weighting = match p.island_weighting {
        IslandWeighting::Equal => "equal",
        IslandWeighting::Evidence => "evidence",
    };
    d.set_item("island_weighting", weighting)?;
    d.set_item("random_state", p.seed)?;
    d.set_item("n_threads", p.n_threads)?;
    Ok(d)
}

/// The weighted trees' shape as a dict: distinct trees, their effective number
/// (1/Σw²), the posterior mean of the leaves and of the depth, whether a run was cut short.
fn posterior_summary<'py, S: Send + Sync>(
    py: Python<'py>,
    p: &SmcPosterior<S>,
) -> PyResult<Bound<'py, PyDict>> {
    let trees: Vec<_> = p.trees().collect();
    let d = PyDict::new(py);
    d.set_item("n_trees", trees.len())?;
    d.set_item(
        "effective_trees",
        1.0 / trees.iter().map(|t| t.weight * t.weight).sum::<f64>(),
    )?;
    d.set_item(
        "mean_leaves",
        trees
            .iter()
            .map(|t| t.weight * t.tree.n_leaves() as f64)
            .sum::<f64>(),
    )?;
    d.set_item(
        "mean_depth",
        trees
            .iter()
            .map(|t| t.weight * t.tree.max_depth() as f64)
            .sum::<f64>(),
    )?;
    d.set_item("truncated", p.truncated())?;
    d.set_item("log_evidence", p.log_evidence())?;
    Ok(d)
}

/// Regression targets from a contiguous float64 array.
fn values(y: &PyReadonlyArray1<'_, f64>) -> PyResult<Vec<f64>> {
    let y = y.as_slice().map_err(|_: numpy::AsSliceError| {
        pyo3::exceptions::PyValueError::new_err("y must be a contiguous float64 array")
    })?;
    Ok(y.to_vec())
}

/// The methods both SMC cores share: the log predictive, the evidence, the posterior
/// summary, the parameters (`$extra` adds the model's own to the sampler's), and
/// (through `batch_methods!`) fitting, the width, files and pickling. `$target` is the
/// numpy element type of `y` and `$convert` turns it into the library's.
macro_rules! smc_methods {
    ($core:ident, $model:ty, $target:ty, $convert:ident, $extra:expr) => {
        #[pymethods]
        impl $core {
            /// log p(y_i | x_i) of each row under the posterior predictive.
            fn log_predictive<'py>(
                &self,
                py: Python<'py>,
                x: &Bound<'py, PyAny>,
                y: PyReadonlyArray1<'py, $target>,
            ) -> PyResult<Bound<'py, PyArray1<f64>>> {
                let y = $convert(&y)?;
                let out = on_rows!(self, py, x, |v, d| self.inner.log_predictive(v, d, &y))?;
                Ok(out.into_pyarray(py))
            }

            /// log Ẑ, the SMC estimate of the evidence p(Y | X).
            #[getter]
            fn log_evidence(&self) -> PyResult<f64> {
                self.inner.log_evidence().map_err(py_err)
            }

            /// The posterior's shape (see `posterior_summary`).
            fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                posterior_summary(py, self.inner.posterior().map_err(py_err)?)
            }

            /// The constructor's parameters (see `smc_dict`).
            fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                let p = self.inner.params();
                let d = smc_dict(py, &p.smc)?;
                $extra(&d, p)?;
                Ok(d)
            }
        }

        batch_methods!(
            $core,
            $model,
            $target,
            $convert,
            "Fits on a C-contiguous float64/float32 matrix and its targets (int64 class \
             indices or float64 values), with the GIL released."
        );
    };
}

model_core!(
    /// The Rust SMC tree classifier. Labels are class indices `0..K`; the Python class maps
    /// user labels to indices.
    SmcClassifierCore(SmcTreeClassifier)
);

smc_new!(
    SmcClassifierCore,
    SmcTreeClassifier,
    [alpha: f64 = 5.0],
    [n_classes: Option<usize> = None],
    |smc| SmcClassifierParams {
        smc,
        alpha,
        n_classes,
    }
);

#[pymethods]
impl SmcClassifierCore {
    /// Posterior predictive class probabilities, `n_rows × K`.
    fn predict_proba<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let (p, n) = on_rows!(counted self, py, x, |v, d| self.inner.predict_proba(v, d))?;
        let k = self.inner.n_classes().unwrap_or(1);
        p.into_pyarray(py).reshape([n, k])
    }

    /// The most probable class index of each row.
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let out = on_rows!(self, py, x, |v, d| self.inner.predict(v, d))?;
        Ok(class_indices(py, out))
    }

    /// K, once fitted.
    #[getter]
    fn n_classes(&self) -> Option<usize> {
        self.inner.n_classes()
    }
}

smc_methods!(
    SmcClassifierCore,
    SmcTreeClassifier,
    i64,
    labels,
    |d: &Bound<'_, PyDict>, p: &SmcClassifierParams| -> PyResult<()> {
        d.set_item("alpha", p.alpha)?;
        d.set_item("n_classes", p.n_classes)
    }
);

/// Predictive means and variances.
type MeanVariance<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>);

model_core!(
    /// The Rust SMC regression tree, with Normal–inverse-gamma leaves calibrated from the
    /// training targets.
    SmcRegressorCore(SmcTreeRegressor)
);

smc_new!(SmcRegressorCore, SmcTreeRegressor, [], [], |smc| {
    SmcRegressorParams {
        smc,
        leaf: RegressionLeaf::Calibrated,
    }
});

#[pymethods]
impl SmcRegressorCore {
    /// Posterior predictive means and variances (the weighted mixture of the particles').
    fn predict_mean_variance<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<MeanVariance<'py>> {
        let (m, v) = on_rows!(self, py, x, |v, d| self.inner.predict_mean_variance(v, d))?;
        Ok((m.into_pyarray(py), v.into_pyarray(py)))
    }
}

smc_methods!(
    SmcRegressorCore,
    SmcTreeRegressor,
    f64,
    values,
    |_: &Bound<'_, PyDict>, _: &SmcRegressorParams| -> PyResult<()> { Ok(()) }
);
