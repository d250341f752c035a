//! The schedule log (spec 8.1, 8.2) and what CI reads (spec 8.4), as one reporter: the runner
//! hands it [`Event`]s, and it fans each one out to its sinks, in order: the tally of the tries,
//! the job summary, the CI markers, then the log itself (human or JSON lines, to standard error
//! or `--log-file`). Writing never fails the run: a closed stderr loses the log, not the
//! command's result.

use std::cell::RefCell;
use std::ffi::OsStr;
use std::io::Write;
use std::rc::Rc;
use std::time::Duration;

use crate::config::{ColorWhen, Config, LogFormat};
use crate::policy::{LimitSource, Outcome, Signal};
use crate::report::ci::{self, Ci, System};
use crate::report::event::{Event, Warning};
use crate::report::human::HumanLog;
use crate::report::jsonlog::JsonLog;
use crate::report::{charset, command_line_in};

/// What every sink knows of the run from its options and surroundings.
#[derive(Clone, Debug)]
pub struct RunFacts {
    pub run_id: String,
    /// `--label`: the run's name, in every line and event.
    pub run_label: Option<String>,
    pub max_tries: Option<u64>,
    /// The signal that stops a try (`--signal`), and the grace period before SIGKILL.
    pub signal: Signal,
    pub kill_after: Duration,
    /// What ends the run early, if anything: the budget or the deadline.
    pub limit: Option<LimitSource>,
    pub json: bool,
    pub quiet: bool,
    pub verbose: bool,
    /// Write ASCII only (a locale whose character set is not UTF-8).
    pub ascii: bool,
    /// The CI around the run (spec 8.4): what it reads besides the log.
    pub ci: Ci,
    /// The log goes to standard error (no `--log-file`), where the CI reads its markers too.
    pub on_stderr: bool,
    /// The command line, for the job summary.
    pub command: String,
}

impl RunFacts {
    pub fn new(config: &Config, run_id: String) -> RunFacts {
        RunFacts {
            run_id,
            run_label: config.label.clone(),
            max_tries: config.policy.max_tries,
            signal: config.signal,
            kill_after: config.kill_after,
            limit: config.policy.limit.map(|l| l.source),
            json: config.log.format == LogFormat::Json,
            quiet: config.log.quiet,
            verbose: config.log.verbose,
            ascii: charset::ascii(),
            ci: Ci::default(),
            on_stderr: config.log.file.is_none(),
            command: command_line_in(&config.command, false),
        }
    }

    /// `3/5`, or `3` without a try limit.
    pub fn label(&self, attempt: u64) -> String {
        match self.max_tries {
            Some(n) => format!("{attempt}/{n}"),
            None => attempt.to_string(),
        }
    }

    /// The CI whose markers (annotations, groups, sections) the run writes, if any: none into a
    /// JSON log on standard error, which stays JSON lines only.
    pub fn ci_markers(&self) -> Option<System> {
        self.ci.system.filter(|_| !(self.json && self.on_stderr))
    }

    /// `budget` or `deadline`: what stopped a try that `--timeout` did not.
    pub fn limit_word(&self) -> &'static str {
        match self.limit {
            Some(LimitSource::Deadline) => "deadline",
            Some(LimitSource::Budget) | None => "budget",
        }
    }
}

/// A receiver of events: it writes them somewhere, or keeps them. It may answer with events of
/// its own (a file it could not write), which every sink then takes, before the next one takes
/// the event that caused them.
pub trait Sink {
    fn take(&mut self, event: &Event, facts: &RunFacts) -> Vec<Event>;
}

/// A sink that keeps every event, for tests.
#[derive(Clone, Default)]
pub struct Collect(pub Rc<RefCell<Vec<Event>>>);

impl Sink for Collect {
    fn take(&mut self, event: &Event, _: &RunFacts) -> Vec<Event> {
        self.0.borrow_mut().push(event.clone());
        Vec::new()
    }
}

/// The run's reporter: every event goes to every sink.
pub struct Log {
    facts: RunFacts,
    sinks: Vec<Box<dyn Sink>>,
}

/// Decides whether `--color` means colour for a log written to a terminal or not.
pub fn use_color(when: ColorWhen, is_terminal: bool, no_color: bool) -> bool {
    match when {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => is_terminal && !no_color,
    }
}

impl Log {
    /// The log of a run to `out`, human or JSON as `config` says.
    pub fn new(out: Box<dyn Write>, config: &Config, color: bool, run_id: String) -> Log {
        let facts = RunFacts::new(config, run_id);
        let sink: Box<dyn Sink> = match facts.json {
            true => Box::new(JsonLog::new(out, config)),
            false => Box::new(HumanLog::new(out, config, color)),
        };
        Log {
            facts,
            sinks: vec![Box::new(ci::Tally::default()), sink],
        }
    }

    /// Writes ASCII only, or UTF-8 (by default, what the locale says).
    pub fn with_ascii(mut self, ascii: bool) -> Log {
        self.facts.ascii = ascii;
        self
    }

    /// Writes for the CI `ci` found around the run; `on_stderr` when the log itself goes to
    /// standard error (no `--log-file`). The job summary and the CI markers come before the
    /// log, which may leave a line out when a marker says it.
    pub fn with_ci(mut self, ci: Ci, on_stderr: bool) -> Log {
        self.facts.ci = ci;
        self.facts.on_stderr = on_stderr;
        let log = self.sinks.pop();
        self.sinks.push(Box::new(ci::StepSummary));
        self.sinks.push(Box::new(ci::StepOutputs));
        self.sinks.push(Box::new(ci::Markers::default()));
        self.sinks.extend(log);
        self
    }

    /// Adds a sink that takes every event after the others.
    pub fn with_sink(mut self, sink: Box<dyn Sink>) -> Log {
        self.sinks.push(sink);
        self
    }

    /// What the log knows of the run.
    pub fn facts(&self) -> &RunFacts {
        &self.facts
    }

    /// Reports one event to every sink.
    pub fn emit(&mut self, event: Event) {
        self.dispatch(&event, 0);
    }

    /// A problem that does not change the run.
    pub fn warn(&mut self, warning: Warning) {
        self.emit(Event::Warning(warning));
    }

    fn dispatch(&mut self, event: &Event, depth: usize) {
        for i in 0..self.sinks.len() {
            let follow = self.sinks[i].take(event, &self.facts);
            // A sink's own events cannot cause others without end.
            if depth < 2 {
                for e in follow {
                    self.dispatch(&e, depth + 1);
                }
            }
        }
    }
}

/// How a try ended, as words: `exited 7`, `timed out`, `was killed by SIGKILL`.
pub fn outcome_words(outcome: Outcome) -> String {
    match outcome {
        Outcome::Exit(code) => format!("exited {code}"),
        Outcome::Signal(s) => format!("was killed by {s}"),
        Outcome::Timeout => "timed out".into(),
        Outcome::NotFound => "could not start: command not found".into(),
        Outcome::NotExecutable => "could not start: command cannot be executed".into(),
        Outcome::NoResources => "could not start: no resources".into(),
    }
}

/// Why the command `program` could not be started, for the try line and the `error` field of
/// its JSON event: `'cmd' was not found`, `cmd cannot be executed: Permission denied`.
pub fn not_started(program: &OsStr, outcome: Outcome, error: &std::io::Error) -> String {
    let name = crate::report::quote(program);
    let errno = error.raw_os_error().map(nix::errno::Errno::from_raw);
    let reason = match errno {
        Some(errno) => errno.desc().to_string(),
        None => error.to_string(),
    };
    match (outcome, errno) {
        (Outcome::NotFound, _) => format!("{name} was not found"),
        (Outcome::NoResources, Some(errno)) => {
            format!("{name} could not be started: out of resources ({errno:?}: {reason})")
        }
        (Outcome::NoResources, None) => format!("{name} could not be started: out of resources"),
        _ => format!("{name} cannot be executed: {reason}"),
    }
}

#[cfg(test)]
mod tests;
