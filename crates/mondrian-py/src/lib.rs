//! Python bindings of the `mondrian` library: the `mondrian_ml._core` extension module.
//!
//! This crate only converts arguments and errors. Every algorithm lives in the `mondrian`
//! crate; the scikit-learn and river interfaces are thin Python classes over [`ClassifierCore`]
//! (see `python/mondrian_ml`).

use mondrian::{
    BranchCounts, ClassifierParams, FeatureValue, MondrianError, MondrianForestClassifier, Scaling,
};
use numpy::{
    Element, IntoPyArray, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2,
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

/// A 2-D feature matrix borrowed from a numpy array, float64 or float32.
enum Matrix<'py> {
    F64(PyReadonlyArray2<'py, f64>),
    F32(PyReadonlyArray2<'py, f32>),
}

impl<'py> Matrix<'py> {
    fn extract(x: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(a) = x.extract::<PyReadonlyArray2<'py, f64>>() {
            return Ok(Matrix::F64(a));
        }
        if let Ok(a) = x.extract::<PyReadonlyArray2<'py, f32>>() {
            return Ok(Matrix::F32(a));
        }
        Err(PyTypeError::new_err(
            "X must be a 2-D numpy array of float64 or float32",
        ))
    }
}

/// The row-major buffer of a C-contiguous array, without copying it.
fn slice<'a, T: Element>(a: &'a PyReadonlyArray2<'_, T>) -> PyResult<(&'a [T], usize, usize)> {
    let shape = a.shape();
    let values = a
        .as_slice()
        .map_err(|_| PyValueError::new_err("X must be C-contiguous (row-major)"))?;
    Ok((values, shape[0], shape[1]))
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

/// The Rust Mondrian forest classifier. Labels are class indices `0..K`; the Python
/// classes map user labels to indices.
#[pyclass(module = "mondrian_ml._core")]
struct ClassifierCore {
    inner: MondrianForestClassifier,
    /// Address of the last feature buffer read, so tests can prove arrays are not copied.
    /// Atomic because predictions take the model shared, from any number of threads.
    last_input_address: AtomicUsize,
}

impl ClassifierCore {
    fn note_input(&self, address: usize) {
        self.last_input_address.store(address, Ordering::Relaxed);
    }

    fn train(
        &mut self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        y: &PyReadonlyArray1<'_, i64>,
        batch: bool,
    ) -> PyResult<()> {
        let y = labels(y)?;
        fn run<T: FeatureValue>(
            model: &mut MondrianForestClassifier,
            py: Python<'_>,
            x: &[T],
            d: usize,
            y: &[usize],
            batch: bool,
        ) -> PyResult<()> {
            py.detach(|| {
                if batch {
                    model.fit(x, d, y)
                } else {
                    model.partial_fit(x, d, y)
                }
            })
            .map_err(py_err)
        }
        match Matrix::extract(x)? {
            Matrix::F64(a) => {
                let (values, _, d) = slice(&a)?;
                self.note_input(values.as_ptr() as usize);
                run(&mut self.inner, py, values, d, &y, batch)
            }
            Matrix::F32(a) => {
                let (values, _, d) = slice(&a)?;
                self.note_input(values.as_ptr() as usize);
                run(&mut self.inner, py, values, d, &y, batch)
            }
        }
    }
}

#[pymethods]
impl ClassifierCore {
    /// Builds an unfitted forest. `scaling` is `None` / `"first_batch"` (min–max from the
    /// first training call), `"identity"`, or a list of `(min, max)` per feature.
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
        };
        Ok(ClassifierCore {
            inner: MondrianForestClassifier::new(params).map_err(py_err)?,
            last_input_address: AtomicUsize::new(0),
        })
    }

    /// Batch training on a C-contiguous float64/float32 matrix and int64 class indices.
    fn fit(
        &mut self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        y: PyReadonlyArray1<'_, i64>,
    ) -> PyResult<()> {
        self.train(py, x, &y, true)
    }

    /// Online training on a mini-batch, in row order.
    fn partial_fit(
        &mut self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        y: PyReadonlyArray1<'_, i64>,
    ) -> PyResult<()> {
        self.train(py, x, &y, false)
    }

    /// Online training on one point given as a list of floats.
    fn partial_fit_one(&mut self, py: Python<'_>, x: Vec<f64>, y: usize) -> PyResult<()> {
        let d = x.len();
        let model = &mut self.inner;
        py.detach(|| model.partial_fit(&x, d, &[y])).map_err(py_err)
    }

    /// Class probabilities, `n_rows × n_classes`.
    fn predict_proba<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let model = &self.inner;
        let (proba, n) = match Matrix::extract(x)? {
            Matrix::F64(a) => {
                let (values, n, d) = slice(&a)?;
                self.note_input(values.as_ptr() as usize);
                (py.detach(|| model.predict_proba(values, d)), n)
            }
            Matrix::F32(a) => {
                let (values, n, d) = slice(&a)?;
                self.note_input(values.as_ptr() as usize);
                (py.detach(|| model.predict_proba(values, d)), n)
            }
        };
        let proba = proba.map_err(py_err)?;
        let k = self.inner.n_classes();
        proba.into_pyarray(py).reshape([n, k])
    }

    /// Class probabilities of one point given as a list of floats.
    fn predict_proba_one(&self, py: Python<'_>, x: Vec<f64>) -> PyResult<Vec<f64>> {
        let d = x.len();
        let model = &self.inner;
        py.detach(|| model.predict_proba(&x, d)).map_err(py_err)
    }

    /// Worker threads for training and prediction (0: every core). Never changes the model.
    fn set_n_threads(&mut self, n_threads: usize) {
        self.inner.set_n_threads(n_threads);
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

    /// Number of classes K the trees hold.
    #[getter]
    fn n_classes(&self) -> usize {
        self.inner.n_classes()
    }

    /// Training points seen so far (bagging copies not counted).
    #[getter]
    fn n_samples_seen(&self) -> usize {
        self.inner.n_samples_seen()
    }

    /// The discount rate γ in use.
    #[getter]
    fn gamma(&self) -> f64 {
        self.inner.gamma()
    }

    /// Address of the last feature buffer the model read (for zero-copy tests).
    #[getter]
    fn _last_input_address(&self) -> usize {
        self.last_input_address.load(Ordering::Relaxed)
    }

    /// Size and depth statistics as a dict.
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.summary();
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

    /// The model in the library's file format (the same bytes `mondrian` saves).
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.inner.to_bytes().map_err(py_err)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// A model from [`to_bytes`](Self::to_bytes) or a file saved by the library.
    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        Ok(ClassifierCore {
            inner: MondrianForestClassifier::from_bytes(data).map_err(py_err)?,
            last_input_address: AtomicUsize::new(0),
        })
    }

    /// Saves to a file in the library's format.
    fn save(&self, path: std::path::PathBuf) -> PyResult<()> {
        self.inner.save(path).map_err(py_err)
    }

    /// Loads a file saved by the library or the `mondrian` command's library format.
    #[staticmethod]
    fn load(path: std::path::PathBuf) -> PyResult<Self> {
        Ok(ClassifierCore {
            inner: MondrianForestClassifier::load(path).map_err(py_err)?,
            last_input_address: AtomicUsize::new(0),
        })
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

/// The compiled core of `mondrian_ml`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ClassifierCore>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
