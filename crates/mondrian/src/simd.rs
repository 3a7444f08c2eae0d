//! Box kernels with SIMD chosen at run time: the L1 distance from a point to a box
//! (spec `mf-classification.md` §2.4 step 1, §4.1), the same distance to the bounding box of
//! a few rows, and box growth.
//!
//! Builds target the architecture's baseline (no `-C target-cpu=native`), so a binary or a
//! wheel built on one machine runs on any other of its architecture. On x86-64 each kernel
//! also has forms compiled for AVX (and, for box growth, AVX-512F); the first kernel call
//! picks the widest form the running CPU has (`is_x86_feature_detected!`) and keeps the
//! choice. Other architectures run the portable forms.
//!
//! Every form gives the same bits as the portable one: a distance is summed in four lanes,
//! lane k taking the features `d ≡ k mod 4` in order and the features past the last full
//! group in lane 0, and the lanes are added as `(l0 + l1) + (l2 + l3)`; minima and maxima
//! pick between equal values (±0) as the x86 `min`/`max` instructions do. A model therefore
//! does not depend on the machine that trained it.
//!
//! # Forcing the portable forms
//!
//! * The environment variable `MONDRIAN_SIMD=portable`, read once at the first kernel
//!   call, makes the process use the portable forms throughout. Any other value, or none,
//!   lets the CPU decide.
//! * [`force_portable`]`(true)` does the same from code, at any time (for comparisons and
//!   tests); `force_portable(false)` returns to the choice above. Calls already running
//!   finish with the form they started with.
//!
//! [`active_path`] reports which forms the next calls will use.

use crate::process::Feature;
use std::sync::atomic::{AtomicU8, Ordering};

/// The family of kernel forms in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimdPath {
    /// Plain Rust, whatever the compiler makes of it for the build target.
    Portable,
    /// x86-64 AVX for all kernels.
    Avx,
    /// x86-64 AVX-512F for box growth, AVX for the distances (eight lanes were no faster).
    Avx512,
}

impl SimdPath {
    /// A short name: `portable`, `avx` or `avx512f`.
    pub fn name(self) -> &'static str {
        match self {
            SimdPath::Portable => "portable",
            SimdPath::Avx => "avx",
            SimdPath::Avx512 => "avx512f",
        }
    }
}

const UNKNOWN: u8 = 0;
const PORTABLE: u8 = 1;
const AVX: u8 = 2;
const AVX512: u8 = 3;

/// The forms the kernels use now; `UNKNOWN` until the first call. One relaxed load per
/// kernel call reads it, and the branch on it predicts perfectly.
static ACTIVE: AtomicU8 = AtomicU8::new(UNKNOWN);
/// The widest forms the CPU and `MONDRIAN_SIMD` allow; `UNKNOWN` until first needed.
static ALLOWED: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Makes every later kernel call use the portable forms (`true`), or the forms the CPU and
/// `MONDRIAN_SIMD` allow (`false`, the default). Results do not change either way, only
/// speed; this exists to check exactly that, and to rule SIMD out when chasing a fault.
pub fn force_portable(on: bool) {
    ACTIVE.store(if on { PORTABLE } else { allowed() }, Ordering::Relaxed);
}

/// The forms the next kernel calls will use.
pub fn active_path() -> SimdPath {
    match level() {
        AVX512 => SimdPath::Avx512,
        AVX => SimdPath::Avx,
        _ => SimdPath::Portable,
    }
}

#[inline(always)]
fn level() -> u8 {
    match ACTIVE.load(Ordering::Relaxed) {
        UNKNOWN => first_level(),
        l => l,
    }
}

/// The level of the first kernel call: the allowed one, unless [`force_portable`] has
/// set one meanwhile (it then wins: the exchange only replaces `UNKNOWN`).
#[cold]
#[inline(never)]
fn first_level() -> u8 {
    let allowed = allowed();
    match ACTIVE.compare_exchange(UNKNOWN, allowed, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => allowed,
        Err(set) => set,
    }
}

/// Reads `MONDRIAN_SIMD` and the CPU's features once (threads that race here store the
/// same value).
fn allowed() -> u8 {
    match ALLOWED.load(Ordering::Relaxed) {
        UNKNOWN => {
            let portable = std::env::var_os("MONDRIAN_SIMD")
                .is_some_and(|v| v.to_str().map(str::trim) == Some("portable"));
            let level = if portable { PORTABLE } else { cpu_level() };
            ALLOWED.store(level, Ordering::Relaxed);
            level
        }
        l => l,
    }
}

#[cfg(target_arch = "x86_64")]
fn cpu_level() -> u8 {
    if is_x86_feature_detected!("avx512f") {
        AVX512
    } else if is_x86_feature_detected!("avx") {
        AVX
    } else {
        PORTABLE
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_level() -> u8 {
    PORTABLE
}

/// `Σ_d max(ℓ_d − x_d, 0) + max(x_d − u_d, 0)` over the common length of the slices
/// ([`crate::process::extension_rate`]).
#[inline]
pub(crate) fn extension_rate(lower: &[Feature], upper: &[Feature], x: &[Feature]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if level() >= AVX {
        // SAFETY: the CPU has AVX (run-time check above).
        return unsafe { x86::extension_rate(lower, upper, x) };
    }
    portable::extension_rate(lower, upper, x)
}

/// [`extension_rate`] against the bounding box of `rows`
/// ([`crate::process::hull_extension_rate`]).
#[inline]
pub(crate) fn hull_extension_rate(rows: &[&[Feature]], x: &[Feature]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if level() >= AVX {
        // SAFETY: the CPU has AVX (run-time check above).
        return unsafe { x86::hull_extension_rate(rows, x) };
    }
    portable::hull_extension_rate(rows, x)
}

/// Grows `[lower, upper]` to contain `x` over the common length ([`crate::process::grow_box`]).
#[inline]
pub(crate) fn grow_box(lower: &mut [Feature], upper: &mut [Feature], x: &[Feature]) {
    #[cfg(target_arch = "x86_64")]
    match level() {
        // SAFETY: the CPU has AVX-512F, resp. AVX (run-time check).
        AVX512 => return unsafe { x86::grow_box_avx512(lower, upper, x) },
        AVX => return unsafe { x86::grow_box_avx(lower, upper, x) },
        _ => {}
    }
    portable::grow_box(lower, upper, x)
}

/// The kernels as a type, so that a hot loop written once over `K: Kernels` can be compiled
/// twice: over [`Dispatched`] in baseline code, and over [`Avx`] inside a
/// `#[target_feature(enable = "avx")]` function, where the kernels inline into the loop
/// instead of being called per box (a call clobbers every vector register the loop holds).
/// Both give the same bits.
pub(crate) trait Kernels: Copy {
    /// [`extension_rate`].
    fn extension_rate(self, lower: &[Feature], upper: &[Feature], x: &[Feature]) -> f64;
    /// [`grow_box`].
    fn grow_box(self, lower: &mut [Feature], upper: &mut [Feature], x: &[Feature]);
}

/// The kernels chosen at each call ([`extension_rate`] and the others).
#[derive(Clone, Copy)]
pub(crate) struct Dispatched;

impl Kernels for Dispatched {
    #[inline(always)]
    fn extension_rate(self, lower: &[Feature], upper: &[Feature], x: &[Feature]) -> f64 {
        extension_rate(lower, upper, x)
    }
    #[inline(always)]
    fn grow_box(self, lower: &mut [Feature], upper: &mut [Feature], x: &[Feature]) {
        grow_box(lower, upper, x)
    }
}

/// The AVX kernels, called directly. A value exists only where [`avx`] found the CPU
/// has AVX (and the portable forms are not forced), which makes the calls sound.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct Avx(());

/// The AVX kernels if the loops should use them: the CPU has AVX and the portable forms
/// are not forced. One check per loop, not per box.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn avx() -> Option<Avx> {
    (level() >= AVX).then_some(Avx(()))
}

#[cfg(target_arch = "x86_64")]
impl Kernels for Avx {
    #[inline(always)]
    fn extension_rate(self, lower: &[Feature], upper: &[Feature], x: &[Feature]) -> f64 {
        // SAFETY: an `Avx` exists only when the CPU has AVX.
        unsafe { x86::extension_rate(lower, upper, x) }
    }
    #[inline(always)]
    fn grow_box(self, lower: &mut [Feature], upper: &mut [Feature], x: &[Feature]) {
        // SAFETY: as above. (AVX-512F growth gives the same bits; the AVX form inlines
        // into an AVX loop.)
        unsafe { x86::grow_box_avx(lower, upper, x) }
    }
}

/// `max(ℓ − x, 0) + max(x − u, 0)` in f64, where f32 differences are exact. A NaN
/// difference counts as 0, as the x86 `max` does with 0 second.
#[inline(always)]
pub(crate) fn gap(l: Feature, u: Feature, v: Feature) -> f64 {
    let (l, u, v) = (f64::from(l), f64::from(u), f64::from(v));
    let below = l - v;
    let above = v - u;
    (if below > 0.0 { below } else { 0.0 }) + (if above > 0.0 { above } else { 0.0 })
}

/// `a` if `a < b`, else `b`: the x86 `min(a, b)`, so that ±0 and NaN come out alike.
#[inline(always)]
pub(crate) fn min_like_x86(a: Feature, b: Feature) -> Feature {
    if a < b {
        a
    } else {
        b
    }
}

/// `a` if `a > b`, else `b`: the x86 `max(a, b)`.
#[inline(always)]
pub(crate) fn max_like_x86(a: Feature, b: Feature) -> Feature {
    if a > b {
        a
    } else {
        b
    }
}

/// The forms without explicit SIMD: the reference for the others, and what runs on other
/// architectures or when forced.
pub(crate) mod portable {
    use super::{gap, max_like_x86, min_like_x86};
    use crate::process::Feature;

    #[inline]
    pub(crate) fn extension_rate(lower: &[Feature], upper: &[Feature], x: &[Feature]) -> f64 {
        let n = x.len().min(lower.len()).min(upper.len());
        let (lower, upper, x) = (&lower[..n], &upper[..n], &x[..n]);
        let mut acc = [0.0f64; 4];
        let (l4, u4, x4) = (
            lower.chunks_exact(4),
            upper.chunks_exact(4),
            x.chunks_exact(4),
        );
        let (lr, ur, xr) = (l4.remainder(), u4.remainder(), x4.remainder());
        for ((l, u), v) in l4.zip(u4).zip(x4) {
            for lane in 0..4 {
                acc[lane] += gap(l[lane], u[lane], v[lane]);
            }
        }
        for ((&l, &u), &v) in lr.iter().zip(ur).zip(xr) {
            acc[0] += gap(l, u, v);
        }
        (acc[0] + acc[1]) + (acc[2] + acc[3])
    }

    #[inline]
    pub(crate) fn hull_extension_rate(rows: &[&[Feature]], x: &[Feature]) -> f64 {
        let Some((first, others)) = rows.split_first() else {
            return 0.0;
        };
        let n = rows.iter().map(|r| r.len()).fold(x.len(), usize::min);
        let bounds = |k: usize| {
            others.iter().fold((first[k], first[k]), |(l, u), r| {
                (min_like_x86(l, r[k]), max_like_x86(u, r[k]))
            })
        };
        let mut acc = [0.0f64; 4];
        let mut i = 0;
        while i + 4 <= n {
            for (lane, a) in acc.iter_mut().enumerate() {
                let (l, u) = bounds(i + lane);
                *a += gap(l, u, x[i + lane]);
            }
            i += 4;
        }
        for (k, &v) in x.iter().enumerate().take(n).skip(i) {
            let (l, u) = bounds(k);
            acc[0] += gap(l, u, v);
        }
        (acc[0] + acc[1]) + (acc[2] + acc[3])
    }

    #[inline]
    pub(crate) fn grow_box(lower: &mut [Feature], upper: &mut [Feature], x: &[Feature]) {
        grow_box_from(lower, upper, x, 0);
    }

    /// [`grow_box`] on the features from `from` on (the tail of the SIMD forms).
    #[inline(always)]
    pub(crate) fn grow_box_from(
        lower: &mut [Feature],
        upper: &mut [Feature],
        x: &[Feature],
        from: usize,
    ) {
        let n = x.len().min(lower.len()).min(upper.len());
        for ((l, u), &v) in lower[from..n]
            .iter_mut()
            .zip(upper[from..n].iter_mut())
            .zip(&x[from..n])
        {
            *l = min_like_x86(*l, v);
            *u = max_like_x86(*u, v);
        }
    }
}

/// The x86-64 forms. Each is `unsafe` only because it must run on a CPU with the features
/// it is compiled for; every memory access stays inside the slices.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{gap, portable};
    use crate::process::Feature;
    use std::arch::x86_64::{
        __m128, __m256d, _mm256_add_pd, _mm256_cvtps_pd, _mm256_loadu_ps, _mm256_max_pd,
        _mm256_max_ps, _mm256_min_ps, _mm256_setzero_pd, _mm256_storeu_pd, _mm256_storeu_ps,
        _mm256_sub_pd, _mm512_loadu_ps, _mm512_max_ps, _mm512_min_ps, _mm512_storeu_ps,
        _mm_loadu_ps, _mm_max_ps, _mm_min_ps, _mm_storeu_ps,
    };

    /// The four terms `max(ℓ − x, 0) + max(x − u, 0)` for the box bounds `lo`, `hi` and
    /// the four features of `x` at `x`, in f64 (exact differences).
    ///
    /// # Safety
    /// The CPU has AVX and `x` points at four readable floats.
    #[inline]
    #[target_feature(enable = "avx")]
    unsafe fn gaps4(lo: __m128, hi: __m128, x: *const Feature) -> __m256d {
        let zero = _mm256_setzero_pd();
        let (l, u) = (_mm256_cvtps_pd(lo), _mm256_cvtps_pd(hi));
        // SAFETY: the caller guarantees four readable floats at `x`.
        let v = _mm256_cvtps_pd(unsafe { _mm_loadu_ps(x) });
        // max_pd(d, 0) is `d if d > 0 else 0`, as in `gap`.
        let below = _mm256_max_pd(_mm256_sub_pd(l, v), zero);
        let above = _mm256_max_pd(_mm256_sub_pd(v, u), zero);
        _mm256_add_pd(below, above)
    }

    /// # Safety
    /// The CPU has AVX.
    #[inline]
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn extension_rate(
        lower: &[Feature],
        upper: &[Feature],
        x: &[Feature],
    ) -> f64 {
        let n = x.len().min(lower.len()).min(upper.len());
        let mut i = 0;
        let mut acc = [0.0f64; 4];
        // Vector lane k sums the features ≡ k mod 4 in order, as the portable form does;
        // written out, this runs about twice as fast as the compiler's form of it. (Eight
        // lanes were no faster; skipping groups of four with the point inside, found by
        // f32 compares, was slower on real data: the branches mispredict.)
        // SAFETY: every load reads 4 floats starting at i with i + 4 ≤ n, inside all three
        // slices; the store writes the 4 f64 of `acc`.
        unsafe {
            let mut sum = _mm256_setzero_pd();
            while i + 4 <= n {
                let lo = _mm_loadu_ps(lower.as_ptr().add(i));
                let hi = _mm_loadu_ps(upper.as_ptr().add(i));
                sum = _mm256_add_pd(sum, gaps4(lo, hi, x.as_ptr().add(i)));
                i += 4;
            }
            _mm256_storeu_pd(acc.as_mut_ptr(), sum);
        }
        for k in i..n {
            acc[0] += gap(lower[k], upper[k], x[k]);
        }
        (acc[0] + acc[1]) + (acc[2] + acc[3])
    }

    /// # Safety
    /// The CPU has AVX.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn hull_extension_rate(rows: &[&[Feature]], x: &[Feature]) -> f64 {
        let Some((first, others)) = rows.split_first() else {
            return 0.0;
        };
        let n = rows.iter().map(|r| r.len()).fold(x.len(), usize::min);
        let mut acc = [0.0f64; 4];
        let mut i = 0;
        // min_ps(lo, v) is `lo if lo < v else v`, the portable form's choice.
        // SAFETY: every load reads 4 floats starting at i with i + 4 ≤ n, inside `x` and
        // every row; the store writes the 4 f64 of `acc`.
        unsafe {
            let mut sum = _mm256_setzero_pd();
            while i + 4 <= n {
                let mut lo = _mm_loadu_ps(first.as_ptr().add(i));
                let mut hi = lo;
                for row in others {
                    let v = _mm_loadu_ps(row.as_ptr().add(i));
                    lo = _mm_min_ps(lo, v);
                    hi = _mm_max_ps(hi, v);
                }
                sum = _mm256_add_pd(sum, gaps4(lo, hi, x.as_ptr().add(i)));
                i += 4;
            }
            _mm256_storeu_pd(acc.as_mut_ptr(), sum);
        }
        for k in i..n {
            let (l, u) = others.iter().fold((first[k], first[k]), |(l, u), r| {
                (super::min_like_x86(l, r[k]), super::max_like_x86(u, r[k]))
            });
            acc[0] += gap(l, u, x[k]);
        }
        (acc[0] + acc[1]) + (acc[2] + acc[3])
    }

    /// Eight features at a time from `done`, then four if four are left; returns where it
    /// stopped.
    ///
    /// # Safety
    /// The CPU has AVX and `n` is at most the length of each slice.
    #[inline]
    #[target_feature(enable = "avx")]
    unsafe fn grow8_4(
        lower: &mut [Feature],
        upper: &mut [Feature],
        x: &[Feature],
        mut done: usize,
        n: usize,
    ) -> usize {
        while done + 8 <= n {
            // SAFETY: 8 floats from `done` with done + 8 ≤ n, inside the three slices.
            unsafe {
                let v = _mm256_loadu_ps(x.as_ptr().add(done));
                let l = _mm256_loadu_ps(lower.as_ptr().add(done));
                let u = _mm256_loadu_ps(upper.as_ptr().add(done));
                _mm256_storeu_ps(lower.as_mut_ptr().add(done), _mm256_min_ps(l, v));
                _mm256_storeu_ps(upper.as_mut_ptr().add(done), _mm256_max_ps(u, v));
            }
            done += 8;
        }
        // Four more with SSE: a scalar loop over them costs as much as the rest on
        // D = 36 (satimage), each store feeding the next row's load.
        if done + 4 <= n {
            // SAFETY: 4 floats from `done` with done + 4 ≤ n, inside the three slices.
            unsafe {
                let v = _mm_loadu_ps(x.as_ptr().add(done));
                let l = _mm_loadu_ps(lower.as_ptr().add(done));
                let u = _mm_loadu_ps(upper.as_ptr().add(done));
                _mm_storeu_ps(lower.as_mut_ptr().add(done), _mm_min_ps(l, v));
                _mm_storeu_ps(upper.as_mut_ptr().add(done), _mm_max_ps(u, v));
            }
            done += 4;
        }
        done
    }

    /// # Safety
    /// The CPU has AVX.
    #[inline]
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn grow_box_avx(lower: &mut [Feature], upper: &mut [Feature], x: &[Feature]) {
        let n = x.len().min(lower.len()).min(upper.len());
        // SAFETY: the CPU has AVX (the caller's promise) and n bounds the three slices.
        let done = unsafe { grow8_4(lower, upper, x, 0, n) };
        portable::grow_box_from(lower, upper, x, done);
    }

    /// # Safety
    /// The CPU has AVX-512F (which implies AVX).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn grow_box_avx512(
        lower: &mut [Feature],
        upper: &mut [Feature],
        x: &[Feature],
    ) {
        let n = x.len().min(lower.len()).min(upper.len());
        let mut done = 0;
        while done + 16 <= n {
            // SAFETY: 16 floats from `done` with done + 16 ≤ n, inside the three slices.
            unsafe {
                let v = _mm512_loadu_ps(x.as_ptr().add(done));
                let l = _mm512_loadu_ps(lower.as_ptr().add(done));
                let u = _mm512_loadu_ps(upper.as_ptr().add(done));
                _mm512_storeu_ps(lower.as_mut_ptr().add(done), _mm512_min_ps(l, v));
                _mm512_storeu_ps(upper.as_mut_ptr().add(done), _mm512_max_ps(u, v));
            }
            done += 16;
        }
        // SAFETY: AVX-512F implies AVX; n bounds the three slices.
        let done = unsafe { grow8_4(lower, upper, x, done, n) };
        portable::grow_box_from(lower, upper, x, done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Random sign and magnitude 1e-6 to 1e3, one time in eight a zero of either sign, so
    /// that sums in another order would round differently.
    fn value(rng: &mut Xoshiro256PlusPlus) -> Feature {
        if rng.gen_range(0..8) == 0 {
            return if rng.gen() { 0.0 } else { -0.0 };
        }
        let magnitude = 10f32.powf(rng.gen_range(-6.0..3.0));
        if rng.gen() {
            magnitude
        } else {
            -magnitude
        }
    }

    /// A box of width `n` (some sides of length 0) and a point that, feature by feature,
    /// lies below, inside, above or on a face (a zero of the other sign included).
    fn case(rng: &mut Xoshiro256PlusPlus, n: usize) -> (Vec<Feature>, Vec<Feature>, Vec<Feature>) {
        let (mut lower, mut upper, mut x) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..n {
            let a = value(rng);
            let b = if rng.gen_range(0..6) == 0 {
                a
            } else {
                value(rng)
            };
            let (l, u) = if a < b { (a, b) } else { (b, a) };
            let v = match rng.gen_range(0..6) {
                0 => l,
                1 => u,
                2 => l + (u - l) * rng.gen::<Feature>(),
                3 => l - value(rng).abs(),
                4 => u + value(rng).abs(),
                _ => value(rng),
            };
            let v = if v == 0.0 && rng.gen() { -v } else { v };
            lower.push(l);
            upper.push(u);
            x.push(v);
        }
        (lower, upper, x)
    }

    fn bits(v: &[Feature]) -> Vec<u32> {
        v.iter().map(|f| f.to_bits()).collect()
    }

    #[test]
    fn portable_rate_sums_in_the_documented_order() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for n in 1..=40 {
            let (lower, upper, x) = case(&mut rng, n);
            let mut lanes = [0.0f64; 4];
            let full = n / 4 * 4;
            for d in 0..n {
                lanes[if d < full { d % 4 } else { 0 }] += gap(lower[d], upper[d], x[d]);
            }
            let want = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
            let got = portable::extension_rate(&lower, &upper, &x);
            assert_eq!(got.to_bits(), want.to_bits(), "D = {n}");
        }
    }

    #[test]
    fn every_extension_rate_has_the_portable_bits() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        for n in 1..=300 {
            for _ in 0..20 {
                let (lower, upper, x) = case(&mut rng, n);
                let want = portable::extension_rate(&lower, &upper, &x).to_bits();
                assert_eq!(
                    extension_rate(&lower, &upper, &x).to_bits(),
                    want,
                    "D = {n}"
                );
                #[cfg(target_arch = "x86_64")]
                if is_x86_feature_detected!("avx") {
                    // SAFETY: the CPU has AVX.
                    let avx = unsafe { x86::extension_rate(&lower, &upper, &x) };
                    assert_eq!(avx.to_bits(), want, "AVX, D = {n}");
                }
            }
        }
    }

    #[test]
    fn every_hull_extension_rate_has_the_portable_bits() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(13);
        for n in 1..=300 {
            for n_rows in 1..=5 {
                let (first, _, mut x) = case(&mut rng, n);
                let mut rows = vec![first];
                for _ in 1..n_rows {
                    rows.push(case(&mut rng, n).2);
                }
                // Some features of the point on a row's value: on a face of the hull.
                for (d, v) in x.iter_mut().enumerate() {
                    if rng.gen_range(0..4) == 0 {
                        *v = rows[rng.gen_range(0..n_rows)][d];
                    }
                }
                let refs: Vec<&[Feature]> = rows.iter().map(Vec::as_slice).collect();
                let want = portable::hull_extension_rate(&refs, &x).to_bits();
                let got = hull_extension_rate(&refs, &x).to_bits();
                assert_eq!(got, want, "D = {n}, {n_rows} rows");
                #[cfg(target_arch = "x86_64")]
                if is_x86_feature_detected!("avx") {
                    // SAFETY: the CPU has AVX.
                    let avx = unsafe { x86::hull_extension_rate(&refs, &x) };
                    assert_eq!(avx.to_bits(), want, "AVX, D = {n}, {n_rows} rows");
                }
                // And that is the rate of the box the rows span, grown either way.
                let (mut lower, mut upper) = (rows[0].clone(), rows[0].clone());
                for r in &rows[1..] {
                    portable::grow_box(&mut lower, &mut upper, r);
                }
                let boxed = portable::extension_rate(&lower, &upper, &x).to_bits();
                assert_eq!(boxed, want, "hull against box, D = {n}, {n_rows} rows");
            }
        }
    }

    #[test]
    fn every_box_growth_has_the_portable_bits() {
        type Grow = fn(&mut [Feature], &mut [Feature], &[Feature]);
        let mut forms: Vec<(&str, Grow)> = vec![("dispatched", grow_box)];
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx") {
                // SAFETY: only called on a CPU with AVX.
                forms.push(("AVX", |l, u, x| unsafe { x86::grow_box_avx(l, u, x) }));
            }
            if is_x86_feature_detected!("avx512f") {
                // SAFETY: only called on a CPU with AVX-512F.
                forms.push(("AVX-512F", |l, u, x| unsafe {
                    x86::grow_box_avx512(l, u, x)
                }));
            }
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(17);
        for n in 1..=300 {
            for _ in 0..10 {
                let (lower, upper, x) = case(&mut rng, n);
                let (mut l0, mut u0) = (lower.clone(), upper.clone());
                portable::grow_box(&mut l0, &mut u0, &x);
                for (name, grow) in &forms {
                    let (mut l, mut u) = (lower.clone(), upper.clone());
                    grow(&mut l, &mut u, &x);
                    assert_eq!(bits(&l), bits(&l0), "{name} lower, D = {n}");
                    assert_eq!(bits(&u), bits(&u0), "{name} upper, D = {n}");
                }
                // The portable form is the min and max, ties (±0) going to the point.
                for d in 0..n {
                    assert!(l0[d] <= lower[d] && l0[d] <= x[d] && u0[d] >= upper[d]);
                    if lower[d] == x[d] {
                        assert_eq!(l0[d].to_bits(), x[d].to_bits());
                    }
                    if upper[d] == x[d] {
                        assert_eq!(u0[d].to_bits(), x[d].to_bits());
                    }
                }
            }
        }
    }

    #[test]
    fn the_path_names_the_cpu() {
        // Nothing in this binary forces the portable forms, so unless the environment
        // does, the path is the CPU's widest.
        if std::env::var_os("MONDRIAN_SIMD").is_some() {
            return;
        }
        let want = match cpu_level() {
            AVX512 => SimdPath::Avx512,
            AVX => SimdPath::Avx,
            _ => SimdPath::Portable,
        };
        assert_eq!(active_path(), want);
    }
}
