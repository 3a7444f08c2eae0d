//! One BART chain on a train/test CSV pair (last column the target) with its
//! per-iteration traces, for the chapter-4 experiments (`experiments/bayes/ch4.py`):
//! prints one JSON object with the test metrics of the kept draws, CODA ESS (§5.5) of the
//! log-likelihood, σ and σ² traces over the kept iterations, and optionally the traces.
//!
//! `cargo run --release -p mondrian --example bart_traces -- --train A.csv --test B.csv
//!  [--trees 200] [--sampler pg|cgm|growprune] [--particles 10] [--iters 2000]
//!  [--burn-in 1000] [--seed 0] [--alpha-s 0.95] [--beta-s 2] [--threads 0]
//!  [--split-value continuous|midpoint] [--trace-all] [--traces]`
//!
//! `--trace-all` keeps every iteration's draw (the chain is the same: burn-in only decides
//! which draws are stored) so that the test-MSE trace starts at iteration 1; the metrics
//! and ESS still use iterations burn-in+1..iters only. `--traces` adds the per-iteration
//! traces to the JSON.
use std::time::Instant;

use mondrian::bayes::bart::normal_cdf;
use mondrian::bayes::{
    effective_size, BartParams, BartRegressor, CgmPrior, SplitValue, TreeSampler,
};
use serde_json::json;

/// Row-major features, targets and the number of features.
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

struct Args {
    train: String,
    test: String,
    trees: usize,
    sampler: String,
    particles: usize,
    iters: usize,
    burn_in: usize,
    seed: u64,
    alpha_s: f64,
    beta_s: f64,
    threads: usize,
    midpoint: bool,
    trace_all: bool,
    traces: bool,
}

fn parse_args() -> Result<Args, Box<dyn std::error::Error>> {
    let mut a = Args {
        train: String::new(),
        test: String::new(),
        trees: 200,
        sampler: "pg".into(),
        particles: 10,
        iters: 2000,
        burn_in: 1000,
        seed: 0,
        alpha_s: 0.95,
        beta_s: 2.0,
        threads: 0,
        midpoint: false,
        trace_all: false,
        traces: false,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let flag = argv[i].as_str();
        match flag {
            "--trace-all" => a.trace_all = true,
            "--traces" => a.traces = true,
            _ => {
                let v = argv.get(i + 1).ok_or(format!("{flag} needs a value"))?;
                i += 1;
                match flag {
                    "--train" => a.train = v.clone(),
                    "--test" => a.test = v.clone(),
                    "--trees" => a.trees = v.parse()?,
                    "--sampler" => a.sampler = v.clone(),
                    "--particles" => a.particles = v.parse()?,
                    "--iters" => a.iters = v.parse()?,
                    "--burn-in" => a.burn_in = v.parse()?,
                    "--seed" => a.seed = v.parse()?,
                    "--alpha-s" => a.alpha_s = v.parse()?,
                    "--beta-s" => a.beta_s = v.parse()?,
                    "--threads" => a.threads = v.parse()?,
                    "--split-value" => {
                        a.midpoint = match v.as_str() {
                            "midpoint" => true,
                            "continuous" => false,
                            s => return Err(format!("unknown split value {s}").into()),
                        }
                    }
                    _ => return Err(format!("unknown flag {flag}").into()),
                }
            }
        }
        i += 1;
    }
    if a.train.is_empty() || a.test.is_empty() {
        return Err("--train and --test are required".into());
    }
    Ok(a)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = parse_args()?;
    let (x, y, d) = read_csv(&a.train)?;
    let (tx, ty, td) = read_csv(&a.test)?;
    if td != d {
        return Err("train and test have different widths".into());
    }
    let default_pg = TreeSampler::default();
    let sampler = match a.sampler.as_str() {
        "cgm" => TreeSampler::cgm(),
        "growprune" => TreeSampler::GrowPrune,
        "pg" => match default_pg {
            TreeSampler::ParticleGibbs {
                max_stages, init, ..
            } => TreeSampler::ParticleGibbs {
                particles: a.particles,
                max_stages,
                init,
            },
            other => other,
        },
        s => return Err(format!("unknown sampler {s}").into()),
    };
    let params = BartParams {
        n_trees: a.trees,
        n_iter: a.iters,
        burn_in: if a.trace_all { 0 } else { a.burn_in },
        sampler,
        seed: a.seed,
        n_threads: a.threads,
        split_value: if a.midpoint {
            SplitValue::Midpoint
        } else {
            SplitValue::Continuous
        },
        prior: CgmPrior {
            alpha_s: a.alpha_s,
            beta_s: a.beta_s,
            min_samples: None,
        },
        ..Default::default()
    };
    let mut model = BartRegressor::new(params)?;
    let t = Instant::now();
    model.fit(&x, d, &y)?;
    let fit_seconds = t.elapsed().as_secs_f64();
    let tr = model.traces()?;
    let burn = a.burn_in;
    let kept = |v: &[f64]| v[burn.min(v.len())..].to_vec();
    let seconds_total: f64 = tr.seconds.iter().sum();
    let seconds_kept: f64 = kept(&tr.seconds).iter().sum();
    let sigma: Vec<f64> = tr.sigma2.iter().map(|s| s.sqrt()).collect();
    let ess_ll = effective_size(&kept(&tr.log_likelihood));
    let ess_sigma = effective_size(&kept(&sigma));
    let ess_sigma2 = effective_size(&kept(&tr.sigma2));

    // Test metrics from the stored draws; with --trace-all the first `burn` are burn-in.
    let t = Instant::now();
    let draws = model.posterior_draws(&tx, d)?;
    let sig = model.sigma_draws()?;
    let n = ty.len();
    let s_all = sig.len();
    let first = if a.trace_all { burn } else { 0 };
    let test_mse: Vec<f64> = (0..s_all)
        .map(|s| {
            let f = &draws[s * n..(s + 1) * n];
            f.iter()
                .zip(&ty)
                .map(|(p, t)| (p - t) * (p - t))
                .sum::<f64>()
                / n as f64
        })
        .collect();
    let s_kept = (s_all - first) as f64;
    let (mut se, mut covered, mut nlpd) = (0.0, 0usize, 0.0);
    for i in 0..n {
        let (mut m, mut cdf, mut dens) = (0.0, 0.0, 0.0);
        for s in first..s_all {
            let f = draws[s * n + i];
            let z = (ty[i] - f) / sig[s];
            m += f;
            cdf += normal_cdf(z);
            dens += (-0.5 * z * z).exp() / (sig[s] * (std::f64::consts::TAU).sqrt());
        }
        m /= s_kept;
        cdf /= s_kept;
        dens /= s_kept;
        se += (m - ty[i]) * (m - ty[i]);
        // y lies in the central 90% interval of the predictive mixture iff its CDF does.
        if (0.05..=0.95).contains(&cdf) {
            covered += 1;
        }
        nlpd -= dens.max(f64::MIN_POSITIVE).ln();
    }
    let predict_seconds = t.elapsed().as_secs_f64();
    let kept_leaves = kept(&tr.mean_leaves);
    let mut out = json!({
        "tool": "mondrian",
        "sampler": a.sampler,
        "trees": a.trees,
        "particles": a.particles,
        "iters": a.iters,
        "burn_in": burn,
        "seed": a.seed,
        "split_value": if a.midpoint { "midpoint" } else { "continuous" },
        "alpha_s": a.alpha_s,
        "beta_s": a.beta_s,
        "n_train": y.len(),
        "n_test": n,
        "rmse": (se / n as f64).sqrt(),
        "nlpd": nlpd / n as f64,
        "coverage_90": covered as f64 / n as f64,
        "ess_loglik": ess_ll,
        "ess_sigma": ess_sigma,
        "ess_sigma2": ess_sigma2,
        "ess_per_second_loglik_kept": ess_ll / seconds_kept,
        "ess_per_second_loglik_total": ess_ll / seconds_total,
        "ess_per_second_sigma_total": ess_sigma / seconds_total,
        "seconds_total": seconds_total,
        "seconds_kept": seconds_kept,
        "fit_seconds": fit_seconds,
        "predict_seconds": predict_seconds,
        "mean_leaves_per_tree": mean(&kept_leaves),
        "train_mse_kept": mean(&kept(&tr.train_mse)),
        "move_rate_kept": mean(&kept(&tr.move_rate)),
    });
    if a.traces {
        out["traces"] = json!({
            "log_likelihood": tr.log_likelihood,
            "sigma2": tr.sigma2,
            "total_leaves": tr.total_leaves,
            "train_mse": tr.train_mse,
            "test_mse": test_mse,
            "test_mse_first_iteration": if a.trace_all { 1 } else { burn + 1 },
            "seconds": tr.seconds,
        });
    }
    println!("{out}");
    Ok(())
}
