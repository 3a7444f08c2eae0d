//! Compact models: the same predictions, a much smaller file, no further training.

use std::io::Read;

use mondrian::{
    ClassifierParams, MondrianError, MondrianForestClassifier, MondrianForestRegressor, Persistent,
    PredictionMode, RegressorParams,
};

/// satimage (the repository's `datasets/satimage_*.csv.gz`: 36 features with integer
/// values 0–255, 6 classes), the first `n` rows of `split`, labels as class indices.
fn satimage(split: &str, n: usize) -> (Vec<f32>, Vec<usize>) {
    let path = format!(
        "{}/../../datasets/satimage_{split}.csv.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).expect("shipped data set"))
        .read_to_string(&mut text)
        .expect("gzip text");
    let (mut x, mut labels) = (Vec::new(), Vec::new());
    for line in text.lines().skip(1).take(n) {
        let v: Vec<f32> = line.split(',').map(|s| s.trim().parse().unwrap()).collect();
        x.extend_from_slice(&v[..36]);
        labels.push(v[36] as i64);
    }
    let mut classes = labels.clone();
    classes.sort_unstable();
    classes.dedup();
    let y = labels
        .iter()
        .map(|l| classes.binary_search(l).unwrap())
        .collect();
    (x, y)
}

#[test]
fn a_compact_classifier_predicts_the_same_from_a_quarter_of_the_bytes() {
    let (x, y) = satimage("train", 4435);
    let (xt, _) = satimage("test", 500);
    for bagging in [false, true] {
        let mut f = MondrianForestClassifier::new(ClassifierParams {
            n_trees: 10,
            seed: 4,
            bagging,
            ..Default::default()
        })
        .unwrap();
        f.fit(&x, 36, &y).unwrap();
        let proba = f.predict_proba(&xt, 36).unwrap();
        let importances = f.feature_importances();
        let plain = f.to_bytes().unwrap();
        f.compact().unwrap();
        assert!(f.is_compact());
        // Exactly the same numbers, before and after a save.
        assert_eq!(f.predict_proba(&xt, 36).unwrap(), proba);
        let bytes = f.to_bytes().unwrap();
        let back = MondrianForestClassifier::from_bytes(&bytes).unwrap();
        assert!(back.is_compact());
        assert_eq!(back.predict_proba(&xt, 36).unwrap(), proba);
        // The importances come from the leaves' counts, which are their points' labels.
        for (a, b) in back.feature_importances().iter().zip(&importances) {
            assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} vs {b}");
        }
        // The target: at most a quarter of the plain file.
        let ratio = bytes.len() as f64 / plain.len() as f64;
        assert!(
            ratio <= 0.25,
            "bagging {bagging}: compact/plain = {ratio:.3}"
        );
        // Training further is refused, and leaves the model as it was.
        let mut g = back;
        for err in [
            g.partial_fit(&xt[..36], 36, &[0]).unwrap_err(),
            g.forget(&[0]).unwrap_err(),
        ] {
            assert!(matches!(err, MondrianError::CompactModel), "{err}");
        }
        assert_eq!(g.to_bytes().unwrap(), bytes);
        // A new fit starts a new, trainable model.
        g.fit(&x[..3600], 36, &y[..100]).unwrap();
        assert!(!g.is_compact());
        g.partial_fit(&x[3600..3636], 36, &y[100..101]).unwrap();
    }
}

#[test]
fn a_compact_regressor_predicts_the_same() {
    // Satimage's features with a smooth target: integer-valued features, as the
    // classifier's, so boxes repeat few values.
    let (x, _) = satimage("train", 2000);
    let (xt, _) = satimage("test", 300);
    let target = |row: &[f32]| (row[0] as f64 / 40.0).sin() + row[17] as f64 / 100.0;
    let y: Vec<f64> = x.chunks(36).map(target).collect();
    for mode in [PredictionMode::Fast, PredictionMode::Exact] {
        let mut r = MondrianForestRegressor::new(RegressorParams {
            n_trees: 8,
            min_samples_split: 5,
            mode,
            ..RegressorParams::thesis()
        })
        .unwrap();
        r.fit(&x, 36, &y).unwrap();
        let before = r.predict(&xt, 36).unwrap();
        let interval = r.mixture_interval(&xt, 36, 0.9).unwrap();
        let plain = r.to_bytes().unwrap();
        r.compact().unwrap();
        let bytes = r.to_bytes().unwrap();
        let back = MondrianForestRegressor::from_bytes(&bytes).unwrap();
        for model in [&r, &back] {
            let after = model.predict(&xt, 36).unwrap();
            assert_eq!(after.mean, before.mean, "{mode:?}");
            assert_eq!(after.variance, before.variance, "{mode:?}");
            assert_eq!(model.mixture_interval(&xt, 36, 0.9).unwrap(), interval);
        }
        // Dropping the leaves' point lists and compressing: under half the bytes here.
        let ratio = bytes.len() as f64 / plain.len() as f64;
        assert!(ratio <= 0.5, "{mode:?}: compact/plain = {ratio:.3}");
        let mut g = back;
        assert!(matches!(
            g.partial_fit(&xt[..36], 36, &[0.5]).unwrap_err(),
            MondrianError::CompactModel
        ));
        assert!(matches!(
            g.forget(&[3]).unwrap_err(),
            MondrianError::CompactModel
        ));
    }
}

#[test]
fn an_unfitted_model_cannot_be_compacted() {
    let mut f = MondrianForestClassifier::new(ClassifierParams::default()).unwrap();
    assert!(matches!(f.compact(), Err(MondrianError::NotFitted)));
    let mut r = MondrianForestRegressor::new(RegressorParams::default()).unwrap();
    assert!(matches!(r.compact(), Err(MondrianError::NotFitted)));
}
