//! Spec `bayesian-trees.md` §5.6 T13, Geweke's (2004) "getting it right" test of the whole
//! backfitting sampler: the successive-conditional simulator (draw y ~ p(y | θ), then one
//! Alg. 4.1 iteration θ ~ K(θ, · | y)) has the prior p(θ) as its stationary law exactly
//! when K leaves p(θ | y) invariant. Its means of test functions of θ = (T_1, μ_1, T_2,
//! μ_2, σ²) are compared with those of independent prior draws (the marginal-conditional
//! simulator) by a z-test whose standard error uses the chain's CODA effective size.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::backfit::{draw_sigma2, Chain};
use super::params::{noise_prior, BartParams, CgmMoves, PgInit, TreeSampler};
use super::random::{inverse_gamma, standard_normal};
use crate::bayes::diagnostics::effective_size;
use crate::bayes::likelihood::NormalKnownVariance;
use crate::bayes::prior::CgmPrior;
use crate::bayes::smc::sample_prior_tree;
use crate::bayes::tree::Features;

const N: usize = 8;
const M: usize = 2;
const LEAF_VARIANCE: f64 = 0.5;

/// Test functions of θ: log σ², the total number of leaves, the fit at rows 0 and 5, the
/// square of the fit at row 0 and whether tree 1 splits on dimension 0 at its root.
fn stats(chain: &Chain, sigma2: f64) -> [f64; 6] {
    let root_dim = chain.trees[0].nodes()[0]
        .rule()
        .map_or(-1.0, |(d, _)| d as f64);
    [
        sigma2.ln(),
        chain.total_leaves() as f64,
        chain.yhat[0],
        chain.yhat[5],
        chain.yhat[0] * chain.yhat[0],
        f64::from(root_dim == 0.0),
    ]
}

/// Replaces the chain's trees and leaf values with a prior draw; the fit follows.
fn draw_prior_state(
    chain: &mut Chain,
    prior: &CgmPrior,
    features: &Features,
    rng: &mut Xoshiro256PlusPlus,
) {
    let model = NormalKnownVariance {
        mean: 0.0,
        prior_variance: LEAF_VARIANCE,
        noise_variance: 1.0,
    };
    let zeros = vec![0.0; N];
    chain.yhat.iter_mut().for_each(|v| *v = 0.0);
    for m in 0..M {
        let (tree, _) = sample_prior_tree(prior, features, &zeros, &model, rng).unwrap();
        let mut mu = vec![0.0; tree.nodes().len()];
        for (j, node) in tree.nodes().iter().enumerate() {
            if node.is_leaf() {
                mu[j] = LEAF_VARIANCE.sqrt() * standard_normal(rng);
                for &r in node.rows() {
                    chain.yhat[r as usize] += mu[j];
                }
            }
        }
        chain.trees[m] = tree;
        chain.mu[m] = mu;
    }
}

fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    (
        mean,
        x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0),
    )
}

/// The largest |z| over the test functions for one tree kernel.
fn max_abs_z(sampler: TreeSampler, seed: u64, n_draws: usize) -> (f64, Vec<f64>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    // Distinct, irregular features so that many partitions are possible.
    let x: Vec<f64> = (0..N * 2)
        .map(|i| ((i * 7 + 3) % 11) as f64 + 0.1 * i as f64)
        .collect();
    let features = Features::new(&x, 2).unwrap();
    let params = BartParams {
        n_trees: M,
        prior: CgmPrior {
            alpha_s: 0.8,
            beta_s: 1.0,
            min_samples: None,
        },
        sampler,
        ..BartParams::default()
    };
    // ν = 10 so that log σ² has light tails; the scale is immaterial.
    let noise = noise_prior(10.0, 0.9, 1.0);
    let zeros = vec![0.0; N];
    let mut chain = Chain::new(&features, &zeros, &params, LEAF_VARIANCE, 1.0, &mut rng);
    // Marginal-conditional: independent prior draws.
    let mut mc: Vec<[f64; 6]> = Vec::with_capacity(n_draws);
    for _ in 0..n_draws {
        draw_prior_state(&mut chain, &params.prior, &features, &mut rng);
        let sigma2 = inverse_gamma(noise.0, noise.1, &mut rng);
        mc.push(stats(&chain, sigma2));
    }
    // Successive-conditional, from a prior draw.
    draw_prior_state(&mut chain, &params.prior, &features, &mut rng);
    let mut sigma2 = inverse_gamma(noise.0, noise.1, &mut rng);
    let mut y = vec![0.0; N];
    let mut sc: Vec<[f64; 6]> = Vec::with_capacity(n_draws);
    for _ in 0..n_draws {
        for (yn, f) in y.iter_mut().zip(&chain.yhat) {
            *yn = f + sigma2.sqrt() * standard_normal(&mut rng);
        }
        sigma2 = draw_sigma2(noise, chain.sse(&y), N, &mut rng);
        chain.sweep(&features, &y, sigma2, &mut rng);
        sc.push(stats(&chain, sigma2));
    }
    let zs: Vec<f64> = (0..6)
        .map(|k| {
            let a: Vec<f64> = mc.iter().map(|s| s[k]).collect();
            let b: Vec<f64> = sc.iter().map(|s| s[k]).collect();
            let ((ma, va), (mb, vb)) = (mean_var(&a), mean_var(&b));
            let ess = effective_size(&b).clamp(1.0, b.len() as f64);
            (mb - ma) / (va / a.len() as f64 + vb / ess).sqrt()
        })
        .collect();
    (zs.iter().fold(0.0, |m: f64, z| m.max(z.abs())), zs)
}

#[test]
fn every_kernel_gets_it_right() {
    // Six test functions × three kernels, two-sided at a family-wise 1 %: |z| ≤
    // Φ⁻¹(1 − 0.01/36) = 3.45 for each (Bonferroni). Power, checked by hand: a σ² draw
    // with its shape off by ½ gives z = −25 on log σ²; a reference particle whose weight
    // increments are halved gives z ≈ −3.3 to −4.1 on the leaf count at 40,000 draws
    // (so about −6 at the 150,000 used here).
    let kernels = [
        TreeSampler::Cgm(CgmMoves::default()),
        TreeSampler::GrowPrune,
        TreeSampler::ParticleGibbs {
            particles: 5,
            max_stages: 5000,
            init: PgInit::Empty,
        },
    ];
    for (i, sampler) in kernels.into_iter().enumerate() {
        let (z, zs) = max_abs_z(sampler, 100 + i as u64, 150_000);
        assert!(z <= 3.45, "{sampler:?}: z = {zs:?}");
    }
}
