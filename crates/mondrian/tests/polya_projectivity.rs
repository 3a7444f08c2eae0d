//! Pólya forests, projectivity through the public API (spec `mondrian-polya-forest.md`
//! §11 items 16 and 17): a streaming forest grown one row at a time, or fitted on one more
//! point that is then forgotten, or slid along a window, is distributed as one fitted on
//! the rows it holds. Each sample is 2000 one-tree forests with distinct seeds (disjoint
//! seed ranges per method, so the samples are independent); the statistics are the
//! root's cut dimension (χ² homogeneity) and location (two-sample KS), the number of
//! Pólya leaves and the depth of a fixed point (χ²), and the mass of that point (KS),
//! with and without the depth cap. The cap is 3 rather than the paper's 10: with 10 points
//! a cap of 10 would almost never bind. (Without a cap and with λ = ∞ every point ends
//! alone in a leaf, so the number of leaves is always 18 and its χ² is trivially 1.)
//! Family-wise level α = 1e-3 (Bonferroni, see `common/mod.rs`).

mod common;

use std::collections::BTreeMap;

use common::polya::*;
use common::*;
use mondrian::model::Forget;
use mondrian::{MondrianPolyaForest, PolyaVariant};

const SEEDS: u64 = 2000;
const D: usize = 2;

/// Ten fixed rows in [0, 1]² and a point outside their box.
fn data() -> (Vec<f64>, [f64; D]) {
    (uniform_rows(10, D, 2024), [1.4, -0.2])
}

fn one_tree(cap: Option<usize>, seed: u64, window: Option<usize>) -> MondrianPolyaForest {
    let mut p = polya_params(PolyaVariant::Streaming, 1, cap, seed);
    p.window = window;
    MondrianPolyaForest::new(p).unwrap()
}

/// How a one-tree forest comes to hold the ten rows.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Road {
    /// `fit` on the rows.
    Batch,
    /// `partial_fit` one row at a time, in a random order per seed.
    Stream,
    /// `fit` on the rows with the outside point among them, then `forget` it.
    Forget,
    /// A window of 10: the outside point and three rows, then the rest one at a time.
    Window,
}

fn grow(road: Road, cap: Option<usize>, seed: u64) -> MondrianPolyaForest {
    let (x, z) = data();
    match road {
        Road::Batch => {
            let mut f = one_tree(cap, seed, None);
            f.fit(&x, D).unwrap();
            f
        }
        Road::Stream => {
            let mut f = one_tree(cap, seed, None);
            let order = permutation(&(0..10).collect::<Vec<u32>>(), seed);
            for i in order {
                f.partial_fit(&x[i as usize * D..(i as usize + 1) * D], D)
                    .unwrap();
            }
            f
        }
        Road::Forget => {
            let mut rows = x[..3 * D].to_vec();
            rows.extend_from_slice(&z);
            rows.extend_from_slice(&x[3 * D..]);
            let mut f = one_tree(cap, seed, None);
            f.fit(&rows, D).unwrap();
            f.forget(&[3]).unwrap();
            f
        }
        Road::Window => {
            let mut f = one_tree(cap, seed, Some(10));
            let mut first = z.to_vec();
            first.extend_from_slice(&x[..3 * D]);
            f.partial_fit(&first, D).unwrap();
            for row in x[3 * D..].chunks(D) {
                f.partial_fit(row, D).unwrap();
            }
            assert_eq!(f.n_points(), 10);
            f
        }
    }
}

/// The statistics of `SEEDS` forests grown by `road`, seeds `offset..offset + SEEDS`
/// (moved for a capped forest: the cap is a view of the same trees, so equal seeds would
/// repeat the uncapped sample's root cuts).
fn sample(road: Road, cap: Option<usize>, offset: u64) -> Vec<TreeStats> {
    let (x, _) = data();
    let query = &x[4 * D..5 * D];
    let offset = offset + if cap.is_some() { 100 * SEEDS } else { 0 };
    (offset..offset + SEEDS)
        .map(|s| tree_stats(&grow(road, cap, s), query))
        .collect()
}

fn compare(family: &mut Family, label: &str, a: &[TreeStats], b: &[TreeStats]) {
    let cat = |f: &dyn Fn(&TreeStats) -> usize, s: &[TreeStats]| -> BTreeMap<usize, u64> {
        histogram(s.iter().map(f))
    };
    let real =
        |f: &dyn Fn(&TreeStats) -> f64, s: &[TreeStats]| -> Vec<f64> { s.iter().map(f).collect() };
    family.push(
        format!("{label}: root cut dimension (χ²)"),
        chi2_homogeneity(&[cat(&|t| t.root_dim, a), cat(&|t| t.root_dim, b)]),
    );
    family.push(
        format!("{label}: root cut location (KS)"),
        ks_two_sample(&real(&|t| t.root_loc, a), &real(&|t| t.root_loc, b)),
    );
    family.push(
        format!("{label}: number of leaves (χ²)"),
        chi2_homogeneity(&[cat(&|t| t.n_leaves, a), cat(&|t| t.n_leaves, b)]),
    );
    family.push(
        format!("{label}: depth of the fixed point (χ²)"),
        chi2_homogeneity(&[cat(&|t| t.depth, a), cat(&|t| t.depth, b)]),
    );
    family.push(
        format!("{label}: mass of the fixed point (KS)"),
        ks_two_sample(&real(&|t| t.mass, a), &real(&|t| t.mass, b)),
    );
}

/// §11 item 16: rows streamed one at a time in a random order ≡ a batch fit.
#[test]
fn streaming_equals_batch_in_distribution() {
    let mut family = Family::new("sMPF: partial_fit one row at a time vs fit");
    for cap in [None, Some(3)] {
        let batch = sample(Road::Batch, cap, 0);
        let stream = sample(Road::Stream, cap, SEEDS);
        compare(&mut family, &format!("cap {cap:?}"), &batch, &stream);
    }
    family.assert();
}

/// §11 item 17: fit on the rows and one more point, then forget it ≡ a fit on the rows;
/// and a window that has let that point go ≡ a fit on the rows it holds.
#[test]
fn deletion_and_windows_equal_batch_in_distribution() {
    let mut family = Family::new("sMPF: forget and windows vs fit on the rest");
    for cap in [None, Some(3)] {
        let batch = sample(Road::Batch, cap, 10 * SEEDS);
        let forget = sample(Road::Forget, cap, 11 * SEEDS);
        let window = sample(Road::Window, cap, 12 * SEEDS);
        compare(
            &mut family,
            &format!("forget, cap {cap:?}"),
            &batch,
            &forget,
        );
        compare(
            &mut family,
            &format!("window, cap {cap:?}"),
            &batch,
            &window,
        );
    }
    family.assert();
}

/// The test has power: the same comparisons tell a forest on the rows from one on the
/// rows and the outside point (the second's root box is larger). Printed, and the family
/// must reject, since otherwise the passes above would mean little.
#[test]
fn the_comparisons_see_a_different_data_set() {
    let (x, z) = data();
    let mut family = Family::new("power check: fit on X vs fit on X ∪ {z}");
    let batch = sample(Road::Batch, None, 20 * SEEDS);
    let mut rows = x.clone();
    rows.extend_from_slice(&z);
    let query = &x[4 * D..5 * D];
    let plus: Vec<TreeStats> = (21 * SEEDS..22 * SEEDS)
        .map(|s| {
            let mut f = one_tree(None, s, None);
            f.fit(&rows, D).unwrap();
            tree_stats(&f, query)
        })
        .collect();
    compare(&mut family, "X vs X ∪ {z}", &batch, &plus);
    assert!(
        !family.rejections().is_empty(),
        "no statistic tells the two data sets apart"
    );
}
