//! Properties of the waits over many random option sets (proptest), with seeded random
//! sources. Nothing here sleeps or reads a clock.

use std::time::Duration;

use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::StdRng;
use retry::policy::{Backoff, Jitter, WaitPolicy};

fn jitter() -> impl Strategy<Value = Jitter> {
    prop_oneof![
        Just(Jitter::None),
        Just(Jitter::Full),
        Just(Jitter::Equal),
        Just(Jitter::Decorrelated),
    ]
}

fn backoff() -> impl Strategy<Value = Backoff> {
    prop_oneof![
        (1.0f64..100.0).prop_map(|factor| Backoff::Exponential { factor }),
        Just(Backoff::Linear),
        Just(Backoff::Constant),
        prop::collection::vec(0u64..10_000_000_000_000, 1..6)
            .prop_map(|v| Backoff::List(v.into_iter().map(Duration::from_nanos).collect())),
    ]
}

fn nanos() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        (0u64..u64::MAX).prop_map(Duration::from_nanos),
        (0u64..100_000_000_000).prop_map(Duration::from_nanos),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_wait_lies_within_its_jitter_bounds(
        backoff in backoff(),
        jitter in jitter(),
        delay in nanos(),
        max_delay in nanos(),
        seed in any::<u64>(),
        first_try in prop_oneof![Just(1u64), 1u64..u64::MAX],
    ) {
        let policy = WaitPolicy { backoff, delay, max_delay, jitter };
        let mut rng = StdRng::seed_from_u64(seed);
        let mut previous: Option<Duration> = None;
        for k in first_try..first_try.saturating_add(30) {
            let wait = policy.wait(k, previous, &mut rng);
            let d = wait.delay;
            prop_assert!(d <= max_delay, "{d:?} over the cap {max_delay:?}");
            prop_assert!(wait.base <= max_delay);
            match jitter {
                Jitter::None => prop_assert_eq!(d, wait.base),
                Jitter::Full => prop_assert!(d <= wait.base),
                Jitter::Equal => prop_assert!(d >= wait.base / 2 && d <= wait.base),
                Jitter::Decorrelated => {
                    let prev = previous.unwrap_or(delay);
                    let high = prev.saturating_mul(3).max(delay).min(max_delay);
                    prop_assert!(d >= delay.min(max_delay) && d <= high,
                        "{d:?} outside [{delay:?}, {high:?}]");
                }
            }
            previous = Some(d);
        }
    }

    #[test]
    fn no_draw_of_the_waits_adds_up_to_more_than_the_longest_waits(
        backoff in backoff(),
        jitter in jitter(),
        delay in nanos(),
        max_delay in nanos(),
        seed in any::<u64>(),
        n in 0u64..60,
    ) {
        let policy = WaitPolicy { backoff, delay, max_delay, jitter };
        let mut rng = StdRng::seed_from_u64(seed);
        let mut previous: Option<Duration> = None;
        let (mut drawn, mut tops) = (Duration::ZERO, Duration::ZERO);
        let mut top_before: Option<Duration> = None;
        for k in 1..=n {
            let wait = policy.wait(k, previous, &mut rng);
            drawn = drawn.saturating_add(wait.delay);
            previous = Some(wait.delay);
            let top = policy.top(k, top_before);
            tops = tops.saturating_add(top);
            top_before = Some(top);
        }
        let longest = policy.longest_waits(n);
        prop_assert_eq!(longest, tops);
        prop_assert!(drawn <= longest, "{drawn:?} over {longest:?}");
        if jitter == Jitter::None {
            prop_assert_eq!(drawn, longest);
        }
        if !policy.is_random() {
            let mut again = StdRng::seed_from_u64(seed.wrapping_add(1));
            let mut previous = None;
            let redrawn = (1..=n).fold(Duration::ZERO, |sum, k| {
                let w = policy.wait(k, previous, &mut again);
                previous = Some(w.delay);
                sum.saturating_add(w.delay)
            });
            prop_assert_eq!(redrawn, drawn, "not random, yet another seed waits otherwise");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_waits(
        backoff in backoff(),
        jitter in jitter(),
        delay in nanos(),
        max_delay in nanos(),
        seed in any::<u64>(),
    ) {
        let policy = WaitPolicy { backoff, delay, max_delay, jitter };
        let run = || {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut previous = None;
            (1..20).map(|k| {
                let w = policy.wait(k, previous, &mut rng);
                previous = Some(w.delay);
                w.delay
            }).collect::<Vec<_>>()
        };
        prop_assert_eq!(run(), run());
    }
}
