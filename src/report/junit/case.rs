//! What a `--junit` report holds: the cases of its one suite (a run, a try of a repeat, a run of
//! a replay), each with how it ended, as the writer (`xml`) puts them in Surefire's elements.

use std::time::{Duration, SystemTime};

/// A failed try, or the end of a case that failed, as one of Surefire's elements shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The `type` attribute, a word to group by: the give-up reason (`tries`, `budget`), or how
    /// a try ended (`exit 1`, `timeout`, `signal SIGKILL`).
    pub kind: String,
    /// The `message` attribute: one line in the log's words.
    pub message: String,
    /// The element's text (a `<stackTrace>`'s, for a failed try before the last).
    pub detail: String,
    /// The tail of what the try wrote (its `<system-out>`), empty when it wrote nothing.
    pub output: String,
}

/// How a case ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaseEnd {
    /// It passed, the first time.
    Passed,
    /// It passed after failed tries: a `<flakyFailure>` for each of them.
    Flaky(Vec<Problem>),
    /// It failed: its `<failure>`, then a `<rerunFailure>` for each failed try before.
    Failed {
        failure: Problem,
        reruns: Vec<Problem>,
    },
    /// `retry` itself failed (a try's output could not be written): its `<error>`, after a
    /// `<rerunFailure>` for each failed try before.
    Error {
        error: Problem,
        reruns: Vec<Problem>,
    },
    /// A try of a repeat that the end of the budget cut short, in a repeat that still passed:
    /// `<skipped>` with why.
    Skipped(String),
}

/// One `<testcase>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// Its `name`: the `--label`, else the command line as the log quotes it; for a try of a
    /// repeat, that and ` (try K)`.
    pub name: String,
    pub time: Duration,
    pub end: CaseEnd,
}

/// The cases of a report so far, and how many tries it leaves out to stay bounded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cases {
    pub list: Vec<Case>,
    pub left_out: u64,
}

impl Cases {
    /// Adds the cases of `other` after these.
    pub fn append(&mut self, mut other: Cases) {
        self.list.append(&mut other.list);
        self.left_out = self.left_out.saturating_add(other.left_out);
    }
}

/// The report's one `<testsuite>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Suite {
    /// When the run (or the replay) started: the `timestamp`.
    pub start: SystemTime,
    /// How long it took in all: the `time`.
    pub time: Duration,
    pub cases: Cases,
}

impl Suite {
    /// The suite's counts, `(tests, failures, errors, skipped)`.
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let list = &self.cases.list;
        let count = |f: fn(&CaseEnd) -> bool| list.iter().filter(|c| f(&c.end)).count();
        (
            list.len(),
            count(|e| matches!(e, CaseEnd::Failed { .. })),
            count(|e| matches!(e, CaseEnd::Error { .. })),
            count(|e| matches!(e, CaseEnd::Skipped(_))),
        )
    }
}
