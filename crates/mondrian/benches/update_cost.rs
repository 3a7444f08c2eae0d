//! What one online update costs, beside what the memory system allows.
//!
//! An update of one tree by one point routes through `depth` node records (32 bytes each) to
//! its leaf, then reads boxes (`2·D` f32 each) from the leaf upwards until one contains the
//! point (boxes are nested, so nothing above can change). This prints, for a data set:
//! * ns per point·tree update, online point by point and in mini-batches of 100 (1 thread);
//! * `boxes/upd`: the boxes an update reads, counted on every 10th point of a separate
//!   point-by-point run against the trees as they stand just before that point arrives;
//! * `bytes/upd`: node records plus those boxes (label statistics not counted, so the bounds
//!   below are lower bounds);
//! * `path bw`: the bandwidth bound of touching depth × 2·D floats (a box at every level of
//!   the path) at the measured streaming bandwidth, the coarse bound the issue names;
//! * the bandwidth bound: bytes/upd / measured streaming bandwidth;
//! * the latency bound: cache lines per update × measured dependent-load latency, the cost
//!   when every line of the walk misses the caches (each step's address depends on the last);
//! * `cold lines`: the lines an update must fetch from memory even when the caches hold the
//!   forest's top levels whole: the forest's levels are ranked from the root down and the
//!   first ones whose records, boxes and label counts fit in L2 + L3 together
//!   ([`CACHE_BYTES`]) are taken as cached (the most favourable placement, since every
//!   update walks the top levels); below them a node record, a measured box and the leaf's
//!   counts are a line or more each. Computed at ten checkpoints of the stream, each for the
//!   updates after it, against the forest as it stood there (smaller than later, so the
//!   count is a lower bound);
//! * the throughput bound: cold lines / the measured rate of independent random line loads
//!   with [`CHAINS`] loads in flight at once (perfect overlap, no compute): no update
//!   schedule on this machine can be faster.
//! * `descent ns`: the descent alone, root to leaf with no box measured or asked for and
//!   nothing inserted ([`MondrianTree::routes_many`](mondrian::tree::MondrianTree::routes_many):
//!   rows in lockstep through one tree at a time, the library's fastest walk, where an
//!   online insertion interleaves trees for one point): at every multiple of a tenth of the
//!   stream the next tenth is routed through every tree as it stands there, per point·tree.
//!   Every insertion starts with such a walk (it must find the leaf whose statistics
//!   change).
//!
//! Run: `cargo bench -p mondrian --bench update_cost -- [TRAIN.csv[.gz] ...]` (default: the
//! shipped satimage training set). `BENCH_TREES=N` sets the number of trees (default 100):
//! with few trees on a small set the whole forest stays in cache, and what an update still
//! costs there is the work of the update itself, not the memory system's.

use std::hint::black_box;
use std::time::Instant;

use mondrian::tree::{PathStep, LOCKSTEP};
use mondrian::{ClassifierParams, MondrianForestClassifier, Rows, Scaling};

#[path = "forest.rs"]
#[allow(dead_code)]
mod forest_bench;

/// Streaming read bandwidth in bytes/s over a buffer far larger than the caches.
fn streaming_bandwidth() -> f64 {
    let v: Vec<u64> = (0..(256usize << 20) / 8).map(|i| i as u64).collect();
    let mut best = 0.0f64;
    for _ in 0..3 {
        let start = Instant::now();
        let s: u64 = v.iter().fold(0u64, |a, &b| a.wrapping_add(b));
        black_box(s);
        best = best.max((v.len() * 8) as f64 / start.elapsed().as_secs_f64());
    }
    best
}

/// Latency of a dependent load that misses the caches, in ns (pointer chase over 512 MiB).
fn miss_latency_ns() -> f64 {
    let n = (512usize << 20) / 64;
    let next = random_cycle(n);
    let steps = 4_000_000;
    let mut p = 0usize;
    let start = Instant::now();
    for _ in 0..steps {
        p = next[p];
    }
    black_box(p);
    start.elapsed().as_secs_f64() * 1e9 / steps as f64
}

/// `n` cache lines, each holding the index (in `usize`s) of the next in one random cycle
/// (Sattolo's shuffle, fixed LCG).
fn random_cycle(n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for i in (1..n).rev() {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let j = (state >> 33) as usize % i;
        order.swap(i, j);
    }
    let mut next = vec![0usize; n * 8];
    for k in 0..n {
        next[order[k] * 8] = order[(k + 1) % n] * 8;
    }
    next
}

/// L2 (1 MiB per core) plus L3 (32 MiB) of the machine the results were taken on.
const CACHE_BYTES: f64 = 33.0 * 1024.0 * 1024.0;

/// Independent pointer chases in flight when measuring the random-load rate: more stop
/// helping on this machine (48: 5.9 ns per load, 64: 5.5 ns, over 320 MiB–1 GiB).
const CHAINS: usize = 64;

/// Random cache-line loads per second with [`CHAINS`] independent dependent chains over
/// 512 MiB: the most lines the memory system delivers to one core when nothing else runs.
fn random_line_rate() -> f64 {
    let n = (512usize << 20) / 64;
    let next = random_cycle(n);
    let steps = 200_000;
    let mut p: Vec<usize> = (0..CHAINS).map(|k| (k * (n / CHAINS)) * 8).collect();
    let mut best = 0.0f64;
    for _ in 0..3 {
        let start = Instant::now();
        for _ in 0..steps {
            for q in p.iter_mut() {
                *q = next[*q];
            }
        }
        black_box(&p);
        best = best.max((steps * CHAINS) as f64 / start.elapsed().as_secs_f64());
    }
    best
}

fn main() {
    let paths = forest_bench::paths_from_args(&["satimage_train.csv.gz"]);
    let bandwidth = streaming_bandwidth();
    let latency = miss_latency_ns();
    let line_rate = random_line_rate();
    println!(
        "memory: streaming read {:.1} GB/s, dependent miss latency {:.0} ns, \
         random lines with {CHAINS} in flight {:.0} M/s",
        bandwidth / 1e9,
        latency,
        line_rate / 1e6
    );
    println!(
        "{:<28} {:>6} {:>4} {:>6} {:>11} {:>11} {:>8} {:>9} {:>12} {:>11} {:>11} {:>10} {:>11} {:>11}",
        "data",
        "n",
        "D",
        "depth",
        "ns/upd 1pt",
        "ns/upd b100",
        "path bw",
        "boxes/upd",
        "bytes/upd",
        "bw bound",
        "lat bound",
        "cold lines",
        "tput bound",
        "descent ns"
    );
    let trees: usize = match std::env::var("BENCH_TREES") {
        Ok(v) => v.parse().expect("BENCH_TREES: a number of trees"),
        Err(_) => 100,
    };
    for path in paths {
        let t = forest_bench::read_table(&path);
        let (n, d) = (t.y.len(), t.d);
        let ranges = forest_bench::ranges_of(&t);
        let params = ClassifierParams {
            n_trees: trees,
            n_threads: 1,
            scaling: Scaling::Ranges(ranges),
            ..Default::default()
        };
        let params_for_count = params.clone();
        let mut f = MondrianForestClassifier::new(params.clone()).unwrap();
        let start = Instant::now();
        for (row, &y) in t.x.chunks_exact(d).zip(&t.y) {
            f.partial_fit(row, d, &[y]).unwrap();
        }
        let per_point = start.elapsed().as_secs_f64() * 1e9 / (n * trees) as f64;
        let mut g = MondrianForestClassifier::new(params).unwrap();
        let start = Instant::now();
        for (xs, ys) in t.x.chunks(100 * d).zip(t.y.chunks(100)) {
            g.partial_fit(xs, d, ys).unwrap();
        }
        let per_batch = start.elapsed().as_secs_f64() * 1e9 / (n * trees) as f64;
        let depth = f.summary().depth_mean;
        let (boxes, cold, descent) = walk_counts(&t.x, d, &t.y, params_for_count);
        // A node record per level, then the boxes measured; a box is 2·D f32.
        let bytes = depth * 32.0 + boxes * 8.0 * d as f64;
        let lines = depth + boxes * (8.0 * d as f64 / 64.0).ceil();
        let name = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        println!(
            "{:<28} {:>6} {:>4} {:>6.1} {:>11.0} {:>11.0} {:>8.1} {:>9.2} {:>12.0} {:>11.1} {:>11.0} {:>10.1} {:>11.1} {:>11.1}",
            name,
            n,
            d,
            depth,
            per_point,
            per_batch,
            depth * 8.0 * d as f64 / bandwidth * 1e9,
            boxes,
            bytes,
            bytes / bandwidth * 1e9,
            lines * latency,
            cold,
            cold / line_rate * 1e9,
            descent
        );
    }
}

/// Mean number of boxes an online update reads, of cold lines it must fetch, and the ns per
/// point·tree of the descent alone (see the module doc). Boxes: from the leaf upwards, every
/// box that does not contain the point, then the first one that does (none if even the
/// root's box does not). Counted on every 10th point of a point-by-point stream, against
/// each tree as it stands before that point is inserted.
fn walk_counts(x: &[f64], d: usize, y: &[usize], params: ClassifierParams) -> (f64, f64, f64) {
    let mut forest = MondrianForestClassifier::new(params).unwrap();
    let (mut boxes, mut cold, mut updates) = (0usize, 0usize, 0usize);
    let mut steps = Vec::new();
    let mut scaled = Vec::new();
    let n = y.len();
    let mut cached_depth = usize::MAX;
    let (mut descent_s, mut routed) = (0.0f64, 0usize);
    let mut routes: Vec<Vec<PathStep>> = vec![Vec::new(); LOCKSTEP];
    let box_lines = |stored: bool| (if stored { 8 * d } else { 4 * d }).div_ceil(64);
    let tenth = (n / 10).max(1);
    for (i, (row, &label)) in x.chunks_exact(d).zip(y).enumerate() {
        if i % tenth == 0 && i > 0 {
            // Timed before `cached_levels` walks every record and would warm the caches.
            let ahead = &x[i * d..((i + tenth).min(n)) * d];
            let scaler = forest.scaler().expect("trained");
            scaled.clear();
            scaler
                .transform_into(&Rows::new(ahead, d).unwrap(), &mut scaled)
                .unwrap();
            let features = forest.training_points().features;
            let start = Instant::now();
            let mut t = 0;
            while let Some((tree, _)) = forest.tree(t) {
                for rows in scaled.chunks(LOCKSTEP * d) {
                    tree.routes_many(rows, features, &mut routes);
                }
                t += 1;
            }
            descent_s += start.elapsed().as_secs_f64();
            routed += t * ahead.len() / d;
            cached_depth = cached_levels(&forest, d);
        }
        if i % 10 == 9 {
            if let Some(scaler) = forest.scaler() {
                scaled.clear();
                let rows = Rows::new(row, d).unwrap();
                scaler.transform_into(&rows, &mut scaled).unwrap();
                let mut t = 0;
                while let Some((tree, _)) = forest.tree(t) {
                    tree.path_steps(&scaled, forest.training_points().features, &mut steps);
                    let outside = steps.iter().filter(|s| s.eta > 0.0).count();
                    let measured = outside + usize::from(steps.len() > outside);
                    boxes += measured;
                    // Steps are root first: a step's index is its node's depth.
                    let below = |k: &usize| *k >= cached_depth;
                    cold += (0..steps.len()).filter(below).count();
                    cold += (steps.len() - measured..steps.len())
                        .filter(below)
                        .map(|k| box_lines(tree.stores_box(steps[k].node)))
                        .sum::<usize>();
                    cold += usize::from(steps.len() > cached_depth);
                    updates += 1;
                    t += 1;
                }
            }
        }
        forest.partial_fit(row, d, &[label]).unwrap();
    }
    let per = |c: usize| c as f64 / updates.max(1) as f64;
    (
        per(boxes),
        per(cold),
        descent_s * 1e9 / routed.max(1) as f64,
    )
}

/// How many of the forest's levels, from the root down, fit in [`CACHE_BYTES`]: node
/// records (32 bytes), stored boxes (2·D f32) and label counts (K + 2 u32) of every tree.
fn cached_levels(forest: &MondrianForestClassifier, d: usize) -> usize {
    let counts_bytes = (forest.n_classes() + 2) * 4;
    let mut level_bytes: Vec<f64> = Vec::new();
    let mut t = 0;
    while let Some((tree, _)) = forest.tree(t) {
        let mut stack: Vec<(u32, usize)> = tree.root().map(|r| (r, 0)).into_iter().collect();
        while let Some((node, depth)) = stack.pop() {
            if level_bytes.len() <= depth {
                level_bytes.resize(depth + 1, 0.0);
            }
            let box_bytes = if tree.stores_box(node) { 8 * d } else { 0 };
            level_bytes[depth] += (32 + box_bytes + counts_bytes) as f64;
            if let Some((l, r)) = tree.children(node) {
                stack.push((l, depth + 1));
                stack.push((r, depth + 1));
            }
        }
        t += 1;
    }
    let mut total = 0.0;
    level_bytes
        .iter()
        .take_while(|&&b| {
            total += b;
            total <= CACHE_BYTES
        })
        .count()
}
