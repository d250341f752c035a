//! `--consecutive N` through the binary (docs/policy.md#consecutive): the run succeeds only after N
//! successful tries in a row, a failed try starting the count again.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{retry, stderr_of, stdout_of, temp_dir};

/// A script that counts its runs in `dir/count`, prints `try N`, and exits with the status that
/// `codes` gives for the Nth run (0 past its end).
pub(crate) fn counting(dir: &Path, codes: &[u8]) -> String {
    let count = dir.join("count");
    let cases: String = codes
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{}) exit {c};; ", i + 1))
        .collect();
    format!(
        "n=$(cat '{c}' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '{c}'; echo \"try $n\"; \
         case $n in {cases}*) exit 0;; esac",
        c = count.display()
    )
}

/// How often the command of `counting` ran.
pub(crate) fn runs(dir: &Path) -> u64 {
    std::fs::read_to_string(dir.join("count"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn three_in_a_row_after_a_failed_third_try_succeed_on_try_six() {
    let dir = temp_dir("consecutive-six");
    let script = counting(&dir, &[0, 0, 1]);
    let out = retry()
        .args(["--consecutive", "3", "-n", "0", "-B", "20s", "-d", "10ms"])
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert_eq!(runs(&dir), 6, "{log}");
    assert!(log.contains("try 2 succeeded"), "{log}");
    assert!(log.contains("(2 of 3 in a row, --consecutive)"), "{log}");
    assert!(
        log.contains("try 6 succeeded") && log.contains("(3 of 3 in a row"),
        "{log}"
    );
}

#[test]
fn more_in_a_row_than_tries_is_a_usage_error() {
    let out = retry()
        .args(["--consecutive", "4", "-n", "3", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let err = stderr_of(&out);
    assert!(
        err.contains("'--consecutive <N>'") && err.contains("4"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    for bad in ["0", "-1", "x"] {
        let out = retry()
            .args(["--consecutive", bad, "--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{bad}");
    }
}

#[test]
fn tries_that_run_out_before_the_streak_give_up_with_1_and_reason_consecutive() {
    let dir = temp_dir("consecutive-short");
    // Try 2 fails; tries 3 and 4 succeed, two in a row of the three asked for.
    let script = counting(&dir, &[0, 7]);
    let out = retry()
        .args([
            "--consecutive",
            "3",
            "-n",
            "4",
            "-d",
            "1ms",
            "--log-format",
            "json",
        ])
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert_eq!(runs(&dir), 4);
    assert!(
        log.contains("\"reason\":\"consecutive\",\"exit_code\":1"),
        "{log}"
    );
    assert!(log.contains("\"in_a_row\":2"), "{log}");

    // When the last try failed, the run gives up with its status, as any other.
    let dir = temp_dir("consecutive-last-failed");
    let script = counting(&dir, &[0, 5]);
    let out = retry()
        .args([
            "--consecutive",
            "2",
            "-n",
            "2",
            "-d",
            "1ms",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", stderr_of(&out));
}

#[test]
fn a_budget_that_runs_out_before_the_streak_gives_up_with_1() {
    let began = Instant::now();
    let out = retry()
        .args([
            "--consecutive",
            "5",
            "-n",
            "0",
            "-B",
            "1s",
            "-d",
            "400ms",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(
        log.contains("exit 0, but too few successful tries in a row (--consecutive)"),
        "{log}"
    );
    assert!(began.elapsed() < Duration::from_secs(5));
}

#[test]
fn the_successful_tries_are_delay_apart_and_the_backoff_starts_again_after_a_failure() {
    let dir = temp_dir("consecutive-waits");
    let script = counting(&dir, &[0, 1, 0]);
    let began = Instant::now();
    let out = retry()
        .args([
            "--consecutive",
            "2",
            "-n",
            "0",
            "-d",
            "200ms",
            "--jitter",
            "none",
        ])
        .args(["--log-format", "json", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    let took = began.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    let waits: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"event\":\"wait\""))
        .map(|l| l.split("\"delay_ms\":").nth(1).unwrap())
        .collect();
    // After the success: --delay; after the failure of try 2: the first step again (200ms, not
    // the 400ms of a second step); after the success of try 3: --delay.
    assert_eq!(waits.len(), 3, "{log}");
    assert!(waits.iter().all(|w| w.starts_with("200")), "{waits:?}");
    assert!(took >= Duration::from_millis(600), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn buffer_stdout_passes_on_the_try_that_completed_the_streak() {
    let dir = temp_dir("consecutive-buffer");
    let script = counting(&dir, &[]);
    let out = retry()
        .args([
            "--consecutive",
            "3",
            "-n",
            "5",
            "-d",
            "1ms",
            "--buffer-stdout",
        ])
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "try 3\n");
}

#[test]
fn a_streak_without_a_failure_is_not_flaky() {
    let out = retry()
        .args([
            "--consecutive",
            "3",
            "-d",
            "1ms",
            "--flaky",
            "fail",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(!log.contains("flaky") && !log.contains("warning"), "{log}");
}

#[test]
fn the_dry_run_says_what_success_takes() {
    let out = retry()
        .args([
            "--dry-run",
            "--consecutive",
            "3",
            "-n",
            "5",
            "-d",
            "2s",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert!(
        text.contains("success: after 3 successful tries in a row (--consecutive), 2s apart"),
        "{text}"
    );
}

#[test]
fn under_a_quota_only_the_try_after_a_failure_takes_a_token() {
    // One token, none coming back: the retry after the failure takes it, and the streak's
    // tries after a success retry no failure, so they take none.
    let dir = temp_dir("consecutive-quota");
    let runtime = common::runtime_dir("consecutive-quota-store");
    let script = counting(&dir, &[1]);
    let out = retry()
        .env("XDG_RUNTIME_DIR", &runtime)
        .args(["--quota", "streak:cap=1,floor=0,ratio=0"])
        .args(["--consecutive", "3", "-n", "0", "-d", "1ms", "-v"])
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert_eq!(runs(&dir), 4);
    assert_eq!(log.matches("quota 'streak': retry,").count(), 1, "{log}");
    assert_eq!(
        log.matches("quota 'streak': try after a success,").count(),
        2,
        "{log}"
    );
}

#[test]
fn a_streak_that_gives_up_after_a_success_leaves_nothing_running() {
    let dir = temp_dir("consecutive-leftover");
    let bg = dir.join("bg");
    let script = format!(
        "[ $RETRY_ATTEMPT = 1 ] && exit 1; sleep 300 >/dev/null 2>&1 & echo $! > '{}'; exit 0",
        bg.display()
    );
    let out = retry()
        .args(["--consecutive", "2", "-n", "2", "-d", "1ms"])
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    let pid = common::pids_in(&bg)[0];
    let gone = common::wait_until(common::STEP_LIMIT, || !common::alive(pid));
    if !gone {
        common::send(pid as u32, nix::libc::SIGKILL);
    }
    assert!(
        gone,
        "the last try's background process outlived the run: {log}"
    );
    assert!(
        log.contains("try 2/2 left 1 process running; stopped it (SIGTERM)"),
        "{log}"
    );
}
