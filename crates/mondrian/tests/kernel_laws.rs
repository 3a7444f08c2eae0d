//! The Mondrian kernel's feature map and lifetime path against their laws (spec
//! `mondrian-kernel.md` §6.5: T3, T4, T8, T9, T10, T12). Statistical comparisons run at the
//! suite's family-wise level α = 1e-3 (Bonferroni, see `common/mod.rs`); seeds are fixed.

mod common;

use common::*;
use mondrian::kernel::{Extension, KernelParams, LifetimePath, MondrianKernel};
use mondrian::process::Feature;
use mondrian::MondrianError;
use rand::Rng;

fn kernel(n_trees: usize, lifetime: f64, seed: u64) -> MondrianKernel {
    MondrianKernel::new(KernelParams {
        n_trees,
        lifetime,
        seed,
        n_threads: 1,
        ..Default::default()
    })
    .unwrap()
}

/// `n` points uniform on [0, 1]^d, rounded to the trees' `f32` (distances are then exact
/// in f64).
fn uniform(n: usize, d: usize, seed: u64) -> Vec<f64> {
    let mut r = rng(seed);
    (0..n * d)
        .map(|_| f64::from(r.gen::<f64>() as Feature))
        .collect()
}

fn l1(x: &[f64], d: usize, i: usize, j: usize) -> f64 {
    (0..d).map(|k| (x[i * d + k] - x[j * d + k]).abs()).sum()
}

/// Trees (of `m`) in which rows i and j share a feature, from the assignment `n·M + m`.
fn shared(assign: &[u32], m: usize, i: usize, j: usize) -> u64 {
    (0..m)
        .filter(|&t| assign[i * m + t] == assign[j * m + t])
        .count() as u64
}

/// T4 (Proposition 1): for fixed pairs inside a larger data set, the number of the M trees
/// in which they share a cell is Binomial(M, exp(−λ‖x − x′‖₁)), exactly; the same holds
/// for the path's state at λ < Λ, and for a new row placed by the exact extension (§4.1).
#[test]
fn same_cell_counts_are_binomial_with_the_laplace_probability() {
    let (n, d, m) = (40, 3, 2000);
    let x = uniform(n + 4, d, 1);
    let train = &x[..n * d];
    let pairs = [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9), (10, 11)];
    let mut family = Family::new("laplace link");
    let (lambda, terminal) = (1.5, 3.0);
    // Fitted at λ: the features of the rows.
    let k = kernel(m, lambda, 11);
    let mut k = k;
    k.fit(train, d).unwrap();
    let phi = k.transform(train, d).unwrap();
    for &(i, j) in &pairs {
        let p = (-lambda * l1(&x, d, i, j)).exp();
        let s = (phi.dot(i, j) * m as f64).round() as u64;
        family.push(
            format!("fit ({i},{j}) p={p:.3}"),
            binomial_test(s, m as u64, p),
        );
    }
    // The path to Λ read at λ.
    let mut k2 = kernel(m, terminal, 12);
    k2.fit(train, d).unwrap();
    let mut path = LifetimePath::new(&k2).unwrap();
    path.advance_to(lambda);
    for &(i, j) in &pairs {
        let p = (-lambda * l1(&x, d, i, j)).exp();
        let s = shared(path.assign(), m, i, j);
        family.push(
            format!("path ({i},{j}) p={p:.3}"),
            binomial_test(s, m as u64, p),
        );
    }
    // New rows n..n+4, each placed by the extension, against training rows.
    let both: Vec<f64> = x.clone();
    let phi = k.transform(&both, d).unwrap();
    for (new, old) in [(n, 0), (n + 1, 5), (n + 2, 17), (n + 3, 30)] {
        let p = (-lambda * l1(&x, d, new, old)).exp();
        let s = (phi.dot(new, old) * m as f64).round() as u64;
        family.push(
            format!("new ({new},{old}) p={p:.3}"),
            binomial_test(s, m as u64, p),
        );
    }
    family.assert();
}

/// T4, the whole law: over 600 independent kernels of M = 8 trees, `M·k_M(x, x′)` follows
/// Binomial(8, p) (χ² goodness of fit).
#[test]
fn m_times_k_m_has_the_binomial_distribution() {
    let (n, d, m, lambda) = (25, 2, 8, 2.0);
    let x = uniform(n, d, 2);
    let (i, j) = (3, 4);
    let p = (-lambda * l1(&x, d, i, j)).exp();
    let mut counts = vec![0u64; m + 1];
    for seed in 0..600 {
        let mut k = kernel(m, lambda, 1000 + seed);
        k.fit(&x, d).unwrap();
        let phi = k.transform(&x, d).unwrap();
        counts[(phi.dot(i, j) * m as f64).round() as usize] += 1;
    }
    let pmf: Vec<f64> = (0..=m)
        .map(|s| {
            let c = (0..s).fold(1.0, |c, t| c * (m - t) as f64 / (t + 1) as f64);
            c * p.powi(s as i32) * (1.0 - p).powi((m - s) as i32)
        })
        .collect();
    let mut family = Family::new("M k_M ~ Binomial(M, p)");
    family.push(format!("p = {p:.3}"), chi2_gof(&counts, &pmf));
    family.assert();
}

/// T3 for data restricted to points (§1.2, "one dimension"): on a line the cuts up to λ
/// are a Poisson process of intensity λ, so the gaps g_i between sorted points are cut
/// independently with probability 1 − e^{−λ g_i} and the cells number 1 + Poisson-binomial.
/// Batch trees and trees grown point by point in a shuffled order (T12) both follow it
/// (χ² goodness of fit over 3000 trees each, and their mean against the expectation).
#[test]
fn cells_on_a_line_follow_the_poisson_process_batch_and_online() {
    let (n, lambda, m) = (20, 3.0, 3000);
    let mut x = uniform(n, 1, 3);
    x.sort_by(f64::total_cmp);
    let ps: Vec<f64> = x
        .windows(2)
        .map(|w| 1.0 - (-lambda * (w[1] - w[0])).exp())
        .collect();
    let pmf = one_plus_poisson_binomial(&ps);
    let mean: f64 = 1.0 + ps.iter().sum::<f64>();
    let mut family = Family::new("cells on a line");
    let order = permutation(&(0..n as u32).collect::<Vec<_>>(), 5);
    for online in [false, true] {
        let mut k = kernel(m, lambda, 21 + online as u64);
        if online {
            for &i in &order {
                k.partial_fit(&x[i as usize..i as usize + 1], 1).unwrap();
            }
        } else {
            k.fit(&x, 1).unwrap();
        }
        let leaves: Vec<usize> = k.trees().iter().map(|t| t.n_leaves()).collect();
        let mut counts = vec![0u64; pmf.len()];
        for &c in &leaves {
            counts[c] += 1;
        }
        let label = if online { "online" } else { "batch" };
        family.push(format!("{label} χ²"), chi2_gof(&counts, &pmf));
        let values: Vec<f64> = leaves.iter().map(|&c| c as f64).collect();
        family.push(format!("{label} mean vs {mean:.3}"), z_test(&values, mean));
        assert_eq!(k.n_features_out(), leaves.iter().sum::<usize>());
    }
    family.assert();
}

/// T8: every fitted row has exactly M non-zeros, one per tree, all 1/√M; per tree the
/// column counts sum to N; k_M(x, x) = 1 and k_M takes values j/M.
#[test]
fn the_feature_matrix_has_one_cell_per_tree_per_row() {
    let (n, d, m) = (60, 4, 7);
    let x = uniform(n, d, 4);
    let mut k = kernel(m, 3.0, 5);
    k.fit(&x, d).unwrap();
    let phi = k.transform(&x, d).unwrap();
    assert_eq!(phi.n_cols, k.n_features_out());
    assert!((phi.value - 1.0 / (m as f64).sqrt()).abs() < 1e-15);
    let mut per_tree = vec![0usize; m];
    for i in 0..n {
        let row = phi.row(i);
        assert_eq!(row.len(), m);
        let mut trees: Vec<u32> = row
            .iter()
            .map(|&c| k.tree_of_column()[c as usize])
            .collect();
        trees.sort_unstable();
        assert_eq!(trees, (0..m as u32).collect::<Vec<_>>());
        for &c in row {
            per_tree[k.tree_of_column()[c as usize] as usize] += 1;
        }
        assert!((phi.dot(i, i) - 1.0).abs() < 1e-12);
        for j in 0..n {
            let v = phi.dot(i, j) * m as f64;
            assert!((v - v.round()).abs() < 1e-9 && v.round() <= m as f64);
        }
    }
    assert!(per_tree.iter().all(|&c| c == n));
    // Routing by the cuts gives the same features for rows the trees hold.
    let mut routed = k.clone();
    let mut p = routed.params().clone();
    p.extension = Extension::Route;
    routed = {
        let mut r = MondrianKernel::new(p).unwrap();
        r.fit(&x, d).unwrap();
        r
    };
    assert_eq!(routed.transform(&x, d).unwrap(), phi);
}

/// T10: the path to Λ read at λ is, bit for bit, the kernel fitted at λ with the same seed:
/// same nodes (ids, split times, dimensions, locations), same cell for every point.
#[test]
fn the_sweep_is_bit_identical_to_sampling_at_each_lifetime() {
    let (n, d, m) = (150, 3, 6);
    let x = uniform(n, d, 6);
    let terminal = 25.0;
    let mut big = kernel(m, terminal, 7);
    big.fit(&x, d).unwrap();
    let mut path = LifetimePath::new(&big).unwrap();
    let big_trees = big.trees();
    for lambda in [0.05, 0.5, 1.0, 2.5, 6.0, 12.0, 24.9] {
        path.advance_to(lambda);
        let mut direct = kernel(m, lambda, 7);
        direct.fit(&x, d).unwrap();
        let mut n_leaves = 0;
        for (t, tree) in direct.trees().iter().enumerate() {
            let full = big_trees[t];
            let root = tree.root().unwrap();
            assert_eq!(Some(root), full.root());
            for j in tree.subtree_preorder(root) {
                match tree.children(j) {
                    Some(children) => {
                        assert_eq!(full.children(j), Some(children), "tree {t} node {j}");
                        assert_eq!(tree.split_time(j).to_bits(), full.split_time(j).to_bits());
                        assert_eq!(tree.split_dimension(j), full.split_dimension(j));
                        assert_eq!(
                            tree.split_location(j).to_bits(),
                            full.split_location(j).to_bits()
                        );
                    }
                    None => {
                        n_leaves += 1;
                        assert!(full.is_leaf(j) || full.split_time(j) >= lambda);
                    }
                }
            }
            for i in 0..n {
                let xi: Vec<Feature> = x[i * d..(i + 1) * d]
                    .iter()
                    .map(|&v| v as Feature)
                    .collect();
                let leaf = tree.leaf_of(&xi);
                // The tree at Λ read at λ holds the point in the same cell.
                assert_eq!(full.cell_at(&xi, lambda), leaf);
                let id = path.assign()[i * m + t];
                assert_eq!(
                    path.node_of(id),
                    (t, leaf),
                    "λ = {lambda}, tree {t}, point {i}"
                );
            }
        }
        assert_eq!(path.n_active(), n_leaves, "λ = {lambda}");
    }
}

/// T9: the path's invariants: M features at 0 and one more per event; event times
/// increase, within a tree a child splits after its parent; both new cells are non-empty
/// and partition the old one; the events to Λ number Σ_m (C^(m) − 1); a point's cell at λ₁
/// is an ancestor of its cell at λ₂ > λ₁, so k_M(x, x′) never increases along the path.
#[test]
fn the_path_keeps_its_invariants() {
    let (n, d, m) = (120, 2, 5);
    let x = uniform(n, d, 8);
    let mut k = kernel(m, 30.0, 9);
    k.fit(&x, d).unwrap();
    let trees = k.trees();
    let mut path = LifetimePath::new(&k).unwrap();
    assert_eq!(path.n_active(), m);
    assert!(path
        .assign()
        .chunks(m)
        .all(|r| r == (0..m as u32).collect::<Vec<_>>()));
    let mut last = 0.0;
    let mut events = 0;
    let pairs: Vec<(usize, usize)> = (0..30).map(|i| (i, i + 1)).collect();
    let mut kv: Vec<u64> = pairs.iter().map(|_| m as u64).collect();
    let mut previous = path.assign().to_vec();
    while let Some(e) = path.next_event() {
        events += 1;
        assert!(e.tau > last, "times increase");
        last = e.tau;
        assert_eq!(path.n_active(), m + events);
        assert!(!path.is_active(e.parent) && path.is_active(e.left) && path.is_active(e.right));
        let (t, parent_node) = path.node_of(e.parent);
        assert_eq!(trees[t].split_time(parent_node), e.tau);
        let (l, r) = (path.points_of(e.left), path.points_of(e.right));
        assert!(!l.is_empty() && !r.is_empty());
        let mut both: Vec<u32> = l.iter().chain(r).copied().collect();
        both.sort_unstable();
        let mut old = path.points_of(e.parent).to_vec();
        old.sort_unstable();
        assert_eq!(both, old);
        for &(_, child) in [path.node_of(e.left), path.node_of(e.right)].iter() {
            assert!(trees[t].is_leaf(child) || trees[t].split_time(child) > e.tau);
        }
        // Coarsening: only the points of the split cell moved, to its children.
        for (p, (&now, &before)) in path.assign().iter().zip(&previous).enumerate() {
            if now != before {
                assert_eq!(p % m, t);
                assert_eq!(before, e.parent);
                assert!(now == e.left || now == e.right);
            }
        }
        previous.copy_from_slice(path.assign());
        for (s, &(i, j)) in kv.iter_mut().zip(&pairs) {
            let now = shared(path.assign(), m, i, j);
            assert!(now <= *s, "k_M increased along the path");
            *s = now;
        }
    }
    let leaves: usize = trees.iter().map(|t| t.n_leaves()).sum();
    assert_eq!(events, leaves - m);
}

/// T12: growing the trees by new rows never changes the features of the old ones, and
/// each new row opens between 0 and M new columns.
#[test]
fn online_growth_keeps_old_features() {
    let (n, d, m) = (80, 3, 6);
    let x = uniform(n, d, 10);
    let mut k = kernel(m, 4.0, 11);
    k.fit(&x[..20 * d], d).unwrap();
    for i in 20..n {
        let before = k.transform(&x[..i * d], d).unwrap();
        let cols = k.n_features_out();
        let added = k.partial_fit(&x[i * d..(i + 1) * d], d).unwrap();
        assert!(added <= m);
        assert_eq!(k.n_features_out(), cols + added);
        let after = k.transform(&x[..i * d], d).unwrap();
        assert_eq!(after.indices, before.indices, "old rows' features changed");
        let new = k.transform(&x[i * d..(i + 1) * d], d).unwrap();
        assert_eq!(new.nnz(), m);
        let fresh = new.row(0).iter().filter(|&&c| c as usize >= cols).count();
        assert_eq!(fresh, added, "the new columns are the new row's cells");
    }
    assert_eq!(k.n_points(), n);
}

/// Bad input: lifetimes ≤ 0, NaN or infinite, M = 0, the wrong width, non-finite rows and
/// an unfitted map are refused with typed errors.
#[test]
fn bad_input_is_refused() {
    for lifetime in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let err = MondrianKernel::new(KernelParams {
            lifetime,
            ..Default::default()
        })
        .unwrap_err();
        assert!(matches!(
            err,
            MondrianError::InvalidParameter {
                name: "lifetime",
                ..
            }
        ));
    }
    let err = MondrianKernel::new(KernelParams {
        n_trees: 0,
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(
        err,
        MondrianError::InvalidParameter {
            name: "n_trees",
            ..
        }
    ));
    let err = MondrianKernel::new(KernelParams {
        n_threads: 1 << 20,
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(
        err,
        MondrianError::InvalidParameter {
            name: "n_threads",
            ..
        }
    ));
    let mut k = kernel(3, 1.0, 0);
    assert!(matches!(
        k.transform(&[0.0, 1.0], 2),
        Err(MondrianError::NotFitted)
    ));
    assert!(matches!(
        k.fit(&[] as &[f64], 2),
        Err(MondrianError::EmptyData(_))
    ));
    assert!(matches!(
        k.fit(&[0.0, f64::NAN], 2),
        Err(MondrianError::NonFinite { .. })
    ));
    // Trees that cannot fit in memory are refused before anything is allocated.
    let mut huge = kernel(1 << 40, 1.0, 0);
    assert!(matches!(
        huge.fit(&[0.0, 1.0, 2.0, 3.0], 2),
        Err(MondrianError::MemoryLimit { .. })
    ));
    k.fit(&[0.0, 1.0, 2.0, 3.0], 2).unwrap();
    assert!(matches!(
        k.transform(&[0.0, 1.0, 2.0], 3),
        Err(MondrianError::WidthMismatch { .. })
    ));
    assert!(matches!(
        k.partial_fit(&[0.0], 1),
        Err(MondrianError::WidthMismatch { .. })
    ));
}

/// T16 on the E1 setup (100 uniform points in [0, 1]², λ = 10): (a) the mean over pairs of
/// `M(k_M − k)²` has expectation exactly the mean of `p(1 − p)` (each pair's count is
/// Binomial), z-tested over 40 kernels of M = 10; (b) the mean over pairs of `|k_M − k|`
/// decays like `M^{−1/2}`: the log-log slope over M = 5…500 lies in [−0.55, −0.38] (the
/// exact binomial computation gives −0.46); (c) the largest error at M = 50, averaged
/// over 5 kernels, lies in the E1 band [0.14, 0.26].
#[test]
fn k_m_converges_to_the_laplace_kernel_at_the_binomial_rate() {
    let (n, d, lambda) = (100, 2, 10.0);
    let x = uniform(n, d, 30);
    let pairs: Vec<(usize, usize)> = (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .collect();
    let exact: Vec<f64> = pairs
        .iter()
        .map(|&(i, j)| (-lambda * l1(&x, d, i, j)).exp())
        .collect();
    let errors = |m: usize, seed: u64| -> Vec<f64> {
        let mut k = kernel(m, lambda, seed);
        k.fit(&x, d).unwrap();
        let phi = k.transform(&x, d).unwrap();
        pairs
            .iter()
            .zip(&exact)
            .map(|(&(i, j), &p)| phi.dot(i, j) - p)
            .collect()
    };
    let mut family = Family::new("k_M -> k");
    let mean_pq = exact.iter().map(|p| p * (1.0 - p)).sum::<f64>() / exact.len() as f64;
    let scaled: Vec<f64> = (0..40)
        .map(|r| {
            let e = errors(10, 500 + r);
            10.0 * e.iter().map(|v| v * v).sum::<f64>() / e.len() as f64
        })
        .collect();
    family.push(
        format!("E[M(k_M − k)²] = {mean_pq:.4}"),
        z_test(&scaled, mean_pq),
    );
    family.assert();
    let ms = [5usize, 20, 100, 500];
    let mean_abs: Vec<f64> = ms
        .iter()
        .map(|&m| {
            let e = errors(m, 700 + m as u64);
            e.iter().map(|v| v.abs()).sum::<f64>() / e.len() as f64
        })
        .collect();
    let lx: Vec<f64> = ms.iter().map(|&m| (m as f64).ln()).collect();
    let ly: Vec<f64> = mean_abs.iter().map(|v| v.ln()).collect();
    let (mx, my) = (lx.iter().sum::<f64>() / 4.0, ly.iter().sum::<f64>() / 4.0);
    let slope = lx
        .iter()
        .zip(&ly)
        .map(|(a, b)| (a - mx) * (b - my))
        .sum::<f64>()
        / lx.iter().map(|a| (a - mx) * (a - mx)).sum::<f64>();
    assert!(
        (-0.55..=-0.38).contains(&slope),
        "slope {slope}, mean |error| {mean_abs:?}"
    );
    let max50: f64 = (0..5)
        .map(|r| {
            errors(50, 900 + r)
                .iter()
                .fold(0.0f64, |a, v| a.max(v.abs()))
        })
        .sum::<f64>()
        / 5.0;
    assert!(
        (0.14..=0.26).contains(&max50),
        "max error at M = 50: {max50}"
    );
}

/// T18, the limits: duplicate rows are never separated; a constant column is never cut; at
/// a lifetime so small that no tree cuts, every row has the M root features and ridge
/// predicts the training mean.
#[test]
fn limits_duplicates_constant_columns_and_tiny_lifetimes() {
    let (n, d, m) = (60, 3, 20);
    let mut x = uniform(n, d, 31);
    for i in 0..n {
        x[i * d + 1] = 0.5; // a constant column
    }
    x.extend_from_within(..5 * d); // rows 60..65 repeat rows 0..5
    let mut k = kernel(m, 8.0, 32);
    k.fit(&x, d).unwrap();
    let phi = k.transform(&x, d).unwrap();
    for i in 0..5 {
        assert_eq!(phi.row(i), phi.row(n + i), "duplicates were separated");
    }
    for tree in k.trees() {
        for j in tree.subtree_preorder(tree.root().unwrap()) {
            if tree.children(j).is_some() {
                assert_ne!(tree.split_dimension(j), 1, "a constant column was cut");
            }
        }
    }
    let y: Vec<f64> = (0..n + 5).map(|i| x[i * d] * 3.0 + 1.0).collect();
    let mut model =
        mondrian::kernel::MondrianKernelRidge::new(mondrian::kernel::KernelRidgeParams {
            kernel: KernelParams {
                n_trees: m,
                lifetime: 1e-12,
                seed: 33,
                n_threads: 1,
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap();
    model.fit(&x, d, &y).unwrap();
    assert_eq!(model.n_features_out(), m);
    let mean = y.iter().sum::<f64>() / y.len() as f64;
    for p in model.predict(&x, d).unwrap() {
        assert!(
            (p - mean).abs() < 1e-9 * mean.abs(),
            "{p} vs the mean {mean}"
        );
    }
}
