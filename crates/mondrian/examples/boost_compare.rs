//! Online boosting (experimental, spec `bayesian-trees.md` §6.3) against the plain online
//! Mondrian forest and its online bagging (§6.2): the same number of trees, each trained
//! online one row at a time in the file's order, test accuracy and seconds; prints one
//! Markdown row per method and seed count.
//!
//! ```sh
//! cargo run --release --features experimental --example boost_compare -- \
//!     TRAIN.csv TEST.csv [TREES] [SEEDS]
//! ```

use std::time::Instant;

use mondrian::forest::boost::OzaBoostClassifier;
use mondrian::{ClassifierParams, MondrianForestClassifier};

/// Rows and labels of a CSV with a header and the label last; labels mapped to 0..K by
/// their sorted distinct values (shared between train and test through `classes`).
fn read(path: &str, classes: &mut Vec<String>) -> (Vec<f64>, Vec<usize>, usize) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut lines = text.lines();
    let d = lines.next().expect("a header").split(',').count() - 1;
    let (mut x, mut raw) = (Vec::new(), Vec::new());
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(',').collect();
        x.extend(
            f[..d]
                .iter()
                .map(|s| s.trim().parse::<f64>().expect("a number")),
        );
        raw.push(f[d].trim().to_string());
    }
    for r in &raw {
        if !classes.contains(r) {
            classes.push(r.clone());
        }
    }
    classes.sort_by(|a, b| match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(u), Ok(v)) => u.total_cmp(&v),
        _ => a.cmp(b),
    });
    let y = raw
        .iter()
        .map(|r| classes.iter().position(|c| c == r).expect("seen"))
        .collect();
    (x, y, d)
}

fn accuracy(p: &[usize], y: &[usize]) -> f64 {
    p.iter().zip(y).filter(|(a, b)| a == b).count() as f64 / y.len() as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let trees: usize = args.get(3).map_or(10, |s| s.parse().expect("trees"));
    let seeds: u64 = args.get(4).map_or(3, |s| s.parse().expect("seeds"));
    let mut classes = Vec::new();
    read(&args[2], &mut classes);
    // The class map covers both files before either is encoded.
    let (x, y, d) = read(&args[1], &mut classes);
    let (xt, yt, _) = read(&args[2], &mut classes);
    let k = classes.len();
    // Every model gets the training set's ranges as its scaling (a one-row first batch
    // would otherwise fix it).
    let scaling = mondrian::Scaling::Ranges(ranges(&x, d));
    let base = |seed, bagging| ClassifierParams {
        n_trees: trees,
        seed,
        n_threads: 1,
        bagging,
        n_classes: Some(k),
        scaling: scaling.clone(),
        ..Default::default()
    };
    println!(
        "| method | trees | seeds | test accuracy (mean ± sd) | train seconds (mean) |\n|---|---|---|---|---|"
    );
    for method in [
        "forest",
        "forest + online bagging",
        "OzaBoost (experimental)",
    ] {
        let (mut acc, mut secs) = (Vec::new(), Vec::new());
        for seed in 0..seeds {
            let t = Instant::now();
            let pred = if method.starts_with("Oza") {
                let mut m = OzaBoostClassifier::new(base(seed, false)).expect("params");
                for i in 0..y.len() {
                    m.partial_fit(&x[i * d..(i + 1) * d], d, &y[i..=i])
                        .expect("fit");
                }
                secs.push(t.elapsed().as_secs_f64());
                m.predict(&xt, d).expect("predict")
            } else {
                let mut m = MondrianForestClassifier::new(base(seed, method.contains("bagging")))
                    .expect("params");
                for i in 0..y.len() {
                    m.partial_fit(&x[i * d..(i + 1) * d], d, &y[i..=i])
                        .expect("fit");
                }
                secs.push(t.elapsed().as_secs_f64());
                m.predict(&xt, d).expect("predict")
            };
            acc.push(accuracy(&pred, &yt));
        }
        let n = acc.len() as f64;
        let mean = acc.iter().sum::<f64>() / n;
        let sd = (acc.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0)).sqrt();
        println!(
            "| {method} | {trees} | {seeds} | {mean:.4} ± {sd:.4} | {:.2} |",
            secs.iter().sum::<f64>() / n
        );
    }
}

/// Each feature's (min, max) over the training rows (max > min).
fn ranges(x: &[f64], d: usize) -> Vec<(f64, f64)> {
    (0..d)
        .map(|j| {
            let col = x.iter().skip(j).step_by(d);
            let lo = col.clone().copied().fold(f64::INFINITY, f64::min);
            let hi = col.copied().fold(f64::NEG_INFINITY, f64::max);
            (lo, if hi > lo { hi } else { lo + 1.0 })
        })
        .collect()
}
