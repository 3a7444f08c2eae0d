//! The Gaussian label model of regression trees against independent derivations
//! (spec `mf-regression.md` §6.6 T1–T7 and the golden tree of §6.8).
//!
//! * Golden values: the hand-built 5-point tree of §6.8, whose per-node messages,
//!   posteriors, marginal weights and predictive moments the spec lists (computed by the
//!   spec author's prototype, which agreed with a dense Gaussian computation).
//! * Dense oracle: the hierarchy is a Gaussian process over the training labels with
//!   `Cov(μ_a, μ_b) = γ1 [σ(γ2 τ_lca(a,b)) − ½]`; conditioning it with a Cholesky solve
//!   gives every posterior and predictive without belief propagation.

mod common;

use common::gaussian::{ancestors, cov_nodes, lca, path_weights, var_at, Dense};
use common::rng;
use mondrian::process::Feature;
use mondrian::stats::gaussian::{
    expected_branch_gap, mixture_log_density, mixture_moments, Component, GaussianModel,
    HyperSettings, Moments, PredictionMode, TargetMoments, Theta, Upward,
};
use mondrian::tree::{Layout, MondrianTree, PathStep, PauseRule, TrainingPoints};
use rand::Rng;

const GOLDEN_X: [Feature; 5] = [0.0, 0.2, 0.5, 0.9, 1.0];
const GOLDEN_Y: [f64; 5] = [1.0, 1.5, 0.0, -1.0, -0.5];

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1.0)
}

#[track_caller]
fn assert_close(what: &str, got: f64, want: f64, rel: f64) {
    assert!(
        close(got, want, rel),
        "{what}: got {got:.12}, want {want:.12}"
    );
}

/// The tree of §6.8: root τ = 0.8 splits x ≤ 0.35 into leaf L = {0, 0.2} and node R
/// (τ = 1.5, x ≤ 0.7) with leaves RL = {0.5} and RR = {0.9, 1.0}.
fn golden_tree() -> (MondrianTree, TargetMoments) {
    let layout = Layout::Split {
        tau: 0.8,
        dim: 0,
        loc: 0.35,
        left: Box::new(Layout::Leaf(vec![0, 1])),
        right: Box::new(Layout::Split {
            tau: 1.5,
            dim: 0,
            loc: 0.7,
            left: Box::new(Layout::Leaf(vec![2])),
            right: Box::new(Layout::Leaf(vec![3, 4])),
        }),
    };
    let data = TrainingPoints {
        features: &GOLDEN_X,
        n_features: 1,
        targets: &GOLDEN_Y,
    };
    let pause = PauseRule {
        pause_on_pure: false,
        min_samples_split: 2,
    };
    let mut stats = TargetMoments::new();
    let tree = MondrianTree::from_layout(1, f64::INFINITY, pause, &layout, &data, &mut stats)
        .expect("valid layout");
    (tree, stats)
}

/// Nodes of the golden tree by name: root, L, R, RL, RR.
fn golden_nodes(tree: &MondrianTree) -> [u32; 5] {
    let root = tree.root().unwrap();
    let (l, r) = tree.children(root).unwrap();
    let (rl, rr) = tree.children(r).unwrap();
    [root, l, r, rl, rr]
}

fn golden_theta() -> Theta {
    Theta::heuristic(Moments::of(&GOLDEN_Y), 1, &HyperSettings::default())
}

fn components(
    model: &GaussianModel,
    tree: &MondrianTree,
    stats: &TargetMoments,
    msgs: &[Upward],
    features: &[Feature],
    x: &[Feature],
) -> Vec<Component> {
    let mut steps: Vec<PathStep> = Vec::new();
    tree.path_steps(x, features, &mut steps);
    let mut out = Vec::new();
    model.tree_components(tree, stats, msgs, &steps, &mut out);
    out
}

#[test]
fn golden_heuristic() {
    // §6.8: N = 5, K = 10, μ_H = 0.2, s² = 0.86, γ1 = 2Ks²/(K+2), σ² = γ1/K, γ2 = 1/(20 log2 5).
    let theta = golden_theta();
    assert_close("mu_h", theta.mu_h, 0.2, 1e-12);
    assert_close("gamma1", theta.gamma1, 1.43333333333, 1e-10);
    assert_close("noise", theta.noise_var, 0.143333333333, 1e-10);
    assert_close("gamma2", theta.gamma2, 0.0215338279037, 1e-10);
    assert_close(
        "γ1/2 + σ² = s²",
        theta.gamma1 / 2.0 + theta.noise_var,
        0.86,
        1e-12,
    );
    // The reference code's rules (§7 A3–A4): K = min(500, 2N), σ² = s²/K, γ2 = D/(2 log2 N).
    let reference = Theta::heuristic(
        Moments::of(&GOLDEN_Y),
        1,
        &HyperSettings {
            k_cap: 500.0,
            gamma2_divisor: 2.0,
            noise: mondrian::NoiseRule::Reference,
            ..Default::default()
        },
    );
    assert_close("ref noise", reference.noise_var, 0.086, 1e-12);
    assert_close(
        "ref gamma2",
        reference.gamma2,
        1.0 / (2.0 * 5f64.log2()),
        1e-12,
    );
}

#[test]
fn golden_messages_and_posteriors() {
    let (tree, stats) = golden_tree();
    let model = GaussianModel {
        theta: golden_theta(),
        mode: PredictionMode::Exact,
    };
    let msgs = model.upward(&tree, &stats);
    let post = model.posteriors(&tree, &msgs);
    // (φ, λm, λv, pm, pv) per node, §6.8.
    let want = [
        (
            0.00617287800519,
            0.173828752872,
            0.269385649573,
            0.19941372921,
            0.00603459731687,
        ),
        (
            0.710493788661,
            1.25,
            0.0716666666667,
            1.15373840104,
            0.0651507600227,
        ),
        (
            0.00540054826098,
            -0.391536563845,
            0.405506539928,
            0.191646874684,
            0.0112065833056,
        ),
        (
            0.7050932404,
            0.0,
            0.143333333333,
            0.0323768564326,
            0.119438419659,
        ),
        (
            0.7050932404,
            -0.75,
            0.0716666666667,
            -0.663120267831,
            0.065149838729,
        ),
    ];
    for (name, (j, w)) in ["root", "L", "R", "RL", "RR"]
        .iter()
        .zip(golden_nodes(&tree).iter().zip(want))
    {
        let u = msgs[*j as usize];
        let (pm, pv) = post[*j as usize];
        assert_close(&format!("{name} φ"), u.phi, w.0, 1e-9);
        assert_close(&format!("{name} λm"), u.lm, w.1, 1e-9);
        assert_close(&format!("{name} λv"), u.lv, w.2, 1e-9);
        assert_close(&format!("{name} pm"), pm, w.3, 1e-9);
        assert_close(&format!("{name} pv"), pv, w.4, 1e-9);
    }
}

#[test]
fn golden_predictions() {
    let (tree, stats) = golden_tree();
    // (x, exact (E, Var, NLPD at y = 0, #components), fast (…)) from §6.8.
    let table: [(f32, [f64; 4], [f64; 4]); 7] = [
        (
            0.1,
            [1.1537384010, 0.2084840934, 3.3273516379, 1.0],
            [1.25, 0.2058333333, 3.9241408423, 1.0],
        ),
        (
            0.3,
            [0.3025561653, 0.8511960918, 0.8921536877, 1.0],
            [1.25, 0.2058333333, 3.9241408423, 1.0],
        ),
        (
            0.6,
            [0.1743185173, 0.8507619552, 0.8559857416, 1.0],
            [0.0, 0.1433333333, -0.0523526463, 1.0],
        ),
        (
            0.95,
            [-0.6631202678, 0.2084831721, 1.1895799446, 1.0],
            [-0.75, 0.2058333333, 1.4949910448, 1.0],
        ),
        (
            1.5,
            [0.1862934255, 0.8595801260, 0.8634677395, 3.0],
            [-0.3873156704, 0.6677415810, 1.1104452648, 3.0],
        ),
        (
            -2.0,
            [0.2007536881, 0.8599447097, 0.8669279263, 2.0],
            [0.4119913439, 1.0199714414, 1.1533314146, 2.0],
        ),
        (
            100.0,
            [0.1999925974, 0.8599999780, 0.8667811686, 3.0],
            [0.2, 1.0033333333, 0.9405359831, 3.0],
        ),
    ];
    let theta = golden_theta();
    for mode in [PredictionMode::Exact, PredictionMode::Fast] {
        let model = GaussianModel { theta, mode };
        let msgs = model.upward(&tree, &stats);
        for (x, exact, fast) in table {
            let want = if mode == PredictionMode::Exact {
                exact
            } else {
                fast
            };
            let comps = components(&model, &tree, &stats, &msgs, &GOLDEN_X, &[x]);
            let (e, v) = mixture_moments(&comps);
            let nlpd = -mixture_log_density(&comps, 0.0);
            // Boxes are stored as f32, so 0.2 is 0.2 + 3e-9: predictions whose η reads
            // that bound carry a relative error of order 1e-8.
            let tol = 1e-7;
            assert_close(&format!("{mode:?} x={x} E"), e, want[0], tol);
            assert_close(&format!("{mode:?} x={x} Var"), v, want[1], tol);
            assert_close(&format!("{mode:?} x={x} NLPD"), nlpd, want[2], tol);
            assert_eq!(comps.len() as f64, want[3], "{mode:?} x={x} components");
            let w: f64 = comps.iter().map(|c| c.weight).sum();
            assert!((w - 1.0).abs() < 1e-12, "weights sum to {w}");
        }
    }
}

#[test]
fn golden_branch_weights_and_gamma2_one() {
    let (tree, stats) = golden_tree();
    // T4: at x = 1.5 the weights are 1 − e^{−0.4}, e^{−0.4}(1 − e^{−0.35}), e^{−0.75}.
    let theta = Theta {
        gamma2: 1.0,
        ..golden_theta()
    };
    let model = GaussianModel {
        theta,
        mode: PredictionMode::Exact,
    };
    let msgs = model.upward(&tree, &stats);
    let comps = components(&model, &tree, &stats, &msgs, &GOLDEN_X, &[1.5]);
    let want = [
        (0.329680, 0.221104, 0.824024),
        (0.197953, 0.074543, 0.629367),
        (0.472367, -0.522776, 0.274366),
    ];
    for (c, w) in comps.iter().zip(want) {
        assert!((c.weight - w.0).abs() < 1e-6, "{c:?} vs {w:?}");
        assert!((c.mean - w.1).abs() < 1e-6, "{c:?} vs {w:?}");
        assert!((c.var - w.2).abs() < 1e-6, "{c:?} vs {w:?}");
    }
    assert!((comps[0].weight - (1.0 - (-0.4f64).exp())).abs() < 1e-12);
    let (e, v) = mixture_moments(&comps);
    assert_close("E γ2=1", e, -0.1592923338, 1e-8);
    assert_close("Var γ2=1", v, 0.6467889704, 1e-8);
    assert_close(
        "NLPD γ2=1",
        -mixture_log_density(&comps, 0.0),
        0.7800177936,
        1e-8,
    );
    let post = model.posteriors(&tree, &msgs);
    let root = tree.root().unwrap() as usize;
    assert_close("root pm γ2=1", post[root].0, 0.243445226373, 1e-9);
    assert_close("root pv γ2=1", post[root].1, 0.119828941953, 1e-9);
}

#[test]
fn truncated_gap_mean_matches_quadrature() {
    // E[Δ̃] for Exp(η) truncated to [0, Δ], against a fine midpoint rule of the density.
    for &(eta, delta) in &[
        (0.5, 0.3),
        (2.0, 1.0),
        (1e-7, 2.0),
        (50.0, 3.0),
        (3.0, 1e-9),
    ] {
        let n = 200_000;
        let h = delta / n as f64;
        let (mut num, mut den) = (0.0, 0.0);
        for i in 0..n {
            let t = (i as f64 + 0.5) * h;
            let p = (-eta * t).exp();
            num += t * p;
            den += p;
        }
        assert_close(
            &format!("η={eta} Δ={delta}"),
            expected_branch_gap(eta, delta),
            num / den,
            1e-8,
        );
    }
    assert_eq!(expected_branch_gap(4.0, f64::INFINITY), 0.25);
}

#[test]
fn edge_variance_is_the_sigmoid_difference() {
    let theta = Theta {
        mu_h: 0.0,
        gamma1: 2.0,
        gamma2: 0.7,
        noise_var: 0.1,
    };
    let s = |t: f64| 1.0 / (1.0 + (-t).exp());
    for &(tp, d) in &[(0.0, 0.5), (1.0, 2.0), (3.0, 1e-6), (10.0, 40.0)] {
        let direct = 2.0 * (s(0.7 * (tp + d)) - s(0.7 * tp));
        assert_close("φ", theta.edge_variance(tp, d), direct, 1e-9);
    }
    assert_close(
        "φ leaf",
        theta.edge_variance(1.0, f64::INFINITY),
        2.0 * (1.0 - s(0.7)),
        1e-12,
    );
    // Deep in time the difference underflows to 0 without NaN.
    assert_eq!(theta.edge_variance(5000.0, 1.0), 0.0);
}

// ---------------------------------------------------------------------------------------
// Dense Gaussian oracle (T1–T3, `common::gaussian::Dense`)
// ---------------------------------------------------------------------------------------

/// Random batch trees on random data in D ∈ {1, 2, 3} with mss ∈ {2, 5}.
type RandomTree = (MondrianTree, TargetMoments, Vec<f64>, usize, Vec<Feature>);

fn random_trees(count: usize, seed: u64) -> Vec<RandomTree> {
    let mut r = rng(seed);
    (0..count)
        .map(|c| {
            let d = 1 + c % 3;
            let n = r.gen_range(5..60);
            let mss = if c % 2 == 0 { 2 } else { 5 };
            let x: Vec<Feature> = (0..n * d).map(|_| r.gen::<f32>()).collect();
            let y: Vec<f64> = (0..n)
                .map(|i| (6.0 * f64::from(x[i * d])).sin() + 0.3 * r.gen::<f64>())
                .collect();
            let data = TrainingPoints {
                features: &x,
                n_features: d,
                targets: &y,
            };
            let pause = PauseRule {
                pause_on_pure: false,
                min_samples_split: mss,
            };
            let mut tree = MondrianTree::new(d, f64::INFINITY, pause);
            let mut stats = TargetMoments::new();
            tree.fit((0..n as u32).collect(), &data, &mut stats, &mut r);
            (tree, stats, y, d, x)
        })
        .collect()
}

#[test]
fn belief_propagation_equals_dense_gaussian() {
    // T1: every node's posterior and the marginal likelihood, γ2 heuristic, 1 and 10.
    for (t, (tree, stats, y, d, _)) in random_trees(24, 11).iter().enumerate() {
        for gamma2 in [None, Some(1.0), Some(10.0)] {
            let settings = HyperSettings {
                gamma2,
                ..Default::default()
            };
            let theta = Theta::heuristic(Moments::of(y), *d, &settings);
            let model = GaussianModel {
                theta,
                mode: PredictionMode::Exact,
            };
            let msgs = model.upward(tree, stats);
            let post = model.posteriors(tree, &msgs);
            let dense = Dense::new(tree, theta, y);
            for j in tree.subtree_preorder(tree.root().unwrap()) {
                let (pm, pv) = dense.node_posterior(j);
                let (bm, bv) = post[j as usize];
                assert!(
                    close(bm, pm, 1e-9) && close(bv, pv, 1e-9),
                    "tree {t} γ2 {gamma2:?} node {j}: BP ({bm}, {bv}) vs dense ({pm}, {pv})"
                );
            }
            let lm = model.log_marginal(tree, stats, &msgs);
            assert_close(&format!("tree {t} log p"), lm, dense.log_marginal(), 1e-9);
        }
    }
}

#[test]
fn predictive_components_equal_dense_gaussian() {
    // T2 (in-leaf) and T3 (branch-off at the plug-in time): each component is the
    // GP-conditioned law of a new label whose leaf hangs off the path at that time.
    let mut r = rng(5);
    let mut checked = (0, 0);
    for (t, (tree, stats, y, d, train)) in random_trees(12, 21).iter().enumerate() {
        let theta = Theta::heuristic(Moments::of(y), *d, &HyperSettings::default());
        let model = GaussianModel {
            theta,
            mode: PredictionMode::Exact,
        };
        let msgs = model.upward(tree, stats);
        let dense = Dense::new(tree, theta, y);
        for _ in 0..20 {
            let x: Vec<Feature> = (0..*d).map(|_| r.gen_range(-0.5f32..1.5)).collect();
            let mut steps = Vec::new();
            tree.path_steps(&x, train, &mut steps);
            let mut comps = Vec::new();
            model.tree_components(tree, stats, &msgs, &steps, &mut comps);
            let mut c = comps.iter();
            let mut tau_parent = 0.0;
            for s in &steps {
                if s.branch_weight > 0.0 {
                    let comp = c.next().unwrap();
                    let time = tau_parent + expected_branch_gap(s.eta, s.delta);
                    // Cov(y*, y_n): the new leaf meets leaf(x_n) at time `time` if x_n is
                    // under j, else where parent(j) meets it.
                    let k: Vec<f64> = dense
                        .leaf_of
                        .iter()
                        .map(|&l| {
                            if ancestors(tree, l).contains(&s.node) {
                                var_at(&theta, time)
                            } else {
                                let p = tree.parent(s.node).unwrap();
                                var_at(&theta, tree.split_time(lca(tree, p, l)))
                            }
                        })
                        .collect();
                    let (m, v) = dense.condition(&k, theta.gamma1 / 2.0);
                    assert_close(&format!("tree {t} branch mean"), comp.mean, m, 1e-9);
                    assert_close(
                        &format!("tree {t} branch var"),
                        comp.var,
                        v + theta.noise_var,
                        1e-9,
                    );
                    checked.0 += 1;
                }
                if s.leaf_weight > 0.0 {
                    let comp = c.next().unwrap();
                    let k: Vec<f64> = dense
                        .leaf_of
                        .iter()
                        .map(|&l| cov_nodes(tree, &theta, s.node, l))
                        .collect();
                    let (m, v) = dense.condition(&k, theta.gamma1 / 2.0);
                    assert_close(&format!("tree {t} leaf mean"), comp.mean, m, 1e-9);
                    assert_close(
                        &format!("tree {t} leaf var"),
                        comp.var,
                        v + theta.noise_var,
                        1e-9,
                    );
                    checked.1 += 1;
                }
                tau_parent = tree.split_time(s.node);
            }
            assert!(c.next().is_none());
        }
    }
    // Coverage guard: both kinds of component were compared many times.
    assert!(checked.0 > 500 && checked.1 >= 10, "{checked:?}");
}

/// T4: the branch-off and leaf weights against a brute force from the rows under each
/// path node (`common::gaussian::path_weights`), the nodes with η > 0 forming a suffix of
/// the path, and one mixture component exactly when x lies in the leaf's box (the leaf
/// holds all the weight) or outside the leaf's box only (the branch-off just above the
/// leaf takes all of it, Δ_leaf = ∞): both directions, each case met often. Queries are
/// training rows, rows nudged by a little noise, and uniform points around the data, on
/// trees in 1–3 dimensions.
#[test]
fn weights_form_a_path_suffix_and_one_component_iff_only_the_leaf_box_matters() {
    let mut r = rng(8);
    let (mut inside_leaf, mut outside_leaf_only, mut several) = (0, 0, 0);
    for (t, (tree, stats, y, d, train)) in random_trees(12, 3).iter().enumerate() {
        let theta = Theta::heuristic(Moments::of(y), *d, &HyperSettings::default());
        let model = GaussianModel {
            theta,
            mode: PredictionMode::Exact,
        };
        let msgs = model.upward(tree, stats);
        let n = y.len();
        for q in 0..150 {
            let row = r.gen_range(0..n) * d;
            let x: Vec<Feature> = match q % 3 {
                0 => train[row..row + d].to_vec(),
                1 => train[row..row + d]
                    .iter()
                    .map(|&v| v + r.gen_range(-0.02f32..0.02))
                    .collect(),
                _ => (0..*d).map(|_| r.gen_range(-0.5f32..1.5)).collect(),
            };
            let brute = path_weights(tree, train, &x);
            let mut steps = Vec::new();
            tree.path_steps(&x, train, &mut steps);
            let what = format!("tree {t} x {x:?}");
            assert_eq!(
                steps.iter().map(|s| s.node).collect::<Vec<_>>(),
                brute.iter().map(|s| s.node).collect::<Vec<_>>(),
                "{what}: route"
            );
            for (s, b) in steps.iter().zip(&brute) {
                assert!(
                    (s.eta - b.eta).abs() <= 1e-6,
                    "{what}: η {} vs {}",
                    s.eta,
                    b.eta
                );
                assert!(
                    (s.branch_weight - b.branch).abs() <= 1e-9,
                    "{what}: {s:?} vs {b:?}"
                );
                assert!(
                    (s.leaf_weight - b.leaf).abs() <= 1e-9,
                    "{what}: {s:?} vs {b:?}"
                );
            }
            let first_out = brute.iter().position(|s| s.eta > 0.0);
            if let Some(f) = first_out {
                assert!(brute[f..].iter().all(|s| s.eta > 0.0), "{what}: suffix");
            }
            // One component per positive brute-force weight, in path order.
            let comps = components(&model, tree, stats, &msgs, train, &x);
            let want: Vec<f64> = brute
                .iter()
                .flat_map(|s| [s.branch, s.leaf])
                .filter(|&w| w > 0.0)
                .collect();
            assert_eq!(
                comps.len(),
                want.len(),
                "{what}: {comps:?} vs weights {want:?}"
            );
            for (c, w) in comps.iter().zip(&want) {
                assert!(
                    (c.weight - w).abs() <= 1e-9,
                    "{what}: {comps:?} vs {want:?}"
                );
            }
            let leaf = brute.len() - 1;
            let inside = first_out.is_none();
            let only_leaf_out = first_out == Some(leaf);
            assert_eq!(
                comps.len() == 1,
                inside || only_leaf_out,
                "{what}: {} components, η along the path {:?}",
                comps.len(),
                brute.iter().map(|s| s.eta).collect::<Vec<_>>()
            );
            match (inside, only_leaf_out) {
                (true, _) => inside_leaf += 1,
                (_, true) => outside_leaf_only += 1,
                _ => several += 1,
            }
            let total: f64 = comps.iter().map(|c| c.weight).sum();
            assert!((total - 1.0).abs() < 1e-12);
        }
    }
    // Every case of the equivalence was met many times.
    eprintln!("{inside_leaf} inside, {outside_leaf_only} outside the leaf only, {several} others");
    assert!(
        inside_leaf >= 100 && outside_leaf_only >= 50 && several >= 100,
        "{inside_leaf} inside, {outside_leaf_only} outside the leaf only, {several} others"
    );
}

/// T6: approaching a leaf box from outside, the branch-off component just above the leaf
/// tends to the leaf's own component.
#[test]
fn continuity_at_the_leaf_box() {
    let (tree, stats, y, _, train) = random_trees(1, 3).pop().unwrap();
    let theta = Theta::heuristic(Moments::of(&y), 1, &HyperSettings::default());
    let model = GaussianModel {
        theta,
        mode: PredictionMode::Exact,
    };
    let msgs = model.upward(&tree, &stats);
    // Approach the upper face of the rightmost leaf box from outside.
    let leaf = tree.leaf_of(&[1.0]);
    let top = tree.data_box(leaf, &train).1[0];
    let upper = f64::from(top);
    let inside = components(&model, &tree, &stats, &msgs, &train, &[top]);
    assert_eq!(inside.len(), 1);
    let mut last_gap = f64::INFINITY;
    for e in [1e-1, 1e-2, 1e-3, 1e-4, 1e-5] {
        let x = (upper + e) as f32;
        let comps = components(&model, &tree, &stats, &msgs, &train, &[x]);
        let leaf_branch = comps.last().unwrap();
        let gap =
            (leaf_branch.mean - inside[0].mean).abs() + (leaf_branch.var - inside[0].var).abs();
        assert!(gap < last_gap + 1e-12, "η={e}: {gap} after {last_gap}");
        last_gap = gap;
    }
    assert!(last_gap < 1e-3, "{last_gap}");
}

#[test]
fn golden_quadrature_predictions() {
    // §6.8, E-quad with Q = 16 at x = 0.3, 1.5 and −2: (E, Var, NLPD at y = 0).
    let (tree, stats) = golden_tree();
    let model = GaussianModel {
        theta: golden_theta(),
        mode: PredictionMode::ExactQuadrature,
    };
    let msgs = model.upward(&tree, &stats);
    for (x, want) in [
        (0.3f32, [0.3005283804, 0.8542702612, 0.8944431411]),
        (1.5, [0.1863231560, 0.8595988184, 0.8634805832]),
        (-2.0, [0.2007511679, 0.8599381880, 0.8669237634]),
    ] {
        let comps = components(&model, &tree, &stats, &msgs, &GOLDEN_X, &[x]);
        let (e, v) = mixture_moments(&comps);
        assert_close(&format!("quad x={x} E"), e, want[0], 1e-7);
        assert_close(&format!("quad x={x} Var"), v, want[1], 1e-7);
        assert_close(
            &format!("quad x={x} NLPD"),
            -mixture_log_density(&comps, 0.0),
            want[2],
            1e-7,
        );
        let w: f64 = comps.iter().map(|c| c.weight).sum();
        assert!((w - 1.0).abs() < 1e-12);
    }
}

#[test]
fn normal_cdf_and_mixture_quantiles() {
    use mondrian::stats::gaussian::{mixture_quantile, normal_cdf};
    // Φ at tabulated points (16 digits); the erfc fit is good to 1.2e-7 relative.
    for (z, p) in [
        (0.0, 0.5),
        (1.6448536269514722, 0.95),
        (-1.959963984540054, 0.025),
        (3.0, 0.9986501019683699),
        (-4.0, 3.167124183311998e-5),
    ] {
        assert!(
            (normal_cdf(z) - p).abs() <= 2e-7 * p,
            "Φ({z}) = {}",
            normal_cdf(z)
        );
    }
    // One Gaussian: the quantile is m + z·sd.
    let one = [Component {
        weight: 2.0,
        mean: 3.0,
        var: 4.0,
    }];
    assert!((mixture_quantile(&one, 0.95) - (3.0 + 2.0 * 1.6448536269514722)).abs() < 2e-6);
    // A skewed three-component mixture: the mass below the quantile, by a fine midpoint
    // rule of the density, equals p.
    let mix = [
        Component {
            weight: 0.2,
            mean: -1.0,
            var: 0.04,
        },
        Component {
            weight: 0.5,
            mean: 0.5,
            var: 1.0,
        },
        Component {
            weight: 0.3,
            mean: 4.0,
            var: 0.25,
        },
    ];
    for p in [0.05, 0.5, 0.95] {
        let q = mixture_quantile(&mix, p);
        let (a, n) = (-12.0, 400_000);
        let h = (q - a) / n as f64;
        let mass: f64 = (0..n)
            .map(|i| {
                let y = a + (i as f64 + 0.5) * h;
                mix.iter()
                    .map(|c| {
                        c.weight * (-(y - c.mean).powi(2) / (2.0 * c.var)).exp()
                            / (2.0 * std::f64::consts::PI * c.var).sqrt()
                    })
                    .sum::<f64>()
                    * h
            })
            .sum();
        assert!((mass - p).abs() < 1e-6, "p {p}: mass {mass} below {q}");
    }
}
