//! What the dry run says of the end of a plan, in words: the warnings of options that defeat
//! each other, and the worst case of the whole run (docs/dry-run.md#worst-case).

use std::time::Duration;

use crate::config::Config;
use crate::duration::hms;
use crate::policy::{
    Backoff, BudgetExceeded, Conflict, Jitter, Limit, LimitSource, Policy, WorstCase,
};

/// `1s,1m30s`.
fn durations(list: &[Duration]) -> String {
    list.iter().map(|d| hms(*d)).collect::<Vec<_>>().join(",")
}

/// How the end of the run is named: `the budget` or `the deadline`.
pub fn end_name(limit: Limit) -> &'static str {
    match limit.source {
        LimitSource::Budget => "the budget",
        LimitSource::Deadline => "the deadline",
    }
}

/// `--budget 10s`, or `--deadline (in 10s)`: the option that set the end, for a warning.
pub fn end_option(limit: Limit) -> String {
    match limit.source {
        LimitSource::Budget => format!("--budget {}", hms(limit.at)),
        LimitSource::Deadline => format!("--deadline (in {})", hms(limit.at)),
    }
}

/// The warning about one conflict, for a user: what defeats what, and what happens instead.
pub fn warning(conflict: &Conflict) -> String {
    match conflict {
        Conflict::DelayAboveCap { delay, max_delay } => format!(
            "--delay {} is above --max-delay {}: every wait is cut to {}, so the waits never grow",
            hms(*delay),
            hms(*max_delay),
            hms(*max_delay)
        ),
        Conflict::ListAboveCap { over, max_delay } => list_above_cap(over, *max_delay),
        Conflict::TimeoutPastEnd {
            timeout,
            limit,
            retries,
        } => timeout_past_end(*timeout, *limit, *retries),
        Conflict::NoRetryFits(exceeded) => no_retry_fits(exceeded),
        Conflict::BackoffIgnored(backoff) => backoff_ignored(backoff),
    }
}

fn list_above_cap(over: &[Duration], max_delay: Duration) -> String {
    let (is, they) = if over.len() == 1 {
        ("is", "it is")
    } else {
        ("are", "they are")
    };
    format!(
        "{} in --delays {is} above --max-delay {}: {they} cut to it",
        durations(over),
        hms(max_delay)
    )
}

fn timeout_past_end(timeout: Duration, limit: Limit, retries: bool) -> String {
    let (which, then) = if retries {
        (
            "the first try",
            ", and no retry can fit a whole timeout before the end, so there is one try",
        )
    } else {
        ("the try", "")
    };
    format!(
        "--timeout {} is longer than {}: {} stops {which} before its timeout{then}",
        hms(timeout),
        end_option(limit),
        end_name(limit)
    )
}

fn no_retry_fits(exceeded: &BudgetExceeded) -> String {
    format!(
        "{} leaves no room for a retry even after a first try that fails at once ({}), \
         so there is one try",
        end_option(exceeded.limit),
        exceeded.describe()
    )
}

fn backoff_ignored(backoff: &Backoff) -> String {
    let option = match backoff {
        Backoff::Exponential { factor } => format!("--factor {factor}"),
        Backoff::Linear => "--backoff linear".into(),
        Backoff::Constant => "--backoff constant".into(),
        Backoff::List(_) => "--delays".into(),
    };
    format!(
        "{option} is ignored by --jitter decorrelated, which draws each wait from the one before"
    )
}

/// What bounds the worst case, for the JSON `worst_case_by` field.
pub fn worst_case_by(worst: &WorstCase) -> &'static str {
    match worst {
        WorstCase::Sum { .. } => "tries",
        WorstCase::Limit { limit, .. } => match limit.source {
            LimitSource::Budget => "budget",
            LimitSource::Deadline => "deadline",
        },
        WorstCase::Unbounded { .. } => "none",
    }
}

/// The worst case in words: `7m30s = 5 tries × 1m timeout + 2m30s of waits`.
pub fn worst_case_text(policy: &Policy, worst: &WorstCase, stagger: Option<Duration>) -> String {
    match *worst {
        WorstCase::Sum {
            stagger,
            tries,
            timeout,
            waits,
            total,
        } => {
            let random = policy.waits.jitter != Jitter::None;
            sum_text(stagger, tries, timeout, (waits, random), total)
        }
        WorstCase::Limit { limit, sum } => limit_text(policy, limit, sum, stagger),
        WorstCase::Unbounded { waits } => unbounded_text(policy, waits, stagger),
    }
}

/// `6s = 5s of stagger + 1 try × 1s timeout + 2s of waits`; `random` when a jitter draws the
/// waits, which are then the longest it can draw.
fn sum_text(
    stagger: Duration,
    tries: u64,
    timeout: Duration,
    (waits, random): (Duration, bool),
    total: Duration,
) -> String {
    let tries = if tries == 1 {
        "1 try".to_string()
    } else {
        format!("{tries} tries")
    };
    let waits = match (waits.is_zero(), random) {
        (true, _) => String::new(),
        (false, false) => format!(" + {} of waits", hms(waits)),
        (false, true) => format!(
            " + {} of waits, each the longest the jitter can draw",
            hms(waits)
        ),
    };
    let stagger = match stagger.is_zero() {
        true => String::new(),
        false => format!("{} of stagger + ", hms(stagger)),
    };
    format!(
        "{} = {stagger}{tries} × {} timeout{waits}",
        hms(total),
        hms(timeout)
    )
}

/// `5m, the deadline; without it tries and waits could take 5m32s` (`the stagger, tries and
/// waits` with a `--stagger` of at most `stagger`).
fn limit_text(
    policy: &Policy,
    limit: Limit,
    sum: Option<Duration>,
    stagger: Option<Duration>,
) -> String {
    let what = match stagger {
        Some(_) => "the stagger, tries and waits",
        None => "tries and waits",
    };
    let without = match (sum, policy.max_tries, policy.timeout) {
        (Some(sum), ..) => format!("{what} could take {}", hms(sum)),
        (None, None, None) => "the run has no try limit, and no --timeout".into(),
        (None, Some(_), None) => "a try could run for ever, with no --timeout".into(),
        (None, None, Some(_)) => "the run has no try limit".into(),
        (None, Some(_), Some(_)) => unreachable!("a sum with tries and a timeout"),
    };
    format!(
        "{}, {}; without it {without}",
        hms(limit.at),
        end_name(limit)
    )
}

/// `unbounded: no --timeout and no --budget, …`: what is missing for a bound, and what the
/// waits and the `--stagger` of at most `stagger` add up to.
fn unbounded_text(policy: &Policy, waits: Option<Duration>, stagger: Option<Duration>) -> String {
    let missing = match (policy.max_tries, policy.timeout) {
        (None, None) => "no try limit, no --timeout and no --budget",
        (None, Some(_)) => "no try limit and no --budget",
        (Some(_), _) => "no --timeout and no --budget",
    };
    let stagger = stagger
        .map(|most| format!(", after a stagger of at most {}", hms(most)))
        .unwrap_or_default();
    match waits {
        Some(waits) => format!(
            "unbounded: {missing}, so a try may run for ever (the waits add up to at most {}{stagger})",
            hms(waits)
        ),
        None => format!("unbounded: {missing}"),
    }
}

/// What the worst case leaves out, when a try can be stopped: the grace period before SIGKILL.
pub fn worst_case_note(config: &Config, worst: &WorstCase) -> Option<String> {
    let stopped = match worst {
        WorstCase::Sum { .. } => "each try",
        WorstCase::Limit { .. } => "a try still running at the end",
        WorstCase::Unbounded { .. } => return None,
    };
    // SIGKILL at once has no grace period.
    (!config.kill_after.is_zero() && config.signal.name() != "KILL").then(|| {
        format!(
            "(not counted: {stopped} may take {} more if it ignores {}, before SIGKILL)",
            hms(config.kill_after),
            config.signal
        )
    })
}
