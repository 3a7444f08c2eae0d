//! What the Gibbs sampler records at every iteration (spec `bayesian-trees.md` §4.3 step
//! 3, §5.4, §5.5), and effective sample sizes of the kept part (A15: ESS over the
//! post-burn-in iterations, ESS/s over their wall time).

use serde::{Deserialize, Serialize};

use crate::bayes::diagnostics::effective_size;

/// Per-iteration traces of a BART chain, burn-in included; entry i is iteration i + 1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Traces {
    /// Training log-likelihood Σ_n log N(y_n | ŷ_n, σ²) on the original scale of y
    /// (probit: Σ_n log Φ(±ŷ_n)): the statistic whose ESS [T] reports.
    pub log_likelihood: Vec<f64>,
    /// σ² on the original scale (1 for the probit classifier).
    pub sigma2: Vec<f64>,
    /// Mean number of leaves per tree.
    pub mean_leaves: Vec<f64>,
    /// Total number of leaves over the M trees.
    pub total_leaves: Vec<usize>,
    /// Training mean squared error of ŷ on the original scale (probit: of ŷ against the
    /// latent z).
    pub train_mse: Vec<f64>,
    /// Fraction of tree updates that moved: accepted MH proposals, or PG draws other than
    /// the reference particle.
    pub move_rate: Vec<f64>,
    /// Wall seconds of the iteration's sampling.
    pub seconds: Vec<f64>,
    /// Leading iterations that are burn-in.
    pub burn_in: usize,
}

impl Traces {
    /// Iterations recorded.
    pub fn n_iter(&self) -> usize {
        self.seconds.len()
    }

    /// The post-burn-in part of a trace of this chain.
    pub fn kept<'a, T>(&self, trace: &'a [T]) -> &'a [T] {
        &trace[self.burn_in.min(trace.len())..]
    }

    /// Seconds of all iterations.
    pub fn total_seconds(&self) -> f64 {
        self.seconds.iter().sum()
    }

    /// Seconds of the post-burn-in iterations.
    pub fn kept_seconds(&self) -> f64 {
        self.kept(&self.seconds).iter().sum()
    }

    /// CODA effective sample size of the post-burn-in part of a trace (§5.5).
    pub fn ess(&self, trace: &[f64]) -> f64 {
        effective_size(self.kept(trace))
    }

    /// ESS of the post-burn-in part of a trace per post-burn-in second.
    pub fn ess_per_second(&self, trace: &[f64]) -> f64 {
        self.ess(trace) / self.kept_seconds()
    }

    /// ESS of the training log-likelihood (Tables 4.1 and 4.4).
    pub fn ess_log_likelihood(&self) -> f64 {
        self.ess(&self.log_likelihood)
    }

    /// ESS/s of the training log-likelihood (Tables 4.2 and 4.5).
    pub fn ess_per_second_log_likelihood(&self) -> f64 {
        self.ess_per_second(&self.log_likelihood)
    }
}
