//! The human log (docs/log.md#human-format): one line per event that a person needs, `retry: `
//! first, to standard error or `--log-file`. Each event becomes a line (or none) by a pure function
//! of the event and the run's facts; only [`HumanLog::write`] turns lines into bytes.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::config::Config;
use crate::duration::hms;
use crate::exit::ExitStatus;
use crate::policy::Form;
use crate::policy::pushback::Ignored;
use crate::policy::{
    Decision, GiveUp, LimitSource, Outcome, RepeatEnd, Signal, TimeSource, Verdict, Wait,
};
use crate::report::event::{During, Envelope, Event, HeldReport, Level, TryReport, Warning};
use crate::report::facts::{RunFacts, Sink};
use crate::report::out::Out;
use crate::report::policy_text::describe_policy;
use crate::report::replay;
use crate::report::tally::{after_tries, repeat_summary};
use crate::report::words::{
    failure_text, gave_up_cause, hook_failure, not_started, plural, throttle_figures, warning_text,
};
use crate::report::{charset, printable};
use crate::store::deadletter::{Pending, Replayed};
use crate::text::{self, Charset};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// A human log line: text, some of it to be coloured. Only `HumanLog::write` turns it into
/// bytes, and it escapes every part (`printable`), so that the colour codes it adds are the
/// only escape sequences that can reach the log, whatever the user gave.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Line {
    parts: Vec<(String, Option<Paint>)>,
}

impl Line {
    fn push(&mut self, text: &str) {
        self.parts.push((text.to_string(), None));
    }

    fn paint(&mut self, text: &str, paint: Paint) {
        self.parts.push((text.to_string(), Some(paint)));
    }

    /// The line without its colours, escaped.
    pub fn plain(&self) -> String {
        self.parts.iter().map(|(p, _)| printable(p)).collect()
    }
}

impl From<String> for Line {
    fn from(text: String) -> Line {
        Line {
            parts: vec![(text, None)],
        }
    }
}

/// The human log of a run.
pub struct HumanLog {
    out: Box<dyn Out>,
    color: bool,
    /// The command, for `-v`.
    command: Vec<OsString>,
    /// The policy in words, for `-v`.
    policy: String,
}

impl HumanLog {
    pub fn new(out: Box<dyn Out>, config: &Config, color: bool) -> HumanLog {
        HumanLog {
            out,
            color,
            // Only `-v` shows them: a run without it does not spend its start on them.
            command: match config.log.verbose {
                true => config.command.clone(),
                false => Vec::new(),
            },
            policy: match config.log.verbose {
                true => describe_policy(config),
                false => String::new(),
            },
        }
    }

    /// Writes one line; every part of it is made `printable`, then coloured if asked.
    fn write(&mut self, line: &Line, at: SystemTime, facts: &RunFacts) {
        let mut text = prefix(facts);
        if facts.verbose {
            text += &format!("[{}] ", local_time(at));
        }
        for (part, paint) in &line.parts {
            let part = printable(part);
            match paint.filter(|_| self.color) {
                Some(paint) => text += &format!("\x1b[{}m{part}\x1b[0m", paint.code()),
                None => text += &part,
            }
        }
        text.push('\n');
        let text = ascii_if(&text, facts);
        self.out.line(text.as_bytes());
    }

    /// The lines `-v` starts the run with: the command, the policy and the seed.
    fn start(&self, seed: u64, facts: &RunFacts) -> Vec<Line> {
        if !facts.verbose {
            return Vec::new();
        }
        let command = text::command_line(&self.command, Charset::ascii_if(facts.ascii));
        vec![
            format!("command: {command}").into(),
            format!("policy: {}", self.policy).into(),
            format!("seed: {seed} (pass --seed {seed} to get the same waits)").into(),
        ]
    }
}

impl Sink for HumanLog {
    fn take(&mut self, envelope: &Envelope, facts: &RunFacts) -> Option<Warning> {
        let event = &envelope.event;
        let lines = match event {
            Event::Start { seed } => self.start(*seed, facts),
            Event::Countdown { next, secs, width } => {
                let left = hms(std::time::Duration::from_secs(*secs));
                let text = format!("next try ({}) in {left}", facts.label(*next));
                let text = format!("{}{}", prefix(facts), printable(&text));
                // Never as wide as the terminal: a line that wrapped would leave a row behind
                // at every redraw, which only clears its own row.
                let text: String = match usize::from(*width) {
                    0 => text,
                    width => text.chars().take(width - 1).collect(),
                };
                let text = format!("\r\x1b[2K{text}");
                self.out.in_place(ascii_if(&text, facts).as_bytes());
                Vec::new()
            }
            Event::StatusCleared => {
                self.out.in_place(ascii_if("\r\x1b[2K", facts).as_bytes());
                Vec::new()
            }
            // GitHub's annotation, written when the run has ended, says it in the same stream.
            Event::Succeeded { .. } | Event::GaveUp { .. } | Event::RepeatEnded { .. }
                if event
                    .announced_as()
                    .is_some_and(|level| facts.annotation_replaces_line(level)) =>
            {
                Vec::new()
            }
            Event::Succeeded { .. } => success_lines(event, facts),
            Event::Warning(Warning::Flaky { .. })
                if facts.annotation_replaces_line(Level::Warning) =>
            {
                Vec::new()
            }
            // Every other event makes its line, or none, by `line`, which decides for each.
            _ => line(event, facts).into_iter().collect(),
        };
        for line in &lines {
            self.write(line, envelope.stamp.at, facts);
        }
        None
    }
}

/// `text` as the log writes it: in ASCII with `--ascii`.
fn ascii_if<'a>(text: &'a str, facts: &RunFacts) -> std::borrow::Cow<'a, str> {
    match facts.ascii {
        false => std::borrow::Cow::Borrowed(text),
        true => charset::ascii_text(text).into(),
    }
}

/// What every line starts with: `retry: `, or `retry[NAME]: ` with `--label`.
/// The line of a run that gives up because try `next` no longer fits after the `--on-retry`
/// hook or after a wait kept stopped past the budget's end.
fn no_time_left(event: &Event, facts: &RunFacts) -> String {
    let Event::NoTimeAfterHook {
        next,
        exceeded,
        hook,
    } = event
    else {
        return String::new();
    };
    let next = facts.label(*next);
    let after = if *hook {
        "the --on-retry hook"
    } else {
        "the wait"
    };
    format!("no time left for try {next} after {after}; giving up: {exceeded}")
}

fn prefix(facts: &RunFacts) -> String {
    match &facts.run_label {
        Some(name) => format!("retry[{}]: ", printable(name)),
        None => "retry: ".to_string(),
    }
}

/// The line an event makes in the human log, if any: `-q` keeps only errors, warnings and
/// the last line of a run that gave up; `-v` adds the details.
pub fn line(event: &Event, facts: &RunFacts) -> Option<Line> {
    if event.reader_gone() && !facts.verbose {
        return None;
    }
    let (quiet, verbose) = (facts.quiet, facts.verbose);
    // What a run does, without `-q`; and what only `-v` adds.
    let run = |line: &dyn Fn() -> String| (!quiet).then(|| Line::from(line()));
    let detail = |line: &dyn Fn() -> String| (!quiet && verbose).then(|| Line::from(line()));
    match event {
        Event::Error(failure) => Some(format!("error: {}", failure_text(failure)).into()),
        Event::Warning(w) => Some(format!("warning: {}", warning_text(w)).into()),
        Event::GaveUp { .. } => Some(gave_up(event, facts)),
        Event::DoneBefore { key, done } => run(&|| crate::report::words::done_before(key, done)),
        Event::RepeatEnded { count, why, .. } => {
            // A repeat in which no try ran to its end failed too: -q keeps its line.
            let failed =
                count.failed > 0 || count.tries == 0 || matches!(why, RepeatEnd::Interrupted(_));
            (failed || !quiet).then(|| repeat_summary(count, why).into())
        }
        Event::ReplayStart { k, total, pending } => {
            run(&|| replay_start(*k, *total, pending, facts))
        }
        Event::ReplayEnd {
            k, total, replayed, ..
        } => run(&|| replay_end(*k, *total, replayed)),
        Event::ReplaySummary {
            file,
            resolved,
            pending,
            unpicked,
            ..
        } => {
            // A replay that found nothing pending is quiet, as a cron line that did nothing
            // should be, unless asked to say everything.
            let nothing = *resolved == 0 && *pending == 0;
            ((!quiet && !nothing) || *pending > 0 || (nothing && verbose))
                .then(|| replay_summary(file, (*resolved, *pending, *unpicked), facts).into())
        }
        Event::TryEnded(r) => {
            let first_success = r.attempt == 1 && matches!(r.decision, Decision::Succeed);
            (!quiet && (verbose || !first_success)).then(|| try_line(r, facts))
        }
        Event::TryHeld(r) => run(&|| held_line(r, facts)),
        Event::Succeeded {
            attempt,
            elapsed,
            waited,
            flaky,
            failed,
            ..
        } => (!quiet && (verbose || *flaky))
            .then(|| succeeded(*attempt, *elapsed, *waited, *failed, facts)),
        Event::Received { .. } => run(&|| received(event, facts)),
        Event::Leftovers { .. } => run(&|| leftovers(event, facts)),
        Event::HookFailed { which, failure, .. } => {
            run(&|| format!("{which} hook {}; going on", hook_failure(failure)))
        }
        Event::NoTimeAfterHook { .. } => run(&|| no_time_left(event, facts)),
        Event::RequestIgnored { attempt, ignored } => {
            detail(&|| request_ignored(*attempt, ignored, facts))
        }
        Event::Stagger { delay, most } => {
            detail(&|| format!("first try in {} (--stagger {})", hms(*delay), hms(*most)))
        }
        Event::Quota { .. } => detail(&|| quota_line(event)),
        Event::DeadLettered { path } => {
            detail(&|| format!("recorded in --dead-letter '{}'", path.to_string_lossy()))
        }
        // A try stopped because the lease of `--lock` was lost has no signal's line to tell it.
        Event::TryInterrupted(r) if r.verdict == Verdict::LockLost => {
            (!quiet).then(|| try_line(r, facts))
        }
        // The try's line says the wait, and the sink writes the start, the countdown and
        // its clearing itself; an interrupted try is told by the signal's line.
        Event::Start { .. }
        | Event::TryStarted { .. }
        | Event::TryOutputDone { .. }
        | Event::TryInterrupted(_)
        | Event::Wait { .. }
        | Event::Countdown { .. }
        | Event::StatusCleared
        | Event::Concluded { .. }
        | Event::RunEnded(_) => None,
    }
}

/// `try 2/3: output matched --delay-from-output, but ...; ignored`, for `-v`.
fn request_ignored(attempt: u64, ignored: &Ignored, facts: &RunFacts) -> String {
    let what = match &ignored.group {
        Some(group) => format!("its capture group held '{group}', {}", ignored.why),
        None => ignored.why.clone(),
    };
    format!(
        "try {}: output matched --delay-from-output, but {what}; ignored",
        facts.label(attempt)
    )
}

/// The line of a replay's run `k` of `total` as it starts.
fn replay_start(k: usize, total: usize, p: &Pending, facts: &RunFacts) -> String {
    let charset = Charset::ascii_if(facts.ascii);
    format!(
        "replaying run {k}/{total} (line {}, run {}, gave up {}: {}): {}",
        p.line,
        p.record.id,
        p.record.ts,
        replay::gave_up(p),
        text::command_line(&p.record.command, charset)
    )
}

/// The line of what replaying run `k` of `total` came to.
fn replay_end(k: usize, total: usize, replayed: &Replayed) -> String {
    match replayed {
        Replayed::Resolved { .. } => format!("run {k}/{total} resolved"),
        Replayed::Failed { .. } => format!("run {k}/{total} still pending"),
        Replayed::NotRun { error, .. } => format!("run {k}/{total} still pending: {error}"),
    }
}

/// The last line of a replay of `file`.
/// `unpicked` runs of it are pending that the replay did not take (not picked by `--only` or
/// `--only-label`, or another machine's): said, so that "0 still pending" is not read as all.
fn replay_summary(file: &Path, counts: (usize, usize, usize), facts: &RunFacts) -> String {
    let file = replay::shown(file, Charset::ascii_if(facts.ascii));
    let others = |n: usize| match n {
        1 => "1 other run pending that it did not take".to_string(),
        n => format!("{n} other runs pending that it did not take"),
    };
    match counts {
        (0, 0, 0) => format!("replay of {file}: nothing was pending"),
        (0, 0, u) => format!(
            "replay of {file}: nothing it took was pending; {}",
            others(u)
        ),
        (r, p, 0) => format!("replay of {file}: {r} resolved, {p} still pending"),
        (r, p, u) => format!(
            "replay of {file}: {r} resolved, {p} still pending; {}",
            others(u)
        ),
    }
}

/// How a try ended, as words, with how it was stopped and the signals it was sent, as
/// `timeout --verbose` names them: `exited 7`, `timed out after 2s, sent SIGTERM, then
/// SIGKILL after the 1s grace period`, `stopped at the end of the budget after 2s, sent
/// SIGTERM`.
fn ended_words(r: &TryReport, facts: &RunFacts) -> String {
    if r.outcome != Outcome::Timeout {
        return format!("{} after {}", r.outcome.words(Form::Line), hms(r.took));
    }
    let limit = r
        .stopped_by_limit
        .then_some(facts.limit.unwrap_or(LimitSource::Budget));
    let stopped = Outcome::Timeout.words(Form::Count(limit));
    let at = r.signalled_after.unwrap_or(r.took);
    let mut words = format!("{stopped} after {}, sent {}", hms(at), facts.signal);
    if r.killed && facts.signal != Signal::KILL {
        words += &match facts.kill_after.is_zero() {
            true => ", then SIGKILL at once".to_string(),
            false => format!(
                ", then SIGKILL after the {} grace period",
                hms(facts.kill_after)
            ),
        };
    }
    words
}

/// The line about an ended try: how it ended, the verdict, and what follows.
fn try_line(r: &TryReport, facts: &RunFacts) -> Line {
    let mut line = Line::default();
    line.push(&format!("try {} ", facts.label(r.attempt)));
    match (&r.verdict, &r.detail) {
        (Verdict::Success(_), _) => {
            line.paint("succeeded", Paint::Good);
            if r.outcome == Outcome::Exit(0) {
                line.push(&format!(" after {}", hms(r.took)));
            } else {
                line.push(&format!(" ({}, --success-on)", ended_words(r, facts)));
            }
            if let Some(needed) = facts.consecutive.filter(|_| r.in_a_row > 0) {
                line.push(&format!(
                    " ({} of {needed} in a row, --consecutive)",
                    r.in_a_row
                ));
            }
        }
        (_, Some(why)) => {
            let charset = Charset::ascii_if(facts.ascii);
            let why = not_started(why, r.outcome, charset);
            line.push(&format!("could not start: {why}"));
        }
        _ => line.push(&ended_words(r, facts)),
    }
    if facts.repeat.is_some() {
        // A repeat has no retries: a failure is a failure, and the next try follows.
        if r.outcome == Outcome::Exit(0) && !matches!(r.verdict, Verdict::Success(_)) {
            line.push(", but was not ready (--until-output)");
        }
        if let Decision::Retry(wait) = &r.decision {
            if !wait.delay.is_zero() {
                line.push(&format!("; next try in {}", hms(wait.delay)));
            }
        }
        if let Decision::Stop(RepeatEnd::Budget(Some(exceeded))) = &r.decision {
            line.push(&format!("; stopping: {exceeded}"));
        }
        return line;
    }
    if !matches!(r.verdict, Verdict::Success(_)) {
        line.push(" (");
        match &r.verdict {
            Verdict::Transient(_) => line.paint("transient", Paint::Warn),
            verdict => line.paint(verdict.word(), Paint::Bad),
        }
        if let Some(reason) = r.verdict.reason().filter(|_| r.detail.is_none()) {
            line.push(&format!(": {reason}"));
        }
        line.push(")");
    }
    line.push(&decision_words(&r.decision));
    line
}

/// What follows a try, as the end of its line: `; next try in 1s`, `; giving up: ...`.
/// `quota db: retry, 8.00 tokens left`, and with `--throttle` the figures the try was let
/// through on.
fn quota_line(event: &Event) -> String {
    let Event::Quota {
        quota,
        action,
        tokens,
        throttle,
        ..
    } = event
    else {
        return String::new();
    };
    let mut text = format!("quota {quota}: {}, {tokens:.2} tokens left", action.word());
    if let Some((_, admission)) = throttle {
        text += &format!("; let through: {}", throttle_figures(quota, admission));
    }
    text
}

/// `try 1/3 held back: 0 of 48 tries of quota db (10 ran, 38 held back) were accepted in the
/// last 2m (p=0.95); next try in 1.2s`.
fn held_line(r: &HeldReport, facts: &RunFacts) -> String {
    format!(
        "try {} held back: {}{}",
        facts.label(r.attempt),
        throttle_figures(&r.quota, &r.admission),
        decision_words(&r.decision)
    )
}

fn decision_words(decision: &Decision) -> String {
    match decision {
        Decision::Retry(wait) => {
            format!("; next try in {}{}", hms(wait.delay), requested_words(wait))
        }
        Decision::Succeed | Decision::Stop(_) => String::new(),
        // The try's own words already say why it will not pass.
        Decision::GiveUp(GiveUp::Permanent | GiveUp::Interrupted) => "; giving up".into(),
        Decision::GiveUp(why) => format!(
            "; giving up: {}",
            crate::report::words::give_up_reason(why, None)
        ),
    }
}

/// What a wait says of the request it holds: ` (asked for by the output)` when the request set
/// it, what was asked when the policy's own wait was longer; for a moment asked for (an
/// HTTP-date), the clock that measured it too.
fn requested_words(wait: &Wait) -> String {
    let Some(asked) = wait.requested else {
        return String::new();
    };
    let by = match wait.clock {
        Some(TimeSource::Server) => "by the server's Date: line",
        Some(TimeSource::Local) => "by the local clock",
        None if wait.set_by_request() => return " (asked for by the output)".into(),
        None => return format!(" (the output asked for {})", hms(asked)),
    };
    if asked.is_zero() {
        format!(" (the output's HTTP-date has passed, {by})")
    } else if wait.set_by_request() {
        format!(" (asked for by the output: until its HTTP-date, {by})")
    } else {
        format!(
            " (the output asked for {}: until its HTTP-date, {by})",
            hms(asked)
        )
    }
}

fn succeeded(
    attempt: u64,
    elapsed: Duration,
    waited: Duration,
    failed: u64,
    facts: &RunFacts,
) -> Line {
    let mut line = Line::default();
    line.paint("succeeded", Paint::Good);
    line.push(&format!(
        " on try {} in {} ({}, {} waiting)",
        facts.label(attempt),
        hms(elapsed),
        plural(failed, "failed try", "failed tries"),
        hms(waited)
    ));
    line
}

/// The lines of a success: the line that sums the run up; under `--flaky fail`, after
/// retries, the one line that says what it exits with instead, which `-q` keeps.
fn success_lines(event: &Event, facts: &RunFacts) -> Vec<Line> {
    let Event::Succeeded {
        attempt, status, ..
    } = event
    else {
        return Vec::new();
    };
    let label = facts.label(*attempt);
    if *status != ExitStatus::Success {
        let mut line = Line::default();
        line.paint("succeeded", Paint::Good);
        line.push(&format!(" on try {label}, but "));
        line.paint(&crate::report::words::flaky_fail(*status), Paint::Bad);
        return vec![line];
    }
    line(event, facts).into_iter().collect()
}

/// A stopping signal reached `retry` during try `attempt` or the wait after it; a wait after
/// try 0 is the stagger before the first try.
fn received(event: &Event, facts: &RunFacts) -> String {
    let Event::Received {
        signal,
        attempt,
        during,
    } = *event
    else {
        return String::new();
    };
    let label = facts.label(attempt);
    match during {
        During::Stagger => {
            format!("received {signal} during the stagger before the first try: no try ran")
        }
        During::Wait => {
            format!("received {signal} during the wait after try {label}: no further try")
        }
        During::Try => {
            format!("received {signal} during try {label}: stopped the try; no further try")
        }
        During::Output => format!(
            "received {signal} while writing the output of try {label}: the output is cut short; no further try"
        ),
        During::Start => format!("received {signal} before the first try: no try ran"),
        During::Hook(which) => {
            format!("received {signal} during the {which} hook after try {label}: stopped the hook")
        }
        During::Playback => {
            format!("received {signal} while writing the held output: the output is cut short")
        }
        During::Report => format!("received {signal} while writing the run's reports"),
    }
}

fn leftovers(event: &Event, facts: &RunFacts) -> String {
    let Event::Leftovers {
        attempt,
        hook,
        signal,
        killed,
        count,
    } = *event
    else {
        return String::new();
    };
    let how = match killed {
        true => format!("{signal}, then SIGKILL"),
        false => signal.to_string(),
    };
    if let Some(which) = hook {
        let what = match count {
            1 => "1 process running; stopped it".to_string(),
            n => format!("{n} processes running; stopped them"),
        };
        return format!("the {which} hook left {what} ({how})");
    }
    let left = match count {
        0 => "left processes running in its group; stopped them".to_string(),
        1 => "left 1 process running; stopped it".to_string(),
        n => format!("left {n} processes running; stopped them"),
    };
    format!("try {} {left} ({how})", facts.label(attempt))
}

/// The last line of a run that gave up: `gave up after 3 tries in 2.1s: exit 4`.
fn gave_up(event: &Event, facts: &RunFacts) -> Line {
    let Event::GaveUp {
        tries,
        elapsed,
        signal,
        last,
        why,
        streak,
        ..
    } = event
    else {
        return Line::default();
    };
    let cause = gave_up_cause(*signal, *last, why, *streak, facts.consecutive);
    let mut line = Line::default();
    line.paint("gave up", Paint::Bad);
    line.push(&format!(
        " {} in {}: {cause}",
        after_tries(*tries),
        hms(*elapsed)
    ));
    line
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
