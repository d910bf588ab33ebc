//! The one seeded generator every benchmark draws from (xoshiro256** seeded by SplitMix64): the
//! data and the queries are the same on every machine and every run for one seed, with no
//! dependency.

#[derive(Debug, Clone)]
pub struct Rng {
    state: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng {
            state: [next(), next(), next(), next()],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, n); `n` > 0.
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// Uniform in [lo, hi] (inclusive).
    pub fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// A skewed index in [0, n): `n · u^power` for a uniform `u`, so low indexes come far more
    /// often (a few entities are everywhere, most are rare). `n` > 0.
    pub fn skewed(&mut self, n: usize, power: i32) -> usize {
        ((n as f64 * self.unit().powi(power)) as usize).min(n - 1)
    }

    /// Uniform in [-1, 1), as f32 (noise for vectors).
    pub fn signed_f32(&mut self) -> f32 {
        (self.unit() * 2.0 - 1.0) as f32
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Fisher–Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// Sampling from explicit weights by binary search over the cumulative sum.
#[derive(Debug, Clone)]
pub struct Weighted {
    cumulative: Vec<f64>,
}

impl Weighted {
    pub fn new(weights: impl IntoIterator<Item = f64>) -> Weighted {
        let mut total = 0.0;
        let cumulative = weights
            .into_iter()
            .map(|w| {
                total += w;
                total
            })
            .collect();
        Weighted { cumulative }
    }

    /// Zipf over `n` ranks: rank r (0-based) has weight 1 / (r + 1)^s.
    pub fn zipf(n: usize, s: f64) -> Weighted {
        Weighted::new((0..n).map(|r| 1.0 / ((r + 1) as f64).powf(s)))
    }

    pub fn sample(&self, rng: &mut Rng) -> usize {
        let total = *self.cumulative.last().expect("at least one weight");
        let target = rng.unit() * total;
        self.cumulative
            .partition_point(|&c| c <= target)
            .min(self.cumulative.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    /// The first three draws for seed 0 (computed independently of this code).
    const PINNED: [u64; 3] = [
        0x99EC_5F36_CB75_F2B4,
        0xBF6E_1F78_4956_452A,
        0x1A5F_849D_4933_E6E0,
    ];

    /// The stream is part of every result's meaning: a change to the generator changes every
    /// corpus, so it must be deliberate (and the old results no longer comparable).
    #[test]
    fn stream_is_pinned() {
        let mut rng = Rng::new(0);
        let first: Vec<u64> = (0..3).map(|_| rng.next_u64()).collect();
        let mut again = Rng::new(0);
        assert_eq!(first, (0..3).map(|_| again.next_u64()).collect::<Vec<_>>());
        assert_ne!(first, {
            let mut other = Rng::new(1);
            (0..3).map(|_| other.next_u64()).collect::<Vec<_>>()
        });
        assert_eq!(first, PINNED);
    }

    #[test]
    fn skewed_stays_in_range_and_prefers_low() {
        let mut rng = Rng::new(5);
        let mut low = 0;
        for _ in 0..10_000 {
            let i = rng.skewed(100, 3);
            assert!(i < 100);
            low += usize::from(i < 10);
        }
        // u^3 < 0.1 for u < 0.464: about 46 % of draws.
        assert!((4000..5300).contains(&low), "{low}");
    }

    #[test]
    fn zipf_prefers_low_ranks() {
        let zipf = Weighted::zipf(1000, 1.0);
        let mut rng = Rng::new(1);
        let mut counts = vec![0usize; 1000];
        for _ in 0..100_000 {
            counts[zipf.sample(&mut rng)] += 1;
        }
        assert!(counts[0] > counts[9] * 5, "{} vs {}", counts[0], counts[9]);
        assert!(counts.iter().all(|&c| c < 100_000));
    }

    #[test]
    fn below_stays_in_range() {
        let mut rng = Rng::new(3);
        for n in 1..50 {
            for _ in 0..100 {
                assert!(rng.below(n) < n);
            }
        }
    }
}
