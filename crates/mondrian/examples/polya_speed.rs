//! Times a Pólya forest on a CSV whose last column is a 0/1 label: batch fit + score, and
//! a windowed stream. `cargo run --release --example polya_speed -- FILE [TREES] [WINDOW]`.
use std::time::Instant;

use mondrian::{MondrianPolyaForest, PolyaParams, PolyaVariant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let text = std::fs::read_to_string(&args[1]).expect("read");
    let trees: usize = args.get(2).map_or(100, |s| s.parse().unwrap());
    let window: usize = args.get(3).map_or(256, |s| s.parse().unwrap());
    let mut lines = text.lines();
    let d = lines.next().unwrap().split(',').count() - 1;
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for l in lines {
        let v: Vec<f64> = l.split(',').map(|s| s.parse().unwrap()).collect();
        x.extend_from_slice(&v[..d]);
        y.push(v[d] > 0.5);
    }
    let n = y.len();
    for variant in [PolyaVariant::Batch, PolyaVariant::Streaming] {
        let t = Instant::now();
        let mut f = MondrianPolyaForest::new(PolyaParams {
            variant,
            n_trees: trees,
            ..Default::default()
        })
        .unwrap();
        f.fit(&x, d).unwrap();
        let fit = t.elapsed().as_secs_f64();
        let s = f.score(&x, d).unwrap();
        let total = t.elapsed().as_secs_f64();
        println!(
            "{variant:?}: n {n} fit {fit:.2}s fit+score {total:.2}s auc {:.4}",
            auc(&s, &y)
        );
    }
    let m = n.min(50_000);
    let t = Instant::now();
    let mut f = MondrianPolyaForest::new(PolyaParams {
        n_trees: trees,
        window: Some(window),
        ..Default::default()
    })
    .unwrap();
    let s = f.score_stream(&x[..m * d], d, false).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let masses: Vec<f64> = s.iter().map(|r| r.mass).collect();
    println!(
        "stream window {window}: {m} rows in {secs:.2}s = {:.0} rows/s, auc {:.4}",
        m as f64 / secs,
        auc(&masses, &y[..m])
    );
}

/// ROC AUC of "low mass = anomaly" (average ranks for ties).
fn auc(mass: &[f64], y: &[bool]) -> f64 {
    let mut idx: Vec<usize> = (0..mass.len()).collect();
    idx.sort_by(|&a, &b| mass[b].total_cmp(&mass[a]));
    let mut ranks = vec![0.0; mass.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && mass[idx[j + 1]] == mass[idx[i]] {
            j += 1;
        }
        for k in i..=j {
            ranks[idx[k]] = (i + j) as f64 / 2.0 + 1.0;
        }
        i = j + 1;
    }
    let pos = y.iter().filter(|&&b| b).count() as f64;
    let neg = y.len() as f64 - pos;
    let r: f64 = ranks
        .iter()
        .zip(y)
        .filter(|(_, &b)| b)
        .map(|(r, _)| r)
        .sum();
    (r - pos * (pos + 1.0) / 2.0) / (pos * neg)
}
