//! How the tree kernels explore the conditional posterior π(T | R, σ²) of one tree on
//! hypercube-D (spec `bayesian-trees.md` §4.6, §5.3), with σ² held fixed so that the
//! kernels are compared on one target distribution: log π(T) up to a constant (the CGM
//! prior's log density plus the log marginal likelihood of the leaves, (4.8)) along the
//! chain, from the single-leaf tree.
//!
//! Rows: CGM; PG with C particles; and "switch", CGM for the first half of the chain
//! and PG (C = 10) from CGM's tree for the second, which shows whether PG keeps a good
//! tree it is given (it must, being π-invariant) as opposed to finding one.
//! Targets are rescaled to [−0.5, 0.5] and the leaf prior is BART's with M = 1, k = 2
//! (σ_μ = 0.25), as in the hypercube runs of `bart_traces`.
//!
//! `cargo run --release -p mondrian --example pg_mixing -- [--d 4] [--iters 2000]
//!  [--chains 3] [--sigma2 1e-4,3e-3,3e-2] [--particles 10,100,1000]`
//! prints one JSON object per (σ², kernel, chain).
use std::time::Instant;

use mondrian::bayes::bart::step_tree;
use mondrian::bayes::{
    hypercube, sample_prior_tree, CgmMoves, CgmPrior, Features, NormalKnownVariance, PgInit,
    TreeSampler,
};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde_json::json;

fn list<T: std::str::FromStr>(s: &str) -> Result<Vec<T>, String> {
    s.split(',')
        .map(|v| v.trim().parse().map_err(|_| format!("bad value {v}")))
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (mut d, mut iters, mut chains) = (4usize, 2000usize, 3u64);
    let mut sigma2s = vec![1e-4, 3e-3, 3e-2];
    let mut particles = vec![10usize, 100, 1000];
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let v = pair.get(1).ok_or("a flag without a value")?;
        match pair[0].as_str() {
            "--d" => d = v.parse()?,
            "--iters" => iters = v.parse()?,
            "--chains" => chains = v.parse()?,
            "--sigma2" => sigma2s = list(v)?,
            "--particles" => particles = list(v)?,
            f => return Err(format!("unknown flag {f}").into()),
        }
    }
    // β_s from §5.3 so that E[#leaves] ≈ 2^D.
    let beta_s = match d {
        2 => 1.0,
        3 => 0.5,
        4 => 0.4,
        5 => 0.3,
        _ => 0.25,
    };
    let hc = hypercube(d, 0, 0.01)?;
    let (lo, hi) = hc
        .train_y
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    let y: Vec<f64> = hc
        .train_y
        .iter()
        .map(|v| (v - lo) / (hi - lo) - 0.5)
        .collect();
    let features = Features::new(&hc.train_x, d)?;
    let prior = CgmPrior {
        alpha_s: 0.95,
        beta_s,
        min_samples: None,
    };
    // A prior that never splits gives the single-leaf start.
    let stump = CgmPrior {
        alpha_s: 1e-300,
        ..prior
    };
    let cgm = TreeSampler::Cgm(CgmMoves::default());
    let pg = |c: usize| TreeSampler::ParticleGibbs {
        particles: c,
        max_stages: 5000,
        init: PgInit::Empty,
    };
    let mut kernels: Vec<(String, usize)> = vec![("cgm".into(), 0)];
    kernels.extend(particles.iter().map(|&c| (format!("pg_C{c}"), c)));
    kernels.push(("switch".into(), 10));
    for &sigma2 in &sigma2s {
        let model = NormalKnownVariance {
            mean: 0.0,
            prior_variance: 0.0625,
            noise_variance: sigma2,
        };
        for (name, c) in &kernels {
            for chain in 0..chains {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(chain);
                let (mut tree, _) = sample_prior_tree(&stump, &features, &y, &model, &mut rng)?;
                let start = Instant::now();
                let (mut trace, mut leaves, mut mse) = (Vec::new(), Vec::new(), Vec::new());
                for it in 0..iters {
                    let kernel = match name.as_str() {
                        "cgm" => cgm,
                        "switch" if it < iters / 2 => cgm,
                        _ => pg(*c),
                    };
                    tree = step_tree(&kernel, &prior, &features, &y, &model, &tree, &mut rng)?.0;
                    trace.push(tree.log_likelihood() + prior.log_density(&tree, &features));
                    leaves.push(tree.n_leaves() as f64);
                    // Train MSE of the leaf means, in the targets' own units.
                    let sse: f64 = tree
                        .nodes()
                        .iter()
                        .filter(|n| n.is_leaf())
                        .map(|n| n.stats().m2())
                        .sum();
                    mse.push(sse / y.len() as f64 * (hi - lo) * (hi - lo));
                }
                let half = iters / 2;
                let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
                let at = |k: usize| trace[k.min(iters) - 1];
                println!(
                    "{}",
                    json!({
                        "d": d, "sigma2": sigma2, "kernel": name, "particles": c,
                        "chain": chain, "iters": iters,
                        "log_post_at": {"100": at(100), "500": at(500), "1000": at(half),
                                        "end": at(iters)},
                        "log_post_max": trace.iter().cloned().fold(f64::MIN, f64::max),
                        "log_post_mean_second_half": mean(&trace[half..]),
                        "leaves_mean_second_half": mean(&leaves[half..]),
                        "train_mse_mean_second_half": mean(&mse[half..]),
                        "seconds": start.elapsed().as_secs_f64(),
                    })
                );
            }
        }
    }
    Ok(())
}
