//! One Bayesian decision-tree classifier fit scored on a test file, printed as one JSON
//! line: the Ch. 3 CGM MCMC baseline (spec `bayesian-trees.md` §3.11, the default) or
//! top-down SMC (`--smc C`), both on one thread from the same build, for the E3.4
//! comparison of `experiments/bayes/ch3.py`.
//!
//! ```sh
//! cargo run --release -p mondrian --example mcmc_tree -- TRAIN.csv TEST.csv \
//!     [--iterations N] [--seed S] [--points P] [--alpha A] [--alpha-s a] [--beta-s b] \
//!     [--smc C --islands I --proposal prior|optimal]
//! ```
//!
//! CSV files have a header row and the class label in the last column; labels are mapped
//! to 0..K over the union of both files. MCMC output: `seconds` (the chain's sampler time,
//! prediction excluded), `log_predictive` (test mean natural log p(y|x) of the average over
//! all iterations), `accuracy`, `acceptance`, `mean_leaves`, `n_visited`, and `curve`:
//! [iteration, sampler seconds, test mean log p] at about P iterations spaced
//! geometrically from 1 to N. SMC output: `seconds` (fit), `log_predictive`, `accuracy`,
//! `log_evidence`.
use std::collections::BTreeMap;
use std::time::Instant;

use mondrian::bayes::{
    CgmPrior, McmcClassifierParams, McmcParams, McmcTreeClassifier, Proposal, SmcClassifierParams,
    SmcParams, SmcTreeClassifier,
};
use serde_json::json;

type Table = (Vec<f64>, Vec<f64>, usize);

fn read_csv(path: &str) -> Result<Table, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(path)?;
    let (mut x, mut y, mut d) = (Vec::new(), Vec::new(), 0);
    for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let v: Vec<f64> = line
            .split(',')
            .map(|s| s.trim().parse())
            .collect::<Result<_, _>>()?;
        d = v.len() - 1;
        x.extend_from_slice(&v[..d]);
        y.push(v[d]);
    }
    Ok((x, y, d))
}

/// Iterations 1..=n spaced geometrically, about `points` of them, n last.
fn grid(n: usize, points: usize) -> Vec<usize> {
    let mut out: Vec<usize> = (0..points)
        .map(|i| {
            let f = i as f64 / (points.max(2) - 1) as f64;
            ((n as f64).powf(f).round() as usize).clamp(1, n)
        })
        .collect();
    out.push(n);
    out.sort_unstable();
    out.dedup();
    out
}

fn scores(proba: &[f64], y: &[usize], k: usize) -> (f64, f64) {
    let (mut lp, mut hits) = (0.0, 0usize);
    for (row, &label) in proba.chunks(k).zip(y) {
        lp += row[label].ln();
        let best = row
            .iter()
            .enumerate()
            .fold(
                (0, f64::NEG_INFINITY),
                |b, (i, &v)| if v > b.1 { (i, v) } else { b },
            )
            .0;
        hits += usize::from(best == label);
    }
    (lp / y.len() as f64, hits as f64 / y.len() as f64)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: mcmc_tree TRAIN.csv TEST.csv [--iterations N] [--seed S] [--points P] \
                 [--alpha A] [--alpha-s a] [--beta-s b] [--smc C --islands I --proposal p]";
    if args.len() < 2 {
        return Err(usage.into());
    }
    let mut opt: BTreeMap<String, String> = BTreeMap::new();
    for pair in args[2..].chunks(2) {
        match pair {
            [k, v] if k.starts_with("--") => {
                opt.insert(k[2..].to_string(), v.clone());
            }
            _ => return Err(usage.into()),
        }
    }
    let get = |k: &str, default: &str| opt.get(k).cloned().unwrap_or_else(|| default.into());
    let (xtr, ytr_raw, d) = read_csv(&args[0])?;
    let (xte, yte_raw, d_test) = read_csv(&args[1])?;
    if d != d_test {
        return Err(format!("train has {d} features, test {d_test}").into());
    }
    let mut labels: Vec<f64> = ytr_raw.iter().chain(&yte_raw).copied().collect();
    labels.sort_by(f64::total_cmp);
    labels.dedup();
    let map = |v: &f64| labels.partition_point(|l| l < v);
    let ytr: Vec<usize> = ytr_raw.iter().map(map).collect();
    let yte: Vec<usize> = yte_raw.iter().map(map).collect();
    let k = labels.len();
    let prior = CgmPrior {
        alpha_s: get("alpha-s", "0.95").parse()?,
        beta_s: get("beta-s", "0.5").parse()?,
        min_samples: None,
    };
    let alpha: f64 = get("alpha", "5").parse()?;
    let seed: u64 = get("seed", "0").parse()?;
    let out = if let Some(c) = opt.get("smc") {
        let proposal = match get("proposal", "prior").as_str() {
            "prior" => Proposal::Prior,
            "optimal" => Proposal::Optimal,
            "empirical" => Proposal::Empirical,
            p => return Err(format!("unknown proposal {p}").into()),
        };
        let mut model = SmcTreeClassifier::new(SmcClassifierParams {
            smc: SmcParams {
                particles: c.parse()?,
                islands: get("islands", "1").parse()?,
                prior,
                proposal,
                seed,
                n_threads: 1,
                ..Default::default()
            },
            alpha,
            n_classes: Some(k),
        })?;
        let t = Instant::now();
        model.fit(&xtr, d, &ytr)?;
        let seconds = t.elapsed().as_secs_f64();
        let (lp, acc) = scores(&model.predict_proba(&xte, d)?, &yte, k);
        json!({
            "method": "smc", "particles": c.parse::<usize>()?,
            "islands": get("islands", "1").parse::<usize>()?, "seed": seed,
            "seconds": seconds, "log_predictive": lp, "accuracy": acc,
            "log_evidence": model.log_evidence()?, "n_train": ytr.len(), "n_test": yte.len(),
        })
    } else {
        let n: usize = get("iterations", "1000").parse()?;
        let at = grid(n, get("points", "60").parse()?);
        let mut model = McmcTreeClassifier::new(McmcClassifierParams {
            mcmc: McmcParams {
                prior,
                iterations: n,
                seed,
                ..Default::default()
            },
            alpha,
            n_classes: Some(k),
        })?;
        let curve = model.fit_with_holdout(&xtr, d, &ytr, Some((&xte, &yte, &at)))?;
        let (lp, acc) = scores(&model.predict_proba(&xte, d)?, &yte, k);
        let post = model.posterior()?;
        let trace = post.trace();
        json!({
            "method": "mcmc", "iterations": n, "seed": seed,
            "seconds": trace.total_seconds(), "log_predictive": lp, "accuracy": acc,
            "acceptance": trace.acceptance_rate(), "mean_leaves": post.mean_leaves(),
            "final_leaves": trace.n_leaves.last(), "n_visited": post.n_visited(),
            "final_log_likelihood": trace.log_likelihood.last(),
            "n_train": ytr.len(), "n_test": yte.len(),
            "curve": curve.iter()
                .map(|p| json!([p.iteration, p.seconds, p.mean_log_predictive]))
                .collect::<Vec<_>>(),
            "curve_log_likelihood": curve.iter()
                .map(|p| trace.log_likelihood[p.iteration - 1])
                .collect::<Vec<_>>(),
        })
    };
    println!("{out}");
    Ok(())
}
