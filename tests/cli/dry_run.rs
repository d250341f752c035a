//! `--dry-run` (docs/dry-run.md#dry-run) through the real binary.

use crate::common;

use std::time::Instant;

use common::{retry, stdout_of};
use serde_json::Value;

fn plan_json(args: &[&str]) -> Vec<Value> {
    let out = retry()
        .args(["--dry-run", "--log-format", "json"])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr_of(&out));
    stdout_of(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

fn waits_ms(plan: &[Value]) -> Vec<u64> {
    plan.iter()
        .filter(|v| v["event"] == "plan")
        .filter_map(|v| v["delay_ms"].as_u64())
        .collect()
}

/// The rows of the human table: lines that start with a try number.
fn table_rows(table: &str) -> Vec<Vec<&str>> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|cols| cols.len() >= 5 && cols[0].parse::<u64>().is_ok())
        .collect()
}

fn end(plan: &[Value]) -> &Value {
    plan.last().expect("a plan_end line")
}

#[test]
fn the_seed_example_lists_its_waits_and_122_seconds_in_all() {
    let plan = plan_json(&["-n", "7", "-d", "2s", "-m", "60s", "-j", "none"]);
    assert_eq!(waits_ms(&plan), [2000, 4000, 8000, 16000, 32000, 60000]);
    assert_eq!(end(&plan)["waited_ms"], 122_000);
    assert_eq!(end(&plan)["reason"], "tries");

    let plan = plan_json(&["-n", "6", "-d", "2s", "-m", "60s", "-j", "none"]);
    assert_eq!(waits_ms(&plan), [2000, 4000, 8000, 16000, 32000]);
    assert_eq!(end(&plan)["waited_ms"], 62_000);

    // The table says the same.
    let out = retry()
        .args([
            "--dry-run",
            "-n",
            "7",
            "-d",
            "2s",
            "-m",
            "60s",
            "-j",
            "none",
        ])
        .output()
        .unwrap();
    let table = stdout_of(&out);
    let waits: Vec<&str> = table_rows(&table).iter().map(|cols| cols[3]).collect();
    assert_eq!(waits, ["2s", "4s", "8s", "16s", "32s", "1m", "-"]);
    assert!(table.contains("2m02s waited in all"), "{table}");
    assert!(
        table.contains("stops after try 7: the tries run out"),
        "{table}"
    );
}

#[test]
fn explicit_delays_repeat_the_last_value() {
    let plan = plan_json(&["--delays", "2s,4s", "-n", "5", "-j", "none"]);
    assert_eq!(waits_ms(&plan), [2000, 4000, 4000, 4000]);
}

#[test]
fn explicit_delays_wait_exactly_unless_jitter_is_given() {
    // Whatever the seed, the listed waits are the waits.
    for seed in ["1", "2", "3"] {
        let plan = plan_json(&["--delays", "10s,20s", "-n", "4", "--seed", seed]);
        assert_eq!(waits_ms(&plan), [10_000, 20_000, 20_000]);
        assert_eq!(plan[0]["policy"]["jitter"], "none");
    }
    let plan = plan_json(&[
        "--delays", "10s,20s", "-n", "8", "-j", "full", "--seed", "1",
    ]);
    assert_eq!(plan[0]["policy"]["jitter"], "full");
    let waits = waits_ms(&plan);
    assert!(waits.iter().all(|&w| w <= 20_000), "{waits:?}");
    assert!(
        waits.iter().any(|&w| w != 10_000 && w != 20_000),
        "{waits:?}"
    );
}

#[test]
fn the_same_seed_prints_the_same_schedule_and_another_seed_another() {
    let run = |seed: &str| {
        let out = retry()
            .args(["--dry-run", "-n", "8", "--seed", seed])
            .output()
            .unwrap();
        stdout_of(&out)
    };
    assert_eq!(run("42"), run("42"));
    assert_ne!(run("42"), run("43"));
    assert!(run("42").contains("--seed 42"));
}

#[test]
fn a_seed_from_the_os_is_shown_and_reproduces_the_schedule() {
    let first = plan_json(&["-n", "6"]);
    let seed = &first[0]["policy"]["seed"];
    assert!(seed.is_string(), "the seed is shown, as a string: {seed}");
    // As the JSON shows it, quotes included.
    let again = plan_json(&["-n", "6", "--seed", &seed.to_string()]);
    assert_eq!(waits_ms(&first), waits_ms(&again));
}

#[test]
fn a_seed_in_json_quotes_gives_the_same_schedule() {
    let plain = plan_json(&["-n", "6", "--seed", "9403994254451210427"]);
    let quoted = plan_json(&["-n", "6", "--seed", "\"9403994254451210427\""]);
    assert_eq!(waits_ms(&plain), waits_ms(&quoted));
    assert_eq!(plain[0]["policy"], quoted[0]["policy"]);
}

#[test]
fn huge_and_unlimited_tries_finish_at_once_without_overflow() {
    for args in [
        &["-n", "4000000000", "--factor", "10"][..],
        &["-n", "0"],
        &[
            "-n",
            "18446744073709551615",
            "--factor",
            "1e300",
            "-m",
            "1000000h",
        ],
    ] {
        let started = Instant::now();
        let out = retry().arg("--dry-run").args(args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            common::stderr_of(&out)
        );
        assert!(
            started.elapsed() < common::STEP_LIMIT,
            "{args:?} took too long"
        );
        let table = stdout_of(&out);
        let rows = table_rows(&table).len();
        assert_eq!(rows, 50, "{args:?}: {table}");
        assert!(table.contains("more tries, not shown"), "{args:?}: {table}");
    }
    let table = stdout_of(&retry().args(["--dry-run", "-n", "0"]).output().unwrap());
    assert!(table.contains("no try limit"), "{table}");
    let table = stdout_of(
        &retry()
            .args(["--dry-run", "-n", "4000000000", "--factor", "10"])
            .output()
            .unwrap(),
    );
    assert!(table.contains("3999999950 more tries"), "{table}");
    // Try 4,000,000,000 of --factor 10 waits max-delay: every shown wait past the cap is 60s.
    let plan = plan_json(&["-n", "4000000000", "--factor", "10", "-j", "none"]);
    assert!(waits_ms(&plan).iter().skip(2).all(|&w| w == 60_000));
}

#[test]
fn the_budget_stops_the_plan_with_the_numbers_of_the_rule() {
    let args = [
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
    ];
    let out = retry().arg("--dry-run").args(args).output().unwrap();
    let table = stdout_of(&out);
    assert!(
        table.contains("stops after try 3: budget: 26s used + 1s wait + 8s timeout > 30s"),
        "{table}"
    );
    let plan = plan_json(&args);
    let starts: Vec<u64> = plan
        .iter()
        .filter(|v| v["event"] == "plan")
        .map(|v| v["start_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(starts, [0, 9000, 18000]);
    assert_eq!(end(&plan)["reason"], "budget");
    assert_eq!(end(&plan)["tries"], 3);
}

#[test]
fn a_dry_run_runs_nothing() {
    let dir = common::temp_dir("dry-run");
    let marker = dir.join("ran");
    let out = retry()
        .args(["--dry-run", "--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(!marker.exists());
    assert!(stdout_of(&out).contains("touch"));
}

#[test]
fn a_zero_timeout_and_a_zero_budget_mean_none() {
    let out = retry()
        .args(["--dry-run", "-n", "4", "-t", "0", "-B", "0", "-j", "none"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr_of(&out));
    let table = stdout_of(&out);
    let policy = table
        .lines()
        .find(|l| l.trim_start().starts_with("policy:"))
        .expect("a policy line");
    assert!(
        !policy.contains("timeout") && !policy.contains("budget"),
        "{table}"
    );
    assert!(table.contains("no time (no --timeout)"), "{table}");
    assert_eq!(table_rows(&table).len(), 4, "{table}");
    assert!(
        table.contains("stops after try 4: the tries run out"),
        "{table}"
    );

    let plan = plan_json(&["-n", "4", "-t", "0", "-B", "0", "-j", "none"]);
    let policy = &plan[0]["policy"];
    assert!(policy["timeout_ms"].is_null(), "{policy}");
    assert!(policy["budget_ms"].is_null(), "{policy}");
    assert_eq!(end(&plan)["reason"], "tries");
    assert_eq!(waits_ms(&plan), [1000, 2000, 4000]);
}

#[test]
fn the_json_plan_keeps_an_argument_that_is_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let word = std::ffi::OsStr::from_bytes(b"a\xff");
    let out = retry()
        .args(["--dry-run", "--log-format", "json", "-n", "1", "--"])
        .arg(word)
        .output()
        .unwrap();
    let first = String::from_utf8(out.stdout).unwrap();
    let header: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    assert_eq!(header["command"][0]["base64"], "Yf8=", "{first}");
}

fn dry_run(args: &[&str]) -> String {
    let out = retry().arg("--dry-run").args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr_of(&out));
    stdout_of(&out)
}

fn line_starting<'a>(text: &'a str, start: &str) -> &'a str {
    text.lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line starting {start:?} in\n{text}"))
}

#[test]
fn the_worst_case_is_every_try_taking_its_timeout_and_the_longest_waits() {
    // Five tries of 1m and waits of at most 10s, 20s, 40s, 1m20s.
    let args = [
        "-n", "5", "-t", "1m", "-d", "10s", "-m", "2m", "--seed", "1",
    ];
    let text = dry_run(&args);
    assert_eq!(
        line_starting(&text, "worst case:"),
        "worst case: 7m30s = 5 tries × 1m timeout + 2m30s of waits, each the longest the jitter \
         can draw"
    );
    assert!(
        text.contains("not counted: each try may take 10s more if it ignores SIGTERM"),
        "{text}"
    );
    let text = dry_run(&["-n", "5", "-t", "1m", "-d", "10s", "-m", "2m", "-j", "none"]);
    assert_eq!(
        line_starting(&text, "worst case:"),
        "worst case: 7m30s = 5 tries × 1m timeout + 2m30s of waits"
    );
    let plan = plan_json(&args);
    assert_eq!(end(&plan)["worst_case_ms"], 450_000);
    assert_eq!(end(&plan)["worst_case_by"], "tries");
    assert_eq!(end(&plan)["worst_case_waits_ms"], 150_000);
}

#[test]
fn the_worst_case_says_what_bounds_a_run_without_a_timeout_or_a_try_limit() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["-n", "4", "-j", "none"],
            "worst case: unbounded: no --timeout and no --budget, so a try may run for ever \
             (the waits add up to at most 7s)",
        ),
        (
            &["-n", "0", "-t", "5s"],
            "worst case: unbounded: no try limit and no --budget",
        ),
        (
            &["-n", "0", "-t", "5s", "-B", "10m"],
            "worst case: 10m, the budget; without it the run has no try limit",
        ),
        (
            &["-n", "0", "-B", "2h"],
            "worst case: 2h, the budget; without it the run has no try limit, and no --timeout",
        ),
        (
            &["-n", "3", "-B", "90s"],
            "worst case: 1m30s, the budget; without it a try could run for ever, with no --timeout",
        ),
        (
            &["-n", "5", "-t", "1m", "-B", "3m"],
            "worst case: 3m, the budget; without it tries and waits could take 5m15s",
        ),
    ];
    for (args, worst) in cases {
        let text = dry_run(args);
        assert_eq!(line_starting(&text, "worst case:"), worst, "{args:?}");
    }
    let plan = plan_json(&["-n", "0", "-t", "5s"]);
    assert!(end(&plan)["worst_case_ms"].is_null(), "{}", end(&plan));
    assert_eq!(end(&plan)["worst_case_by"], "none");
    assert!(end(&plan)["worst_case_waits_ms"].is_null());
    let plan = plan_json(&["-n", "3", "-B", "90s"]);
    assert_eq!(end(&plan)["worst_case_ms"], 90_000);
    assert_eq!(end(&plan)["worst_case_by"], "budget");
}

/// Every duration in the text that is written in seconds alone, at or above a minute.
fn seconds_past_a_minute(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || "(),;=+".contains(c))
        .filter(|w| {
            w.strip_suffix('s')
                .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == '.'))
                .and_then(|n| n.parse::<f64>().ok())
                .is_some_and(|secs| secs >= 60.0)
        })
        .map(String::from)
        .collect()
}

#[test]
fn long_times_are_written_in_hours_minutes_and_seconds() {
    let text = dry_run(&[
        "-n", "5", "-t", "1m", "-d", "10s", "-m", "2m", "-j", "none", "-k", "90s",
    ]);
    let starts: Vec<&str> = table_rows(&text).iter().map(|cols| cols[1]).collect();
    assert_eq!(starts, ["0s", "1m10s", "2m30s", "4m10s", "6m30s"]);
    assert!(text.contains("2m30s waited in all"), "{text}");
    assert!(text.contains("SIGKILL after 1m30s"), "{text}");
    assert_eq!(seconds_past_a_minute(&text), Vec::<String>::new(), "{text}");
    // Milliseconds are kept past a minute; below a second they stay milliseconds.
    let text = dry_run(&[
        "-n", "3", "-d", "500ms", "-t", "1m", "-j", "none", "--factor", "1.5",
    ]);
    let rows = table_rows(&text);
    assert_eq!(rows[0][2], "500ms", "{text}");
    assert_eq!(rows[1][1], "1m00.5s", "{text}");
    assert_eq!(rows[2][1], "2m01.25s", "{text}");
    // A budget's message in the dry run uses the same form.
    let text = dry_run(&["-n", "10", "-t", "2m", "-d", "1s", "-j", "none", "-B", "5m"]);
    assert!(
        text.contains("stops after try 2: budget: 4m01s used + 2s wait + 2m timeout > 5m"),
        "{text}"
    );
    assert_eq!(seconds_past_a_minute(&text), Vec::<String>::new(), "{text}");
}

#[test]
fn the_seed_is_shown_only_when_a_wait_is_random() {
    for args in [
        &["-j", "none"][..],
        &["--delays", "2s,4s"],
        &["-n", "1"],
        &["-j", "decorrelated", "-d", "2m"],
    ] {
        let text = dry_run(args);
        assert!(!text.contains("seed"), "{args:?}: {text}");
        assert_eq!(plan_json(args)[0]["random"], false, "{args:?}");
    }
    for args in [
        &[][..],
        &["-j", "equal"],
        &["-j", "decorrelated"],
        &["--delays", "2s,4s", "-j", "full"],
    ] {
        let text = dry_run(&[args, &["--seed", "5"]].concat());
        assert!(
            line_starting(&text, "seed:").contains("pass --seed 5"),
            "{args:?}: {text}"
        );
        assert_eq!(plan_json(args)[0]["random"], true, "{args:?}");
    }
}

#[test]
fn each_jitter_shows_its_own_formula() {
    let cases: [(&[&str], &str); 6] = [
        (&["-j", "none"], "min(1s × 2^(k−1), 1m) (no jitter)"),
        (
            &["-j", "full", "-d", "500ms", "-m", "10s"],
            "U[0, d], d = min(500ms × 2^(k−1), 10s) (full jitter: uniform from 0 to d)",
        ),
        (
            &["-j", "equal", "--backoff", "linear"],
            "d/2 + U[0, d/2], d = min(1s × k, 1m) (equal jitter: uniform from d/2 to d)",
        ),
        (
            &["-j", "decorrelated", "-d", "2s", "-m", "30s"],
            "w_k = min(30s, U[2s, 3 × w_(k−1)]), w_0 = 2s (decorrelated jitter: uniform from \
             2s to 3 times the previous wait; no backoff)",
        ),
        (
            &["--backoff", "constant", "-d", "5s"],
            "U[0, d], d = min(5s, 1m) (full jitter: uniform from 0 to d)",
        ),
        (
            &["--delays", "2s,4s"],
            "min(the k-th of 2s,4s (the last repeats), 1m) (no jitter)",
        ),
    ];
    for (args, formula) in cases {
        let text = dry_run(args);
        assert_eq!(
            line_starting(&text, "waits:"),
            format!("waits:   after try k: {formula}"),
            "{args:?}"
        );
        assert_eq!(plan_json(args)[0]["formula"], formula, "{args:?}");
    }
    // Decorrelated jitter claims no backoff anywhere.
    let text = dry_run(&["-j", "decorrelated"]);
    assert!(
        !text.contains("exponential") && !text.contains("×2"),
        "{text}"
    );
    assert!(
        line_starting(&text, "policy:").contains("waits from 1s to 3 × the previous"),
        "{text}"
    );
}

#[test]
fn options_that_defeat_each_other_are_warned_about() {
    let cases: [(&[&str], &str); 5] = [
        (
            &["-d", "10s", "-m", "1s"],
            "--delay 10s is above --max-delay 1s: every wait is cut to 1s, so the waits never grow",
        ),
        (
            &["-t", "20s", "-B", "10s"],
            "--timeout 20s is longer than --budget 10s: the budget stops the first try before its \
             timeout, and no retry can fit a whole timeout before the end, so there is one try",
        ),
        (
            &["-j", "none", "-d", "10s", "-B", "5s"],
            "--budget 5s leaves no room for a retry even after a first try that fails at once \
             (budget: 0s used + 10s wait ≥ 5s), so there is one try",
        ),
        (
            &["--delays", "2s,90s,2m"],
            "1m30s,2m in --delays are above --max-delay 1m: they are cut to it",
        ),
        (
            &["-j", "decorrelated", "--backoff", "linear"],
            "--backoff linear is ignored by --jitter decorrelated, which draws each wait from the \
             one before",
        ),
    ];
    for (args, warning) in cases {
        let text = dry_run(args);
        let warnings: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("retry: warning: "))
            .collect();
        assert_eq!(warnings, [warning], "{args:?}: {text}");
    }
    // The defaults, and a budget that leaves room, draw no warning.
    for args in [
        &[][..],
        &["-t", "10s", "-B", "1m"],
        &["-d", "1s", "-m", "1s"],
    ] {
        let text = dry_run(args);
        assert!(!text.contains("warning"), "{args:?}: {text}");
    }
}

#[test]
fn the_json_dry_run_carries_warnings_as_events_and_stays_json_lines() {
    let plan = plan_json(&["-d", "10s", "-m", "1s", "-t", "20s", "-B", "10s"]);
    assert_eq!(plan[0]["event"], "plan_start");
    assert_eq!(end(&plan)["event"], "plan_end");
    let warnings: Vec<(&str, &str)> = plan
        .iter()
        .filter(|v| v["event"] == "warning")
        .map(|v| (v["kind"].as_str().unwrap(), v["message"].as_str().unwrap()))
        .collect();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert_eq!(warnings[0].0, "delay_above_max_delay");
    assert!(
        warnings[0]
            .1
            .starts_with("--delay 10s is above --max-delay 1s")
    );
    assert_eq!(warnings[1].0, "timeout_past_end");
    // Warnings come before the rows, right after the header.
    assert_eq!(plan[1]["event"], "warning");
    assert_eq!(plan[2]["event"], "warning");
    assert_eq!(plan[3]["event"], "plan");
    for (args, kind) in [
        (
            &["-j", "none", "-d", "10s", "-B", "5s"][..],
            "no_retry_fits",
        ),
        (&["--delays", "2s,90s"], "delays_above_max_delay"),
        (&["-j", "decorrelated", "--factor", "3"], "backoff_ignored"),
    ] {
        let plan = plan_json(args);
        assert_eq!(plan[1]["event"], "warning", "{args:?}");
        assert_eq!(plan[1]["kind"], kind, "{args:?}");
    }
}

#[test]
fn the_new_lines_are_ascii_in_the_c_locale() {
    let out = retry()
        .env("LC_ALL", "C")
        .args([
            "--dry-run",
            "-j",
            "decorrelated",
            "--backoff",
            "linear",
            "-d",
            "10s",
            "-B",
            "5s",
        ])
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert!(text.is_ascii(), "{text}");
    assert!(text.contains("3 x w_(k-1)"), "{text}");
    assert!(text.contains("10s wait >= 5s"), "{text}");
}

#[test]
fn the_stagger_is_in_what_the_table_and_its_end_say_was_waited_and_in_the_worst_case() {
    let args = [
        "-n",
        "3",
        "-d",
        "1s",
        "-j",
        "none",
        "--stagger",
        "20s",
        "--seed",
        "1",
    ];
    let plan = plan_json(&args);
    let stagger = plan[0]["stagger_ms"].as_u64().expect("stagger_ms");
    assert!(stagger <= 20_000);
    let out = retry()
        .arg("--dry-run")
        .args(args)
        .arg("true")
        .output()
        .unwrap();
    let shown = stdout_of(&out);
    assert!(
        shown.contains("\"starts at\" counts the stagger and the waits only"),
        "{shown}"
    );
    assert!(shown.contains("try  starts at  base wait"), "{shown}");
    // Each row's "waited in all" is the next row's "starts at": the stagger counted in both.
    let rows = table_rows(&shown);
    assert_eq!(rows.len(), 3, "{shown}");
    for pair in rows.windows(2) {
        assert_eq!(pair[0][4], pair[1][1], "{shown}");
    }
    let drawn = shown
        .split("the first try waits ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the stagger's line");
    let waited =
        format!("waited in all: {drawn} of stagger before the first try, then 3s between tries");
    assert!(shown.contains(&waited), "{waited}: {shown}");
    assert!(
        shown.contains("(the waits add up to at most 3s, after a stagger of at most 20s)"),
        "{shown}"
    );
    // With a timeout, the worst case's sum names the stagger; under a budget, what it cuts.
    let out = retry()
        .args([
            "--dry-run",
            "-n",
            "3",
            "-t",
            "5s",
            "-j",
            "none",
            "--stagger",
            "20s",
            "--",
        ])
        .arg("true")
        .output()
        .unwrap();
    let shown = stdout_of(&out);
    assert!(
        shown.contains("worst case: 38s = 20s of stagger + 3 tries × 5s timeout + 3s of waits"),
        "{shown}"
    );
    assert!(
        shown.contains("\"starts at\" is the latest a try starts"),
        "{shown}"
    );
    let out = retry()
        .args([
            "--dry-run",
            "-n",
            "3",
            "-t",
            "5s",
            "-B",
            "30s",
            "--stagger",
            "20s",
            "--",
        ])
        .arg("true")
        .output()
        .unwrap();
    let shown = stdout_of(&out);
    assert!(
        shown.contains("without it the stagger, tries and waits could take"),
        "{shown}"
    );
    // Without a stagger, the words are as they were.
    let out = retry()
        .args(["--dry-run", "-n", "2", "--", "true"])
        .output()
        .unwrap();
    let shown = stdout_of(&out);
    assert!(!shown.contains("stagger"), "{shown}");
}

/// The wait a stop line of the budget names, and the last row's wait in the table, in brackets.
fn stop_and_last_row(args: &[&str]) -> (String, String) {
    let out = retry().arg("--dry-run").args(args).output().unwrap();
    let text = stdout_of(&out);
    let stop = text
        .lines()
        .find(|l| l.starts_with("stops after try "))
        .unwrap_or_else(|| panic!("no stop line: {text}"));
    let cited = stop
        .split(" used + ")
        .nth(1)
        .and_then(|rest| rest.split(" wait").next())
        .unwrap_or_else(|| panic!("no wait in the stop line: {text}"));
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("try "))
        .take_while(|l| !l.is_empty())
        .collect();
    let last = rows.last().expect("a table");
    let shown = last.split_whitespace().nth(3).unwrap_or_default();
    (format!("({cited})"), shown.to_string())
}

#[test]
fn the_table_shows_the_wait_the_budget_stop_line_names() {
    for args in [
        &["-n", "5", "-B", "3s", "--jitter", "none", "--", "true"][..],
        &["-n", "5", "-B", "3s", "--seed", "3", "--", "true"],
        &[
            "-n", "5", "-B", "3s", "-t", "1s", "--jitter", "none", "--", "true",
        ],
        &[
            "-n",
            "5",
            "-B",
            "3s",
            "--jitter",
            "decorrelated",
            "--seed",
            "2",
        ],
    ] {
        let (cited, shown) = stop_and_last_row(args);
        assert_eq!(cited, shown, "{args:?}");
    }
    // The example of docs/dry-run.md, as the binary prints it.
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/dry-run.md")).unwrap();
    let example = page
        .split("```\ntry  starts at")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the example of a stop on the budget");
    let args = [
        "--dry-run",
        "-n",
        "5",
        "-B",
        "3s",
        "--jitter",
        "none",
        "--",
        "true",
    ];
    let text = stdout_of(&retry().args(args).output().unwrap());
    assert!(text.contains(&format!("try  starts at{example}")), "{text}");
    // When the tries run out, nothing was drawn after the last.
    let out = retry()
        .args([
            "--dry-run",
            "-n",
            "2",
            "-B",
            "30s",
            "--jitter",
            "none",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert!(stdout_of(&out).contains("  2         1s          -     -             1s\n"));
}
