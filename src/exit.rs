//! The exit-status contract (docs/exit-status.md#exit-status), in one type.

use crate::policy::{GiveUp, Outcome, Signal};

/// How `retry` ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// A try succeeded: 0.
    Success,
    /// Gave up; the last try exited with this code.
    LastExit(u8),
    /// Gave up; the last try timed out: 124.
    Timeout,
    /// `retry`'s own error (usage, invalid value, internal failure): 125.
    Usage,
    /// The command exists but cannot be executed: 126.
    CannotExecute,
    /// The command was not found: 127.
    NotFound,
    /// Gave up; the last try was killed by a signal `retry` did not send: 128+N.
    KilledBy(Signal),
    /// `retry` was interrupted by this signal, or a try died of SIGINT: die of it too.
    Reraise(Signal),
    /// A try's output could not be written (a full disk): 1, as `cat` ends.
    OutputFailed,
    /// Gave up with every try held back by `--throttle`, none having run: 75 (`EX_TEMPFAIL`,
    /// try again later).
    Held,
    /// Turned away: another run had the lock of `--lock`, and no try ran: 75 (`EX_TEMPFAIL`).
    Locked,
}

impl ExitStatus {
    pub const TIMEOUT: i32 = 124;
    pub const USAGE: i32 = 125;
    pub const CANNOT_EXECUTE: i32 = 126;
    pub const NOT_FOUND: i32 = 127;
    pub const HELD: i32 = 75;

    /// The status that gives up after a try ended with `outcome`.
    pub fn from_last_try(outcome: Outcome) -> ExitStatus {
        match outcome {
            Outcome::Exit(0) => ExitStatus::Success,
            Outcome::Exit(code) => ExitStatus::LastExit(code),
            // A try that died of SIGINT (Ctrl-C) or SIGPIPE (its reader gone): retry dies of it
            // too, as the command would have ended the pipeline.
            Outcome::Signal(s) if s == Signal::INT || s == Signal::PIPE => ExitStatus::Reraise(s),
            Outcome::Signal(s) => ExitStatus::KilledBy(s),
            Outcome::Timeout => ExitStatus::Timeout,
            Outcome::NotFound => ExitStatus::NotFound,
            Outcome::NotExecutable => ExitStatus::CannotExecute,
            // retry could not start the command: its own failure, not a status of the command.
            Outcome::NoResources => ExitStatus::Usage,
        }
    }

    /// The status of a run that gives up for `why` after a try that ended with `last`: the
    /// last try's status; 125 when the input could not be kept for another try (`retry`'s own
    /// failure); 1 after a try that exited 0 but was not ready (`--until-output`), and 1 when
    /// `--consecutive` saw too few successes in a row: giving up is never a success, and 1 is
    /// what grep exits when nothing matched.
    pub fn of_giving_up(why: &GiveUp, last: Outcome) -> ExitStatus {
        match why {
            GiveUp::Input => ExitStatus::Usage,
            // Too few successes in a row: whatever the last try exited, a code that the
            // classification called a success (`--success-on`) included.
            GiveUp::Consecutive => ExitStatus::LastExit(1),
            _ if last == Outcome::Exit(0) => ExitStatus::LastExit(1),
            _ => ExitStatus::from_last_try(last),
        }
    }

    /// The status a `--repeat` ends with: that of its first failed try (`first_failed`), as
    /// giving up after it would have given; 0 when every one of its `tries` that ran to its end
    /// passed; and 124 when none ran to its end (the budget cut the first short): a command
    /// that hangs never passes.
    pub fn of_repeat(first_failed: Option<Outcome>, tries: u64) -> ExitStatus {
        match (first_failed, tries) {
            (Some(outcome), _) => ExitStatus::of_giving_up(&GiveUp::Tries, outcome),
            (None, 0) => ExitStatus::Timeout,
            (None, _) => ExitStatus::Success,
        }
    }

    /// The status of a run that succeeded after failed tries, under `--flaky fail`
    /// (docs/flaky.md#failing-a-flaky-run): what giving up after the last failed one, which ended
    /// with `last_failed`, would have given; a try that died of SIGINT gives 130 and `retry` does
    /// not die of it, since nobody interrupted `retry`.
    pub fn of_flaky_success(last_failed: Outcome) -> ExitStatus {
        match ExitStatus::of_giving_up(&GiveUp::Tries, last_failed) {
            ExitStatus::Reraise(s) => ExitStatus::KilledBy(s),
            status => status,
        }
    }

    /// The numeric exit code; for `Reraise`, what a shell would show (128+N), used only if the
    /// signal fails to end the process.
    pub fn code(self) -> i32 {
        match self {
            ExitStatus::Success => 0,
            ExitStatus::LastExit(code) => i32::from(code),
            ExitStatus::Timeout => Self::TIMEOUT,
            ExitStatus::Usage => Self::USAGE,
            ExitStatus::CannotExecute => Self::CANNOT_EXECUTE,
            ExitStatus::NotFound => Self::NOT_FOUND,
            ExitStatus::KilledBy(s) | ExitStatus::Reraise(s) => 128 + s.number(),
            ExitStatus::OutputFailed => 1,
            ExitStatus::Held | ExitStatus::Locked => Self::HELD,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_passes_only_when_a_try_ran_to_its_end_and_none_failed() {
        assert_eq!(ExitStatus::of_repeat(None, 0), ExitStatus::Timeout);
        assert_eq!(ExitStatus::of_repeat(None, 3), ExitStatus::Success);
        assert_eq!(
            ExitStatus::of_repeat(Some(Outcome::Exit(3)), 7),
            ExitStatus::LastExit(3)
        );
        assert_eq!(
            ExitStatus::of_repeat(Some(Outcome::Timeout), 1),
            ExitStatus::Timeout
        );
    }

    #[test]
    fn giving_up_exits_with_the_last_try_but_never_0_and_125_for_lost_input() {
        let why = GiveUp::Tries;
        assert_eq!(ExitStatus::of_giving_up(&why, Outcome::Exit(3)).code(), 3);
        assert_eq!(ExitStatus::of_giving_up(&why, Outcome::Timeout).code(), 124);
        assert_eq!(ExitStatus::of_giving_up(&why, Outcome::Exit(0)).code(), 1);
        let input = GiveUp::Input;
        assert_eq!(
            ExitStatus::of_giving_up(&input, Outcome::Exit(3)).code(),
            125
        );
    }

    #[test]
    fn a_flaky_success_under_flaky_fail_exits_as_its_last_failed_try_would_have() {
        assert_eq!(ExitStatus::of_flaky_success(Outcome::Exit(3)).code(), 3);
        assert_eq!(ExitStatus::of_flaky_success(Outcome::Timeout).code(), 124);
        let int = ExitStatus::of_flaky_success(Outcome::Signal(Signal::INT));
        assert_eq!(int, ExitStatus::KilledBy(Signal::INT));
        assert_eq!(int.code(), 130);
        // Exit 0 that was not ready (--until-output) gives 1, as giving up after it would.
        assert_eq!(ExitStatus::of_flaky_success(Outcome::Exit(0)).code(), 1);
    }

    #[test]
    fn statuses_follow_section_11() {
        assert_eq!(ExitStatus::from_last_try(Outcome::Exit(0)).code(), 0);
        assert_eq!(ExitStatus::from_last_try(Outcome::Exit(7)).code(), 7);
        assert_eq!(ExitStatus::from_last_try(Outcome::Timeout).code(), 124);
        assert_eq!(ExitStatus::Usage.code(), 125);
        assert_eq!(
            ExitStatus::from_last_try(Outcome::NotExecutable).code(),
            126
        );
        assert_eq!(ExitStatus::from_last_try(Outcome::NotFound).code(), 127);
        assert_eq!(ExitStatus::from_last_try(Outcome::NoResources).code(), 125);
        assert_eq!(
            ExitStatus::from_last_try(Outcome::Signal(Signal::KILL)).code(),
            137
        );
        assert_eq!(
            ExitStatus::from_last_try(Outcome::Signal(Signal::INT)),
            ExitStatus::Reraise(Signal::INT)
        );
    }
}
