//! Model files of every kind (`described`): a forest with its data's description, and
//! `AnyModel`, which reads any kind by the kind its header names.

use mondrian::described::{AnyModel, DescribedClassifier, DescribedRegressor};
use mondrian::{
    ClassifierParams, MondrianError, MondrianForestClassifier, MondrianForestRegressor, Persistent,
    RegressorParams,
};
use serde::Serialize;

const X: [f64; 8] = [0.1, 0.2, 0.8, 0.9, 0.2, 0.1, 0.9, 0.7];

fn classifier() -> MondrianForestClassifier {
    let mut m = MondrianForestClassifier::new(ClassifierParams {
        n_trees: 3,
        ..Default::default()
    })
    .unwrap();
    m.fit(&X, 2, &[0, 1, 0, 1]).unwrap();
    m
}

fn regressor() -> MondrianForestRegressor {
    let mut m = MondrianForestRegressor::new(RegressorParams {
        n_trees: 2,
        ..RegressorParams::thesis()
    })
    .unwrap();
    m.fit(&X, 2, &[0.5, 1.5, 0.4, 1.2]).unwrap();
    m
}

fn polya() -> mondrian::MondrianPolyaForest {
    let mut m = mondrian::MondrianPolyaForest::new(mondrian::PolyaParams {
        n_trees: 3,
        ..Default::default()
    })
    .unwrap();
    let x: Vec<f64> = (0..40).map(|i| ((i * 13) % 17) as f64).collect();
    m.fit(&x, 2).unwrap();
    m
}

fn names() -> Vec<String> {
    vec!["a".into(), "b".into()]
}

#[test]
fn any_model_reads_every_kind_by_its_header() {
    let dir = std::env::temp_dir().join(format!("mondrian-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let clf = classifier();
    let reg = regressor();
    let described_clf = DescribedClassifier::new(clf.clone(), vec![-3, 5], names()).unwrap();
    let described_reg = DescribedRegressor::new(reg.clone(), names()).unwrap();
    let files = [
        ("c.bin", clf.to_bytes().unwrap()),
        ("r.bin", reg.to_bytes().unwrap()),
        ("dc.bin", described_clf.to_bytes().unwrap()),
        ("dr.bin", described_reg.to_bytes().unwrap()),
        ("p.bin", polya().to_bytes().unwrap()),
    ];
    for (name, bytes) in &files {
        std::fs::write(dir.join(name), bytes).unwrap();
        let from_file = AnyModel::load(dir.join(name)).unwrap();
        let from_bytes = AnyModel::from_bytes(bytes).unwrap();
        assert_eq!(from_file.kind(), from_bytes.kind());
        // Each comes back as the kind it was saved as, and writes the same bytes again.
        let again = match from_file {
            AnyModel::Classifier(m) => {
                assert_eq!(*name, "c.bin");
                m.to_bytes()
            }
            AnyModel::Regressor(m) => {
                assert_eq!(*name, "r.bin");
                m.to_bytes()
            }
            AnyModel::DescribedClassifier(f) => {
                assert_eq!(*name, "dc.bin");
                assert_eq!(
                    (f.classes.clone(), f.feature_names.clone()),
                    (vec![-3, 5], names())
                );
                f.to_bytes()
            }
            AnyModel::DescribedRegressor(f) => {
                assert_eq!(*name, "dr.bin");
                assert_eq!(f.feature_names, names());
                f.to_bytes()
            }
            AnyModel::Polya(m) => {
                assert_eq!(*name, "p.bin");
                m.to_bytes()
            }
        };
        assert_eq!(&again.unwrap(), bytes);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_description_must_fit_its_forest() {
    // One distinct label value per class, and no names or one per feature.
    for (classes, names) in [
        (vec![1], names()),
        (vec![1, 1], names()),
        (vec![1, 2, 3], names()),
        (vec![1, 2], vec!["a".to_string()]),
    ] {
        let e = DescribedClassifier::new(classifier(), classes, names).unwrap_err();
        assert!(matches!(e, MondrianError::CorruptModel(_)), "{e}");
    }
    assert!(DescribedClassifier::new(classifier(), vec![1, 2], Vec::new()).is_ok());
    assert!(DescribedRegressor::new(regressor(), vec!["a".into()]).is_err());

    // A file whose description does not fit is refused when it is read, whatever wrote
    // it: here one of the same layout with a class too many.
    #[derive(Serialize)]
    struct Forged {
        classes: Vec<i64>,
        feature_names: Vec<String>,
        forest: MondrianForestClassifier,
    }
    let forged = Forged {
        classes: vec![1, 2, 3],
        feature_names: names(),
        forest: classifier(),
    };
    let mut bytes = Vec::new();
    mondrian::persist::save(&forged, DescribedClassifier::KIND, &mut bytes).unwrap();
    let e = AnyModel::from_bytes(&bytes).unwrap_err().to_string();
    assert!(e.contains("class list does not match the model"), "{e}");
    assert!(!e.contains("cannot load model: cannot load model"), "{e}");
}

#[test]
fn what_is_not_a_model_file_is_named_as_such() {
    let err = |bytes: &[u8]| AnyModel::from_bytes(bytes).unwrap_err().to_string();
    assert!(err(b"a,b,label\n1,2,3\n").contains("not a mondrian model file"));
    assert!(err(b"").contains("not a mondrian model file"));
    let good = classifier().to_bytes().unwrap();
    assert!(
        err(&good[..10]).contains("truncated"),
        "{}",
        err(&good[..10])
    );
    assert!(err(&good[..good.len() - 5]).contains("truncated"));
    let mut other = Vec::new();
    mondrian::persist::save(&1u32, "mondrian-something-else", &mut other).unwrap();
    assert!(err(&other).contains("`mondrian-something-else`, which this build does not know"));
    let missing = AnyModel::load("/nonexistent/dir/m.bin").unwrap_err();
    assert!(matches!(missing, MondrianError::Io(_)));
}
