//! Python bindings of the `mondrian` library: the `mondrian_ml._core` extension module.
//!
//! This crate only converts arguments and errors. Every algorithm lives in the `mondrian`
//! crate; the scikit-learn and river interfaces are thin Python classes over [`ClassifierCore`]
//! (see `python/mondrian_ml`).

use mondrian::{
    BranchCounts, Calibration, ClassifierParams, Estimate, FeatureWeights, HyperSettings,
    MondrianError, MondrianForestClassifier, MondrianForestRegressor, NoiseRule, Persistent,
    PredictionMode, RegressorParams, Scaling,
};
use numpy::{
    Element, IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A library error as the Python exception a user expects: I/O failures are `OSError`,
/// everything else (bad values, widths, corrupt model bytes) is `ValueError`.
fn py_err(e: MondrianError) -> PyErr {
    match e {
        MondrianError::Io(io) => PyOSError::new_err(io.to_string()),
        other => PyValueError::new_err(other.to_string()),
    }
}

/// A row-major feature buffer borrowed from a numpy array without copying it.
enum Features<'a> {
    F64(&'a [f64]),
    F32(&'a [f32]),
}

/// Runs `body` on the buffer of `x` (a C-contiguous 2-D float64 or float32 array) with its
/// row and column counts, after noting the buffer's address in `seen`.
fn with_features<R>(
    x: &Bound<'_, PyAny>,
    seen: &AtomicUsize,
    body: impl FnOnce(Features<'_>, usize, usize) -> PyResult<R>,
) -> PyResult<R> {
    fn parts<'a, T: Element>(a: &'a PyReadonlyArray2<'_, T>) -> PyResult<(&'a [T], usize, usize)> {
        let shape = a.shape();
        let values = a
            .as_slice()
            .map_err(|_| PyValueError::new_err("X must be C-contiguous (row-major)"))?;
        Ok((values, shape[0], shape[1]))
    }
    if let Ok(a) = x.extract::<PyReadonlyArray2<'_, f64>>() {
        let (v, n, d) = parts(&a)?;
        seen.store(v.as_ptr() as usize, Ordering::Relaxed);
        return body(Features::F64(v), n, d);
    }
    if let Ok(a) = x.extract::<PyReadonlyArray2<'_, f32>>() {
        let (v, n, d) = parts(&a)?;
        seen.store(v.as_ptr() as usize, Ordering::Relaxed);
        return body(Features::F32(v), n, d);
    }
    Err(PyTypeError::new_err(
        "X must be a 2-D numpy array of float64 or float32",
    ))
}

/// `$body` with `$v` bound to the buffer in either precision.
macro_rules! each_precision {
    ($features:expr, $v:ident => $body:expr) => {
        match $features {
            Features::F64($v) => $body,
            Features::F32($v) => $body,
        }
    };
}

fn labels(y: &PyReadonlyArray1<'_, i64>) -> PyResult<Vec<usize>> {
    let y = y.as_array();
    y.iter()
        .map(|&v| {
            usize::try_from(v)
                .map_err(|_| PyValueError::new_err(format!("class index {v} is negative")))
        })
        .collect()
}

fn parse_scaling(spec: Option<&Bound<'_, PyAny>>) -> PyResult<Scaling> {
    let Some(spec) = spec else {
        return Ok(Scaling::FirstBatch);
    };
    if let Ok(s) = spec.cast::<PyString>() {
        return match s.to_str()? {
            "first_batch" => Ok(Scaling::FirstBatch),
            "identity" => Ok(Scaling::Identity),
            other => Err(PyValueError::new_err(format!(
                "scaling must be 'first_batch', 'identity' or a list of (min, max) pairs, \
                 not {other:?}"
            ))),
        };
    }
    let ranges: Vec<(f64, f64)> = spec.extract().map_err(|_| {
        PyValueError::new_err("feature ranges must be a sequence of (min, max) pairs")
    })?;
    Ok(Scaling::Ranges(ranges))
}

fn parse_feature_weights(spec: Option<&Bound<'_, PyAny>>) -> PyResult<FeatureWeights> {
    let Some(spec) = spec else {
        return Ok(FeatureWeights::Uniform);
    };
    if let Ok(s) = spec.cast::<PyString>() {
        return FeatureWeights::parse(s.to_str()?).map_err(py_err);
    }
    let w: Vec<f64> = spec.extract().map_err(|_| {
        PyValueError::new_err("feature_weights must be a string or a sequence of numbers")
    })?;
    Ok(FeatureWeights::Given(w))
}

/// The Rust Mondrian forest classifier. Labels are class indices `0..K`; the Python
/// classes map user labels to indices.
#[pyclass(module = "mondrian_ml._core")]
struct ClassifierCore {
    inner: MondrianForestClassifier,
    /// Address of the last feature buffer read, so tests can prove arrays are not copied.
    /// Atomic because predictions take the model shared, from any number of threads.
    last_input_address: AtomicUsize,
}

#[pymethods]
impl ClassifierCore {
    /// Builds an unfitted forest. `scaling` is `None` / `"first_batch"` (min–max from the
    /// first training call), `"identity"`, or a list of `(min, max)` per feature; `window`
    /// keeps only the last that many training points (`None`: all). The library checks
    /// every value.
    #[new]
    #[pyo3(signature = (
        n_trees = 100,
        lifetime = f64::INFINITY,
        discount_factor = 10.0,
        seed = 0,
        n_threads = 1,
        bagging = false,
        pause_on_pure = true,
        min_samples_split = 2,
        branch_counts = "paper",
        n_classes = None,
        scaling = None,
        feature_weights = None,
        window = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        n_trees: usize,
        lifetime: f64,
        discount_factor: f64,
        seed: u64,
        n_threads: usize,
        bagging: bool,
        pause_on_pure: bool,
        min_samples_split: usize,
        branch_counts: &str,
        n_classes: Option<usize>,
        scaling: Option<&Bound<'_, PyAny>>,
        feature_weights: Option<&Bound<'_, PyAny>>,
        window: Option<usize>,
    ) -> PyResult<Self> {
        let branch_counts = match branch_counts {
            "paper" => BranchCounts::Paper,
            "reference" => BranchCounts::Reference,
            other => {
                return Err(PyValueError::new_err(format!(
                    "branch_counts must be 'paper' or 'reference', not {other:?}"
                )))
            }
        };
        let params = ClassifierParams {
            n_trees,
            lifetime,
            discount_factor,
            seed,
            n_threads,
            bagging,
            pause_on_pure,
            min_samples_split,
            branch_counts,
            n_classes,
            scaling: parse_scaling(scaling)?,
            feature_weights: parse_feature_weights(feature_weights)?,
            window,
        };
        Ok(Self::wrap(
            MondrianForestClassifier::new(params).map_err(py_err)?,
        ))
    }

    /// Class probabilities, `n_rows × n_classes`.
    fn predict_proba<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let model = &self.inner;
        let (proba, n) = with_features(x, &self.last_input_address, |f, n, d| {
            let p = each_precision!(f, v => py.detach(|| model.predict_proba(v, d)));
            Ok((p.map_err(py_err)?, n))
        })?;
        let k = self.inner.n_classes();
        proba.into_pyarray(py).reshape([n, k])
    }

    /// Class probabilities of one point given as a list of floats.
    fn predict_proba_one(&self, py: Python<'_>, x: Vec<f64>) -> PyResult<Vec<f64>> {
        let d = x.len();
        let model = &self.inner;
        py.detach(|| model.predict_proba(&x, d)).map_err(py_err)
    }

    /// Number of classes K the trees hold.
    #[getter]
    fn n_classes(&self) -> usize {
        self.inner.n_classes()
    }

    /// The discount rate γ in use.
    #[getter]
    fn gamma(&self) -> f64 {
        self.inner.gamma()
    }
}

/// The Rust Mondrian forest regressor (spec `mf-regression.md`).
#[pyclass(module = "mondrian_ml._core")]
struct RegressorCore {
    inner: MondrianForestRegressor,
    /// Address of the last feature buffer read (zero-copy tests).
    last_input_address: AtomicUsize,
}

fn targets(y: &PyReadonlyArray1<'_, f64>) -> PyResult<Vec<f64>> {
    Ok(y.as_array().iter().copied().collect())
}

impl RegressorCore {
    /// Each row's PIT, the forest mixture's CDF at its target.
    fn pits<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        y: &PyReadonlyArray1<'py, f64>,
    ) -> PyResult<Vec<f64>> {
        let y = targets(y)?;
        let model = &self.inner;
        with_features(x, &self.last_input_address, |f, _, d| {
            each_precision!(f, v => py.detach(|| model.cdf(v, d, &y))).map_err(py_err)
        })
    }
}

#[pymethods]
impl RegressorCore {
    /// Builds an unfitted forest. `mode` is "exact", "quadrature" or "fast"; `noise` is
    /// "thesis", "reference" or a known noise variance; `scaling` and `window` as for the
    /// classifier.
    #[new]
    #[pyo3(signature = (
        n_trees = 100,
        min_samples_split = 5,
        mode = "fast",
        seed = 0,
        n_threads = 1,
        bagging = false,
        scaling = None,
        k_cap = 2000.0,
        gamma2_divisor = 20.0,
        gamma2 = None,
        noise = None,
        theta_estimate = "heuristic",
        feature_weights = None,
        calibration = "auto",
        window = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        n_trees: usize,
        min_samples_split: usize,
        mode: &str,
        seed: u64,
        n_threads: usize,
        bagging: bool,
        scaling: Option<&Bound<'_, PyAny>>,
        k_cap: f64,
        gamma2_divisor: f64,
        gamma2: Option<f64>,
        noise: Option<&Bound<'_, PyAny>>,
        theta_estimate: &str,
        feature_weights: Option<&Bound<'_, PyAny>>,
        calibration: &str,
        window: Option<usize>,
    ) -> PyResult<Self> {
        let calibration = Calibration::parse(calibration).map_err(py_err)?;
        let estimate = match theta_estimate {
            "heuristic" => Estimate::Heuristic,
            "marginal_likelihood" => Estimate::MarginalLikelihood,
            other => {
                return Err(PyValueError::new_err(format!(
                    "theta_estimate must be 'heuristic' or 'marginal_likelihood', not {other:?}"
                )))
            }
        };
        let mode = match mode {
            "exact" => PredictionMode::Exact,
            "quadrature" => PredictionMode::ExactQuadrature,
            "fast" => PredictionMode::Fast,
            other => {
                return Err(PyValueError::new_err(format!(
                    "mode must be 'exact', 'quadrature' or 'fast', not {other:?}"
                )))
            }
        };
        let noise = match noise {
            None => NoiseRule::Thesis,
            Some(n) => match n.extract::<f64>() {
                Ok(v) => NoiseRule::Fixed(v),
                Err(_) => match n.extract::<String>()?.as_str() {
                    "thesis" => NoiseRule::Thesis,
                    "reference" => NoiseRule::Reference,
                    other => {
                        return Err(PyValueError::new_err(format!(
                            "noise must be 'thesis', 'reference' or a variance, not {other:?}"
                        )))
                    }
                },
            },
        };
        let params = RegressorParams {
            n_trees,
            min_samples_split,
            mode,
            hyper: HyperSettings {
                k_cap,
                gamma2_divisor,
                gamma2,
                noise,
                estimate,
                ..Default::default()
            },
            seed,
            n_threads,
            bagging,
            scaling: parse_scaling(scaling)?,
            feature_weights: parse_feature_weights(feature_weights)?,
            calibration,
            window,
        };
        Ok(Self::wrap(
            MondrianForestRegressor::new(params).map_err(py_err)?,
        ))
    }

    /// Predictive means, variances and the between-tree part of the variances: three
    /// arrays of length n_rows.
    #[allow(clippy::type_complexity)]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<(
        Bound<'py, PyArray1<f64>>,
        Bound<'py, PyArray1<f64>>,
        Bound<'py, PyArray1<f64>>,
    )> {
        let model = &self.inner;
        let p = with_features(x, &self.last_input_address, |f, _, d| {
            each_precision!(f, v => py.detach(|| model.predict(v, d))).map_err(py_err)
        })?;
        Ok((
            p.mean.into_pyarray(py),
            p.variance.into_pyarray(py),
            p.between_trees.into_pyarray(py),
        ))
    }

    /// Central interval at `level` per row, (lower, upper): with `kind` "mixture" from the
    /// quantiles of the forest's full predictive mixture (recalibrated if calibrated), with
    /// "gaussian" mean ± z·sd, the Gaussian moment match of that mixture.
    #[allow(clippy::type_complexity)]
    fn interval<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        level: f64,
        kind: &str,
    ) -> PyResult<(Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>)> {
        let gaussian = match kind {
            "mixture" => false,
            "gaussian" => true,
            other => {
                return Err(PyValueError::new_err(format!(
                    "kind must be 'mixture' or 'gaussian', not {other:?}"
                )))
            }
        };
        let model = &self.inner;
        let (lo, hi) = with_features(x, &self.last_input_address, |f, _, d| {
            each_precision!(f, v => py.detach(|| if gaussian {
                model.predict(v, d).and_then(|p| p.interval(level))
            } else {
                model.mixture_interval(v, d, level)
            }))
            .map_err(py_err)
        })?;
        Ok((lo.into_pyarray(py), hi.into_pyarray(py)))
    }

    /// Predictive mean and variance of one point given as a list of floats.
    fn predict_one(&self, py: Python<'_>, x: Vec<f64>) -> PyResult<(f64, f64)> {
        let d = x.len();
        let model = &self.inner;
        let p = py.detach(|| model.predict(&x, d)).map_err(py_err)?;
        Ok((p.mean[0], p.variance[0]))
    }

    /// The predictive CDF P(Y <= y | x) of the full forest mixture per row (the PIT).
    fn cdf<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        y: PyReadonlyArray1<'py, f64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        Ok(self.pits(py, x, &y)?.into_pyarray(py))
    }

    /// Recalibrates the intervals from held-out rows (their PITs under this forest).
    fn calibrate<'py>(
        &mut self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        y: PyReadonlyArray1<'py, f64>,
    ) -> PyResult<()> {
        let pits = self.pits(py, x, &y)?;
        self.inner.set_calibration(Some(pits)).map_err(py_err)
    }

    /// The sorted PITs that recalibrate the intervals, or None.
    fn calibration(&self) -> Option<Vec<f64>> {
        self.inner.calibration().map(<[f64]>::to_vec)
    }

    /// The mixture probabilities bounding the central interval at `level`.
    fn interval_probabilities(&self, level: f64) -> PyResult<(f64, f64)> {
        self.inner.interval_probabilities(level).map_err(py_err)
    }

    /// log p(y | x) of the full forest mixture per row.
    fn log_density<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        y: PyReadonlyArray1<'py, f64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let y = targets(&y)?;
        let model = &self.inner;
        let out = with_features(x, &self.last_input_address, |f, _, d| {
            each_precision!(f, v => py.detach(|| model.log_density(v, d, &y))).map_err(py_err)
        })?;
        Ok(out.into_pyarray(py))
    }

    /// The hyper-parameters θ in use (after training) as a dict.
    fn theta<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(t) = self.inner.theta() else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("mu_h", t.mu_h)?;
        d.set_item("gamma1", t.gamma1)?;
        d.set_item("gamma2", t.gamma2)?;
        d.set_item("noise_var", t.noise_var)?;
        Ok(Some(d))
    }
}

fn summary_dict<'py>(py: Python<'py>, s: &mondrian::ForestSummary) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("n_trees", s.n_trees)?;
    d.set_item("n_nodes", s.n_nodes)?;
    d.set_item("n_leaves", s.n_leaves)?;
    d.set_item("depth_mean", s.depth_mean)?;
    d.set_item("depth_std", s.depth_std)?;
    d.set_item("bytes_per_node", s.bytes_per_node)?;
    d.set_item("store_bytes", s.store_bytes)?;
    d.set_item("total_bytes", s.total_bytes)?;
    Ok(d)
}

/// The methods every core shares: threads, shape, size, and the library's file format
/// (which pickling goes through).
macro_rules! common_methods {
    ($core:ident, $model:ty, $target:ty, $one:ty, $convert:ident) => {
        impl $core {
            fn wrap(inner: $model) -> Self {
                $core {
                    inner,
                    last_input_address: AtomicUsize::new(0),
                }
            }

            fn train(
                &mut self,
                py: Python<'_>,
                x: &Bound<'_, PyAny>,
                y: &PyReadonlyArray1<'_, $target>,
                batch: bool,
            ) -> PyResult<()> {
                let y = $convert(y)?;
                let model = &mut self.inner;
                with_features(x, &self.last_input_address, |f, _, d| {
                    each_precision!(f, v => py.detach(|| if batch {
                        model.fit(v, d, &y)
                    } else {
                        model.partial_fit(v, d, &y)
                    }))
                    .map_err(py_err)
                })
            }
        }

        #[pymethods]
        impl $core {
            /// Batch training on a C-contiguous float64/float32 matrix and its targets
            /// (int64 class indices or float64 values).
            fn fit(
                &mut self,
                py: Python<'_>,
                x: &Bound<'_, PyAny>,
                y: PyReadonlyArray1<'_, $target>,
            ) -> PyResult<()> {
                self.train(py, x, &y, true)
            }

            /// Online training on a mini-batch, in row order.
            fn partial_fit(
                &mut self,
                py: Python<'_>,
                x: &Bound<'_, PyAny>,
                y: PyReadonlyArray1<'_, $target>,
            ) -> PyResult<()> {
                self.train(py, x, &y, false)
            }

            /// Online training on one point given as a list of floats.
            fn partial_fit_one(&mut self, py: Python<'_>, x: Vec<f64>, y: $one) -> PyResult<()> {
                let d = x.len();
                let model = &mut self.inner;
                py.detach(|| model.partial_fit(&x, d, &[y])).map_err(py_err)
            }

            /// Worker threads for training and prediction (0: every core). Never changes
            /// the model. A count the library's parameters refuse (above its cap) is
            /// refused with its message, as at construction.
            fn set_n_threads(&mut self, n_threads: usize) -> PyResult<()> {
                let mut params = self.inner.params().clone();
                params.n_threads = n_threads;
                params.validate().map_err(py_err)?;
                self.inner.set_n_threads(n_threads);
                Ok(())
            }

            /// Worker threads in use (0: every core).
            #[getter]
            fn n_threads(&self) -> usize {
                self.inner.params().n_threads
            }

            /// Number of features, once trained.
            #[getter]
            fn n_features(&self) -> Option<usize> {
                self.inner.n_features()
            }

            /// Training rows given since the last `fit`, kept or not (bagging copies not
            /// counted).
            #[getter]
            fn n_samples_seen(&self) -> usize {
                self.inner.n_samples_seen()
            }

            /// Training points the model holds: those given, less those forgotten or out
            /// of the window.
            #[getter]
            fn n_points(&self) -> usize {
                self.inner.n_points()
            }

            /// The ids of the points held, oldest first: each one's arrival index among
            /// the training rows given since the last `fit`.
            fn point_ids<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
                self.inner.point_ids().into_pyarray(py)
            }

            /// Removes the training points with these ids (exact deletion: the model is
            /// then as if it had never seen them), with the GIL released. An id the model
            /// does not hold is refused and the model is left unchanged.
            fn forget(&mut self, py: Python<'_>, ids: PyReadonlyArray1<'_, u64>) -> PyResult<()> {
                let ids: Vec<u64> = ids.as_array().iter().copied().collect();
                let model = &mut self.inner;
                py.detach(|| model.forget(&ids)).map_err(py_err)
            }

            /// Address of the last feature buffer the model read (for zero-copy tests).
            #[getter]
            fn _last_input_address(&self) -> usize {
                self.last_input_address.load(Ordering::Relaxed)
            }

            /// The feature weights in use (None before training).
            fn feature_weights(&self) -> Option<Vec<f64>> {
                self.inner.feature_weights().map(<[f64]>::to_vec)
            }

            /// The power `relevance:cv` chose and each power's held-out loss per row
            /// (None unless trained with it).
            fn relevance_choice(&self) -> Option<(f64, Vec<(f64, f64)>)> {
                self.inner
                    .relevance_choice()
                    .map(|c| (c.power, c.losses.clone()))
            }

            /// Share of the impurity the forest's splits remove, per feature.
            fn feature_importances(&self) -> Vec<f64> {
                self.inner.feature_importances()
            }

            /// Size and depth statistics as a dict.
            fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                summary_dict(py, &self.inner.summary())
            }

            /// The model in the library's file format (the bytes the library saves).
            fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
                let bytes = self.inner.to_bytes().map_err(py_err)?;
                Ok(PyBytes::new(py, &bytes))
            }

            /// A model from `to_bytes` or a file saved by the library.
            #[staticmethod]
            fn from_bytes(data: &[u8]) -> PyResult<Self> {
                Ok(Self::wrap(<$model>::from_bytes(data).map_err(py_err)?))
            }

            /// Saves to a file in the library's format, crash-safe (a temporary file
            /// renamed over the target once complete).
            fn save(&self, path: std::path::PathBuf) -> PyResult<()> {
                self.inner.save(&path).map_err(|e| match e {
                    MondrianError::Io(io) => {
                        PyOSError::new_err(format!("cannot write {}: {io}", path.display()))
                    }
                    other => py_err(other),
                })
            }

            /// Loads a file saved by the library.
            #[staticmethod]
            fn load(path: std::path::PathBuf) -> PyResult<Self> {
                Ok(Self::wrap(<$model>::load(path).map_err(py_err)?))
            }

            /// Pickling goes through the library's checksummed format.
            fn __reduce__<'py>(
                slf: &Bound<'py, Self>,
            ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
                let constructor = slf.get_type().getattr("from_bytes")?;
                let bytes = slf.borrow().to_bytes(slf.py())?;
                Ok((constructor, (bytes,)))
            }
        }
    };
}

common_methods!(ClassifierCore, MondrianForestClassifier, i64, usize, labels);
common_methods!(RegressorCore, MondrianForestRegressor, f64, f64, targets);

/// The compiled core of `mondrian_ml`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ClassifierCore>()?;
    m.add_class::<RegressorCore>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
