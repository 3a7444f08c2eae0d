//! Model files of every kind: a forest saved with a description of the data it learnt
//! (the label value of each class, the names of the features; what `mondrian train
//! --model` writes, and what any tool that knows those can write), and [`AnyModel`], which
//! reads a file of any kind the library writes by the kind its header names.
//!
//! ```
//! use mondrian::described::{AnyModel, DescribedClassifier};
//! use mondrian::{ClassifierParams, MondrianForestClassifier, Persistent};
//!
//! let mut forest = MondrianForestClassifier::new(ClassifierParams { n_trees: 3, ..Default::default() })?;
//! forest.fit(&[0.1, 0.2, 0.8, 0.9], 2, &[0, 1])?;
//! let file = DescribedClassifier::new(forest, vec![-1, 1], vec!["a".into(), "b".into()])?;
//! let bytes = file.to_bytes()?;
//! match AnyModel::from_bytes(&bytes)? {
//!     AnyModel::DescribedClassifier(back) => assert_eq!(back.classes, vec![-1, 1]),
//!     other => panic!("read as {}", other.kind()),
//! }
//! # Ok::<(), mondrian::MondrianError>(())
//! ```

use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{MondrianError, Result};
use crate::forest::DecodeError;
use crate::persist::{kind_of, Persistent};
use crate::{MondrianForestClassifier, MondrianForestRegressor, MondrianPolyaForest};

/// A classifier with the label value of each class and the names of its features.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "ClassifierFile")]
pub struct DescribedClassifier {
    /// The label value of each class: the forest's class k is `classes[k]`.
    pub classes: Vec<i64>,
    /// The names of the features, in column order (a CSV header); empty when the data
    /// named none (LIBSVM).
    pub feature_names: Vec<String>,
    /// The forest.
    pub forest: MondrianForestClassifier,
}

/// A regressor with the names of its features.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "RegressorFile")]
pub struct DescribedRegressor {
    /// The names of the features, in column order; empty when the data named none.
    pub feature_names: Vec<String>,
    /// The forest.
    pub forest: MondrianForestRegressor,
}

#[derive(Deserialize)]
struct ClassifierFile {
    classes: Vec<i64>,
    feature_names: Vec<String>,
    forest: MondrianForestClassifier,
}

#[derive(Deserialize)]
struct RegressorFile {
    feature_names: Vec<String>,
    forest: MondrianForestRegressor,
}

// Decoding checks the description against the forest, so a file is as safe to use as one
// the constructors made.
impl TryFrom<ClassifierFile> for DescribedClassifier {
    type Error = DecodeError;
    fn try_from(f: ClassifierFile) -> std::result::Result<Self, DecodeError> {
        Ok(DescribedClassifier::new(
            f.forest,
            f.classes,
            f.feature_names,
        )?)
    }
}

impl TryFrom<RegressorFile> for DescribedRegressor {
    type Error = DecodeError;
    fn try_from(f: RegressorFile) -> std::result::Result<Self, DecodeError> {
        Ok(DescribedRegressor::new(f.forest, f.feature_names)?)
    }
}

/// Feature names fit a forest of `n_features` (unknown before training): none, or one per
/// feature.
fn check_names(names: &[String], n_features: Option<usize>) -> Result<()> {
    match n_features {
        Some(d) if !names.is_empty() && names.len() != d => Err(MondrianError::CorruptModel(
            format!("{} feature names for {d} features", names.len()),
        )),
        _ => Ok(()),
    }
}

impl DescribedClassifier {
    /// The description of `forest`: one label value per class (distinct), and no feature
    /// names or one per feature.
    pub fn new(
        forest: MondrianForestClassifier,
        classes: Vec<i64>,
        feature_names: Vec<String>,
    ) -> Result<Self> {
        let mut sorted = classes.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if classes.len() != forest.n_classes() || sorted.len() != classes.len() {
            return Err(MondrianError::CorruptModel(
                "class list does not match the model".into(),
            ));
        }
        check_names(&feature_names, forest.n_features())?;
        Ok(DescribedClassifier {
            classes,
            feature_names,
            forest,
        })
    }
}

impl DescribedRegressor {
    /// The description of `forest`: no feature names or one per feature.
    pub fn new(forest: MondrianForestRegressor, feature_names: Vec<String>) -> Result<Self> {
        check_names(&feature_names, forest.n_features())?;
        Ok(DescribedRegressor {
            feature_names,
            forest,
        })
    }
}

impl Persistent for DescribedClassifier {
    const KIND: &'static str = "mondrian-cli-classifier";
    fn encoding(&self) -> crate::persist::Encoding {
        self.forest.encoding()
    }
}

impl Persistent for DescribedRegressor {
    const KIND: &'static str = "mondrian-cli-regressor";
    fn encoding(&self) -> crate::persist::Encoding {
        self.forest.encoding()
    }
}

/// A model file of any kind the library writes, read by the kind its header names.
#[derive(Debug, Clone)]
pub enum AnyModel {
    /// A bare classifier ([`MondrianForestClassifier::save`](Persistent::save), Python's
    /// `save`).
    Classifier(MondrianForestClassifier),
    /// A bare regressor.
    Regressor(MondrianForestRegressor),
    /// A classifier with its labels and feature names (`mondrian train`).
    DescribedClassifier(DescribedClassifier),
    /// A regressor with its feature names (`mondrian train --task regression`).
    DescribedRegressor(DescribedRegressor),
    /// A Mondrian Pólya forest.
    Polya(MondrianPolyaForest),
}

/// Longest header start that names the kind: magic (8), version (4), kind length (1),
/// kind (≤ 255).
const HEADER_MAX: usize = 8 + 4 + 1 + 255;

impl AnyModel {
    /// The kind name in the file's header.
    pub fn kind(&self) -> &'static str {
        match self {
            AnyModel::Classifier(_) => MondrianForestClassifier::KIND,
            AnyModel::Regressor(_) => MondrianForestRegressor::KIND,
            AnyModel::DescribedClassifier(_) => DescribedClassifier::KIND,
            AnyModel::DescribedRegressor(_) => DescribedRegressor::KIND,
            AnyModel::Polya(_) => MondrianPolyaForest::KIND,
        }
    }

    /// Reads a model from bytes written by any kind's `to_bytes` or `save`.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let head = &bytes[..bytes.len().min(HEADER_MAX)];
        match Self::kind_in(head)? {
            Kind::Classifier => MondrianForestClassifier::from_bytes(bytes).map(Self::Classifier),
            Kind::Regressor => MondrianForestRegressor::from_bytes(bytes).map(Self::Regressor),
            Kind::DescribedClassifier => {
                DescribedClassifier::from_bytes(bytes).map(Self::DescribedClassifier)
            }
            Kind::DescribedRegressor => {
                DescribedRegressor::from_bytes(bytes).map(Self::DescribedRegressor)
            }
            Kind::Polya => MondrianPolyaForest::from_bytes(bytes).map(Self::Polya),
        }
    }

    /// Reads the model file `path`, of any kind: its header is read first, then the file
    /// is decoded as that kind (streamed, as each kind's own `load` does).
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let mut head = Vec::with_capacity(HEADER_MAX);
        std::fs::File::open(path)?
            .take(HEADER_MAX as u64)
            .read_to_end(&mut head)?;
        match Self::kind_in(&head)? {
            Kind::Classifier => MondrianForestClassifier::load(path).map(Self::Classifier),
            Kind::Regressor => MondrianForestRegressor::load(path).map(Self::Regressor),
            Kind::DescribedClassifier => {
                DescribedClassifier::load(path).map(Self::DescribedClassifier)
            }
            Kind::DescribedRegressor => {
                DescribedRegressor::load(path).map(Self::DescribedRegressor)
            }
            Kind::Polya => MondrianPolyaForest::load(path).map(Self::Polya),
        }
    }

    /// The kind a file's first bytes name; an error for anything else.
    fn kind_in(head: &[u8]) -> Result<Kind> {
        let Some(kind) = kind_of(head) else {
            return Err(MondrianError::CorruptModel(
                if head.starts_with(b"MONDRIAN") {
                    "file ends inside the header: truncated?"
                } else {
                    "not a mondrian model file (bad magic bytes)"
                }
                .into(),
            ));
        };
        Ok(match kind.as_str() {
            MondrianForestClassifier::KIND => Kind::Classifier,
            MondrianForestRegressor::KIND => Kind::Regressor,
            DescribedClassifier::KIND => Kind::DescribedClassifier,
            DescribedRegressor::KIND => Kind::DescribedRegressor,
            MondrianPolyaForest::KIND => Kind::Polya,
            other => {
                return Err(MondrianError::CorruptModel(format!(
                    "the file holds a model of kind `{other}`, which this build does not know"
                )))
            }
        })
    }
}

enum Kind {
    Classifier,
    Regressor,
    DescribedClassifier,
    DescribedRegressor,
    Polya,
}
