//! `--shuffle SEED`: the row order `numpy.random.default_rng(SEED).permutation(n)` gives, so
//! that a stream shuffled here is the stream a Python harness shuffles with the same seed
//! (spec `mondrian-polya-forest.md` D2 fixes the streams' orders that way).
//!
//! Three parts, each as NumPy defines it: `SeedSequence(seed)` hashes the seed into a
//! 128-bit state and increment, `PCG64` (a 128-bit LCG with the XSL-RR output) draws from
//! them, and the shuffle is Fisher–Yates from the last position down, drawing each index
//! by masked rejection (`random_interval`, on 32-bit draws, two per 64-bit output, while
//! the bound fits in 32 bits).

/// `numpy.random.default_rng(seed).permutation(n)`.
pub(crate) fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut rng = Pcg64::new(seed);
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = rng.interval(i as u64) as usize;
        order.swap(i, j);
    }
    order
}

/// NumPy's `SeedSequence(seed).generate_state(4, uint64)`: the seed's 32-bit words mixed
/// into a pool of four, then hashed out.
fn seed_words(seed: u64) -> [u64; 4] {
    const INIT_A: u32 = 0x43b0_d7e5;
    const MULT_A: u32 = 0x931e_8875;
    const INIT_B: u32 = 0x8b51_f9dd;
    const MULT_B: u32 = 0x58f3_8ded;
    const MIX_L: u32 = 0xca01_f9dd;
    const MIX_R: u32 = 0x4973_f715;
    // The seed as little-endian 32-bit words, without leading zero words (0 is one word).
    let entropy: Vec<u32> = match seed >> 32 {
        0 => vec![seed as u32],
        high => vec![seed as u32, high as u32],
    };
    let mut hash_const = INIT_A;
    let mut hashmix = |value: u32| {
        let mut v = value ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_A);
        v = v.wrapping_mul(hash_const);
        v ^ (v >> 16)
    };
    let mix = |x: u32, y: u32| {
        let r = MIX_L.wrapping_mul(x).wrapping_sub(MIX_R.wrapping_mul(y));
        r ^ (r >> 16)
    };
    let mut pool = [0u32; 4];
    for (i, p) in pool.iter_mut().enumerate() {
        *p = hashmix(entropy.get(i).copied().unwrap_or(0));
    }
    for src in 0..4 {
        for dst in 0..4 {
            if src != dst {
                let h = hashmix(pool[src]);
                pool[dst] = mix(pool[dst], h);
            }
        }
    }
    // (A seed has at most two words, so none is left over for the pool's second pass.)
    let mut hash_b = INIT_B;
    let mut out = [0u32; 8];
    for (i, o) in out.iter_mut().enumerate() {
        let mut v = pool[i % 4] ^ hash_b;
        hash_b = hash_b.wrapping_mul(MULT_B);
        v = v.wrapping_mul(hash_b);
        *o = v ^ (v >> 16);
    }
    std::array::from_fn(|k| u64::from(out[2 * k]) | (u64::from(out[2 * k + 1]) << 32))
}

/// NumPy's `PCG64` bit generator with its buffered 32-bit draws.
struct Pcg64 {
    state: u128,
    inc: u128,
    /// The high half of the last 64-bit output, not yet drawn.
    spare: Option<u32>,
}

const PCG_MULT: u128 = 0x2360_ed05_1fc6_5da4_4385_df64_9fcc_f645;

impl Pcg64 {
    fn new(seed: u64) -> Self {
        let w = seed_words(seed);
        let init_state = (u128::from(w[0]) << 64) | u128::from(w[1]);
        let init_seq = (u128::from(w[2]) << 64) | u128::from(w[3]);
        let mut rng = Pcg64 {
            state: 0,
            inc: (init_seq << 1) | 1,
            spare: None,
        };
        rng.step();
        rng.state = rng.state.wrapping_add(init_state);
        rng.step();
        rng
    }

    fn step(&mut self) {
        self.state = self.state.wrapping_mul(PCG_MULT).wrapping_add(self.inc);
    }

    fn next_u64(&mut self) -> u64 {
        self.step();
        let folded = ((self.state >> 64) as u64) ^ (self.state as u64);
        folded.rotate_right((self.state >> 122) as u32)
    }

    fn next_u32(&mut self) -> u32 {
        if let Some(high) = self.spare.take() {
            return high;
        }
        let v = self.next_u64();
        self.spare = Some((v >> 32) as u32);
        v as u32
    }

    /// A uniform integer in `0..=max`: draws masked to the smallest all-ones mask covering
    /// `max`, rejected above it.
    fn interval(&mut self, max: u64) -> u64 {
        if max == 0 {
            return 0;
        }
        let mask = u64::MAX >> max.leading_zeros();
        loop {
            let v = match u32::try_from(max) {
                Ok(_) => u64::from(self.next_u32()) & mask,
                Err(_) => self.next_u64() & mask,
            };
            if v <= max {
                return v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values printed by NumPy 2.4 (`np.random.PCG64(seed).random_raw()`,
    /// `np.random.default_rng(seed).permutation(n)`).
    #[test]
    fn numpy_streams_and_permutations() {
        let mut g = Pcg64::new(0);
        let raw: Vec<u64> = (0..3).map(|_| g.next_u64()).collect();
        assert_eq!(
            raw,
            [
                0xa30f_ebcf_d9c2_825f,
                0x4510_bdf8_82d9_d721,
                0x0a7d_3da9_4ecd_e8b8
            ]
        );
        // A seed of two 32-bit words.
        assert_eq!(Pcg64::new((1 << 40) + 3).next_u64(), 0xc60e_533f_bbb0_872c);
        let tens: [(u64, [usize; 10]); 7] = [
            (0, [4, 6, 2, 7, 3, 5, 9, 0, 8, 1]),
            (1, [8, 4, 7, 0, 1, 2, 5, 9, 6, 3]),
            (2, [2, 0, 7, 6, 9, 5, 3, 4, 8, 1]),
            (3, [9, 6, 0, 2, 1, 4, 7, 5, 3, 8]),
            (4, [1, 0, 7, 2, 9, 8, 6, 4, 3, 5]),
            ((1 << 40) + 3, [2, 4, 6, 5, 7, 9, 0, 3, 8, 1]),
            (u64::MAX, [8, 7, 3, 0, 4, 6, 1, 2, 5, 9]),
        ];
        for (seed, want) in tens {
            assert_eq!(permutation(10, seed), want, "seed {seed}");
        }
        assert_eq!(
            permutation(3772, 4)[..8],
            [2570, 2436, 1044, 3664, 2818, 3259, 1560, 639]
        );
        // http's 567,498 rows: the first indices, and Σ i·p[i] mod 2^61 − 1 over all.
        let p = permutation(567_498, 0);
        assert_eq!(
            p[..8],
            [5463, 397216, 277879, 20731, 293870, 299642, 302910, 180801]
        );
        let m = (1u128 << 61) - 1;
        let sum = p
            .iter()
            .enumerate()
            .map(|(i, &v)| (i * v) as u128)
            .sum::<u128>()
            % m;
        assert_eq!(sum, 45_709_975_284_306_606);
        assert_eq!(permutation(0, 0), Vec::<usize>::new());
        assert_eq!(permutation(1, 9), vec![0]);
    }
}
