//! End to end on the hypercube-D data (spec `bayesian-trees.md` §5.3): SMC trees find the
//! 2^D-cell partition. A smoke test of the whole road (data, fit, predict), not a
//! statistical one: the exact-posterior checks are in `bayes_smc.rs`.

use mondrian::bayes::{
    hypercube, CgmPrior, Proposal, SmcClassifierParams, SmcParams, SmcRegressorParams,
    SmcTreeClassifier, SmcTreeRegressor,
};

#[test]
fn smc_regression_recovers_the_vertex_values() {
    for (d, beta_s) in [(2, 1.0), (3, 0.5)] {
        let data = hypercube(d, 1, 0.01).unwrap();
        let var_f = {
            let m = data.vertex_values.iter().sum::<f64>() / data.vertex_values.len() as f64;
            data.vertex_values
                .iter()
                .map(|v| (v - m) * (v - m))
                .sum::<f64>()
                / data.vertex_values.len() as f64
        };
        for proposal in [Proposal::Prior, Proposal::Optimal] {
            let mut reg = SmcTreeRegressor::new(SmcRegressorParams {
                smc: SmcParams {
                    particles: 500,
                    islands: 5,
                    proposal,
                    prior: CgmPrior {
                        beta_s,
                        ..Default::default()
                    },
                    seed: 3,
                    ..Default::default()
                },
                ..Default::default()
            })
            .unwrap();
            reg.fit(&data.train_x, d, &data.train_y).unwrap();
            let pred = reg.predict(&data.test_x, d).unwrap();
            let mse = pred
                .iter()
                .zip(&data.test_y)
                .map(|(p, y)| (p - y) * (p - y))
                .sum::<f64>()
                / pred.len() as f64;
            let log_p = reg.log_predictive(&data.test_x, d, &data.test_y).unwrap();
            let mean_log_p = log_p.iter().sum::<f64>() / log_p.len() as f64;
            let leaves: f64 = reg
                .posterior()
                .unwrap()
                .trees()
                .map(|t| t.weight * t.tree.n_leaves() as f64)
                .sum();
            println!(
                "hypercube-{d} {proposal:?}: test MSE {mse:.5} (var f {var_f:.3}), mean test \
                 log p {mean_log_p:.3}, E[#leaves] {leaves:.2}, log Ẑ {:.2}",
                reg.log_evidence().unwrap()
            );
            // A tree that leaves two vertices in one leaf merges two vertices,
            // costing about (Δf/2)²/4 ≈ 0.1 var f: 0.03 var f means every cell was found.
            assert!(mse < 0.03 * var_f);
        }
    }
}

#[test]
fn smc_classification_separates_the_vertices() {
    let d = 3;
    let data = hypercube(d, 2, 0.01).unwrap();
    let label = |y: &f64| usize::from(*y > 0.0);
    let train: Vec<usize> = data.train_y.iter().map(label).collect();
    let test: Vec<usize> = data.test_y.iter().map(label).collect();
    let mut clf = SmcTreeClassifier::new(SmcClassifierParams {
        smc: SmcParams {
            particles: 200,
            seed: 4,
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    clf.fit(&data.train_x, d, &train).unwrap();
    let pred = clf.predict(&data.test_x, d).unwrap();
    let accuracy =
        pred.iter().zip(&test).filter(|(a, b)| a == b).count() as f64 / test.len() as f64;
    let log_p = clf.log_predictive(&data.test_x, d, &test).unwrap();
    println!(
        "hypercube-{d} classes: accuracy {accuracy:.3}, mean test log p {:.3}",
        log_p.iter().sum::<f64>() / log_p.len() as f64
    );
    assert!(accuracy > 0.95);
}
