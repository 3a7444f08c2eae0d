//! The GROW and PRUNE Metropolis–Hastings moves of spec `bayesian-trees.md` §4.5 with
//! their exact ratios, against the conditional posterior π(T) ∝ p(T | X) Π ℓ(R_{N_j}) of
//! one tree (4.8). Together, ½ each, they are the GrowPrune kernel; with CHANGE and SWAP
//! ([`super::cgm`]) they make the CGM kernel.
//!
//! With move probabilities P(grow) and P(prune), a grow at leaf j with rule (δ, ξ) drawn
//! from the prior has
//!
//!   r = [P(prune)/|P(T′)|] / [P(grow)/|G(T)|] · p_j (1 − s_{j0})(1 − s_{j1})/(1 − p_j) ·
//!       ℓ_{j0} ℓ_{j1} / ℓ_j,
//!
//! the rule's prior density cancelling against its proposal; |P(T′)| counts the prunable
//! nodes after the grow, 1 when the root grows (the reference code's 0 there would accept
//! every root grow, the pitfall T10 detects). A prune's ratio is the reciprocal of the
//! grow that undoes it.
//!
//! The moves are generic over the leaf model ([`Local`]'s): Normal leaves against a
//! residual in BART, any conjugate leaves (Dirichlet–multinomial, Normal–inverse-gamma)
//! against the targets in the single-tree sampler of Ch. 3 (§3.11).

use rand::Rng;

use super::local::{is_prunable, remove_children, Local};
use crate::bayes::likelihood::{LeafModel, SufficientStats};
use crate::bayes::proposal::uniform_below;
use crate::bayes::tree::{BayesTree, Kind};

/// Accepts with probability min(1, e^log_r).
pub(crate) fn accept<R: Rng>(log_r: f64, rng: &mut R) -> bool {
    log_r >= 0.0 || rng.gen::<f64>() < log_r.exp()
}

/// G(T): leaves that can split.
fn growable<M: LeafModel>(loc: &Local<M>, tree: &BayesTree<M::Stats>) -> Vec<usize> {
    tree.nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.is_leaf() && loc.prior.node_can_split(n, loc.features))
        .map(|(j, _)| j)
        .collect()
}

/// P(T): internal nodes whose children are both leaves.
fn prunable<S>(tree: &BayesTree<S>) -> Vec<usize> {
    (0..tree.nodes.len())
        .filter(|&j| is_prunable(tree, j))
        .collect()
}

/// One GROW proposal; `log_move_ratio` = ln(P(prune)/P(grow)). Returns whether it was
/// accepted (an impossible move is a rejection).
pub(crate) fn grow<M: LeafModel, R: Rng>(
    loc: &Local<M>,
    tree: &mut BayesTree<M::Stats>,
    log_move_ratio: f64,
    rng: &mut R,
) -> bool {
    let candidates = growable(loc, tree);
    if candidates.is_empty() {
        return false;
    }
    let n_prunable = prunable(tree).len();
    let j = candidates[rng.gen_range(0..candidates.len())];
    let node = &tree.nodes[j];
    let dims: Vec<usize> = node.valid_dims(loc.features).collect();
    let dim = dims[rng.gen_range(0..dims.len())];
    let (lo, hi) = node.extent(loc.features, dim);
    let xi = loc.threshold(dim, uniform_below(lo, hi, rng));
    let (left, right) = loc.split(&node.data, dim, xi);
    let mut whole = left.stats.clone();
    whole.merge(&right.stats);
    let log_ml = loc.model.log_marginal(&whole);
    let depth = node.depth();
    let p = loc.prior.p_split(depth);
    let parent_prunable = node.parent().is_some_and(|q| is_prunable(tree, q));
    let prunable_after = n_prunable + 1 - usize::from(parent_prunable);
    let log_r = (candidates.len() as f64).ln() - (prunable_after as f64).ln()
        + log_move_ratio
        + p.ln()
        + loc.log_not_split(&left, depth + 1)
        + loc.log_not_split(&right, depth + 1)
        - (1.0 - p).ln()
        + left.log_ml
        + right.log_ml
        - log_ml;
    if !accept(log_r, rng) {
        return false;
    }
    let (a, b) = tree.split(j, dim, xi, left, right);
    tree.nodes[a as usize].kind = Kind::Leaf;
    tree.nodes[b as usize].kind = Kind::Leaf;
    true
}

/// One PRUNE proposal; `log_move_ratio` = ln(P(grow)/P(prune)).
pub(crate) fn prune<M: LeafModel, R: Rng>(
    loc: &Local<M>,
    tree: &mut BayesTree<M::Stats>,
    log_move_ratio: f64,
    rng: &mut R,
) -> bool {
    let candidates = prunable(tree);
    if candidates.is_empty() {
        return false;
    }
    let n_growable = growable(loc, tree).len();
    let j = candidates[rng.gen_range(0..candidates.len())];
    let Some((a, b)) = tree.nodes[j].children() else {
        return false;
    };
    let (na, nb) = (&tree.nodes[a], &tree.nodes[b]);
    let (sa, sb) = (loc.stats(na.rows()), loc.stats(nb.rows()));
    let mut whole = sa.clone();
    whole.merge(&sb);
    let (ll_a, ll_b) = (loc.model.log_marginal(&sa), loc.model.log_marginal(&sb));
    let ll_j = loc.model.log_marginal(&whole);
    // j can split (it did), so it is growable after the prune; its children leave G.
    let growable_after = n_growable + 1
        - usize::from(loc.prior.node_can_split(na, loc.features))
        - usize::from(loc.prior.node_can_split(nb, loc.features));
    let depth = tree.nodes[j].depth();
    let p = loc.prior.p_split(depth);
    let log_r = (candidates.len() as f64).ln() - (growable_after as f64).ln()
        + log_move_ratio
        + (1.0 - p).ln()
        - p.ln()
        - loc.log_not_split(&na.data, depth + 1)
        - loc.log_not_split(&nb.data, depth + 1)
        + ll_j
        - ll_a
        - ll_b;
    if !accept(log_r, rng) {
        return false;
    }
    remove_children(tree, j);
    true
}
