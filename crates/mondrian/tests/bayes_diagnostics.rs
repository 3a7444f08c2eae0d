//! The CODA-compatible effective sample size (spec `bayesian-trees.md` §5.5, T18).

use mondrian::bayes::diagnostics::{ar_yule_walker, effective_size, ess_per_second};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;

fn ar1(phi: f64, n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut x = Vec::with_capacity(n);
    // Start in the stationary law N(0, 1/(1 − φ²)).
    let mut v: f64 = StandardNormal.sample(&mut rng);
    v /= (1.0 - phi * phi).sqrt();
    for _ in 0..n {
        x.push(v);
        let e: f64 = StandardNormal.sample(&mut rng);
        v = phi * v + e;
    }
    x
}

#[test]
fn ar1_chains_match_the_closed_form() {
    // ESS ≈ n(1 − φ)/(1 + φ). The estimate's relative error comes from φ̂ (sd
    // √((1 − φ²)/n), and d log ESS/dφ = −2/(1 − φ²)) and from the sample variance
    // (relative sd √(2(1 + φ²)/(n(1 − φ²)))): the tolerance is 5 times their sum.
    let n = 100_000;
    for (k, phi) in [-0.5, 0.0, 0.5, 0.9].into_iter().enumerate() {
        let x = ar1(phi, n, 10 + k as u64);
        let ess = effective_size(&x);
        let expected = n as f64 * (1.0 - phi) / (1.0 + phi);
        let m = n as f64 * (1.0 - phi * phi);
        let tol = 5.0 * (2.0 + (2.0 * (1.0 + phi * phi)).sqrt()) / m.sqrt();
        let (order, ar, _) = ar_yule_walker(&x);
        println!(
            "φ = {phi}: ESS {ess:.0}, closed form {expected:.0}, relative error {:.4} \
             (tolerance {tol:.4}); AR order {order}, φ̂ = {:.4?}",
            ess / expected - 1.0,
            ar
        );
        assert!((ess / expected - 1.0).abs() < tol);
    }
    let x = ar1(0.5, 1000, 3);
    assert_eq!(ess_per_second(&x, 2.0), effective_size(&x) / 2.0);
}

/// R's `ar.yw` written the long way: for each order p, the Yule–Walker equations solved
/// by Gaussian elimination, the innovation variance r₀ − Σ φᵢ rᵢ, AIC n log v + 2p, and
/// var.pred = v · n/(n − p − 1).
#[allow(clippy::needless_range_loop)] // textbook indices read best here
fn yule_walker_by_elimination(x: &[f64]) -> (usize, Vec<f64>, f64) {
    let n = x.len();
    let nf = n as f64;
    let max = (n - 1).min((10.0 * nf.log10()).floor() as usize);
    let mean = x.iter().sum::<f64>() / nf;
    let r: Vec<f64> = (0..=max)
        .map(|k| {
            (0..n - k)
                .map(|t| (x[t] - mean) * (x[t + k] - mean))
                .sum::<f64>()
                / nf
        })
        .collect();
    let mut best = (f64::INFINITY, 0, Vec::new(), 0.0);
    for p in 0..=max {
        let mut a: Vec<Vec<f64>> = (0..p)
            .map(|i| {
                let mut row: Vec<f64> = (0..p).map(|j| r[i.abs_diff(j)]).collect();
                row.push(r[i + 1]);
                row
            })
            .collect();
        for c in 0..p {
            let piv = (c..p)
                .max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))
                .unwrap();
            a.swap(c, piv);
            for i in 0..p {
                if i != c {
                    let f = a[i][c] / a[c][c];
                    for j in c..=p {
                        a[i][j] -= f * a[c][j];
                    }
                }
            }
        }
        let phi: Vec<f64> = (0..p).map(|i| a[i][p] / a[i][i]).collect();
        let v = r[0] - (0..p).map(|i| phi[i] * r[i + 1]).sum::<f64>();
        let aic = nf * v.ln() + 2.0 * p as f64;
        if aic < best.0 {
            best = (aic, p, phi, v * nf / (nf - (p as f64 + 1.0)));
        }
    }
    (best.1, best.2, best.3)
}

#[test]
fn ar_fit_matches_an_independent_solution() {
    // An AR(2) chain with a mean and a short length, where AIC picks p > 1.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(77);
    let mut x = vec![0.0f64, 0.0];
    for t in 2..400 {
        let e: f64 = StandardNormal.sample(&mut rng);
        x.push(0.6 * x[t - 1] - 0.3 * x[t - 2] + e);
    }
    let x: Vec<f64> = x.into_iter().map(|v| v + 5.0).collect();
    let (order, ar, var_pred) = ar_yule_walker(&x);
    let (order2, ar2, var_pred2) = yule_walker_by_elimination(&x);
    println!("AR(2) chain: order {order}, φ̂ {ar:.5?}, var.pred {var_pred:.6}");
    assert_eq!(order, order2);
    assert!(order >= 2);
    for (a, b) in ar.iter().zip(&ar2) {
        assert!((a - b).abs() < 1e-10);
    }
    assert!((var_pred - var_pred2).abs() < 1e-10 * var_pred);
    let s: f64 = ar.iter().sum();
    let mean = x.iter().sum::<f64>() / 400.0;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / 399.0;
    let expected = 400.0 * var / (var_pred / ((1.0 - s) * (1.0 - s)));
    assert!((effective_size(&x) - expected).abs() < 1e-9 * expected);
}
