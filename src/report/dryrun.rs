//! `--dry-run` (spec 9): the schedule the options give, computed by the same policy code as a
//! real run, assuming that every try fails and takes its whole timeout (or no time).

use std::io::{self, Write};
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::config::Config;
use crate::duration::{hms, millis};
use crate::policy::schedule::stagger;
use crate::policy::{
    Backoff, Conflict, Decision, GiveUp, Jitter, Limit, LimitSource, Policy, Schedule, Wait,
    WaitPolicy, WorstCase, conflicts, worst_case,
};
use crate::report::json::Obj;
use crate::report::{command_line, describe_policy, policy_json};

/// Rows shown before the rest of a long schedule is summarised.
pub const SHOWN_ROWS: u64 = 50;
/// Tries simulated past the shown rows to find where a long run ends.
const SIMULATED_TRIES: u64 = 100_000;

/// One planned try and the wait after it (none after the last).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub attempt: u64,
    /// The latest the try starts: every earlier try took its whole timeout.
    pub start: Duration,
    pub wait: Option<Wait>,
    /// Total waited once this row's wait is over.
    pub waited: Duration,
}

/// How the planned run ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// It gives up after this try.
    GivesUp {
        attempt: u64,
        why: GiveUp,
        waited: Duration,
    },
    /// It goes past what was simulated; `max_tries` is the try limit if there is one.
    Beyond { max_tries: Option<u64> },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub rows: Vec<Row>,
    pub end: End,
}

/// Computes the plan: at most `SHOWN_ROWS` rows, and the end of the run.
pub fn plan(config: &Config, seed: u64) -> Plan {
    let policy = &config.policy;
    let mut rng = StdRng::seed_from_u64(seed);
    // The stagger is the first draw of a real run too, so the waits after it are the same.
    let mut now = config
        .stagger
        .map_or(Duration::ZERO, |most| stagger(most, &mut rng));
    let mut schedule = Schedule::new(policy);
    let mut rows = Vec::new();
    // Without a budget only the try limit ends the run; when that is far off, simulating
    // further finds nothing more than the limit itself.
    let far_off = policy.limit.is_none()
        && policy
            .max_tries
            .is_none_or(|n| n > SHOWN_ROWS + SIMULATED_TRIES);
    let horizon = if far_off {
        SHOWN_ROWS
    } else {
        SHOWN_ROWS + SIMULATED_TRIES
    };
    loop {
        let attempt = schedule.tries() + 1;
        if attempt > horizon {
            return Plan {
                rows,
                end: End::Beyond {
                    max_tries: policy.max_tries,
                },
            };
        }
        let start = now;
        let limit = schedule.start_try(now);
        if policy.timeout.is_some() {
            now = now.saturating_add(limit.unwrap_or(Duration::ZERO));
        }
        let decision = schedule.after_transient_failure(now, &mut rng);
        let wait = match decision {
            Decision::Retry(wait) => Some(wait),
            _ => None,
        };
        if attempt <= SHOWN_ROWS {
            rows.push(Row {
                attempt,
                start,
                wait,
                waited: schedule.waited(),
            });
        }
        match decision {
            Decision::Retry(wait) => now = now.saturating_add(wait.delay),
            Decision::GiveUp(why) => {
                return Plan {
                    rows,
                    end: End::GivesUp {
                        attempt,
                        why,
                        waited: schedule.waited(),
                    },
                };
            }
            Decision::Succeed => unreachable!("a dry run assumes every try fails"),
        }
    }
}

fn stop_reason(why: &GiveUp, attempt: u64) -> String {
    match why {
        GiveUp::Tries => format!("the tries run out ({attempt} of {attempt})"),
        GiveUp::Budget(exceeded) => exceeded.describe(),
        GiveUp::Permanent => "a permanent failure".into(),
        GiveUp::Interrupted => "an interrupt".into(),
        GiveUp::Input => "standard input that cannot be kept".into(),
        GiveUp::Quota(refusal) => refusal.to_string(),
    }
}

/// True when the random source decides some wait, so that the seed is worth showing: a jitter
/// with room to move, and more than one try to wait between.
pub fn is_random(policy: &Policy) -> bool {
    policy.max_tries != Some(1) && policy.waits.is_random()
}

/// The wait after try `k` as the policy computes it (spec 4.1), with this run's numbers:
/// `U[0, d], d = min(1s × 2^(k−1), 1m) (full jitter: uniform from 0 to d)`.
pub fn formula(waits: &WaitPolicy) -> String {
    let (delay, cap) = (hms(waits.delay), hms(waits.max_delay));
    if waits.jitter == Jitter::Decorrelated {
        return format!(
            "w_k = min({cap}, U[{delay}, 3 × w_(k−1)]), w_0 = {delay} \
             (decorrelated jitter: uniform from {delay} to 3 times the previous wait; no backoff)"
        );
    }
    let base = match &waits.backoff {
        Backoff::Exponential { factor } if *factor > 1.0 && !waits.delay.is_zero() => {
            format!("{delay} × {factor}^(k−1)")
        }
        Backoff::Linear if !waits.delay.is_zero() => format!("{delay} × k"),
        Backoff::Exponential { .. } | Backoff::Linear | Backoff::Constant => delay,
        Backoff::List(list) if list.len() == 1 => hms(list[0]),
        Backoff::List(list) => format!(
            "the k-th of {} (the last repeats)",
            list.iter().map(|d| hms(*d)).collect::<Vec<_>>().join(",")
        ),
    };
    let d = format!("min({base}, {cap})");
    match waits.jitter {
        Jitter::None => format!("{d} (no jitter)"),
        Jitter::Full => format!("U[0, d], d = {d} (full jitter: uniform from 0 to d)"),
        Jitter::Equal => {
            format!("d/2 + U[0, d/2], d = {d} (equal jitter: uniform from d/2 to d)")
        }
        Jitter::Decorrelated => unreachable!("written above"),
    }
}

/// How the end of the run is named: `the budget` or `the deadline`.
fn end_name(limit: Limit) -> &'static str {
    match limit.source {
        LimitSource::Budget => "the budget",
        LimitSource::Deadline => "the deadline",
    }
}

/// `--budget 10s`, or `--deadline (in 10s)`: the option that set the end, for a warning.
fn end_option(limit: Limit) -> String {
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
        Conflict::ListAboveCap { over, max_delay } => {
            let (is, they) = if over.len() == 1 {
                ("is", "it is")
            } else {
                ("are", "they are")
            };
            format!(
                "{} in --delays {is} above --max-delay {}: {they} cut to it",
                over.iter().map(|d| hms(*d)).collect::<Vec<_>>().join(","),
                hms(*max_delay)
            )
        }
        Conflict::TimeoutPastEnd {
            timeout,
            limit,
            retries,
        } => {
            let (which, then) = if *retries {
                (
                    "the first try",
                    ", and no retry can fit a whole timeout before the end, so there is one try",
                )
            } else {
                ("the try", "")
            };
            format!(
                "--timeout {} is longer than {}: {} stops {which} before its timeout{then}",
                hms(*timeout),
                end_option(*limit),
                end_name(*limit)
            )
        }
        Conflict::NoRetryFits(exceeded) => format!(
            "{} leaves no room for a retry even after a first try that fails at once ({}), \
             so there is one try",
            end_option(exceeded.limit),
            exceeded.describe()
        ),
        Conflict::BackoffIgnored(backoff) => {
            let option = match backoff {
                Backoff::Exponential { factor } => format!("--factor {factor}"),
                Backoff::Linear => "--backoff linear".into(),
                Backoff::Constant => "--backoff constant".into(),
                Backoff::List(_) => "--delays".into(),
            };
            format!(
                "{option} is ignored by --jitter decorrelated, which draws each wait from the \
                 one before"
            )
        }
    }
}

/// The worst case of the run: its policy after the longest wait `--stagger` can draw.
fn worst(config: &Config) -> WorstCase {
    worst_case(&config.policy, config.stagger.unwrap_or_default())
}

/// What bounds the worst case, for the JSON `worst_case_by` field.
fn worst_case_by(worst: &WorstCase) -> &'static str {
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
fn worst_case_text(config: &Config, worst: &WorstCase) -> String {
    let policy = &config.policy;
    let random = policy.waits.jitter != Jitter::None;
    match *worst {
        WorstCase::Sum {
            stagger,
            tries,
            timeout,
            waits,
            total,
        } => {
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
        WorstCase::Limit { limit, sum } => {
            let without = match (sum, policy.max_tries, policy.timeout) {
                (Some(sum), ..) => format!("tries and waits could take {}", hms(sum)),
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
        WorstCase::Unbounded { waits } => {
            let missing = match (policy.max_tries, policy.timeout) {
                (None, None) => "no try limit, no --timeout and no --budget",
                (None, Some(_)) => "no try limit and no --budget",
                (Some(_), _) => "no --timeout and no --budget",
            };
            match waits {
                Some(waits) => format!(
                    "unbounded: {missing}, so a try may run for ever (the waits add up to at \
                     most {})",
                    hms(waits)
                ),
                None => format!("unbounded: {missing}"),
            }
        }
    }
}

/// What the worst case leaves out, when a try can be stopped: the grace period before SIGKILL.
fn worst_case_note(config: &Config, worst: &WorstCase) -> Option<String> {
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

fn bar(wait: Duration, max: Duration) -> String {
    const WIDTH: u128 = 20;
    if wait.is_zero() || max.is_zero() {
        return String::new();
    }
    let cells = (wait.as_nanos().saturating_mul(WIDTH) / max.as_nanos()).clamp(1, WIDTH);
    "█".repeat(cells as usize)
}

/// What the dry run knows of the shared retry quota: its tokens now, or why it cannot say.
pub type QuotaNow = Result<f64, String>;

/// Prints the plan as a table, or as JSON lines with `--log-format json`, with the state of
/// `--quota`'s store when there is one.
pub fn print_with(
    config: &Config,
    seed: u64,
    json: bool,
    quota: Option<&QuotaNow>,
    out: &mut impl Write,
) -> io::Result<()> {
    render(config, seed, &plan(config, seed), json, quota, out)
}

/// Prints a plan already computed by `plan` with the same configuration and seed.
pub fn render(
    config: &Config,
    seed: u64,
    plan: &Plan,
    json: bool,
    quota: Option<&QuotaNow>,
    out: &mut impl Write,
) -> io::Result<()> {
    if json {
        print_json(config, seed, plan, quota, out)
    } else {
        print_human(config, seed, plan, quota, out)
    }
}

/// The wait `--stagger` draws before the first try with this seed.
fn staggered(config: &Config, seed: u64) -> Option<Duration> {
    let most = config.stagger?;
    Some(stagger(most, &mut StdRng::seed_from_u64(seed)))
}

fn print_human(
    config: &Config,
    seed: u64,
    plan: &Plan,
    quota: Option<&QuotaNow>,
    out: &mut impl Write,
) -> io::Result<()> {
    let policy = &config.policy;
    writeln!(
        out,
        "retry: dry run, nothing is run; every try is assumed to fail"
    )?;
    if !config.command.is_empty() {
        writeln!(out, "  command: {}", command_line(&config.command))?;
    }
    writeln!(out, "  policy:  {}", describe_policy(config))?;
    writeln!(out, "  waits:   after try k: {}", formula(&policy.waits))?;
    if let (Some(delay), Some(most)) = (staggered(config, seed), config.stagger) {
        writeln!(
            out,
            "  stagger: the first try waits {} (a random time up to {}, --stagger)",
            hms(delay),
            hms(most)
        )?;
    }
    if let Some(spec) = &config.quota {
        let now = match quota {
            Some(Ok(tokens)) => format!("{tokens:.2} tokens now"),
            Some(Err(e)) => format!("its store cannot be read ({e})"),
            None => "its store was not read".into(),
        };
        writeln!(out, "  quota:   {spec}: {now}")?;
    }
    if is_random(policy) || config.stagger.is_some() {
        writeln!(
            out,
            "  seed:    {seed} (pass --seed {seed} to get these waits again)"
        )?;
    }
    let duration = match policy.timeout {
        Some(t) => format!("its timeout, {}", hms(t)),
        None => "no time (no --timeout)".into(),
    };
    writeln!(out, "  each try is assumed to take {duration}")?;
    for conflict in conflicts(policy) {
        writeln!(out, "retry: warning: {}", warning(&conflict))?;
    }
    writeln!(out)?;
    let header = ["try", "latest start", "base wait", "wait", "waited in all"];
    let cells: Vec<[String; 5]> = plan
        .rows
        .iter()
        .map(|r| {
            let (base, wait) = match r.wait {
                Some(w) => (hms(w.base), hms(w.delay)),
                None => ("-".into(), "-".into()),
            };
            [
                r.attempt.to_string(),
                hms(r.start),
                base,
                wait,
                hms(r.waited),
            ]
        })
        .collect();
    let width = |i: usize| {
        cells
            .iter()
            .map(|c| c[i].chars().count())
            .chain([header[i].len()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..5).map(width).collect();
    let line = |cols: [&str; 5]| {
        cols.iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect::<Vec<_>>()
            .join("  ")
    };
    writeln!(out, "{}", line(header))?;
    for (row, c) in plan.rows.iter().zip(&cells) {
        let b = row
            .wait
            .map(|w| bar(w.delay, policy.waits.max_delay))
            .unwrap_or_default();
        let text = line([&c[0], &c[1], &c[2], &c[3], &c[4]]);
        if b.is_empty() {
            writeln!(out, "{text}")?;
        } else {
            writeln!(out, "{text}  {b}")?;
        }
    }
    let shown = plan.rows.len() as u64;
    match &plan.end {
        End::GivesUp {
            attempt,
            why,
            waited,
        } => {
            if *attempt > shown {
                writeln!(out, "… {} more tries, not shown", attempt - shown)?;
            }
            writeln!(out)?;
            writeln!(
                out,
                "stops after try {attempt}: {}",
                stop_reason(why, *attempt)
            )?;
            writeln!(out, "{} waited in all", hms(*waited))?;
        }
        End::Beyond { max_tries: Some(n) } => {
            writeln!(out, "… {} more tries, not shown", n.saturating_sub(shown))?;
            writeln!(out)?;
            writeln!(out, "stops after try {n}: the tries run out ({n} of {n})")?;
        }
        End::Beyond { max_tries: None } => {
            writeln!(out, "… more tries, not shown")?;
            writeln!(out)?;
            if let Some(limit) = policy.limit {
                writeln!(
                    out,
                    "the run has no try limit and goes on past {} tries, until {} ends",
                    shown + SIMULATED_TRIES,
                    end_name(limit)
                )?;
            } else {
                writeln!(
                    out,
                    "the run has no try limit: it goes on until a try succeeds or a failure is permanent"
                )?;
            }
        }
    }
    let worst = worst(config);
    writeln!(out, "worst case: {}", worst_case_text(config, &worst))?;
    if let Some(note) = worst_case_note(config, &worst) {
        writeln!(out, "  {note}")?;
    }
    // A request can make a wait longer than any the policy draws; only a budget bounds it.
    if config.delay_from_output.is_some() && !matches!(worst, WorstCase::Limit { .. }) {
        writeln!(
            out,
            "  (not counted: waits the output asks for past the policy's, --delay-from-output)"
        )?;
    }
    Ok(())
}

fn print_json(
    config: &Config,
    seed: u64,
    plan: &Plan,
    quota: Option<&QuotaNow>,
    out: &mut impl Write,
) -> io::Result<()> {
    let policy = &config.policy;
    let mut header = Obj::new()
        .str("event", "plan_start")
        .words("command", config.command.iter().map(|w| w.as_os_str()))
        .obj("policy", policy_json(config, seed))
        .bool("random", is_random(policy) || config.stagger.is_some())
        .str("formula", &formula(&policy.waits));
    if let Some(delay) = staggered(config, seed) {
        header = header.num("stagger_ms", millis(delay));
    }
    if let Some(spec) = &config.quota {
        header = header.str("quota", &spec.to_string());
        if let Some(Ok(tokens)) = quota {
            header = header.float("quota_tokens", (tokens * 1000.0).round() / 1000.0);
        }
    }
    writeln!(out, "{}", header.finish())?;
    for conflict in conflicts(policy) {
        let obj = Obj::new()
            .str("event", "warning")
            .str("kind", conflict.kind())
            .str("message", &warning(&conflict));
        writeln!(out, "{}", obj.finish())?;
    }
    for row in &plan.rows {
        let mut obj = Obj::new()
            .str("event", "plan")
            .num("attempt", row.attempt)
            .num("start_ms", millis(row.start));
        if let Some(w) = row.wait {
            obj = obj
                .num("base_ms", millis(w.base))
                .num("delay_ms", millis(w.delay));
        }
        writeln!(out, "{}", obj.num("waited_ms", millis(row.waited)).finish())?;
    }
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
    let worst = worst(config);
    let waits = match worst {
        WorstCase::Sum { waits, .. } => Some(waits),
        WorstCase::Unbounded { waits } => waits,
        WorstCase::Limit { .. } => policy
            .max_tries
            .map(|n| policy.waits.longest_waits(n.saturating_sub(1))),
    };
    let end = end
        .opt_num("worst_case_ms", worst.total().map(millis))
        .str("worst_case_by", worst_case_by(&worst))
        .opt_num("worst_case_waits_ms", waits.map(millis));
    writeln!(out, "{}", end.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ParseOutcome, parse};
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

    fn waits(plan: &Plan) -> Vec<u64> {
        plan.rows
            .iter()
            .filter_map(|r| r.wait.map(|w| w.delay.as_secs()))
            .collect()
    }

    #[test]
    fn the_seed_example_waits_122_seconds_in_all() {
        let p = plan(
            &config(&["-n", "7", "-d", "2s", "-m", "60s", "-j", "none"]),
            1,
        );
        assert_eq!(waits(&p), [2, 4, 8, 16, 32, 60]);
        assert_eq!(
            p.end,
            End::GivesUp {
                attempt: 7,
                why: GiveUp::Tries,
                waited: Duration::from_secs(122)
            }
        );
        let p = plan(
            &config(&["-n", "6", "-d", "2s", "-m", "60s", "-j", "none"]),
            1,
        );
        assert_eq!(waits(&p), [2, 4, 8, 16, 32]);
        assert!(matches!(p.end, End::GivesUp { waited, .. } if waited == Duration::from_secs(62)));
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
    fn each_jitter_has_the_formula_of_spec_4_1_with_the_run_s_numbers() {
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
            worst_case_text(&c, &worst(&c))
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
            worst_case_note(&c, &worst(&c))
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

    #[test]
    fn latest_starts_add_up_timeouts_and_waits() {
        let p = plan(
            &config(&[
                "-n",
                "10",
                "-d",
                "1s",
                "-j",
                "none",
                "--backoff",
                "constant",
                "-t",
                "8s",
                "-B",
                "30s",
            ]),
            1,
        );
        let starts: Vec<u64> = p.rows.iter().map(|r| r.start.as_secs()).collect();
        assert_eq!(starts, [0, 9, 18]);
        match &p.end {
            End::GivesUp {
                attempt: 3,
                why: GiveUp::Budget(e),
                ..
            } => {
                assert_eq!(
                    e.to_string(),
                    "budget: 26s used + 1s wait + 8s timeout > 30s"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn long_runs_show_fifty_rows_and_say_what_follows() {
        let p = plan(&config(&["-n", "4000000000", "--factor", "10"]), 1);
        assert_eq!(p.rows.len(), 50);
        assert_eq!(
            p.end,
            End::Beyond {
                max_tries: Some(4_000_000_000)
            }
        );
        let p = plan(&config(&["-n", "0"]), 1);
        assert_eq!(p.rows.len(), 50);
        assert_eq!(p.end, End::Beyond { max_tries: None });
        let p = plan(&config(&["-n", "500", "-j", "none", "-d", "1s"]), 1);
        assert_eq!(p.rows.len(), 50);
        assert!(matches!(p.end, End::GivesUp { attempt: 500, .. }));
    }

    #[test]
    fn a_budget_ends_an_unlimited_run_past_the_shown_rows() {
        let p = plan(
            &config(&[
                "-n",
                "0",
                "-d",
                "1s",
                "-j",
                "none",
                "--backoff",
                "constant",
                "-B",
                "100s",
            ]),
            1,
        );
        assert_eq!(p.rows.len(), 50);
        // Tries take no time, so tries start at 0s, 1s, … 99s: the hundredth is the last.
        assert!(
            matches!(
                p.end,
                End::GivesUp {
                    attempt: 100,
                    why: GiveUp::Budget(_),
                    ..
                }
            ),
            "{:?}",
            p.end
        );
    }
}
