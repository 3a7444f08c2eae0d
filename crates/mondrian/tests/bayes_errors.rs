//! Bad input to the Bayesian trees gives a typed error, never a panic (DESIGN principle 5).

use mondrian::bayes::{
    CgmPrior, NormalInverseGamma, RegressionLeaf, SmcClassifierParams, SmcParams,
    SmcRegressorParams, SmcTreeClassifier, SmcTreeRegressor,
};
use mondrian::MondrianError;

fn classifier(smc: SmcParams) -> mondrian::Result<SmcTreeClassifier> {
    SmcTreeClassifier::new(SmcClassifierParams {
        smc,
        ..Default::default()
    })
}

fn parameter_name(e: MondrianError) -> &'static str {
    match e {
        MondrianError::InvalidParameter { name, .. } => name,
        other => panic!("expected InvalidParameter, got {other:?}"),
    }
}

#[test]
fn bad_parameters() {
    let cases: Vec<(SmcParams, &str)> = vec![
        (
            SmcParams {
                particles: 0,
                ..Default::default()
            },
            "particles",
        ),
        (
            SmcParams {
                islands: 0,
                ..Default::default()
            },
            "islands",
        ),
        (
            SmcParams {
                particles: 4,
                islands: 5,
                ..Default::default()
            },
            "islands",
        ),
        (
            SmcParams {
                ess_threshold: 1.5,
                ..Default::default()
            },
            "ess_threshold",
        ),
        (
            SmcParams {
                max_stages: 0,
                ..Default::default()
            },
            "max_stages",
        ),
        (
            SmcParams {
                prior: CgmPrior {
                    alpha_s: 1.0,
                    ..Default::default()
                },
                ..Default::default()
            },
            "alpha_s",
        ),
        (
            SmcParams {
                prior: CgmPrior {
                    beta_s: f64::NAN,
                    ..Default::default()
                },
                ..Default::default()
            },
            "beta_s",
        ),
    ];
    for (smc, name) in cases {
        let err = classifier(smc).unwrap_err();
        println!("{err}");
        assert_eq!(parameter_name(err), name);
    }
    for (alpha, n_classes) in [(0.0, None), (f64::INFINITY, None), (1.0, Some(0))] {
        let err = SmcTreeClassifier::new(SmcClassifierParams {
            alpha,
            n_classes,
            ..Default::default()
        })
        .unwrap_err();
        assert!(matches!(err, MondrianError::InvalidParameter { .. }));
    }
    let err = SmcTreeRegressor::new(SmcRegressorParams {
        leaf: RegressionLeaf::NormalInverseGamma(NormalInverseGamma {
            m0: 0.0,
            kappa0: 0.0,
            a0: 1.0,
            b0: 1.0,
        }),
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(parameter_name(err), "kappa0");
}

#[test]
fn bad_data() {
    let mut clf = classifier(SmcParams {
        particles: 5,
        ..Default::default()
    })
    .unwrap();
    let x = [0.0, 1.0, 2.0, 3.0];
    assert!(matches!(
        clf.predict_proba(&x, 1),
        Err(MondrianError::NotFitted)
    ));
    assert!(matches!(clf.log_evidence(), Err(MondrianError::NotFitted)));
    assert!(matches!(
        clf.fit(&[0.0, f64::NAN, 2.0, 3.0], 1, &[0, 1, 0, 1]),
        Err(MondrianError::NonFinite { row: 1, .. })
    ));
    assert!(matches!(
        clf.fit(&x, 1, &[0, 1, 0]),
        Err(MondrianError::LengthMismatch { .. })
    ));
    assert!(matches!(
        clf.fit(&x[..3], 2, &[0]),
        Err(MondrianError::RaggedMatrix { .. })
    ));
    assert!(matches!(
        clf.fit::<f64>(&[], 1, &[]),
        Err(MondrianError::EmptyData(_))
    ));
    assert!(matches!(
        clf.fit(&x, 1, &[0, 1, usize::MAX, 1]),
        Err(MondrianError::InvalidParameter { name: "y", .. })
    ));
    let mut two = SmcTreeClassifier::new(SmcClassifierParams {
        n_classes: Some(2),
        ..Default::default()
    })
    .unwrap();
    assert!(matches!(
        two.fit(&x, 1, &[0, 1, 2, 1]),
        Err(MondrianError::LabelOutOfRange {
            row: 2,
            label: 2,
            ..
        })
    ));
    clf.fit(&x, 1, &[0, 1, 0, 1]).unwrap();
    assert!(matches!(
        clf.predict_proba(&x, 2),
        Err(MondrianError::WidthMismatch { .. })
    ));
    assert!(matches!(
        clf.predict(&[f64::INFINITY], 1),
        Err(MondrianError::NonFinite { .. })
    ));
    assert!(matches!(
        clf.log_predictive(&x, 1, &[0, 1, 2, 0]),
        Err(MondrianError::LabelOutOfRange { .. })
    ));
    // f32 features are read as they are.
    clf.fit(&[0.0f32, 1.0, 2.0, 3.0], 1, &[0, 1, 0, 1]).unwrap();

    let mut reg = SmcTreeRegressor::new(SmcRegressorParams::default()).unwrap();
    assert!(matches!(reg.predict(&x, 1), Err(MondrianError::NotFitted)));
    assert!(matches!(
        reg.fit(&x, 1, &[0.0, f64::NAN, 1.0, 2.0]),
        Err(MondrianError::NonFiniteTarget { row: 1, .. })
    ));
    assert!(matches!(
        reg.fit(&x, 1, &[0.0, 1e300, 1.0, 2.0]),
        Err(MondrianError::TargetOverflow { row: 1, .. })
    ));
    reg.fit(&x, 1, &[0.0, 1.0, 1.0, 2.0]).unwrap();
    assert!(matches!(
        reg.log_predictive(&x, 1, &[0.0]),
        Err(MondrianError::LengthMismatch { .. })
    ));
    // Constant targets and a single row are fine.
    reg.fit(&[1.0], 1, &[3.0]).unwrap();
    let (mean, var) = reg.predict_mean_variance(&[5.0], 1).unwrap();
    assert!(mean[0].is_finite() && var[0] > 0.0);
}
