//! Crash-safe saving from the CLI: `train --model` killed at any moment leaves the previous
//! model file whole.

mod common;

use common::{big_csv, mondrian, train};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// A model file loads (the CLI predicts with it).
fn loads(model: &Path, input: &Path) -> bool {
    mondrian()
        .args(["predict", "--model"])
        .arg(model)
        .arg("--input")
        .arg(input)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn a_killed_train_leaves_the_previous_model_whole() {
    let dir = tempfile::tempdir().unwrap();
    let data = big_csv(dir.path());
    let model = dir.path().join("model.bin");
    train(&data, &model, 5, &[]);
    let before = std::fs::read(&model).unwrap();
    let bin = assert_cmd::cargo::cargo_bin("mondrian");
    // Kills at spread-out moments, some of them during the write of the file: whatever
    // the moment, the file is the old model or a whole new one, and it loads.
    for (round, wait_ms) in [5u64, 40, 80, 120, 160, 200, 260, 320, 400, 500]
        .into_iter()
        .enumerate()
    {
        let mut child = std::process::Command::new(&bin)
            .args(["train", "--trees", "60", "--threads", "1", "--seed"])
            .arg((round + 1).to_string())
            .arg("--train")
            .arg(&data)
            .arg("--model")
            .arg(&model)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(wait_ms));
        let _ = child.kill(); // SIGKILL on Unix
        let _ = child.wait();
        let now = std::fs::read(&model).unwrap();
        assert!(!now.is_empty(), "round {round}: the model file was emptied");
        // The old model, or a whole new one (a finished save): either loads.
        assert!(
            loads(&model, &data),
            "round {round} (kill after {wait_ms} ms, {} the old bytes): the model does not load",
            if now == before { "still" } else { "no longer" }
        );
    }
}

#[test]
fn a_failed_save_keeps_the_old_model_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let data = big_csv(dir.path());
    let model = dir.path().join("model.bin");
    train(&data, &model, 3, &[]);
    let before = std::fs::read(&model).unwrap();
    // A model path inside a missing directory cannot be written.
    let missing = dir.path().join("no-such-dir").join("model.bin");
    let out = mondrian()
        .args(["train", "--trees", "3", "--train"])
        .arg(&data)
        .arg("--model")
        .arg(&missing)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("no-such-dir"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(std::fs::read(&model).unwrap(), before);
}

#[test]
fn model_files_do_not_depend_on_the_thread_count() {
    // The README promises the same model from the same seed whatever --threads says; the
    // files themselves must be byte for byte equal, classifier and regressor.
    let dir = tempfile::tempdir().unwrap();
    let data = big_csv(dir.path());
    let (reg_train, _) = common::regression_train_test(dir.path());
    for (train_file, extra) in [(&data, vec![]), (&reg_train, vec!["--task", "regression"])] {
        let mut files = Vec::new();
        for threads in ["1", "2"] {
            let model = dir.path().join(format!("m{threads}.bin"));
            let mut args = extra.clone();
            args.extend(["--threads", threads, "--seed", "5"]);
            train(train_file, &model, 7, &args);
            files.push(std::fs::read(&model).unwrap());
        }
        assert_eq!(files[0], files[1], "{extra:?}");
    }
}

#[test]
fn a_compact_model_file_predicts_the_same_from_fewer_bytes() {
    // Integer-valued features, as pixel intensities: few distinct values per feature.
    let dir = tempfile::tempdir().unwrap();
    let mut s = String::from("a,b,c,d,label\n");
    for i in 0..2000u64 {
        let v = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let f: Vec<u64> = (0..4).map(|k| (v >> (8 * k + 3)) % 40).collect();
        s.push_str(&format!(
            "{},{},{},{},{}\n",
            f[0],
            f[1],
            f[2],
            f[3],
            (f[0] + f[1]) / 40
        ));
    }
    let data = common::write(dir.path(), "ints.csv", &s);
    let (plain, compact) = (dir.path().join("plain.bin"), dir.path().join("compact.bin"));
    train(&data, &plain, 20, &["--seed", "3"]);
    train(&data, &compact, 20, &["--seed", "3", "--compact"]);
    let (a, b) = (
        std::fs::metadata(&plain).unwrap().len(),
        std::fs::metadata(&compact).unwrap().len(),
    );
    assert!(b * 2 < a, "compact {b} bytes, plain {a}");
    let predict = |model: &Path| {
        mondrian()
            .args(["predict", "--proba", "--model"])
            .arg(model)
            .arg("--input")
            .arg(&data)
            .output()
            .unwrap()
            .stdout
    };
    assert_eq!(predict(&plain), predict(&compact));
}
