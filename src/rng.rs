//! A small seeded pseudo-random generator (SplitMix64) and a Fisher–Yates
//! shuffle built on it.
//!
//! schedlab records the seed of every shuffled campaign and every bootstrap so
//! that a plan or a confidence interval can be reproduced exactly. Crates such
//! as `rand` do not promise that `shuffle` yields the same order across
//! versions; this module does, because its algorithm is fixed here.

/// FNV-1a 64 of a string: a fixed hash that derives seeds from labels (a
/// bootstrap interval's, a synthetic run's), the same in every version.
pub fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// SplitMix64 (Steele, Lea, Flood 2014): 64-bit state, passes BigCrush, and is
/// the generator Java's `SplittableRandom` uses.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform integer in `0..bound` (Lemire's multiply-shift with rejection,
    /// so there is no modulo bias). `bound` must be positive.
    pub fn below(&mut self, bound: u64) -> u64 {
        Below::new(bound).draw(self)
    }

    /// Uniform float in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Fisher–Yates shuffle in place.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// A bound of [`SplitMix64::below`] with its rejection threshold worked
/// out once, for many draws under one bound (a bootstrap draws millions):
/// each [`Below::draw`] is exactly `below(bound)`.
#[derive(Debug, Clone, Copy)]
pub struct Below {
    bound: u64,
    threshold: u64,
}

impl Below {
    /// `bound` must be positive.
    pub fn new(bound: u64) -> Below {
        assert!(bound > 0, "below(0)");
        Below {
            bound,
            threshold: bound.wrapping_neg() % bound,
        }
    }

    /// A uniform integer in `0..bound` from `rng`.
    #[inline]
    pub fn draw(&self, rng: &mut SplitMix64) -> u64 {
        loop {
            let m = (rng.next_u64() as u128) * (self.bound as u128);
            if (m as u64) >= self.threshold {
                return (m >> 64) as u64;
            }
        }
    }
}

/// A seed for a campaign that did not fix one: from the clock and the pid,
/// mixed so that two campaigns started in the same second still differ.
pub fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    SplitMix64::new(nanos ^ ((std::process::id() as u64) << 32)).next_u64() >> 12
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_reference_sequence() {
        // Reference values of SplitMix64 seeded with 1234567 (from the
        // author's C reference implementation, splitmix64.c).
        let mut r = SplitMix64::new(1234567);
        assert_eq!(r.next_u64(), 6457827717110365317);
        assert_eq!(r.next_u64(), 3203168211198807973);
        assert_eq!(r.next_u64(), 9817491932198370423);
    }

    #[test]
    fn shuffle_is_a_deterministic_permutation() {
        let mut a: Vec<u32> = (0..50).collect();
        let mut b = a.clone();
        SplitMix64::new(7).shuffle(&mut a);
        SplitMix64::new(7).shuffle(&mut b);
        assert_eq!(a, b);
        assert_ne!(a, (0..50).collect::<Vec<_>>());
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
    }

    #[test]
    fn a_below_draws_what_below_draws() {
        // Bounds near 2^63 reject about half of the raw values: the
        // rejections must consume the same values in both.
        for bound in [1, 2, 3, 6, 50, 250, 1 << 40, (1 << 63) + 1, u64::MAX] {
            let (mut a, mut b) = (SplitMix64::new(bound), SplitMix64::new(bound));
            let below = Below::new(bound);
            for _ in 0..500 {
                assert_eq!(below.draw(&mut a), b.below(bound), "bound {bound}");
            }
            assert_eq!(a.next_u64(), b.next_u64(), "bound {bound}");
        }
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = SplitMix64::new(1);
        let mut seen = [false; 6];
        for _ in 0..1000 {
            let v = r.below(6) as usize;
            seen[v] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
