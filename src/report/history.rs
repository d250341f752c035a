//! The `--history` file as a sink of the run's events (spec 18.4): the outcome of every try,
//! then one line for the run when it ends, whatever its end, appended whole under the file's
//! lock (`store::deadletter::append`, which follows spec 19). `retry --stats` reads it back.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::exit::ExitStatus;

use crate::duration::millis;
use crate::policy::{GiveUp, Outcome, RepeatEnd};
use crate::report::event::{Event, Warning};
use crate::report::facts::{RunFacts, Sink};
use crate::store::deadletter;
use crate::store::history::{Ending, Entry};

/// The most try outcomes a line lists: a run without a try limit may try for days, and a
/// line must stay far below the megabyte a reader takes (5,000 outcomes are about 70 KiB).
pub const MOST_OUTCOMES: usize = 5000;

/// How a run ended: `(ending, tries, reason, status, duration, failed tries of a repeat)`.
type End = (
    Ending,
    u64,
    Option<String>,
    ExitStatus,
    Duration,
    Option<u64>,
);

/// Records the run in `--history` when it ends.
pub struct History {
    path: PathBuf,
    command: Vec<OsString>,
    /// The end of the run's budget, if it has one: the wait for the lock ends there.
    until: Option<Instant>,
    outcomes: Vec<Outcome>,
    /// The run has been recorded: a later end (a signal during `--on-give-up`) is not.
    written: bool,
}

impl History {
    pub fn new(path: PathBuf, command: Vec<OsString>, until: Option<Instant>) -> History {
        History {
            path,
            command,
            until,
            outcomes: Vec::new(),
            written: false,
        }
    }

    /// The line of the run that `event` ends, if it ends one.
    fn entry(&self, event: &Event, facts: &RunFacts) -> Option<Entry> {
        let (ending, tries, reason, status, elapsed, failed) = end_of(event)?;
        Some(Entry {
            id: facts.run_id.clone(),
            ts: deadletter::now(),
            label: facts.run_label.clone(),
            command: self.command.clone(),
            tries,
            ending,
            reason,
            exit_code: u64::try_from(status.code()).unwrap_or_default(),
            flaky: ending == Ending::Success && tries > 1,
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
            ..
        } => (Ending::Success, *attempt, None, *status, *elapsed, None),
        Event::GaveUp {
            tries,
            elapsed,
            why,
            status,
            ..
        } => {
            let ending = match why {
                GiveUp::Interrupted => Ending::Interrupted,
                _ => Ending::GaveUp,
            };
            let reason = Some(why.word().to_string());
            (ending, *tries, reason, *status, *elapsed, None)
        }
        Event::RepeatEnded {
            count,
            status,
            elapsed,
            why,
        } => {
            // Why it ended when not by running every try asked for.
            let reason = (*why != RepeatEnd::Done).then(|| why.word().to_string());
            let failed = Some(count.failed);
            (
                Ending::Repeat,
                count.tries,
                reason,
                *status,
                *elapsed,
                failed,
            )
        }
        _ => return None,
    };
    Some(end)
}

impl Sink for History {
    fn take(&mut self, event: &Event, facts: &RunFacts) -> Vec<Event> {
        if let Event::TryEnded(r) | Event::TryInterrupted(r) = event {
            if self.outcomes.len() < MOST_OUTCOMES {
                self.outcomes.push(r.outcome);
            }
            return Vec::new();
        }
        if self.written {
            return Vec::new();
        }
        let Some(entry) = self.entry(event, facts) else {
            return Vec::new();
        };
        self.written = true;
        let left = self
            .until
            .map(|end| end.saturating_duration_since(Instant::now()));
        match deadletter::append(&self.path, &entry.line(), deadletter::lock_wait(left)) {
            Ok(()) => Vec::new(),
            Err(e) => vec![Event::Warning(Warning::HistoryNotWritten {
                path: self.path.clone(),
                why: e.to_string(),
            })],
        }
    }
}
