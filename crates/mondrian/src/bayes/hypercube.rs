//! The hypercube-D regression data of spec `bayesian-trees.md` §5.3: a value per vertex of
//! {−1, +1}^D, ten noisy points around each vertex in train and in test. Its 2^D-leaf
//! partition is made by T(D) = D·T(D − 1)² distinct trees, the "many trees explain the
//! data" case where local tree moves mix badly.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::error::{MondrianError, Result};

/// Most dimensions: 10·2^16 points per set.
pub const MAX_HYPERCUBE_DIM: usize = 16;
/// Points per vertex in each set.
pub const POINTS_PER_VERTEX: usize = 10;
/// sd of the vertex values f_i (N(0, 3²)).
pub const VALUE_SD: f64 = 3.0;
/// sd of the input noise around a vertex (N(0, 0.1² I_D)).
pub const INPUT_NOISE_SD: f64 = 0.1;

/// A hypercube-D data set: row-major inputs with D columns, targets, and the vertex
/// values both sets share.
#[derive(Debug, Clone, PartialEq)]
pub struct Hypercube {
    /// D.
    pub n_features: usize,
    /// 10·2^D training rows, vertex by vertex.
    pub train_x: Vec<f64>,
    /// Their targets f_i + e.
    pub train_y: Vec<f64>,
    /// 10·2^D test rows, made the same way with fresh noise.
    pub test_x: Vec<f64>,
    /// Their targets.
    pub test_y: Vec<f64>,
    /// f_i for vertex i.
    pub vertex_values: Vec<f64>,
}

/// Coordinate d of vertex i: +1 iff bit D − 1 − d of i is set (the reference ordering).
pub fn vertex_coordinate(i: usize, d: usize, n_features: usize) -> f64 {
    if i >> (n_features - 1 - d) & 1 == 1 {
        1.0
    } else {
        -1.0
    }
}

fn standard_normal<R: Rng>(rng: &mut R) -> f64 {
    // Box–Muller; 1 − u keeps the logarithm's argument in (0, 1].
    let u = 1.0 - rng.gen::<f64>();
    let v = rng.gen::<f64>();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// The hypercube-D data (§5.3) from one seed: the vertex values first, then the training
/// set, then the test set, each point's D input noises before its target noise.
/// `label_noise_sd` is [T]'s 0.01 by default; 0 gives the reference code's noiseless
/// targets.
pub fn hypercube(n_features: usize, seed: u64, label_noise_sd: f64) -> Result<Hypercube> {
    if n_features == 0 || n_features > MAX_HYPERCUBE_DIM {
        return Err(MondrianError::InvalidParameter {
            name: "n_features",
            reason: format!("{n_features} is not in 1..={MAX_HYPERCUBE_DIM}"),
        });
    }
    if !(label_noise_sd >= 0.0 && label_noise_sd.is_finite()) {
        return Err(MondrianError::InvalidParameter {
            name: "label_noise_sd",
            reason: format!("{label_noise_sd} is not a finite number ≥ 0"),
        });
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let vertices = 1usize << n_features;
    let vertex_values: Vec<f64> = (0..vertices)
        .map(|_| VALUE_SD * standard_normal(&mut rng))
        .collect();
    let make = |rng: &mut Xoshiro256PlusPlus| {
        let mut x = Vec::with_capacity(vertices * POINTS_PER_VERTEX * n_features);
        let mut y = Vec::with_capacity(vertices * POINTS_PER_VERTEX);
        for (i, &f) in vertex_values.iter().enumerate() {
            for _ in 0..POINTS_PER_VERTEX {
                for d in 0..n_features {
                    let v = vertex_coordinate(i, d, n_features);
                    x.push(v + INPUT_NOISE_SD * standard_normal(rng));
                }
                y.push(f + label_noise_sd * standard_normal(rng));
            }
        }
        (x, y)
    };
    let (train_x, train_y) = make(&mut rng);
    let (test_x, test_y) = make(&mut rng);
    Ok(Hypercube {
        n_features,
        train_x,
        train_y,
        test_x,
        test_y,
        vertex_values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_vertices_and_determinism() {
        // T16.
        for d in [1, 2, 3, 5] {
            let h = hypercube(d, 4, 0.01).unwrap();
            let n = POINTS_PER_VERTEX << d;
            assert_eq!(h.train_x.len(), n * d);
            assert_eq!(h.test_x.len(), n * d);
            assert_eq!((h.train_y.len(), h.test_y.len()), (n, n));
            for x in [&h.train_x, &h.test_x] {
                for (row, point) in x.chunks(d).enumerate() {
                    let vertex = row / POINTS_PER_VERTEX;
                    // The noise (sd 0.1) never reaches the other side of 0 here.
                    for (k, &v) in point.iter().enumerate() {
                        assert_eq!(v.signum(), vertex_coordinate(vertex, k, d));
                    }
                }
            }
            for (row, (&a, &b)) in h.train_y.iter().zip(&h.test_y).enumerate() {
                let f = h.vertex_values[row / POINTS_PER_VERTEX];
                assert!((a - f).abs() < 0.06 && (b - f).abs() < 0.06);
            }
            assert_eq!(h, hypercube(d, 4, 0.01).unwrap());
            assert_ne!(h, hypercube(d, 5, 0.01).unwrap());
            let exact = hypercube(d, 4, 0.0).unwrap();
            let mut labels = exact.train_y.clone();
            labels.sort_by(f64::total_cmp);
            labels.dedup();
            assert_eq!(labels.len(), 1 << d);
        }
        assert_eq!(vertex_coordinate(0b10, 0, 2), 1.0);
        assert_eq!(vertex_coordinate(0b10, 1, 2), -1.0);
        assert!(hypercube(0, 1, 0.01).is_err());
        assert!(hypercube(2, 1, -1.0).is_err());
    }
}
