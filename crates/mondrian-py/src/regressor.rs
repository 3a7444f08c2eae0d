//! `RegressorCore`: the regressor's own methods; the shared ones come from
//! `common_methods!`.

use std::sync::atomic::{AtomicUsize, Ordering};

use mondrian::forest::NO_LEAF;
use mondrian::{
    Calibration, Estimate, HyperSettings, MondrianError, MondrianForestRegressor, NoiseRule,
    Persistent, PredictionMode, RegressorParams,
};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::{
    feature_weights_spec, parse_feature_weights, parse_memory, parse_scaling, progress_of, py_err,
    scaling_spec, summary_dict, targets, with_features, Features,
};

model_core!(
    /// The Rust Mondrian forest regressor (spec `mf-regression.md`).
    RegressorCore(MondrianForestRegressor)
);

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
        max_memory = None,
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
        max_memory: Option<&Bound<'_, PyAny>>,
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
            max_memory: parse_memory(max_memory)?,
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

    /// The parameters under the Python class's names (`n_threads` as the core has it),
    /// for an estimator made around a loaded core. Settings the Python class does not
    /// take (a known θ or γ2, the variance floor) stay in the core only.
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = self.inner.params();
        let d = PyDict::new(py);
        d.set_item("n_estimators", p.n_trees)?;
        d.set_item("min_samples_split", p.min_samples_split)?;
        let mode = match p.mode {
            PredictionMode::Exact => "exact",
            PredictionMode::ExactQuadrature => "quadrature",
            PredictionMode::Fast => "fast",
        };
        d.set_item("mode", mode)?;
        match p.hyper.noise {
            NoiseRule::Thesis => d.set_item("noise", "thesis")?,
            NoiseRule::Reference => d.set_item("noise", "reference")?,
            NoiseRule::Fixed(v) => d.set_item("noise", v)?,
        }
        let estimate = match p.hyper.estimate {
            Estimate::Heuristic => "heuristic",
            Estimate::MarginalLikelihood => "marginal_likelihood",
        };
        d.set_item("theta_estimate", estimate)?;
        d.set_item("k_cap", p.hyper.k_cap)?;
        d.set_item("gamma2_divisor", p.hyper.gamma2_divisor)?;
        d.set_item("bagging", p.bagging)?;
        d.set_item("feature_ranges", scaling_spec(py, &p.scaling)?)?;
        d.set_item(
            "feature_weights",
            feature_weights_spec(py, &p.feature_weights)?,
        )?;
        let calibration = match p.calibration {
            Calibration::None => "none",
            Calibration::Cv => "cv",
            Calibration::Auto => "auto",
        };
        d.set_item("calibration", calibration)?;
        d.set_item("window", p.window)?;
        d.set_item("random_state", p.seed)?;
        d.set_item("n_threads", p.n_threads)?;
        Ok(d)
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

common_methods!(RegressorCore, MondrianForestRegressor, f64, f64, targets);
shard_methods!(RegressorCore, MondrianForestRegressor);

/// A shard's part of the predictive moments as Python holds it: (first tree, trees in
/// the shard, trees in the forest, mean, m2, variance sum), the arrays one value per row.
type SumsPart<'py> = (
    usize,
    usize,
    usize,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
);

#[pymethods]
impl RegressorCore {
    /// This shard's part of `predict` (see the library's `predict_sums`):
    /// `(first_tree, n_shard_trees, n_trees, mean, m2, variance_sum)`;
    /// `combine_predictions` joins the parts of all shards.
    fn predict_sums<'py>(&self, py: Python<'py>, x: &Bound<'py, PyAny>) -> PyResult<SumsPart<'py>> {
        let model = &self.inner;
        let p = with_features(x, &self.last_input_address, |f, _, d| {
            each_precision!(f, v => py.detach(|| model.predict_sums(v, d))).map_err(py_err)
        })?;
        Ok((
            p.first_tree,
            p.n_shard_trees,
            p.n_trees,
            p.mean.into_pyarray(py),
            p.m2.into_pyarray(py),
            p.variance_sum.into_pyarray(py),
        ))
    }

    /// The whole forest's predictive (mean, variance, between-tree variance) from the
    /// `predict_sums` parts of shards covering all its trees, in any order.
    #[staticmethod]
    #[allow(clippy::type_complexity)]
    fn combine_predictions<'py>(
        py: Python<'py>,
        parts: Vec<(usize, usize, usize, Vec<f64>, Vec<f64>, Vec<f64>)>,
    ) -> PyResult<(
        Bound<'py, PyArray1<f64>>,
        Bound<'py, PyArray1<f64>>,
        Bound<'py, PyArray1<f64>>,
    )> {
        let sums = parts
            .into_iter()
            .map(
                |(first_tree, n_shard_trees, n_trees, mean, m2, variance_sum)| {
                    mondrian::RegressionSums {
                        first_tree,
                        n_shard_trees,
                        n_trees,
                        mean,
                        m2,
                        variance_sum,
                    }
                },
            )
            .collect();
        let p = py
            .detach(|| MondrianForestRegressor::combine_predictions(sums))
            .map_err(py_err)?;
        Ok((
            p.mean.into_pyarray(py),
            p.variance.into_pyarray(py),
            p.between_trees.into_pyarray(py),
        ))
    }
}
