//! The thread pool of a forest: a lazily built rayon pool with a fixed number of threads,
//! the stream helpers, the size of the groups of trees and of the blocks of rows that
//! parallel work is cut into.

use rayon::prelude::*;

use super::grow::TREE_GROUP;
use super::helpers;

/// A lazily built rayon pool with a fixed number of threads (0 = all cores).
#[derive(Default)]
pub(crate) struct Pool {
    threads: usize,
    /// The number of workers, once known (see `workers`).
    workers: std::sync::OnceLock<usize>,
    pool: std::sync::OnceLock<Option<rayon::ThreadPool>>,
    /// Threads beside the caller for a stream's points, started on first use.
    helpers: std::sync::OnceLock<Option<helpers::Helpers>>,
}

impl Pool {
    pub(crate) fn new(threads: usize) -> Self {
        Pool {
            threads,
            workers: std::sync::OnceLock::new(),
            pool: std::sync::OnceLock::new(),
            helpers: std::sync::OnceLock::new(),
        }
    }

    /// One thread: work runs on the calling thread, with no hand-off to a pool (a
    /// point-by-point stream would otherwise pay a wake-up per point).
    pub(crate) fn is_serial(&self) -> bool {
        self.threads == 1
    }

    pub(crate) fn install<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        let pool = self.pool.get_or_init(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(self.threads)
                .build()
                .ok()
        });
        match pool {
            Some(pool) => pool.install(work),
            None => work(),
        }
    }
}

/// Most bytes of per-row prediction state (outputs and scratch) one block of rows keeps;
/// see [`Pool::prediction_block_rows`].
const PREDICTION_BLOCK_BYTES: usize = 4 << 20;
/// Fewest rows a prediction block has (unless the input has fewer): smaller blocks would
/// pay a hand-off to the pool for little work.
const MIN_PREDICTION_BLOCK: usize = 256;

impl Pool {
    /// Trees per group of [`grow_trees`]: at most [`TREE_GROUP`], in a number of groups
    /// that is a multiple of the workers (100 trees on 2 threads: 4 groups of 25, 50 trees
    /// each, where groups of 32 would give 64 against 36).
    pub(super) fn tree_group(&self, n_trees: usize) -> usize {
        let workers = if self.is_serial() { 1 } else { self.workers() };
        let groups = workers * n_trees.div_ceil(workers * TREE_GROUP);
        n_trees.div_ceil(groups.max(1)).max(1)
    }

    /// One helper thread fewer than the workers, beside the caller (none for one worker).
    pub(super) fn helpers(&self) -> Option<&helpers::Helpers> {
        self.helpers
            .get_or_init(|| match self.workers() {
                0 | 1 => None,
                n => helpers::Helpers::start(n - 1),
            })
            .as_ref()
    }

    /// Threads that will run parallel work (all cores for 0).
    pub(crate) fn workers(&self) -> usize {
        // Asked once: the standard library reads the cgroup files on every call (tens of
        // microseconds, as much as a streamed point's whole work on a small forest).
        *self.workers.get_or_init(|| match self.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        })
    }

    /// Rows per block for a prediction that walks every tree over a block of rows
    /// (tree-major), with `row_bytes` of outputs and scratch per row. One block per worker
    /// is best: each tree's nodes, boxes and statistics then come from memory once per
    /// worker instead of once per block (letter, one thread: 5 blocks of 1024 rows took
    /// 1.4–1.8× as long as one of 5000). Blocks stop growing once their per-row state
    /// reaches [`PREDICTION_BLOCK_BYTES`], so that it stays in cache while the trees pass.
    pub(crate) fn prediction_block_rows(&self, n_rows: usize, row_bytes: usize) -> usize {
        let per_worker = n_rows.div_ceil(self.workers());
        let cap = (PREDICTION_BLOCK_BYTES / row_bytes.max(1)).max(MIN_PREDICTION_BLOCK);
        per_worker.clamp(MIN_PREDICTION_BLOCK, cap)
    }

    /// Runs `work` on matching blocks of `out` (`out_block` items each) and `input`
    /// (`in_block` each), blocks in parallel; a single block runs on the calling thread,
    /// which spares a one-row prediction the hand-off to the pool.
    pub(crate) fn for_each_block<A: Send, B: Sync>(
        &self,
        out: &mut [A],
        out_block: usize,
        input: &[B],
        in_block: usize,
        work: impl Fn(&mut [A], &[B]) + Sync + Send,
    ) {
        if out.len() <= out_block {
            work(out, input);
        } else if self.is_serial() {
            out.chunks_mut(out_block)
                .zip(input.chunks(in_block))
                .for_each(|(o, i)| work(o, i));
        } else {
            self.install(|| {
                out.par_chunks_mut(out_block)
                    .zip(input.par_chunks(in_block))
                    .for_each(|(o, i)| work(o, i))
            });
        }
    }
}

impl Clone for Pool {
    fn clone(&self) -> Self {
        Pool::new(self.threads)
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pool({} threads)", self.threads)
    }
}
