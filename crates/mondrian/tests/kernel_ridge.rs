//! Ridge regression on Mondrian kernel features against direct computations (spec
//! `mondrian-kernel.md` §6.5: T11, T12, T14; the lifetime search; saving and loading).
//! Every reference below is a dense computation written here, independent of the library's
//! incremental factor.
// Textbook elimination reads best with indices.
#![allow(clippy::needless_range_loop)]

mod common;

use common::rng;
use mondrian::kernel::{
    run_sweep, Criterion, Csr, KernelParams, KernelRidgeParams, Learner, LifetimePath,
    LifetimeSearch, MondrianKernel, MondrianKernelRidge, SweepSpec,
};
use mondrian::persist::Persistent;
use mondrian::process::Feature;
use mondrian::MondrianError;
use rand::Rng;

const DELTA2: f64 = 1e-3;

fn data(n: usize, d: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut r = rng(seed);
    let x: Vec<f64> = (0..n * d)
        .map(|_| f64::from(r.gen::<f64>() as Feature))
        .collect();
    let y = (0..n)
        .map(|i| (4.0 * x[i * d]).sin() + x[i * d + d - 1] + 0.1 * r.gen::<f64>())
        .collect();
    (x, y)
}

fn ridge_params(m: usize, lifetime: f64, seed: u64) -> KernelRidgeParams {
    KernelRidgeParams {
        kernel: KernelParams {
            n_trees: m,
            lifetime,
            seed,
            n_threads: 1,
            ..Default::default()
        },
        delta2: DELTA2,
        max_features: 100_000,
    }
}

/// Dense Φ (rows × columns) from a CSR.
fn dense(phi: &Csr, rows: usize) -> Vec<Vec<f64>> {
    (0..rows)
        .map(|i| {
            let mut r = vec![0.0; phi.n_cols];
            for &c in phi.row(i) {
                r[c as usize] = phi.value;
            }
            r
        })
        .collect()
}

/// Solves `a x = b` by Gaussian elimination with partial pivoting.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    for k in 0..n {
        let p = (k..n)
            .max_by(|&i, &j| a[i][k].abs().total_cmp(&a[j][k].abs()))
            .unwrap();
        a.swap(k, p);
        b.swap(k, p);
        for i in k + 1..n {
            let f = a[i][k] / a[k][k];
            for j in k..n {
                a[i][j] -= f * a[k][j];
            }
            b[i] -= f * b[k];
        }
    }
    let mut x = vec![0.0; n];
    for k in (0..n).rev() {
        let s: f64 = (k + 1..n).map(|j| a[k][j] * x[j]).sum();
        x[k] = (b[k] - s) / a[k][k];
    }
    x
}

/// `ln det` of a symmetric positive-definite matrix by elimination (no pivoting needed).
fn log_det(mut a: Vec<Vec<f64>>) -> f64 {
    let n = a.len();
    let mut s = 0.0;
    for k in 0..n {
        s += a[k][k].ln();
        for i in k + 1..n {
            let f = a[i][k] / a[k][k];
            for j in k..n {
                a[i][j] -= f * a[k][j];
            }
        }
    }
    s
}

/// The ridge weights `(ΦᵀΦ + δ²I)⁻¹Φᵀ(y − c)` over the columns of `phi`.
fn ridge_weights(phi: &[Vec<f64>], y: &[f64], centre: f64) -> Vec<f64> {
    let c = phi[0].len();
    let mut a = vec![vec![0.0; c]; c];
    let mut b = vec![0.0; c];
    for (row, &t) in phi.iter().zip(y) {
        for i in 0..c {
            if row[i] != 0.0 {
                b[i] += row[i] * (t - centre);
                for j in 0..c {
                    a[i][j] += row[i] * row[j];
                }
            }
        }
    }
    for (i, r) in a.iter_mut().enumerate() {
        r[i] += DELTA2;
    }
    solve(a, b)
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1.0)
}

/// T11: the ridge followed event by event along the path predicts, at every lifetime read,
/// what a dense solve on that lifetime's features predicts (to 1e-9), and its log marginal
/// likelihoods equal `ln N(y | 0, ΦΦᵀ + δ²I)` (the paper's, σ² = δ²) and
/// `max_σ² ln N(y | 0, (σ²/δ²)(ΦΦᵀ + δ²I))` (the profiled one), computed on N × N matrices.
/// Both ways of keeping the solution: updated at every event, and brought up to date at the
/// readings only (by updates or one fresh factorisation).
#[test]
fn the_ridge_sweep_equals_dense_solves_and_the_evidence_its_gaussian() {
    for every_event in [true, false] {
        ridge_sweep_against_dense(every_event);
    }
}

fn ridge_sweep_against_dense(every_event: bool) {
    let (n, n_train, d, m) = (70, 50, 2, 4);
    let (x, y) = data(n, d, 1);
    let mut k = MondrianKernel::new(ridge_params(m, 12.0, 2).kernel).unwrap();
    k.fit(&x, d).unwrap();
    let lifetimes = vec![0.3, 1.0, 2.5, 5.0, 11.9];
    let spec = SweepSpec {
        lifetimes: lifetimes.clone(),
        n_train,
        delta2: DELTA2,
        centre: None,
        learner: Learner::Ridge,
        max_features: 100_000,
        average: None,
        every_event,
    };
    let mut path = LifetimePath::new(&k).unwrap();
    let report = run_sweep(&mut path, &y[..n_train], &spec).unwrap();
    let centre = y[..n_train].iter().sum::<f64>() / n_train as f64;
    assert!(close(report.centre, centre, 1e-14));
    let mut reader = LifetimePath::new(&k).unwrap();
    for (point, &lifetime) in report.points.iter().zip(&lifetimes) {
        reader.advance_to(lifetime);
        let phi = dense(&reader.features(), n);
        // Keep the active columns only (retired ones are empty).
        let active: Vec<usize> = (0..phi[0].len())
            .filter(|&c| phi[..n].iter().any(|r| r[c] != 0.0))
            .collect();
        let phi: Vec<Vec<f64>> = phi
            .iter()
            .map(|r| active.iter().map(|&c| r[c]).collect())
            .collect();
        assert_eq!(active.len(), point.n_features);
        let w = ridge_weights(&phi[..n_train], &y[..n_train], centre);
        for (i, row) in phi.iter().enumerate() {
            let p = centre + row.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>();
            assert!(
                close(point.predictions[i], p, 1e-9),
                "λ = {lifetime}, row {i}"
            );
        }
        // ln N(y | 0, K) with K = s(ΦΦᵀ + δ²I) on the centred training targets.
        let yc: Vec<f64> = y[..n_train].iter().map(|v| v - centre).collect();
        let kmat: Vec<Vec<f64>> = (0..n_train)
            .map(|i| {
                (0..n_train)
                    .map(|j| {
                        let dot: f64 = phi[i].iter().zip(&phi[j]).map(|(a, b)| a * b).sum();
                        dot + if i == j { DELTA2 } else { 0.0 }
                    })
                    .collect()
            })
            .collect();
        let quad = yc
            .iter()
            .zip(solve(kmat.clone(), yc.clone()))
            .map(|(a, b)| a * b)
            .sum::<f64>();
        let ld = log_det(kmat);
        let nt = n_train as f64;
        let gauss =
            |s: f64| -0.5 * (nt * (2.0 * std::f64::consts::PI).ln() + nt * s.ln() + ld + quad / s);
        let paper = point.log_marginal_likelihood.unwrap();
        assert!(close(paper, gauss(1.0), 1e-8), "{paper} vs {}", gauss(1.0));
        // Profiled: σ²/δ² = s at its maximum s = quad / N.
        let profiled = point.log_evidence.unwrap();
        assert!(close(profiled, gauss(quad / nt), 1e-8));
        assert!(gauss(quad / nt * 1.01) < profiled && gauss(quad / nt * 0.99) < profiled);
    }
}

/// T14: with one tree and γ² = δ², the kernel's ridge and the forest's per-leaf values
/// `Σ y / (n + γ²)` predict the same at every lifetime; with several trees they differ
/// (the kernel fits the trees jointly).
#[test]
fn one_tree_kernel_ridge_is_the_forest() {
    let (n, d) = (60, 3);
    let (x, y) = data(n, d, 3);
    for (m, same) in [(1, true), (5, false)] {
        let mut k = MondrianKernel::new(ridge_params(m, 20.0, 4).kernel).unwrap();
        k.fit(&x, d).unwrap();
        let read = |learner| {
            let spec = SweepSpec {
                lifetimes: vec![0.5, 2.0, 8.0, 19.0],
                n_train: n,
                delta2: DELTA2,
                centre: None,
                learner,
                max_features: 100_000,
                average: None,
                every_event: false,
            };
            let mut path = LifetimePath::new(&k).unwrap();
            run_sweep(&mut path, &y, &spec).unwrap()
        };
        let kernel = read(Learner::Ridge);
        let forest = read(Learner::Forest { gamma2: DELTA2 });
        let max_gap = kernel
            .points
            .iter()
            .zip(&forest.points)
            .flat_map(|(a, b)| {
                a.predictions
                    .iter()
                    .zip(&b.predictions)
                    .map(|(p, q)| (p - q).abs())
            })
            .fold(0.0, f64::max);
        if same {
            assert!(max_gap < 1e-9, "M = 1: gap {max_gap}");
        } else {
            assert!(
                max_gap > 1e-3,
                "M = 5: the joint fit should differ, gap {max_gap}"
            );
        }
    }
}

/// The model fitted at λ equals a dense solve on its features; rows given to
/// `partial_fit` (one at a time and in a block) update it exactly (T12, §4.3): the weights
/// equal a dense solve on every row seen with the first fit's centre, to 1e-9.
#[test]
fn batch_and_online_ridge_equal_dense_solves() {
    let (n, d, m) = (90, 2, 5);
    let (x, y) = data(n, d, 5);
    let mut model = MondrianKernelRidge::new(ridge_params(m, 6.0, 6)).unwrap();
    model.fit(&x[..40 * d], d, &y[..40]).unwrap();
    let centre = model.centre();
    let check = |model: &MondrianKernelRidge, rows: usize| {
        let phi = model.kernel().transform(&x[..rows * d], d).unwrap();
        assert_eq!(phi.nnz(), rows * m);
        let w = ridge_weights(&dense(&phi, rows), &y[..rows], centre);
        assert_eq!(w.len(), model.weights().len());
        for (a, b) in model.weights().iter().zip(&w) {
            assert!(close(*a, *b, 1e-9), "{a} vs {b} after {rows} rows");
        }
    };
    check(&model, 40);
    for i in 40..60 {
        model
            .partial_fit(&x[i * d..(i + 1) * d], d, &y[i..i + 1])
            .unwrap();
    }
    check(&model, 60);
    model.partial_fit(&x[60 * d..], d, &y[60..]).unwrap();
    check(&model, n);
    assert_eq!(model.n_train(), n);
}

/// The search reads every lifetime off one sweep and returns the model `fit` gives at the
/// chosen one; each reading is the model fitted directly at that lifetime on the same
/// rows (the trees are the same, bit for bit).
#[test]
fn the_lifetime_search_returns_the_direct_fit_at_its_choice() {
    let (n, d, m) = (120, 2, 6);
    let (x, y) = data(n, d, 7);
    let grid = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0];
    let search = |criterion| LifetimeSearch {
        lifetimes: grid.to_vec(),
        criterion,
        validation_fraction: 0.25,
        patience: None,
    };
    for criterion in [Criterion::Validation, Criterion::Evidence] {
        let (model, scores) =
            MondrianKernelRidge::fit_cv(ridge_params(m, 1.0, 8), &x, d, &y, &search(criterion))
                .unwrap();
        assert_eq!(scores.len(), grid.len());
        let best = scores
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .unwrap()
            .0;
        assert_eq!(model.lifetime(), grid[best]);
        let mut direct = MondrianKernelRidge::new(ridge_params(m, grid[best], 8)).unwrap();
        direct.fit(&x, d, &y).unwrap();
        assert_eq!(
            model.predict(&x, d).unwrap(),
            direct.predict(&x, d).unwrap()
        );
    }
    // Patience: the search reads lifetimes until `k` readings in a row fail to beat the best;
    // the scores it read are the full search's, the rest NaN, and its choice is the best read.
    let (_, all) = MondrianKernelRidge::fit_cv(
        ridge_params(m, 1.0, 8),
        &x,
        d,
        &y,
        &search(Criterion::Validation),
    )
    .unwrap();
    for k in 1..=3 {
        let mut stopped = search(Criterion::Validation);
        stopped.patience = Some(k);
        let (model, scores) =
            MondrianKernelRidge::fit_cv(ridge_params(m, 1.0, 8), &x, d, &y, &stopped).unwrap();
        // Where the rule says the sweep stops, from the full scores.
        let (mut best, mut since, mut read) = (f64::INFINITY, 0, 0);
        for s in &all {
            read += 1;
            if *s < best {
                (best, since) = (*s, 0);
            } else {
                since += 1;
            }
            if since >= k {
                break;
            }
        }
        assert_eq!(scores[..read], all[..read], "patience {k}");
        assert!(scores[read..].iter().all(|s| s.is_nan()), "patience {k}");
        let arg = (0..read)
            .min_by(|&a, &b| all[a].total_cmp(&all[b]))
            .unwrap();
        assert_eq!(model.lifetime(), grid[arg]);
    }
    let mut zero = search(Criterion::Validation);
    zero.patience = Some(0);
    assert!(matches!(
        MondrianKernelRidge::fit_cv(ridge_params(m, 1.0, 8), &x, d, &y, &zero),
        Err(MondrianError::InvalidParameter {
            name: "patience",
            ..
        })
    ));
    // Readings along the sweep against direct transductive fits at each lifetime.
    let n_train = 90;
    let mut k = MondrianKernel::new(ridge_params(m, 16.0, 9).kernel).unwrap();
    k.fit(&x, d).unwrap();
    let mut path = LifetimePath::new(&k).unwrap();
    let spec = SweepSpec {
        lifetimes: grid.to_vec(),
        n_train,
        delta2: DELTA2,
        centre: None,
        learner: Learner::Ridge,
        max_features: 100_000,
        average: None,
        every_event: false,
    };
    let report = run_sweep(&mut path, &y[..n_train], &spec).unwrap();
    for (point, &l) in report.points.iter().zip(&grid) {
        let mut direct = MondrianKernelRidge::new(ridge_params(m, l, 9)).unwrap();
        direct.fit_transductive(&x, d, &y[..n_train]).unwrap();
        let p = direct.predict(&x, d).unwrap();
        for (a, b) in point.predictions.iter().zip(&p) {
            assert!(close(*a, *b, 1e-8), "λ = {l}: {a} vs {b}");
        }
    }
}

/// Predictive standard deviations: at least σ everywhere, and wider for a row far from
/// the data (its cells are its own and untrained) than for a training row.
#[test]
fn predictive_deviations_grow_away_from_the_data() {
    let (n, d, m) = (80, 2, 10);
    let (x, y) = data(n, d, 10);
    let mut model = MondrianKernelRidge::new(ridge_params(m, 3.0, 11)).unwrap();
    model.fit(&x, d, &y).unwrap();
    let sigma = model.noise_variance().sqrt();
    let (_, near) = model.predict_with_std(&x[..d], d).unwrap();
    let (far_mean, far) = model.predict_with_std(&[50.0, 50.0], d).unwrap();
    assert!(near[0] >= sigma && far[0] > near[0]);
    // Far away every tree branches off: the prediction is the centre.
    assert!((far_mean[0] - model.centre()).abs() < 1e-12);
}

/// Saving and loading gives the same predictions (the factor is rebuilt); a damaged file
/// and a file of another kind are refused with typed errors; bad parameters too.
#[test]
fn models_round_trip_and_bad_files_are_refused() {
    let (n, d, m) = (50, 3, 4);
    let (x, y) = data(n, d, 12);
    let mut model = MondrianKernelRidge::new(ridge_params(m, 2.0, 13)).unwrap();
    model.fit(&x, d, &y).unwrap();
    let bytes = model.to_bytes().unwrap();
    let mut back = MondrianKernelRidge::from_bytes(&bytes).unwrap();
    assert_eq!(back.predict(&x, d).unwrap(), model.predict(&x, d).unwrap());
    assert_eq!(
        back.predict_with_std(&x, d).unwrap(),
        model.predict_with_std(&x, d).unwrap()
    );
    back.partial_fit(&x[..d], d, &y[..1]).unwrap();
    let mut broken = bytes.clone();
    let at = broken.len() / 2;
    broken[at] ^= 0x55;
    assert!(matches!(
        MondrianKernelRidge::from_bytes(&broken),
        Err(MondrianError::CorruptModel(_))
    ));
    assert!(MondrianKernelRidge::from_bytes(&bytes[..bytes.len() / 3]).is_err());
    let features = model.kernel().to_bytes().unwrap();
    assert!(MondrianKernelRidge::from_bytes(&features).is_err());
    assert!(MondrianKernel::from_bytes(&features).is_ok());
    for bad in [0.0, -1.0, f64::NAN] {
        let mut p = ridge_params(m, 1.0, 0);
        p.delta2 = bad;
        assert!(MondrianKernelRidge::new(p).is_err());
    }
    let mut p = ridge_params(m, 1.0, 0);
    p.max_features = 5;
    let mut small = MondrianKernelRidge::new(p).unwrap();
    assert!(matches!(
        small.fit(&x, d, &y),
        Err(MondrianError::InvalidParameter {
            name: "max_features",
            ..
        })
    ));
    assert!(matches!(
        MondrianKernelRidge::fit_cv(
            ridge_params(m, 1.0, 0),
            &x,
            d,
            &y,
            &LifetimeSearch::validation(vec![])
        ),
        Err(MondrianError::InvalidParameter {
            name: "lifetimes",
            ..
        })
    ));
}

/// T17 along a sweep (§3.5): the lifetime average equals the mixture computed by hand from
/// the ridge read once inside every interval [τ_c, τ_{c+1}) between events, with weights
/// `exp(L_c)·(F(τ_{c+1}) − F(τ_c))` normalised by log-sum-exp, for the paper's evidence and
/// the profiled one, under a log-uniform prior; its log evidence is `ln Σ` of those weights.
#[test]
fn lifetime_averaging_is_the_posterior_mixture_of_the_intervals() {
    use mondrian::kernel::{Averaging, LifetimePrior};
    let (n, n_train, d, m) = (50, 40, 2, 3);
    let (x, y) = data(n, d, 14);
    let terminal = 6.0;
    let mut k = MondrianKernel::new(ridge_params(m, terminal, 15).kernel).unwrap();
    k.fit(&x, d).unwrap();
    // Every event time up to Λ, then one reading inside each interval.
    let mut walk = LifetimePath::new(&k).unwrap();
    let mut taus = vec![0.0];
    while let Some(t) = walk.next_time().filter(|&t| t < terminal) {
        walk.next_event();
        taus.push(t);
    }
    taus.push(terminal);
    let inside: Vec<f64> = taus.windows(2).map(|w| 0.5 * (w[0] + w[1])).collect();
    let lo = 0.05;
    let cdf = |t: f64| ((t / lo).ln() / (terminal / lo).ln()).clamp(0.0, 1.0);
    for profiled in [false, true] {
        let spec = |lifetimes: Vec<f64>, average| SweepSpec {
            lifetimes,
            n_train,
            delta2: DELTA2,
            centre: None,
            learner: Learner::Ridge,
            max_features: 100_000,
            average,
            every_event: false,
        };
        let mut path = LifetimePath::new(&k).unwrap();
        let readings = run_sweep(&mut path, &y[..n_train], &spec(inside.clone(), None)).unwrap();
        let mut path = LifetimePath::new(&k).unwrap();
        let avg = Averaging {
            prior: LifetimePrior::LogUniform { lo },
            profiled,
        };
        let averaged = run_sweep(&mut path, &y[..n_train], &spec(vec![terminal], Some(avg)))
            .unwrap()
            .average
            .unwrap();
        assert_eq!(averaged.intervals, taus.len() - 1);
        let logw: Vec<f64> = readings
            .points
            .iter()
            .zip(taus.windows(2))
            .map(|(p, w)| {
                let l = match profiled {
                    true => p.log_evidence.unwrap(),
                    false => p.log_marginal_likelihood.unwrap(),
                };
                l + (cdf(w[1]) - cdf(w[0])).ln()
            })
            .collect();
        let top = logw.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let z: f64 = logw.iter().map(|l| (l - top).exp()).sum();
        assert!(close(averaged.log_evidence, top + z.ln(), 1e-10));
        for i in 0..n {
            let mean: f64 = readings
                .points
                .iter()
                .zip(&logw)
                .map(|(p, l)| (l - top).exp() / z * p.predictions[i])
                .sum();
            assert!(close(averaged.predictions[i], mean, 1e-9), "row {i}");
        }
    }
}
