//! Input validation and feature scaling.
//!
//! The Mondrian process is not scale-invariant: split rates and dimensions follow the
//! side lengths of the data boxes. The paper rescales every feature to [0, 1], and its
//! default discount γ = 10·D assumes that scale (spec `mf-classification.md` §3.1, §8.1).

use serde::{Deserialize, Serialize};

use crate::error::{MondrianError, Result};
use crate::process::Feature;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// An input feature type: `f64` or `f32`. Models read either without converting the
/// caller's buffer first (a Python caller's float32 array is used in place).
pub trait FeatureValue: Copy + Send + Sync + sealed::Sealed + 'static {
    /// The value as `f64` (exact for both types).
    fn to_f64(self) -> f64;
}

impl FeatureValue for f64 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
}

impl FeatureValue for f32 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
}

/// A row-major matrix view: `values.len() == n_rows · n_features`.
#[derive(Debug, Clone, Copy)]
pub struct Rows<'a, T: FeatureValue = f64> {
    values: &'a [T],
    n_features: usize,
}

impl<'a, T: FeatureValue> Rows<'a, T> {
    /// Wraps a row-major buffer; fails when it is not a whole number of rows.
    pub fn new(values: &'a [T], n_features: usize) -> Result<Self> {
        if n_features == 0 {
            return Err(MondrianError::InvalidParameter {
                name: "n_features",
                reason: "must be at least 1".into(),
            });
        }
        if !values.len().is_multiple_of(n_features) {
            return Err(MondrianError::RaggedMatrix {
                len: values.len(),
                n_features,
            });
        }
        Ok(Rows { values, n_features })
    }

    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.values.len() / self.n_features
    }

    /// Number of features per row.
    pub fn n_features(&self) -> usize {
        self.n_features
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> &'a [T] {
        &self.values[i * self.n_features..(i + 1) * self.n_features]
    }

    /// All values, row-major.
    pub fn values(&self) -> &'a [T] {
        self.values
    }

    /// Checks the width against the model's and that every value is finite.
    pub fn validate(&self, expected_features: Option<usize>) -> Result<()> {
        if let Some(expected) = expected_features {
            if expected != self.n_features {
                return Err(MondrianError::WidthMismatch {
                    row: 0,
                    expected,
                    got: self.n_features,
                });
            }
        }
        if let Some(pos) = self.values.iter().position(|v| !v.to_f64().is_finite()) {
            return Err(MondrianError::NonFinite {
                row: pos / self.n_features,
                feature: pos % self.n_features,
                value: self.values[pos].to_f64(),
            });
        }
        Ok(())
    }
}

/// How a model maps raw features into the space its trees live in.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub enum Scaling {
    /// Min–max scaling to [0, 1] fixed from the data of the first `fit` or `partial_fit`
    /// call, then frozen: moving it later would bend the trees already grown.
    #[default]
    FirstBatch,
    /// Min–max scaling from ranges the user gives: one `(min, max)` per feature.
    Ranges(Vec<(f64, f64)>),
    /// Use features as they come.
    Identity,
}

impl Scaling {
    /// The frozen scaler for a model whose first training rows are `rows`.
    pub fn scaler_for<T: FeatureValue>(&self, rows: &Rows<T>) -> Result<FeatureScaler> {
        let d = rows.n_features();
        match self {
            Scaling::FirstBatch => Ok(FeatureScaler::fit(rows)),
            Scaling::Identity => Ok(FeatureScaler::identity(d)),
            Scaling::Ranges(r) => {
                if r.len() != d {
                    return Err(MondrianError::WidthMismatch {
                        row: 0,
                        expected: r.len(),
                        got: d,
                    });
                }
                FeatureScaler::from_ranges(r)
            }
        }
    }
}

/// How much room each feature gets in the trees' space, on top of the scaling.
///
/// A Mondrian process cuts a dimension at a rate proportional to its side length, so
/// stretching feature d by `w_d` makes cuts on it `w_d` times as likely and its distances
/// `w_d` times as large: the process is the Mondrian of the rescaled box, with every
/// property it has (projectivity, online ≡ batch). Since the splits never look at the
/// targets, features that do not matter take as many cuts as those that do; weighting
/// them down is the remedy the thesis names for irrelevant features (ch. 6, §6.5.4).
/// With a finite lifetime λ the weights also change how far trees grow (the root's cut
/// rate is Σ w); λ is not rescaled.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub enum FeatureWeights {
    /// Every feature weight 1 (the papers' setting).
    #[default]
    Uniform,
    /// Weights given by the user, one per feature: each 0 or in
    /// [[`MIN_WEIGHT`], [`MAX_WEIGHT`]], not all 0.
    Given(Vec<f64>),
    /// Weights learnt from the first training call: a pilot forest with uniform weights
    /// is grown on it, each feature scores the impurity its splits remove (summed over
    /// every split of every pilot tree), and `w_d = (score_d / max score)^power`. The
    /// pilot's splits ignore the targets, so a feature scores by what random cuts along it
    /// explain, not by having been chosen. A larger power concentrates the cuts on the
    /// best-scoring features. A first call on which the pilot makes no split (a single
    /// point, or one class) is refused; learn the weights from a sample with the forests'
    /// `learn_relevance` and pass them as [`Given`](Self::Given) instead.
    Relevance {
        /// Exponent applied to the normalised scores (finite, > 0; 1 by default).
        power: f64,
    },
    /// [`Relevance`](Self::Relevance) with the power chosen on the first training call by
    /// [`RELEVANCE_CV_FOLDS`]-fold cross-validation among [`RELEVANCE_CV_POWERS`] (0 means
    /// uniform weights): for each fold a pilot with the forest's own parameters and uniform
    /// weights is grown on the other folds (it is the forest of power 0), a forest with the
    /// pilot's weights at each other power is trained there, and the power whose forests
    /// give the held-out rows the highest log-likelihood (lowest log-loss, or NLPD for
    /// regression) wins; ties go to the smaller power. The forest is then trained on all
    /// rows with the relevance weights at that power. It costs `5 · 5` fold forests and two
    /// forests on all rows on the first call (a regressor's fold forests have at most
    /// [`CV_MAX_TREES`](crate::CV_MAX_TREES) trees). The choice and every power's held-out
    /// loss are kept with the model ([`RelevanceChoice`]). Needs at least
    /// `2 · RELEVANCE_CV_FOLDS` rows.
    RelevanceCv,
    /// [`RelevanceCv`](Self::RelevanceCv) when the first training call holds at least
    /// [`AUTO_MIN_ROWS`] rows, [`Uniform`](Self::Uniform) otherwise: the regressor's default,
    /// which learns its weights from a batch `fit` and still takes a stream from its first
    /// point (a first `partial_fit` of one row keeps all weights 1 for good).
    Auto,
}

/// Rows the first training call needs before [`FeatureWeights::Auto`] learns feature
/// weights (and `Calibration::Auto` recalibrates the intervals): fewer make a noisy choice,
/// and a 90 % interval from fewer than about 20 PITs is unbounded on one side.
pub const AUTO_MIN_ROWS: usize = 100;

/// Relevance powers that [`FeatureWeights::RelevanceCv`] compares (0: uniform weights).
pub const RELEVANCE_CV_POWERS: [f64; 5] = [0.0, 0.25, 0.5, 1.0, 2.0];
/// Folds of the cross-validation behind [`FeatureWeights::RelevanceCv`].
pub const RELEVANCE_CV_FOLDS: usize = 5;

/// What [`FeatureWeights::RelevanceCv`] chose, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelevanceChoice {
    /// The chosen power (0: uniform weights).
    pub power: f64,
    /// Each power of [`RELEVANCE_CV_POWERS`] with its held-out loss per row: the negative
    /// log-likelihood of the held-out rows, averaged over all rows of all folds.
    pub losses: Vec<(f64, f64)>,
}

impl RelevanceChoice {
    /// Picks the power with the lowest loss (a NaN counts as +∞; ties go to the first,
    /// i.e. smaller, power).
    pub(crate) fn best_of(losses: Vec<(f64, f64)>) -> RelevanceChoice {
        let key = |l: f64| if l.is_nan() { f64::INFINITY } else { l };
        let power = losses
            .iter()
            .fold(None::<(f64, f64)>, |best, &(p, l)| match best {
                Some((_, bl)) if key(l) >= bl => best,
                _ => Some((p, key(l))),
            })
            .map_or(1.0, |(p, _)| p);
        RelevanceChoice { power, losses }
    }

    /// Checks a decoded choice.
    pub(crate) fn is_valid(&self) -> bool {
        self.power.is_finite()
            && self.power >= 0.0
            && self.losses.iter().all(|(p, _)| p.is_finite() && *p >= 0.0)
    }
}

/// Most trees a forest may have: every tree is allocated up front, so a mistyped count
/// (`1e11`) would otherwise abort the process on a failed allocation.
pub const MAX_TREES: usize = 1_000_000;
/// Most worker threads a forest may ask for: the model does not depend on the count, and a
/// pool of very many threads takes longer to start than any training it would speed up.
pub const MAX_THREADS: usize = 1024;
/// Checks the sizes every forest shares: at least one and at most [`MAX_TREES`] trees, at
/// most [`MAX_THREADS`] threads.
pub(crate) fn validate_sizes(n_trees: usize, n_threads: usize) -> Result<()> {
    let bad = |name, reason: String| Err(MondrianError::InvalidParameter { name, reason });
    if n_trees == 0 {
        return bad("n_trees", "must be at least 1".into());
    }
    if n_trees > MAX_TREES {
        return bad("n_trees", format!("{n_trees} is more than {MAX_TREES}"));
    }
    if n_threads > MAX_THREADS {
        return bad(
            "n_threads",
            format!("{n_threads} is more than {MAX_THREADS}"),
        );
    }
    Ok(())
}
/// Most points a sliding window keeps: the store names points by `u32` slots.
pub const MAX_WINDOW: usize = u32::MAX as usize - 1;
/// Checks a sliding window: `None` (keep every point) or 1 to [`MAX_WINDOW`] points.
pub(crate) fn validate_window(window: Option<usize>) -> Result<()> {
    match window {
        Some(0) => Err(MondrianError::InvalidParameter {
            name: "window",
            reason: "must be at least 1 point (or none, to keep every point)".into(),
        }),
        Some(w) if w > MAX_WINDOW => Err(MondrianError::InvalidParameter {
            name: "window",
            reason: format!("{w} is more than {MAX_WINDOW}"),
        }),
        _ => Ok(()),
    }
}
/// Largest |target| a regressor trains on: its Gaussian statistics hold squares and
/// products of variances (≈ y⁴), which stay finite below this with a wide margin.
pub const MAX_TARGET: f64 = 1e60;

/// Smallest positive feature weight; learnt weights below it become 0.
pub const MIN_WEIGHT: f64 = 1e-9;
/// Largest feature weight: scaled features stay far inside the range of `f32` boxes, and
/// the rates (Σ w) stay finite.
pub const MAX_WEIGHT: f64 = 1e9;

impl FeatureWeights {
    /// Reads `uniform`, `relevance`, `relevance:P` (power P), `relevance:cv` (power chosen by
    /// cross-validation), `auto` or comma-separated weights,
    /// as the CLI and the Python package spell feature weights.
    pub fn parse(spec: &str) -> Result<FeatureWeights> {
        let weights = match spec.trim() {
            "uniform" => FeatureWeights::Uniform,
            "relevance" => FeatureWeights::RELEVANCE,
            "relevance:cv" => FeatureWeights::RelevanceCv,
            "auto" => FeatureWeights::Auto,
            s => match s.strip_prefix("relevance:") {
                Some(p) => FeatureWeights::Relevance {
                    power: p
                        .trim()
                        .parse()
                        .map_err(|_| MondrianError::InvalidParameter {
                            name: "feature_weights",
                            reason: format!("relevance power `{p}` is not a number"),
                        })?,
                },
                None => FeatureWeights::Given(
                    s.split(',')
                        .map(|v| v.trim().parse::<f64>())
                        .collect::<std::result::Result<Vec<_>, _>>()
                        .map_err(|_| MondrianError::InvalidParameter {
                            name: "feature_weights",
                            reason: format!(
                                "`{s}` is not `uniform`, `relevance[:power]`, `relevance:cv`, \
                                 `auto` or a comma-separated list of numbers"
                            ),
                        })?,
                ),
            },
        };
        weights.validate(None)?;
        Ok(weights)
    }

    /// [`Relevance`](Self::Relevance) with power 1.
    pub const RELEVANCE: FeatureWeights = FeatureWeights::Relevance { power: 1.0 };

    /// Checks given weights against the width (`None`: width not known yet) and the
    /// relevance power.
    pub fn validate(&self, n_features: Option<usize>) -> Result<()> {
        let bad = |reason: String| {
            Err(MondrianError::InvalidParameter {
                name: "feature_weights",
                reason,
            })
        };
        let w = match self {
            FeatureWeights::Uniform | FeatureWeights::RelevanceCv | FeatureWeights::Auto => {
                return Ok(())
            }
            FeatureWeights::Relevance { power } => {
                return match power.is_finite() && *power > 0.0 {
                    true => Ok(()),
                    false => bad(format!("relevance power {power} is not finite and > 0")),
                }
            }
            FeatureWeights::Given(w) => w,
        };
        if let Some(d) = n_features {
            if w.len() != d {
                return bad(format!("{} weights for {d} features", w.len()));
            }
        }
        if let Some(v) = w.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
            return bad(format!("{v} is not a finite weight ≥ 0"));
        }
        if let Some(v) = w
            .iter()
            .find(|&&v| v != 0.0 && !(MIN_WEIGHT..=MAX_WEIGHT).contains(&v))
        {
            return bad(format!(
                "{v} is outside 0 ∪ [{MIN_WEIGHT:e}, {MAX_WEIGHT:e}] (too small or too large)"
            ));
        }
        if !w.iter().any(|&v| v > 0.0) {
            return bad("at least one weight must be positive".into());
        }
        Ok(())
    }
}

/// A frozen affine map `x ↦ w · (x − min) / (max − min)` per feature, with feature weights
/// `w` (1 unless set by [`FeatureWeights`]); a feature with zero range is only shifted, so
/// its training values map to 0 (spec §6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureScaler {
    offset: Vec<f64>,
    /// `w / (max − min)`: the whole factor, weight included.
    inv_range: Vec<f64>,
    weights: Vec<f64>,
}

impl FeatureScaler {
    /// The identity map on `n_features` features.
    pub fn identity(n_features: usize) -> Self {
        FeatureScaler {
            offset: vec![0.0; n_features],
            inv_range: vec![1.0; n_features],
            weights: vec![1.0; n_features],
        }
    }

    /// Min–max scaling from per-feature ranges.
    pub fn from_ranges(ranges: &[(f64, f64)]) -> Result<Self> {
        let mut offset = Vec::with_capacity(ranges.len());
        let mut inv_range = Vec::with_capacity(ranges.len());
        for (d, &(lo, hi)) in ranges.iter().enumerate() {
            if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
                return Err(MondrianError::InvalidParameter {
                    name: "feature ranges",
                    reason: format!(
                        "feature {d}: ({lo}, {hi}) is not a finite range with min ≤ max"
                    ),
                });
            }
            offset.push(lo);
            inv_range.push(if hi > lo { 1.0 / (hi - lo) } else { 1.0 });
        }
        let weights = vec![1.0; offset.len()];
        Ok(FeatureScaler {
            offset,
            inv_range,
            weights,
        })
    }

    /// The same map with each feature further stretched by `weights` (validated as
    /// [`FeatureWeights::Given`]).
    pub fn weighted(&self, weights: &[f64]) -> Result<Self> {
        FeatureWeights::Given(weights.to_vec()).validate(Some(self.n_features()))?;
        let mut out = self.clone();
        for ((f, w), &v) in out.inv_range.iter_mut().zip(&mut out.weights).zip(weights) {
            *f *= v;
            *w *= v;
        }
        Ok(out)
    }

    /// Each feature's factor `w / (max − min)`: the trees' space stretches feature d by
    /// it, so a density there is one in raw units times their product.
    pub fn factors(&self) -> &[f64] {
        &self.inv_range
    }

    /// Feature `d`'s raw value at `v` in the trees' space (the inverse map).
    pub fn unscale(&self, d: usize, v: f64) -> f64 {
        self.offset[d] + v / self.inv_range[d]
    }

    /// The feature weights in use (all 1 unless set).
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// Σ_d w_d: the linear dimension of the unit box in the trees' space, which stands for
    /// D in the heuristics that assume features in [0, 1].
    pub fn effective_dimension(&self) -> f64 {
        self.weights.iter().sum()
    }

    /// Min–max scaling fitted on the rows.
    pub fn fit<T: FeatureValue>(rows: &Rows<T>) -> Self {
        let d = rows.n_features();
        let mut ranges = vec![(f64::INFINITY, f64::NEG_INFINITY); d];
        for i in 0..rows.n_rows() {
            for (r, &v) in ranges.iter_mut().zip(rows.row(i)) {
                let v = v.to_f64();
                r.0 = r.0.min(v);
                r.1 = r.1.max(v);
            }
        }
        Self::from_ranges(&ranges).expect("ranges of finite, non-empty data are valid")
    }

    /// Number of features.
    pub fn n_features(&self) -> usize {
        self.offset.len()
    }

    /// Whether the map is well formed (after loading a file): one offset, factor and weight
    /// per feature, all finite, weights valid.
    pub(crate) fn is_consistent(&self) -> bool {
        let d = self.offset.len();
        self.inv_range.len() == d
            && self.weights.len() == d
            && self
                .offset
                .iter()
                .chain(&self.inv_range)
                .all(|v| v.is_finite())
            && FeatureWeights::Given(self.weights.clone())
                .validate(Some(d))
                .is_ok()
    }

    /// Appends the scaled rows to `out`. A finite value whose scaled form does not fit the
    /// [`Feature`] type is refused (nothing is appended), since the trees could not hold it.
    pub fn transform_into<T: FeatureValue>(
        &self,
        rows: &Rows<T>,
        out: &mut Vec<Feature>,
    ) -> Result<()> {
        let start = out.len();
        out.reserve(rows.values().len());
        for i in 0..rows.n_rows() {
            for (feature, ((&v, &o), &s)) in rows
                .row(i)
                .iter()
                .zip(&self.offset)
                .zip(&self.inv_range)
                .enumerate()
            {
                let v = v.to_f64();
                let scaled = ((v - o) * s) as Feature;
                if !scaled.is_finite() {
                    out.truncate(start);
                    return Err(MondrianError::FeatureOverflow {
                        row: i,
                        feature,
                        value: v,
                    });
                }
                out.push(scaled);
            }
        }
        Ok(())
    }
}
