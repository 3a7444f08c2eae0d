//! The exact posterior over single-tree structures on the tiny problems of spec
//! `bayesian-trees.md` §5.6, by brute-force enumeration of every tree (written here from
//! §2.2, not with the library's prior or tree code), for the kernel, chain and SMC suites
//! (`bayes_bart_kernels.rs`, `bayes_mcmc.rs`, `bayes_smc.rs`).
//!
//! Structures are keyed by partition: (δ, rows sent left) at every internal node, the rows
//! of a node a bit mask over the points. A structure knows each rule up to its gap between
//! consecutive distinct values; [`Gapped::draw`] completes an exact draw of the structure
//! into an exact draw of the tree. [`Exact::chi_square`] pools the cells of expected count
//! < 5.

use std::collections::HashMap;

use mondrian::bayes::bart::TreeShape;
use mondrian::bayes::{BayesTree, CgmPrior};
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;
use statrs::distribution::{ChiSquared, ContinuousCDF};

/// §5.6's five points, and the sixth of the classification analogue.
pub const X6: [[f64; 2]; 6] = [
    [0.1, 0.5],
    [0.3, 0.2],
    [0.35, 0.9],
    [0.6, 0.4],
    [0.9, 0.7],
    [0.75, 0.15],
];
/// §5.6's five points.
pub const X5: &[[f64; 2]] = X6.split_at(5).0;
/// §5.6's regression targets (residual) on the five points.
pub const R5: [f64; 5] = [0.2, -0.5, 0.9, 1.1, -0.3];

/// A structure whose rules are known up to their gap (a, b) between consecutive distinct
/// values.
#[derive(Clone)]
pub enum Gapped {
    Leaf,
    Split {
        dim: usize,
        gap: (f64, f64),
        left: Box<Gapped>,
        right: Box<Gapped>,
    },
}

impl Gapped {
    /// A tree with each ξ uniform in its gap: given the partitions, the posterior of ξ is
    /// uniform there, so this completes an exact draw of the structure into an exact draw
    /// of the tree. (Gap midpoints would not do for CHANGE and SWAP, whose validity checks
    /// and re-routing read the value of ξ, not only its partition.)
    pub fn draw(&self, rng: &mut Xoshiro256PlusPlus) -> TreeShape {
        match self {
            Gapped::Leaf => TreeShape::Leaf,
            Gapped::Split {
                dim,
                gap: (a, b),
                left,
                right,
            } => TreeShape::Split {
                dim: *dim,
                threshold: a + (b - a) * rng.gen::<f64>(),
                left: Box::new(left.draw(rng)),
                right: Box::new(right.draw(rng)),
            },
        }
    }

    /// P(a test point goes to each leaf, left to right) with ξ uniform in each gap, and
    /// the rows (of `points`) of those leaves: the exact predictive integrates ξ over its
    /// gap.
    pub fn leaf_probabilities(
        &self,
        points: &[[f64; 2]],
        x: &[f64; 2],
        rows: u32,
        out: &mut Vec<(f64, u32)>,
        p: f64,
    ) {
        match self {
            Gapped::Leaf => out.push((p, rows)),
            Gapped::Split {
                dim,
                gap: (a, b),
                left,
                right,
            } => {
                // x goes left iff x ≤ ξ, ξ ~ U(a, b).
                let go_left = ((b - x[*dim]) / (b - a)).clamp(0.0, 1.0);
                let l = rows_left(points, rows, *dim, *a);
                if go_left > 0.0 {
                    left.leaf_probabilities(points, x, l, out, p * go_left);
                }
                if go_left < 1.0 {
                    right.leaf_probabilities(points, x, rows & !l, out, p * (1.0 - go_left));
                }
            }
        }
    }
}

/// The rows of `rows` with x_dim ≤ v.
pub fn rows_left(points: &[[f64; 2]], rows: u32, dim: usize, v: f64) -> u32 {
    (0..points.len())
        .filter(|&i| rows >> i & 1 == 1 && points[i][dim] <= v)
        .fold(0, |m, i| m | 1 << i)
}

/// A structure with its key, log prior + log likelihood, and each of the two alone
/// (`log_joint` is summed node by node, not as `log_prior + log_lik`).
pub struct Structure {
    pub shape: Gapped,
    pub key: String,
    pub log_joint: f64,
    pub log_prior: f64,
    pub log_lik: f64,
}

/// Every subtree at a node holding `rows` of `points` at `depth` with its log prior + log
/// likelihood (`log_ml` of a node's rows): (stop | δ ∈ V_j | gap g), the weights of §2.2
/// ((1 − p) to stop where a split is allowed, p/|V|·L_g/|e| per gap; a node below
/// `prior.min_samples` rows stops, A19).
pub fn enumerate(
    points: &[[f64; 2]],
    prior: &CgmPrior,
    log_ml: &dyn Fn(u32) -> f64,
    rows: u32,
    depth: usize,
) -> Vec<Structure> {
    let members: Vec<usize> = (0..points.len()).filter(|i| rows >> i & 1 == 1).collect();
    let values: Vec<Vec<f64>> = (0..2)
        .map(|d| {
            let mut v: Vec<f64> = members.iter().map(|&i| points[i][d]).collect();
            v.sort_by(f64::total_cmp);
            v.dedup();
            v
        })
        .collect();
    let valid: Vec<usize> = (0..2).filter(|&d| values[d].len() > 1).collect();
    let can = !valid.is_empty() && prior.min_samples.is_none_or(|m| members.len() >= m);
    let p = prior.alpha_s * (1.0 + depth as f64).powf(-prior.beta_s);
    let (log_prior, log_lik) = (if can { (1.0 - p).ln() } else { 0.0 }, log_ml(rows));
    let mut out = vec![Structure {
        shape: Gapped::Leaf,
        key: "L".into(),
        log_joint: log_prior + log_lik,
        log_prior,
        log_lik,
    }];
    if !can {
        return out;
    }
    for &d in &valid {
        let v = &values[d];
        let extent = v[v.len() - 1] - v[0];
        for g in 0..v.len() - 1 {
            let rule = p.ln() - (valid.len() as f64).ln() + ((v[g + 1] - v[g]) / extent).ln();
            let left_rows = rows_left(points, rows, d, v[g]);
            let lefts = enumerate(points, prior, log_ml, left_rows, depth + 1);
            let rights = enumerate(points, prior, log_ml, rows & !left_rows, depth + 1);
            for l in &lefts {
                for r in &rights {
                    out.push(Structure {
                        shape: Gapped::Split {
                            dim: d,
                            gap: (v[g], v[g + 1]),
                            left: Box::new(l.shape.clone()),
                            right: Box::new(r.shape.clone()),
                        },
                        key: format!("({d}:{left_rows}{}{})", l.key, r.key),
                        log_joint: rule + l.log_joint + r.log_joint,
                        log_prior: rule + l.log_prior + r.log_prior,
                        log_lik: l.log_lik + r.log_lik,
                    });
                }
            }
        }
    }
    out
}

/// The key of a library tree in [`Structure::key`]'s format.
pub fn tree_key<S>(tree: &BayesTree<S>, j: usize) -> String {
    let node = &tree.nodes()[j];
    match (node.children(), node.rule()) {
        (Some((l, r)), Some((dim, _))) => {
            let mask = tree.nodes()[l].rows().iter().fold(0u32, |m, &i| m | 1 << i);
            format!("({dim}:{mask}{}{})", tree_key(tree, l), tree_key(tree, r))
        }
        _ => "L".into(),
    }
}

/// The exact posterior of one problem: structures with π, cumulative π for exact draws.
pub struct Exact {
    pub structures: Vec<(Structure, f64)>,
    pub cumulative: Vec<f64>,
    pub index: HashMap<String, usize>,
}

impl Exact {
    /// π over the trees on all of `points`, `log_ml` the log marginal likelihood of a
    /// node's rows.
    pub fn new(points: &[[f64; 2]], prior: &CgmPrior, log_ml: &dyn Fn(u32) -> f64) -> Self {
        let all = enumerate(points, prior, log_ml, (1u32 << points.len()) - 1, 0);
        let max = all.iter().map(|e| e.log_joint).fold(f64::MIN, f64::max);
        let z: f64 = all.iter().map(|e| (e.log_joint - max).exp()).sum();
        let structures: Vec<(Structure, f64)> = all
            .into_iter()
            .map(|e| {
                let p = (e.log_joint - max).exp() / z;
                (e, p)
            })
            .collect();
        let mut acc = 0.0;
        let cumulative = structures
            .iter()
            .map(|(_, p)| {
                acc += p;
                acc
            })
            .collect();
        let index = structures
            .iter()
            .enumerate()
            .map(|(i, (s, _))| (s.key.clone(), i))
            .collect();
        Exact {
            structures,
            cumulative,
            index,
        }
    }

    /// A structure drawn exactly from π.
    pub fn draw(&self, rng: &mut Xoshiro256PlusPlus) -> &Structure {
        let u = rng.gen::<f64>() * self.cumulative[self.cumulative.len() - 1];
        let i = self.cumulative.partition_point(|&c| c <= u);
        &self.structures[i.min(self.structures.len() - 1)].0
    }

    /// χ² of observed structure counts against π (cells of expected count < 5 pooled):
    /// (statistic, df, p-value). Panics on a structure outside the enumeration.
    pub fn chi_square(&self, counts: &HashMap<String, usize>) -> (f64, usize, f64) {
        let n: usize = counts.values().sum();
        for k in counts.keys() {
            assert!(self.index.contains_key(k), "{k} is not a structure");
        }
        let (mut stat, mut cells) = (0.0, 0usize);
        let (mut pooled_obs, mut pooled_exp) = (0.0, 0.0);
        for (s, p) in &self.structures {
            let obs = counts.get(&s.key).copied().unwrap_or(0) as f64;
            let exp = n as f64 * p;
            if exp < 5.0 {
                pooled_obs += obs;
                pooled_exp += exp;
            } else {
                stat += (obs - exp) * (obs - exp) / exp;
                cells += 1;
            }
        }
        if pooled_exp > 0.0 {
            stat += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / pooled_exp;
            cells += 1;
        }
        let df = cells - 1;
        (stat, df, ChiSquared::new(df as f64).unwrap().sf(stat))
    }
}
