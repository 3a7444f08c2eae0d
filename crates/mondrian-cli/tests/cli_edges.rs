//! The CLI at the edges of its environment: a reader that goes away.

mod common;

use common::{big_csv, mondrian, train};
use std::process::Stdio;

/// `mondrian predict … | head -1`: the reader closes the pipe while predictions are still
/// coming. The process ends quietly, by SIGPIPE as other Unix tools do (or normally, if it
/// finished first), never with a panic.
#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_predict_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let data = big_csv(dir.path());
    let model = dir.path().join("model.bin");
    train(&data, &model, 3, &[]);
    let bin = assert_cmd::cargo::cargo_bin("mondrian");
    for args in [&["predict", "--proba"][..], &["predict"][..]] {
        let mut child = std::process::Command::new(&bin)
            .args(args)
            .arg("--model")
            .arg(&model)
            .arg("--input")
            .arg(&data)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read a little, as `head -1` does, then close the pipe.
        let mut stdout = child.stdout.take().unwrap();
        let mut first = [0u8; 16];
        let _ = std::io::Read::read(&mut stdout, &mut first);
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(
            out.status.success() || out.status.signal() == Some(13),
            "{args:?}: {:?}, stderr: {err}",
            out.status
        );
    }
}

/// `--input -` and `--train -` read standard input, with the same result as the file.
#[test]
fn a_dash_reads_standard_input() {
    let dir = tempfile::tempdir().unwrap();
    let data = big_csv(dir.path());
    let text = std::fs::read_to_string(&data).unwrap();
    let from_file = dir.path().join("from-file.bin");
    let from_stdin = dir.path().join("from-stdin.bin");
    train(&data, &from_file, 3, &["--seed", "5"]);
    let mut from_stdin_train = mondrian();
    from_stdin_train.args([
        "train", "--trees", "3", "--seed", "5", "--train", "-", "--model",
    ]);
    from_stdin_train
        .arg(&from_stdin)
        .write_stdin(text.clone())
        .assert()
        .success();
    assert_eq!(
        std::fs::read(&from_file).unwrap(),
        std::fs::read(&from_stdin).unwrap(),
        "the same rows from standard input give the same model"
    );
    let predict = |input: &str, stdin: Option<String>| {
        let mut cmd = mondrian();
        cmd.args(["predict", "--proba", "--model"]).arg(&from_file);
        cmd.args(["--input", input]);
        if let Some(s) = stdin {
            cmd.write_stdin(s);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let path = data.to_str().unwrap().to_string();
    assert_eq!(predict(&path, None), predict("-", Some(text)));
    // Empty standard input is an empty data set, refused as a file would be.
    let out = mondrian()
        .args(["predict", "--model"])
        .arg(&from_file)
        .args(["--input", "-"])
        .write_stdin("")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("empty") || err.contains("no rows"), "{err}");
}
