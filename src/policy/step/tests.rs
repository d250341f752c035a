//! The step driven by arbitrary sequences of tries: every figure the run reports agrees with
//! the decisions, and a try held back neither ends nor extends a `--consecutive` streak.

use std::time::Duration;

use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;
use crate::policy::backoff::{Backoff, Jitter, WaitPolicy};
use crate::policy::classify::Classifier;
use crate::policy::schedule::GiveUp;

fn policy(max_tries: Option<u64>, consecutive: Option<u64>) -> Policy {
    Policy {
        max_tries,
        waits: WaitPolicy {
            backoff: Backoff::Constant,
            delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
            jitter: Jitter::Full,
        },
        classifier: Classifier::default(),
        timeout: None,
        limit: None,
        consecutive,
    }
}

fn ran(code: u8) -> TryResult {
    TryResult::Ran {
        outcome: Outcome::Exit(code),
        output: OutputMatch::default(),
        by_limit: false,
    }
}

/// Runs `results` through the step until it decides other than a retry; returns the state and
/// the last decision.
fn drive<'p>(p: &'p Policy, results: &[TryResult]) -> (RunState<'p>, Vec<Step>) {
    let mut state = RunState::new(p, None);
    let mut rng = StdRng::seed_from_u64(7);
    let mut steps = Vec::new();
    for (i, result) in results.iter().enumerate() {
        let now = Duration::from_secs(i as u64);
        state.start_try(now);
        let step = state.decide(*result, now, &mut rng);
        let go_on = matches!(step.decision, Decision::Retry(_));
        steps.push(step);
        if !go_on {
            break;
        }
    }
    (state, steps)
}

#[test]
fn a_try_held_back_neither_ends_nor_extends_a_streak() {
    let p = policy(Some(10), Some(2));
    let (state, steps) = drive(&p, &[ran(0), TryResult::Held]);
    // The schedule's count, which its next decision reads, is what the run reports.
    assert_eq!(state.streak(), 1);
    assert!(!state.success_would_be_short());
    assert!(matches!(steps[1].decision, Decision::Retry(_)));
    let (state, steps) = drive(&p, &[ran(0), TryResult::Held, ran(0)]);
    assert_eq!(steps[2].decision, Decision::Succeed);
    assert_eq!(state.streak(), 2);
    let counts = state.counts();
    assert_eq!((counts.counted, counts.ran, counts.held), (3, 2, 1));
}

#[test]
fn a_held_try_that_ends_the_tries_gives_up_as_held_and_counts_for_nothing() {
    let p = policy(Some(2), None);
    let (state, steps) = drive(&p, &[ran(1), TryResult::Held]);
    assert_eq!(steps[1].decision, Decision::GiveUp(GiveUp::Held));
    assert_eq!(steps[1].count, None);
    assert!(!state.last_try_failed());
    assert_eq!(state.last_ran(), Some(Outcome::Exit(1)));
    assert_eq!(state.last_failed(), Some(Outcome::Exit(1)));
}

fn result() -> impl Strategy<Value = TryResult> {
    prop_oneof![
        3 => (0u8..3).prop_map(ran),
        1 => Just(TryResult::Held),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn the_figures_agree_with_the_decisions(
        results in prop::collection::vec(result(), 1..12),
        max_tries in prop::option::of(1u64..10),
        consecutive in prop::option::of(1u64..4),
    ) {
        let p = policy(max_tries, consecutive);
        let (state, steps) = drive(&p, &results);
        let taken = &results[..steps.len()];
        let counts = state.counts();
        // Every try is counted once, as having run or as held back.
        prop_assert_eq!(counts.counted, steps.len() as u64);
        prop_assert_eq!(counts.counted, state.schedule().tries());
        prop_assert_eq!(counts.ran + counts.held, counts.counted);
        let held = taken.iter().filter(|r| **r == TryResult::Held).count() as u64;
        prop_assert_eq!(counts.held, held);
        let failed = taken.iter().filter(|r| matches!(r, TryResult::Ran { outcome, .. } if *outcome != Outcome::Exit(0))).count() as u64;
        prop_assert_eq!(counts.failed, failed);
        // The streak: the successes since the last failure, held tries skipped.
        let streak = taken
            .iter()
            .rev()
            .filter(|r| **r != TryResult::Held)
            .take_while(|r| **r == ran(0))
            .count() as u64;
        prop_assert_eq!(state.streak(), consecutive.map_or(0, |_| streak));
        let last = steps.last().unwrap();
        // A run succeeds exactly when the streak is long enough (1 without --consecutive).
        let needed = consecutive.unwrap_or(1);
        let succeeded = last.decision == Decision::Succeed;
        prop_assert_eq!(succeeded, *taken.last().unwrap() == ran(0) && streak >= needed);
        // Only a try that ran counts for the quota, and the hooks run only after a failure.
        for (step, r) in steps.iter().zip(taken) {
            prop_assert_eq!(step.count.is_none(), *r == TryResult::Held);
            prop_assert_eq!(step.verdict.is_none(), *r == TryResult::Held);
        }
        let last_failed = matches!(taken.last(), Some(TryResult::Ran { outcome, .. }) if *outcome != Outcome::Exit(0));
        prop_assert_eq!(state.last_try_failed(), last_failed);
        // The tries never go past --tries.
        if let Some(max) = max_tries {
            prop_assert!(counts.counted <= max);
        }
    }
}
