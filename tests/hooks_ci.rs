//! Hooks, CI annotations and nested runs (spec 8.3, 8.4), through the real binary.

mod common;

use std::time::{Duration, Instant};

use common::{retry, stderr_of};

#[test]
fn on_retry_runs_before_each_retry_with_the_numbers_of_the_try() {
    let dir = common::temp_dir("hook");
    let log = dir.join("log");
    let out = retry()
        .current_dir(&dir)
        .args([
            "-n",
            "3",
            "-d",
            "10ms",
            "-j",
            "none",
            "--on-retry",
            "echo hook $RETRY_ATTEMPT $RETRY_EXIT_CODE $RETRY_DELAY_MS >> log",
            "--on-give-up",
            "echo give-up $RETRY_ATTEMPT $RETRY_EXIT_CODE >> log",
            "--",
            "sh",
            "-c",
            "exit 7",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        text, "hook 1 7 10\nhook 2 7 20\ngive-up 3 7\n",
        "no hook line after the last try"
    );
}

#[test]
fn a_hook_writes_to_stderr_not_stdout() {
    let out = retry()
        .args([
            "-n",
            "2",
            "-d",
            "0",
            "--on-retry",
            "echo from-hook",
            "--",
            "false",
        ])
        .output()
        .unwrap();
    assert!(out.stdout.is_empty());
    assert!(stderr_of(&out).contains("from-hook"));
}

#[test]
fn a_failing_or_hanging_hook_changes_neither_the_tries_nor_the_status() {
    let dir = common::temp_dir("hook-fail");
    let count = dir.join("count");
    let script = format!("echo x >> '{}'; exit 5", count.display());
    let out = retry()
        .args([
            "-n",
            "3",
            "-d",
            "0",
            "--on-retry",
            "exit 1",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(std::fs::read_to_string(&count).unwrap().lines().count(), 3);
    assert!(stderr_of(&out).contains("--on-retry hook exited 1; going on"));

    std::fs::remove_file(&count).unwrap();
    let started = Instant::now();
    let out = retry()
        .args([
            "-n",
            "3",
            "-d",
            "0",
            "-t",
            "300ms",
            "-k",
            "200ms",
            "--on-retry",
            "trap '' TERM; sleep 30",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(5), "{log}");
    assert_eq!(std::fs::read_to_string(&count).unwrap().lines().count(), 3);
    assert_eq!(log.matches("--on-retry hook timed out").count(), 2, "{log}");
    // Each hook gets its 300ms and the 200ms grace, no more.
    assert!(took >= Duration::from_millis(1000), "{took:?}");
    assert!(took < Duration::from_secs(6), "{took:?}");
}

#[test]
fn github_actions_gets_annotations_and_balanced_groups() {
    let out = retry()
        .env("GITHUB_ACTIONS", "true")
        .args([
            "-n",
            "3",
            "-d",
            "0",
            "--",
            "sh",
            "-c",
            "echo output; exit 4",
        ])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(
        log.matches("::warning title=retry::try ").count(),
        2,
        "{log}"
    );
    assert_eq!(
        log.matches("::error title=retry::gave up after 3 tries")
            .count(),
        1,
        "{log}"
    );
    let groups: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("::group::") || *l == "::endgroup::")
        .collect();
    assert_eq!(groups.len(), 6, "{log}");
    for pair in groups.chunks(2) {
        assert!(
            pair[0].starts_with("::group::try ") && pair[1] == "::endgroup::",
            "{groups:?}"
        );
    }
    // stdout stays the command's.
    assert_eq!(out.stdout, b"output\n".repeat(3));

    // With the JSON log in a file, the annotations still reach the runner on stderr.
    let dir = common::temp_dir("gh-json");
    let out = retry()
        .env("GITHUB_ACTIONS", "true")
        .args(["-n", "3", "-d", "0", "--log-format", "json", "--log-file"])
        .arg(dir.join("log.jsonl"))
        .args(["--", "sh", "-c", "exit 4"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(log.matches("::warning title=retry::").count(), 2, "{log}");
    assert_eq!(log.matches("::error title=retry::").count(), 1, "{log}");
    let json = std::fs::read_to_string(dir.join("log.jsonl")).unwrap();
    assert!(json.lines().all(|l| l.starts_with('{')), "{json}");

    let out = retry()
        .args(["-n", "3", "-d", "0", "--", "sh", "-c", "exit 4"])
        .output()
        .unwrap();
    assert!(!stderr_of(&out).contains("::"), "{}", stderr_of(&out));
}

#[test]
fn a_nested_retry_warns_once_and_the_tries_multiply() {
    // The command of the acceptance list, with the default waits.
    let retry_bin = assert_cmd::cargo::cargo_bin("retry");
    // The log's `×` needs a UTF-8 locale (tests/log.rs has the ASCII one).
    let out = retry()
        .env("LC_ALL", "C.UTF-8")
        .args(["-n", "2", "--"])
        .arg(&retry_bin)
        .args(["-n", "3", "--", "false"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    // Six tries of `false`: three per inner run, two inner runs.
    assert_eq!(log.matches("/3 exited 1").count(), 6, "{log}");
    assert_eq!(log.matches("/2 exited 1").count(), 2, "{log}");
    assert_eq!(
        log.matches("running inside another retry").count(),
        1,
        "{log}"
    );
    assert!(log.contains("up to 2 × 3 = 6 times"), "{log}");
}

#[test]
fn stderr_in_a_file_has_no_control_characters() {
    let dir = common::temp_dir("no-ctl");
    let file = dir.join("err");
    let mut child = common::retry_std()
        .args(["-n", "2", "-d", "2100ms", "-j", "none", "--", "false"])
        .stdin(std::process::Stdio::null())
        .stderr(std::fs::File::create(&file).unwrap())
        .spawn()
        .unwrap();
    let status = common::wait_bounded(&mut child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(1));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("retry: try 2/2"), "{text}");
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "control characters in {text:?}"
    );
}
