//! Interval calibration of the regressor (`Calibration`): quantile recalibration from the
//! PITs of held-out rows.

mod common;

use common::rng;
use mondrian::Persistent;
use mondrian::{
    Calibration, MondrianError, MondrianForestRegressor, PredictionMode, RegressorParams,
};
use rand::Rng;
use rand_distr::{Distribution, Normal};

/// `n` rows of y = sin(6 x₀) + x₁ + N(0, 0.02²) on [0, 1]².
fn smooth(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut r = rng(seed);
    let noise = Normal::new(0.0, 0.02).unwrap();
    let x: Vec<f64> = (0..2 * n).map(|_| r.gen::<f64>()).collect();
    let y = x
        .chunks(2)
        .map(|p| (6.0 * p[0]).sin() + p[1] + noise.sample(&mut r))
        .collect();
    (x, y)
}

fn forest(calibration: Calibration, threads: usize) -> MondrianForestRegressor {
    MondrianForestRegressor::new(RegressorParams {
        n_trees: 20,
        min_samples_split: 5,
        mode: PredictionMode::Fast,
        seed: 3,
        n_threads: threads,
        calibration,
        ..RegressorParams::thesis()
    })
    .unwrap()
}

fn coverage(lo: &[f64], hi: &[f64], y: &[f64]) -> f64 {
    let inside = y
        .iter()
        .zip(lo.iter().zip(hi))
        .filter(|(v, (l, h))| (*l..=*h).contains(v))
        .count();
    inside as f64 / y.len() as f64
}

#[test]
fn interval_probabilities_are_the_pits_order_statistics() {
    let (x, y) = smooth(200, 1);
    let mut f = forest(Calibration::None, 1);
    f.fit(&x, 2, &y).unwrap();
    let near =
        |(a, b): (f64, f64), (c, d): (f64, f64)| (a - c).abs() < 1e-12 && (b - d).abs() < 1e-12;
    assert!(near(f.interval_probabilities(0.8).unwrap(), (0.1, 0.9)));
    // u_(k) for k = ⌊a(n+1)⌋ and ⌈(1−a)(n+1)⌉; 0 and 1 beyond the sample.
    let pits: Vec<f64> = (1..=9).rev().map(|k| k as f64 / 10.0 - 0.03).collect();
    f.set_calibration(Some(pits)).unwrap();
    let (lo, hi) = f.interval_probabilities(0.8).unwrap(); // a(n+1) = 1, (1−a)(n+1) = 9
    assert_eq!((lo, hi), (0.1 - 0.03, 0.9 - 0.03));
    let (lo, hi) = f.interval_probabilities(0.5).unwrap(); // 2.5 → 2, 7.5 → 8
    assert_eq!((lo, hi), (0.2 - 0.03, 0.8 - 0.03));
    assert_eq!(f.interval_probabilities(0.9).unwrap(), (0.0, 1.0)); // 0.5 → 0, 9.5 → 10
                                                                    // PITs spread like a uniform sample's give back the model's own interval.
    f.set_calibration(Some((1..=99).map(|k| k as f64 / 100.0).collect()))
        .unwrap();
    let own = {
        let mut g = forest(Calibration::None, 1);
        g.fit(&x, 2, &y).unwrap();
        g.mixture_interval(&x[..40], 2, 0.8).unwrap()
    };
    assert!(near(f.interval_probabilities(0.8).unwrap(), (0.1, 0.9)));
    let (lo, hi) = f.mixture_interval(&x[..40], 2, 0.8).unwrap();
    for (a, b) in lo.iter().chain(&hi).zip(own.0.iter().chain(&own.1)) {
        assert!((a - b).abs() < 1e-9, "{a} vs {b}");
    }
}

#[test]
fn cdf_inverts_the_mixture_quantiles() {
    // The interval's ends are the mixture's quantiles (bisection on the CDF to 1e-12), so
    // the CDF there gives back the probabilities, and it grows with y.
    let (x, y) = smooth(300, 2);
    let mut f = forest(Calibration::None, 1);
    f.fit(&x, 2, &y).unwrap();
    let probe: Vec<f64> = vec![0.5, 0.5, 0.1, 0.9, 3.0, -2.0];
    let (lo, hi) = f.mixture_interval(&probe, 2, 0.7).unwrap();
    for (ends, p) in [(&lo, 0.15), (&hi, 0.85)] {
        for c in f.cdf(&probe, 2, ends).unwrap() {
            assert!((c - p).abs() < 1e-9, "{c} vs {p}");
        }
    }
    let at = |v: f64| f.cdf(&probe[..2], 2, &[v]).unwrap()[0];
    assert!(at(-10.0) < at(0.0) && at(0.0) < at(1.0) && at(1.0) < at(10.0));
    assert!(at(-1e6) >= 0.0 && at(1e6) <= 1.0);
}

#[test]
fn held_out_calibration_covers_at_the_nominal_level() {
    // Split calibration: with the forest fixed and calibration and test rows i.i.d., the
    // coverage given the calibration rows is that of the PIT order statistics
    // u_(k_lo), u_(k_hi): mean (k_hi − k_lo)/(n+1) ≥ level and variance about
    // level(1−level)/n_cal, and the test coverage adds binomial variance
    // level(1−level)/n_test. Tolerance: 4 standard deviations of that sum (two-sided
    // p ≈ 6e-5).
    let (level, n_cal, n_test) = (0.8, 2000, 4000);
    let (x, y) = smooth(1000, 3);
    let (xc, yc) = smooth(n_cal, 4);
    let (xt, yt) = smooth(n_test, 5);
    let mut f = forest(Calibration::None, 2);
    f.fit(&x, 2, &y).unwrap();
    let (lo, hi) = f.mixture_interval(&xt, 2, level).unwrap();
    let own = coverage(&lo, &hi, &yt);
    let sd = (level * (1.0 - level) * (1.0 / n_cal as f64 + 1.0 / n_test as f64)).sqrt();
    // The setting needs the calibration: the forest's own 80 % interval is too wide here.
    assert!(own > level + 4.0 * sd, "own coverage {own}");
    f.calibrate(&xc, 2, &yc).unwrap();
    assert_eq!(f.calibration().unwrap().len(), n_cal);
    let (lo, hi) = f.mixture_interval(&xt, 2, level).unwrap();
    let calibrated = coverage(&lo, &hi, &yt);
    assert!(
        (calibrated - level).abs() <= 4.0 * sd,
        "calibrated coverage {calibrated}, own {own}, tolerance {}",
        4.0 * sd
    );
    // Mean, variance and density stay the model's.
    let mut plain = forest(Calibration::None, 2);
    plain.fit(&x, 2, &y).unwrap();
    assert_eq!(plain.predict(&xt, 2).unwrap(), f.predict(&xt, 2).unwrap());
    assert_eq!(
        plain.log_density(&xt, 2, &yt).unwrap(),
        f.log_density(&xt, 2, &yt).unwrap()
    );
}

#[test]
fn cross_validated_calibration_is_kept_saved_and_thread_independent() {
    let (x, y) = smooth(120, 6);
    let mut one = forest(Calibration::Cv, 1);
    one.fit(&x, 2, &y).unwrap();
    let mut two = forest(Calibration::Cv, 2);
    two.fit(&x, 2, &y).unwrap();
    let pits = one.calibration().unwrap().to_vec();
    assert_eq!(pits.len(), 120);
    assert!(pits.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(two.calibration().unwrap(), &pits[..]);
    // The same PITs as a stream computes up front.
    let up_front = forest(Calibration::None, 1)
        .cross_validated_pits(&x, 2, &y)
        .unwrap();
    assert_eq!(up_front, pits);
    // Saved and loaded with the model.
    let back = MondrianForestRegressor::from_bytes(&one.to_bytes().unwrap()).unwrap();
    assert_eq!(back.calibration().unwrap(), &pits[..]);
    assert_eq!(
        back.mixture_interval(&x[..20], 2, 0.9).unwrap(),
        one.mixture_interval(&x[..20], 2, 0.9).unwrap()
    );
    // Later training keeps it; a new fit computes it again.
    one.partial_fit(&x[..20], 2, &y[..10]).unwrap();
    assert_eq!(one.calibration().unwrap(), &pits[..]);
    let mut refit = forest(Calibration::None, 1);
    refit.set_calibration(Some(vec![0.5])).unwrap();
    refit.fit(&x, 2, &y).unwrap();
    assert!(refit.calibration().is_none());
}

#[test]
fn bad_calibrations_are_refused() {
    let (x, y) = smooth(9, 7);
    let mut f = forest(Calibration::Cv, 1);
    match f.fit(&x, 2, &y) {
        Err(MondrianError::InvalidParameter { name, reason }) => {
            assert_eq!(name, "calibration");
            assert!(reason.contains("at least 10 rows"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // A refused call leaves the forest untrained.
    assert_eq!(f.n_samples_seen(), 0);
    let (x, y) = smooth(30, 8);
    let mut f = forest(Calibration::None, 1);
    f.fit(&x, 2, &y).unwrap();
    for bad in [vec![], vec![0.2, 1.5], vec![f64::NAN], vec![-0.1]] {
        assert!(matches!(
            f.set_calibration(Some(bad)),
            Err(MondrianError::InvalidParameter {
                name: "calibration",
                ..
            })
        ));
    }
    assert!(f.calibration().is_none());
    assert!(f.calibrate(&x, 2, &y[..5]).is_err());
    assert!(f.calibrate(&x[..2], 2, &[f64::INFINITY]).is_err());
    assert!(f.interval_probabilities(1.0).is_err());
    assert!(Calibration::parse("cv").is_ok() && Calibration::parse("yes").is_err());
}

/// Learnt feature weights fit a pilot forest (and, for `relevance:cv`, one per fold) that
/// needs no intervals: with 12 rows a pilot sees 9 or 10, fewer than a calibration needs, so
/// a pilot that inherited `Calibration::Cv` would refuse a valid fit.
#[test]
fn learnt_weights_and_cv_calibration_fit_the_smallest_data() {
    let (x, y) = smooth(12, 21);
    for weights in [
        mondrian::FeatureWeights::Relevance { power: 1.0 },
        mondrian::FeatureWeights::RelevanceCv,
    ] {
        let mut f = MondrianForestRegressor::new(RegressorParams {
            n_trees: 5,
            min_samples_split: 2,
            feature_weights: weights.clone(),
            calibration: Calibration::Cv,
            ..RegressorParams::thesis()
        })
        .unwrap();
        f.fit(&x, 2, &y)
            .unwrap_or_else(|e| panic!("{weights:?}: {e}"));
        assert_eq!(f.calibration().map(<[f64]>::len), Some(12), "{weights:?}");
    }
}

/// A saved model whose PITs were edited (checksum recomputed, so only the decode check can
/// catch it) is refused: a value outside [0, 1], or the values out of order.
#[test]
fn edited_calibration_pits_are_refused_on_load() {
    let (x, y) = smooth(60, 23);
    let mut f = forest(Calibration::None, 1);
    f.fit(&x, 2, &y).unwrap();
    f.set_calibration(Some(vec![0.125, 0.375, 0.625])).unwrap();
    let bytes = f.to_bytes().unwrap();
    assert!(MondrianForestRegressor::from_bytes(&bytes).is_ok());
    // Header: magic (8), version (4), kind length (1) and kind, encoding (1), payload
    // length (8), payload CRC (4), header CRC (4).
    let start = 8 + 4 + 1 + bytes[12] as usize + 1 + 8 + 4 + 4;
    let edit = |from: &[f64], to: &[f64]| {
        let mut b = bytes.clone();
        let old: Vec<u8> = from.iter().flat_map(|v| v.to_le_bytes()).collect();
        let new: Vec<u8> = to.iter().flat_map(|v| v.to_le_bytes()).collect();
        let at = (start..=b.len() - old.len())
            .find(|&i| b[i..i + old.len()] == old[..])
            .expect("the PITs are in the payload");
        b[at..at + new.len()].copy_from_slice(&new);
        let crc = crc32fast::hash(&b[start..]);
        b[start - 8..start - 4].copy_from_slice(&crc.to_le_bytes());
        let header_crc = crc32fast::hash(&b[..start - 4]);
        b[start - 4..start].copy_from_slice(&header_crc.to_le_bytes());
        b
    };
    let pits = [0.125, 0.375, 0.625];
    for forged in [
        [0.125, 0.375, 1.5],
        [0.625, 0.375, 0.125],
        [0.125, f64::NAN, 0.625],
    ] {
        match MondrianForestRegressor::from_bytes(&edit(&pits, &forged)) {
            Err(MondrianError::CorruptModel(m)) => assert!(m.contains("PITs"), "{m}"),
            other => panic!("{forged:?}: {:?}", other.map(|_| "loaded")),
        }
    }
    // The same edit keeping valid values loads, so the refusals above are the check's.
    let ok = MondrianForestRegressor::from_bytes(&edit(&pits, &[0.25, 0.5, 0.75])).unwrap();
    assert_eq!(ok.calibration(), Some(&[0.25, 0.5, 0.75][..]));
}

/// The regressor's defaults learn relevance weights (power by cross-validation) and
/// recalibrate the intervals on a first training call of at least `AUTO_MIN_ROWS` rows
/// (`FeatureWeights::Auto`, `Calibration::Auto`), exactly as `relevance:cv` and `cv` do; a
/// smaller first call keeps uniform weights and the mixture's own intervals, so a stream
/// can start from one point.
#[test]
fn auto_weights_and_calibration_follow_the_size_of_the_first_call() {
    use mondrian::{FeatureWeights, AUTO_MIN_ROWS};
    let defaults = RegressorParams::default();
    assert_eq!(
        (defaults.n_trees, defaults.min_samples_split, defaults.mode),
        (100, 5, PredictionMode::Fast)
    );
    assert_eq!(defaults.feature_weights, FeatureWeights::Auto);
    assert_eq!(defaults.calibration, Calibration::Auto);
    let thesis = RegressorParams::thesis();
    assert_eq!(
        (thesis.n_trees, thesis.min_samples_split, thesis.mode),
        (10, 10, PredictionMode::Exact)
    );
    assert_eq!(
        (thesis.feature_weights, thesis.calibration),
        (FeatureWeights::Uniform, Calibration::None)
    );

    let (x, y) = smooth(AUTO_MIN_ROWS, 31);
    let fitted = |n: usize, weights: FeatureWeights, calibration: Calibration| {
        let mut f = MondrianForestRegressor::new(RegressorParams {
            n_trees: 10,
            seed: 4,
            feature_weights: weights,
            calibration,
            ..RegressorParams::default()
        })
        .unwrap();
        f.fit(&x[..2 * n], 2, &y[..n]).unwrap();
        f
    };
    let n = AUTO_MIN_ROWS;
    let auto = fitted(n, FeatureWeights::Auto, Calibration::Auto);
    let explicit = fitted(n, FeatureWeights::RelevanceCv, Calibration::Cv);
    assert!(auto.relevance_choice().is_some());
    assert_eq!(auto.relevance_choice(), explicit.relevance_choice());
    assert_eq!(auto.feature_weights(), explicit.feature_weights());
    assert_eq!(auto.calibration().map(<[f64]>::len), Some(n));
    assert_eq!(auto.calibration(), explicit.calibration());
    assert_eq!(
        auto.predict(&x, 2).unwrap(),
        explicit.predict(&x, 2).unwrap()
    );

    let n = AUTO_MIN_ROWS - 1;
    let small = fitted(n, FeatureWeights::Auto, Calibration::Auto);
    let plain = fitted(n, FeatureWeights::Uniform, Calibration::None);
    assert!(small.relevance_choice().is_none() && small.calibration().is_none());
    assert_eq!(small.feature_weights(), Some(&[1.0, 1.0][..]));
    assert_eq!(small.predict(&x, 2).unwrap(), plain.predict(&x, 2).unwrap());

    // With every default, a stream learns from its first point.
    let mut stream = MondrianForestRegressor::new(RegressorParams::default()).unwrap();
    for (row, target) in x.chunks(2).zip(&y).take(30) {
        stream.partial_fit(row, 2, &[*target]).unwrap();
    }
    assert!(stream.calibration().is_none());
    assert_eq!(stream.feature_weights(), Some(&[1.0, 1.0][..]));
    assert_eq!(stream.n_points(), 30);
}
