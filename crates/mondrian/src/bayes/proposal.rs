//! The decision at one node of a particle (spec `bayesian-trees.md` §3.4): stop, or split
//! with a rule (δ, ξ), drawn from one of three proposals, with the incremental weight
//! w_t/w_{t−1} = [P/Q] · [ℓ(Y_{j0}) ℓ(Y_{j1}) / ℓ(Y_j)] that makes the particle system
//! target the truncated posterior of §3.3.

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::likelihood::{LeafModel, SufficientStats};
use super::prior::CgmPrior;
use super::special::log_sum_exp;
use super::tree::{partition, BayesTree, Features, Kind};

/// How a particle proposes the decision at a node (§3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Proposal {
    /// (a) The prior itself (the "Bayesian bootstrap filter", [T]'s recommendation):
    /// increment ℓ(Y_{j0})ℓ(Y_{j1})/ℓ(Y_j) on a split, 1 on a stop.
    #[default]
    Prior,
    /// (b) As the prior, but ξ uniform within a gap chosen uniformly among the gaps between
    /// the node's distinct values in δ (A5): the split increment gains G·L_g/|e|.
    Empirical,
    /// (c) The one-step optimal proposal π_t(· | T(t−1)): every (δ, gap) scored by one sweep
    /// per dimension; the increment is Z_j/ℓ_j whatever is drawn.
    Optimal,
}

/// How a split location is stored (§2.2, A18). Training partitions are the same either
/// way; only test points falling inside a gap are routed differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SplitValue {
    /// The continuous draw ξ.
    #[default]
    Continuous,
    /// The midpoint of the gap between the training column's consecutive distinct values
    /// that contains ξ (the reference code's choice).
    Midpoint,
}

/// What a decision did to the particle.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Decided {
    /// log of the incremental weight.
    pub(crate) log_increment: f64,
    /// log of the prior probability (density, for ξ) of the decision.
    pub(crate) log_prior: f64,
    /// The children made by a split.
    pub(crate) children: Option<(u32, u32)>,
}

/// Everything a decision reads.
pub(crate) struct Context<'a, L: LeafModel> {
    pub(crate) features: &'a Features,
    pub(crate) targets: &'a [L::Target],
    pub(crate) model: &'a L,
    pub(crate) prior: &'a CgmPrior,
    pub(crate) proposal: Proposal,
    pub(crate) split_value: SplitValue,
}

/// A uniform draw from [lo, hi) (lo < hi), never hi itself, which would send every point
/// left: rounding in lo + u(hi − lo) can reach it.
pub(crate) fn uniform_below<R: Rng>(lo: f64, hi: f64, rng: &mut R) -> f64 {
    loop {
        let x = lo + (hi - lo) * rng.gen::<f64>();
        if x < hi {
            return x.max(lo);
        }
    }
}

/// The distinct values of dimension `dim` among `rows`, in increasing order.
fn node_distinct(features: &Features, rows: &[u32], dim: usize) -> Vec<f64> {
    let mut ranks: Vec<u32> = rows
        .iter()
        .map(|&r| features.rank(r as usize, dim))
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    let values = features.distinct(dim);
    ranks.iter().map(|&r| values[r as usize]).collect()
}

/// A candidate split of the optimal proposal: the gap [lo, hi) of `dim` and its summand.
struct Candidate {
    dim: usize,
    lo: f64,
    hi: f64,
    log_weight: f64,
}

impl<L: LeafModel> Context<'_, L> {
    /// Decides open node j, which can split, and applies the decision: the node becomes a
    /// leaf, or internal with two open children.
    pub(crate) fn decide<R: Rng>(
        &self,
        tree: &mut BayesTree<L::Stats>,
        j: usize,
        rng: &mut R,
    ) -> Decided {
        let p = self.prior.p_split(tree.nodes[j].depth());
        if self.proposal == Proposal::Optimal {
            return self.decide_optimal(tree, j, p, rng);
        }
        if rng.gen::<f64>() >= p {
            tree.nodes[j].kind = Kind::Leaf;
            return Decided {
                log_increment: 0.0,
                log_prior: (1.0 - p).ln(),
                children: None,
            };
        }
        let node = &tree.nodes[j];
        let dims: Vec<usize> = node.valid_dims(self.features).collect();
        let dim = dims[rng.gen_range(0..dims.len())];
        let (lo, hi) = node.extent(self.features, dim);
        let (xi, log_ratio) = match self.proposal {
            Proposal::Empirical => {
                // Q(ξ) = 1/(G L_g) inside gap g against the prior's 1/|e|.
                let values = node_distinct(self.features, node.rows(), dim);
                let gaps = values.len() - 1;
                let g = rng.gen_range(0..gaps);
                let (a, b) = (values[g], values[g + 1]);
                let ratio = (gaps as f64).ln() + (b - a).ln() - (hi - lo).ln();
                (uniform_below(a, b, rng), ratio)
            }
            _ => (uniform_below(lo, hi, rng), 0.0),
        };
        // The rule density −ln|V_j| − ln|e_δ| from what was just computed: each extent
        // outside a known box is a pass over the node's rows.
        let log_prior = p.ln() - (dims.len() as f64).ln() - (hi - lo).ln();
        let (children, lik_ratio) = self.apply_split(tree, j, dim, xi);
        Decided {
            log_increment: lik_ratio + log_ratio,
            log_prior,
            children: Some(children),
        }
    }

    /// Splits node j at (dim, ξ); returns the children and log ℓ_{j0} + log ℓ_{j1} − log ℓ_j.
    fn apply_split(
        &self,
        tree: &mut BayesTree<L::Stats>,
        j: usize,
        dim: usize,
        xi: f64,
    ) -> ((u32, u32), f64) {
        let threshold = self.stored_threshold(dim, xi);
        let parent = &tree.nodes[j].data;
        let (left, right) = partition(
            self.features,
            self.targets,
            self.model,
            parent,
            dim,
            threshold,
        );
        let ratio = left.log_ml + right.log_ml - parent.log_ml;
        (tree.split(j, dim, threshold, left, right), ratio)
    }

    pub(crate) fn stored_threshold(&self, dim: usize, xi: f64) -> f64 {
        match self.split_value {
            SplitValue::Continuous => xi,
            SplitValue::Midpoint => {
                // v[i − 1] ≤ ξ < v[i]: ξ ≥ the node's minimum and < its maximum.
                let v = self.features.distinct(dim);
                let i = v.partition_point(|&a| a <= xi);
                let (a, b) = (v[i - 1], v[i]);
                let mid = 0.5 * (a + b);
                if mid < b {
                    mid
                } else {
                    a
                }
            }
        }
    }

    /// The one-step optimal proposal (§3.4c): Z_j = (1 − p_j)ℓ_j + (p_j/|V_j|) Σ_δ Σ_g
    /// (L_{δ,g}/|e_δ|) ℓ(left) ℓ(right), each dimension scored by one sweep over the node's
    /// points in the presorted order, with ℓ updated by the chain rule.
    fn decide_optimal<R: Rng>(
        &self,
        tree: &mut BayesTree<L::Stats>,
        j: usize,
        p: f64,
        rng: &mut R,
    ) -> Decided {
        let node = &tree.nodes[j];
        let log_ml = node.log_marginal();
        let dims: Vec<usize> = node.valid_dims(self.features).collect();
        let log_rule = p.ln() - (dims.len() as f64).ln();
        let log_stop = (1.0 - p).ln() + log_ml;
        let mut candidates = Vec::new();
        let mut order: Vec<(u32, u32)> = Vec::with_capacity(node.rows().len());
        for &dim in &dims {
            let (lo, hi) = node.extent(self.features, dim);
            let log_extent = (hi - lo).ln();
            let values = self.features.distinct(dim);
            order.clear();
            order.extend(
                node.rows()
                    .iter()
                    .map(|&r| (self.features.rank(r as usize, dim), r)),
            );
            order.sort_unstable();
            let mut left = self.model.empty_stats();
            let mut left_ll = 0.0;
            let mut right = node.stats().clone();
            let mut right_ll = log_ml;
            for (k, &(rank, row)) in order.iter().enumerate() {
                let y = self.targets[row as usize];
                left_ll += self.model.log_predictive(&left, y);
                left.add(y);
                right.remove(y);
                right_ll -= self.model.log_predictive(&right, y);
                if let Some(&(next, _)) = order.get(k + 1) {
                    if next != rank {
                        let (a, b) = (values[rank as usize], values[next as usize]);
                        candidates.push(Candidate {
                            dim,
                            lo: a,
                            hi: b,
                            log_weight: log_rule + (b - a).ln() - log_extent + left_ll + right_ll,
                        });
                    }
                }
            }
        }
        let mut log_weights: Vec<f64> = candidates.iter().map(|c| c.log_weight).collect();
        log_weights.push(log_stop);
        let log_z = log_sum_exp(&log_weights);
        let pick = sample_log_weights(&log_weights, rng);
        if pick == candidates.len() {
            tree.nodes[j].kind = Kind::Leaf;
            return Decided {
                log_increment: log_z - log_ml,
                log_prior: (1.0 - p).ln(),
                children: None,
            };
        }
        let c = &candidates[pick];
        let (lo, hi) = node.extent(self.features, c.dim);
        let log_prior = log_rule - (hi - lo).ln();
        let log_gap_share = (c.hi - c.lo).ln() - (hi - lo).ln();
        let xi = uniform_below(c.lo, c.hi, rng);
        let approx = c.log_weight;
        let (children, lik_ratio) = self.apply_split(tree, j, c.dim, xi);
        // Z_j/ℓ_j, with the summand of the drawn split recomputed from the children's
        // exact marginals (the sweep's chain-rule values agree to rounding): P·lik/Q holds
        // to the last bit for the decision actually taken.
        let exact = log_rule + log_gap_share + lik_ratio + log_ml;
        Decided {
            log_increment: log_z - log_ml + (exact - approx),
            log_prior,
            children: Some(children),
        }
    }
}

/// An index drawn with probability ∝ exp(log_weights[i]).
pub(crate) fn sample_log_weights<R: Rng>(log_weights: &[f64], rng: &mut R) -> usize {
    let max = log_weights
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    let weights: Vec<f64> = log_weights.iter().map(|w| (w - max).exp()).collect();
    let total: f64 = weights.iter().sum();
    let mut u = rng.gen::<f64>() * total;
    for (i, w) in weights.iter().enumerate() {
        if u < *w {
            return i;
        }
        u -= w;
    }
    // Rounding left u at the very end: the last index of positive weight.
    weights.iter().rposition(|&w| w > 0.0).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    use super::*;
    use crate::bayes::likelihood::NormalKnownVariance;
    use crate::bayes::tree::NodeData;

    #[test]
    fn optimal_increment_is_z_over_l_whatever_is_drawn() {
        // T8 on §5.6's five points: the increment is Z_j/ℓ_j for every decision, with Z_j
        // summed here gap by gap from the children's marginals.
        let x = [0.1, 0.5, 0.3, 0.2, 0.35, 0.9, 0.6, 0.4, 0.9, 0.7];
        let y = [0.2, -0.5, 0.9, 1.1, -0.3];
        let features = Features::new(&x, 2).unwrap();
        let model = NormalKnownVariance {
            mean: 0.0,
            prior_variance: 1.0,
            noise_variance: 0.1,
        };
        let prior = CgmPrior::default();
        let ctx = Context {
            features: &features,
            targets: &y,
            model: &model,
            prior: &prior,
            proposal: Proposal::Optimal,
            split_value: SplitValue::Continuous,
        };
        let root = Arc::new(NodeData::new(&features, &y, &model, (0..5).collect()));
        let base = BayesTree::with_root(Arc::clone(&root));
        let p = prior.p_split(0);
        let mut z = (1.0 - p) * root.log_ml.exp();
        for d in 0..2 {
            let v = features.distinct(d);
            for g in 0..v.len() - 1 {
                let mid = 0.5 * (v[g] + v[g + 1]);
                let (l, r) = partition(&features, &y, &model, &root, d, mid);
                let share = (v[g + 1] - v[g]) / (v[v.len() - 1] - v[0]);
                z += p / 2.0 * share * (l.log_ml + r.log_ml).exp();
            }
        }
        let expected = z.ln() - root.log_ml;
        let mut stops = 0;
        for seed in 0..500 {
            let mut tree = base.clone();
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            let d = ctx.decide(&mut tree, 0, &mut rng);
            assert!(
                (d.log_increment - expected).abs() < 1e-12,
                "{}",
                d.log_increment
            );
            stops += usize::from(d.children.is_none());
        }
        // The stop probability is (1 − p)ℓ/Z; 500 draws stay within 5 binomial sd of it.
        let q = (1.0 - p) * root.log_ml.exp() / z;
        let sd = (500.0 * q * (1.0 - q)).sqrt();
        assert!(
            (stops as f64 - 500.0 * q).abs() < 5.0 * sd,
            "{stops} vs {}",
            500.0 * q
        );
    }
}
