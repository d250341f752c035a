//! Waits between tries (docs/policy.md#waits): base wait, cap, then jitter over an injected random
//! source.

use std::time::Duration;

use rand::{Rng, RngExt};

use super::httpdate::TimeSource;

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
    /// The wait the failed try's output asked for (`--delay-from-output`), if it asked: `delay`
    /// is then at least this long (docs/herd.md#pushback).
    pub requested: Option<Duration>,
    /// When the output asked for a moment (an HTTP-date) rather than a wait: the clock that
    /// `requested` was measured by.
    pub clock: Option<TimeSource>,
}

impl Wait {
    /// True when the output's request, not the policy, set this wait.
    pub fn set_by_request(&self) -> bool {
        self.requested == Some(self.delay)
    }
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

    /// The range decorrelated jitter draws from after `previous`, before the cap:
    /// `[delay, max(delay, 3 × previous)]`, in nanoseconds.
    fn decorrelated_range(&self, previous: Option<Duration>) -> (u64, u64) {
        let low = nanos(self.delay);
        let prev = nanos(previous.unwrap_or(self.delay));
        (low, prev.saturating_mul(3).max(low))
    }

    /// The wait after failure `k`, given the previous wait (for decorrelated jitter).
    pub fn wait<R: Rng + ?Sized>(&self, k: u64, previous: Option<Duration>, rng: &mut R) -> Wait {
        if self.jitter == Jitter::Decorrelated {
            let (low, high) = self.decorrelated_range(previous);
            let chosen = rng.random_range(low..=high);
            let cap = nanos(self.max_delay);
            return Wait {
                base: Duration::from_nanos(high.min(cap)),
                delay: Duration::from_nanos(chosen.min(cap)),
                requested: None,
                clock: None,
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
            requested: None,
            clock: None,
        }
    }

    /// The top of the range that the wait after failure `k` is drawn from, given the previous
    /// wait: the wait itself without jitter, the longest it can be with any. It is the `base`
    /// that `wait` returns, without drawing anything.
    pub fn top(&self, k: u64, previous: Option<Duration>) -> Duration {
        if self.jitter == Jitter::Decorrelated {
            let (_, high) = self.decorrelated_range(previous);
            return Duration::from_nanos(high.min(nanos(self.max_delay)));
        }
        self.capped_base(k)
    }

    /// The shortest the first wait can be, whatever the random source draws.
    pub fn shortest_first(&self) -> Duration {
        let d = self.capped_base(1);
        match self.jitter {
            Jitter::None => d,
            Jitter::Full => Duration::ZERO,
            Jitter::Equal => Duration::from_nanos(nanos(d) / 2),
            Jitter::Decorrelated => self.delay.min(self.max_delay),
        }
    }

    /// True when the random source decides some wait: a jitter is chosen and at least one of
    /// its ranges holds more than one value. Waits capped at zero, or decorrelated waits whose
    /// `--delay` is at or above the cap, are the same whatever is drawn.
    pub fn is_random(&self) -> bool {
        let some_base = || match &self.backoff {
            Backoff::List(list) => list.iter().any(|d| !d.is_zero()),
            _ => !self.delay.is_zero(),
        };
        match self.jitter {
            Jitter::None => false,
            Jitter::Full | Jitter::Equal => !self.max_delay.is_zero() && some_base(),
            Jitter::Decorrelated => !self.delay.is_zero() && self.delay < self.max_delay,
        }
    }

    /// The most that the first `n` waits can add up to, whatever the random source draws:
    /// every wait at the top of its range (decorrelated jitter's tops feed each other, and a
    /// higher previous wait only raises the next top). Saturates, and takes a bounded number
    /// of steps however large `n` is: once the tops stop changing, the rest is one product.
    pub fn longest_waits(&self, n: u64) -> Duration {
        /// Tops summed one by one before a growing backoff is summed in closed form.
        const EXACT_STEPS: u64 = 10_000;
        let mut total: u128 = 0;
        let mut previous = None;
        let mut k = 1;
        while k <= n {
            let top = self.top(k, previous);
            if self.steady_from(k, top) {
                let rest = u128::from(n - k + 1);
                total = total.saturating_add(top.as_nanos().saturating_mul(rest));
                break;
            }
            if k > EXACT_STEPS && !matches!(self.backoff, Backoff::List(_)) {
                total = total.saturating_add(self.growing_tail(k, n));
                break;
            }
            total = total.saturating_add(top.as_nanos());
            previous = Some(top);
            k += 1;
        }
        from_nanos_saturating(total)
    }

    /// True when every top from the `k`-th on is `top`, the `k`-th.
    fn steady_from(&self, k: u64, top: Duration) -> bool {
        if self.jitter == Jitter::Decorrelated {
            // Each top follows from the one before alone (three times it, at least `--delay`,
            // at most the cap), and never shrinks: once a top leads to itself, it repeats.
            return self.top(k.saturating_add(1), Some(top)) == top;
        }
        match &self.backoff {
            Backoff::Constant => true,
            Backoff::List(list) => usize::try_from(k).map_or(true, |k| k >= list.len()),
            Backoff::Exponential { factor } => {
                top >= self.max_delay || self.delay.is_zero() || *factor <= 1.0
            }
            // The multiplier stops growing at u32::MAX (see `capped_base`).
            Backoff::Linear => {
                top >= self.max_delay || self.delay.is_zero() || k >= u64::from(u32::MAX)
            }
        }
    }

    /// The sum, in nanoseconds, of the tops `k..=n` of a backoff that still grows at `k`
    /// (linear or exponential, without decorrelated jitter): the growing part in closed form,
    /// then the steady part as one product. Exact for linear; for exponential it is the
    /// geometric series in floating point, as precise as `capped_base` itself.
    fn growing_tail(&self, k: u64, n: u64) -> u128 {
        let cap = self.max_delay;
        // The first try number whose top no longer grows: found by bisection, since the tops
        // never shrink.
        let (mut lo, mut hi) = (k, n.saturating_add(1));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.steady_from(mid, self.capped_base(mid)) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        let steady_at = lo;
        let growing = steady_at - k;
        let d = self.delay.as_nanos();
        let sum = match &self.backoff {
            Backoff::Linear => {
                // delay × (k + … + (steady_at − 1)).
                let upto = |x: u128| x * (x + 1) / 2;
                let ks = upto(u128::from(steady_at - 1)) - upto(u128::from(k - 1));
                d.saturating_mul(ks)
            }
            Backoff::Exponential { factor } => {
                // delay × f^(k−1) × (f^growing − 1) / (f − 1), with f − 1 exact near 1.
                let step = factor - 1.0;
                let first = nanos(self.delay) as f64 * factor.powf((k - 1) as f64);
                let series = (growing as f64 * step.ln_1p()).exp_m1() / step;
                (first * series) as u128
            }
            Backoff::Constant | Backoff::List(_) => d.saturating_mul(u128::from(growing)),
        };
        let rest = u128::from(n.saturating_sub(steady_at) + u64::from(steady_at <= n));
        let steady = self.capped_base(steady_at).min(cap).as_nanos();
        sum.saturating_add(steady.saturating_mul(rest))
    }
}

/// A sum of nanoseconds as a duration, `Duration::MAX` past it.
pub(super) fn from_nanos_saturating(total: u128) -> Duration {
    const NANOS: u128 = 1_000_000_000;
    match u64::try_from(total / NANOS) {
        Ok(secs) => Duration::new(secs, (total % NANOS) as u32),
        Err(_) => Duration::MAX,
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

    /// The tops of the first `n` waits, one by one.
    fn tops_one_by_one(p: &WaitPolicy, n: u64) -> Duration {
        let mut previous = None;
        let mut total = Duration::ZERO;
        for k in 1..=n {
            let top = p.top(k, previous);
            total += top;
            previous = Some(top);
        }
        total
    }

    #[test]
    fn the_longest_waits_of_the_seed_example_add_up_to_122_seconds() {
        let p = policy(
            Backoff::Exponential { factor: 2.0 },
            s(2),
            s(60),
            Jitter::Full,
        );
        assert_eq!(p.longest_waits(6), s(122));
        assert_eq!(p.longest_waits(0), Duration::ZERO);
        // Decorrelated tops triple from the delay up to the cap: 3, 9, 27, 60, 60.
        let p = policy(Backoff::Constant, s(1), s(60), Jitter::Decorrelated);
        assert_eq!(p.longest_waits(5), s(159));
        let p = policy(Backoff::List(vec![s(90), s(2)]), s(1), s(60), Jitter::None);
        assert_eq!(p.longest_waits(4), s(66));
    }

    #[test]
    fn the_longest_waits_take_a_few_steps_for_any_number_of_tries() {
        let p = policy(
            Backoff::Exponential { factor: 10.0 },
            s(1),
            s(60),
            Jitter::None,
        );
        assert_eq!(p.longest_waits(3_999_999_999), s(11 + 60 * 3_999_999_997));
        let p = policy(Backoff::Linear, s(1), Duration::MAX, Jitter::Equal);
        assert_eq!(p.longest_waits(u64::MAX), Duration::MAX);
        let p = policy(
            Backoff::Exponential { factor: 1e300 },
            Duration::MAX,
            Duration::MAX,
            Jitter::Decorrelated,
        );
        assert_eq!(p.longest_waits(u64::MAX), Duration::MAX);
        let p = policy(
            Backoff::Constant,
            Duration::from_nanos(1),
            Duration::MAX,
            Jitter::Decorrelated,
        );
        assert_eq!(p.longest_waits(u64::MAX), Duration::MAX);
    }

    #[test]
    fn a_slowly_growing_backoff_is_summed_as_it_would_be_one_by_one() {
        // Linear from 1ms reaches the 60s cap at try 60,000: past the exact steps.
        let p = policy(
            Backoff::Linear,
            Duration::from_millis(1),
            s(60),
            Jitter::None,
        );
        for n in [10_000, 10_001, 59_999, 60_000, 60_001, 100_000] {
            assert_eq!(p.longest_waits(n), tops_one_by_one(&p, n), "{n}");
        }
        // Exponential ×1.0001 from 1ms reaches 60s near try 110,000: the same to a millionth.
        let p = policy(
            Backoff::Exponential { factor: 1.0001 },
            Duration::from_millis(1),
            s(60),
            Jitter::Full,
        );
        for n in [50_000, 200_000] {
            let closed = p.longest_waits(n).as_secs_f64();
            let summed = tops_one_by_one(&p, n).as_secs_f64();
            assert!(
                (closed - summed).abs() <= summed * 1e-6,
                "{n}: {closed} {summed}"
            );
        }
    }

    #[test]
    fn the_shortest_first_wait_is_the_bottom_of_its_range() {
        let d = |jitter| policy(Backoff::Constant, s(10), s(60), jitter).shortest_first();
        assert_eq!(d(Jitter::None), s(10));
        assert_eq!(d(Jitter::Full), Duration::ZERO);
        assert_eq!(d(Jitter::Equal), s(5));
        assert_eq!(d(Jitter::Decorrelated), s(10));
        let p = policy(Backoff::Constant, s(10), s(1), Jitter::Decorrelated);
        assert_eq!(p.shortest_first(), s(1));
    }

    #[test]
    fn only_a_jitter_with_room_to_move_is_random() {
        let exp = Backoff::Exponential { factor: 2.0 };
        assert!(!policy(exp.clone(), s(1), s(60), Jitter::None).is_random());
        assert!(policy(exp.clone(), s(1), s(60), Jitter::Full).is_random());
        assert!(policy(exp.clone(), s(1), s(60), Jitter::Equal).is_random());
        assert!(policy(exp.clone(), s(1), s(60), Jitter::Decorrelated).is_random());
        // Every wait capped at zero, a zero delay, or a decorrelated delay at the cap.
        assert!(!policy(exp.clone(), s(1), Duration::ZERO, Jitter::Full).is_random());
        assert!(!policy(exp.clone(), Duration::ZERO, s(60), Jitter::Equal).is_random());
        assert!(!policy(exp, s(60), s(60), Jitter::Decorrelated).is_random());
        let list = Backoff::List(vec![Duration::ZERO, s(2)]);
        assert!(policy(list, s(1), s(60), Jitter::Full).is_random());
        let zeros = Backoff::List(vec![Duration::ZERO]);
        assert!(!policy(zeros, s(1), s(60), Jitter::Full).is_random());
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
