//! What a run is handed when it starts (what `retry` found around it) and what it hands back
//! when it ends.

use std::ffi::OsString;
use std::time::SystemTime;

use crate::exit::ExitStatus;
use crate::outcome::RunOutcome;
use crate::policy::Signal;
use crate::report::event::Warning;
use crate::run::clock::Moment;
use crate::run::process::{Inherited, Terminal};
use crate::run::runner::quota::SharedQuota;
use crate::run::signals::Signals;
use crate::store::deadletter::DeadLetter;

/// What `retry` found around it when it started: read once by the shell (`run::real_run`)
/// and handed to the runner, which reads no environment and probes no terminal itself.
pub struct Surroundings {
    /// The run's id, passed to every try as `RETRY_RUN_ID`.
    pub run_id: String,
    /// When the run started, on the run's clock and on the wall clock.
    pub start: Moment,
    pub wall_start: SystemTime,
    /// The terminal `retry` runs on, if any.
    pub terminal: Option<Terminal>,
    /// What was below `retry` before its first try, never stopped with a try.
    pub inherited: Inherited,
    /// The run this one runs in, when a try of another `retry` started it.
    pub outer: Option<OuterRun>,
    /// The retry quota this run shares with others (`--quota`), its store open.
    pub quota: Option<SharedQuota>,
    /// Where the run is recorded if it gives up (`--dead-letter`).
    pub dead_letter: Option<DeadLetter>,
    /// The lease a replay holds on this run, renewed while it runs.
    pub keeper: Option<crate::run::keep::Kept>,
    /// Where the file of `--lock` is, if the run has one.
    pub lock: Option<crate::store::run_lock::LockPlace>,
    /// The run's trace, when `TRACEPARENT` or an OTLP endpoint asks for one: each try is
    /// told its span (docs/dashboards.md#traces).
    pub trace: Option<crate::report::traces::context::SharedTrace>,
}

/// How a run ended: its outcome, as `RunEnded` carried it to every record and never changed
/// after, a stopping signal that reached `retry` after the outcome was made, while withheld output
/// was played back or the reports were written (it dies of it), and the signal handling, which
/// outlives one run (a replay runs many).
pub struct RunEnd {
    pub outcome: RunOutcome,
    /// A stopping signal received after the run's outcome was made.
    pub received: Option<Signal>,
    pub signals: Signals,
}

impl RunEnd {
    /// The end of a run that no signal reached after its outcome was made.
    pub fn new(outcome: RunOutcome, signals: Signals) -> RunEnd {
        RunEnd {
            outcome,
            received: None,
            signals,
        }
    }

    /// The status `retry` exits with: the outcome's, or the signal received after it was made.
    pub fn status(&self) -> ExitStatus {
        self.received
            .map_or(self.outcome.status, ExitStatus::Reraise)
    }

    /// The signal `retry` dies of, if any.
    pub fn signal(&self) -> Option<Signal> {
        self.received.or(self.outcome.signal())
    }
}

/// The `retry` run that started this one, as its try's environment says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OuterRun {
    pub id: String,
    /// Its try that started this run (`RETRY_ATTEMPT`), as written.
    pub attempt: String,
    /// Its tries at most, 0 for no limit.
    pub max_tries: u64,
}

impl OuterRun {
    /// The warning that a run of `inner` tries at most is nested in this one: on the outer
    /// run's first try only, so that it is said once.
    pub fn nested_warning(&self, inner: u64) -> Option<Warning> {
        if !self.attempt.is_empty() && self.attempt != "1" {
            return None;
        }
        Some(Warning::Nested {
            outer_id: self.id.clone(),
            outer: self.max_tries,
            inner,
        })
    }

    /// Reads the outer run from the environment variables a try of `retry` gets.
    pub fn from_env(var: impl Fn(&str) -> Option<OsString>) -> Option<OuterRun> {
        let id = var("RETRY_RUN_ID")?.to_string_lossy().into_owned();
        let text = |name| var(name).map(|v| v.to_string_lossy().into_owned());
        Some(OuterRun {
            id,
            attempt: text("RETRY_ATTEMPT").unwrap_or_default(),
            max_tries: text("RETRY_MAX_TRIES")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outer_run_is_read_from_the_environment_a_try_gets() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        assert_eq!(OuterRun::from_env(env(&[])), None);
        let outer = OuterRun::from_env(env(&[
            ("RETRY_RUN_ID", "abc"),
            ("RETRY_ATTEMPT", "2"),
            ("RETRY_MAX_TRIES", "5"),
        ]));
        assert_eq!(
            outer,
            Some(OuterRun {
                id: "abc".into(),
                attempt: "2".into(),
                max_tries: 5
            })
        );
        let outer = OuterRun::from_env(env(&[("RETRY_RUN_ID", "x"), ("RETRY_MAX_TRIES", "n")]));
        assert_eq!(
            outer.map(|o| (o.attempt, o.max_tries)),
            Some((String::new(), 0))
        );
    }
}
