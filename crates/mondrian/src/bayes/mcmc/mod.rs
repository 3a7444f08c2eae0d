//! The Ch. 3 MCMC baseline (spec `bayesian-trees.md` §3.11): one Bayesian decision tree
//! sampled by Chipman, George & McCulloch's (1998) Metropolis–Hastings chain, each
//! iteration one grow / prune / change / swap move with the exact ratios of §4.5, against
//! the posterior p(T | Y, X) ∝ p(T | X) Π_leaves ℓ(Y_{N_j}) of §2 with any conjugate leaf
//! model: Dirichlet–multinomial leaves ([`McmcTreeClassifier`]) or Normal–inverse-gamma /
//! known-variance Normal leaves ([`McmcTreeRegressor`]).
//!
//! * The moves are BART's tree kernel ([`crate::bayes::bart`]'s `cgm` and `growprune`),
//!   made generic over the leaf model: one kernel serves both.
//! * The chain starts from the single-node tree ([REC], §3.11) unless a start is given.
//! * Predictions average the trees of **all** iterations, no burn-in dropped ([T] §3.4.2):
//!   after n iterations the predictive is (1/n) Σ_{t=1..n} p(y | x, T_t), T_t the tree
//!   after move t. Runs of rejected moves repeat a tree, so the posterior keeps each
//!   distinct visited tree once with its number of iterations.
//! * Traces per iteration: the sampler's cumulative seconds, the training log-likelihood
//!   Σ log ℓ, the log prior density log p(T | X), the number of leaves and whether the move
//!   was accepted. With a held-out set the fit also records the test mean log-predictive of
//!   the running average at chosen iterations; that bookkeeping is not counted in the
//!   seconds.
//!
//! ```
//! use mondrian::bayes::{McmcClassifierParams, McmcParams, McmcTreeClassifier};
//! let params = McmcClassifierParams {
//!     mcmc: McmcParams { iterations: 500, seed: 3, ..Default::default() },
//!     ..Default::default()
//! };
//! let mut model = McmcTreeClassifier::new(params)?;
//! let x = [0.1, 0.2, 0.3, 0.7, 0.8, 0.9];
//! model.fit(&x, 1, &[0, 0, 0, 1, 1, 1])?;
//! let p = model.predict_proba(&[0.15, 0.85], 1)?; // rows of K = 2 probabilities
//! assert!(p[0] > 0.5 && p[3] > 0.5);
//! assert_eq!(model.trace()?.len(), 500);
//! # Ok::<(), mondrian::MondrianError>(())
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use crate::bayes::bart::{cgm_step, CgmMoves, Local};
use crate::bayes::likelihood::LeafModel;
use crate::bayes::prior::CgmPrior;
use crate::bayes::proposal::SplitValue;
use crate::bayes::shared::check_lengths;
use crate::bayes::special::log_add_exp;
use crate::bayes::tree::{partition, BayesTree, Features, Kind};
use crate::data::{FeatureValue, Rows};
use crate::error::{MondrianError, Result};
use crate::model::{Checked, Params};

/// Most iterations of one chain (the traces keep a few words per iteration).
pub const MAX_ITERATIONS: usize = 1 << 28;

fn bad(name: &'static str, reason: String) -> MondrianError {
    MondrianError::InvalidParameter { name, reason }
}

/// Settings of the chain: the tree prior, the move probabilities, its length and seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McmcParams {
    /// The CGM tree prior (§3.10 defaults α_s = 0.95, β_s = 0.5).
    pub prior: CgmPrior,
    /// Relative probabilities of grow / prune / change / swap (¼ each, §4.5).
    pub moves: CgmMoves,
    /// n: the number of moves, each one iteration (at least 1).
    pub iterations: usize,
    /// Seeds the chain's random stream.
    pub seed: u64,
    /// How a split location is stored (A18).
    pub split_value: SplitValue,
}

impl Default for McmcParams {
    fn default() -> Self {
        McmcParams {
            prior: CgmPrior::default(),
            moves: CgmMoves::default(),
            iterations: 1000,
            seed: 0,
            split_value: SplitValue::Continuous,
        }
    }
}

impl Params for McmcParams {
    fn validate(&self) -> Result<()> {
        self.prior.validate()?;
        self.moves.validate()?;
        if self.iterations == 0 || self.iterations > MAX_ITERATIONS {
            return Err(bad(
                "iterations",
                format!("{} is not in 1..={MAX_ITERATIONS}", self.iterations),
            ));
        }
        Ok(())
    }
}

/// Per-iteration records of a chain; entry t is the state after move t + 1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct McmcTrace {
    /// Cumulative sampler seconds (held-out bookkeeping and callbacks excluded).
    pub seconds: Vec<f64>,
    /// Σ_leaves log ℓ(Y_{N_j}) of the tree.
    pub log_likelihood: Vec<f64>,
    /// log p(T | X), the prior density (3.4).
    pub log_prior: Vec<f64>,
    /// Number of leaves.
    pub n_leaves: Vec<u32>,
    /// Whether the move was accepted (an impossible move counts as rejected).
    pub accepted: Vec<bool>,
}

impl McmcTrace {
    fn with_capacity(n: usize) -> Self {
        McmcTrace {
            seconds: Vec::with_capacity(n),
            log_likelihood: Vec::with_capacity(n),
            log_prior: Vec::with_capacity(n),
            n_leaves: Vec::with_capacity(n),
            accepted: Vec::with_capacity(n),
        }
    }

    /// Number of iterations recorded.
    pub fn len(&self) -> usize {
        self.seconds.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.seconds.is_empty()
    }

    /// The fraction of accepted moves.
    pub fn acceptance_rate(&self) -> f64 {
        let n = self.accepted.len().max(1) as f64;
        self.accepted.iter().filter(|&&a| a).count() as f64 / n
    }

    /// The sampler's seconds over all iterations.
    pub fn total_seconds(&self) -> f64 {
        self.seconds.last().copied().unwrap_or(0.0)
    }
}

/// One point of a held-out curve: after `iteration` moves and `seconds` of sampling, the
/// test mean log p(y | x) of the predictive averaged over iterations 1..=`iteration`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HoldoutPoint {
    /// Iterations so far (1-based).
    pub iteration: usize,
    /// Sampler seconds so far.
    pub seconds: f64,
    /// Mean over the held-out rows of log p(y_i | x_i).
    pub mean_log_predictive: f64,
}

// ---------------------------------------------------------------------------------------
// The chain
// ---------------------------------------------------------------------------------------

/// A tree re-scored on `loc`'s targets: the same rules, every node's data made afresh
/// from the root. Fails when a rule leaves a child empty.
fn rescore<M: LeafModel>(
    loc: &Local<M>,
    tree: &BayesTree<M::Stats>,
) -> Result<BayesTree<M::Stats>> {
    let mut out = tree.clone();
    out.nodes[0].data = loc.root();
    let mut stack = vec![0usize];
    while let Some(j) = stack.pop() {
        if let Kind::Split {
            dim,
            threshold,
            left,
            right,
        } = out.nodes[j].kind
        {
            let (l, r) = partition(
                loc.features,
                loc.resid,
                loc.model,
                &out.nodes[j].data,
                dim as usize,
                threshold,
            );
            if l.rows.is_empty() || r.rows.is_empty() {
                return Err(bad(
                    "start",
                    format!("rule x[{dim}] ≤ {threshold} leaves a child empty"),
                ));
            }
            out.nodes[left as usize].data = Arc::new(l);
            out.nodes[right as usize].data = Arc::new(r);
            stack.push(left as usize);
            stack.push(right as usize);
        }
    }
    Ok(out)
}

/// The chain's first tree: `start` re-scored, or the single leaf.
fn first_tree<M: LeafModel>(
    loc: &Local<M>,
    start: Option<&BayesTree<M::Stats>>,
) -> Result<BayesTree<M::Stats>> {
    match start {
        Some(t) => {
            let n = loc.features.n_rows();
            let root_rows = t.nodes().first().map_or(0, |r| r.rows().len());
            let d = loc.features.n_features();
            let dims_ok = t.nodes().iter().all(|node| match node.rule() {
                Some((dim, threshold)) => dim < d && threshold.is_finite(),
                None => true,
            });
            if root_rows != n || t.nodes().iter().any(|x| x.is_open()) || !dims_ok {
                return Err(bad(
                    "start",
                    "the tree was not grown on these features, or has undecided nodes".into(),
                ));
            }
            rescore(loc, t)
        }
        None => {
            let mut t = BayesTree::with_root(loc.root());
            t.nodes[0].kind = Kind::Leaf;
            Ok(t)
        }
    }
}

/// Runs the chain; after every move `after(iteration (1-based), tree, accepted,
/// excluded)` is called, and the time it adds to `excluded` is not counted in the trace.
fn run<M: LeafModel>(
    params: &McmcParams,
    loc: &Local<M>,
    start: Option<&BayesTree<M::Stats>>,
    mut after: impl FnMut(usize, &BayesTree<M::Stats>, bool, &mut Duration),
) -> Result<(BayesTree<M::Stats>, McmcTrace)> {
    let clock = Instant::now();
    let mut excluded = Duration::ZERO;
    let mut tree = first_tree(loc, start)?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(params.seed);
    let n = params.iterations;
    let mut trace = McmcTrace::with_capacity(n);
    let mut log_lik = tree.log_likelihood();
    let mut log_prior = loc.prior.log_density(&tree, loc.features);
    let mut leaves = tree.n_leaves() as u32;
    for it in 1..=n {
        let moved = cgm_step(loc, &mut tree, &params.moves, &mut rng);
        if moved {
            log_lik = tree.log_likelihood();
            log_prior = loc.prior.log_density(&tree, loc.features);
            leaves = tree.n_leaves() as u32;
        }
        after(it, &tree, moved, &mut excluded);
        trace.log_likelihood.push(log_lik);
        trace.log_prior.push(log_prior);
        trace.n_leaves.push(leaves);
        trace.accepted.push(moved);
        trace
            .seconds
            .push(clock.elapsed().saturating_sub(excluded).as_secs_f64());
    }
    Ok((tree, trace))
}

/// Runs a CGM chain of `params.iterations` moves on training features and targets
/// (which must suit `model`: class labels below K for Dirichlet–multinomial leaves),
/// from `start` (a tree grown on these features, e.g. by
/// [`build_tree`](crate::bayes::bart::build_tree); re-scored on `targets`) or the single
/// leaf, calling `visit(iteration, tree, accepted)` after every move. Returns the last
/// tree and the trace; `visit`'s time is not in the trace's seconds.
pub fn sample_chain<M: LeafModel>(
    params: &Checked<McmcParams>,
    features: &Features,
    targets: &[M::Target],
    model: &M,
    start: Option<&BayesTree<M::Stats>>,
    mut visit: impl FnMut(usize, &BayesTree<M::Stats>, bool),
) -> Result<(BayesTree<M::Stats>, McmcTrace)> {
    check_lengths(features, targets.len())?;
    let loc = Local {
        features,
        resid: targets,
        model,
        prior: &params.prior,
        split_value: params.split_value,
    };
    run(params, &loc, start, |it, tree, moved, excluded| {
        let t = Instant::now();
        visit(it, tree, moved);
        *excluded += t.elapsed();
    })
}

// ---------------------------------------------------------------------------------------
// The visited trees and the averaged predictive
// ---------------------------------------------------------------------------------------

/// A leaf of a [`Visited`] tree has this `dim`; its `left` indexes the leaf statistics.
const LEAF: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq)]
struct FlatNode {
    dim: u32,
    threshold: f64,
    left: u32,
    right: u32,
}

/// A visited tree kept for prediction: rules and leaf statistics, no training rows, and
/// the number of iterations the chain stayed on it.
#[derive(Debug, Clone)]
struct Visited<S> {
    nodes: Vec<FlatNode>,
    leaf_stats: Vec<S>,
    iterations: u64,
}

impl<S: Clone> Visited<S> {
    fn of(tree: &BayesTree<S>) -> Self {
        let mut leaf_stats = Vec::new();
        let nodes = tree
            .nodes()
            .iter()
            .map(|node| match node.kind {
                Kind::Split {
                    dim,
                    threshold,
                    left,
                    right,
                } => FlatNode {
                    dim,
                    threshold,
                    left,
                    right,
                },
                _ => {
                    leaf_stats.push(node.stats().clone());
                    FlatNode {
                        dim: LEAF,
                        threshold: 0.0,
                        left: leaf_stats.len() as u32 - 1,
                        right: 0,
                    }
                }
            })
            .collect();
        Visited {
            nodes,
            leaf_stats,
            iterations: 0,
        }
    }

    fn leaf<T: FeatureValue>(&self, x: &[T]) -> &S {
        let mut node = &self.nodes[0];
        while node.dim != LEAF {
            let next = if x[node.dim as usize].to_f64() <= node.threshold {
                node.left
            } else {
                node.right
            };
            node = &self.nodes[next as usize];
        }
        &self.leaf_stats[node.left as usize]
    }
}

/// The chain's output: every distinct visited tree with its iteration count, and the
/// trace.
#[derive(Debug, Clone)]
pub struct McmcPosterior<S> {
    visited: Vec<Visited<S>>,
    trace: McmcTrace,
    iterations: usize,
}

impl<S: Clone> McmcPosterior<S> {
    /// Per-iteration records.
    pub fn trace(&self) -> &McmcTrace {
        &self.trace
    }

    /// Number of distinct trees visited (a new one after every accepted move).
    pub fn n_visited(&self) -> usize {
        self.visited.len()
    }

    /// The iteration-weighted mean number of leaves.
    pub fn mean_leaves(&self) -> f64 {
        let total: f64 = self.trace.n_leaves.iter().map(|&l| l as f64).sum::<f64>();
        total / self.iterations as f64
    }

    /// For each row of `rows`, `add(row index, leaf statistics, weight, out)` over the
    /// visited trees (weight = the tree's share of the iterations), into `width` outputs
    /// per row that start at `init`.
    fn accumulate<T: FeatureValue>(
        &self,
        rows: &Rows<'_, T>,
        width: usize,
        init: f64,
        add: impl Fn(usize, &S, f64, &mut [f64]),
    ) -> Vec<f64> {
        let mut out = vec![init; rows.n_rows() * width];
        let n = self.iterations as f64;
        for v in &self.visited {
            let w = v.iterations as f64 / n;
            for (i, o) in out.chunks_mut(width).enumerate() {
                add(i, v.leaf(rows.row(i)), w, o);
            }
        }
        out
    }
}

/// A held-out set for the running test log-predictive.
struct Holdout<'a, M: LeafModel, T: FeatureValue> {
    rows: Rows<'a, T>,
    targets: &'a [M::Target],
    /// Iterations (1-based, increasing) at which to record a point.
    at: &'a [usize],
}

/// Runs the chain from the single leaf and keeps the visited trees; with a held-out set,
/// also the curve of its mean log-predictive at the requested iterations.
fn sample_posterior<M: LeafModel, T: FeatureValue>(
    params: &McmcParams,
    features: &Features,
    targets: &[M::Target],
    model: &M,
    holdout: Option<Holdout<'_, M, T>>,
) -> Result<(McmcPosterior<M::Stats>, Vec<HoldoutPoint>)> {
    check_lengths(features, targets.len())?;
    let loc = Local {
        features,
        resid: targets,
        model,
        prior: &params.prior,
        split_value: params.split_value,
    };
    let mut visited: Vec<Visited<M::Stats>> = Vec::new();
    let mut current: Option<Visited<M::Stats>> = None;
    // Per held-out row: log Σ over finished trees of (iterations) · p(y_i | x_i, T).
    let n_test = holdout.as_ref().map_or(0, |h| h.rows.n_rows());
    let mut log_sums = vec![f64::NEG_INFINITY; n_test];
    let mut points = Vec::new();
    let mut next_point = 0usize;
    let log_pred = |h: &Holdout<'_, M, T>, v: &Visited<M::Stats>, i: usize| {
        model.log_predictive(v.leaf(h.rows.row(i)), h.targets[i])
    };
    let (_, trace) = run(params, &loc, None, |it, tree, moved, excluded| {
        if moved || current.is_none() {
            let done = current.replace(Visited::of(tree));
            if let Some(done) = done {
                if let Some(h) = &holdout {
                    let t = Instant::now();
                    let w = (done.iterations as f64).ln();
                    for (i, s) in log_sums.iter_mut().enumerate() {
                        *s = log_add_exp(*s, w + log_pred(h, &done, i));
                    }
                    *excluded += t.elapsed();
                }
                visited.push(done);
            }
        }
        let cur = current.as_mut().expect("set above");
        cur.iterations += 1;
        if let Some(h) = &holdout {
            if h.at.get(next_point) == Some(&it) {
                let t = Instant::now();
                let w = (cur.iterations as f64).ln();
                let ln_it = (it as f64).ln();
                let total: f64 = log_sums
                    .iter()
                    .enumerate()
                    .map(|(i, &s)| log_add_exp(s, w + log_pred(h, cur, i)) - ln_it)
                    .sum();
                next_point += 1;
                *excluded += t.elapsed();
                points.push(HoldoutPoint {
                    iteration: it,
                    seconds: 0.0, // filled from the trace below
                    mean_log_predictive: total / n_test.max(1) as f64,
                });
            }
        }
    })?;
    visited.extend(current);
    for p in &mut points {
        p.seconds = trace.seconds[p.iteration - 1];
    }
    Ok((
        McmcPosterior {
            visited,
            trace,
            iterations: params.iterations,
        },
        points,
    ))
}

/// Checks the held-out iterations: increasing, within 1..=n.
fn check_points(at: &[usize], n: usize) -> Result<()> {
    if at.windows(2).any(|w| w[0] >= w[1]) || at.iter().any(|&i| i == 0 || i > n) {
        return Err(bad(
            "at",
            format!("held-out iterations must increase within 1..={n}"),
        ));
    }
    Ok(())
}

/// Held-out rows, their targets and the iterations at which to score them.
type HeldOut<'a, T, Y> = (&'a [T], &'a [Y], &'a [usize]);

/// A fitted chain with its leaf model.
#[derive(Debug, Clone)]
struct Fitted<M: LeafModel> {
    model: M,
    n_features: usize,
    posterior: McmcPosterior<M::Stats>,
}

impl<M: LeafModel> Fitted<M> {
    fn fit<T: FeatureValue>(
        params: &McmcParams,
        x: &[T],
        n_features: usize,
        targets: &[M::Target],
        model: M,
        test: Option<HeldOut<'_, T, M::Target>>,
    ) -> Result<(Self, Vec<HoldoutPoint>)> {
        let features = Features::new(x, n_features)?;
        let holdout = match test {
            Some((xt, yt, at)) => {
                let rows = Rows::new(xt, n_features)?;
                rows.validate(Some(n_features))?;
                if yt.len() != rows.n_rows() {
                    return Err(MondrianError::LengthMismatch {
                        n_rows: rows.n_rows(),
                        n_labels: yt.len(),
                    });
                }
                check_points(at, params.iterations)?;
                Some(Holdout {
                    rows,
                    targets: yt,
                    at,
                })
            }
            None => None,
        };
        let (posterior, points) = sample_posterior(params, &features, targets, &model, holdout)?;
        Ok((
            Fitted {
                model,
                n_features,
                posterior,
            },
            points,
        ))
    }
}

mod models;

pub use models::{
    McmcClassifierParams, McmcRegressorParams, McmcTreeClassifier, McmcTreeRegressor,
};
