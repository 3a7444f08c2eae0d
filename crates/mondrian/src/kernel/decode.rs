//! Decoding saved kernels and kernel ridge models: every field is checked, so a model read
//! from any file is as safe as a trained one (a corrupt file is a `CorruptModel` error,
//! never a panic later).

use serde::Deserialize;

use super::features::{KernelParams, MondrianKernel, NONE};
use super::learners::{KernelRidgeParams, MondrianKernelRidge};
use crate::error::MondrianError;
use crate::forest::{DecodeError, Forest, Pool};
use crate::model::Params;
use crate::stats::NoStats;

fn corrupt(m: impl Into<String>) -> DecodeError {
    DecodeError(MondrianError::CorruptModel(m.into()))
}

/// The stored fields of a [`MondrianKernel`].
#[derive(Deserialize)]
pub(super) struct KernelState {
    params: KernelParams,
    forest: Option<Forest<NoStats>>,
    columns: Vec<Vec<u32>>,
    tree_of_column: Vec<u32>,
}

impl TryFrom<KernelState> for MondrianKernel {
    type Error = DecodeError;

    fn try_from(s: KernelState) -> Result<Self, Self::Error> {
        s.params.validate()?;
        let KernelState {
            params,
            mut forest,
            columns,
            tree_of_column,
        } = s;
        let n_cols = tree_of_column.len();
        if let Some(f) = forest.as_mut() {
            f.pool = Pool::new(params.n_threads);
            f.check_decoded(params.n_trees, params.lifetime, |_, _| Ok(()))?;
            if columns.len() != params.n_trees {
                return Err(corrupt("the column maps do not match the trees"));
            }
            let mut seen = vec![false; n_cols];
            for (t, (unit, cols)) in f.trees.iter().zip(&columns).enumerate() {
                let tree = &unit.tree;
                if cols.len() != tree.n_nodes() {
                    return Err(corrupt(format!(
                        "tree {t}: its column map has the wrong length"
                    )));
                }
                for (j, &c) in cols.iter().enumerate() {
                    if c == NONE {
                        continue;
                    }
                    let c = c as usize;
                    if c >= n_cols || seen[c] || tree_of_column[c] as usize != t {
                        return Err(corrupt(format!("tree {t}, node {j}: a bad column")));
                    }
                    seen[c] = true;
                }
                if tree.leaves().iter().any(|&l| cols[l as usize] == NONE) {
                    return Err(corrupt(format!("tree {t}: a leaf without a column")));
                }
            }
            if seen.iter().any(|s| !s) {
                return Err(corrupt("a column names no cell"));
            }
        } else if !columns.is_empty() || n_cols > 0 {
            return Err(corrupt("columns without trees"));
        }
        Ok(MondrianKernel::from_parts(
            params,
            forest,
            columns,
            tree_of_column,
        ))
    }
}

/// The stored fields of a [`MondrianKernelRidge`].
#[derive(Deserialize)]
pub(super) struct RidgeState {
    params: KernelRidgeParams,
    kernel: MondrianKernel,
    centre: f64,
    b: Vec<f64>,
    y2: f64,
    rows: Vec<u32>,
    weights: Vec<f64>,
    n_train: usize,
}

impl TryFrom<RidgeState> for MondrianKernelRidge {
    type Error = DecodeError;

    fn try_from(s: RidgeState) -> Result<Self, Self::Error> {
        s.params.validate()?;
        if s.params.kernel != *s.kernel.params() {
            return Err(corrupt("the kernel's parameters are not the model's"));
        }
        let c = s.kernel.n_features_out();
        let m = s.params.kernel.n_trees;
        let fitted = s.n_train > 0;
        let sizes = if fitted {
            s.b.len() == c && s.weights.len() == c && s.rows.len() == s.n_train * m
        } else {
            s.b.is_empty() && s.weights.is_empty() && s.rows.is_empty()
        };
        if !sizes || fitted != s.kernel.is_fitted() {
            return Err(corrupt("the ridge solution does not match the features"));
        }
        if s.rows.iter().any(|&r| r as usize >= c) {
            return Err(corrupt("a training row names a column that does not exist"));
        }
        let finite = s.centre.is_finite()
            && s.y2.is_finite()
            && s.b.iter().chain(&s.weights).all(|v| v.is_finite());
        if !finite {
            return Err(corrupt("a non-finite number in the ridge solution"));
        }
        Ok(MondrianKernelRidge::from_parts(
            s.params, s.kernel, s.centre, s.b, s.y2, s.rows, s.weights, s.n_train,
        ))
    }
}
