//! Where `predict_proba` spends its time, and how much box data a prediction must read.
//!
//! For a train/test pair (batch fit, 100 trees, one thread) this prints:
//! * `predict s`: `predict_proba` on the test set (best of `REPS`);
//! * `paths s`: the part of it that walks the trees: descent in lockstep plus box distances
//!   and branch-off weights ([`MondrianTree::path_steps_many`], the same blocks); the rest of
//!   `predict s` is the label combination (spec `mf-classification.md` §4.4);
//! * `descent s`: the descent alone ([`MondrianTree::routes_many`], the same blocks): root
//!   to leaf, one comparison per node, no box measured or asked for. No prediction by this
//!   walk costs less: each must find its row's leaf in every tree;
//! * per test row and tree: path length, boxes measured (from the leaf up to the first box
//!   that contains the row: every box below it takes branch-off mass, so none can be skipped)
//!   and the box bytes read (2·D × 4 for a stored box, D × 4 for a one-point leaf, whose box
//!   is its point's row);
//! * `dims differing`: over the measured boxes, the features in which a box differs from its
//!   parent's, the most a box stored as a difference from its parent could save.
//!
//! Run: `cargo bench -p mondrian --bench prediction_anatomy -- TRAIN TEST [TRAIN TEST ...]`
//! (CSV with a header and the label last, `.gz` too; default: the shipped satimage pair).

use std::time::Instant;

use mondrian::tree::{MondrianTree, PathStep, LOCKSTEP};
use mondrian::{ClassifierParams, MondrianForestClassifier, Rows};

#[path = "forest.rs"]
#[allow(dead_code)]
mod forest_bench;

const TREES: usize = 100;
const REPS: usize = 5;

/// Features in which `node`'s box differs from its parent's (all of them at the root).
fn differing(tree: &MondrianTree, node: u32, features: &[f32]) -> usize {
    match tree.parent(node) {
        None => tree.n_features(),
        Some(p) => {
            let (l, u) = tree.data_box(node, features);
            let (pl, pu) = tree.data_box(p, features);
            (0..l.len())
                .filter(|&d| l[d] != pl[d] || u[d] != pu[d])
                .count()
        }
    }
}

fn best_of(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let paths = forest_bench::paths_from_args(&["satimage_train.csv.gz", "satimage_test.csv.gz"]);
    println!(
        "{:<24} {:>4} {:>10} {:>8} {:>9} {:>8} {:>6} {:>10} {:>12} {:>14}",
        "data",
        "D",
        "predict s",
        "paths s",
        "descent s",
        "rest s",
        "path",
        "boxes/row",
        "box bytes",
        "dims differing"
    );
    for pair in paths.chunks_exact(2) {
        let train = forest_bench::read_table(&pair[0]);
        let test = forest_bench::read_table(&pair[1]);
        let d = train.d;
        let params = ClassifierParams {
            n_trees: TREES,
            n_threads: 1,
            ..Default::default()
        };
        let mut forest = MondrianForestClassifier::new(params).expect("parameters");
        forest.fit(&train.x, d, &train.y).expect("fit");
        let predict = best_of(REPS, || {
            std::hint::black_box(forest.predict_proba(&test.x, d).expect("predict"));
        });
        let mut scaled = Vec::new();
        forest
            .scaler()
            .expect("fitted")
            .transform_into(&Rows::new(&test.x, d).expect("rows"), &mut scaled)
            .expect("scale");
        let n_rows = test.y.len();
        let features = forest.training_points().features;
        // As `predict_proba` walks: tree by tree, LOCKSTEP rows at a time into one buffer.
        let mut group: Vec<Vec<PathStep>> = vec![Vec::new(); LOCKSTEP];
        let walk = best_of(REPS, || {
            for t in 0..TREES {
                let (tree, _) = forest.tree(t).expect("tree");
                for rows in scaled.chunks(LOCKSTEP * d) {
                    tree.path_steps_many(rows, features, &mut group);
                }
            }
        });
        let descent = best_of(REPS, || {
            for t in 0..TREES {
                let (tree, _) = forest.tree(t).expect("tree");
                for rows in scaled.chunks(LOCKSTEP * d) {
                    tree.routes_many(rows, features, &mut group);
                }
            }
        });
        let mut steps: Vec<Vec<PathStep>> = vec![Vec::new(); n_rows];
        // Path anatomy, from the same walks.
        let (mut length, mut boxes, mut diff, mut bytes) = (0usize, 0usize, 0usize, 0usize);
        for t in 0..TREES {
            let (tree, _) = forest.tree(t).expect("tree");
            tree.path_steps_many(&scaled, features, &mut steps);
            for (row, s) in scaled.chunks_exact(d).zip(&steps) {
                // path_steps stops where the mass runs out; route to the leaf for the length.
                let mut route = vec![tree.root().expect("root")];
                while let Some(&j) = route.last().filter(|&&j| !tree.is_leaf(j)) {
                    route.push(tree.route(j, row));
                }
                length += route.len();
                let outside = s.iter().filter(|st| st.eta > 0.0).count();
                let measured = (outside + 1).min(route.len());
                boxes += measured;
                bytes += route[route.len() - measured..]
                    .iter()
                    .map(|&j| if tree.stores_box(j) { 8 * d } else { 4 * d })
                    .sum::<usize>();
                diff += route[route.len() - measured..]
                    .iter()
                    .map(|&j| differing(tree, j, features))
                    .sum::<usize>();
            }
        }
        let per = (n_rows * TREES) as f64;
        let name = pair[0]
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        println!(
            "{:<24} {:>4} {:>10.3} {:>8.3} {:>9.3} {:>8.3} {:>6.1} {:>10.2} {:>12.0} {:>14.1}",
            name,
            d,
            predict,
            walk,
            descent,
            predict - walk,
            length as f64 / per,
            boxes as f64 / per,
            bytes as f64 / per,
            diff as f64 / boxes as f64,
        );
    }
}
