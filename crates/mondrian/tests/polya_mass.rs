//! Pólya forests, deterministic properties of the leaves (spec `mondrian-polya-forest.md`
//! §11 items 2, 4, 7, 8, 9, 10): every tree's masses sum to 1 and its leaf volumes to the
//! domain's, streaming and batch, with and without the depth cap, after insertions and
//! deletions; each query lies in exactly one enumerated leaf; masses lie in (0, 1] and
//! never grow along a path; inserting points and deleting them gives back the same
//! leaves bit for bit; point counts equal a recount after any updates; `score_stream`
//! equals the calls it stands for.

mod common;

use common::polya::*;
use common::*;
use mondrian::model::Forget;
use mondrian::process::Feature;
use mondrian::stats::counts::PointCounts;
use mondrian::tree::{MondrianTree, PauseRule, TrainingPoints};
use mondrian::{LeafKind, MondrianPolyaForest, PolyaLeaf, PolyaVariant, Scaling, Step};
use rand::seq::SliceRandom;
use rand::Rng;

const VARIANTS: [PolyaVariant; 2] = [PolyaVariant::Streaming, PolyaVariant::Batch];

fn all_leaves(f: &MondrianPolyaForest) -> Vec<Vec<PolyaLeaf>> {
    (0..f.n_trees()).map(|t| f.leaves(t).unwrap()).collect()
}

/// Rows of the forest's live points, in id order (to recompute the streaming domain).
fn live_rows(all: &[f64], d: usize, ids: &[u64]) -> Vec<f64> {
    ids.iter()
        .flat_map(|&i| all[i as usize * d..(i as usize + 1) * d].iter().copied())
        .collect()
}

/// §11 item 2: leaf masses sum to 1 and leaf volumes to the domain's volume in every
/// tree, after a fit, after insertions (some outside the first box: the streaming domain
/// grows, the batch domain does not) and after deletions (of the extreme points too: the
/// streaming domain shrinks). The domain is recomputed here from the rows (in `f32`): the
/// box of the live points for a streaming forest, of the first batch for a batch one.
#[test]
fn masses_sum_to_one_and_volumes_to_the_domain() {
    for d in [1usize, 2, 5] {
        for variant in VARIANTS {
            for cap in [Some(10), Some(3), None] {
                if variant == PolyaVariant::Batch && cap.is_none() {
                    continue; // a batch forest needs a cap or a finite lifetime
                }
                let what = format!("{variant:?} d={d} cap={cap:?}");
                let mut all = normal_rows(300, d, 11 + d as u64);
                // Later rows: wider, so that some fall outside the first box.
                all.extend(normal_rows(60, d, 99).iter().map(|v| 2.5 * v));
                let first = &all[..300 * d];
                let mut f = fitted(polya_params(variant, 8, cap, 5), first, d);
                let (lo, hi) = f32_box(first, d);
                let batch_domain = log_volume(&lo, &hi);
                let domain = |f: &MondrianPolyaForest| match variant {
                    PolyaVariant::Batch => batch_domain,
                    PolyaVariant::Streaming => {
                        let rows = live_rows(&all, d, &f.point_ids());
                        let (lo, hi) = f32_box(&rows, d);
                        log_volume(&lo, &hi)
                    }
                };
                assert_conserved(&f, domain(&f), &format!("{what} after fit"));
                f.partial_fit(&all[300 * d..], d).unwrap();
                assert_eq!(f.n_points(), 360);
                assert_conserved(&f, domain(&f), &format!("{what} after inserts"));
                // Delete the 20 rows of largest norm and 80 others.
                let mut by_norm: Vec<u64> = (0..360).collect();
                let norm = |i: u64| -> f64 {
                    let r = &all[i as usize * d..(i as usize + 1) * d];
                    r.iter().map(|v| v * v).sum()
                };
                by_norm.sort_by(|&a, &b| norm(b).total_cmp(&norm(a)));
                let extreme: Vec<u64> = by_norm[..20].to_vec();
                let mut gone = extreme.clone();
                gone.extend(
                    (0..360u64)
                        .filter(|i| i % 4 == 1 && !extreme.contains(i))
                        .take(80),
                );
                f.forget(&gone).unwrap();
                assert_eq!(f.n_points(), 260);
                assert_conserved(&f, domain(&f), &format!("{what} after deletes"));
            }
        }
    }
}

/// §11 items 4 and 7: every query in the domain ends in exactly one of the enumerated
/// leaves (same encoding, kind and mass; encodings are unique); its mass lies in (0, 1]
/// and is the product of the shares on its path, each in (0, 1], so it never grows along
/// the path; training points are never in a complement (they lie in every box above
/// them); a query on a cut goes left (`≤`) and one on a box's boundary is inside it.
#[test]
fn each_query_lies_in_one_leaf_with_its_mass() {
    let d = 2;
    for variant in VARIANTS {
        for cap in [Some(10), Some(4), None] {
            if variant == PolyaVariant::Batch && cap.is_none() {
                continue;
            }
            let what = format!("{variant:?} cap={cap:?}");
            let x = normal_rows(200, d, 3);
            let f = fitted(polya_params(variant, 6, cap, 17), &x, d);
            let leaves = all_leaves(&f);
            for (t, ls) in leaves.iter().enumerate() {
                let mut codes: Vec<&str> = ls.iter().map(|l| l.encoding.as_str()).collect();
                codes.sort_unstable();
                codes.dedup();
                assert_eq!(
                    codes.len(),
                    ls.len(),
                    "{what}: tree {t} repeats an encoding"
                );
                for l in ls {
                    assert!(
                        l.log_mass <= 1e-15 && l.log_mass > f64::NEG_INFINITY,
                        "{what}"
                    );
                }
            }
            let (lo, hi) = f32_box(&x, d);
            let mut r = rng(8);
            let mut queries: Vec<Vec<f64>> = x.chunks(d).map(<[f64]>::to_vec).collect();
            for _ in 0..300 {
                queries.push((0..d).map(|k| r.gen_range(lo[k]..=hi[k])).collect());
            }
            for (qi, q) in queries.iter().enumerate() {
                let is_data = qi < 200;
                let e = f.explain(q).unwrap();
                assert!(!e.score.out_of_domain);
                let masses = f.mass_per_tree(q, d).unwrap();
                for (t, tree) in e.trees.iter().enumerate() {
                    let leaf = leaves[t]
                        .iter()
                        .find(|l| l.encoding == tree.encoding)
                        .unwrap_or_else(|| panic!("{what}: no leaf {}", tree.encoding));
                    assert_eq!(leaf.kind, tree.kind, "{what}");
                    assert!(
                        (leaf.log_mass.exp() - tree.mass).abs() <= 1e-12 * tree.mass,
                        "{what}: query {qi} tree {t}"
                    );
                    assert_eq!(masses[t], tree.mass);
                    assert!(tree.mass > 0.0 && tree.mass <= 1.0, "{what}");
                    let mut running = 1.0f64;
                    for step in &tree.steps {
                        let share = match step {
                            Step::Cut { share, .. } | Step::Restrict { share, .. } => *share,
                        };
                        assert!(share > 0.0 && share <= 1.0, "{what}: share {share}");
                        running *= share;
                    }
                    assert!((running - tree.mass).abs() <= 1e-12 * tree.mass, "{what}");
                    if is_data {
                        assert_ne!(tree.kind, LeafKind::Complement, "{what}: a data point");
                    }
                }
            }
            // A query on the root cut of tree 0 goes left; one on a data point's coordinate
            // (a box's boundary) is inside that box. (A batch tree cuts at f64 locations
            // that an f32 query cannot hit.)
            if variant == PolyaVariant::Batch {
                continue;
            }
            for row in x.chunks(d).take(20) {
                let e = f.explain(row).unwrap();
                let Some(Step::Cut { dim, threshold, .. }) = e.trees[0].steps.first() else {
                    panic!("{what}: the root of tree 0 is not cut");
                };
                let mut q = row.to_vec();
                q[*dim] = *threshold;
                let on = f.explain(&q).unwrap();
                match on.trees[0].steps.first() {
                    Some(Step::Cut { side, .. }) => assert_eq!(*side, 0, "{what}: ≤ goes left"),
                    other => panic!("{what}: {other:?}"),
                }
                for step in &e.trees[0].steps {
                    if let Step::Restrict { inside, .. } = step {
                        assert!(*inside, "{what}: a data point is inside its boxes");
                    }
                }
            }
        }
    }
}

/// §11 items 9 and 10: inserting points then deleting them, in another order, gives back
/// the same leaves (masses, volumes, kinds, encodings) and the same scores, bit for bit,
/// through `partial_fit` and `forget`: streaming with and without the depth cap (the cap
/// is a view of the untruncated tree, so nothing is contracted), with an infinite and a
/// finite lifetime; batch (the partition never changes, counts return). The inserted
/// points include a duplicate of a training row, points outside the box (which grow the
/// streaming domain and lie in no batch cell) and points inside it.
#[test]
fn insert_then_delete_is_the_identity() {
    let d = 3;
    let x = normal_rows(150, d, 21);
    let mut extra = normal_rows(12, d, 22)
        .iter()
        .map(|v| 2.0 * v)
        .collect::<Vec<_>>();
    extra.extend_from_slice(&x[5 * d..6 * d]);
    extra.extend([4.0, 0.0, 0.0, 0.1, -0.2, 0.3]);
    let n_extra = (extra.len() / d) as u64;
    let mut queries = normal_rows(100, d, 23);
    queries.extend_from_slice(&x[..10 * d]);
    for variant in VARIANTS {
        for (cap, lifetime) in [
            (Some(10), f64::INFINITY),
            (Some(3), f64::INFINITY),
            (None, f64::INFINITY),
            (None, 2.0),
            (Some(6), 1.5),
        ] {
            if variant == PolyaVariant::Batch && cap.is_none() && lifetime.is_infinite() {
                continue;
            }
            let what = format!("{variant:?} cap={cap:?} λ={lifetime}");
            let mut p = polya_params(variant, 10, cap, 31);
            p.lifetime = lifetime;
            let mut f = fitted(p, &x, d);
            let before = all_leaves(&f);
            let scores = f.evaluate(&queries, d).unwrap();
            // One at a time, then all at once, each deleted in a shuffled order.
            for one_by_one in [true, false] {
                if one_by_one {
                    for row in extra.chunks(d) {
                        f.partial_fit(row, d).unwrap();
                    }
                } else {
                    f.partial_fit(&extra, d).unwrap();
                }
                assert_ne!(
                    all_leaves(&f),
                    before,
                    "{what}: the insertions changed nothing"
                );
                let held = f.point_ids();
                let mut ids: Vec<u64> = held[held.len() - n_extra as usize..].to_vec();
                ids.shuffle(&mut rng(4));
                for chunk in ids.chunks(5) {
                    f.forget(chunk).unwrap();
                }
                assert_eq!(all_leaves(&f), before, "{what}: leaves");
                let again = f.evaluate(&queries, d).unwrap();
                for (a, b) in again.iter().zip(&scores) {
                    assert_eq!(a.mass.to_bits(), b.mass.to_bits(), "{what}");
                    assert_eq!(a.log_density.to_bits(), b.log_density.to_bits(), "{what}");
                }
            }
        }
    }
}

/// A batch forest's partition depends only on its domain (§3.1), so streaming the rows
/// after a first batch that spans the same box, or fitting on all rows and a point inside
/// the box and then forgetting it, gives the batch forest's leaves bit for bit (the exact
/// form of §11 items 16 and 17 for the bMPF).
#[test]
fn batch_forest_streaming_and_deletion_are_exact() {
    let d = 2;
    let x = uniform_rows(120, d, 40);
    // Put the box's extremes first so that the first row pair spans the whole box.
    let (lo, hi) = f32_box(&x, d);
    let mut stream = vec![lo[0], lo[1], hi[0], hi[1]];
    stream.extend_from_slice(&x);
    let p = polya_params(PolyaVariant::Batch, 12, Some(8), 9);
    let batch = fitted(p.clone(), &stream, d);
    let mut online = fitted(p.clone(), &stream[..2 * d], d);
    for row in stream[2 * d..].chunks(d) {
        online.partial_fit(row, d).unwrap();
    }
    assert_eq!(all_leaves(&online), all_leaves(&batch), "streamed rows");
    let mut plus = stream.clone();
    plus.extend([0.5, 0.5]);
    let mut forgot = fitted(p, &plus, d);
    forgot.forget(&[(plus.len() / d - 1) as u64]).unwrap();
    assert_eq!(all_leaves(&forgot), all_leaves(&batch), "forgotten point");
}

/// `score_stream` is, row for row, `partial_fit` then `evaluate` (or the reverse when
/// prequential), with and without a window, for both variants (its doc comment); the ids
/// it gives are the arrival indices. Column 1 is constant over the first 100 rows, then
/// varies: with a given range for it (a scale factor of 1/10) its joining the active set
/// mid-stream changes the densities' units from that row on.
#[test]
fn score_stream_equals_the_calls_it_stands_for() {
    let d = 2;
    let mut x = normal_rows(400, d, 50);
    for row in x.chunks_mut(d).take(100) {
        row[1] = 0.5;
    }
    for variant in VARIANTS {
        for (window, scaling) in [
            (None, None),
            (Some(64), None),
            (None, Some(Scaling::Ranges(vec![(-3.0, 3.0), (0.0, 10.0)]))),
            (
                Some(30),
                Some(Scaling::Ranges(vec![(-3.0, 3.0), (0.0, 10.0)])),
            ),
        ] {
            for prequential in [false, true] {
                let what = format!(
                    "{variant:?} window={window:?} scaling={scaling:?} prequential={prequential}"
                );
                let mut p = polya_params(variant, 7, Some(6), 13);
                p.window = window;
                if scaling.is_some() {
                    p.scaling = scaling.clone();
                }
                let mut a = fitted(p.clone(), &x[..50 * d], d);
                let mut b = a.clone();
                let streamed = a.score_stream(&x[50 * d..], d, prequential).unwrap();
                for (i, row) in x[50 * d..].chunks(d).enumerate() {
                    let s = if prequential {
                        let s = b.evaluate(row, d).unwrap()[0];
                        b.partial_fit(row, d).unwrap();
                        s
                    } else {
                        b.partial_fit(row, d).unwrap();
                        b.evaluate(row, d).unwrap()[0]
                    };
                    let t = streamed[i];
                    assert_eq!(s.mass.to_bits(), t.mass.to_bits(), "{what}: row {i}");
                    assert_eq!(
                        s.log_density.to_bits(),
                        t.log_density.to_bits(),
                        "{what}: row {i}"
                    );
                    assert_eq!(s.out_of_domain, t.out_of_domain, "{what}: row {i}");
                }
                assert_eq!(all_leaves(&a), all_leaves(&b), "{what}");
                assert_eq!(a.point_ids(), b.point_ids(), "{what}");
            }
        }
    }
}

/// §11 item 8: a streaming tree's state is its structure and its point counts, everything
/// else derived when read, so "derived parameters equal a recomputation" comes down to
/// the counts: after any sequence of batch fits, insertions (of multiplicity 1 and 2, one
/// at a time and as sets) and deletions, through the engine directly, every node's count
/// equals a recount of the points below it (its leaf's stored ids with their copies, or
/// the sum over its children), and the root's equals the copies held.
#[test]
fn point_counts_equal_a_recount_after_updates() {
    let d = 3;
    let mut raw = normal_rows(300, d, 60);
    raw.extend_from_within(..30 * d); // rows 300..330 copy rows 0..30
    let features: Vec<Feature> = raw.iter().map(|&v| v as Feature).collect();
    let targets = vec![(); features.len() / d];
    let data = TrainingPoints {
        features: &features,
        n_features: d,
        targets: &targets,
    };
    for lifetime in [f64::INFINITY, 3.0] {
        let mut r = rng(61);
        let mut tree = MondrianTree::new(d, lifetime, PauseRule::NEVER);
        let mut counts = PointCounts::default();
        tree.fit((0..100).collect(), &data, &mut counts, &mut r);
        // (slot, copies) held, and the slots not yet inserted.
        let mut held: Vec<(u32, u32)> = (0..100).map(|s| (s, 1)).collect();
        let mut fresh: Vec<u32> = (100..330).collect();
        fresh.shuffle(&mut r);
        for step in 0..400 {
            match r.gen_range(0..4) {
                0 | 1 if !fresh.is_empty() => {
                    let s = fresh.pop().unwrap();
                    let w = r.gen_range(1..=2);
                    tree.extend(s, w, &data, &mut counts, &mut r);
                    held.push((s, w));
                }
                2 if fresh.len() >= 5 => {
                    let set: Vec<u32> = fresh.split_off(fresh.len() - 5);
                    tree.extend_many(set.clone(), &data, &mut counts, &mut r);
                    held.extend(set.into_iter().map(|s| (s, 1)));
                }
                _ if held.len() > 1 => {
                    let (s, w) = held.swap_remove(r.gen_range(0..held.len()));
                    assert_eq!(tree.delete(s, &data, &mut counts), w);
                }
                _ => {}
            }
            if step % 20 == 19 {
                let root = tree.root().unwrap();
                let copies: u32 = held.iter().map(|&(_, w)| w).sum();
                assert_eq!(counts.count(root), copies, "λ={lifetime} step {step}");
                for j in tree.subtree_preorder(root) {
                    let recount = match tree.children(j) {
                        Some((a, b)) => counts.count(a) + counts.count(b),
                        None => tree.leaf_points(j).len() as u32,
                    };
                    assert_eq!(
                        counts.count(j),
                        recount,
                        "λ={lifetime} step {step} node {j}"
                    );
                }
            }
        }
    }
}

/// A batch forest scores a large call through per-leaf tables and a small one by walking
/// each path: the two give the same bits, inside and outside the domain, under a depth
/// cap and under a finite lifetime alone (trees of uneven depth). And `fit_evaluate`
/// equals `fit` then `evaluate`: to rounding where it fuses the two (sums over the trees
/// added in another order), bit for bit where it does not (streaming, a window shorter
/// than the rows, a degenerate domain).
#[test]
fn batch_scores_agree_across_paths_and_fit_evaluate_equals_fit_then_evaluate() {
    let d = 3;
    let x = normal_rows(700, d, 61);
    // Rows beyond the training box in some coordinate, and training rows themselves.
    let mut queries = normal_rows(400, d, 62);
    for v in queries.iter_mut().step_by(7) {
        *v *= 3.0;
    }
    queries.extend_from_slice(&x[..100 * d]);
    let same_bits = |a: &RowScoreLike, b: &RowScoreLike, what: &str| {
        assert_eq!(a.0.to_bits(), b.0.to_bits(), "{what}: mass");
        assert_eq!(a.1.to_bits(), b.1.to_bits(), "{what}: log-density");
        assert_eq!(a.2, b.2, "{what}: domain");
    };
    for (max_depth, lifetime) in [(Some(8), f64::INFINITY), (None, 2.0), (Some(4), 1.0)] {
        let mut p = polya_params(PolyaVariant::Batch, 9, max_depth, 5);
        p.lifetime = lifetime;
        let f = fitted(p.clone(), &x, d);
        let all = f.evaluate(&queries, d).unwrap();
        let n_out = all.iter().filter(|s| s.out_of_domain).count();
        assert!(
            n_out > 20 && n_out < all.len() - 100,
            "{n_out} rows outside"
        );
        for (i, row) in queries.chunks(d).enumerate() {
            let one = f.evaluate(row, d).unwrap()[0];
            let what = format!("depth {max_depth:?} lifetime {lifetime}: row {i}");
            same_bits(&like(&all[i]), &like(&one), &what);
        }
        let mut g = MondrianPolyaForest::new(p).unwrap();
        let fused = g.fit_evaluate(&x, d).unwrap();
        assert_eq!(all_leaves(&g), all_leaves(&f), "fit_evaluate trains as fit");
        let plain = f.evaluate(&x, d).unwrap();
        for (i, (a, b)) in fused.iter().zip(&plain).enumerate() {
            let what = format!("depth {max_depth:?} lifetime {lifetime}: row {i}");
            assert!(
                (a.mass - b.mass).abs() <= 1e-13 * b.mass,
                "{what}: {a:?} {b:?}"
            );
            assert!(
                (a.log_density - b.log_density).abs() <= 1e-12,
                "{what}: {a:?} {b:?}"
            );
            assert!(!a.out_of_domain, "{what}");
        }
    }
    // The unfused roads: bit for bit.
    let constant = vec![1.5; 60 * d];
    for (variant, window, rows) in [
        (PolyaVariant::Streaming, None, &x[..200 * d]),
        (PolyaVariant::Batch, Some(150), &x[..]),
        (PolyaVariant::Batch, None, &constant[..]),
    ] {
        let mut p = polya_params(variant, 4, Some(6), 8);
        p.window = window;
        let f = fitted(p.clone(), rows, d);
        let plain = f.evaluate(rows, d).unwrap();
        let fused = MondrianPolyaForest::new(p)
            .unwrap()
            .fit_evaluate(rows, d)
            .unwrap();
        for (i, (a, b)) in fused.iter().zip(&plain).enumerate() {
            same_bits(
                &like(a),
                &like(b),
                &format!("{variant:?} {window:?}: row {i}"),
            );
        }
    }
}

type RowScoreLike = (f64, f64, bool);
fn like(s: &mondrian::RowScore) -> RowScoreLike {
    (s.mass, s.log_density, s.out_of_domain)
}
