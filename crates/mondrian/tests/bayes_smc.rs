//! Top-down SMC (spec `bayesian-trees.md` §3) against the exact posterior over partitions,
//! found by brute-force enumeration of every tree (`common::enumerate`) on the tiny
//! problems of §5.6 (T6, T7, T15, T17).
//!
//! The tests rest on the one exact property of a particle filter: with unnormalised
//! weights, E[Ẑ] = Z and E[Ẑ Σ_c w̄_c f(T_c)] = Z E_π[f] for every f (§3.5). Averages over
//! independent runs are compared with the exact values by z-tests with the standard error
//! estimated from the runs, Bonferroni-corrected to a family-wise level of 1e-3 per test
//! function. Seeds are fixed.

mod common;

use std::collections::HashMap;

use common::enumerate::{enumerate, rows_left, tree_key, Gapped, Structure, R5, X5, X6};
use mondrian::bayes::{
    BayesTree, CgmPrior, DirichletMultinomial, Expansion, Features, IslandWeighting, LeafModel,
    NormalKnownVariance, Proposal, Resampler, SmcClassifierParams, SmcParams, SmcPosterior,
    SmcTreeClassifier, SplitValue,
};
use mondrian::model::Params;
use statrs::distribution::{ContinuousCDF, Normal};

fn n_leaves(s: &Gapped) -> usize {
    match s {
        Gapped::Leaf => 1,
        Gapped::Split { left, right, .. } => n_leaves(left) + n_leaves(right),
    }
}

/// The root rule of a structure on the five points: (δ, rows sent left), or "stop".
fn root(s: &Gapped) -> String {
    match s {
        Gapped::Leaf => "stop".into(),
        Gapped::Split { dim, gap, .. } => format!("{dim}:{}", rows_left(X5, 31, *dim, gap.0)),
    }
}

/// The posterior predictive of leaf statistics at x of a structure at a node holding
/// `rows` of `points`, with ξ uniform in each gap: x goes left at a node with probability
/// P(ξ ≥ x_δ) = (b − x_δ)/(b − a) clamped. (The nested mixture q·left + (1 − q)·right,
/// not [`Gapped::leaf_probabilities`]' sum over leaves, which rounds differently.)
fn predictive(
    s: &Gapped,
    points: &[[f64; 2]],
    rows: u32,
    x: &[f64],
    leaf: &dyn Fn(u32) -> f64,
) -> f64 {
    let Gapped::Split {
        dim,
        gap,
        left,
        right,
    } = s
    else {
        return leaf(rows);
    };
    let q = ((gap.1 - x[*dim]) / (gap.1 - gap.0)).clamp(0.0, 1.0);
    let l = rows_left(points, rows, *dim, gap.0);
    q * predictive(left, points, l, x, leaf)
        + (1.0 - q) * predictive(right, points, rows & !l, x, leaf)
}

fn tree_root<S>(tree: &BayesTree<S>) -> String {
    let root = &tree.nodes()[0];
    match (root.children(), root.rule()) {
        (Some((l, _)), Some((dim, _))) => {
            let mask = tree.nodes()[l].rows().iter().fold(0u32, |m, &i| m | 1 << i);
            format!("{dim}:{mask}")
        }
        _ => "stop".into(),
    }
}

/// The exact posterior: structures with π(s), and log Z (from log prior + log likelihood
/// of each structure, with the prior's total mass checked).
struct Exact {
    structures: Vec<(Structure, f64)>,
    log_z: f64,
}

impl Exact {
    fn new(x: &[[f64; 2]], prior: &CgmPrior, log_ml: &dyn Fn(u32) -> f64) -> Self {
        let all = enumerate(x, prior, log_ml, (1 << x.len()) - 1, 0);
        let log_joint = |s: &Structure| s.log_prior + s.log_lik;
        let max = all.iter().map(log_joint).fold(f64::MIN, f64::max);
        let z: f64 = all.iter().map(|s| (log_joint(s) - max).exp()).sum();
        let log_z = max + z.ln();
        let prior_mass: f64 = all.iter().map(|s| s.log_prior.exp()).sum();
        assert!((prior_mass - 1.0).abs() < 1e-12, "prior mass {prior_mass}");
        Exact {
            structures: all
                .into_iter()
                .map(|s| {
                    let post = (log_joint(&s) - log_z).exp();
                    (s, post)
                })
                .collect(),
            log_z,
        }
    }

    /// The law of a statistic of the structure.
    fn marginal(&self, f: impl Fn(&Structure) -> String) -> HashMap<String, f64> {
        let mut m = HashMap::new();
        for (s, p) in &self.structures {
            *m.entry(f(s)).or_default() += p;
        }
        m
    }
}

fn regression_setup() -> (Features, NormalKnownVariance) {
    let flat: Vec<f64> = X5.iter().flatten().copied().collect();
    let model = NormalKnownVariance {
        mean: 0.0,
        prior_variance: 1.0,
        noise_variance: 0.1,
    };
    (Features::new(&flat, 2).unwrap(), model)
}

fn regression_exact(prior: &CgmPrior) -> Exact {
    let (_, model) = regression_setup();
    let log_ml = |rows: u32| {
        let ys = (0..5).filter(|i| rows >> i & 1 == 1).map(|i| R5[i]);
        model.log_marginal(&model.stats_of(ys))
    };
    Exact::new(X5, prior, &log_ml)
}

/// Two-sided p-value of a mean against `expected`, from the sample of run values.
fn z_p_value(values: &[f64], expected: f64) -> f64 {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0);
    let se = (var / n).sqrt();
    if se == 0.0 {
        return if (mean - expected).abs() < 1e-12 {
            1.0
        } else {
            0.0
        };
    }
    2.0 * Normal::standard().sf(((mean - expected) / se).abs())
}

/// Per run: Ẑ/Z and, for each cell of the leaves and root-rule marginals, Ẑ/Z · Σ_c w̄_c
/// 1{T_c in the cell}, whose expectation is the cell's exact posterior probability.
fn unbiased_measures(
    posterior: &SmcPosterior<mondrian::bayes::Moments>,
    log_z: f64,
    cells: &[(String, String)],
) -> Vec<f64> {
    let ratio = (posterior.log_evidence() - log_z).exp();
    let mut out = vec![ratio];
    for (kind, cell) in cells {
        let mass: f64 = posterior
            .trees()
            .filter(|t| match kind.as_str() {
                "leaves" => t.tree.n_leaves().to_string() == *cell,
                _ => tree_root(t.tree) == *cell,
            })
            .map(|t| t.weight)
            .sum();
        out.push(ratio * mass);
    }
    out
}

#[test]
fn exact_enumeration_is_self_consistent() {
    // T6: Σ over structures of prior × likelihood is Z, and equals the recursion
    // Z_j = (1 − s_j)ℓ_j + s_j Σ_δ Σ_g (L_g/(|V_j||e|)) Z_left Z_right.
    let prior = CgmPrior::default();
    let exact = regression_exact(&prior);
    let (_, model) = regression_setup();
    fn recursive_z(rows: u32, depth: usize, prior: &CgmPrior, ll: &dyn Fn(u32) -> f64) -> f64 {
        let members: Vec<usize> = (0..5).filter(|i| rows >> i & 1 == 1).collect();
        let mut total = 0.0;
        let valid: Vec<(usize, Vec<f64>)> = (0..2usize)
            .map(|d| {
                let mut v: Vec<f64> = members.iter().map(|&i| X5[i][d]).collect();
                v.sort_by(f64::total_cmp);
                v.dedup();
                (d, v)
            })
            .filter(|(_, v)| v.len() > 1)
            .collect();
        let s = if valid.is_empty() {
            0.0
        } else {
            prior.alpha_s * (1.0 + depth as f64).powf(-prior.beta_s)
        };
        for (d, v) in &valid {
            let e = v[v.len() - 1] - v[0];
            for g in 0..v.len() - 1 {
                let left = members
                    .iter()
                    .filter(|&&i| X5[i][*d] <= v[g])
                    .fold(0u32, |m, &i| m | 1 << i);
                total += (v[g + 1] - v[g]) / (valid.len() as f64 * e)
                    * recursive_z(left, depth + 1, prior, ll)
                    * recursive_z(rows & !left, depth + 1, prior, ll);
            }
        }
        (1.0 - s) * ll(rows).exp() + s * total
    }
    let ll = |rows: u32| {
        let ys = (0..5).filter(|i| rows >> i & 1 == 1).map(|i| R5[i]);
        model.log_marginal(&model.stats_of(ys))
    };
    let z = recursive_z(31, 0, &prior, &ll);
    println!(
        "toy regression: {} structures, log Z = {:.10} (recursion {:.10})",
        exact.structures.len(),
        exact.log_z,
        z.ln()
    );
    assert!((exact.log_z - z.ln()).abs() < 1e-10);
    let total: f64 = exact.structures.iter().map(|s| s.1).sum();
    assert!((total - 1.0).abs() < 1e-12);
}

#[test]
fn evidence_and_posterior_are_unbiased_for_every_variant() {
    // T7 (a)–(c) and T15 through the unbiasedness of the unnormalised particle measure.
    let runs = 2000;
    let base = SmcParams {
        particles: 100,
        n_threads: 1,
        ..Default::default()
    };
    let variants: Vec<(&str, SmcParams)> = vec![
        ("prior, breadth-first", base.clone()),
        (
            "prior, min-marginal, systematic, ESS 0.5",
            SmcParams {
                expansion: Expansion::NodeMinMarginal,
                resampler: Resampler::Systematic,
                ess_threshold: 0.5,
                ..base.clone()
            },
        ),
        (
            "prior, layer-wise, never resampling",
            SmcParams {
                expansion: Expansion::LayerWise,
                ess_threshold: 0.0,
                ..base.clone()
            },
        ),
        (
            "empirical, breadth-first",
            SmcParams {
                proposal: Proposal::Empirical,
                ..base.clone()
            },
        ),
        (
            "optimal, breadth-first, always resampling",
            SmcParams {
                proposal: Proposal::Optimal,
                ess_threshold: 1.0,
                ..base.clone()
            },
        ),
        (
            "optimal, layer-wise, systematic",
            SmcParams {
                proposal: Proposal::Optimal,
                expansion: Expansion::LayerWise,
                resampler: Resampler::Systematic,
                ..base.clone()
            },
        ),
        (
            "prior, 4 islands by evidence, 2 threads",
            SmcParams {
                islands: 4,
                island_weighting: IslandWeighting::Evidence,
                n_threads: 2,
                ..base.clone()
            },
        ),
        (
            "prior, midpoint split values",
            SmcParams {
                split_value: SplitValue::Midpoint,
                ..base.clone()
            },
        ),
        (
            "prior, min_samples 3",
            SmcParams {
                prior: CgmPrior {
                    min_samples: Some(3),
                    ..Default::default()
                },
                ..base.clone()
            },
        ),
    ];
    let (features, model) = regression_setup();
    let mut p_values = Vec::new();
    for (name, params) in variants {
        let exact = regression_exact(&params.prior);
        let leaves = exact.marginal(|s| n_leaves(&s.shape).to_string());
        let roots = exact.marginal(|s| root(&s.shape));
        // Cells of probability ≥ 0.01 (smaller ones are checked through the others).
        let mut cells: Vec<(String, String, f64)> = Vec::new();
        for (kind, law) in [("leaves", &leaves), ("root", &roots)] {
            for (cell, &p) in law {
                if p >= 0.01 {
                    cells.push((kind.into(), cell.clone(), p));
                }
            }
        }
        cells.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        let keys: Vec<(String, String)> =
            cells.iter().map(|c| (c.0.clone(), c.1.clone())).collect();
        let checked = params.clone().check().unwrap();
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); cells.len() + 1];
        for r in 0..runs {
            let params = SmcParams {
                seed: 1000 + r as u64,
                ..(*checked).clone()
            }
            .check()
            .unwrap();
            let post = SmcPosterior::sample(&params, &features, &R5, &model).unwrap();
            for (k, v) in unbiased_measures(&post, exact.log_z, &keys)
                .into_iter()
                .enumerate()
            {
                samples[k].push(v);
            }
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let p_evidence = z_p_value(&samples[0], 1.0);
        let mut worst: (f64, String) = (p_evidence, "evidence".into());
        let mut max_err: f64 = 0.0;
        for (k, (kind, cell, p)) in cells.iter().enumerate() {
            let pv = z_p_value(&samples[k + 1], *p);
            max_err = max_err.max((mean(&samples[k + 1]) - p).abs());
            if pv < worst.0 {
                worst = (pv, format!("{kind} {cell}"));
            }
            p_values.push(pv);
        }
        p_values.push(p_evidence);
        println!(
            "{name}: mean Ẑ/Z = {:.4} (p = {p_evidence:.3}); {} marginal cells, max |error| \
             {max_err:.4}, smallest p {:.4} ({})",
            mean(&samples[0]),
            cells.len(),
            worst.0,
            worst.1
        );
    }
    let level = 1e-3 / p_values.len() as f64;
    let min = p_values.iter().copied().fold(1.0, f64::min);
    println!(
        "{} p-values, smallest {min:.2e}, level {level:.2e}",
        p_values.len()
    );
    assert!(min > level);
}

#[test]
fn weighted_particles_converge_to_the_exact_posterior() {
    // The self-normalised particle approximation converges to π as C grows. Its error is
    // O(C^(−1/2)) once C dwarfs the number of structures with visible mass; below that
    // the total-variation distance over the 441 partitions mostly measures the mass of the
    // structures no particle holds, and falls more slowly. Checked: the mean distance (20
    // seeds) falls at every tenfold step, for the full law and for the number of leaves,
    // and the marginal's falls at least like C^(−1/2) between 10³ and 10⁴ particles up to
    // the noise of 20 seeds (ratio > √10 / 2).
    let prior = CgmPrior::default();
    let exact = regression_exact(&prior);
    let exact_law: HashMap<String, f64> = exact.marginal(|s| s.key.clone());
    let exact_leaves: HashMap<String, f64> = exact.marginal(|s| n_leaves(&s.shape).to_string());
    let (features, model) = regression_setup();
    let seeds = 20;
    let tv = |law: &HashMap<String, f64>, exact: &HashMap<String, f64>| {
        let mut d = 0.0;
        for (k, p) in exact {
            d += (law.get(k).copied().unwrap_or(0.0) - p).abs();
        }
        for k in law.keys() {
            assert!(
                exact.contains_key(k),
                "a structure the prior cannot make: {k}"
            );
        }
        0.5 * d
    };
    for proposal in [Proposal::Prior, Proposal::Optimal] {
        let mut full = Vec::new();
        let mut leaves = Vec::new();
        for particles in [10usize, 100, 1000, 10_000] {
            let (mut full_sum, mut leaves_sum) = (0.0, 0.0);
            for seed in 0..seeds {
                let params = SmcParams {
                    particles,
                    seed,
                    proposal,
                    n_threads: 1,
                    ..Default::default()
                }
                .check()
                .unwrap();
                let post = SmcPosterior::sample(&params, &features, &R5, &model).unwrap();
                let mut law: HashMap<String, f64> = HashMap::new();
                let mut by_leaves: HashMap<String, f64> = HashMap::new();
                for t in post.trees() {
                    *law.entry(tree_key(t.tree, 0)).or_default() += t.weight;
                    *by_leaves.entry(t.tree.n_leaves().to_string()).or_default() += t.weight;
                }
                full_sum += tv(&law, &exact_law);
                leaves_sum += tv(&by_leaves, &exact_leaves);
            }
            full.push(full_sum / seeds as f64);
            leaves.push(leaves_sum / seeds as f64);
        }
        println!(
            "{proposal:?} proposal, C = 10, 100, 1000, 10000: mean TV to the exact posterior \
             {full:.4?}; of the number of leaves {leaves:.4?}"
        );
        for w in full.windows(2).chain(leaves.windows(2)) {
            assert!(w[1] < w[0], "{full:?} {leaves:?}");
        }
        assert!(leaves[2] / leaves[3] > 10f64.sqrt() / 2.0, "{leaves:?}");
    }
}

/// §5.6's six-point classification analogue: the five points plus one.
fn classification_data() -> (Vec<[f64; 2]>, Vec<usize>) {
    (X6.to_vec(), vec![0, 1, 0, 1, 1, 0])
}

#[test]
fn classifier_predictive_is_unbiased_against_exact_bayesian_model_averaging() {
    // E[Ẑ p̂(y = k | x)] = Z p(y = k | x): the exact BMA predictive integrates ξ over each
    // gap (routing a test point left with probability P(ξ ≥ x_δ)).
    let (x, y) = classification_data();
    let alpha = 1.0;
    let model = DirichletMultinomial::new(alpha, 2).unwrap();
    let prior = CgmPrior::default();
    let counts = |rows: u32| {
        let ys = (0..x.len()).filter(|i| rows >> i & 1 == 1).map(|i| y[i]);
        model.stats_of(ys)
    };
    let log_ml = |rows: u32| model.log_marginal(&counts(rows));
    let exact = Exact::new(&x, &prior, &log_ml);
    let tests = [[0.2, 0.3], [0.5, 0.8], [0.95, 0.1], [0.32, 0.6]];
    let leaf_p1 = |rows: u32| {
        let c = counts(rows);
        (c.counts()[1] as f64 + alpha / 2.0) / (c.counts().iter().sum::<u32>() as f64 + alpha)
    };
    let exact_p1: Vec<f64> = tests
        .iter()
        .map(|t| {
            exact
                .structures
                .iter()
                .map(|(s, p)| p * predictive(&s.shape, &x, (1 << x.len()) - 1, t, &leaf_p1))
                .sum()
        })
        .collect();
    println!(
        "toy classification: {} structures, log Z = {:.6}, exact p(y=1|x) = {exact_p1:.4?}",
        exact.structures.len(),
        exact.log_z
    );
    let flat: Vec<f64> = x.iter().flatten().copied().collect();
    let test_flat: Vec<f64> = tests.iter().flatten().copied().collect();
    let runs = 2000;
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); tests.len() + 1];
    for r in 0..runs {
        let mut clf = SmcTreeClassifier::new(SmcClassifierParams {
            smc: SmcParams {
                particles: 100,
                seed: 50_000 + r,
                n_threads: 1,
                ..Default::default()
            },
            alpha,
            n_classes: Some(2),
        })
        .unwrap();
        clf.fit(&flat, 2, &y).unwrap();
        let ratio = (clf.log_evidence().unwrap() - exact.log_z).exp();
        let p = clf.predict_proba(&test_flat, 2).unwrap();
        samples[0].push(ratio);
        for k in 0..tests.len() {
            samples[k + 1].push(ratio * p[2 * k + 1]);
        }
    }
    let mut p_values = vec![z_p_value(&samples[0], 1.0)];
    for k in 0..tests.len() {
        p_values.push(z_p_value(&samples[k + 1], exact_p1[k]));
    }
    let means: Vec<f64> = samples
        .iter()
        .map(|s| s.iter().sum::<f64>() / runs as f64)
        .collect();
    println!("means of Ẑ/Z and Ẑ/Z·p̂: {means:.4?}; p-values {p_values:.3?}");
    let level = 1e-3 / p_values.len() as f64;
    assert!(p_values.iter().all(|&p| p > level));
}

#[test]
fn same_seed_same_bits_whatever_the_threads() {
    // T17: islands seeded from (seed, island), particles from (seed, island, stage, c).
    let (x, y) = classification_data();
    let flat: Vec<f64> = x.iter().flatten().copied().collect();
    let grid: Vec<f64> = (0..50)
        .flat_map(|i| [i as f64 / 49.0, (i * 7 % 50) as f64 / 49.0])
        .collect();
    let run = |threads: usize, proposal: Proposal| {
        let mut clf = SmcTreeClassifier::new(SmcClassifierParams {
            smc: SmcParams {
                particles: 300,
                islands: 3,
                proposal,
                seed: 9,
                n_threads: threads,
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap();
        clf.fit(&flat, 2, &y).unwrap();
        let weights: Vec<u64> = clf
            .posterior()
            .unwrap()
            .trees()
            .map(|t| t.weight.to_bits())
            .collect();
        (
            clf.log_evidence().unwrap().to_bits(),
            weights,
            clf.predict_proba(&grid, 2)
                .unwrap()
                .iter()
                .map(|p| p.to_bits())
                .collect::<Vec<_>>(),
        )
    };
    for proposal in [Proposal::Prior, Proposal::Optimal] {
        let one = run(1, proposal);
        assert_eq!(one, run(1, proposal));
        assert_eq!(one, run(2, proposal));
        assert_eq!(one, run(0, proposal));
    }
}
