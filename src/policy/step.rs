//! One run's state from try to try, and the pure step that decides after each try
//! (docs/policy.md#the-policy): what the try ended with goes in, the decision and what the
//! shared quota counts of the try come out. No clock is read (the time is passed in), nothing
//! is asked of a store (the runner exchanges with the quota's store before the step, for a try
//! `--throttle` holds back, and after it, to confirm a retry), and nothing is written.

use std::time::Duration;

use rand::Rng;

use super::classify::{Outcome, OutputMatch, Verdict};
use super::repeat::{Repeat, RepeatPolicy};
use super::schedule::{Decision, Policy, Schedule};
use super::throttle::{Counted, counted};

/// The tries of a run, counted as they end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TryCounts {
    /// Tries the schedule counted against `--tries`: those that ran and those held back.
    pub counted: u64,
    /// Tries that ran (a process was started for them, or could not be).
    pub ran: u64,
    /// Tries that ran to their end and failed (a try `retry` stopped on a signal it received
    /// is not one of the command's failures).
    pub failed: u64,
    /// Tries that `--throttle` held back: they did not run, and did not fail.
    pub held: u64,
}

/// What a try ended with, as the step reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TryResult {
    /// The try ran (or could not start) and ended with `outcome`, its output matched (or not)
    /// the output patterns; `by_limit` when the end of the budget or the deadline stopped it.
    Ran {
        outcome: Outcome,
        output: OutputMatch,
        by_limit: bool,
    },
    /// `--throttle` held the try back: it did not run.
    Held,
}

/// What the step decided after a try.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// What the try came to; `None` for a try held back.
    pub verdict: Option<Verdict>,
    /// What follows, before the quota's store confirms a retry (`Decision::confirmed`).
    pub decision: Decision,
    /// What the quota's store counts of a try that ran: how the throttle counts it, and whether
    /// it failed (the next try is then a retry); `None` for a try held back, which counts for
    /// nothing.
    pub count: Option<(Option<Counted>, bool)>,
}

/// What a run has come to so far: the schedule (or `--repeat`) that decides, the tries counted,
/// how the last ones ended. Kept once: every figure the run reports is read from here.
#[derive(Clone, Debug)]
pub struct RunState<'p> {
    policy: &'p Policy,
    schedule: Schedule<'p>,
    /// `--repeat`: what its tries came to so far. It decides in place of the schedule.
    repeat: Option<Repeat>,
    counts: TryCounts,
    /// How the last try that ran ended.
    last_ran: Option<Outcome>,
    /// How the last failed try ended, for `--flaky fail` (not in a repeat).
    last_failed: Option<Outcome>,
    /// The last try ran and failed: only then do the hooks run.
    last_try_failed: bool,
}

impl<'p> RunState<'p> {
    pub fn new(policy: &'p Policy, repeat: Option<RepeatPolicy>) -> RunState<'p> {
        RunState {
            policy,
            schedule: Schedule::new(policy),
            repeat: repeat.map(Repeat::new),
            counts: TryCounts::default(),
            last_ran: None,
            last_failed: None,
            last_try_failed: false,
        }
    }

    pub fn schedule(&self) -> &Schedule<'p> {
        &self.schedule
    }

    pub fn repeat(&self) -> Option<&Repeat> {
        self.repeat.as_ref()
    }

    pub fn counts(&self) -> TryCounts {
        self.counts
    }

    pub fn last_ran(&self) -> Option<Outcome> {
        self.last_ran
    }

    pub fn last_failed(&self) -> Option<Outcome> {
        self.last_failed
    }

    pub fn last_try_failed(&self) -> bool {
        self.last_try_failed
    }

    /// `--consecutive`: the successful tries in a row so far, the last included (0 without it).
    /// The schedule's own count, which its decisions read: a try held back neither ends nor
    /// extends the streak.
    pub fn streak(&self) -> u64 {
        match self.policy.consecutive {
            Some(_) => self.schedule.in_a_row(),
            None => 0,
        }
    }

    /// Whether a success of the next try would leave a `--consecutive` streak short: another try
    /// would follow it, or the run would give up.
    pub fn success_would_be_short(&self) -> bool {
        (self.policy.consecutive).is_some_and(|n| self.schedule.in_a_row().saturating_add(1) < n)
    }

    /// Starts the next try at `now`: its number, and how long it may run, if it is bounded.
    pub fn start_try(&mut self, now: Duration) -> (u64, Option<Duration>) {
        let limit = self.schedule.start_try(now);
        self.counts.counted = self.schedule.tries();
        (self.counts.counted, limit)
    }

    /// Counts try `attempt` as the last of the run: a run that ends counts the try it ends after
    /// (0 when it ends before the first).
    pub fn end_at(&mut self, attempt: u64) {
        self.counts.counted = attempt;
    }

    /// A try that ran and that `retry` stopped for a reason of its own (a signal it received,
    /// output it could not write): it ran, and it is not one of the command's failures; nothing
    /// is decided after it.
    pub fn stopped(&mut self, outcome: Outcome) {
        self.counts.ran += 1;
        self.last_ran = Some(outcome);
    }

    /// The step: what follows the try just started, which ended at `now` with `result`.
    pub fn decide<R: Rng + ?Sized>(
        &mut self,
        result: TryResult,
        now: Duration,
        rng: &mut R,
    ) -> Step {
        let (outcome, output, by_limit) = match result {
            TryResult::Held => {
                self.counts.held += 1;
                self.last_try_failed = false;
                let decision = self.schedule.after_held(now, rng);
                return Step {
                    verdict: None,
                    decision,
                    count: None,
                };
            }
            TryResult::Ran {
                outcome,
                output,
                by_limit,
            } => (outcome, output, by_limit),
        };
        let attempt = self.schedule.tries();
        let schedule = &mut self.schedule;
        let (verdict, decision) = match &mut self.repeat {
            Some(repeat) => {
                let verdict = self.policy.classifier.verdict_with_output(outcome, output);
                let fits = |delay| schedule.still_fits(now, delay);
                let decision = repeat.after_try(attempt, outcome, &verdict, by_limit, fits);
                (verdict, decision)
            }
            None if by_limit => schedule.after_cut_by_limit(outcome, output, now, rng),
            None => schedule.after_try_with_output(outcome, output, now, rng),
        };
        self.last_ran = Some(outcome);
        self.counts.ran += 1;
        self.last_try_failed = !matches!(verdict, Verdict::Success(_));
        if self.last_try_failed {
            self.counts.failed += 1;
            if self.repeat.is_none() {
                self.last_failed = Some(outcome);
            }
        }
        let count = Some((counted(&verdict), self.last_try_failed));
        Step {
            verdict: Some(verdict),
            decision,
            count,
        }
    }
}

#[cfg(test)]
mod tests;
