//! `mondrian bart eval`: BART scored on a test file (RMSE, NLPD and 90% interval coverage
//! for regression, accuracy and log-loss for probit classification), the chain's ESS, the
//! JSON report, progress on standard error, and every bad input refused with exit code 2
//! and one line on standard error. Runs are a few trees and a few hundred iterations, so
//! that the suite stays fast in a debug build.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A uniform stream in [0, 1) (splitmix64), one per `stream`.
fn uniforms(stream: u64) -> impl FnMut() -> f64 {
    let mut state = stream.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x2545_f491_4f6c_dd1d;
    move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The step function y = −1 for a < 0.5 and +1 above, plus N(0, 0.1²) noise; b is an
/// irrelevant feature. No a falls within 0.02 of the step, where a test row between the
/// two training rows either side of it could go either way.
fn step_csv(n: usize, stream: u64) -> String {
    let mut unit = uniforms(stream);
    let mut text = String::from("a,b,y\n");
    for _ in 0..n {
        let mut a = unit();
        while (a - 0.5).abs() < 0.02 {
            a = unit();
        }
        let b = unit();
        // Box–Muller.
        let noise = (-2.0 * (1.0 - unit()).ln()).sqrt() * (std::f64::consts::TAU * unit()).cos();
        let y = if a < 0.5 { -1.0 } else { 1.0 } + 0.1 * noise;
        text.push_str(&format!("{a},{b},{y}\n"));
    }
    text
}

/// Two classes labelled 3 and 5 by the line a + 0.2·b = 0.6.
fn separable_csv(n: usize, stream: u64) -> String {
    let mut unit = uniforms(stream);
    let mut text = String::from("a,b,label\n");
    for _ in 0..n {
        let (a, b) = (unit(), unit());
        let label = if a + 0.2 * b > 0.6 { 5 } else { 3 };
        text.push_str(&format!("{a},{b},{label}\n"));
    }
    text
}

const N_TEST: usize = 300;

fn step_files(dir: &Path) -> (PathBuf, PathBuf) {
    (
        write(dir, "train.csv", &step_csv(200, 1)),
        write(dir, "test.csv", &step_csv(N_TEST, 2)),
    )
}

fn class_files(dir: &Path) -> (PathBuf, PathBuf) {
    (
        write(dir, "ctrain.csv", &separable_csv(200, 3)),
        write(dir, "ctest.csv", &separable_csv(200, 4)),
    )
}

/// Small, fast settings: 10 trees, CGM, 300 iterations of which 150 are burn-in.
const FAST: [&str; 8] = [
    "--trees",
    "10",
    "--sampler",
    "cgm",
    "--iters",
    "300",
    "--burn-in",
    "150",
];

/// `mondrian bart eval --train … --test …` with extra arguments, killed after two minutes
/// so that a hang fails the suite.
fn eval(train: &Path, test: &Path, extra: &[&str]) -> assert_cmd::Command {
    let mut cmd = mondrian();
    cmd.args(["bart", "eval", "--train"])
        .arg(train)
        .arg("--test")
        .arg(test)
        .args(extra)
        .timeout(Duration::from_secs(120));
    cmd
}

fn eval_json(train: &Path, test: &Path, extra: &[&str]) -> serde_json::Value {
    last_json(eval(train, test, extra).arg("--json"))
}

fn number(out: &serde_json::Value, key: &str) -> f64 {
    let v = out[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing: {out}"));
    assert!(v.is_finite(), "{key}: {out}");
    v
}

#[test]
fn a_step_function_is_learnt_with_calibrated_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = step_files(dir.path());
    let out = eval_json(&train, &test, &[&FAST[..], &["--seed", "7"]].concat());
    for key in [
        "rmse",
        "nlpd",
        "coverage_90",
        "ess",
        "ess_per_second",
        "seconds",
        "fit_seconds",
        "sampler_seconds",
        "kept_seconds",
        "mean_leaves",
        "sigma",
    ] {
        number(&out, key);
    }
    assert_eq!(out["task"], "regression");
    // The noise sd is 0.1; the step is two leaves, so the RMSE is close to it.
    let rmse = number(&out, "rmse");
    assert!(rmse < 0.15, "{out}");
    // N(y; ±1, 0.1²) has mean −log density 0.5 ln(2π·0.01) + 0.5 = −0.88: the posterior
    // predictive comes near it.
    let nlpd = number(&out, "nlpd");
    assert!((-1.0..-0.6).contains(&nlpd), "{out}");
    // 90% intervals cover 90% of 300 targets, binomial sd √(0.9·0.1/300) = 0.017: allow
    // 4 sd either side.
    let coverage = number(&out, "coverage_90");
    let sd = (0.9f64 * 0.1 / N_TEST as f64).sqrt();
    assert!((coverage - 0.9).abs() < 4.0 * sd, "{out}");
    assert!((number(&out, "sigma") - 0.1).abs() < 0.03, "{out}");
    let ess = number(&out, "ess");
    assert!(ess > 0.0 && ess <= 150.0 * 1.5, "{out}");
    let kept = number(&out, "kept_seconds");
    assert!((number(&out, "ess_per_second") - ess / kept).abs() <= 1e-9 * ess / kept);
    assert!(number(&out, "sampler_seconds") >= kept);
    assert!(number(&out, "seconds") >= number(&out, "fit_seconds"));
    assert!(number(&out, "mean_leaves") >= 1.0);
    for (key, value) in [
        ("trees", serde_json::json!(10)),
        ("sampler", serde_json::json!("cgm")),
        ("particles", serde_json::Value::Null),
        ("iters", serde_json::json!(300)),
        ("burn_in", serde_json::json!(150)),
        ("n_draws", serde_json::json!(150)),
        ("seed", serde_json::json!(7)),
        ("alpha_s", serde_json::json!(0.95)),
        ("beta_s", serde_json::json!(2.0)),
        ("n_train", serde_json::json!(200)),
        ("n_test", serde_json::json!(N_TEST)),
        ("n_features", serde_json::json!(2)),
    ] {
        assert_eq!(out[key], value, "{key}: {out}");
    }
}

#[test]
fn every_sampler_runs_and_the_prior_flags_reach_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = step_files(dir.path());
    let short = ["--trees", "5", "--iters", "60", "--burn-in", "30"];
    let pg = eval_json(&train, &test, &[&short[..], &["--particles", "4"]].concat());
    assert_eq!(
        (pg["sampler"].as_str(), pg["particles"].as_u64()),
        (Some("pg"), Some(4))
    );
    let gp = eval_json(
        &train,
        &test,
        &[&short[..], &["--sampler", "growprune"]].concat(),
    );
    assert_eq!(gp["sampler"], "growprune");
    for out in [&pg, &gp] {
        assert!(number(out, "rmse") < 0.5, "{out}");
        number(out, "ess");
    }
    // The hypercube settings of spec §5.3: one tree, β_s per D, and the σ² prior.
    let one = eval_json(
        &train,
        &test,
        &[
            "--trees",
            "1",
            "--sampler",
            "cgm",
            "--iters",
            "200",
            "--burn-in",
            "100",
            "--beta-s",
            "1.0",
            "--alpha-s",
            "0.9",
            "--k",
            "3",
            "--nu",
            "5",
            "--q",
            "0.75",
        ],
    );
    for (key, value) in [
        ("trees", 1.0),
        ("beta_s", 1.0),
        ("alpha_s", 0.9),
        ("k", 3.0),
        ("nu", 5.0),
        ("q", 0.75),
    ] {
        assert_eq!(out_f64(&one, key), value, "{key}: {one}");
    }
    // A single tree finds the step: two leaves or a few more.
    assert!(number(&one, "rmse") < 0.2, "{one}");
    assert!(number(&one, "mean_leaves") >= 2.0, "{one}");
    // The reference code's σ² prior (A11) is another chain on the same data.
    let refcode = eval_json(
        &train,
        &test,
        &[&short[..], &["--noise-prior", "refcode"]].concat(),
    );
    assert_eq!(refcode["noise_prior"], "refcode");
    assert_eq!(pg["noise_prior"], "chipman");
    assert!(number(&refcode, "rmse") < 0.5, "{refcode}");
    assert_ne!(number(&refcode, "sigma"), number(&pg, "sigma"));
}

fn out_f64(out: &serde_json::Value, key: &str) -> f64 {
    out[key].as_f64().unwrap_or(f64::NAN)
}

#[test]
fn the_chain_follows_the_seed_not_the_threads() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = step_files(dir.path());
    let run = |threads: &str, seed: &str| {
        let out = eval_json(
            &train,
            &test,
            &[&FAST[..], &["--threads", threads, "--seed", seed]].concat(),
        );
        (
            out_f64(&out, "rmse"),
            out_f64(&out, "nlpd"),
            out_f64(&out, "coverage_90"),
            out_f64(&out, "ess"),
        )
    };
    let one = run("1", "5");
    assert_eq!(one, run("3", "5"));
    assert_eq!(one, run("0", "5"));
    assert_ne!(one, run("1", "6"));
}

#[test]
fn two_integer_classes_are_probit_classification() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = class_files(dir.path());
    let out = eval_json(&train, &test, &FAST);
    assert_eq!(out["task"], "classification");
    assert_eq!(out["classes"], serde_json::json!([3, 5]));
    // One oblique line: a sum of axis-aligned trees gets nearly every test row.
    let accuracy = number(&out, "accuracy");
    assert!(accuracy > 0.93, "{out}");
    let log_loss = number(&out, "log_loss");
    assert!(log_loss > 0.0 && log_loss < 0.25, "{out}");
    assert_eq!(number(&out, "nlpd"), log_loss);
    assert!(number(&out, "rmse") < 0.3, "{out}");
    assert!(out["coverage_90"].is_null());
    number(&out, "ess");
    // Text output, and the progress lines on standard error.
    let text = eval(&train, &test, &FAST).output().unwrap();
    assert!(text.status.success());
    let stdout = String::from_utf8(text.stdout).unwrap();
    assert!(
        stdout.contains("test accuracy") && stdout.contains("ESS"),
        "{stdout}"
    );
    let stderr = String::from_utf8(text.stderr).unwrap();
    assert!(
        stderr.contains("bart: classification, 10 trees (cgm), 300 iterations")
            && stderr.contains("bart: 300 iterations in"),
        "{stderr}"
    );
    // The same labels as real numbers are regression when --task says.
    let reg = eval_json(
        &train,
        &test,
        &[&FAST[..], &["--task", "regression"]].concat(),
    );
    assert_eq!(reg["task"], "regression");
    assert!(number(&reg, "rmse") < 1.0, "{reg}");
}

#[test]
fn bad_inputs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (train, test) = step_files(d);
    let (ctrain, ctest) = class_files(d);
    fails_with(&mut eval(&train, &test, &["--trees", "0"]), "--trees 0");
    fails_with(
        &mut eval(&train, &test, &["--particles", "0"]),
        "--particles 0",
    );
    fails_with(
        &mut eval(&train, &test, &["--iters", "100", "--burn-in", "100"]),
        "--burn-in 100: must be less than --iters (100)",
    );
    fails_with(
        &mut eval(&train, &test, &["--iters", "10", "--burn-in", "20"]),
        "--burn-in 20",
    );
    fails_with(
        &mut eval(&train, &test, &["--iters", "0", "--burn-in", "0"]),
        "--iters 0",
    );
    fails_with(
        &mut eval(&train, &test, &["--sampler", "cgm", "--particles", "5"]),
        "--particles applies to --sampler pg only",
    );
    fails_with(&mut eval(&train, &test, &["--q", "1"]), "--q");
    fails_with(&mut eval(&train, &test, &["--k", "0"]), "--k");
    fails_with(&mut eval(&train, &test, &["--alpha-s", "1.5"]), "--alpha-s");
    fails_with(
        &mut eval(&train, &test, &["--sampler", "magic"]),
        "invalid value 'magic'",
    );
    // Missing files.
    fails_with(&mut eval(&d.join("missing.csv"), &test, &[]), "cannot read");
    fails_with(
        &mut eval(&train, &d.join("missing.csv"), &[]),
        "cannot read",
    );
    // NaN in either file.
    let nan = write(d, "nan.csv", "a,b,y\n0.1,nan,1.5\n0.2,0.3,0.5\n");
    fails_with(&mut eval(&nan, &test, &[]), "not a finite number");
    fails_with(&mut eval(&train, &nan, &[]), "not a finite number");
    // Labels that do not fit classification: three classes, real numbers, a test class
    // the training file lacks.
    let three = write(
        d,
        "three.csv",
        "a,b,label\n0.1,0.2,0\n0.3,0.4,1\n0.5,0.6,2\n",
    );
    fails_with(
        &mut eval(&three, &ctest, &["--task", "classification"]),
        "needs exactly two classes; the training labels have 3 (0, 1, 2)",
    );
    fails_with(
        &mut eval(&train, &test, &["--task", "classification"]),
        "classification needs integer class labels",
    );
    let unknown = write(d, "unknown.csv", "a,b,label\n0.1,0.2,3\n0.3,0.4,9\n");
    fails_with(&mut eval(&ctrain, &unknown, &[]), "data row 2 has label 9");
    // Targets that are all equal leave BART's prior uncalibrated.
    let flat = write(
        d,
        "flat.csv",
        "a,b,y\n0.1,0.2,1.5\n0.3,0.4,1.5\n0.5,0.6,1.5\n",
    );
    fails_with(
        &mut eval(&flat, &test, &["--task", "regression"]),
        "all equal",
    );
    // The test file must have the training file's columns.
    let wide = write(d, "wide.csv", "a,b,c,y\n0.1,0.2,0.3,1\n");
    fails_with(&mut eval(&train, &wide, &[]), "wide.csv");
}
