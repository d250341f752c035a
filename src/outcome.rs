//! A run's outcome, made once by the runner when the run ends (docs/log.md#every-record-of-a-run-agrees):
//! its exit status, its verdict, and the tries that ran, failed and were held back. Every
//! record of the run reads it and works nothing out again: the exit status, the step outputs,
//! the history line, the JUnit report, withheld output's playback, and a replay's own figures.

use std::time::Duration;

use crate::exit::ExitStatus;
pub use crate::policy::step::TryCounts;
use crate::policy::{GiveUp, Hook, Outcome, RepeatEnd, Signal};

/// What `retry` was doing when a stopping signal reached it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum During {
    /// The stagger before the first try.
    Stagger,
    /// Before the first try: the wait for `--lock`'s lock, or, after the stagger, the first
    /// exchange with the quota's store.
    Start,
    /// Try `attempt` was running.
    Try,
    /// Try `attempt` had ended, and its output was being written out.
    Output,
    /// The wait after try `attempt` (or the exchange with the quota's store before the next).
    Wait,
    /// A hook (`--on-retry`, `--on-give-up`) after try `attempt` was running.
    Hook(Hook),
    /// The output `--output-on-failure` withheld was being played back.
    Playback,
    /// The run's reports (`--history`, `--junit`, the step outputs) were being written.
    Report,
}

impl During {
    /// The word of the JSON log's `during`.
    pub fn word(self) -> &'static str {
        match self {
            During::Stagger => "stagger",
            During::Start => "start",
            During::Try => "try",
            During::Output => "output",
            During::Wait => "wait",
            During::Hook(_) => "hook",
            During::Playback => "playback",
            During::Report => "report",
        }
    }
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum RunVerdict {
    /// A try succeeded, and none failed before it.
    Succeeded,
    /// A try succeeded after at least one failed try; `failed` when `--flaky fail` fails the
    /// run for it.
    Flaky { failed: bool },
    /// The run gave up, for this reason (never `GiveUp::Interrupted`: that is `Interrupted`).
    GaveUp(GiveUp),
    /// `--repeat` ended, for this reason, with `failed` of its tries failed.
    Repeated { why: RepeatEnd, failed: u64 },
    /// A stopping signal reached `retry` during this phase.
    Interrupted { signal: Signal, during: During },
    /// The try's output could not be written (a full disk): the run ends, as `cat` does.
    OutputFailed,
    /// `retry` itself failed during the run.
    Internal,
    /// `--once`'s key was done, by the run this names: the command did not run.
    DoneBefore(Box<crate::policy::lock::DoneBefore>),
}

/// A run's outcome: made once, read by every record.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutcome {
    pub status: ExitStatus,
    pub verdict: RunVerdict,
    pub tries: TryCounts,
    /// `--consecutive`: the successful tries in a row when the run ended.
    pub streak: u64,
    /// How the last try that ran ended, if one ran.
    pub last: Option<Outcome>,
    pub elapsed: Duration,
}

impl RunOutcome {
    /// The outcome of a run that ended, with `status`, before any try: `retry`'s own failure.
    pub fn before_any_try(status: ExitStatus) -> RunOutcome {
        RunOutcome {
            status,
            verdict: RunVerdict::Internal,
            tries: TryCounts::default(),
            streak: 0,
            last: None,
            elapsed: Duration::ZERO,
        }
    }

    /// The run succeeded only after failed tries (the one definition of a flaky run).
    pub fn flaky(&self) -> bool {
        matches!(self.verdict, RunVerdict::Flaky { .. })
    }

    /// A try succeeded (whatever `--flaky fail` made of it).
    pub fn succeeded(&self) -> bool {
        matches!(
            self.verdict,
            RunVerdict::Succeeded | RunVerdict::Flaky { .. }
        )
    }

    /// The word of the step outputs' `outcome` (docs/ci.md#step-outputs): `success` when a
    /// try succeeded and the status is 0, `flaky` for a late success that `--flaky fail`
    /// failed, `failed` for a repeat with a failed try, `interrupted`, `locked` for a run that
    /// a held lock (or `--once` key) turned away, `done_before` for a run whose `--once` key
    /// was done, `gave_up`.
    pub fn word(&self) -> &'static str {
        match &self.verdict {
            RunVerdict::GaveUp(GiveUp::Locked(_)) => "locked",
            RunVerdict::DoneBefore(_) => "done_before",
            RunVerdict::Succeeded | RunVerdict::Flaky { failed: false } => "success",
            RunVerdict::Flaky { failed: true } => "flaky",
            RunVerdict::Interrupted { .. } => "interrupted",
            RunVerdict::Repeated { why, failed } => match (why, failed) {
                (RepeatEnd::Interrupted(_), _) => "interrupted",
                (_, 0) if self.status == ExitStatus::Success => "success",
                (_, 0) => "gave_up",
                _ => "failed",
            },
            RunVerdict::GaveUp(_) | RunVerdict::OutputFailed | RunVerdict::Internal => "gave_up",
        }
    }

    /// The `reason` of the records: why the run gave up, why a repeat ended when not by running
    /// every try; `None` for a success, a late one that `--flaky fail` failed included.
    pub fn reason(&self) -> Option<&'static str> {
        match &self.verdict {
            RunVerdict::Succeeded | RunVerdict::Flaky { .. } => None,
            RunVerdict::GaveUp(why) => Some(why.word()),
            RunVerdict::Repeated {
                why: RepeatEnd::Done,
                ..
            } => None,
            RunVerdict::Repeated { why, .. } => Some(why.word()),
            RunVerdict::Interrupted { .. } => Some(GiveUp::Interrupted.word()),
            RunVerdict::OutputFailed => Some("output"),
            RunVerdict::Internal => Some("internal"),
            RunVerdict::DoneBefore(_) => None,
        }
    }

    /// Why a replayed run stays pending: its `reason`, `flaky` for a late success that
    /// `--flaky fail` failed, `error` for `retry`'s own failure before it could give up.
    pub fn pending_reason(&self) -> &'static str {
        match self.verdict {
            RunVerdict::Flaky { failed: true } => "flaky",
            RunVerdict::Internal => "error",
            _ => self.reason().unwrap_or("error"),
        }
    }

    /// The signal that ends `retry`, if one does.
    pub fn signal(&self) -> Option<Signal> {
        match self.verdict {
            RunVerdict::Interrupted { signal, .. }
            | RunVerdict::Repeated {
                why: RepeatEnd::Interrupted(signal),
                ..
            } => Some(signal),
            _ => None,
        }
    }

    /// Whether the run ended before any try ran because a lock or a `--once` key turned it
    /// away, or its key was done: the records tell it apart from a run that ran.
    pub fn did_not_run(&self) -> bool {
        matches!(
            self.verdict,
            RunVerdict::DoneBefore(_) | RunVerdict::GaveUp(GiveUp::Locked(_))
        )
    }

    /// Whether the run's output withheld by `--output-on-failure` is played back in full: after
    /// every end but a success and a run whose reader has gone (it ends as quietly as the
    /// pipeline would without `retry`).
    pub fn plays_back(&self) -> bool {
        self.status != ExitStatus::Success && self.status != ExitStatus::Reraise(Signal::PIPE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(status: ExitStatus, verdict: RunVerdict, failed: u64) -> RunOutcome {
        RunOutcome {
            status,
            verdict,
            tries: TryCounts {
                counted: 3,
                ran: 3,
                failed,
                held: 0,
            },
            streak: 0,
            last: Some(Outcome::Exit(0)),
            elapsed: Duration::ZERO,
        }
    }

    #[test]
    fn the_words_of_the_records_follow_the_verdict() {
        let late = of(ExitStatus::Success, RunVerdict::Flaky { failed: false }, 2);
        assert_eq!(
            (late.word(), late.reason(), late.flaky()),
            ("success", None, true)
        );
        let failed = of(
            ExitStatus::LastExit(1),
            RunVerdict::Flaky { failed: true },
            2,
        );
        assert_eq!((failed.word(), failed.reason()), ("flaky", None));
        assert_eq!(failed.pending_reason(), "flaky");
        let streak = of(
            ExitStatus::LastExit(1),
            RunVerdict::GaveUp(GiveUp::Consecutive),
            1,
        );
        assert_eq!(
            (streak.word(), streak.reason(), streak.flaky()),
            ("gave_up", Some("consecutive"), false)
        );
        let signal = RunVerdict::Interrupted {
            signal: Signal::TERM,
            during: During::Hook(Hook::OnGiveUp),
        };
        let term = of(ExitStatus::Reraise(Signal::TERM), signal, 1);
        assert_eq!(
            (term.word(), term.reason()),
            ("interrupted", Some("interrupted"))
        );
        assert_eq!(term.signal(), Some(Signal::TERM));
        assert!(term.plays_back() && !late.plays_back());
        let repeat = RunVerdict::Repeated {
            why: RepeatEnd::Failed,
            failed: 1,
        };
        let repeat = of(ExitStatus::LastExit(1), repeat, 1);
        assert_eq!((repeat.word(), repeat.reason()), ("failed", Some("failed")));
    }
}
