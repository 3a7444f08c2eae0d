//! The coefficient-form prediction equals the literal §4.4 algorithm on random trees,
//! for both branch-count variants, finite and infinite lifetimes and a range of γ.

use mondrian::process::Feature;
use mondrian::stats::label::{BranchCounts, LabelCounts, LabelModel, LabelScratch};
use mondrian::tree::{MondrianTree, PauseRule, TrainingPoints};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

#[test]
fn fast_prediction_equals_direct_algorithm() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let (n, d, k) = (300usize, 3usize, 4usize);
    let features: Vec<Feature> = (0..n * d).map(|_| rng.gen::<f32>()).collect();
    // Labels depend on the first feature, with noise, so leaves are mixed and pure.
    let targets: Vec<u32> = (0..n)
        .map(|i| ((features[i * d] * 3.0) as u32 + u32::from(rng.gen::<f32>() < 0.2)) % k as u32)
        .collect();
    let data = TrainingPoints {
        features: &features,
        n_features: d,
        targets: &targets,
    };
    let mut worst = 0.0f64;
    for (lifetime, pause) in [
        (
            f64::INFINITY,
            PauseRule {
                pause_on_pure: true,
                min_samples_split: 2,
            },
        ),
        (3.0, PauseRule::NEVER),
        (
            0.5,
            PauseRule {
                pause_on_pure: true,
                min_samples_split: 5,
            },
        ),
        (0.0, PauseRule::NEVER),
    ] {
        for tree_seed in 0..5 {
            let mut tree = MondrianTree::new(d, lifetime, pause);
            let mut counts = LabelCounts::new(k);
            let mut trng = Xoshiro256PlusPlus::seed_from_u64(tree_seed);
            tree.fit((0..n as u32 / 2).collect(), &data, &mut counts, &mut trng);
            for i in n as u32 / 2..n as u32 {
                tree.extend(i, 1, &data, &mut counts, &mut trng);
            }
            for gamma in [0.0, 0.3, 3.0, 30.0, 3000.0] {
                for branch_counts in [BranchCounts::Paper, BranchCounts::Reference] {
                    let model = LabelModel {
                        gamma,
                        branch_counts,
                    };
                    let mut scratch = LabelScratch::default();
                    for _ in 0..200 {
                        // Test points inside, near and far outside the data.
                        let x: Vec<Feature> = (0..d).map(|_| rng.gen_range(-1.5f32..2.5)).collect();
                        let mut fast = vec![0.0; k];
                        let mut direct = vec![0.0; k];
                        model.predict_tree(
                            &tree,
                            &counts,
                            data.features,
                            &x,
                            1.0,
                            &mut scratch,
                            &mut fast,
                        );
                        model.predict_tree_direct(
                            &tree,
                            &counts,
                            data.features,
                            &x,
                            1.0,
                            &mut scratch,
                            &mut direct,
                        );
                        for (a, b) in fast.iter().zip(&direct) {
                            worst = worst.max((a - b).abs());
                        }
                        assert!((fast.iter().sum::<f64>() - 1.0).abs() < 1e-9);
                    }
                }
            }
        }
    }
    // Dropped coefficients are below 1e-18 each; the rest is rounding.
    assert!(worst < 1e-12, "largest difference {worst}");
}

/// Predicting a block of rows (descents in lockstep, two groups in flight) adds exactly what
/// predicting each row alone adds, for block sizes around the lockstep width.
#[test]
fn block_prediction_equals_row_by_row() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let (n, d, k) = (400usize, 4usize, 5usize);
    let features: Vec<Feature> = (0..n * d).map(|_| rng.gen::<f32>()).collect();
    let targets: Vec<u32> = (0..n).map(|i| (features[i * d] * 5.0) as u32 % 5).collect();
    let data = TrainingPoints {
        features: &features,
        n_features: d,
        targets: &targets,
    };
    let pause = PauseRule {
        pause_on_pure: true,
        min_samples_split: 2,
    };
    let mut tree = MondrianTree::new(d, f64::INFINITY, pause);
    let mut counts = LabelCounts::new(k);
    let mut trng = Xoshiro256PlusPlus::seed_from_u64(3);
    tree.fit((0..n as u32).collect(), &data, &mut counts, &mut trng);
    let model = LabelModel {
        gamma: 10.0 * d as f64,
        branch_counts: BranchCounts::Paper,
    };
    let lockstep = mondrian::tree::LOCKSTEP;
    for rows in [
        0,
        1,
        lockstep - 1,
        lockstep,
        lockstep + 1,
        2 * lockstep,
        2 * lockstep + 3,
        200,
    ] {
        let xs: Vec<Feature> = (0..rows * d).map(|_| rng.gen_range(-0.5f32..1.5)).collect();
        // Outputs start non-zero: both roads add to them.
        let start: Vec<f64> = (0..rows * k).map(|i| i as f64 * 0.01).collect();
        let mut block = start.clone();
        let mut scratch = LabelScratch::default();
        model.predict_tree_rows(
            &tree,
            &counts,
            data.features,
            &xs,
            0.25,
            &mut scratch,
            &mut block,
        );
        let mut alone = start.clone();
        for (x, o) in xs.chunks_exact(d).zip(alone.chunks_exact_mut(k)) {
            model.predict_tree(&tree, &counts, data.features, x, 0.25, &mut scratch, o);
        }
        assert_eq!(block, alone, "{rows} rows");
        if rows > 0 {
            assert_ne!(block, start, "{rows} rows: nothing added");
        }
    }
}

/// `routes_many` gives each row of a block exactly the nodes a walk by `route` from the root
/// visits, ending at a leaf, with the steps' times the nodes' (no weight filled in).
#[test]
fn routes_of_a_block_are_the_walks_from_the_root() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
    let (n, d) = (300usize, 3usize);
    let features: Vec<Feature> = (0..n * d).map(|_| rng.gen::<f32>()).collect();
    let targets: Vec<u32> = (0..n).map(|i| (features[i * d] * 3.0) as u32).collect();
    let data = TrainingPoints {
        features: &features,
        n_features: d,
        targets: &targets,
    };
    let mut tree = MondrianTree::new(d, f64::INFINITY, PauseRule::NEVER);
    let mut counts = LabelCounts::new(3);
    let mut trng = Xoshiro256PlusPlus::seed_from_u64(2);
    tree.fit((0..n as u32 / 2).collect(), &data, &mut counts, &mut trng);
    for i in n as u32 / 2..n as u32 {
        tree.extend(i, 1, &data, &mut counts, &mut trng);
    }
    let rows = 3 * mondrian::tree::LOCKSTEP + 5;
    let xs: Vec<Feature> = (0..rows * d).map(|_| rng.gen_range(-0.5f32..1.5)).collect();
    // Outputs start with stale steps: the routes replace them.
    let mut routes = vec![Vec::new(); rows];
    tree.path_steps_many(&xs[..d], data.features, &mut routes[..1]);
    let stale = routes[0].clone();
    routes.iter_mut().for_each(|r| r.clone_from(&stale));
    tree.routes_many(&xs, data.features, &mut routes);
    let root = tree.root().expect("fitted");
    for (x, route) in xs.chunks_exact(d).zip(&routes) {
        let mut walk = vec![root];
        while !tree.is_leaf(*walk.last().unwrap()) {
            walk.push(tree.route(*walk.last().unwrap(), x));
        }
        let nodes: Vec<u32> = route.iter().map(|s| s.node).collect();
        assert_eq!(nodes, walk);
        for s in route {
            assert_eq!(s.is_leaf, tree.is_leaf(s.node));
            let delta = tree.split_time(s.node) - tree.parent_split_time(s.node);
            assert_eq!(s.delta, delta);
            assert_eq!((s.eta, s.branch_weight, s.leaf_weight), (0.0, 0.0, 0.0));
        }
    }
}
