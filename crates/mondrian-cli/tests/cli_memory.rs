//! Memory guards at the command line: a model that cannot fit is refused with one line
//! and exit code 2, before it grows.

mod common;

use common::{mondrian, write};

const SMALL: &str = "a,b,label\n0.1,0.2,0\n0.9,0.8,1\n0.4,0.7,0\n0.6,0.1,1\n0.3,0.3,0\n";

/// A 200-row, 2-feature, 3-class file.
fn two_hundred_rows() -> String {
    let mut s = String::from("a,b,label\n");
    for i in 0..200 {
        s.push_str(&format!("{}.5,{},{}\n", i % 17, i * 7 % 13, i % 3));
    }
    s
}

/// Under a 4 GB address-space limit (`ulimit -v`), a million trees on a 200-row file
/// (about 25 GB) aborted on a failed allocation (exit 134) after growing for half a
/// minute; the estimate refuses them at once.
#[cfg(target_os = "linux")]
#[test]
fn a_million_trees_under_an_address_space_limit_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let data = write(dir.path(), "rows.csv", &two_hundred_rows());
    let model = dir.path().join("m.bin");
    let bin = assert_cmd::cargo::cargo_bin("mondrian");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 4194304 && exec \"$0\" \"$@\"")
        .arg(&bin)
        .args(["train", "--trees", "1000000", "--train"])
        .arg(&data)
        .arg("--model")
        .arg(&model)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("not enough memory"), "{stderr}");
    assert!(stderr.contains("address-space limit"), "{stderr}");
    assert!(!model.exists(), "no model file is written");
}

#[test]
fn a_memory_budget_refuses_what_it_cannot_hold() {
    let dir = tempfile::tempdir().unwrap();
    let data = write(dir.path(), "small.csv", SMALL);
    let model = dir.path().join("m.bin");
    let out = mondrian()
        .args([
            "train",
            "--trees",
            "5000",
            "--max-memory",
            "100K",
            "--train",
        ])
        .arg(&data)
        .arg("--model")
        .arg(&model)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("memory budget (100.0 KB)"), "{stderr}");
    // The same within budget trains.
    mondrian()
        .args(["train", "--trees", "5", "--max-memory", "100K", "--train"])
        .arg(&data)
        .arg("--model")
        .arg(&model)
        .assert()
        .success();
    // A malformed budget is a usage error naming the flag.
    let out = mondrian()
        .args(["train", "--max-memory", "lots", "--train"])
        .arg(&data)
        .arg("--model")
        .arg(&model)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--max-memory"));
}
