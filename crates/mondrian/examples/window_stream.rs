//! A long stream through a windowed forest: memory over time, and throughput with and
//! without a window. Used by `experiments/windows/` (see its README for the commands and
//! the committed results).
//!
//! ```text
//! cargo run --release -p mondrian --example window_stream -- memory [POINTS] [WINDOW] [TREES]
//! cargo run --release -p mondrian --example window_stream -- throughput [POINTS] [WINDOW] [TREES] [REPS]
//! ```
//!
//! The stream is a rotating hyperplane in 10 features, generated on the fly (nothing is
//! held but the window): `x ~ U[0,1]^10`, label `1{w_t · x > Σ w_t / 2}`, with the weights
//! `w_t` turning slowly, and 5 % of labels flipped. `memory` feeds it point by point
//! (`partial_fit` on one row) and prints, every 100,000 points, the points seen, the
//! process's resident set size and its peak (from `/proc/self/status`), the model's own
//! byte count and the seconds elapsed, as CSV. `throughput` times the same point-by-point
//! stream with and without the window, alternating the two `REPS` times, and prints the
//! points per second of each run.

use std::time::Instant;

use mondrian::{ClassifierParams, MondrianForestClassifier, Scaling};

const D: usize = 10;

/// The rotating-hyperplane stream, deterministic from its seed.
struct Hyperplane {
    state: u64,
    t: u64,
}

impl Hyperplane {
    fn new(seed: u64) -> Self {
        Hyperplane { state: seed, t: 0 }
    }

    fn uniform(&mut self) -> f64 {
        // SplitMix64: enough for a benchmark stream.
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn next(&mut self, x: &mut [f64; D]) -> usize {
        self.t += 1;
        let angle = self.t as f64 * 1e-6;
        let mut dot = 0.0;
        let mut total = 0.0;
        for (k, v) in x.iter_mut().enumerate() {
            *v = self.uniform();
            let w = 1.0 + (angle + k as f64).sin();
            dot += w * *v;
            total += w;
        }
        let label = usize::from(dot > total / 2.0);
        if self.uniform() < 0.05 {
            1 - label
        } else {
            label
        }
    }
}

fn forest(trees: usize, window: Option<usize>) -> MondrianForestClassifier {
    MondrianForestClassifier::new(ClassifierParams {
        n_trees: trees,
        n_threads: 1,
        n_classes: Some(2),
        scaling: Scaling::Identity,
        window,
        seed: 1,
        ..Default::default()
    })
    .expect("valid parameters")
}

/// (resident, peak) in MiB, from /proc/self/status (0 where it cannot be read).
fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn arg(args: &[String], i: usize, default: usize) -> usize {
    args.get(i)
        .map(|a| a.replace('_', "").parse().expect("a whole number"))
        .unwrap_or(default)
}

/// Feeds `points` of the stream point by point; calls `report(i, model)` every `every`.
fn run(
    model: &mut MondrianForestClassifier,
    points: usize,
    every: usize,
    mut report: impl FnMut(usize, &MondrianForestClassifier),
) {
    let mut stream = Hyperplane::new(7);
    let mut x = [0.0; D];
    for i in 1..=points {
        let y = stream.next(&mut x);
        model.partial_fit(&x, D, &[y]).expect("training");
        if i % every == 0 {
            report(i, model);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("memory") => {
            let (points, window, trees) = (
                arg(&args, 2, 10_000_000),
                arg(&args, 3, 100_000),
                arg(&args, 4, 10),
            );
            let mut model = forest(trees, Some(window));
            let start = Instant::now();
            println!("points,rss_mib,peak_mib,model_mib,points_held,seconds");
            run(&mut model, points, 100_000, |i, m| {
                let (rss, peak) = rss_mib();
                let bytes = m.summary().total_bytes as f64 / (1 << 20) as f64;
                println!(
                    "{i},{rss:.1},{peak:.1},{bytes:.1},{},{:.1}",
                    m.n_points(),
                    start.elapsed().as_secs_f64()
                );
            });
        }
        Some("throughput") => {
            let (points, window, trees, reps) = (
                arg(&args, 2, 1_000_000),
                arg(&args, 3, 100_000),
                arg(&args, 4, 10),
                arg(&args, 5, 3),
            );
            println!("run,window,points,seconds,points_per_second");
            for rep in 0..reps {
                // Alternate the order, so that neither run always goes first.
                let order = if rep % 2 == 0 {
                    [None, Some(window)]
                } else {
                    [Some(window), None]
                };
                for w in order {
                    let mut model = forest(trees, w);
                    let start = Instant::now();
                    run(&mut model, points, points, |_, _| {});
                    let s = start.elapsed().as_secs_f64();
                    let label = w.map_or("none".to_string(), |w| w.to_string());
                    println!("{rep},{label},{points},{s:.3},{:.0}", points as f64 / s);
                }
            }
        }
        _ => {
            eprintln!(
                "usage: window_stream memory [POINTS] [WINDOW] [TREES]\n       \
                 window_stream throughput [POINTS] [WINDOW] [TREES] [REPS]"
            );
            std::process::exit(2);
        }
    }
}
