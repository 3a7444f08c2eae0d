//! The CGM prior of spec `bayesian-trees.md` §2.2 (§5.6 T5, A1): its exact sizes when every
//! node can split, and the library's prior sampler against the exact distribution of the
//! number of leaves and the maximum depth on a tiny grid, where the data run out and the
//! recursion below is exact.
//!
//! Statistical tests run at a family-wise level of 1e-3 (Bonferroni over the p-values of a
//! test function); seeds are fixed.

use std::collections::HashMap;

use mondrian::bayes::{sample_prior_tree, CgmPrior, DirichletMultinomial, Features};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use statrs::distribution::{ChiSquared, ContinuousCDF};

/// E[#nodes] and E[max depth] of the Galton–Watson tree, by recursion from a deep cut-off
/// (written independently of the library's sums).
fn galton_watson(alpha_s: f64, beta_s: f64) -> (f64, f64) {
    let p = |d: usize| alpha_s * (1.0 + d as f64).powf(-beta_s);
    // E_d = 1 + 2 p_d E_{d+1}: the expected size of a subtree rooted at depth d.
    let mut e = 1.0;
    for d in (0..2000).rev() {
        e = 1.0 + 2.0 * p(d) * e;
    }
    // E[max depth] = Σ_k P(max depth > k).
    let mut depth = 0.0;
    for k in 0..200 {
        let mut f = 1.0 - p(k);
        for d in (0..k).rev() {
            f = 1.0 - p(d) + p(d) * f * f;
        }
        depth += 1.0 - f;
    }
    (e, depth)
}

#[test]
fn galton_watson_sizes() {
    for (a, b) in [(0.95, 0.5), (0.95, 2.0), (0.8, 0.5), (0.95, 0.25)] {
        let prior = CgmPrior {
            alpha_s: a,
            beta_s: b,
            min_samples: None,
        };
        let (nodes, depth) = galton_watson(a, b);
        println!(
            "({a}, {b}): E[#nodes] {:.4} (recursion {nodes:.4}), E[max depth] {:.4} \
             (recursion {depth:.4})",
            prior.expected_nodes(),
            prior.expected_max_depth()
        );
        assert!((prior.expected_nodes() - nodes).abs() < 1e-9 * nodes);
        assert!((prior.expected_max_depth() - depth).abs() < 1e-9);
    }
    // A1: the exact values are 18.280 nodes and depth 5.095; [T]'s "18.5" is a loose check.
    let default = CgmPrior::default();
    assert!((default.expected_nodes() - 18.280).abs() < 5e-4);
    assert!((default.expected_max_depth() - 5.095).abs() < 5e-4);
    assert!((default.expected_nodes() - 18.5).abs() < 0.3);
}

/// The 3 × 3 grid with unequal gaps (so the gap lengths matter).
fn grid() -> Vec<[f64; 2]> {
    let mut x = Vec::new();
    for a in [0.0, 1.0, 3.0] {
        for b in [0.0, 2.0, 2.5] {
            x.push([a, b]);
        }
    }
    x
}

type Law = HashMap<(usize, usize), f64>;

/// The exact joint law of (#leaves, max depth) of the subtree at a node holding `rows`
/// (a bit set) at `depth`, by the recursion of §5.6 T6 over (stop | δ ∈ V_j | gap g).
fn exact_law(
    x: &[[f64; 2]],
    prior: &CgmPrior,
    rows: u32,
    depth: usize,
    memo: &mut HashMap<(u32, usize), Law>,
) -> Law {
    if let Some(law) = memo.get(&(rows, depth)) {
        return law.clone();
    }
    let members: Vec<usize> = (0..x.len()).filter(|i| rows >> i & 1 == 1).collect();
    let values: Vec<Vec<f64>> = (0..2)
        .map(|d| {
            let mut v: Vec<f64> = members.iter().map(|&i| x[i][d]).collect();
            v.sort_by(f64::total_cmp);
            v.dedup();
            v
        })
        .collect();
    let valid: Vec<usize> = (0..2).filter(|&d| values[d].len() > 1).collect();
    let can = !valid.is_empty() && prior.min_samples.is_none_or(|m| members.len() >= m);
    let s = if can {
        prior.alpha_s * (1.0 + depth as f64).powf(-prior.beta_s)
    } else {
        0.0
    };
    let mut law = Law::new();
    *law.entry((1, depth)).or_default() += 1.0 - s;
    for &d in &valid {
        let v = &values[d];
        let extent = v[v.len() - 1] - v[0];
        for g in 0..v.len() - 1 {
            let w = s / valid.len() as f64 * (v[g + 1] - v[g]) / extent;
            let left = members
                .iter()
                .filter(|&&i| x[i][d] <= v[g])
                .fold(0u32, |m, &i| m | 1 << i);
            let l = exact_law(x, prior, left, depth + 1, memo);
            let r = exact_law(x, prior, rows & !left, depth + 1, memo);
            for (&(la, da), &pa) in &l {
                for (&(lb, db), &pb) in &r {
                    *law.entry((la + lb, da.max(db))).or_default() += w * pa * pb;
                }
            }
        }
    }
    memo.insert((rows, depth), law.clone());
    law
}

/// χ² goodness of fit of counts against probabilities, cells with expected count below 5
/// pooled; returns (statistic, degrees of freedom, p-value).
fn chi_square(counts: &[f64], probs: &[f64], n: f64) -> (f64, usize, f64) {
    let mut cells: Vec<(f64, f64)> = Vec::new();
    let (mut oc, mut ec) = (0.0, 0.0);
    for (&o, &p) in counts.iter().zip(probs) {
        if p * n >= 5.0 {
            cells.push((o, p * n));
        } else {
            oc += o;
            ec += p * n;
        }
    }
    if ec > 0.0 {
        cells.push((oc, ec));
    }
    let stat: f64 = cells.iter().map(|(o, e)| (o - e) * (o - e) / e).sum();
    let dof = cells.len() - 1;
    (stat, dof, ChiSquared::new(dof as f64).unwrap().sf(stat))
}

#[test]
fn prior_sampler_matches_the_exact_law_on_a_tiny_grid() {
    let x = grid();
    let flat: Vec<f64> = x.iter().flat_map(|r| r.iter().copied()).collect();
    let features = Features::new(&flat, 2).unwrap();
    let labels = vec![0usize; x.len()];
    let model = DirichletMultinomial::new(1.0, 1).unwrap();
    let priors = [
        CgmPrior::default(),
        CgmPrior {
            alpha_s: 0.9,
            beta_s: 0.2,
            min_samples: Some(3),
        },
    ];
    let draws = 100_000usize;
    let mut p_values = Vec::new();
    for (case, prior) in priors.iter().enumerate() {
        let law = exact_law(&x, prior, (1 << x.len()) - 1, 0, &mut HashMap::new());
        let total: f64 = law.values().sum();
        assert!((total - 1.0).abs() < 1e-12);
        let mut leaves_p = vec![0.0; x.len() + 1];
        let mut depth_p = vec![0.0; x.len()];
        for (&(l, d), &p) in &law {
            leaves_p[l] += p;
            depth_p[d] += p;
        }
        // Every internal node has two children: #nodes = 2 #leaves − 1.
        let exact_nodes: f64 = (1..leaves_p.len())
            .map(|l| (2 * l - 1) as f64 * leaves_p[l])
            .sum();
        let exact_depth: f64 = depth_p.iter().enumerate().map(|(d, p)| d as f64 * p).sum();

        let mut rng = Xoshiro256PlusPlus::seed_from_u64(100 + case as u64);
        let mut leaves_n = vec![0.0; x.len() + 1];
        let mut depth_n = vec![0.0; x.len()];
        let (mut sum_nodes, mut sum_nodes2, mut sum_depth, mut sum_depth2) = (0.0, 0.0, 0.0, 0.0);
        for i in 0..draws {
            let (tree, log_path) =
                sample_prior_tree(prior, &features, &labels, &model, &mut rng).unwrap();
            // T5: the density (3.4) of the tree is the probability of the path that made it.
            if i < 1000 {
                assert!((prior.log_density(&tree, &features) - log_path).abs() < 1e-9);
            }
            let (n, d) = (tree.nodes().len() as f64, tree.max_depth());
            leaves_n[tree.n_leaves()] += 1.0;
            depth_n[d] += 1.0;
            sum_nodes += n;
            sum_nodes2 += n * n;
            sum_depth += d as f64;
            sum_depth2 += (d * d) as f64;
        }
        let m = draws as f64;
        let (mean_nodes, mean_depth) = (sum_nodes / m, sum_depth / m);
        let se_nodes = ((sum_nodes2 / m - mean_nodes * mean_nodes) / m).sqrt();
        let se_depth = ((sum_depth2 / m - mean_depth * mean_depth) / m).sqrt();
        let (c1, df1, p1) = chi_square(&leaves_n, &leaves_p, m);
        let (c2, df2, p2) = chi_square(&depth_n, &depth_p, m);
        println!(
            "prior {prior:?}: E[#nodes] exact {exact_nodes:.5}, sampled {mean_nodes:.5} ± \
             {se_nodes:.5}; E[max depth] exact {exact_depth:.5}, sampled {mean_depth:.5} ± \
             {se_depth:.5}; χ² leaves {c1:.2} on {df1} df (p = {p1:.3}), χ² depth {c2:.2} on \
             {df2} df (p = {p2:.3})"
        );
        // Normal approximations to the means, two-sided.
        let z_p = |z: f64| 2.0 * statrs::distribution::Normal::standard().sf(z.abs());
        p_values.extend([
            p1,
            p2,
            z_p((mean_nodes - exact_nodes) / se_nodes),
            z_p((mean_depth - exact_depth) / se_depth),
        ]);
    }
    let level = 1e-3 / p_values.len() as f64;
    assert!(p_values.iter().all(|&p| p > level), "{p_values:?}");
}
