//! `mondrian predict` checks the input's column names against the training file's header
//! (kept in the model file), unless `--ignore-names`.

mod common;

use common::*;

/// The lines `predict` prints for `input`, with extra arguments; it must succeed.
fn predict(model: &std::path::Path, input: &std::path::Path, extra: &[&str]) -> String {
    let out = mondrian()
        .arg("predict")
        .args(extra)
        .arg("--model")
        .arg(model)
        .arg("--input")
        .arg(input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn other_column_names_are_refused_naming_the_first_that_differs() {
    let dir = tempfile::tempdir().unwrap();
    let (_, reg_train, clf, reg) = two_models(dir.path());
    // The classifier was trained on columns a, b.
    let swapped = write(dir.path(), "swapped.csv", "b,a\n0.05,0.1\n0.95,0.9\n");
    let out = mondrian()
        .args(["predict", "--model"])
        .arg(&clf)
        .arg("--input")
        .arg(&swapped)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("column 1 is `b`, but the model was trained with `a` there"),
        "{err}"
    );
    assert!(
        err.contains("swapped.csv") && err.contains("--ignore-names"),
        "{err}"
    );
    let second = write(dir.path(), "second.csv", "a,c,label\n0.05,0.1,1\n");
    fails_with(
        mondrian()
            .args(["predict", "--model"])
            .arg(&clf)
            .arg("--input")
            .arg(&second),
        "column 2 is `c`, but the model was trained with `b` there",
    );
    // The regressor checks the same way.
    let head = std::fs::read_to_string(&reg_train).unwrap();
    let names = head.lines().next().unwrap();
    let mut renamed: Vec<&str> = names.split(',').collect();
    renamed[0] = "first";
    let input = write(
        dir.path(),
        "renamed.csv",
        &format!("{}\n0.5,0.5,1\n", renamed.join(",")),
    );
    fails_with(
        mondrian()
            .args(["predict", "--model"])
            .arg(&reg)
            .arg("--input")
            .arg(&input),
        "column 1 is `first`",
    );
}

#[test]
fn ignore_names_predicts_by_position_and_right_names_pass() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, clf, _) = two_models(dir.path());
    let right = write(dir.path(), "right.csv", "a,b\n0.05,0.1\n0.95,0.9\n");
    let with_label = write(
        dir.path(),
        "labelled.csv",
        "a,b,label\n0.05,0.1,1\n0.95,0.9,7\n",
    );
    let renamed = write(dir.path(), "renamed.csv", "x,y\n0.05,0.1\n0.95,0.9\n");
    let expected = predict(&clf, &right, &["--proba"]);
    assert_eq!(predict(&clf, &with_label, &["--proba"]), expected);
    assert_eq!(
        predict(&clf, &renamed, &["--proba", "--ignore-names"]),
        expected
    );
    // LIBSVM input names no columns: nothing to check.
    let svm = write(dir.path(), "in.svm", "0 1:0.05 2:0.1\n0 1:0.95 2:0.9\n");
    assert_eq!(predict(&clf, &svm, &["--proba"]), expected);
}

#[test]
fn a_model_of_a_libsvm_file_takes_any_header() {
    let dir = tempfile::tempdir().unwrap();
    let data = write(
        dir.path(),
        "train.svm",
        "1 1:0.1 2:0.5\n2 1:0.9 2:0.4\n1 1:0.2\n2 1:0.8 2:0.9\n",
    );
    let model = dir.path().join("m.bin");
    train(&data, &model, 3, &[]);
    let input = write(dir.path(), "in.csv", "p,q\n0.15,0.5\n0.85,0.6\n");
    let svm = write(dir.path(), "in.svm", "0 1:0.15 2:0.5\n0 1:0.85 2:0.6\n");
    assert_eq!(predict(&model, &input, &[]), predict(&model, &svm, &[]));
}
