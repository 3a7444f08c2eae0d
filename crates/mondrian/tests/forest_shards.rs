//! Tree-parallel shards: shards trained like the whole forest on the same rows merge into
//! the forest one process grows (same saved bytes, same predictions), split then merge is
//! the identity, shard predictions combine into the merged forest's, and shards that do
//! not fit together are refused with `ShardMismatch`.

use mondrian::{
    Calibration, ClassifierParams, FeatureWeights, MondrianError, MondrianForestClassifier,
    MondrianForestRegressor, Persistent, RegressorParams,
};

const D: usize = 3;

/// `n` rows of `D` features in [0, 1) (a fixed LCG, so the data do not depend on a crate),
/// with a class label in 0..3 and a regression target.
fn data(n: usize, seed: u64) -> (Vec<f64>, Vec<usize>, Vec<f64>) {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let x: Vec<f64> = (0..n * D).map(|_| next()).collect();
    let rows = x.chunks_exact(D);
    let labels = rows
        .clone()
        .map(|r| ((r[0] + r[1]) * 1.5) as usize % 3)
        .collect();
    let targets = rows.map(|r| (6.0 * r[0]).sin() + r[1] * r[2]).collect();
    (x, labels, targets)
}

/// Shards of `sizes` trees, in order, of a forest of their total.
fn ranges(sizes: &[usize]) -> Vec<(usize, usize)> {
    let mut first = 0;
    sizes
        .iter()
        .map(|&n| {
            first += n;
            (first - n, n)
        })
        .collect()
}

fn classifier_params(window: Option<usize>) -> ClassifierParams {
    ClassifierParams {
        n_trees: 10,
        seed: 7,
        bagging: true,
        lifetime: 5.0,
        window,
        n_threads: 2,
        ..Default::default()
    }
}

fn regressor_params(window: Option<usize>, calibration: Calibration) -> RegressorParams {
    RegressorParams {
        n_trees: 10,
        seed: 11,
        bagging: true,
        window,
        calibration,
        feature_weights: FeatureWeights::Uniform,
        n_threads: 2,
        ..RegressorParams::thesis()
    }
}

/// How a model is trained: one batch fit, or mini-batches of `batch` rows.
#[derive(Clone, Copy)]
enum Training {
    Batch,
    Stream(usize),
}

fn train_classifier(m: &mut MondrianForestClassifier, how: Training, x: &[f64], y: &[usize]) {
    match how {
        Training::Batch => m.fit(x, D, y).unwrap(),
        Training::Stream(b) => {
            for (xs, ys) in x.chunks(b * D).zip(y.chunks(b)) {
                m.partial_fit(xs, D, ys).unwrap();
            }
        }
    }
}

fn train_regressor(m: &mut MondrianForestRegressor, how: Training, x: &[f64], y: &[f64]) {
    match how {
        Training::Batch => m.fit(x, D, y).unwrap(),
        Training::Stream(b) => {
            for (xs, ys) in x.chunks(b * D).zip(y.chunks(b)) {
                m.partial_fit(xs, D, ys).unwrap();
            }
        }
    }
}

fn classifier_cases() -> Vec<(Training, Option<usize>)> {
    vec![
        (Training::Batch, None),
        (Training::Stream(17), None),
        (Training::Stream(9), Some(40)),
    ]
}

#[test]
fn classifier_shards_merge_into_the_single_process_forest() {
    let (x, y, _) = data(120, 1);
    let (xt, _, _) = data(30, 2);
    for (how, window) in classifier_cases() {
        let params = classifier_params(window);
        let mut full = MondrianForestClassifier::new(params.clone()).unwrap();
        train_classifier(&mut full, how, &x, &y);
        let bytes = full.to_bytes().unwrap();
        let proba = full.predict_proba(&xt, D).unwrap();
        for sizes in [&[3, 3, 4][..], &[1, 9]] {
            let mut shards: Vec<_> = ranges(sizes)
                .into_iter()
                .map(|(first, n)| {
                    let mut s =
                        MondrianForestClassifier::new_shard(params.clone(), first, n).unwrap();
                    train_classifier(&mut s, how, &x, &y);
                    assert_eq!(s.shard_range(), first..first + n);
                    s
                })
                .collect();
            // Partial predictions, then a merge from shards in another order.
            let parts = shards
                .iter()
                .rev()
                .map(|s| s.predict_proba_sum(&xt, D).unwrap())
                .collect();
            let combined = MondrianForestClassifier::combine_proba(parts).unwrap();
            shards.reverse();
            let merged = MondrianForestClassifier::merge(shards).unwrap();
            assert!(!merged.is_shard());
            assert_eq!(merged.to_bytes().unwrap(), bytes);
            assert_eq!(merged.predict_proba(&xt, D).unwrap(), proba);
            assert_eq!(combined.len(), proba.len());
            for (c, p) in combined.iter().zip(&proba) {
                assert!((c - p).abs() <= 1e-14, "{c} vs {p}");
            }
        }
        // One part of the whole forest combines to exactly its prediction.
        let whole = full.predict_proba_sum(&xt, D).unwrap();
        assert_eq!(
            MondrianForestClassifier::combine_proba(vec![whole]).unwrap(),
            proba
        );
    }
}

#[test]
fn regressor_shards_merge_into_the_single_process_forest() {
    let (x, _, y) = data(120, 3);
    let (xt, _, _) = data(30, 4);
    let cases = [
        (Training::Batch, None, Calibration::Cv),
        (Training::Stream(17), None, Calibration::None),
        (Training::Stream(9), Some(40), Calibration::None),
    ];
    for (how, window, calibration) in cases {
        let params = regressor_params(window, calibration);
        let mut full = MondrianForestRegressor::new(params.clone()).unwrap();
        train_regressor(&mut full, how, &x, &y);
        let bytes = full.to_bytes().unwrap();
        let pred = full.predict(&xt, D).unwrap();
        for sizes in [&[3, 3, 4][..], &[1, 9]] {
            let shards: Vec<_> = ranges(sizes)
                .into_iter()
                .map(|(first, n)| {
                    let mut s =
                        MondrianForestRegressor::new_shard(params.clone(), first, n).unwrap();
                    train_regressor(&mut s, how, &x, &y);
                    s
                })
                .collect();
            let parts = shards
                .iter()
                .map(|s| s.predict_sums(&xt, D).unwrap())
                .collect();
            let combined = MondrianForestRegressor::combine_predictions(parts).unwrap();
            let merged = MondrianForestRegressor::merge(shards).unwrap();
            assert_eq!(merged.to_bytes().unwrap(), bytes);
            assert_eq!(merged.predict(&xt, D).unwrap(), pred);
            assert_eq!(
                merged.mixture_interval(&xt, D, 0.9).unwrap(),
                full.mixture_interval(&xt, D, 0.9).unwrap()
            );
            let close = |a: &[f64], b: &[f64]| {
                a.iter()
                    .zip(b)
                    .all(|(u, v)| (u - v).abs() <= 1e-12 * (1.0 + v.abs()))
            };
            assert!(close(&combined.mean, &pred.mean));
            assert!(close(&combined.variance, &pred.variance));
            assert!(close(&combined.between_trees, &pred.between_trees));
        }
        let whole = full.predict_sums(&xt, D).unwrap();
        assert_eq!(
            MondrianForestRegressor::combine_predictions(vec![whole]).unwrap(),
            pred
        );
    }
}

#[test]
fn split_then_merge_is_the_identity() {
    let (x, y, t) = data(80, 5);
    let mut c = MondrianForestClassifier::new(classifier_params(Some(50))).unwrap();
    c.fit(&x, D, &y).unwrap();
    let bytes = c.to_bytes().unwrap();
    let shards = c.split(3).unwrap();
    let sizes: Vec<_> = shards.iter().map(|s| s.shard_range()).collect();
    assert_eq!(sizes, vec![0..4, 4..7, 7..10]);
    // A shard saves and loads as a shard; loading a whole-forest file is unchanged.
    let again: Vec<_> = shards
        .iter()
        .map(|s| MondrianForestClassifier::from_bytes(&s.to_bytes().unwrap()).unwrap())
        .collect();
    assert_eq!(again[1].shard_range(), 4..7);
    assert_eq!(
        MondrianForestClassifier::merge(again)
            .unwrap()
            .to_bytes()
            .unwrap(),
        bytes
    );
    // Shards of a shard.
    let mut shards = shards;
    let last = shards.pop().unwrap().split(2).unwrap();
    shards.extend(last);
    let merged = MondrianForestClassifier::merge(shards).unwrap();
    assert_eq!(merged.to_bytes().unwrap(), bytes);

    let mut r = MondrianForestRegressor::new(regressor_params(None, Calibration::None)).unwrap();
    r.fit(&x, D, &t).unwrap();
    let bytes = r.to_bytes().unwrap();
    let shards = r.split(4).unwrap();
    let dir = std::env::temp_dir().join(format!("mondrian-shards-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let loaded: Vec<_> = shards
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let path = dir.join(format!("shard{i}.mf"));
            s.save(&path).unwrap();
            MondrianForestRegressor::load(&path).unwrap()
        })
        .collect();
    std::fs::remove_dir_all(&dir).unwrap();
    let merged = MondrianForestRegressor::merge(loaded).unwrap();
    assert_eq!(merged.to_bytes().unwrap(), bytes);
}

#[test]
fn unfitted_split_shards_train_into_the_forest() {
    let (x, y, _) = data(60, 6);
    let params = classifier_params(None);
    let mut full = MondrianForestClassifier::new(params.clone()).unwrap();
    let mut shards = full.clone().split(3).unwrap();
    full.fit(&x, D, &y).unwrap();
    for s in &mut shards {
        s.fit(&x, D, &y).unwrap();
    }
    let merged = MondrianForestClassifier::merge(shards).unwrap();
    assert_eq!(merged.to_bytes().unwrap(), full.to_bytes().unwrap());
}

#[test]
fn forgetting_works_on_shards() {
    let (x, _, t) = data(70, 7);
    let params = regressor_params(None, Calibration::None);
    let mut full = MondrianForestRegressor::new(params.clone()).unwrap();
    full.fit(&x, D, &t).unwrap();
    let mut shards = full.clone().split(2).unwrap();
    let gone = [3u64, 10, 41];
    full.forget(&gone).unwrap();
    for s in &mut shards {
        s.forget(&gone).unwrap();
        s.partial_fit(&x[..5 * D], D, &t[..5]).unwrap();
    }
    full.partial_fit(&x[..5 * D], D, &t[..5]).unwrap();
    let merged = MondrianForestRegressor::merge(shards).unwrap();
    assert_eq!(merged.to_bytes().unwrap(), full.to_bytes().unwrap());
}

fn mismatch<T: std::fmt::Debug>(r: Result<T, MondrianError>, words: &str) {
    match r {
        Err(MondrianError::ShardMismatch(m)) => assert!(m.contains(words), "{m}"),
        other => panic!("expected a shard mismatch about `{words}`, got {other:?}"),
    }
}

#[test]
fn shards_that_do_not_fit_together_are_refused() {
    let (x, y, _) = data(50, 8);
    let params = classifier_params(None);
    let shard = |first, n, x: &[f64]| {
        let mut s = MondrianForestClassifier::new_shard(params.clone(), first, n).unwrap();
        s.fit(x, D, &y[..x.len() / D]).unwrap();
        s
    };
    mismatch(MondrianForestClassifier::merge(vec![]), "no shards");
    mismatch(
        MondrianForestClassifier::merge(vec![shard(0, 5, &x), shard(4, 6, &x)]),
        "overlap",
    );
    mismatch(
        MondrianForestClassifier::merge(vec![shard(0, 3, &x), shard(5, 5, &x)]),
        "missing",
    );
    mismatch(
        MondrianForestClassifier::merge(vec![shard(0, 5, &x), shard(5, 5, &x[..40 * D])]),
        "different points",
    );
    let mut other = MondrianForestClassifier::new_shard(
        ClassifierParams {
            seed: 8,
            ..params.clone()
        },
        5,
        5,
    )
    .unwrap();
    other.fit(&x, D, &y).unwrap();
    mismatch(
        MondrianForestClassifier::merge(vec![shard(0, 5, &x), other]),
        "parameters",
    );
    // A merge of part of the forest is a shard, not an error.
    let part = MondrianForestClassifier::merge(vec![shard(2, 3, &x), shard(5, 2, &x)]).unwrap();
    assert_eq!(part.shard_range(), 2..7);

    // Combining: missing trees, overlaps, nothing.
    let a = shard(0, 5, &x).predict_proba_sum(&x, D).unwrap();
    let b = shard(5, 5, &x).predict_proba_sum(&x, D).unwrap();
    mismatch(
        MondrianForestClassifier::combine_proba(vec![a.clone()]),
        "missing",
    );
    mismatch(
        MondrianForestClassifier::combine_proba(vec![a.clone(), a.clone(), b.clone()]),
        "overlap",
    );
    mismatch(MondrianForestClassifier::combine_proba(vec![]), "no shard");
    assert!(MondrianForestClassifier::combine_proba(vec![b, a]).is_ok());

    // Bad ranges, and what only a whole forest does.
    assert!(MondrianForestClassifier::new_shard(params.clone(), 8, 3).is_err());
    assert!(MondrianForestClassifier::new_shard(params.clone(), 0, 0).is_err());
    assert!(shard(0, 5, &x).add_trees(1).is_err());
    assert!(shard(0, 5, &x).split(6).is_err());
}

#[test]
fn regressor_shard_errors() {
    let (x, _, t) = data(60, 9);
    let params = regressor_params(None, Calibration::None);
    let mut a = MondrianForestRegressor::new_shard(params.clone(), 0, 5).unwrap();
    a.fit(&x, D, &t).unwrap();
    let mut b = MondrianForestRegressor::new_shard(params.clone(), 5, 5).unwrap();
    b.fit(&x[..50 * D], D, &t[..50]).unwrap();
    mismatch(
        MondrianForestRegressor::merge(vec![a.clone(), b]),
        "label moments",
    );
    mismatch(
        MondrianForestRegressor::combine_predictions(vec![a.predict_sums(&x, D).unwrap()]),
        "missing",
    );
    // θ by marginal likelihood sums over every tree: a shard cannot predict its part.
    let mut ml = params.clone();
    ml.hyper.estimate = mondrian::Estimate::MarginalLikelihood;
    let mut s = MondrianForestRegressor::new_shard(ml, 0, 5).unwrap();
    s.fit(&x, D, &t).unwrap();
    mismatch(s.predict_sums(&x, D), "marginal likelihood");
}

/// A larger forest streamed a few points at a time: the stream helpers and tree groups
/// divide the work differently in a shard and in the whole forest, which must not show.
#[test]
fn a_streamed_forest_of_many_trees_merges_bit_for_bit() {
    let (x, y, _) = data(150, 10);
    let (xt, _, _) = data(20, 11);
    let params = ClassifierParams {
        n_trees: 40,
        feature_weights: FeatureWeights::Relevance { power: 1.0 },
        window: Some(60),
        ..classifier_params(None)
    };
    let train = |m: &mut MondrianForestClassifier| {
        m.fit(&x[..40 * D], D, &y[..40]).unwrap();
        let (mut i, mut b) = (40, 1);
        while i < 150 {
            let j = (i + b).min(150);
            m.partial_fit(&x[i * D..j * D], D, &y[i..j]).unwrap();
            (i, b) = (j, b % 3 + 1);
        }
    };
    let mut full = MondrianForestClassifier::new(params.clone()).unwrap();
    train(&mut full);
    for sizes in [&[7, 33][..], &[20, 20], &[13, 13, 14]] {
        let shards = ranges(sizes)
            .into_iter()
            .map(|(first, n)| {
                let mut s = MondrianForestClassifier::new_shard(params.clone(), first, n).unwrap();
                train(&mut s);
                s
            })
            .collect();
        let merged = MondrianForestClassifier::merge(shards).unwrap();
        assert_eq!(merged.to_bytes().unwrap(), full.to_bytes().unwrap());
        assert_eq!(
            merged.predict_proba(&xt, D).unwrap(),
            full.predict_proba(&xt, D).unwrap()
        );
    }
}
