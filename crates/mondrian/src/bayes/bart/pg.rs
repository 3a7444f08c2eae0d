//! The particle Gibbs tree kernel (spec `bayesian-trees.md` §4.6, Alg. 4.2): conditional
//! SMC over the top-down prior process of one tree, with the current tree T* as the
//! reference particle.
//!
//! * Particle 0 replays T*'s stage sequence: the §2.2 FIFO expansion over T*'s structure,
//!   nodes that cannot split skipped without a stage (§3.2, A9). The sequence depends on
//!   X and T* only, so it is well defined after the residual changed; the clamped
//!   particle's weights are recomputed from the current R and σ².
//! * Particles 1..C take prior-proposal stages with the SMC machinery of [`crate::bayes::smc`]
//!   (increment ℓ(R_{j0})ℓ(R_{j1})/ℓ(R_j) on a split, 1 on a stop).
//! * After each stage's weight update: if no particle has a stochastic stage left, the new
//!   tree is drawn from the final weights over all C particles (the standard order,
//!   §4.6 step 3.4, A10). Otherwise conditional multinomial resampling: a_0 = 0, a_1..a_{C−1}
//!   i.i.d. from Cat(w̄) over all C particles, every log-weight set to
//!   logsumexp(log w) − log C.
//!
//! The kernel leaves π(T) invariant for any C ≥ 1 (Andrieu et al. 2010); with C = 1 it
//! returns T*. Without a reference the same code is plain SMC with resampling at every
//! stage, which [`PgInit::Smc`](super::PgInit) uses for the first tree.

use rand::Rng;

use super::local::Local;
use crate::bayes::likelihood::Moments;
use crate::bayes::resample::copy_ancestors;
use crate::bayes::smc::{Expansion, Particle};
use crate::bayes::special::log_sum_exp;
use crate::bayes::tree::{BayesTree, Kind};

/// The final particle system of one run: the particles (particle 0 follows the
/// reference when there is one) and whether `max_stages` cut it short.
pub(crate) struct Run {
    pub(crate) particles: Vec<Particle<Moments>>,
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) truncated: bool,
}

/// An index drawn from Cat(w̄) of normalised cumulative weights.
fn categorical<R: Rng>(cumulative: &[f64], rng: &mut R) -> usize {
    let u = rng.gen::<f64>() * cumulative[cumulative.len() - 1];
    cumulative
        .partition_point(|&c| c <= u)
        .min(cumulative.len() - 1)
}

fn cumulative_weights(particles: &[Particle<Moments>]) -> (Vec<f64>, f64) {
    let log_w: Vec<f64> = particles.iter().map(|p| p.log_weight).collect();
    let total = log_sum_exp(&log_w);
    let mut acc = 0.0;
    let cum = log_w
        .iter()
        .map(|w| {
            acc += (w - total).exp();
            acc
        })
        .collect();
    (cum, total)
}

/// Applies T*'s decision at the clamped particle's next stage; `map` sends the particle's
/// node indices to T*'s.
fn clamped_stage(
    loc: &Local,
    p: &mut Particle<Moments>,
    reference: &BayesTree<Moments>,
    map: &mut Vec<u32>,
) {
    let Some(j) = p.open.pop_front() else {
        return;
    };
    let j = j as usize;
    let depth = p.tree.nodes[j].depth();
    let prob = loc.prior.p_split(depth);
    match reference.nodes[map[j] as usize].kind {
        Kind::Split {
            dim,
            threshold,
            left,
            right,
        } => {
            let node = &p.tree.nodes[j];
            // The particle's node holds T*'s rows for this node (same X, same rules from
            // the root), so T*'s children hold the split's rows: only R is new.
            let rows = |k: u32| reference.nodes[k as usize].data.rows.clone();
            let (l, r) = (loc.scored(rows(left)), loc.scored(rows(right)));
            debug_assert_eq!(l.rows.len() + r.rows.len(), node.data.rows.len());
            p.log_weight += l.log_ml + r.log_ml - node.data.log_ml;
            p.log_prior += prob.ln() + loc.prior.rule_log_density(node, loc.features, dim as usize);
            let (a, b) = p.tree.split(j, dim as usize, threshold, l, r);
            map.resize(p.tree.nodes.len(), 0);
            map[a as usize] = left;
            map[b as usize] = right;
            p.queue_or_stop(a, loc.prior, loc.features);
            p.queue_or_stop(b, loc.prior, loc.features);
        }
        _ => {
            p.tree.nodes[j].kind = Kind::Leaf;
            p.log_prior += (1.0 - prob).ln();
        }
    }
}

/// Runs C particles to the end (conditional on `reference` when given).
pub(crate) fn run<R: Rng>(
    loc: &Local,
    reference: Option<&BayesTree<Moments>>,
    n_particles: usize,
    max_stages: usize,
    rng: &mut R,
) -> Run {
    let ctx = loc.context();
    let root = loc.root();
    let mut particles: Vec<Particle<Moments>> = (0..n_particles)
        .map(|_| Particle::new(&root, loc.prior, loc.features))
        .collect();
    let mut map: Vec<u32> = vec![0];
    let first_free = usize::from(reference.is_some());
    let (mut stages, mut truncated) = (0, false);
    let active = |ps: &[Particle<Moments>]| ps.iter().any(|p| !p.open.is_empty());
    while active(&particles) {
        if stages == max_stages {
            truncated = true;
            break;
        }
        stages += 1;
        for (c, p) in particles.iter_mut().enumerate() {
            if p.open.is_empty() {
                continue;
            }
            match reference {
                Some(t) if c == 0 => clamped_stage(loc, p, t, &mut map),
                _ => p.stage(&ctx, Expansion::NodeBreadthFirst, rng),
            }
        }
        if !active(&particles) {
            break;
        }
        let (cum, total) = cumulative_weights(&particles);
        let parents: Vec<usize> = (0..n_particles)
            .map(|c| {
                if c < first_free {
                    0
                } else {
                    categorical(&cum, rng)
                }
            })
            .collect();
        particles = copy_ancestors(particles, &parents);
        let log_mean = total - (n_particles as f64).ln();
        for p in &mut particles {
            p.log_weight = log_mean;
        }
    }
    Run {
        particles,
        truncated,
    }
}

/// One PG update: a run, then the new tree drawn from the final weights. Returns the tree
/// and the index drawn (0 is the reference when there is one).
pub(crate) fn sample<R: Rng>(
    loc: &Local,
    reference: Option<&BayesTree<Moments>>,
    n_particles: usize,
    max_stages: usize,
    rng: &mut R,
) -> (BayesTree<Moments>, usize) {
    let run = run(loc, reference, n_particles, max_stages, rng);
    let (cum, _) = cumulative_weights(&run.particles);
    let k = categorical(&cum, rng);
    let mut particles = run.particles;
    let mut chosen = particles.swap_remove(k);
    // Nodes a truncated run left open are leaves (§3.5).
    for &j in &chosen.open {
        chosen.tree.nodes[j as usize].kind = Kind::Leaf;
    }
    (chosen.tree, k)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    use super::*;
    use crate::bayes::bart::kernel::structure_key;
    use crate::bayes::likelihood::NormalKnownVariance;
    use crate::bayes::prior::CgmPrior;
    use crate::bayes::proposal::SplitValue;
    use crate::bayes::smc::sample_prior_tree;
    use crate::bayes::tree::Features;

    #[test]
    fn the_reference_path_survives_every_resampling() {
        // The clamped particle is never dropped: after the run, particle 0 is T* whatever
        // the residual, the number of particles and the seed; and C = 1 returns T*.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let n = 60;
        let x: Vec<f64> = (0..2 * n).map(|_| rng.gen::<f64>()).collect();
        let features = Features::new(&x, 2).unwrap();
        let prior = CgmPrior {
            alpha_s: 0.95,
            beta_s: 0.5,
            min_samples: None,
        };
        let model = NormalKnownVariance {
            mean: 0.0,
            prior_variance: 1.0,
            noise_variance: 0.05,
        };
        let mut checked = 0;
        for trial in 0..200 {
            let resid: Vec<f64> = (0..n).map(|_| rng.gen::<f64>() * 4.0 - 2.0).collect();
            let (reference, _) =
                sample_prior_tree(&prior, &features, &resid, &model, &mut rng).unwrap();
            let resid: Vec<f64> = (0..n).map(|_| rng.gen::<f64>() - 0.5).collect();
            let loc = Local {
                features: &features,
                resid: &resid,
                model: &model,
                prior: &prior,
                split_value: SplitValue::Continuous,
            };
            let c = 1 + trial % 12;
            let out = run(&loc, Some(&reference), c, 5000, &mut rng);
            assert!(!out.truncated);
            assert_eq!(
                structure_key(&out.particles[0].tree),
                structure_key(&reference)
            );
            if c == 1 {
                let (tree, k) = sample(&loc, Some(&reference), 1, 5000, &mut rng);
                assert_eq!(k, 0);
                assert_eq!(structure_key(&tree), structure_key(&reference));
                checked += 1;
            }
        }
        assert!(checked > 10);
    }
}
