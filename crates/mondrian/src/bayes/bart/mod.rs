//! BART, the Bayesian additive regression tree model, with three tree samplers (spec
//! `bayesian-trees.md` §4): y = Σ_{m=1}^{M} g(x; T_m, μ_m) + e under the CGM tree prior,
//! Normal leaf values and an inverse-gamma noise variance, sampled by Bayesian
//! backfitting (Alg. 4.1) whose tree updates are
//!
//! * [`TreeSampler::Cgm`]: one grow / prune / change / swap Metropolis–Hastings move
//!   (§4.5),
//! * [`TreeSampler::GrowPrune`]: one grow / prune move,
//! * [`TreeSampler::ParticleGibbs`]: one conditional-SMC sweep with the current tree as
//!   the reference particle (§4.6, Alg. 4.2).
//!
//! Modules: [`params`] (settings and the §4.1 calibration), `local` (a tree against its
//! residual), `growprune` / `cgm` / `pg` (the kernels), `kernel` (their common entry),
//! `backfit` (Alg. 4.1 and the probit variant), [`traces`], `api` ([`BartRegressor`],
//! [`BartClassifier`]), `random` (normal, gamma, truncated-normal variates), `decode`
//! (saving and loading, [`Persistent`](crate::Persistent)).

mod api;
mod backfit;
mod cgm;
mod decode;
#[cfg(test)]
mod geweke;
mod growprune;
mod kernel;
mod local;
pub mod params;
mod pg;
mod random;
pub mod traces;

pub use api::{BartClassifier, BartRegressor};
pub(crate) use cgm::cgm_step;
pub use kernel::{step_tree, KernelOutcome};
pub(crate) use local::Local;
pub use local::{build_tree, TreeShape};
pub use params::{
    noise_prior, BartParams, CgmMoves, NoisePrior, PgInit, SigmaHat, TreeOrder, TreeSampler,
    MAX_TREES,
};
pub use random::normal_cdf;
pub use traces::Traces;
