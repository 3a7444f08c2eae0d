//! The leaf models of spec `bayesian-trees.md` §2.1 against oracles computed here
//! independently (§5.6 T1–T4): closed forms written from the definitions with `statrs`'s
//! lnΓ, a dense multivariate normal, and numerical integration over the leaf parameters.

use mondrian::bayes::{
    DirichletMultinomial, LeafModel, Moments, NormalInverseGamma, NormalKnownVariance,
    RegressionLeafModel, SufficientStats,
};
use statrs::function::gamma::ln_gamma;

const LN_2PI: f64 = 1.837_877_066_409_345_5;

fn moments(y: &[f64]) -> Moments {
    let mut m = Moments::default();
    for &v in y {
        m.add(v);
    }
    m
}

/// Composite Simpson's rule on [a, b] with n (even) intervals.
fn simpson(f: impl Fn(f64) -> f64, a: f64, b: f64, n: usize) -> f64 {
    let h = (b - a) / n as f64;
    let mut s = f(a) + f(b);
    for i in 1..n {
        s += f(a + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0
}

#[test]
fn dirichlet_multinomial_closed_form_and_integral() {
    // T1: the spec's prototype value for c = (3, 1, 0), α = 5, K = 3 is −4.12479.
    let model = DirichletMultinomial::new(5.0, 3).unwrap();
    let labels = [0usize, 0, 1, 0];
    let s = model.stats_of(labels);
    let got = model.log_marginal(&s);
    let share = 5.0 / 3.0;
    let oracle = ln_gamma(5.0) - 3.0 * ln_gamma(share)
        + ln_gamma(3.0 + share)
        + ln_gamma(1.0 + share)
        + ln_gamma(share)
        - ln_gamma(4.0 + 5.0);
    println!("DM c=(3,1,0): {got:.8} (oracle {oracle:.8}, spec −4.12479)");
    assert!((got - oracle).abs() < 1e-12);
    assert!((got - -4.12479).abs() < 5e-6);
    // Permutation invariance and the empty set.
    let other = model.stats_of([1usize, 0, 0, 0]);
    assert_eq!(model.log_marginal(&other), got);
    assert_eq!(model.log_marginal(&model.empty_stats()), 0.0);

    // K = 2: θ ~ Beta(α/2, α/2), ℓ = ∫ θ^c0 (1 − θ)^c1 Beta(θ) dθ by quadrature.
    let model = DirichletMultinomial::new(5.0, 2).unwrap();
    let s = model.stats_of([0usize, 0, 1, 0, 1, 1, 1]);
    let (c0, c1, a) = (3.0, 4.0, 2.5);
    let log_beta = ln_gamma(a) + ln_gamma(a) - ln_gamma(2.0 * a);
    let integrand = |t: f64| (c0 + a - 1.0) * t.ln() + (c1 + a - 1.0) * (1.0 - t).ln() - log_beta;
    let integral = simpson(
        |t| {
            if t <= 0.0 || t >= 1.0 {
                0.0
            } else {
                integrand(t).exp()
            }
        },
        0.0,
        1.0,
        200_000,
    );
    let got = model.log_marginal(&s);
    println!(
        "DM K=2 c=(3,4): {got:.10} vs quadrature {:.10}",
        integral.ln()
    );
    assert!((got - integral.ln()).abs() < 1e-9);
}

/// log N(r | m·1, σ²I + s²11ᵀ) by a Cholesky factorisation of the dense covariance.
#[allow(clippy::needless_range_loop)] // textbook indices read best here
fn dense_normal_log_density(r: &[f64], m: f64, sigma2: f64, s2: f64) -> f64 {
    let n = r.len();
    let mut a = vec![vec![0.0; n]; n];
    for (i, row) in a.iter_mut().enumerate() {
        for (j, v) in row.iter_mut().enumerate() {
            *v = s2 + if i == j { sigma2 } else { 0.0 };
        }
    }
    // In-place Cholesky: a = L Lᵀ.
    for j in 0..n {
        let mut d = a[j][j];
        for k in 0..j {
            d -= a[j][k] * a[j][k];
        }
        a[j][j] = d.sqrt();
        for i in j + 1..n {
            let mut v = a[i][j];
            for k in 0..j {
                v -= a[i][k] * a[j][k];
            }
            a[i][j] = v / a[j][j];
        }
    }
    // Solve L z = r − m.
    let mut z = vec![0.0; n];
    for i in 0..n {
        let mut v = r[i] - m;
        for k in 0..i {
            v -= a[i][k] * z[k];
        }
        z[i] = v / a[i][i];
    }
    let log_det: f64 = (0..n).map(|i| 2.0 * a[i][i].ln()).sum();
    -0.5 * (n as f64 * LN_2PI + log_det + z.iter().map(|v| v * v).sum::<f64>())
}

#[test]
fn normal_known_variance_matches_dense_gaussian_and_quadrature() {
    // T2: the spec's prototype −1.8950448 for r = (0.3, −0.1, 0.5), σ² = 0.2, m = 0.1,
    // s² = 0.5.
    let model = NormalKnownVariance {
        mean: 0.1,
        prior_variance: 0.5,
        noise_variance: 0.2,
    };
    let r = [0.3, -0.1, 0.5];
    let got = model.log_marginal(&moments(&r));
    let dense = dense_normal_log_density(&r, 0.1, 0.2, 0.5);
    // 1-D quadrature over μ.
    let integrand = |mu: f64| {
        let lik: f64 = r
            .iter()
            .map(|y| -0.5 * (LN_2PI + 0.2f64.ln() + (y - mu) * (y - mu) / 0.2))
            .sum();
        let prior = -0.5 * (LN_2PI + 0.5f64.ln() + (mu - 0.1) * (mu - 0.1) / 0.5);
        (lik + prior).exp()
    };
    let quad = simpson(integrand, -12.0, 12.0, 100_000).ln();
    println!("NKV: {got:.10} dense {dense:.10} quadrature {quad:.10} (spec −1.8950448)");
    assert!((got - dense).abs() < 1e-10);
    assert!((got - quad).abs() < 1e-9);
    assert!((got - -1.895_044_8).abs() < 1e-7);
    // Larger and far-off targets, where the uncentred form would cancel.
    let r: Vec<f64> = (0..40).map(|i| 1e4 + (i as f64 * 0.37).sin()).collect();
    let model = NormalKnownVariance {
        mean: 1e4,
        prior_variance: 2.0,
        noise_variance: 0.3,
    };
    let got = model.log_marginal(&moments(&r));
    let dense = dense_normal_log_density(&r, 1e4, 0.3, 2.0);
    assert!((got - dense).abs() < 1e-8 * dense.abs(), "{got} vs {dense}");
    // The predictive: N(m_n, 1/τ_n + σ²).
    let (mean, var) = model.predictive_mean_variance(&moments(&r[..1]));
    let tau_n = 0.5 + 1.0 / 0.3;
    assert!((mean - (0.5 * 1e4 + r[0] / 0.3) / tau_n).abs() < 1e-9);
    assert!((var - (1.0 / tau_n + 0.3)).abs() < 1e-12);
}

#[test]
fn normal_inverse_gamma_matches_two_dimensional_quadrature() {
    // T3: the spec's prototype −2.84187 for m0 = 0.2, κ0 = 0.5, a0 = 2, b0 = 1 on
    // r = (0.3, −0.1, 0.5).
    let model = NormalInverseGamma {
        m0: 0.2,
        kappa0: 0.5,
        a0: 2.0,
        b0: 1.0,
    };
    let r = [0.3, -0.1, 0.5];
    let got = model.log_marginal(&moments(&r));
    // ∫∫ Π N(y | μ, σ²) N(μ | m0, σ²/κ0) IG(σ² | a0, b0) dμ dσ², with σ² = e^t.
    let log_ig = |v: f64| 2.0 * 1f64.ln() - ln_gamma(2.0) - 3.0 * v.ln() - 1.0 / v;
    let inner = |v: f64| {
        let f = |mu: f64| {
            let lik: f64 = r
                .iter()
                .map(|y| -0.5 * (LN_2PI + v.ln() + (y - mu) * (y - mu) / v))
                .sum();
            let prior = -0.5 * (LN_2PI + (v / 0.5).ln() + (mu - 0.2) * (mu - 0.2) * 0.5 / v);
            (lik + prior).exp()
        };
        let half = 12.0 * (v / 0.5).sqrt().max(v.sqrt());
        simpson(f, 0.2 - half, 0.2 + half, 2000)
    };
    let quad = simpson(
        |t: f64| {
            let v = t.exp();
            inner(v) * log_ig(v).exp() * v
        },
        -12.0,
        8.0,
        4000,
    )
    .ln();
    println!("NIG: {got:.10} quadrature {quad:.10} (spec −2.84187)");
    assert!((got - quad).abs() < 1e-7);
    assert!((got - -2.84187).abs() < 5e-6);
    // The Student-t predictive integrates to 1 and has the stated variance.
    let s = moments(&r);
    let (mean, var) = model.predictive_mean_variance(&s);
    let mass = simpson(
        |y| model.log_predictive(&s, y).exp(),
        mean - 400.0,
        mean + 400.0,
        400_000,
    );
    let second = simpson(
        |y| (y - mean) * (y - mean) * model.log_predictive(&s, y).exp(),
        mean - 2000.0,
        mean + 2000.0,
        2_000_000,
    );
    println!("NIG predictive: mass {mass:.8}, variance {second:.6} vs {var:.6}");
    assert!((mass - 1.0).abs() < 1e-6);
    // df = 2a_n = 7: the tails beyond ±2000 hold a relative 1e-12 of the variance.
    assert!((second - var).abs() < 1e-4 * var);
}

#[test]
fn sufficient_statistics_split_and_join() {
    // T4: left + right = parent, exactly for counts, to 1e-12 for moments; incremental
    // marginals agree with recomputation.
    let y: Vec<f64> = (0..101)
        .map(|i| (i as f64 * 0.731).sin() * 10.0 + 3.0)
        .collect();
    let whole = moments(&y);
    for cut in [1, 17, 50, 100] {
        let mut joined = moments(&y[..cut]);
        joined.merge(&moments(&y[cut..]));
        assert_eq!(joined.n(), whole.n());
        assert!((joined.mean() - whole.mean()).abs() < 1e-12 * whole.mean().abs());
        assert!((joined.m2() - whole.m2()).abs() < 1e-12 * whole.m2());
        let mut rest = whole;
        rest.subtract(&moments(&y[..cut]));
        let direct = moments(&y[cut..]);
        assert!((rest.mean() - direct.mean()).abs() < 1e-11 * direct.mean().abs().max(1.0));
        assert!((rest.m2() - direct.m2()).abs() < 1e-11 * direct.m2().max(1.0));
    }
    let model = DirichletMultinomial::new(2.0, 4).unwrap();
    let labels: Vec<usize> = (0..60).map(|i| (i * 7 + i / 5) % 4).collect();
    let all = model.stats_of(labels.iter().copied());
    let left = model.stats_of(labels[..23].iter().copied());
    let mut right = all.clone();
    right.subtract(&left);
    assert_eq!(right, model.stats_of(labels[23..].iter().copied()));
    let mut incremental = 0.0;
    let mut s = model.empty_stats();
    for &l in &labels {
        incremental += model.log_predictive(&s, l);
        s.add(l);
    }
    assert!((incremental - model.log_marginal(&all)).abs() < 1e-10);
}

#[test]
fn batch_statistics_equal_one_at_a_time() {
    // `add_rows` (one pass of shifted sums for Moments) against Welford one target at a time, on a
    // non-empty start and an index set with repeats and gaps; counts exactly.
    let y: Vec<f64> = (0..301)
        .map(|i| (i as f64 * 1.37).cos() * 50.0 + 1e3)
        .collect();
    let rows: Vec<u32> = (0..500).map(|i| (i * 37 % 301) as u32).collect();
    let mut batch = moments(&y[..7]);
    batch.add_rows(&y, &rows);
    let mut one = moments(&y[..7]);
    for &r in &rows {
        one.add(y[r as usize]);
    }
    assert_eq!(batch.n(), one.n());
    assert!((batch.mean() - one.mean()).abs() < 1e-12 * one.mean().abs());
    assert!((batch.m2() - one.m2()).abs() < 1e-10 * one.m2());
    let mut none = Moments::default();
    none.add_rows(&y, &[]);
    assert_eq!(none, Moments::default());
    let model = DirichletMultinomial::new(1.0, 3).unwrap();
    let labels: Vec<usize> = (0..40).map(|i| i % 3).collect();
    let mut counts = model.empty_stats();
    counts.add_rows(&labels, &[0, 1, 2, 5, 39]);
    assert_eq!(counts, model.stats_of([0, 1, 2, 2, 0].into_iter()));
}

#[test]
fn split_statistics_equal_one_at_a_time() {
    // `split_rows` (one pass, sums shifted by the first row's target) against Welford on
    // each side. Shifted sums lose about n·ε·(1 + (ȳ − c)²/var) of m2 relative; with c a
    // target of the same rows, (ȳ − c)² ≤ range² = 4·var·(range²/4var) ≈ 8·var for
    // these cosines, so 500·2.2e-16·9 ≈ 1e-12 at any offset; 1e-10 leaves room.
    for offset in [0.0, 1e3, 1e6] {
        let y: Vec<f64> = (0..301)
            .map(|i| (i as f64 * 1.37).cos() * 50.0 + offset)
            .collect();
        let rows: Vec<u32> = (0..500).map(|i| (i * 37 % 301) as u32).collect();
        // The parent's statistics are a reference point only: a stale one must not matter.
        let stale = moments(&[-7.0, 3.0]);
        let goes_left = |r: u32| (r as f64 * 0.7).sin() < 0.2;
        let (mut left, mut right) = (vec![7u32], Vec::new());
        let (l, r) = stale.split_rows(
            Moments::default(),
            &y,
            &rows,
            goes_left,
            &mut left,
            &mut right,
        );
        assert_eq!(left[0], 7, "rows are appended");
        let want_left: Vec<u32> = rows.iter().copied().filter(|&r| goes_left(r)).collect();
        let want_right: Vec<u32> = rows.iter().copied().filter(|&r| !goes_left(r)).collect();
        assert_eq!(&left[1..], &want_left[..]);
        assert_eq!(right, want_right);
        for (got, want) in [(l, &want_left), (r, &want_right)] {
            let one = moments(&want.iter().map(|&r| y[r as usize]).collect::<Vec<_>>());
            assert_eq!(got.n(), one.n());
            assert!((got.mean() - one.mean()).abs() <= 1e-12 * one.mean().abs().max(50.0));
            assert!((got.m2() - one.m2()).abs() < 1e-10 * one.m2());
        }
    }
    // Rows whose targets are all equal to the first row's: that value as the mean,
    // exactly, and m2 = 0 (the saved-model check of a split relies on zero means adding
    // up exactly); the other side to rounding.
    let y = [0.0, 0.0, 0.1, 0.0, 0.1, 0.1, 0.1];
    let rows: Vec<u32> = (0..7).collect();
    let (mut left, mut right) = (Vec::new(), Vec::new());
    let (l, r) = Moments::default().split_rows(
        Moments::default(),
        &y,
        &rows,
        |r| y[r as usize] == 0.0,
        &mut left,
        &mut right,
    );
    assert_eq!((l.n(), l.mean(), l.m2()), (3, 0.0, 0.0));
    assert_eq!(r.n(), 4);
    assert!((r.mean() - 0.1).abs() < 1e-16 && r.m2() < 1e-30);
    // The default (comparison, then each side's statistics) on class counts.
    let model = DirichletMultinomial::new(1.0, 3).unwrap();
    let labels: Vec<usize> = (0..40).map(|i| i % 3).collect();
    let all = model.stats_of(labels.iter().copied());
    let rows: Vec<u32> = (0..40).collect();
    let (mut left, mut right) = (Vec::new(), Vec::new());
    let (l, r) = all.split_rows(
        model.empty_stats(),
        &labels,
        &rows,
        |r| r < 10,
        &mut left,
        &mut right,
    );
    assert_eq!(l, model.stats_of(labels[..10].iter().copied()));
    assert_eq!(r, model.stats_of(labels[10..].iter().copied()));
}

#[test]
fn bad_hyperparameters_are_errors() {
    assert!(DirichletMultinomial::new(0.0, 3).is_err());
    assert!(DirichletMultinomial::new(f64::NAN, 3).is_err());
    assert!(DirichletMultinomial::new(1.0, 0).is_err());
    let nkv = NormalKnownVariance {
        mean: 0.0,
        prior_variance: -1.0,
        noise_variance: 1.0,
    };
    assert!(nkv.validate().is_err());
    let nig = NormalInverseGamma {
        m0: f64::INFINITY,
        kappa0: 1.0,
        a0: 1.0,
        b0: 1.0,
    };
    assert!(nig.validate().is_err());
}
