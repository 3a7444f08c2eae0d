//! Bayesian decision trees (spec `bayesian-trees.md`): a different family from the
//! Mondrian models. Splits are chosen *with* the labels, and the object of inference is a
//! posterior over trees: p(T | Y, X) ∝ p(T | X) Π_leaves ℓ(Y_{N_j}), with the CGM prior
//! of [`prior`] and the conjugate leaf models of [`likelihood`].
//!
//! * [`likelihood`]: Dirichlet–multinomial, Normal with known variance, Normal–inverse-gamma
//!   leaves behind one trait (§2.1).
//! * [`prior`]: the CGM prior, its density and its exact Galton–Watson sizes (§2.2).
//! * [`tree`]: the tree a particle grows, and the presorted training features.
//! * [`proposal`], [`smc`]: top-down SMC (§3): proposals, expansion orders, resampling,
//!   evidence, islands.
//! * [`model`]: [`SmcTreeClassifier`] and [`SmcTreeRegressor`], fit and predict; both are
//!   [`Persistent`](crate::Persistent) (`decode.rs`: an owned form, checked on load).
//! * [`diagnostics`]: CODA-compatible effective sample size (§5.5).
//! * [`hypercube`]: the hypercube-D data of §5.3.
//! * [`bart`]: BART with CGM, GrowPrune and particle Gibbs tree samplers (§4).
//! * [`mcmc`]: the Ch. 3 MCMC baseline (§3.11): one tree sampled by CGM Metropolis–Hastings
//!   (BART's kernel, generic over the leaf model), predictions averaged over iterations.
#[macro_use]
mod shared;
pub mod bart;
mod decode;
pub mod diagnostics;
pub mod hypercube;
pub mod likelihood;
pub mod mcmc;
pub mod model;
pub mod prior;
pub mod proposal;
pub mod resample;
pub mod smc;
pub mod special;
pub mod tree;

pub use bart::{
    BartClassifier, BartParams, BartRegressor, CgmMoves, NoisePrior, PgInit, SigmaHat, TreeOrder,
    TreeSampler,
};
pub use diagnostics::{effective_size, ess_per_second};
pub use hypercube::{hypercube, Hypercube};
pub use likelihood::{
    ClassCounts, DirichletMultinomial, LeafModel, Moments, NormalInverseGamma, NormalKnownVariance,
    RegressionLeafModel, SufficientStats,
};
pub use mcmc::{
    sample_chain, HoldoutPoint, McmcClassifierParams, McmcParams, McmcPosterior,
    McmcRegressorParams, McmcTrace, McmcTreeClassifier, McmcTreeRegressor,
};
pub use model::{
    RegressionLeaf, SmcClassifierParams, SmcRegressorParams, SmcTreeClassifier, SmcTreeRegressor,
};
pub use prior::CgmPrior;
pub use proposal::{Proposal, SplitValue};
pub use resample::Resampler;
pub use smc::{
    sample_prior_tree, Expansion, IslandRun, IslandWeighting, SmcParams, SmcPosterior, WeightedTree,
};
pub use tree::{BayesTree, Features, Node};
