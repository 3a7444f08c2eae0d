//! Shared helpers for the statistical test suites (`sampler*.rs`, `prediction*.rs`,
//! `deletion.rs`, `windows.rs`, …): small labelled data sets and tree builders (batch,
//! online in a given order, batch prefix then online, weighted online) here; tree
//! inspection (canonical signatures, depths, lowest common ancestors) and an invariant
//! checker written independently of the library's own `check_invariants` in [`inspect`];
//! the goodness-of-fit machinery (KS, χ², exact binomial) with a Bonferroni-corrected
//! family of p-values in [`stats`]; the label model written from the spec, for the
//! prediction tests, in [`reference`]; the Gaussian model of regression trees by brute
//! force and as a dense Gaussian process, for the regression tests, in [`gaussian`]; data,
//! leaf totals and exact quadrature for the Pólya-forest suites in [`polya`]; the exact
//! single-tree posterior by enumeration, for the Bayesian-tree kernel and chain suites, in
//! [`enumerate`].
//! `inspect` and `stats` are re-exported here, so `use common::*;` brings them in.
//!
//! Every statistical test of the suite runs at a family-wise level α = 1e-3 (spec §8.4):
//! a test function collects its p-values in a [`Family`] and fails if any is below
//! α / (number of p-values), so that a correct library fails a test function with
//! probability at most 1e-3 (Bonferroni), whatever the dependence between its
//! comparisons. Seeds are fixed, so runs are reproducible.
#![allow(dead_code)]

pub mod enumerate;
pub mod gaussian;
pub mod inspect;
pub mod polya;
pub mod reference;
pub mod stats;

// Not every test target uses both parts; the re-exports are for `use common::*;`.
#[allow(unused_imports)]
pub use inspect::*;
#[allow(unused_imports)]
pub use stats::*;

use mondrian::process::Feature;
use mondrian::stats::label::LabelCounts;
use mondrian::tree::{MondrianTree, PauseRule, TrainingPoints};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

pub type TestRng = Xoshiro256PlusPlus;

/// A generator with a fixed seed.
pub fn rng(seed: u64) -> TestRng {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

// ---------------------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------------------

/// A small labelled data set, row-major.
#[derive(Debug, Clone)]
pub struct Data {
    pub x: Vec<Feature>,
    pub d: usize,
    pub y: Vec<u32>,
    pub k: usize,
}

impl Data {
    /// Rows with labels; K = max label + 1 unless `k` is larger.
    pub fn new(rows: &[&[Feature]], y: &[u32], k: usize) -> Self {
        assert_eq!(rows.len(), y.len());
        let d = rows[0].len();
        let mut x = Vec::with_capacity(rows.len() * d);
        for r in rows {
            assert_eq!(r.len(), d);
            x.extend_from_slice(r);
        }
        let k = k.max(y.iter().map(|&v| v as usize + 1).max().unwrap_or(1));
        Data {
            x,
            d,
            y: y.to_vec(),
            k,
        }
    }

    /// Rows with all-distinct labels (0..n): with pausing on pure labels such a data set
    /// pauses only single-point blocks, so its trees have the non-paused law (spec §8.4).
    pub fn distinct_labels(rows: &[&[Feature]]) -> Self {
        let y: Vec<u32> = (0..rows.len() as u32).collect();
        Self::new(rows, &y, rows.len())
    }

    pub fn n(&self) -> usize {
        self.y.len()
    }

    pub fn ids(&self) -> Vec<u32> {
        (0..self.n() as u32).collect()
    }

    pub fn row(&self, i: u32) -> &[Feature] {
        &self.x[i as usize * self.d..(i as usize + 1) * self.d]
    }

    pub fn points(&self) -> TrainingPoints<'_, u32> {
        TrainingPoints {
            features: &self.x,
            n_features: self.d,
            targets: &self.y,
        }
    }

    /// Per-dimension (min, max) over the given ids, in f64.
    pub fn ranges(&self, ids: &[u32]) -> Vec<(f64, f64)> {
        (0..self.d)
            .map(|dim| {
                let vals = ids.iter().map(|&i| f64::from(self.row(i)[dim]));
                let lo = vals.clone().fold(f64::INFINITY, f64::min);
                let hi = vals.fold(f64::NEG_INFINITY, f64::max);
                (lo, hi)
            })
            .collect()
    }

    /// Linear dimension L = Σ_d (max − min) of the bounding box of the given ids (§1.2).
    pub fn linear_dimension(&self, ids: &[u32]) -> f64 {
        self.ranges(ids).iter().map(|(lo, hi)| hi - lo).sum()
    }

    /// ‖x_a − x_b‖₁ in f64.
    pub fn l1(&self, a: u32, b: u32) -> f64 {
        self.row(a)
            .iter()
            .zip(self.row(b))
            .map(|(&u, &v)| (f64::from(u) - f64::from(v)).abs())
            .sum()
    }
}

/// Seven labelled 2-D points (K = 3) with a duplicate x of mixed labels (0, 1) and a
/// duplicate x of equal labels (3, 4).
pub fn labelled_with_duplicates() -> Data {
    Data::new(
        &[
            &[0.1, 0.1],
            &[0.1, 0.1],
            &[0.4, 0.8],
            &[0.9, 0.3],
            &[0.9, 0.3],
            &[0.6, 0.6],
            &[0.2, 0.5],
        ],
        &[0, 1, 0, 1, 1, 2, 0],
        3,
    )
}

// ---------------------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------------------

/// How a tree is grown on a data set.
#[derive(Debug, Clone)]
pub enum Method {
    /// `fit` on the given ids (spec §2.2–2.3).
    Batch,
    /// `extend` one point at a time in this fixed order (spec §2.4–2.5).
    Online(Vec<u32>),
    /// `extend` in a fresh uniformly random order for every tree.
    Shuffled,
    /// `fit` on the first `prefix` ids of the order, then `extend` with the rest.
    Prefix(Vec<u32>, usize),
    /// `extend_many` with consecutive sets of this size in this order (the first set
    /// batch-samples the empty tree).
    Sets(Vec<u32>, usize),
}

impl Method {
    pub fn name(&self) -> String {
        match self {
            Method::Batch => "batch".into(),
            Method::Online(o) => format!("online{o:?}"),
            Method::Shuffled => "online(shuffled per tree)".into(),
            Method::Prefix(o, p) => format!("batch{:?}+online{:?}", &o[..*p], &o[*p..]),
            Method::Sets(o, k) => format!("sets of {k} from {o:?}"),
        }
    }

    /// Grows one tree on `ids` (for `Online`/`Prefix`, the order must be a permutation of
    /// `ids`).
    pub fn build(
        &self,
        data: &Data,
        ids: &[u32],
        lifetime: f64,
        pause: PauseRule,
        rng: &mut TestRng,
    ) -> (MondrianTree, LabelCounts) {
        match self {
            Method::Batch => build_batch(data, ids.to_vec(), lifetime, pause, rng),
            Method::Online(order) => build_online(data, order, lifetime, pause, rng),
            Method::Shuffled => {
                let mut order = ids.to_vec();
                order.shuffle(rng);
                build_online(data, &order, lifetime, pause, rng)
            }
            Method::Prefix(order, p) => {
                let (mut tree, mut counts) =
                    build_batch(data, order[..*p].to_vec(), lifetime, pause, rng);
                for &i in &order[*p..] {
                    tree.extend(i, 1, &data.points(), &mut counts, rng);
                }
                (tree, counts)
            }
            Method::Sets(order, k) => {
                let mut tree = MondrianTree::new(data.d, lifetime, pause);
                let mut counts = LabelCounts::new(data.k);
                for set in order.chunks(*k) {
                    tree.extend_many(set.to_vec(), &data.points(), &mut counts, rng);
                }
                (tree, counts)
            }
        }
    }
}

pub fn build_batch(
    data: &Data,
    ids: Vec<u32>,
    lifetime: f64,
    pause: PauseRule,
    rng: &mut TestRng,
) -> (MondrianTree, LabelCounts) {
    let mut tree = MondrianTree::new(data.d, lifetime, pause);
    let mut counts = LabelCounts::new(data.k);
    tree.fit(ids, &data.points(), &mut counts, rng);
    (tree, counts)
}

pub fn build_online(
    data: &Data,
    order: &[u32],
    lifetime: f64,
    pause: PauseRule,
    rng: &mut TestRng,
) -> (MondrianTree, LabelCounts) {
    let mut tree = MondrianTree::new(data.d, lifetime, pause);
    let mut counts = LabelCounts::new(data.k);
    for &i in order {
        tree.extend(i, 1, &data.points(), &mut counts, rng);
    }
    (tree, counts)
}

/// A random permutation of `ids` drawn from a fixed seed.
pub fn permutation(ids: &[u32], seed: u64) -> Vec<u32> {
    let mut v = ids.to_vec();
    v.shuffle(&mut rng(seed));
    v
}

pub const NO_PAUSE: PauseRule = PauseRule {
    pause_on_pure: false,
    min_samples_split: 0,
};

pub const PAUSE_PURE: PauseRule = PauseRule {
    pause_on_pure: true,
    min_samples_split: 2,
};
