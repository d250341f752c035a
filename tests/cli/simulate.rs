//! `--simulate` (docs/simulation.md#simulation) through the real binary.

use crate::common;

use common::{events, retry, stderr_of, stdout_of, usage_error_of};
use serde_json::Value;

/// The output of `retry --simulate ARGS`, which must succeed.
pub(crate) fn simulate(args: &[&str]) -> String {
    let out = retry().arg("--simulate").args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(out.stderr.is_empty(), "{}", stderr_of(&out));
    stdout_of(&out)
}

/// The JSON lines of `retry --simulate --log-format json ARGS`.
pub(crate) fn simulate_json(args: &[&str]) -> Vec<Value> {
    simulate(&[&["--log-format", "json"], args].concat())
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

/// The one `figures` line of a simulation without --compare.
pub(crate) fn figures(lines: &[Value]) -> &Value {
    let figures = events(lines, "figures");
    assert_eq!(figures.len(), 1, "{lines:?}");
    figures[0]
}

/// The `figures` line of one --compare row.
fn row<'a>(lines: &'a [Value], jitter: &str, quota: bool) -> &'a Value {
    events(lines, "figures")
        .into_iter()
        .find(|v| v["jitter"] == jitter && v["quota"] == quota)
        .unwrap_or_else(|| panic!("no row for {jitter}, quota {quota}: {lines:?}"))
}

pub(crate) fn number(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no number {key} in {v}"))
}

#[test]
fn the_same_seed_prints_the_same_figures_and_another_seed_others() {
    let args = [
        "--seed",
        "42",
        "--clients",
        "300",
        "-n",
        "8",
        "--outage",
        "20s",
        "--capacity",
        "50/s",
    ];
    let first = simulate(&args);
    assert_eq!(simulate(&args), first);
    assert!(first.contains("seed:    42 (pass --seed 42"), "{first}");
    let json = simulate_json(&args);
    assert_eq!(simulate_json(&args), json);
    let mut other = args;
    other[1] = "43";
    assert_ne!(simulate_json(&other), json);
}

#[test]
fn the_figures_say_what_the_clients_did() {
    // -n 3 against a 10s outage: every try fails, every client gives up on its tries.
    let text = simulate(&["--seed", "1", "--clients", "100", "-n", "3"]);
    for expected in [
        "retry: simulation, nothing is run: 100 clients follow this policy at once",
        "tries:     300 in all, 3.00 per client; failed: 300 in the outage",
        "succeeded: 0 of 100",
        "gave up:   100 of 100 (tries 100)",
        "finished:  the last client at ",
        "tries per second, each column ",
    ] {
        assert!(text.contains(expected), "{expected} not in:\n{text}");
    }
    let json = simulate_json(&["--seed", "1", "--clients", "100", "-n", "3"]);
    let start = &json[0];
    assert_eq!(start["event"], "simulation_start");
    assert_eq!(start["model"], "outage");
    assert_eq!(start["clients"], 100);
    assert_eq!(start["outage_ms"], 10_000);
    assert_eq!(start["policy"]["seed"], "1");
    let f = figures(&json);
    assert_eq!(f["tries"], 300);
    assert_eq!(f["failed"]["outage"], 300);
    assert_eq!(f["gave_up"]["tries"], 100);
    assert_eq!(f["succeeded"], 0);
    assert_eq!(f["unfinished"], 0);
    // The series counts every try once.
    let series: u64 = events(&json, "interval")
        .iter()
        .map(|v| v["tries"].as_u64().unwrap())
        .sum();
    assert_eq!(series, 300);
}

#[test]
fn without_jitter_the_clients_retry_in_lockstep_and_full_jitter_flattens_the_peak() {
    let args = |jitter| {
        simulate_json(&[
            "--seed",
            "5",
            "--clients",
            "1000",
            "-n",
            "5",
            "-d",
            "2s",
            "--outage",
            "1m",
            "-j",
            jitter,
        ])
    };
    let none = args("none");
    let full = args("full");
    // Without jitter, every try of every client falls in one of five spikes: 0, and the waits
    // of 2s, 4s, 8s, 16s after tries of 100ms.
    let spikes: Vec<(u64, u64)> = events(&none, "interval")
        .iter()
        .filter(|v| v["tries"] != 0)
        .map(|v| {
            (
                v["start_ms"].as_u64().unwrap(),
                v["tries"].as_u64().unwrap(),
            )
        })
        .collect();
    let starts: Vec<u64> = spikes.iter().map(|(at, _)| *at).collect();
    assert_eq!(spikes.len(), 5, "{spikes:?}");
    assert!(spikes.iter().all(|(_, n)| *n == 1000), "{spikes:?}");
    for (start, expected) in starts.iter().zip([0, 2100, 6200, 14_300, 30_400]) {
        assert!(
            start.abs_diff(expected) < 200,
            "a spike at {start}ms, expected at {expected}ms"
        );
    }
    // Full jitter spreads the same retries over many intervals.
    let spread = events(&full, "interval")
        .iter()
        .filter(|v| v["tries"] != 0)
        .count();
    assert!(spread > 50, "{spread}");
    let (none, full) = (figures(&none), figures(&full));
    assert_eq!(none["tries"], full["tries"]);
    let ratio = number(none, "peak_retries_per_second") / number(full, "peak_retries_per_second");
    assert!(ratio > 5.0, "peak retries: none {none}, full {full}");
    // The first tries are together either way: the clients start together.
    assert_eq!(none["peak_per_second"], full["peak_per_second"]);
}

#[test]
fn the_chart_shows_the_lockstep_spikes_as_columns_apart() {
    let text = simulate(&[
        "--seed",
        "5",
        "--clients",
        "1000",
        "-n",
        "4",
        "-d",
        "2s",
        "--outage",
        "1m",
        "-j",
        "none",
    ]);
    let chart: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("tries per second"))
        .collect();
    // The top row holds the spikes only, with gaps between them.
    let top = chart[1];
    let bars = top.split_once('|').unwrap().1;
    let columns = bars.chars().filter(|c| *c == '█').count();
    assert_eq!(columns, 4, "{text}");
    assert!(bars.contains("█ "), "{text}");
}

#[test]
fn compare_prints_a_row_for_every_jitter_kind() {
    let text = simulate(&["--compare", "--seed", "3", "--clients", "50"]);
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("jitter"))
        .collect();
    assert!(rows[0].contains("peak retries/s"), "{text}");
    assert!(!rows[0].contains("quota"), "{text}");
    let names: Vec<&str> = rows[1..]
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(names, ["none", "full", "equal", "decorrelated"], "{text}");
    assert!(text.contains("each jitter in turn"), "{text}");
    // With a quota, each kind with it and without.
    let text = simulate(&[
        "--compare",
        "--seed",
        "3",
        "--clients",
        "50",
        "--quota",
        "q",
    ]);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.starts_with("jitter"))
        .map(|l| l.split_whitespace().take(2).collect())
        .collect();
    assert_eq!(rows[0], ["jitter", "quota"]);
    assert_eq!(rows.len(), 9, "{text}");
    for kind in ["none", "full", "equal", "decorrelated"] {
        for quota in ["yes", "no"] {
            assert!(rows.contains(&vec![kind, quota]), "{kind} {quota}: {text}");
        }
    }
    // As JSON, one figures line per row, named.
    let json = simulate_json(&["--compare", "--seed", "3", "--clients", "50"]);
    assert_eq!(events(&json, "figures").len(), 4);
    for kind in ["none", "full", "equal", "decorrelated"] {
        row(&json, kind, false);
    }
    // Listed waits cannot be decorrelated: that row is left out, and said so.
    let text = simulate(&["--compare", "--seed", "3", "--delays", "1s,2s"]);
    assert!(!text.contains("\ndecorrelated"), "{text}");
    assert!(text.contains("no row for decorrelated jitter"), "{text}");
}

#[test]
fn a_quota_lowers_the_tries_of_an_outage() {
    let args = [
        "--seed",
        "9",
        "--clients",
        "200",
        "-n",
        "10",
        "-d",
        "500ms",
        "-m",
        "5s",
        "--outage",
        "2m",
    ];
    let without = figures(&simulate_json(&args)).clone();
    let with = figures(&simulate_json(&[&args[..], &["--quota", "q"]].concat())).clone();
    assert_eq!(without["tries"], 2000);
    let (without, with) = (number(&without, "tries"), number(&with, "tries"));
    assert!(with < without / 4.0, "with {with}, without {without}");
    // The same in one --compare run.
    let json = simulate_json(&[&args[..], &["--quota", "q", "--compare"]].concat());
    for kind in ["none", "full", "equal", "decorrelated"] {
        let (no, yes) = (row(&json, kind, false), row(&json, kind, true));
        assert!(number(yes, "tries") < number(no, "tries"), "{kind}");
        assert!(
            yes["gave_up"]["quota"].as_u64().unwrap() > 0,
            "{kind}: {yes}"
        );
    }
}

#[test]
fn occ_at_100_clients_full_jitter_makes_under_60_percent_of_the_calls_of_plain_backoff() {
    // The post's setting: 100 clients, exponential backoff from 10ms capped at 2s, retrying
    // until they succeed (no -n).
    let json = simulate_json(&[
        "--model",
        "occ",
        "--clients",
        "100",
        "-d",
        "10ms",
        "-m",
        "2s",
        "--compare",
        "--seed",
        "1",
    ]);
    let (none, full) = (row(&json, "none", false), row(&json, "full", false));
    assert_eq!(none["succeeded"], 100);
    assert_eq!(full["succeeded"], 100);
    let (none_calls, full_calls) = (number(none, "tries"), number(full, "tries"));
    assert!(
        full_calls < 0.6 * none_calls,
        "full {full_calls}, none {none_calls}"
    );
    // And it is done many times sooner.
    let (none_end, full_end) = (
        number(none, "last_finish_ms"),
        number(full, "last_finish_ms"),
    );
    assert!(
        full_end * 4.0 < none_end,
        "full {full_end}ms, none {none_end}ms"
    );
}

#[test]
fn occ_tries_until_success_unless_tries_are_given() {
    let json = simulate_json(&["--model", "occ", "--clients", "30", "--seed", "2"]);
    assert_eq!(json[0]["policy"]["tries"], 0);
    assert_eq!(figures(&json)["succeeded"], 30);
    let json = simulate_json(&[
        "--model",
        "occ",
        "--clients",
        "30",
        "--seed",
        "2",
        "-n",
        "1",
    ]);
    let f = figures(&json);
    assert_eq!(f["tries"], 30);
    assert_eq!(
        f["succeeded"].as_u64().unwrap() + f["gave_up"]["tries"].as_u64().unwrap(),
        30
    );
}

#[test]
fn a_command_after_simulate_is_shown_and_not_run() {
    let dir = common::temp_dir("simulate-command");
    let marker = dir.join("ran");
    let text = simulate(&["--clients", "5", "--", "touch", marker.to_str().unwrap()]);
    assert!(text.contains("  command: touch "), "{text}");
    assert!(text.contains("(not run)"), "{text}");
    assert!(!marker.exists());
}

#[test]
fn the_chart_fits_the_width_of_columns_in_plain_characters_without_colour() {
    for width in ["40", "80", "150"] {
        let out = retry()
            .args(["--simulate", "--seed", "4", "--clients", "300", "-n", "6"])
            .env("COLUMNS", width)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let text = stdout_of(&out);
        let chart: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("tries per second"))
            .collect();
        assert!(chart.len() > 8, "{text}");
        let width: usize = width.parse().unwrap();
        for line in &chart {
            assert!(line.chars().count() <= width, "{width}: {line}");
        }
        assert!(!text.contains('\u{1b}'), "{text}");
    }
    // A locale that is not UTF-8 gets ASCII only.
    let out = retry()
        .args([
            "--simulate",
            "--seed",
            "4",
            "--model",
            "occ",
            "--clients",
            "20",
        ])
        .env("LC_ALL", "C")
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert!(text.is_ascii(), "{text}");
    assert!(text.contains('#'), "{text}");
    assert!(text.contains("10ms +/- 2ms"), "{text}");
}

#[test]
fn bad_input_exits_125_with_one_line_naming_the_option_and_value() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["--simulate", "--capacity", "0"], &["--capacity", "'0'"]),
        (
            &["--simulate", "--capacity", "-5/s"],
            &["--capacity", "'-5/s'"],
        ),
        (
            &["--simulate", "--capacity", "fast"],
            &["--capacity", "'fast'"],
        ),
        (
            &["--simulate", "--capacity", "inf"],
            &["--capacity", "'inf'"],
        ),
        (&["--simulate", "--clients", "0"], &["--clients", "'0'"]),
        (&["--simulate", "--clients", "-3"], &["--clients", "'-3'"]),
        (
            &["--simulate", "--clients", "1000000000"],
            &["--clients", "'1000000000'", "1000000"],
        ),
        (&["--simulate", "--outage", "soon"], &["--outage", "'soon'"]),
        (&["--simulate", "--outage", "-1s"], &["--outage", "'-1s'"]),
        (&["--simulate", "--latency", "1x"], &["--latency", "'1x'"]),
        (&["--simulate", "--model", "chaos"], &["--model", "'chaos'"]),
        (&["--simulate", "--dry-run"], &["--simulate", "--dry-run"]),
        (
            &["--simulate", "--replay", "dead.jsonl"],
            &["--simulate", "--replay"],
        ),
        (
            &["--clients", "10", "--", "true"],
            &["--clients 10", "--simulate"],
        ),
        (&["--compare", "--dry-run"], &["--compare", "--simulate"]),
        (
            &["--outage", "5s", "--", "true"],
            &["--outage 5s", "--simulate"],
        ),
        (
            &["--capacity", "3/s", "--", "true"],
            &["--capacity 3/s", "--simulate"],
        ),
        (
            &["--simulate", "--model", "occ", "--latency", "5ms"],
            &["--latency 5ms", "--model outage"],
        ),
        (
            &["--simulate", "--model", "occ", "--every", "1m"],
            &["--every 1m", "--model outage"],
        ),
        (
            &["--every", "5m", "--", "true"],
            &["--every 5m", "--simulate"],
        ),
        (&["--simulate", "--every", "soon"], &["--every", "'soon'"]),
        (&["--simulate", "--throttle", "2"], &["--quota"]),
    ];
    for (args, needles) in cases {
        let out = retry().args(*args).output().unwrap();
        let err = usage_error_of(&out, &format!("{args:?}"));
        assert!(err.starts_with("retry: "), "{args:?}: {err}");
        for needle in *needles {
            assert!(err.contains(needle), "{args:?}: {needle} not in {err}");
        }
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn simulate_needs_no_command_and_touches_no_quota_store() {
    let dir = common::temp_dir("simulate-quota");
    let out = retry()
        .args(["--simulate", "--clients", "10", "--quota", "shared"])
        .env("XDG_RUNTIME_DIR", &dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    // Not even a Redis quota is connected to.
    let out = retry()
        .args([
            "--simulate",
            "--clients",
            "10",
            "--quota",
            "redis://127.0.0.1:1/q",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(out.stderr.is_empty(), "{}", stderr_of(&out));
}

#[test]
fn a_simulation_past_the_clocks_end_says_so_rather_than_stopping_silently() {
    let out = retry()
        .args([
            "--simulate",
            "--clients",
            "2",
            "--latency",
            "500y",
            "-n",
            "2",
            "--seed",
            "1",
        ])
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(text.contains("finished:  no client"), "{text}");
    assert!(
        text.contains("past the clock: 2 of 2, whose next try or answer would come after the simulated clock ends"),
        "{text}"
    );
    let out = retry()
        .args([
            "--simulate",
            "--log-format",
            "json",
            "--clients",
            "2",
            "--latency",
            "500y",
        ])
        .args(["-n", "2", "--seed", "1"])
        .output()
        .unwrap();
    assert!(
        stdout_of(&out).contains(r#""past_clock":2"#),
        "{}",
        stdout_of(&out)
    );
}

/// The throttle's fleet: 1,000 clients every minute against a 10-minute outage, the defaults
/// of retry and of the quota.
const CRON_FLEET: &[&str] = &[
    "--seed",
    "1",
    "--clients",
    "1000",
    "--every",
    "1m",
    "--outage",
    "10m",
    "--quota",
    "q",
];

#[test]
fn a_cron_fleet_arrives_every_minute_and_the_figures_split_the_tries_at_the_outage() {
    let text = simulate(CRON_FLEET);
    for expected in [
        "  every:   the 1000 clients arrive again every 1m, until 30m (the end of the outage plus 20 waves)",
        "arrivals:  30 waves of 1000 clients, the last at 29m",
        "succeeded: 20000 of 30000",
        "outage:    ",
    ] {
        assert!(text.contains(expected), "{expected} not in:\n{text}");
    }
    // No throttle, nothing held.
    assert!(!text.contains("held"), "{text}");
    let json = simulate_json(CRON_FLEET);
    assert_eq!(json[0]["every_ms"], 60_000);
    assert_eq!(json[0]["horizon_ms"], 1_800_000);
    let f = figures(&json);
    assert_eq!(f["waves"], 30);
    assert_eq!(f["clients"], 30_000);
    assert_eq!(
        number(f, "in_outage") + number(f, "after_outage"),
        number(f, "tries")
    );
    // Every field of the figures is there, null where no throttle watched p.
    assert!(f["p_recovered_ms"].is_null(), "{f}");
    assert_eq!(f["throttle"], false, "{f}");
    assert_eq!(f["gave_up"]["held"], 0, "{f}");
}

/// The fields of every `figures` line (docs/json-log.md#the-simulation).
const FIGURES_FIELDS: &[&str] = &[
    "jitter",
    "quota",
    "throttle",
    "clients",
    "tries",
    "per_client",
    "failed",
    "peak_per_second",
    "peak_at_ms",
    "peak_retries_per_second",
    "peak_retries_at_ms",
    "peak_window_ms",
    "last_finish_ms",
    "succeeded",
    "gave_up",
    "unfinished",
    "past_clock",
    "waves",
    "in_outage",
    "after_outage",
    "held",
    "p_recovered_ms",
    "turned_away",
    "stopped_by",
    "stopped_at_wave",
];

#[test]
fn every_figures_line_has_every_documented_field_whatever_the_options() {
    let cases: &[&[&str]] = &[
        &["--clients", "5"],
        &["--clients", "5", "--every", "1m"],
        &[
            "--clients",
            "5",
            "--every",
            "1m",
            "--quota",
            "q",
            "--throttle",
            "2",
            "--compare",
        ],
        &["--clients", "5", "--quota", "q", "--compare"],
        &["--model", "occ", "--clients", "5"],
    ];
    for args in cases {
        let json = simulate_json(&[&["--seed", "1"], *args].concat());
        let rows = events(&json, "figures");
        assert!(!rows.is_empty());
        for row in rows {
            for field in FIGURES_FIELDS {
                assert!(row.get(field).is_some(), "{args:?}: no {field} in {row}");
            }
            for why in ["tries", "budget", "quota", "held", "permanent"] {
                assert!(
                    row["gave_up"][why].is_u64(),
                    "{args:?}: no gave_up.{why} in {row}"
                );
            }
            for cause in ["outage", "overload", "conflict", "timeout"] {
                assert!(
                    row["failed"][cause].is_u64(),
                    "{args:?}: no failed.{cause} in {row}"
                );
            }
        }
    }
}

#[test]
fn a_run_of_a_later_wave_has_its_whole_budget_from_its_arrival() {
    let args = [
        "--clients",
        "10",
        "--every",
        "5m",
        "--outage",
        "1m",
        "-n",
        "3",
        "-B",
        "4m",
        "--seed",
        "1",
    ];
    let text = simulate(&args);
    // The first wave gives up on its tries in the outage; the 20 after it succeed.
    assert!(text.contains("succeeded: 200 of 210"), "{text}");
    assert!(text.contains("gave up:   10 of 210 (tries 10)"), "{text}");
    let f = figures(&simulate_json(&args)).clone();
    assert_eq!(f["gave_up"]["budget"], 0, "{f}");
}

#[test]
fn the_limit_that_stopped_a_simulation_early_is_said_with_its_wave() {
    // A wave every 200 years: the clock ends before the fourth.
    let args = [
        "--clients",
        "10",
        "--every",
        "200y",
        "-n",
        "3",
        "--seed",
        "1",
    ];
    let text = simulate(&args);
    assert!(text.contains("arrivals:  3 waves of 10 clients"), "{text}");
    assert!(
        text.contains("stopped:   by the end of the simulated clock, at about 584 years"),
        "{text}"
    );
    assert!(
        text.contains(", at wave 3 (arrived at 146100d); the waves due after it did not come"),
        "{text}"
    );
    let f = figures(&simulate_json(&args)).clone();
    assert_eq!(f["stopped_by"], "clock", "{f}");
    assert_eq!(f["stopped_at_wave"], 3, "{f}");
    // Under --compare's table, a line for each row.
    let text = simulate(&[&args[..], &["--compare"]].concat());
    for jitter in ["none", "full", "equal", "decorrelated"] {
        let line =
            format!("stopped (jitter {jitter}, quota no): by the end of the simulated clock");
        assert!(text.contains(&line), "{line} not in:\n{text}");
    }
    // Nothing stopped a simulation that ran its course.
    let text = simulate(&["--clients", "10", "--every", "1m", "--seed", "1"]);
    assert!(!text.contains("stopped:"), "{text}");
}

#[test]
fn a_throttle_whose_outage_outlasts_the_simulation_says_so() {
    let args = [
        "--clients",
        "10",
        "--outage",
        "1h",
        "-n",
        "3",
        "--quota",
        "q",
        "--throttle",
        "2",
        "--seed",
        "1",
    ];
    let text = simulate(&args);
    assert!(
        text.contains(
            "p was not watched: the outage had not ended by the end of the simulation, at "
        ),
        "{text}"
    );
    assert!(!text.contains("after the outage"), "{text}");
    let text = simulate(&[&args[..], &["--compare"]].concat());
    assert!(text.contains("outage not over"), "{text}");
    assert!(!text.contains("not by the end"), "{text}");
}

#[test]
fn the_throttle_holds_the_fleet_back_through_the_outage_and_says_when_p_fell() {
    let throttled = [CRON_FLEET, &["--throttle", "2"]].concat();
    let text = simulate(&throttled);
    for expected in [
        "  held:    --throttle 2: a try is held back with p = (tries − 2 × accepted) / (tries + 1) over the last 2m, at most 0.95\n",
        " tries held back; p fell below 0.1 ",
        " after the end of the outage",
        ", held ",
    ] {
        assert!(text.contains(expected), "{expected} not in:\n{text}");
    }
    let alone = figures(&simulate_json(CRON_FLEET)).clone();
    let json = simulate_json(&throttled);
    assert_eq!(json[0]["throttle_k"], 2);
    assert_eq!(json[0]["throttle_window_ms"], 120_000);
    assert_eq!(json[0]["throttle_max"], 0.95);
    let with = figures(&json);
    let share = number(with, "in_outage") / number(&alone, "in_outage");
    assert!(share <= 0.3, "{share}: {with} against {alone}");
    let recovered = number(with, "p_recovered_ms");
    assert!(recovered <= 4.0 * 120_000.0, "{with}");
    assert!(number(with, "held") > 0.0);
    assert!(with["gave_up"]["held"].as_u64().unwrap() > 0, "{with}");
}

#[test]
fn compare_with_the_throttle_sets_no_quota_the_quota_and_the_throttle_side_by_side() {
    let args = [CRON_FLEET, &["--throttle", "2", "--compare"]].concat();
    let text = simulate(&args);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.starts_with("quota"))
        .map(|l| l.split_whitespace().take(2).collect())
        .collect();
    assert_eq!(
        rows,
        [
            ["quota", "throttle"],
            ["no", "no"],
            ["yes", "no"],
            ["yes", "2"]
        ],
        "{text}"
    );
    assert!(text.contains("p < 0.1 after"), "{text}");
    assert!(!text.contains("each jitter in turn"), "{text}");
    let json = simulate_json(&args);
    let rows = events(&json, "figures");
    let variants: Vec<(bool, bool)> = rows
        .iter()
        .map(|v| (v["quota"] == true, v["throttle"] == true))
        .collect();
    assert_eq!(variants, [(false, false), (true, false), (true, true)]);
    assert!(rows.iter().all(|v| v["jitter"] == "full"));
    assert!(number(rows[2], "in_outage") < number(rows[1], "in_outage"));
    // The rows without the throttle have no p to speak of, and held nothing back.
    assert!(rows[0]["p_recovered_ms"].is_null());
    for row in &rows[..2] {
        assert_eq!(row["gave_up"]["held"], 0, "{row}");
    }
}

/// A `retry --simulate` example of the README or docs/: where it is, its arguments, and the
/// output printed under it when the page shows one (`$ retry --simulate …` in a code block).
struct Example {
    place: String,
    args: Vec<String>,
    shown: Option<Vec<String>>,
}

/// Every `retry --simulate` command in a code block of README.md and docs/*.md, lines ending
/// in `\` joined, a `#` comment left out.
fn doc_examples() -> Vec<Example> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut examples = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut fenced = false;
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i];
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                i += 1;
                continue;
            }
            let Some(at) = line.find("retry --simulate").filter(|_| fenced) else {
                i += 1;
                continue;
            };
            let place = format!("{}:{}", file.file_name().unwrap().to_string_lossy(), i + 1);
            let prompt = line.trim_start().starts_with("$ ");
            let mut command = line[at..].to_string();
            while command.trim_end().ends_with('\\') {
                command = command.trim_end().trim_end_matches('\\').to_string();
                i += 1;
                command.push(' ');
                command.push_str(lines[i].trim());
            }
            let command = command.split(" #").next().unwrap();
            let args: Vec<String> = command
                .split_whitespace()
                .skip(1)
                .map(String::from)
                .collect();
            i += 1;
            let shown = prompt.then(|| {
                let start = i;
                while !lines[i].trim_start().starts_with("```") {
                    i += 1;
                }
                lines[start..i].iter().map(|l| l.to_string()).collect()
            });
            examples.push(Example { place, args, shown });
        }
    }
    examples
}

/// The `figures` rows of a simulation, found by their fields.
fn figure_row<'a>(rows: &[&'a Value], quota: bool, throttle: bool, jitter: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["quota"] == quota && r["throttle"] == throttle && r["jitter"] == jitter)
        .unwrap_or_else(|| panic!("no row {jitter} {quota} {throttle} in {rows:?}"))
}

/// What the text around each example says of its figures.
fn hold_to_its_text(command: &str, rows: &[&Value]) {
    let n = |row: &Value, key: &str| number(row, key);
    match command {
        // docs/simulation.md: "what 500 runs do to a dependency", one row per jitter kind.
        "--simulate --compare --clients 500 -n 8" => {
            assert_eq!(rows.len(), 4);
            for row in rows {
                assert_eq!(row["clients"], 500);
                assert_eq!(n(row, "succeeded") + n(&row["gave_up"], "tries"), 500.0);
                // The default 10s outage: every run retries.
                assert!(n(row, "per_client") > 1.5, "{row}");
            }
        }
        // docs/simulation.md, "What to read from it".
        "--simulate --compare --clients 500 -n 8 -d 1s -m 30s --outage 30s --capacity 200/s --quota db --seed 7" =>
        {
            assert_eq!(rows.len(), 8);
            let mut saved = 0.0;
            for jitter in ["none", "full", "equal", "decorrelated"] {
                let (no, yes) = (
                    figure_row(rows, false, false, jitter),
                    figure_row(rows, true, false, jitter),
                );
                // About 7 tries per client without the quota, about 1.03 with it.
                assert!((6.5..7.6).contains(&n(no, "per_client")), "{no}");
                assert!((1.0..1.1).contains(&n(yes, "per_client")), "{yes}");
                saved += n(no, "tries") - n(yes, "tries");
            }
            // The quota saves about 2,900 tries.
            assert!((2700.0..3100.0).contains(&(saved / 4.0)), "{saved}");
            let row = |jitter| figure_row(rows, false, false, jitter);
            assert_eq!(n(row("none"), "peak_retries_per_second"), 5000.0);
            assert_eq!(n(row("full"), "peak_retries_per_second"), 750.0);
            assert_eq!(n(row("decorrelated"), "peak_retries_per_second"), 360.0);
            assert_eq!(n(&row("full")["gave_up"], "tries"), 57.0);
            assert_eq!(n(&row("decorrelated")["gave_up"], "tries"), 121.0);
            assert_eq!(n(row("equal"), "succeeded"), 500.0);
        }
        // docs/simulation.md, "The chart": every client gets through, 300 then 100 overloaded.
        "--simulate -j none --clients 500 -n 8 -d 1s -m 30s --outage 30s --capacity 200/s --seed 7" =>
        {
            let row = rows[0];
            assert_eq!(n(row, "succeeded"), 500.0);
            assert_eq!(n(&row["failed"], "overload"), 400.0);
            assert_eq!(n(row, "peak_retries_per_second"), 5000.0);
        }
        // docs/simulation.md, "Admission control".
        "--simulate --clients 1000 --every 1m --outage 10m --quota db --throttle 2 --seed 1" => {
            let row = rows[0];
            assert_eq!(n(row, "succeeded"), 17011.0);
            assert_eq!(n(row, "in_outage"), 2321.0);
            assert_eq!(n(row, "held"), 39004.0);
            assert_eq!(n(row, "p_recovered_ms"), 360_000.0);
            assert_eq!(n(&row["gave_up"], "held"), 12485.0);
        }
        // The same fleet side by side: the quota alone lets 10,105 tries through the outage, the
        // throttle 23% of that.
        "--simulate --compare --clients 1000 --every 1m --outage 10m --quota db --throttle 2 --seed 1" =>
        {
            assert_eq!(rows.len(), 3);
            let alone = figure_row(rows, true, false, "full");
            let throttled = figure_row(rows, true, true, "full");
            assert_eq!(
                n(figure_row(rows, false, false, "full"), "in_outage"),
                30000.0
            );
            assert_eq!(n(alone, "in_outage"), 10105.0);
            let share = n(throttled, "in_outage") / n(alone, "in_outage");
            assert!((0.22..0.24).contains(&share), "{share}");
            assert_eq!(n(throttled, "p_recovered_ms"), 360_000.0);
        }
        // docs/simulation.md, "Choosing K, the window and max for a fleet": a 5-minute fleet
        // with a budget as deployed and a 10-minute window.
        "--simulate --clients 1000 --every 5m --outage 30m -n 3 -B 4m --quota q --throttle 2:window=10m --compare --seed 1" =>
        {
            assert_eq!(rows.len(), 3);
            let alone = figure_row(rows, true, false, "full");
            let throttled = figure_row(rows, true, true, "full");
            assert_eq!(n(alone, "in_outage"), 6063.0);
            assert_eq!(n(throttled, "in_outage"), 1770.0);
            // 35 minutes after the outage, and 81% of the 20,000 runs after it succeed.
            assert_eq!(n(throttled, "p_recovered_ms"), 2_100_000.0);
            assert_eq!(n(throttled, "succeeded"), 16274.0);
        }
        _ => panic!("an example with no claims held to it: retry {command}"),
    }
}

#[test]
fn every_simulate_example_in_the_docs_runs_and_shows_what_its_text_says() {
    let examples = doc_examples();
    assert!(examples.len() >= 6, "{} examples", examples.len());
    for ex in &examples {
        let args: Vec<&str> = ex.args.iter().map(String::as_str).collect();
        let command = args.join(" ");
        // The printed output, as the page shows it; `...` stands for lines left out.
        if let Some(shown) = &ex.shown {
            let out = retry().args(&args).env_remove("COLUMNS").output().unwrap();
            let text = stdout_of(&out);
            let lines: Vec<String> = text.lines().map(String::from).collect();
            let mut from = 0;
            for part in shown.split(|l| l == "...") {
                let at = (from..=lines.len().saturating_sub(part.len()))
                    .find(|&i| lines[i..].starts_with(part))
                    .unwrap_or_else(|| {
                        panic!(
                            "{}: the output shown is not what `retry {command}` prints:\n{}",
                            ex.place, text
                        )
                    });
                from = at + part.len();
            }
        }
        let json = simulate_json(&args[1..]);
        let rows = events(&json, "figures");
        // A fleet that arrives again and again and never gets through shows nothing worth a page.
        if args.contains(&"--every") {
            for row in &rows {
                assert!(number(row, "succeeded") > 0.0, "{}: {row}", ex.place);
            }
        }
        hold_to_its_text(&command, &rows);
    }
}

#[test]
fn compare_s_columns_stay_in_line_whatever_the_throttle_s_length() {
    for spec in ["2", "1.00000000000001:window=23h59m59.999s,max=0.999999"] {
        let args = [
            "--compare",
            "--clients",
            "20",
            "--every",
            "1m",
            "--outage",
            "2m",
            "--quota",
            "q",
            "--throttle",
            spec,
            "--seed",
            "1",
        ];
        let text = simulate(&args);
        let table: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("quota"))
            .take_while(|l| !l.is_empty())
            .collect();
        assert_eq!(table.len(), 4, "{text}");
        // The last column is aligned on the right: every line ends at the same column, and
        // every cell of the numbers ends where its heading does.
        let width = table[0].chars().count();
        assert!(
            table.iter().all(|l| l.chars().count() == width),
            "{spec}:\n{text}"
        );
        let tries_end = table[0].find("tries").unwrap() + "tries".len();
        for line in &table[1..] {
            let bytes = line.as_bytes();
            assert!(bytes[tries_end - 1].is_ascii_digit(), "{spec}:\n{text}");
            assert_eq!(bytes[tries_end], b' ', "{spec}:\n{text}");
        }
    }
}
