//! `BartRegressorCore` and `BartClassifierCore`: BART, sums of Bayesian trees sampled by
//! backfitting MCMC (spec `bayesian-trees.md` §4), for `mondrian_ml.BARTRegressor` and
//! `BARTClassifier`; their constructors come from `bart_new!`, their shared methods from
//! `bart_methods!`.

use std::sync::atomic::AtomicUsize;

use mondrian::bayes::bart::Traces;
use mondrian::bayes::{BartClassifier, BartParams, BartRegressor, CgmPrior, PgInit, TreeSampler};
use mondrian::model::Model;
use mondrian::{MondrianError, Persistent};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::{class_indices, labels, py_err, targets, with_features, Features};

/// The tree kernel the constructors' `sampler` names (`n_particles` for particle Gibbs).
fn tree_sampler(sampler: &str, n_particles: usize) -> PyResult<TreeSampler> {
    Ok(match sampler {
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
    })
}

/// The constructor of a BART core: the chain's settings from the arguments (the library
/// checks the ranges). `$extra` are the settings only this model takes (the regressor's ν
/// and q), before `seed`; the others keep the library's defaults.
macro_rules! bart_new {
    ($core:ident, $model:ident $(, $extra:ident = $default:literal)*) => {
        #[pymethods]
        impl $core {
            #[new]
            #[pyo3(signature = (
                n_trees = 200, sampler = "pg", n_particles = 10, n_iter = 2000,
                burn_in = 1000, alpha_s = 0.95, beta_s = 2.0, k = 2.0,
                $($extra = $default,)* seed = 0, n_threads = 1,
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
                $($extra: f64,)*
                seed: u64,
                n_threads: usize,
            ) -> PyResult<Self> {
                let params = BartParams {
                    n_trees,
                    k,
                    $($extra,)*
                    prior: CgmPrior {
                        alpha_s,
                        beta_s,
                        min_samples: None,
                    },
                    sampler: tree_sampler(sampler, n_particles)?,
                    n_iter,
                    burn_in,
                    seed,
                    n_threads,
                    ..BartParams::default()
                };
                Ok(Self::wrap($model::new(params).map_err(py_err)?))
            }
        }
    };
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

/// The methods both BART cores share: the posterior draws, the traces, the parameters,
/// the number of draws, and (through `batch_methods!`) fitting, the width, files and
/// pickling. `$target` is the numpy element type of `y`, `$convert` turns it into the
/// library's, and `$probit` says whether the model is the classifier.
macro_rules! bart_methods {
    ($core:ident, $model:ty, $target:ty, $convert:ident, $probit:expr) => {
        #[pymethods]
        impl $core {
            /// f_s(x) of every kept draw s and row, `n_draws × n_rows`.
            fn posterior_draws<'py>(
                &self,
                py: Python<'py>,
                x: &Bound<'py, PyAny>,
            ) -> PyResult<Bound<'py, PyArray2<f64>>> {
                let (out, n) =
                    on_rows!(counted self, py, x, |v, d| self.inner.posterior_draws(v, d))?;
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

            /// Kept draws, once fitted.
            #[getter]
            fn n_draws(&self) -> Option<usize> {
                self.inner.n_draws()
            }
        }

        batch_methods!(
            $core,
            $model,
            $target,
            $convert,
            "Runs the chain on a C-contiguous float64/float32 matrix and its targets \
             (int64 class indices or float64 values), with the GIL released."
        );
    };
}

model_core!(
    /// The Rust BART regressor.
    BartRegressorCore(BartRegressor)
);

bart_new!(BartRegressorCore, BartRegressor, nu = 3.0, q = 0.9);

/// Two arrays of one value per row.
type Pair<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>);

#[pymethods]
impl BartRegressorCore {
    /// Posterior means of f(x).
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let out = on_rows!(self, py, x, |v, d| self.inner.predict(v, d))?;
        Ok(out.into_pyarray(py))
    }

    /// Means and standard deviations of the posterior predictive (noise included).
    fn predict_mean_std<'py>(&self, py: Python<'py>, x: &Bound<'py, PyAny>) -> PyResult<Pair<'py>> {
        let (m, s) = on_rows!(self, py, x, |v, d| self.inner.predict_mean_std(v, d))?;
        Ok((m.into_pyarray(py), s.into_pyarray(py)))
    }

    /// The central posterior predictive interval of probability `level`, per row.
    fn predict_interval<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        level: f64,
    ) -> PyResult<Pair<'py>> {
        let (lo, hi) = on_rows!(self, py, x, |v, d| self.inner.predict_interval(v, d, level))?;
        Ok((lo.into_pyarray(py), hi.into_pyarray(py)))
    }

    /// σ of every kept draw, on the scale of y.
    fn sigma_draws<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        Ok(self.inner.sigma_draws().map_err(py_err)?.into_pyarray(py))
    }
}

bart_methods!(BartRegressorCore, BartRegressor, f64, targets, false);

model_core!(
    /// The Rust probit BART classifier: labels are class indices 0 and 1; the Python class
    /// maps user labels to them.
    BartClassifierCore(BartClassifier)
);

bart_new!(BartClassifierCore, BartClassifier);

#[pymethods]
impl BartClassifierCore {
    /// Posterior predictive class probabilities, `n_rows × 2`.
    fn predict_proba<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let (p, n) = on_rows!(counted self, py, x, |v, d| self.inner.predict_proba(v, d))?;
        p.into_pyarray(py).reshape([n, 2])
    }

    /// The more probable class index of each row.
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let out = on_rows!(self, py, x, |v, d| self.inner.predict(v, d))?;
        Ok(class_indices(py, out))
    }
}

bart_methods!(BartClassifierCore, BartClassifier, i64, labels, true);
