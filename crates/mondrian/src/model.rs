//! What every model offers, as traits: parameters checked once into [`Checked`], training
//! in batch ([`Fit`]) and online ([`PartialFit`]), with sample weights ([`WeightedFit`]),
//! prediction ([`Predict`]), and forgetting
//! ([`Forget`]: exact removal of training points, and the points a model holds).
//!
//! The models also have these operations as inherent methods, so a caller needs the traits
//! only to write code generic over models:
//!
//! ```
//! use mondrian::model::{Checked, Fit, Forget, Model, Params};
//! use mondrian::{ClassifierParams, MondrianForestClassifier};
//!
//! fn train_then_forget<M: Model + Fit<f64> + Forget>(
//!     params: M::Params,
//!     x: &[f64],
//!     y: &[M::Target],
//! ) -> mondrian::Result<M> {
//!     let mut model = M::with_params(params.check()?);
//!     model.fit(x, 1, y)?;
//!     model.forget(&[0])?; // as if row 0 had never been seen
//!     Ok(model)
//! }
//! let params = ClassifierParams { n_trees: 5, ..Default::default() };
//! let forest: MondrianForestClassifier =
//!     train_then_forget(params, &[0.1, 0.2, 0.8, 0.9], &[0, 0, 1, 1])?;
//! assert_eq!(forest.n_points(), 3);
//! # Ok::<(), mondrian::MondrianError>(())
//! ```

use std::ops::Deref;

use crate::data::FeatureValue;
use crate::error::Result;

/// Hyper-parameters that can be checked: every rule about their values lives in
/// [`validate`](Self::validate), in the library, so the command line and Python keep none
/// of their own and only map its errors.
pub trait Params: Clone + Sized {
    /// Checks every value; the first one out of range is an
    /// [`InvalidParameter`](crate::MondrianError::InvalidParameter) error naming it.
    fn validate(&self) -> Result<()>;

    /// The parameters as a [`Checked`] value, which a model takes without checking again.
    fn check(self) -> Result<Checked<Self>> {
        self.validate()?;
        Ok(Checked(self))
    }
}

/// Parameters that passed [`Params::validate`]; the only way to make one is
/// [`Params::check`].
#[derive(Debug, Clone, PartialEq)]
pub struct Checked<P>(P);

impl<P> Checked<P> {
    /// The parameters.
    pub fn into_inner(self) -> P {
        self.0
    }
}

impl<P> Deref for Checked<P> {
    type Target = P;
    fn deref(&self) -> &P {
        &self.0
    }
}

/// A model: its parameters and what a training row carries besides its features.
pub trait Model: Sized {
    /// The target of a training row: a class index, a real number.
    type Target: Copy;
    /// The model's hyper-parameters.
    type Params: Params;

    /// An untrained model with checked parameters.
    fn with_params(params: Checked<Self::Params>) -> Self;
    /// The parameters.
    fn params(&self) -> &Self::Params;
}

/// Batch training on row-major features `x` (`n_features` columns) of any
/// [`FeatureValue`] type: replaces whatever the model held.
pub trait Fit<T: FeatureValue>: Model {
    /// Trains on the rows, discarding previous state.
    fn fit(&mut self, x: &[T], n_features: usize, y: &[Self::Target]) -> Result<()>;
}

/// Online training: the model takes more rows; for the Mondrian models the result has the
/// distribution of batch training on every row held.
pub trait PartialFit<T: FeatureValue>: Model {
    /// Trains on more rows (one or a mini-batch).
    fn partial_fit(&mut self, x: &[T], n_features: usize, y: &[Self::Target]) -> Result<()>;
}

/// Training with a sample weight per row (see
/// [`MondrianForestClassifier::fit_weighted`](crate::MondrianForestClassifier::fit_weighted)):
/// a row of integer weight k counts as k copies of the row, a row of weight 0 is not
/// learnt, a fractional weight is rounded at random per tree, without bias.
pub trait WeightedFit<T: FeatureValue>: Fit<T> + PartialFit<T> {
    /// [`Fit::fit`] with sample weights.
    fn fit_weighted(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[Self::Target],
        sample_weight: &[f64],
    ) -> Result<()>;
    /// [`PartialFit::partial_fit`] with sample weights.
    fn partial_fit_weighted(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[Self::Target],
        sample_weight: &[f64],
    ) -> Result<()>;
}

/// Prediction for any rows of the model's width.
pub trait Predict<T: FeatureValue>: Model {
    /// What a prediction of a block of rows is.
    type Prediction;
    /// Predicts each row.
    fn predict(&self, x: &[T], n_features: usize) -> Result<Self::Prediction>;
}

/// Forgetting training points exactly, and the points a model holds.
///
/// Points are numbered by arrival: the n-th row given to training since the model was
/// last `fit` from scratch has id n − 1, whether it came through `fit` or `partial_fit`.
pub trait Forget: Model {
    /// Removes the points with these ids; the model is then as if it had never seen them.
    /// An id the model does not hold is an error, and the model is then unchanged.
    fn forget(&mut self, ids: &[u64]) -> Result<()>;
    /// Points held: those given, less those forgotten or out of a sliding window.
    fn n_points(&self) -> usize;
    /// The ids of the points held, oldest first.
    fn point_ids(&self) -> Vec<u64>;
}
