//! Settings of BART (spec `bayesian-trees.md` §4.1, §4.7 and Appendix A), checked once
//! through the crate's [`Params`] / [`Checked`](crate::model::Checked) pattern.

use serde::{Deserialize, Serialize};

use crate::bayes::prior::CgmPrior;
use crate::bayes::proposal::SplitValue;
use crate::bayes::smc::MAX_PARTICLES;
use crate::bayes::special::chi_square_quantile;
use crate::error::{MondrianError, Result};
use crate::model::Params;

/// Most trees a sum may have.
pub const MAX_TREES: usize = 1 << 20;

/// The over-estimate σ̂ of the noise sd that calibrates the σ² prior (§4.1), computed on
/// the rescaled targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SigmaHat {
    /// The sample sd of y (the reference code's and the spec's default).
    #[default]
    SampleSd,
    /// The residual sd of a least-squares fit of y on (1, X), √(RSS/(N − D − 1))
    /// (Chipman et al.'s usual choice); needs N > D + 1 and a full-rank design.
    OlsResidualSd,
}

/// The order in which a sweep visits the trees (A17).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum TreeOrder {
    /// 1..M every iteration.
    #[default]
    Sequential,
    /// A fresh random permutation every iteration (the reference code).
    Shuffled,
}

/// Relative probabilities of the four CGM moves (§4.5, A12); normalised when used.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CgmMoves {
    /// Grow a growable leaf.
    pub grow: f64,
    /// Prune a node whose children are both leaves.
    pub prune: f64,
    /// Redraw the rule of an internal node from the prior.
    pub change: f64,
    /// Exchange the rules of an internal parent and an internal child.
    pub swap: f64,
}

impl Default for CgmMoves {
    /// ¼ each, as in the reference code (what produced Tables 4.1–4.5).
    fn default() -> Self {
        CgmMoves {
            grow: 0.25,
            prune: 0.25,
            change: 0.25,
            swap: 0.25,
        }
    }
}

impl CgmMoves {
    /// Grow and prune only, ½ each: the GrowPrune kernel.
    pub const GROW_PRUNE: CgmMoves = CgmMoves {
        grow: 0.5,
        prune: 0.5,
        change: 0.0,
        swap: 0.0,
    };

    /// Checks every probability is finite and ≥ 0, and grow and prune positive (a grow
    /// must be reversible by a prune for the MH ratio to exist).
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("grow", self.grow),
            ("prune", self.prune),
            ("change", self.change),
            ("swap", self.swap),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(MondrianError::InvalidParameter {
                    name: "moves",
                    reason: format!("the {name} probability {v} is not a finite number ≥ 0"),
                });
            }
        }
        if !(self.grow > 0.0 && self.prune > 0.0) {
            return Err(MondrianError::InvalidParameter {
                name: "moves",
                reason: "grow and prune need positive probabilities (each reverses the other)"
                    .into(),
            });
        }
        Ok(())
    }

    /// The probabilities normalised to sum 1.
    pub(crate) fn normalised(&self) -> [f64; 4] {
        let total = self.grow + self.prune + self.change + self.swap;
        [
            self.grow / total,
            self.prune / total,
            self.change / total,
            self.swap / total,
        ]
    }
}

/// How the particle Gibbs sampler finds its first reference tree (§4.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum PgInit {
    /// The single-leaf tree (the reference code's `init_pg = empty`).
    #[default]
    Empty,
    /// At the first visit of each tree, one unconditional SMC run with this many
    /// particles, resampling every stage, and a tree drawn from its final weights.
    Smc {
        /// Particles of that run (100 in the reference code).
        particles: usize,
    },
}

/// The prior on the noise variance σ² (spec §4.1, A11). Both satisfy P(σ ≤ σ̂) = q.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum NoisePrior {
    /// Chipman et al.'s σ² ~ νλ/χ²_ν = IG(ν/2, νλ/2) ([REC]).
    #[default]
    ChipmanIg,
    /// The reference code's: Gamma(shape ν, rate β) on the precision 1/σ², i.e.
    /// σ² ~ IG(ν, β), with the chain's first leaf values drawn at σ² = var(y)/2 (its
    /// starting precision 2/var(y)), for parity experiments.
    RefCodeGamma,
}

impl NoisePrior {
    /// (shape, scale) of the inverse-gamma law of σ² for ν, q and σ̂.
    pub fn shape_scale(self, nu: f64, q: f64, sigma_hat: f64) -> (f64, f64) {
        match self {
            NoisePrior::ChipmanIg => noise_prior(nu, q, sigma_hat),
            // P(σ² ≤ σ̂²) = P(Gamma(ν, 1) ≥ β/σ̂²) = q: β/σ̂² is the (1 − q)-quantile of
            // Gamma(ν, 1), half the χ²_{2ν} one.
            NoisePrior::RefCodeGamma => (
                nu,
                sigma_hat * sigma_hat * 0.5 * chi_square_quantile(1.0 - q, 2.0 * nu),
            ),
        }
    }
}

/// The Markov kernel that updates one tree given its residual (§4.3 step 2.2).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum TreeSampler {
    /// One Metropolis–Hastings move of Chipman, George & McCulloch (1998): grow, prune,
    /// change or swap (§4.5).
    Cgm(CgmMoves),
    /// One MH move from {grow, prune}, ½ each (Pratola et al.).
    GrowPrune,
    /// One conditional-SMC sweep (§4.6, Alg. 4.2).
    ParticleGibbs {
        /// C, the particles including the reference (10 in [T]).
        particles: usize,
        /// Stages at most (5000; never reached in practice).
        max_stages: usize,
        /// The first reference tree.
        init: PgInit,
    },
}

impl Default for TreeSampler {
    /// Particle Gibbs with C = 10, 5000 stages, from the single-leaf tree.
    fn default() -> Self {
        TreeSampler::ParticleGibbs {
            particles: 10,
            max_stages: 5000,
            init: PgInit::Empty,
        }
    }
}

fn bad(name: &'static str, reason: String) -> MondrianError {
    MondrianError::InvalidParameter { name, reason }
}

impl TreeSampler {
    /// CGM with ¼ per move.
    pub fn cgm() -> Self {
        TreeSampler::Cgm(CgmMoves::default())
    }

    /// Checks the kernel's own settings.
    pub fn validate(&self) -> Result<()> {
        match *self {
            TreeSampler::Cgm(moves) => moves.validate(),
            TreeSampler::GrowPrune => Ok(()),
            TreeSampler::ParticleGibbs {
                particles,
                max_stages,
                init,
            } => {
                let check = |name, c: usize| {
                    if c == 0 {
                        Err(bad(name, "must be at least 1".into()))
                    } else if c > MAX_PARTICLES {
                        Err(bad(name, format!("{c} is more than {MAX_PARTICLES}")))
                    } else {
                        Ok(())
                    }
                };
                check("particles", particles)?;
                if let PgInit::Smc { particles } = init {
                    check("init particles", particles)?;
                }
                if max_stages == 0 {
                    return Err(bad("max_stages", "must be at least 1".into()));
                }
                Ok(())
            }
        }
    }
}

/// BART's settings. Defaults are Chipman et al. (2010)'s as adopted by [T] (§4.7):
/// M = 200, k = 2, ν = 3, q = 0.9, α_s = 0.95, β_s = 2, PG with C = 10, 2000 iterations
/// of which the first 1000 are burn-in.
///
/// [`BartClassifier`](super::BartClassifier) uses M, k, the tree prior, the sampler and
/// the run settings; ν, q and σ̂ concern the noise variance, which the probit model fixes
/// at 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BartParams {
    /// M, the number of trees in the sum.
    pub n_trees: usize,
    /// k: the leaf prior sd is σ_μ = 0.5/(k√M) on the rescaled targets (3/(k√M) on the
    /// probit scale).
    pub k: f64,
    /// ν, the degrees of freedom of the σ² prior IG(ν/2, νλ/2).
    pub nu: f64,
    /// q = P(σ ≤ σ̂) under the σ² prior, in (0, 1).
    pub q: f64,
    /// The tree prior (α_s, β_s and the optional `min_samples` stopping rule, A19).
    pub prior: CgmPrior,
    /// How σ̂ is computed.
    pub sigma_hat: SigmaHat,
    /// The σ² prior (A11); files saved before this setting existed read as the default.
    #[serde(default)]
    pub noise_prior: NoisePrior,
    /// How split locations are stored (A18): the continuous draw ξ ([REC] default), or
    /// the midpoint of the training gap that contains it (the reference code, which made
    /// Tables 4.1–4.5). Training partitions have the same law; only test points inside a
    /// gap between training values are routed differently.
    pub split_value: SplitValue,
    /// The tree kernel.
    pub sampler: TreeSampler,
    /// Iterations of the Gibbs sampler.
    pub n_iter: usize,
    /// Leading iterations left out of the posterior draws and the ESS; < `n_iter`.
    pub burn_in: usize,
    /// Order of the trees within a sweep.
    pub tree_order: TreeOrder,
    /// Master seed: the same seed gives the same chain, bit for bit.
    pub seed: u64,
    /// Threads for prediction: 0 for rayon's global pool, 1 for the caller's thread, n > 1
    /// a pool of n. The chain itself is sequential.
    pub n_threads: usize,
}

impl Default for BartParams {
    fn default() -> Self {
        BartParams {
            n_trees: 200,
            k: 2.0,
            nu: 3.0,
            q: 0.9,
            prior: CgmPrior {
                alpha_s: 0.95,
                beta_s: 2.0,
                min_samples: None,
            },
            sigma_hat: SigmaHat::SampleSd,
            noise_prior: NoisePrior::ChipmanIg,
            split_value: SplitValue::Continuous,
            sampler: TreeSampler::default(),
            n_iter: 2000,
            burn_in: 1000,
            tree_order: TreeOrder::Sequential,
            seed: 0,
            n_threads: 0,
        }
    }
}

impl Params for BartParams {
    fn validate(&self) -> Result<()> {
        if self.n_trees == 0 {
            return Err(bad("n_trees", "must be at least 1".into()));
        }
        if self.n_trees > MAX_TREES {
            return Err(bad(
                "n_trees",
                format!("{} is more than {MAX_TREES}", self.n_trees),
            ));
        }
        for (name, v) in [("k", self.k), ("nu", self.nu)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(bad(name, format!("{v} is not a positive finite number")));
            }
        }
        if !(self.q > 0.0 && self.q < 1.0) {
            return Err(bad("q", format!("{} is not in (0, 1)", self.q)));
        }
        self.prior.validate()?;
        self.sampler.validate()?;
        if self.n_iter == 0 {
            return Err(bad("n_iter", "must be at least 1".into()));
        }
        if self.burn_in >= self.n_iter {
            return Err(bad(
                "burn_in",
                format!(
                    "{} burn-in iterations leave no draw out of n_iter = {}",
                    self.burn_in, self.n_iter
                ),
            ));
        }
        if self.n_threads > crate::data::MAX_THREADS {
            return Err(bad(
                "n_threads",
                format!(
                    "{} is more than {}",
                    self.n_threads,
                    crate::data::MAX_THREADS
                ),
            ));
        }
        Ok(())
    }
}

impl BartParams {
    /// σ_μ² for the regression leaves on the rescaled scale: (0.5/(k√M))², so that
    /// M σ_μ² = (0.5/k)² (§4.1, T14).
    pub fn leaf_prior_variance(&self) -> f64 {
        let sd = 0.5 / (self.k * (self.n_trees as f64).sqrt());
        sd * sd
    }

    /// σ_μ² for the probit classifier: (3/(k√M))² (Chipman et al. 2010 §4: the sum of the
    /// trees lies in ±3 with prior probability ≈ 0.95 for k = 2).
    pub fn probit_leaf_prior_variance(&self) -> f64 {
        let sd = 3.0 / (self.k * (self.n_trees as f64).sqrt());
        sd * sd
    }
}

/// The σ² prior IG(ν/2, νλ/2) of §4.1 with λ = σ̂²·χ²_ν⁻¹(1 − q)/ν, so that
/// P(σ ≤ σ̂) = q: returns (shape, scale).
pub fn noise_prior(nu: f64, q: f64, sigma_hat: f64) -> (f64, f64) {
    let lambda = sigma_hat * sigma_hat * chi_square_quantile(1.0 - q, nu) / nu;
    (0.5 * nu, 0.5 * nu * lambda)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bayes::special::regularized_gamma_p;

    #[test]
    fn the_reference_code_prior_has_the_same_quantile() {
        // A11: IG(ν, β) on σ² with P(σ² ≤ σ̂²) = q; the default is Chipman's.
        for (nu, q, s) in [(3.0, 0.9, 1.0), (3.0, 0.9, 0.37), (10.0, 0.75, 2.5)] {
            let (shape, scale) = NoisePrior::RefCodeGamma.shape_scale(nu, q, s);
            assert_eq!(shape, nu);
            let p = 1.0 - regularized_gamma_p(shape, scale / (s * s));
            assert!((p - q).abs() < 1e-9, "{nu} {q} {s}: {p}");
            assert_eq!(
                NoisePrior::ChipmanIg.shape_scale(nu, q, s),
                noise_prior(nu, q, s)
            );
        }
    }

    #[test]
    fn calibration_matches_t14() {
        // T14: P(σ² ≤ σ̂²) = q under IG(ν/2, νλ/2), and λ/σ̂² = 0.1947915 for ν = 3, q = 0.9.
        for (nu, q, s) in [(3.0, 0.9, 1.0), (3.0, 0.9, 0.37), (10.0, 0.75, 2.5)] {
            let (shape, scale) = noise_prior(nu, q, s);
            // P(σ² ≤ s²) = P(Gamma(shape, 1) ≥ scale/s²) = 1 − P(shape, scale/s²).
            let p = 1.0 - regularized_gamma_p(shape, scale / (s * s));
            assert!((p - q).abs() < 1e-9, "{nu} {q} {s}: {p}");
        }
        let (_, scale) = noise_prior(3.0, 0.9, 1.0);
        assert!((scale / 1.5 - 0.194_791_5).abs() < 1e-7);
        let p = BartParams {
            n_trees: 50,
            ..Default::default()
        };
        assert!((50.0 * p.leaf_prior_variance() - 0.0625).abs() < 1e-15);
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(BartParams::default().check().is_ok());
        let pg = |particles| TreeSampler::ParticleGibbs {
            particles,
            max_stages: 10,
            init: PgInit::Empty,
        };
        let cases = [
            BartParams {
                n_trees: 0,
                ..Default::default()
            },
            BartParams {
                sampler: pg(0),
                ..Default::default()
            },
            BartParams {
                burn_in: 2000,
                ..Default::default()
            },
            BartParams {
                n_iter: 0,
                burn_in: 0,
                ..Default::default()
            },
            BartParams {
                k: f64::NAN,
                ..Default::default()
            },
            BartParams {
                q: 1.0,
                ..Default::default()
            },
            BartParams {
                sampler: TreeSampler::Cgm(CgmMoves {
                    prune: 0.0,
                    ..Default::default()
                }),
                ..Default::default()
            },
            BartParams {
                sampler: TreeSampler::ParticleGibbs {
                    particles: 5,
                    max_stages: 0,
                    init: PgInit::Empty,
                },
                ..Default::default()
            },
        ];
        for p in cases {
            assert!(p.validate().is_err(), "{p:?}");
        }
    }
}
