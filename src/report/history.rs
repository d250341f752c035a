//! The `--history` file as a sink of the run's events (docs/flaky.md#history-and-statistics): the
//! outcome of every try, then one line for the run when it ends, whatever its end, appended whole
//! under the file's lock (`store::deadletter::append`, which follows
//! docs/files.md#files-that-outlive-a-run). `retry --stats` reads it back.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::exit::ExitStatus;

use crate::duration::millis;
use crate::policy::{GiveUp, Outcome, RepeatEnd};
use crate::report::event::{Envelope, Event, Warning};
use crate::report::facts::{RunFacts, Sink};
use crate::store::deadletter;
use crate::store::history::{Ending, Entry};

/// The most try outcomes a line lists: a run without a try limit may try for days, and a
/// line must stay far below the megabyte a reader takes (5,000 outcomes are about 70 KiB).
pub const MOST_OUTCOMES: usize = 5000;

/// How a run ended, as its line records it.
struct End {
    ending: Ending,
    tries: u64,
    /// Why it gave up, or why a repeat ended when not by running every try asked for.
    reason: Option<String>,
    status: ExitStatus,
    elapsed: Duration,
    /// The failed tries of a repeat.
    failed: Option<u64>,
    /// It succeeded only after failed tries.
    flaky: bool,
}

/// Records the run in `--history` when it ends.
pub struct History {
    path: PathBuf,
    command: Vec<OsString>,
    /// The end of the run's budget, from its start, if it has one: the wait for the lock
    /// ends there.
    until: Option<Duration>,
    outcomes: Vec<Outcome>,
    /// The run has been recorded: a later end (a signal during `--on-give-up`) is not.
    written: bool,
}

impl History {
    pub fn new(path: PathBuf, command: Vec<OsString>, until: Option<Duration>) -> History {
        History {
            path,
            command,
            until,
            outcomes: Vec::new(),
            written: false,
        }
    }

    /// The line of the run that `event` ends, if it ends one.
    fn entry(&self, event: &Event, at: SystemTime, facts: &RunFacts) -> Option<Entry> {
        let End {
            ending,
            tries,
            reason,
            status,
            elapsed,
            failed,
            flaky,
        } = end_of(event)?;
        Some(Entry {
            id: facts.run_id.clone(),
            ts: deadletter::ts(at),
            label: facts.run_label.clone(),
            command: self.command.clone(),
            tries,
            ending,
            reason,
            exit_code: u64::try_from(status.code()).unwrap_or_default(),
            flaky,
            duration_ms: millis(elapsed),
            try_outcomes: self.outcomes.clone(),
            failed,
        })
    }
}

/// How the run that `event` ends ended: its ending, tries, reason, status, time and (for a
/// repeat) failed tries; `None` for an event that ends no run.
fn end_of(event: &Event) -> Option<End> {
    let end = match event {
        Event::Succeeded {
            attempt,
            elapsed,
            status,
            flaky,
            ..
        } => End {
            ending: Ending::Success,
            tries: *attempt,
            reason: None,
            status: *status,
            elapsed: *elapsed,
            failed: None,
            flaky: *flaky,
        },
        Event::GaveUp {
            tries,
            elapsed,
            why,
            status,
            ..
        } => End {
            ending: match why {
                GiveUp::Interrupted => Ending::Interrupted,
                _ => Ending::GaveUp,
            },
            tries: *tries,
            reason: Some(why.word().to_string()),
            status: *status,
            elapsed: *elapsed,
            failed: None,
            flaky: false,
        },
        Event::RepeatEnded {
            count,
            status,
            elapsed,
            why,
        } => End {
            ending: Ending::Repeat,
            tries: count.tries,
            // Why it ended when not by running every try asked for.
            reason: (*why != RepeatEnd::Done).then(|| why.word().to_string()),
            status: *status,
            elapsed: *elapsed,
            failed: Some(count.failed),
            flaky: false,
        },
        // Only the end of a run makes a line (the try outcomes are counted before).
        Event::Start { .. }
        | Event::Stagger { .. }
        | Event::TryStarted { .. }
        | Event::TryOutputDone { .. }
        | Event::TryEnded(_)
        | Event::TryInterrupted(_)
        | Event::TryHeld(_)
        | Event::RequestIgnored { .. }
        | Event::Leftovers { .. }
        | Event::Wait { .. }
        | Event::HookFailed { .. }
        | Event::NoTimeAfterHook { .. }
        | Event::Quota { .. }
        | Event::Received { .. }
        | Event::DeadLettered { .. }
        | Event::Countdown { .. }
        | Event::StatusCleared
        | Event::Concluded { .. }
        | Event::Warning(_)
        | Event::Error(_)
        | Event::ReplayStart { .. }
        | Event::ReplayEnd { .. }
        | Event::ReplaySummary { .. } => return None,
    };
    Some(end)
}

impl Sink for History {
    fn take(&mut self, envelope: &Envelope, facts: &RunFacts) -> Option<Warning> {
        let event = &envelope.event;
        if let Event::TryEnded(r) | Event::TryInterrupted(r) = event {
            if self.outcomes.len() < MOST_OUTCOMES {
                self.outcomes.push(r.outcome);
            }
            return None;
        }
        if self.written {
            return None;
        }
        let entry = self.entry(event, envelope.stamp.at, facts)?;
        self.written = true;
        let left = self
            .until
            .map(|end| end.saturating_sub(envelope.stamp.elapsed));
        deadletter::append(&self.path, &entry.line(), deadletter::lock_wait(left))
            .err()
            .map(|e| Warning::HistoryNotWritten {
                path: self.path.clone(),
                why: e.to_string(),
            })
    }
}
