//! The `mondrian` command on good and bad input: clear errors, exit code 2, no panic.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn mondrian() -> Command {
    Command::cargo_bin("mondrian").unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const TRAIN: &str = "a,b,label\n0,0,1\n0.1,0.2,1\n1,1,7\n0.9,0.8,7\n0.5,0.1,1\n0.6,0.9,7\n";

fn fails_with(cmd: &mut Command, needle: &str) {
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains(needle), "expected `{needle}` in: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

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

/// y = 3·a − b + small noise-free wiggle on a grid: a smooth real target.
fn regression_csv(n: usize, shift: f64) -> String {
    let mut s = String::from("a,b,target\n");
    for i in 0..n {
        let a = (i as f64 * 0.37 + shift) % 1.0;
        let b = (i as f64 * 0.61 + shift) % 1.0;
        s.push_str(&format!(
            "{a},{b},{}\n",
            3.0 * a - b + 0.1 * (7.0 * a).sin()
        ));
    }
    s
}

/// A 300-row regression training file and a 100-row test file shifted off its grid.
fn regression_train_test(dir: &Path) -> (PathBuf, PathBuf) {
    (
        write(dir, "train.csv", &regression_csv(300, 0.0)),
        write(dir, "test.csv", &regression_csv(100, 0.013)),
    )
}

/// `mondrian eval --task regression --json` with extra arguments; its JSON.
fn eval_regression(train: &Path, test: &Path, extra: &[&str]) -> serde_json::Value {
    let out = mondrian()
        .args(["eval", "--task", "regression", "--json"])
        .args(extra)
        .arg("--train")
        .arg(train)
        .arg("--test")
        .arg(test)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

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
    assert_eq!(v["trees"], 10);
    assert_eq!(v["n_test"], 100);

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
    let plain = eval_regression(&train, &test, &[]);
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
    train_cmd(&[], &plain_model);
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

/// A model file whose payload was changed and its checksum recomputed (a hand-edited or
/// foreign file): `edit` changes the payload.
fn reforged(model: &Path, out: &Path, edit: impl Fn(&mut Vec<u8>)) {
    let bytes = std::fs::read(model).unwrap();
    let header = 13 + bytes[12] as usize + 12;
    let mut payload = bytes[header..].to_vec();
    edit(&mut payload);
    let mut file = bytes[..header].to_vec();
    let n = file.len();
    file[n - 12..n - 4].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    file[n - 4..].copy_from_slice(&crc32(&payload).to_le_bytes());
    file.extend_from_slice(&payload);
    std::fs::write(out, file).unwrap();
}

/// CRC-32 (IEEE), as the model format uses.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xedb8_8320 & 0u32.wrapping_sub(crc & 1));
        }
    }
    !crc
}

/// A small classification file and regression file in `dir`, each with a 3-tree model
/// trained on it: `(train, reg_train, classifier model, regression model)`.
fn two_models(dir: &Path) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let train = write(dir, "train.csv", TRAIN);
    let reg_train = write(dir, "reg.csv", &regression_csv(40, 0.0));
    let clf = dir.join("c.bin");
    let reg = dir.join("r.bin");
    mondrian()
        .args(["train", "--trees", "3", "--train"])
        .arg(&train)
        .arg("--model")
        .arg(&clf)
        .assert()
        .success();
    mondrian()
        .args(["train", "--task", "regression", "--trees", "3"])
        .args(["--min-samples-split", "2", "--train"])
        .arg(&reg_train)
        .arg("--model")
        .arg(&reg)
        .assert()
        .success();
    (train, reg_train, clf, reg)
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

// ---------------------------------------------------------------------------------
// Windows and `stream`

/// The JSON object on the last line of a successful run's standard output.
fn last_json(cmd: &mut Command) -> serde_json::Value {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {text}"))
}

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

/// The first `rows` rows of the shipped satimage training set (36 features, labels 0..5,
/// in the file's own order), as a CSV file in `dir`.
fn satimage_head(dir: &Path, rows: usize) -> PathBuf {
    use std::io::Read;
    let gz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/satimage_train.csv.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(gz).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let head: Vec<&str> = text.lines().take(rows + 1).collect();
    write(dir, "satimage.csv", &(head.join("\n") + "\n"))
}

/// `mondrian stream --json` on `input` with extra arguments.
fn stream_json(input: &Path, extra: &[&str]) -> serde_json::Value {
    last_json(
        mondrian()
            .args(["stream", "--json", "--input"])
            .arg(input)
            .args(extra),
    )
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

/// y = sin(x) + noise of s.d. about 0.06, x spread over [0, 6] in no order.
fn sine_csv(n: usize) -> String {
    let mut s = String::from("x,y\n");
    for i in 0..n {
        let x = 6.0 * ((i as f64 * 0.618_034) % 1.0);
        let noise = 0.2 * (((i as f64 * 12.9898).sin() * 43_758.545).fract() - 0.5);
        s.push_str(&format!("{x},{}\n", x.sin() + noise));
    }
    s
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
