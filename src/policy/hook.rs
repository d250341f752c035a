//! The hooks of a run as values (docs/log.md#hooks): which one, when it runs, what it is told,
//! how long it may run and whose leftovers it owns. The runner calls them from one place
//! (`run/runner/hooks.rs`), and the log, the events and the run's end name them by this type,
//! so that a new hook does not compile until every one of them says what it does with it.

use std::fmt;
use std::time::Duration;

use super::schedule::Policy;

/// A hook: `sh -c CMD` run between tries or at the end, with the environment of a try plus
/// what the hook is told (`RETRY_EXIT_CODE`, `RETRY_DELAY_MS`, and for some `RETRY_ENV_FILE`).
///
/// A hook runs only after a try that ran and failed. What it leaves running when it ends is its
/// own: its group and, unless `--foreground`, every process below `retry` that was not there
/// when the run started (the leftovers of the try before it were stopped before it started), and
/// it is stopped as a failed try's leftovers are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    /// `--on-retry`: after a failed try that another try follows, before the wait, whose time it
    /// takes. `RETRY_DELAY_MS` is the wait ahead; its `RETRY_ENV_FILE` sets variables for the
    /// later tries and hooks.
    OnRetry,
    /// `--on-give-up`: when the run gives up after a failed try. `RETRY_DELAY_MS` is 0, and it
    /// gets no `RETRY_ENV_FILE` (no try follows).
    OnGiveUp,
}

impl Hook {
    /// The option that names the hook, as the log names it.
    pub fn option(self) -> &'static str {
        match self {
            Hook::OnRetry => "--on-retry",
            Hook::OnGiveUp => "--on-give-up",
        }
    }

    /// Whether the hook gets a `RETRY_ENV_FILE` whose lines set variables for what follows it:
    /// only when tries follow it.
    pub fn hands_on(self) -> bool {
        match self {
            Hook::OnRetry => true,
            Hook::OnGiveUp => false,
        }
    }

    /// How long the hook may run when it starts at `now` (the run's elapsed time): as long as
    /// a try starting then. The run may give up because its budget is spent: `--on-give-up`
    /// still gets the grace period (`kill_after`).
    pub fn bound(self, policy: &Policy, now: Duration, kill_after: Duration) -> Option<Duration> {
        let bound = policy.hook_limit(now);
        match self {
            Hook::OnRetry => bound,
            Hook::OnGiveUp => bound.map(|b| b.max(kill_after)),
        }
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.option())
    }
}
