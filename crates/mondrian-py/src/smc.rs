//! `SmcClassifierCore` and `SmcRegressorCore`: Bayesian decision trees fitted by top-down
//! SMC (spec `bayesian-trees.md` §3) for `mondrian_ml.SMCTreeClassifier` and
//! `SMCTreeRegressor`; their shared methods come from `smc_methods!`.

use std::sync::atomic::AtomicUsize;

use mondrian::bayes::{
    CgmPrior, Expansion, IslandWeighting, Proposal, RegressionLeaf, Resampler, SmcClassifierParams,
    SmcParams, SmcPosterior, SmcRegressorParams, SmcTreeClassifier, SmcTreeRegressor,
};
use mondrian::{MondrianError, Persistent};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::{labels, py_err, with_features, Features};

fn bad(name: &'static str, value: &str, expected: &str) -> PyErr {
    py_err(MondrianError::InvalidParameter {
        name,
        reason: format!("`{value}` is not {expected}"),
    })
}

/// The sampler's settings from the constructors' arguments; the library checks the ranges.
#[allow(clippy::too_many_arguments)]
fn smc_params(
    n_particles: usize,
    n_islands: usize,
    proposal: &str,
    expansion: &str,
    alpha_split: f64,
    beta_split: f64,
    min_samples_split: Option<usize>,
    ess_threshold: f64,
    resampler: &str,
    island_weighting: &str,
    seed: u64,
    n_threads: usize,
) -> PyResult<SmcParams> {
    Ok(SmcParams {
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
            other => return Err(bad("proposal", other, "'prior', 'empirical' or 'optimal'")),
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
            other => return Err(bad("resampler", other, "'multinomial' or 'systematic'")),
        },
        island_weighting: match island_weighting {
            "equal" => IslandWeighting::Equal,
            "evidence" => IslandWeighting::Evidence,
            other => return Err(bad("island_weighting", other, "'equal' or 'evidence'")),
        },
        seed,
        n_threads,
        ..SmcParams::default()
    })
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

/// The methods both SMC cores share: `wrap`, fitting, the log predictive, the evidence,
/// the width, the posterior summary, and (through `file_methods!`) files and pickling.
/// `$target` is the numpy element type of `y` and `$convert` turns it into the library's.
macro_rules! smc_methods {
    ($core:ident, $model:ty, $target:ty, $convert:ident) => {
        impl $core {
            pub(crate) fn wrap(inner: $model) -> Self {
                $core {
                    inner,
                    last_input_address: AtomicUsize::new(0),
                }
            }
        }

        #[pymethods]
        impl $core {
            /// Fits on a C-contiguous float64/float32 matrix and its targets (int64 class
            /// indices or float64 values), with the GIL released.
            fn fit(
                &mut self,
                py: Python<'_>,
                x: &Bound<'_, PyAny>,
                y: PyReadonlyArray1<'_, $target>,
            ) -> PyResult<()> {
                let y = $convert(&y)?;
                let model = &mut self.inner;
                with_features(x, &self.last_input_address, |f, _, d| {
                    each_precision!(f, v => py.detach(|| model.fit(v, d, &y))).map_err(py_err)
                })
            }

            /// log p(y_i | x_i) of each row under the posterior predictive.
            fn log_predictive<'py>(
                &self,
                py: Python<'py>,
                x: &Bound<'py, PyAny>,
                y: PyReadonlyArray1<'py, $target>,
            ) -> PyResult<Bound<'py, PyArray1<f64>>> {
                let y = $convert(&y)?;
                let model = &self.inner;
                let out = with_features(x, &self.last_input_address, |f, _, d| {
                    each_precision!(f, v => py.detach(|| model.log_predictive(v, d, &y)))
                        .map_err(py_err)
                })?;
                Ok(out.into_pyarray(py))
            }

            /// log Ẑ, the SMC estimate of the evidence p(Y | X).
            #[getter]
            fn log_evidence(&self) -> PyResult<f64> {
                self.inner.log_evidence().map_err(py_err)
            }

            /// Width of the rows, once fitted.
            #[getter]
            fn n_features(&self) -> Option<usize> {
                self.inner.n_features()
            }

            /// The posterior's shape (see `posterior_summary`).
            fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                posterior_summary(py, self.inner.posterior().map_err(py_err)?)
            }
        }

        file_methods!($core, $model);
    };
}

/// The Rust SMC tree classifier. Labels are class indices `0..K`; the Python class maps
/// user labels to indices.
#[pyclass(module = "mondrian_ml._core")]
pub(crate) struct SmcClassifierCore {
    inner: SmcTreeClassifier,
    last_input_address: AtomicUsize,
}

#[pymethods]
impl SmcClassifierCore {
    #[new]
    #[pyo3(signature = (
        n_particles = 100, n_islands = 1, proposal = "prior", expansion = "breadth_first",
        alpha_split = 0.95, beta_split = 0.5, min_samples_split = None, alpha = 5.0,
        ess_threshold = 0.1, resampler = "multinomial", island_weighting = "equal", seed = 0,
        n_threads = 1, n_classes = None,
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
        alpha: f64,
        ess_threshold: f64,
        resampler: &str,
        island_weighting: &str,
        seed: u64,
        n_threads: usize,
        n_classes: Option<usize>,
    ) -> PyResult<Self> {
        let smc = smc_params(
            n_particles,
            n_islands,
            proposal,
            expansion,
            alpha_split,
            beta_split,
            min_samples_split,
            ess_threshold,
            resampler,
            island_weighting,
            seed,
            n_threads,
        )?;
        let params = SmcClassifierParams {
            smc,
            alpha,
            n_classes,
        };
        Ok(Self::wrap(SmcTreeClassifier::new(params).map_err(py_err)?))
    }

    /// Posterior predictive class probabilities, `n_rows × K`.
    fn predict_proba<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let model = &self.inner;
        let (p, n) = with_features(x, &self.last_input_address, |f, n, d| {
            let p = each_precision!(f, v => py.detach(|| model.predict_proba(v, d)));
            Ok((p.map_err(py_err)?, n))
        })?;
        let k = self.inner.n_classes().unwrap_or(1);
        p.into_pyarray(py).reshape([n, k])
    }

    /// The most probable class index of each row.
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let model = &self.inner;
        let out = with_features(x, &self.last_input_address, |f, _, d| {
            each_precision!(f, v => py.detach(|| model.predict(v, d))).map_err(py_err)
        })?;
        let out: Vec<i64> = out.into_iter().map(|c| c as i64).collect();
        Ok(out.into_pyarray(py))
    }

    /// K, once fitted.
    #[getter]
    fn n_classes(&self) -> Option<usize> {
        self.inner.n_classes()
    }
}

smc_methods!(SmcClassifierCore, SmcTreeClassifier, i64, labels);

/// Predictive means and variances.
type MeanVariance<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>);

/// The Rust SMC regression tree, with Normal–inverse-gamma leaves calibrated from the
/// training targets.
#[pyclass(module = "mondrian_ml._core")]
pub(crate) struct SmcRegressorCore {
    inner: SmcTreeRegressor,
    last_input_address: AtomicUsize,
}

#[pymethods]
impl SmcRegressorCore {
    #[new]
    #[pyo3(signature = (
        n_particles = 100, n_islands = 1, proposal = "prior", expansion = "breadth_first",
        alpha_split = 0.95, beta_split = 0.5, min_samples_split = None, ess_threshold = 0.1,
        resampler = "multinomial", island_weighting = "equal", seed = 0, n_threads = 1,
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
        ess_threshold: f64,
        resampler: &str,
        island_weighting: &str,
        seed: u64,
        n_threads: usize,
    ) -> PyResult<Self> {
        let smc = smc_params(
            n_particles,
            n_islands,
            proposal,
            expansion,
            alpha_split,
            beta_split,
            min_samples_split,
            ess_threshold,
            resampler,
            island_weighting,
            seed,
            n_threads,
        )?;
        let params = SmcRegressorParams {
            smc,
            leaf: RegressionLeaf::Calibrated,
        };
        Ok(Self::wrap(SmcTreeRegressor::new(params).map_err(py_err)?))
    }

    /// Posterior predictive means and variances (the weighted mixture of the particles').
    fn predict_mean_variance<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<MeanVariance<'py>> {
        let model = &self.inner;
        let (m, v) = with_features(x, &self.last_input_address, |f, _, d| {
            each_precision!(f, v => py.detach(|| model.predict_mean_variance(v, d))).map_err(py_err)
        })?;
        Ok((m.into_pyarray(py), v.into_pyarray(py)))
    }
}

smc_methods!(SmcRegressorCore, SmcTreeRegressor, f64, values);
