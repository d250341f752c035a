//! `--repeat N` (docs/flaky.md#repeating-a-command): the command run N times in a row to reproduce
//! a flake, and `--flaky` (docs/flaky.md#failing-a-flaky-run): what a run that succeeded only after
//! a failed try exits with. Pure: the runner hands in each try's verdict, and whether the next try
//! still fits in the budget.

use std::time::Duration;

use super::backoff::{Backoff, Jitter, WaitPolicy};
use super::budget::BudgetExceeded;
use super::classify::{Outcome, Verdict};
pub use super::schedule::RepeatEnd;
use super::schedule::{Decision, Policy};
use crate::text::Share;

/// What `--flaky` makes of a run that succeeded after at least one failed try.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Flaky {
    /// It exits 0, as any success.
    #[default]
    Pass,
    /// It exits 0, and the log warns.
    Warn,
    /// It exits with the status its last failed try would have given when giving up.
    Fail,
}

impl Flaky {
    pub fn word(self) -> &'static str {
        match self {
            Flaky::Pass => "pass",
            Flaky::Warn => "warn",
            Flaky::Fail => "fail",
        }
    }
}

/// The options of `--repeat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepeatPolicy {
    /// How many tries at most; `None` (`--repeat 0`) until a try fails or the budget ends.
    pub runs: Option<u64>,
    /// `--keep-going`: run them all, whatever fails.
    pub keep_going: bool,
    /// `--delay` when given: the wait between two tries.
    pub delay: Duration,
}

impl RepeatPolicy {
    /// The retry policy that runs as this repeat does when every try fails and is retried: the
    /// same tries, timeout and limits, and a constant wait of the delay. Its worst case is the
    /// repeat's.
    pub fn as_policy(&self, policy: &Policy) -> Policy {
        Policy {
            max_tries: self.runs,
            waits: WaitPolicy {
                backoff: Backoff::Constant,
                delay: self.delay,
                max_delay: self.delay,
                jitter: Jitter::None,
            },
            ..policy.clone()
        }
    }
}

/// The tries of a repeat so far: how many ran, how many failed and how, and the first failure.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepeatCount {
    /// The tries that ran to their end (a try that the end of the budget cut short is not one).
    pub tries: u64,
    pub failed: u64,
    /// Each failed outcome, in the order first seen, with how many tries ended so.
    pub outcomes: Vec<(Outcome, u64)>,
    /// The first failed try, and how it ended.
    pub first_failure: Option<(u64, Outcome)>,
}

impl RepeatCount {
    /// The failed share of the tries, as every output writes it.
    pub fn failed_share(&self) -> Share {
        Share::new(self.failed, self.tries)
    }

    fn add_failure(&mut self, attempt: u64, outcome: Outcome) {
        self.failed += 1;
        self.first_failure.get_or_insert((attempt, outcome));
        match self.outcomes.iter_mut().find(|(o, _)| *o == outcome) {
            Some((_, n)) => *n += 1,
            None => self.outcomes.push((outcome, 1)),
        }
    }
}

/// The state of a repeat: what it was asked, and what its tries came to.
#[derive(Clone, Debug)]
pub struct Repeat {
    policy: RepeatPolicy,
    count: RepeatCount,
}

impl Repeat {
    pub fn new(policy: RepeatPolicy) -> Repeat {
        Repeat {
            policy,
            count: RepeatCount::default(),
        }
    }

    pub fn count(&self) -> &RepeatCount {
        &self.count
    }

    /// What follows try `attempt`, which ended with `outcome` and `verdict`: the next try after
    /// the delay (`Retry`), or the end (`Stop`). `cut_short` when the end of the budget stopped
    /// it: it is not counted, and the repeat ends. `fits` tells whether a try starting after the
    /// delay fits in the budget.
    pub fn after_try(
        &mut self,
        attempt: u64,
        outcome: Outcome,
        verdict: &Verdict,
        cut_short: bool,
        fits: impl FnOnce(Duration) -> Result<(), BudgetExceeded>,
    ) -> Decision {
        if cut_short {
            return Decision::Stop(RepeatEnd::Budget(None));
        }
        self.count.tries += 1;
        let failed = !matches!(verdict, Verdict::Success(_));
        if failed {
            self.count.add_failure(attempt, outcome);
            // Ctrl-C reached the command: nobody wants the next try.
            let interrupted = matches!(verdict, Verdict::Interrupted);
            if interrupted || !self.policy.keep_going {
                return Decision::Stop(RepeatEnd::Failed);
            }
        }
        if self.policy.runs.is_some_and(|n| self.count.tries >= n) {
            return Decision::Stop(RepeatEnd::Done);
        }
        match fits(self.policy.delay) {
            Ok(()) => Decision::Retry(crate::policy::Wait {
                base: self.policy.delay,
                delay: self.policy.delay,
                requested: None,
                clock: None,
            }),
            Err(exceeded) => Decision::Stop(RepeatEnd::Budget(Some(exceeded))),
        }
    }

    /// The status the repeat ends with: 0 when no try failed, else that of the first failed
    /// try, as giving up after it would have given (its `outcome`).
    pub fn failed_outcome(&self) -> Option<Outcome> {
        self.count.first_failure.map(|(_, outcome)| outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Reason;

    fn fits(_: Duration) -> Result<(), BudgetExceeded> {
        Ok(())
    }

    fn success() -> Verdict {
        Verdict::Success(Reason::Default)
    }

    fn failure() -> Verdict {
        Verdict::Transient(Reason::Default)
    }

    fn policy(runs: Option<u64>, keep_going: bool) -> RepeatPolicy {
        RepeatPolicy {
            runs,
            keep_going,
            delay: Duration::ZERO,
        }
    }

    #[test]
    fn a_repeat_stops_at_its_first_failure_unless_it_keeps_going() {
        let mut repeat = Repeat::new(policy(Some(50), false));
        for k in 1..17 {
            let d = repeat.after_try(k, Outcome::Exit(0), &success(), false, fits);
            assert!(matches!(d, Decision::Retry(_)), "{d:?}");
        }
        let d = repeat.after_try(17, Outcome::Exit(1), &failure(), false, fits);
        assert_eq!(d, Decision::Stop(RepeatEnd::Failed));
        assert_eq!(repeat.count().tries, 17);
        assert_eq!(repeat.count().first_failure, Some((17, Outcome::Exit(1))));

        let mut going = Repeat::new(policy(Some(20), true));
        let mut last = Decision::Stop(RepeatEnd::Failed);
        for k in 1..=20 {
            let (outcome, verdict) = match k {
                4 => (Outcome::Exit(1), failure()),
                9 => (Outcome::Timeout, failure()),
                _ => (Outcome::Exit(0), success()),
            };
            last = going.after_try(k, outcome, &verdict, false, fits);
        }
        assert_eq!(last, Decision::Stop(RepeatEnd::Done));
        let count = going.count();
        assert_eq!((count.tries, count.failed), (20, 2));
        assert_eq!(count.failed_share().percent(), "10%");
        assert_eq!(
            count.outcomes,
            vec![(Outcome::Exit(1), 1), (Outcome::Timeout, 1)]
        );
        assert_eq!(going.failed_outcome(), Some(Outcome::Exit(1)));
    }

    #[test]
    fn the_worst_case_of_a_repeat_is_its_tries_times_the_timeout_plus_the_delays() {
        let config = match crate::config::parse(
            [
                "retry", "--repeat", "50", "-d", "1s", "-t", "5s", "--", "true",
            ],
            std::time::SystemTime::UNIX_EPOCH,
        ) {
            crate::config::ParseOutcome::Run(c) => *c,
            other => panic!("{other:?}"),
        };
        let repeat = config.repeat.expect("a repeat");
        let policy = repeat.as_policy(&config.policy);
        let worst = crate::policy::worst_case(&policy, Duration::ZERO);
        assert_eq!(worst.total(), Some(Duration::from_secs(50 * 5 + 49)));
    }

    #[test]
    fn repeat_0_goes_on_until_the_budget_and_a_try_cut_short_is_not_counted() {
        let mut repeat = Repeat::new(policy(None, false));
        for k in 1..=1000 {
            let d = repeat.after_try(k, Outcome::Exit(0), &success(), false, fits);
            assert!(matches!(d, Decision::Retry(_)));
        }
        let exceeded = BudgetExceeded {
            used: Duration::from_secs(1),
            wait: Duration::ZERO,
            timeout: None,
            limit: crate::policy::Limit {
                at: Duration::from_secs(1),
                source: crate::policy::LimitSource::Budget,
            },
            requested: false,
        };
        let refused = |_| Err(exceeded);
        let d = repeat.after_try(1001, Outcome::Exit(0), &success(), false, refused);
        assert_eq!(d, Decision::Stop(RepeatEnd::Budget(Some(exceeded))));
        let d = repeat.after_try(1002, Outcome::Timeout, &failure(), true, fits);
        assert_eq!(d, Decision::Stop(RepeatEnd::Budget(None)));
        assert_eq!((repeat.count().tries, repeat.count().failed), (1001, 0));
        assert_eq!(repeat.failed_outcome(), None);
    }
}
