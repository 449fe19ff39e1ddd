//! A tiny deterministic generator for the crate's randomized tests (xorshift), so
//! that a failure can be replayed from its seed.

/// Xorshift64; never seeded with zero.
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator from `seed` (zero is taken as one).
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// A number in `0..n`.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}
