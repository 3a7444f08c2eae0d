//! The `mondrian` command on good and bad input: clear errors, exit code 2, no panic
//! (classification, model files, options, the demo; regression and streams have files of
//! their own).

mod common;

use common::*;

#[test]
fn train_predict_roundtrip_keeps_original_labels() {
    let dir = tempfile::tempdir().unwrap();
    let train = write(dir.path(), "train.csv", TRAIN);
    let model = dir.path().join("m.bin");
    mondrian()
        .args(["train", "--trees", "5", "--train"])
        .arg(&train)
        .arg("--model")
        .arg(&model)
        .assert()
        .success();
    let input = write(dir.path(), "in.csv", "a,b\n0.05,0.1\n0.95,0.9\n");
    let out = dir.path().join("pred.csv");
    mondrian()
        .args(["predict", "--model"])
        .arg(&model)
        .arg("--input")
        .arg(&input)
        .arg("--output")
        .arg(&out)
        .assert()
        .success();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "label\n1\n7\n");
    let proba = mondrian()
        .args(["predict", "--proba", "--model"])
        .arg(&model)
        .arg("--input")
        .arg(&input)
        .output()
        .unwrap();
    let text = String::from_utf8(proba.stdout).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("p_1,p_7"));
    for line in lines {
        let s: f64 = line.split(',').map(|v| v.parse::<f64>().unwrap()).sum();
        assert!((s - 1.0).abs() < 1e-5);
    }
}

#[test]
fn eval_json_has_the_promised_fields() {
    let dir = tempfile::tempdir().unwrap();
    let train = write(dir.path(), "train.csv", TRAIN);
    for online in [false, true] {
        let mut cmd = mondrian();
        cmd.args(["eval", "--json", "--trees", "4", "--train"])
            .arg(&train)
            .arg("--test")
            .arg(&train);
        if online {
            cmd.arg("--online");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for key in [
            "accuracy",
            "log_loss",
            "train_seconds",
            "predict_seconds",
            "n_train",
            "n_test",
            "trees",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        // λ = ∞ with pausing fits distinct training points exactly.
        assert_eq!(v["accuracy"].as_f64(), Some(1.0));
        assert_eq!(v["n_train"].as_u64(), Some(6));
    }
}

#[test]
fn bad_inputs_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = write(d, "good.csv", TRAIN);
    let cases = [
        (
            "nan.csv",
            "a,b,label\n0,NaN,1\n1,1,0\n",
            "not a finite number",
        ),
        (
            "inf.csv",
            "a,b,label\n0,inf,1\n1,1,0\n",
            "not a finite number",
        ),
        ("text.csv", "a,b,label\n0,abc,1\n1,1,0\n", "abc"),
        ("ragged.csv", "a,b,label\n0,1,1\n1,1\n", "column"),
        ("label.csv", "a,b,label\n0,1,1.5\n1,1,0\n", "1.5"),
        ("empty.csv", "", "empty"),
        ("header.csv", "a,b,label\n", "no data rows"),
    ];
    for (name, text, needle) in cases {
        let p = write(d, name, text);
        fails_with(
            mondrian()
                .args(["eval", "--trees", "2", "--train"])
                .arg(&p)
                .arg("--test")
                .arg(&good),
            needle,
        );
    }
    // Test file of another width.
    let wide = write(d, "wide.csv", "a,b,c,label\n0,1,2,1\n");
    fails_with(
        mondrian()
            .args(["eval", "--trees", "2", "--train"])
            .arg(&good)
            .arg("--test")
            .arg(&wide),
        "",
    );
    // Missing file.
    fails_with(
        mondrian()
            .args(["eval", "--train", "/nonexistent.csv", "--test"])
            .arg(&good),
        "/nonexistent.csv",
    );
    // Corrupt model file.
    let junk = write(d, "junk.bin", "not a model");
    fails_with(
        mondrian()
            .args(["predict", "--model"])
            .arg(&junk)
            .arg("--input")
            .arg(&good),
        "cannot load model",
    );
    // Bad lifetime.
    fails_with(
        mondrian()
            .args(["eval", "--lifetime", "-3", "--train"])
            .arg(&good)
            .arg("--test")
            .arg(&good),
        "invalid parameter `lifetime`",
    );
}

#[test]
fn libsvm_input_works() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "train.libsvm",
        "1 1:0 2:0\n1 1:0.1 2:0.2\n2 1:1 2:1\n2 1:0.9 2:0.8\n",
    );
    let out = mondrian()
        .args(["eval", "--json", "--trees", "3", "--train"])
        .arg(&p)
        .arg("--test")
        .arg(&p)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["accuracy"].as_f64(), Some(1.0));
}

#[test]
fn curve_reports_every_batch() {
    let dir = tempfile::tempdir().unwrap();
    let train = write(dir.path(), "train.csv", TRAIN);
    let out = mondrian()
        .args([
            "curve",
            "--json",
            "--batches",
            "3",
            "--trees",
            "3",
            "--train",
        ])
        .arg(&train)
        .arg("--test")
        .arg(&train)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[2]["n_seen"].as_u64(), Some(6));
}

#[test]
fn forged_model_files_are_refused_not_panicked_on() {
    // The checksum only catches accidental damage; a file edited with a fresh checksum
    // must still be checked before use (the CLI's model files used to skip the library's
    // checks: an out-of-range node index panicked, a cycle hung).
    let dir = tempfile::tempdir().unwrap();
    let (train, reg_train, clf, reg) = two_models(dir.path());
    let forged = dir.path().join("forged.bin");
    for (model, input) in [(&clf, &train), (&reg, &reg_train)] {
        let len = std::fs::read(model).unwrap().len();
        // Every u32 of the payload set to 0xffff_ff00 in turn, one at a time, at a
        // stride that reaches node indices, dimensions, counts and lengths.
        for at in (0..len - 64).step_by(7) {
            reforged(model, &forged, |p| {
                if at + 4 <= p.len() {
                    p[at..at + 4].copy_from_slice(&0xffff_ff00u32.to_le_bytes());
                }
            });
            let out = mondrian()
                .args(["predict", "--model"])
                .arg(&forged)
                .arg("--input")
                .arg(input)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                matches!(out.status.code(), Some(0 | 2)) && !err.contains("panicked"),
                "offset {at}: {:?} {err}",
                out.status
            );
            // A file that loads predicts finite numbers: forged statistics far outside
            // the stored targets used to load and print `inf`.
            let printed = String::from_utf8_lossy(&out.stdout).to_lowercase();
            assert!(
                !printed.contains("inf") && !printed.contains("nan"),
                "offset {at}: {printed}"
            );
        }
    }
}

#[test]
fn options_of_the_other_task_and_out_of_range_options_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (train, reg_train, clf, reg) = two_models(dir.path());
    // Each used to be ignored: the regression model printed mean,std, the classifier
    // labels.
    fails_with(
        mondrian()
            .args(["predict", "--proba", "--model"])
            .arg(&reg)
            .arg("--input")
            .arg(&reg_train),
        "--proba needs a classification model",
    );
    fails_with(
        mondrian()
            .args(["predict", "--interval", "0.9", "--model"])
            .arg(&clf)
            .arg("--input")
            .arg(&train),
        "--interval needs a regression model",
    );
    let eval = |extra: &[&str], needle: &str| {
        fails_with(
            mondrian()
                .args(["eval"])
                .args(extra)
                .arg("--train")
                .arg(&train)
                .arg("--test")
                .arg(&train),
            needle,
        )
    };
    // A count of trees no machine holds aborted on a failed allocation.
    eval(&["--trees", "100000000000"], "n_trees");
    eval(
        &["--task", "regression", "--trees", "100000000000"],
        "n_trees",
    );
    // λ = 0 trained trees that never split; min_samples_split 0 passed for classes only.
    // The library refuses both now, in its words.
    eval(&["--lifetime", "0"], "invalid parameter `lifetime`");
    eval(
        &["--min-samples-split", "0"],
        "invalid parameter `min_samples_split`",
    );
    // The regressor has no lifetime: the flag was silently ignored.
    eval(
        &["--task", "regression", "--lifetime", "5"],
        "--lifetime applies to classification",
    );
    // 100000 threads hung starting the pool.
    eval(&["--threads", "100000"], "thread count");
    fails_with(
        mondrian()
            .args(["predict", "--threads", "100000", "--model"])
            .arg(&clf)
            .arg("--input")
            .arg(&train),
        "thread count",
    );
}

#[test]
fn huge_targets_and_labels_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    // |y| = 1e70 overflowed the Gaussian statistics: NaN means, zero deviations.
    let big = write(dir.path(), "big.csv", "a,y\n0,1e70\n1,2\n2,3\n");
    fails_with(
        mondrian()
            .args(["eval", "--task", "regression", "--train"])
            .arg(&big)
            .arg("--test")
            .arg(&big),
        "too large",
    );
    // Streamed one row at a time, the error still names the file's row (0-based data row 2).
    let late = write(dir.path(), "late.csv", "a,y\n0,1\n1,2\n2,-1e70\n");
    fails_with(
        mondrian()
            .args(["train", "--task", "regression", "--online", "--train"])
            .arg(&late)
            .arg("--model")
            .arg(dir.path().join("late.model")),
        "row 2: target",
    );
    // An integer label beyond 2^53 was reported as "not an integer".
    let label = write(dir.path(), "label.csv", "a,y\n0,1e20\n1,2\n");
    fails_with(
        mondrian()
            .args(["eval", "--train"])
            .arg(&label)
            .arg("--test")
            .arg(&label),
        "is too large",
    );
}

#[test]
fn a_model_file_with_data_after_it_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (train, _, model, _) = two_models(dir.path());
    let mut bytes = std::fs::read(&model).unwrap();
    bytes.extend_from_slice(b"junk");
    std::fs::write(&model, &bytes).unwrap();
    fails_with(
        mondrian()
            .args(["predict", "--model"])
            .arg(&model)
            .arg("--input")
            .arg(&train),
        "after the end of the model",
    );
}

#[test]
fn settings_the_library_checks_are_refused_in_its_words() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = regression_train_test(dir.path());
    // Both forests refuse min_samples_split 0 themselves (see also
    // options_of_the_other_task_...).
    fails_with(
        mondrian()
            .args(["eval", "--task", "regression", "--min-samples-split", "0"])
            .arg("--train")
            .arg(&train)
            .arg("--test")
            .arg(&test),
        "invalid parameter `min_samples_split`",
    );
    fails_with(
        mondrian()
            .args(["eval", "--discount-factor=-1", "--train"])
            .arg(write(dir.path(), "c.csv", TRAIN))
            .arg("--test")
            .arg(write(dir.path(), "c2.csv", TRAIN)),
        "invalid parameter `discount_factor`",
    );
    // A LIBSVM test file wider than the training file is refused at the line that says so.
    let narrow = write(dir.path(), "narrow.libsvm", "1 1:0 2:0\n2 1:1 2:1\n");
    let wide = write(dir.path(), "wide.libsvm", "1 1:0\n2 1:1 3:1\n");
    fails_with(
        mondrian()
            .args(["eval", "--trees", "2", "--train"])
            .arg(&narrow)
            .arg("--test")
            .arg(&wide),
        "wide.libsvm:2: LIBSVM feature index 3",
    );
}

#[test]
fn demo_prints_its_learning_curve() {
    let out = mondrian().arg("demo").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("Mondrian forest demo: satimage"), "{text}");
    // One row (seen, accuracy, ...) per mini-batch, the last with every training row seen.
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|t| t.len() >= 4 && t[1].parse::<f64>().is_ok())
        .collect();
    assert_eq!(rows.len(), 14, "{text}");
    assert_eq!(rows[13][0], "4435", "{text}");
}
