//! The randomness of a run (its id, the seed of its waits, the draws of its jitter), got so as
//! to cost nothing at start that a run does not use. rand's own generators are ChaCha, which
//! picks its code by asking the CPU (CPUID) when a generator is made: in a virtual machine each
//! such question traps to the host, about 1% of a plain run's start-up.

use std::convert::Infallible;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng, TryRng};

/// A random number straight from the system's source (getrandom(2) on Linux), for a seed:
/// `rand::random` would first make a ChaCha generator seeded from that same source.
pub fn random_u64() -> u64 {
    // The system's source does not fail once the kernel has seeded it; rand's generator,
    // seeded from that source, would report the same failure.
    rand::rngs::SysRng
        .try_next_u64()
        .unwrap_or_else(|_| rand::random())
}

/// As `random_u64`, 128 bits in one read.
pub fn random_u128() -> u128 {
    let mut bytes = [0; 16];
    match rand::rngs::SysRng.try_fill_bytes(&mut bytes) {
        Ok(()) => u128::from_ne_bytes(bytes),
        Err(_) => rand::random(),
    }
}

/// `StdRng::seed_from_u64(seed)`, made at its first draw: the same draws, and none of its cost
/// in a run that never waits.
#[derive(Debug)]
pub struct LazyRng {
    seed: u64,
    rng: Option<StdRng>,
}

impl LazyRng {
    pub fn new(seed: u64) -> LazyRng {
        LazyRng { seed, rng: None }
    }

    fn rng(&mut self) -> &mut StdRng {
        let seed = self.seed;
        self.rng.get_or_insert_with(|| StdRng::seed_from_u64(seed))
    }
}

impl TryRng for LazyRng {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(self.rng().next_u32())
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(self.rng().next_u64())
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        self.rng().fill_bytes(dst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_what_the_seeded_std_rng_draws() {
        let mut lazy = LazyRng::new(42);
        let mut eager = StdRng::seed_from_u64(42);
        let mut a = [0u8; 13];
        let mut b = [0u8; 13];
        lazy.fill_bytes(&mut a);
        eager.fill_bytes(&mut b);
        assert_eq!(a, b);
        assert_eq!(lazy.next_u64(), eager.next_u64());
        assert_eq!(lazy.next_u32(), eager.next_u32());
    }
}
