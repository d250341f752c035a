//! The worst case of a whole run (docs/dry-run.md#dry-run): how long it lasts when every try fails
//! and takes its whole timeout, and every wait is the longest that the jitter can draw.

use std::time::Duration;

use super::backoff::from_nanos_saturating;
use super::budget::Limit;
use super::schedule::Policy;

/// How long a run can last at most.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorstCase {
    /// `stagger + tries × timeout + waits`, which the budget or deadline (if any) leaves room
    /// for. `stagger` is the most `--stagger` can draw before the first try.
    Sum {
        stagger: Duration,
        tries: u64,
        timeout: Duration,
        waits: Duration,
        total: Duration,
    },
    /// The budget or deadline ends the run first. `sum` is what the tries and waits could take
    /// without it, when that is bounded at all.
    Limit { limit: Limit, sum: Option<Duration> },
    /// Nothing bounds the run: no budget or deadline, and either no try limit or no timeout
    /// (a try may then run for ever). `waits` is the most the waits add up to when the tries
    /// are limited.
    Unbounded { waits: Option<Duration> },
}

impl WorstCase {
    /// The longest the run can take, if anything bounds it.
    pub fn total(&self) -> Option<Duration> {
        match *self {
            WorstCase::Sum { total, .. } => Some(total),
            WorstCase::Limit { limit, .. } => Some(limit.at),
            WorstCase::Unbounded { .. } => None,
        }
    }

    /// The most the waits of `policy`, whose worst case this is, add up to, when the tries are
    /// limited: what the run waits in all when the budget or deadline does not end it first.
    pub fn waits(&self, policy: &Policy) -> Option<Duration> {
        match *self {
            WorstCase::Sum { waits, .. } => Some(waits),
            WorstCase::Unbounded { waits } => waits,
            WorstCase::Limit { .. } => policy
                .max_tries
                .map(|n| policy.waits.longest_waits(n.saturating_sub(1))),
        }
    }
}

/// The worst case of `policy`, after a first wait of at most `stagger` (`--stagger`, which
/// counts against the budget as any wait does). Time spent past a try's timeout (its kill grace
/// period) and in hooks is not counted: the reference assumes a try takes its timeout
/// (docs/dry-run.md#worst-case).
pub fn worst_case(policy: &Policy, stagger: Duration) -> WorstCase {
    // No wait follows the last try.
    let waits = policy
        .max_tries
        .map(|n| policy.waits.longest_waits(n.saturating_sub(1)));
    let sum = match (policy.max_tries, policy.timeout, waits) {
        (Some(tries), Some(timeout), Some(waits)) => {
            let tries_take = saturating_mul(timeout, tries);
            let total = stagger.saturating_add(tries_take).saturating_add(waits);
            Some((tries, timeout, waits, total))
        }
        _ => None,
    };
    match (sum, policy.limit) {
        (Some((tries, timeout, waits, total)), limit)
            if limit.is_none_or(|limit| total <= limit.at) =>
        {
            WorstCase::Sum {
                stagger,
                tries,
                timeout,
                waits,
                total,
            }
        }
        (sum, Some(limit)) => WorstCase::Limit {
            limit,
            sum: sum.map(|(.., total)| total),
        },
        (_, None) => WorstCase::Unbounded { waits },
    }
}

/// `d × n`, saturating (`Duration` multiplies by a `u32` only).
fn saturating_mul(d: Duration, n: u64) -> Duration {
    from_nanos_saturating(d.as_nanos().saturating_mul(u128::from(n)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Backoff, Classifier, Jitter, LimitSource, WaitPolicy};

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn policy(
        tries: Option<u64>,
        timeout: Option<Duration>,
        budget: Option<Duration>,
        jitter: Jitter,
    ) -> Policy {
        Policy {
            max_tries: tries,
            waits: WaitPolicy {
                backoff: Backoff::Exponential { factor: 2.0 },
                delay: s(2),
                max_delay: s(60),
                jitter,
            },
            classifier: Classifier::default(),
            timeout,
            limit: Limit::earliest(budget, None),
            consecutive: None,
        }
    }

    #[test]
    fn tries_times_their_timeout_plus_the_longest_waits() {
        // The seed example's waits, 122s, and seven tries of 30s.
        let p = policy(Some(7), Some(s(30)), None, Jitter::None);
        assert_eq!(
            worst_case(&p, Duration::ZERO),
            WorstCase::Sum {
                stagger: Duration::ZERO,
                tries: 7,
                timeout: s(30),
                waits: s(122),
                total: s(332)
            }
        );
        // Jitter draws at most the capped base: the worst case is the same.
        let p = policy(Some(7), Some(s(30)), None, Jitter::Full);
        assert_eq!(worst_case(&p, Duration::ZERO).total(), Some(s(332)));
        // A budget that leaves room for it all changes nothing.
        let p = policy(Some(7), Some(s(30)), Some(s(332)), Jitter::Equal);
        assert_eq!(worst_case(&p, Duration::ZERO).total(), Some(s(332)));
    }

    #[test]
    fn a_shorter_budget_is_the_worst_case() {
        let p = policy(Some(7), Some(s(30)), Some(s(300)), Jitter::Full);
        let limit = Limit {
            at: s(300),
            source: LimitSource::Budget,
        };
        assert_eq!(
            worst_case(&p, Duration::ZERO),
            WorstCase::Limit {
                limit,
                sum: Some(s(332))
            }
        );
        // Without a timeout or a try limit, only the budget bounds the run.
        for p in [
            policy(Some(7), None, Some(s(300)), Jitter::Full),
            policy(None, Some(s(30)), Some(s(300)), Jitter::Full),
        ] {
            assert_eq!(
                worst_case(&p, Duration::ZERO),
                WorstCase::Limit { limit, sum: None }
            );
        }
    }

    #[test]
    fn without_a_budget_a_missing_timeout_or_try_limit_leaves_the_run_unbounded() {
        let p = policy(Some(7), None, None, Jitter::None);
        assert_eq!(
            worst_case(&p, Duration::ZERO),
            WorstCase::Unbounded {
                waits: Some(s(122))
            }
        );
        let p = policy(None, Some(s(30)), None, Jitter::None);
        assert_eq!(
            worst_case(&p, Duration::ZERO),
            WorstCase::Unbounded { waits: None }
        );
        assert_eq!(worst_case(&p, Duration::ZERO).total(), None);
    }

    #[test]
    fn one_try_has_no_wait_and_huge_counts_saturate() {
        let p = policy(Some(1), Some(s(30)), None, Jitter::Full);
        assert_eq!(worst_case(&p, Duration::ZERO).total(), Some(s(30)));
        let p = policy(Some(u64::MAX), Some(s(30)), None, Jitter::Full);
        assert_eq!(worst_case(&p, Duration::ZERO).total(), Some(Duration::MAX));
        let p = policy(Some(5_000_000_000), Some(s(1)), None, Jitter::None);
        assert_eq!(
            worst_case(&p, Duration::ZERO).total(),
            Some(s(5_000_000_000) + s(2 + 4 + 8 + 16 + 32) + s(60 * 4_999_999_994))
        );
    }

    #[test]
    fn the_longest_stagger_comes_before_the_first_try() {
        let p = policy(Some(1), Some(s(1)), None, Jitter::Full);
        assert_eq!(
            worst_case(&p, s(5)),
            WorstCase::Sum {
                stagger: s(5),
                tries: 1,
                timeout: s(1),
                waits: Duration::ZERO,
                total: s(6)
            }
        );
        // It counts against the budget as any wait does.
        let p = policy(Some(1), Some(s(1)), Some(s(5)), Jitter::Full);
        assert!(matches!(
            worst_case(&p, s(4)),
            WorstCase::Sum { total, .. } if total == s(5)
        ));
        assert_eq!(
            worst_case(&p, s(4) + Duration::from_millis(1)).total(),
            Some(s(5))
        );
        assert!(matches!(
            worst_case(&p, s(4) + Duration::from_millis(1)),
            WorstCase::Limit { sum: Some(sum), .. } if sum == s(5) + Duration::from_millis(1)
        ));
    }

    #[test]
    fn the_waits_are_the_longest_the_tries_allow_whatever_ends_the_run() {
        // The seed example's waits, 122s, under each kind of worst case.
        for (timeout, budget) in [
            (Some(s(30)), None),
            (None, None),
            (Some(s(30)), Some(s(60))),
        ] {
            let p = policy(Some(7), timeout, budget, Jitter::None);
            let worst = worst_case(&p, Duration::ZERO);
            assert_eq!(worst.waits(&p), Some(s(122)), "{worst:?}");
        }
        // Without a try limit the waits have no bound.
        for budget in [None, Some(s(60))] {
            let p = policy(None, Some(s(30)), budget, Jitter::None);
            assert_eq!(worst_case(&p, Duration::ZERO).waits(&p), None);
        }
    }
}
