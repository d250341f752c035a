//! The `--history` file as a sink of the run's events (docs/flaky.md#history-and-statistics): the
//! outcome of every try, then one line for the run when it ends, whatever its end, appended whole
//! under the file's lock (`store::record::append`, which follows
//! docs/files.md#files-that-outlive-a-run). `retry --stats` reads it back.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::duration::millis;
use crate::outcome::{RunOutcome, RunVerdict};
use crate::policy::Outcome;
use crate::report::event::{Ends, Envelope, Warning};
use crate::report::facts::{RunFacts, Sink};
use crate::store::fleet::{Fleet, host_name};
use crate::store::history::{Ending, Entry};
use crate::store::record;

/// The most try outcomes a line lists: a run without a try limit may try for days, and a
/// line must stay far below the megabyte a reader takes (5,000 outcomes are about 70 KiB).
pub const MOST_OUTCOMES: usize = 5000;

/// Records the run in `--history` when it ends.
pub struct History {
    path: PathBuf,
    command: Vec<OsString>,
    /// The end of the run's budget, from its start, if it has one: the wait for the lock
    /// ends there.
    until: Option<Duration>,
    outcomes: Vec<Option<Outcome>>,
    /// The fleet's history on Redis, when the line goes there rather than to the file
    /// (`path` then names the store as the log shows it).
    fleet: Option<Fleet>,
}

impl History {
    pub fn new(path: PathBuf, command: Vec<OsString>, until: Option<Duration>) -> History {
        History {
            path,
            command,
            until,
            outcomes: Vec::new(),
            fleet: None,
        }
    }

    /// The history is the fleet's on Redis.
    pub fn on(mut self, fleet: Fleet) -> History {
        self.fleet = Some(fleet);
        self
    }

    /// The line of the run that ended as `outcome`, at `at`.
    fn entry(&self, outcome: &RunOutcome, at: SystemTime, facts: &RunFacts) -> Entry {
        let ending = match &outcome.verdict {
            RunVerdict::Succeeded | RunVerdict::Flaky { .. } => Ending::Success,
            RunVerdict::Repeated { .. } => Ending::Repeat,
            RunVerdict::Interrupted { .. } => Ending::Interrupted,
            RunVerdict::DoneBefore(_) => Ending::DoneBefore,
            RunVerdict::GaveUp(_) | RunVerdict::OutputFailed | RunVerdict::Internal => {
                Ending::GaveUp
            }
        };
        Entry {
            id: facts.run_id.clone(),
            ts: record::ts(at),
            label: facts.run_label.clone(),
            command: self.command.clone(),
            tries: outcome.tries.counted,
            ending,
            reason: outcome.reason().map(str::to_string),
            exit_code: u64::try_from(outcome.status.code()).unwrap_or_default(),
            flaky: outcome.flaky(),
            duration_ms: millis(outcome.elapsed),
            try_outcomes: self.outcomes.clone(),
            failed: Some(match &outcome.verdict {
                // A repeat counts its failed tries as its summary line does.
                RunVerdict::Repeated { failed, .. } => *failed,
                _ => outcome.tries.failed,
            }),
            host: None,
        }
    }
}

impl Sink for History {
    fn take(&mut self, envelope: &Envelope, facts: &RunFacts) -> Option<Warning> {
        let outcome = match envelope.event.ends() {
            Ends::Try(r) | Ends::TryInterrupted(r) => {
                self.add(Some(r.outcome));
                return None;
            }
            Ends::TryHeld(_) => {
                self.add(None);
                return None;
            }
            Ends::Run(outcome) => outcome,
            // A replay's runs each write their own line; the replay writes none.
            Ends::Replay { .. } | Ends::Neither => return None,
        };
        let entry = self.entry(outcome, envelope.stamp.at, facts);
        if let Some(fleet) = &mut self.fleet {
            return fleet.add_run(&entry.line(), &host_name()).err().map(|e| {
                Warning::HistoryNotWritten {
                    path: self.path.clone(),
                    why: e.to_string(),
                }
            });
        }
        let left = self
            .until
            .map(|end| end.saturating_sub(envelope.stamp.elapsed));
        record::append(&self.path, &entry.line(), record::lock_wait(left))
            .err()
            .map(|e| Warning::HistoryNotWritten {
                path: self.path.clone(),
                why: e.to_string(),
            })
    }
}

impl History {
    /// Adds a try's outcome (`None`: held back by `--throttle`), up to `MOST_OUTCOMES`.
    fn add(&mut self, outcome: Option<Outcome>) {
        if self.outcomes.len() < MOST_OUTCOMES {
            self.outcomes.push(outcome);
        }
    }
}
