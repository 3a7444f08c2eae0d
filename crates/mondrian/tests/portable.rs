//! The SIMD forms chosen at run time change no result (`mondrian::simd`): forests trained
//! and queried with the CPU's forms and with the portable forms forced are the same byte
//! for byte (saved models) and bit for bit (predictions). Classifier and regressor, batch
//! `fit` and point-by-point `partial_fit`, on D = 16 (stored boxes) and D = 70 (at least
//! `SET_MIN_FEATURES`, so small nodes keep point-id sets and their distances go through
//! `hull_extension_rate`).
//!
//! A test binary of its own: the switch is process-wide, and here only these tests touch
//! it, one at a time.

use mondrian::simd::{active_path, force_portable, SimdPath};
use mondrian::Persistent;
use mondrian::{
    ClassifierParams, MondrianForestClassifier, MondrianForestRegressor, PredictionMode,
    RegressorParams, Scaling,
};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

static SWITCH: Mutex<()> = Mutex::new(());

fn hold_switch() -> MutexGuard<'static, ()> {
    SWITCH.lock().unwrap_or_else(|e| e.into_inner())
}

/// Features of mixed magnitudes (feature d spans 10^(3 (d mod 5) − 8), unscaled), so that
/// f64 sums of distances in another order round differently: over a narrower span of
/// exponents, sums of f32 differences are exact in f64 in any order. The class and the
/// target depend on a few features.
fn data(n: usize, d: usize, seed: u64) -> (Vec<f64>, Vec<usize>, Vec<f64>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let scale = |k: usize| 10f64.powi(3 * (k as i32 % 5) - 8);
    let mut x = Vec::with_capacity(n * d);
    let (mut labels, mut targets) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let row: Vec<f64> = (0..d).map(|k| rng.gen::<f64>() * scale(k)).collect();
        let s = row[0] / scale(0) + row[1] / scale(1) - row[3] / scale(3);
        labels.push(if s < 0.3 {
            0
        } else if s < 0.9 {
            1
        } else {
            2
        });
        targets.push(s.sin() + 0.1 * rng.gen::<f64>());
        x.extend(row);
    }
    (x, labels, targets)
}

/// Query rows: half like the training data, half outside its range in a third of the
/// features (above or below).
fn queries(d: usize) -> Vec<f64> {
    let (mut x, _, _) = data(40, d, 99);
    for (i, v) in x.iter_mut().enumerate() {
        if (i / d) % 2 == 1 && i % 3 == 0 {
            *v = if i % 2 == 0 { *v * 4.0 } else { -*v * 3.0 };
        }
    }
    x
}

/// What a run leaves: the saved model and the bits of its predictions.
#[derive(Debug, PartialEq)]
struct Outcome {
    model: Vec<u8>,
    predictions: Vec<u64>,
}

fn bits(v: &[f64]) -> impl Iterator<Item = u64> + '_ {
    v.iter().map(|p| p.to_bits())
}

fn classifier(d: usize, online: bool) -> Outcome {
    let n = if online { 300 } else { 600 };
    let (x, y, _) = data(n, d, 1);
    let mut forest = MondrianForestClassifier::new(ClassifierParams {
        n_trees: 6,
        seed: 42,
        n_threads: 1,
        n_classes: Some(3),
        scaling: Scaling::Identity,
        ..Default::default()
    })
    .expect("valid parameters");
    if online {
        for (row, label) in x.chunks(d).zip(&y) {
            forest
                .partial_fit(row, d, &[*label])
                .expect("a valid point");
        }
    } else {
        forest.fit(&x, d, &y).expect("valid data");
    }
    let p = forest.predict_proba(&queries(d), d).expect("valid queries");
    Outcome {
        model: forest.to_bytes().expect("encodable"),
        predictions: bits(&p).collect(),
    }
}

fn regressor(d: usize, online: bool) -> Outcome {
    let n = if online { 300 } else { 600 };
    let (x, _, y) = data(n, d, 2);
    let mut forest = MondrianForestRegressor::new(RegressorParams {
        n_trees: 6,
        seed: 43,
        n_threads: 1,
        scaling: Scaling::Identity,
        // Point by point, the fast mode: exact mode re-derives every message per call.
        mode: if online {
            PredictionMode::Fast
        } else {
            PredictionMode::Exact
        },
        ..RegressorParams::thesis()
    })
    .expect("valid parameters");
    if online {
        for (row, target) in x.chunks(d).zip(&y) {
            forest
                .partial_fit(row, d, &[*target])
                .expect("a valid point");
        }
    } else {
        forest.fit(&x, d, &y).expect("valid data");
    }
    let p = forest.predict(&queries(d), d).expect("valid queries");
    Outcome {
        model: forest.to_bytes().expect("encodable"),
        predictions: bits(&p.mean).chain(bits(&p.variance)).collect(),
    }
}

/// Runs `train` with the CPU's forms and then with the portable forms forced, and asserts
/// that both leave the same outcome.
fn same_either_way(what: &str, train: impl Fn() -> Outcome) {
    let _switch = hold_switch();
    force_portable(false);
    let native_path = active_path();
    let native = train();
    force_portable(true);
    assert_eq!(active_path(), SimdPath::Portable);
    let portable = train();
    force_portable(false);
    if native_path == SimdPath::Portable {
        eprintln!("{what}: this CPU (or MONDRIAN_SIMD) runs the portable forms anyway");
    }
    assert!(
        native.model == portable.model,
        "{what}: the model saved after training with the {} forms differs from the one \
         trained with the portable forms",
        native_path.name()
    );
    assert_eq!(
        native.predictions,
        portable.predictions,
        "{what}: predictions with the {} forms differ from the portable ones",
        native_path.name()
    );
}

#[test]
fn classifier_batch_fit_is_the_same_on_every_path() {
    for d in [16, 70] {
        same_either_way(&format!("classifier fit, D = {d}"), || classifier(d, false));
    }
}

#[test]
fn classifier_partial_fit_is_the_same_on_every_path() {
    for d in [16, 70] {
        same_either_way(&format!("classifier partial_fit, D = {d}"), || {
            classifier(d, true)
        });
    }
}

#[test]
fn regressor_batch_fit_is_the_same_on_every_path() {
    for d in [16, 70] {
        same_either_way(&format!("regressor fit, D = {d}"), || regressor(d, false));
    }
}

#[test]
fn regressor_partial_fit_is_the_same_on_every_path() {
    for d in [16, 70] {
        same_either_way(&format!("regressor partial_fit, D = {d}"), || {
            regressor(d, true)
        });
    }
}

#[test]
fn the_switch_selects_the_portable_forms_and_back() {
    let _switch = hold_switch();
    force_portable(false);
    let chosen = active_path();
    force_portable(true);
    assert_eq!(active_path(), SimdPath::Portable);
    force_portable(false);
    assert_eq!(active_path(), chosen);
}

/// `MONDRIAN_SIMD=portable` is read from the environment the process starts with, so the
/// test runs itself again in a child process that has it.
#[test]
fn the_environment_variable_selects_the_portable_forms() {
    const NAME: &str = "the_environment_variable_selects_the_portable_forms";
    if std::env::var("MONDRIAN_SIMD").as_deref() == Ok("portable") {
        assert_eq!(active_path(), SimdPath::Portable);
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args(["--exact", NAME, "--test-threads", "1"])
        .env("MONDRIAN_SIMD", "portable")
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child run failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
