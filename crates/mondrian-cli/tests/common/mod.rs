//! What the CLI test files share: running the binary, writing inputs, reading its JSON,
//! small data sets and forged model files.
#![allow(dead_code)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

pub fn mondrian() -> Command {
    Command::cargo_bin("mondrian").unwrap()
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A 4,000-row, 8-feature, 3-class file of pseudo-random rows (`big.csv`): a save of a
/// few megabytes, or a prediction output larger than a pipe's buffer.
pub fn big_csv(dir: &Path) -> PathBuf {
    let mut s = String::from("a,b,c,d,e,f,g,h,label\n");
    for i in 0..4000u64 {
        let mut v = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut row = Vec::new();
        for _ in 0..8 {
            v ^= v >> 29;
            v = v.wrapping_mul(0xbf58_476d_1ce4_e5b9);
            row.push(format!("{:.4}", (v >> 11) as f64 / (1u64 << 53) as f64));
        }
        s.push_str(&format!("{},{}\n", row.join(","), i % 3));
    }
    write(dir, "big.csv", &s)
}

/// `mondrian train --trees N --train DATA --model MODEL` with extra arguments, which must
/// succeed.
pub fn train(data: &Path, model: &Path, trees: usize, extra: &[&str]) {
    mondrian()
        .args(["train", "--trees", &trees.to_string()])
        .args(extra)
        .arg("--train")
        .arg(data)
        .arg("--model")
        .arg(model)
        .assert()
        .success();
}

pub const TRAIN: &str = "a,b,label\n0,0,1\n0.1,0.2,1\n1,1,7\n0.9,0.8,7\n0.5,0.1,1\n0.6,0.9,7\n";

pub fn fails_with(cmd: &mut Command, needle: &str) {
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains(needle), "expected `{needle}` in: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// y = 3·a − b + small noise-free wiggle on a grid: a smooth real target.
pub fn regression_csv(n: usize, shift: f64) -> String {
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
pub fn regression_train_test(dir: &Path) -> (PathBuf, PathBuf) {
    (
        write(dir, "train.csv", &regression_csv(300, 0.0)),
        write(dir, "test.csv", &regression_csv(100, 0.013)),
    )
}

/// `mondrian eval --task regression --json` with extra arguments; its JSON.
pub fn eval_regression(train: &Path, test: &Path, extra: &[&str]) -> serde_json::Value {
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

/// A model file whose payload was changed and its checksum recomputed (a hand-edited or
/// foreign file): `edit` changes the payload.
pub fn reforged(model: &Path, out: &Path, edit: impl Fn(&mut Vec<u8>)) {
    let bytes = std::fs::read(model).unwrap();
    // Header: magic, version, kind, encoding, payload length, payload CRC, header CRC.
    let header = 13 + bytes[12] as usize + 17;
    let mut payload = bytes[header..].to_vec();
    edit(&mut payload);
    let mut file = bytes[..header].to_vec();
    let n = file.len();
    file[n - 16..n - 8].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    file[n - 8..n - 4].copy_from_slice(&crc32(&payload).to_le_bytes());
    let header_crc = crc32(&file[..n - 4]);
    file[n - 4..].copy_from_slice(&header_crc.to_le_bytes());
    file.extend_from_slice(&payload);
    std::fs::write(out, file).unwrap();
}

/// CRC-32 (IEEE), as the model format uses.
pub fn crc32(data: &[u8]) -> u32 {
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
pub fn two_models(dir: &Path) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
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

/// The JSON object on the last line of a successful run's standard output.
pub fn last_json(cmd: &mut Command) -> serde_json::Value {
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

/// The first `rows` rows of the shipped satimage training set (36 features, labels 0..5,
/// in the file's own order), as a CSV file in `dir`.
pub fn satimage_head(dir: &Path, rows: usize) -> PathBuf {
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
pub fn stream_json(input: &Path, extra: &[&str]) -> serde_json::Value {
    last_json(
        mondrian()
            .args(["stream", "--json", "--input"])
            .arg(input)
            .args(extra),
    )
}

/// y = sin(x) + noise of s.d. about 0.06, x spread over [0, 6] in no order.
pub fn sine_csv(n: usize) -> String {
    let mut s = String::from("x,y\n");
    for i in 0..n {
        let x = 6.0 * ((i as f64 * 0.618_034) % 1.0);
        let noise = 0.2 * (((i as f64 * 12.9898).sin() * 43_758.545).fract() - 0.5);
        s.push_str(&format!("{x},{}\n", x.sin() + noise));
    }
    s
}
