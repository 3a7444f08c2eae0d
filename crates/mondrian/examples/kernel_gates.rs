//! The spec's E4 gates for the Mondrian kernel's lifetime sweep (`mondrian-kernel.md` §6.3),
//! timed on one data set; prints one JSON object.
//!
//! ```sh
//! cargo run --release --example kernel_gates -- TRAIN.csv TEST.csv [M] [LAMBDA]
//! ```
//!
//! * Gate 1a: sampling the trees to Λ and walking every event of the path (point
//!   reassignment, no learner) against sampling the trees at Λ alone (≤ 3×).
//! * Gate 1b: the exact ridge followed through every event against one dense Cholesky
//!   factorisation of `A` at Λ with the same C (≤ 10×).
//! * Gate 2: one sweep read at 20 lifetimes (the ridge brought up to date at each reading)
//!   against fitting the model afresh at each of them (≥ 10× faster).

use std::time::Instant;

use mondrian::kernel::{
    dense_cholesky, relative_error, run_sweep, KernelParams, KernelRidgeParams, Learner,
    LifetimePath, MondrianKernel, MondrianKernelRidge, SweepSpec,
};

fn read_csv(path: &str) -> (Vec<f64>, Vec<f64>, usize) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut lines = text.lines();
    let d = lines.next().expect("a header").split(',').count() - 1;
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let v: Vec<f64> = line
            .split(',')
            .map(|s| s.trim().parse().expect("a number"))
            .collect();
        x.extend_from_slice(&v[..d]);
        y.push(v[d]);
    }
    (x, y, d)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (train, test) = (&args[1], &args[2]);
    let m: usize = args.get(3).map_or(350, |s| s.parse().expect("M"));
    let terminal: f64 = args.get(4).map_or(1e-6, |s| s.parse().expect("Λ"));
    let (mut x, y, d) = read_csv(train);
    let (xt, yt, _) = read_csv(test);
    let n_train = y.len();
    x.extend_from_slice(&xt);
    let params = KernelParams {
        n_trees: m,
        lifetime: terminal,
        seed: 1,
        n_threads: 1,
        ..Default::default()
    };

    // Gate 1a.
    let t = Instant::now();
    let mut kernel = MondrianKernel::new(params.clone()).unwrap();
    kernel.fit(&x, d).unwrap();
    let sample = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut path = LifetimePath::new(&kernel).unwrap();
    let mut events = 0usize;
    while path.next_event().is_some() {
        events += 1;
    }
    let walk = t.elapsed().as_secs_f64();
    let c = path.n_active();

    // Gate 1b: the ridge through every event, read once at Λ.
    let spec = |lifetimes: Vec<f64>, every_event: bool| SweepSpec {
        lifetimes,
        n_train,
        delta2: 1e-4,
        centre: None,
        learner: Learner::Ridge,
        max_features: 1 << 20,
        average: None,
        every_event,
    };
    let t = Instant::now();
    let mut path = LifetimePath::new(&kernel).unwrap();
    let report = run_sweep(&mut path, &y, &spec(vec![terminal * (1.0 + 1e-12)], true)).unwrap();
    let ridge_sweep = t.elapsed().as_secs_f64();
    let error_at_terminal = relative_error(&report.points[0].predictions[n_train..], &yt);
    // A at Λ, dense, then one factorisation (the factorisation alone is timed).
    let mut ids: Vec<u32> = path.assign()[..n_train * m].to_vec();
    let mut remap = std::collections::HashMap::new();
    for id in ids.iter_mut() {
        let next = remap.len() as u32;
        *id = *remap.entry(*id).or_insert(next);
    }
    let cc = remap.len();
    let mut a = vec![0.0f64; cc * cc];
    for row in ids.chunks_exact(m) {
        for &i in row {
            for &j in row {
                a[i as usize * cc + j as usize] += 1.0 / m as f64;
            }
        }
    }
    for i in 0..cc {
        a[i * cc + i] += 1e-4;
    }
    let t = Instant::now();
    let factor = dense_cholesky(&a, cc).expect("positive definite");
    let dense = t.elapsed().as_secs_f64();
    assert_eq!(factor.len(), cc * cc);

    // Gate 2: 20 lifetimes, one sweep against 20 fresh fits (trees on train and test
    // rows, ridge on train rows, test rows predicted: the same work per lifetime).
    let grid: Vec<f64> = (0..20)
        .map(|i| terminal * 10f64.powf(-2.0 + 2.0 * i as f64 / 19.0))
        .collect();
    let t = Instant::now();
    let mut k2 = MondrianKernel::new(params.clone()).unwrap();
    k2.fit(&x, d).unwrap();
    let mut path = LifetimePath::new(&k2).unwrap();
    let swept = run_sweep(&mut path, &y, &spec(grid.clone(), false)).unwrap();
    let sweep20 = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut fresh_errors = Vec::new();
    for &l in &grid {
        let mut model = MondrianKernelRidge::new(KernelRidgeParams {
            kernel: KernelParams {
                lifetime: l,
                ..params.clone()
            },
            delta2: 1e-4,
            max_features: 1 << 20,
        })
        .unwrap();
        model.fit_transductive(&x, d, &y).unwrap();
        let p = model.predict(&xt, d).unwrap();
        fresh_errors.push(relative_error(&p, &yt));
    }
    let refits = t.elapsed().as_secs_f64();
    let sweep_errors: Vec<f64> = swept
        .points
        .iter()
        .map(|p| relative_error(&p.predictions[n_train..], &yt))
        .collect();
    let max_gap = sweep_errors
        .iter()
        .zip(&fresh_errors)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    println!(
        "{}",
        serde_json::json!({
            "trees": m, "terminal": terminal, "rows": x.len() / d, "events": events,
            "features_at_terminal": c,
            "sample_seconds": sample, "walk_seconds": walk,
            "gate1a_ratio": (sample + walk) / sample,
            "ridge_sweep_seconds": ridge_sweep, "dense_cholesky_seconds": dense,
            "gate1b_ratio": ridge_sweep / dense,
            "test_relative_error_at_terminal": error_at_terminal,
            "lifetimes": grid, "sweep20_seconds": sweep20, "refit20_seconds": refits,
            "features_on_grid": swept.points.iter().map(|p| p.n_features).collect::<Vec<_>>(),
            "gate2_speedup": refits / sweep20,
            "sweep_errors": sweep_errors, "refit_errors": fresh_errors,
            "max_error_gap": max_gap,
        })
    );
}
