//! `mondrian kernel eval | fit | predict | transform`: ridge regression on Mondrian kernel
//! features, the lifetime search, the LIBSVM features, and every bad input or model file
//! refused with exit code 2, one line on standard error, and nothing written.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Rows of `y = sin(4·x0) + x2 + noise` (noise uniform in ±0.05, x1 irrelevant), the
/// features uniform in [0, 1): the CSV text and the targets as written.
fn sine_data(n: usize, stream: u64) -> (String, Vec<f64>) {
    // SplitMix64: a fixed pseudo-random sequence, the same on every machine.
    let mut state = stream.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x2545_f491_4f6c_dd1d;
    let mut unit = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut text = String::from("x0,x1,x2,y\n");
    let mut ys = Vec::with_capacity(n);
    for _ in 0..n {
        let (x0, x1, x2) = (unit(), unit(), unit());
        let y = (4.0 * x0).sin() + x2 + 0.1 * (unit() - 0.5);
        text.push_str(&format!("{x0},{x1},{x2},{y}\n"));
        ys.push(y);
    }
    (text, ys)
}

/// A 200-row training file and a 100-row test file from independent streams, with their
/// targets.
struct Data {
    train: PathBuf,
    test: PathBuf,
    train_y: Vec<f64>,
    test_y: Vec<f64>,
}

fn data(dir: &Path) -> Data {
    let (train, train_y) = sine_data(200, 1);
    let (test, test_y) = sine_data(100, 2);
    Data {
        train: write(dir, "train.csv", &train),
        test: write(dir, "test.csv", &test),
        train_y,
        test_y,
    }
}

fn std_dev(v: &[f64]) -> f64 {
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    (v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / v.len() as f64).sqrt()
}

/// `mondrian kernel <sub> …`, killed after a minute (every run here takes well under a
/// second), so that a hang fails instead of stalling the suite.
fn kernel(sub: &str) -> assert_cmd::Command {
    let mut cmd = mondrian();
    cmd.args(["kernel", sub]).timeout(Duration::from_secs(60));
    cmd
}

/// `mondrian kernel eval --json` on the data with extra arguments: the last line's JSON.
fn eval_json(d: &Data, extra: &[&str]) -> serde_json::Value {
    last_json(
        kernel("eval")
            .arg("--train")
            .arg(&d.train)
            .arg("--test")
            .arg(&d.test)
            .arg("--json")
            .args(extra),
    )
}

/// `mondrian kernel fit` of `train` into `model` with extra arguments, which must succeed.
fn fit(train: &Path, model: &Path, extra: &[&str]) {
    kernel("fit")
        .arg("--train")
        .arg(train)
        .arg("--model")
        .arg(model)
        .args(extra)
        .assert()
        .success();
}

/// `mondrian kernel predict` of `input` with `model`: standard output, which must come
/// from a successful run.
fn predict(model: &Path, input: &Path, extra: &[&str]) -> String {
    let out = kernel("predict")
        .arg("--model")
        .arg(model)
        .arg("--input")
        .arg(input)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A LIBSVM line: the label and the `(index, value)` entries.
type SvmRow = (f64, Vec<(usize, f64)>);

/// Parses one LIBSVM line.
fn libsvm_line(line: &str) -> SvmRow {
    let mut tokens = line.split_whitespace();
    let label = tokens.next().unwrap().parse().unwrap();
    let entries = tokens
        .map(|t| {
            let (i, v) = t.split_once(':').unwrap_or_else(|| panic!("{t} in {line}"));
            (i.parse().unwrap(), v.parse().unwrap())
        })
        .collect();
    (label, entries)
}

/// `mondrian kernel transform` of `input` into `output` with extra arguments: the rows of
/// the LIBSVM file and the feature count C printed (`… rows, C features …`).
fn transform(model: &Path, input: &Path, output: &Path, extra: &[&str]) -> (Vec<SvmRow>, usize) {
    let out = kernel("transform")
        .arg("--model")
        .arg(model)
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(output)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = String::from_utf8(out.stdout).unwrap();
    let n_cols = summary
        .split(", ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no feature count in {summary}"));
    let text = std::fs::read_to_string(output).unwrap();
    (text.lines().map(libsvm_line).collect(), n_cols)
}

/// A refusal: exit code 2, one line `error: …` naming `needle`, no panic, nothing on
/// standard output.
fn refused(cmd: &mut assert_cmd::Command, needle: &str) {
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "expected `{needle}` in: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

// ---------------------------------------------------------------------------------
// eval

#[test]
fn eval_at_one_lifetime_learns_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let d = data(dir.path());
    let spread = std_dev(&d.test_y);
    for transductive in [false, true] {
        let mut args = vec!["--lifetime", "3", "--trees", "10"];
        if transductive {
            args.push("--transductive");
        }
        let v = eval_json(&d, &args);
        for key in ["rmse", "relative_error", "seconds", "fit_seconds"] {
            assert!(v[key].as_f64().is_some_and(f64::is_finite), "{key}: {v}");
        }
        let rmse = v["rmse"].as_f64().unwrap();
        // The targets spread with s.d. ≈ 0.6; predicting their mean scores that.
        assert!(
            rmse > 0.0 && rmse < spread,
            "rmse {rmse}, s.d. {spread}: {v}"
        );
        // relative error = 100·‖ŷ − y‖/‖y‖ = 100·rmse·√n/‖y‖.
        let norm = d.test_y.iter().map(|y| y * y).sum::<f64>().sqrt();
        let expected = 100.0 * rmse * (d.test_y.len() as f64).sqrt() / norm;
        let relative = v["relative_error"].as_f64().unwrap();
        assert!((relative - expected).abs() < 1e-9 * expected, "{v}");
        assert_eq!(v["lifetime"].as_f64(), Some(3.0), "{v}");
        // Every tree has at least one cell, so at least M features.
        assert!(v["n_features"].as_u64().unwrap() >= 10, "{v}");
        assert!(v["seconds"].as_f64().unwrap() >= v["fit_seconds"].as_f64().unwrap());
        assert_eq!(v["n_train"], 200);
        assert_eq!(v["n_test"], 100);
        assert_eq!(v["trees"], 10);
        assert_eq!(v["seed"], 0);
        assert_eq!(v["transductive"], transductive);
        assert!(v.get("sweep").is_none(), "no sweep was asked: {v}");
    }
}

#[test]
fn eval_sweep_chooses_the_lifetime_with_the_lowest_score() {
    let dir = tempfile::tempdir().unwrap();
    let d = data(dir.path());
    let spread = std_dev(&d.test_y);
    for (criterion, name) in [
        ("validation", "validation_mse"),
        ("evidence", "minus_log_marginal_likelihood"),
    ] {
        let v = eval_json(
            &d,
            &[
                "--sweep",
                "0.3:30",
                "--steps",
                "8",
                "--trees",
                "4",
                "--criterion",
                criterion,
            ],
        );
        let sweep = &v["sweep"];
        assert_eq!(sweep["criterion"], name, "{v}");
        let lifetimes: Vec<f64> = sweep["lifetimes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_f64().unwrap())
            .collect();
        let scores: Vec<f64> = sweep["scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_f64().unwrap_or(f64::NAN))
            .collect();
        assert_eq!(lifetimes.len(), 8, "{v}");
        assert_eq!(scores.len(), 8, "{v}");
        // From LO to HI exactly, log-spaced: a constant ratio (30/0.3)^(1/7).
        assert_eq!(lifetimes[0], 0.3, "{v}");
        assert_eq!(lifetimes[7], 30.0, "{v}");
        let ratio = 100f64.powf(1.0 / 7.0);
        for w in lifetimes.windows(2) {
            assert!(w[1] > w[0], "{lifetimes:?}");
            assert!((w[1] / w[0] - ratio).abs() < 1e-9, "{lifetimes:?}");
        }
        assert!(scores.iter().all(|s| s.is_finite()), "{scores:?}");
        let best = (0..8)
            .min_by(|&a, &b| scores[a].total_cmp(&scores[b]))
            .unwrap();
        assert_eq!(v["lifetime"].as_f64(), Some(lifetimes[best]), "{v}");
        let rmse = v["rmse"].as_f64().unwrap();
        assert!(rmse.is_finite(), "{v}");
        if criterion == "validation" {
            // Held-out error picks a lifetime that learns the target.
            assert!(rmse < spread, "rmse {rmse}, s.d. {spread}: {v}");
        }
        assert!(v["n_features"].as_u64().unwrap() >= 4, "{v}");
        assert_eq!(v["trees"], 4);
    }
}

#[test]
fn eval_text_reports_the_test_rmse() {
    let dir = tempfile::tempdir().unwrap();
    let d = data(dir.path());
    let args = ["--lifetime", "3", "--trees", "10"];
    let rmse = eval_json(&d, &args)["rmse"].as_f64().unwrap();
    let text = |extra: &[&str]| {
        let out = kernel("eval")
            .arg("--train")
            .arg(&d.train)
            .arg("--test")
            .arg(&d.test)
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let one = text(&args);
    let last = one.lines().last().unwrap();
    assert!(
        last.starts_with(&format!("test RMSE {rmse:.4}, relative error ")),
        "{one}"
    );
    assert!(
        last.contains("on 100 rows") && last.contains("10 trees"),
        "{one}"
    );
    // A search lists every lifetime and marks the chosen one.
    let searched = text(&["--sweep", "0.3:30", "--steps", "8", "--trees", "4"]);
    assert_eq!(searched.lines().filter(|l| l.contains("λ = ")).count(), 9);
    assert_eq!(searched.matches("<- chosen").count(), 1, "{searched}");
    assert!(
        searched.lines().last().unwrap().starts_with("test RMSE "),
        "{searched}"
    );
}

#[test]
fn eval_refuses_bad_arguments_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = data(dir.path());
    let cases: [(&[&str], &str); 13] = [
        (
            &["--lifetime", "0"],
            "`lifetime`: 0 is not a finite positive number",
        ),
        (
            &["--lifetime", "-1"],
            "`lifetime`: -1 is not a finite positive number",
        ),
        (
            &["--lifetime", "nan"],
            "`lifetime`: NaN is not a finite positive number",
        ),
        (
            &["--lifetime", "inf"],
            "`lifetime`: inf is not a finite positive number",
        ),
        (
            &["--sweep", "1:1"],
            "--sweep 1:1: expected LO:HI with 0 < LO < HI",
        ),
        (
            &["--sweep", "2:1"],
            "--sweep 2:1: expected LO:HI with 0 < LO < HI",
        ),
        (
            &["--sweep", "abc"],
            "--sweep abc: expected LO:HI with 0 < LO < HI",
        ),
        (
            &["--sweep", "0:1"],
            "--sweep 0:1: expected LO:HI with 0 < LO < HI",
        ),
        (
            &["--sweep", "-1:2"],
            "--sweep -1:2: expected LO:HI with 0 < LO < HI",
        ),
        (
            &["--sweep", "0.3:30", "--steps", "1"],
            "--steps 1: expected 2 to 10000 lifetimes",
        ),
        (
            &["--sweep", "0.3:30", "--steps", "1000000"],
            "--steps 1000000: expected 2 to 10000 lifetimes",
        ),
        (
            &[],
            "give the lifetime (--lifetime L) or a range to search (--sweep LO:HI)",
        ),
        (
            &["--lifetime", "3", "--trees", "0"],
            "`n_trees`: at least one tree",
        ),
    ];
    for (args, needle) in cases {
        refused(
            kernel("eval")
                .arg("--train")
                .arg(&d.train)
                .arg("--test")
                .arg(&d.test)
                .args(args),
            needle,
        );
    }
}

#[test]
fn eval_and_fit_refuse_bad_files_and_write_no_model() {
    let dir = tempfile::tempdir().unwrap();
    let d = data(dir.path());
    let p = dir.path();
    let narrow = write(p, "narrow.csv", "x0,x1,y\n0.1,0.2,1\n0.3,0.4,2\n");
    let wide = write(p, "wide.csv", "x0,x1,x2,x3,y\n0.1,0.2,0.3,0.4,1\n");
    refused(
        kernel("eval")
            .arg("--train")
            .arg(&d.train)
            .arg("--test")
            .arg(&narrow)
            .args(["--lifetime", "1"]),
        "narrow.csv:1: expected 4 columns (3 features + the label), found 3",
    );
    refused(
        kernel("eval")
            .arg("--train")
            .arg(&d.train)
            .arg("--test")
            .arg(&wide)
            .args(["--lifetime", "1"]),
        "wide.csv:1: expected 4 columns (3 features + the label), found 5",
    );
    let nan = write(
        p,
        "nan.csv",
        "x0,x1,x2,y\n0.1,0.2,0.3,1\n0.5,nan,0.2,1\n0.3,0.4,0.5,2\n",
    );
    let header_only = write(p, "header.csv", "x0,x1,x2,y\n");
    let bad_train = [
        (
            &nan,
            "nan.csv:3: column 2 (`x1`): `nan` is not a finite number",
        ),
        (
            &header_only,
            "header.csv:1: the file has a header row but no data rows",
        ),
    ];
    let model = p.join("k.bin");
    for (train, needle) in bad_train {
        refused(
            kernel("eval")
                .arg("--train")
                .arg(train)
                .arg("--test")
                .arg(&d.test)
                .args(["--lifetime", "1"]),
            needle,
        );
        refused(
            kernel("fit")
                .arg("--train")
                .arg(train)
                .arg("--model")
                .arg(&model),
            needle,
        );
        assert!(!model.exists(), "a refused fit wrote {}", model.display());
    }
    // Bad parameters: no model either, and an old one stays as it was.
    std::fs::write(&model, "keep me\n").unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["--lifetime", "0"], "`lifetime`: 0 is not"),
        (&["--lifetime", "-2"], "`lifetime`: -2 is not"),
        (&["--trees", "0"], "`n_trees`"),
        (&["--delta2", "0"], "`delta2`"),
    ];
    for (args, needle) in cases {
        refused(
            kernel("fit")
                .arg("--train")
                .arg(&d.train)
                .arg("--model")
                .arg(&model)
                .args(args),
            needle,
        );
        assert_eq!(std::fs::read_to_string(&model).unwrap(), "keep me\n");
    }
}

#[test]
fn absurd_tree_and_thread_counts_are_refused_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let d = data(dir.path());
    let model = dir.path().join("k.bin");
    let eval = |extra: &[&str]| {
        let mut cmd = kernel("eval");
        cmd.timeout(Duration::from_secs(20))
            .arg("--train")
            .arg(&d.train)
            .arg("--test")
            .arg(&d.test)
            .args(["--lifetime", "1"])
            .args(extra);
        cmd
    };
    let fit = |extra: &[&str]| {
        let mut cmd = kernel("fit");
        cmd.timeout(Duration::from_secs(20))
            .arg("--train")
            .arg(&d.train)
            .arg("--model")
            .arg(&model)
            .args(extra);
        cmd
    };
    // Ten billion trees would abort the process on a failed allocation: the library's
    // memory guard refuses them before the trees grow.
    let trees = ["--trees", "10000000000"];
    refused(&mut eval(&trees), "10000000000 trees");
    refused(&mut fit(&trees), "10000000000 trees");
    assert!(!model.exists());
    // 100,000 threads would take many minutes to start (the timeout turns a hang into a
    // failure): refused as every other command refuses them, before the data are read.
    let threads = ["--threads", "100000"];
    fails_with(
        &mut eval(&threads),
        "is not a thread count from 0 (all cores) to",
    );
    fails_with(
        &mut fit(&threads),
        "is not a thread count from 0 (all cores) to",
    );
    assert!(!model.exists());
    // --lifetime and --sweep together are a usage error too.
    fails_with(&mut eval(&["--sweep", "1:2"]), "cannot be used with");
}

// ---------------------------------------------------------------------------------
// fit, transform, predict

#[test]
fn transform_gives_every_training_row_one_feature_per_tree() {
    let dir = tempfile::tempdir().unwrap();
    let d = data(dir.path());
    let model = dir.path().join("k.bin");
    fit(&d.train, &model, &["--lifetime", "3", "--trees", "10"]);
    let out = dir.path().join("features.svm");
    let (rows, n_cols) = transform(&model, &d.train, &out, &[]);
    assert_eq!(rows.len(), 200, "one line per input row");
    let value = 1.0 / 10f64.sqrt();
    for (i, (label, entries)) in rows.iter().enumerate() {
        assert_eq!(*label, d.train_y[i], "row {i}: the label is the target");
        assert_eq!(entries.len(), 10, "row {i}: {entries:?}");
        for w in entries.windows(2) {
            assert!(w[0].0 < w[1].0, "row {i}: indices increase: {entries:?}");
        }
        for &(idx, v) in entries {
            assert!(
                (1..=n_cols).contains(&idx),
                "row {i}: index {idx} of {n_cols}"
            );
            assert!((v - value).abs() < 1e-12, "row {i}: {v}");
        }
    }
    // Every feature is some training row's (the features are the trees' cells).
    let mut used = vec![false; n_cols];
    for (_, entries) in &rows {
        for &(idx, _) in entries {
            used[idx - 1] = true;
        }
    }
    assert!(used.iter().all(|&u| u), "a cell holds no training row");

    // New rows far from the data: the exact extension puts them in cells of their own
    // (no feature), routing by the cuts gives them one per tree. No target column: label 0.
    let far = write(
        dir.path(),
        "far.csv",
        "x0,x1,x2\n100,100,100\n-50,0.5,0.5\n0.5,0.5,0.5\n",
    );
    let (exact, _) = transform(&model, &far, &out, &[]);
    assert_eq!(exact.len(), 3);
    assert!(exact[0].1.is_empty() && exact[1].1.is_empty(), "{exact:?}");
    let (routed, routed_cols) = transform(&model, &far, &out, &["--route"]);
    assert_eq!(routed_cols, n_cols);
    assert_eq!(routed.len(), 3);
    for (label, entries) in &routed {
        assert_eq!(*label, 0.0);
        assert_eq!(entries.len(), 10, "{entries:?}");
        assert!(entries.windows(2).all(|w| w[0].0 < w[1].0), "{entries:?}");
        assert!(entries
            .iter()
            .all(|&(i, v)| i >= 1 && i <= n_cols && (v - value).abs() < 1e-12));
    }
}

#[test]
fn predict_writes_means_and_with_std_positive_deviations() {
    let dir = tempfile::tempdir().unwrap();
    let d = data(dir.path());
    let model = dir.path().join("k.bin");
    fit(&d.train, &model, &["--lifetime", "3", "--trees", "10"]);
    let means = predict(&model, &d.test, &[]);
    let means: Vec<&str> = means.lines().collect();
    assert_eq!(means.len(), 100);
    let out = dir.path().join("p.csv");
    assert!(predict(
        &model,
        &d.test,
        &["--std", "--output", out.to_str().unwrap()]
    )
    .is_empty());
    let with_std = std::fs::read_to_string(&out).unwrap();
    let with_std: Vec<&str> = with_std.lines().collect();
    assert_eq!(with_std.len(), 100);
    let mut sq = 0.0;
    for (i, (m, line)) in means.iter().zip(&with_std).enumerate() {
        let cols: Vec<&str> = line.split(',').collect();
        assert_eq!(cols.len(), 2, "{line}");
        assert_eq!(cols[0], *m, "row {i}: the mean is the plain prediction");
        let s: f64 = cols[1].parse().unwrap();
        assert!(s.is_finite() && s > 0.0, "row {i}: {line}");
        let p: f64 = m.parse().unwrap();
        sq += (p - d.test_y[i]).powi(2);
    }
    // The same predictions as `eval` makes (same seed, lifetime and trees).
    let rmse = (sq / 100.0).sqrt();
    let v = eval_json(&d, &["--lifetime", "3", "--trees", "10"]);
    assert!(
        (rmse - v["rmse"].as_f64().unwrap()).abs() < 1e-12,
        "{rmse} {v}"
    );
    // Input without the target column predicts the same.
    let features: String = std::fs::read_to_string(&d.test)
        .unwrap()
        .lines()
        .map(|l| l.rsplit_once(',').unwrap().0.to_string() + "\n")
        .collect();
    let unlabelled = write(dir.path(), "unlabelled.csv", &features);
    assert_eq!(
        predict(&model, &unlabelled, &[])
            .lines()
            .collect::<Vec<_>>(),
        means
    );
    // A row far from the data is less certain than one inside it.
    let far = write(
        dir.path(),
        "far.csv",
        "x0,x1,x2\n0.5,0.5,0.5\n100,100,100\n",
    );
    let far = predict(&model, &far, &["--std"]);
    let s: Vec<f64> = far
        .lines()
        .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    assert!(s[1] > s[0], "{far}");
}

#[test]
fn predict_and_transform_refuse_input_of_the_wrong_width() {
    let dir = tempfile::tempdir().unwrap();
    let d = data(dir.path());
    let p = dir.path();
    let model = p.join("k.bin");
    fit(&d.train, &model, &["--lifetime", "3", "--trees", "5"]);
    let out = write(p, "out.txt", "keep me\n");
    let two = write(p, "two.csv", "x0,x1\n0.1,0.2\n");
    let five = write(p, "five.csv", "a,b,c,d,e\n1,2,3,4,5\n");
    for (input, found) in [(&two, 2), (&five, 5)] {
        let name = input.file_name().unwrap().to_str().unwrap();
        let needle = format!(
            "{name}:1: expected 3 columns (the features) or 4 (the features and a label), \
             found {found}"
        );
        refused(
            kernel("predict")
                .arg("--model")
                .arg(&model)
                .arg("--input")
                .arg(input)
                .arg("--output")
                .arg(&out),
            &needle,
        );
        refused(
            kernel("transform")
                .arg("--model")
                .arg(&model)
                .arg("--input")
                .arg(input)
                .arg("--output")
                .arg(&out),
            &needle,
        );
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me\n");
    }
}

#[test]
fn corrupt_or_foreign_model_files_are_refused_without_panics() {
    let dir = tempfile::tempdir().unwrap();
    let d = data(dir.path());
    let p = dir.path();
    let good = p.join("k.bin");
    fit(&d.train, &good, &["--lifetime", "2", "--trees", "5"]);
    let bytes = std::fs::read(&good).unwrap();
    let mut flipped = bytes.clone();
    flipped[bytes.len() / 2] ^= 0xff;
    let flipped = {
        let path = p.join("flipped.bin");
        std::fs::write(&path, flipped).unwrap();
        path
    };
    let truncated = p.join("truncated.bin");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let empty = write(p, "empty.bin", "");
    let text = write(p, "text.bin", "this is not a model\n");
    let forest = p.join("forest.bin");
    train(&d.train, &forest, 3, &["--task", "regression"]);
    let missing = p.join("missing.bin");
    let cases = [
        (&flipped, "corrupt"),
        (&truncated, "truncated"),
        (&empty, "truncated"),
        (&text, "not a mondrian model file"),
        (
            &forest,
            "holds a `mondrian-cli-regressor` model, expected `mondrian-kernel-ridge`",
        ),
        (&missing, "cannot open model"),
    ];
    let out = write(p, "out.txt", "keep me\n");
    for (model, needle) in cases {
        for sub in ["predict", "transform"] {
            refused(
                kernel(sub)
                    .arg("--model")
                    .arg(model)
                    .arg("--input")
                    .arg(&d.test)
                    .arg("--output")
                    .arg(&out),
                needle,
            );
            assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me\n");
        }
    }
    // The other way round: the forest's `predict` refuses a kernel model.
    refused(
        mondrian()
            .args(["predict", "--model"])
            .arg(&good)
            .arg("--input")
            .arg(&d.test),
        "mondrian-kernel-ridge",
    );
    // Payloads changed with their checksums made to match (a hand-edited file): each is
    // refused or, where the change is a harmless number, loads; never a panic.
    let forged = p.join("forged.bin");
    for k in 0..24usize {
        reforged(&good, &forged, |payload| {
            let i = (k * 7919 + 13) % payload.len();
            payload[i] ^= 1 << (k % 8);
        });
        for sub in ["predict", "transform"] {
            let result = kernel(sub)
                .arg("--model")
                .arg(&forged)
                .arg("--input")
                .arg(&d.test)
                .arg("--output")
                .arg(p.join("forged.out"))
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&result.stderr);
            assert!(
                matches!(result.status.code(), Some(0 | 2)),
                "flip {k}, {sub}: {:?} {err}",
                result.status
            );
            assert!(!err.contains("panicked"), "flip {k}, {sub}: {err}");
        }
    }
}

#[test]
fn the_seed_alone_decides_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let d = data(dir.path());
    let p = dir.path();
    let run = |name: &str, extra: &[&str]| {
        let model = p.join(name);
        fit(
            &d.train,
            &model,
            &[&["--lifetime", "3", "--trees", "10"], extra].concat(),
        );
        predict(&model, &d.test, &["--std"])
    };
    let a = run("a.bin", &["--seed", "7"]);
    assert_eq!(a.lines().count(), 100);
    let b = run("b.bin", &["--seed", "7"]);
    assert_eq!(a, b, "same seed, same predictions");
    let c = run("c.bin", &["--seed", "8"]);
    assert_ne!(a, c, "another seed, other trees");
    // The thread count changes nothing.
    let serial = run("serial.bin", &["--seed", "7", "--threads", "1"]);
    let parallel = run("parallel.bin", &["--seed", "7", "--threads", "2"]);
    assert_eq!(a, serial);
    assert_eq!(a, parallel);
    // `eval` too: same seed, same report (but for the timings).
    let strip = |mut v: serde_json::Value| {
        let o = v.as_object_mut().unwrap();
        o.remove("seconds");
        o.remove("fit_seconds");
        v
    };
    let args = [
        "--sweep", "0.3:30", "--steps", "5", "--trees", "4", "--seed", "3",
    ];
    assert_eq!(strip(eval_json(&d, &args)), strip(eval_json(&d, &args)));
}
