//! Pólya forests, the density as a density (spec `mondrian-polya-forest.md` §11 items 3,
//! 5, 6): it integrates to 1 (exact quadrature in 1-D and 2-D, Monte Carlo in 5-D), it is
//! uniform with no counts and tends to uniform as γ → ∞, and as γ → 0 the complements
//! lose their mass and the leaves take the empirical fractions.

mod common;

use common::polya::*;
use common::*;
use mondrian::model::Forget;
use mondrian::{LeafKind, MondrianPolyaForest, PolyaVariant, Step};
use rand::Rng;

/// ∫ p̂ = 1 by exact quadrature in 1-D and 2-D. The forest density is constant on each
/// cell of the product grid through all its boundaries (box edges, which are data
/// coordinates for a streaming tree and the domain's edges for a batch one, and every cut
/// location), so the sum of p̂(midpoint) × cell volume is the integral up to rounding
/// (|error| < 1e-9 for sums of ≤ 10⁵ terms). The boundaries are found through the public
/// API (`common::polya::boundaries`: explained midpoints until no new threshold appears),
/// so this also checks that the query path and the leaf enumeration agree on the regions.
#[test]
fn density_integrates_to_one_by_exact_quadrature() {
    // (variant, d, n points, trees, cap)
    let cases = [
        (PolyaVariant::Streaming, 1, 200, 5, Some(10)),
        (PolyaVariant::Streaming, 1, 200, 5, None),
        (PolyaVariant::Streaming, 1, 200, 5, Some(3)),
        (PolyaVariant::Batch, 1, 200, 3, Some(7)),
        (PolyaVariant::Streaming, 2, 60, 4, None),
        (PolyaVariant::Streaming, 2, 60, 4, Some(4)),
        (PolyaVariant::Batch, 2, 60, 3, Some(6)),
    ];
    for (variant, d, n, trees, cap) in cases {
        let x = match d {
            1 => normal_rows(n, d, 70),
            _ => uniform_rows(n, d, 71),
        };
        let f = fitted(polya_params(variant, trees, cap, 3), &x, d);
        let (lo, hi) = f32_box(&x, d);
        let data: &[f64] = match variant {
            PolyaVariant::Streaming => &x,
            PolyaVariant::Batch => &[],
        };
        let axes = boundaries(&f, &lo, &hi, data);
        let integral = grid_integral(&f, &axes);
        let sizes: Vec<usize> = axes.iter().map(Vec::len).collect();
        eprintln!("{variant:?} d={d} cap={cap:?}: grid {sizes:?}, ∫p̂ = {integral:.15}");
        assert!(
            (integral - 1.0).abs() < 1e-9,
            "{variant:?} d={d} cap={cap:?}: ∫p̂ = {integral}"
        );
    }
}

/// The standard deviation of `p(U)·V` for U uniform on the domain (volume V), from a
/// tree's leaves: E[(pV)²] = V Σ_l m_l² / V_l, E[pV] = 1.
fn tree_sd(f: &MondrianPolyaForest, t: usize, log_domain: f64) -> f64 {
    let second: f64 = f
        .leaves(t)
        .unwrap()
        .iter()
        .map(|l| (2.0 * l.log_mass - l.log_volume + log_domain).exp())
        .sum();
    (second - 1.0).max(0.0).sqrt()
}

/// ∫ p̂ = 1 by Monte Carlo in 5-D (§11 item 3): N = 10⁵ uniform points in the domain,
/// mean(p̂)·V within 4 standard errors of 1, for a single tree and the forest of 20,
/// streaming and batch. The standard error is not estimated from the sample (which
/// misses the rare small leaves of large density): a tree's is exact, σ_t/√N with
/// σ_t² = V Σ m_l²/V_l − 1 from its leaves; the forest's is bounded by the mean of its
/// trees' (the standard deviation of a sum is at most the sum of the standard
/// deviations). Four standard errors is a two-sided normal level of 6e-5.
#[test]
fn density_integrates_to_one_by_monte_carlo_in_5d() {
    let (d, n_mc) = (5, 100_000);
    let x = uniform_rows(300, d, 80);
    let (lo, hi) = f32_box(&x, d);
    let log_domain = log_volume(&lo, &hi);
    let mut r = rng(81);
    let u: Vec<f64> = (0..n_mc * d)
        .map(|i| r.gen_range(lo[i % d]..=hi[i % d]))
        .collect();
    for variant in [PolyaVariant::Streaming, PolyaVariant::Batch] {
        for trees in [1usize, 20] {
            let f = fitted(polya_params(variant, trees, Some(10), 7), &x, d);
            let p: Vec<f64> = f
                .log_density(&u, d)
                .unwrap()
                .iter()
                .map(|l| (l + log_domain).exp())
                .collect();
            let mean = p.iter().sum::<f64>() / n_mc as f64;
            let sample_sd =
                (p.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n_mc - 1) as f64).sqrt();
            let sd = (0..trees).map(|t| tree_sd(&f, t, log_domain)).sum::<f64>() / trees as f64;
            let se = sd / (n_mc as f64).sqrt();
            eprintln!(
                "{variant:?} {trees} trees: mean(p̂)·V = {mean:.5}, SE {se:.5} (sample SE {:.5}), \
                 z = {:.2}",
                sample_sd / (n_mc as f64).sqrt(),
                (mean - 1.0) / se
            );
            assert!(
                (mean - 1.0).abs() <= 4.0 * se,
                "{variant:?} {trees} trees: {mean} is more than 4 SE ({se}) from 1"
            );
        }
    }
}

/// §11 item 5, exactly, for the batch forest: after forgetting every point the counts
/// are 0 and only the prior is left, whose means are volume fractions, so each leaf's
/// mass is its share of the domain's volume and the density is 1/V everywhere (relative
/// 1e-12: products of ≤ 10 shares).
#[test]
fn batch_forest_with_no_counts_is_uniform() {
    let d = 3;
    let x = normal_rows(200, d, 90);
    let mut f = fitted(polya_params(PolyaVariant::Batch, 5, Some(10), 2), &x, d);
    let (lo, hi) = f32_box(&x, d);
    let log_domain = log_volume(&lo, &hi);
    let ids = f.point_ids();
    f.forget(&ids).unwrap();
    assert_eq!(f.n_points(), 0);
    for t in 0..5 {
        for l in f.leaves(t).unwrap() {
            let share = (l.log_volume - log_domain).exp();
            assert!((l.log_mass.exp() - share).abs() <= 1e-12 * share, "{l:?}");
        }
    }
    let mut r = rng(91);
    let q: Vec<f64> = (0..500 * d)
        .map(|i| r.gen_range(lo[i % d]..=hi[i % d]))
        .collect();
    for s in f.evaluate(&q, d).unwrap() {
        assert!((s.log_density + log_domain).abs() < 1e-12, "{s:?}");
    }
}

/// §11 items 5 and 6 as γ → ∞: the density tends to uniform. Each share differs from its
/// prior mean (a volume fraction f ≥ v_l, the leaf's share of the domain) by a log-factor
/// of at most n/(γ f), so a leaf whose path has k steps has |ln(m_l / v_l)| ≤ k n/(γ v_l).
/// Checked per leaf for γ = 10⁶, 10⁹, 10¹² (streaming and batch), with the largest
/// deviation shrinking with γ.
#[test]
fn large_gamma_tends_to_uniform() {
    let (d, n) = (2, 100);
    let x = normal_rows(n, d, 92);
    let (lo, hi) = f32_box(&x, d);
    let log_domain = log_volume(&lo, &hi);
    for variant in [PolyaVariant::Streaming, PolyaVariant::Batch] {
        let mut worst = Vec::new();
        for gamma in [1e6, 1e9, 1e12] {
            let mut p = polya_params(variant, 4, Some(10), 6);
            p.gamma = gamma;
            let f = fitted(p, &x, d);
            let mut max_dev: f64 = 0.0;
            for t in 0..4 {
                for l in f.leaves(t).unwrap() {
                    let v = (l.log_volume - log_domain).exp();
                    let steps = l.encoding.chars().count() as f64;
                    let bound = steps * n as f64 / (gamma * v) + 1e-12;
                    let dev = (l.log_mass - l.log_volume + log_domain).abs();
                    assert!(
                        dev <= bound,
                        "{variant:?} γ={gamma}: {l:?}: {dev} > {bound}"
                    );
                    max_dev = max_dev.max(dev);
                }
            }
            eprintln!("{variant:?} γ={gamma:e}: max |ln(m_l/v_l)| = {max_dev:.3e}");
            worst.push(max_dev);
        }
        assert!(
            worst[1] < worst[0] && worst[2] < worst[1],
            "{variant:?}: {worst:?}"
        );
    }
}

/// §11 item 6 as γ → 0 (γ = 1e-9): complements lose their mass (a complement's share is
/// b(1−r)/(b+n_c) ≤ b/n_c ≤ γ(2d+2)² with d its cut's depth), and with no cap and
/// λ = ∞ each training point is alone (or with its copies, k of them) in its leaf, whose
/// mass tends to the empirical fraction k/n: each cut share differs from n_c/n_j by a
/// log-factor of at most γ(2d+1)² and each restriction share from 1 by γ(2d+2)².
#[test]
fn small_gamma_gives_empirical_fractions() {
    let (d, n) = (2, 120);
    let mut x = normal_rows(n - 2, d, 93);
    let dup = x[..d].to_vec();
    x.extend_from_slice(&dup);
    x.extend_from_slice(&dup); // row 0 three times
    let gamma = 1e-9;
    let mut p = polya_params(PolyaVariant::Streaming, 5, None, 8);
    p.gamma = gamma;
    let f = fitted(p, &x, d);
    for t in 0..5 {
        for l in f.leaves(t).unwrap() {
            if l.kind == LeafKind::Complement {
                // Encoding c₀r₀…c_d¬: 2d + 2 symbols.
                let depth = l.encoding.chars().count() as f64 / 2.0 - 1.0;
                let bound = gamma * (2.0 * depth + 2.0).powi(2);
                assert!(l.log_mass.exp() <= bound, "{l:?} above {bound}");
            }
        }
    }
    let mut worst: f64 = 0.0;
    for (i, row) in x.chunks(d).enumerate() {
        let k = if i == 0 || i >= n - 2 { 3.0 } else { 1.0 };
        for tree in &f.explain(row).unwrap().trees {
            let cuts = tree
                .steps
                .iter()
                .filter(|s| matches!(s, Step::Cut { .. }))
                .count();
            let bound: f64 = (0..cuts)
                .map(|c| gamma * (((2 * c + 1) as f64).powi(2) + ((2 * c + 2) as f64).powi(2)))
                .sum();
            let dev = (tree.mass * n as f64 / k).ln().abs();
            assert!(
                dev <= bound + 1e-12,
                "row {i}: mass {} (k = {k}): {dev} > {bound}",
                tree.mass
            );
            worst = worst.max(dev);
        }
    }
    eprintln!("γ = 1e-9: max |ln(m·n/k)| over the training points = {worst:.3e}");
}
