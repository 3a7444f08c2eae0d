//! Crash-safe saving: a save replaces the model file whole or not at all, and leaves no
//! temporary file behind.

use std::io::Write;
use std::path::PathBuf;

use mondrian::persist::{replace_file, save_file};
use mondrian::{ClassifierParams, MondrianError, MondrianForestClassifier, Persistent};

/// A fresh, empty directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mondrian-saving-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temporary directory");
    dir
}

fn entries(dir: &PathBuf) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("readable directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn model(seed: u64) -> MondrianForestClassifier {
    let mut m = MondrianForestClassifier::new(ClassifierParams {
        n_trees: 3,
        seed,
        ..Default::default()
    })
    .expect("valid parameters");
    m.fit(&[0.0f32, 0.0, 1.0, 1.0, 0.2, 0.9], 2, &[0, 1, 0])
        .expect("fit");
    m
}

#[test]
fn a_save_replaces_the_file_and_leaves_nothing_else() {
    let dir = scratch("replace");
    let path = dir.join("model.bin");
    model(1).save(&path).expect("first save");
    let second = model(2);
    second.save(&path).expect("second save");
    assert_eq!(entries(&dir), vec!["model.bin".to_string()]);
    let loaded = MondrianForestClassifier::load(&path).expect("loads");
    assert_eq!(loaded.to_bytes().unwrap(), second.to_bytes().unwrap());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_save_that_fails_midway_leaves_the_old_file_whole() {
    let dir = scratch("fail");
    let path = dir.join("model.bin");
    let first = model(1);
    first.save(&path).expect("first save");
    let before = std::fs::read(&path).unwrap();
    // Half a model is written, then the writer fails (as a full disk or a kill would stop
    // it): the file keeps the old model and the partial bytes are gone.
    let err = replace_file(&path, |w| {
        w.write_all(&model(2).to_bytes()?[..100])?;
        Err(MondrianError::Io(std::io::Error::other("disk full")))
    })
    .unwrap_err();
    assert!(err.to_string().contains("disk full"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(entries(&dir), vec!["model.bin".to_string()]);
    MondrianForestClassifier::load(&path).expect("the old model still loads");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn saving_into_a_missing_directory_is_an_error_and_creates_nothing() {
    let dir = scratch("missing");
    let path = dir.join("no-such-dir").join("model.bin");
    let err = save_file(&model(1), "mondrian-forest-classifier", &path).unwrap_err();
    assert!(matches!(err, MondrianError::Io(_)), "{err:?}");
    assert!(entries(&dir).is_empty());
    std::fs::remove_dir_all(&dir).ok();
}
