//! Options that defeat each other (docs/dry-run.md#dry-run): each accepted on its own, together
//! they make one of them do nothing, or make retrying impossible. The dry run warns about them.

use std::time::Duration;

use super::backoff::{Backoff, Jitter, WaitPolicy};
use super::budget::{self, BudgetExceeded, Limit};
use super::schedule::Policy;

/// One pair (or set) of options that work against each other.
#[derive(Clone, Debug, PartialEq)]
pub enum Conflict {
    /// `--delay` above `--max-delay`: every wait is cut to the cap, so the backoff never grows.
    DelayAboveCap {
        delay: Duration,
        max_delay: Duration,
    },
    /// Values of `--delays` above `--max-delay`, which cuts them to it.
    ListAboveCap {
        over: Vec<Duration>,
        max_delay: Duration,
    },
    /// A `--timeout` longer than the budget or deadline: the end of the run stops the first try
    /// before its timeout, and no retry can fit its whole timeout before the end (`retries`:
    /// the try limit would allow one).
    TimeoutPastEnd {
        timeout: Duration,
        limit: Limit,
        retries: bool,
    },
    /// No retry fits before the end even when the first try fails at once and the first wait
    /// is the shortest the jitter draws: the run has one try, whatever `--tries` says.
    NoRetryFits(BudgetExceeded),
    /// A `--backoff` or `--factor` given with decorrelated jitter, which computes each wait
    /// from the previous one and ignores them.
    BackoffIgnored(Backoff),
}

impl Conflict {
    /// The `kind` field of the dry run's JSON `warning` event.
    pub fn kind(&self) -> &'static str {
        match self {
            Conflict::DelayAboveCap { .. } => "delay_above_max_delay",
            Conflict::ListAboveCap { .. } => "delays_above_max_delay",
            Conflict::TimeoutPastEnd { .. } => "timeout_past_end",
            Conflict::NoRetryFits(_) => "no_retry_fits",
            Conflict::BackoffIgnored(_) => "backoff_ignored",
        }
    }
}

/// The conflicts among the options of `policy`, in the order of the options.
pub fn conflicts(policy: &Policy) -> Vec<Conflict> {
    [
        above_cap(&policy.waits),
        backoff_ignored(&policy.waits),
        past_the_end(policy),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Waits that the cap cuts: the listed waits above it, or a first wait above it.
fn above_cap(waits: &WaitPolicy) -> Option<Conflict> {
    match &waits.backoff {
        Backoff::List(list) => {
            let over: Vec<Duration> = list
                .iter()
                .copied()
                .filter(|d| *d > waits.max_delay)
                .collect();
            (!over.is_empty()).then_some(Conflict::ListAboveCap {
                over,
                max_delay: waits.max_delay,
            })
        }
        _ if waits.delay > waits.max_delay => Some(Conflict::DelayAboveCap {
            delay: waits.delay,
            max_delay: waits.max_delay,
        }),
        _ => None,
    }
}

/// A backoff other than the default, which decorrelated jitter ignores.
fn backoff_ignored(waits: &WaitPolicy) -> Option<Conflict> {
    (waits.jitter == Jitter::Decorrelated
        && waits.backoff != (Backoff::Exponential { factor: 2.0 }))
    .then(|| Conflict::BackoffIgnored(waits.backoff.clone()))
}

/// The end of the run (budget or deadline) before the first try's timeout, or before any
/// retry could start.
fn past_the_end(policy: &Policy) -> Option<Conflict> {
    let limit = policy.limit?;
    let retries = policy.max_tries != Some(1);
    match policy.timeout {
        Some(timeout) if timeout > limit.at => Some(Conflict::TimeoutPastEnd {
            timeout,
            limit,
            retries,
        }),
        _ if retries => {
            let first = policy.waits.shortest_first();
            budget::check_retry(Some(limit), Duration::ZERO, first, policy.timeout)
                .err()
                .map(Conflict::NoRetryFits)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Classifier, WaitPolicy};

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn policy(backoff: Backoff, delay: u64, max: u64, jitter: Jitter) -> Policy {
        Policy {
            max_tries: Some(3),
            waits: WaitPolicy {
                backoff,
                delay: s(delay),
                max_delay: s(max),
                jitter,
            },
            classifier: Classifier::default(),
            timeout: None,
            limit: None,
            consecutive: None,
        }
    }

    fn exponential() -> Backoff {
        Backoff::Exponential { factor: 2.0 }
    }

    #[test]
    fn the_defaults_conflict_with_nothing() {
        assert_eq!(conflicts(&policy(exponential(), 1, 60, Jitter::Full)), []);
    }

    #[test]
    fn a_delay_above_the_cap_is_cut_to_it() {
        assert_eq!(
            conflicts(&policy(exponential(), 10, 1, Jitter::Full)),
            [Conflict::DelayAboveCap {
                delay: s(10),
                max_delay: s(1)
            }]
        );
        // Equal is fine: the first wait is the cap, as asked.
        assert_eq!(conflicts(&policy(exponential(), 5, 5, Jitter::None)), []);
    }

    #[test]
    fn listed_waits_above_the_cap_are_named() {
        let list = Backoff::List(vec![s(2), s(90), s(30), s(120)]);
        // The list's waits are its own: the default --delay above a small cap is no conflict.
        assert_eq!(
            conflicts(&policy(list, 100, 60, Jitter::None)),
            [Conflict::ListAboveCap {
                over: vec![s(90), s(120)],
                max_delay: s(60)
            }]
        );
    }

    #[test]
    fn decorrelated_jitter_ignores_a_chosen_backoff() {
        assert_eq!(
            conflicts(&policy(Backoff::Linear, 1, 60, Jitter::Decorrelated)),
            [Conflict::BackoffIgnored(Backoff::Linear)]
        );
        let factor = Backoff::Exponential { factor: 3.0 };
        assert_eq!(
            conflicts(&policy(factor.clone(), 1, 60, Jitter::Decorrelated)),
            [Conflict::BackoffIgnored(factor)]
        );
        assert_eq!(
            conflicts(&policy(exponential(), 1, 60, Jitter::Decorrelated)),
            []
        );
    }

    #[test]
    fn a_timeout_longer_than_the_budget_is_never_reached() {
        let mut p = policy(exponential(), 1, 60, Jitter::Full);
        p.timeout = Some(s(20));
        p.limit = Limit::earliest(Some(s(10)), None);
        let limit = p.limit.unwrap();
        assert_eq!(
            conflicts(&p),
            [Conflict::TimeoutPastEnd {
                timeout: s(20),
                limit,
                retries: true
            }]
        );
        // With one try it still never fires.
        p.max_tries = Some(1);
        assert_eq!(
            conflicts(&p),
            [Conflict::TimeoutPastEnd {
                timeout: s(20),
                limit,
                retries: false
            }]
        );
    }

    #[test]
    fn a_budget_with_no_room_for_one_retry_is_named_with_its_numbers() {
        // A timeout as long as the budget: even a first try that fails at once and the
        // shortest equal-jitter wait (500ms) leave no room for another whole timeout.
        let mut p = policy(exponential(), 1, 60, Jitter::Equal);
        p.timeout = Some(s(10));
        p.limit = Limit::earliest(Some(s(10)), None);
        let found = conflicts(&p);
        assert!(
            matches!(&found[..], [Conflict::NoRetryFits(e)]
                if e.to_string() == "budget: 0s used + 500ms wait + 10s timeout > 10s"),
            "{found:?}"
        );
        // A first wait as long as the budget: the retry could not start before the end.
        let mut p = policy(Backoff::Constant, 10, 60, Jitter::None);
        p.limit = Limit::earliest(Some(s(5)), None);
        let found = conflicts(&p);
        assert!(
            matches!(&found[..], [Conflict::NoRetryFits(e)]
                if e.to_string() == "budget: 0s used + 10s wait ≥ 5s"),
            "{found:?}"
        );
        // With one try, there is no retry to miss; full jitter may draw a wait of 0.
        p.max_tries = Some(1);
        assert_eq!(conflicts(&p), []);
        p.max_tries = Some(3);
        p.waits.jitter = Jitter::Full;
        assert_eq!(conflicts(&p), []);
    }
}
