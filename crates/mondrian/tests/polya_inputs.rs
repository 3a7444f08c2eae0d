//! Pólya forests at their edges (spec `mondrian-polya-forest.md` §11 items 11, 13, 14,
//! §8.5, §12 A9): points outside the domain, degenerate data, the (ε, φ) rule against its
//! order-statistic form, refused input (typed errors, the model unchanged), and model
//! files (round trips, damaged files refused).

mod common;

use common::polya::*;
use common::*;
use mondrian::model::Forget;
use mondrian::{
    ClassifierParams, LeafKind, MondrianError, MondrianForestClassifier, MondrianPolyaForest,
    Persistent, PolyaParams, PolyaVariant,
};
use rand::Rng;

const VARIANTS: [PolyaVariant; 2] = [PolyaVariant::Streaming, PolyaVariant::Batch];

fn bytes(f: &MondrianPolyaForest) -> Vec<u8> {
    f.to_bytes().unwrap()
}

fn all_leaves(f: &MondrianPolyaForest) -> Vec<Vec<mondrian::PolyaLeaf>> {
    (0..f.n_trees()).map(|t| f.leaves(t).unwrap()).collect()
}

/// Rows just outside the box `[lo, hi]` (by one f32 step, and far) on every side.
fn outside(lo: &[f64], hi: &[f64]) -> Vec<f64> {
    let d = lo.len();
    let mut out = Vec::new();
    for k in 0..d {
        let mid: Vec<f64> = (0..d).map(|j| 0.5 * (lo[j] + hi[j])).collect();
        for v in [
            f64::from((lo[k] as f32).next_down()),
            f64::from((hi[k] as f32).next_up()),
            -1e30,
            1e30,
        ] {
            let mut q = mid.clone();
            q[k] = v;
            out.extend(q);
        }
    }
    out
}

/// §11 item 11, §8.5: a query outside the domain (the root box of a streaming forest,
/// the first batch's box of a batch one) has mass 0, density 0, kind `OutOfDomain` in
/// every tree, anomaly score +∞, and is an (ε, φ)-anomaly for every ε; no call panics. A
/// batch forest holds rows inserted outside its domain (they lie in no cell: the leaves do
/// not change) and scores them 0; forgetting them changes nothing. A streaming forest
/// scoring before inserting (prequential) sees a new extreme point outside, then inside.
#[test]
fn points_outside_the_domain_have_mass_zero() {
    let d = 2;
    let x = uniform_rows(200, d, 1);
    let (lo, hi) = f32_box(&x, d);
    let q = outside(&lo, &hi);
    for variant in VARIANTS {
        let mut f = fitted(polya_params(variant, 10, Some(10), 2), &x, d);
        for (s, row) in f.evaluate(&q, d).unwrap().iter().zip(q.chunks(d)) {
            assert!(s.out_of_domain, "{variant:?} {row:?}");
            assert_eq!(s.mass, 0.0);
            assert_eq!(s.log_density, f64::NEG_INFINITY);
            assert_eq!(s.anomaly_score(), f64::INFINITY);
            let e = f.explain(row).unwrap();
            assert!(e.trees.iter().all(|t| t.kind == LeafKind::OutOfDomain));
            assert!(f.mass_per_tree(row, d).unwrap().iter().all(|&m| m == 0.0));
            assert_eq!(f.order_stat_score(row, d, 0.5).unwrap(), vec![0.0]);
            assert_eq!(f.is_anomaly(row, d, 0.0, 1.0).unwrap(), vec![true]);
        }
        if variant == PolyaVariant::Batch {
            let before = all_leaves(&f);
            let n = f.n_points();
            f.partial_fit(&q, d).unwrap();
            assert_eq!(f.n_points(), n + q.len() / d);
            assert_eq!(all_leaves(&f), before, "rows outside moved counts");
            assert!(f.score(&q, d).unwrap().iter().all(|&m| m == 0.0));
            let ids = f.point_ids();
            f.forget(&ids[n..]).unwrap();
            assert_eq!(all_leaves(&f), before);
        } else {
            let far = [hi[0] + 1.0, lo[1] - 1.0];
            let pre = f.score_stream(&far, d, true).unwrap()[0];
            assert!(pre.out_of_domain && pre.mass == 0.0);
            let post = f.evaluate(&far, d).unwrap()[0];
            assert!(!post.out_of_domain && post.mass > 0.0);
            // A forest that forgot every point is empty: everything is outside.
            let ids = f.point_ids();
            f.forget(&ids).unwrap();
            assert!(f
                .evaluate(&x[..2 * d], d)
                .unwrap()
                .iter()
                .all(|s| s.out_of_domain));
            assert!(f.leaves(0).unwrap().is_empty());
            f.partial_fit(&x, d).unwrap();
            assert_conserved(&f, log_volume(&lo, &hi), "refilled");
        }
    }
}

/// No mass, density or share is NaN for a forest over these rows; masses lie in [0, 1].
fn assert_finite_scores(f: &MondrianPolyaForest, q: &[f64], d: usize, what: &str) {
    for s in f.evaluate(q, d).unwrap() {
        assert!(!s.mass.is_nan() && !s.log_density.is_nan(), "{what}: {s:?}");
        assert!((0.0..=1.0).contains(&s.mass), "{what}: {s:?}");
        assert!(s.out_of_domain || s.mass > 0.0, "{what}: {s:?}");
    }
    for m in f.mass_per_tree(q, d).unwrap() {
        assert!((0.0..=1.0).contains(&m), "{what}: {m}");
    }
}

/// §11 item 13: a single point, copies of one point, many duplicates among other rows,
/// and a constant column give no NaN and no infinite mass. A degenerate root (one point,
/// or copies of it) is the whole domain with mass 1 and infinite density (no dimension
/// has extent; documented on `RowScore::log_density`). A constant column is left out of
/// volumes (§12 A9): a streaming forest makes it active once a row gives it extent.
#[test]
fn degenerate_inputs_give_no_nan() {
    for variant in VARIANTS {
        // One point, and twenty copies of it.
        for copies in [1, 20] {
            let x: Vec<f64> = [0.3, -1.2].repeat(copies);
            let f = fitted(polya_params(variant, 5, Some(10), 3), &x, 2);
            let s = f.evaluate(&[0.3, -1.2, 0.3, -1.1], 2).unwrap();
            assert_eq!(s[0].mass, 1.0, "{variant:?}");
            assert_eq!(s[0].log_density, f64::INFINITY, "{variant:?}");
            assert!(s[1].out_of_domain && s[1].mass == 0.0);
            let leaves = f.leaves(0).unwrap();
            assert_eq!(leaves.len(), 1);
            assert_eq!((leaves[0].kind, leaves[0].log_mass), (LeafKind::Root, 0.0));
        }
        // Duplicates among other rows.
        let mut x = normal_rows(60, 2, 4);
        for _ in 0..40 {
            x.extend([0.5, 0.5]);
        }
        x.extend_from_within(..20);
        let (lo, hi) = f32_box(&x, 2);
        for cap in [Some(10), Some(2)] {
            let f = fitted(polya_params(variant, 10, cap, 5), &x, 2);
            assert_conserved(&f, log_volume(&lo, &hi), &format!("{variant:?} duplicates"));
            let mut q = x.clone();
            q.extend(normal_rows(100, 2, 6));
            assert_finite_scores(&f, &q, 2, &format!("{variant:?} duplicates"));
        }
        // A constant column.
        let mut x = Vec::new();
        for row in normal_rows(80, 2, 7).chunks(2) {
            x.extend([row[0], 2.5, row[1]]);
        }
        let (lo, hi) = f32_box(&x, 3);
        assert_eq!(lo[1], hi[1]);
        let mut f = fitted(polya_params(variant, 10, Some(10), 8), &x, 3);
        assert_conserved(&f, log_volume(&lo, &hi), &format!("{variant:?} constant"));
        assert_finite_scores(&f, &x, 3, &format!("{variant:?} constant column"));
        let s = f.evaluate(&[0.0, 2.5, 0.0, 0.0, 2.6, 0.0], 3).unwrap();
        assert!(!s[0].out_of_domain && s[0].log_density.is_finite());
        assert!(
            s[1].out_of_domain,
            "off the constant's value is outside the domain"
        );
        if variant == PolyaVariant::Streaming {
            f.partial_fit(&[0.0, 3.0, 0.0], 3).unwrap();
            let mut all = x.clone();
            all.extend([0.0, 3.0, 0.0]);
            let (lo, hi) = f32_box(&all, 3);
            assert_conserved(&f, log_volume(&lo, &hi), "the column became active");
            assert_finite_scores(&f, &all, 3, "the column became active");
        }
    }
}

/// Two values one f32 step apart, a ≈ 1000 and b its successor (1-D): no f32 lies
/// strictly between them, so the streaming tree's cut falls on a, and a's side of it has
/// zero volume. Masses stay finite and sum to 1: 1/3 for a ((γ·0 + 1)/(γ + 2)) and 2/3
/// for b; a's density is +∞ (documented on `RowScore::log_density`), b's is finite,
/// nothing is NaN. A batch forest's partition of this domain, narrower than an f64 step
/// deep down, used to redraw a cut forever; it must finish with finite densities.
#[test]
fn rows_one_float_step_apart() {
    let a = 1000.0f32;
    let x = [f64::from(a), f64::from(a.next_up())];
    for variant in VARIANTS {
        let f = fitted(polya_params(variant, 20, Some(10), 9), &x, 1);
        for t in 0..20 {
            let (mass, _) = leaf_totals(&f, t);
            assert!((mass - 1.0).abs() < 1e-12, "{variant:?}: tree {t}: {mass}");
        }
        assert_finite_scores(&f, &x, 1, &format!("{variant:?} one step apart"));
        let s = f.evaluate(&x, 1).unwrap();
        eprintln!("{variant:?}: {s:?}");
        match variant {
            PolyaVariant::Streaming => {
                assert!((s[0].mass - 1.0 / 3.0).abs() < 1e-15);
                assert!((s[1].mass - 2.0 / 3.0).abs() < 1e-15);
                assert_eq!(s[0].log_density, f64::INFINITY);
                assert!(s[1].log_density.is_finite());
            }
            PolyaVariant::Batch => {
                assert!(s.iter().all(|r| r.log_density.is_finite()), "{s:?}");
            }
        }
    }
}

/// The reference reading of Def. 3.2: flagged iff at least a fraction φ of the trees have
/// mass ≤ ε, the fraction compared as a float (so φ = 0.55 of 100 trees asks for 55).
fn flagged(masses: &[f64], epsilon: f64, phi: f64) -> bool {
    let k = masses.iter().filter(|&&m| m <= epsilon).count();
    k as f64 / masses.len() as f64 >= phi
}

/// §11 item 14: `is_anomaly(x, ε, φ)` holds iff `order_stat_score(x, φ) ≤ ε`, and both
/// agree with the definition computed from `mass_per_tree`, for ε on the tree masses
/// around the ⌈φM⌉-th (ties), just above and below them, 0 and 1, and φ including values
/// whose φ·M rounds above an integer in floating point (0.07 and 0.55 of 100 trees).
#[test]
fn epsilon_phi_rule_matches_the_order_statistic() {
    let d = 2;
    let m = 100;
    let x = normal_rows(150, d, 10);
    let mut q = x[..15 * d].to_vec();
    q.extend(normal_rows(14, d, 11).iter().map(|v| 1.5 * v));
    q.extend([50.0, 50.0]);
    let phis = [0.01, 0.07, 0.1, 0.25, 0.5, 0.55, 0.57, 0.7, 0.99, 1.0];
    for variant in VARIANTS {
        let f = fitted(polya_params(variant, m, Some(10), 12), &x, d);
        let masses = f.mass_per_tree(&q, d).unwrap();
        for (i, row) in q.chunks(d).enumerate() {
            let mut mt = masses[i * m..(i + 1) * m].to_vec();
            mt.sort_by(f64::total_cmp);
            for &phi in &phis {
                let o = f.order_stat_score(row, d, phi).unwrap()[0];
                let k = (phi * m as f64).round() as usize; // the intended rank
                let mut eps = vec![0.0, 1.0];
                for &v in &mt[k.saturating_sub(2)..(k + 1).min(m)] {
                    eps.extend([v, v * 0.999, (v * 1.001).min(1.0)]);
                }
                for &e in &eps {
                    let flag = f.is_anomaly(row, d, e, phi).unwrap()[0];
                    assert_eq!(flag, o <= e, "{variant:?} row {i} φ={phi} ε={e}");
                    assert_eq!(
                        flag,
                        flagged(&mt, e, phi),
                        "{variant:?} row {i} φ={phi} ε={e}"
                    );
                }
            }
        }
    }
}

fn assert_invalid<T: std::fmt::Debug>(r: Result<T, MondrianError>, name: &str) {
    match r {
        Err(MondrianError::InvalidParameter { name: n, .. }) => assert_eq!(n, name),
        other => panic!("expected an invalid `{name}`: {other:?}"),
    }
}

/// Parameters out of range are refused by `new` with the parameter's name.
#[test]
fn bad_parameters_are_refused() {
    let base = PolyaParams::default();
    let with = |f: &dyn Fn(&mut PolyaParams)| {
        let mut p = base.clone();
        f(&mut p);
        MondrianPolyaForest::new(p)
    };
    assert_invalid(with(&|p| p.window = Some(0)), "window");
    assert_invalid(with(&|p| p.gamma = 0.0), "gamma");
    assert_invalid(with(&|p| p.gamma = f64::NAN), "gamma");
    assert_invalid(with(&|p| p.gamma = f64::INFINITY), "gamma");
    assert_invalid(with(&|p| p.lifetime = 0.0), "lifetime");
    assert_invalid(with(&|p| p.lifetime = f64::NAN), "lifetime");
    assert_invalid(with(&|p| p.max_depth = Some(0)), "max_depth");
    assert!(with(&|p| p.n_trees = 0).is_err());
    assert_invalid(
        with(&|p| {
            p.variant = PolyaVariant::Batch;
            p.max_depth = None;
        }),
        "max_depth",
    );
    assert!(with(&|p| {
        p.variant = PolyaVariant::Batch;
        p.max_depth = None;
        p.lifetime = 3.0;
    })
    .is_ok());
}

/// Refused calls (NaN or infinite features, a ragged buffer, the wrong width, empty data,
/// φ = 0 and other bad thresholds, unknown or repeated ids, a tree that does not exist)
/// return typed errors, and the model is unchanged: its saved bytes (trees, counts, points
/// and generators) are identical before and after.
#[test]
fn refused_calls_leave_the_model_unchanged() {
    let d = 2;
    let x = normal_rows(100, d, 13);
    for variant in VARIANTS {
        let mut empty = MondrianPolyaForest::new(polya_params(variant, 4, Some(10), 1)).unwrap();
        assert!(matches!(
            empty.fit(&[] as &[f64], d),
            Err(MondrianError::EmptyData(_))
        ));
        assert!(matches!(
            empty.evaluate(&x, d),
            Err(MondrianError::NotFitted)
        ));
        assert!(matches!(empty.leaves(0), Err(MondrianError::NotFitted)));
        assert!(matches!(empty.forget(&[0]), Err(MondrianError::NotFitted)));
        let mut p = polya_params(variant, 4, Some(10), 1);
        p.window = Some(80);
        let mut f = fitted(p, &x, d);
        let saved = bytes(&f);
        let mut nan = x[..6].to_vec();
        nan[3] = f64::NAN;
        let mut inf = x[..6].to_vec();
        inf[4] = f64::NEG_INFINITY;
        let check = |f: &MondrianPolyaForest, what: &str| {
            assert_eq!(bytes(f), saved, "{variant:?}: {what} changed the model");
        };
        assert!(matches!(
            f.fit(&nan, d),
            Err(MondrianError::NonFinite { .. })
        ));
        check(&f, "fit with NaN");
        assert!(matches!(
            f.partial_fit(&nan, d),
            Err(MondrianError::NonFinite { .. })
        ));
        check(&f, "partial_fit with NaN");
        assert!(matches!(
            f.partial_fit(&inf, d),
            Err(MondrianError::NonFinite { .. })
        ));
        check(&f, "partial_fit with -inf");
        assert!(matches!(
            f.score_stream(&nan, d, false),
            Err(MondrianError::NonFinite { .. })
        ));
        check(&f, "score_stream with NaN");
        assert!(matches!(
            f.partial_fit(&x[..5], d),
            Err(MondrianError::RaggedMatrix { .. })
        ));
        check(&f, "ragged partial_fit");
        assert!(matches!(
            f.partial_fit(&x[..6], 3),
            Err(MondrianError::WidthMismatch { .. })
        ));
        check(&f, "wrong width");
        assert!(matches!(
            f.fit(&[] as &[f64], d),
            Err(MondrianError::EmptyData(_))
        ));
        check(&f, "empty fit");
        f.partial_fit(&[] as &[f64], d).unwrap();
        check(&f, "empty partial_fit");
        assert!(matches!(
            f.evaluate(&nan, d),
            Err(MondrianError::NonFinite { .. })
        ));
        assert!(matches!(
            f.evaluate(&x[..6], 3),
            Err(MondrianError::WidthMismatch { .. })
        ));
        assert!(f.explain(&[0.0, 0.0, 0.0]).is_err());
        for phi in [0.0, -0.5, 1.5, f64::NAN] {
            assert_invalid(f.is_anomaly(&x[..2], d, 0.1, phi), "phi");
            assert_invalid(f.order_stat_score(&x[..2], d, phi), "phi");
        }
        for eps in [-0.1, 1.5, f64::NAN] {
            assert_invalid(f.is_anomaly(&x[..2], d, eps, 0.5), "epsilon");
        }
        assert_invalid(f.leaves(4), "tree");
        assert_invalid(f.set_n_threads(0), "n_threads");
        let ids = f.point_ids();
        assert!(matches!(
            f.forget(&[ids[0], 100_000]),
            Err(MondrianError::UnknownPoint { .. })
        ));
        check(&f, "forget of an unknown id");
        assert!(matches!(
            f.forget(&[ids[3], ids[3]]),
            Err(MondrianError::UnknownPoint { .. })
        ));
        check(&f, "forget of a repeated id");
        // The window already let ids 0..20 go.
        assert!(matches!(
            f.forget(&[0]),
            Err(MondrianError::UnknownPoint { .. })
        ));
        check(&f, "forget of a point the window dropped");
    }
}

/// A model saved and loaded scores and enumerates its leaves identically, saves to the
/// same bytes, and trains on identically (its generators are saved too); through a file
/// as well. A damaged file is refused: truncated, a flipped byte, another model's kind.
/// Edits behind a recomputed checksum must be refused or give a model that works: no call
/// panics on it.
#[test]
fn save_load_round_trip_and_damaged_files() {
    let d = 2;
    let x = normal_rows(120, d, 14);
    let q = normal_rows(50, d, 15);
    for variant in VARIANTS {
        let mut p = polya_params(variant, 6, Some(8), 16);
        p.window = Some(100);
        let f = fitted(p, &x, d);
        let b = bytes(&f);
        let mut g = MondrianPolyaForest::from_bytes(&b).unwrap();
        assert_eq!(bytes(&g), b);
        assert_eq!(all_leaves(&g), all_leaves(&f));
        let (sf, sg) = (f.evaluate(&q, d).unwrap(), g.evaluate(&q, d).unwrap());
        assert_eq!(format!("{sf:?}"), format!("{sg:?}"));
        let mut f2 = f.clone();
        f2.partial_fit(&q, d).unwrap();
        g.partial_fit(&q, d).unwrap();
        assert_eq!(
            bytes(&f2),
            bytes(&g),
            "{variant:?}: training on after a load"
        );
        let path = std::env::temp_dir().join(format!(
            "polya-inputs-{}-{variant:?}.bin",
            std::process::id()
        ));
        f.save(&path).unwrap();
        let h = MondrianPolyaForest::load(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(bytes(&h), b);
        for cut in [0, 10, b.len() / 3, b.len() - 1] {
            assert!(matches!(
                MondrianPolyaForest::from_bytes(&b[..cut]),
                Err(MondrianError::CorruptModel(_))
            ));
        }
        let mut flipped = b.clone();
        let at = flipped.len() - 7;
        flipped[at] ^= 0x10;
        assert!(matches!(
            MondrianPolyaForest::from_bytes(&flipped),
            Err(MondrianError::CorruptModel(_))
        ));
        fuzz_resealed(&b, &q, d, variant);
    }
    let mut c = MondrianForestClassifier::new(ClassifierParams {
        n_trees: 2,
        ..Default::default()
    })
    .unwrap();
    c.fit(&x, d, &vec![0usize; 120]).unwrap();
    assert!(MondrianPolyaForest::from_bytes(&c.to_bytes().unwrap()).is_err());
}

/// 300 random byte edits of the payload, each with its checksums recomputed so that only
/// the decoder's checks stand between the edit and the model: each load either fails or
/// gives a model whose calls return without panicking.
fn fuzz_resealed(b: &[u8], q: &[f64], d: usize, variant: PolyaVariant) {
    let start = 8 + 4 + 1 + b[12] as usize + 1 + 8 + 4 + 4;
    let mut r = rng(17);
    let (mut refused, mut loaded) = (0, 0);
    for _ in 0..300 {
        let mut e = b.to_vec();
        let at = r.gen_range(start..e.len());
        e[at] = r.gen();
        let crc = crc32fast::hash(&e[start..]);
        e[start - 8..start - 4].copy_from_slice(&crc.to_le_bytes());
        let header_crc = crc32fast::hash(&e[..start - 4]);
        e[start - 4..start].copy_from_slice(&header_crc.to_le_bytes());
        match MondrianPolyaForest::from_bytes(&e) {
            Err(_) => refused += 1,
            Ok(mut g) => {
                loaded += 1;
                let _ = g.evaluate(q, d);
                let _ = g.explain(&q[..d]);
                for t in 0..g.n_trees() {
                    let _ = g.leaves(t);
                }
                let _ = g.partial_fit(q, d);
                let ids = g.point_ids();
                let _ = g.forget(&ids[..ids.len().min(5)]);
                let _ = g.evaluate(q, d);
            }
        }
    }
    eprintln!("{variant:?}: resealed edits: {refused} refused, {loaded} loaded and ran");
}
