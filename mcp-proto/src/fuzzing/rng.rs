//! The one small deterministic generator of the fuzz bodies and test harnesses (xorshift64*):
//! enough to pick chunk sizes, splits and drops reproducibly. Never for anything secret.

/// xorshift64*; its state is never zero.
#[derive(Debug, Clone)]
pub struct XorShift64Star(u64);

impl XorShift64Star {
    /// Starts from `state` as given (zero is replaced by one, the generator's only bad state).
    pub fn from_state(state: u64) -> Self {
        XorShift64Star(state.max(1))
    }

    /// Starts from a scrambled `seed`, so that nearby seeds give unrelated sequences.
    pub fn from_seed(seed: u64) -> Self {
        XorShift64Star(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform enough in `0..n` (`0` when `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_sequence_and_zero_state() {
        let mut a = XorShift64Star::from_state(1);
        let first = a.next_u64();
        assert_eq!(first, 0x47e4_ce4b_896c_dd1d, "xorshift64* from state 1");
        let mut b = XorShift64Star::from_state(0);
        assert_eq!(b.next_u64(), first, "zero state is replaced by one");
        let mut c = XorShift64Star::from_seed(7);
        let mut d = XorShift64Star::from_seed(7);
        assert_eq!(c.next_u64(), d.next_u64());
        assert_eq!(c.below(0), 0);
        assert!(c.below(10) < 10);
    }
}
