//! Sliding windows (`--window`) and the prequential `mondrian stream` command.

mod common;

use common::*;
use std::path::Path;

#[test]
fn window_keeps_the_last_w_training_points() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let classes = write(d, "c.csv", TRAIN);
    let (targets, _) = regression_train_test(d);
    // (task, file, its rows, window)
    let cases = [
        ("classification", &classes, 6, 4),
        ("regression", &targets, 300, 50),
    ];
    for (task, file, rows, w) in cases {
        for online in [false, true] {
            let eval = |window: Option<usize>| {
                let mut cmd = mondrian();
                cmd.args(["eval", "--json", "--trees", "3", "--task", task, "--train"])
                    .arg(file)
                    .arg("--test")
                    .arg(file);
                if let Some(w) = window {
                    cmd.args(["--window", &w.to_string()]);
                }
                if online {
                    cmd.arg("--online");
                }
                last_json(&mut cmd)
            };
            let v = eval(Some(w));
            assert_eq!(v["window"].as_u64(), Some(w as u64), "{task} {online}: {v}");
            assert_eq!(
                v["n_points"].as_u64(),
                Some(w as u64),
                "{task} {online}: {v}"
            );
            assert_eq!(v["n_train"].as_u64(), Some(rows as u64));
            let all = eval(None);
            assert!(all["window"].is_null(), "{all}");
            assert_eq!(all["n_points"].as_u64(), Some(rows as u64), "{all}");

            let model = d.join(format!("{task}-{online}.bin"));
            let mut train = mondrian();
            train
                .args(["train", "--trees", "3", "--task", task, "--window"])
                .arg(w.to_string())
                .arg("--train")
                .arg(file)
                .arg("--model")
                .arg(&model);
            if online {
                train.arg("--online");
            }
            let out = train.output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{err}");
            assert!(
                err.contains(&format!(", {w} points held (window {w}), saved to")),
                "{err}"
            );
            assert!(model.exists());
        }
    }
}

#[test]
fn window_of_zero_or_beyond_the_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let train = write(d, "c.csv", TRAIN);
    let model = d.join("m.bin");
    for (window, needle) in [
        ("0", "invalid parameter `window`"),
        (
            "7",
            "--window 7 is larger than the 6 training rows; it would keep every row",
        ),
    ] {
        for task in ["classification", "regression"] {
            fails_with(
                mondrian()
                    .args(["train", "--task", task, "--window", window, "--train"])
                    .arg(&train)
                    .arg("--model")
                    .arg(&model),
                needle,
            );
            assert!(!model.exists());
            fails_with(
                mondrian()
                    .args(["eval", "--online", "--task", task, "--window", window])
                    .arg("--train")
                    .arg(&train)
                    .arg("--test")
                    .arg(&train),
                needle,
            );
        }
    }
    // A window as large as the file keeps it all, and is allowed.
    mondrian()
        .args(["eval", "--window", "6", "--train"])
        .arg(&train)
        .arg("--test")
        .arg(&train)
        .assert()
        .success();
}

#[test]
fn stream_scores_satimage_test_then_train() {
    let dir = tempfile::tempdir().unwrap();
    let data = satimage_head(dir.path(), 2000);
    let model = dir.path().join("stream.bin");
    let v = stream_json(
        &data,
        &["--trees", "20", "--model", model.to_str().unwrap()],
    );
    for key in [
        "accuracy",
        "log_loss",
        "seconds",
        "rows_per_second",
        "n_points",
    ] {
        assert!(v[key].as_f64().is_some_and(f64::is_finite), "{key}: {v}");
    }
    // Six classes, the largest a quarter of the rows: chance is far below this.
    let accuracy = v["accuracy"].as_f64().unwrap();
    assert!((0.75..1.0).contains(&accuracy), "{v}");
    assert!(v["log_loss"].as_f64().unwrap() < 1.0, "{v}");
    // Every row but the first (which has no model to predict it) is scored.
    assert_eq!(v["n"], 1999, "{v}");
    assert_eq!(v["n_rows"], 2000, "{v}");
    assert_eq!(v["n_classes"], 6, "{v}");
    assert!(v["window"].is_null(), "{v}");
    assert_eq!(v["n_points"], 2000, "{v}");
    let (seconds, rate) = (
        v["seconds"].as_f64().unwrap(),
        v["rows_per_second"].as_f64().unwrap(),
    );
    assert!(
        seconds > 0.0 && (rate * seconds - 2000.0).abs() < 1.0,
        "{v}"
    );
    // About 20 reports by default, the last at the end of the stream; each step's recent
    // accuracy is over the rows since the step before.
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 20, "{v}");
    assert_eq!(steps[0]["n_seen"], 100);
    assert_eq!(steps[0]["recent_n"], 99);
    assert_eq!(steps[19]["n_seen"], 2000);
    assert_eq!(steps[19]["accuracy"], v["accuracy"]);
    let recent: f64 = steps
        .iter()
        .map(|s| s["recent_accuracy"].as_f64().unwrap() * s["recent_n"].as_f64().unwrap())
        .sum();
    assert!((recent / 1999.0 - accuracy).abs() < 1e-9, "{v}");

    // The saved model is `train`'s: predict reads it and gets the labels back.
    let pred = mondrian()
        .args(["predict", "--model"])
        .arg(&model)
        .arg("--input")
        .arg(&data)
        .output()
        .unwrap();
    assert!(pred.status.success());
    let labels = String::from_utf8(pred.stdout).unwrap();
    assert_eq!(labels.lines().count(), 2001);

    // A window of 500 rows keeps 500 points, and slides: the model forgets old rows.
    let w = stream_json(
        &data,
        &["--trees", "20", "--window", "500", "--every", "250"],
    );
    assert_eq!(w["window"], 500, "{w}");
    assert_eq!(w["n_points"], 500, "{w}");
    assert_eq!(w["n"], 1999, "{w}");
    assert!(w["accuracy"].as_f64().unwrap() > 0.7, "{w}");
    assert_ne!(w["accuracy"], v["accuracy"], "{w}");
    let steps = w["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 8, "{w}");
    assert_eq!(steps[0]["n_points"], 250);
    assert_eq!(steps[1]["n_points"], 500);
    assert_eq!(steps[7]["n_points"], 500);
}

#[test]
fn stream_prints_a_line_every_n_rows_and_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let data = satimage_head(dir.path(), 300);
    let out = mondrian()
        .args(["stream", "--trees", "5", "--every", "70", "--input"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // 70, 140, 210, 280 and the end.
    assert_eq!(lines.len(), 6, "{text}");
    assert!(
        lines[0].trim_start().starts_with("70 rows  accuracy "),
        "{text}"
    );
    assert!(lines[0].contains("  (last 69: "), "{text}");
    assert!(lines[4].trim_start().starts_with("300 rows"), "{text}");
    assert!(lines[4].contains("  (last 20: "), "{text}");
    assert!(
        lines[5].starts_with("300 rows streamed in ") && lines[5].contains("299 scored"),
        "{text}"
    );
}

#[test]
fn stream_regression_reports_rmse_and_nlpd() {
    let dir = tempfile::tempdir().unwrap();
    let data = write(dir.path(), "sine.csv", &sine_csv(400));
    let v = stream_json(&data, &["--task", "regression", "--every", "100"]);
    for key in ["rmse", "nlpd", "seconds", "rows_per_second"] {
        assert!(v[key].as_f64().is_some_and(f64::is_finite), "{key}: {v}");
    }
    // sin(x) over [0, 6] has s.d. about 0.7; the stream learns it.
    assert!(v["rmse"].as_f64().unwrap() < 0.35, "{v}");
    let steps = v["steps"].as_array().unwrap();
    assert!(steps[3]["recent_rmse"].as_f64().unwrap() < 0.2, "{v}");
    assert!(steps[3]["recent_nlpd"].as_f64().unwrap() < 0.5, "{v}");
    // Scored from the third row, once two different targets give the predictive a spread.
    assert_eq!(v["n"], 398, "{v}");
    assert!(v.get("n_classes").is_none(), "{v}");
    assert_eq!(v["n_points"], 400);
    let w = stream_json(
        &data,
        &["--task", "regression", "--mode", "fast", "--window", "100"],
    );
    assert_eq!(w["n_points"], 100, "{w}");
    assert_eq!(w["window"], 100, "{w}");
    assert!(w["rmse"].as_f64().unwrap() < 0.35, "{w}");
    fails_with(
        mondrian()
            .args([
                "stream",
                "--task",
                "regression",
                "--lifetime",
                "3",
                "--input",
            ])
            .arg(&data),
        "--lifetime applies to classification",
    );
}

#[test]
fn stream_refuses_bad_input_before_learning_or_writing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = d.join("never.bin");
    let good = write(d, "good.csv", TRAIN);
    let ragged = write(
        d,
        "ragged.csv",
        "a,b,label\n0,0,1\n0.1,0.2,1\n1,1,7\n0.9,7\n0.5,0.1,1\n",
    );
    let cases: [(&Path, &[&str], &str); 7] = [
        (
            &ragged,
            &[],
            "ragged.csv:5: the row has 2 columns but the header has 3",
        ),
        (
            &write(d, "empty.csv", ""),
            &[],
            "empty.csv: the file is empty",
        ),
        (&write(d, "header.csv", "a,b,label\n"), &[], "no data rows"),
        (
            &write(d, "one.csv", "a,b,label\n0,0,1\n"),
            &[],
            "one.csv: a stream needs at least 2 rows",
        ),
        (&good, &["--window", "0"], "invalid parameter `window`"),
        (
            &good,
            &["--window", "500"],
            "--window 500 is larger than the 6 training rows; it would keep every row",
        ),
        (&good, &["--every", "0"], "`0` is not a number of rows ≥ 1"),
    ];
    for (input, extra, needle) in cases {
        for task in ["classification", "regression"] {
            let out = mondrian()
                .args(["stream", "--task", task, "--input"])
                .arg(input)
                .args(extra)
                .arg("--model")
                .arg(&model)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{task} {needle}: {err}");
            assert!(
                err.contains(needle),
                "{task}: expected `{needle}` in: {err}"
            );
            assert!(
                out.stdout.is_empty(),
                "{task} {needle}: nothing is reported"
            );
            assert!(!model.exists(), "{task} {needle}: a model was written");
        }
    }
}
