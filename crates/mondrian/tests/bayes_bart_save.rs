//! Saving and loading fitted BART models ([`Persistent`]): a round trip predicts exactly
//! as the model it came from, for every sampler and both models; a file of the other kind,
//! a flipped or cut byte, and payloads edited behind valid checksums are errors, never
//! panics.

use mondrian::bayes::{BartClassifier, BartParams, BartRegressor, PgInit, TreeSampler};
use mondrian::{MondrianError, Persistent};
use serde::{Serialize, Serializer};

/// Two features; y = sin(3 x0) + x1 and the labels x0 + x1 > 1.
fn data(n: usize, shift: f64) -> (Vec<f64>, Vec<f64>, Vec<usize>) {
    let (mut x, mut y, mut labels) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let a = (i as f64 * 0.618 + shift) % 1.0;
        let b = (i as f64 * 0.377 + 0.5 * shift) % 1.0;
        x.extend([a, b]);
        y.push((3.0 * a).sin() + b);
        labels.push(usize::from(a + b > 1.0));
    }
    (x, y, labels)
}

fn params(sampler: TreeSampler) -> BartParams {
    BartParams {
        n_trees: 8,
        n_iter: 60,
        burn_in: 30,
        sampler,
        seed: 5,
        n_threads: 1,
        ..Default::default()
    }
}

fn samplers() -> [TreeSampler; 3] {
    [
        TreeSampler::ParticleGibbs {
            particles: 5,
            max_stages: 5000,
            init: PgInit::Smc { particles: 10 },
        },
        TreeSampler::cgm(),
        TreeSampler::GrowPrune,
    ]
}

#[test]
fn regressor_round_trip_predicts_the_same() {
    let (x, y, _) = data(120, 0.0);
    let (xt, _, _) = data(40, 0.37);
    for sampler in samplers() {
        let mut model = BartRegressor::new(params(sampler)).unwrap();
        model.fit(&x, 2, &y).unwrap();
        let bytes = model.to_bytes().unwrap();
        let back = BartRegressor::from_bytes(&bytes).unwrap();
        assert_eq!(back.to_bytes().unwrap(), bytes, "{sampler:?}");
        assert_eq!(
            back.predict(&xt, 2).unwrap(),
            model.predict(&xt, 2).unwrap()
        );
        assert_eq!(
            back.predict_mean_std(&xt, 2).unwrap(),
            model.predict_mean_std(&xt, 2).unwrap()
        );
        assert_eq!(
            back.predict_interval(&xt, 2, 0.8).unwrap(),
            model.predict_interval(&xt, 2, 0.8).unwrap()
        );
        assert_eq!(
            back.posterior_draws(&xt, 2).unwrap(),
            model.posterior_draws(&xt, 2).unwrap()
        );
        assert_eq!(back.sigma_draws().unwrap(), model.sigma_draws().unwrap());
        assert_eq!(back.traces().unwrap(), model.traces().unwrap());
        assert_eq!(back.n_features(), Some(2));
        assert_eq!(back.n_draws(), Some(30));
        // f32 rows are routed the same way.
        let x32: Vec<f32> = xt.iter().map(|&v| v as f32).collect();
        assert_eq!(
            back.predict(&x32, 2).unwrap(),
            model.predict(&x32, 2).unwrap()
        );
    }
}

#[test]
fn classifier_round_trip_and_files() {
    let (x, _, labels) = data(120, 0.0);
    let (xt, _, _) = data(40, 0.37);
    let mut model = BartClassifier::new(params(TreeSampler::default())).unwrap();
    model.fit(&x, 2, &labels).unwrap();
    let dir = std::env::temp_dir().join(format!("bart-save-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("clf.model");
    model.save(&path).unwrap();
    let back = BartClassifier::load(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        back.predict_proba(&xt, 2).unwrap(),
        model.predict_proba(&xt, 2).unwrap()
    );
    assert_eq!(
        back.predict(&xt, 2).unwrap(),
        model.predict(&xt, 2).unwrap()
    );
    assert_eq!(back.traces().unwrap(), model.traces().unwrap());
    // The kinds are told apart.
    let bytes = model.to_bytes().unwrap();
    assert!(BartRegressor::from_bytes(&bytes).is_err());
    // Unfitted models round-trip too.
    let fresh = BartRegressor::new(params(TreeSampler::GrowPrune)).unwrap();
    let again = BartRegressor::from_bytes(&fresh.to_bytes().unwrap()).unwrap();
    assert!(matches!(
        again.predict(&xt, 2),
        Err(MondrianError::NotFitted)
    ));
    assert_eq!(again.n_features(), None);
}

/// The payload of a saved file starts after its header: magic (8), version (4), kind
/// length (1) and kind, encoding (1), payload length (8), two CRC-32s (4 + 4).
fn payload_start(bytes: &[u8]) -> usize {
    8 + 4 + 1 + bytes[12] as usize + 1 + 8 + 4 + 4
}

/// A payload edited by `edit`, saved again under a valid header and checksums, so that
/// only the model's own checks stand between it and a loaded model.
fn resave<T: Persistent>(bytes: &[u8], edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    struct Raw(Vec<u8>);
    impl Serialize for Raw {
        fn serialize<Z: Serializer>(&self, s: Z) -> Result<Z::Ok, Z::Error> {
            use serde::ser::SerializeTuple;
            let mut t = s.serialize_tuple(self.0.len())?;
            for b in &self.0 {
                t.serialize_element(b)?;
            }
            t.end()
        }
    }
    let mut payload = bytes[payload_start(bytes)..].to_vec();
    edit(&mut payload);
    let mut out = Vec::new();
    mondrian::persist::save(&Raw(payload), T::KIND, &mut out).unwrap();
    out
}

#[test]
fn corrupt_and_truncated_files_are_errors() {
    let (x, y, labels) = data(80, 0.0);
    let mut model = BartRegressor::new(params(TreeSampler::cgm())).unwrap();
    model.fit(&x, 2, &y).unwrap();
    let bytes = model.to_bytes().unwrap();
    // A flipped byte anywhere fails the checksums; a cut file is refused.
    for at in [3, 20, bytes.len() / 2, bytes.len() - 1] {
        let mut b = bytes.clone();
        b[at] ^= 0x41;
        assert!(BartRegressor::from_bytes(&b).is_err(), "flip at {at}");
    }
    for keep in [0, 10, 40, bytes.len() / 2, bytes.len() - 1] {
        assert!(
            BartRegressor::from_bytes(&bytes[..keep]).is_err(),
            "cut at {keep}"
        );
    }
    // The payload cut short under valid checksums.
    let cut = resave::<BartRegressor>(&bytes, |p| p.truncate(p.len() / 2));
    assert!(BartRegressor::from_bytes(&cut).is_err());
    // Past the checksums: every byte of the first 300 of the payload (the parameters and
    // the first draw) and every 31st after, changed three ways, is refused or decodes to a
    // model that still predicts finite numbers.
    let n = bytes.len() - payload_start(&bytes);
    let positions: Vec<usize> = (0..n).filter(|&at| at < 300 || at % 31 == 0).collect();
    let mut refused = 0;
    for &at in &positions {
        for flip in [0x01u8, 0x80, 0xff] {
            let b = resave::<BartRegressor>(&bytes, |p| p[at] ^= flip);
            match BartRegressor::from_bytes(&b) {
                Err(_) => refused += 1,
                // An edited width refuses these rows; that is an error too, not a panic.
                Ok(m) => {
                    if let Ok(f) = m.predict(&x, 2) {
                        assert!(f.iter().all(|v| !v.is_nan()), "edit at {at}");
                    }
                }
            }
        }
    }
    eprintln!(
        "{refused} of {} single-byte edits refused",
        3 * positions.len()
    );
    assert!(refused > 0);
    // The classifier's stored scale and σ are held to the probit model's.
    let mut clf = BartClassifier::new(params(TreeSampler::GrowPrune)).unwrap();
    clf.fit(&x, 2, &labels).unwrap();
    let bytes = clf.to_bytes().unwrap();
    let n = bytes.len() - payload_start(&bytes);
    for at in (0..n).step_by(5) {
        let b = resave::<BartClassifier>(&bytes, |p| p[at] ^= 0x80);
        if let Ok(p) = BartClassifier::from_bytes(&b).and_then(|m| m.predict_proba(&x, 2)) {
            assert!(p.iter().all(|v| (0.0..=1.0).contains(v)), "edit at {at}");
        }
    }
}
