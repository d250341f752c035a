//! `--dry-run` (spec 9): the schedule the options give, computed by the same policy code as a
//! real run, assuming that every try fails and takes its whole timeout (or no time).

use std::io::{self, Write};
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::config::Config;
use crate::duration::{human, millis};
use crate::policy::{Decision, GiveUp, Schedule, Wait};
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
    let mut schedule = Schedule::new(policy);
    let mut now = Duration::ZERO;
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
        GiveUp::Budget(exceeded) => exceeded.to_string(),
        GiveUp::Permanent => "a permanent failure".into(),
        GiveUp::Interrupted => "an interrupt".into(),
        GiveUp::Input => "standard input that cannot be kept".into(),
    }
}

fn bar(wait: Duration, max: Duration) -> String {
    const WIDTH: u128 = 20;
    if wait.is_zero() || max.is_zero() {
        return String::new();
    }
    let cells = (wait.as_nanos().saturating_mul(WIDTH) / max.as_nanos()).clamp(1, WIDTH);
    "█".repeat(cells as usize)
}

/// Prints the plan as a table, or as JSON lines with `--log-format json`.
pub fn print(config: &Config, seed: u64, json: bool, out: &mut impl Write) -> io::Result<()> {
    let plan = plan(config, seed);
    if json {
        print_json(config, seed, &plan, out)
    } else {
        print_human(config, seed, &plan, out)
    }
}

fn print_human(config: &Config, seed: u64, plan: &Plan, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "retry: dry run, nothing is run; every try is assumed to fail"
    )?;
    if !config.command.is_empty() {
        writeln!(out, "  command: {}", command_line(&config.command))?;
    }
    writeln!(out, "  policy:  {}", describe_policy(config))?;
    writeln!(
        out,
        "  seed:    {seed} (pass --seed {seed} to get these waits again)"
    )?;
    let duration = match config.policy.timeout {
        Some(t) => format!("its timeout, {}", human(t)),
        None => "no time (no --timeout)".into(),
    };
    writeln!(out, "  each try is assumed to take {duration}")?;
    writeln!(out)?;
    let header = ["try", "latest start", "base wait", "wait", "waited in all"];
    let cells: Vec<[String; 5]> = plan
        .rows
        .iter()
        .map(|r| {
            let (base, wait) = match r.wait {
                Some(w) => (human(w.base), human(w.delay)),
                None => ("-".into(), "-".into()),
            };
            [
                r.attempt.to_string(),
                human(r.start),
                base,
                wait,
                human(r.waited),
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
            .map(|w| bar(w.delay, config.policy.waits.max_delay))
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
            writeln!(out, "{} waited in all", human(*waited))?;
        }
        End::Beyond { max_tries: Some(n) } => {
            writeln!(out, "… {} more tries, not shown", n.saturating_sub(shown))?;
            writeln!(out)?;
            writeln!(out, "stops after try {n}: the tries run out ({n} of {n})")?;
        }
        End::Beyond { max_tries: None } => {
            writeln!(out, "… more tries, not shown")?;
            writeln!(out)?;
            if config.policy.limit.is_some() {
                writeln!(
                    out,
                    "the run has no try limit and goes on past {} tries, until the budget ends",
                    shown + SIMULATED_TRIES
                )?;
            } else {
                writeln!(
                    out,
                    "the run has no try limit: it goes on until a try succeeds or a failure is permanent"
                )?;
            }
        }
    }
    Ok(())
}

fn print_json(config: &Config, seed: u64, plan: &Plan, out: &mut impl Write) -> io::Result<()> {
    let header = Obj::new()
        .str("event", "plan_start")
        .words("command", config.command.iter().map(|w| w.as_os_str()))
        .obj("policy", policy_json(config, seed));
    writeln!(out, "{}", header.finish())?;
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
