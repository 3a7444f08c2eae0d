//! The CHANGE and SWAP moves of Chipman, George & McCulloch (1998) and the CGM kernel
//! (spec `bayesian-trees.md` §4.5): one move per call, grow / prune / change / swap with
//! the configured probabilities (¼ each by default, A12).
//!
//! Both moves keep the tree's shape and re-route N_j through the subtree of the top-most
//! node j they touch. The proposal is rejected when a node of the subtree becomes invalid:
//! a rule whose dimension is not in the node's new V, or whose ξ falls outside the new
//! extent [ℓ, u) (which is also what would leave a child empty), or an internal node the
//! size rule forbids. Otherwise
//!
//!   r = Π_{leaves of the subtree} ℓ′/ℓ · Π_{k ∈ subtree} prior′_k / prior_k,
//!
//! with prior_k the node's factor of (3.4): p_k/|V_k|/|e_{kδ}| internal, (1 − s_k) leaf.
//! For CHANGE the product skips j itself (its rule was drawn from the prior, which
//! cancels); SWAP is symmetric and keeps it.

use std::sync::Arc;

use rand::Rng;

use super::growprune::{accept, grow, prune};
use super::local::Local;
use super::params::CgmMoves;
use crate::bayes::likelihood::LeafModel;
use crate::bayes::proposal::uniform_below;
use crate::bayes::tree::{BayesTree, Kind};

/// One CGM move on `tree`; returns whether the proposal was accepted.
pub(crate) fn cgm_step<M: LeafModel, R: Rng>(
    loc: &Local<M>,
    tree: &mut BayesTree<M::Stats>,
    moves: &CgmMoves,
    rng: &mut R,
) -> bool {
    let [g, p, c, _] = moves.normalised();
    let u = rng.gen::<f64>();
    if u < g {
        grow(loc, tree, (p / g).ln(), rng)
    } else if u < g + p {
        prune(loc, tree, (g / p).ln(), rng)
    } else if u < g + p + c {
        change(loc, tree, rng)
    } else {
        swap(loc, tree, rng)
    }
}

/// CHANGE: a new prior rule at an internal node drawn uniformly.
fn change<M: LeafModel, R: Rng>(
    loc: &Local<M>,
    tree: &mut BayesTree<M::Stats>,
    rng: &mut R,
) -> bool {
    let internal: Vec<usize> = (0..tree.nodes.len())
        .filter(|&j| !tree.nodes[j].is_leaf())
        .collect();
    if internal.is_empty() {
        return false;
    }
    let j = internal[rng.gen_range(0..internal.len())];
    let node = &tree.nodes[j];
    let dims: Vec<usize> = node.valid_dims(loc.features).collect();
    let dim = dims[rng.gen_range(0..dims.len())];
    let (lo, hi) = node.extent(loc.features, dim);
    let xi = loc.threshold(dim, uniform_below(lo, hi, rng));
    propose(loc, tree, j, &[(j, (dim, xi))], false, rng)
}

/// SWAP: the rules of an internal parent and an internal child, the pair drawn uniformly.
fn swap<M: LeafModel, R: Rng>(loc: &Local<M>, tree: &mut BayesTree<M::Stats>, rng: &mut R) -> bool {
    let mut pairs = Vec::new();
    for (j, node) in tree.nodes.iter().enumerate() {
        if let Some((a, b)) = node.children() {
            for c in [a, b] {
                if !tree.nodes[c].is_leaf() {
                    pairs.push((j, c));
                }
            }
        }
    }
    if pairs.is_empty() {
        return false;
    }
    let (j, c) = pairs[rng.gen_range(0..pairs.len())];
    let (Some(rj), Some(rc)) = (tree.nodes[j].rule(), tree.nodes[c].rule()) else {
        return false;
    };
    propose(loc, tree, j, &[(j, rc), (c, rj)], true, rng)
}

/// Rebuilds the subtree of `top` with the rules `overrides`, and accepts it with the MH
/// ratio of the module documentation (`top_rule_counts`: whether top's own rule factor
/// enters it).
fn propose<M: LeafModel, R: Rng>(
    loc: &Local<M>,
    tree: &mut BayesTree<M::Stats>,
    top: usize,
    overrides: &[(usize, (usize, f64))],
    top_rule_counts: bool,
    rng: &mut R,
) -> bool {
    match rebuild(loc, tree, top, overrides, top_rule_counts) {
        Some((new, log_r)) if accept(log_r, rng) => {
            *tree = new;
            true
        }
        _ => false,
    }
}

/// The log prior factor of a node's subtree-local part: the rule density of an internal
/// node (p_k is the same on both sides and left out), log(1 − s_k) of a leaf.
fn old_side<M: LeafModel>(
    loc: &Local<M>,
    tree: &BayesTree<M::Stats>,
    top: usize,
    top_rule_counts: bool,
) -> f64 {
    let mut total = 0.0;
    let mut stack = vec![top];
    while let Some(k) = stack.pop() {
        let node = &tree.nodes[k];
        match node.kind {
            Kind::Split {
                dim, left, right, ..
            } => {
                if k != top || top_rule_counts {
                    total += loc.prior.rule_log_density(node, loc.features, dim as usize);
                }
                stack.push(left as usize);
                stack.push(right as usize);
            }
            _ => {
                total += loc.log_not_split(&node.data, node.depth()) + loc.log_ml(node.rows());
            }
        }
    }
    total
}

/// The tree with the subtree of `top` re-routed under the overridden rules, and log r;
/// `None` when a node becomes invalid (prior density 0).
fn rebuild<M: LeafModel>(
    loc: &Local<M>,
    tree: &BayesTree<M::Stats>,
    top: usize,
    overrides: &[(usize, (usize, f64))],
    top_rule_counts: bool,
) -> Option<(BayesTree<M::Stats>, f64)> {
    let old = old_side(loc, tree, top, top_rule_counts);
    let mut new = tree.clone();
    let mut total = 0.0;
    let mut stack = vec![top];
    while let Some(k) = stack.pop() {
        let node = &new.nodes[k];
        match node.kind {
            Kind::Split {
                dim,
                threshold,
                left,
                right,
            } => {
                let (dim, threshold) = overrides
                    .iter()
                    .find(|(o, _)| *o == k)
                    .map_or((dim as usize, threshold), |&(_, rule)| rule);
                let (lo, hi) = node.extent(loc.features, dim);
                if !(lo < hi
                    && lo <= threshold
                    && threshold < hi
                    && loc.prior.node_can_split(node, loc.features))
                {
                    return None;
                }
                if k != top || top_rule_counts {
                    total += loc.prior.rule_log_density(node, loc.features, dim);
                }
                let (l, r) = loc.split(&node.data, dim, threshold);
                new.nodes[left as usize].data = Arc::new(l);
                new.nodes[right as usize].data = Arc::new(r);
                new.nodes[k].kind = Kind::Split {
                    dim: dim as u32,
                    threshold,
                    left,
                    right,
                };
                stack.push(left as usize);
                stack.push(right as usize);
            }
            _ => {
                // Built by the split above, so scored against R already.
                total += loc.log_not_split(&node.data, node.depth()) + node.data.log_ml;
            }
        }
    }
    Some((new, total - old))
}
