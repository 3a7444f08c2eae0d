//! Invariance of BART's tree kernels (spec `bayesian-trees.md` §4.5, §4.6; tests T9, T10
//! of §5.6): on §5.6's five points, with σ² fixed and the leaf values integrated out, the
//! conditional posterior π(T) of one tree is found by enumerating every tree. T* is drawn
//! *exactly* from π, one kernel step is applied, and the law of the output is compared
//! with π by a χ² test over structures (keyed by partition: (δ, rows sent left) at every
//! internal node), cells of expected count < 5 pooled. A π-invariant kernel passes at any
//! level; each test must not reject at 1%. This protocol does not depend on mixing.

mod common;

use std::collections::HashMap;

use common::enumerate::{tree_key, Exact, R5, X5};
use mondrian::bayes::bart::{build_tree, step_tree, CgmMoves, TreeSampler};
use mondrian::bayes::{BayesTree, CgmPrior, Features, LeafModel, NormalKnownVariance, PgInit};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

struct Problem {
    features: Features,
    model: NormalKnownVariance,
    prior: CgmPrior,
    /// The structures with π.
    exact: Exact,
}

impl Problem {
    fn new(prior: CgmPrior, sigma2: f64) -> Self {
        let flat: Vec<f64> = X5.iter().flatten().copied().collect();
        let model = NormalKnownVariance {
            mean: 0.0,
            prior_variance: 1.0,
            noise_variance: sigma2,
        };
        let log_ml = |rows: u32| {
            let ys = (0..5).filter(|i| rows >> i & 1 == 1).map(|i| R5[i]);
            model.log_marginal(&model.stats_of(ys))
        };
        let exact = Exact::new(X5, &prior, &log_ml);
        Problem {
            features: Features::new(&flat, 2).unwrap(),
            model,
            prior,
            exact,
        }
    }

    /// One kernel step from each of `draws` exact draws; returns (χ², df, p-value, moved
    /// fraction).
    fn chi_square(&self, sampler: &TreeSampler, draws: usize, seed: u64) -> (f64, usize, f64, f64) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut counts: HashMap<String, usize> = HashMap::new();
        let mut moved = 0;
        for _ in 0..draws {
            let start = self.exact.draw(&mut rng);
            let shape = start.shape.draw(&mut rng);
            let tree = build_tree(&self.features, &R5, &self.model, &shape).unwrap();
            assert_eq!(tree_key(&tree, 0), start.key);
            let (out, outcome) = step_tree(
                sampler,
                &self.prior,
                &self.features,
                &R5,
                &self.model,
                &tree,
                &mut rng,
            )
            .unwrap();
            moved += usize::from(outcome.moved);
            *counts.entry(tree_key(&out, 0)).or_default() += 1;
        }
        // Every output is a structure of the enumeration.
        assert!(
            counts.keys().all(|k| self.exact.index.contains_key(k)),
            "the kernel produced a tree outside the support"
        );
        let (stat, df, p) = self.exact.chi_square(&counts);
        (stat, df, p, moved as f64 / draws as f64)
    }
}

fn default_prior() -> CgmPrior {
    CgmPrior {
        alpha_s: 0.95,
        beta_s: 0.5,
        min_samples: None,
    }
}

fn check(name: &str, problem: &Problem, sampler: TreeSampler, draws: usize, seed: u64) {
    let (stat, df, p, moved) = problem.chi_square(&sampler, draws, seed);
    println!(
        "{name}: {} structures, {draws} draws, χ² = {stat:.1} on {df} df, p = {p:.3}, moved {moved:.3}",
        problem.exact.structures.len()
    );
    assert!(p > 0.01, "{name}: χ² = {stat:.1} on {df} df, p = {p:.2e}");
    assert!(moved > 0.05, "{name}: the kernel hardly moves ({moved})");
}

#[test]
fn particle_gibbs_leaves_the_tree_posterior_invariant() {
    // T9: 2·10⁴ draws, C = 5 (prototype, standard order: χ² = 295.5 on 346 df).
    let problem = Problem::new(default_prior(), 0.1);
    let sampler = TreeSampler::ParticleGibbs {
        particles: 5,
        max_stages: 5000,
        init: PgInit::Empty,
    };
    check("PG C = 5", &problem, sampler, 20_000, 91);
}

#[test]
fn particle_gibbs_with_one_particle_returns_the_reference() {
    // §4.6: C = 1 returns T* (conditional SMC with only the clamped particle).
    let problem = Problem::new(default_prior(), 0.1);
    let sampler = TreeSampler::ParticleGibbs {
        particles: 1,
        max_stages: 5000,
        init: PgInit::Empty,
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    for _ in 0..2000 {
        let start = problem.exact.draw(&mut rng);
        let shape = start.shape.draw(&mut rng);
        let tree = build_tree(&problem.features, &R5, &problem.model, &shape).unwrap();
        let (out, outcome) = step_tree(
            &sampler,
            &problem.prior,
            &problem.features,
            &R5,
            &problem.model,
            &tree,
            &mut rng,
        )
        .unwrap();
        assert!(!outcome.moved);
        assert_eq!(tree_key(&out, 0), start.key);
        let rules = |t: &BayesTree<_>| -> Vec<Option<(usize, f64)>> {
            t.nodes().iter().map(|n| n.rule()).collect()
        };
        let (mut a, mut b) = (rules(&tree), rules(&out));
        a.sort_by(|x, y| format!("{x:?}").cmp(&format!("{y:?}")));
        b.sort_by(|x, y| format!("{x:?}").cmp(&format!("{y:?}")));
        assert_eq!(a, b, "the thresholds are T*'s own");
    }
}

#[test]
fn cgm_leaves_the_tree_posterior_invariant() {
    // T10: 4·10⁴ draws each (prototype: χ² = 362.3 on 374 df); the default ¼ moves and
    // Chipman et al.'s (0.25, 0.25, 0.4, 0.1), which exercises the move-probability ratio.
    let problem = Problem::new(default_prior(), 0.1);
    check("CGM ¼ each", &problem, TreeSampler::cgm(), 40_000, 92);
    let skewed = CgmMoves {
        grow: 0.25,
        prune: 0.25,
        change: 0.4,
        swap: 0.1,
    };
    check(
        "CGM (0.25, 0.25, 0.4, 0.1)",
        &problem,
        TreeSampler::Cgm(skewed),
        40_000,
        93,
    );
    let lopsided = CgmMoves {
        grow: 0.6,
        prune: 0.1,
        change: 0.2,
        swap: 0.1,
    };
    check(
        "CGM (0.6, 0.1, 0.2, 0.1)",
        &problem,
        TreeSampler::Cgm(lopsided),
        40_000,
        94,
    );
}

#[test]
fn grow_prune_leaves_the_tree_posterior_invariant() {
    // T10: 4·10⁴ draws (prototype: χ² = 352.4 on 374 df), and the root-grow pitfall setting
    // α_s = 0.3, β_s = 2, σ² = 4 where the stump has posterior mass 0.712 (prototype:
    // χ² = 49.3 on 50 df; with root grows force-accepted χ² = 5203).
    let problem = Problem::new(default_prior(), 0.1);
    check("GrowPrune", &problem, TreeSampler::GrowPrune, 40_000, 95);
    let pitfall = Problem::new(
        CgmPrior {
            alpha_s: 0.3,
            beta_s: 2.0,
            min_samples: None,
        },
        4.0,
    );
    let stump = pitfall
        .exact
        .structures
        .iter()
        .find(|(e, _)| e.key == "L")
        .unwrap()
        .1;
    println!("pitfall setting: stump mass {stump:.4}");
    assert!((stump - 0.712).abs() < 5e-4, "{stump}");
    check(
        "GrowPrune, pitfall setting",
        &pitfall,
        TreeSampler::GrowPrune,
        40_000,
        96,
    );
    check(
        "CGM, pitfall setting",
        &pitfall,
        TreeSampler::cgm(),
        40_000,
        97,
    );
}

#[test]
fn kernels_respect_the_size_rule() {
    // A19: with min_samples = 3 the prior, and so π, has fewer structures; every kernel
    // stays on them (the support check in `chi_square`) and keeps π invariant.
    let prior = CgmPrior {
        min_samples: Some(3),
        ..default_prior()
    };
    let problem = Problem::new(prior, 0.1);
    check(
        "CGM, min_samples 3",
        &problem,
        TreeSampler::cgm(),
        20_000,
        98,
    );
    let pg = TreeSampler::ParticleGibbs {
        particles: 3,
        max_stages: 5000,
        init: PgInit::Empty,
    };
    check("PG C = 3, min_samples 3", &problem, pg, 20_000, 99);
}
