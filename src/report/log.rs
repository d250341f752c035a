//! The schedule log (spec 8.1, 8.2): one line per event, human or JSON, to standard error or
//! `--log-file`. Writing the log never fails the run: a closed stderr loses the log, not the
//! command's result.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::Write;
use std::time::{Duration, SystemTime};

use crate::config::Config;
use crate::config::{ColorWhen, LogFormat};
use crate::duration::{hms, millis};
use crate::exit::ExitStatus;
use crate::policy::pushback::Ignored;
use crate::policy::{
    BudgetExceeded, Decision, GiveUp, LimitSource, Outcome, Signal, Verdict, Wait,
};
use crate::report::charset;
use crate::report::ci::{self, Ci, Row, System, Tally};
use crate::report::json::Obj;
use crate::report::{command_line_in, describe_policy, policy_json, printable};

#[derive(Clone, Copy)]
enum Paint {
    Good,
    Warn,
    Bad,
}

impl Paint {
    fn code(self) -> &'static str {
        match self {
            Paint::Good => "32",
            Paint::Warn => "33",
            Paint::Bad => "31",
        }
    }
}

/// A human log line: text, some of it to be coloured. Only `Log::human` turns it into bytes,
/// and it escapes every part (`printable`), so that the colour codes it adds are the only
/// escape sequences that can reach the log, whatever the user gave.
#[derive(Default)]
pub(super) struct Line {
    parts: Vec<(String, Option<Paint>)>,
}

impl Line {
    fn push(&mut self, text: &str) {
        self.parts.push((text.to_string(), None));
    }

    fn paint(&mut self, text: &str, paint: Paint) {
        self.parts.push((text.to_string(), Some(paint)));
    }
}

impl From<String> for Line {
    fn from(text: String) -> Line {
        Line {
            parts: vec![(text, None)],
        }
    }
}

impl From<&str> for Line {
    fn from(text: &str) -> Line {
        Line::from(text.to_string())
    }
}

/// What the log says about an ended try.
#[derive(Clone, Copy, Debug)]
pub struct TryReport<'a> {
    pub attempt: u64,
    pub outcome: Outcome,
    pub took: Duration,
    pub verdict: &'a Verdict,
    pub decision: &'a Decision,
    /// Why the command could not start, if it could not.
    pub detail: Option<&'a str>,
    /// The try was stopped (a timeout outcome) and its group outlived the grace period
    /// (`--kill-after`), so it got SIGKILL.
    pub killed: bool,
    /// The try was stopped because the budget or the deadline ended, not by `--timeout`.
    pub stopped_by_limit: bool,
}

/// How a hook (`--on-retry`, `--on-give-up`) failed.
#[derive(Clone, Copy, Debug)]
pub enum HookFailure<'a> {
    /// `sh` could not be started.
    NotStarted(&'a std::io::Error),
    /// It ended badly by itself.
    Ended(Outcome),
    /// It ran past its bound, this long, and was stopped.
    TimedOut(Duration),
}

impl fmt::Display for HookFailure<'_> {
    /// `could not start: ...`, `exited 3`, `was killed by SIGSEGV`, `timed out after 2s;
    /// stopped it`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HookFailure::NotStarted(error) => write!(f, "could not start: {error}"),
            HookFailure::Ended(Outcome::Exit(code)) => write!(f, "exited {code}"),
            HookFailure::Ended(Outcome::Signal(s)) => write!(f, "was killed by {s}"),
            HookFailure::Ended(other) => write!(f, "{other}"),
            HookFailure::TimedOut(took) => {
                write!(f, "timed out after {}; stopped it", hms(*took))
            }
        }
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

/// Where the log goes and how it looks.
pub struct Log {
    out: Box<dyn Write>,
    pub(super) json: bool,
    pub(super) quiet: bool,
    verbose: bool,
    color: bool,
    /// Write ASCII only (a locale whose character set is not UTF-8).
    ascii: bool,
    run_id: String,
    /// `--label`: the run's name, in every line and event.
    run_label: Option<String>,
    max_tries: Option<u64>,
    /// The signal that stops a try (`--signal`), and the grace period between it and SIGKILL.
    signal: Signal,
    kill_after: Duration,
    /// What ends the run early, if anything: the budget or the deadline.
    limit: Option<LimitSource>,
    /// The CI around the run (spec 8.4): what it reads besides the log.
    ci: Ci,
    /// The log goes to standard error (no `--log-file`), where the CI reads its markers too.
    on_stderr: bool,
    /// The group (GitHub, an empty name) or section (GitLab, its name) open around a try.
    fold: Option<String>,
    /// The tries so far, for the annotation and the job summary.
    tally: Tally,
    /// The end of the run has been announced (annotation, job summary): a later `gave_up` (a
    /// signal during `--on-give-up`) announces nothing more.
    concluded: bool,
    /// The command line, for the job summary.
    command: String,
}

/// Decides whether `--color` means colour for a log written to a terminal or not.
pub fn use_color(when: ColorWhen, is_terminal: bool, no_color: bool) -> bool {
    match when {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => is_terminal && !no_color,
    }
}

/// How a try ended, as words: `exited 7`, `timed out`, `was killed by SIGKILL`.
fn outcome_words(outcome: Outcome) -> String {
    match outcome {
        Outcome::Exit(code) => format!("exited {code}"),
        Outcome::Signal(s) => format!("was killed by {s}"),
        Outcome::Timeout => "timed out".into(),
        Outcome::NotFound => "could not start: command not found".into(),
        Outcome::NotExecutable => "could not start: command cannot be executed".into(),
        Outcome::NoResources => "could not start: no resources".into(),
    }
}

fn outcome_json(outcome: Outcome) -> Obj {
    match outcome {
        Outcome::Exit(code) => Obj::new().num("exit", code),
        Outcome::Signal(s) => Obj::new().str("signal", &s.name()),
        Outcome::Timeout => Obj::new().bool("timeout", true),
        Outcome::NotFound => Obj::new().bool("not_found", true),
        Outcome::NotExecutable => Obj::new().bool("not_executable", true),
        Outcome::NoResources => Obj::new().bool("no_resources", true),
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Seconds since the epoch, for GitLab's section markers.
fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The local wall-clock time of day, `14:03:07.123`, for `-v`.
fn local_time(now: SystemTime) -> String {
    let since = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs() as nix::libc::time_t;
    // SAFETY: `tm` holds integers and, on glibc, a pointer to the zone's name, for all of
    // which zero bytes are a valid value (a null pointer).
    let mut tm: nix::libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: localtime_r reads `secs` and writes only into `tm`, both of which outlive the
    // call; the zone name it may point `tm` at is static. It reads TZ, which retry never sets.
    let ok = unsafe { !nix::libc::localtime_r(&secs, &mut tm).is_null() };
    if !ok {
        return humantime::format_rfc3339_millis(now).to_string();
    }
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        since.subsec_millis()
    )
}

impl Log {
    pub fn new(out: Box<dyn Write>, config: &Config, color: bool, run_id: String) -> Log {
        Log {
            out,
            json: config.log.format == LogFormat::Json,
            quiet: config.log.quiet,
            verbose: config.log.verbose,
            color,
            ascii: charset::ascii(),
            run_id,
            run_label: config.label.clone(),
            max_tries: config.policy.max_tries,
            signal: config.signal,
            kill_after: config.kill_after,
            limit: config.policy.limit.map(|l| l.source),
            ci: Ci::default(),
            on_stderr: config.log.file.is_none(),
            fold: None,
            tally: Tally::default(),
            concluded: false,
            command: command_line_in(&config.command, false),
        }
    }

    /// Writes ASCII only, or UTF-8 (by default, what the locale says).
    pub fn with_ascii(mut self, ascii: bool) -> Log {
        self.ascii = ascii;
        self
    }

    /// Writes `text` to the log, in ASCII if it must be, and flushes it.
    fn put(&mut self, text: &str) {
        let text = match (self.ascii, self.json) {
            (false, _) => std::borrow::Cow::Borrowed(text),
            (true, false) => charset::ascii_text(text).into(),
            (true, true) => charset::ascii_json(text).into(),
        };
        let _ = self.out.write_all(text.as_bytes());
        let _ = self.out.flush();
    }

    /// Writes for the CI `ci` found around the run; `on_stderr` when the log itself goes to
    /// standard error (no `--log-file`).
    pub fn with_ci(mut self, ci: Ci, on_stderr: bool) -> Log {
        self.ci = ci;
        self.on_stderr = on_stderr;
        self
    }

    /// The CI whose markers (annotations, groups, sections) the run writes, if any: none into a
    /// JSON log on standard error, which stays JSON lines only.
    fn ci_markers(&self) -> Option<System> {
        self.ci.system.filter(|_| !(self.json && self.on_stderr))
    }

    /// CI markers go to standard error whatever `--log-file` says: that is where the CI reads
    /// them.
    fn ci_line(&self, line: &str) {
        let mut text = if self.ascii {
            charset::ascii_text(line)
        } else {
            line.to_string()
        };
        text.push('\n');
        let _ = std::io::stderr().write_all(text.as_bytes());
    }

    /// Folds the output of try `attempt` in the CI log: every try after the first, which follows
    /// a failure; a first try is never folded, so a run that succeeds at once shows its output.
    pub fn group_start(&mut self, attempt: u64) {
        if attempt < 2 || self.quiet || self.fold.is_some() {
            return;
        }
        let Some(system) = self.ci_markers() else {
            return;
        };
        let title = ci::fold_title(self.run_label.as_deref(), &self.label(attempt));
        match system {
            System::GitHub => {
                self.ci_line(&ci::github_group(&title));
                self.fold = Some(String::new());
            }
            System::GitLab => {
                let name = ci::gitlab_section_name(&self.run_id, attempt);
                self.ci_line(&ci::gitlab_section_start(unix_secs(), &name, &title));
                self.fold = Some(name);
            }
        }
    }

    /// Ends the fold that `group_start` opened, if it opened one.
    pub fn group_end(&mut self) {
        let Some(name) = self.fold.take() else {
            return;
        };
        match self.ci.system {
            Some(System::GitHub) => self.ci_line(ci::GITHUB_END_GROUP),
            Some(System::GitLab) => self.ci_line(&ci::gitlab_section_end(unix_secs(), &name)),
            None => {}
        }
    }

    /// Adds the ended try `r` to the tally; `ended` when it ended by itself (a try that `retry`
    /// stopped on a signal it received is not one of the command's failures).
    fn record(&mut self, r: &TryReport<'_>, ended: bool) {
        let limit = r
            .stopped_by_limit
            .then_some(self.limit.unwrap_or(LimitSource::Budget));
        let verdict = match r.verdict.reason() {
            Some(reason) => format!("{}: {reason}", r.verdict.word()),
            None => r.verdict.word().to_string(),
        };
        let row = Row {
            try_label: self.label(r.attempt),
            outcome: ci::outcome_words(r.outcome, limit),
            took: r.took,
            wait: match r.decision {
                Decision::Retry(wait) => Some(wait.delay),
                _ => None,
            },
            verdict,
        };
        let failed = ended && !matches!(r.verdict, Verdict::Success(_));
        self.tally.record(row, failed);
    }

    /// Announces the end of a run that retried or gave up, once: appends its table to the job
    /// summary, and under GitHub Actions writes its one annotation (`level`: `warning` or
    /// `error`) unless `quiet` asks for none. True when the annotation was written.
    fn conclude(&mut self, level: &str, summary: &str, quiet: bool) -> bool {
        if std::mem::replace(&mut self.concluded, true) {
            return false;
        }
        self.append_summary(summary);
        if quiet || self.ci_markers() != Some(System::GitHub) {
            return false;
        }
        let text = ci::annotation(level, self.run_label.as_deref(), &printable(summary));
        self.ci_line(&text);
        true
    }

    /// Appends the table of the tries to `GITHUB_STEP_SUMMARY`, in one write to a file opened
    /// for appending, so that runs ending together in one step never interleave their tables.
    fn append_summary(&mut self, summary: &str) {
        let Some(path) = self.ci.step_summary.clone() else {
            return;
        };
        let text = self
            .tally
            .markdown(self.run_label.as_deref(), &self.command, summary);
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| file.write_all(text.as_bytes()));
        if let Err(e) = written {
            self.warn(&format!(
                "cannot append the tries to the job summary '{}': {e}",
                path.display()
            ));
        }
    }

    fn label(&self, attempt: u64) -> String {
        match self.max_tries {
            Some(n) => format!("{attempt}/{n}"),
            None => attempt.to_string(),
        }
    }

    /// What every human line starts with: `retry: `, or `retry[NAME]: ` with `--label`.
    fn prefix(&self) -> String {
        match &self.run_label {
            Some(name) => format!("retry[{}]: ", printable(name)),
            None => "retry: ".to_string(),
        }
    }

    /// Writes one human line; every part of it is made `printable`, then coloured if asked.
    pub(super) fn human(&mut self, line: impl Into<Line>) {
        let mut text = self.prefix();
        if self.verbose {
            text += &format!("[{}] ", local_time(SystemTime::now()));
        }
        for (part, paint) in &line.into().parts {
            let part = printable(part);
            match paint.filter(|_| self.color) {
                Some(paint) => text += &format!("\x1b[{}m{part}\x1b[0m", paint.code()),
                None => text += &part,
            }
        }
        text.push('\n');
        self.put(&text);
    }

    pub(super) fn event(&mut self, event: &str) -> Obj {
        let obj = Obj::new()
            .str("event", event)
            .str(
                "ts",
                &humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            )
            .str("run_id", &self.run_id);
        match &self.run_label {
            Some(name) => obj.str("label", name),
            None => obj,
        }
    }

    pub(super) fn emit(&mut self, obj: Obj) {
        let mut line = obj.finish();
        line.push('\n');
        self.put(&line);
    }

    /// The start of a run: with `-v`, the command, the policy and the seed.
    pub fn start(&mut self, config: &Config, seed: u64) {
        if self.json {
            let obj = self
                .event("start")
                .words("command", config.command.iter().map(OsString::as_os_str))
                .obj("policy", policy_json(config, seed));
            self.emit(obj);
        } else if self.verbose {
            let command = command_line_in(&config.command, self.ascii);
            self.human(format!("command: {command}"));
            self.human(format!("policy: {}", describe_policy(config)));
            self.human(format!(
                "seed: {seed} (pass --seed {seed} to get the same waits)"
            ));
        }
    }

    /// A try ended.
    pub fn try_ended(&mut self, r: &TryReport<'_>) {
        self.record(r, true);
        if self.json {
            self.try_event(r);
            return;
        }
        let first_success = r.attempt == 1 && matches!(r.decision, Decision::Succeed);
        if self.quiet || (first_success && !self.verbose) {
            return;
        }
        let line = self.try_line(r);
        self.human(line);
    }

    /// A try that `retry` stopped because it received a stopping signal. The JSON log has its
    /// `try` event like every try that started (spec 8.2); the human log says it in the
    /// `received` line.
    pub fn try_interrupted(&mut self, r: &TryReport<'_>) {
        self.record(r, false);
        if self.json {
            self.try_event(r);
        }
    }

    fn try_event(&mut self, r: &TryReport<'_>) {
        {
            let mut obj = self
                .event("try")
                .num("attempt", r.attempt)
                .num("duration_ms", millis(r.took))
                .obj("outcome", outcome_json(r.outcome));
            if r.outcome == Outcome::Timeout {
                obj = obj
                    .str("signal", &self.signal.name())
                    .bool("killed", r.killed);
            }
            if r.stopped_by_limit {
                obj = obj.str("limit", self.limit_word());
            }
            obj = obj.str("verdict", r.verdict.word());
            if let Some(reason) = r.verdict.reason() {
                obj = obj.str("reason", &reason.to_string());
            }
            if let Some(detail) = r.detail {
                obj = obj.str("error", detail);
            }
            self.emit(obj);
        }
    }

    /// `budget` or `deadline`: what stopped a try that `--timeout` did not.
    fn limit_word(&self) -> &'static str {
        match self.limit {
            Some(LimitSource::Deadline) => "deadline",
            Some(LimitSource::Budget) | None => "budget",
        }
    }

    /// How a try ended, as words, with how it was stopped and the signals it was sent, as
    /// `timeout --verbose` names them: `exited 7`, `timed out after 2s, sent SIGTERM, then
    /// SIGKILL after the 1s grace period`, `stopped at the end of the budget after 2s, sent
    /// SIGTERM`.
    fn ended_words(&self, r: &TryReport<'_>) -> String {
        if r.outcome != Outcome::Timeout {
            return format!("{} after {}", outcome_words(r.outcome), hms(r.took));
        }
        let stopped = match (r.stopped_by_limit, self.limit) {
            (false, _) => "timed out",
            (true, Some(LimitSource::Deadline)) => "stopped at the deadline",
            (true, _) => "stopped at the end of the budget",
        };
        let mut words = format!("{stopped} after {}, sent {}", hms(r.took), self.signal);
        if r.killed && self.signal != Signal::KILL {
            words += &match self.kill_after.is_zero() {
                true => ", then SIGKILL at once".to_string(),
                false => format!(
                    ", then SIGKILL after the {} grace period",
                    hms(self.kill_after)
                ),
            };
        }
        words
    }

    /// The human line about an ended try.
    fn try_line(&self, r: &TryReport<'_>) -> Line {
        let TryReport {
            attempt,
            outcome,
            verdict,
            decision,
            detail,
            ..
        } = *r;
        let label = self.label(attempt);
        let mut line = Line::default();
        line.push(&format!("try {label} "));
        match (verdict, detail) {
            (Verdict::Success(_), _) => {
                line.paint("succeeded", Paint::Good);
                if outcome == Outcome::Exit(0) {
                    line.push(&format!(" after {}", hms(r.took)));
                } else {
                    line.push(&format!(" ({}, --success-on)", self.ended_words(r)));
                }
            }
            (_, Some(detail)) => line.push(&format!("could not start: {detail}")),
            _ => line.push(&self.ended_words(r)),
        }
        if !matches!(verdict, Verdict::Success(_)) {
            line.push(" (");
            match verdict {
                Verdict::Transient(_) => line.paint("transient", Paint::Warn),
                _ => line.paint(verdict.word(), Paint::Bad),
            }
            if let Some(reason) = verdict.reason().filter(|_| detail.is_none()) {
                line.push(&format!(": {reason}"));
            }
            line.push(")");
        }
        match decision {
            Decision::Retry(wait) => {
                line.push(&format!("; next try in {}", hms(wait.delay)));
                match wait.requested {
                    Some(_) if wait.set_by_request() => line.push(" (asked for by the output)"),
                    Some(asked) => line.push(&format!(" (the output asked for {})", hms(asked))),
                    None => {}
                }
            }
            Decision::Succeed => {}
            Decision::GiveUp(GiveUp::Tries) => line.push("; giving up: no tries left"),
            Decision::GiveUp(GiveUp::Input) => {
                line.push("; giving up: standard input could not be kept for another try")
            }
            Decision::GiveUp(GiveUp::Budget(exceeded)) => {
                line.push(&format!("; giving up: {exceeded}"))
            }
            Decision::GiveUp(GiveUp::Quota(refusal)) => {
                line.push(&format!("; giving up: {refusal}"))
            }
            Decision::GiveUp(_) => line.push("; giving up"),
        }
        line
    }

    /// The wait before the next try (JSON only: the human try line already says it).
    pub fn wait(&mut self, attempt: u64, wait: Wait) {
        if self.json {
            let mut obj = self
                .event("wait")
                .num("attempt", attempt)
                .num("base_ms", millis(wait.base))
                .num("delay_ms", millis(wait.delay));
            // Only when the output asked for a wait, as the README says.
            if let Some(requested) = wait.requested {
                obj = obj.num("requested_ms", millis(requested));
            }
            self.emit(obj);
        }
    }

    /// What a failed try left running was stopped: `count` processes (0: not counted), with
    /// `signal`, then SIGKILL if `killed`.
    pub fn leftovers(&mut self, attempt: u64, signal: Signal, killed: bool, count: usize) {
        if self.json {
            let mut obj = self
                .event("leftovers")
                .num("attempt", attempt)
                .str("signal", &signal.name())
                .bool("killed", killed);
            if count > 0 {
                obj = obj.num("count", count as u64);
            }
            self.emit(obj);
            return;
        }
        if self.quiet {
            return;
        }
        let label = self.label(attempt);
        let how = if killed {
            format!("{signal}, then SIGKILL")
        } else {
            signal.to_string()
        };
        let left = match count {
            0 => "left processes running in its group; stopped them".to_string(),
            1 => "left 1 process running; stopped it".to_string(),
            n => format!("left {n} processes running; stopped them"),
        };
        self.human(format!("try {label} {left} ({how})"));
    }

    /// What a hook left running was stopped (`count` processes), as a failed try's leftovers
    /// are.
    pub fn hook_leftovers(
        &mut self,
        which: &str,
        attempt: u64,
        signal: Signal,
        killed: bool,
        count: usize,
    ) {
        if self.json {
            let obj = self
                .event("leftovers")
                .num("attempt", attempt)
                .str("hook", which)
                .str("signal", &signal.name())
                .bool("killed", killed)
                .num("count", count as u64);
            self.emit(obj);
            return;
        }
        if self.quiet {
            return;
        }
        let what = match count {
            1 => "1 process running; stopped it".to_string(),
            n => format!("{n} processes running; stopped them"),
        };
        let how = if killed {
            format!("{signal}, then SIGKILL")
        } else {
            signal.to_string()
        };
        self.human(format!("the {which} hook left {what} ({how})"));
    }

    pub fn succeeded(&mut self, attempt: u64, elapsed: Duration, waited: Duration) {
        // A run that succeeded at once is not announced: nothing needed retrying.
        let mut annotated = false;
        if attempt > 1 {
            let summary = self.tally.succeeded(&self.label(attempt), elapsed, waited);
            annotated = self.conclude("warning", &summary, self.quiet);
        }
        if self.json {
            let obj = self
                .event("success")
                .num("attempt", attempt)
                .num("elapsed_ms", millis(elapsed))
                .num("waited_ms", millis(waited));
            self.emit(obj);
            return;
        }
        // The annotation is this line, in the same stream: never the same line twice.
        if self.quiet || (attempt == 1 && !self.verbose) || (annotated && self.on_stderr) {
            return;
        }
        let retries = attempt.saturating_sub(1);
        let mut line = Line::default();
        line.paint("succeeded", Paint::Good);
        line.push(&format!(
            " on try {} in {} ({}, {} waiting)",
            self.label(attempt),
            hms(elapsed),
            plural(retries, "retry", "retries"),
            hms(waited)
        ));
        self.human(line);
    }

    /// A stopping signal reached `retry` during try `attempt` or the wait after it; a wait
    /// after try 0 is the stagger before the first try.
    pub fn received(&mut self, signal: Signal, attempt: u64, in_wait: bool) {
        let stagger = in_wait && attempt == 0;
        if self.json {
            let during = match (stagger, in_wait) {
                (true, _) => "stagger",
                (false, true) => "wait",
                (false, false) => "try",
            };
            let obj = self
                .event("signal")
                .str("signal", &signal.name())
                .num("attempt", attempt)
                .str("during", during);
            self.emit(obj);
            return;
        }
        if self.quiet {
            return;
        }
        if stagger {
            self.human(format!(
                "received {signal} during the stagger before the first try: no try ran"
            ));
            return;
        }
        let label = self.label(attempt);
        let during = if in_wait {
            format!("the wait after try {label}")
        } else {
            format!("try {label}")
        };
        let action = if in_wait {
            "no further try"
        } else {
            "stopped the try; no further try"
        };
        self.human(format!("received {signal} during {during}: {action}"));
    }

    /// The run gave up. `last` is how the last try ended; `signal` the signal that stopped
    /// `retry`, if one did.
    pub fn gave_up(
        &mut self,
        tries: u64,
        elapsed: Duration,
        why: &GiveUp,
        status: ExitStatus,
        last: Option<Outcome>,
        signal: Option<Signal>,
    ) {
        let cause = match (signal, last) {
            (Some(s), _) => format!("interrupted by {s}"),
            // Only --until-output gives up after a try that exited 0.
            (None, Some(Outcome::Exit(0))) => "exit 0, but not ready (--until-output)".into(),
            (None, Some(outcome)) => outcome.to_string(),
            (None, None) => "no try ran".into(),
        };
        let summary = self.tally.gave_up(tries, elapsed, why, signal);
        let annotated = self.conclude("error", &summary, false);
        if self.json {
            let mut obj = self
                .event("give_up")
                .str("reason", why.word())
                .num("exit_code", status.code() as u64)
                .num("tries", tries)
                .num("elapsed_ms", millis(elapsed));
            if let Some(s) = signal {
                obj = obj.str("signal", &s.name());
            }
            match why {
                GiveUp::Budget(exceeded) => {
                    obj = obj.str("detail", &exceeded.to_string());
                    if exceeded.requested {
                        obj = obj.num("requested_ms", millis(exceeded.wait));
                    }
                }
                GiveUp::Quota(refusal) => obj = obj.str("detail", &refusal.to_string()),
                _ => {}
            }
            self.emit(obj);
            return;
        }
        if annotated && self.on_stderr {
            return;
        }
        let mut line = Line::default();
        line.paint("gave up", Paint::Bad);
        line.push(&format!(
            " {} in {}: {cause}",
            ci::after_tries(tries),
            hms(elapsed)
        ));
        self.human(line);
    }

    /// The run that gave up was appended to the `--dead-letter` file `path` (`-v`, and JSON).
    pub fn dead_lettered(&mut self, path: &std::path::Path) {
        let shown = path.to_string_lossy();
        if self.json {
            let obj = self.event("dead_letter").str("file", &shown);
            self.emit(obj);
        } else if self.verbose {
            self.human(format!("recorded in --dead-letter '{shown}'"));
        }
    }

    /// The `--on-retry` hook took so long that try `next` no longer fits in the budget: the
    /// run gives up (the `give_up` event that follows carries the numbers in JSON).
    pub fn no_time_after_hook(&mut self, next: u64, exceeded: &BudgetExceeded) {
        if self.json || self.quiet {
            return;
        }
        let label = self.label(next);
        self.human(format!(
            "no time left for try {label} after the --on-retry hook; giving up: {exceeded}"
        ));
    }

    /// A hook (`--on-retry`, `--on-give-up`) run after try `attempt` ended badly (`what`:
    /// `exited 3`); the run goes on as if it had not run.
    pub fn hook_failed(&mut self, which: &str, attempt: u64, what: &str) {
        if self.json {
            let obj = self
                .event("hook")
                .num("attempt", attempt)
                .str("hook", which)
                .str("result", what);
            self.emit(obj);
        } else if !self.quiet {
            self.human(format!("{which} hook {what}; going on"));
        }
    }

    /// A hook run after try `attempt` failed; the run goes on as if it had not run.
    pub fn hook_ended(&mut self, which: &str, attempt: u64, failure: HookFailure<'_>) {
        self.hook_failed(which, attempt, &failure.to_string());
    }

    /// Try `attempt`'s output matched `--delay-from-output`, but the match asked for no wait
    /// (`ignored`): said with `-v`, and always in the JSON log.
    pub fn request_ignored(&mut self, attempt: u64, ignored: &Ignored) {
        if self.json {
            let mut obj = self
                .event("request_ignored")
                .num("attempt", attempt)
                .str("reason", &ignored.why);
            if let Some(group) = &ignored.group {
                obj = obj.str("group", group);
            }
            self.emit(obj);
            return;
        }
        if !self.verbose {
            return;
        }
        let label = self.label(attempt);
        let what = match &ignored.group {
            Some(group) => format!("its capture group held '{group}', {}", ignored.why),
            None => ignored.why.clone(),
        };
        self.human(format!(
            "try {label}: output matched --delay-from-output, but {what}; ignored"
        ));
    }

    /// This run is nested in another retry (run `outer_id`, of `outer` tries, this one of
    /// `inner`; 0: no limit): the tries multiply.
    pub fn nested(&mut self, outer_id: &str, outer: u64, inner: u64) {
        let total = match (outer, inner) {
            (0, _) | (_, 0) => "without limit".to_string(),
            (o, i) => format!("up to {o} × {i} = {} times", o.saturating_mul(i)),
        };
        self.warn(&format!(
            "running inside another retry (run {outer_id}): the tries multiply, and the command may run {total}; nested retries are a classic cause of retry storms"
        ));
    }

    /// `--stagger` holds the first try back by `delay` (drawn up to `most`).
    pub fn stagger(&mut self, delay: Duration, most: Duration) {
        if self.json {
            let obj = self
                .event("stagger")
                .num("delay_ms", millis(delay))
                .num("most_ms", millis(most));
            self.emit(obj);
        } else if self.verbose {
            self.human(format!(
                "first try in {} (--stagger {})",
                hms(delay),
                hms(most)
            ));
        }
    }

    /// The retry quota after a first try's deposit or a retry's take (`-v`, and the JSON log).
    pub fn quota(&mut self, quota: &str, action: &str, granted: bool, tokens: f64) {
        if self.json {
            let obj = self
                .event("quota")
                .str("quota", quota)
                .str("action", action)
                .bool("granted", granted)
                .float("tokens", (tokens * 1000.0).round() / 1000.0);
            self.emit(obj);
        } else if self.verbose {
            self.human(format!("quota {quota}: {action}, {tokens:.2} tokens left"));
        }
    }

    /// The try's output could not all be written before the run had to go on.
    pub fn slow_reader(&mut self) {
        self.warn(
            "the reader of the output is too slow: what the try wrote last was not all passed on",
        );
    }

    /// The reader of standard output left before the successful try's output was all written.
    pub fn reader_gone(&mut self) {
        self.warn("the reader of standard output is gone before all of it was written");
    }

    /// Processes of the group led by `pid` outlived SIGKILL by `settle`; `retry` goes on
    /// without them.
    pub fn survivors(&mut self, pid: i32, settle: Duration) {
        self.warn(&format!(
            "processes of pid {pid} still exist {settle:?} after SIGKILL"
        ));
    }

    /// The countdown to try `next`, `secs` seconds away, on the status line.
    pub fn countdown(&mut self, next: u64, secs: u64) {
        let label = self.label(next);
        self.status_line(&format!("next try ({label}) in {secs}s"));
    }

    /// Replaces the status line at the bottom of a terminal with `text`.
    pub fn status_line(&mut self, text: &str) {
        let prefix = self.prefix();
        self.put(&format!("\r\x1b[2K{prefix}{}", printable(text)));
    }

    /// Clears the status line, so that the next log line takes its place.
    pub fn clear_status_line(&mut self) {
        self.put("\r\x1b[2K");
    }

    /// An internal failure of `retry` (spec 11: it exits 125 next): `retry: error: MESSAGE`, or
    /// an `error` event; `-q` never hides it.
    pub fn error(&mut self, message: &str) {
        if self.json {
            let obj = self.event("error").str("message", message);
            self.emit(obj);
        } else {
            self.human(format!("error: {message}"));
        }
    }

    /// A problem that does not change the run.
    pub fn warn(&mut self, message: &str) {
        if self.json {
            let obj = self.event("warning").str("message", message);
            self.emit(obj);
        } else {
            self.human(format!("warning: {message}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ParseOutcome, parse};
    use crate::policy::Reason;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A log sink that the test can read afterwards.
    #[derive(Clone, Default)]
    struct Sink(Rc<RefCell<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Sink {
        fn text(&self) -> String {
            String::from_utf8(self.0.borrow().clone()).unwrap()
        }
    }

    fn log_for(args: &[&str]) -> (Log, Sink) {
        let config = match parse(
            ["retry"].iter().chain(args).chain(&["--", "true"]),
            SystemTime::UNIX_EPOCH,
        ) {
            ParseOutcome::Run(c) => *c,
            other => panic!("{other:?}"),
        };
        let sink = Sink::default();
        let log = Log::new(Box::new(sink.clone()), &config, false, "id".into()).with_ascii(false);
        (log, sink)
    }

    const FAILED: Verdict = Verdict::Transient(Reason::Default);

    fn report<'a>(decision: &'a Decision) -> TryReport<'a> {
        TryReport {
            attempt: 1,
            outcome: Outcome::Exit(1),
            took: Duration::from_millis(5),
            verdict: &FAILED,
            decision,
            detail: None,
            killed: false,
            stopped_by_limit: false,
        }
    }

    const TIMED_OUT: Verdict = Verdict::Transient(Reason::Default);

    /// The human and JSON lines of a timed-out try 1 that the run retries, or gives up after.
    fn stopped_try(args: &[&str], killed: bool, by_limit: bool, last: bool) -> (String, String) {
        let wait = Wait {
            base: Duration::from_secs(1),
            delay: Duration::from_secs(1),
            requested: None,
        };
        let decision = if last {
            Decision::GiveUp(GiveUp::Tries)
        } else {
            Decision::Retry(wait)
        };
        let report = TryReport {
            attempt: 1,
            outcome: Outcome::Timeout,
            took: Duration::from_millis(2003),
            verdict: &TIMED_OUT,
            decision: &decision,
            detail: None,
            killed,
            stopped_by_limit: by_limit,
        };
        let (mut log, human) = log_for(args);
        log.try_ended(&report);
        let json_args: Vec<&str> = args
            .iter()
            .copied()
            .chain(["--log-format", "json"])
            .collect();
        let (mut log, json) = log_for(&json_args);
        log.try_ended(&report);
        (human.text(), json.text())
    }

    #[test]
    fn a_timed_out_try_says_whether_it_needed_sigkill() {
        let (human, json) = stopped_try(&["-n3", "-t2s", "-k1s"], true, false, false);
        assert_eq!(
            human,
            "retry: try 1/3 timed out after 2.003s, sent SIGTERM, then SIGKILL after the 1s grace period (transient); next try in 1s\n"
        );
        assert!(
            json.contains(r#""outcome":{"timeout":true},"signal":"TERM","killed":true,"#),
            "{json}"
        );
        assert!(!json.contains("limit"), "{json}");
        let (human, json) = stopped_try(&["-n3", "-t2s", "-k1s"], false, false, false);
        assert!(
            human.contains("try 1/3 timed out after 2.003s, sent SIGTERM (transient)"),
            "{human}"
        );
        assert!(json.contains(r#""killed":false"#), "{json}");
    }

    #[test]
    fn a_timed_out_try_names_the_signals_it_was_sent() {
        let (human, json) = stopped_try(&["-n1", "-t2s", "-s", "INT"], false, false, false);
        assert!(
            human.contains("timed out after 2.003s, sent SIGINT (transient)"),
            "{human}"
        );
        assert!(json.contains(r#""signal":"INT","killed":false"#), "{json}");
        let (human, _) = stopped_try(&["-n1", "-t2s", "-s", "KILL"], true, false, false);
        assert!(
            human.contains("timed out after 2.003s, sent SIGKILL (transient)"),
            "{human}"
        );
        let (human, _) = stopped_try(&["-n1", "-t2s", "-k", "0"], true, false, false);
        assert!(
            human.contains("timed out after 2.003s, sent SIGTERM, then SIGKILL at once"),
            "{human}"
        );
    }

    #[test]
    fn a_try_stopped_by_the_budget_or_the_deadline_says_so() {
        let (human, json) = stopped_try(&["-n1", "-B2s"], false, true, true);
        assert_eq!(
            human,
            "retry: try 1/1 stopped at the end of the budget after 2.003s, sent SIGTERM (transient); giving up: no tries left\n"
        );
        assert!(
            json.contains(r#""killed":false,"limit":"budget""#),
            "{json}"
        );
        let deadline = ["-n1", "--deadline", "1970-01-01T00:00:02Z", "-k", "500ms"];
        let (human, json) = stopped_try(&deadline, true, true, true);
        assert!(
            human.contains("try 1/1 stopped at the deadline after 2.003s, sent SIGTERM, then SIGKILL after the 500ms grace period (transient)"),
            "{human}"
        );
        assert!(
            json.contains(r#""killed":true,"limit":"deadline""#),
            "{json}"
        );
    }

    #[test]
    fn leftovers_are_counted() {
        let (mut log, sink) = log_for(&["-n3"]);
        log.leftovers(2, Signal::TERM, false, 2);
        log.leftovers(2, Signal::TERM, true, 1);
        log.leftovers(2, Signal::TERM, false, 0);
        assert_eq!(
            sink.text(),
            "retry: try 2/3 left 2 processes running; stopped them (SIGTERM)\n\
             retry: try 2/3 left 1 process running; stopped it (SIGTERM, then SIGKILL)\n\
             retry: try 2/3 left processes running in its group; stopped them (SIGTERM)\n"
        );
        let (mut log, sink) = log_for(&["--log-format", "json"]);
        log.leftovers(2, Signal::TERM, true, 3);
        log.leftovers(2, Signal::TERM, false, 0);
        let text = sink.text();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].ends_with(r#""attempt":2,"signal":"TERM","killed":true,"count":3}"#),
            "{text}"
        );
        assert!(lines[1].ends_with(r#""killed":false}"#), "{text}");
    }

    #[test]
    fn a_failed_hook_says_how_it_failed() {
        let (mut log, sink) = log_for(&["-n3"]);
        let refused = std::io::Error::from_raw_os_error(nix::libc::EACCES);
        log.hook_ended("--on-retry", 1, HookFailure::NotStarted(&refused));
        log.hook_ended("--on-retry", 1, HookFailure::Ended(Outcome::Exit(3)));
        log.hook_ended(
            "--on-retry",
            2,
            HookFailure::Ended(Outcome::Signal(Signal::KILL)),
        );
        log.hook_ended(
            "--on-give-up",
            3,
            HookFailure::TimedOut(Duration::from_secs(2)),
        );
        assert_eq!(
            sink.text(),
            format!(
                "retry: --on-retry hook could not start: {refused}; going on\n\
                 retry: --on-retry hook exited 3; going on\n\
                 retry: --on-retry hook was killed by SIGKILL; going on\n\
                 retry: --on-give-up hook timed out after 2s; stopped it; going on\n"
            )
        );
    }

    #[test]
    fn a_command_that_could_not_start_is_named_with_the_reason() {
        let error = |errno| std::io::Error::from_raw_os_error(errno);
        let name = OsStr::new("my cmd");
        assert_eq!(
            not_started(name, Outcome::NotFound, &error(nix::libc::ENOENT)),
            "'my cmd' was not found"
        );
        assert_eq!(
            not_started(name, Outcome::NotExecutable, &error(nix::libc::EACCES)),
            "'my cmd' cannot be executed: Permission denied"
        );
        assert_eq!(
            not_started(name, Outcome::NoResources, &error(nix::libc::EAGAIN)),
            format!(
                "'my cmd' could not be started: out of resources (EAGAIN: {})",
                nix::errno::Errno::EAGAIN.desc()
            )
        );
    }

    #[test]
    fn an_internal_failure_has_its_own_event_even_under_quiet() {
        let (mut log, sink) = log_for(&["--log-format", "json", "-q"]);
        log.error("cannot read the\ninput");
        let event: serde_json::Value = serde_json::from_str(&sink.text()).unwrap();
        assert_eq!(event["event"], "error");
        assert_eq!(event["run_id"], "id");
        assert_eq!(event["message"], "cannot read the\ninput");
        let (mut log, sink) = log_for(&["-q"]);
        log.error("cannot read the\ninput");
        assert_eq!(sink.text(), "retry: error: cannot read the\\ninput\n");
    }

    #[test]
    fn quiet_and_verbose_never_remove_a_json_event() {
        for flag in ["-q", "-v", "-n3"] {
            let (mut log, sink) = log_for(&["--log-format", "json", flag]);
            let wait = Wait {
                base: Duration::from_secs(1),
                delay: Duration::from_secs(1),
                requested: None,
            };
            let retry = Decision::Retry(wait);
            let give_up = Decision::GiveUp(GiveUp::Tries);
            let elapsed = Duration::from_secs(1);
            log.try_ended(&report(&retry));
            log.wait(1, wait);
            log.leftovers(1, Signal::TERM, false, 1);
            log.hook_failed("--on-retry", 1, "exited 3");
            log.warn("careful");
            log.received(Signal::INT, 2, false);
            log.try_ended(&report(&give_up));
            let status = ExitStatus::from_last_try(Outcome::Exit(1));
            log.gave_up(2, elapsed, &GiveUp::Tries, status, None, None);
            log.succeeded(3, elapsed, elapsed);
            log.error("broken");
            let events: Vec<String> = sink
                .text()
                .lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["event"].to_string())
                .collect();
            assert_eq!(
                events,
                [
                    "\"try\"",
                    "\"wait\"",
                    "\"leftovers\"",
                    "\"hook\"",
                    "\"warning\"",
                    "\"signal\"",
                    "\"try\"",
                    "\"give_up\"",
                    "\"success\"",
                    "\"error\""
                ],
                "{flag}"
            );
        }
    }

    #[test]
    fn a_wait_the_output_asked_for_is_named_in_the_log_and_the_json() {
        let s = Duration::from_secs;
        let asked = Decision::Retry(Wait {
            base: s(2),
            delay: s(30),
            requested: Some(s(30)),
        });
        let longer = Decision::Retry(Wait {
            base: s(2),
            delay: s(2),
            requested: Some(Duration::from_millis(500)),
        });
        let (mut log, sink) = log_for(&[]);
        log.try_ended(&report(&asked));
        log.try_ended(&report(&longer));
        assert_eq!(
            sink.text(),
            "retry: try 1/3 exited 1 after 5ms (transient); next try in 30s (asked for by the output)\n\
             retry: try 1/3 exited 1 after 5ms (transient); next try in 2s (the output asked for 500ms)\n"
        );
        let (mut log, sink) = log_for(&["--log-format", "json"]);
        let Decision::Retry(wait) = asked else {
            unreachable!()
        };
        log.wait(1, wait);
        let event: serde_json::Value = serde_json::from_str(sink.text().trim()).unwrap();
        assert_eq!(event["base_ms"], 2000);
        assert_eq!(event["delay_ms"], 30000);
        assert_eq!(event["requested_ms"], 30000);
        // A wait the output did not ask for has no `requested_ms` at all.
        let (mut log, sink) = log_for(&["--log-format", "json"]);
        log.wait(
            1,
            Wait {
                base: Duration::from_secs(2),
                delay: Duration::from_secs(1),
                requested: None,
            },
        );
        let event: serde_json::Value = serde_json::from_str(sink.text().trim()).unwrap();
        assert!(event.get("requested_ms").is_none(), "{event}");
    }

    #[test]
    fn a_request_that_does_not_fit_is_the_reason_for_giving_up() {
        let limit = crate::policy::Limit::earliest(Some(Duration::from_millis(1500)), None);
        let mut exceeded = crate::policy::budget::check_retry(
            limit,
            Duration::from_millis(1050),
            Duration::from_secs(1),
            None,
        )
        .unwrap_err();
        exceeded.requested = true;
        let why = GiveUp::Budget(exceeded);
        let decision = Decision::GiveUp(why.clone());
        let (mut log, sink) = log_for(&[]);
        log.try_ended(&report(&decision));
        assert_eq!(
            sink.text(),
            "retry: try 1/3 exited 1 after 5ms (transient); giving up: the output asked for 1s (--delay-from-output), more than the 450ms the budget leaves (budget: 1.05s used + 1s wait ≥ 1.5s)\n"
        );
        let (mut log, sink) = log_for(&["--log-format", "json"]);
        let status = ExitStatus::from_last_try(Outcome::Exit(1));
        log.gave_up(
            1,
            Duration::from_millis(1050),
            &why,
            status,
            Some(Outcome::Exit(1)),
            None,
        );
        let event: serde_json::Value = serde_json::from_str(sink.text().trim()).unwrap();
        assert_eq!(event["reason"], "budget");
        assert_eq!(event["requested_ms"], 1000);
        assert!(
            event["detail"]
                .as_str()
                .unwrap()
                .contains("--delay-from-output")
        );
    }

    #[test]
    fn a_match_that_asks_for_no_wait_is_told_with_verbose_and_in_json() {
        let ignored = Ignored {
            group: Some("soon".into()),
            why: "not a number of seconds or a duration".into(),
        };
        let (mut log, sink) = log_for(&[]);
        log.request_ignored(1, &ignored);
        assert_eq!(sink.text(), "");
        let (mut log, sink) = log_for(&["-v"]);
        log.request_ignored(1, &ignored);
        assert!(
            sink.text().ends_with(
                "try 1/3: output matched --delay-from-output, but its capture group held 'soon', not a number of seconds or a duration; ignored\n"
            ),
            "{}",
            sink.text()
        );
        let (mut log, sink) = log_for(&["--log-format", "json", "-q"]);
        log.request_ignored(2, &ignored);
        let event: serde_json::Value = serde_json::from_str(sink.text().trim()).unwrap();
        assert_eq!(event["event"], "request_ignored");
        assert_eq!(event["attempt"], 2);
        assert_eq!(event["group"], "soon");
    }
}
