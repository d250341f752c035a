//! Waits between tries (spec 4.1): base wait, cap, then jitter over an injected random source.

use std::time::Duration;

use rand::{Rng, RngExt};

/// How the base wait grows with the number of failures.
#[derive(Clone, Debug, PartialEq)]
pub enum Backoff {
    /// `delay × factor^(k−1)`.
    Exponential { factor: f64 },
    /// `delay × k`.
    Linear,
    /// `delay`.
    Constant,
    /// The k-th value; the last one repeats. Never empty.
    List(Vec<Duration>),
}

/// How a capped wait is randomised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jitter {
    None,
    /// `U[0, d]`.
    Full,
    /// `d/2 + U[0, d/2]`.
    Equal,
    /// `min(max-delay, U[delay, 3 × previous wait])`.
    Decorrelated,
}

impl Jitter {
    pub fn name(self) -> &'static str {
        match self {
            Jitter::None => "none",
            Jitter::Full => "full",
            Jitter::Equal => "equal",
            Jitter::Decorrelated => "decorrelated",
        }
    }
}

/// The wait before one retry: the capped base (the top of the random range) and the wait
/// actually chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wait {
    pub base: Duration,
    pub delay: Duration,
}

/// Everything that decides the waits.
#[derive(Clone, Debug, PartialEq)]
pub struct WaitPolicy {
    pub backoff: Backoff,
    pub delay: Duration,
    pub max_delay: Duration,
    pub jitter: Jitter,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl WaitPolicy {
    /// The base wait after failure `k` (k ≥ 1), capped at `max_delay`. Saturates.
    pub fn capped_base(&self, k: u64) -> Duration {
        let k = k.max(1);
        let base = match &self.backoff {
            Backoff::Constant => self.delay,
            Backoff::Linear => {
                let times = u32::try_from(k).unwrap_or(u32::MAX);
                self.delay.checked_mul(times).unwrap_or(Duration::MAX)
            }
            Backoff::Exponential { factor } => {
                if self.delay.is_zero() || *factor <= 1.0 {
                    self.delay
                } else {
                    // Float arithmetic may reach infinity; anything at or above the cap is the cap.
                    let scaled = nanos(self.delay) as f64 * factor.powf((k - 1) as f64);
                    if scaled < nanos(self.max_delay) as f64 {
                        Duration::from_nanos(scaled.round() as u64)
                    } else {
                        self.max_delay
                    }
                }
            }
            Backoff::List(waits) => {
                let i = usize::try_from(k - 1).unwrap_or(usize::MAX);
                waits.get(i).or(waits.last()).copied().unwrap_or(self.delay)
            }
        };
        base.min(self.max_delay)
    }

    /// The wait after failure `k`, given the previous wait (for decorrelated jitter).
    pub fn wait<R: Rng + ?Sized>(&self, k: u64, previous: Option<Duration>, rng: &mut R) -> Wait {
        if self.jitter == Jitter::Decorrelated {
            let low = nanos(self.delay);
            let prev = nanos(previous.unwrap_or(self.delay));
            let high = prev.saturating_mul(3).max(low);
            let chosen = rng.random_range(low..=high);
            let cap = nanos(self.max_delay);
            return Wait {
                base: Duration::from_nanos(high.min(cap)),
                delay: Duration::from_nanos(chosen.min(cap)),
            };
        }
        let base = self.capped_base(k);
        let d = nanos(base);
        let delay = match self.jitter {
            Jitter::None => d,
            Jitter::Full => rng.random_range(0..=d),
            Jitter::Equal => {
                let half = d / 2;
                half + rng.random_range(0..=d - half)
            }
            Jitter::Decorrelated => unreachable!("handled above"),
        };
        Wait {
            base,
            delay: Duration::from_nanos(delay),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn policy(backoff: Backoff, delay: Duration, max: Duration, jitter: Jitter) -> WaitPolicy {
        WaitPolicy {
            backoff,
            delay,
            max_delay: max,
            jitter,
        }
    }

    fn waits(p: &WaitPolicy, n: u64, seed: u64) -> Vec<Duration> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut prev = None;
        (1..=n)
            .map(|k| {
                let w = p.wait(k, prev, &mut rng);
                prev = Some(w.delay);
                w.delay
            })
            .collect()
    }

    #[test]
    fn exponential_doubles_up_to_the_cap() {
        let p = policy(
            Backoff::Exponential { factor: 2.0 },
            s(2),
            s(60),
            Jitter::None,
        );
        assert_eq!(waits(&p, 7, 0), [2, 4, 8, 16, 32, 60, 60].map(s));
    }

    #[test]
    fn linear_and_constant_grow_as_named() {
        let p = policy(Backoff::Linear, s(3), s(10), Jitter::None);
        assert_eq!(waits(&p, 5, 0), [3, 6, 9, 10, 10].map(s));
        let p = policy(Backoff::Constant, s(3), s(10), Jitter::None);
        assert_eq!(waits(&p, 3, 0), [3, 3, 3].map(s));
    }

    #[test]
    fn explicit_delays_repeat_the_last_and_are_capped() {
        let p = policy(Backoff::List(vec![s(2), s(4)]), s(1), s(60), Jitter::None);
        assert_eq!(waits(&p, 4, 0), [2, 4, 4, 4].map(s));
        let p = policy(Backoff::List(vec![s(2), s(90)]), s(1), s(60), Jitter::None);
        assert_eq!(waits(&p, 3, 0), [2, 60, 60].map(s));
    }

    #[test]
    fn huge_try_numbers_and_factors_saturate_at_the_cap() {
        let p = policy(
            Backoff::Exponential { factor: 10.0 },
            s(1),
            s(60),
            Jitter::None,
        );
        assert_eq!(p.capped_base(4_000_000_000), s(60));
        assert_eq!(p.capped_base(u64::MAX), s(60));
        let p = policy(Backoff::Linear, Duration::MAX, Duration::MAX, Jitter::Full);
        assert_eq!(p.capped_base(u64::MAX), Duration::MAX);
        let mut rng = StdRng::seed_from_u64(1);
        let p = policy(
            Backoff::Exponential { factor: 1e300 },
            Duration::MAX,
            Duration::MAX,
            Jitter::Decorrelated,
        );
        assert!(p.wait(u64::MAX, Some(Duration::MAX), &mut rng).delay <= Duration::MAX);
    }

    #[test]
    fn a_zero_delay_stays_zero() {
        let p = policy(
            Backoff::Exponential { factor: 10.0 },
            Duration::ZERO,
            s(60),
            Jitter::Full,
        );
        assert_eq!(waits(&p, 3, 7), [Duration::ZERO; 3]);
    }

    #[test]
    fn the_same_seed_gives_the_same_waits_and_another_seed_others() {
        for jitter in [Jitter::Full, Jitter::Equal, Jitter::Decorrelated] {
            let p = policy(Backoff::Exponential { factor: 2.0 }, s(1), s(60), jitter);
            assert_eq!(waits(&p, 8, 42), waits(&p, 8, 42));
            assert_ne!(waits(&p, 8, 42), waits(&p, 8, 43));
        }
    }

    #[test]
    fn equal_jitter_keeps_at_least_half() {
        let p = policy(Backoff::Constant, s(10), s(60), Jitter::Equal);
        for w in waits(&p, 200, 3) {
            assert!(w >= s(5) && w <= s(10), "{w:?}");
        }
    }

    #[test]
    fn decorrelated_stays_between_delay_and_three_times_the_previous() {
        let p = policy(Backoff::Constant, s(1), s(30), Jitter::Decorrelated);
        let ws = waits(&p, 200, 9);
        let mut prev = s(1);
        for w in ws {
            assert!(
                w >= s(1) && w <= (prev * 3).min(s(30)),
                "{w:?} after {prev:?}"
            );
            prev = w;
        }
    }
}
