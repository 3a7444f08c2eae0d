//! Tree-parallel shards of the Mondrian Pólya forest, both variants: shards trained like
//! the whole forest on the same rows merge into the forest one process grows (same saved
//! bytes, same scores), split then merge is the identity (also through files), the shards'
//! partial scores combine into the single-process forest's `evaluate`, and shards that do
//! not fit together are refused with `ShardMismatch`. Every expected value comes from the
//! single-process forest.

use mondrian::model::Forget;
use mondrian::{
    MondrianError, MondrianPolyaForest, Persistent, PolyaParams, PolyaSum, PolyaVariant, RowScore,
};

const D: usize = 3;

/// `n` rows of `D` features in [0, 1) from a fixed LCG.
fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n * D)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        })
        .collect()
}

/// Query rows: inside the data, on its edge, and far outside (out of every domain).
fn queries() -> Vec<f64> {
    let mut x = data(25, 99);
    x.extend([5.0, 5.0, 5.0, -3.0, 0.5, 0.5, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    x
}

fn params(variant: PolyaVariant, n_trees: usize, window: Option<usize>) -> PolyaParams {
    PolyaParams {
        variant,
        n_trees,
        seed: 13,
        window,
        n_threads: 2,
        max_depth: Some(8),
        ..Default::default()
    }
}

const VARIANTS: [PolyaVariant; 2] = [PolyaVariant::Streaming, PolyaVariant::Batch];

/// Shards of `sizes` trees, in order, of a forest of their total.
fn ranges(sizes: &[usize]) -> Vec<(usize, usize)> {
    let mut first = 0;
    sizes
        .iter()
        .map(|&n| {
            first += n;
            (first - n, n)
        })
        .collect()
}

/// How a model is trained: one fit, or `partial_fit` in mini-batches of `b` rows.
#[derive(Clone, Copy, Debug)]
enum Training {
    Fit,
    Stream(usize),
}

fn train(m: &mut MondrianPolyaForest, how: Training, x: &[f64]) {
    match how {
        Training::Fit => m.fit(x, D).unwrap(),
        Training::Stream(b) => {
            for xs in x.chunks(b * D) {
                m.partial_fit(xs, D).unwrap();
            }
        }
    }
}

/// Equal to rounding: infinite values exactly, finite ones to a relative 1e-12.
fn close(a: f64, b: f64) -> bool {
    match a.is_finite() && b.is_finite() {
        true => (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
        false => a == b,
    }
}

fn assert_close(got: &[RowScore], want: &[RowScore]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(close(g.mass, w.mass), "mass {} vs {}", g.mass, w.mass);
        assert!(
            close(g.log_density, w.log_density),
            "log density {} vs {}",
            g.log_density,
            w.log_density
        );
        assert_eq!(g.out_of_domain, w.out_of_domain);
    }
}

/// The per-tree masses of shards (row-major, their own columns) put side by side.
fn side_by_side(parts: &[Vec<f64>], sizes: &[usize], n_rows: usize) -> Vec<f64> {
    let mut out = Vec::new();
    for r in 0..n_rows {
        for (p, &k) in parts.iter().zip(sizes) {
            out.extend_from_slice(&p[r * k..(r + 1) * k]);
        }
    }
    out
}

fn check_shards_merge(
    variant: PolyaVariant,
    n_trees: usize,
    sizes: &[&[usize]],
    train_all: &dyn Fn(&mut MondrianPolyaForest),
    window: Option<usize>,
) {
    let xt = queries();
    let nq = xt.len() / D;
    let p = params(variant, n_trees, window);
    let mut full = MondrianPolyaForest::new(p.clone()).unwrap();
    train_all(&mut full);
    let bytes = full.to_bytes().unwrap();
    let want = full.evaluate(&xt, D).unwrap();
    assert!(want.iter().any(|r| r.out_of_domain) && want.iter().any(|r| !r.out_of_domain));
    // One part, the whole forest's, is exactly `evaluate`.
    let whole = full.evaluate_sum(&xt, D).unwrap();
    assert_eq!(
        MondrianPolyaForest::combine_evaluations(vec![whole]).unwrap(),
        want
    );
    let per_tree = full.mass_per_tree(&xt, D).unwrap();
    for &sizes in sizes {
        let mut shards: Vec<_> = ranges(sizes)
            .into_iter()
            .map(|(first, n)| {
                let mut s = MondrianPolyaForest::new_shard(p.clone(), first, n).unwrap();
                train_all(&mut s);
                assert_eq!(s.shard_range(), first..first + n);
                assert_eq!(s.is_shard(), n < n_trees);
                s
            })
            .collect();
        let parts: Vec<PolyaSum> = shards
            .iter()
            .rev()
            .map(|s| s.evaluate_sum(&xt, D).unwrap())
            .collect();
        let combined = MondrianPolyaForest::combine_evaluations(parts).unwrap();
        assert_close(&combined, &want);
        let columns: Vec<_> = shards
            .iter()
            .map(|s| s.mass_per_tree(&xt, D).unwrap())
            .collect();
        assert_eq!(side_by_side(&columns, sizes, nq), per_tree);
        shards.reverse();
        let merged = MondrianPolyaForest::merge(shards).unwrap();
        assert!(!merged.is_shard());
        assert_eq!(merged.to_bytes().unwrap(), bytes, "{variant:?} {sizes:?}");
        assert_eq!(merged.evaluate(&xt, D).unwrap(), want);
        assert_eq!(
            merged.is_anomaly(&xt, D, 0.01, 0.5).unwrap(),
            full.is_anomaly(&xt, D, 0.01, 0.5).unwrap()
        );
    }
}

#[test]
fn shards_merge_into_the_single_process_forest() {
    let x = data(120, 1);
    let cases = [
        (Training::Fit, None),
        (Training::Stream(17), None),
        (Training::Stream(9), Some(40)),
        (Training::Fit, Some(50)),
    ];
    for variant in VARIANTS {
        for (how, window) in cases {
            check_shards_merge(
                variant,
                10,
                &[&[3, 3, 4], &[1, 9], &[10]],
                &|m| train(m, how, &x),
                window,
            );
        }
    }
}

/// A larger forest fitted, then streamed a few rows at a time through a window: the tree
/// groups and pool blocks divide the work differently in a shard and in the whole forest,
/// which must not show.
#[test]
fn a_streamed_forest_of_many_trees_merges_bit_for_bit() {
    let x = data(150, 2);
    let stream = |m: &mut MondrianPolyaForest| {
        m.fit(&x[..40 * D], D).unwrap();
        let (mut i, mut b) = (40, 1);
        while i < 150 {
            let j = (i + b).min(150);
            m.partial_fit(&x[i * D..j * D], D).unwrap();
            (i, b) = (j, b % 3 + 1);
        }
    };
    for variant in VARIANTS {
        check_shards_merge(variant, 40, &[&[7, 33], &[13, 13, 14]], &stream, Some(60));
    }
}

#[test]
fn split_then_merge_is_the_identity_also_through_files() {
    let x = data(80, 3);
    let dir = std::env::temp_dir().join(format!("mondrian-polya-shards-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for variant in VARIANTS {
        let mut f = MondrianPolyaForest::new(params(variant, 10, Some(60))).unwrap();
        f.fit(&x, D).unwrap();
        let bytes = f.to_bytes().unwrap();
        let kind = |b: &[u8], k: &str| b.windows(k.len()).any(|w| w == k.as_bytes());
        // A whole forest saves under its kind, as before; a shard under the shard kind.
        assert!(kind(&bytes, "mondrian-polya-forest") && !kind(&bytes, "-shard"));
        let shards = f.clone().split(3).unwrap();
        let got: Vec<_> = shards.iter().map(|s| s.shard_range()).collect();
        assert_eq!(got, vec![0..4, 4..7, 7..10]);
        assert!(kind(
            &shards[0].to_bytes().unwrap(),
            "mondrian-polya-forest-shard"
        ));
        let again: Vec<_> = shards
            .iter()
            .map(|s| MondrianPolyaForest::from_bytes(&s.to_bytes().unwrap()).unwrap())
            .collect();
        assert_eq!(again[1].shard_range(), 4..7);
        let merged = MondrianPolyaForest::merge(again).unwrap();
        assert_eq!(merged.to_bytes().unwrap(), bytes);
        // Through files, and shards of a shard.
        let mut loaded: Vec<_> = shards
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let path = dir.join(format!("{variant:?}{i}.mpf"));
                s.save(&path).unwrap();
                MondrianPolyaForest::load(&path).unwrap()
            })
            .collect();
        let last = loaded.pop().unwrap().split(2).unwrap();
        assert_eq!(last[1].shard_range(), 9..10);
        loaded.extend(last);
        assert_eq!(
            MondrianPolyaForest::merge(loaded)
                .unwrap()
                .to_bytes()
                .unwrap(),
            bytes
        );
        // A merge of part of the forest is a shard.
        let mut parts = f.clone().split(5).unwrap();
        let part = MondrianPolyaForest::merge(parts.drain(1..3).collect()).unwrap();
        assert_eq!(part.shard_range(), 2..6);
        // A whole forest's file loads as a whole forest.
        let path = dir.join(format!("{variant:?}-whole.mpf"));
        f.save(&path).unwrap();
        let back = MondrianPolyaForest::load(&path).unwrap();
        assert!(!back.is_shard());
        assert_eq!(back.to_bytes().unwrap(), bytes);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An unfitted forest splits too: its shards keep their ranges (also through their files)
/// until their first fit plants the trees.
#[test]
fn unfitted_shards_train_into_the_forest() {
    let x = data(60, 4);
    for variant in VARIANTS {
        for how in [Training::Fit, Training::Stream(11)] {
            let mut full = MondrianPolyaForest::new(params(variant, 9, None)).unwrap();
            let shards = full.clone().split(3).unwrap();
            train(&mut full, how, &x);
            let mut shards: Vec<_> = shards
                .iter()
                .map(|s| MondrianPolyaForest::from_bytes(&s.to_bytes().unwrap()).unwrap())
                .collect();
            assert_eq!(shards[2].shard_range(), 6..9);
            for s in &mut shards {
                train(s, how, &x);
                assert!(!s.leaves(s.shard_range().start).unwrap().is_empty());
            }
            // `leaves` takes a global index.
            let t = 7;
            assert_eq!(
                format!("{:?}", shards[2].leaves(t).unwrap()),
                format!("{:?}", full.leaves(t).unwrap())
            );
            assert!(shards[2].leaves(2).is_err());
            let merged = MondrianPolyaForest::merge(shards).unwrap();
            assert_eq!(merged.to_bytes().unwrap(), full.to_bytes().unwrap());
        }
    }
}

#[test]
fn forgetting_works_on_shards() {
    let x = data(70, 5);
    let xt = queries();
    for variant in VARIANTS {
        let mut full = MondrianPolyaForest::new(params(variant, 8, None)).unwrap();
        full.fit(&x, D).unwrap();
        let mut shards = full.clone().split(3).unwrap();
        let gone = [3u64, 10, 41];
        full.forget(&gone).unwrap();
        full.partial_fit(&x[..5 * D], D).unwrap();
        for s in &mut shards {
            s.forget(&gone).unwrap();
            s.partial_fit(&x[..5 * D], D).unwrap();
            assert_eq!(s.point_ids(), full.point_ids());
        }
        let parts = shards
            .iter()
            .map(|s| s.evaluate_sum(&xt, D).unwrap())
            .collect();
        assert_close(
            &MondrianPolyaForest::combine_evaluations(parts).unwrap(),
            &full.evaluate(&xt, D).unwrap(),
        );
        let merged = MondrianPolyaForest::merge(shards).unwrap();
        assert_eq!(merged.to_bytes().unwrap(), full.to_bytes().unwrap());
    }
}

/// Infinite log densities combine as the whole forest's: +∞ where a leaf has mass and no
/// volume (every point a copy of one), −∞ outside every domain.
#[test]
fn infinite_log_densities_combine_exactly() {
    let x: Vec<f64> = [0.25, 0.5, 0.75].repeat(20);
    let xt = [0.25, 0.5, 0.75, 0.3, 0.5, 0.75, 9.0, 9.0, 9.0];
    for variant in VARIANTS {
        let mut p = params(variant, 6, None);
        p.lifetime = 2.0;
        let mut full = MondrianPolyaForest::new(p).unwrap();
        full.fit(&x, D).unwrap();
        let want = full.evaluate(&xt, D).unwrap();
        assert!(
            want.iter().any(|r| r.log_density == f64::INFINITY),
            "{want:?}"
        );
        assert!(want.iter().any(|r| r.log_density == f64::NEG_INFINITY));
        let parts = full
            .clone()
            .split(4)
            .unwrap()
            .iter()
            .map(|s| s.evaluate_sum(&xt, D).unwrap())
            .collect();
        assert_close(
            &MondrianPolyaForest::combine_evaluations(parts).unwrap(),
            &want,
        );
    }
}

fn mismatch<T: std::fmt::Debug>(r: Result<T, MondrianError>, words: &str) {
    match r {
        Err(MondrianError::ShardMismatch(m)) => assert!(m.contains(words), "{m}"),
        other => panic!("expected a shard mismatch about `{words}`, got {other:?}"),
    }
}

#[test]
fn shards_that_do_not_fit_together_are_refused() {
    let x = data(50, 6);
    for variant in VARIANTS {
        let p = params(variant, 10, None);
        let shard = |first, n, x: &[f64]| {
            let mut s = MondrianPolyaForest::new_shard(p.clone(), first, n).unwrap();
            s.fit(x, D).unwrap();
            s
        };
        mismatch(MondrianPolyaForest::merge(vec![]), "no shards");
        mismatch(
            MondrianPolyaForest::merge(vec![shard(0, 5, &x), shard(4, 6, &x)]),
            "overlap",
        );
        mismatch(
            MondrianPolyaForest::merge(vec![shard(0, 3, &x), shard(5, 5, &x)]),
            "missing",
        );
        mismatch(
            MondrianPolyaForest::merge(vec![shard(0, 5, &x), shard(5, 5, &x[..40 * D])]),
            "different points",
        );
        let unfitted = MondrianPolyaForest::new_shard(p.clone(), 5, 5).unwrap();
        mismatch(
            MondrianPolyaForest::merge(vec![shard(0, 5, &x), unfitted]),
            "different points",
        );
        let mut other = MondrianPolyaForest::new_shard(
            PolyaParams {
                seed: 8,
                ..p.clone()
            },
            5,
            5,
        )
        .unwrap();
        other.fit(&x, D).unwrap();
        mismatch(
            MondrianPolyaForest::merge(vec![shard(0, 5, &x), other]),
            "parameters",
        );
        // The thread count may differ.
        let mut threads = MondrianPolyaForest::new_shard(
            PolyaParams {
                n_threads: 1,
                ..p.clone()
            },
            5,
            5,
        )
        .unwrap();
        threads.fit(&x, D).unwrap();
        assert!(MondrianPolyaForest::merge(vec![shard(0, 5, &x), threads]).is_ok());

        // Combining: missing trees, overlaps, other rows, nothing.
        let a = shard(0, 5, &x).evaluate_sum(&x, D).unwrap();
        let b = shard(5, 5, &x).evaluate_sum(&x, D).unwrap();
        let fewer = shard(5, 5, &x).evaluate_sum(&x[..D], D).unwrap();
        mismatch(
            MondrianPolyaForest::combine_evaluations(vec![a.clone()]),
            "missing",
        );
        mismatch(
            MondrianPolyaForest::combine_evaluations(vec![a.clone(), a.clone(), b.clone()]),
            "overlap",
        );
        mismatch(
            MondrianPolyaForest::combine_evaluations(vec![a.clone(), fewer]),
            "rows",
        );
        mismatch(MondrianPolyaForest::combine_evaluations(vec![]), "no shard");
        assert!(MondrianPolyaForest::combine_evaluations(vec![b, a]).is_ok());

        // Bad ranges and splits.
        assert!(MondrianPolyaForest::new_shard(p.clone(), 8, 3).is_err());
        assert!(MondrianPolyaForest::new_shard(p.clone(), 0, 0).is_err());
        assert!(shard(0, 5, &x).split(6).is_err());

        // What needs all M trees is refused on a shard, which is left as it was.
        let mut s = shard(0, 5, &x);
        let before = s.to_bytes().unwrap();
        mismatch(s.evaluate(&x, D), "merge the shards");
        mismatch(s.score(&x, D), "merge the shards");
        mismatch(s.order_stat_score(&x, D, 0.5), "merge the shards");
        mismatch(s.is_anomaly(&x, D, 0.1, 0.5), "merge the shards");
        mismatch(s.explain(&x[..D]), "merge the shards");
        mismatch(s.score_stream(&x[..2 * D], D, false), "merge the shards");
        mismatch(s.fit_evaluate(&x, D), "merge the shards");
        assert_eq!(s.to_bytes().unwrap(), before);
    }
}
