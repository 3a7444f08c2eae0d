//! Batch fit, prediction and point-by-point online training of a classifier on one thread,
//! each timed by the wall clock and by the CPU time of the thread (Linux
//! `/proc/thread-self/schedstat`): on a machine shared with other work only the CPU time
//! compares builds, since the wall clock also counts the time spent waiting for a core.
//!
//! The model is the one `mondrian eval --threads 1` trains (100 trees, seed 0, the features
//! scaled with the training file's ranges, labels mapped to classes in sorted order);
//! plain CSV only, header row, label last.
//!
//! ```text
//! cargo run --release --example phase_cpu -- TRAIN.csv TEST.csv [--online] [--repeat N]
//! ```
//! prints one JSON object: `fit_*` and `predict_*` (batch) or `train_*` (online) seconds,
//! `_wall` and `_cpu`, and the test log-loss. `--repeat N` trains N forests afresh and
//! predicts N times, and reports the least time of each phase: another process's burst of
//! work only ever adds time.

use mondrian::{ClassifierParams, MondrianForestClassifier, Scaling};
use std::time::Instant;

struct Data {
    x: Vec<f64>,
    labels: Vec<i64>,
    d: usize,
}

fn read(path: &str) -> Result<Data, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut lines = text.lines();
    let d = lines
        .next()
        .ok_or(format!("{path}: empty"))?
        .split(',')
        .count()
        - 1;
    let (mut x, mut labels) = (Vec::new(), Vec::new());
    for (i, line) in lines.enumerate().filter(|(_, l)| !l.is_empty()) {
        let cells: Vec<&str> = line.split(',').collect();
        let bad = || format!("{path}:{}: not {} numbers", i + 2, d + 1);
        if cells.len() != d + 1 {
            return Err(bad());
        }
        for c in &cells[..d] {
            x.push(c.trim().parse::<f64>().map_err(|_| bad())?);
        }
        let label = cells[d].trim().parse::<f64>().map_err(|_| bad())?;
        labels.push(label as i64);
    }
    Ok(Data { x, labels, d })
}

/// CPU time of this thread so far, in seconds.
fn thread_cpu() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(f64::NAN, |ns| ns * 1e-9)
}

fn timed<R>(work: impl FnOnce() -> R) -> (R, f64, f64) {
    let (cpu, wall) = (thread_cpu(), Instant::now());
    let out = work();
    (out, wall.elapsed().as_secs_f64(), thread_cpu() - cpu)
}

fn run() -> Result<String, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let online = args.iter().any(|a| a == "--online");
    let files: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| !a.starts_with("--") && (*i == 0 || args[i - 1] != "--repeat"))
        .map(|(_, a)| a)
        .collect();
    let [train, test] = files[..] else {
        return Err("usage: phase_cpu TRAIN.csv TEST.csv [--online] [--repeat N]".into());
    };
    let (train, test) = (read(train)?, read(test)?);
    let d = train.d;
    let mut values = train.labels.clone();
    values.sort_unstable();
    values.dedup();
    let class = |v: &i64| values.binary_search(v).ok();
    let y: Vec<usize> = train.labels.iter().filter_map(class).collect();
    let mut ranges = vec![(f64::INFINITY, f64::NEG_INFINITY); d];
    for row in train.x.chunks_exact(d) {
        for (r, &v) in ranges.iter_mut().zip(row) {
            *r = (r.0.min(v), r.1.max(v));
        }
    }
    let repeat: usize = match args.iter().position(|a| a == "--repeat") {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .ok_or("--repeat needs a positive count")?,
        None => 1,
    };
    let params = ClassifierParams {
        n_trees: 100,
        seed: 0,
        n_threads: 1,
        n_classes: Some(values.len()),
        scaling: Scaling::Ranges(ranges),
        ..Default::default()
    };
    let err = |e: mondrian::MondrianError| e.to_string();
    let least = |a: (f64, f64), b: (f64, f64)| (a.0.min(b.0), a.1.min(b.1));
    let (mut train_time, mut forest) = ((f64::INFINITY, f64::INFINITY), None);
    for _ in 0..repeat {
        let mut fresh = MondrianForestClassifier::new(params.clone()).map_err(err)?;
        let (result, wall, cpu) = timed(|| {
            if online {
                for (row, label) in train.x.chunks_exact(d).zip(&y) {
                    fresh.partial_fit(row, d, &[*label])?;
                }
                Ok(())
            } else {
                fresh.fit(&train.x, d, &y)
            }
        });
        result.map_err(err)?;
        train_time = least(train_time, (wall, cpu));
        forest = Some(fresh);
    }
    let forest = forest.ok_or("no forest")?;
    let phase = if online { "train" } else { "fit" };
    let (wall, cpu) = train_time;
    let mut out = format!("{{\"{phase}_wall\": {wall:.6}, \"{phase}_cpu\": {cpu:.6}");
    let (mut predict_time, mut proba) = ((f64::INFINITY, f64::INFINITY), Vec::new());
    for _ in 0..if online { 1 } else { repeat } {
        let (p, wall, cpu) = timed(|| forest.predict_proba(&test.x, d));
        proba = p.map_err(err)?;
        predict_time = least(predict_time, (wall, cpu));
    }
    if !online {
        let (wall, cpu) = predict_time;
        out += &format!(", \"predict_wall\": {wall:.6}, \"predict_cpu\": {cpu:.6}");
    }
    let k = values.len();
    let mut loss = 0.0;
    for (p, label) in proba.chunks_exact(k).zip(&test.labels) {
        let q = class(label).map_or(0.0, |c| p[c]);
        loss -= q.max(1e-15).ln();
    }
    let loss = loss / test.labels.len().max(1) as f64;
    Ok(out + &format!(", \"log_loss\": {loss:.12}}}"))
}

fn main() {
    match run() {
        Ok(line) => println!("{line}"),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
}
