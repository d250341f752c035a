//! The `--junit` report (docs/ci.md#junit-reports) as a sink of the run's events: one
//! `<testsuite>` in Maven Surefire's schema, which Jenkins, GitLab and nextest read, written when
//! the run ends. A run is one `<testcase>`: a `<failure>` when it gave up (the last try and why,
//! after a `<rerunFailure>` for each failed try before it), a `<flakyFailure>` for each failed try
//! of a run that succeeded after them. A try held back by `--throttle` did not fail: it has no
//! element. A repeat is one `<testcase>` per try, and a replay one per run it replays (each
//! run's own sink hands its case to the replay's, [`ReplayCases`]).
//!
//! Each failed try's element holds the tail of what the try wrote (its `<system-out>`), at most
//! [`EARLIER_MOST`] bytes for a try before the last and [`LAST_MOST`] for the last, whose tail is
//! also in the `<failure>` text: GitLab shows that text and nothing of the reruns.

mod case;
mod file;
mod phrases;
mod xml;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use crate::duration::hms;
use crate::exit::ExitStatus;
use crate::outcome::RunOutcome;
use crate::policy::{Decision, GiveUp, Outcome, RepeatCount, RepeatEnd, Signal, Verdict};
use crate::report::event::{Ends, Envelope, Event, Failure, OutputTail, Stamp, TryReport, Warning};
use crate::report::facts::{RunFacts, Sink};
use crate::report::tally::after_tries;
use crate::report::words::failure_text;
use crate::store::deadletter::{Pending, Replayed};
use crate::text::{self, Charset};
use case::{Case, CaseEnd, Cases, Problem, Suite};
pub use file::check;
use phrases::{held_line, kind, try_line};

/// The most failed tries of one run that its case lists (the last ones): a run without a try
/// limit may try for days. The tries left out are counted in the suite's properties.
const MOST_RERUNS: usize = 1000;

/// The most cases of tries that passed in a repeat; failed tries get theirs up to twice that.
const MOST_CASES: usize = 10_000;

/// The most of a failed try's output that its element shows, for a try before the last.
pub const EARLIER_MOST: usize = 4 * 1024;

/// The most of the last failed try's output that the report shows.
pub const LAST_MOST: usize = 64 * 1024;

/// The most characters of the command line that name a case.
const NAME_MOST: usize = 1024;

/// The cases that the runs of a replay hand over to the replay's report.
#[derive(Clone, Default)]
pub struct ReplayCases(Rc<RefCell<Cases>>);

/// Where the cases go when the run ends.
enum Out {
    /// The report's file, written then.
    File(PathBuf),
    /// The replay that runs this run, which writes them with those of its other runs.
    Replay(ReplayCases),
}

/// Writes the `--junit` report of a run (or a repeat) when it ends.
pub struct Junit {
    out: Out,
    start: Option<SystemTime>,
    /// The failed tries of the run so far, the last `MOST_RERUNS` of them.
    failed: VecDeque<Problem>,
    /// The last try in words, and whether it is the last of `failed`.
    last: Option<(String, bool)>,
    /// The try that started last (a try whose output could not be written has no other event).
    attempt: u64,
    cases: Cases,
    /// A try of a repeat whose case waits for the repeat's end, which says how it counts: one
    /// that the end of the budget cut short, or that a signal stopped.
    pending: Option<TryReport>,
    /// The case of the run, as the last event that ended it made it: a signal during
    /// `--on-give-up` makes it again, and the report is written when the run has ended.
    case: Option<Case>,
    /// The report has gone.
    done: bool,
    /// The tail of the output of the try whose output went last, for its element.
    output: Option<OutputTail>,
}

impl Junit {
    /// The report of a run, written to `path` (absolute: a replay changes directory).
    pub fn to_file(path: &Path) -> Junit {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        Junit::new(Out::File(path))
    }

    /// The report of one run of a replay, handed to the replay's report through `shared`.
    pub fn to_replay(shared: ReplayCases) -> Junit {
        Junit::new(Out::Replay(shared))
    }

    fn new(out: Out) -> Junit {
        Junit {
            out,
            start: None,
            failed: VecDeque::new(),
            last: None,
            attempt: 0,
            cases: Cases::default(),
            pending: None,
            case: None,
            done: false,
            output: None,
        }
    }

    /// Counts the ended try `r`: a case of its own in a repeat, else one more failed try of the
    /// run when it failed.
    fn try_ended(&mut self, r: &TryReport, facts: &RunFacts) {
        let line = try_line(r, facts);
        let failed = !matches!(r.verdict, Verdict::Success(_));
        let output = self.output.take();
        if failed {
            // The try before is no longer the last: its element keeps less.
            self.cut_last_failed();
        }
        let with_output = |mut p: Problem| {
            p.output = output.as_ref().map(shown_tail).unwrap_or_default();
            p
        };
        if facts.repeat.is_some() {
            if let Decision::Stop(RepeatEnd::Budget(None)) = r.decision {
                self.pending = Some(r.clone());
                return;
            }
            let end = match failed {
                false => CaseEnd::Passed,
                true => CaseEnd::Failed {
                    failure: with_output(problem(kind(r), line)),
                    reruns: Vec::new(),
                },
            };
            self.push_try(try_name(facts, r.attempt), r.took, end);
            return;
        }
        if failed {
            if self.failed.len() == MOST_RERUNS {
                self.failed.pop_front();
                self.cases.left_out = self.cases.left_out.saturating_add(1);
            }
            self.failed
                .push_back(with_output(problem(kind(r), line.clone())));
        }
        self.last = Some((line, failed));
    }

    /// Cuts what the last failed try so far shows of its output to [`EARLIER_MOST`], once
    /// another try has failed after it.
    fn cut_last_failed(&mut self) {
        let last = match self.cases.list.last_mut() {
            Some(Case {
                end: CaseEnd::Failed { failure, .. },
                ..
            }) => Some(failure),
            _ => self.failed.back_mut(),
        };
        if let Some(p) = last {
            p.output = keep_last(&p.output, EARLIER_MOST);
        }
    }

    /// Adds the case of a try of a repeat, unless the report has room for no more.
    fn push_try(&mut self, name: String, time: Duration, end: CaseEnd) {
        let room = match end {
            CaseEnd::Passed => MOST_CASES,
            _ => 2 * MOST_CASES,
        };
        if self.cases.list.len() >= room {
            self.cases.left_out = self.cases.left_out.saturating_add(1);
            return;
        }
        self.cases.list.push(Case { name, time, end });
    }

    /// The case of a run that succeeded on its last try: flaky after failed tries, a failure
    /// when `--flaky fail` fails it (`status`).
    fn succeeded(&self, facts: &RunFacts, elapsed: Duration, status: ExitStatus) -> Case {
        let reruns: Vec<Problem> = self.failed.iter().cloned().collect();
        let end = if status != ExitStatus::Success {
            let line = self.last_line();
            let message = format!("{line}, but {}", crate::report::words::flaky_fail(status));
            CaseEnd::Failed {
                failure: problem("flaky".into(), message),
                reruns,
            }
        } else if reruns.is_empty() {
            CaseEnd::Passed
        } else {
            CaseEnd::Flaky(reruns)
        };
        run_case(facts, elapsed, end)
    }

    /// The case of a run that gave up after `tries` tries, for `why`: its `<failure>` tells of
    /// the last try, each failed try before it is a `<rerunFailure>`.
    fn gave_up(&self, facts: &RunFacts, end: GaveUp) -> Case {
        let last_failed = self.last.as_ref().is_some_and(|(_, failed)| *failed);
        let mut failed = self.failed.clone();
        // The last try's output, when it failed: its tail is the failure's.
        let output = match last_failed {
            true => failed.pop_back().map(|p| p.output).unwrap_or_default(),
            false => String::new(),
        };
        let cause = gave_up_cause(&end, facts.consecutive);
        let line = self.last_line();
        // As the log's last line says it, the status last.
        let summary = format!(
            "gave up {} in {}: {cause}",
            after_tries(end.tries),
            hms(end.elapsed)
        );
        // A run that `--lock` turned away ran nothing: the job is not failed, it is being run
        // elsewhere.
        if let GiveUp::Locked(_) = end.why {
            return run_case(facts, end.elapsed, CaseEnd::Skipped(summary));
        }
        let failure = Problem {
            kind: end.why.word().to_string(),
            message: format!("{line}; {summary}"),
            detail: format!("{line}\n{summary}"),
            output,
        };
        let reruns = failed.into_iter().collect();
        run_case(facts, end.elapsed, CaseEnd::Failed { failure, reruns })
    }

    /// The case that `retry`'s own failure `f` ends: the run's, or in a repeat the try's. In a
    /// repeat, the error of a try whose end was already counted (its output could not all be
    /// written after it ended) is that try's case, in place of the one its end made.
    fn error(&mut self, facts: &RunFacts, f: &Failure, elapsed: Duration) -> Case {
        let name = try_name(facts, self.attempt);
        if facts.repeat.is_some() && self.cases.list.last().is_some_and(|c| c.name == name) {
            self.cases.list.pop();
        }
        let text = failure_text(f);
        let error = Problem {
            kind: "error".into(),
            message: text.clone(),
            detail: text,
            output: String::new(),
        };
        let reruns = self.failed.iter().cloned().collect();
        let end = CaseEnd::Error { error, reruns };
        match facts.repeat {
            Some(_) => Case {
                name: try_name(facts, self.attempt),
                time: Duration::ZERO,
                end,
            },
            None => run_case(facts, elapsed, end),
        }
    }

    /// The end of a repeat: the case of a try that waited for it, if one did.
    fn repeat_ended(&mut self, facts: &RunFacts, count: &RepeatCount, why: &RepeatEnd) {
        let Some(r) = self.pending.take() else {
            return;
        };
        let line = try_line(&r, facts);
        let end = match (why, count.tries) {
            (RepeatEnd::Interrupted(signal), _) => interrupted(line, *signal),
            (_, 0) => CaseEnd::Failed {
                failure: problem("budget".into(), format!("{line}: no try ran to its end")),
                reruns: Vec::new(),
            },
            _ => CaseEnd::Skipped(format!("{line}: cut short by the end of the budget")),
        };
        self.push_try(try_name(facts, r.attempt), r.took, end);
    }

    /// The last try in words, or that none ran.
    fn last_line(&self) -> String {
        match &self.last {
            Some((line, _)) => line.clone(),
            None => "no try ran".into(),
        }
    }

    /// Takes the event of `envelope`: counts a try, makes the run's case when it ends the
    /// run (a repeat's cases are all in `cases` by its end), and returns the outcome of the
    /// run when it has ended, for the report to be written.
    fn end_of<'e>(&mut self, envelope: &'e Envelope, facts: &RunFacts) -> Option<&'e RunOutcome> {
        match envelope.event.ends() {
            Ends::Try(r) => {
                self.try_ended(r, facts);
                return None;
            }
            Ends::TryInterrupted(r) => {
                match facts.repeat {
                    Some(_) => self.pending = Some(r.clone()),
                    None => self.last = Some((try_line(r, facts), false)),
                }
                return None;
            }
            // Not a failed try: the report names it only as the last try of a run that gave up.
            Ends::TryHeld(r) => {
                self.last = Some((held_line(r, facts), false));
                return None;
            }
            Ends::Run(outcome) => return Some(outcome),
            // A replay's report is `ReplayJunit`'s.
            Ends::Replay { .. } | Ends::Neither => {}
        }
        let case = match &envelope.event {
            Event::Succeeded {
                elapsed, status, ..
            } => self.succeeded(facts, *elapsed, *status),
            Event::GaveUp {
                tries,
                elapsed,
                why,
                signal,
                last,
                streak,
                ..
            } => self.gave_up(
                facts,
                GaveUp {
                    tries: *tries,
                    elapsed: *elapsed,
                    why: why.clone(),
                    signal: *signal,
                    last: *last,
                    streak: *streak,
                },
            ),
            Event::RepeatEnded { count, why, .. } => {
                self.repeat_ended(facts, count, why);
                return None;
            }
            // A run whose `--once` key was done ran nothing: the job is not failed, it was
            // done earlier.
            Event::DoneBefore { key, done } => {
                let why = crate::report::words::done_before(key, done);
                run_case(facts, envelope.stamp.elapsed, CaseEnd::Skipped(why))
            }
            Event::Error(f) => self.error(facts, f, envelope.stamp.elapsed),
            Event::TryStarted { attempt } => {
                self.attempt = *attempt;
                return None;
            }
            Event::TryOutputDone { output, .. } => {
                self.output.clone_from(output);
                return None;
            }
            // What neither ends a try or the run nor tells of the run's end.
            _ => return None,
        };
        // retry's own failure ends the run: what follows it changes nothing; a signal during
        // `--on-give-up` makes the case of the run that gave up again, as interrupted.
        let errored = self
            .case
            .as_ref()
            .is_some_and(|c| matches!(c.end, CaseEnd::Error { .. }));
        if !errored {
            self.case = Some(case);
        }
        None
    }
}

/// How a run gave up, as its case needs it.
struct GaveUp {
    tries: u64,
    elapsed: Duration,
    why: GiveUp,
    signal: Option<Signal>,
    last: Option<Outcome>,
    streak: u64,
}

/// What the log's last line says the run gave up on: the last try's status, or why none.
fn gave_up_cause(end: &GaveUp, consecutive: Option<u64>) -> String {
    crate::report::words::gave_up_cause(end.signal, end.last, &end.why, end.streak, consecutive)
}

/// What a try wrote, as its element shows it: at most [`LAST_MOST`] bytes of its end, cut
/// between characters, with `…` in place of what came before.
fn shown_tail(tail: &OutputTail) -> String {
    let start = tail.bytes.len().saturating_sub(LAST_MOST);
    let mut bytes = &tail.bytes[start..];
    let cut = tail.cut || start > 0;
    if cut {
        // A character that the cut split in two starts with bytes that continue it.
        let split = bytes
            .iter()
            .take(3)
            .take_while(|&&b| b & 0xc0 == 0x80)
            .count();
        bytes = &bytes[split..];
    }
    let text = String::from_utf8_lossy(bytes);
    match cut {
        true => format!("…{text}"),
        false => text.into_owned(),
    }
}

/// The last `most` bytes of `text`, cut between characters, with `…` in place of the rest.
fn keep_last(text: &str, most: usize) -> String {
    if text.len() <= most {
        return text.to_string();
    }
    let mut start = text.len() - most;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let rest = text[start..].trim_start_matches('…');
    format!("…{rest}")
}

impl Sink for Junit {
    fn take(&mut self, envelope: &Envelope, facts: &RunFacts) -> Option<Warning> {
        let start = *self.start.get_or_insert(start_of(envelope.stamp));
        if self.done {
            return None;
        }
        self.end_of(envelope, facts)?;
        self.done = true;
        let mut cases = std::mem::take(&mut self.cases);
        cases.list.extend(self.case.take());
        match &self.out {
            Out::File(path) => {
                let suite = Suite {
                    start,
                    time: envelope.stamp.elapsed,
                    cases,
                };
                write(path, &suite)
            }
            Out::Replay(shared) => {
                shared.0.borrow_mut().append(cases);
                None
            }
        }
    }
}

/// Writes the `--junit` report of a replay when it ends: a case for each run it replayed, the
/// one that run's own sink made, or one made here for a run that did not run.
pub struct ReplayJunit {
    path: PathBuf,
    shared: ReplayCases,
    start: Option<SystemTime>,
    cases: Cases,
}

impl ReplayJunit {
    /// The report of a replay, written to `path`; its runs hand their cases over to `shared`.
    pub fn new(path: &Path, shared: ReplayCases) -> ReplayJunit {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        ReplayJunit {
            path,
            shared,
            start: None,
            cases: Cases::default(),
        }
    }
}

impl Sink for ReplayJunit {
    fn take(&mut self, envelope: &Envelope, _: &RunFacts) -> Option<Warning> {
        let start = *self.start.get_or_insert(start_of(envelope.stamp));
        if let Event::ReplayEnd {
            pending, replayed, ..
        } = &envelope.event
        {
            let run = std::mem::take(&mut *self.shared.0.borrow_mut());
            match run.list.is_empty() {
                true => self.cases.list.push(not_reported(pending, replayed)),
                false => self.cases.append(run),
            }
            return None;
        }
        match envelope.event.ends() {
            Ends::Replay { .. } => {
                let suite = Suite {
                    start,
                    time: envelope.stamp.elapsed,
                    cases: std::mem::take(&mut self.cases),
                };
                write(&self.path, &suite)
            }
            // Each run's cases come whole, with its `ReplayEnd`.
            Ends::Try(_) | Ends::TryInterrupted(_) | Ends::TryHeld(_) | Ends::Run(_) => None,
            Ends::Neither => None,
        }
    }
}

/// The case of a replayed run that made none itself: it could not start (its directory is
/// gone), or `retry` could not run it (its `--log-file` cannot be opened).
fn not_reported(p: &Pending, replayed: &Replayed) -> Case {
    let name = p
        .record
        .label
        .clone()
        .unwrap_or_else(|| text::command_line(&p.record.command, Charset::Utf8));
    let failure = match replayed {
        Replayed::Resolved { .. } => {
            return Case {
                name,
                time: Duration::ZERO,
                end: CaseEnd::Passed,
            };
        }
        Replayed::Failed {
            exit_code, reason, ..
        } => problem(reason.clone(), format!("exit {exit_code} ({reason})")),
        Replayed::NotRun { reason, error } => problem(reason.clone(), format!("not run: {error}")),
    };
    Case {
        name,
        time: Duration::ZERO,
        end: CaseEnd::Failed {
            failure,
            reruns: Vec::new(),
        },
    }
}

/// Writes `suite` over `path`: the warning that says why it could not be, if it could not.
fn write(path: &Path, suite: &Suite) -> Option<Warning> {
    file::replace(path, &xml::document(suite))
        .err()
        .map(|e| Warning::JunitNotWritten {
            path: path.to_path_buf(),
            why: e.to_string(),
        })
}

/// When the run started, from the stamp of one of its events.
fn start_of(stamp: Stamp) -> SystemTime {
    stamp.at.checked_sub(stamp.elapsed).unwrap_or(stamp.at)
}

/// The name of the run: its `--label`, else its command line as the log quotes it.
/// Cut to [`NAME_MOST`] characters: a case's name is written in each case of a repeat.
fn run_name(facts: &RunFacts) -> String {
    let name = facts.run_label.as_deref().unwrap_or(&facts.command);
    text::cut(name, NAME_MOST, "…")
}

/// The name of try `attempt` of a repeat.
fn try_name(facts: &RunFacts, attempt: u64) -> String {
    format!("{} (try {attempt})", run_name(facts))
}

fn run_case(facts: &RunFacts, time: Duration, end: CaseEnd) -> Case {
    Case {
        name: run_name(facts),
        time,
        end,
    }
}

/// A problem whose message is also its text.
fn problem(kind: String, message: String) -> Problem {
    Problem {
        kind,
        detail: message.clone(),
        message,
        output: String::new(),
    }
}

/// The failure of a try of a repeat that `signal`, reaching `retry`, stopped.
fn interrupted(line: String, signal: Signal) -> CaseEnd {
    CaseEnd::Failed {
        failure: problem(
            GiveUp::Interrupted.word().into(),
            format!("{line}; interrupted by {signal}"),
        ),
        reruns: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
