//! Saving and loading fitted SMC trees ([`SmcTreeClassifier`], [`SmcTreeRegressor`]) in
//! the library's file format ([`Persistent`]).
//!
//! A particle's nodes share what they learnt from the data ([`NodeData`]) with the other
//! particles through `Arc`s. The file keeps a plain owned form: a table of the distinct
//! node data (each node's training rows, statistics and extent, once however many trees
//! share it) and, per island, each final tree as a list of nodes naming their data by
//! index. Loading rebuilds the sharing and checks every index and field first (the
//! parameters, the leaf model, each node's rows, statistics and extent, that each split's
//! children partition its rows on the side of its threshold, that the nodes form one tree
//! rooted at the training set, the islands' sizes, the weights), so that corrupt bytes
//! give a [`MondrianError::CorruptModel`], never a panic or a wrong prediction later.
//! The marginal likelihoods are recomputed from the statistics and the posterior's
//! weights from the particles' log-weights, as a fit makes them.
//!
//! ```
//! use mondrian::bayes::{SmcClassifierParams, SmcParams, SmcTreeClassifier};
//! use mondrian::Persistent;
//! let mut model = SmcTreeClassifier::new(SmcClassifierParams {
//!     smc: SmcParams { particles: 20, seed: 3, ..Default::default() },
//!     ..Default::default()
//! })?;
//! model.fit(&[0.1, 0.2, 0.8, 0.9], 1, &[0, 0, 1, 1])?;
//! let again = SmcTreeClassifier::from_bytes(&model.to_bytes()?)?;
//! assert_eq!(again.predict_proba(&[0.3], 1)?, model.predict_proba(&[0.3], 1)?);
//! # Ok::<(), mondrian::MondrianError>(())
//! ```

use std::borrow::Cow;
use std::collections::HashMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::likelihood::{ClassCounts, DirichletMultinomial, Moments, NormalInverseGamma};
use super::model::{
    Fitted, FittedRegression, RegressionLeaf, SmcClassifierParams, SmcRegressorParams,
    SmcTreeClassifier, SmcTreeRegressor,
};
use super::smc::{SmcParams, SmcPosterior};
use super::tree::{Kind, NodeData, NO_PARENT};
use crate::error::MondrianError;
use crate::forest::DecodeError;
use crate::model::Params;
use crate::persist::Persistent;

mod check;

use check::decode_posterior;

fn corrupt(m: impl Into<String>) -> DecodeError {
    DecodeError(MondrianError::CorruptModel(m.into()))
}

// ---------------------------------------------------------------------------------------
// The owned form
// ---------------------------------------------------------------------------------------

/// What a node learnt from the data: its training rows (increasing), the statistics of
/// their targets, and their extent (the D minima, then the D maxima).
#[derive(Serialize, Deserialize)]
#[serde(bound(
    serialize = "S: Serialize + Clone",
    deserialize = "S: Deserialize<'de> + Clone"
))]
struct DataFile<'a, S: Clone> {
    rows: Cow<'a, [u32]>,
    stats: Cow<'a, S>,
    bounds: Cow<'a, [f64]>,
}

/// The rule of an internal node and its children's indices in the tree.
#[derive(Serialize, Deserialize, Clone, Copy)]
struct SplitFile {
    dim: u32,
    threshold: f64,
    left: u32,
    right: u32,
}

/// A node of a tree: its data (an index in the table), parent, depth and rule.
#[derive(Serialize, Deserialize)]
struct NodeFile {
    data: u32,
    parent: u32,
    depth: u32,
    split: Option<SplitFile>,
}

/// A final particle: its unnormalised log-weight and its nodes, the root first.
#[derive(Serialize, Deserialize)]
struct TreeFile {
    log_weight: f64,
    nodes: Vec<NodeFile>,
}

/// One island's run.
#[derive(Serialize, Deserialize)]
struct IslandFile {
    log_evidence: f64,
    n_particles: u64,
    stages: u64,
    resamplings: u64,
    truncated: bool,
    trees: Vec<TreeFile>,
}

/// A fitted posterior: the training shape, the node data table and the islands.
#[derive(Serialize, Deserialize)]
#[serde(bound(
    serialize = "S: Serialize + Clone",
    deserialize = "S: Deserialize<'de> + Clone"
))]
struct PosteriorFile<'a, S: Clone> {
    n_features: u64,
    n_rows: u64,
    data: Vec<DataFile<'a, S>>,
    islands: Vec<IslandFile>,
}

/// The stored fields of an [`SmcTreeClassifier`]: the parameters and, once fitted, K and
/// the posterior.
#[derive(Serialize, Deserialize)]
struct ClassifierFile<'a> {
    params: Cow<'a, SmcClassifierParams>,
    fitted: Option<(u64, PosteriorFile<'a, ClassCounts>)>,
}

/// The stored fields of an [`SmcTreeRegressor`]: the parameters and, once fitted, the leaf
/// model fitted (never `Calibrated`) and the posterior.
#[derive(Serialize, Deserialize)]
struct RegressorFile<'a> {
    params: Cow<'a, SmcRegressorParams>,
    fitted: Option<(RegressionLeaf, PosteriorFile<'a, Moments>)>,
}

// ---------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------

fn posterior_file<'a, S: Clone + Send + Sync>(
    posterior: &'a SmcPosterior<S>,
    n_features: usize,
) -> PosteriorFile<'a, S> {
    let mut index: HashMap<*const NodeData<S>, u32> = HashMap::new();
    let mut data: Vec<DataFile<'a, S>> = Vec::new();
    let mut n_rows = 0;
    let islands = posterior
        .islands()
        .iter()
        .map(|run| IslandFile {
            log_evidence: run.log_evidence,
            n_particles: run.n_particles as u64,
            stages: run.stages as u64,
            resamplings: run.resamplings as u64,
            truncated: run.truncated,
            trees: run
                .particles
                .iter()
                .map(|(log_weight, tree)| TreeFile {
                    log_weight: *log_weight,
                    nodes: tree
                        .nodes()
                        .iter()
                        .map(|node| {
                            let d: &'a NodeData<S> = &node.data;
                            let k = *index.entry(d as *const _).or_insert_with(|| {
                                data.push(DataFile {
                                    rows: Cow::Borrowed(&d.rows),
                                    stats: Cow::Borrowed(&d.stats),
                                    bounds: Cow::Borrowed(d.known_bounds()),
                                });
                                (data.len() - 1) as u32
                            });
                            if node.parent == NO_PARENT {
                                n_rows = d.rows.len();
                            }
                            NodeFile {
                                data: k,
                                parent: node.parent,
                                depth: node.depth,
                                split: match node.kind {
                                    Kind::Split {
                                        dim,
                                        threshold,
                                        left,
                                        right,
                                    } => Some(SplitFile {
                                        dim,
                                        threshold,
                                        left,
                                        right,
                                    }),
                                    Kind::Leaf | Kind::Open => None,
                                },
                            }
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect();
    PosteriorFile {
        n_features: n_features as u64,
        n_rows: n_rows as u64,
        data,
        islands,
    }
}

impl Serialize for SmcTreeClassifier {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        ClassifierFile {
            params: Cow::Borrowed(&self.params),
            fitted: self.fitted.as_ref().map(|f| {
                (
                    f.model.n_classes() as u64,
                    posterior_file(&f.posterior, f.n_features),
                )
            }),
        }
        .serialize(serializer)
    }
}

impl Serialize for SmcTreeRegressor {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        RegressorFile {
            params: Cow::Borrowed(&self.params),
            fitted: self.fitted.as_ref().map(|f| match f {
                FittedRegression::Nig(f) => (
                    RegressionLeaf::NormalInverseGamma(f.model.clone()),
                    posterior_file(&f.posterior, f.n_features),
                ),
                FittedRegression::Known(f) => (
                    RegressionLeaf::KnownVariance(f.model.clone()),
                    posterior_file(&f.posterior, f.n_features),
                ),
            }),
        }
        .serialize(serializer)
    }
}

fn classifier(file: ClassifierFile<'static>) -> Result<SmcTreeClassifier, DecodeError> {
    let params = file.params.into_owned().check()?;
    let fitted = match file.fitted {
        None => None,
        Some((k, posterior)) => {
            let k = usize::try_from(k).map_err(|_| corrupt("too many classes"))?;
            if params.n_classes.is_some_and(|n| n != k) {
                return Err(corrupt(format!(
                    "{k} classes where the parameters give {:?}",
                    params.n_classes
                )));
            }
            let model = DirichletMultinomial::new(params.alpha, k)?;
            let (n_features, posterior) = decode_posterior(posterior, &params.smc, &model, k)?;
            Some(Fitted {
                model,
                n_features,
                serial: params.smc.n_threads == 1,
                posterior,
            })
        }
    };
    Ok(SmcTreeClassifier { params, fitted })
}

fn regressor(file: RegressorFile<'static>) -> Result<SmcTreeRegressor, DecodeError> {
    let params = file.params.into_owned().check()?;
    let fitted = match file.fitted {
        None => None,
        Some((leaf, posterior)) => {
            let serial = params.smc.n_threads == 1;
            let smc = &params.smc;
            match (&params.leaf, leaf) {
                (RegressionLeaf::Calibrated, RegressionLeaf::NormalInverseGamma(model)) => {
                    Some(FittedRegression::Nig(nig(model, smc, posterior, serial)?))
                }
                (
                    RegressionLeaf::NormalInverseGamma(given),
                    RegressionLeaf::NormalInverseGamma(model),
                ) if *given == model => {
                    Some(FittedRegression::Nig(nig(model, smc, posterior, serial)?))
                }
                (RegressionLeaf::KnownVariance(given), RegressionLeaf::KnownVariance(model))
                    if *given == model =>
                {
                    model.validate()?;
                    let (n_features, posterior) = decode_posterior(posterior, smc, &model, 0)?;
                    Some(FittedRegression::Known(Fitted {
                        model,
                        n_features,
                        serial,
                        posterior,
                    }))
                }
                _ => return Err(corrupt("the fitted leaf model is not the parameters'")),
            }
        }
    };
    Ok(SmcTreeRegressor { params, fitted })
}

fn nig(
    model: NormalInverseGamma,
    smc: &SmcParams,
    posterior: PosteriorFile<'static, Moments>,
    serial: bool,
) -> Result<Fitted<NormalInverseGamma>, DecodeError> {
    model.validate()?;
    let (n_features, posterior) = decode_posterior(posterior, smc, &model, 0)?;
    Ok(Fitted {
        model,
        n_features,
        serial,
        posterior,
    })
}

impl<'de> Deserialize<'de> for SmcTreeClassifier {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        classifier(ClassifierFile::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

impl<'de> Deserialize<'de> for SmcTreeRegressor {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        regressor(RegressorFile::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

impl Persistent for SmcTreeClassifier {
    const KIND: &'static str = "bayes-smc-tree-classifier";
}

impl Persistent for SmcTreeRegressor {
    const KIND: &'static str = "bayes-smc-tree-regressor";
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Arc;

    use super::*;
    use crate::bayes::likelihood::NormalKnownVariance;
    use crate::bayes::smc::Expansion;
    use crate::bayes::Proposal;

    /// Two features, labels from x0 + x1 > 1 (classes) and y = sin(3 x0) + x1 (targets).
    fn data(n: usize, shift: f64) -> (Vec<f64>, Vec<usize>, Vec<f64>) {
        let mut x = Vec::new();
        let (mut labels, mut targets) = (Vec::new(), Vec::new());
        for i in 0..n {
            let a = (i as f64 * 0.618 + shift) % 1.0;
            let b = (i as f64 * 0.377 + 0.5 * shift) % 1.0;
            x.extend([a, b]);
            labels.push(usize::from(a + b > 1.0) + usize::from(a > 0.8));
            targets.push((3.0 * a).sin() + b);
        }
        (x, labels, targets)
    }

    fn smc(proposal: Proposal, islands: usize) -> SmcParams {
        SmcParams {
            particles: 30,
            islands,
            proposal,
            expansion: Expansion::NodeMinMarginal,
            seed: 11,
            n_threads: 1,
            ..Default::default()
        }
    }

    #[test]
    fn save_load_predicts_the_same() {
        let (x, y, t) = data(120, 0.0);
        let (xt, yt, tt) = data(50, 0.31);
        for (proposal, islands) in [(Proposal::Prior, 1), (Proposal::Optimal, 3)] {
            let mut c = SmcTreeClassifier::new(SmcClassifierParams {
                smc: smc(proposal, islands),
                ..Default::default()
            })
            .unwrap();
            c.fit(&x, 2, &y).unwrap();
            let bytes = c.to_bytes().unwrap();
            let back = SmcTreeClassifier::from_bytes(&bytes).unwrap();
            assert_eq!(
                back.predict_proba(&xt, 2).unwrap(),
                c.predict_proba(&xt, 2).unwrap()
            );
            assert_eq!(
                back.log_predictive(&xt, 2, &yt).unwrap(),
                c.log_predictive(&xt, 2, &yt).unwrap()
            );
            assert_eq!(back.log_evidence().unwrap(), c.log_evidence().unwrap());
            assert_eq!(back.to_bytes().unwrap(), bytes);
            // The sharing between particles is rebuilt.
            let shared = |m: &SmcTreeClassifier| {
                let p = m.posterior().unwrap();
                let roots: HashSet<_> = p
                    .trees()
                    .map(|t| Arc::as_ptr(&t.tree.nodes()[0].data))
                    .collect();
                roots.len()
            };
            assert_eq!(shared(&back), 1);
            assert_eq!(shared(&c), 1);
        }
        for leaf in [
            RegressionLeaf::Calibrated,
            RegressionLeaf::KnownVariance(NormalKnownVariance {
                mean: 0.5,
                prior_variance: 1.0,
                noise_variance: 0.05,
            }),
        ] {
            let mut r = SmcTreeRegressor::new(SmcRegressorParams {
                smc: smc(Proposal::Empirical, 2),
                leaf,
            })
            .unwrap();
            r.fit(&x, 2, &t).unwrap();
            let back = SmcTreeRegressor::from_bytes(&r.to_bytes().unwrap()).unwrap();
            assert_eq!(
                back.predict_mean_variance(&xt, 2).unwrap(),
                r.predict_mean_variance(&xt, 2).unwrap()
            );
            assert_eq!(
                back.log_predictive(&xt, 2, &tt).unwrap(),
                r.log_predictive(&xt, 2, &tt).unwrap()
            );
            assert_eq!(back.log_evidence().unwrap(), r.log_evidence().unwrap());
        }
        // An unfitted model round-trips too.
        let r = SmcTreeRegressor::new(SmcRegressorParams::default()).unwrap();
        let back = SmcTreeRegressor::from_bytes(&r.to_bytes().unwrap()).unwrap();
        assert!(back.posterior().is_err());
        assert!(SmcTreeClassifier::from_bytes(&r.to_bytes().unwrap()).is_err());
    }

    /// The payload of a saved file (after its header) and the header's length.
    fn payload_start(bytes: &[u8]) -> usize {
        8 + 4 + 1 + bytes[12] as usize + 1 + 8 + 4 + 4
    }

    /// Re-saves a payload, edited by `edit`, with a valid header: only the model's own
    /// checks stand between it and a loaded model.
    fn resave<T: Persistent>(bytes: &[u8], edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        struct Raw(Vec<u8>);
        impl Serialize for Raw {
            fn serialize<Z: Serializer>(&self, s: Z) -> Result<Z::Ok, Z::Error> {
                use serde::ser::SerializeTuple;
                let mut t = s.serialize_tuple(self.0.len())?;
                for b in &self.0 {
                    t.serialize_element(b)?;
                }
                t.end()
            }
        }
        let mut payload = bytes[payload_start(bytes)..].to_vec();
        edit(&mut payload);
        let mut out = Vec::new();
        crate::persist::save(&Raw(payload), T::KIND, &mut out).unwrap();
        out
    }

    #[test]
    fn pure_nodes_round_trip() {
        // Targets that take few values make nodes whose targets are all 0: their means
        // must add up exactly for the loader's split check (a one-pass split once drew
        // them off by 1e-17 and the file was refused).
        let (x, labels, _) = data(60, 0.0);
        let t: Vec<f64> = labels.iter().map(|&l| l as f64).collect();
        for seed in 0..5 {
            let mut r = SmcTreeRegressor::new(SmcRegressorParams {
                smc: SmcParams {
                    particles: 20,
                    seed,
                    n_threads: 1,
                    ..Default::default()
                },
                ..Default::default()
            })
            .unwrap();
            r.fit(&x, 2, &t).unwrap();
            let bytes = r.to_bytes().unwrap();
            let back = SmcTreeRegressor::from_bytes(&bytes).unwrap();
            assert_eq!(back.predict(&x, 2).unwrap(), r.predict(&x, 2).unwrap());
        }
    }

    #[test]
    fn corrupt_bytes_are_errors_never_panics() {
        let (x, y, t) = data(60, 0.0);
        let mut c = SmcTreeClassifier::new(SmcClassifierParams {
            smc: smc(Proposal::Prior, 2),
            ..Default::default()
        })
        .unwrap();
        c.fit(&x, 2, &y).unwrap();
        let bytes = c.to_bytes().unwrap();
        // A flipped byte anywhere fails the checksums.
        for at in [3, 20, bytes.len() / 2, bytes.len() - 1] {
            let mut b = bytes.clone();
            b[at] ^= 0x41;
            assert!(SmcTreeClassifier::from_bytes(&b).is_err());
        }
        assert!(SmcTreeClassifier::from_bytes(&bytes[..bytes.len() - 7]).is_err());
        // Past the checksums: a byte of the payload changed (each of the first 300, which
        // hold the parameters and the first node data, then every 11th) is refused or
        // decodes to a model that still predicts without panicking.
        let n = bytes.len() - payload_start(&bytes);
        let positions: Vec<usize> = (0..n).filter(|&at| at < 300 || at % 11 == 0).collect();
        let mut refused = 0;
        for &at in &positions {
            for flip in [0x01u8, 0x80, 0xff] {
                let b = resave::<SmcTreeClassifier>(&bytes, |p| p[at] ^= flip);
                match SmcTreeClassifier::from_bytes(&b) {
                    Err(e) => {
                        assert!(matches!(e, MondrianError::CorruptModel(_)), "{e}");
                        refused += 1;
                    }
                    Ok(m) => {
                        let p = m.predict_proba(&x, 2).unwrap();
                        assert!(p.iter().all(|v| v.is_finite()));
                    }
                }
            }
        }
        let tried = 3 * positions.len();
        eprintln!("{refused} of {tried} single-byte edits refused");
        assert!(2 * refused > tried, "{refused} of {tried} edits refused");
        // The regressor's statistics and extents are checked too.
        let mut r = SmcTreeRegressor::new(SmcRegressorParams {
            smc: smc(Proposal::Optimal, 1),
            ..Default::default()
        })
        .unwrap();
        r.fit(&x, 2, &t).unwrap();
        let bytes = r.to_bytes().unwrap();
        let n = bytes.len() - payload_start(&bytes);
        for at in (0..n).step_by(13) {
            let b = resave::<SmcTreeRegressor>(&bytes, |p| p[at] ^= 0x80);
            if let Ok(m) = SmcTreeRegressor::from_bytes(&b) {
                let (mean, var) = m.predict_mean_variance(&x, 2).unwrap();
                assert!(mean.iter().chain(&var).all(|v| !v.is_nan()));
            }
        }
    }
}
