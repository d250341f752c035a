//! How a try ended, as the loop reports it: by itself, stopped, never started, or cut short by
//! a signal or by output that could not be written.

use std::time::Duration;

use crate::policy::{Decision, Outcome, Signal, Verdict, Wait};
use crate::report::event::{NotStarted, TryReport};
use crate::run::clock::Moment;
use crate::run::runner::stop::{GroupEnd, Leftovers, Stopped, escaped};
use crate::run::stdio::TryIo;

/// The try being run: its number, when it started, its plumbing.
pub struct Try {
    pub attempt: u64,
    pub start: Moment,
    pub io: TryIo,
}

/// The retry that the schedule decided on after try `attempt`; `outcome` is how the last try
/// that ran ended (`None` when every try so far was held back).
pub struct Retry {
    pub attempt: u64,
    pub outcome: Option<Outcome>,
    pub wait: Wait,
}

/// How a try that ran to its end (or was stopped on its time) ended.
#[derive(Clone, Copy, Debug)]
pub struct Ended {
    pub outcome: Outcome,
    /// `Killed` when the try was stopped and needed SIGKILL after the grace period.
    pub ending: GroupEnd,
    /// The try was stopped by the end of the budget or the deadline, not by `--timeout`.
    pub by_limit: bool,
    /// What the failed try left running, and how stopping it went.
    pub leftovers: Option<Leftovers>,
    /// When `retry` sent the try its stopping signal, if it did.
    pub signalled: Option<Moment>,
}

/// How a try ended, from the runner's point of view.
pub enum TryEnd {
    Ended(Ended),
    /// The command could not be started.
    NotStarted(Outcome, NotStarted),
    /// The try's output could not be written (not for a closed pipe); the try has been
    /// stopped, as this says, and the run ends.
    OutputFailed(Ended),
    /// `retry` received a stopping signal during the try; the try has been stopped. The
    /// outcome is how it ended, if it had started.
    Interrupted(Signal, Option<Ended>),
}

impl Ended {
    /// A try that ended by itself, or never started.
    pub fn by_itself(outcome: Outcome) -> Ended {
        Ended {
            outcome,
            ending: GroupEnd::Exited,
            by_limit: false,
            leftovers: None,
            signalled: None,
        }
    }

    /// A try that `retry` stopped: `by_limit` when the budget or the deadline stopped it.
    pub fn stopped(outcome: Outcome, stopped: &Stopped, by_limit: bool) -> Ended {
        Ended {
            outcome,
            ending: stopped.ending,
            by_limit,
            leftovers: escaped(stopped),
            signalled: Some(stopped.signalled),
        }
    }

    /// What the log says about try `attempt`, which started at `start` and ended so after
    /// `took`.
    pub fn report(
        &self,
        attempt: u64,
        start: Moment,
        took: Duration,
        verdict: Verdict,
        decision: Decision,
        detail: Option<NotStarted>,
    ) -> TryReport {
        TryReport {
            attempt,
            outcome: self.outcome,
            took,
            verdict,
            decision,
            detail,
            killed: self.ending.killed(),
            stopped_by_limit: self.by_limit,
            signalled_after: self.signalled.map(|at| at.saturating_duration_since(start)),
            in_a_row: 0,
        }
    }
}
