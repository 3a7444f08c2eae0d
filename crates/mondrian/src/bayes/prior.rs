//! The Chipman–George–McCulloch prior over decision trees (spec `bayesian-trees.md` §2.2):
//! node j at depth d_j splits with probability p_j = α_s(1 + d_j)^(−β_s) when it has a
//! valid split, δ_j is uniform over the valid dimensions V_j and ξ_j uniform over the data
//! extent of δ_j.

use serde::{Deserialize, Serialize};

use super::tree::{BayesTree, Features, Node};
use crate::error::{MondrianError, Result};

/// The CGM tree prior. The prior depends on X only through which nodes can split and
/// their extents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CgmPrior {
    /// α_s in (0, 1): the split probability at the root.
    pub alpha_s: f64,
    /// β_s ≥ 0: how fast the split probability falls with depth.
    pub beta_s: f64,
    /// The optional extra rule "stop if |N_j| < min_samples" (§2.2; not in [T]'s model,
    /// off by default). It enters the prior through the validity indicator (A19).
    pub min_samples: Option<usize>,
}

impl Default for CgmPrior {
    /// The Ch. 3 defaults (§3.10): α_s = 0.95, β_s = 0.5, no size rule.
    fn default() -> Self {
        CgmPrior {
            alpha_s: 0.95,
            beta_s: 0.5,
            min_samples: None,
        }
    }
}

impl CgmPrior {
    /// Checks 0 < α_s < 1 and β_s ≥ 0 (finite).
    pub fn validate(&self) -> Result<()> {
        if !(self.alpha_s > 0.0 && self.alpha_s < 1.0) {
            return Err(MondrianError::InvalidParameter {
                name: "alpha_s",
                reason: format!("{} is not in (0, 1)", self.alpha_s),
            });
        }
        if !(self.beta_s >= 0.0 && self.beta_s.is_finite()) {
            return Err(MondrianError::InvalidParameter {
                name: "beta_s",
                reason: format!("{} is not a finite number ≥ 0", self.beta_s),
            });
        }
        Ok(())
    }

    /// p_j = α_s (1 + depth)^(−β_s).
    pub fn p_split(&self, depth: usize) -> f64 {
        self.alpha_s * (1.0 + depth as f64).powf(-self.beta_s)
    }

    /// Whether a node of `n_rows` points with `n_valid_dims` valid dimensions may split:
    /// V_j ≠ ∅ (and |N_j| ≥ min_samples under the optional rule). Otherwise it stops with
    /// probability 1.
    pub fn can_split(&self, n_rows: usize, n_valid_dims: usize) -> bool {
        n_valid_dims > 0 && self.min_samples.is_none_or(|m| n_rows >= m)
    }

    /// [`can_split`](Self::can_split) for a node grown on `features`.
    pub fn node_can_split<S>(&self, node: &Node<S>, features: &Features) -> bool {
        self.min_samples.is_none_or(|m| node.rows().len() >= m) && node.has_valid_dim(features)
    }

    /// s_j = p_j · 1[the node can split]: the effective split probability (§4.5).
    pub fn effective_p_split<S>(&self, node: &Node<S>, features: &Features) -> f64 {
        if self.node_can_split(node, features) {
            self.p_split(node.depth())
        } else {
            0.0
        }
    }

    /// log of the rule density at a node: −ln|V_j| − ln|e^x_{jδ}|.
    pub fn rule_log_density<S>(&self, node: &Node<S>, features: &Features, dim: usize) -> f64 {
        let (lo, hi) = node.extent(features, dim);
        -(node.n_valid_dims(features) as f64).ln() - (hi - lo).ln()
    }

    /// log p(T | X), the density (3.4): Π_leaves (1 − s_j) × Π_internal p_j/|V_j|/|e_{jδ}|.
    /// Nodes left undecided by a truncated run contribute nothing (the truncated target).
    pub fn log_density<S>(&self, tree: &BayesTree<S>, features: &Features) -> f64 {
        tree.nodes()
            .iter()
            .map(|node| match node.rule() {
                Some((dim, _)) => {
                    self.p_split(node.depth()).ln() + self.rule_log_density(node, features, dim)
                }
                None if node.is_open() => 0.0,
                None => (1.0 - self.effective_p_split(node, features)).ln(),
            })
            .sum()
    }

    /// E[#nodes] when every node can split (a Galton–Watson tree, §2.2):
    /// Σ_d 2^d Π_{i<d} p_i; +∞ when the sum diverges (β_s = 0 and α_s ≥ 1/2).
    pub fn expected_nodes(&self) -> f64 {
        self.galton_watson_sum(|_| 1.0)
    }

    /// E[#leaves] when every node can split: Σ_d 2^d Π_{i<d} p_i (1 − p_d).
    pub fn expected_leaves(&self) -> f64 {
        self.galton_watson_sum(|p| 1.0 - p)
    }

    fn galton_watson_sum(&self, per_node: impl Fn(f64) -> f64) -> f64 {
        // width = 2^d Π_{i<d} p_i, the expected number of nodes at depth d.
        let mut width = 1.0;
        let mut total = 0.0;
        for d in 0..100_000 {
            let p = self.p_split(d);
            total += width * per_node(p);
            width *= 2.0 * p;
            if width < 1e-17 * total {
                return total;
            }
            if !width.is_finite() {
                break;
            }
        }
        f64::INFINITY
    }

    /// E[max depth] when every node can split, from P(max depth ≤ k) = F_0(k) with
    /// F_d(k) = (1 − p_d) + p_d F_{d+1}(k)² and F_k(k) = 1 − p_k (§2.2).
    pub fn expected_max_depth(&self) -> f64 {
        let mut total = 0.0;
        for k in 0..100_000usize {
            let mut f = 1.0 - self.p_split(k);
            for d in (0..k).rev() {
                let p = self.p_split(d);
                f = (1.0 - p) + p * f * f;
            }
            let tail = 1.0 - f;
            total += tail;
            if tail < 1e-16 {
                return total;
            }
        }
        f64::INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn galton_watson_sizes_match_the_spec_table() {
        // §2.2's table (exact values, [D]) and A1. The table's (0.95, 0.2) row, 2347.3 and
        // 1173.1, is the sum cut after depth 59; the whole series gives 2359.79 and 1180.40.
        let cases = [
            (0.95, 0.5, 18.280, 9.640),
            (0.95, 2.0, 4.017, 2.509),
            (0.80, 0.5, 9.817, 5.408),
            (0.95, 0.2, 2359.79, 1180.40),
            (0.80, 0.2, 94.48, 47.74),
            (0.95, 1.0, 6.686, 3.843),
            (0.95, 0.4, 31.66, 16.33),
            (0.95, 0.3, 91.97, 46.49),
            (0.95, 0.25, 267.0, 134.0),
        ];
        for (alpha_s, beta_s, nodes, leaves) in cases {
            let prior = CgmPrior {
                alpha_s,
                beta_s,
                min_samples: None,
            };
            // The table prints 4 significant digits.
            let close = |a: f64, b: f64| (a - b).abs() <= 6e-4 * b;
            assert!(close(prior.expected_nodes(), nodes), "{alpha_s} {beta_s}");
            assert!(close(prior.expected_leaves(), leaves), "{alpha_s} {beta_s}");
            // Every internal node has two children: #nodes = 2 #leaves − 1.
            let (n, l) = (prior.expected_nodes(), prior.expected_leaves());
            assert!((n - (2.0 * l - 1.0)).abs() < 1e-9 * n);
        }
        let default = CgmPrior::default();
        assert!((default.expected_max_depth() - 5.095).abs() < 5e-4);
        let flat = CgmPrior {
            alpha_s: 0.6,
            beta_s: 0.0,
            min_samples: None,
        };
        assert_eq!(flat.expected_nodes(), f64::INFINITY);
    }

    #[test]
    fn validation() {
        assert!(CgmPrior::default().validate().is_ok());
        for (a, b) in [
            (0.0, 0.5),
            (1.0, 0.5),
            (f64::NAN, 0.5),
            (0.5, -1.0),
            (0.5, f64::NAN),
        ] {
            let p = CgmPrior {
                alpha_s: a,
                beta_s: b,
                min_samples: None,
            };
            assert!(p.validate().is_err(), "{a} {b}");
        }
    }
}
