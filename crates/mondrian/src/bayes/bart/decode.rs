//! Saving and loading fitted BART models ([`BartRegressor`], [`BartClassifier`]) in the
//! library's file format ([`Persistent`]).
//!
//! The file holds the parameters and, once fitted, the width of the rows, the map back to
//! the original scale (y = offset + scale·y′), the kept draws (each a prediction-only sum
//! of trees), their σ and the traces. Loading checks every field before a model exists:
//! the parameters; the number of draws and of σ against n_iter − burn_in; each draw's M
//! trees, each laid out from its root with children after their parent and inside the
//! tree, every node but the root named by exactly one parent, rules on existing features
//! and every value finite; the traces' lengths. Corrupt bytes thus give a
//! [`MondrianError::CorruptModel`] (or the parameters' own error), never a panic or an
//! endless walk down a tree.
//!
//! ```
//! use mondrian::bayes::{BartParams, BartRegressor, TreeSampler};
//! use mondrian::Persistent;
//! let params = BartParams {
//!     n_trees: 5, n_iter: 40, burn_in: 20, sampler: TreeSampler::GrowPrune, seed: 1,
//!     ..Default::default()
//! };
//! let mut model = BartRegressor::new(params)?;
//! model.fit(&[0.1, 0.2, 0.8, 0.9], 1, &[0.0, 0.1, 1.0, 1.1])?;
//! let again = BartRegressor::from_bytes(&model.to_bytes()?)?;
//! assert_eq!(again.predict(&[0.3], 1)?, model.predict(&[0.3], 1)?);
//! # Ok::<(), mondrian::MondrianError>(())
//! ```

use std::borrow::Cow;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::api::{BartClassifier, BartRegressor, Fitted};
use super::backfit::Run;
use super::local::{SumOfTrees, LEAF};
use super::params::BartParams;
use crate::error::MondrianError;
use crate::forest::DecodeError;
use crate::model::{Checked, Params};
use crate::persist::Persistent;

fn corrupt(m: impl Into<String>) -> DecodeError {
    DecodeError(MondrianError::CorruptModel(m.into()))
}

/// A fitted chain as stored.
#[derive(Serialize, Deserialize)]
struct FittedFile<'a> {
    n_features: u64,
    offset: f64,
    scale: f64,
    run: Cow<'a, Run>,
}

/// The stored fields of either model: the parameters and, once fitted, the chain.
#[derive(Serialize, Deserialize)]
struct ModelFile<'a> {
    params: Cow<'a, BartParams>,
    fitted: Option<FittedFile<'a>>,
}

fn model_file<'a>(params: &'a BartParams, fitted: Option<&'a Fitted>) -> ModelFile<'a> {
    ModelFile {
        params: Cow::Borrowed(params),
        fitted: fitted.map(|f| FittedFile {
            n_features: f.n_features as u64,
            offset: f.offset,
            scale: f.scale,
            run: Cow::Borrowed(&f.run),
        }),
    }
}

impl Serialize for BartRegressor {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        model_file(&self.params, self.fitted.as_ref()).serialize(serializer)
    }
}

impl Serialize for BartClassifier {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        model_file(&self.params, self.fitted.as_ref()).serialize(serializer)
    }
}

/// Whether `sum` is M = `n_trees` well-formed trees over `d` features: roots in order,
/// the first at 0, each tree's nodes from its root to the next root; a split's children
/// after it and inside its tree, every node but the root the child of exactly one split;
/// rules on features < d; every threshold and leaf value finite.
fn check_sum(sum: &SumOfTrees, n_trees: usize, d: usize) -> Result<(), String> {
    let n = sum.nodes.len();
    if sum.roots.len() != n_trees {
        return Err(format!(
            "{} trees where the parameters give {n_trees}",
            sum.roots.len()
        ));
    }
    if sum.roots.first() != Some(&0) || sum.roots.windows(2).any(|w| w[0] >= w[1]) {
        return Err("the trees' roots are not in order from node 0".into());
    }
    if *sum.roots.last().unwrap_or(&0) as usize >= n {
        return Err("the last tree has no nodes".into());
    }
    let mut named = vec![false; n];
    for (t, &root) in sum.roots.iter().enumerate() {
        let start = root as usize;
        let end = sum.roots.get(t + 1).map_or(n, |&r| r as usize);
        for j in start..end {
            let node = &sum.nodes[j];
            if !node.value.is_finite() {
                return Err(format!("tree {t}, node {j}: a value that is not finite"));
            }
            if node.dim == LEAF {
                continue;
            }
            let (l, r) = (node.left as usize, node.right as usize);
            if node.dim as usize >= d || l <= j || r <= j || l == r || l >= end || r >= end {
                return Err(format!(
                    "tree {t}, node {j}: a split that does not make two children"
                ));
            }
            for c in [l, r] {
                if std::mem::replace(&mut named[c], true) {
                    return Err(format!("tree {t}, node {c}: two parents"));
                }
            }
        }
        if let Some(j) = (start + 1..end).find(|&j| !named[j]) {
            return Err(format!("tree {t}, node {j}: not in the tree"));
        }
    }
    Ok(())
}

/// The parameters and the chain a [`ModelFile`] holds, checked; `probit` for the
/// classifier (offset 0, scale 1, σ = 1).
fn decode(
    file: ModelFile<'static>,
    probit: bool,
) -> Result<(Checked<BartParams>, Option<Fitted>), DecodeError> {
    let params = file.params.into_owned().check()?;
    let Some(f) = file.fitted else {
        return Ok((params, None));
    };
    let d = usize::try_from(f.n_features).map_err(|_| corrupt("too many features"))?;
    if d == 0 {
        return Err(corrupt("a fit on rows of 0 features is not possible"));
    }
    let scale_ok = if probit {
        f.offset == 0.0 && f.scale == 1.0
    } else {
        f.offset.is_finite() && f.scale.is_finite() && f.scale > 0.0
    };
    if !scale_ok {
        return Err(corrupt(format!(
            "an impossible scale map y = {} + {}·y′",
            f.offset, f.scale
        )));
    }
    let run = f.run.into_owned();
    let kept = params.n_iter - params.burn_in;
    if run.draws.len() != kept || run.sigma.len() != kept {
        return Err(corrupt(format!(
            "{} draws and {} σ where n_iter − burn_in = {kept}",
            run.draws.len(),
            run.sigma.len()
        )));
    }
    let sigma_ok = |s: f64| {
        if probit {
            s == 1.0
        } else {
            s.is_finite() && s > 0.0
        }
    };
    if let Some(s) = run.sigma.iter().position(|&s| !sigma_ok(s)) {
        return Err(corrupt(format!("draw {s}: σ = {}", run.sigma[s])));
    }
    for (s, sum) in run.draws.iter().enumerate() {
        check_sum(sum, params.n_trees, d).map_err(|e| corrupt(format!("draw {s}: {e}")))?;
    }
    let t = &run.traces;
    let lengths = [
        t.log_likelihood.len(),
        t.sigma2.len(),
        t.mean_leaves.len(),
        t.total_leaves.len(),
        t.train_mse.len(),
        t.move_rate.len(),
        t.seconds.len(),
    ];
    if lengths.iter().any(|&l| l != params.n_iter) || t.burn_in != params.burn_in {
        return Err(corrupt(format!(
            "traces of {lengths:?} iterations, {} burn-in, where the parameters give {} and {}",
            t.burn_in, params.n_iter, params.burn_in
        )));
    }
    let n_threads = params.n_threads;
    Ok((
        params,
        Some(Fitted {
            n_features: d,
            offset: f.offset,
            scale: f.scale,
            run,
            n_threads,
        }),
    ))
}

impl<'de> Deserialize<'de> for BartRegressor {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (params, fitted) =
            decode(ModelFile::deserialize(deserializer)?, false).map_err(D::Error::custom)?;
        Ok(BartRegressor { params, fitted })
    }
}

impl<'de> Deserialize<'de> for BartClassifier {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (params, fitted) =
            decode(ModelFile::deserialize(deserializer)?, true).map_err(D::Error::custom)?;
        Ok(BartClassifier { params, fitted })
    }
}

impl Persistent for BartRegressor {
    const KIND: &'static str = "bayes-bart-regressor";
}

impl Persistent for BartClassifier {
    const KIND: &'static str = "bayes-bart-classifier";
}
