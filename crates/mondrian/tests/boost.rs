//! The experimental online boosting (spec `bayesian-trees.md` §6.3): refused settings and
//! labels, reproducibility, a learnable problem, and the weights it keeps.
#![cfg(feature = "experimental")]

use mondrian::forest::boost::OzaBoostClassifier;
use mondrian::{ClassifierParams, MondrianError};

fn params(n_trees: usize, seed: u64) -> ClassifierParams {
    ClassifierParams {
        n_trees,
        seed,
        n_threads: 1,
        n_classes: Some(2),
        ..Default::default()
    }
}

/// Uniform points on the unit square, label 1 when x0 + x1 > 1, from a fixed LCG.
fn data(n: usize, seed: u64) -> (Vec<f64>, Vec<usize>) {
    let mut s = seed
        .wrapping_mul(2862933555777941757)
        .wrapping_add(3037000493);
    let mut u = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let x: Vec<f64> = (0..2 * n).map(|_| u()).collect();
    let y = (0..n)
        .map(|i| usize::from(x[2 * i] + x[2 * i + 1] > 1.0))
        .collect();
    (x, y)
}

#[test]
fn refuses_what_boosting_cannot_take() {
    let no_k = OzaBoostClassifier::new(ClassifierParams {
        n_classes: None,
        ..params(3, 0)
    });
    assert!(matches!(
        no_k,
        Err(MondrianError::InvalidParameter {
            name: "n_classes",
            ..
        })
    ));
    let bagged = OzaBoostClassifier::new(ClassifierParams {
        bagging: true,
        ..params(3, 0)
    });
    assert!(matches!(
        bagged,
        Err(MondrianError::InvalidParameter {
            name: "bagging",
            ..
        })
    ));
    let mut m = OzaBoostClassifier::new(params(3, 0)).unwrap();
    assert!(matches!(
        m.predict(&[0.5, 0.5], 2),
        Err(MondrianError::NotFitted)
    ));
    assert!(m.partial_fit(&[0.1, 0.2], 2, &[2]).is_err());
    assert!(m.partial_fit(&[0.1, f64::NAN], 2, &[0]).is_err());
    assert!(m.partial_fit(&[0.1, 0.2], 2, &[0, 1]).is_err());
}

/// The same seed and order give the same model, a learnable boundary is learnt, the
/// probabilities are a distribution, and the first tree's weighted error is below 1/2.
#[test]
fn learns_reproducibly_and_keeps_the_weights() {
    let (x, y) = data(600, 1);
    let (xt, yt) = data(400, 2);
    let fit = |seed| {
        let mut m = OzaBoostClassifier::new(params(8, seed)).unwrap();
        for i in 0..y.len() {
            m.partial_fit(&x[2 * i..2 * i + 2], 2, &y[i..=i]).unwrap();
        }
        m
    };
    let (a, b) = (fit(4), fit(4));
    assert_eq!(
        a.predict_proba(&xt, 2).unwrap(),
        b.predict_proba(&xt, 2).unwrap()
    );
    let p = a.predict(&xt, 2).unwrap();
    let acc = p.iter().zip(&yt).filter(|(u, v)| u == v).count() as f64 / yt.len() as f64;
    // A single Mondrian tree on 600 points of this boundary is right ~90 % of the time.
    assert!(acc > 0.85, "accuracy {acc}");
    let probs = a.predict_proba(&xt, 2).unwrap();
    assert!(probs
        .chunks_exact(2)
        .all(|q| (q[0] + q[1] - 1.0).abs() < 1e-12 && q.iter().all(|v| (0.0..=1.0).contains(v))));
    let s = a.state();
    let e0 = s.epsilon(0).unwrap();
    assert!(e0 < 0.5, "tree 0 error {e0}");
    assert!(s.beta(0, 2).is_some());
}
