//! Exact primal ridge regression over the active Mondrian features, kept as a dense lower
//! Cholesky factor that is updated in place as columns come and go (spec `mondrian-kernel.md`
//! §3.3, §4.3, Appendix B).
//!
//! The factor is stored as packed rows (`packed.rs`): appending a column is then a push at the
//! end, deleting one is a rank-1 update of the trailing rows (Givens rotations, `rotate_rows`)
//! followed by an in-place compaction.

use std::mem;
use std::ops::Range;

use super::dense::{cholesky_in_place, Layout};
use super::packed::{dot, rotate_rows, row_start, scatter};

/// One new column for [`IncrementalRidge::replace`] (spec §3.3 step 2, Appendix B.2).
#[derive(Debug, Clone, Copy)]
pub struct NewColumn<'a> {
    /// `(position, value)` pairs of `(ΦᵀΦ)[new, position]`, positions counted after any
    /// removal in the same call; positions of columns appended earlier in the same call are
    /// allowed. Missing positions are 0 and repeated positions are summed, so a caller may
    /// pass one `(position, 1/M)` pair per shared training point.
    pub cross: &'a [(usize, f64)],
    /// `(ΦᵀΦ)[new, new]`; δ² is added inside.
    pub gram: f64,
    /// `(Φᵀy)[new]`.
    pub b: f64,
}

impl<'a> NewColumn<'a> {
    /// Bundles the three parts of a new column.
    pub fn new(cross: &'a [(usize, f64)], gram: f64, b: f64) -> Self {
        Self { cross, gram, b }
    }
}

/// Ridge regression `w = A⁻¹ b`, `A = ΦᵀΦ + δ² I`, over an ordered list of columns (positions
/// `0..len`), with `A = L Lᵀ` kept exactly under column appends, column deletions and rank-1
/// row additions (spec `mondrian-kernel.md` §3.3, §4.3, Appendix B). The caller maps feature
/// ids to positions.
#[derive(Debug, Clone)]
pub struct IncrementalRidge {
    delta2: f64,
    n: usize,
    /// Packed lower factor, `row_start(n)` entries.
    l: Vec<f64>,
    b: Vec<f64>,
    clamped: usize,
    tmp: Scratch,
}

/// Buffers reused across calls (amortised growth, no per-event allocation).
#[derive(Debug, Clone, Default)]
struct Scratch {
    rot: Vec<(f64, f64)>,
    rhs: Vec<f64>,
    first: Vec<usize>,
    diag: Vec<(f64, f64)>,
}

impl IncrementalRidge {
    /// An empty model (no columns) with regulariser δ² (spec §3.3); the caller checks δ² > 0.
    pub fn new(delta2: f64) -> Self {
        let (l, b, tmp) = (Vec::new(), Vec::new(), Scratch::default());
        Self {
            delta2,
            n: 0,
            l,
            b,
            clamped: 0,
            tmp,
        }
    }

    /// The model of `A = G + δ² I` from the Gram matrix `G = ΦᵀΦ` and `b = Φᵀy`, factored
    /// at once by the blocked dense Cholesky (`C³/3` flops that run from cache, where
    /// appending the columns one by one streams the factor once per column). `gram` holds
    /// the lower triangle in packed rows, `C (C + 1) / 2` entries; it becomes the factor.
    /// Pivots are clamped as [`replace`](Self::replace) clamps them.
    pub fn from_gram(mut gram: Vec<f64>, b: Vec<f64>, delta2: f64) -> Self {
        let n = b.len();
        assert_eq!(
            gram.len(),
            row_start(n),
            "from_gram: packed lower triangle of C×C"
        );
        for i in 0..n {
            gram[row_start(i) + i] += delta2;
        }
        let floor = delta2 * 1e-12;
        let mut clamped = 0;
        let done = cholesky_in_place(&mut gram, n, Layout::Packed, |d| {
            Some(if d.is_nan() || d <= floor {
                clamped += 1;
                floor
            } else {
                d
            })
        });
        assert!(done, "clamped pivots are positive");
        Self {
            delta2,
            n,
            l: gram,
            b,
            clamped,
            tmp: Scratch::default(),
        }
    }

    /// Number of columns C.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True when there are no columns.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The regulariser δ².
    pub fn delta2(&self) -> f64 {
        self.delta2
    }

    /// How many appended diagonals were clamped to δ²·1e-12 because rounding made the Schur
    /// complement non-positive (spec Appendix B.2; it is ≥ δ² in exact arithmetic).
    pub fn clamped(&self) -> usize {
        self.clamped
    }

    /// `b = Φᵀy` in position order.
    pub fn b(&self) -> &[f64] {
        &self.b
    }

    /// Bytes the factor of `n` columns occupies (packed lower triangle), for memory guards
    /// before a sweep grows the model (spec §3.3: the dense path needs a size guard).
    pub fn factor_bytes(n: usize) -> usize {
        row_start(n) * mem::size_of::<f64>()
    }

    /// Heap bytes held now, scratch included.
    pub fn heap_bytes(&self) -> usize {
        let t = &self.tmp;
        8 * (self.l.capacity() + self.b.capacity() + t.rhs.capacity() + t.first.capacity())
            + 16 * (t.rot.capacity() + t.diag.capacity())
    }

    /// Appends a column with dense cross terms `cross[j] = (ΦᵀΦ)[new, j]`, `j < len`
    /// (Appendix B.2: forward substitution `L s = cross`, `l = sqrt(gram + δ² − sᵀs)`).
    pub fn append(&mut self, cross: &[f64], gram: f64, b_new: f64) {
        assert_eq!(cross.len(), self.n, "append: one cross term per column");
        self.start(self.n, 1);
        self.tmp.rhs[..self.n].copy_from_slice(cross);
        self.tmp.first[0] = cross.iter().position(|&x| x != 0.0).unwrap_or(self.n);
        self.tmp.diag.push((gram, b_new));
        self.commit(None);
    }

    /// [`append`](Self::append) with sparse cross terms `(position, value)`; the forward
    /// substitution starts at the first non-zero position.
    pub fn append_sparse(&mut self, cross: &[(usize, f64)], gram: f64, b_new: f64) {
        self.replace(None, &[NewColumn::new(cross, gram, b_new)]);
    }

    /// Deletes the column at position `p` and its entry of `b` (Appendix B.1: drop row `p`,
    /// rank-1 update of the trailing block with `c = L[p+1.., p]`). O((C − p)²).
    pub fn remove(&mut self, p: usize) {
        self.replace(Some(p), &[]);
    }

    /// Deletes position `p` (if any), then appends `cols` in order, in a single pass over the
    /// factor: one sweep event (§3.3 steps 1–3) reads the O(C²) factor once instead of three
    /// times. Equivalent to `remove(p)` followed by one `append_sparse` per column.
    pub fn replace(&mut self, remove: Option<usize>, cols: &[NewColumn<'_>]) {
        if let Some(p) = remove {
            assert!(p < self.n, "remove: position {p} out of range {}", self.n);
        }
        let n_mid = self.n - usize::from(remove.is_some());
        let width = n_mid + cols.len();
        self.start(n_mid, cols.len());
        for (q, col) in cols.iter().enumerate() {
            let rhs = &mut self.tmp.rhs[q * width..q * width + n_mid + q];
            self.tmp.first[q] = scatter(rhs, col.cross);
            self.tmp.diag.push((col.gram, col.b));
        }
        self.commit(remove);
    }

    /// `A ← A + v vᵀ` and `b ← b + y v` for sparse `v` given as `(position, value)` pairs:
    /// inserting one training point (§4.3 step 2, Appendix B.3). O((C − first)²).
    pub fn add_row(&mut self, v: &[(usize, f64)], y: f64) {
        let n = self.n;
        let mut work = mem::take(&mut self.tmp.rhs);
        work.clear();
        work.resize(n, 0.0);
        let f = scatter(&mut work, v);
        v.iter().for_each(|&(pos, value)| self.b[pos] += y * value);
        self.tmp.rot.clear();
        let mut i0 = f;
        while i0 < n {
            let g = (n - i0).min(4);
            let mut vs = [0.0; 4];
            vs[..g].copy_from_slice(&work[i0..i0 + g]);
            rotate_rows(&mut self.l, i0, g, f, &mut vs, &mut self.tmp.rot);
            i0 += g;
        }
        self.tmp.rhs = work;
    }

    /// Weights `w = L⁻ᵀ L⁻¹ b` (§3.3 step 4).
    pub fn weights(&self) -> Vec<f64> {
        let mut w = Vec::new();
        self.weights_into(&mut w);
        w
    }

    /// [`weights`](Self::weights) into a reused buffer.
    pub fn weights_into(&self, w: &mut Vec<f64>) {
        w.clear();
        w.extend_from_slice(&self.b);
        self.forward(w, 0);
        // Lᵀ w = z, column-oriented so that each step is an axpy over the contiguous row i.
        for i in (0..self.n).rev() {
            let row = &self.l[row_start(i)..row_start(i + 1)];
            let (head, rest) = w.split_at_mut(i);
            let wi = rest[0] / row[i];
            rest[0] = wi;
            for (x, &lik) in head.iter_mut().zip(&row[..i]) {
                *x -= wi * lik;
            }
        }
    }

    /// `log det A = 2 Σ ln L_ii` (§3.3 step 5).
    pub fn log_det(&self) -> f64 {
        2.0 * (0..self.n)
            .map(|i| self.l[row_start(i) + i].ln())
            .sum::<f64>()
    }

    /// `vᵀ A⁻¹ v` for sparse `v` (forward substitution `L s = v`, returns `sᵀs`): the factor in
    /// the predictive variance `δ² (1 + φᵀ A⁻¹ φ)` of §3.5 and in the determinant lemma §4.3.
    pub fn inverse_quadratic(&self, v: &[(usize, f64)]) -> f64 {
        self.inverse_quadratic_with(v, &mut Vec::new())
    }

    /// [`inverse_quadratic`](Self::inverse_quadratic) with a reused work buffer.
    pub fn inverse_quadratic_with(&self, v: &[(usize, f64)], buf: &mut Vec<f64>) -> f64 {
        buf.clear();
        buf.resize(self.n, 0.0);
        let f = scatter(buf, v);
        self.forward(buf, f);
        dot(&buf[f..], &buf[f..])
    }

    /// `‖y − Φw‖² = yᵀy − wᵀb − δ²‖w‖²` for the weights `w` of this model, in O(C) from
    /// `y_norm2 = yᵀy` (uses `A w = b`). It cancels when the fit is very close; the O(N M)
    /// direct residual of §3.3 is the accurate alternative.
    pub fn rss_from_weights(&self, y_norm2: f64, w: &[f64]) -> f64 {
        (y_norm2 - dot(w, &self.b) - self.delta2 * dot(w, w)).max(0.0)
    }

    /// Solves `L s = x` in place, assuming `x[..f] == 0` (so `s[..f] == 0`).
    fn forward(&self, x: &mut [f64], f: usize) {
        for i in f..self.n {
            let row = &self.l[row_start(i)..row_start(i + 1)];
            x[i] = (x[i] - dot(&row[f..i], &x[f..i])) / row[i];
        }
    }

    /// Resets the scratch for `k` new columns over `n_mid` existing ones.
    fn start(&mut self, n_mid: usize, k: usize) {
        self.tmp.rhs.clear();
        self.tmp.rhs.resize(k * (n_mid + k), 0.0);
        self.tmp.first.clear();
        self.tmp.first.resize(k, n_mid + k);
        self.tmp.diag.clear();
    }

    /// Performs the deletion (if any) and the appends staged by [`start`](Self::start).
    fn commit(&mut self, remove: Option<usize>) {
        let k = self.tmp.diag.len();
        let n_old = self.n;
        let n_mid = n_old - usize::from(remove.is_some());
        let width = n_mid + k;
        let mut rhs = mem::take(&mut self.tmp.rhs);
        let f_min = self.tmp.first.iter().copied().min().unwrap_or(n_mid);
        match remove {
            None => self.forward_rows(&mut rhs, width, f_min..n_mid),
            Some(p) => {
                self.forward_rows(&mut rhs, width, f_min.min(p)..p);
                self.tmp.rot.clear();
                let mut i0 = p + 1;
                while i0 < n_old {
                    let g = (n_old - i0).min(4);
                    let mut vs = [0.0; 4];
                    for (j, v) in vs[..g].iter_mut().enumerate() {
                        *v = self.l[row_start(i0 + j) + p];
                    }
                    rotate_rows(&mut self.l, i0, g, p + 1, &mut vs, &mut self.tmp.rot);
                    for i in i0..i0 + g {
                        // Old row i becomes new row i − 1, which lands exactly in the slot of
                        // old row i − 1, already consumed.
                        let (src, dst) = (row_start(i), row_start(i - 1));
                        self.l.copy_within(src..src + p, dst);
                        self.l.copy_within(src + p + 1..src + i + 1, dst + p);
                    }
                    self.forward_rows(&mut rhs, width, f_min.max(i0 - 1)..i0 - 1 + g);
                    i0 += g;
                }
                self.l.truncate(row_start(n_mid));
                self.b.remove(p);
            }
        }
        self.n = n_mid;
        for q in 0..k {
            let s = &mut rhs[q * width..q * width + n_mid + q];
            let f = self.tmp.first[q].min(n_mid + q);
            // Entries against the columns appended earlier in this call.
            for i in n_mid..n_mid + q {
                let row = &self.l[row_start(i)..row_start(i + 1)];
                let start = f.min(i);
                s[i] = (s[i] - dot(&row[start..i], &s[start..i])) / row[i];
            }
            let (gram, b_new) = self.tmp.diag[q];
            let mut d = gram + self.delta2 - dot(&s[f..], &s[f..]);
            let floor = self.delta2 * 1e-12;
            if d.is_nan() || d <= floor {
                d = floor;
                self.clamped += 1;
            }
            self.l.extend_from_slice(s);
            self.l.push(d.sqrt());
            self.b.push(b_new);
            self.n += 1;
        }
        self.tmp.rhs = rhs;
    }

    /// Forward substitution of every staged column over factor rows `rows`.
    fn forward_rows(&self, rhs: &mut [f64], width: usize, rows: Range<usize>) {
        for i in rows {
            let row = &self.l[row_start(i)..row_start(i + 1)];
            for (q, s) in rhs.chunks_exact_mut(width).enumerate() {
                let f = self.tmp.first[q];
                if i >= f {
                    s[i] = (s[i] - dot(&row[f..i], &s[f..i])) / row[i];
                }
            }
        }
    }
}

/// The full log marginal likelihood of §3.3 (spec A3), `ln N(y | 0, ΦΦᵀ + δ² I_N)`:
/// `−rss/(2δ²) − ‖ŵ‖²/2 − ½ ln det A + (C/2) ln δ² − (N/2) ln δ² − (N/2) ln 2π`,
/// with `rss = ‖y − Φŵ‖²`. The `(C/2) ln δ²` term is kept because C changes with λ.
pub fn log_marginal_likelihood(
    rss: f64,
    w_norm2: f64,
    log_det: f64,
    n_cols: usize,
    n_rows: usize,
    delta2: f64,
) -> f64 {
    let ln_d2 = delta2.ln();
    -rss / (2.0 * delta2) - 0.5 * w_norm2 - 0.5 * log_det + 0.5 * n_cols as f64 * ln_d2
        - 0.5 * n_rows as f64 * (ln_d2 + (2.0 * std::f64::consts::PI).ln())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64, a tiny deterministic generator for the tests.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let z = (self.0 ^ (self.0 >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn uniform(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// Textbook Cholesky–Banachiewicz solve of `A x = b` on a full matrix, the independent
    /// oracle: returns (x, log det A).
    fn textbook_solve(a: &[f64], n: usize, b: &[f64]) -> (Vec<f64>, f64) {
        let mut l = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..=i {
                let s = a[i * n + j] - (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum::<f64>();
                l[i * n + j] = if i == j { s.sqrt() } else { s / l[j * n + j] };
            }
        }
        let mut z = b.to_vec();
        for i in 0..n {
            z[i] = (z[i] - (0..i).map(|k| l[i * n + k] * z[k]).sum::<f64>()) / l[i * n + i];
        }
        for i in (0..n).rev() {
            z[i] = (z[i] - (i + 1..n).map(|k| l[k * n + i] * z[k]).sum::<f64>()) / l[i * n + i];
        }
        (z, (0..n).map(|i| 2.0 * l[i * n + i].ln()).sum())
    }

    /// Mondrian-like design: column `q` is the indicator (scaled by 1/√M) of the points in
    /// `cols[q].1`, a cell of tree `cols[q].0`; each point lies in one cell per tree.
    struct Design {
        m: usize,
        cols: Vec<(usize, Vec<usize>)>,
        y: Vec<f64>,
    }

    impl Design {
        /// Dense Φ (N × C, row-major).
        fn phi(&self) -> Vec<f64> {
            let c = self.cols.len();
            let mut phi = vec![0.0; self.y.len() * c];
            for (q, (_, pts)) in self.cols.iter().enumerate() {
                pts.iter()
                    .for_each(|&n| phi[n * c + q] = 1.0 / (self.m as f64).sqrt());
            }
            phi
        }
        /// A fresh dense solve of `(ΦᵀΦ + δ²I) w = Φᵀy`: (w, log det A).
        fn oracle(&self, delta2: f64) -> (Vec<f64>, f64) {
            let (nr, c, phi) = (self.y.len(), self.cols.len(), &self.phi());
            let col = |q: usize| (0..nr).map(move |n| phi[n * c + q]);
            let mut a = vec![0.0; c * c];
            for i in 0..c {
                for j in 0..c {
                    a[i * c + j] = col(i).zip(col(j)).map(|(u, v)| u * v).sum::<f64>();
                }
                a[i * c + i] += delta2;
            }
            let b: Vec<f64> = (0..c)
                .map(|q| col(q).zip(&self.y).map(|(u, v)| u * v).sum())
                .collect();
            textbook_solve(&a, c, &b)
        }
        /// (cross, gram, b) of a new cell with points `s`, against the current columns.
        fn column(&self, s: &[usize]) -> (Vec<(usize, f64)>, f64, f64) {
            let mf = self.m as f64;
            let cross = self.cols.iter().enumerate().flat_map(|(q, (_, pts))| {
                pts.iter()
                    .filter(|n| s.contains(n))
                    .map(move |_| (q, 1.0 / mf))
            });
            let b = s.iter().map(|&n| self.y[n]).sum::<f64>() / mf.sqrt();
            (cross.collect(), s.len() as f64 / mf, b)
        }
        fn check(&self, r: &IncrementalRidge) {
            let ((w0, ld0), w) = (self.oracle(r.delta2()), r.weights());
            let scale = w0.iter().fold(0.0f64, |a, x| a.max(x.abs()));
            for (a, b) in w.iter().zip(&w0) {
                assert!((a - b).abs() <= 1e-9 * scale, "weights {a} vs {b}");
            }
            assert!((r.log_det() - ld0).abs() <= 1e-9 * ld0.abs().max(1.0));
        }
    }

    /// N points, M root cells (one column each), built by `append`.
    fn start(rng: &mut Rng, n: usize, m: usize, r: &mut IncrementalRidge) -> Design {
        let y = (0..n).map(|_| rng.uniform() * 2.0 - 1.0).collect();
        let mut d = Design {
            m,
            cols: Vec::new(),
            y,
        };
        for t in 0..m {
            let (cross, gram, b) = d.column(&(0..n).collect::<Vec<_>>());
            let mut dense = vec![0.0; t];
            cross.iter().for_each(|&(q, v)| dense[q] += v);
            r.append(&dense, gram, b);
            d.cols.push((t, (0..n).collect()));
        }
        d
    }

    /// Splits column `p` after its first `cut` points (a sweep event, §3.3), in the model
    /// either fused (`replace`) or as `remove` + two `append_sparse`.
    fn split(d: &mut Design, r: &mut IncrementalRidge, p: usize, cut: usize, fused: bool) {
        let (t, pts) = d.cols.remove(p);
        let (sl, sr) = (pts[..cut].to_vec(), pts[cut..].to_vec());
        let (cl, gl, bl) = d.column(&sl);
        d.cols.push((t, sl));
        let (cr, gr, br) = d.column(&sr);
        d.cols.push((t, sr));
        if fused {
            r.replace(
                Some(p),
                &[NewColumn::new(&cl, gl, bl), NewColumn::new(&cr, gr, br)],
            );
        } else {
            r.remove(p);
            r.append_sparse(&cl, gl, bl);
            r.append_sparse(&cr, gr, br);
        }
    }

    /// `from_gram` (one blocked factorisation of the packed Gram matrix) against the fresh
    /// dense oracle, on designs split at random (C up to ~100, past one 48-row panel).
    #[test]
    fn from_gram_matches_fresh_dense_solve() {
        for (seed, delta2) in [(4u64, 1e-4), (5, 1.0)] {
            let mut rng = Rng(seed);
            let mut r = IncrementalRidge::new(delta2);
            let mut d = start(&mut rng, 200, 4, &mut r);
            for _ in 0..90 {
                let cand: Vec<usize> = (0..d.cols.len())
                    .filter(|&q| d.cols[q].1.len() > 1)
                    .collect();
                let p = cand[rng.below(cand.len())];
                let cut = 1 + rng.below(d.cols[p].1.len() - 1);
                split(&mut d, &mut r, p, cut, true);
            }
            let c = d.cols.len();
            let mut gram = vec![0.0; row_start(c)];
            let mut b = vec![0.0; c];
            for i in 0..c {
                let (cross, g, bi) = d.column(&d.cols[i].1);
                gram[row_start(i) + i] = g;
                cross
                    .iter()
                    .filter(|&&(q, _)| q < i)
                    .for_each(|&(q, v)| gram[row_start(i) + q] += v);
                b[i] = bi;
            }
            let fresh = IncrementalRidge::from_gram(gram, b, delta2);
            assert_eq!(fresh.len(), c);
            d.check(&fresh);
            assert_eq!(fresh.clamped(), 0);
        }
    }

    /// T11: a random sequence of sweep events (delete + two appends, both through separate
    /// calls and through `replace`) and online insertions (zero columns + `add_row`), checked
    /// after every step against a fresh dense solve.
    #[test]
    fn incremental_matches_fresh_dense_solve() {
        for (seed, delta2) in [(1u64, 1e-4), (2, 1e-2), (3, 1.0)] {
            let (mut rng, m) = (Rng(seed), 3);
            let mut r = IncrementalRidge::new(delta2);
            let mut d = start(&mut rng, 30, m, &mut r);
            d.check(&r);
            for step in 0..60 {
                if rng.uniform() < 0.7 {
                    let cand: Vec<usize> = (0..d.cols.len())
                        .filter(|&q| d.cols[q].1.len() > 1)
                        .collect();
                    let p = cand[rng.below(cand.len())];
                    let cut = 1 + rng.below(d.cols[p].1.len() - 1);
                    split(&mut d, &mut r, p, cut, step % 2 == 1);
                } else {
                    let n = d.y.len();
                    d.y.push(rng.uniform() * 2.0 - 1.0);
                    let mut v = Vec::new();
                    for t in 0..m {
                        let own: Vec<usize> =
                            (0..d.cols.len()).filter(|&q| d.cols[q].0 == t).collect();
                        let q = if rng.uniform() < 0.3 {
                            r.append_sparse(&[], 0.0, 0.0); // new singleton cell (§4.3 step 1)
                            d.cols.push((t, Vec::new()));
                            d.cols.len() - 1
                        } else {
                            own[rng.below(own.len())]
                        };
                        d.cols[q].1.push(n);
                        v.push((q, 1.0 / (m as f64).sqrt()));
                    }
                    r.add_row(&v, d.y[n]);
                }
                d.check(&r);
            }
            assert_eq!(r.clamped(), 0);
            assert!(r.heap_bytes() >= IncrementalRidge::factor_bytes(r.len()));
        }
    }

    #[test]
    fn replace_equals_remove_then_appends() {
        let (mut rng, n) = (Rng(7), 25);
        let mut base = IncrementalRidge::new(0.5);
        for k in 0..n {
            let cross: Vec<f64> = (0..k).map(|_| rng.uniform() * 0.2).collect();
            base.append(&cross, 2.0 + rng.uniform(), rng.uniform());
        }
        for p in [0, 3, 12, n - 1] {
            let c1 = [(0usize, 0.1), (5, 0.3), (p.min(n - 2), 0.2)];
            let c2 = [(2usize, 0.05), (n - 1, 0.4)]; // n − 1 is the first new column
            let (mut a, mut b) = (base.clone(), base.clone());
            a.remove(p);
            a.append_sparse(&c1, 1.5, 0.7);
            a.append_sparse(&c2, 1.2, -0.3);
            let first = NewColumn::new(&c1, 1.5, 0.7);
            b.replace(Some(p), &[first, NewColumn::new(&c2, 1.2, -0.3)]);
            assert_eq!((a.len(), a.b()), (b.len(), b.b()));
            let close = |(x, y): (&f64, &f64)| (x - y).abs() <= 1e-13 * x.abs().max(1.0);
            assert!(a.l.iter().zip(&b.l).all(close));
        }
    }

    /// T11: the formula of §3.3 is ln N(y | 0, ΦΦᵀ + δ² I_N), and zero columns leave it alone.
    #[test]
    fn log_marginal_likelihood_is_gaussian_evidence() {
        let mut rng = Rng(11);
        for delta2 in [1e-4, 0.3] {
            let mut r = IncrementalRidge::new(delta2);
            let (mut d, nr) = (start(&mut rng, 9, 2, &mut r), 9);
            split(&mut d, &mut r, 0, 4, true);
            split(&mut d, &mut r, 0, 2, false);
            let lml = |r: &IncrementalRidge, d: &Design| {
                let (w, phi, c) = (r.weights(), d.phi(), r.len());
                let fit = |n: usize| (0..c).map(|j| phi[n * c + j] * w[j]).sum::<f64>();
                let rss: f64 = (0..nr).map(|n| (d.y[n] - fit(n)).powi(2)).sum();
                let yty: f64 = d.y.iter().map(|v| v * v).sum();
                assert!((r.rss_from_weights(yty, &w) - rss).abs() <= 1e-9 * yty);
                let w2 = w.iter().map(|v| v * v).sum();
                log_marginal_likelihood(rss, w2, r.log_det(), c, nr, delta2)
            };
            // Direct: a dense N×N factorisation of K = ΦΦᵀ + δ² I_N.
            let (phi, c) = (d.phi(), d.cols.len());
            let mut k = vec![0.0; nr * nr];
            for i in 0..nr {
                for j in 0..nr {
                    k[i * nr + j] = (0..c).map(|q| phi[i * c + q] * phi[j * c + q]).sum::<f64>();
                }
                k[i * nr + i] += delta2;
            }
            let (alpha, ld) = textbook_solve(&k, nr, &d.y);
            let quad: f64 = alpha.iter().zip(&d.y).map(|(a, b)| a * b).sum();
            let direct = -0.5 * (quad + ld + nr as f64 * (2.0 * std::f64::consts::PI).ln());
            let got = lml(&r, &d);
            assert!(
                (got - direct).abs() <= 1e-9 * direct.abs(),
                "{got}, {direct}"
            );
            for _ in 0..2 {
                r.append_sparse(&[], 0.0, 0.0);
                d.cols.push((1, Vec::new()));
            }
            let again = lml(&r, &d);
            assert!(
                (again - direct).abs() <= 1e-9 * direct.abs(),
                "{again}, {direct}"
            );
        }
    }

    /// §4.3: log det after `add_row` = before + ln(1 + vᵀA⁻¹v), with vᵀA⁻¹v from a dense solve.
    #[test]
    fn determinant_lemma_holds_for_add_row() {
        let (mut rng, n) = (Rng(5), 12);
        let mut r = IncrementalRidge::new(0.1);
        let mut a = vec![0.0; n * n];
        for k in 0..n {
            let cross: Vec<f64> = (0..k).map(|_| rng.uniform() * 0.3).collect();
            for (j, &v) in cross.iter().enumerate() {
                (a[k * n + j], a[j * n + k]) = (v, v);
            }
            a[k * n + k] = 1.0 + rng.uniform();
            r.append(&cross, a[k * n + k] - 0.1, 0.0);
        }
        let v = [(3usize, 0.5), (7, -0.25), (11, 0.5)];
        let mut vd = vec![0.0; n];
        v.iter().for_each(|&(p, x)| vd[p] = x);
        let (u, ld0) = textbook_solve(&a, n, &vd);
        let quad: f64 = u.iter().zip(&vd).map(|(a, b)| a * b).sum();
        assert!((r.inverse_quadratic(&v) - quad).abs() <= 1e-12 * quad);
        assert!((r.log_det() - ld0).abs() <= 1e-12 * ld0.abs().max(1.0));
        r.add_row(&v, 2.0);
        assert!((r.log_det() - (ld0 + quad.ln_1p())).abs() <= 1e-12 * ld0.abs().max(1.0));
        assert!(r.b().iter().zip(&vd).all(|(b, v)| *b == 2.0 * v));
    }

    #[test]
    fn clamp_path_does_not_panic() {
        let mut r = IncrementalRidge::new(1e-20);
        r.append(&[], 3.0, 1.0);
        r.append(&[3.0], 3.0, 1.0); // duplicate column: Schur complement δ², lost to rounding
        assert!(r.log_det().is_finite() && r.weights().iter().all(|w| w.is_finite()));
        let mut r = IncrementalRidge::new(1e-4);
        r.append(&[], 1.0, 0.0);
        r.append(&[5.0], 0.0, 0.0); // inconsistent input forces the clamp
        assert_eq!(r.clamped(), 1);
        assert!(r.log_det().is_finite());
    }
}
