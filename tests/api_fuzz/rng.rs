//! The deterministic RNG every choice is drawn from, so a sequence seed replays a sequence.

// ---------------------------------------------------------------------------------------
// RNG: splitmix64

#[derive(Clone)]
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// Uniform in lo..=hi.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    pub(crate) fn pct(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
    pub(crate) fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
    pub(crate) fn idx(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
}

pub(crate) fn seq_seed(base: u64, i: u64) -> u64 {
    if i == 0 {
        base
    } else {
        Rng(base ^ i.wrapping_mul(0xA24B_AED4_963E_E407)).next()
    }
}
