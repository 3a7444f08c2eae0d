//! `ClassifierCore`: the classifier's own methods; the shared ones come from
//! `common_methods!`.

use std::sync::atomic::{AtomicUsize, Ordering};

use mondrian::forest::NO_LEAF;
use mondrian::{
    BranchCounts, ClassifierParams, MondrianError, MondrianForestClassifier, Persistent,
};
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::{
    feature_weights_spec, labels, parse_feature_weights, parse_memory, parse_scaling, progress_of,
    py_err, scaling_spec, summary_dict, with_features, Features,
};

model_core!(
    /// The Rust Mondrian forest classifier. Labels are class indices `0..K`; the Python
    /// classes map user labels to indices.
    ClassifierCore(MondrianForestClassifier)
);

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
        max_memory = None,
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
        max_memory: Option<&Bound<'_, PyAny>>,
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
            max_memory: parse_memory(max_memory)?,
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

    /// The parameters under the Python class's names (`n_threads` and `n_classes` as the
    /// core has them), for an estimator made around a loaded core.
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = self.inner.params();
        let d = PyDict::new(py);
        d.set_item("n_estimators", p.n_trees)?;
        d.set_item("lifetime", p.lifetime)?;
        d.set_item("discount_factor", p.discount_factor)?;
        d.set_item("bagging", p.bagging)?;
        d.set_item("min_samples_split", p.min_samples_split)?;
        d.set_item("pause_on_pure", p.pause_on_pure)?;
        let branch = match p.branch_counts {
            BranchCounts::Paper => "paper",
            BranchCounts::Reference => "reference",
        };
        d.set_item("branch_counts", branch)?;
        d.set_item("feature_ranges", scaling_spec(py, &p.scaling)?)?;
        d.set_item(
            "feature_weights",
            feature_weights_spec(py, &p.feature_weights)?,
        )?;
        d.set_item("window", p.window)?;
        d.set_item("random_state", p.seed)?;
        d.set_item("n_threads", p.n_threads)?;
        d.set_item("n_classes", p.n_classes)?;
        Ok(d)
    }
}

common_methods!(ClassifierCore, MondrianForestClassifier, i64, usize, labels);
shard_methods!(ClassifierCore, MondrianForestClassifier);

/// A shard's part of the class probabilities as Python holds it: (first tree, trees in
/// the shard, trees in the forest, classes, `n_rows × n_classes` sums).
type ProbaPart<'py> = (usize, usize, usize, usize, Bound<'py, PyArray2<f64>>);

#[pymethods]
impl ClassifierCore {
    /// This shard's part of `predict_proba` (see the library's `predict_proba_sum`):
    /// `(first_tree, n_shard_trees, n_trees, n_classes, sums)`, `sums` of shape
    /// `n_rows × n_classes`; `combine_proba` joins the parts of all shards.
    fn predict_proba_sum<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<ProbaPart<'py>> {
        let model = &self.inner;
        let (part, n) = with_features(x, &self.last_input_address, |f, n, d| {
            let p = each_precision!(f, v => py.detach(|| model.predict_proba_sum(v, d)));
            Ok((p.map_err(py_err)?, n))
        })?;
        let sums = part.sums.into_pyarray(py).reshape([n, part.n_classes])?;
        Ok((
            part.first_tree,
            part.n_shard_trees,
            part.n_trees,
            part.n_classes,
            sums,
        ))
    }

    /// The whole forest's class probabilities (`n_rows × n_classes`) from the
    /// `predict_proba_sum` parts of shards covering all its trees, in any order.
    #[staticmethod]
    fn combine_proba<'py>(
        py: Python<'py>,
        parts: Vec<(usize, usize, usize, usize, PyReadonlyArray2<'py, f64>)>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let mut n = 0;
        let mut k = 0;
        let mut sums = Vec::with_capacity(parts.len());
        for (first_tree, n_shard_trees, n_trees, n_classes, s) in parts {
            n = s.shape()[0];
            k = n_classes;
            let values = s
                .as_slice()
                .map_err(|_| PyValueError::new_err("sums must be C-contiguous"))?
                .to_vec();
            sums.push(mondrian::ProbaSum {
                first_tree,
                n_shard_trees,
                n_trees,
                n_classes,
                sums: values,
            });
        }
        let out = py
            .detach(|| MondrianForestClassifier::combine_proba(sums))
            .map_err(py_err)?;
        out.into_pyarray(py).reshape([n, k])
    }
}
