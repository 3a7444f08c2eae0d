//! `KernelFeaturesCore`, `KernelRidgeCore` and `kernel_sweep`: the Mondrian kernel (spec
//! `mondrian-kernel.md`) for `mondrian_ml.MondrianKernelFeatures`,
//! `MondrianKernelRidge(CV)` and the experiments; files and pickling come from
//! `file_methods!`.

use std::sync::atomic::AtomicUsize;

use mondrian::kernel::{
    run_sweep, Averaging, Criterion, Csr, Extension, KernelParams, KernelRidgeParams, Learner,
    LifetimePath, LifetimePrior, LifetimeSearch, MondrianKernel, MondrianKernelRidge, SgdParams,
    SweepSpec,
};
use mondrian::{MondrianError, Persistent};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::{py_err, with_features, Features};

/// A CSR matrix as (indptr, indices, data, n_cols) for `scipy.sparse.csr_matrix`.
type CsrArrays<'py> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i32>>,
    Bound<'py, PyArray1<f64>>,
    usize,
);

fn csr_arrays(py: Python<'_>, phi: Csr) -> CsrArrays<'_> {
    let indptr: Vec<i64> = phi.indptr.iter().map(|&p| p as i64).collect();
    let indices: Vec<i32> = phi.indices.iter().map(|&c| c as i32).collect();
    let data = phi.values();
    (
        indptr.into_pyarray(py),
        indices.into_pyarray(py),
        data.into_pyarray(py),
        phi.n_cols,
    )
}

fn kernel_params(
    n_trees: usize,
    lifetime: f64,
    seed: u64,
    n_threads: usize,
    extension: &str,
) -> PyResult<KernelParams> {
    Ok(KernelParams {
        n_trees,
        lifetime,
        seed,
        n_threads,
        extension: Extension::parse(extension).map_err(py_err)?,
    })
}

fn extension_name(e: Extension) -> &'static str {
    match e {
        Extension::Sample => "sample",
        Extension::Route => "route",
    }
}

model_core!(
    /// The Rust Mondrian kernel feature map.
    KernelFeaturesCore(MondrianKernel)
);

#[pymethods]
impl KernelFeaturesCore {
    #[new]
    #[pyo3(signature = (n_trees = 50, lifetime = 1.0, seed = 0, n_threads = 1, extension = "sample"))]
    fn new(
        n_trees: usize,
        lifetime: f64,
        seed: u64,
        n_threads: usize,
        extension: &str,
    ) -> PyResult<Self> {
        let p = kernel_params(n_trees, lifetime, seed, n_threads, extension)?;
        Ok(Self::wrap(MondrianKernel::new(p).map_err(py_err)?))
    }

    /// Samples the trees on these rows.
    fn fit(&mut self, py: Python<'_>, x: &Bound<'_, PyAny>) -> PyResult<()> {
        on_rows!(self, py, x, |v, d| self.inner.fit(v, d))
    }

    /// Extends the trees by these rows; returns the number of new columns.
    fn partial_fit(&mut self, py: Python<'_>, x: &Bound<'_, PyAny>) -> PyResult<usize> {
        on_rows!(self, py, x, |v, d| self.inner.partial_fit(v, d))
    }

    /// The features of these rows as CSR arrays.
    fn transform<'py>(&self, py: Python<'py>, x: &Bound<'py, PyAny>) -> PyResult<CsrArrays<'py>> {
        let phi = on_rows!(self, py, x, |v, d| self.inner.transform(v, d))?;
        Ok(csr_arrays(py, phi))
    }

    /// Columns of the feature map.
    #[getter]
    fn n_features_out(&self) -> usize {
        self.inner.n_features_out()
    }

    /// The tree of each column.
    fn tree_of_column<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        self.inner.tree_of_column().to_vec().into_pyarray(py)
    }

    /// Width of the rows, once fitted.
    #[getter]
    fn n_features(&self) -> Option<usize> {
        self.inner.n_features_in()
    }
}

file_methods!(KernelFeaturesCore, MondrianKernel);

/// Predictive means and standard deviations.
type MeanStd<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>);

model_core!(
    /// The Rust ridge regression on Mondrian kernel features.
    KernelRidgeCore(MondrianKernelRidge)
);

fn ridge_params(
    n_trees: usize,
    lifetime: f64,
    delta2: f64,
    seed: u64,
    n_threads: usize,
    extension: &str,
    max_features: usize,
) -> PyResult<KernelRidgeParams> {
    Ok(KernelRidgeParams {
        kernel: kernel_params(n_trees, lifetime, seed, n_threads, extension)?,
        delta2,
        max_features,
    })
}

#[pymethods]
impl KernelRidgeCore {
    #[new]
    #[pyo3(signature = (
        n_trees = 50, lifetime = 1.0, delta2 = 1e-4, seed = 0, n_threads = 1,
        extension = "sample", max_features = 8192,
    ))]
    fn new(
        n_trees: usize,
        lifetime: f64,
        delta2: f64,
        seed: u64,
        n_threads: usize,
        extension: &str,
        max_features: usize,
    ) -> PyResult<Self> {
        let p = ridge_params(
            n_trees,
            lifetime,
            delta2,
            seed,
            n_threads,
            extension,
            max_features,
        )?;
        Ok(Self::wrap(MondrianKernelRidge::new(p).map_err(py_err)?))
    }

    /// Fits on rows and targets.
    fn fit(
        &mut self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        y: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<()> {
        let y = y.as_slice().map_err(py_err_contiguous)?.to_vec();
        on_rows!(self, py, x, |v, d| self.inner.fit(v, d, &y))
    }

    /// Extends the model by rows and targets (exact online ridge).
    fn partial_fit(
        &mut self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        y: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<()> {
        let y = y.as_slice().map_err(py_err_contiguous)?.to_vec();
        on_rows!(self, py, x, |v, d| self.inner.partial_fit(v, d, &y))
    }

    /// Predictive means.
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let out = on_rows!(self, py, x, |v, d| self.inner.predict(v, d))?;
        Ok(out.into_pyarray(py))
    }

    /// Predictive means and standard deviations.
    fn predict_with_std<'py>(
        &mut self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<MeanStd<'py>> {
        let (m, s) = on_rows!(self, py, x, |v, d| self.inner.predict_with_std(v, d))?;
        Ok((m.into_pyarray(py), s.into_pyarray(py)))
    }

    /// Chooses the lifetime along one sweep and fits there; returns the scores.
    #[staticmethod]
    #[pyo3(signature = (
        x, y, lifetimes, criterion = "validation", validation_fraction = 0.2, n_trees = 50,
        delta2 = 1e-4, seed = 0, n_threads = 1, extension = "sample", max_features = 8192,
        patience = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn fit_cv<'py>(
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        y: PyReadonlyArray1<'py, f64>,
        lifetimes: Vec<f64>,
        criterion: &str,
        validation_fraction: f64,
        n_trees: usize,
        delta2: f64,
        seed: u64,
        n_threads: usize,
        extension: &str,
        max_features: usize,
        patience: Option<usize>,
    ) -> PyResult<(Self, Bound<'py, PyArray1<f64>>)> {
        let criterion = match criterion {
            "validation" => Criterion::Validation,
            "evidence" => Criterion::Evidence,
            other => {
                return Err(py_err(MondrianError::InvalidParameter {
                    name: "criterion",
                    reason: format!("`{other}` is not `validation` or `evidence`"),
                }))
            }
        };
        let first = lifetimes.first().copied().unwrap_or(1.0);
        let p = ridge_params(
            n_trees,
            first,
            delta2,
            seed,
            n_threads,
            extension,
            max_features,
        )?;
        let y = y.as_slice().map_err(py_err_contiguous)?.to_vec();
        let seen = AtomicUsize::new(0);
        let search = LifetimeSearch {
            lifetimes,
            criterion,
            validation_fraction,
            patience,
        };
        let (model, scores) = with_features(x, &seen, |f, _, d| {
            each_precision!(f, v => py.detach(|| MondrianKernelRidge::fit_cv(
                p.clone(), v, d, &y, &search
            )))
            .map_err(py_err)
        })?;
        Ok((Self::wrap(model), scores.into_pyarray(py)))
    }

    /// The lifetime λ.
    #[getter]
    fn lifetime(&self) -> f64 {
        self.inner.lifetime()
    }

    /// Columns of the feature map.
    #[getter]
    fn n_features_out(&self) -> usize {
        self.inner.n_features_out()
    }

    /// Width of the rows, once fitted.
    #[getter]
    fn n_features(&self) -> Option<usize> {
        self.inner.kernel().n_features_in()
    }

    /// The weights by column.
    fn weights<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.inner.weights().to_vec().into_pyarray(py)
    }

    /// The centre added to predictions.
    #[getter]
    fn centre(&self) -> f64 {
        self.inner.centre()
    }

    /// The noise variance σ².
    #[getter]
    fn noise_variance(&self) -> f64 {
        self.inner.noise_variance()
    }

    /// The paper's log marginal likelihood of the training targets.
    fn log_marginal_likelihood(&mut self, py: Python<'_>) -> PyResult<f64> {
        let model = &mut self.inner;
        py.detach(|| model.log_marginal_likelihood())
            .map_err(py_err)
    }

    /// The features of these rows as CSR arrays.
    fn transform<'py>(&self, py: Python<'py>, x: &Bound<'py, PyAny>) -> PyResult<CsrArrays<'py>> {
        let model = self.inner.kernel();
        let phi = with_features(x, &self.last_input_address, |f, _, d| {
            each_precision!(f, v => py.detach(|| model.transform(v, d))).map_err(py_err)
        })?;
        Ok(csr_arrays(py, phi))
    }

    /// The extension rule's name.
    #[getter]
    fn extension(&self) -> &'static str {
        extension_name(self.inner.params().kernel.extension)
    }
}

file_methods!(KernelRidgeCore, MondrianKernelRidge);

fn py_err_contiguous(_: numpy::AsSliceError) -> PyErr {
    pyo3::exceptions::PyValueError::new_err("y must be a contiguous float64 array")
}

/// The posterior average of `kernel_sweep`: means, variances, log evidence, intervals.
type AveragedArrays<'py> = (
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    f64,
    usize,
);

/// What `kernel_sweep` returns: active features per lifetime, predictions
/// (lifetimes × rows), the paper's and the profiled log evidence (NaN off the ridge
/// learner), the events taken, and the lifetime average if asked for.
type SweepArrays<'py> = (
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<u64>>,
    Option<AveragedArrays<'py>>,
);

/// Samples M trees to the largest lifetime on every row of `x` (training rows first) and
/// reads a learner along the path at each lifetime (spec §3.2–3.4, §5): `learner` is
/// "ridge", "sgd" (`epochs` per event, scikit-learn's invscaling schedule with `alpha`,
/// `eta0`, `power_t`) or "forest" (per-leaf values with γ² = δ²).
#[pyfunction]
#[pyo3(signature = (
    x, y_train, lifetimes, n_trees = 50, learner = "ridge", delta2 = 1e-4, seed = 0,
    n_threads = 1, epochs = 1, alpha = 1e-4, eta0 = 0.01, power_t = 0.25,
    l1_ratio_quirk = 0.15, max_features = 8192, average = None, average_lo = None,
    profiled = true,
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn kernel_sweep<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    y_train: PyReadonlyArray1<'py, f64>,
    lifetimes: Vec<f64>,
    n_trees: usize,
    learner: &str,
    delta2: f64,
    seed: u64,
    n_threads: usize,
    epochs: usize,
    alpha: f64,
    eta0: f64,
    power_t: f64,
    l1_ratio_quirk: f64,
    max_features: usize,
    average: Option<&str>,
    average_lo: Option<f64>,
    profiled: bool,
) -> PyResult<SweepArrays<'py>> {
    let average = match (average, average_lo) {
        (None, _) => None,
        (Some("uniform"), _) => Some(LifetimePrior::Uniform),
        (Some("log_uniform"), Some(lo)) => Some(LifetimePrior::LogUniform { lo }),
        (Some(other), _) => {
            return Err(py_err(MondrianError::InvalidParameter {
                name: "average",
                reason: format!(
                    "`{other}` is not `uniform` or `log_uniform` (which needs average_lo)"
                ),
            }))
        }
    }
    .map(|prior| Averaging { prior, profiled });
    let learner = match learner {
        "ridge" => Learner::Ridge,
        "sgd" => Learner::Sgd {
            params: SgdParams {
                alpha,
                eta0,
                power_t,
                l1_ratio_quirk,
                constant_rate: false,
            },
            epochs,
            seed,
        },
        "forest" => Learner::Forest { gamma2: delta2 },
        other => {
            return Err(py_err(MondrianError::InvalidParameter {
                name: "learner",
                reason: format!("`{other}` is not `ridge`, `sgd` or `forest`"),
            }))
        }
    };
    let y = y_train.as_slice().map_err(py_err_contiguous)?.to_vec();
    let top = lifetimes.iter().copied().fold(f64::NAN, f64::max);
    let params = kernel_params(n_trees, top, seed, n_threads, "sample")?;
    let seen = AtomicUsize::new(0);
    let report = with_features(x, &seen, |f, _, d| {
        py.detach(|| -> mondrian::Result<_> {
            let mut kernel = MondrianKernel::new(params)?;
            each_precision!(f, v => kernel.fit(v, d))?;
            let mut path = LifetimePath::new(&kernel)?;
            run_sweep(
                &mut path,
                &y,
                &SweepSpec {
                    lifetimes: lifetimes.clone(),
                    n_train: y.len(),
                    delta2,
                    centre: None,
                    learner,
                    max_features,
                    average,
                    every_event: false,
                },
            )
        })
        .map_err(py_err)
    })?;
    let k = report.points.len();
    let n = report.points.first().map_or(0, |p| p.predictions.len());
    let features: Vec<u64> = report.points.iter().map(|p| p.n_features as u64).collect();
    let events: Vec<u64> = report.points.iter().map(|p| p.events as u64).collect();
    let lml: Vec<f64> = report
        .points
        .iter()
        .map(|p| p.log_marginal_likelihood.unwrap_or(f64::NAN))
        .collect();
    let lev: Vec<f64> = report
        .points
        .iter()
        .map(|p| p.log_evidence.unwrap_or(f64::NAN))
        .collect();
    let averaged = report.average.map(|a| {
        (
            a.predictions.into_pyarray(py),
            a.variances.into_pyarray(py),
            a.log_evidence,
            a.intervals,
        )
    });
    let preds: Vec<f64> = report
        .points
        .into_iter()
        .flat_map(|p| p.predictions)
        .collect();
    Ok((
        features.into_pyarray(py),
        preds.into_pyarray(py).reshape([k, n])?,
        lml.into_pyarray(py),
        lev.into_pyarray(py),
        events.into_pyarray(py),
        averaged,
    ))
}
