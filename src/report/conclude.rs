//! The stage every event of a run meets before the sinks: it counts the tries as they end
//! ([`Tally`]), and announces the end of a run that needed retries or gave up, once, when the
//! run has ended (after its hooks), with an [`Event::Concluded`] that every sink takes before
//! the event that ends the run (GitHub's annotation, the job summary, and the human log, which
//! leaves out a line the annotation says). The announcement follows the last event that told of
//! the run's end: a signal during `--on-give-up` makes it an interrupted run's.

use std::time::Duration;

use crate::exit::ExitStatus;
use crate::outcome::{RunOutcome, RunVerdict};
use crate::policy::{Decision, Form, GiveUp, LimitSource, RepeatEnd, Verdict};
use crate::report::event::{Ends, Event, HeldReport, Level, TryReport};
use crate::report::facts::RunFacts;
use crate::report::tally::{Tally, TryRow, repeat_summary};
use crate::report::words;

impl Event {
    /// How the end of a run that this event tells of is announced (GitHub's annotation, the job
    /// summary), if it is: a late success warns (an error when `--flaky fail` fails it), giving
    /// up and a repeat with a failed try are errors, a run turned away by `--lock` warns; a run
    /// that succeeded at once, and one whose reader has gone, are not announced.
    pub fn announced_as(&self) -> Option<Level> {
        match self {
            Event::Succeeded { flaky: false, .. } => None,
            Event::Succeeded { status, .. } => Some(match status {
                ExitStatus::Success => Level::Warning,
                _ => Level::Error,
            }),
            Event::RepeatEnded { count, why, .. } => {
                // A repeat in which none ran to its end proved nothing.
                let failed = count.failed > 0
                    || count.tries == 0
                    || matches!(why, RepeatEnd::Interrupted(_));
                failed.then_some(Level::Error)
            }
            // A run that `--lock` turned away ran nothing: the job is being run elsewhere.
            Event::GaveUp {
                why: GiveUp::Locked(_),
                ..
            } => Some(Level::TurnedAway),
            Event::GaveUp { .. } => (!self.reader_gone()).then_some(Level::Error),
            _ => None,
        }
    }
}

/// The stage every event meets before the sinks: the tally of the tries, and how the run's end
/// will be announced, as the last event that told of it says (a signal during `--on-give-up`
/// tells it again): a warning or an error, and its summary; `None` when there is nothing to
/// announce.
#[derive(Default)]
pub struct Stage {
    tally: Tally,
    ending: Option<(Level, String)>,
}

impl Stage {
    /// Counts `event` if it ends a try, and keeps what an event that tells of the run's end
    /// would announce.
    pub fn take(&mut self, event: &Event, facts: &RunFacts) {
        self.tally.count(event, facts, &mut self.ending);
    }

    /// The conclusion of the run that ended as `outcome`, announced once, before the run's
    /// records are written: as the last event that told of its end says, or, for a run that no
    /// such event told of (its output could not be written, `retry` failed), from the outcome.
    pub fn conclude(&mut self, outcome: &RunOutcome) -> Option<Event> {
        let tally = &mut self.tally;
        let quiet_end = outcome.signal() == Some(crate::policy::Signal::PIPE);
        let untold = match outcome.verdict {
            RunVerdict::OutputFailed => Some("its output could not be written"),
            RunVerdict::Internal if outcome.tries.counted > 0 => Some("retry itself failed"),
            _ => None,
        };
        let ending = match (self.ending.take(), untold) {
            (Some(ending), _) => ending,
            (None, Some(why)) if !quiet_end => {
                let summary = tally.gave_up(outcome.tries.counted, outcome.elapsed, why);
                (Level::Error, summary)
            }
            (None, _) => return None,
        };
        if !tally.conclude_once() {
            return None;
        }
        let (level, summary) = ending;
        Some(Event::Concluded {
            level,
            summary,
            tally: tally.clone(),
        })
    }
}

impl Tally {
    /// Counts `event` if it ends a try; keeps in `ending` what an event that tells of the run's
    /// end would announce.
    fn count(&mut self, event: &Event, facts: &RunFacts, ending: &mut Option<(Level, String)>) {
        match event.ends() {
            Ends::Try(r) => return self.record_try(r, true, facts),
            Ends::TryInterrupted(r) => return self.record_try(r, false, facts),
            Ends::TryHeld(r) => return self.record_held(r, facts),
            // The stage concludes the run before its outcome is known.
            Ends::Run(_) | Ends::Replay { .. } | Ends::Neither => {}
        }
        let told = match event {
            Event::Succeeded {
                attempt,
                elapsed,
                waited,
                ..
            } => event.announced_as().map(|level| {
                let summary = self.succeeded(&facts.label(*attempt), *elapsed, *waited);
                match event {
                    Event::Succeeded { status, .. } if level == Level::Error => (
                        level,
                        format!("{summary}, but {}", words::flaky_fail(*status)),
                    ),
                    _ => (level, summary),
                }
            }),
            Event::RepeatEnded { count, why, .. } => event
                .announced_as()
                .map(|level| (level, repeat_summary(count, why))),
            Event::GaveUp {
                tries,
                elapsed,
                why,
                signal,
                ..
            } => event.announced_as().map(|level| {
                let why = words::give_up_reason(why, *signal);
                (level, self.gave_up(*tries, *elapsed, &why))
            }),
            // What tells of no end of the run in words.
            _ => return,
        };
        *ending = told;
    }

    /// Adds the ended try `r`; `ended` when it ended by itself (a try that `retry` stopped on a
    /// signal it received is not one of the command's failures).
    fn record_try(&mut self, r: &TryReport, ended: bool, facts: &RunFacts) {
        let limit = r
            .stopped_by_limit
            .then_some(facts.limit.unwrap_or(LimitSource::Budget));
        let verdict = match r.verdict.reason() {
            Some(reason) => format!("{}: {reason}", r.verdict.word()),
            None => r.verdict.word().to_string(),
        };
        let row = TryRow {
            try_label: facts.label(r.attempt),
            outcome: r.outcome.words(Form::Count(limit)),
            took: r.took,
            wait: match r.decision {
                Decision::Retry(wait) => Some(wait.delay),
                _ => None,
            },
            verdict,
        };
        let failed = ended && !matches!(r.verdict, Verdict::Success(_));
        self.record(row, failed);
    }

    /// Adds a try that `--throttle` held back: a row of the table, not a failure.
    fn record_held(&mut self, r: &HeldReport, facts: &RunFacts) {
        let row = TryRow {
            try_label: facts.label(r.attempt),
            outcome: "held back".into(),
            took: Duration::ZERO,
            wait: match r.decision {
                Decision::Retry(wait) => Some(wait.delay),
                _ => None,
            },
            verdict: format!(
                "held: p={}",
                crate::policy::throttle::shown_p(r.admission.p)
            ),
        };
        self.record(row, false);
    }
}
