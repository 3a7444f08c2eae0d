//! Pólya forests, statistical laws (spec `mondrian-polya-forest.md` §11 items 12, 15, 18,
//! 19): scale and translation covariance, near against far, the density's accuracy on
//! the App. F examples (a frozen regression tolerance), and the Appx. C data by sampling.
//! Statistical comparisons run at the suite's family-wise level α = 1e-3 (Bonferroni, see
//! `common/mod.rs`).

mod common;

use common::polya::*;
use common::*;
use mondrian::{MondrianPolyaForest, PolyaVariant, Step};

const VARIANTS: [PolyaVariant; 2] = [PolyaVariant::Streaming, PolyaVariant::Batch];

/// §11 item 12 with c = 4: multiplying every coordinate by a power of two is exact in
/// floating point, and the engine's draws are scale-free (E = −ln U / L scales by 1/c,
/// the dimension is drawn as U·L against cumulative sides, the cut as l + U·(u − l)), so
/// the same seed grows the same structure: every cut on every query's path is at c times
/// the location, bit for bit. Masses are then equal, bit for bit for a batch tree (its
/// shares are ratios of scaled lengths); a streaming tree's restriction ratio r goes
/// through log-volumes whose rounding differs (≈ 1e-15), which a complement's share
/// 1 − r can magnify by 1/(1 − r), so its log-masses agree to 1e-9. Densities scale by
/// c^−D (log-densities and log-volumes shift by D ln c, to 1e-9).
#[test]
fn scaling_by_a_power_of_two_keeps_masses() {
    let (d, c) = (3, 4.0f64);
    let x = normal_rows(300, d, 60);
    let xs: Vec<f64> = x.iter().map(|v| v * c).collect();
    let q = normal_rows(200, d, 61);
    let qs: Vec<f64> = q.iter().map(|v| v * c).collect();
    for variant in VARIANTS {
        for cap in [Some(10), Some(4)] {
            let p = polya_params(variant, 8, cap, 5);
            let a = fitted(p.clone(), &x, d);
            let b = fitted(p, &xs, d);
            for t in 0..8 {
                let (la, lb) = (a.leaves(t).unwrap(), b.leaves(t).unwrap());
                assert_eq!(la.len(), lb.len(), "{variant:?}: tree {t}'s structure");
                for (u, v) in la.iter().zip(&lb) {
                    assert_eq!(u.encoding, v.encoding);
                    match variant {
                        PolyaVariant::Batch => assert_eq!(u.log_mass, v.log_mass),
                        PolyaVariant::Streaming => {
                            assert!((u.log_mass - v.log_mass).abs() < 1e-9, "{u:?} {v:?}")
                        }
                    }
                    let shift = v.log_volume - u.log_volume - d as f64 * c.ln();
                    assert!(shift.abs() < 1e-9, "{variant:?}: {u:?} {v:?}");
                }
            }
            for (row, rows) in q.chunks(d).zip(qs.chunks(d)).take(50) {
                let (ea, eb) = (a.explain(row).unwrap(), b.explain(rows).unwrap());
                for (ta, tb) in ea.trees.iter().zip(&eb.trees) {
                    assert_eq!(ta.encoding, tb.encoding);
                    for (sa, sb) in ta.steps.iter().zip(&tb.steps) {
                        if let (
                            Step::Cut { dim, threshold, .. },
                            Step::Cut {
                                dim: db,
                                threshold: tb,
                                ..
                            },
                        ) = (sa, sb)
                        {
                            assert_eq!((dim, c * threshold), (db, *tb), "{variant:?}");
                        }
                    }
                }
            }
            let (sa, sb) = (a.evaluate(&q, d).unwrap(), b.evaluate(&qs, d).unwrap());
            for (u, v) in sa.iter().zip(&sb) {
                assert_eq!(u.out_of_domain, v.out_of_domain);
                assert!((u.mass - v.mass).abs() <= 1e-9 * u.mass, "{u:?} {v:?}");
                if !u.out_of_domain {
                    let shift = v.log_density - u.log_density + d as f64 * c.ln();
                    assert!(shift.abs() < 1e-9, "{variant:?}: {u:?} {v:?}");
                }
            }
        }
    }
}

/// §11 item 12 where exactness cannot hold: c = 3 and a translation by (7.25, −3.5)
/// round differently in f32, so a seed's trees may differ by an ulp somewhere; the law
/// must not. Masses at a fixed (transformed) point from 2000 one-tree forests per
/// transform, two-sample KS against the untransformed data, both variants.
#[test]
fn scaling_and_translation_keep_the_law_of_masses() {
    let d = 2;
    let x = uniform_rows(12, d, 62);
    let query = [x[0] * 0.5 + x[2] * 0.5, x[1] * 0.5 + x[3] * 0.5];
    type Transform = (&'static str, fn(f64, usize) -> f64);
    let transforms: [Transform; 3] = [
        ("identity", |v, _| v),
        ("×3", |v, _| 3.0 * v),
        ("+(7.25, −3.5)", |v, k| v + [7.25, -3.5][k]),
    ];
    let mut family = Family::new("masses under scaling and translation");
    for variant in VARIANTS {
        let masses: Vec<Vec<f64>> = transforms
            .iter()
            .enumerate()
            .map(|(i, (_, tf))| {
                let xt: Vec<f64> = x.iter().enumerate().map(|(j, &v)| tf(v, j % d)).collect();
                let qt: Vec<f64> = query.iter().enumerate().map(|(k, &v)| tf(v, k)).collect();
                (0..2000u64)
                    .map(|s| {
                        let seed = 1_000_000 * i as u64 + s;
                        let f = fitted(polya_params(variant, 1, Some(4), seed), &xt, d);
                        f.score(&qt, d).unwrap()[0]
                    })
                    .collect()
            })
            .collect();
        for i in 1..transforms.len() {
            family.push(
                format!("{variant:?}: {} vs identity (KS)", transforms[i].0),
                ks_two_sample(&masses[0], &masses[i]),
            );
        }
    }
    family.assert();
}

/// §11 item 15: with data from N(0, I_D), the forest's mass and density at the origin
/// exceed those at 4σ along the first axis, in at least 99 % of seeds (each seed draws new
/// data and a new forest). One extra row at 6σ on that axis keeps the 4σ point inside
/// the domain (without it the point is usually outside, mass 0, and the test would be
/// empty).
#[test]
fn near_beats_far() {
    let (d, n, seeds) = (2, 500, 200u64);
    for variant in VARIANTS {
        let mut wins = 0;
        for s in 0..seeds {
            let mut x = normal_rows(n, d, 5000 + s);
            x.extend([6.0, 0.0]);
            let f = fitted(polya_params(variant, 20, Some(10), s), &x, d);
            let e = f.evaluate(&[0.0, 0.0, 4.0, 0.0], d).unwrap();
            assert!(!e[1].out_of_domain);
            if e[0].mass > e[1].mass && e[0].log_density > e[1].log_density {
                wins += 1;
            }
        }
        eprintln!("{variant:?}: near beats far in {wins} of {seeds} seeds");
        assert!(wins * 100 >= 99 * seeds, "{variant:?}: {wins}/{seeds}");
    }
}

/// The mean |p̂ − p| over a grid, for a forest of 100 trees (depth 10, γ = 1) fitted on
/// 5000 draws.
fn density_error(
    variant: PolyaVariant,
    x: &[f64],
    d: usize,
    grid: &[f64],
    truth: impl Fn(&[f64]) -> f64,
) -> f64 {
    let f: MondrianPolyaForest = fitted(polya_params(variant, 100, Some(10), 1), x, d);
    let est = f.log_density(grid, d).unwrap();
    grid.chunks(d)
        .zip(&est)
        .map(|(g, l)| (l.exp() - truth(g)).abs())
        .sum::<f64>()
        / est.len() as f64
}

/// §11 item 18, a regression test (the paper gives no numbers): the mean |p̂ − p| on a
/// grid for the App. F examples, 5000 draws, 100 trees, depth 10, γ = 1: N(0, 1) on
/// [−2.5, 2.5]; 0.3·N(0, 1) + 0.7·N(5, 1) on [−2, 7]; N(0, I₂) on [−2, 2]²; and
/// ½N((−1.5, −1.5), I) + ½N((1.5, 1.5), I) on [−3, 3]². The tolerances were set once, at
/// the commit that added this test, from five data and forest seeds (the test runs the
/// first): 1.25 × the largest of the five, which covers the seeds' spread (±15 % about
/// the mean) but not a worse estimator; then frozen. Measured at seed 0, streaming /
/// batch: 0.01139 / 0.01217, 0.00755 / 0.00686, 0.01096 / 0.00827, 0.00773 / 0.00638;
/// largest of five: 0.01139 / 0.01217, 0.00816 / 0.00728, 0.01284 / 0.00992,
/// 0.00773 / 0.00648.
#[test]
fn density_accuracy_on_the_appendix_f_examples() {
    let n = 5000;
    let pdf = |z: f64| (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let line = |a: f64, b: f64, k: usize| -> Vec<f64> {
        (0..k)
            .map(|i| a + (b - a) * i as f64 / (k - 1) as f64)
            .collect()
    };
    let square = |a: f64, b: f64, k: usize| -> Vec<f64> {
        let l = line(a, b, k);
        l.iter()
            .flat_map(|&u| l.iter().flat_map(move |&v| [u, v]))
            .collect()
    };
    let normal1 = normal_rows(n, 1, 100);
    let mixture1: Vec<f64> = {
        let z = normal_rows(n, 1, 101);
        z.iter()
            .enumerate()
            .map(|(i, v)| if i % 10 < 3 { *v } else { v + 5.0 })
            .collect()
    };
    let normal2 = normal_rows(n, 2, 102);
    let mixture2: Vec<f64> = {
        let z = normal_rows(n, 2, 103);
        z.iter()
            .enumerate()
            .map(|(i, v)| if (i / 2) % 2 == 0 { v - 1.5 } else { v + 1.5 })
            .collect()
    };
    type Truth<'a> = Box<dyn Fn(&[f64]) -> f64 + 'a>;
    // An example: name, data, width, grid, true density, tolerance (streaming, batch).
    type Case<'a> = (&'a str, &'a [f64], usize, Vec<f64>, Truth<'a>, [f64; 2]);
    let cases: Vec<Case> = vec![
        (
            "N(0,1)",
            &normal1,
            1,
            line(-2.5, 2.5, 501),
            Box::new(|g: &[f64]| pdf(g[0])),
            [0.0143, 0.0152],
        ),
        (
            "0.3N(0,1)+0.7N(5,1)",
            &mixture1,
            1,
            line(-2.0, 7.0, 901),
            Box::new(|g: &[f64]| 0.3 * pdf(g[0]) + 0.7 * pdf(g[0] - 5.0)),
            [0.0102, 0.0091],
        ),
        (
            "N(0,I2)",
            &normal2,
            2,
            square(-2.0, 2.0, 41),
            Box::new(|g: &[f64]| pdf(g[0]) * pdf(g[1])),
            [0.0161, 0.0124],
        ),
        (
            "bimodal 2-D",
            &mixture2,
            2,
            square(-3.0, 3.0, 61),
            Box::new(|g: &[f64]| {
                0.5 * pdf(g[0] + 1.5) * pdf(g[1] + 1.5) + 0.5 * pdf(g[0] - 1.5) * pdf(g[1] - 1.5)
            }),
            [0.0097, 0.0081],
        ),
    ];
    for (name, x, d, grid, truth, tol) in cases {
        for (v, variant) in VARIANTS.iter().enumerate() {
            let err = density_error(*variant, x, d, &grid, &truth);
            eprintln!(
                "{name} {variant:?}: mean |p̂ − p| = {err:.5} (tolerance {})",
                tol[v]
            );
            assert!(err <= tol[v], "{name} {variant:?}: {err} > {}", tol[v]);
        }
    }
}

/// §11 item 19: the Appx. C data (x1 = (0,0), x2 = (¼,¼), x3 = (2/5,4/5), x4 = (1,1)),
/// many trees (a forest of 4000, λ = ∞, γ = 1, depth cap 2 as in the example, and 10):
/// every tree's masses sum to 1 and its leaf volumes to 1 (the unit square); the root cut
/// is on each axis with probability ½ (equal sides; exact binomial test) at a location
/// uniform on [0, 1] (KS); it leaves x4 alone (ξ > 0.4 on x, ξ > 0.8 on y) with
/// probability ½·0.6 + ½·0.2 = 0.4 (binomial), and then x4's leaf is that Type I side, of
/// mass (a·f + 1)/(a + 4) = (2 − ξ)/5 with a = 1, f = 1 − ξ (to 1e-12).
///
/// The spec's further claim, that the isolated x3 and x4 get a lower mean mass than x1
/// and x2, does not hold at γ = 1 with four points (the fixed tree of §4.5 already gives
/// x4 0.300 and x3 0.255 against 0.138 for x1, x2: a lone point's Type I leaf is a whole
/// side of a cut, whose prior share is large next to n = 4). The mean masses and
/// densities are printed, not asserted. (A lone point's density (2 − ξ)/(5(1 − ξ)) has
/// an infinite mean over ξ, so its sample mean is unstable too.)
#[test]
fn appendix_c_by_sampling() {
    let x = [0.0, 0.0, 0.25, 0.25, 0.4, 0.8, 1.0, 1.0];
    let m = 4000;
    let mut family = Family::new("Appx. C data: the root cut");
    for (cap, seed) in [(Some(2), 3), (Some(10), 4)] {
        let f = fitted(polya_params(PolyaVariant::Streaming, m, cap, seed), &x, 2);
        assert_conserved(&f, 0.0, &format!("Appx. C, cap {cap:?}"));
        let masses = f.mass_per_tree(&x, 2).unwrap();
        let mean = |i: usize| (0..m).map(|t| masses[i * m + t]).sum::<f64>() / m as f64;
        let dens = f.evaluate(&x, 2).unwrap();
        eprintln!(
            "cap {cap:?}: mean masses x1..x4 = {:.4} {:.4} {:.4} {:.4}; forest densities {:.3} \
             {:.3} {:.3} {:.3}",
            mean(0),
            mean(1),
            mean(2),
            mean(3),
            dens[0].log_density.exp(),
            dens[1].log_density.exp(),
            dens[2].log_density.exp(),
            dens[3].log_density.exp()
        );
        let e = f.explain(&x[6..8]).unwrap();
        let (mut on_x, mut locations, mut alone) = (0u64, Vec::with_capacity(m), 0u64);
        for tree in &e.trees {
            let Some(Step::Cut { dim, threshold, .. }) = tree.steps.first() else {
                panic!("the root is not cut");
            };
            on_x += u64::from(*dim == 0);
            locations.push(*threshold);
            let edge = [0.4, 0.8][*dim];
            if *threshold > edge {
                alone += 1;
                assert_eq!(
                    tree.steps.len(),
                    1,
                    "x4 is alone: a Type I leaf at the root"
                );
                let want = (2.0 - threshold) / 5.0;
                assert!((tree.mass - want).abs() < 1e-12, "{} vs {want}", tree.mass);
            }
        }
        family.push(
            format!("cap {cap:?}: x4 alone after the root cut (binomial, ½·0.6 + ½·0.2)"),
            binomial_test(alone, m as u64, 0.4),
        );
        family.push(
            format!("cap {cap:?}: root cut on x (binomial, ½)"),
            binomial_test(on_x, m as u64, 0.5),
        );
        family.push(
            format!("cap {cap:?}: root cut location (KS, uniform)"),
            ks_one_sample(&locations, |v| v.clamp(0.0, 1.0)),
        );
    }
    family.assert();
}
