//! `--dry-run` (docs/dry-run.md#dry-run) for people and for programs: the plan that `policy::plan`
//! computes from the options, rendered as a table or as JSON lines. Nothing here decides: every
//! figure shown comes from the plan or the configuration.

use std::io::{self, Write};
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::config::Config;
use crate::duration::{hms, millis};
use crate::policy::{Backoff, GiveUp, Jitter, Limit, Policy, RepeatPolicy, WaitPolicy, WorstCase};
use crate::report::json::Obj;
use crate::report::layout::{self, Header};

use crate::policy::lock::LockHolder;
use crate::policy::plan::{End, Plan, PlannedTry, SIMULATED_TRIES};
use crate::policy::throttle::Admission;
use crate::report::event::Warning;
use crate::report::plan_words::{
    end_name, warning, worst_case_by, worst_case_note, worst_case_text,
};
use crate::report::printable;
use crate::report::words;
use crate::report::words::{throttle_figures, warning_text};

/// The plan of `config` with `seed`: the policy's, drawn from the source a real run with that
/// seed draws from.
pub fn plan(config: &Config, seed: u64) -> Plan {
    let mut rng = StdRng::seed_from_u64(seed);
    crate::policy::plan::plan(&config.policy, config.stagger, &mut rng)
}

fn stop_reason(why: &GiveUp, attempt: u64) -> String {
    match why {
        GiveUp::Tries => format!("the tries run out ({attempt} of {attempt})"),
        GiveUp::Budget(exceeded) => exceeded.describe(),
        GiveUp::Permanent => "a permanent failure".into(),
        GiveUp::Interrupted => "an interrupt".into(),
        GiveUp::Input => "standard input that cannot be kept".into(),
        GiveUp::Quota(refusal) => refusal.to_string(),
        GiveUp::Held => "the throttle holding the last try back".into(),
        GiveUp::Consecutive => {
            "the tries running out before --consecutive successes in a row".into()
        }
        GiveUp::Locked(holder) => crate::report::words::lock_taken(holder),
        GiveUp::LockLost(why) | GiveUp::LockUnreachable(why) => why.clone(),
    }
}

/// The wait after try `k` as the policy computes it (docs/policy.md#waits), with this run's
/// numbers: `U[0, d], d = min(1s × 2^(k−1), 1m) (full jitter: uniform from 0 to d)`.
pub fn formula(waits: &WaitPolicy) -> String {
    let (delay, cap) = (hms(waits.delay), hms(waits.max_delay));
    if waits.jitter == Jitter::Decorrelated {
        return format!(
            "w_k = min({cap}, U[{delay}, 3 × w_(k−1)]), w_0 = {delay} \
             (decorrelated jitter: uniform from {delay} to 3 times the previous wait; no backoff)"
        );
    }
    let d = format!("min({}, {cap})", base_formula(waits));
    match waits.jitter {
        Jitter::None => format!("{d} (no jitter)"),
        Jitter::Full => format!("U[0, d], d = {d} (full jitter: uniform from 0 to d)"),
        Jitter::Equal => {
            format!("d/2 + U[0, d/2], d = {d} (equal jitter: uniform from d/2 to d)")
        }
        Jitter::Decorrelated => unreachable!("written above"),
    }
}

/// The base wait after try `k`, before the cap and the jitter: `1s × 2^(k−1)`.
fn base_formula(waits: &WaitPolicy) -> String {
    let delay = hms(waits.delay);
    match &waits.backoff {
        Backoff::Exponential { factor } if *factor > 1.0 && !waits.delay.is_zero() => {
            format!("{delay} × {factor}^(k−1)")
        }
        Backoff::Linear if !waits.delay.is_zero() => format!("{delay} × k"),
        Backoff::Exponential { .. } | Backoff::Linear | Backoff::Constant => delay,
        Backoff::List(list) if list.len() == 1 => hms(list[0]),
        Backoff::List(list) => format!("the k-th of {} (the last repeats)", durations(list)),
    }
}

/// `1s,1m30s`.
fn durations(list: &[Duration]) -> String {
    list.iter().map(|d| hms(*d)).collect::<Vec<_>>().join(",")
}

fn bar(wait: Duration, max: Duration) -> String {
    const WIDTH: u128 = 20;
    if wait.is_zero() || max.is_zero() {
        return String::new();
    }
    let cells = (wait.as_nanos().saturating_mul(WIDTH) / max.as_nanos()).clamp(1, WIDTH);
    "█".repeat(cells as usize)
}

/// What the dry run knows of the shared retry quota: its tokens now and, with `--throttle`, the
/// throttle's figures and `p`; or why it cannot say.
pub type QuotaNow = Result<(f64, Option<Admission>), String>;

/// What the dry run knows of `--lock`'s lock: who has it now (`None`: nobody). A lock file that
/// cannot be used stops the dry run before it prints, as it stops a run.
pub type LockNow = Option<LockHolder>;

/// What the dry run read of the stores a run would use, now.
#[derive(Clone, Copy, Default)]
pub struct Now<'a> {
    pub quota: Option<&'a QuotaNow>,
    pub lock: Option<&'a LockNow>,
    /// Why the Redis of `--lock redis://…` could not be asked, when it could not.
    pub lock_error: Option<&'a str>,
    /// The run that did `--once`'s key, when it is done.
    pub once_done: Option<&'a crate::policy::lock::DoneBefore>,
}

/// Prints the plan as a table, or as JSON lines with `--log-format json`, with the state of
/// `--quota`'s store when there is one.
pub fn print_with(
    config: &Config,
    seed: u64,
    json: bool,
    now: &Now<'_>,
    out: &mut impl Write,
) -> io::Result<()> {
    if let Some(repeat) = config.repeat {
        return print_repeat(config, seed, repeat, json, out);
    }
    render(config, seed, &plan(config, seed), json, now, out)
}

/// How a repeat ends, in words: `stops at the first failed try, or after try 50`.
fn repeat_stops(repeat: RepeatPolicy, limit: Option<Limit>) -> String {
    let end = limit.map(end_name);
    match (repeat.keep_going, repeat.runs, end) {
        (true, Some(n), None) => format!("runs all {n} tries, whatever fails (--keep-going)"),
        (true, Some(n), Some(end)) => {
            format!("runs all {n} tries, whatever fails (--keep-going), unless {end} ends first")
        }
        (true, None, Some(end)) => {
            format!("runs tries whatever fails (--keep-going) until {end} ends")
        }
        (true, None, None) => {
            "runs tries whatever fails (--keep-going) until it is interrupted".into()
        }
        (false, Some(n), None) => format!("stops at the first failed try, or after try {n}"),
        (false, Some(n), Some(end)) => {
            format!("stops at the first failed try, after try {n}, or when {end} ends")
        }
        (false, None, Some(end)) => format!("stops at the first failed try, or when {end} ends"),
        (false, None, None) => "stops at the first failed try".into(),
    }
}

/// The `plan_end` event of a repeat's dry run.
fn repeat_end(repeat: RepeatPolicy, policy: &Policy, worst: &WorstCase) -> Obj {
    Obj::new()
        .str("event", "plan_end")
        .str("reason", "repeat")
        .opt_num("tries", repeat.runs)
        .opt_num("worst_case_ms", worst.total().map(millis))
        .str("worst_case_by", worst_case_by(worst))
        .opt_num("worst_case_waits_ms", worst.waits(policy).map(millis))
}

/// The dry run of `--repeat` (docs/flaky.md#repeating-a-command): the tries in a row, and how long
/// they can take, as long as a run of the same tries, timeout and limits with a constant wait of
/// the delay.
fn print_repeat(
    config: &Config,
    seed: u64,
    repeat: RepeatPolicy,
    json: bool,
    out: &mut impl Write,
) -> io::Result<()> {
    let policy = repeat.as_policy(&config.policy);
    let stagger = config.stagger.unwrap_or_default();
    let worst = crate::policy::worst_case(&policy, stagger);
    if json {
        let start = layout::json_start("plan_start", config, seed).bool("random", false);
        writeln!(out, "{}", start.finish())?;
        return writeln!(out, "{}", repeat_end(repeat, &policy, &worst).finish());
    }
    let mut header = Header::new("retry: dry run, nothing is run")
        .command(&config.command, config.charset, "")
        .policy(config, false);
    if let Some(most) = config.stagger {
        header = header.field(
            "stagger",
            format!("the first try waits up to {}", hms(most)),
        );
    }
    let duration = match policy.timeout {
        Some(t) => format!("each try is assumed to take its timeout, {}", hms(t)),
        None => "each try may run for ever (no --timeout)".into(),
    };
    header.line(duration).write(out)?;
    writeln!(out)?;
    writeln!(out, "{}", repeat_stops(repeat, config.policy.limit))?;
    let with_policy = Config {
        policy,
        ..config.clone()
    };
    for line in worst_case(&with_policy, &worst) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// Prints a plan already computed by `plan` with the same configuration and seed.
pub fn render(
    config: &Config,
    seed: u64,
    plan: &Plan,
    json: bool,
    now: &Now<'_>,
    out: &mut impl Write,
) -> io::Result<()> {
    if json {
        print_json(config, seed, plan, now, out)
    } else {
        print_human(config, seed, plan, now, out)
    }
}

/// The warnings a run gives for `-t N` and `-d N` without a unit, which the dry run gives too,
/// each with its kind.
fn without_unit(config: &Config) -> Vec<(&'static str, Warning)> {
    let timeout = (config.timeout_without_unit.clone()).map(|value| {
        (
            "timeout_without_unit",
            Warning::TimeoutWithoutUnit { value },
        )
    });
    let delay = (config.delay_without_unit.clone())
        .map(|value| ("delay_without_unit", Warning::DelayWithoutUnit { value }));
    timeout.into_iter().chain(delay).collect()
}

fn print_human(
    config: &Config,
    seed: u64,
    plan: &Plan,
    now: &Now<'_>,
    out: &mut impl Write,
) -> io::Result<()> {
    header(config, seed, plan, now).write(out)?;
    for conflict in &plan.conflicts {
        writeln!(out, "retry: warning: {}", warning(conflict))?;
    }
    for (_, warning) in without_unit(config) {
        writeln!(out, "retry: warning: {}", warning_text(&warning))?;
    }
    writeln!(out)?;
    let lines = table(plan, config.policy.waits.max_delay)
        .into_iter()
        .chain(end(plan, config.policy.limit))
        .chain(worst_case(config, &plan.worst));
    for line in lines {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// The dry run's header: the command, the policy, its waits, stagger, quota and seed.
fn header(config: &Config, seed: u64, plan: &Plan, now: &Now<'_>) -> Header {
    let policy = &config.policy;
    let stagger = plan.stagger.zip(config.stagger).map(|(delay, most)| {
        format!(
            "the first try waits {} (a random time up to {}, --stagger)",
            hms(delay),
            hms(most)
        )
    });
    let quota_line = config.quota.as_ref().map(|spec| {
        let tokens = match now.quota {
            Some(Ok((tokens, _))) => format!("{tokens:.2} tokens now"),
            Some(Err(e)) => format!("its store cannot be read ({e})"),
            None => "its store was not read".into(),
        };
        format!("{spec}: {tokens}")
    });
    let throttle = config
        .throttle
        .zip(config.quota.as_ref())
        .map(|(throttle, spec)| {
            match now.quota {
                Some(Ok((_, Some(admission)))) => format!(
                    "--throttle {throttle}: {}; a try is held back with that chance",
                    throttle_figures(&spec.shown(), admission)
                ),
                // A run that cannot reach the store runs with the throttle off (fail open).
                _ => format!(
                    "--throttle {throttle}: its figures were not read; a run that cannot read \
                     them holds no try back"
                ),
            }
        });
    let mut header = Header::new("retry: dry run, nothing is run; every try is assumed to fail")
        .command(&config.command, config.charset, "")
        .policy(config, false)
        .field("waits", format!("after try k: {}", formula(&policy.waits)))
        .field_if("success", policy.consecutive.map(|n| {
            format!(
                "after {n} successful tries in a row (--consecutive), {} apart; a failed try starts again from the first wait",
                hms(policy.waits.delay)
            )
        }))
        .field_if("stagger", stagger)
        .field_if("quota", quota_line)
        .field_if("throttle", throttle)
        .field_if("lock", lock_line(config, now).filter(|_| !once(config)))
        .field_if("once", lock_line(config, now).filter(|_| once(config)));
    if plan.random {
        header = header.seed(seed, "waits");
    }
    // What the table's "starts at" is, from the run's start.
    let duration = match (policy.timeout, config.stagger) {
        (Some(t), _) => format!(
            "its timeout, {}: \"starts at\" is the latest a try starts",
            hms(t)
        ),
        (None, Some(_)) => {
            "no time (no --timeout): \"starts at\" counts the stagger and the waits only".into()
        }
        (None, None) => "no time (no --timeout): \"starts at\" counts the waits only".into(),
    };
    header.line(format!("each try is assumed to take {duration}"))
}

/// The table of the shown rows, each wait drawn as a bar against the cap. "waited in all"
/// counts the stagger drawn before the first try, as "starts at" does. After the last try, a
/// wait the budget or the deadline had no room for is shown in brackets, not waited: the stop
/// line names it.
fn table(plan: &Plan, max_delay: Duration) -> Vec<String> {
    let stagger = plan.stagger.unwrap_or_default();
    let header = ["try", "starts at", "base wait", "wait", "waited in all"];
    let cells: Vec<Vec<String>> = plan
        .rows
        .iter()
        .map(|r| {
            let (base, wait) = match (r.wait, r.refused) {
                (Some(w), _) => (hms(w.base), hms(w.delay)),
                (None, Some(w)) => (hms(w.base), format!("({})", hms(w.delay))),
                (None, None) => ("-".into(), "-".into()),
            };
            vec![
                r.attempt.to_string(),
                hms(r.start),
                base,
                wait,
                hms(stagger.saturating_add(r.waited)),
            ]
        })
        .collect();
    let mut lines = layout::table(&header, &cells, 0);
    for (line, row) in lines.iter_mut().skip(1).zip(&plan.rows) {
        let bar = row
            .wait
            .map(|w| bar(w.delay, max_delay))
            .unwrap_or_default();
        if !bar.is_empty() {
            line.push_str("  ");
            line.push_str(&bar);
        }
    }
    lines
}

/// The rows not shown, then how the run ends and what it waited.
fn end(plan: &Plan, limit: Option<Limit>) -> Vec<String> {
    let stagger = plan.stagger;
    let shown = plan.rows.len() as u64;
    match &plan.end {
        End::GivesUp {
            attempt,
            why,
            waited,
        } => {
            let more =
                (*attempt > shown).then(|| format!("… {} more tries, not shown", attempt - shown));
            let stops = format!("stops after try {attempt}: {}", stop_reason(why, *attempt));
            let waited = match stagger {
                Some(first) => format!(
                    "{} waited in all: {} of stagger before the first try, then {} between tries",
                    hms(first.saturating_add(*waited)),
                    hms(first),
                    hms(*waited)
                ),
                None => format!("{} waited in all", hms(*waited)),
            };
            more.into_iter()
                .chain([String::new(), stops, waited])
                .collect()
        }
        End::Beyond { max_tries: Some(n) } => vec![
            format!("… {} more tries, not shown", n.saturating_sub(shown)),
            String::new(),
            format!("stops after try {n}: the tries run out ({n} of {n})"),
        ],
        End::Beyond { max_tries: None } => {
            let goes_on = match limit {
                Some(limit) => format!(
                    "the run has no try limit and goes on past {} tries, until {} ends",
                    shown + SIMULATED_TRIES,
                    end_name(limit)
                ),
                None => "the run has no try limit: it goes on until a try succeeds or a failure \
                         is permanent"
                    .into(),
            };
            vec!["… more tries, not shown".into(), String::new(), goes_on]
        }
    }
}

/// The worst case, and what it leaves out.
fn worst_case(config: &Config, worst: &WorstCase) -> Vec<String> {
    let mut lines = vec![format!(
        "worst case: {}",
        worst_case_text(&config.policy, worst, config.stagger)
    )];
    if let Some(note) = worst_case_note(config, worst) {
        lines.push(format!("  {note}"));
    }
    // A request can make a wait longer than any the policy draws; only a budget bounds it.
    if config.delay_from_output.is_some() && !matches!(worst, WorstCase::Limit { .. }) {
        lines.push(
            "  (not counted: waits the output asks for past the policy's, --delay-from-output)"
                .into(),
        );
    }
    lines
}

fn print_json(
    config: &Config,
    seed: u64,
    plan: &Plan,
    now: &Now<'_>,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(out, "{}", json_header(config, seed, plan, now).finish())?;
    for conflict in &plan.conflicts {
        let obj = Obj::new()
            .str("event", "warning")
            .str("kind", conflict.kind())
            .str("message", &warning(conflict));
        writeln!(out, "{}", obj.finish())?;
    }
    for (kind, warning) in without_unit(config) {
        let obj = Obj::new()
            .str("event", "warning")
            .str("kind", kind)
            .str("message", &warning_text(&warning));
        writeln!(out, "{}", obj.finish())?;
    }
    for row in &plan.rows {
        writeln!(out, "{}", json_row(row).finish())?;
    }
    writeln!(out, "{}", json_end(plan, &config.policy).finish())
}

/// What the dry run says of `--lock`: the lock the run would take, and whether another run has
/// it now.
fn lock_line(config: &Config, now: &Now<'_>) -> Option<String> {
    let spec = config.lock.as_ref()?;
    if let Some(once) = &spec.once {
        return Some(once_line(&spec.name, once, now));
    }
    let wait = match spec.wait.is_zero() {
        true => String::new(),
        false => format!(", waiting up to {} for it (--lock-wait)", hms(spec.wait)),
    };
    let state = match now.lock {
        _ if now.lock_error.is_some() => format!(
            "{}: the run would not start (lock_unreachable)",
            now.lock_error.unwrap_or_default()
        ),
        Some(None) => "free now".to_string(),
        Some(Some(holder)) => format!("{} now", words::lock_taken(holder)),
        None => "not looked at".to_string(),
    };
    let place = match &spec.lease {
        None => String::new(),
        Some(lease) => format!(
            " on {} (a lease of {}, renewed every {})",
            lease.address,
            hms(lease.length),
            hms(crate::store::lease::renew_every(lease.length))
        ),
    };
    Some(format!(
        "'{}'{place}, taken before the first try{wait}: {state}",
        printable(&spec.name)
    ))
}

/// Whether the run's lock is `--once`'s claim on its key.
fn once(config: &Config) -> bool {
    config.lock.as_ref().is_some_and(|spec| spec.once.is_some())
}

/// What the dry run says of `--once`: what a run would do with its key now.
fn once_line(key: &str, once: &crate::policy::lock::OnceSpec, now: &Now<'_>) -> String {
    if let (Some(done), None) = (now.once_done, now.lock_error) {
        return format!(
            "{}: the run would exit 0 (done_before)",
            words::done_before(key, done)
        );
    }
    let state = match (now.once_done, now.lock) {
        _ if now.lock_error.is_some() => format!(
            "{}: the run would not start (lock_unreachable)",
            now.lock_error.unwrap_or_default()
        ),
        (Some(_), _) => String::new(),
        (None, Some(Some(holder))) => format!(
            "{} now: the run would be turned away (locked)",
            words::lock_taken(holder)
        ),
        (None, Some(None)) => format!(
            "not done: the run would claim it, run, and mark it done for {} when it succeeds",
            hms(once.within)
        ),
        (None, None) => "not looked at".to_string(),
    };
    format!(
        "'{}', looked up before the first try: {state}",
        printable(key)
    )
}

/// The `plan_start` event.
fn json_header(config: &Config, seed: u64, plan: &Plan, now: &Now<'_>) -> Obj {
    let policy = &config.policy;
    let mut header = layout::json_start("plan_start", config, seed)
        .bool("random", plan.random)
        .str("formula", &formula(&policy.waits));
    if let Some(delay) = plan.stagger {
        header = header.num("stagger_ms", millis(delay));
    }
    if let Some(spec) = &config.quota {
        header = header.str("quota", &spec.to_string());
        if let Some(Ok((tokens, _))) = now.quota {
            header = header.float("quota_tokens", (tokens * 1000.0).round() / 1000.0);
        }
    }
    if let Some(throttle) = config.throttle.filter(|_| config.quota.is_some()) {
        header = header.str("throttle", &throttle.to_string());
        if let Some(Ok((_, Some(admission)))) = now.quota {
            let three = |x: f64| (x * 1000.0).round() / 1000.0;
            header = header
                .float("throttle_requests", three(admission.figures.requests))
                .float("throttle_accepts", three(admission.figures.accepts))
                .float("throttle_held_back", three(admission.figures.held))
                .raw("throttle_p", &crate::policy::throttle::shown_p(admission.p));
        }
    }
    if let Some(spec) = &config.lock {
        header = match &spec.once {
            Some(once) => header
                .str("once", &spec.name)
                .num("once_for_ms", millis(once.within))
                .bool("once_done", now.once_done.is_some()),
            None => header,
        };
        header = header
            .str("lock", &spec.name)
            .num("lock_wait_ms", millis(spec.wait));
        if let Some(lease) = &spec.lease {
            let url = lease.address.to_string();
            header = header.str("lock_url", &url);
            header = header.num("lock_lease_ms", millis(lease.length));
        }
        if let Some(why) = now.lock_error {
            header = header.str("lock_unreachable", why);
        }
        match now.lock {
            Some(None) => header = header.bool("lock_taken", false),
            Some(Some(holder)) => {
                header = header
                    .bool("lock_taken", true)
                    .str("lock_detail", &words::lock_taken(holder));
            }
            None => {}
        }
    }
    header
}

/// One `plan` event.
fn json_row(row: &PlannedTry) -> Obj {
    let mut obj = Obj::new()
        .str("event", "plan")
        .num("attempt", row.attempt)
        .num("start_ms", millis(row.start));
    if let Some(w) = row.wait {
        obj = obj
            .num("base_ms", millis(w.base))
            .num("delay_ms", millis(w.delay));
    }
    obj.num("waited_ms", millis(row.waited))
}

/// The `plan_end` event: how the run ends, and its worst case.
fn json_end(plan: &Plan, policy: &Policy) -> Obj {
    let end = match &plan.end {
        End::GivesUp {
            attempt,
            why,
            waited,
        } => Obj::new()
            .str("event", "plan_end")
            .str("reason", why.word())
            .num("tries", *attempt)
            .num("waited_ms", millis(*waited))
            .str("detail", &stop_reason(why, *attempt)),
        End::Beyond { max_tries } => Obj::new()
            .str("event", "plan_end")
            .str("reason", if max_tries.is_some() { "tries" } else { "none" })
            .opt_num("tries", *max_tries)
            .bool("truncated", true),
    };
    let worst = &plan.worst;
    end.opt_num("worst_case_ms", worst.total().map(millis))
        .str("worst_case_by", worst_case_by(worst))
        .opt_num("worst_case_waits_ms", worst.waits(policy).map(millis))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ParseOutcome, parse};
    use crate::policy::{Conflict, LimitSource};
    use std::time::SystemTime;

    fn config(args: &[&str]) -> Config {
        match parse(
            ["retry", "--dry-run"].iter().chain(args),
            SystemTime::UNIX_EPOCH,
        ) {
            ParseOutcome::Run(c) => *c,
            other => panic!("{other:?}"),
        }
    }

    fn wait_policy(backoff: Backoff, delay: u64, max: u64, jitter: Jitter) -> WaitPolicy {
        WaitPolicy {
            backoff,
            delay: Duration::from_secs(delay),
            max_delay: Duration::from_secs(max),
            jitter,
        }
    }

    #[test]
    fn each_jitter_has_the_formula_of_the_policy_page_with_the_run_s_numbers() {
        let exp = || Backoff::Exponential { factor: 2.0 };
        assert_eq!(
            formula(&wait_policy(exp(), 2, 60, Jitter::None)),
            "min(2s × 2^(k−1), 1m) (no jitter)"
        );
        assert_eq!(
            formula(&wait_policy(exp(), 2, 60, Jitter::Full)),
            "U[0, d], d = min(2s × 2^(k−1), 1m) (full jitter: uniform from 0 to d)"
        );
        assert_eq!(
            formula(&wait_policy(exp(), 2, 600, Jitter::Equal)),
            "d/2 + U[0, d/2], d = min(2s × 2^(k−1), 10m) (equal jitter: uniform from d/2 to d)"
        );
        // Decorrelated ignores the backoff, whatever it is.
        for backoff in [exp(), Backoff::Linear, Backoff::Constant] {
            assert_eq!(
                formula(&wait_policy(backoff, 2, 90, Jitter::Decorrelated)),
                "w_k = min(1m30s, U[2s, 3 × w_(k−1)]), w_0 = 2s (decorrelated jitter: uniform \
                 from 2s to 3 times the previous wait; no backoff)"
            );
        }
        assert_eq!(
            formula(&wait_policy(Backoff::Linear, 3, 60, Jitter::None)),
            "min(3s × k, 1m) (no jitter)"
        );
        // A factor of 1, or a zero delay, does not grow: the base is the delay.
        let flat = Backoff::Exponential { factor: 1.0 };
        assert_eq!(
            formula(&wait_policy(flat, 3, 60, Jitter::None)),
            "min(3s, 1m) (no jitter)"
        );
        let list = Backoff::List(vec![Duration::from_secs(2), Duration::from_secs(90)]);
        assert_eq!(
            formula(&wait_policy(list, 1, 60, Jitter::Full)),
            "U[0, d], d = min(the k-th of 2s,1m30s (the last repeats), 1m) (full jitter: \
             uniform from 0 to d)"
        );
    }

    #[test]
    fn the_worst_case_reads_as_its_sum_or_what_bounds_it() {
        let text = |args: &[&str]| {
            let c = config(args);
            worst_case_text(&c.policy, &plan(&c, 1).worst, c.stagger)
        };
        assert_eq!(
            text(&["-n", "7", "-d", "2s", "-j", "none", "-t", "30s"]),
            "5m32s = 7 tries × 30s timeout + 2m02s of waits"
        );
        assert_eq!(
            text(&["-n", "7", "-d", "2s", "-j", "full", "-t", "30s"]),
            "5m32s = 7 tries × 30s timeout + 2m02s of waits, each the longest the jitter can draw"
        );
        assert_eq!(text(&["-n", "1", "-t", "1h"]), "1h = 1 try × 1h timeout");
        assert_eq!(
            text(&["-n", "1", "-t", "1s", "--stagger", "5s"]),
            "6s = 5s of stagger + 1 try × 1s timeout"
        );
        assert_eq!(
            text(&[
                "-n",
                "7",
                "-d",
                "2s",
                "-t",
                "30s",
                "--deadline",
                "1970-01-01T00:05:00Z"
            ]),
            "5m, the deadline; without it tries and waits could take 5m32s"
        );
        assert_eq!(
            text(&["-n", "3", "-j", "none"]),
            "unbounded: no --timeout and no --budget, so a try may run for ever (the waits add \
             up to at most 3s)"
        );
        assert_eq!(
            text(&["-n", "0"]),
            "unbounded: no try limit, no --timeout and no --budget"
        );
    }

    #[test]
    fn the_grace_period_is_named_where_a_try_is_stopped() {
        let note = |args: &[&str]| {
            let c = config(args);
            worst_case_note(&c, &plan(&c, 1).worst)
        };
        assert_eq!(
            note(&["-t", "5s", "-k", "3s"]).as_deref(),
            Some("(not counted: each try may take 3s more if it ignores SIGTERM, before SIGKILL)")
        );
        assert_eq!(
            note(&["-B", "1m", "-s", "INT"]).as_deref(),
            Some(
                "(not counted: a try still running at the end may take 10s more if it ignores \
                 SIGINT, before SIGKILL)"
            )
        );
        assert_eq!(note(&["-t", "5s", "-k", "0"]), None);
        assert_eq!(note(&["-t", "5s", "-s", "KILL"]), None);
        assert_eq!(note(&["-n", "3"]), None);
    }

    #[test]
    fn a_warning_names_both_options_and_what_happens_instead() {
        let s = Duration::from_secs;
        let budget = Limit {
            at: s(10),
            source: LimitSource::Budget,
        };
        let deadline = Limit {
            at: s(90),
            source: LimitSource::Deadline,
        };
        assert_eq!(
            warning(&Conflict::DelayAboveCap {
                delay: s(120),
                max_delay: s(60)
            }),
            "--delay 2m is above --max-delay 1m: every wait is cut to 1m, so the waits never grow"
        );
        assert_eq!(
            warning(&Conflict::ListAboveCap {
                over: vec![s(90)],
                max_delay: s(60)
            }),
            "1m30s in --delays is above --max-delay 1m: it is cut to it"
        );
        assert_eq!(
            warning(&Conflict::TimeoutPastEnd {
                timeout: s(120),
                limit: deadline,
                retries: false
            }),
            "--timeout 2m is longer than --deadline (in 1m30s): the deadline stops the try \
             before its timeout"
        );
        assert_eq!(
            warning(&Conflict::TimeoutPastEnd {
                timeout: s(20),
                limit: budget,
                retries: true
            }),
            "--timeout 20s is longer than --budget 10s: the budget stops the first try before \
             its timeout, and no retry can fit a whole timeout before the end, so there is one try"
        );
        assert_eq!(
            warning(&Conflict::BackoffIgnored(Backoff::Exponential {
                factor: 1.5
            })),
            "--factor 1.5 is ignored by --jitter decorrelated, which draws each wait from the \
             one before"
        );
    }

    /// A plan of `rows` tries a second apart, ending as `end`.
    fn hand_built(rows: u64, end: End) -> Plan {
        let s = Duration::from_secs;
        Plan {
            stagger: None,
            random: false,
            conflicts: Vec::new(),
            rows: (1..=rows)
                .map(|attempt| PlannedTry {
                    attempt,
                    start: s(attempt - 1),
                    wait: None,
                    refused: None,
                    waited: s(attempt - 1),
                })
                .collect(),
            end,
            worst: WorstCase::Unbounded { waits: None },
        }
    }

    #[test]
    fn the_end_reads_from_a_hand_built_plan() {
        let gives_up = End::GivesUp {
            attempt: 60,
            why: GiveUp::Tries,
            waited: Duration::from_secs(59),
        };
        assert_eq!(
            end(&hand_built(50, gives_up), None),
            [
                "… 10 more tries, not shown",
                "",
                "stops after try 60: the tries run out (60 of 60)",
                "59s waited in all",
            ]
        );
        let beyond = End::Beyond { max_tries: None };
        let budget = Limit {
            at: Duration::from_secs(600),
            source: LimitSource::Budget,
        };
        assert_eq!(
            end(&hand_built(50, beyond), Some(budget)),
            [
                "… more tries, not shown",
                "",
                "the run has no try limit and goes on past 100050 tries, until the budget ends",
            ]
        );
        let table = table(
            &hand_built(2, End::Beyond { max_tries: None }),
            Duration::ZERO,
        );
        assert_eq!(
            table,
            [
                "try  starts at  base wait  wait  waited in all",
                "  1         0s          -     -             0s",
                "  2         1s          -     -             1s",
            ]
        );
    }
}
