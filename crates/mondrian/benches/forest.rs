//! Criterion benchmarks of the classifier on the shipped satimage data (4435 × 36, 6 classes):
//! batch fit, online training point by point and in mini-batches, and prediction, all on
//! one thread so the numbers compare with single-threaded peers.
//!
//! Run: `cargo bench -p mondrian --bench forest`.

use std::io::Read;
use std::path::Path;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use mondrian::{ClassifierParams, MondrianForestClassifier};

/// A labelled CSV (header, label last), possibly gzipped.
pub struct Table {
    pub x: Vec<f64>,
    pub y: Vec<usize>,
    pub d: usize,
}

pub fn read_table(path: &Path) -> Table {
    let raw = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut text = String::new();
    if raw.starts_with(&[0x1f, 0x8b]) {
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_string(&mut text)
            .expect("gzip");
    } else {
        text = String::from_utf8(raw).expect("utf-8");
    }
    let mut lines = text.lines();
    let d = lines.next().expect("header").split(',').count() - 1;
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let cells: Vec<f64> = line
            .split(',')
            .map(|c| c.trim().parse().expect("number"))
            .collect();
        x.extend_from_slice(&cells[..d]);
        y.push(cells[d] as usize);
    }
    Table { x, y, d }
}

/// Per-feature (min, max) of a table: the ranges a streaming user would declare.
pub fn ranges_of(t: &Table) -> Vec<(f64, f64)> {
    (0..t.d)
        .map(|j| {
            let col = t.x.iter().skip(j).step_by(t.d);
            let lo = col.clone().cloned().fold(f64::INFINITY, f64::min);
            let hi = col.cloned().fold(f64::NEG_INFINITY, f64::max);
            (lo, hi)
        })
        .collect()
}

/// The data files named on the command line (flags skipped), or the shipped `defaults`.
pub fn paths_from_args(defaults: &[&str]) -> Vec<std::path::PathBuf> {
    let given: Vec<std::path::PathBuf> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .map(std::path::PathBuf::from)
        .collect();
    if given.is_empty() {
        defaults
            .iter()
            .map(|name| datasets_dir().join(name))
            .collect()
    } else {
        given
    }
}

fn datasets_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets")
}

fn params() -> ClassifierParams {
    ClassifierParams {
        n_trees: 100,
        n_threads: 1,
        seed: 3,
        ..Default::default()
    }
}

fn bench_forest(c: &mut Criterion) {
    let train = read_table(&datasets_dir().join("satimage_train.csv.gz"));
    let test = read_table(&datasets_dir().join("satimage_test.csv.gz"));
    let (n, d) = (train.y.len(), train.d);
    let mut group = c.benchmark_group("satimage_100_trees_1_thread");
    group.sample_size(10);

    group.throughput(Throughput::Elements((n * 100) as u64));
    group.bench_function("fit", |b| {
        b.iter(|| {
            let mut f = MondrianForestClassifier::new(params()).unwrap();
            f.fit(&train.x, d, &train.y).unwrap();
            f
        })
    });

    // Online: the first point fixes nothing but the width; the scaling comes from ranges as
    // a streaming user would give them, so every point goes through `extend`.
    let ranges = ranges_of(&train);
    let online = ClassifierParams {
        scaling: mondrian::Scaling::Ranges(ranges),
        ..params()
    };
    group.bench_function("partial_fit_point_by_point", |b| {
        b.iter_batched(
            || MondrianForestClassifier::new(online.clone()).unwrap(),
            |mut f| {
                for (row, &y) in train.x.chunks_exact(d).zip(&train.y) {
                    f.partial_fit(row, d, &[y]).unwrap();
                }
                f
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("partial_fit_minibatches_of_100", |b| {
        b.iter_batched(
            || MondrianForestClassifier::new(online.clone()).unwrap(),
            |mut f| {
                for (xs, ys) in train.x.chunks(100 * d).zip(train.y.chunks(100)) {
                    f.partial_fit(xs, d, ys).unwrap();
                }
                f
            },
            BatchSize::LargeInput,
        )
    });

    let mut fitted = MondrianForestClassifier::new(params()).unwrap();
    fitted.fit(&train.x, d, &train.y).unwrap();
    group.throughput(Throughput::Elements((test.y.len() * 100) as u64));
    group.bench_function("predict_proba_test_set", |b| {
        b.iter(|| fitted.predict_proba(&test.x, d).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench_forest);
criterion_main!(benches);
