//! Seconds per BART iteration for each tree sampler on a fixed workload: the first
//! `n` rows of a CSV (last column the target). Usage:
//! `cargo run --release -p mondrian --example bart_speed -- FILE.csv [n] [trees] [iters] [cgm|growprune|pg]`
use std::time::Instant;

use mondrian::bayes::{BartParams, BartRegressor, TreeSampler};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .ok_or("usage: bart_speed FILE.csv [n] [trees] [iters]")?;
    let n: usize = args.get(2).map_or(Ok(2000), |s| s.parse())?;
    let trees: usize = args.get(3).map_or(Ok(50), |s| s.parse())?;
    let iters: usize = args.get(4).map_or(Ok(100), |s| s.parse())?;
    let only = args.get(5).cloned();
    let text = std::fs::read_to_string(path)?;
    let mut x = Vec::new();
    let mut y = Vec::new();
    let mut d = 0;
    for line in text.lines().skip(1).take(n) {
        let v: Vec<f64> = line
            .split(',')
            .map(|s| s.trim().parse())
            .collect::<Result<_, _>>()?;
        d = v.len() - 1;
        x.extend_from_slice(&v[..d]);
        y.push(v[d]);
    }
    for (name, sampler) in [
        ("cgm", TreeSampler::cgm()),
        ("growprune", TreeSampler::GrowPrune),
        ("pg", BartParams::default().sampler),
    ] {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let params = BartParams {
            n_trees: trees,
            n_iter: iters,
            burn_in: iters / 2,
            sampler,
            seed: 1,
            ..Default::default()
        };
        let mut model = BartRegressor::new(params)?;
        let t = Instant::now();
        model.fit(&x, d, &y)?;
        let s = t.elapsed().as_secs_f64();
        let tr = model.traces()?;
        println!(
            "{name:10} {:.4} s/iter  ess(loglik) {:.1}  mean leaves {:.2}",
            s / iters as f64,
            tr.ess_log_likelihood(),
            tr.kept(&tr.mean_leaves).iter().sum::<f64>() / tr.kept(&tr.mean_leaves).len() as f64
        );
    }
    Ok(())
}
