//! The `--metrics` file as a sink of the run's events (docs/dashboards.md#metrics): the tries
//! counted by result as they end, then, when the run ends, its series merged into the file
//! (`store::metrics::merge`), after the run's other records. A file that cannot be written is
//! a warning, and changes nothing else.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::exit::ExitStatus;
use crate::outcome::{RunOutcome, RunVerdict};
use crate::policy::schedule::GiveUp;
use crate::report::event::{Ends, Envelope, Event, Warning};
use crate::report::facts::{RunFacts, Sink};
use crate::store::metrics::{self, text::RunMetrics};
use crate::store::record;

/// The result word of a try that `--throttle` held back, as the records say it.
const HELD: &str = "held";

/// The outcome word of a run that `--lock` turned away, the reason the records give it: it
/// ran nothing, so it is neither a success nor a failure of the job.
const LOCKED: &str = "locked";

/// Merges the run's metrics into `--metrics` when it ends.
pub struct Metrics {
    path: PathBuf,
    /// The end of the run's budget, from its start, if it has one: the wait for the lock
    /// ends there.
    until: Option<Duration>,
    count: RunCount,
}

impl Metrics {
    pub fn new(path: PathBuf, command: &[OsString], until: Option<Duration>) -> Metrics {
        Metrics {
            path,
            until,
            count: RunCount::new(command),
        }
    }
}

/// The job's name of a command named `name`: escaped as a log line is, since a control or
/// invisible character in a file name would otherwise reach every dashboard that shows the
/// job, and each byte that is not UTF-8 as `\xHH`, so that two names that differ only there
/// stay two jobs (a label is UTF-8, and U+FFFD in their place would make them one).
fn job_name(name: &std::ffi::OsStr) -> String {
    use std::fmt::Write;
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for chunk in name.as_bytes().utf8_chunks() {
        out.push_str(&crate::text::printable(chunk.valid()));
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// What a sink of the run's metrics (`--metrics`, `--pushgateway`) counts as the run goes: the
/// tries by result, and the job's name.
pub struct RunCount {
    /// The command's name, the job when the run has no `--label`.
    name: String,
    tries: BTreeMap<&'static str, u64>,
    /// The quota's tokens at the run's last exchange with its store, if it had one.
    quota_tokens: Option<f64>,
    /// The throttle's `p` at the run's last exchange that used it.
    throttle_p: Option<f64>,
}

impl RunCount {
    pub fn new(command: &[OsString]) -> RunCount {
        let name = command
            .first()
            .map(|first| {
                let first = Path::new(first);
                job_name(first.file_name().unwrap_or(first.as_os_str()))
            })
            .unwrap_or_default();
        RunCount {
            name,
            tries: BTreeMap::new(),
            quota_tokens: None,
            throttle_p: None,
        }
    }

    /// Counts the try that `event` ends; the run's outcome when it ends the run.
    pub fn take<'a>(&mut self, event: &'a Event) -> Option<&'a RunOutcome> {
        // What the quota's store answered, as the JSON log's `quota` events and held tries say.
        if let Event::Quota {
            tokens, throttle, ..
        } = event
        {
            self.quota_tokens = Some(*tokens);
            if let Some((_, admission)) = throttle {
                self.throttle_p = Some(admission.p);
            }
        }
        match event.ends() {
            Ends::Try(r) | Ends::TryInterrupted(r) => self.count(r.verdict.word()),
            Ends::TryHeld(held) => {
                self.throttle_p = Some(held.admission.p);
                self.count(HELD);
            }
            Ends::Run(outcome) => return Some(outcome),
            // A replay's runs each count themselves; the replay adds nothing.
            Ends::Replay { .. } | Ends::Neither => {}
        }
        None
    }

    /// What the run that ended as `outcome`, at `at`, adds to the job's metrics.
    pub fn run(&self, outcome: &RunOutcome, at: SystemTime, facts: &RunFacts) -> RunMetrics {
        let at = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let turned_away = matches!(outcome.verdict, RunVerdict::GaveUp(GiveUp::Locked(_)));
        // The lock's Redis could not be reached: the run did not start.
        let unreachable = matches!(
            outcome.verdict,
            RunVerdict::GaveUp(GiveUp::LockUnreachable(_))
        );
        // A signal before the first try (while the run waited for the lock or its stagger):
        // the job's command did not run either.
        // `--once`'s key was done: the command did not run.
        let done_before = matches!(outcome.verdict, RunVerdict::DoneBefore(_));
        let stopped_first =
            matches!(outcome.verdict, RunVerdict::Interrupted { .. }) && outcome.tries.ran == 0;
        RunMetrics {
            job: facts.run_label.clone().unwrap_or_else(|| self.name.clone()),
            outcome: match &outcome.verdict {
                _ if turned_away => LOCKED,
                RunVerdict::GaveUp(why @ (GiveUp::LockLost(_) | GiveUp::LockUnreachable(_))) => {
                    why.word()
                }
                _ => outcome.word(),
            }
            .to_string(),
            tries_by_result: self
                .tries
                .iter()
                .map(|(result, n)| (result.to_string(), *n))
                .collect(),
            at: seconds(at),
            succeeded: outcome.status == ExitStatus::Success,
            duration_seconds: seconds(outcome.elapsed),
            tries: outcome.tries.counted,
            exit_code: i64::from(outcome.status.code()),
            ran_nothing: turned_away || unreachable || stopped_first || done_before,
            quota_tokens: self.quota_tokens,
            throttle_p: self.throttle_p,
        }
    }

    fn count(&mut self, result: &'static str) {
        let n = self.tries.entry(result).or_default();
        *n = n.saturating_add(1);
    }
}

/// A duration in seconds, to the millisecond.
fn seconds(d: Duration) -> f64 {
    crate::duration::millis(d) as f64 / 1000.0
}

impl Sink for Metrics {
    fn take(&mut self, envelope: &Envelope, facts: &RunFacts) -> Option<Warning> {
        let outcome = self.count.take(&envelope.event)?;
        let run = self.count.run(outcome, envelope.stamp.at, facts);
        let left = self
            .until
            .map(|end| end.saturating_sub(envelope.stamp.elapsed));
        metrics::merge(&self.path, &run, record::lock_wait(left))
            .err()
            .map(|e| Warning::MetricsNotWritten {
                path: self.path.clone(),
                why: e.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_without_a_label_is_named_by_its_commands_basename_never_its_arguments() {
        let command = |words: &[&str]| words.iter().map(OsString::from).collect::<Vec<_>>();
        let name = |words: &[&str]| RunCount::new(&command(words)).name;
        assert_eq!(name(&["/usr/local/bin/backup", "--full"]), "backup");
        assert_eq!(name(&["./sync-orders"]), "sync-orders");
        assert_eq!(name(&["make", "deploy"]), "make");
        // What `--label` refuses cannot come in through the command's name either.
        assert_eq!(name(&["./a\rb"]), "a\\rb");
        assert!(!name(&["./x\u{202e}y"]).contains('\u{202e}'));
    }

    #[test]
    fn commands_whose_names_differ_only_in_bytes_that_are_not_utf8_are_two_jobs() {
        use std::os::unix::ffi::OsStringExt;
        let name = |bytes: &[u8]| {
            let command = [OsString::from_vec(bytes.to_vec())];
            RunCount::new(&command).name
        };
        assert_eq!(name(b"./job\xfe"), "job\\xfe");
        assert_eq!(name(b"/bin/job\xff\xfe-\xc3\xa9"), "job\\xff\\xfe-\u{e9}");
        assert_ne!(name(b"job\xfe"), name(b"job\xff"));
    }
}
