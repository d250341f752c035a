//! The schedule log (docs/log.md#human-format, docs/json-log.md#the-json-log) and what CI reads
//! (docs/log.md#terminals-ci-and-nesting), as one reporter: the runner hands it [`Event`]s, and it
//! fans each one out to its sinks, in order: the tally of the tries, the job summary, the CI
//! markers, then the log itself (human or JSON lines, to standard error or `--log-file`). Writing
//! never fails the run: a closed stderr loses the log, not the command's result.

use crate::config::{ColorWhen, Config};
use crate::outcome::RunOutcome;
use crate::report::ci::{self, Ci};
use crate::report::conclude::Stage;
use crate::report::event::{Envelope, Event, Stamp, Warning};
pub use crate::report::facts::{Collect, RunFacts, Sink};
use crate::report::human::HumanLog;
use crate::report::jsonlog::JsonLog;
use crate::report::out::Out;

/// Where the time of each event comes from: the shell's clock (`run::clock::stamps`), or a
/// fixed one in tests. The reporter reads it once per event, and no sink reads a clock.
pub type Stamper = Box<dyn FnMut() -> Stamp>;

/// The run's reporter: every event goes to every sink.
pub struct Log {
    facts: RunFacts,
    clock: Stamper,
    /// The stage every event meets before the sinks: it counts the tries, and concludes a run
    /// that retried or gave up with an [`Event::Concluded`] when the runner says its outcome is
    /// known.
    stage: Stage,
    /// In the order they take each event: the CI's sinks, the log, then those the shell adds.
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
    /// The log of a run to `out` (`retry`'s standard error as the shell hands it, a file, or
    /// any writer), human or JSON as `config` says, its events stamped by `clock`.
    pub fn new(
        out: Box<dyn Out>,
        config: &Config,
        color: bool,
        run_id: String,
        clock: Stamper,
    ) -> Log {
        let facts = RunFacts::new(config, run_id);
        let sink: Box<dyn Sink> = match facts.json {
            true => Box::new(JsonLog::new(out, config)),
            false => Box::new(HumanLog::new(out, config, color)),
        };
        Log {
            facts,
            clock,
            stage: Stage::default(),
            sinks: vec![sink],
        }
    }

    /// Writes for the CI `ci` found around the run; `on_stderr` when the log itself goes to
    /// standard error (no `--log-file`); `markers` writes the CI's markers where they go. The
    /// job summary, the step outputs and the CI markers take each event before the log, which
    /// may leave a line out when a marker says it.
    pub fn with_ci(mut self, ci: Ci, on_stderr: bool, markers: ci::Markers) -> Log {
        self.facts.ci = ci;
        self.facts.on_stderr = on_stderr;
        let ci: [Box<dyn Sink>; 3] = [
            Box::new(ci::StepSummary),
            Box::new(ci::StepOutputs),
            Box::new(markers),
        ];
        self.sinks.splice(0..0, ci);
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

    /// Reports one event to every sink, with the time it happened.
    pub fn emit(&mut self, event: Event) {
        let stamp = (self.clock)();
        self.stage.take(&event, &self.facts);
        self.dispatch(&Envelope { stamp, event });
    }

    /// Announces the end of the run that ended as `outcome` (GitHub's annotation, the job
    /// summary), once, if it needs announcing: when its outcome is known, before what it withheld
    /// back is played back and its records are written.
    pub fn conclude(&mut self, outcome: &RunOutcome) {
        if let Some(concluded) = self.stage.conclude(outcome) {
            self.emit(concluded);
        }
    }

    /// A problem that does not change the run.
    pub fn warn(&mut self, warning: Warning) {
        self.emit(Event::Warning(warning));
    }

    /// Hands `envelope` to every sink in turn. A sink that could not do its part answers with
    /// a warning, which every sink takes before the next sink takes the event; a warning
    /// causes no answer (a sink answers only for the end of a run), so this ends.
    fn dispatch(&mut self, envelope: &Envelope) {
        for i in 0..self.sinks.len() {
            let Some(warning) = self.sinks[i].take(envelope, &self.facts) else {
                continue;
            };
            let answer = Envelope {
                stamp: envelope.stamp,
                event: Event::Warning(warning),
            };
            for sink in &mut self.sinks {
                let _ = sink.take(&answer, &self.facts);
            }
        }
    }
}

#[cfg(test)]
mod tests;
