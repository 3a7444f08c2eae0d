//! The tree kernels behind one interface (spec `bayesian-trees.md` §4.3 step 2.2): a
//! Markov kernel K(T_old, ·) that leaves the conditional posterior π(T) of one tree
//! invariant, (4.8), with σ² fixed and the leaf values integrated out.

use rand::Rng;

use super::cgm::cgm_step;
use super::local::Local;
use super::params::{CgmMoves, PgInit, TreeSampler};
use super::pg;
use crate::bayes::likelihood::{Moments, NormalKnownVariance};
use crate::bayes::prior::CgmPrior;
use crate::bayes::proposal::SplitValue;
#[cfg(test)]
use crate::bayes::tree::Kind;
use crate::bayes::tree::{BayesTree, Features};
use crate::error::{MondrianError, Result};

/// What one kernel application did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelOutcome {
    /// MH: the proposal was accepted. PG: a particle other than the reference was drawn.
    pub moved: bool,
}

/// One kernel application to `tree`; `first_visit` selects the PG initialisation.
pub(crate) fn apply<R: Rng>(
    loc: &Local,
    tree: &BayesTree<Moments>,
    sampler: &TreeSampler,
    first_visit: bool,
    rng: &mut R,
) -> (BayesTree<Moments>, bool) {
    match *sampler {
        TreeSampler::Cgm(moves) => {
            let mut t = tree.clone();
            let moved = cgm_step(loc, &mut t, &moves, rng);
            (t, moved)
        }
        TreeSampler::GrowPrune => {
            let mut t = tree.clone();
            let moved = cgm_step(loc, &mut t, &CgmMoves::GROW_PRUNE, rng);
            (t, moved)
        }
        TreeSampler::ParticleGibbs {
            particles,
            max_stages,
            init,
        } => match init {
            PgInit::Smc { particles: c } if first_visit => {
                let (t, _) = pg::sample(loc, None, c, max_stages, rng);
                (t, true)
            }
            _ => {
                let (t, k) = pg::sample(loc, Some(tree), particles, max_stages, rng);
                (t, k != 0)
            }
        },
    }
}

/// One application of a tree kernel to a single tree, with the noise variance and the
/// leaf prior in `model` held fixed: the update of step 2.2 of Alg. 4.1 on its own, for
/// tests and experiments on the conditional posterior (4.8) of one tree given its
/// residual `residual`.
///
/// Only the rows and rules of `tree` are read. In the returned tree, nodes the kernel
/// made carry the statistics of `residual`; nodes it kept carry whatever they had.
/// PG here never uses [`PgInit::Smc`]: the reference is always `tree`.
pub fn step_tree<R: Rng>(
    sampler: &TreeSampler,
    prior: &CgmPrior,
    features: &Features,
    residual: &[f64],
    model: &NormalKnownVariance,
    tree: &BayesTree<Moments>,
    rng: &mut R,
) -> Result<(BayesTree<Moments>, KernelOutcome)> {
    sampler.validate()?;
    prior.validate()?;
    model.validate()?;
    if residual.len() != features.n_rows() {
        return Err(MondrianError::LengthMismatch {
            n_rows: features.n_rows(),
            n_labels: residual.len(),
        });
    }
    if let Some(row) = residual.iter().position(|v| !v.is_finite()) {
        return Err(MondrianError::NonFiniteTarget {
            row,
            value: residual[row],
        });
    }
    let root_rows = tree.nodes().first().map_or(0, |n| n.rows().len());
    if root_rows != features.n_rows() || tree.nodes().iter().any(|n| n.is_open()) {
        return Err(MondrianError::InvalidParameter {
            name: "tree",
            reason: "the tree was not grown on these features, or has undecided nodes".into(),
        });
    }
    let loc = Local {
        features,
        resid: residual,
        model,
        prior,
        split_value: SplitValue::Continuous,
    };
    let (t, moved) = apply(&loc, tree, sampler, false, rng);
    Ok((t, KernelOutcome { moved }))
}

/// A canonical text of a tree's rules from the root ("L" for a leaf).
#[cfg(test)]
pub(crate) fn structure_key<S>(tree: &BayesTree<S>) -> String {
    fn walk<S>(tree: &BayesTree<S>, j: usize, out: &mut String) {
        match tree.nodes[j].kind {
            Kind::Split {
                dim,
                threshold,
                left,
                right,
            } => {
                out.push_str(&format!("({dim}:{threshold:e}"));
                walk(tree, left as usize, out);
                walk(tree, right as usize, out);
                out.push(')');
            }
            _ => out.push('L'),
        }
    }
    let mut out = String::new();
    walk(tree, 0, &mut out);
    out
}
