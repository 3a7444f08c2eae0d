//! `BartRegressorCore` and `BartClassifierCore`: BART, sums of Bayesian trees sampled by
//! backfitting MCMC (spec `bayesian-trees.md` §4), for `mondrian_ml.BARTRegressor` and
//! `BARTClassifier`; their shared methods come from `bart_methods!`, files and pickling
//! from `file_methods!`.

use std::sync::atomic::AtomicUsize;

use mondrian::bayes::bart::Traces;
use mondrian::bayes::{BartClassifier, BartParams, BartRegressor, CgmPrior, PgInit, TreeSampler};
use mondrian::model::Model;
use mondrian::{MondrianError, Persistent};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::{labels, py_err, targets, with_features, Features, Loaded};

/// The chain's settings from the constructors' arguments; the library checks the ranges.
#[allow(clippy::too_many_arguments)]
fn bart_params(
    n_trees: usize,
    sampler: &str,
    n_particles: usize,
    n_iter: usize,
    burn_in: usize,
    alpha_s: f64,
    beta_s: f64,
    k: f64,
    nu: f64,
    q: f64,
    seed: u64,
    n_threads: usize,
) -> PyResult<BartParams> {
    let sampler = match sampler {
        "pg" => TreeSampler::ParticleGibbs {
            particles: n_particles,
            max_stages: 5000,
            init: PgInit::Empty,
        },
        "cgm" => TreeSampler::cgm(),
        "growprune" => TreeSampler::GrowPrune,
        other => {
            return Err(py_err(MondrianError::InvalidParameter {
                name: "sampler",
                reason: format!("`{other}` is not 'pg', 'cgm' or 'growprune'"),
            }))
        }
    };
    Ok(BartParams {
        n_trees,
        k,
        nu,
        q,
        prior: CgmPrior {
            alpha_s,
            beta_s,
            min_samples: None,
        },
        sampler,
        n_iter,
        burn_in,
        seed,
        n_threads,
        ..BartParams::default()
    })
}

/// The parameters as the Python constructors spell them (`random_state` the seed,
/// `n_threads` for `n_jobs`; the classifier, `probit`, has no ν or q). A sampler setting
/// Python does not offer (CGM move probabilities, an SMC start for PG) shows as its
/// family.
fn params_dict<'py>(py: Python<'py>, p: &BartParams, probit: bool) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let (sampler, particles) = match p.sampler {
        TreeSampler::ParticleGibbs { particles, .. } => ("pg", particles),
        TreeSampler::Cgm(_) => ("cgm", 10),
        TreeSampler::GrowPrune => ("growprune", 10),
    };
    d.set_item("n_trees", p.n_trees)?;
    d.set_item("sampler", sampler)?;
    d.set_item("n_particles", particles)?;
    d.set_item("n_iter", p.n_iter)?;
    d.set_item("burn_in", p.burn_in)?;
    d.set_item("alpha_s", p.prior.alpha_s)?;
    d.set_item("beta_s", p.prior.beta_s)?;
    d.set_item("k", p.k)?;
    if !probit {
        d.set_item("nu", p.nu)?;
        d.set_item("q", p.q)?;
    }
    d.set_item("random_state", p.seed)?;
    d.set_item("n_threads", p.n_threads)?;
    Ok(d)
}

/// The traces as a dict of arrays (one entry per iteration, burn-in included), with
/// `burn_in` and the ESS and ESS/s of the post-burn-in log-likelihood.
fn traces_dict<'py>(py: Python<'py>, t: &Traces) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("log_likelihood", t.log_likelihood.clone().into_pyarray(py))?;
    d.set_item("sigma2", t.sigma2.clone().into_pyarray(py))?;
    d.set_item("mean_leaves", t.mean_leaves.clone().into_pyarray(py))?;
    let total: Vec<i64> = t.total_leaves.iter().map(|&v| v as i64).collect();
    d.set_item("total_leaves", total.into_pyarray(py))?;
    d.set_item("train_mse", t.train_mse.clone().into_pyarray(py))?;
    d.set_item("move_rate", t.move_rate.clone().into_pyarray(py))?;
    d.set_item("seconds", t.seconds.clone().into_pyarray(py))?;
    d.set_item("burn_in", t.burn_in)?;
    d.set_item("ess", t.ess_log_likelihood())?;
    d.set_item("ess_per_second", t.ess_per_second_log_likelihood())?;
    Ok(d)
}

/// The methods both BART cores share: `wrap`, fitting, the posterior draws, the traces,
/// the width, the parameters, and (through `file_methods!`) files and pickling. `$target`
/// is the numpy element type of `y`, `$convert` turns it into the library's, and `$probit`
/// says whether the model is the classifier.
macro_rules! bart_methods {
    ($core:ident, $model:ty, $target:ty, $convert:ident, $probit:expr) => {
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
            /// Runs the chain on a C-contiguous float64/float32 matrix and its targets
            /// (int64 class indices or float64 values), with the GIL released.
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

            /// f_s(x) of every kept draw s and row, `n_draws × n_rows`.
            fn posterior_draws<'py>(
                &self,
                py: Python<'py>,
                x: &Bound<'py, PyAny>,
            ) -> PyResult<Bound<'py, PyArray2<f64>>> {
                let model = &self.inner;
                let (out, n) = with_features(x, &self.last_input_address, |f, n, d| {
                    let out = each_precision!(f, v => py.detach(|| model.posterior_draws(v, d)));
                    Ok((out.map_err(py_err)?, n))
                })?;
                let s = self.inner.n_draws().unwrap_or(0);
                out.into_pyarray(py).reshape([s, n])
            }

            /// The chain's traces (see `traces_dict`).
            fn traces<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                traces_dict(py, self.inner.traces().map_err(py_err)?)
            }

            /// The constructor's parameters.
            fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                params_dict(py, self.inner.params(), $probit)
            }

            /// Width of the rows, once fitted.
            #[getter]
            fn n_features(&self) -> Option<usize> {
                self.inner.n_features()
            }

            /// Kept draws, once fitted.
            #[getter]
            fn n_draws(&self) -> Option<usize> {
                self.inner.n_draws()
            }
        }

        file_methods!($core, $model);
    };
}

/// The Rust BART regressor.
#[pyclass(module = "mondrian_ml._core")]
pub(crate) struct BartRegressorCore {
    inner: BartRegressor,
    last_input_address: AtomicUsize,
}

/// Two arrays of one value per row.
type Pair<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>);

#[pymethods]
impl BartRegressorCore {
    #[new]
    #[pyo3(signature = (
        n_trees = 200, sampler = "pg", n_particles = 10, n_iter = 2000, burn_in = 1000,
        alpha_s = 0.95, beta_s = 2.0, k = 2.0, nu = 3.0, q = 0.9, seed = 0, n_threads = 1,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        n_trees: usize,
        sampler: &str,
        n_particles: usize,
        n_iter: usize,
        burn_in: usize,
        alpha_s: f64,
        beta_s: f64,
        k: f64,
        nu: f64,
        q: f64,
        seed: u64,
        n_threads: usize,
    ) -> PyResult<Self> {
        let params = bart_params(
            n_trees,
            sampler,
            n_particles,
            n_iter,
            burn_in,
            alpha_s,
            beta_s,
            k,
            nu,
            q,
            seed,
            n_threads,
        )?;
        Ok(Self::wrap(BartRegressor::new(params).map_err(py_err)?))
    }

    /// Posterior means of f(x).
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let model = &self.inner;
        let out = with_features(x, &self.last_input_address, |f, _, d| {
            each_precision!(f, v => py.detach(|| model.predict(v, d))).map_err(py_err)
        })?;
        Ok(out.into_pyarray(py))
    }

    /// Means and standard deviations of the posterior predictive (noise included).
    fn predict_mean_std<'py>(&self, py: Python<'py>, x: &Bound<'py, PyAny>) -> PyResult<Pair<'py>> {
        let model = &self.inner;
        let (m, s) = with_features(x, &self.last_input_address, |f, _, d| {
            each_precision!(f, v => py.detach(|| model.predict_mean_std(v, d))).map_err(py_err)
        })?;
        Ok((m.into_pyarray(py), s.into_pyarray(py)))
    }

    /// The central posterior predictive interval of probability `level`, per row.
    fn predict_interval<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        level: f64,
    ) -> PyResult<Pair<'py>> {
        let model = &self.inner;
        let (lo, hi) = with_features(x, &self.last_input_address, |f, _, d| {
            each_precision!(f, v => py.detach(|| model.predict_interval(v, d, level)))
                .map_err(py_err)
        })?;
        Ok((lo.into_pyarray(py), hi.into_pyarray(py)))
    }

    /// σ of every kept draw, on the scale of y.
    fn sigma_draws<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        Ok(self.inner.sigma_draws().map_err(py_err)?.into_pyarray(py))
    }
}

bart_methods!(BartRegressorCore, BartRegressor, f64, targets, false);

/// The Rust probit BART classifier: labels are class indices 0 and 1; the Python class
/// maps user labels to them.
#[pyclass(module = "mondrian_ml._core")]
pub(crate) struct BartClassifierCore {
    inner: BartClassifier,
    last_input_address: AtomicUsize,
}

#[pymethods]
impl BartClassifierCore {
    #[new]
    #[pyo3(signature = (
        n_trees = 200, sampler = "pg", n_particles = 10, n_iter = 2000, burn_in = 1000,
        alpha_s = 0.95, beta_s = 2.0, k = 2.0, seed = 0, n_threads = 1,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        n_trees: usize,
        sampler: &str,
        n_particles: usize,
        n_iter: usize,
        burn_in: usize,
        alpha_s: f64,
        beta_s: f64,
        k: f64,
        seed: u64,
        n_threads: usize,
    ) -> PyResult<Self> {
        let defaults = BartParams::default();
        let params = bart_params(
            n_trees,
            sampler,
            n_particles,
            n_iter,
            burn_in,
            alpha_s,
            beta_s,
            k,
            defaults.nu,
            defaults.q,
            seed,
            n_threads,
        )?;
        Ok(Self::wrap(BartClassifier::new(params).map_err(py_err)?))
    }

    /// Posterior predictive class probabilities, `n_rows × 2`.
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
        p.into_pyarray(py).reshape([n, 2])
    }

    /// The more probable class index of each row.
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
}

bart_methods!(BartClassifierCore, BartClassifier, i64, labels, true);

/// Longest header start that names the kind: magic (8), version (4), kind length (1),
/// kind (≤ 255).
const HEADER_MAX: u64 = 8 + 4 + 1 + 255;

/// A BART model file for `load_any`: None when `path` holds another kind (or none).
pub(crate) fn load_bart(py: Python<'_>, path: &std::path::Path) -> PyResult<Option<Loaded>> {
    use std::io::Read;
    let mut head = Vec::new();
    let read = std::fs::File::open(path).and_then(|f| f.take(HEADER_MAX).read_to_end(&mut head));
    if read.is_err() {
        return Ok(None); // `AnyModel::load` reports it
    }
    let kind = mondrian::persist::kind_of(&head);
    let io = |e: MondrianError| match e {
        MondrianError::Io(io) => {
            PyOSError::new_err(format!("cannot read {}: {io}", path.display()))
        }
        other => py_err(other),
    };
    Ok(match kind.as_deref() {
        Some(BartRegressor::KIND) => {
            let m = py.detach(|| BartRegressor::load(path)).map_err(io)?;
            let core = Py::new(py, BartRegressorCore::wrap(m))?.into_any();
            Some(("bart-regressor", core, None, Vec::new()))
        }
        Some(BartClassifier::KIND) => {
            let m = py.detach(|| BartClassifier::load(path)).map_err(io)?;
            let core = Py::new(py, BartClassifierCore::wrap(m))?.into_any();
            Some(("bart-classifier", core, None, Vec::new()))
        }
        _ => None,
    })
}
