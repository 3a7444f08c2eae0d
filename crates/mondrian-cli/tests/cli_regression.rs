//! `mondrian … --task regression`: train, eval, predict, calibrated intervals, feature
//! weights, and bad input.

mod common;

use common::*;
use std::path::Path;

#[test]
fn regression_eval_train_and_predict() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = regression_train_test(dir.path());
    let v = eval_regression(&train, &test, &[]);
    for key in [
        "rmse",
        "nlpd",
        "coverage_90",
        "train_seconds",
        "predict_seconds",
    ] {
        assert!(v[key].as_f64().is_some_and(f64::is_finite), "{key}: {v}");
    }
    // The target spans [−1, 3] with s.d. ≈ 0.95; a forest must do much better than that.
    assert!(v["rmse"].as_f64().unwrap() < 0.5, "{v}");
    assert_eq!(v["n_test"], 100);
    // The library's defaults: 100 trees, leaves below 5 points, the fast predictive, and on
    // 300 rows (at least 100) relevance weights by cross-validation and recalibrated
    // intervals.
    assert_eq!(v["trees"], 100);
    assert_eq!(v["min_samples_split"], 5);
    assert_eq!(v["mode"], "Fast");
    assert_eq!(v["relevance_choice"]["losses"].as_array().unwrap().len(), 5);
    assert_eq!(v["calibration_pits"], 300);
    // The thesis' settings stay reachable.
    let thesis = eval_regression(
        &train,
        &test,
        &[
            "--trees",
            "10",
            "--min-samples-split",
            "10",
            "--mode",
            "exact",
            "--feature-weights",
            "uniform",
            "--calibration",
            "none",
        ],
    );
    assert_eq!(thesis["mode"], "Exact");
    assert!(thesis["relevance_choice"].is_null() && thesis["calibration_pits"].is_null());
    assert_eq!(thesis["feature_weights"], serde_json::json!([1.0, 1.0]));

    let model = dir.path().join("r.bin");
    mondrian()
        .args(["train", "--task", "regression", "--mode", "fast", "--train"])
        .arg(&train)
        .arg("--model")
        .arg(&model)
        .assert()
        .success();
    let input = write(dir.path(), "in.csv", "a,b\n0.5,0.5\n40,40\n");
    let pred = mondrian()
        .args(["predict", "--interval", "0.9", "--model"])
        .arg(&model)
        .arg("--input")
        .arg(&input)
        .output()
        .unwrap();
    let text = String::from_utf8(pred.stdout).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("mean,std,lower,upper"));
    let rows: Vec<Vec<f64>> = lines
        .map(|l| l.split(',').map(|c| c.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 2);
    // Far from the data the forest is less sure than at its centre.
    assert!(rows[1][1] > rows[0][1], "{rows:?}");
    assert!(rows[0][2] < rows[0][0] && rows[0][0] < rows[0][3]);
}

#[test]
fn regression_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let train = write(dir.path(), "train.csv", "a,target\n0,1\n1,nan\n");
    fails_with(
        mondrian()
            .args(["train", "--task", "regression", "--model", "m", "--train"])
            .arg(&train),
        "train.csv:3: column 2",
    );
    let good = write(dir.path(), "good.csv", &regression_csv(30, 0.0));
    let model = dir.path().join("r.bin");
    mondrian()
        .args(["train", "--task", "regression", "--train"])
        .arg(&good)
        .arg("--model")
        .arg(&model)
        .assert()
        .success();
    let wide = write(dir.path(), "wide.csv", "a,b,c,d\n1,2,3,4\n");
    fails_with(
        mondrian()
            .args(["predict", "--model"])
            .arg(&model)
            .arg("--input")
            .arg(&wide),
        "3",
    );
    fails_with(
        mondrian()
            .args(["predict", "--interval", "1.5", "--model"])
            .arg(&model)
            .arg("--input")
            .arg(&good),
        "level",
    );
}

#[test]
fn regression_interval_calibration() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = regression_train_test(dir.path());
    let plain = eval_regression(&train, &test, &["--calibration", "none"]);
    assert!(plain["calibration_pits"].is_null());
    let probs = plain["interval_probabilities_90"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        (probs[0].as_f64().unwrap() - 0.05).abs() < 1e-12,
        "{probs:?}"
    );
    assert!(
        (probs[1].as_f64().unwrap() - 0.95).abs() < 1e-12,
        "{probs:?}"
    );
    // One PIT per training row; the model (mean, density) is the uncalibrated one.
    let cv = eval_regression(&train, &test, &["--calibration", "cv"]);
    assert_eq!(cv["calibration_pits"], 300);
    assert_eq!(cv["rmse"], plain["rmse"]);
    assert_eq!(cv["nlpd"], plain["nlpd"]);
    let p: Vec<f64> = cv["interval_probabilities_90"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert!(0.0 <= p[0] && p[0] < p[1] && p[1] <= 1.0, "{p:?}");
    // A stream computes the same PITs up front from the whole file.
    let online = eval_regression(&train, &test, &["--calibration", "cv", "--online"]);
    assert_eq!(
        online["interval_probabilities_90"],
        cv["interval_probabilities_90"]
    );
    // The default (`auto`) is `cv` on these 300 rows, `none` below 100 rows.
    let auto = eval_regression(&train, &test, &[]);
    assert_eq!(
        auto["interval_probabilities_90"],
        cv["interval_probabilities_90"]
    );
    let small = write(dir.path(), "small.csv", &regression_csv(99, 0.0));
    let few = eval_regression(&small, &test, &[]);
    assert!(few["calibration_pits"].is_null() && few["relevance_choice"].is_null());
    assert_eq!(few["feature_weights"], serde_json::json!([1.0, 1.0]));
    // Saved with the model: predict --interval uses it.
    let model = dir.path().join("cal.model");
    let train_cmd = |extra: &[&str], path: &Path| {
        mondrian()
            .args(["train", "--task", "regression"])
            .args(extra)
            .arg("--train")
            .arg(&train)
            .arg("--model")
            .arg(path)
            .assert()
            .success();
    };
    train_cmd(&["--calibration", "cv"], &model);
    let plain_model = dir.path().join("plain.model");
    train_cmd(&["--calibration", "none"], &plain_model);
    let interval = |m: &Path| {
        let out = mondrian()
            .args(["predict", "--interval", "0.9", "--model"])
            .arg(m)
            .arg("--input")
            .arg(&test)
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    assert_ne!(interval(&model), interval(&plain_model));
    // Too few rows, and a classification run, are refused with clear messages.
    let tiny = write(dir.path(), "tiny.csv", &regression_csv(9, 0.0));
    fails_with(
        mondrian()
            .args([
                "eval",
                "--task",
                "regression",
                "--calibration",
                "cv",
                "--train",
            ])
            .arg(&tiny)
            .arg("--test")
            .arg(&test),
        "at least 10 rows",
    );
    fails_with(
        mondrian()
            .args(["eval", "--calibration", "cv", "--train"])
            .arg(&train)
            .arg("--test")
            .arg(&train),
        "--task regression",
    );
    // `curve` is the classification protocol: neither option is silently ignored there.
    for (extra, needle) in [
        (["--calibration", "cv"], "--task regression"),
        (["--task", "regression"], "eval --task regression"),
    ] {
        fails_with(
            mondrian()
                .arg("curve")
                .args(extra)
                .arg("--train")
                .arg(&train)
                .arg("--test")
                .arg(&test),
            needle,
        );
    }
}

#[test]
fn regression_feature_weights() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = regression_train_test(dir.path());
    let eval = |weights: &str| eval_regression(&train, &test, &["--feature-weights", weights]);
    assert_eq!(
        eval("uniform")["feature_weights"],
        serde_json::json!([1.0, 1.0])
    );
    assert_eq!(
        eval("2,0.5")["feature_weights"],
        serde_json::json!([2.0, 0.5])
    );
    // y = 3a − b + small: a's cuts remove more squared error than b's.
    let learnt = eval("relevance")["feature_weights"].clone();
    assert_eq!(learnt[0], 1.0, "{learnt}");
    // Streaming learns the weights from the whole file, as batch fit does.
    let online = eval_regression(
        &train,
        &test,
        &["--feature-weights", "relevance", "--online"],
    );
    assert_eq!(online["feature_weights"], learnt);
    assert!(
        learnt[1].as_f64().is_some_and(|w| (0.0..1.0).contains(&w)),
        "{learnt}"
    );
    assert!(eval("relevance")["relevance_choice"].is_null());
    // Cross-validated power: reported with every power's loss; the weights are those of
    // the chosen power, and a stream learns the same choice from the whole file.
    let cv = eval("relevance:cv");
    let choice = &cv["relevance_choice"];
    let power = choice["power"].as_f64().unwrap();
    assert_eq!(choice["losses"].as_array().unwrap().len(), 5, "{choice}");
    let fixed = eval(&format!("relevance:{power}"));
    if power > 0.0 {
        assert_eq!(cv["feature_weights"], fixed["feature_weights"]);
        assert_eq!(cv["rmse"], fixed["rmse"]);
    }
    let online = eval_regression(
        &train,
        &test,
        &["--feature-weights", "relevance:cv", "--online"],
    );
    assert_eq!(&online["relevance_choice"], choice);
    let text = mondrian()
        .args([
            "eval",
            "--task",
            "regression",
            "--feature-weights",
            "relevance:cv",
        ])
        .arg("--train")
        .arg(&train)
        .arg("--test")
        .arg(&test)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!(
            "relevance power {power} by 5-fold cross-validation"
        )),
        "{text}"
    );
    for (bad, needle) in [
        ("heavy", "not `uniform`, `relevance[:power]`"),
        ("relevance:0", "relevance power 0"),
        ("1,-2", "finite weight ≥ 0"),
        ("0,0", "at least one weight"),
        ("1,2,3", "3 weights for 2 features"),
    ] {
        fails_with(
            mondrian()
                .args([
                    "eval",
                    "--task",
                    "regression",
                    "--feature-weights",
                    bad,
                    "--train",
                ])
                .arg(&train)
                .arg("--test")
                .arg(&test),
            needle,
        );
    }
}
