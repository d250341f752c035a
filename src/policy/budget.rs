//! Budget and deadline arithmetic (spec 4.4). Every time is a duration since the run started,
//! passed in by the caller: nothing here reads a clock.

use std::fmt;
use std::time::Duration;

use crate::duration::human;

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

/// Why one more try does not fit: the numbers of the rule, for the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetExceeded {
    pub used: Duration,
    pub wait: Duration,
    pub timeout: Option<Duration>,
    pub limit: Limit,
}

impl fmt::Display for BudgetExceeded {
    /// `budget: 29s used + 800ms wait + 8s timeout > 30s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.limit.source {
            LimitSource::Budget => "budget",
            LimitSource::Deadline => "deadline",
        };
        write!(
            f,
            "{what}: {} used + {} wait",
            human(self.used),
            human(self.wait)
        )?;
        match self.timeout {
            Some(t) => write!(f, " + {} timeout > {}", human(t), human(self.limit.at)),
            None => write!(f, " ≥ {}", human(self.limit.at)),
        }
    }
}

/// May a retry after `wait` start? It must start before the end and, with a per-try timeout,
/// its whole timeout must fit: `now + wait + timeout ≤ end`.
pub fn check_retry(
    limit: Option<Limit>,
    now: Duration,
    wait: Duration,
    timeout: Option<Duration>,
) -> Result<(), BudgetExceeded> {
    let Some(limit) = limit else { return Ok(()) };
    let start = now.saturating_add(wait);
    let fits = match timeout {
        Some(t) => start.saturating_add(t) <= limit.at,
        None => start < limit.at,
    };
    if fits {
        Ok(())
    } else {
        Err(BudgetExceeded {
            used: now,
            wait,
            timeout,
            limit,
        })
    }
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
