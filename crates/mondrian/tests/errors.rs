//! Bad input gives a typed error, never a panic (DESIGN.md principle 5).

use mondrian::Persistent;
use mondrian::{ClassifierParams, MondrianError, MondrianForestClassifier, Scaling};

fn small() -> MondrianForestClassifier {
    MondrianForestClassifier::new(ClassifierParams {
        n_trees: 3,
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn non_finite_features_are_refused() {
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let mut f = small();
        let err = f.fit(&[0.0, 1.0, bad, 2.0], 2, &[0, 1]).unwrap_err();
        assert!(
            matches!(
                err,
                MondrianError::NonFinite {
                    row: 1,
                    feature: 0,
                    ..
                }
            ),
            "{err}"
        );
        f.fit(&[0.0, 1.0, 1.0, 2.0], 2, &[0, 1]).unwrap();
        assert!(matches!(
            f.partial_fit(&[bad, 0.0], 2, &[0]).unwrap_err(),
            MondrianError::NonFinite { .. }
        ));
        assert!(matches!(
            f.predict_proba(&[0.0, bad], 2).unwrap_err(),
            MondrianError::NonFinite {
                row: 0,
                feature: 1,
                ..
            }
        ));
        // Nothing was absorbed by the failed calls.
        assert_eq!(f.n_samples_seen(), 2);
    }
}

#[test]
fn wrong_width_is_refused() {
    let mut f = small();
    f.fit(&[0.0, 1.0, 1.0, 2.0], 2, &[0, 1]).unwrap();
    let err = f.predict(&[0.0, 1.0, 2.0], 3).unwrap_err();
    assert!(
        matches!(
            err,
            MondrianError::WidthMismatch {
                expected: 2,
                got: 3,
                ..
            }
        ),
        "{err}"
    );
    assert!(matches!(
        f.partial_fit(&[0.0, 1.0, 2.0], 3, &[0]).unwrap_err(),
        MondrianError::WidthMismatch { .. }
    ));
    assert!(matches!(
        f.predict(&[0.0, 1.0, 2.0], 2).unwrap_err(),
        MondrianError::RaggedMatrix {
            len: 3,
            n_features: 2
        }
    ));
    assert!(matches!(
        f.fit(&[0.0, 1.0], 0, &[0]).unwrap_err(),
        MondrianError::InvalidParameter { .. }
    ));
}

#[test]
fn empty_and_mismatched_data_are_refused() {
    let mut f = small();
    assert!(matches!(
        f.fit::<f64>(&[], 2, &[]).unwrap_err(),
        MondrianError::EmptyData(_)
    ));
    assert!(matches!(
        f.fit(&[0.0, 1.0], 2, &[0, 1]).unwrap_err(),
        MondrianError::LengthMismatch {
            n_rows: 1,
            n_labels: 2
        }
    ));
    assert!(matches!(
        f.predict(&[0.0, 1.0], 2).unwrap_err(),
        MondrianError::NotFitted
    ));
    // An empty mini-batch is a no-op, not an error.
    f.partial_fit::<f64>(&[], 2, &[]).unwrap();
}

#[test]
fn labels_outside_declared_classes_are_refused() {
    let mut f = MondrianForestClassifier::new(ClassifierParams {
        n_trees: 2,
        n_classes: Some(2),
        ..Default::default()
    })
    .unwrap();
    let err = f.fit(&[0.0, 1.0, 2.0], 1, &[0, 1, 2]).unwrap_err();
    assert!(
        matches!(
            err,
            MondrianError::LabelOutOfRange {
                row: 2,
                label: 2,
                n_classes: 2
            }
        ),
        "{err}"
    );
    // The message names the classes inclusively: 2 is not among them.
    assert_eq!(
        err.to_string(),
        "row 2: label 2 is not one of the 2 declared classes (0 to 1)"
    );
}

#[test]
fn invalid_parameters_are_refused() {
    let cases = [
        ClassifierParams {
            n_trees: 0,
            ..Default::default()
        },
        ClassifierParams {
            lifetime: -1.0,
            ..Default::default()
        },
        ClassifierParams {
            lifetime: f64::NAN,
            ..Default::default()
        },
        ClassifierParams {
            discount_factor: f64::INFINITY,
            ..Default::default()
        },
        ClassifierParams {
            n_classes: Some(0),
            ..Default::default()
        },
        ClassifierParams {
            scaling: Scaling::Ranges(vec![(1.0, 0.0)]),
            ..Default::default()
        },
    ];
    for p in cases {
        assert!(matches!(
            MondrianForestClassifier::new(p).unwrap_err(),
            MondrianError::InvalidParameter { .. }
        ));
    }
}

#[test]
fn new_class_mid_stream_grows_k() {
    let mut f = small();
    f.partial_fit(&[0.0, 0.1, 1.0, 1.0], 2, &[0, 1]).unwrap();
    assert_eq!(f.n_classes(), 2);
    f.partial_fit(&[5.0, 5.0], 2, &[2]).unwrap();
    assert_eq!(f.n_classes(), 3);
    let p = f.predict_proba(&[5.0, 5.0, 0.0, 0.1], 2).unwrap();
    assert_eq!(p.len(), 6);
    for row in p.chunks(3) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }
    assert_eq!(f.predict(&[5.0, 5.0], 2).unwrap(), vec![2]);
}

#[test]
fn corrupt_truncated_and_foreign_model_bytes_are_refused() {
    let mut f = small();
    f.fit(&[0.0, 1.0, 1.0, 2.0, 3.0, 0.5], 2, &[0, 1, 1])
        .unwrap();
    let bytes = f.to_bytes().unwrap();
    // Round trip predicts identically.
    let g = MondrianForestClassifier::from_bytes(&bytes).unwrap();
    let x = [0.3, 0.7, 2.0, 2.0];
    assert_eq!(
        f.predict_proba(&x, 2).unwrap(),
        g.predict_proba(&x, 2).unwrap()
    );
    // Truncated anywhere.
    for cut in [0, 5, 12, 20, bytes.len() / 2, bytes.len() - 1] {
        let err = MondrianForestClassifier::from_bytes(&bytes[..cut]).unwrap_err();
        assert!(
            matches!(err, MondrianError::CorruptModel(_)),
            "cut {cut}: {err}"
        );
    }
    // A flipped payload byte.
    let mut flipped = bytes.clone();
    let last = flipped.len() - 10;
    flipped[last] ^= 0x40;
    assert!(matches!(
        MondrianForestClassifier::from_bytes(&flipped).unwrap_err(),
        MondrianError::CorruptModel(m) if m.contains("checksum")
    ));
    // Another format version.
    let mut versioned = bytes.clone();
    versioned[8] = 99;
    assert!(matches!(
        MondrianForestClassifier::from_bytes(&versioned).unwrap_err(),
        MondrianError::IncompatibleVersion { found: 99, .. }
    ));
    // Not a model at all.
    assert!(MondrianForestClassifier::from_bytes(b"label,x\n1,2\n").is_err());
    // Missing file.
    assert!(matches!(
        MondrianForestClassifier::load("/nonexistent/model.bin").unwrap_err(),
        MondrianError::Io(_)
    ));
}

#[test]
fn same_model_whatever_the_thread_count() {
    let x: Vec<f64> = (0..400).map(|i| ((i * 7919) % 101) as f64 / 10.0).collect();
    let y: Vec<usize> = (0..200).map(|i| i * 31 % 3).collect();
    // Enough query rows that two and three workers split them into several blocks.
    let q: Vec<f64> = (0..1400).map(|i| ((i * 613) % 127) as f64 / 11.0).collect();
    let mut models = Vec::new();
    let mut probas = Vec::new();
    for threads in [1, 2, 3] {
        let mut f = MondrianForestClassifier::new(ClassifierParams {
            // Enough trees that a single streamed point is shared between the caller and
            // the stream helpers (see `grow_trees`).
            n_trees: 70,
            n_threads: threads,
            bagging: true,
            ..Default::default()
        })
        .unwrap();
        // Batch, then a batch larger than the forest's points (one set per tree), then a
        // smaller one (point by point), then single points.
        f.fit(&x[..100], 2, &y[..50]).unwrap();
        f.partial_fit(&x[100..300], 2, &y[50..150]).unwrap();
        f.partial_fit(&x[300..360], 2, &y[150..180]).unwrap();
        for i in 180..200 {
            f.partial_fit(&x[2 * i..2 * i + 2], 2, &y[i..=i]).unwrap();
        }
        probas.push(f.predict_proba(&q, 2).unwrap());
        // The thread count is not saved: the files are byte for byte the same.
        models.push(f.to_bytes().unwrap());
    }
    assert_eq!(models[0], models[1]);
    assert_eq!(models[0], models[2]);
    assert_eq!(probas[0], probas[1]);
    assert_eq!(probas[0], probas[2]);
}

#[test]
fn the_thread_setting_is_not_saved() {
    let mut f = small();
    f.fit(&[0.0, 1.0, 2.0, 3.0], 1, &[0, 1, 0, 1]).unwrap();
    f.set_n_threads(usize::MAX);
    assert_eq!(f.params().n_threads, mondrian::data::MAX_THREADS);
    let bytes = f.to_bytes().unwrap();
    f.set_n_threads(1);
    assert_eq!(f.to_bytes().unwrap(), bytes);
    // A loaded model uses every core (0) until told otherwise.
    let g = MondrianForestClassifier::from_bytes(&bytes).unwrap();
    assert_eq!(g.params().n_threads, 0);
}

#[test]
fn every_damaged_header_byte_is_reported_as_corruption() {
    // Header: magic (8), version (4), kind length (1), kind, encoding (1), payload length
    // (8), payload CRC (4), header CRC (4). A flipped bit anywhere in it, a length byte included, must
    // be named as what it is: a corrupt file, never a truncated one or another version
    // (except in the version word itself).
    let mut f = small();
    f.fit(&[0.0, 1.0, 1.0, 2.0, 3.0, 0.5], 2, &[0, 1, 1])
        .unwrap();
    let bytes = f.to_bytes().unwrap();
    let header_len = 8 + 4 + 1 + bytes[12] as usize + 1 + 8 + 4 + 4;
    assert!(MondrianForestClassifier::from_bytes(&bytes).is_ok());
    for at in 0..header_len {
        for bit in [0x01u8, 0x80] {
            let mut damaged = bytes.clone();
            damaged[at] ^= bit;
            let err = MondrianForestClassifier::from_bytes(&damaged).unwrap_err();
            match (at, &err) {
                (8..=11, MondrianError::IncompatibleVersion { .. }) => {}
                (_, MondrianError::CorruptModel(m)) => assert!(
                    !m.contains("truncated") && !m.contains("ends inside"),
                    "byte {at} bit {bit:#x}: {m}"
                ),
                _ => panic!("byte {at} bit {bit:#x}: {err}"),
            }
        }
    }
    // The payload length's low byte, as the issue saw it, names the checksum.
    let at = 8 + 4 + 1 + bytes[12] as usize + 1;
    let mut damaged = bytes.clone();
    damaged[at] ^= 0x10;
    let err = MondrianForestClassifier::from_bytes(&damaged).unwrap_err();
    assert!(
        matches!(&err, MondrianError::CorruptModel(m) if m.contains("header checksum")),
        "{err}"
    );
}

#[test]
fn data_after_a_saved_model_is_refused() {
    let mut f = small();
    f.fit(&[0.0, 1.0, 2.0, 3.0], 1, &[0, 1, 0, 1]).unwrap();
    let mut bytes = f.to_bytes().unwrap();
    assert!(MondrianForestClassifier::from_bytes(&bytes).is_ok());
    bytes.push(0);
    let err = MondrianForestClassifier::from_bytes(&bytes).unwrap_err();
    assert!(
        matches!(&err, MondrianError::CorruptModel(m) if m.contains("after the end")),
        "{err}"
    );
    // The same through a file.
    let path = std::env::temp_dir().join(format!("mondrian-trailing-{}.bin", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let with_extra = MondrianForestClassifier::load(&path);
    std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
    let exact = MondrianForestClassifier::load(&path);
    std::fs::remove_file(&path).unwrap();
    assert!(with_extra.is_err());
    assert!(exact.is_ok());
}
