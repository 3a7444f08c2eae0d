//! `PolyaCore`: the Mondrian Pólya forest (spec `mondrian-polya-forest.md`) for
//! `mondrian_ml.MondrianPolyaForest`; files and pickling come from `file_methods!`.

use std::sync::atomic::{AtomicUsize, Ordering};

use mondrian::model::Forget;
use mondrian::{
    Explanation, MondrianError, MondrianPolyaForest, Persistent, PolyaParams, PolyaSum,
    PolyaVariant, RowScore, Step,
};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::{parse_memory, parse_scaling, py_err, scaling_spec, with_features, Features};

model_core!(
    /// The Rust Mondrian Pólya forest.
    PolyaCore(MondrianPolyaForest)
);

type Scores<'py> = (
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<bool>>,
);

fn scores_arrays(py: Python<'_>, rows: Vec<RowScore>) -> Scores<'_> {
    let mass: Vec<f64> = rows.iter().map(|r| r.mass).collect();
    let log_density: Vec<f64> = rows.iter().map(|r| r.log_density).collect();
    let outside: Vec<bool> = rows.iter().map(|r| r.out_of_domain).collect();
    (
        mass.into_pyarray(py),
        log_density.into_pyarray(py),
        outside.into_pyarray(py),
    )
}

fn explanation_dict<'py>(py: Python<'py>, e: &Explanation) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("mass", e.score.mass)?;
    d.set_item("log_density", e.score.log_density)?;
    d.set_item("out_of_domain", e.score.out_of_domain)?;
    d.set_item("attribution", e.attribution.clone())?;
    d.set_item("out_of_box", e.out_of_box.clone())?;
    d.set_item("n_complement", e.n_complement)?;
    let trees = PyList::empty(py);
    for t in &e.trees {
        let td = PyDict::new(py);
        td.set_item("mass", t.mass)?;
        td.set_item("kind", format!("{:?}", t.kind))?;
        td.set_item("encoding", &t.encoding)?;
        td.set_item("critical_step", t.critical_step)?;
        let steps = PyList::empty(py);
        for s in &t.steps {
            let sd = PyDict::new(py);
            match s {
                Step::Cut {
                    dim,
                    threshold,
                    side,
                    share,
                } => {
                    sd.set_item("kind", "cut")?;
                    sd.set_item("dim", dim)?;
                    sd.set_item("threshold", threshold)?;
                    sd.set_item("side", if *side == 0 { "<=" } else { ">" })?;
                    sd.set_item("share", share)?;
                }
                Step::Restrict {
                    inside,
                    share,
                    excess,
                } => {
                    sd.set_item("kind", "restrict")?;
                    sd.set_item("inside", inside)?;
                    sd.set_item("share", share)?;
                    sd.set_item("excess", excess.clone())?;
                }
            }
            steps.append(sd)?;
        }
        td.set_item("steps", steps)?;
        trees.append(td)?;
    }
    d.set_item("trees", trees)?;
    Ok(d)
}

impl PolyaCore {
    fn rows<R: Send>(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        call: impl Fn(&MondrianPolyaForest, Features<'_>, usize) -> mondrian::Result<R> + Send + Sync,
    ) -> PyResult<R> {
        let model = &self.inner;
        with_features(x, &self.last_input_address, |f, _, d| {
            py.detach(|| call(model, f, d)).map_err(py_err)
        })
    }
}

#[pymethods]
impl PolyaCore {
    /// Builds an unfitted forest. `variant` is "streaming" (sMPF) or "batch" (bMPF);
    /// `max_depth` None means no cap; `scaling` None is the paper's rule (min–max from
    /// the first batch when there are at least 50 features, raw features otherwise),
    /// else "first_batch", "identity" or (min, max) pairs.
    #[new]
    #[pyo3(signature = (
        n_trees = 100,
        variant = "streaming",
        max_depth = Some(10),
        lifetime = f64::INFINITY,
        gamma = 1.0,
        seed = 0,
        n_threads = 1,
        scaling = None,
        window = None,
        max_memory = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        n_trees: usize,
        variant: &str,
        max_depth: Option<usize>,
        lifetime: f64,
        gamma: f64,
        seed: u64,
        n_threads: usize,
        scaling: Option<&Bound<'_, PyAny>>,
        window: Option<usize>,
        max_memory: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let params = PolyaParams {
            variant: PolyaVariant::parse(variant).map_err(py_err)?,
            n_trees,
            max_depth,
            lifetime,
            gamma,
            scaling: match scaling {
                None => None,
                Some(s) => Some(parse_scaling(Some(s))?),
            },
            seed,
            n_threads,
            window,
            max_memory: parse_memory(max_memory)?,
        };
        Ok(Self::wrap(
            MondrianPolyaForest::new(params).map_err(py_err)?,
        ))
    }

    /// Trains a new forest on a C-contiguous float64/float32 matrix.
    fn fit(&mut self, py: Python<'_>, x: &Bound<'_, PyAny>) -> PyResult<()> {
        on_rows!(self, py, x, |v, d| self.inner.fit(v, d))
    }

    /// Adds rows, in order (with a window, the oldest leave first).
    fn partial_fit(&mut self, py: Python<'_>, x: &Bound<'_, PyAny>) -> PyResult<()> {
        on_rows!(self, py, x, |v, d| self.inner.partial_fit(v, d))
    }

    /// Adds one row given as a list of floats.
    fn partial_fit_one(&mut self, py: Python<'_>, x: Vec<f64>) -> PyResult<()> {
        let d = x.len();
        let model = &mut self.inner;
        py.detach(|| model.partial_fit(&x, d)).map_err(py_err)
    }

    /// Mean leaf mass, log-density (raw units) and the out-of-domain flag per row.
    fn evaluate<'py>(&self, py: Python<'py>, x: &Bound<'py, PyAny>) -> PyResult<Scores<'py>> {
        let rows = self.rows(py, x, |m, f, d| each_precision!(f, v => m.evaluate(v, d)))?;
        Ok(scores_arrays(py, rows))
    }

    /// Mean leaf mass and log-density of one row given as a list of floats.
    fn evaluate_one(&self, py: Python<'_>, x: Vec<f64>) -> PyResult<(f64, f64)> {
        let d = x.len();
        let model = &self.inner;
        let r = py.detach(|| model.evaluate(&x, d)).map_err(py_err)?[0];
        Ok((r.mass, r.log_density))
    }

    /// Streams the rows one at a time (window deletion, insertion, score; `prequential`:
    /// score before inserting); returns the scores as `evaluate` does.
    #[pyo3(signature = (x, prequential = false))]
    fn score_stream<'py>(
        &mut self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        prequential: bool,
    ) -> PyResult<Scores<'py>> {
        let rows = on_rows!(self, py, x, |v, d| self.inner.score_stream(
            v,
            d,
            prequential
        ))?;
        Ok(scores_arrays(py, rows))
    }

    /// Each tree's leaf mass per row, `n_rows × n_trees`; a shard gives its own trees'
    /// columns only (`n_rows × (end − start)` of its `shard_range`), in tree order.
    fn mass_per_tree<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let m = self.inner.shard_range().len();
        let out = self.rows(
            py,
            x,
            |model, f, d| each_precision!(f, v => model.mass_per_tree(v, d)),
        )?;
        let n = out.len() / m.max(1);
        out.into_pyarray(py).reshape([n, m])
    }

    /// The ⌈φ·M⌉-th smallest tree mass per row.
    fn order_stat_score<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        phi: f64,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let out = self.rows(
            py,
            x,
            |m, f, d| each_precision!(f, v => m.order_stat_score(v, d, phi)),
        )?;
        Ok(out.into_pyarray(py))
    }

    /// Whether each row is an (ε, φ)-anomaly.
    fn is_anomaly<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        epsilon: f64,
        phi: f64,
    ) -> PyResult<Bound<'py, PyArray1<bool>>> {
        let out = self.rows(
            py,
            x,
            |m, f, d| each_precision!(f, v => m.is_anomaly(v, d, epsilon, phi)),
        )?;
        Ok(out.into_pyarray(py))
    }

    /// Why one row (a list of floats) scores as it does, as a dict.
    fn explain<'py>(&self, py: Python<'py>, x: Vec<f64>) -> PyResult<Bound<'py, PyDict>> {
        let model = &self.inner;
        let e = py.detach(|| model.explain(&x)).map_err(py_err)?;
        explanation_dict(py, &e)
    }

    /// Removes the points with these ids (exact deletion).
    fn forget(&mut self, py: Python<'_>, ids: PyReadonlyArray1<'_, u64>) -> PyResult<()> {
        let ids: Vec<u64> = ids.as_array().iter().copied().collect();
        let model = &mut self.inner;
        py.detach(|| model.forget(&ids)).map_err(py_err)
    }

    /// Ids of the points held, oldest first.
    fn point_ids<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        self.inner.point_ids().into_pyarray(py)
    }

    /// Points held.
    #[getter]
    fn n_points(&self) -> usize {
        self.inner.n_points()
    }

    /// Number of features, once trained.
    #[getter]
    fn n_features(&self) -> Option<usize> {
        self.inner.n_features()
    }

    /// Worker threads.
    #[getter]
    fn n_threads(&self) -> usize {
        self.inner.params().n_threads
    }

    /// Sets the worker threads (never changes the model).
    fn set_n_threads(&mut self, n_threads: usize) -> PyResult<()> {
        self.inner.set_n_threads(n_threads).map_err(py_err)
    }

    /// The parameters, as the Python constructor spells them.
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = self.inner.params();
        let d = PyDict::new(py);
        d.set_item("n_estimators", p.n_trees)?;
        d.set_item(
            "variant",
            match p.variant {
                PolyaVariant::Streaming => "streaming",
                PolyaVariant::Batch => "batch",
            },
        )?;
        d.set_item("max_depth", p.max_depth)?;
        d.set_item("lifetime", p.lifetime)?;
        d.set_item("gamma", p.gamma)?;
        match &p.scaling {
            None => d.set_item("feature_ranges", py.None())?,
            Some(mondrian::Scaling::FirstBatch) => d.set_item("feature_ranges", "first_batch")?,
            Some(s) => d.set_item("feature_ranges", scaling_spec(py, s)?)?,
        }
        d.set_item("window", p.window)?;
        d.set_item("random_state", p.seed)?;
        d.set_item("n_threads", p.n_threads)?;
        Ok(d)
    }

    /// Address of the last feature buffer the model read (for zero-copy tests).
    #[getter]
    fn _last_input_address(&self) -> usize {
        self.last_input_address.load(Ordering::Relaxed)
    }
}

file_methods!(PolyaCore, MondrianPolyaForest);
shard_methods!(PolyaCore, MondrianPolyaForest);

/// A shard's part of the scores as Python holds it: (first tree, trees in the shard, trees
/// in the forest, mass sums, log density sums, all-outside flags), one entry a row.
type PolyaPart<'py> = (
    usize,
    usize,
    usize,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<bool>>,
);

/// A part as `combine_evaluations` takes it: the arrays of `PolyaPart` as any objects
/// (read by [`array_values`]).
type PartIn<'py> = (
    usize,
    usize,
    usize,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
);

/// The values of a 1-d array of `T`, copied. An array that is not contiguous or not
/// aligned (arrays that arrive through Dask's RPC can be misaligned) is first copied by
/// NumPy, which makes it both.
fn array_values<T: numpy::Element + Copy>(a: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<T>> {
    let wrong = |_| PyValueError::new_err(format!("{what} must be a 1-d array of its dtype"));
    let array: PyReadonlyArray1<'_, T> = a.extract().map_err(wrong)?;
    if let Ok(values) = array.as_slice() {
        return Ok(values.to_vec());
    }
    let copy: PyReadonlyArray1<'_, T> = a.call_method0("copy")?.extract().map_err(wrong)?;
    let values = copy
        .as_slice()
        .map_err(|_| PyValueError::new_err(format!("{what}: cannot read the array")))?;
    Ok(values.to_vec())
}

#[pymethods]
impl PolyaCore {
    /// This core's part of `evaluate` (see the library's `evaluate_sum`): `(first_tree,
    /// n_shard_trees, n_trees, mass_sum, log_density_sum, all_outside)`, one entry a row;
    /// `combine_evaluations` joins the parts of shards covering all the trees.
    fn evaluate_sum<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<PolyaPart<'py>> {
        let p = self.rows(
            py,
            x,
            |m, f, d| each_precision!(f, v => m.evaluate_sum(v, d)),
        )?;
        Ok((
            p.first_tree,
            p.n_shard_trees,
            p.n_trees,
            p.mass_sum.into_pyarray(py),
            p.log_density_sum.into_pyarray(py),
            p.all_outside.into_pyarray(py),
        ))
    }

    /// The whole forest's `(mass, log_density, out_of_domain)`, as `evaluate` returns
    /// them, from the `evaluate_sum` parts of shards covering all its trees, in any order.
    #[staticmethod]
    fn combine_evaluations<'py>(py: Python<'py>, parts: Vec<PartIn<'py>>) -> PyResult<Scores<'py>> {
        let mut sums = Vec::with_capacity(parts.len());
        for (first_tree, n_shard_trees, n_trees, mass, log_density, outside) in &parts {
            sums.push(PolyaSum {
                first_tree: *first_tree,
                n_shard_trees: *n_shard_trees,
                n_trees: *n_trees,
                mass_sum: array_values(mass, "mass_sum")?,
                log_density_sum: array_values(log_density, "log_density_sum")?,
                all_outside: array_values(outside, "all_outside")?,
            });
        }
        let rows = py
            .detach(|| MondrianPolyaForest::combine_evaluations(sums))
            .map_err(py_err)?;
        Ok(scores_arrays(py, rows))
    }
}
