//! Helpers of the Pólya-forest suites (`polya_*.rs`, spec `mondrian-polya-forest.md` §11):
//! data sets, forests with the raw features as the trees' space, the domain as the trees
//! see it (rows rounded to `f32`), leaf totals, the per-tree statistics of the
//! projectivity tests, and exact quadrature on the grid of a forest's boundaries.

use std::collections::BTreeSet;

use mondrian::{MondrianPolyaForest, PolyaParams, PolyaVariant, Scaling, Step};
use rand::Rng;
use rand_distr::{Distribution, StandardNormal};

use super::rng;

/// `n` rows of `d` independent N(0, 1) features, row-major.
pub fn normal_rows(n: usize, d: usize, seed: u64) -> Vec<f64> {
    let mut r = rng(seed);
    (0..n * d).map(|_| StandardNormal.sample(&mut r)).collect()
}

/// `n` rows of `d` independent Uniform[0, 1) features, row-major.
pub fn uniform_rows(n: usize, d: usize, seed: u64) -> Vec<f64> {
    let mut r = rng(seed);
    (0..n * d).map(|_| r.gen::<f64>()).collect()
}

/// Parameters with the raw features as the trees' space (`Scaling::Identity`), so that
/// volumes, thresholds and densities are in the data's units.
pub fn polya_params(
    variant: PolyaVariant,
    n_trees: usize,
    max_depth: Option<usize>,
    seed: u64,
) -> PolyaParams {
    PolyaParams {
        variant,
        n_trees,
        max_depth,
        scaling: Some(Scaling::Identity),
        seed,
        ..Default::default()
    }
}

/// A forest fitted on `x` (`d` features).
pub fn fitted(params: PolyaParams, x: &[f64], d: usize) -> MondrianPolyaForest {
    let mut f = MondrianPolyaForest::new(params).expect("valid parameters");
    f.fit(x, d).expect("valid data");
    f
}

/// The rows' bounding box as the trees see it (features are stored as `f32`).
pub fn f32_box(x: &[f64], d: usize) -> (Vec<f64>, Vec<f64>) {
    let mut lo = vec![f64::INFINITY; d];
    let mut hi = vec![f64::NEG_INFINITY; d];
    for row in x.chunks_exact(d) {
        for k in 0..d {
            let v = f64::from(row[k] as f32);
            lo[k] = lo[k].min(v);
            hi[k] = hi[k].max(v);
        }
    }
    (lo, hi)
}

/// ln of the box's volume over the dimensions where it has extent (spec §12 A9).
pub fn log_volume(lo: &[f64], hi: &[f64]) -> f64 {
    lo.iter()
        .zip(hi)
        .filter(|(l, h)| h > l)
        .map(|(l, h)| (h - l).ln())
        .sum()
}

/// Σ mass and Σ volume over the leaves of tree `t` (spec §11 item 2).
pub fn leaf_totals(f: &MondrianPolyaForest, t: usize) -> (f64, f64) {
    let leaves = f.leaves(t).expect("a fitted forest");
    let mass = leaves.iter().map(|l| l.log_mass.exp()).sum();
    let volume = leaves.iter().map(|l| l.log_volume.exp()).sum();
    (mass, volume)
}

/// Every tree's leaf masses sum to 1 (±1e-12) and its leaf volumes to `exp(log_domain)`
/// (relative 1e-12): sums of at most a few thousand terms of rounding error ~1e-16 each.
pub fn assert_conserved(f: &MondrianPolyaForest, log_domain: f64, what: &str) {
    let v = log_domain.exp();
    for t in 0..f.n_trees() {
        let (mass, volume) = leaf_totals(f, t);
        assert!(
            (mass - 1.0).abs() < 1e-12,
            "{what}: tree {t} mass sum {mass}"
        );
        assert!(
            (volume - v).abs() <= 1e-12 * v,
            "{what}: tree {t} volume sum {volume} against the domain's {v}"
        );
    }
}

/// What the projectivity tests compare of tree 0 of a one-tree forest (spec §11 item 16):
/// the root cut, the number of Pólya leaves, and the depth (cuts) and mass of `query`.
#[derive(Debug, Clone, Copy)]
pub struct TreeStats {
    pub root_dim: usize,
    pub root_loc: f64,
    pub n_leaves: usize,
    pub depth: usize,
    pub mass: f64,
}

/// [`TreeStats`] of tree 0; `query` must lie in the domain and the root must be cut.
pub fn tree_stats(f: &MondrianPolyaForest, query: &[f64]) -> TreeStats {
    let e = f.explain(query).expect("a fitted forest");
    let tree = &e.trees[0];
    let (root_dim, root_loc) = match tree.steps.first() {
        Some(Step::Cut { dim, threshold, .. }) => (*dim, *threshold),
        other => panic!("the root is not cut: {other:?}"),
    };
    let depth = tree
        .steps
        .iter()
        .filter(|s| matches!(s, Step::Cut { .. }))
        .count();
    TreeStats {
        root_dim,
        root_loc,
        n_leaves: f.leaves(0).expect("fitted").len(),
        depth,
        mass: tree.mass,
    }
}

/// Per dimension, sorted, every boundary of the forest's piecewise-constant density inside
/// the box `[lo, hi]`: the box's edges, the coordinates of `data` (the edges of the
/// streaming trees' boxes are data coordinates) and every cut threshold. Cuts are found
/// through the public API: the midpoint of every cell of the current grid is explained
/// and the thresholds on its paths join the grid, until none is new. This finds them all:
/// the shallowest cut not yet found belongs to a node whose region is bounded by found
/// cuts and box edges, so it is a union of grid cells, and their midpoints pass the cut.
pub fn boundaries(f: &MondrianPolyaForest, lo: &[f64], hi: &[f64], data: &[f64]) -> Vec<Vec<f64>> {
    let d = lo.len();
    let mut grid: Vec<BTreeSet<u64>> = (0..d)
        .map(|k| [lo[k].to_bits(), hi[k].to_bits()].into_iter().collect())
        .collect();
    for row in data.chunks_exact(d) {
        for k in 0..d {
            let v = f64::from(row[k] as f32);
            if v >= lo[k] && v <= hi[k] {
                grid[k].insert(v.to_bits());
            }
        }
    }
    loop {
        let axes: Vec<Vec<f64>> = grid
            .iter()
            .map(|s| {
                let mut v: Vec<f64> = s.iter().map(|&b| f64::from_bits(b)).collect();
                v.sort_by(f64::total_cmp);
                v
            })
            .collect();
        let mut grew = false;
        for mid in cell_midpoints(&axes) {
            for tree in f.explain(&mid.0).expect("fitted").trees {
                for step in tree.steps {
                    if let Step::Cut { dim, threshold, .. } = step {
                        grew |= grid[dim].insert(threshold.to_bits());
                    }
                }
            }
        }
        if !grew {
            return axes;
        }
    }
}

/// The midpoint and volume of every cell of the product grid `axes`. Each midpoint must
/// round to an `f32` strictly inside its cell (the trees see queries in `f32`), or the
/// cell could not be evaluated: the data of the tests are chosen so that this holds.
pub fn cell_midpoints(axes: &[Vec<f64>]) -> Vec<(Vec<f64>, f64)> {
    let per_axis: Vec<Vec<(f64, f64)>> = axes
        .iter()
        .map(|a| {
            a.windows(2)
                .map(|w| {
                    let m = 0.5 * (w[0] + w[1]);
                    let m32 = f64::from(m as f32);
                    assert!(
                        m32 > w[0] && m32 < w[1],
                        "cell [{}, {}] is too narrow for an f32 midpoint",
                        w[0],
                        w[1]
                    );
                    (m32, w[1] - w[0])
                })
                .collect()
        })
        .collect();
    let mut out = vec![(Vec::new(), 1.0)];
    for axis in &per_axis {
        let mut next = Vec::with_capacity(out.len() * axis.len());
        for (p, v) in &out {
            for &(m, w) in axis {
                let mut q = p.clone();
                q.push(m);
                next.push((q, v * w));
            }
        }
        out = next;
    }
    out
}

/// ∫ p̂ over the product grid `axes`: exact (up to rounding) when `axes` holds every
/// boundary of p̂, which is then constant on each cell.
pub fn grid_integral(f: &MondrianPolyaForest, axes: &[Vec<f64>]) -> f64 {
    let d = axes.len();
    let cells = cell_midpoints(axes);
    let x: Vec<f64> = cells.iter().flat_map(|(m, _)| m.iter().copied()).collect();
    let scores = f.evaluate(&x, d).expect("fitted");
    cells
        .iter()
        .zip(&scores)
        .map(|((_, v), s)| {
            assert!(!s.out_of_domain, "a cell midpoint lies outside the domain");
            s.log_density.exp() * v
        })
        .sum()
}
