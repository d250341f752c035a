//! What every sink of a run's events knows of the run, and what a sink is.

use std::cell::RefCell;
use std::ffi::OsString;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use crate::config::{Config, LogFormat};
use crate::policy::{Flaky, LimitSource, RepeatPolicy, Signal};
use crate::report::event::{Envelope, Event, Level, Warning};
use crate::text::{self, Charset};

/// The CI system a run is in, as its environment says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    /// `GITHUB_ACTIONS=true`: workflow commands (`::warning::`, `::group::`).
    GitHub,
    /// `GITLAB_CI=true`: collapsible sections.
    GitLab,
}

/// What the shell found about the CI around the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ci {
    pub system: Option<System>,
    /// `GITHUB_STEP_SUMMARY`: the Markdown file that a run that retried or gave up appends the
    /// table of its tries to.
    pub step_summary: Option<PathBuf>,
    /// `GITHUB_OUTPUT`: the file of the step's outputs, which every run appends its own to.
    pub outputs: Option<PathBuf>,
}

impl Ci {
    /// Reads the CI from the variables its runners set. GitHub wins when both say yes (a GitLab
    /// runner does not set `GITHUB_ACTIONS`, so that is a job that asked for GitHub's output).
    pub fn from_env(var: impl Fn(&str) -> Option<OsString>) -> Ci {
        let is_true = |name| var(name).is_some_and(|v| v == "true");
        let system = if is_true("GITHUB_ACTIONS") {
            Some(System::GitHub)
        } else if is_true("GITLAB_CI") {
            Some(System::GitLab)
        } else {
            None
        };
        Ci {
            system,
            step_summary: var("GITHUB_STEP_SUMMARY")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            outputs: var("GITHUB_OUTPUT")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
        }
    }
}

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
    /// The CI around the run (docs/log.md#terminals-ci-and-nesting): what it reads besides the log.
    pub ci: Ci,
    /// The log goes to standard error (no `--log-file`), where the CI reads its markers too.
    pub on_stderr: bool,
    /// The command line, for the job summary.
    pub command: String,
    /// `--flaky`: how a success after failed tries is announced.
    pub flaky: Flaky,
    /// `--repeat`: the tries are a repeat, not retries.
    pub repeat: Option<RepeatPolicy>,
    /// `--consecutive`: the successful tries in a row the run needs.
    pub consecutive: Option<u64>,
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
            ascii: config.charset.is_ascii(),
            ci: Ci::default(),
            on_stderr: config.log.file.is_none(),
            command: text::command_line(&config.command, Charset::Utf8),
            flaky: config.flaky,
            repeat: config.repeat,
            consecutive: config.policy.consecutive,
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

    /// Whether GitHub's annotation announces the end of the run in place of the log's last
    /// line: in the same stream, the same line is never written twice.
    pub fn annotation_replaces_line(&self, level: Level) -> bool {
        self.ci_markers() == Some(System::GitHub)
            && self.on_stderr
            && !(self.quiet && level == Level::Warning)
    }

    /// `budget` or `deadline`: what stopped a try that `--timeout` did not.
    pub fn limit_word(&self) -> &'static str {
        match self.limit {
            Some(LimitSource::Deadline) => "deadline",
            Some(LimitSource::Budget) | None => "budget",
        }
    }
}

/// A receiver of events: it writes them somewhere, or keeps them. It may answer with a warning
/// of its own (a file it could not write), which every sink then takes, before the next one
/// takes the event that caused it.
///
/// A sink matches [`Event`] without a catch-all arm, so that a new event does not compile
/// until every sink says what it does with it.
pub trait Sink {
    fn take(&mut self, envelope: &Envelope, facts: &RunFacts) -> Option<Warning>;
}

/// A sink that keeps every event, for tests that drive a run through the library.
#[derive(Clone, Default)]
pub struct Collect(pub Rc<RefCell<Vec<Event>>>);

impl Sink for Collect {
    fn take(&mut self, envelope: &Envelope, _: &RunFacts) -> Option<Warning> {
        self.0.borrow_mut().push(envelope.event.clone());
        None
    }
}
