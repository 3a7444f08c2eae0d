//! Shared helpers for the statistical test suites (`sampler.rs`, `prediction.rs`):
//! small labelled data sets, tree builders (batch, online in a given order, batch prefix
//! then online, weighted online), tree inspection (canonical signatures, depths, lowest
//! common ancestors), an invariant checker written independently of the library's own
//! `check_invariants`, and the goodness-of-fit machinery (KS, χ², exact binomial) with a
//! Bonferroni-corrected family of p-values.
//!
//! Every statistical test of the suite runs at a family-wise level α = 1e-3 (spec §8.4):
//! a test function collects its p-values in a [`Family`] and fails if any is below
//! α / (number of p-values), so that a correct library fails a test function with
//! probability at most 1e-3 (Bonferroni), whatever the dependence between its
//! comparisons. Seeds are fixed, so runs are reproducible.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;

use mondrian::process::Feature;
use mondrian::stats::label::LabelCounts;
use mondrian::tree::{MondrianTree, PauseRule, TrainingPoints, SET_MIN_FEATURES};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use statrs::distribution::{Binomial, ChiSquared, ContinuousCDF, DiscreteCDF, Normal};

/// Family-wise significance level of every statistical test function.
pub const ALPHA: f64 = 1e-3;

pub type TestRng = Xoshiro256PlusPlus;

/// A generator with a fixed seed.
pub fn rng(seed: u64) -> TestRng {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

// ---------------------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------------------

/// A small labelled data set, row-major.
#[derive(Debug, Clone)]
pub struct Data {
    pub x: Vec<Feature>,
    pub d: usize,
    pub y: Vec<u32>,
    pub k: usize,
}

impl Data {
    /// Rows with labels; K = max label + 1 unless `k` is larger.
    pub fn new(rows: &[&[Feature]], y: &[u32], k: usize) -> Self {
        assert_eq!(rows.len(), y.len());
        let d = rows[0].len();
        let mut x = Vec::with_capacity(rows.len() * d);
        for r in rows {
            assert_eq!(r.len(), d);
            x.extend_from_slice(r);
        }
        let k = k.max(y.iter().map(|&v| v as usize + 1).max().unwrap_or(1));
        Data {
            x,
            d,
            y: y.to_vec(),
            k,
        }
    }

    /// Rows with all-distinct labels (0..n): with pausing on pure labels such a data set
    /// pauses only single-point blocks, so its trees have the non-paused law (spec §8.4).
    pub fn distinct_labels(rows: &[&[Feature]]) -> Self {
        let y: Vec<u32> = (0..rows.len() as u32).collect();
        Self::new(rows, &y, rows.len())
    }

    pub fn n(&self) -> usize {
        self.y.len()
    }

    pub fn ids(&self) -> Vec<u32> {
        (0..self.n() as u32).collect()
    }

    pub fn row(&self, i: u32) -> &[Feature] {
        &self.x[i as usize * self.d..(i as usize + 1) * self.d]
    }

    pub fn points(&self) -> TrainingPoints<'_, u32> {
        TrainingPoints {
            features: &self.x,
            n_features: self.d,
            targets: &self.y,
        }
    }

    /// Per-dimension (min, max) over the given ids, in f64.
    pub fn ranges(&self, ids: &[u32]) -> Vec<(f64, f64)> {
        (0..self.d)
            .map(|dim| {
                let vals = ids.iter().map(|&i| f64::from(self.row(i)[dim]));
                let lo = vals.clone().fold(f64::INFINITY, f64::min);
                let hi = vals.fold(f64::NEG_INFINITY, f64::max);
                (lo, hi)
            })
            .collect()
    }

    /// Linear dimension L = Σ_d (max − min) of the bounding box of the given ids (§1.2).
    pub fn linear_dimension(&self, ids: &[u32]) -> f64 {
        self.ranges(ids).iter().map(|(lo, hi)| hi - lo).sum()
    }

    /// ‖x_a − x_b‖₁ in f64.
    pub fn l1(&self, a: u32, b: u32) -> f64 {
        self.row(a)
            .iter()
            .zip(self.row(b))
            .map(|(&u, &v)| (f64::from(u) - f64::from(v)).abs())
            .sum()
    }
}

// ---------------------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------------------

/// How a tree is grown on a data set.
#[derive(Debug, Clone)]
pub enum Method {
    /// `fit` on the given ids (spec §2.2–2.3).
    Batch,
    /// `extend` one point at a time in this fixed order (spec §2.4–2.5).
    Online(Vec<u32>),
    /// `extend` in a fresh uniformly random order for every tree.
    Shuffled,
    /// `fit` on the first `prefix` ids of the order, then `extend` with the rest.
    Prefix(Vec<u32>, usize),
    /// `extend_many` with consecutive sets of this size in this order (the first set
    /// batch-samples the empty tree).
    Sets(Vec<u32>, usize),
}

impl Method {
    pub fn name(&self) -> String {
        match self {
            Method::Batch => "batch".into(),
            Method::Online(o) => format!("online{o:?}"),
            Method::Shuffled => "online(shuffled per tree)".into(),
            Method::Prefix(o, p) => format!("batch{:?}+online{:?}", &o[..*p], &o[*p..]),
            Method::Sets(o, k) => format!("sets of {k} from {o:?}"),
        }
    }

    /// Grows one tree on `ids` (for `Online`/`Prefix`, the order must be a permutation of
    /// `ids`).
    pub fn build(
        &self,
        data: &Data,
        ids: &[u32],
        lifetime: f64,
        pause: PauseRule,
        rng: &mut TestRng,
    ) -> (MondrianTree, LabelCounts) {
        match self {
            Method::Batch => build_batch(data, ids.to_vec(), lifetime, pause, rng),
            Method::Online(order) => build_online(data, order, lifetime, pause, rng),
            Method::Shuffled => {
                let mut order = ids.to_vec();
                order.shuffle(rng);
                build_online(data, &order, lifetime, pause, rng)
            }
            Method::Prefix(order, p) => {
                let (mut tree, mut counts) =
                    build_batch(data, order[..*p].to_vec(), lifetime, pause, rng);
                for &i in &order[*p..] {
                    tree.extend(i, 1, &data.points(), &mut counts, rng);
                }
                (tree, counts)
            }
            Method::Sets(order, k) => {
                let mut tree = MondrianTree::new(data.d, lifetime, pause);
                let mut counts = LabelCounts::new(data.k);
                for set in order.chunks(*k) {
                    tree.extend_many(set.to_vec(), &data.points(), &mut counts, rng);
                }
                (tree, counts)
            }
        }
    }
}

pub fn build_batch(
    data: &Data,
    ids: Vec<u32>,
    lifetime: f64,
    pause: PauseRule,
    rng: &mut TestRng,
) -> (MondrianTree, LabelCounts) {
    let mut tree = MondrianTree::new(data.d, lifetime, pause);
    let mut counts = LabelCounts::new(data.k);
    tree.fit(ids, &data.points(), &mut counts, rng);
    (tree, counts)
}

pub fn build_online(
    data: &Data,
    order: &[u32],
    lifetime: f64,
    pause: PauseRule,
    rng: &mut TestRng,
) -> (MondrianTree, LabelCounts) {
    let mut tree = MondrianTree::new(data.d, lifetime, pause);
    let mut counts = LabelCounts::new(data.k);
    for &i in order {
        tree.extend(i, 1, &data.points(), &mut counts, rng);
    }
    (tree, counts)
}

/// A random permutation of `ids` drawn from a fixed seed.
pub fn permutation(ids: &[u32], seed: u64) -> Vec<u32> {
    let mut v = ids.to_vec();
    v.shuffle(&mut rng(seed));
    v
}

pub const NO_PAUSE: PauseRule = PauseRule {
    pause_on_pure: false,
    min_samples_split: 0,
};

pub const PAUSE_PURE: PauseRule = PauseRule {
    pause_on_pure: true,
    min_samples_split: 2,
};

// ---------------------------------------------------------------------------------------
// Tree inspection
// ---------------------------------------------------------------------------------------

/// Full canonical signature: the nested leaf sets with the split dimension of every
/// internal node, left child first (the left/right order is fixed by geometry once the
/// dimension is). Two trees on the same ids have the same signature iff they induce the
/// same hierarchical partition with the same split dimensions.
pub fn signature(tree: &MondrianTree) -> String {
    fn rec(t: &MondrianTree, j: u32, out: &mut String) {
        match t.children(j) {
            None => {
                let mut p = t.leaf_points(j).to_vec();
                p.sort_unstable();
                write!(out, "{p:?}").unwrap();
            }
            Some((l, r)) => {
                write!(out, "{}(", t.split_dimension(j)).unwrap();
                rec(t, l, out);
                out.push('|');
                rec(t, r, out);
                out.push(')');
            }
        }
    }
    let mut s = String::new();
    if let Some(r) = tree.root() {
        rec(tree, r, &mut s);
    }
    s
}

/// Bitwise fingerprint of a tree and its counts (structure, times, locations, stored boxes
/// — a leaf of one point stores none, its box is the point —, pause flags, leaf points and
/// label counts), preorder.
pub fn fingerprint(tree: &MondrianTree, counts: &LabelCounts) -> String {
    let mut s = String::new();
    let Some(root) = tree.root() else {
        return s;
    };
    for j in tree.subtree_preorder(root) {
        write!(
            s,
            "[{} {:x} {:?} {:?} c{:?}",
            tree.is_leaf(j),
            tree.split_time(j).to_bits(),
            tree.stores_box(j).then(|| tree.data_box(j, &[])),
            tree.is_paused(j),
            counts.node(j)
        )
        .unwrap();
        if tree.is_leaf(j) {
            write!(s, " p{:?}]", tree.leaf_points(j)).unwrap();
        } else {
            write!(
                s,
                " d{} x{:x}]",
                tree.split_dimension(j),
                tree.split_location(j).to_bits()
            )
            .unwrap();
        }
    }
    s
}

/// Depth (root = 0) of the leaf holding each point id; `usize::MAX` for ids not in the tree.
pub fn point_depths(tree: &MondrianTree, n: usize) -> Vec<usize> {
    let mut out = vec![usize::MAX; n];
    let Some(root) = tree.root() else {
        return out;
    };
    let mut stack = vec![(root, 0usize)];
    while let Some((j, depth)) = stack.pop() {
        match tree.children(j) {
            Some((l, r)) => {
                stack.push((l, depth + 1));
                stack.push((r, depth + 1));
            }
            None => {
                for &i in tree.leaf_points(j) {
                    out[i as usize] = depth;
                }
            }
        }
    }
    out
}

/// Split time of the lowest common ancestor of two points: the time of the first node on
/// the common path whose split separates them; the lifetime λ if they share a leaf.
pub fn separation_time(tree: &MondrianTree, xa: &[Feature], xb: &[Feature]) -> f64 {
    let mut j = tree.root().expect("non-empty tree");
    while !tree.is_leaf(j) {
        let (ja, jb) = (tree.route(j, xa), tree.route(j, xb));
        if ja != jb {
            return tree.split_time(j);
        }
        j = ja;
    }
    tree.lifetime()
}

/// Number of leaves, counted by traversal (not by the arena size).
pub fn count_leaves(tree: &MondrianTree) -> usize {
    tree.leaves().len()
}

/// Independent check of the structural invariants of spec §1.6 and of the IKN counts
/// (§3.2, §8.5 item 8) against a from-scratch post-order recount: leaves hold the label
/// histogram of their points, internal nodes hold min(c_L,1) + min(c_R,1).
/// `inserted[i]` is the total multiplicity with which point `i` was given to the tree.
pub fn check_tree(
    tree: &MondrianTree,
    counts: &LabelCounts,
    data: &Data,
    inserted: &[u32],
) -> Result<(), String> {
    let lambda = tree.lifetime();
    let pause = tree.pause_rule();
    let k = data.k;
    let Some(root) = tree.root() else {
        return if inserted.iter().all(|&w| w == 0) {
            Ok(())
        } else {
            Err("empty tree after insertions".into())
        };
    };
    if tree.parent(root).is_some() {
        return Err("root has a parent".into());
    }
    let order = tree.subtree_preorder(root);
    if order.len() != tree.n_live_nodes() {
        return Err(format!(
            "{} reachable nodes of {}",
            order.len(),
            tree.n_live_nodes()
        ));
    }
    let n_nodes = tree.n_nodes();
    let mut under: Vec<Vec<u32>> = vec![Vec::new(); n_nodes];
    let mut recount: Vec<Vec<u32>> = vec![vec![0; k]; n_nodes];
    let holds = |s: &[u32]| {
        s.len() < pause.min_samples_split
            || (pause.pause_on_pure
                && s.iter()
                    .all(|&i| data.y[i as usize] == data.y[s[0] as usize]))
    };
    for &j in order.iter().rev() {
        let ju = j as usize;
        match tree.children(j) {
            None => {
                let pts = tree.leaf_points(j);
                if pts.is_empty() {
                    return Err(format!("leaf {j} is empty"));
                }
                if tree.split_time(j) != lambda {
                    return Err(format!(
                        "leaf {j}: tau {} != lambda {lambda}",
                        tree.split_time(j)
                    ));
                }
                for &i in pts {
                    recount[ju][data.y[i as usize] as usize] += 1;
                }
                if tree.is_paused(j) != holds(pts) {
                    return Err(format!(
                        "leaf {j}: paused = {} but pause predicate = {}",
                        tree.is_paused(j),
                        holds(pts)
                    ));
                }
                under[ju] = pts.to_vec();
            }
            Some((l, r)) => {
                if tree.parent(l) != Some(j) || tree.parent(r) != Some(j) {
                    return Err(format!("node {j}: broken parent pointers"));
                }
                if !tree.leaf_points(j).is_empty() {
                    return Err(format!("internal node {j} holds points"));
                }
                if tree.is_paused(j) {
                    return Err(format!("internal node {j} is paused"));
                }
                let t = tree.split_time(j);
                let tp = tree.parent(j).map_or(0.0, |p| tree.split_time(p));
                if !(t >= tp && t < lambda && t >= 0.0) {
                    return Err(format!(
                        "node {j}: tau {t}, parent tau {tp}, lambda {lambda}"
                    ));
                }
                if tree.split_time(l) < t || tree.split_time(r) < t {
                    return Err(format!("node {j}: a child splits before its parent"));
                }
                let dim = tree.split_dimension(j);
                let loc = tree.split_location(j);
                if dim >= data.d {
                    return Err(format!("node {j}: split dimension {dim}"));
                }
                let (lower, upper) = tree.data_box(j, &data.x);
                if !(lower[dim] <= loc && loc < upper[dim]) {
                    return Err(format!(
                        "node {j}: split {loc} not in [lower, upper) of dim {dim}"
                    ));
                }
                if under[l as usize].iter().any(|&i| data.row(i)[dim] > loc)
                    || under[r as usize].iter().any(|&i| data.row(i)[dim] <= loc)
                {
                    return Err(format!(
                        "node {j}: a point is on the wrong side of its split"
                    ));
                }
                let (cl, cr) = (recount[l as usize].clone(), recount[r as usize].clone());
                for (slot, (a, b)) in recount[ju].iter_mut().zip(cl.iter().zip(&cr)) {
                    *slot = (*a).min(1) + (*b).min(1);
                }
                let mut all = std::mem::take(&mut under[l as usize]);
                all.extend(std::mem::take(&mut under[r as usize]));
                under[ju] = all;
                // §1.6 item 7 generalised: an internal node never satisfies the predicate.
                if holds(&under[ju]) {
                    return Err(format!("internal node {j} satisfies the pause predicate"));
                }
            }
        }
        // Storage: a leaf whose points are one training point keeps no box of its own (its
        // box is that point's row). Other nodes store a box or name a few of their points
        // (a batch fit: all of them, when there are at most SET_POINTS; online, also a node
        // that took more points inside its box), whose bounding box the next check holds
        // to that of all points below.
        let mut distinct = under[ju].clone();
        distinct.sort_unstable();
        distinct.dedup();
        let one_point = tree.is_leaf(j) && distinct.len() == 1;
        if one_point && tree.stores_box(j) {
            return Err(format!("leaf {j} over one point stores a box"));
        }
        // Narrower trees keep no sets: every node but a one-point leaf stores its box.
        if data.d < SET_MIN_FEATURES && !one_point && !tree.stores_box(j) {
            return Err(format!("node {j} of a narrow tree stores no box"));
        }
        // Box = bounding box of the points below (item 1, which implies item 2).
        for (dim, (lo, hi)) in data.ranges(&under[ju]).into_iter().enumerate() {
            let (lower, upper) = tree.data_box(j, &data.x);
            if f64::from(lower[dim]) != lo || f64::from(upper[dim]) != hi {
                return Err(format!(
                    "node {j}: box [{}, {}] in dim {dim} is not the bounding box [{lo}, {hi}]",
                    lower[dim], upper[dim]
                ));
            }
        }
        // λ = ∞: every non-paused leaf has zero extent (item 8).
        if tree.is_leaf(j)
            && lambda.is_infinite()
            && !tree.is_paused(j)
            && data.linear_dimension(&under[ju]) > 0.0
        {
            return Err(format!(
                "leaf {j}: lambda = inf, not paused, positive extent"
            ));
        }
        if counts.node(j) != recount[ju].as_slice() {
            return Err(format!(
                "node {j} (leaf: {}): counts {:?}, recount {:?}",
                tree.is_leaf(j),
                counts.node(j),
                recount[ju]
            ));
        }
    }
    // Every inserted point is held exactly as many times as it was inserted (item 6).
    let mut held = vec![0u32; inserted.len()];
    for &i in &under[root as usize] {
        held[i as usize] += 1;
    }
    if held != inserted {
        return Err(format!(
            "leaf multiplicities {held:?} != inserted {inserted:?}"
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------------------

/// Survival function of the Kolmogorov distribution: P(K > t) = 2 Σ (−1)^{k−1} e^{−2k²t²}.
pub fn kolmogorov_sf(t: f64) -> f64 {
    if t < 0.3 {
        // The series converges slowly here; the true value exceeds 1 − 1e-6.
        return 1.0;
    }
    let mut s = 0.0;
    for k in 1..=100 {
        let kf = k as f64;
        let term = (-2.0 * kf * kf * t * t).exp();
        s += if k % 2 == 1 { term } else { -term };
        if term < 1e-300 {
            break;
        }
    }
    (2.0 * s).clamp(0.0, 1.0)
}

#[derive(Debug, Clone, Copy)]
pub struct TestResult {
    pub statistic: f64,
    pub df: f64,
    pub p: f64,
}

/// One-sample KS test of `samples` against a continuous CDF; asymptotic p-value with
/// Stephens' small-sample correction.
pub fn ks_one_sample(samples: &[f64], cdf: impl Fn(f64) -> f64) -> TestResult {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len() as f64;
    let mut d: f64 = 0.0;
    for (i, &v) in s.iter().enumerate() {
        let f = cdf(v);
        d = d.max((i as f64 + 1.0) / n - f).max(f - i as f64 / n);
    }
    let sq = n.sqrt();
    TestResult {
        statistic: d,
        df: n,
        p: kolmogorov_sf(d * (sq + 0.12 + 0.11 / sq)),
    }
}

/// Two-sample KS test (ties handled by advancing both samples past a common value; the
/// test is then conservative).
pub fn ks_two_sample(a: &[f64], b: &[f64]) -> TestResult {
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (n, m) = (a.len(), b.len());
    let (mut i, mut j) = (0, 0);
    let mut d: f64 = 0.0;
    while i < n && j < m {
        let v = if a[i].total_cmp(&b[j]).is_le() {
            a[i]
        } else {
            b[j]
        };
        while i < n && a[i].total_cmp(&v).is_le() {
            i += 1;
        }
        while j < m && b[j].total_cmp(&v).is_le() {
            j += 1;
        }
        d = d.max((i as f64 / n as f64 - j as f64 / m as f64).abs());
    }
    let ne = (n * m) as f64 / (n + m) as f64;
    let sq = ne.sqrt();
    TestResult {
        statistic: d,
        df: ne,
        p: kolmogorov_sf(d * (sq + 0.12 + 0.11 / sq)),
    }
}

/// Pools cells (given by their expected counts) so that every pooled cell expects ≥ 5:
/// all cells expecting < 5 go into one pool, which is merged with the smallest remaining
/// cell while it still expects < 5. Returns the cell → group map and the number of groups.
fn pool_cells(expected: &[f64]) -> (Vec<usize>, usize) {
    let n = expected.len();
    let mut group = vec![usize::MAX; n];
    let mut big: Vec<usize> = (0..n).filter(|&c| expected[c] >= 5.0).collect();
    let small: Vec<usize> = (0..n).filter(|&c| expected[c] < 5.0).collect();
    let mut pool: Vec<usize> = small;
    let mut pool_exp: f64 = pool.iter().map(|&c| expected[c]).sum();
    big.sort_by(|&a, &b| expected[a].total_cmp(&expected[b]));
    let mut big = std::collections::VecDeque::from(big);
    while !pool.is_empty() && pool_exp < 5.0 && !big.is_empty() {
        let c = big.pop_front().unwrap();
        pool_exp += expected[c];
        pool.push(c);
    }
    let mut g = 0;
    for c in big {
        group[c] = g;
        g += 1;
    }
    if !pool.is_empty() {
        for c in pool {
            group[c] = g;
        }
        g += 1;
    }
    (group, g)
}

/// χ² goodness of fit of observed counts to cell probabilities (which must sum to 1),
/// pooling cells expecting < 5.
pub fn chi2_gof(observed: &[u64], probs: &[f64]) -> TestResult {
    assert_eq!(observed.len(), probs.len());
    let total_p: f64 = probs.iter().sum();
    assert!(
        (total_p - 1.0).abs() < 1e-9,
        "probabilities sum to {total_p}"
    );
    let n: u64 = observed.iter().sum();
    let expected: Vec<f64> = probs.iter().map(|&p| p * n as f64).collect();
    let (group, g) = pool_cells(&expected);
    let mut o = vec![0f64; g];
    let mut e = vec![0f64; g];
    for c in 0..observed.len() {
        o[group[c]] += observed[c] as f64;
        e[group[c]] += expected[c];
    }
    let mut stat = 0.0;
    for (oi, ei) in o.iter().zip(&e) {
        if *ei > 0.0 {
            stat += (oi - ei).powi(2) / ei;
        } else if *oi > 0.0 {
            // An outcome of probability 0 was observed.
            stat = f64::INFINITY;
        }
    }
    let df = (g as f64 - 1.0).max(1.0);
    let p = if stat.is_infinite() {
        0.0
    } else {
        ChiSquared::new(df).unwrap().sf(stat)
    };
    TestResult {
        statistic: stat,
        df,
        p,
    }
}

/// χ² test of homogeneity of several samples of a categorical variable (an r × c
/// contingency table), pooling categories whose smallest expected cell count is < 5.
pub fn chi2_homogeneity<K: Ord + Clone>(samples: &[BTreeMap<K, u64>]) -> TestResult {
    let mut cats: BTreeMap<K, usize> = BTreeMap::new();
    for s in samples {
        for key in s.keys() {
            let next = cats.len();
            cats.entry(key.clone()).or_insert(next);
        }
    }
    let c = cats.len();
    let r = samples.len();
    let mut table = vec![vec![0f64; c]; r];
    for (row, s) in samples.iter().enumerate() {
        for (key, &v) in s {
            table[row][cats[key]] = v as f64;
        }
    }
    let row_tot: Vec<f64> = table.iter().map(|row| row.iter().sum()).collect();
    let total: f64 = row_tot.iter().sum();
    let col_tot: Vec<f64> = (0..c)
        .map(|j| table.iter().map(|row| row[j]).sum())
        .collect();
    let min_row = row_tot.iter().cloned().fold(f64::INFINITY, f64::min);
    let min_expected: Vec<f64> = col_tot.iter().map(|&ct| ct * min_row / total).collect();
    let (group, g) = pool_cells(&min_expected);
    if g < 2 {
        return TestResult {
            statistic: 0.0,
            df: 0.0,
            p: 1.0,
        };
    }
    let mut pooled = vec![vec![0f64; g]; r];
    for row in 0..r {
        for j in 0..c {
            pooled[row][group[j]] += table[row][j];
        }
    }
    let gcol: Vec<f64> = (0..g)
        .map(|j| pooled.iter().map(|row| row[j]).sum())
        .collect();
    let mut stat = 0.0;
    for row in 0..r {
        for j in 0..g {
            let e = row_tot[row] * gcol[j] / total;
            stat += (pooled[row][j] - e).powi(2) / e;
        }
    }
    let df = ((r - 1) * (g - 1)) as f64;
    TestResult {
        statistic: stat,
        df,
        p: ChiSquared::new(df).unwrap().sf(stat),
    }
}

/// Exact two-sided binomial test: p = min(1, 2·min(P(X ≤ k), P(X ≥ k))), X ~ Bin(n, p).
pub fn binomial_test(k: u64, n: u64, p: f64) -> TestResult {
    let b = Binomial::new(p, n).unwrap();
    let lower = b.cdf(k);
    let upper = if k == 0 { 1.0 } else { b.sf(k - 1) };
    TestResult {
        statistic: k as f64 / n as f64,
        df: n as f64,
        p: (2.0 * lower.min(upper)).min(1.0),
    }
}

/// Two-sided z-test of a sample mean against `mu` with the sample standard deviation.
pub fn z_test(values: &[f64], mu: f64) -> TestResult {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let se = (var / n).sqrt();
    // A (numerically) constant sample: every draw is the same number up to rounding, so
    // the claim is an identity; compare to 1e-12.
    let p = if se <= 1e-13 * mean.abs().max(1.0) {
        if (mean - mu).abs() <= 1e-12 * mu.abs().max(1.0) {
            1.0
        } else {
            0.0
        }
    } else {
        2.0 * Normal::new(0.0, 1.0).unwrap().sf(((mean - mu) / se).abs())
    };
    TestResult {
        statistic: mean,
        df: se,
        p,
    }
}

/// Histogram of a categorical sample.
pub fn histogram<K: Ord, I: IntoIterator<Item = K>>(items: I) -> BTreeMap<K, u64> {
    let mut h = BTreeMap::new();
    for it in items {
        *h.entry(it).or_insert(0) += 1;
    }
    h
}

/// pmf of 1 + Σ Bernoulli(p_i) (independent): index = value.
pub fn one_plus_poisson_binomial(ps: &[f64]) -> Vec<f64> {
    let mut pmf = vec![1.0];
    for &p in ps {
        let mut next = vec![0.0; pmf.len() + 1];
        for (k, &q) in pmf.iter().enumerate() {
            next[k] += q * (1.0 - p);
            next[k + 1] += q * p;
        }
        pmf = next;
    }
    let mut out = vec![0.0];
    out.extend(pmf);
    out
}

/// A family of p-values tested together at family-wise level [`ALPHA`] (Bonferroni).
pub struct Family {
    name: String,
    results: Vec<(String, TestResult)>,
}

impl Family {
    pub fn new(name: &str) -> Self {
        Family {
            name: name.to_string(),
            results: Vec::new(),
        }
    }

    pub fn push(&mut self, label: impl Into<String>, r: TestResult) {
        self.results.push((label.into(), r));
    }

    /// Fails if any p-value is below ALPHA / m; prints every result.
    pub fn assert(&self) {
        let m = self.results.len().max(1) as f64;
        let threshold = ALPHA / m;
        let mut failed = Vec::new();
        eprintln!(
            "== {}: {} comparisons, per-comparison level {threshold:.2e}",
            self.name, m
        );
        for (label, r) in &self.results {
            eprintln!(
                "   {label}: statistic {:.6}, df/scale {:.4}, p = {:.3e}",
                r.statistic, r.df, r.p
            );
            // A NaN p-value fails too.
            if r.p.is_nan() || r.p < threshold {
                failed.push(format!(
                    "{label} (p = {:.3e}, statistic {:.6})",
                    r.p, r.statistic
                ));
            }
        }
        assert!(
            failed.is_empty(),
            "{}: rejected at family-wise level {ALPHA} (per comparison {threshold:.2e}): {failed:?}",
            self.name
        );
    }
}
