//! Resampling of a particle system (spec `bayesian-trees.md` §3.5): the effective sample
//! size of log-weights, and ancestors drawn by the multinomial or the systematic scheme.

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::special::log_sum_exp;

/// How ancestors are drawn (§3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Resampler {
    /// C independent draws from Cat(w̄) (the default; [T]'s experiments).
    #[default]
    Multinomial,
    /// One uniform u, ancestors at u + i/C (Douc et al. 2005).
    Systematic,
}

/// Effective sample size 1/Σ w̄² of log-weights.
pub fn effective_particles(log_weights: &[f64]) -> f64 {
    let total = log_sum_exp(log_weights);
    let sum_sq: f64 = log_weights.iter().map(|w| (2.0 * (w - total)).exp()).sum();
    1.0 / sum_sq
}

/// Ancestor indices a_1 ≤ … ≤ a_C from normalised weights.
pub(crate) fn ancestors<R: Rng>(weights: &[f64], scheme: Resampler, rng: &mut R) -> Vec<usize> {
    let c = weights.len();
    let mut points: Vec<f64> = match scheme {
        Resampler::Multinomial => (0..c).map(|_| rng.gen::<f64>()).collect(),
        Resampler::Systematic => {
            let u = rng.gen::<f64>();
            (0..c).map(|i| (u + i as f64) / c as f64).collect()
        }
    };
    points.sort_unstable_by(f64::total_cmp);
    let total: f64 = weights.iter().sum();
    let mut out = Vec::with_capacity(c);
    let (mut i, mut upper) = (0, weights[0] / total);
    let last_positive = weights.iter().rposition(|&w| w > 0.0).unwrap_or(c - 1);
    for u in points {
        while u >= upper && i < last_positive {
            i += 1;
            upper += weights[i] / total;
        }
        out.push(i);
    }
    out
}

/// The items at the given ancestor indices: the last copy of an item takes the original,
/// the others clone it (with shared node data, a particle's clone is a few words a node).
pub(crate) fn copy_ancestors<T: Clone>(items: Vec<T>, parents: &[usize]) -> Vec<T> {
    let mut uses = vec![0usize; items.len()];
    for &a in parents {
        uses[a] += 1;
    }
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    parents
        .iter()
        .map(|&a| {
            uses[a] -= 1;
            if uses[a] == 0 {
                slots[a].take()
            } else {
                slots[a].clone()
            }
            .expect("an item is moved out only at its last use")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    use super::*;

    #[test]
    fn ancestors_follow_the_weights() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let w = [0.0, 0.5, 0.0, 0.5];
        for scheme in [Resampler::Multinomial, Resampler::Systematic] {
            let a = ancestors(&w, scheme, &mut rng);
            assert_eq!(a.len(), 4);
            assert!(a.iter().all(|&i| i == 1 || i == 3), "{a:?}");
        }
        // Systematic resampling gives each particle ⌊C w̄⌋ or ⌈C w̄⌉ copies.
        let w = [0.1, 0.2, 0.3, 0.4];
        let a = ancestors(&w, Resampler::Systematic, &mut rng);
        let mut counts = [0usize; 4];
        for i in a {
            counts[i] += 1;
        }
        for (c, w) in counts.iter().zip(w) {
            assert!((*c as f64 - 4.0 * w).abs() < 1.0, "{counts:?}");
        }
    }

    #[test]
    fn copies_follow_the_ancestors() {
        let out = copy_ancestors(vec!["a", "b", "c"], &[0, 0, 2]);
        assert_eq!(out, vec!["a", "a", "c"]);
        assert!((effective_particles(&[0.0; 4]) - 4.0).abs() < 1e-12);
        assert!((effective_particles(&[0.0, f64::NEG_INFINITY]) - 1.0).abs() < 1e-12);
    }
}
