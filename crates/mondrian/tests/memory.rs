//! Memory guards: a training call the budget cannot hold is refused before anything grows,
//! and the estimate it is judged by covers what forests really take.

use mondrian::memory::{forest_bytes, ForestShape};
use mondrian::{
    ClassifierParams, MondrianError, MondrianForestClassifier, MondrianForestRegressor, Persistent,
    PredictionMode, RegressorParams,
};

/// `n` rows of `d` pseudo-random features in [0, 1) with labels in 0..3.
fn data(n: usize, d: usize, seed: u64) -> (Vec<f64>, Vec<usize>) {
    let mut v = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        v ^= v << 13;
        v ^= v >> 7;
        v ^= v << 17;
        (v >> 11) as f64 / (1u64 << 53) as f64
    };
    let x: Vec<f64> = (0..n * d).map(|_| next()).collect();
    let y = (0..n).map(|_| (next() * 3.0) as usize % 3).collect();
    (x, y)
}

#[test]
fn a_budget_too_small_refuses_fit_and_leaves_the_model_as_it_was() {
    let (x, y) = data(300, 4, 1);
    let mut f = MondrianForestClassifier::new(ClassifierParams {
        n_trees: 5,
        seed: 3,
        ..Default::default()
    })
    .unwrap();
    f.fit(&x[..400], 4, &y[..100]).unwrap();
    let before = f.to_bytes().unwrap();
    // The estimate for 1000 trees over 300 points is far above 1 MB.
    let mut big = MondrianForestClassifier::new(ClassifierParams {
        n_trees: 1000,
        max_memory: Some(1_000_000),
        ..Default::default()
    })
    .unwrap();
    let err = big.fit(&x, 4, &y).unwrap_err();
    assert!(
        matches!(&err, MondrianError::MemoryLimit { limit: 1_000_000, needed, .. } if *needed > 1_000_000),
        "{err}"
    );
    assert!(
        err.to_string().contains("1000 trees over 300 points"),
        "{err}"
    );
    assert!(big.n_features().is_none(), "nothing was grown");
    // A partial_fit that would cross the budget is refused; the model is unchanged.
    let held = forest_bytes(ForestShape {
        n_trees: 5,
        n_points: 100,
        n_features: 4,
        stats_bytes_per_node: 5 * 4,
        min_samples_split: 2,
    });
    let mut tight = MondrianForestClassifier::from_bytes(&before).unwrap();
    let mut params = tight.params().clone();
    params.max_memory = Some(held + 1);
    // A model's budget is a parameter: rebuild with it and replay the same fit.
    tight = MondrianForestClassifier::new(params).unwrap();
    tight.fit(&x[..400], 4, &y[..100]).unwrap();
    assert_eq!(tight.to_bytes().unwrap(), before, "the budget is not saved");
    let err = tight.partial_fit(&x[400..], 4, &y[100..]).unwrap_err();
    assert!(matches!(err, MondrianError::MemoryLimit { .. }), "{err}");
    assert_eq!(tight.to_bytes().unwrap(), before);
}

#[test]
fn the_regressor_is_guarded_too() {
    let (x, _) = data(200, 3, 2);
    let y: Vec<f64> = (0..200).map(|i| x[3 * i] * 2.0).collect();
    let mut r = MondrianForestRegressor::new(RegressorParams {
        n_trees: 10_000,
        max_memory: Some(10_000_000),
        ..RegressorParams::thesis()
    })
    .unwrap();
    assert!(matches!(
        r.fit(&x, 3, &y).unwrap_err(),
        MondrianError::MemoryLimit { .. }
    ));
    assert!(r.n_features().is_none());
}

#[test]
fn the_estimate_covers_what_forests_take() {
    // With labels that keep blocks splitting (no pausing on pure blocks) and a
    // regressor with leaves of up to min_samples_split − 1 points, the estimate must not
    // fall below the forest's own count of its heap bytes, nor be wildly above it (then it
    // would refuse models that fit): within a factor of 4.
    for (n, d) in [(500, 2), (2000, 8), (1000, 30)] {
        let (x, y) = data(n, d, n as u64);
        let mut f = MondrianForestClassifier::new(ClassifierParams {
            n_trees: 4,
            pause_on_pure: false,
            ..Default::default()
        })
        .unwrap();
        f.fit(&x, d, &y).unwrap();
        let real = f.summary().total_bytes as u64;
        let est = forest_bytes(ForestShape {
            n_trees: 4,
            n_points: n,
            n_features: d,
            stats_bytes_per_node: (3 + 2) * 4,
            min_samples_split: 2,
        });
        assert!(
            est >= real && est <= 4 * real,
            "classifier n {n} d {d}: estimate {est}, real {real}"
        );
        let t: Vec<f64> = (0..n).map(|i| x[i * d] + y[i] as f64).collect();
        for mss in [2, 5, 10] {
            let mut r = MondrianForestRegressor::new(RegressorParams {
                n_trees: 4,
                min_samples_split: mss,
                mode: PredictionMode::Fast,
                ..RegressorParams::thesis()
            })
            .unwrap();
            r.fit(&x, d, &t).unwrap();
            let real = r.summary().total_bytes as u64;
            let est = forest_bytes(ForestShape {
                n_trees: 4,
                n_points: n,
                n_features: d,
                stats_bytes_per_node: std::mem::size_of::<mondrian::stats::moments::Moments>(),
                min_samples_split: mss,
            });
            assert!(
                est >= real && est <= 4 * real,
                "regressor n {n} d {d} mss {mss}: estimate {est}, real {real}"
            );
        }
    }
}
