//! The run's spans as a sink of its events (docs/dashboards.md#traces): one span for the run
//! and one for each try that started, in the trace of the `TRACEPARENT` the run was handed (or
//! a trace of its own), exported once, when the run ends, over OTLP/HTTP in JSON, within a
//! short deadline. A failed export is one warning, and changes nothing else.
//!
//! The tries' span ids are drawn by the runner as it starts each try (it hands them to the
//! try's environment as `TRACEPARENT`) and read here from the trace both share.

pub mod context;
pub mod otlp;
pub mod settings;

use std::ffi::OsString;
use std::path::Path;
use std::time::SystemTime;

use crate::exit::ExitStatus;
use crate::http::{self, HttpError};
use crate::outcome::RunOutcome;
use crate::policy::{Decision, Outcome, Verdict};
use crate::report::event::{Envelope, Event, TryReport, Warning};
use crate::report::facts::{RunFacts, Sink};
use context::SharedTrace;
use otlp::{Span, Value};
use settings::{Export, Note};

/// Exports the run's spans when it ends.
pub struct Traces {
    trace: SharedTrace,
    /// Where the spans go; `None` when a setting sends nothing (the note says why).
    export: Option<Export>,
    /// What the run says of its settings, once, as it starts.
    note: Option<Note>,
    /// `TRACESTATE`, passed on with the caller's trace.
    trace_state: Option<String>,
    /// The command's name (`process.command`): never its arguments, which may hold secrets.
    command: String,
    /// The command's name without its directory, the run span's name without `--label`.
    name: String,
    /// The tries that started: their number, start, and how they ended once they have.
    tries: Vec<(u64, SystemTime, Option<TryReport>)>,
}

impl Traces {
    pub fn new(
        trace: SharedTrace,
        export: Option<Export>,
        note: Option<Note>,
        trace_state: Option<String>,
        command: &[OsString],
    ) -> Traces {
        let first = command.first().map(OsString::as_os_str).unwrap_or_default();
        // Escaped as a log line is, as `--metrics` names a job: a control or invisible
        // character in a file name would otherwise reach every view of the trace.
        let printable = |s: &std::ffi::OsStr| crate::text::printable(&s.to_string_lossy());
        let name = printable(Path::new(first).file_name().unwrap_or(first));
        Traces {
            trace,
            export,
            note,
            trace_state,
            command: printable(first),
            name,
            tries: Vec::new(),
        }
    }

    /// The spans of the run that ended as `outcome` at `end`, having started at `start`.
    fn spans(
        &self,
        outcome: &RunOutcome,
        start: SystemTime,
        end: SystemTime,
        facts: &RunFacts,
    ) -> Vec<Span> {
        let trace = self.trace.borrow();
        let job = facts.run_label.clone().unwrap_or_else(|| self.name.clone());
        let mut attributes = vec![
            ("process.command", Value::Str(self.command.clone())),
            ("retry.run.id", Value::Str(facts.run_id.clone())),
            ("retry.run.outcome", Value::Str(outcome.word().into())),
            ("retry.run.tries", Value::Int(count(outcome.tries.counted))),
            (
                "process.exit.code",
                Value::Int(i64::from(outcome.status.code())),
            ),
        ];
        if let Some(label) = &facts.run_label {
            attributes.push(("retry.label", Value::Str(label.clone())));
        }
        let failed = outcome.status != ExitStatus::Success;
        let reason = outcome.reason().unwrap_or(outcome.word());
        if let Some(why) = outcome.reason() {
            attributes.push(("retry.run.reason", Value::Str(why.into())));
        }
        if failed {
            attributes.push(("error.type", Value::Str(reason.into())));
        }
        let mut spans = vec![Span {
            trace_id: trace.trace_id,
            span_id: trace.run_span,
            parent: trace.parent,
            trace_state: self.trace_state.clone(),
            name: job,
            start,
            end,
            attributes,
            error: failed.then(|| match reason == outcome.word() {
                true => reason.to_string(),
                false => format!("{}: {reason}", outcome.word()),
            }),
        }];
        for (attempt, started, report) in &self.tries {
            // A try that never reached its start drew no span.
            let Some(span_id) = trace.span_of(*attempt) else {
                continue;
            };
            let (ended, attributes, error) = try_facts(*attempt, *started, end, report.as_ref());
            spans.push(Span {
                trace_id: trace.trace_id,
                span_id,
                parent: Some(trace.run_span),
                trace_state: self.trace_state.clone(),
                name: "try".into(),
                start: *started,
                end: ended,
                attributes: [("process.command", Value::Str(self.command.clone()))]
                    .into_iter()
                    .chain(attributes)
                    .collect(),
                error,
            });
        }
        spans
    }

    /// Sends `spans` to `export`: a warning when they are not taken.
    fn send(export: &Export, spans: &[Span]) -> Option<Warning> {
        let body = otlp::request(&export.resource, env!("CARGO_PKG_VERSION"), spans);
        let mut headers: Vec<(&str, &str)> = vec![("content-type", "application/json")];
        headers.extend(export.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let e = http::post(&export.url, &headers, body.as_bytes(), export.within).err()?;
        Some(Warning::TracesNotSent {
            to: http::shown(&export.url),
            why: without_secrets(e, &export.headers).to_string(),
        })
    }
}

/// A number of tries as OTLP's 64-bit integer.
fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The end, attributes and error of try `attempt`, started at `started`, which ended as
/// `report` says, or was still under way when the run ended at `run_end`.
fn try_facts(
    attempt: u64,
    started: SystemTime,
    run_end: SystemTime,
    report: Option<&TryReport>,
) -> (SystemTime, Vec<(&'static str, Value)>, Option<String>) {
    let mut attributes = vec![("retry.try.number", Value::Int(count(attempt)))];
    let Some(r) = report else {
        let why = "the run ended during the try";
        attributes.push(("error.type", Value::Str("_OTHER".into())));
        return (run_end, attributes, Some(why.into()));
    };
    if let Outcome::Exit(code) = r.outcome {
        attributes.push(("process.exit.code", Value::Int(i64::from(code))));
    }
    attributes.push(("retry.try.verdict", Value::Str(r.verdict.word().into())));
    if let Some(reason) = r.verdict.reason().map(ToString::to_string) {
        if !reason.is_empty() {
            attributes.push(("retry.try.reason", Value::Str(reason)));
        }
    }
    let (next, gave_up) = match &r.decision {
        Decision::Retry(_) => ("retry", None),
        Decision::Succeed => ("succeed", None),
        Decision::GiveUp(why) => ("give_up", Some(why.word())),
        Decision::Stop(why) => ("stop", Some(why.word())),
    };
    attributes.push(("retry.try.decision", Value::Str(next.into())));
    if let Some(why) = gave_up {
        attributes.push(("retry.try.stop_reason", Value::Str(why.into())));
    }
    let error = match r.verdict {
        Verdict::Success(_) => None,
        _ => {
            attributes.push(("error.type", Value::Str(error_type(r.outcome))));
            Some(r.outcome.to_string())
        }
    };
    (started + r.took, attributes, error)
}

/// `error.type` of a try that failed: its exit status, the signal that killed it, `timeout`,
/// or why it could not start.
fn error_type(outcome: Outcome) -> String {
    match outcome {
        Outcome::Exit(code) => code.to_string(),
        Outcome::Signal(signal) => signal.to_string(),
        Outcome::Timeout => "timeout".into(),
        Outcome::NotFound => "not_found".into(),
        Outcome::NotExecutable => "not_executable".into(),
        Outcome::NoResources => "no_resources".into(),
    }
}

/// `e` without what the server said when that holds any 8 characters of a header's value
/// (an API key a server echoes back).
fn without_secrets(e: HttpError, headers: &[(String, String)]) -> HttpError {
    let HttpError::Status { status, said } = e else {
        return e;
    };
    let chars: Vec<Vec<char>> = headers.iter().map(|(_, v)| v.chars().collect()).collect();
    let echoed = chars.iter().any(|value| {
        value.len() >= 8
            && value
                .windows(8)
                .any(|piece| said.contains(&piece.iter().collect::<String>()))
    });
    match echoed {
        true => HttpError::Status {
            status,
            said: String::new(),
        },
        false => HttpError::Status { status, said },
    }
}

impl Sink for Traces {
    fn take(&mut self, envelope: &Envelope, facts: &RunFacts) -> Option<Warning> {
        match &envelope.event {
            Event::Start { .. } => self.note.take().map(|note| Warning::TracesSetting {
                variable: note.variable,
                why: note.why,
            }),
            Event::TryStarted { attempt } => {
                self.tries.push((*attempt, envelope.stamp.at, None));
                None
            }
            Event::TryEnded(r) | Event::TryInterrupted(r) => {
                if let Some(t) = self.tries.iter_mut().rev().find(|t| t.0 == r.attempt) {
                    t.2 = Some(r.clone());
                }
                None
            }
            Event::RunEnded(outcome) => {
                let export = self.export.take()?;
                let end = envelope.stamp.at;
                let start = end
                    .checked_sub(envelope.stamp.elapsed)
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                let spans = self.spans(outcome, start, end, facts);
                Traces::send(&export, &spans)
            }
            Event::Stagger { .. }
            | Event::TryOutputDone { .. }
            | Event::TryHeld(_)
            | Event::RequestIgnored { .. }
            | Event::Leftovers { .. }
            | Event::Wait { .. }
            | Event::HookFailed { .. }
            | Event::NoTimeAfterHook { .. }
            | Event::Quota { .. }
            | Event::Succeeded { .. }
            | Event::RepeatEnded { .. }
            | Event::Received { .. }
            | Event::GaveUp { .. }
            | Event::DoneBefore { .. }
            | Event::DeadLettered { .. }
            | Event::Countdown { .. }
            | Event::StatusCleared
            | Event::Concluded { .. }
            | Event::Warning(_)
            | Event::Error(_)
            | Event::ReplayStart { .. }
            | Event::ReplayEnd { .. }
            | Event::ReplaySummary { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commands_name_is_escaped_as_the_log_escapes_it() {
        let draw: context::Draw = Box::new(|| [1; 8]);
        let trace = std::rc::Rc::new(std::cell::RefCell::new(context::RunTrace::new(None, draw)));
        let command = [
            OsString::from("/tmp/a\u{202e}b\rc"),
            OsString::from("secret"),
        ];
        let sink = Traces::new(trace, None, None, None, &command);
        assert_eq!(sink.name, crate::text::printable("a\u{202e}b\rc"));
        assert!(!sink.name.contains('\u{202e}') && !sink.command.contains('\r'));
        assert!(sink.command.starts_with("/tmp/a"));
    }

    #[test]
    fn an_answer_that_echoes_a_header_value_is_reported_by_its_status_only() {
        let headers = [("api-key".to_string(), "s3cr3t-key-0123456789".to_string())];
        let echoed = HttpError::Status {
            status: 401,
            said: "bad key 0123456789".into(),
        };
        assert_eq!(
            without_secrets(echoed, &headers).to_string(),
            "the server answered 401"
        );
        let plain = HttpError::Status {
            status: 500,
            said: "busy".into(),
        };
        assert_eq!(
            without_secrets(plain, &headers).to_string(),
            "the server answered 500: busy"
        );
    }
}
