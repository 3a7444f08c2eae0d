//! `mondrian smc eval`: SMC decision trees scored on a test file, the task chosen from the
//! labels or by `--task`, the JSON report, the same run on any number of threads, and
//! every bad input refused with exit code 2 and one line on standard error.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Rows of two features in [0, 1) from a fixed sequence, labelled 0..3 by two axis-aligned
/// cuts and a diagonal: x0 + x1 > 1 adds 1, x0 > 0.8 adds 2 (classes 0, 1, 2, 3).
fn classes_csv(n: usize, stream: u64) -> String {
    let mut state = stream.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x2545_f491_4f6c_dd1d;
    let mut unit = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut text = String::from("a,b,label\n");
    for _ in 0..n {
        let (a, b) = (unit(), unit());
        let label = u8::from(a + b > 1.0) + 2 * u8::from(a > 0.8);
        text.push_str(&format!("{a},{b},{label}\n"));
    }
    text
}

/// A 300-row training file and a 200-row test file of [`classes_csv`].
fn class_files(dir: &Path) -> (PathBuf, PathBuf) {
    (
        write(dir, "train.csv", &classes_csv(300, 1)),
        write(dir, "test.csv", &classes_csv(200, 2)),
    )
}

/// `mondrian smc eval --train … --test …` with extra arguments, killed after two minutes
/// (every run here takes well under a second), so that a hang fails the suite.
fn eval(train: &Path, test: &Path, extra: &[&str]) -> assert_cmd::Command {
    let mut cmd = mondrian();
    cmd.args(["smc", "eval", "--train"])
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

#[test]
fn classification_reports_accuracy_log_predictive_evidence_and_settings() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = class_files(dir.path());
    let out = eval_json(&train, &test, &["--particles", "50", "--seed", "3"]);
    assert_eq!(out["task"], "classification");
    assert_eq!(out["n_classes"], 4);
    assert_eq!(
        (out["n_train"].as_u64(), out["n_test"].as_u64()),
        (Some(300), Some(200))
    );
    // Three cuts explain the labels: trees find them (a majority-class guess scores 0.5).
    let accuracy = out["accuracy"].as_f64().unwrap();
    assert!(accuracy > 0.8, "{out}");
    // The mean log predictive probability beats the uniform 4-class ln(1/4) = −1.39.
    let lp = out["log_predictive"].as_f64().unwrap();
    assert!(lp < 0.0 && lp > -0.7, "{out}");
    let evidence = out["log_evidence"].as_f64().unwrap();
    assert!(evidence < 0.0 && evidence > 300.0 * -(4f64.ln()), "{out}");
    assert!(out["seconds"].as_f64().unwrap() >= out["fit_seconds"].as_f64().unwrap());
    for (key, value) in [
        ("particles", serde_json::json!(50)),
        ("islands", serde_json::json!(1)),
        ("proposal", serde_json::json!("prior")),
        ("expansion", serde_json::json!("breadth-first")),
        ("seed", serde_json::json!(3)),
        ("alpha_split", serde_json::json!(0.95)),
        ("beta_split", serde_json::json!(0.5)),
    ] {
        assert_eq!(out[key], value, "{key}: {out}");
    }
    let trees = out["distinct_trees"].as_u64().unwrap();
    assert!((1..=50).contains(&trees), "{out}");
    assert_eq!(out["truncated"], false);
}

#[test]
fn every_proposal_and_expansion_runs_and_islands_share_the_particles() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = class_files(dir.path());
    for proposal in ["prior", "empirical", "optimal"] {
        for expansion in ["breadth-first", "min-marginal", "layer-wise"] {
            let out = eval_json(
                &train,
                &test,
                &[
                    "--particles",
                    "24",
                    "--islands",
                    "3",
                    "--proposal",
                    proposal,
                    "--expansion",
                    expansion,
                    "--threads",
                    "1",
                ],
            );
            assert_eq!(out["proposal"], proposal);
            assert_eq!(out["expansion"], expansion);
            // 8 particles an island: the blind proposals find a cut or two (a majority
            // guess scores about 0.45), the optimal one finds them all.
            let floor = if proposal == "optimal" { 0.8 } else { 0.55 };
            assert!(out["accuracy"].as_f64().unwrap() > floor, "{out}");
            assert!(out["log_evidence"].as_f64().unwrap().is_finite());
        }
    }
}

#[test]
fn the_result_does_not_depend_on_threads_and_follows_the_seed() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = class_files(dir.path());
    let run = |threads: &str, seed: &str| {
        let out = eval_json(
            &train,
            &test,
            &[
                "--particles",
                "40",
                "--islands",
                "2",
                "--threads",
                threads,
                "--seed",
                seed,
            ],
        );
        (
            out["accuracy"].as_f64().unwrap(),
            out["log_predictive"].as_f64().unwrap(),
            out["log_evidence"].as_f64().unwrap(),
        )
    };
    let one = run("1", "5");
    assert_eq!(one, run("2", "5"));
    assert_eq!(one, run("0", "5"));
    assert_ne!(one, run("1", "6"));
}

#[test]
fn real_targets_are_regression_and_report_rmse() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = regression_train_test(dir.path());
    let out = eval_json(
        &train,
        &test,
        &["--particles", "40", "--proposal", "optimal"],
    );
    assert_eq!(out["task"], "regression");
    // y = 3a − b + 0.1 sin(7a) on [0, 1)²: s.d. about 0.95; trees bring it well down.
    let rmse = out["rmse"].as_f64().unwrap();
    assert!(rmse < 0.35, "{out}");
    assert!(out["accuracy"].is_null());
    let lp = out["log_predictive"].as_f64().unwrap();
    assert!(lp.is_finite() && lp > -1.0, "{out}");
    assert!(out["log_evidence"].as_f64().unwrap().is_finite());
    assert!(out["mean_std"].as_f64().unwrap() > 0.0);
    // Text output says the same.
    let text = eval(
        &train,
        &test,
        &["--particles", "40", "--proposal", "optimal"],
    )
    .output()
    .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("test RMSE") && text.contains("log evidence"),
        "{text}"
    );
}

#[test]
fn the_task_flag_overrides_the_labels() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = class_files(dir.path());
    let out = eval_json(
        &train,
        &test,
        &["--task", "regression", "--particles", "20"],
    );
    assert_eq!(out["task"], "regression");
    assert!(out["rmse"].as_f64().unwrap() < 1.0);
    // Real targets cannot be classes.
    let (rtrain, rtest) = regression_train_test(dir.path());
    fails_with(
        &mut eval(&rtrain, &rtest, &["--task", "classification"]),
        "classification needs integer class labels",
    );
}

#[test]
fn bad_inputs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = class_files(dir.path());
    let d = dir.path();
    fails_with(
        &mut eval(&train, &test, &["--particles", "0"]),
        "--particles 0",
    );
    fails_with(
        &mut eval(&train, &test, &["--particles", "4", "--islands", "5"]),
        "--islands 5",
    );
    fails_with(
        &mut eval(&train, &test, &["--alpha-split", "1.5"]),
        "--alpha-split",
    );
    fails_with(
        &mut eval(&train, &test, &["--ess-threshold", "2"]),
        "--ess-threshold",
    );
    fails_with(&mut eval(&train, &test, &["--alpha", "0"]), "--alpha");
    fails_with(&mut eval(&d.join("missing.csv"), &test, &[]), "cannot read");
    fails_with(
        &mut eval(&train, &d.join("missing.csv"), &[]),
        "cannot read",
    );
    let nan = write(d, "nan.csv", "a,b,label\n0.1,nan,1\n0.2,0.3,0\n");
    fails_with(&mut eval(&nan, &test, &[]), "not a finite number");
    fails_with(&mut eval(&train, &nan, &[]), "not a finite number");
    // A test label the training file never had.
    let unknown = write(d, "unknown.csv", "a,b,label\n0.1,0.2,1\n0.3,0.4,9\n");
    fails_with(&mut eval(&train, &unknown, &[]), "data row 2 has label 9");
    // A real label in the test file of a classification task.
    let real = write(d, "real.csv", "a,b,label\n0.1,0.2,1.5\n");
    fails_with(&mut eval(&train, &real, &[]), "is not an integer");
    // The test file must have the training file's columns.
    let wide = write(d, "wide.csv", "a,b,c,label\n0.1,0.2,0.3,1\n");
    fails_with(&mut eval(&train, &wide, &[]), "wide.csv");
    fails_with(
        &mut eval(&train, &test, &["--proposal", "magic"]),
        "invalid value 'magic'",
    );
}
