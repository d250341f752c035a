//! The stage every event of a run meets before the sinks: it counts the tries as they end
//! ([`Tally`]), and announces the end of a run that needed retries or gave up, once, with an
//! [`Event::Concluded`] that every sink takes before the event that ended the run (GitHub's
//! annotation, the job summary, and the human log, which leaves out a line the annotation says).

use std::time::Duration;

use crate::exit::ExitStatus;
use crate::policy::{Decision, Form, LimitSource, RepeatEnd, Verdict};
use crate::report::event::{Event, HeldReport, Level, TryReport};
use crate::report::facts::RunFacts;
use crate::report::tally::{Tally, TryRow, repeat_summary};

impl Tally {
    /// Counts `event` if it ends a try; for the event that ends a run which retried or gave
    /// up, the conclusion to announce first (once: a later give-up, a signal during
    /// `--on-give-up`, announces nothing more).
    pub fn conclude(&mut self, event: &Event, facts: &RunFacts) -> Option<Event> {
        let (level, summary) = match event {
            Event::TryEnded(r) => {
                self.record_try(r, true, facts);
                return None;
            }
            Event::TryInterrupted(r) => {
                self.record_try(r, false, facts);
                return None;
            }
            Event::TryHeld(r) => {
                self.record_held(r, facts);
                return None;
            }
            // A run that succeeded at once is not announced: nothing needed retrying.
            Event::Succeeded { flaky: false, .. } => return None,
            Event::Succeeded {
                attempt,
                elapsed,
                waited,
                status,
                ..
            } => self.late_success(&facts.label(*attempt), *elapsed, *waited, *status),
            Event::RepeatEnded { count, why, .. } => {
                // A repeat in which every try passed has nothing to announce; one in which
                // none ran to its end proved nothing.
                let failed = count.failed > 0
                    || count.tries == 0
                    || matches!(why, RepeatEnd::Interrupted(_));
                if !failed {
                    return None;
                }
                (Level::Error, repeat_summary(count, why))
            }
            Event::GaveUp {
                tries,
                elapsed,
                why,
                signal,
                ..
            } => {
                // A pipeline whose reader has gone ends quietly, as it would without retry.
                if event.reader_gone() {
                    return None;
                }
                {
                    let why = crate::report::words::give_up_reason(why, *signal);
                    (Level::Error, self.gave_up(*tries, *elapsed, &why))
                }
            }
            Event::Start { .. }
            | Event::Stagger { .. }
            | Event::TryStarted { .. }
            | Event::TryOutputDone { .. }
            | Event::RequestIgnored { .. }
            | Event::Leftovers { .. }
            | Event::Wait { .. }
            | Event::HookFailed { .. }
            | Event::NoTimeAfterHook { .. }
            | Event::Quota { .. }
            | Event::Received { .. }
            | Event::DeadLettered { .. }
            | Event::RunEnded(_)
            | Event::Countdown { .. }
            | Event::StatusCleared
            | Event::Concluded { .. }
            | Event::Warning(_)
            | Event::Error(_)
            | Event::ReplayStart { .. }
            | Event::ReplayEnd { .. }
            | Event::ReplaySummary { .. } => return None,
        };
        if !self.conclude_once() {
            return None;
        }
        Some(Event::Concluded {
            level,
            summary,
            tally: self.clone(),
        })
    }

    /// The announcement of a success on try `label` after failed tries: a warning, or an
    /// error when `--flaky fail` fails it.
    fn late_success(
        &self,
        label: &str,
        elapsed: Duration,
        waited: Duration,
        status: ExitStatus,
    ) -> (Level, String) {
        let summary = self.succeeded(label, elapsed, waited);
        match status {
            ExitStatus::Success => (Level::Warning, summary),
            failed => (
                Level::Error,
                format!(
                    "{summary}, but {}",
                    crate::report::words::flaky_fail(failed)
                ),
            ),
        }
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
            verdict: format!("held: p={:.2}", r.admission.p),
        };
        self.record(row, false);
    }
}
