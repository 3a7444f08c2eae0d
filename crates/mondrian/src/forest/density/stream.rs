//! Streaming a Pólya forest row by row (spec `mondrian-polya-forest.md` §7.6): window
//! deletion, insertion and scoring of each row, each tree through the rows on its own.

use rayon::prelude::*;

use super::polya::StreamingView;
use super::{
    log_factor, reduce_row, Evaluation, MondrianPolyaForest, PolyaVariant, RowScore, Trees,
};
use crate::data::{FeatureValue, Rows};
use crate::error::Result;
use crate::stats::counts::PointCounts;

/// Rows per chunk of [`MondrianPolyaForest::score_stream`].
const STREAM_CHUNK: usize = 4096;

impl MondrianPolyaForest {
    /// Streams rows through the forest one at a time and scores each (§7.6): with a
    /// window the oldest point leaves first, then the row is inserted and scored; with
    /// `prequential` the row is scored first, by the forest as the previous row left it,
    /// then the oldest point leaves and the row is inserted. Equal, row for row, to
    /// calling [`partial_fit`](Self::partial_fit) then [`evaluate`](Self::evaluate) on
    /// each row in turn (prequential: `evaluate` then `partial_fit`); each tree runs
    /// through the rows on its own, in parallel. A shard refuses, before it changes
    /// (each row's score needs all M trees): train the shards with `partial_fit` and
    /// combine their `evaluate_sum` parts.
    pub fn score_stream<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        prequential: bool,
    ) -> Result<Vec<RowScore>> {
        self.whole_only("score_stream")?;
        let rows = match self.store() {
            Some(s) => s.rows(x, n_features)?,
            None => {
                let r = Rows::new(x, n_features)?;
                r.validate(None)?;
                r
            }
        };
        let n = rows.n_rows();
        if n == 0 {
            return Ok(Vec::new());
        }
        self.check_memory(n, n_features)?;
        if self.params.variant == PolyaVariant::Batch {
            // Counts move, the partition does not: one row at a time through the
            // ordinary calls is already O(depth) per tree.
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                let row = rows.row(i);
                if prequential && self.store().is_some() {
                    out.push(self.evaluate(row, n_features)?[0]);
                    self.partial_fit(row, n_features)?;
                } else {
                    self.partial_fit(row, n_features)?;
                    out.push(self.evaluate(row, n_features)?[0]);
                }
            }
            return Ok(out);
        }
        if matches!(self.trees, Trees::Empty) {
            self.start(&rows)?;
        }
        let (gamma, max_depth) = (self.params.gamma, self.params.max_depth);
        let window = self.params.window.unwrap_or(usize::MAX);
        let Trees::Streaming(forest) = &mut self.trees else {
            unreachable!("a streaming forest")
        };
        let scaled = forest.store.scale(&rows)?;
        let m = forest.trees.len();
        let mut out = Vec::with_capacity(n);
        // Chunks no longer than the window: the points leaving during a chunk are then
        // all older than it.
        let chunk = window.clamp(1, STREAM_CHUNK);
        let mut evals = vec![Evaluation::OUTSIDE; chunk * m];
        for start in (0..n).step_by(chunk) {
            let c = chunk.min(n - start);
            let held = forest.store.len();
            let leaving_total = (held + c).saturating_sub(window);
            let leaving = forest.store.detach_oldest(leaving_total);
            // Row k of the chunk is preceded by the leaving of `leave_before[k]` points.
            let leave_at = |k: usize| {
                (held + k + 1).saturating_sub(window) - (held + k).saturating_sub(window)
            };
            let take: Vec<usize> = (0..c).collect();
            let rows_chunk = &scaled[start * n_features..(start + c) * n_features];
            let arriving = forest.store.admit(rows_chunk, &vec![(); c], None, &take);
            let data = forest.store.data();
            let factors = forest.store.scaler.as_ref().map(|s| s.factors());
            let trees = &mut forest.trees;
            let evals_chunk = &mut evals[..c * m];
            // The log-Jacobian to raw units per row of the chunk: the active set may
            // change from row to row (a dimension joins it when a row gives it extent).
            let mut jacs = vec![0.0; c];
            forest.pool.install(|| {
                // Column t of the chunk's evaluations belongs to tree t, each with the
                // log-Jacobian of its active set.
                let mut columns: Vec<Vec<(Evaluation, f64)>> = trees
                    .par_iter_mut()
                    .enumerate()
                    .map(|(t, unit)| {
                        let mut col = Vec::with_capacity(c);
                        let mut gone = 0usize;
                        for (k, &(slot, _)) in arriving.iter().enumerate() {
                            let x = data.row(slot);
                            let view_eval = |unit: &crate::forest::TreeUnit<PointCounts>| {
                                let view = StreamingView {
                                    tree: &unit.tree,
                                    counts: &unit.stats,
                                    features: data.features,
                                    gamma,
                                    max_depth,
                                };
                                // Every tree holds the same points, so has the same
                                // active set: tree 0's Jacobian is the forest's.
                                let jac = match (t, factors) {
                                    (0, Some(f)) => {
                                        log_factor(f, &view.active().unwrap_or_default())
                                    }
                                    _ => 0.0,
                                };
                                (view.evaluate(x, None), jac)
                            };
                            // Prequential: scored by the forest as the previous row left
                            // it, before the oldest point leaves (as `evaluate` then
                            // `partial_fit` would, and as the batch forest does).
                            if prequential {
                                col.push(view_eval(unit));
                            }
                            for _ in 0..leave_at(k) {
                                unit.tree.delete(leaving[gone], &data, &mut unit.stats);
                                gone += 1;
                            }
                            unit.tree
                                .extend(slot, 1, &data, &mut unit.stats, &mut unit.rng);
                            if !prequential {
                                col.push(view_eval(unit));
                            }
                        }
                        col
                    })
                    .collect();
                for (t, col) in columns.iter_mut().enumerate() {
                    for (k, (e, jac)) in col.drain(..).enumerate() {
                        evals_chunk[k * m + t] = e;
                        if t == 0 {
                            jacs[k] = jac;
                        }
                    }
                }
            });
            forest.store.release(&leaving);
            for (k, jac) in jacs.into_iter().enumerate() {
                out.push(reduce_row(&evals_chunk[k * m..(k + 1) * m], m as f64, jac));
            }
        }
        Ok(out)
    }
}
