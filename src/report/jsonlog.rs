//! The JSON log (docs/json-log.md#the-json-log): one JSON object per event, whatever `-q` and `-v`
//! say, each with `event`, `ts`, `run_id` and the run's `label`. Each event becomes an object (or
//! none) by a pure function of the event and the run's facts.

use std::ffi::OsString;
use std::time::SystemTime;

use crate::config::Config;
use crate::duration::millis;
use crate::exit::ExitStatus;
use crate::policy::throttle::Admission;
use crate::policy::{GiveUp, Outcome, RepeatEnd};
use crate::report::charset;
use crate::report::event::{Envelope, Event, HeldReport, TryReport, Warning};
use crate::report::facts::{RunFacts, Sink};
use crate::report::json::Obj;
use crate::report::out::Out;
use crate::report::policy_text::policy_json;
use crate::report::words::{failure_text, hook_failure, not_started, warning_text};
use crate::store::deadletter::{Pending, Replayed};
use crate::store::history::outcome_obj;
use crate::text::Charset;

/// The JSON log of a run.
pub struct JsonLog {
    out: Box<dyn Out>,
    command: Vec<OsString>,
    /// The policy as the `start` event holds it, less the seed, which the event brings.
    config: Box<Config>,
    /// The `give_up` line, kept back until the run's end is known: a signal during `--on-give-up`
    /// tells of the end again, as an interrupted run's, and the log has one `give_up`, the last
    /// told.
    give_up: Option<String>,
}

impl JsonLog {
    pub fn new(out: Box<dyn Out>, config: &Config) -> JsonLog {
        JsonLog {
            out,
            command: config.command.clone(),
            config: Box::new(config.clone()),
            give_up: None,
        }
    }
}

impl Sink for JsonLog {
    fn take(&mut self, envelope: &Envelope, facts: &RunFacts) -> Option<Warning> {
        let at = At {
            facts,
            ts: envelope.stamp.at,
        };
        let obj = match &envelope.event {
            Event::Start { seed } => Some(
                head("start", &at)
                    .words("command", self.command.iter().map(OsString::as_os_str))
                    .obj("policy", policy_json(&self.config, *seed)),
            ),
            event => object(event, &at),
        };
        let line = obj.map(|obj| {
            let mut line = obj.finish();
            line.push('\n');
            if facts.ascii {
                line = charset::ascii_json(&line);
            }
            line
        });
        match &envelope.event {
            Event::GaveUp { .. } => {
                self.give_up = line;
                return None;
            }
            // What may come between giving up and the run's end: the hook's events, a signal,
            // a warning, the announcement of the end.
            Event::HookFailed { .. }
            | Event::Leftovers { .. }
            | Event::Received { .. }
            | Event::Warning(_)
            | Event::Countdown { .. }
            | Event::StatusCleared
            | Event::Concluded { .. } => {}
            _ => self.write_give_up(),
        }
        if let Some(line) = line {
            self.write(&line);
        }
        None
    }
}

impl JsonLog {
    fn write(&mut self, line: &str) {
        self.out.line(line.as_bytes());
    }

    /// Writes the `give_up` line held back, if any.
    fn write_give_up(&mut self) {
        if let Some(line) = self.give_up.take() {
            self.write(&line);
        }
    }
}

impl Drop for JsonLog {
    /// A log that ends without the run's end event still has its `give_up`.
    fn drop(&mut self) {
        self.write_give_up();
    }
}

/// What every object is written with: the run's facts, and the time of its event.
pub struct At<'a> {
    pub facts: &'a RunFacts,
    pub ts: SystemTime,
}

impl std::ops::Deref for At<'_> {
    type Target = RunFacts;

    fn deref(&self) -> &RunFacts {
        self.facts
    }
}

/// What every event starts with: its name, the time, the run's id and label.
pub fn head(event: &str, facts: &At<'_>) -> Obj {
    let obj = Obj::new()
        .str("event", event)
        .str(
            "ts",
            &humantime::format_rfc3339_millis(facts.ts).to_string(),
        )
        .str("run_id", &facts.run_id);
    match &facts.run_label {
        Some(name) => obj.str("label", name),
        None => obj,
    }
}

/// The object an event makes in the JSON log, if any (the terminal's countdown and the
/// announcement of the end, which CI reads elsewhere, make none).
pub fn object(event: &Event, facts: &At<'_>) -> Option<Obj> {
    let obj = match event {
        Event::Stagger { delay, most } => head("stagger", facts)
            .num("delay_ms", millis(*delay))
            .num("most_ms", millis(*most)),
        Event::TryEnded(r) | Event::TryInterrupted(r) => try_object(r, facts),
        Event::TryHeld(r) => held_object(r, facts),
        Event::RequestIgnored { attempt, ignored } => {
            let obj = head("request_ignored", facts)
                .num("attempt", *attempt)
                .str("reason", &ignored.why);
            match &ignored.group {
                Some(group) => obj.str("group", group),
                None => obj,
            }
        }
        Event::Leftovers { .. } => leftovers(event, facts),
        Event::Wait { attempt, wait } => wait_object(*attempt, wait, facts),
        Event::HookFailed {
            which,
            attempt,
            failure,
        } => head("hook", facts)
            .num("attempt", *attempt)
            .str("hook", which.option())
            .str("result", &hook_failure(failure)),
        Event::Quota { .. } => quota(event, facts),
        Event::Succeeded { .. } => success(event, facts),
        Event::RepeatEnded { .. } => repeat_end(event, facts),
        Event::Received {
            signal,
            attempt,
            during,
        } => head("signal", facts)
            .str("signal", &signal.name())
            .num("attempt", *attempt)
            .str("during", during.word()),
        Event::GaveUp { .. } => gave_up(event, facts),
        Event::DoneBefore { key, done } => done_before(key, done, facts),
        Event::DeadLettered { path } => {
            head("dead_letter", facts).str("file", &path.to_string_lossy())
        }
        Event::Warning(w) => head("warning", facts).str("message", &warning_text(w)),
        Event::Error(failure) => head("error", facts).str("message", &failure_text(failure)),
        Event::ReplayStart { k, total, pending } => replay_start(*k, *total, pending, facts),
        Event::ReplayEnd {
            k,
            pending,
            replayed,
            ..
        } => replay_end(*k, pending, replayed, facts),
        Event::ReplaySummary {
            file,
            resolved,
            pending,
            unpicked,
            ..
        } => head("replay_end", facts)
            .str("file", &file.to_string_lossy())
            .num("resolved", *resolved as u64)
            .num("pending", *pending as u64)
            .num("not_taken", *unpicked as u64),
        // The human log's own, or read by CI elsewhere; `TryStarted` and `TryOutputDone`
        // frame the try's output, which the JSON log does not hold. The sink writes `start`
        // itself, with the command and the policy.
        Event::Start { .. }
        | Event::TryStarted { .. }
        | Event::TryOutputDone { .. }
        | Event::NoTimeAfterHook { .. }
        | Event::Countdown { .. }
        | Event::StatusCleared
        | Event::Concluded { .. }
        | Event::RunEnded(_) => return None,
    };
    Some(obj)
}

/// The `quota` event: the quota after a first try's deposit or a retry's take.
fn quota(event: &Event, facts: &At<'_>) -> Obj {
    let Event::Quota {
        quota,
        action,
        granted,
        tokens,
        throttle,
    } = event
    else {
        return head("quota", facts);
    };
    let obj = head("quota", facts)
        .str("quota", quota)
        .str("action", action.word())
        .bool("granted", *granted)
        .float("tokens", (tokens * 1000.0).round() / 1000.0);
    match throttle {
        Some((_, admission)) => with_figures(obj, admission),
        None => obj,
    }
}

/// The throttle's figures: `requests`, `accepts` and `held_back` (the requests held back) to three
/// decimals, `p` as the log shows it.
fn with_figures(obj: Obj, admission: &Admission) -> Obj {
    let three = |x: f64| (x * 1000.0).round() / 1000.0;
    obj.float("requests", three(admission.figures.requests))
        .float("accepts", three(admission.figures.accepts))
        .float("held_back", three(admission.figures.held))
        .raw("p", &crate::policy::throttle::shown_p(admission.p))
}

/// A try that `--throttle` held back: a `try` event whose outcome is `{"held":true}`, with the
/// figures it was held on.
fn held_object(r: &HeldReport, facts: &At<'_>) -> Obj {
    let obj = head("try", facts)
        .num("attempt", r.attempt)
        .num("duration_ms", 0u64)
        .obj("outcome", Obj::new().bool("held", true))
        .str("verdict", "transient")
        .str("reason", "held")
        .str("quota", &r.quota);
    with_figures(obj, &r.admission)
}

/// The `success` event.
fn success(event: &Event, facts: &At<'_>) -> Obj {
    let Event::Succeeded {
        attempt,
        elapsed,
        waited,
        status,
        flaky,
        failed,
    } = event
    else {
        return head("success", facts);
    };
    head("success", facts)
        .num("attempt", *attempt)
        .num("elapsed_ms", millis(*elapsed))
        .num("waited_ms", millis(*waited))
        .bool("flaky", *flaky)
        .num("failed_tries", *failed)
        .num("exit_code", code(*status))
}

/// An exit status as the JSON log writes it: 128+N for a signal, as a shell shows it.
fn code(status: ExitStatus) -> u64 {
    u64::try_from(status.code()).unwrap_or_default()
}

/// The `repeat_end` event: the counts of the repeat's summary line.
fn repeat_end(event: &Event, facts: &At<'_>) -> Obj {
    let Event::RepeatEnded {
        count,
        why,
        status,
        elapsed,
    } = event
    else {
        return head("repeat_end", facts);
    };
    let outcomes: Vec<String> = count
        .outcomes
        .iter()
        .map(|(outcome, n)| {
            Obj::new()
                .obj("outcome", outcome_obj(*outcome))
                .num("count", *n)
                .finish()
        })
        .collect();
    let obj = head("repeat_end", facts)
        .num("tries", count.tries)
        .num("failed", count.failed)
        .raw("failed_pct", &count.failed_share().json())
        .raw("outcomes", &format!("[{}]", outcomes.join(",")))
        .opt_num(
            "first_failure",
            count.first_failure.map(|(attempt, _)| attempt),
        )
        .str("reason", why.word())
        .num("exit_code", code(*status))
        .num("elapsed_ms", millis(*elapsed));
    match why {
        RepeatEnd::Interrupted(signal) => obj.str("signal", &signal.name()),
        RepeatEnd::Budget(Some(exceeded)) => obj.str("detail", &exceeded.to_string()),
        _ => obj,
    }
}

fn leftovers(event: &Event, facts: &At<'_>) -> Obj {
    let Event::Leftovers {
        attempt,
        hook,
        signal,
        killed,
        count,
    } = event
    else {
        return head("leftovers", facts);
    };
    let obj = head("leftovers", facts).num("attempt", *attempt);
    let obj = match hook {
        Some(which) => obj.str("hook", which.option()),
        None => obj,
    };
    let obj = obj.str("signal", &signal.name()).bool("killed", *killed);
    // A hook's count is always known; a try's is 0 when not counted.
    match (hook, *count) {
        (None, 0) => obj,
        (_, n) => obj.num("count", n as u64),
    }
}

fn wait_object(attempt: u64, wait: &crate::policy::Wait, facts: &At<'_>) -> Obj {
    let obj = head("wait", facts)
        .num("attempt", attempt)
        .num("base_ms", millis(wait.base))
        .num("delay_ms", millis(wait.delay));
    // Only when the output asked for a wait, as the README says; and which clock measured it
    // when it asked for a moment (an HTTP-date).
    let obj = match wait.requested {
        Some(requested) => obj.num("requested_ms", millis(requested)),
        None => obj,
    };
    match wait.clock {
        Some(clock) => obj.str("clock", clock.word()),
        None => obj,
    }
}

/// The `replay` event: run `k` of `total` starts.
fn replay_start(k: usize, total: usize, pending: &Pending, facts: &At<'_>) -> Obj {
    head("replay", facts)
        .num("run", k as u64)
        .num("of", total as u64)
        .num("line", pending.line as u64)
        .str("id", &pending.record.id)
        .words(
            "command",
            pending.record.command.iter().map(OsString::as_os_str),
        )
}

/// The `replayed` event: what replaying run `k` came to.
fn replay_end(k: usize, pending: &Pending, replayed: &Replayed, facts: &At<'_>) -> Obj {
    let obj = head("replayed", facts)
        .num("run", k as u64)
        .str("id", &pending.record.id)
        .str(
            "result",
            match replayed {
                Replayed::Resolved { .. } => "resolved",
                Replayed::Failed { .. } | Replayed::NotRun { .. } => "pending",
            },
        );
    match replayed {
        Replayed::NotRun { error, .. } => obj.str("error", error),
        Replayed::Resolved { .. } | Replayed::Failed { .. } => obj,
    }
}

fn try_object(r: &TryReport, facts: &At<'_>) -> Obj {
    let mut obj = head("try", facts)
        .num("attempt", r.attempt)
        .num("duration_ms", millis(r.took))
        .obj("outcome", outcome_obj(r.outcome));
    if r.outcome == Outcome::Timeout {
        obj = obj
            .str("signal", &facts.signal.name())
            .bool("killed", r.killed);
    }
    if r.stopped_by_limit {
        obj = obj.str("limit", facts.limit_word());
    }
    obj = obj.str("verdict", r.verdict.word());
    if r.in_a_row > 0 {
        obj = obj.num("in_a_row", r.in_a_row);
    }
    if let Some(reason) = r.verdict.reason() {
        obj = obj.str("reason", &reason.to_string());
    }
    if let Some(why) = &r.detail {
        let charset = Charset::ascii_if(facts.ascii);
        obj = obj.str("error", &not_started(why, r.outcome, charset));
    }
    obj
}

/// `{"event":"done_before","key":…,"done_at":…,"done_host":…,"done_pid":…,"done_run_id":…}`:
/// the `--once` key was done by that run, and the command does not run.
fn done_before(key: &str, done: &crate::policy::lock::DoneBefore, facts: &At<'_>) -> Obj {
    let at = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(done.at_ms);
    let mut obj = head("done_before", facts)
        .str("key", key)
        .str("done_at", &humantime::format_rfc3339_millis(at).to_string())
        .str("done_host", &done.by.host);
    if let Some(pid) = done.by.pid {
        obj = obj.num("done_pid", u64::from(pid));
    }
    obj.str("done_run_id", &done.by.run_id)
        .str("detail", &crate::report::words::done_before(key, done))
}

fn gave_up(event: &Event, facts: &At<'_>) -> Obj {
    let Event::GaveUp {
        tries,
        elapsed,
        why,
        status,
        signal,
        ..
    } = event
    else {
        return head("give_up", facts);
    };
    let mut obj = head("give_up", facts)
        .str("reason", why.word())
        .num("exit_code", status.code() as u64)
        .num("tries", *tries)
        .num("elapsed_ms", millis(*elapsed));
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
        GiveUp::Locked(holder) => {
            obj = obj
                .str("detail", &crate::report::words::lock_taken(holder))
                .str("lock", &holder.name)
                .str("holder_host", &holder.host);
            if let Some(pid) = holder.pid {
                obj = obj.num("holder_pid", u64::from(pid));
            }
            obj = obj
                .str("holder_run_id", &holder.run_id)
                .str("holder_since", &holder.since);
        }
        GiveUp::LockLost(why) | GiveUp::LockUnreachable(why) => obj = obj.str("detail", why),
        _ => {}
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ParseOutcome, parse};
    use crate::policy::RepeatCount;
    use std::time::Duration;

    fn failed_pct(failed: u64, tries: u64) -> String {
        let args = ["retry", "--repeat", "0", "--keep-going", "--", "true"];
        let ParseOutcome::Run(config) = parse(args, SystemTime::UNIX_EPOCH) else {
            panic!("the options parse");
        };
        let facts = RunFacts::new(&config, "id".into());
        let count = RepeatCount {
            tries,
            failed,
            outcomes: vec![(Outcome::Exit(1), failed)],
            first_failure: Some((1, Outcome::Exit(1))),
        };
        let event = Event::RepeatEnded {
            count,
            why: RepeatEnd::Done,
            status: ExitStatus::LastExit(1),
            elapsed: Duration::ZERO,
        };
        let at = At {
            facts: &facts,
            ts: SystemTime::UNIX_EPOCH,
        };
        let line = object(&event, &at).unwrap().finish();
        let at = line.find("\"failed_pct\":").unwrap() + "\"failed_pct\":".len();
        line[at..].split(',').next().unwrap().to_string()
    }

    #[test]
    fn the_repeat_end_writes_a_failed_share_off_0_and_100_as_its_line_does() {
        assert_eq!(failed_pct(1, 2000), "0.05");
        assert_eq!(failed_pct(1999, 2000), "99.95");
        assert_eq!(failed_pct(1, 10_000), "0.01");
        assert_eq!(failed_pct(9_999, 10_000), "99.99");
        assert_eq!(failed_pct(3, 200), "1.5");
        assert_eq!(failed_pct(1, 3), "33.3", "the figure of the line, 33.3%");
        assert_eq!(failed_pct(1, 30_000), "0.003");
        assert_eq!(failed_pct(2000, 2000), "100");
    }
}
