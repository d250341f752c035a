//! Budget and deadline arithmetic (docs/policy.md#budget-and-deadline). Every time is a duration
//! since the run started, passed in by the caller: nothing here reads a clock.

use std::fmt;
use std::time::Duration;

use crate::duration::hms;

/// Which option set the end of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitSource {
    Budget,
    Deadline,
}

/// The end of the run, as a duration since its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub at: Duration,
    pub source: LimitSource,
}

impl Limit {
    /// The earlier of `--budget` and `--deadline` (already turned into time since start).
    pub fn earliest(budget: Option<Duration>, deadline: Option<Duration>) -> Option<Limit> {
        let budget = budget.map(|at| Limit {
            at,
            source: LimitSource::Budget,
        });
        let deadline = deadline.map(|at| Limit {
            at,
            source: LimitSource::Deadline,
        });
        match (budget, deadline) {
            (Some(b), Some(d)) => Some(if d.at < b.at { d } else { b }),
            (b, d) => b.or(d),
        }
    }
}

/// The time a try starting at `now` may run: `min(timeout, what is left of the budget)`, or
/// `None` when nothing bounds it.
pub fn try_limit(
    limit: Option<Limit>,
    now: Duration,
    timeout: Option<Duration>,
) -> Option<Duration> {
    let left = limit.map(|l| l.at.saturating_sub(now));
    match (timeout, left) {
        (Some(t), Some(left)) => Some(t.min(left)),
        (t, left) => t.or(left),
    }
}

/// True when the end of the run, not the per-try timeout, is what bounds a try starting at
/// `now`: a try stopped then was stopped by the budget or the deadline.
pub fn limit_ends_try(limit: Option<Limit>, now: Duration, timeout: Option<Duration>) -> bool {
    match (limit, timeout) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(l), Some(t)) => l.at.saturating_sub(now) < t,
    }
}

/// Why one more try does not fit: the rule that failed, with its numbers, for the log.
///
/// A retry must pass two rules (docs/policy.md#budget-and-deadline), and each is printed with the
/// one sign under which it fails, so that the message is exactly the comparison that was made:
/// - with `--timeout T`, its whole timeout must fit: `used + wait + T <= end`, so it fails on
///   `used + wait + T > end` (a timeout that ends at the very end still fits);
/// - it must start before the end, `used + wait < end`, so it fails on `used + wait ≥ end` (a
///   try that starts at the end would have no time at all to run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetExceeded {
    pub used: Duration,
    pub wait: Duration,
    /// The per-try timeout when the rule that failed is the timeout rule; `None` when it is the
    /// start rule.
    pub timeout: Option<Duration>,
    pub limit: Limit,
    /// The wait is the one the try's output asked for (`--delay-from-output`,
    /// docs/herd.md#pushback).
    pub requested: bool,
}

impl BudgetExceeded {
    /// The comparison that failed.
    pub fn describe(&self) -> String {
        let time = hms;
        let what = match self.limit.source {
            LimitSource::Budget => "budget",
            LimitSource::Deadline => "deadline",
        };
        let head = format!(
            "{what}: {} used + {} wait",
            time(self.used),
            time(self.wait)
        );
        let rule = match self.timeout {
            Some(t) => format!("{head} + {} timeout > {}", time(t), time(self.limit.at)),
            None => format!("{head} ≥ {}", time(self.limit.at)),
        };
        if !self.requested {
            return rule;
        }
        // What is left for a wait: the rest of the run, less one full try's timeout.
        let left = self
            .limit
            .at
            .saturating_sub(self.used)
            .saturating_sub(self.timeout.unwrap_or_default());
        format!(
            "the output asked for {} (--delay-from-output), more than the {} the {what} leaves ({rule})",
            time(self.wait),
            time(left)
        )
    }
}

impl fmt::Display for BudgetExceeded {
    /// `budget: 29s used + 800ms wait + 8s timeout > 30s`, `budget: 9s used + 1s wait ≥ 10s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// May a retry after `wait` start? With a per-try timeout, its whole timeout must fit:
/// `now + wait + timeout ≤ end`; and it must start before the end: `now + wait < end`. A sum
/// past the largest duration is past any end.
pub fn check_retry(
    limit: Option<Limit>,
    now: Duration,
    wait: Duration,
    timeout: Option<Duration>,
) -> Result<(), BudgetExceeded> {
    let Some(limit) = limit else { return Ok(()) };
    let exceeded = |timeout| BudgetExceeded {
        used: now,
        wait,
        timeout,
        limit,
        requested: false,
    };
    let start = now.checked_add(wait);
    if let Some(t) = timeout {
        if start
            .and_then(|s| s.checked_add(t))
            .is_none_or(|end| end > limit.at)
        {
            return Err(exceeded(Some(t)));
        }
    }
    if start.is_none_or(|s| s >= limit.at) {
        return Err(exceeded(None));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn budget(secs: u64) -> Option<Limit> {
        Limit::earliest(Some(s(secs)), None)
    }

    #[test]
    fn a_retry_needs_room_for_its_whole_timeout() {
        assert!(check_retry(budget(30), s(17), s(1), Some(s(8))).is_ok());
        assert!(check_retry(budget(30), s(21), s(1), Some(s(8))).is_ok());
        let err = check_retry(budget(30), s(26), s(1), Some(s(8))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "budget: 26s used + 1s wait + 8s timeout > 30s"
        );
    }

    #[test]
    fn without_a_timeout_a_retry_must_start_before_the_end() {
        assert!(check_retry(budget(10), s(8), s(1), None).is_ok());
        let err = check_retry(budget(10), s(9), s(1), None).unwrap_err();
        assert_eq!(err.to_string(), "budget: 9s used + 1s wait ≥ 10s");
        assert!(check_retry(None, Duration::MAX, Duration::MAX, Some(Duration::MAX)).is_ok());
    }

    #[test]
    fn each_rule_gives_up_exactly_when_its_printed_comparison_holds() {
        let ns = Duration::from_nanos(1);
        // The timeout rule: `used + wait + timeout > end` gives up; equal fits.
        assert!(check_retry(budget(30), s(21), s(1), Some(s(8))).is_ok());
        let err = check_retry(budget(30), s(21) + ns, s(1), Some(s(8))).unwrap_err();
        assert_eq!(err.timeout, Some(s(8)));
        assert!(err.to_string().contains(" + 8s timeout > 30s"), "{err}");
        // The start rule: `used + wait >= end` gives up; a try needs time to run.
        assert!(check_retry(budget(10), s(9) - ns, s(1), None).is_ok());
        let err = check_retry(budget(10), s(9), s(1), None).unwrap_err();
        assert_eq!(err.to_string(), "budget: 9s used + 1s wait ≥ 10s");
        // A zero timeout fits the timeout rule at the end, but not the start rule.
        let err = check_retry(budget(10), s(9), s(1), Some(Duration::ZERO)).unwrap_err();
        assert_eq!(err.to_string(), "budget: 9s used + 1s wait ≥ 10s");
    }

    #[test]
    fn a_wait_the_output_asked_for_is_named_with_what_the_budget_leaves() {
        let mut err = check_retry(budget(30), s(20), s(30), None).unwrap_err();
        err.requested = true;
        assert_eq!(
            err.to_string(),
            "the output asked for 30s (--delay-from-output), more than the 10s the budget leaves (budget: 20s used + 30s wait ≥ 30s)"
        );
        let mut err = check_retry(budget(30), s(20), s(5), Some(s(8))).unwrap_err();
        err.requested = true;
        assert_eq!(
            err.to_string(),
            "the output asked for 5s (--delay-from-output), more than the 2s the budget leaves (budget: 20s used + 5s wait + 8s timeout > 30s)"
        );
    }

    #[test]
    fn a_sum_past_the_largest_duration_is_past_any_end() {
        let end = Limit::earliest(Some(Duration::MAX), None);
        let err = check_retry(end, Duration::MAX - s(1), s(1), Some(s(1))).unwrap_err();
        assert_eq!(err.timeout, Some(s(1)));
        assert!(check_retry(end, Duration::MAX - s(2), s(1), None).is_ok());
    }

    #[test]
    fn saturates_instead_of_overflowing() {
        assert!(
            check_retry(
                budget(10),
                Duration::MAX,
                Duration::MAX,
                Some(Duration::MAX)
            )
            .is_err()
        );
    }

    #[test]
    fn a_try_runs_for_the_timeout_or_what_is_left() {
        assert_eq!(try_limit(None, s(5), None), None);
        assert_eq!(try_limit(None, s(5), Some(s(8))), Some(s(8)));
        assert_eq!(try_limit(budget(30), s(0), Some(s(60))), Some(s(30)));
        assert_eq!(try_limit(budget(30), s(20), Some(s(8))), Some(s(8)));
        assert_eq!(try_limit(budget(30), s(25), None), Some(s(5)));
        assert_eq!(try_limit(budget(30), s(40), None), Some(Duration::ZERO));
    }

    #[test]
    fn the_limit_ends_a_try_only_when_it_comes_before_the_timeout() {
        assert!(!limit_ends_try(None, s(5), Some(s(8))));
        assert!(limit_ends_try(budget(30), s(5), None));
        assert!(limit_ends_try(budget(30), s(25), Some(s(8))));
        assert!(!limit_ends_try(budget(30), s(20), Some(s(8))));
    }

    #[test]
    fn the_earlier_of_budget_and_deadline_wins() {
        let l = Limit::earliest(Some(s(30)), Some(s(20))).unwrap();
        assert_eq!((l.at, l.source), (s(20), LimitSource::Deadline));
        let l = Limit::earliest(Some(s(10)), Some(s(20))).unwrap();
        assert_eq!((l.at, l.source), (s(10), LimitSource::Budget));
        assert_eq!(Limit::earliest(None, None), None);
    }
}
