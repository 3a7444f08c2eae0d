//! Top-down sequential Monte Carlo over decision trees (spec `bayesian-trees.md` §3,
//! Alg. 3.1 as consolidated in §3.6): C particles start from the root and decide, stage by
//! stage, the nodes their expansion rule picks, each decision drawn from a proposal and
//! weighted so that the particles target the truncated posterior; multinomial or
//! systematic resampling when the effective sample size falls below a fraction of C.
//!
//! Weights stay unnormalised throughout (§3.5 invariant, A4): every particle starts at
//! log ℓ(Y_all), resampling sets every weight to log(W/C), so at the end
//! Ẑ = Σ_c w_c / C is the unbiased SMC estimate of the evidence p(Y | X).
//!
//! Randomness: the draws of particle c at stage t of island i come from a generator seeded
//! by (seed, i, t, c), and those of the resampling after stage t from (seed, i, t), so a
//! run is the same bits whatever the number of threads (§3.7, T17).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::likelihood::LeafModel;
use super::prior::CgmPrior;
use super::proposal::{Context, Proposal, SplitValue};
use super::resample::{ancestors, copy_ancestors, effective_particles, Resampler};
use super::shared::check_lengths;
use super::special::{log_add_exp, log_sum_exp};
use super::tree::{BayesTree, Features, Kind, NodeData};
use crate::error::{MondrianError, Result};
use crate::forest::mix64;
use crate::model::{Checked, Params};

/// Which open nodes a stage decides (§3.2). The rule is a deterministic function of the
/// particle, which avoids the high-variance "multipath" problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Expansion {
    /// One node per stage, the oldest in the queue E (FIFO): the default.
    #[default]
    NodeBreadthFirst,
    /// One node per stage, the one with the lowest raw log ℓ(Y_{N_j}); ties go FIFO (A6).
    NodeMinMarginal,
    /// Every node of E at once: a stage is a depth layer.
    LayerWise,
}

/// How islands combine (§3.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum IslandWeighting {
    /// Each island's weighted particles count 1/I ([T]): model combination, lower
    /// variance, biased for finite C.
    #[default]
    Equal,
    /// Island i counts Ẑ_i / Σ Ẑ: the consistent posterior combination.
    Evidence,
}

/// Most particles a run may ask for (u32 indices, and far beyond any useful size).
pub const MAX_PARTICLES: usize = 1 << 24;

/// The sampler's settings: the CGM prior and how the particle system runs. Defaults are
/// §3.10's, with C = 100 particles in one island.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SmcParams {
    /// C: the total number of particles, shared out among the islands.
    pub particles: usize,
    /// I: independent filters, C/I particles each (the first C mod I get one more).
    pub islands: usize,
    /// The tree prior.
    pub prior: CgmPrior,
    /// The proposal of each decision.
    pub proposal: Proposal,
    /// Which nodes a stage decides.
    pub expansion: Expansion,
    /// Resample when ESS < `ess_threshold` · (particles of the island); in [0, 1], 0.1 by
    /// default (C/10); 0 never resamples.
    pub ess_threshold: f64,
    /// How ancestors are drawn.
    pub resampler: Resampler,
    /// Stages at most; nodes still open then are scored as leaves (the truncated target)
    /// and the run is flagged [`truncated`](SmcPosterior::truncated).
    pub max_stages: usize,
    /// How islands combine.
    pub island_weighting: IslandWeighting,
    /// How split locations are stored.
    pub split_value: SplitValue,
    /// Master seed.
    pub seed: u64,
    /// Worker threads: 0 for rayon's global pool, 1 to run on the caller's thread.
    pub n_threads: usize,
}

impl Default for SmcParams {
    fn default() -> Self {
        SmcParams {
            particles: 100,
            islands: 1,
            prior: CgmPrior::default(),
            proposal: Proposal::Prior,
            expansion: Expansion::NodeBreadthFirst,
            ess_threshold: 0.1,
            resampler: Resampler::Multinomial,
            max_stages: 5000,
            island_weighting: IslandWeighting::Equal,
            split_value: SplitValue::Continuous,
            seed: 0,
            n_threads: 0,
        }
    }
}

impl Params for SmcParams {
    fn validate(&self) -> Result<()> {
        let bad = |name, reason: String| Err(MondrianError::InvalidParameter { name, reason });
        if self.particles == 0 {
            return bad("particles", "must be at least 1".into());
        }
        if self.particles > MAX_PARTICLES {
            return bad(
                "particles",
                format!("{} is more than {MAX_PARTICLES}", self.particles),
            );
        }
        if self.islands == 0 {
            return bad("islands", "must be at least 1".into());
        }
        if self.islands > self.particles {
            return bad(
                "islands",
                format!(
                    "{} islands cannot share {} particles (at least one each)",
                    self.islands, self.particles
                ),
            );
        }
        if !(0.0..=1.0).contains(&self.ess_threshold) {
            return bad(
                "ess_threshold",
                format!("{} is not a fraction in [0, 1]", self.ess_threshold),
            );
        }
        if self.max_stages == 0 {
            return bad("max_stages", "must be at least 1".into());
        }
        if self.n_threads > crate::data::MAX_THREADS {
            return bad(
                "n_threads",
                format!(
                    "{} is more than {}",
                    self.n_threads,
                    crate::data::MAX_THREADS
                ),
            );
        }
        self.prior.validate()
    }
}

/// A particle: a partial tree, its queue E of open nodes that can split (nodes that must
/// stop are made leaves at once and never take a stage, §3.2 / A9), its log-weight, and
/// the log prior probability of its decisions.
#[derive(Debug)]
pub(crate) struct Particle<S> {
    pub(crate) tree: BayesTree<S>,
    pub(crate) open: VecDeque<u32>,
    pub(crate) log_weight: f64,
    pub(crate) log_prior: f64,
}

impl<S> Clone for Particle<S> {
    fn clone(&self) -> Self {
        Particle {
            tree: self.tree.clone(),
            open: self.open.clone(),
            log_weight: self.log_weight,
            log_prior: self.log_prior,
        }
    }
}

impl<S> Particle<S> {
    pub(crate) fn new(root: &Arc<NodeData<S>>, prior: &CgmPrior, features: &Features) -> Self {
        let mut particle = Particle {
            tree: BayesTree::with_root(Arc::clone(root)),
            open: VecDeque::new(),
            log_weight: root.log_ml,
            log_prior: 0.0,
        };
        particle.queue_or_stop(0, prior, features);
        particle
    }

    /// Puts a new open node in E, or makes it a leaf when it cannot split.
    pub(crate) fn queue_or_stop(&mut self, j: u32, prior: &CgmPrior, features: &Features) {
        if prior.node_can_split(&self.tree.nodes[j as usize], features) {
            self.open.push_back(j);
        } else {
            self.tree.nodes[j as usize].kind = Kind::Leaf;
        }
    }

    /// Decides node j and queues its children.
    fn decide<L: LeafModel<Stats = S>, R: Rng>(&mut self, ctx: &Context<L>, j: u32, rng: &mut R) {
        let d = ctx.decide(&mut self.tree, j as usize, rng);
        self.log_weight += d.log_increment;
        self.log_prior += d.log_prior;
        if let Some((l, r)) = d.children {
            self.queue_or_stop(l, ctx.prior, ctx.features);
            self.queue_or_stop(r, ctx.prior, ctx.features);
        }
    }

    /// One stage (the particle's E is not empty).
    pub(crate) fn stage<L: LeafModel<Stats = S>, R: Rng>(
        &mut self,
        ctx: &Context<L>,
        expansion: Expansion,
        rng: &mut R,
    ) {
        match expansion {
            Expansion::NodeBreadthFirst => {
                if let Some(j) = self.open.pop_front() {
                    self.decide(ctx, j, rng);
                }
            }
            Expansion::NodeMinMarginal => {
                let mut best: Option<(usize, f64)> = None;
                for (k, &j) in self.open.iter().enumerate() {
                    let ll = self.tree.nodes[j as usize].log_marginal();
                    if best.is_none_or(|(_, b)| ll < b) {
                        best = Some((k, ll));
                    }
                }
                if let Some(j) = best.and_then(|(k, _)| self.open.remove(k)) {
                    self.decide(ctx, j, rng);
                }
            }
            Expansion::LayerWise => {
                let layer: Vec<u32> = self.open.drain(..).collect();
                for j in layer {
                    self.decide(ctx, j, rng);
                }
            }
        }
    }
}

/// The generator of stream (seed, island, stage, index).
fn stream(seed: u64, island: usize, stage: usize, index: u64) -> Xoshiro256PlusPlus {
    let mut key = mix64(seed ^ 0x6a09_e667_f3bc_c908);
    for part in [island as u64, stage as u64, index] {
        key = mix64(key ^ part.wrapping_add(0x9e37_79b9_7f4a_7c15));
    }
    Xoshiro256PlusPlus::seed_from_u64(key)
}

/// Resamples: particle c becomes a copy of a_c, and every log-weight becomes log(W/C).
fn resample<S, R: Rng>(
    particles: Vec<Particle<S>>,
    scheme: Resampler,
    rng: &mut R,
) -> Vec<Particle<S>> {
    let log_w: Vec<f64> = particles.iter().map(|p| p.log_weight).collect();
    let log_total = log_sum_exp(&log_w);
    let weights: Vec<f64> = log_w.iter().map(|w| (w - log_total).exp()).collect();
    let parents = ancestors(&weights, scheme, rng);
    let log_mean = log_total - (particles.len() as f64).ln();
    let mut out = copy_ancestors(particles, &parents);
    for p in &mut out {
        p.log_weight = log_mean;
    }
    out
}

/// One island's result.
#[derive(Debug, Clone)]
pub struct IslandRun<S> {
    /// log Ẑ_i.
    pub log_evidence: f64,
    /// Distinct final particles with their unnormalised log-weights (copies made by the
    /// last resampling and never changed after are merged, their weights added).
    pub particles: Vec<(f64, BayesTree<S>)>,
    /// Particles the island ran.
    pub n_particles: usize,
    /// Stages run.
    pub stages: usize,
    /// Resampling steps taken.
    pub resamplings: usize,
    /// Whether `max_stages` cut the run short.
    pub truncated: bool,
}

/// What a particle system returns: weighted trees, per island, and the evidence.
///
/// With I > 1 islands under [`IslandWeighting::Equal`] this is an *ensemble* of I
/// posterior approximations (§1.5), not a single posterior; under
/// [`IslandWeighting::Evidence`] it is one consistent posterior approximation.
#[derive(Debug, Clone)]
pub struct SmcPosterior<S> {
    islands: Vec<IslandRun<S>>,
    /// Normalised combined weight of each particle of each island.
    weights: Vec<Vec<f64>>,
    log_evidence: f64,
}

/// A final particle with its normalised combined weight.
#[derive(Debug, Clone, Copy)]
pub struct WeightedTree<'a, S> {
    /// Its weight; the weights of all trees sum to 1.
    pub weight: f64,
    /// The island it comes from.
    pub island: usize,
    /// The tree.
    pub tree: &'a BayesTree<S>,
}

impl<S: Send + Sync> SmcPosterior<S> {
    /// Runs the particle system on training features and targets with leaf model `model`.
    pub fn sample<L: LeafModel<Stats = S>>(
        params: &Checked<SmcParams>,
        features: &Features,
        targets: &[L::Target],
        model: &L,
    ) -> Result<Self> {
        Self::sample_checked(params, features, targets, model)
    }

    /// [`sample`](Self::sample) with parameters the caller has checked.
    pub(crate) fn sample_checked<L: LeafModel<Stats = S>>(
        params: &SmcParams,
        features: &Features,
        targets: &[L::Target],
        model: &L,
    ) -> Result<Self> {
        check_lengths(features, targets.len())?;
        let ctx = Context {
            features,
            targets,
            model,
            prior: &params.prior,
            proposal: params.proposal,
            split_value: params.split_value,
        };
        let all: Vec<u32> = (0..features.n_rows() as u32).collect();
        let root = Arc::new(NodeData::new(features, targets, model, all));
        let (i, c) = (params.islands, params.particles);
        let sizes: Vec<usize> = (0..i).map(|k| c / i + usize::from(k < c % i)).collect();
        let parallel = params.n_threads != 1;
        let run = || -> Vec<IslandRun<S>> {
            if parallel {
                sizes
                    .par_iter()
                    .enumerate()
                    .map(|(k, &n)| run_island(&ctx, params, &root, k, n, true))
                    .collect()
            } else {
                sizes
                    .iter()
                    .enumerate()
                    .map(|(k, &n)| run_island(&ctx, params, &root, k, n, false))
                    .collect()
            }
        };
        let islands = match params.n_threads {
            0 | 1 => run(),
            n => match rayon::ThreadPoolBuilder::new().num_threads(n).build() {
                Ok(pool) => pool.install(run),
                // Same bits on any number of threads: the caller's pool will do.
                Err(_) => run(),
            },
        };
        let posterior = Self::combine(islands, params.island_weighting);
        // The extents were computed lazily; a saved model keeps every node's.
        for island in &posterior.islands {
            for (_, tree) in &island.particles {
                for node in tree.nodes() {
                    node.data.bounds(features);
                }
            }
        }
        Ok(posterior)
    }

    pub(crate) fn combine(islands: Vec<IslandRun<S>>, weighting: IslandWeighting) -> Self {
        let n = islands.len() as f64;
        let log_z: Vec<f64> = islands.iter().map(|r| r.log_evidence).collect();
        let log_evidence = log_sum_exp(&log_z) - n.ln();
        let weights = islands
            .iter()
            .map(|r| {
                let log_w: Vec<f64> = r.particles.iter().map(|p| p.0).collect();
                let total = log_sum_exp(&log_w);
                // Equal: 1/I per island; Evidence: Ẑ_i / Σ Ẑ.
                let island = match weighting {
                    IslandWeighting::Equal => -n.ln(),
                    IslandWeighting::Evidence => r.log_evidence - log_evidence - n.ln(),
                };
                log_w.iter().map(|w| (w - total + island).exp()).collect()
            })
            .collect();
        SmcPosterior {
            islands,
            weights,
            log_evidence,
        }
    }

    /// log Ẑ: the log of the mean of the islands' evidence estimates (§3.7).
    pub fn log_evidence(&self) -> f64 {
        self.log_evidence
    }

    /// The islands' runs.
    pub fn islands(&self) -> &[IslandRun<S>] {
        &self.islands
    }

    /// Every final tree with its normalised combined weight.
    pub fn trees(&self) -> impl Iterator<Item = WeightedTree<'_, S>> + '_ {
        self.islands
            .iter()
            .zip(&self.weights)
            .enumerate()
            .flat_map(|(i, (run, w))| {
                run.particles
                    .iter()
                    .zip(w)
                    .map(move |((_, tree), &weight)| WeightedTree {
                        weight,
                        island: i,
                        tree,
                    })
            })
    }

    /// Whether some island hit `max_stages`.
    pub fn truncated(&self) -> bool {
        self.islands.iter().any(|r| r.truncated)
    }
}

fn run_island<L: LeafModel>(
    ctx: &Context<L>,
    params: &SmcParams,
    root: &Arc<NodeData<L::Stats>>,
    island: usize,
    n_particles: usize,
    parallel: bool,
) -> IslandRun<L::Stats> {
    let mut particles: Vec<Particle<L::Stats>> = (0..n_particles)
        .map(|_| Particle::new(root, ctx.prior, ctx.features))
        .collect();
    let (mut stages, mut resamplings, mut truncated) = (0, 0, false);
    let step = |stage: usize, c: usize, p: &mut Particle<L::Stats>| {
        if !p.open.is_empty() {
            let mut rng = stream(params.seed, island, stage, c as u64);
            p.stage(ctx, params.expansion, &mut rng);
        }
    };
    while particles.iter().any(|p| !p.open.is_empty()) {
        if stages == params.max_stages {
            truncated = true;
            break;
        }
        stages += 1;
        if parallel && particles.len() > 1 {
            particles
                .par_iter_mut()
                .enumerate()
                .with_min_len(16)
                .for_each(|(c, p)| step(stages, c, p));
        } else {
            for (c, p) in particles.iter_mut().enumerate() {
                step(stages, c, p);
            }
        }
        if particles.iter().all(|p| p.open.is_empty()) {
            break;
        }
        let log_w: Vec<f64> = particles.iter().map(|p| p.log_weight).collect();
        if effective_particles(&log_w) < params.ess_threshold * n_particles as f64 {
            let mut rng = stream(params.seed, island, stages, u64::MAX);
            particles = resample(particles, params.resampler, &mut rng);
            resamplings += 1;
        }
    }
    let log_w: Vec<f64> = particles.iter().map(|p| p.log_weight).collect();
    let log_evidence = log_sum_exp(&log_w) - (n_particles as f64).ln();
    IslandRun {
        log_evidence,
        particles: merge_copies(particles),
        n_particles,
        stages,
        resamplings,
        truncated,
    }
}

/// Final particles with copies merged: two particles are copies when every node shares
/// its data and its decision.
fn merge_copies<S>(particles: Vec<Particle<S>>) -> Vec<(f64, BayesTree<S>)> {
    let mut seen: HashMap<Vec<usize>, usize> = HashMap::new();
    let mut out: Vec<(f64, BayesTree<S>)> = Vec::new();
    for mut p in particles {
        // Nodes a truncated run left open are scored as leaves (§3.5).
        for &j in &p.open {
            p.tree.nodes[j as usize].kind = Kind::Leaf;
        }
        let key: Vec<usize> = p
            .tree
            .nodes
            .iter()
            .map(|n| Arc::as_ptr(&n.data) as usize ^ usize::from(n.is_leaf()))
            .collect();
        match seen.get(&key) {
            Some(&k) if same_decisions(&out[k].1, &p.tree) => {
                out[k].0 = log_add_exp(out[k].0, p.log_weight);
            }
            _ => {
                seen.insert(key, out.len());
                out.push((p.log_weight, p.tree));
            }
        }
    }
    out
}

fn same_decisions<S>(a: &BayesTree<S>, b: &BayesTree<S>) -> bool {
    a.nodes.len() == b.nodes.len()
        && a.nodes
            .iter()
            .zip(&b.nodes)
            .all(|(x, y)| Arc::ptr_eq(&x.data, &y.data) && x.kind == y.kind)
}

/// One tree drawn from the CGM prior on the training data (§2.2, breadth-first), with the
/// log of the probability (density, for the ξ) of the decisions that made it. The leaves
/// carry the statistics of `targets` under `model`.
pub fn sample_prior_tree<L: LeafModel, R: Rng>(
    prior: &CgmPrior,
    features: &Features,
    targets: &[L::Target],
    model: &L,
    rng: &mut R,
) -> Result<(BayesTree<L::Stats>, f64)> {
    prior.validate()?;
    check_lengths(features, targets.len())?;
    let ctx = Context {
        features,
        targets,
        model,
        prior,
        proposal: Proposal::Prior,
        split_value: SplitValue::Continuous,
    };
    let all: Vec<u32> = (0..features.n_rows() as u32).collect();
    let root = Arc::new(NodeData::new(features, targets, model, all));
    let mut particle = Particle::new(&root, prior, features);
    while !particle.open.is_empty() {
        particle.stage(&ctx, Expansion::NodeBreadthFirst, rng);
    }
    Ok((particle.tree, particle.log_prior))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resampling_keeps_the_total_weight() {
        // T15: Σ_c w_c is unchanged, so log Ẑ does not depend on a last resampling.
        use crate::bayes::likelihood::DirichletMultinomial;
        let features = Features::new(&[0.0, 1.0, 2.0], 1).unwrap();
        let model = DirichletMultinomial::new(1.0, 2).unwrap();
        let root = Arc::new(NodeData::new(&features, &[0, 1, 1], &model, vec![0, 1, 2]));
        let prior = CgmPrior::default();
        let particles: Vec<Particle<_>> = [-3.0, 0.5, -0.25, -40.0, 2.0]
            .iter()
            .map(|&w| {
                let mut p = Particle::new(&root, &prior, &features);
                p.log_weight = w;
                p
            })
            .collect();
        let before = log_sum_exp(&particles.iter().map(|p| p.log_weight).collect::<Vec<_>>());
        for scheme in [Resampler::Multinomial, Resampler::Systematic] {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
            let after = resample(particles.clone(), scheme, &mut rng);
            let w: Vec<f64> = after.iter().map(|p| p.log_weight).collect();
            assert!((log_sum_exp(&w) - before).abs() < 1e-12);
            assert!(w.iter().all(|&v| v == w[0]));
        }
    }

    #[test]
    fn params_are_checked() {
        assert!(SmcParams::default().check().is_ok());
        let cases = [
            SmcParams {
                particles: 0,
                ..Default::default()
            },
            SmcParams {
                islands: 0,
                ..Default::default()
            },
            SmcParams {
                islands: 101,
                ..Default::default()
            },
            SmcParams {
                ess_threshold: f64::NAN,
                ..Default::default()
            },
            SmcParams {
                max_stages: 0,
                ..Default::default()
            },
        ];
        for p in cases {
            assert!(p.check().is_err());
        }
    }
}
