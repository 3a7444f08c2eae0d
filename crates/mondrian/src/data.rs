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

/// A frozen affine map `x ↦ (x − min) / (max − min)` per feature; a feature with zero
/// range is only shifted, so its training values map to 0 (spec §6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureScaler {
    offset: Vec<f64>,
    inv_range: Vec<f64>,
}

impl FeatureScaler {
    /// The identity map on `n_features` features.
    pub fn identity(n_features: usize) -> Self {
        FeatureScaler {
            offset: vec![0.0; n_features],
            inv_range: vec![1.0; n_features],
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
        Ok(FeatureScaler { offset, inv_range })
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
