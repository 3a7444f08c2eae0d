//! Ensembles of Mondrian trees: seeding, online bagging and the thread pool.
//!
//! Every tree owns a generator seeded from `(seed, tree index)`, and online-bagging counts
//! come from a counter-based generator keyed by `(seed, tree index, example index)`, so a
//! forest is bit-identical whatever the number of threads (DESIGN.md principle 3).

mod classifier;

pub use classifier::{ClassifierParams, ForestSummary, MondrianForestClassifier};

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// SplitMix64 finaliser: a bijective mix of 64 bits.
#[inline]
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The generator of tree `index` in a forest with master seed `seed`.
pub fn tree_rng(seed: u64, index: usize) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(mix64(seed ^ mix64(index as u64 + 0x9e37_79b9_7f4a_7c15)))
}

/// Online-bagging multiplicity `k ~ Poisson(1)` of example `example` in tree `tree`
/// (spec `bayesian-trees.md` §6.2), drawn by inversion from a uniform that depends only on
/// `(seed, tree, example)`.
pub fn poisson_weight(seed: u64, tree: usize, example: u64) -> u32 {
    let h = mix64(
        mix64(seed ^ 0x5851_f42d_4c95_7f2d)
            ^ mix64(tree as u64)
            ^ example.wrapping_mul(0xa076_1d64_78bd_642f),
    );
    let u = (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
    // P(k) = e^{-1} / k!; walk the CDF.
    let mut p = (-1.0f64).exp();
    let mut cdf = p;
    let mut k = 0u32;
    while u >= cdf && k < 30 {
        k += 1;
        p /= f64::from(k);
        cdf += p;
    }
    k
}

/// A lazily built rayon pool with a fixed number of threads (0 = all cores).
#[derive(Default)]
pub(crate) struct Pool {
    threads: usize,
    pool: std::sync::OnceLock<Option<rayon::ThreadPool>>,
}

impl Pool {
    pub(crate) fn new(threads: usize) -> Self {
        Pool {
            threads,
            pool: std::sync::OnceLock::new(),
        }
    }

    pub(crate) fn install<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        let pool = self.pool.get_or_init(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(self.threads)
                .build()
                .ok()
        });
        match pool {
            Some(pool) => pool.install(work),
            None => work(),
        }
    }
}

impl Clone for Pool {
    fn clone(&self) -> Self {
        Pool::new(self.threads)
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pool({} threads)", self.threads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_weights_follow_poisson_one() {
        // Chi-square goodness of fit for k = 0..4 and ≥ 5 over 200k draws, α = 1e-3
        // (critical value of χ²₅ is 20.52).
        let n = 200_000u64;
        let mut counts = [0f64; 6];
        for e in 0..n {
            let k = poisson_weight(7, 3, e) as usize;
            counts[k.min(5)] += 1.0;
        }
        let e1 = (-1.0f64).exp();
        let mut probs = [e1, e1, e1 / 2.0, e1 / 6.0, e1 / 24.0, 0.0];
        probs[5] = 1.0 - probs[..5].iter().sum::<f64>();
        let chi2: f64 = counts
            .iter()
            .zip(&probs)
            .map(|(&o, &p)| (o - p * n as f64).powi(2) / (p * n as f64))
            .sum();
        assert!(chi2 < 20.52, "chi2 = {chi2}, counts {counts:?}");
    }
}
