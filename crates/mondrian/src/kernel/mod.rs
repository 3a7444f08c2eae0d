//! The Mondrian kernel (Balog, Lakshminarayanan, Ghahramani, Roy & Teh, UAI 2016; spec
//! `mondrian-kernel.md`): random features for the Laplace kernel
//! `k(x, x′) = exp(−λ‖x − x′‖₁)` read off M Mondrian trees of the engine, a sweep of the
//! lifetime λ that reuses one set of trees for every width, and learners on the features.
//!
//! | file | what | spec |
//! |---|---|---|
//! | `features.rs` | [`MondrianKernel`]: the feature map as CSR, online growth | §1.5, §4.1–4.2 |
//! | `path.rs` | [`LifetimePath`]: the trees read at every lifetime, one event at a time | §3.1–3.2 |
//! | `ridge.rs` | exact ridge with Cholesky updates, log-determinant, evidence | §3.3, App. B |
//! | `packed.rs` | packed lower-triangular rows: dot products, Givens rank-1 updates, Gram rows | App. B.3 |
//! | `dense.rs` | one dense Cholesky factorisation (the E4 reference, a test oracle) | E4 |
//! | `sweep.rs` | learners along the path: ridge, SGD, the forest of §5 | §3.3–3.4, §5 |
//! | `learners.rs` | [`MondrianKernelRidge`]: batch, online, the lifetime search | §3.3, §4.3 |
//! | `decode.rs` | checks of saved models | |
//! | `sgd.rs` | SGD with warm starts | §3.4, §4.4 |
//! | `bayes.rs` | the posterior over lifetimes | §3.5 |
//!
//! The trees are the engine's ([`crate::tree::MondrianTree`] with [`crate::stats::NoStats`]),
//! sampled in split-time order ([`crate::tree::MondrianTree::fit_in_time_order`]) so that
//! the trees at lifetime λ are, bit for bit, the trees at any Λ > λ with the later cuts
//! removed: a sweep to Λ passes through the very features a model fitted at each λ has.

mod bayes;
mod decode;
mod dense;
mod features;
mod learners;
mod packed;
mod path;
mod ridge;
mod ridge_path;
mod sgd;
mod sweep;

pub use bayes::{
    lifetime_posterior, log_uniform_cdf, mixture_moments, uniform_cdf, BayesError,
    MixtureAccumulator,
};
pub use dense::dense_cholesky;
pub use features::{Csr, Extension, KernelParams, MondrianKernel};
pub use learners::{KernelRidgeParams, LifetimeSearch, MondrianKernelRidge};
pub use path::{Event, LifetimePath};
pub use ridge::{log_marginal_likelihood, IncrementalRidge, NewColumn};
pub use sgd::{SgdParams, SparseSgd};
pub use sweep::{
    profiled_log_evidence, run_sweep, run_sweep_until, Averaged, Averaging, Criterion, Learner,
    LifetimePrior, SweepPoint, SweepReport, SweepSpec,
};

/// `100·‖ŷ − y‖₂ / ‖y‖₂` on raw targets, the paper's "relative error" (spec A30).
pub fn relative_error(predicted: &[f64], y: &[f64]) -> f64 {
    let num: f64 = predicted
        .iter()
        .zip(y)
        .map(|(p, t)| (p - t) * (p - t))
        .sum();
    let den: f64 = y.iter().map(|t| t * t).sum();
    100.0 * (num / den).sqrt()
}
