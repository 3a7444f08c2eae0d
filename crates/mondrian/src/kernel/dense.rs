//! Blocked dense Cholesky factorisation: fresh ridge fits and the sweep's refactorisations
//! factor with it (in the packed layout of `ridge.rs`), the E4 gate times the incremental
//! factor against it (spec `mondrian-kernel.md` §6.3), and tests use it as an oracle.

use std::ops::Range;

use super::packed::dot;

/// Where row `i` of a lower-triangular matrix starts in its storage.
#[derive(Debug, Clone, Copy)]
pub(super) enum Layout {
    /// Row-major n×n (upper part unused).
    Full(usize),
    /// Packed rows: row `i` holds columns `0..=i` at offset `i (i + 1) / 2`.
    Packed,
}

impl Layout {
    #[inline]
    fn row(self, i: usize) -> usize {
        match self {
            Layout::Full(n) => i * n,
            Layout::Packed => i * (i + 1) / 2,
        }
    }
}

/// Dense Cholesky factor (lower, row-major n×n, upper part zero) of a symmetric
/// positive-definite row-major matrix, reading only its lower triangle; `None` if a pivot is
/// not positive: the reference "one dense factorisation" of the E4 gate (spec §6.3) and a
/// test oracle.
pub fn dense_cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    assert_eq!(a.len(), n * n, "dense_cholesky: matrix must be n×n");
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        l[i * n..i * n + i + 1].copy_from_slice(&a[i * n..i * n + i + 1]);
    }
    let ok = cholesky_in_place(&mut l, n, Layout::Full(n), |s| (s > 0.0).then_some(s));
    ok.then_some(l)
}

/// Overwrites the lower triangle of a symmetric matrix, stored in `layout`, with its
/// Cholesky factor. `pivot` receives each diagonal value before its square root and returns
/// the value to use (a caller may clamp), or `None` to stop: the function then returns
/// false. Blocked left-looking by row panels so that the O(n³) part runs out of cache.
pub(super) fn cholesky_in_place(
    l: &mut [f64],
    n: usize,
    layout: Layout,
    mut pivot: impl FnMut(f64) -> Option<f64>,
) -> bool {
    const NB: usize = 48;
    for i0 in (0..n).step_by(NB) {
        let i1 = (i0 + NB).min(n);
        for j0 in (0..=i0).step_by(NB) {
            let j1 = (j0 + NB).min(n);
            panel_update(l, layout, i0..i1, j0..j1);
            for i in i0..i1 {
                let ri = layout.row(i);
                for j in j0..j1.min(i + 1) {
                    let rj = layout.row(j);
                    let s = l[ri + j] - dot(&l[ri + j0..ri + j], &l[rj + j0..rj + j]);
                    if i == j {
                        match pivot(s) {
                            Some(s) if s > 0.0 && s.is_finite() => l[ri + i] = s.sqrt(),
                            _ => return false,
                        }
                    } else {
                        l[ri + j] = s / l[rj + j];
                    }
                }
            }
        }
    }
    true
}

/// `L[I, J] −= L[I, ..j0] L[J, ..j0]ᵀ` (only `j ≤ i`), `j0 = J.start`, in a 2×2 register
/// tile over inner-dimension chunks that keep both row panels in L1/L2 (`KB`, `NB` are
/// multiples of 4).
fn panel_update(l: &mut [f64], layout: Layout, rows: Range<usize>, cols: Range<usize>) {
    const KB: usize = 512;
    let kend = cols.start;
    for k0 in (0..kend).step_by(KB) {
        let k1 = (k0 + KB).min(kend);
        for i in rows.clone().step_by(2) {
            let i_hi = (i + 1).min(rows.end - 1);
            let (ri, ri_hi) = (layout.row(i), layout.row(i_hi));
            for j in cols.clone().step_by(2).take_while(|&j| j <= i_hi) {
                let j_hi = (j + 1).min(cols.end - 1);
                let (rj, rj_hi) = (layout.row(j), layout.row(j_hi));
                let x0 = &l[ri + k0..ri + k1];
                let x1 = &l[ri_hi + k0..ri_hi + k1];
                let y0 = &l[rj + k0..rj + k1];
                let y1 = &l[rj_hi + k0..rj_hi + k1];
                let t = tile_2x2(x0, x1, y0, y1);
                for (di, dj, v) in [(0, 0, t[0]), (0, 1, t[1]), (1, 0, t[2]), (1, 1, t[3])] {
                    let (ii, jj) = (i + di, j + dj);
                    if ii <= i_hi && jj <= j_hi && jj <= ii {
                        l[layout.row(ii) + jj] -= v;
                    }
                }
            }
        }
    }
}

/// Four dot products `x_a · y_b` sharing loads, four lanes each. Lengths are multiples of 4
/// (block and chunk sizes are), so there is no remainder.
#[inline]
fn tile_2x2(x0: &[f64], x1: &[f64], y0: &[f64], y1: &[f64]) -> [f64; 4] {
    debug_assert_eq!(x0.len() % 4, 0);
    let mut acc = [[0.0; 4]; 4];
    let (x, y) = (
        x0.chunks_exact(4).zip(x1.chunks_exact(4)),
        y0.chunks_exact(4),
    );
    for ((a0, a1), (b0, b1)) in x.zip(y.zip(y1.chunks_exact(4))) {
        for k in 0..4 {
            acc[0][k] += a0[k] * b0[k];
            acc[1][k] += a0[k] * b1[k];
            acc[2][k] += a1[k] * b0[k];
            acc[3][k] += a1[k] * b1[k];
        }
    }
    acc.map(|a| (a[0] + a[1]) + (a[2] + a[3]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64 for the tests.
    struct Rng(u64);
    impl Rng {
        fn uniform(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// `G Gᵀ + 0.1 I` for a random n×n `G`, row-major.
    fn spd(rng: &mut Rng, n: usize) -> Vec<f64> {
        let g: Vec<f64> = (0..n * n).map(|_| rng.uniform() - 0.5).collect();
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                a[i * n + j] = (0..n).map(|k| g[i * n + k] * g[j * n + k]).sum::<f64>();
            }
            a[i * n + i] += 0.1;
        }
        a
    }

    #[test]
    fn dense_cholesky_matches_textbook() {
        let mut rng = Rng(3);
        for n in [1usize, 2, 7, 48, 49, 97, 150] {
            let a = spd(&mut rng, n);
            let l = dense_cholesky(&a, n).unwrap();
            // L Lᵀ reproduces A, and the upper triangle is zero.
            for i in 0..n {
                for j in 0..n {
                    let llt: f64 = (0..n).map(|k| l[i * n + k] * l[j * n + k]).sum();
                    assert!((llt - a[i * n + j]).abs() <= 1e-10 * a[i * n + i].max(1.0));
                    assert!(j <= i || l[i * n + j] == 0.0);
                }
            }
        }
        assert!(dense_cholesky(&[1.0, 2.0, 2.0, 1.0], 2).is_none());
    }

    #[test]
    fn packed_layout_gives_the_same_factor() {
        let mut rng = Rng(5);
        for n in [1usize, 3, 48, 50, 101] {
            let a = spd(&mut rng, n);
            let full = dense_cholesky(&a, n).unwrap();
            let mut packed: Vec<f64> = (0..n)
                .flat_map(|i| a[i * n..i * n + i + 1].to_vec())
                .collect();
            assert!(cholesky_in_place(&mut packed, n, Layout::Packed, Some));
            for i in 0..n {
                for j in 0..=i {
                    assert_eq!(packed[i * (i + 1) / 2 + j], full[i * n + j]);
                }
            }
        }
    }
}
