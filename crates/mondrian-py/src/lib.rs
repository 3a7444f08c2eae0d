//! Python bindings of the `mondrian` library: the `mondrian_ml._core` extension module.
//!
//! This crate only converts arguments and errors. Every algorithm lives in the `mondrian`
//! crate; the scikit-learn and river interfaces are thin Python classes over the cores
//! (`classifier.rs`, `regressor.rs`; see `python/mondrian_ml`). What both cores share is
//! here: arrays, errors, parameter specs and the `common_methods!` they both expand.

use mondrian::{FeatureWeights, MondrianError, Progress, Scaling};
use numpy::{Element, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyMemoryError, PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A library error as the Python exception a user expects: I/O failures are `OSError`,
/// everything else (bad values, widths, corrupt model bytes) is `ValueError`.
fn py_err(e: MondrianError) -> PyErr {
    match e {
        MondrianError::Io(io) => PyOSError::new_err(io.to_string()),
        e @ MondrianError::MemoryLimit { .. } => PyMemoryError::new_err(e.to_string()),
        other => PyValueError::new_err(other.to_string()),
    }
}

/// A memory budget: a number of bytes, or a string such as "500M", "4G" or "4GiB".
fn parse_memory(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    let Some(v) = value else { return Ok(None) };
    let text = match v.extract::<u64>() {
        Ok(n) => n.to_string(),
        Err(_) => v.extract::<String>().map_err(|_| {
            PyValueError::new_err(format!(
                "max_memory must be a number of bytes or a size such as '4G', not {v}"
            ))
        })?,
    };
    mondrian::memory::parse_bytes(&text)
        .map(Some)
        .map_err(py_err)
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

/// `$body` on the rows of `x` with the GIL released, `$v` the feature buffer in either
/// precision and `$d` its width (see `with_features`): the result, or with `counted`
/// first, the result and the number of rows. `$slf` is the core, whose
/// `last_input_address` notes the buffer.
macro_rules! on_rows {
    ($slf:ident, $py:ident, $x:expr, |$v:ident, $d:ident| $body:expr) => {
        with_features($x, &$slf.last_input_address, |f, _, $d| {
            each_precision!(f, $v => $py.detach(|| $body)).map_err(py_err)
        })
    };
    (counted $slf:ident, $py:ident, $x:expr, |$v:ident, $d:ident| $body:expr) => {
        with_features($x, &$slf.last_input_address, |f, n, $d| {
            let out = each_precision!(f, $v => $py.detach(|| $body));
            Ok((out.map_err(py_err)?, n))
        })
    };
}

/// A core: the Python class around a library model `inner`, with `wrap`, which makes one
/// around a model. `last_input_address` is the address of the last feature buffer read,
/// so tests can prove arrays are not copied; atomic because predictions take the model
/// shared, from any number of threads.
macro_rules! model_core {
    ($(#[$attr:meta])* $core:ident($model:ty)) => {
        $(#[$attr])*
        #[pyclass(module = "mondrian_ml._core")]
        pub(crate) struct $core {
            inner: $model,
            last_input_address: AtomicUsize,
        }

        impl $core {
            pub(crate) fn wrap(inner: $model) -> Self {
                $core {
                    inner,
                    last_input_address: AtomicUsize::new(0),
                }
            }
        }
    };
}

/// Class indices as the int64 array Python indexes `classes_` with.
fn class_indices(py: Python<'_>, classes: Vec<usize>) -> Bound<'_, numpy::PyArray1<i64>> {
    let out: Vec<i64> = classes.into_iter().map(|c| c as i64).collect();
    numpy::IntoPyArray::into_pyarray(out, py)
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

fn targets(y: &PyReadonlyArray1<'_, f64>) -> PyResult<Vec<f64>> {
    Ok(y.as_array().iter().copied().collect())
}

/// A Python callable as the library's progress observer: each report takes the GIL (the
/// training thread released it) and calls `callback(done, total)`.
fn progress_of(callback: Py<PyAny>) -> Progress {
    Progress::new(move |done, total| {
        Python::attach(|py| {
            if let Err(e) = callback.call1(py, (done, total)) {
                e.write_unraisable(py, None);
            }
        })
    })
}

/// A scaling as the Python constructors spell it: None (first batch), "identity" or a
/// list of (min, max) pairs.
fn scaling_spec<'py>(py: Python<'py>, scaling: &Scaling) -> PyResult<Bound<'py, PyAny>> {
    Ok(match scaling {
        Scaling::FirstBatch => py.None().into_bound(py),
        Scaling::Identity => PyString::new(py, "identity").into_any(),
        Scaling::Ranges(r) => r.clone().into_pyobject(py)?.into_any(),
    })
}

/// Feature weights as the Python constructors spell them: None (uniform), "relevance:P",
/// "relevance:cv" or a list of weights.
fn feature_weights_spec<'py>(
    py: Python<'py>,
    weights: &FeatureWeights,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match weights {
        FeatureWeights::Uniform => py.None().into_bound(py),
        FeatureWeights::Given(w) => w.clone().into_pyobject(py)?.into_any(),
        FeatureWeights::Relevance { power } => {
            PyString::new(py, &format!("relevance:{power}")).into_any()
        }
        FeatureWeights::RelevanceCv => PyString::new(py, "relevance:cv").into_any(),
        FeatureWeights::Auto => PyString::new(py, "auto").into_any(),
    })
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

/// The methods every core shares: training with or without weights, leaves, more trees,
/// progress, threads, shape, size, and the library's file format
/// (which pickling goes through).
macro_rules! common_methods {
    ($core:ident, $model:ty, $target:ty, $one:ty, $convert:ident) => {
        impl $core {
            fn train(
                &mut self,
                py: Python<'_>,
                x: &Bound<'_, PyAny>,
                y: &PyReadonlyArray1<'_, $target>,
                sample_weight: Option<PyReadonlyArray1<'_, f64>>,
                batch: bool,
            ) -> PyResult<()> {
                let y = $convert(y)?;
                let w: Option<Vec<f64>> = sample_weight.map(|w| w.as_array().to_vec());
                let model = &mut self.inner;
                with_features(x, &self.last_input_address, |f, _, d| {
                    each_precision!(f, v => py.detach(|| match (batch, &w) {
                        (true, None) => model.fit(v, d, &y),
                        (true, Some(w)) => model.fit_weighted(v, d, &y, w),
                        (false, None) => model.partial_fit(v, d, &y),
                        (false, Some(w)) => model.partial_fit_weighted(v, d, &y, w),
                    }))
                    .map_err(py_err)
                })
            }
        }

        #[pymethods]
        impl $core {
            /// Batch training on a C-contiguous float64/float32 matrix and its targets
            /// (int64 class indices or float64 values), with optional float64 sample
            /// weights (integer weight k counts as k copies of the row).
            #[pyo3(signature = (x, y, sample_weight = None))]
            fn fit(
                &mut self,
                py: Python<'_>,
                x: &Bound<'_, PyAny>,
                y: PyReadonlyArray1<'_, $target>,
                sample_weight: Option<PyReadonlyArray1<'_, f64>>,
            ) -> PyResult<()> {
                self.train(py, x, &y, sample_weight, true)
            }

            /// Online training on a mini-batch, in row order, with optional sample
            /// weights.
            #[pyo3(signature = (x, y, sample_weight = None))]
            fn partial_fit(
                &mut self,
                py: Python<'_>,
                x: &Bound<'_, PyAny>,
                y: PyReadonlyArray1<'_, $target>,
                sample_weight: Option<PyReadonlyArray1<'_, f64>>,
            ) -> PyResult<()> {
                self.train(py, x, &y, sample_weight, false)
            }

            /// Online training on one point given as a list of floats, with an optional
            /// sample weight.
            #[pyo3(signature = (x, y, weight = None))]
            fn partial_fit_one(
                &mut self,
                py: Python<'_>,
                x: Vec<f64>,
                y: $one,
                weight: Option<f64>,
            ) -> PyResult<()> {
                let d = x.len();
                let model = &mut self.inner;
                py.detach(|| match weight {
                    None => model.partial_fit(&x, d, &[y]),
                    Some(w) => model.partial_fit_weighted(&x, d, &[y], &[w]),
                })
                .map_err(py_err)
            }

            /// The leaf each row reaches in each tree, `n_rows × n_trees` int64 node
            /// ids; -1 for a tree that holds no point.
            fn apply<'py>(
                &self,
                py: Python<'py>,
                x: &Bound<'py, PyAny>,
            ) -> PyResult<Bound<'py, PyArray2<i64>>> {
                let model = &self.inner;
                let (leaves, n) = with_features(x, &self.last_input_address, |f, n, d| {
                    let l = each_precision!(f, v => py.detach(|| model.apply(v, d)));
                    Ok((l.map_err(py_err)?, n))
                })?;
                let m = self.inner.params().n_trees;
                let ids: Vec<i64> = leaves
                    .into_iter()
                    .map(|l| if l == NO_LEAF { -1 } else { i64::from(l) })
                    .collect();
                ids.into_pyarray(py).reshape([n, m])
            }

            /// Grows `n_more` trees on the points the model holds and adds them (warm
            /// start); the others are unchanged.
            fn add_trees(&mut self, py: Python<'_>, n_more: usize) -> PyResult<()> {
                let model = &mut self.inner;
                py.detach(|| model.add_trees(n_more)).map_err(py_err)
            }

            /// Calls `callback(done, total)` as groups of trees finish a training pass
            /// (from worker threads, taking the GIL); None removes it. An exception the
            /// callback raises is reported as unraisable and training goes on.
            #[pyo3(signature = (callback = None))]
            fn set_progress(&mut self, callback: Option<Py<PyAny>>) {
                self.inner.set_progress(callback.map(progress_of));
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

            /// Drops the state only training needs: the same predictions, a much smaller
            /// save, and no further training.
            fn compact(&mut self) -> PyResult<()> {
                self.inner.compact().map_err(py_err)
            }

            /// Whether `compact` made the model prediction-only.
            #[getter]
            fn is_compact(&self) -> bool {
                self.inner.is_compact()
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

        }
        file_methods!($core, $model);
    };
}

/// The tree-parallel shard methods every forest core shares (see the library's
/// `forest/shard.rs`): a shard of an unfitted core's forest, its range, split and merge.
/// Shards save, load and pickle through `file_methods!` (their own file kind).
macro_rules! shard_methods {
    ($core:ident, $model:ty) => {
        #[pymethods]
        impl $core {
            /// An untrained shard holding the trees `first_tree..first_tree +
            /// n_shard_trees` of the forest this core's parameters describe (the core
            /// itself is unchanged). Trained with the same calls on the same rows as the
            /// other shards, the shards merge into the forest one process grows.
            fn new_shard(&self, first_tree: usize, n_shard_trees: usize) -> PyResult<Self> {
                let params = self.inner.params().clone();
                <$model>::new_shard(params, first_tree, n_shard_trees)
                    .map(Self::wrap)
                    .map_err(py_err)
            }

            /// The global indices of the trees held, as `(start, end)`.
            #[getter]
            fn shard_range(&self) -> (usize, usize) {
                let r = self.inner.shard_range();
                (r.start, r.end)
            }

            /// Whether this core holds only part of its forest's trees.
            #[getter]
            fn is_shard(&self) -> bool {
                self.inner.is_shard()
            }

            /// `k` shards (copies; this core is unchanged) of contiguous tree ranges whose
            /// sizes differ by at most one, each with a copy of the points.
            fn split(&self, py: Python<'_>, k: usize) -> PyResult<Vec<Self>> {
                let model = self.inner.clone();
                let parts = py.detach(|| model.split(k)).map_err(py_err)?;
                Ok(parts.into_iter().map(Self::wrap).collect())
            }

            /// One core from shards given in any order (copies; the shards are unchanged);
            /// with all the trees it is the whole forest, bit for bit.
            #[staticmethod]
            fn merge(py: Python<'_>, shards: Vec<PyRef<'_, Self>>) -> PyResult<Self> {
                let models: Vec<$model> = shards.iter().map(|s| s.inner.clone()).collect();
                let merged = py.detach(|| <$model>::merge(models)).map_err(py_err)?;
                Ok(Self::wrap(merged))
            }
        }
    };
}

/// The methods of every core around a model the library saves: its bytes, files and
/// pickling (through the library's checksummed format).
macro_rules! file_methods {
    ($core:ident, $model:ty) => {
        #[pymethods]
        impl $core {
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

/// The methods of the Bayesian cores (`bart.rs`, `smc.rs`), which fit once on a whole data
/// set: fitting (`$fit_doc` its docstring), the width, and (through `file_methods!`) files
/// and pickling. `$target` is the numpy element type of `y` and `$convert` turns it into
/// the library's.
macro_rules! batch_methods {
    ($core:ident, $model:ty, $target:ty, $convert:ident, $fit_doc:literal) => {
        #[pymethods]
        impl $core {
            #[doc = $fit_doc]
            fn fit(
                &mut self,
                py: Python<'_>,
                x: &Bound<'_, PyAny>,
                y: PyReadonlyArray1<'_, $target>,
            ) -> PyResult<()> {
                let y = $convert(&y)?;
                on_rows!(self, py, x, |v, d| self.inner.fit(v, d, &y))
            }

            /// Width of the rows, once fitted.
            #[getter]
            fn n_features(&self) -> Option<usize> {
                self.inner.n_features()
            }
        }

        file_methods!($core, $model);
    };
}

mod bart;
mod classifier;
mod density;
mod kernel;
mod regressor;
mod smc;

/// What `load_any` returns: the kind ("classifier", "regressor", "polya", "bart-classifier",
/// "bart-regressor", "smc-classifier" or "smc-regressor"), the core, the label value of
/// each class (CLI files) and the feature names (CLI files of named data).
type Loaded = (&'static str, Py<PyAny>, Option<Vec<i64>>, Vec<String>);

/// A failure to read the model file at `path` as the Python exception: an I/O failure
/// names the file.
fn read_err(path: &std::path::Path) -> impl Fn(MondrianError) -> PyErr + '_ {
    move |e| match e {
        MondrianError::Io(io) => {
            PyOSError::new_err(format!("cannot read {}: {io}", path.display()))
        }
        other => py_err(other),
    }
}

/// Longest header start that names the kind: magic (8), version (4), kind length (1),
/// kind (≤ 255).
const HEADER_MAX: u64 = 8 + 4 + 1 + 255;

/// A model file of one of the Bayesian kinds `AnyModel` does not know (BART, SMC trees):
/// None when `path` holds another kind (or none).
fn load_bayes(py: Python<'_>, path: &std::path::Path) -> PyResult<Option<Loaded>> {
    use mondrian::bayes::{BartClassifier, BartRegressor, SmcTreeClassifier, SmcTreeRegressor};
    use mondrian::Persistent;
    use std::io::Read;
    /// The core `wrap` makes around the model in the file.
    fn core<M: Persistent + Send, C: pyo3::PyClass + Into<PyClassInitializer<C>>>(
        py: Python<'_>,
        path: &std::path::Path,
        wrap: fn(M) -> C,
    ) -> PyResult<Py<PyAny>> {
        let model = py.detach(|| M::load(path)).map_err(read_err(path))?;
        Ok(Py::new(py, wrap(model))?.into_any())
    }
    let mut head = Vec::new();
    let read = std::fs::File::open(path).and_then(|f| f.take(HEADER_MAX).read_to_end(&mut head));
    if read.is_err() {
        return Ok(None); // `AnyModel::load` reports it
    }
    let (kind, core) = match mondrian::persist::kind_of(&head).as_deref() {
        Some(BartRegressor::KIND) => (
            "bart-regressor",
            core(py, path, bart::BartRegressorCore::wrap)?,
        ),
        Some(BartClassifier::KIND) => (
            "bart-classifier",
            core(py, path, bart::BartClassifierCore::wrap)?,
        ),
        Some(SmcTreeRegressor::KIND) => (
            "smc-regressor",
            core(py, path, smc::SmcRegressorCore::wrap)?,
        ),
        Some(SmcTreeClassifier::KIND) => (
            "smc-classifier",
            core(py, path, smc::SmcClassifierCore::wrap)?,
        ),
        _ => return Ok(None),
    };
    Ok(Some((kind, core, None, Vec::new())))
}

/// Reads a model file of any kind the library writes (a core's `save`, the library's
/// `Persistent::save`, `mondrian train --model`), by the kind its header names.
#[pyfunction]
fn load_any(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Loaded> {
    use classifier::ClassifierCore;
    use mondrian::described::AnyModel;
    use regressor::RegressorCore;
    if let Some(loaded) = load_bayes(py, &path)? {
        return Ok(loaded);
    }
    let model = py
        .detach(|| AnyModel::load(&path))
        .map_err(read_err(&path))?;
    Ok(match model {
        AnyModel::Classifier(m) => {
            let core = Py::new(py, ClassifierCore::wrap(m))?.into_any();
            ("classifier", core, None, Vec::new())
        }
        AnyModel::Regressor(m) => {
            let core = Py::new(py, RegressorCore::wrap(m))?.into_any();
            ("regressor", core, None, Vec::new())
        }
        AnyModel::DescribedClassifier(f) => {
            let core = Py::new(py, ClassifierCore::wrap(f.forest))?.into_any();
            ("classifier", core, Some(f.classes), f.feature_names)
        }
        AnyModel::DescribedRegressor(f) => {
            let core = Py::new(py, RegressorCore::wrap(f.forest))?.into_any();
            ("regressor", core, None, f.feature_names)
        }
        AnyModel::Polya(m) => {
            let core = Py::new(py, density::PolyaCore::wrap(m))?.into_any();
            ("polya", core, None, Vec::new())
        }
    })
}

/// The compiled core of `mondrian_ml`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<classifier::ClassifierCore>()?;
    m.add_class::<regressor::RegressorCore>()?;
    m.add_class::<density::PolyaCore>()?;
    m.add_class::<kernel::KernelFeaturesCore>()?;
    m.add_class::<kernel::KernelRidgeCore>()?;
    m.add_class::<smc::SmcClassifierCore>()?;
    m.add_class::<smc::SmcRegressorCore>()?;
    m.add_class::<bart::BartRegressorCore>()?;
    m.add_class::<bart::BartClassifierCore>()?;
    m.add_function(wrap_pyfunction!(kernel::kernel_sweep, m)?)?;
    m.add_function(wrap_pyfunction!(load_any, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
