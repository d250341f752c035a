//! One simulated client: the run of `retry` it stands for, where it is in its current try, and
//! why a try failed, with the failed tries counted by cause.

use std::time::Duration;

use crate::policy::{Policy, Schedule};

/// Why a try failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The dependency was down (model `outage`).
    Outage,
    /// The dependency was up but over its capacity (model `outage`).
    Overload,
    /// Another write landed between this try's read and its write (model `occ`).
    Conflict,
    /// The try was stopped by `--timeout` or the end of the budget before it ended.
    Timeout,
}

/// Failed tries by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Failures {
    pub outage: u64,
    pub overload: u64,
    pub conflict: u64,
    pub timeout: u64,
}

impl Failures {
    pub(super) fn count(&mut self, why: Cause) {
        let n = match why {
            Cause::Outage => &mut self.outage,
            Cause::Overload => &mut self.overload,
            Cause::Conflict => &mut self.conflict,
            Cause::Timeout => &mut self.timeout,
        };
        *n = n.saturating_add(1);
    }
}

/// Where a client is in its current try.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Its next event starts a try.
    Start,
    /// Its next event is its write reaching the record (model `occ`).
    Write,
    /// Its next event is the end of its try, when it learns the result.
    End,
    /// It succeeded or gave up.
    Done,
}

/// One simulated run of `retry`.
pub(super) struct Client<'p> {
    pub(super) schedule: Schedule<'p>,
    pub(super) phase: Phase,
    /// The try's result, decided by the dependency before the client learns it.
    pub(super) result: Result<(), Cause>,
    /// When the try under way is stopped by its timeout or the end of the run.
    pub(super) stop_at: u64,
    /// Model `occ`: when this try's read reached the record.
    pub(super) read_at: u64,
    /// `--throttle`: one of its tries has run, so a retry needs a token of the quota.
    pub(super) ran: bool,
    /// `--throttle`: its last try was held back.
    pub(super) held: bool,
    /// When its run arrived (its wave's time, before its stagger): the run's own clock, which
    /// `--budget` counts from, starts then.
    pub(super) arrived: u64,
    /// `--throttle`: its run arrived once `p` had fallen below the mark of recovery after the
    /// outage.
    pub(super) after_recovery: bool,
}

impl<'p> Client<'p> {
    /// A run that arrived at `arrived`, at its first try.
    pub(super) fn new(policy: &'p Policy, arrived: u64) -> Client<'p> {
        Client {
            schedule: Schedule::new(policy),
            phase: Phase::Start,
            result: Ok(()),
            stop_at: u64::MAX,
            read_at: 0,
            ran: false,
            held: false,
            arrived,
            after_recovery: false,
        }
    }

    /// The time since its run arrived, at virtual time `now`: what the schedule is given as
    /// the run's elapsed time, as a real run gives its own.
    pub(super) fn elapsed(&self, now: u64) -> Duration {
        Duration::from_nanos(now.saturating_sub(self.arrived))
    }
}
