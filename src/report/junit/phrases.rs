//! What the `--junit` report says of a try and of a run's end, in the words of the log's lines
//! (docs/log.md#human-format): `try 2/5 exited 1 after 12ms (transient)`, `giving up: no tries
//! left`.

use crate::duration::hms;
use crate::policy::{Form, LimitSource, Outcome, Signal, Verdict};
use crate::report::event::{HeldReport, TryReport};
use crate::report::facts::RunFacts;
use crate::report::words::{not_started, throttle_figures};
use crate::text::Charset;

/// An ended try as the log's line says it, less what follows it: `try 2/5 exited 1 after
/// 12ms (transient)`, `try 1/3 timed out after 2s (transient)`, `try 3/5 succeeded after 4ms`;
/// in a repeat, without the verdict (`try 3/5 exited 1 after 12ms`).
pub fn try_line(r: &TryReport, facts: &RunFacts) -> String {
    let label = facts.label(r.attempt);
    let ended = if let Some(why) = &r.detail {
        format!(
            "could not start: {}",
            not_started(why, r.outcome, Charset::Utf8)
        )
    } else if r.outcome == Outcome::Timeout {
        let limit = r
            .stopped_by_limit
            .then_some(facts.limit.unwrap_or(LimitSource::Budget));
        let at = r.signalled_after.unwrap_or(r.took);
        let stopped = Outcome::Timeout.words(Form::Count(limit));
        let kill = match r.killed && facts.signal != Signal::KILL {
            true => ", then SIGKILL",
            false => "",
        };
        format!("{stopped} after {}, sent {}{kill}", hms(at), facts.signal)
    } else if matches!(r.verdict, Verdict::Success(_)) && r.outcome == Outcome::Exit(0) {
        format!("succeeded after {}", hms(r.took))
    } else {
        format!("{} after {}", r.outcome.words(Form::Line), hms(r.took))
    };
    let verdict = match (&r.verdict, r.verdict.reason()) {
        (Verdict::Success(_), _) if r.outcome == Outcome::Exit(0) => String::new(),
        // A repeat has no retries: its lines say no verdict, but that a try was not ready.
        (Verdict::Success(_), _) if facts.repeat.is_some() => String::new(),
        _ if facts.repeat.is_some() && r.outcome == Outcome::Exit(0) => {
            ", but was not ready (--until-output)".into()
        }
        _ if facts.repeat.is_some() => String::new(),
        (verdict, Some(reason)) if r.detail.is_none() => format!(" ({}: {reason})", verdict.word()),
        (verdict, _) => format!(" ({})", verdict.word()),
    };
    format!("try {label} {ended}{verdict}")
}

/// A try that `--throttle` held back, as the log's line says it: `try 1/3 held back: 0 of 48
/// tries of quota db (10 ran, 38 held back) were accepted in the last 2m (p=0.95)`.
pub fn held_line(r: &HeldReport, facts: &RunFacts) -> String {
    format!(
        "try {} held back: {}",
        facts.label(r.attempt),
        throttle_figures(&r.quota, &r.admission)
    )
}

/// How a try ended, as a word to group failures by (the `type` of its element): `exit 1`,
/// `timeout`, `signal SIGKILL` (the signal named as the log's lines name it).
pub fn kind(r: &TryReport) -> String {
    match r.outcome {
        Outcome::Signal(sig) => format!("signal {sig}"),
        outcome => outcome.words(Form::Reason),
    }
}
