//! `--dry-run` (spec 9) through the real binary.

mod common;

use std::time::{Duration, Instant};

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
    assert_eq!(waits, ["2s", "4s", "8s", "16s", "32s", "60s", "-"]);
    assert!(table.contains("122s waited in all"), "{table}");
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
            started.elapsed() < Duration::from_secs(10),
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
