//! The schedule log (spec 8.1, 8.2) and what CI reads (spec 8.4), as one reporter: the runner
//! hands it [`Event`]s, and it fans each one out to its sinks, in order: the tally of the tries,
//! the job summary, the CI markers, then the log itself (human or JSON lines, to standard error
//! or `--log-file`). Writing never fails the run: a closed stderr loses the log, not the
//! command's result.

use std::io::Write;

use crate::config::{ColorWhen, Config};
use crate::report::ci::{self, Ci};
use crate::report::event::{Event, Warning};
pub use crate::report::facts::{Collect, RunFacts, Sink};
use crate::report::human::HumanLog;
pub use crate::report::human::{not_started, outcome_words};
use crate::report::jsonlog::JsonLog;

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

    /// Writes no step outputs: the run is one of a whole (a replay) that writes them.
    pub fn leaving_step_outputs(mut self) -> Log {
        self.facts.ci.outputs = None;
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

#[cfg(test)]
mod tests;
