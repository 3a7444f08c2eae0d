//! Packed lower-triangular rows and the kernels that run over them, for the Cholesky factor
//! of [`IncrementalRidge`](super::IncrementalRidge) and the Gram matrix it is factored from
//! (spec `mondrian-kernel.md` §3.3, Appendix B).
//!
//! Row `i` of a packed lower triangle holds `L[i, 0..=i]` contiguously at offset
//! `i (i + 1) / 2`, so every inner loop runs over one contiguous row. Rank-1 updates use
//! Givens rotations `(c, s)` with `c² + s² = 1` (the orthogonal form of Appendix B.3): the new
//! entry `c L + s v` and the carried vector `c v − s L` both depend only on the old values, so
//! the loop-carried chain is just a multiply and an add, and four rows are interleaved to hide
//! even that.

/// Offset of packed row `i`.
#[inline]
pub(super) fn row_start(i: usize) -> usize {
    i * (i + 1) / 2
}

/// Dot product with eight independent partial sums (fixed order, so results are reproducible).
#[inline]
pub(super) fn dot(x: &[f64], y: &[f64]) -> f64 {
    let (xc, yc) = (x.chunks_exact(8), y.chunks_exact(8));
    let tail: f64 = xc
        .remainder()
        .iter()
        .zip(yc.remainder())
        .map(|(a, b)| a * b)
        .sum();
    let mut acc = [0.0; 8];
    for (a, b) in xc.zip(yc) {
        for k in 0..8 {
            acc[k] += a[k] * b[k];
        }
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail
}

/// Adds sparse `(position, value)` pairs into `dst`; returns the first position of a non-zero
/// value (`dst.len()` if none), where forward substitutions may start.
pub(super) fn scatter(dst: &mut [f64], v: &[(usize, f64)]) -> usize {
    let mut first = dst.len();
    for &(pos, value) in v {
        assert!(pos < dst.len(), "position {pos} out of range {}", dst.len());
        dst[pos] += value;
        if value != 0.0 {
            first = first.min(pos);
        }
    }
    first
}

/// One Givens rotation `(c, s)` of an entry `x` of L against the carried entry `v`.
#[inline(always)]
fn givens(x: &mut f64, v: &mut f64, (c, s): (f64, f64)) {
    let y = *x;
    *x = c * y + s * *v;
    *v = c * *v - s * y;
}

/// Adds `value` to the packed lower Gram entries `(a, e)`, `e ≤ a`, of every pair of the
/// sorted `positions` (one row's features): the Gram matrix
/// [`IncrementalRidge::from_gram`](super::IncrementalRidge::from_gram)
/// factors, built row by row.
pub(super) fn add_row_to_gram(gram: &mut [f64], positions: &[u32], value: f64) {
    for (k, &a) in positions.iter().enumerate() {
        let start = row_start(a as usize);
        for &e in &positions[..=k] {
            gram[start + e as usize] += value;
        }
    }
}

/// Applies a rank-1 update to packed rows `i0..i0+g` (`g ≤ 4`), columns `k0..=row`, where
/// `vs[..g]` holds the update vector's entries for those rows and `rot` the rotations of
/// columns `k0..i0` (Appendix B.3 in row order). Appends the rotations of the new diagonals.
pub(super) fn rotate_rows(
    l: &mut [f64],
    i0: usize,
    g: usize,
    k0: usize,
    vs: &mut [f64; 4],
    rot: &mut Vec<(f64, f64)>,
) {
    debug_assert_eq!(rot.len(), i0 - k0);
    let block = &mut l[row_start(i0)..row_start(i0 + g)];
    if g == 4 {
        let (r0, rest) = block.split_at_mut(i0 + 1);
        let (r1, rest) = rest.split_at_mut(i0 + 2);
        let (r2, r3) = rest.split_at_mut(i0 + 3);
        let [mut v0, mut v1, mut v2, mut v3] = *vs;
        let cols = r0[k0..i0]
            .iter_mut()
            .zip(&mut r1[k0..i0])
            .zip(&mut r2[k0..i0])
            .zip(&mut r3[k0..i0])
            .zip(rot.iter());
        for ((((x0, x1), x2), x3), &cs) in cols {
            givens(x0, &mut v0, cs);
            givens(x1, &mut v1, cs);
            givens(x2, &mut v2, cs);
            givens(x3, &mut v3, cs);
        }
        *vs = [v0, v1, v2, v3];
    }
    // The rest of each row (the small triangle inside a full group; the whole row in a short
    // one), then its diagonal creates a rotation.
    let from = if g == 4 { i0 } else { k0 };
    for (j, v) in vs[..g].iter_mut().enumerate() {
        let i = i0 + j;
        let row = &mut l[row_start(i)..row_start(i + 1)];
        for (x, &cs) in row[from..i].iter_mut().zip(&rot[from - k0..]) {
            givens(x, v, cs);
        }
        let d = row[i];
        let r = d.hypot(*v);
        row[i] = r;
        rot.push((d / r, *v / r));
    }
}
