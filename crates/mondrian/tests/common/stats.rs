//! Goodness-of-fit machinery of the statistical suites: KS (one and two samples), χ²
//! (goodness of fit and homogeneity, with pooling of small cells), the exact binomial test,
//! z- and t-tests of a mean, histograms, the Poisson-binomial pmf, and the Bonferroni-corrected
//! [`Family`] of p-values every statistical test function reports through (at family-wise
//! level [`ALPHA`], see `mod.rs`).

use std::collections::BTreeMap;

use statrs::distribution::{Binomial, ChiSquared, ContinuousCDF, DiscreteCDF, Normal, StudentsT};

/// Family-wise significance level of every statistical test function.
pub const ALPHA: f64 = 1e-3;

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

/// Two-sided one-sample Student t-test of the mean of `values` against `mu` (for small
/// samples of roughly normal values, where the z-test's normal tail is too thin).
pub fn t_test(values: &[f64], mu: f64) -> TestResult {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let t = (mean - mu) / (var / n).sqrt();
    let law = StudentsT::new(0.0, 1.0, n - 1.0).unwrap();
    TestResult {
        statistic: t,
        df: n - 1.0,
        p: if t.is_nan() {
            f64::NAN
        } else {
            2.0 * law.sf(t.abs())
        },
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

    /// The comparisons whose p-value is below ALPHA / m (or NaN); prints every result.
    pub fn rejections(&self) -> Vec<String> {
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
        failed
    }

    /// Fails if any p-value is below ALPHA / m; prints every result.
    pub fn assert(&self) {
        let failed = self.rejections();
        let threshold = ALPHA / self.results.len().max(1) as f64;
        assert!(
            failed.is_empty(),
            "{}: rejected at family-wise level {ALPHA} (per comparison {threshold:.2e}): {failed:?}",
            self.name
        );
    }
}
