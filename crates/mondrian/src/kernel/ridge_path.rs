//! The exact ridge along the lifetime path (spec `mondrian-kernel.md` §3.3): the factor
//! kept at every event, or brought up to date at the lifetimes read only.

use super::packed::add_row_to_gram;
use super::path::{Event, LifetimePath};
use super::ridge::{log_marginal_likelihood, IncrementalRidge, NewColumn};
use super::sweep::{predict_rows, profiled_log_evidence, PathLearner, SweepSpec};
use crate::error::{MondrianError, Result};

/// Exact ridge on the path (§3.3): the factor's columns in a position order, feature ids
/// mapped to positions.
pub(super) struct RidgeOnPath {
    ridge: IncrementalRidge,
    yc: Vec<f64>,
    n_train: usize,
    /// Position of each feature id (`usize::MAX` once retired).
    pos: Vec<usize>,
    /// Feature id at each position.
    ids: Vec<u32>,
    max_features: usize,
    /// Per position, the cross terms being gathered for a new column (reused).
    scratch: Vec<(usize, f64)>,
    /// Shared training points per position, and the positions with any (reused).
    counts: Vec<u32>,
    touched: Vec<usize>,
    weights: Vec<f64>,
    /// Update at every event (else at readings only), and the events not yet applied.
    every_event: bool,
    pending: usize,
}

impl RidgeOnPath {
    pub(super) fn start(path: &LifetimePath<'_>, yc: &[f64], spec: &SweepSpec) -> Self {
        let m = path.n_trees();
        let n = spec.n_train;
        let mf = m as f64;
        let mut ridge = IncrementalRidge::new(spec.delta2);
        // At lifetime 0 every training point is in every root: (ΦᵀΦ)[i, j] = N/M.
        let b = yc.iter().sum::<f64>() / mf.sqrt();
        let crosses: Vec<Vec<(usize, f64)>> = (0..m)
            .map(|j| (0..j).map(|i| (i, n as f64 / mf)).collect())
            .collect();
        let cols: Vec<NewColumn<'_>> = crosses
            .iter()
            .map(|c| NewColumn::new(c, n as f64 / mf, b))
            .collect();
        ridge.replace(None, &cols);
        RidgeOnPath {
            ridge,
            yc: yc.to_vec(),
            n_train: n,
            pos: (0..m).collect(),
            ids: (0..m as u32).collect(),
            max_features: spec.max_features,
            scratch: Vec::new(),
            counts: Vec::new(),
            touched: Vec::new(),
            weights: Vec::new(),
            every_event: spec.every_event || spec.average.is_some(),
            pending: 0,
        }
    }

    /// Brings the factor up to the path's current features (readings of the lazy mode):
    /// either deleting the retired columns and appending the new ones, or one fresh
    /// factorisation of the Gram matrix, by a flop estimate (the updates stream the factor
    /// once per column, so they are weighted ×2 against the blocked factorisation).
    fn sync(&mut self, path: &LifetimePath<'_>) {
        if self.pending == 0 {
            return;
        }
        self.pending = 0;
        self.pos.resize(path.n_ids(), usize::MAX);
        let retired: Vec<usize> = (0..self.ids.len())
            .filter(|&p| !path.is_active(self.ids[p]))
            .collect();
        let fresh: Vec<u32> = (0..path.n_ids() as u32)
            .filter(|&id| path.is_active(id) && self.pos[id as usize] == usize::MAX)
            .collect();
        let (c_old, c_new) = (self.ids.len() as f64, path.n_active() as f64);
        let updates: f64 = retired
            .iter()
            .map(|&p| 3.0 * (c_old - p as f64).powi(2))
            .sum::<f64>()
            + fresh.len() as f64 * c_new * c_new;
        let m = path.n_trees() as f64;
        let refactor = c_new.powi(3) / 3.0 + 4.0 * self.n_train as f64 * m * m / 2.0;
        if 2.0 * updates <= refactor {
            self.update(path, &retired, &fresh);
        } else {
            self.refactor(path);
        }
    }

    /// Deletes the columns at `retired` (increasing positions), then appends `fresh`.
    fn update(&mut self, path: &LifetimePath<'_>, retired: &[usize], fresh: &[u32]) {
        for &p in retired.iter().rev() {
            self.ridge.remove(p);
            self.pos[self.ids[p] as usize] = usize::MAX;
            self.ids.remove(p);
        }
        for (q, &id) in self.ids.iter().enumerate() {
            self.pos[id as usize] = q;
        }
        let kept = self.ids.len();
        for (k, &id) in fresh.iter().enumerate() {
            self.pos[id as usize] = kept + k;
        }
        self.ids.extend_from_slice(fresh);
        // Each new column's cross terms with the columns before it; the later ones add theirs.
        let (mut crosses, mut parts) = (Vec::with_capacity(fresh.len()), Vec::new());
        for (k, &id) in fresh.iter().enumerate() {
            parts.push(self.column(path, id, path.node_of(id).0));
            let mut cross = std::mem::take(&mut self.scratch);
            cross.retain(|&(q, _)| q < kept + k);
            crosses.push(cross);
        }
        let cols: Vec<NewColumn<'_>> = crosses
            .iter()
            .zip(&parts)
            .map(|(c, &(g, b))| NewColumn::new(c, g, b))
            .collect();
        self.ridge.replace(None, &cols);
    }

    /// One fresh factorisation over the path's active features, in creation order.
    fn refactor(&mut self, path: &LifetimePath<'_>) {
        let m = path.n_trees();
        let inv_m = 1.0 / m as f64;
        self.ids = (0..path.n_ids() as u32)
            .filter(|&id| path.is_active(id))
            .collect();
        self.pos.iter_mut().for_each(|p| *p = usize::MAX);
        for (q, &id) in self.ids.iter().enumerate() {
            self.pos[id as usize] = q;
        }
        let c = self.ids.len();
        let mut gram = vec![0.0; c * (c + 1) / 2];
        let mut b = vec![0.0; c];
        let mut row = vec![0u32; m];
        let scale = inv_m.sqrt();
        for (p, ids) in path.assign()[..self.n_train * m]
            .chunks_exact(m)
            .enumerate()
        {
            for (slot, &id) in row.iter_mut().zip(ids) {
                let q = self.pos[id as usize];
                b[q] += self.yc[p] * scale;
                *slot = q as u32;
            }
            row.sort_unstable();
            add_row_to_gram(&mut gram, &row, inv_m);
        }
        self.ridge = IncrementalRidge::from_gram(gram, b, self.ridge.delta2());
    }

    /// The cross terms with the other trees' columns, the Gram diagonal and `b` of a new
    /// feature's column, from its training points: shared points are counted per position
    /// first, so the factor update gets one entry per column it touches.
    fn column(&mut self, path: &LifetimePath<'_>, id: u32, tree: usize) -> (f64, f64) {
        let m = path.n_trees();
        let mf = m as f64;
        self.scratch.clear();
        self.counts.resize(self.ids.len(), 0);
        let (mut count, mut b) = (0usize, 0.0);
        for &p in path.points_of(id) {
            let p = p as usize;
            if p >= self.n_train {
                continue;
            }
            count += 1;
            b += self.yc[p];
            for (t, &other) in path.assign()[p * m..(p + 1) * m].iter().enumerate() {
                if t != tree {
                    let q = self.pos[other as usize];
                    if self.counts[q] == 0 {
                        self.touched.push(q);
                    }
                    self.counts[q] += 1;
                }
            }
        }
        for &q in &self.touched {
            self.scratch.push((q, f64::from(self.counts[q]) / mf));
            self.counts[q] = 0;
        }
        self.touched.clear();
        (count as f64 / mf, b / mf.sqrt())
    }
}

impl PathLearner for RidgeOnPath {
    fn on_event(&mut self, e: &Event, path: &LifetimePath<'_>) -> Result<()> {
        if path.n_active() > self.max_features {
            return Err(MondrianError::InvalidParameter {
                name: "max_features",
                reason: format!(
                    "the exact ridge would hold more than {} features (its factor grows as \
                     C²); lower the largest lifetime or the trees, or raise max_features",
                    self.max_features
                ),
            });
        }
        if !self.every_event {
            self.pending += 1;
            return Ok(());
        }
        let p = self.pos[e.parent as usize];
        // Positions after p move down by one once it is removed.
        self.ids.remove(p);
        for (q, &id) in self.ids.iter().enumerate().skip(p) {
            self.pos[id as usize] = q;
        }
        self.pos[e.parent as usize] = usize::MAX;
        self.pos.resize(path.n_ids(), usize::MAX);
        // The new columns' positions: the end, left then right (their cross term is 0:
        // one tree's cells are disjoint).
        let n_mid = self.ids.len();
        self.pos[e.left as usize] = n_mid;
        self.pos[e.right as usize] = n_mid + 1;
        let (gl, bl) = self.column(path, e.left, e.tree);
        let left_cross = std::mem::take(&mut self.scratch);
        let (gr, br) = self.column(path, e.right, e.tree);
        let right_cross = std::mem::take(&mut self.scratch);
        self.ridge.replace(
            Some(p),
            &[
                NewColumn::new(&left_cross, gl, bl),
                NewColumn::new(&right_cross, gr, br),
            ],
        );
        self.scratch = left_cross;
        self.ids.extend([e.left, e.right]);
        Ok(())
    }

    fn predict(&mut self, path: &LifetimePath<'_>) -> Vec<f64> {
        self.sync(path);
        self.ridge.weights_into(&mut self.weights);
        let (w, pos) = (&self.weights, &self.pos);
        predict_rows(path, |id| w[pos[id as usize]])
    }

    fn evidence(&mut self, path: &LifetimePath<'_>) -> Option<(f64, f64)> {
        let (paper, profiled, _, _) = self.evidence_parts(path);
        Some((paper, profiled))
    }

    fn evidence_parts(&mut self, path: &LifetimePath<'_>) -> (f64, f64, f64, usize) {
        let predictions = self.predict(path); // syncs first
        let rss: f64 = self.yc[..self.n_train]
            .iter()
            .zip(&predictions)
            .map(|(y, p)| (y - p) * (y - p))
            .sum();
        let w2: f64 = self.weights.iter().map(|w| w * w).sum();
        let (log_det, c, n, d2) = (
            self.ridge.log_det(),
            self.ids.len(),
            self.n_train,
            self.ridge.delta2(),
        );
        (
            log_marginal_likelihood(rss, w2, log_det, c, n, d2),
            profiled_log_evidence(rss, w2, log_det, c, n, d2),
            rss + d2 * w2,
            n,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{KernelParams, Learner, MondrianKernel};

    /// The lazy ridge's two ways to catch up at a reading, forced one at a time, give the
    /// weights of the ridge updated at every event (so the cost estimate only picks speed).
    #[test]
    fn updates_and_refactorisation_agree_with_every_event() {
        let (n, d, m) = (60usize, 2usize, 3usize);
        let mut state = 7u64;
        let mut uniform = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let x: Vec<f64> = (0..n * d).map(|_| uniform()).collect();
        let y: Vec<f64> = (0..n).map(|i| x[i * d] * 3.0 - x[i * d + 1]).collect();
        let params = KernelParams {
            n_trees: m,
            lifetime: 8.0,
            seed: 3,
            ..Default::default()
        };
        let mut kernel = MondrianKernel::new(params).unwrap();
        kernel.fit(&x, d).unwrap();
        let spec = |every_event| SweepSpec {
            lifetimes: vec![8.0],
            n_train: n,
            delta2: 1e-3,
            centre: Some(0.0),
            learner: Learner::Ridge,
            max_features: 1 << 16,
            average: None,
            every_event,
        };
        for force_update in [true, false] {
            let (mut eager_path, mut lazy_path) = (
                LifetimePath::new(&kernel).unwrap(),
                LifetimePath::new(&kernel).unwrap(),
            );
            let mut eager = RidgeOnPath::start(&eager_path, &y, &spec(true));
            let mut lazy = RidgeOnPath::start(&lazy_path, &y, &spec(false));
            let mut readings = 0;
            for step in 0.. {
                let (Some(a), Some(b)) = (eager_path.next_event(), lazy_path.next_event()) else {
                    break;
                };
                eager.on_event(&a, &eager_path).unwrap();
                lazy.on_event(&b, &lazy_path).unwrap();
                if step % 5 != 4 {
                    continue;
                }
                // Catch up by the forced way, then compare predictions.
                lazy.pending = 0;
                lazy.pos.resize(lazy_path.n_ids(), usize::MAX);
                if force_update {
                    let retired: Vec<usize> = (0..lazy.ids.len())
                        .filter(|&p| !lazy_path.is_active(lazy.ids[p]))
                        .collect();
                    let fresh: Vec<u32> = (0..lazy_path.n_ids() as u32)
                        .filter(|&id| {
                            lazy_path.is_active(id) && lazy.pos[id as usize] == usize::MAX
                        })
                        .collect();
                    lazy.update(&lazy_path, &retired, &fresh);
                } else {
                    lazy.refactor(&lazy_path);
                }
                let (pe, pl) = (eager.predict(&eager_path), lazy.predict(&lazy_path));
                let scale = pe.iter().fold(1.0f64, |a, v| a.max(v.abs()));
                for (a, b) in pe.iter().zip(&pl) {
                    assert!((a - b).abs() <= 1e-9 * scale, "{a} vs {b}");
                }
                readings += 1;
            }
            assert!(readings >= 5, "{readings} readings");
        }
    }
}
