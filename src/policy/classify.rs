//! Classification (docs/classification.md#classification): how an ended try's outcome becomes a
//! verdict.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::budget::LimitSource;
use super::output::Pattern;
use super::signal::{Signal, SignalError};

/// How one try ended (docs/classification.md#outcomes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The command exited with this status.
    Exit(u8),
    /// The command was killed by a signal that `retry` did not send.
    Signal(Signal),
    /// `retry` stopped the try on its per-try timeout or the run's deadline.
    Timeout,
    /// The command does not exist.
    NotFound,
    /// The command exists but cannot be executed.
    NotExecutable,
    /// The command could not be started for want of resources (`EAGAIN`, `ENOMEM` from fork or
    /// exec): the machine may have room again soon, so this is transient.
    NoResources,
}

/// The forms in which `retry` puts how a try ended in words. [`Outcome::words`] is the one
/// table of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// As a classification reason says it: `exit 7`, `signal SIGKILL`, `timeout`.
    Reason,
    /// As the summary's table and counts show it: `exit 7`, `SIGKILL`, `timed out`, or which
    /// limit (the budget, the deadline) stopped the try.
    Count(Option<LimitSource>),
    /// As a try's line in the log says it: `exited 7`, `was killed by SIGKILL`.
    Line,
}

impl Outcome {
    /// How the try ended, in words of the form `form`.
    pub fn words(self, form: Form) -> String {
        match (self, form) {
            (Outcome::Exit(code), Form::Reason | Form::Count(_)) => format!("exit {code}"),
            (Outcome::Exit(code), Form::Line) => format!("exited {code}"),
            (Outcome::Signal(sig), Form::Reason) => format!("signal {}", sig.name()),
            (Outcome::Signal(sig), Form::Count(_)) => sig.to_string(),
            (Outcome::Signal(sig), Form::Line) => format!("was killed by {sig}"),
            (Outcome::Timeout, Form::Reason) => "timeout".into(),
            (Outcome::Timeout, Form::Count(None) | Form::Line) => "timed out".into(),
            (Outcome::Timeout, Form::Count(Some(LimitSource::Budget))) => {
                "stopped at the end of the budget".into()
            }
            (Outcome::Timeout, Form::Count(Some(LimitSource::Deadline))) => {
                "stopped at the deadline".into()
            }
            (Outcome::NotFound, Form::Reason | Form::Count(_)) => "not found".into(),
            (Outcome::NotFound, Form::Line) => "could not start: command not found".into(),
            (Outcome::NotExecutable, Form::Reason | Form::Count(_)) => "not executable".into(),
            (Outcome::NotExecutable, Form::Line) => {
                "could not start: command cannot be executed".into()
            }
            (Outcome::NoResources, Form::Reason) => "no resources".into(),
            (Outcome::NoResources, Form::Count(_)) => "no resources to start".into(),
            (Outcome::NoResources, Form::Line) => "could not start: no resources".into(),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.words(Form::Reason))
    }
}

/// Why a failure got the verdict it did; shown in the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The built-in table of docs/classification.md#default-verdicts decided.
    Default,
    /// `--success-on` listed the exit code.
    SuccessOn,
    /// `--retry-on` matched.
    RetryOn,
    /// `--retry-on` was given and did not match.
    NotInRetryOn,
    /// `--stop-on` matched this item.
    StopOn(Item),
    /// The command was not found or cannot be executed.
    Spawn,
    /// Exit 126 or 127: the shell's "cannot execute" and "not found".
    ShellSpawn,
    /// The command could not start for want of resources.
    Resources,
    /// SIGPIPE: the reader of the output has gone.
    BrokenPipe,
    /// `--stop-if-output` matched the try's output.
    StopIfOutput(String),
    /// `--retry-if-output` matched the try's output.
    RetryIfOutput(String),
    /// `--retry-if-output` was given and did not match.
    NoRetryIfOutput(String),
    /// The status was a success, but `--until-output` did not match: not ready yet.
    NotReady(String),
    /// The end of the run (the budget or the deadline) stopped the try: no list judges it.
    EndOfRun(LimitSource),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Default => Ok(()),
            Reason::SuccessOn => f.write_str("--success-on"),
            Reason::RetryOn => f.write_str("--retry-on"),
            Reason::NotInRetryOn => f.write_str("not in --retry-on"),
            Reason::StopOn(item) => write!(f, "--stop-on {item}"),
            Reason::Spawn => f.write_str("cannot run the command"),
            Reason::ShellSpawn => f.write_str("126 and 127 mean the command could not run"),
            Reason::Resources => f.write_str("resources may free up"),
            Reason::BrokenPipe => f.write_str("the reader of its output is gone"),
            Reason::StopIfOutput(p) => write!(f, "output matched --stop-if-output '{p}'"),
            Reason::RetryIfOutput(p) => write!(f, "output matched --retry-if-output '{p}'"),
            Reason::NoRetryIfOutput(p) => {
                write!(f, "output did not match --retry-if-output '{p}'")
            }
            Reason::NotReady(p) => write!(f, "not ready: no output matched --until-output '{p}'"),
            Reason::EndOfRun(LimitSource::Budget) => f.write_str("cut by the budget"),
            Reason::EndOfRun(LimitSource::Deadline) => f.write_str("cut by the deadline"),
        }
    }
}

/// What the run does about an ended try.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Success(Reason),
    /// May pass: try again if the tries and the budget allow.
    Transient(Reason),
    /// Will not pass: give up now.
    Permanent(Reason),
    /// Ctrl-C reached the command (signal INT or exit 130): stop at once.
    Interrupted,
    /// `retry` stopped the try because the lease of `--lock` was lost: the run ends.
    LockLost,
}

impl Verdict {
    /// The word used in logs: `success`, `transient`, `permanent`, `interrupted`,
    /// `lock_lost`.
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Success(_) => "success",
            Verdict::Transient(_) => "transient",
            Verdict::Permanent(_) => "permanent",
            Verdict::Interrupted => "interrupted",
            Verdict::LockLost => "lock_lost",
        }
    }

    pub fn reason(&self) -> Option<&Reason> {
        match self {
            Verdict::Success(r) | Verdict::Transient(r) | Verdict::Permanent(r) => {
                (*r != Reason::Default).then_some(r)
            }
            Verdict::Interrupted | Verdict::LockLost => None,
        }
    }
}

/// One item of a LIST (docs/classification.md#the-list-grammar).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item {
    Code(u8),
    /// An inclusive range of exit codes, low ≤ high.
    Range(u8, u8),
    Signal(Signal),
    Timeout,
}

impl Item {
    fn matches(self, outcome: Outcome) -> bool {
        match (self, outcome) {
            (Item::Code(c), Outcome::Exit(e)) => c == e,
            (Item::Range(lo, hi), Outcome::Exit(e)) => (lo..=hi).contains(&e),
            (Item::Signal(s), Outcome::Signal(t)) => s == t,
            (Item::Timeout, Outcome::Timeout) => true,
            _ => false,
        }
    }
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Item::Code(c) => write!(f, "{c}"),
            Item::Range(lo, hi) => write!(f, "{lo}-{hi}"),
            // A bare number would read back as an exit code: a signal without a name is SIG32.
            Item::Signal(s) if s.name().bytes().all(|b| b.is_ascii_digit()) => {
                write!(f, "SIG{}", s.number())
            }
            Item::Signal(s) => f.write_str(&s.name()),
            Item::Timeout => f.write_str("timeout"),
        }
    }
}

/// A comma-separated LIST of outcomes: `75`, `1-5`, `SIGKILL`, `timeout`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct List(Vec<Item>);

impl List {
    pub fn items(&self) -> &[Item] {
        &self.0
    }

    /// The first item that matches, if any.
    pub fn find(&self, outcome: Outcome) -> Option<Item> {
        self.0.iter().copied().find(|item| item.matches(outcome))
    }

    /// The item that matches exit `code`, if any.
    pub fn find_code(&self, code: u8) -> Option<Item> {
        self.find(Outcome::Exit(code))
    }

    /// The lowest exit code that both lists match, if any.
    pub fn shared_code(&self, other: &List) -> Option<u8> {
        (0..=u8::MAX).find(|&c| self.find_code(c).is_some() && other.find_code(c).is_some())
    }

    /// True when the list has only exit codes and ranges, as `--success-on` needs.
    pub fn codes_only(&self) -> Result<(), Item> {
        match self
            .0
            .iter()
            .find(|i| matches!(i, Item::Signal(_) | Item::Timeout))
        {
            Some(item) => Err(*item),
            None => Ok(()),
        }
    }
}

impl fmt::Display for List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, item) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{item}")?;
        }
        Ok(())
    }
}

impl FromStr for List {
    type Err = String;

    fn from_str(s: &str) -> Result<List, String> {
        let mut items = Vec::new();
        for raw in s.split(',') {
            let item = raw.trim();
            if item.is_empty() {
                return Err(format!("empty item in '{s}'"));
            }
            items.push(parse_item(item)?);
        }
        Ok(List(items))
    }
}

fn parse_code(s: &str, item: &str) -> Result<u8, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "item '{item}' is not an exit code, a range, a signal name or 'timeout'"
        ));
    }
    s.parse::<u8>()
        .map_err(|_| format!("item '{item}': exit codes are 0 to 255"))
}

fn parse_item(item: &str) -> Result<Item, String> {
    if item.eq_ignore_ascii_case("timeout") {
        return Ok(Item::Timeout);
    }
    let starts_with_digit = item.as_bytes()[0].is_ascii_digit();
    if let Some((lo, hi)) = item.split_once('-').filter(|_| starts_with_digit) {
        let (lo, hi) = (parse_code(lo, item)?, parse_code(hi, item)?);
        if lo > hi {
            return Err(format!("item '{item}': the range runs backwards"));
        }
        return Ok(Item::Range(lo, hi));
    }
    if starts_with_digit || item.starts_with('-') {
        return parse_code(item, item).map(Item::Code);
    }
    match Signal::from_name(item) {
        Ok(signal) => Ok(Item::Signal(signal)),
        Err(SignalError::UnknownName(_)) => Err(format!(
            "item '{item}' is not an exit code, a range, a signal name or 'timeout'"
        )),
        Err(e @ SignalError::OutOfRange(_)) => Err(e.to_string()),
        Err(e) => Err(format!("item '{item}': {e}")),
    }
}

/// Whether a try's output matched the output patterns
/// (docs/classification.md#classification-by-output), and the wait it asked for
/// (docs/herd.md#pushback).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputMatch {
    pub retry_if: bool,
    pub stop_if: bool,
    /// `--until-output` matched.
    pub until: bool,
    /// The wait read by `--delay-from-output`, if it read one.
    pub requested: Option<Duration>,
}

/// The classification rules of a run: the defaults of docs/classification.md#default-verdicts with
/// the three lists, and the output patterns of docs/classification.md#classification-by-output.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Classifier {
    pub retry_on: Option<List>,
    pub stop_on: List,
    pub success_on: List,
    pub retry_if_output: Option<Pattern>,
    pub stop_if_output: Option<Pattern>,
    /// `--until-output`: a success by status counts only if the output matched
    /// (docs/classification.md#classification-by-output).
    pub until_output: Option<Pattern>,
}

impl Classifier {
    /// The verdict on a try whose output was not looked at.
    pub fn verdict(&self, outcome: Outcome) -> Verdict {
        self.verdict_with_output(outcome, OutputMatch::default())
    }

    /// The verdict on a try. A success by status without a match of `--until-output` is a
    /// transient failure, not ready yet. A failure that the lists leave transient (not ready
    /// included) becomes permanent when `--stop-if-output` matched, or when `--retry-if-output`
    /// is given and did not match.
    pub fn verdict_with_output(&self, outcome: Outcome, output: OutputMatch) -> Verdict {
        let verdict = match (self.verdict_by_status(outcome), &self.until_output) {
            (Verdict::Success(_), Some(p)) if !output.until => {
                Verdict::Transient(Reason::NotReady(p.text().to_string()))
            }
            (verdict, _) => verdict,
        };
        // A try that never started wrote nothing: its output decides nothing either.
        if !matches!(verdict, Verdict::Transient(_)) || outcome == Outcome::NoResources {
            return verdict;
        }
        if let Some(p) = self.stop_if_output.as_ref().filter(|_| output.stop_if) {
            return Verdict::Permanent(Reason::StopIfOutput(p.text().to_string()));
        }
        match &self.retry_if_output {
            // A try that is not ready says so, rather than that its output matched.
            Some(_)
                if output.retry_if
                    && matches!(verdict, Verdict::Transient(Reason::NotReady(_))) =>
            {
                verdict
            }
            Some(p) if output.retry_if => {
                Verdict::Transient(Reason::RetryIfOutput(p.text().to_string()))
            }
            Some(p) => Verdict::Permanent(Reason::NoRetryIfOutput(p.text().to_string())),
            None => verdict,
        }
    }

    /// True when the status alone makes the try a success, whatever its output says.
    pub fn succeeds_by_status(&self, outcome: Outcome) -> bool {
        matches!(self.verdict_by_status(outcome), Verdict::Success(_))
    }

    fn verdict_by_status(&self, outcome: Outcome) -> Verdict {
        // Order matters: success, then what no list can change, then the lists, then defaults.
        match outcome {
            Outcome::Exit(0) => return Verdict::Success(Reason::Default),
            Outcome::Exit(130) => return Verdict::Interrupted,
            Outcome::Signal(s) if s == Signal::INT => return Verdict::Interrupted,
            Outcome::NotFound | Outcome::NotExecutable => {
                return Verdict::Permanent(Reason::Spawn);
            }
            // No list item names it: a start that failed for want of resources may pass.
            Outcome::NoResources => return Verdict::Transient(Reason::Resources),
            _ => {}
        }
        if self.success_on.find(outcome).is_some() {
            return Verdict::Success(Reason::SuccessOn);
        }
        if let Some(item) = self.stop_on.find(outcome) {
            return Verdict::Permanent(Reason::StopOn(item));
        }
        if let Some(retry_on) = &self.retry_on {
            return match retry_on.find(outcome) {
                Some(_) => Verdict::Transient(Reason::RetryOn),
                None => Verdict::Permanent(Reason::NotInRetryOn),
            };
        }
        match outcome {
            Outcome::Exit(126 | 127) => Verdict::Permanent(Reason::ShellSpawn),
            Outcome::Signal(s) if s == Signal::PIPE => Verdict::Permanent(Reason::BrokenPipe),
            _ => Verdict::Transient(Reason::Default),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str) -> List {
        s.parse().unwrap()
    }

    fn classifier(retry_on: Option<&str>, stop_on: &str, success_on: &str) -> Classifier {
        Classifier {
            until_output: None,
            retry_if_output: None,
            stop_if_output: None,
            retry_on: retry_on.map(list),
            stop_on: if stop_on.is_empty() {
                List::default()
            } else {
                list(stop_on)
            },
            success_on: if success_on.is_empty() {
                List::default()
            } else {
                list(success_on)
            },
        }
    }

    const TERM: Outcome = Outcome::Signal(Signal::TERM);

    #[test]
    fn the_default_verdicts_are_those_of_the_reference() {
        let c = Classifier::default();
        let rows = [
            (Outcome::Exit(0), "success"),
            (Outcome::NotFound, "permanent"),
            (Outcome::NotExecutable, "permanent"),
            (Outcome::Exit(126), "permanent"),
            (Outcome::Exit(127), "permanent"),
            (Outcome::Signal(Signal::INT), "interrupted"),
            (Outcome::Exit(130), "interrupted"),
            (Outcome::Signal(Signal::PIPE), "permanent"),
            (Outcome::Timeout, "transient"),
            (Outcome::Exit(1), "transient"),
            (Outcome::Exit(7), "transient"),
            (Outcome::Exit(255), "transient"),
            (TERM, "transient"),
            (Outcome::Signal(Signal::KILL), "transient"),
        ];
        for (outcome, want) in rows {
            assert_eq!(c.verdict(outcome).word(), want, "{outcome}");
        }
    }

    #[test]
    fn a_start_without_resources_is_transient_whatever_the_lists_say() {
        for c in [
            classifier(None, "", ""),
            classifier(Some("7"), "", ""),
            classifier(None, "1-255", ""),
        ] {
            assert_eq!(
                c.verdict(Outcome::NoResources),
                Verdict::Transient(Reason::Resources)
            );
        }
    }

    #[test]
    fn output_patterns_never_decide_a_start_without_resources() {
        let mut c = classifier(None, "", "");
        c.retry_if_output = Some(Pattern::new("x").unwrap());
        assert_eq!(
            c.verdict_with_output(Outcome::NoResources, OutputMatch::default()),
            Verdict::Transient(Reason::Resources)
        );
    }

    #[test]
    fn success_on_adds_success_codes() {
        let c = classifier(None, "", "3,10-12");
        assert_eq!(
            c.verdict(Outcome::Exit(3)),
            Verdict::Success(Reason::SuccessOn)
        );
        assert_eq!(c.verdict(Outcome::Exit(11)).word(), "success");
        assert_eq!(c.verdict(Outcome::Exit(4)).word(), "transient");
    }

    #[test]
    fn retry_on_makes_everything_else_permanent() {
        let c = classifier(Some("75,timeout,TERM"), "", "");
        assert_eq!(
            c.verdict(Outcome::Exit(75)),
            Verdict::Transient(Reason::RetryOn)
        );
        assert_eq!(c.verdict(Outcome::Timeout).word(), "transient");
        assert_eq!(c.verdict(TERM).word(), "transient");
        assert_eq!(
            c.verdict(Outcome::Exit(1)),
            Verdict::Permanent(Reason::NotInRetryOn)
        );
        assert_eq!(c.verdict(Outcome::Signal(Signal::KILL)).word(), "permanent");
    }

    #[test]
    fn stop_on_wins_over_retry_on() {
        let c = classifier(Some("1-10"), "2", "");
        assert_eq!(
            c.verdict(Outcome::Exit(2)),
            Verdict::Permanent(Reason::StopOn(Item::Code(2)))
        );
        assert_eq!(c.verdict(Outcome::Exit(3)).word(), "transient");
        let c = classifier(None, "timeout", "");
        assert_eq!(c.verdict(Outcome::Timeout).word(), "permanent");
    }

    #[test]
    fn lists_may_retry_the_default_permanent_exit_codes_and_pipe() {
        let c = classifier(Some("127,PIPE"), "", "");
        assert_eq!(c.verdict(Outcome::Exit(127)).word(), "transient");
        assert_eq!(c.verdict(Outcome::Signal(Signal::PIPE)).word(), "transient");
    }

    #[test]
    fn no_list_changes_interrupts_or_spawn_failures() {
        let c = classifier(Some("130,INT,0-255"), "", "130");
        assert_eq!(c.verdict(Outcome::Exit(130)), Verdict::Interrupted);
        assert_eq!(
            c.verdict(Outcome::Signal(Signal::INT)),
            Verdict::Interrupted
        );
        assert_eq!(c.verdict(Outcome::NotFound).word(), "permanent");
        assert_eq!(c.verdict(Outcome::NotExecutable).word(), "permanent");
        // And exit 0 is a success whatever --stop-on says.
        let c = classifier(None, "0", "");
        assert_eq!(c.verdict(Outcome::Exit(0)).word(), "success");
    }

    #[test]
    fn a_success_without_the_until_output_match_is_not_ready_yet() {
        let c = Classifier {
            until_output: Some(Pattern::new("ready").unwrap()),
            success_on: list("3"),
            ..Classifier::default()
        };
        let ready = OutputMatch {
            until: true,
            ..OutputMatch::default()
        };
        let not_ready = Verdict::Transient(Reason::NotReady("ready".into()));
        assert_eq!(
            c.verdict_with_output(Outcome::Exit(0), ready).word(),
            "success"
        );
        assert_eq!(
            c.verdict_with_output(Outcome::Exit(3), ready).word(),
            "success"
        );
        assert_eq!(
            c.verdict_with_output(Outcome::Exit(0), OutputMatch::default()),
            not_ready
        );
        assert_eq!(
            c.verdict_with_output(Outcome::Exit(3), OutputMatch::default()),
            not_ready
        );
        assert_eq!(
            not_ready.reason().unwrap().to_string(),
            "not ready: no output matched --until-output 'ready'"
        );
        // A match does not make a failure a success.
        assert_eq!(
            c.verdict_with_output(Outcome::Exit(1), ready).word(),
            "transient"
        );
        assert!(c.succeeds_by_status(Outcome::Exit(0)));
        assert!(!c.succeeds_by_status(Outcome::Exit(1)));
    }

    #[test]
    fn a_try_that_is_not_ready_meets_the_other_output_patterns_as_a_failure() {
        let c = Classifier {
            until_output: Some(Pattern::new("ready").unwrap()),
            retry_if_output: Some(Pattern::new("starting").unwrap()),
            stop_if_output: Some(Pattern::new("fatal").unwrap()),
            ..Classifier::default()
        };
        let seen = |retry_if, stop_if| OutputMatch {
            retry_if,
            stop_if,
            ..OutputMatch::default()
        };
        assert_eq!(
            c.verdict_with_output(Outcome::Exit(0), seen(true, false)),
            Verdict::Transient(Reason::NotReady("ready".into()))
        );
        assert_eq!(
            c.verdict_with_output(Outcome::Exit(0), seen(false, false)),
            Verdict::Permanent(Reason::NoRetryIfOutput("starting".into()))
        );
        assert_eq!(
            c.verdict_with_output(Outcome::Exit(0), seen(true, true)),
            Verdict::Permanent(Reason::StopIfOutput("fatal".into()))
        );
    }

    #[test]
    fn output_patterns_decide_failures_the_lists_leave_transient() {
        let c = Classifier {
            retry_if_output: Some(Pattern::new("reset").unwrap()),
            ..Classifier::default()
        };
        let matched = OutputMatch {
            retry_if: true,
            ..OutputMatch::default()
        };
        assert_eq!(
            c.verdict_with_output(Outcome::Exit(1), matched),
            Verdict::Transient(Reason::RetryIfOutput("reset".into()))
        );
        assert_eq!(
            c.verdict_with_output(Outcome::Exit(1), OutputMatch::default()),
            Verdict::Permanent(Reason::NoRetryIfOutput("reset".into()))
        );
        // Success and permanent verdicts are not changed by output.
        assert_eq!(
            c.verdict_with_output(Outcome::Exit(0), OutputMatch::default())
                .word(),
            "success"
        );
        assert_eq!(
            c.verdict_with_output(Outcome::Exit(127), matched).word(),
            "permanent"
        );

        let c = Classifier {
            stop_if_output: Some(Pattern::new("fatal").unwrap()),
            ..Classifier::default()
        };
        let stop = OutputMatch {
            stop_if: true,
            ..OutputMatch::default()
        };
        assert_eq!(
            c.verdict_with_output(Outcome::Exit(1), stop),
            Verdict::Permanent(Reason::StopIfOutput("fatal".into()))
        );
        assert_eq!(
            c.verdict_with_output(Outcome::Exit(1), OutputMatch::default())
                .word(),
            "transient"
        );
        assert_eq!(
            c.verdict_with_output(Outcome::Timeout, stop).word(),
            "permanent"
        );
    }

    #[test]
    fn list_grammar_accepts_codes_ranges_signals_and_timeout() {
        assert_eq!(
            list("75, 1-5,SIGKILL,kill,Timeout").items(),
            &[
                Item::Code(75),
                Item::Range(1, 5),
                Item::Signal(Signal::KILL),
                Item::Signal(Signal::KILL),
                Item::Timeout
            ]
        );
        assert_eq!(list("0-255").items(), &[Item::Range(0, 255)]);
        assert_eq!(list("7-7").items(), &[Item::Range(7, 7)]);
    }

    #[test]
    fn every_signal_is_a_list_item_and_a_list_prints_back_as_it_parses() {
        for s in Signal::all() {
            let n = s.number();
            let name = s.name();
            if !name.bytes().all(|b| b.is_ascii_digit()) {
                let lower = name.to_ascii_lowercase();
                for form in [name.clone(), format!("SIG{name}"), lower] {
                    assert_eq!(list(&form).items(), &[Item::Signal(s)], "{form}");
                }
            }
            // A signal without a name is written SIG32: a bare number is an exit code.
            assert_eq!(list(&format!("SIG{n}")).items(), &[Item::Signal(s)]);
            let one = List(vec![Item::Signal(s), Item::Code(3)]);
            assert_eq!(one.to_string().parse::<List>(), Ok(one.clone()), "{one}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn real_time_signals_in_a_list() {
        let min = nix::libc::SIGRTMIN();
        assert_eq!(
            list("rtmin+2,SIGRTMAX,timeout").items(),
            &[
                Item::Signal(Signal::from_number(min + 2).unwrap()),
                Item::Signal(Signal::from_number(nix::libc::SIGRTMAX()).unwrap()),
                Item::Timeout
            ]
        );
        let err = "1,RTMIN+99".parse::<List>().unwrap_err();
        assert!(err.contains("'RTMIN+99'") && err.contains("RTMAX"), "{err}");
    }

    #[test]
    fn list_grammar_rejects_malformed_items_naming_them() {
        for (input, needle) in [
            ("1-", "'1-'"),
            ("300", "'300'"),
            ("5-2", "'5-2'"),
            ("-1", "'-1'"),
            ("SIGFOO", "'SIGFOO'"),
            ("1,,2", "empty"),
            ("", "empty"),
            ("1-2-3", "'1-2-3'"),
            ("0x10", "'0x10'"),
        ] {
            let err = input.parse::<List>().unwrap_err();
            assert!(err.contains(needle), "{input}: {err}");
        }
    }

    #[test]
    fn lists_find_the_codes_they_share() {
        assert_eq!(list("0-3").find_code(0), Some(Item::Range(0, 3)));
        assert_eq!(list("TERM,timeout").find_code(0), None);
        assert_eq!(list("10-20").shared_code(&list("1-12,15")), Some(10));
        assert_eq!(list("2,7").shared_code(&list("timeout,5-9")), Some(7));
        assert_eq!(list("1-5").shared_code(&list("6-255,KILL")), None);
        assert_eq!(list("255").shared_code(&list("0-255")), Some(255));
    }

    #[test]
    fn success_on_takes_codes_and_ranges_only() {
        assert!(list("0-3,9").codes_only().is_ok());
        assert_eq!(list("1,timeout").codes_only(), Err(Item::Timeout));
        assert_eq!(list("TERM").codes_only(), Err(Item::Signal(Signal::TERM)));
    }
}
