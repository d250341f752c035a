//! What a CI runner reads back from `retry`, with standard output and error on one pipe as
//! the runner reads them: every line `retry` writes starts a line of its own, also after a
//! try's unfinished last line; annotations name the command; the step outputs agree with the
//! exit status, also for a replay as a whole.

use crate::common::{self, stdout_of, temp_dir};
use crate::hooks_ci::step_outputs;

/// `retry ARGS` under `ci` (`GITHUB_ACTIONS` or `GITLAB_CI`, or none), its standard output and
/// error on one pipe (`2>&1`), as a CI runner reads them.
fn one_pipe(ci: Option<&str>, args: &[&str]) -> (Option<i32>, String) {
    let mut cmd = assert_cmd::Command::new("sh");
    cmd.timeout(common::TEST_LIMIT)
        .env("LC_ALL", "C.UTF-8")
        .env_remove("RETRY_RUN_ID")
        .arg("-c")
        .arg(r#"exec "$0" "$@" 2>&1"#)
        .arg(assert_cmd::cargo::cargo_bin("retry"))
        .args(args);
    for name in common::CI_VARS {
        cmd.env_remove(name);
    }
    if let Some(name) = ci {
        cmd.env(name, "true");
    }
    let out = cmd.output().unwrap();
    (out.status.code(), stdout_of(&out))
}

/// What each try prints with no newline after it: `progress 50%`, written so that the command
/// line, which annotations quote, does not hold it.
const PROGRESS: &str = "progress 50%";

/// Fails when a line of `log` holds the try's unfinished output and then more: a line of
/// `retry`'s glued to it.
fn assert_nothing_glued(log: &str) {
    for line in log.lines() {
        assert!(
            !line.contains(PROGRESS) || line.trim_end_matches(PROGRESS).is_empty(),
            "a line of retry's glued to the try's output: {line:?} in\n{log}"
        );
    }
}

/// Every try prints `progress 50%` and no newline, on `stream`, then fails or hangs.
fn unfinished(stream: &str, then: &str) -> String {
    format!(r#"printf '%s %s%%' progress 50 {stream}; {then}"#)
}

#[test]
fn every_line_retry_writes_starts_a_line_after_an_unfinished_one() {
    for ci in [Some("GITHUB_ACTIONS"), Some("GITLAB_CI")] {
        for stream in ["", ">&2"] {
            let script = unfinished(stream, "exit 1");
            let (code, log) = one_pipe(ci, &["-n", "2", "-d", "10ms", "--", "sh", "-c", &script]);
            assert_eq!(code, Some(1), "{log}");
            assert_nothing_glued(&log);
            assert_eq!(log.matches(PROGRESS).count(), 2, "{log}");
            assert!(log.lines().any(|l| l == PROGRESS), "{log}");
            if ci == Some("GITHUB_ACTIONS") {
                assert!(log.lines().any(|l| l == "::endgroup::"), "{log}");
                assert!(log.lines().any(|l| l.starts_with("::error ")), "{log}");
            } else {
                assert!(
                    log.lines().any(|l| l.starts_with("\x1b[0Ksection_end:")),
                    "{log}"
                );
            }
        }
    }
}

#[test]
fn a_quiet_run_keeps_its_one_error_on_a_line_of_its_own() {
    let script = unfinished("", "exit 3");
    let (code, log) = one_pipe(
        Some("GITHUB_ACTIONS"),
        &["-q", "-n", "2", "-d", "10ms", "--", "sh", "-c", &script],
    );
    assert_eq!(code, Some(3), "{log}");
    assert_nothing_glued(&log);
    let errors: Vec<&str> = log.lines().filter(|l| l.starts_with("::error ")).collect();
    assert_eq!(errors.len(), 1, "{log}");
}

#[test]
fn a_try_killed_mid_line_leaves_the_next_line_whole() {
    let script = unfinished(">&2", "sleep 10");
    let (code, log) = one_pipe(
        Some("GITHUB_ACTIONS"),
        &[
            "-n", "2", "-d", "10ms", "-t", "300ms", "--", "sh", "-c", &script,
        ],
    );
    assert_eq!(code, Some(124), "{log}");
    assert_nothing_glued(&log);
    assert!(
        log.lines()
            .any(|l| l.starts_with("retry: try 1/2 timed out")),
        "{log}"
    );
}

#[test]
fn a_json_log_on_the_shared_pipe_stays_one_object_a_line() {
    let script = unfinished("", "exit 1");
    let (code, log) = one_pipe(
        Some("GITHUB_ACTIONS"),
        &[
            "--log-format",
            "json",
            "-n",
            "2",
            "-d",
            "10ms",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(code, Some(1), "{log}");
    for line in log.lines().filter(|l| *l != PROGRESS) {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("{e}: {line:?} in\n{log}"));
    }
}

#[test]
fn an_annotation_without_a_label_names_the_command_escaped() {
    let (code, log) = one_pipe(
        Some("GITHUB_ACTIONS"),
        &[
            "-n",
            "2",
            "-d",
            "10ms",
            "--",
            "sh",
            "-c",
            "echo a:b,c; exit 2",
        ],
    );
    assert_eq!(code, Some(2), "{log}");
    let error = log
        .lines()
        .find(|l| l.starts_with("::error "))
        .unwrap_or_else(|| panic!("no annotation in {log}"));
    assert!(
        error.starts_with("::error title=retry%3A sh -c 'echo a%3Ab%2Cc; exit 2'::"),
        "{error}"
    );
    assert!(
        error.contains("::sh -c 'echo a:b,c; exit 2': gave up after 2 tries"),
        "{error}"
    );
}

#[test]
fn a_flaky_failure_is_no_success_in_the_step_outputs() {
    let dir = temp_dir("outputs-flaky-fail");
    let file = dir.join("outputs");
    let out = common::retry()
        .env("GITHUB_OUTPUT", &file)
        .args(["--flaky", "fail", "-n", "3", "-d", "10ms", "--", "sh", "-c"])
        .arg(r#"[ "$RETRY_ATTEMPT" -ge 2 ] || exit 5"#)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    let got = step_outputs(&file);
    assert_eq!(got["exit_code"], "5");
    assert_eq!(got["outcome"], "flaky");
    assert_eq!(got["flaky"], "true");
    assert_eq!(got["tries"], "2");
}

#[test]
fn a_replay_writes_one_set_of_step_outputs_for_all_its_runs() {
    let dir = temp_dir("outputs-replay");
    let dead = dir.join("dead.jsonl");
    let flag = dir.join("fixed");
    // Two runs give up; at the replay, the first passes and the second fails again.
    for script in [format!("test -e {}", flag.display()), "exit 4".to_string()] {
        let out = common::retry()
            .current_dir(&dir)
            .arg("--dead-letter")
            .arg(&dead)
            .args(["-n", "1", "--", "sh", "-c", &script])
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0));
    }
    std::fs::write(&flag, "").unwrap();
    let file = dir.join("outputs");
    let out = common::retry()
        .current_dir(&dir)
        .env("GITHUB_OUTPUT", &file)
        .arg("--replay")
        .arg(&dead)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", common::stderr_of(&out));
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 5, "one set: {text}");
    let got = step_outputs(&file);
    assert_eq!(got["exit_code"], "1");
    assert_eq!(got["outcome"], "gave_up");
    assert_eq!(got["reason"], "pending");
    assert_eq!(got["tries"], "2");
}

#[test]
fn a_hook_s_unfinished_line_is_closed_before_the_next_marker() {
    let hook = r#"printf '%s %s%%' progress 50; printf '%s %s%%' progress 50 >&2"#;
    let (code, log) = one_pipe(
        Some("GITHUB_ACTIONS"),
        &[
            "-n",
            "2",
            "-d",
            "10ms",
            "--on-retry",
            hook,
            "--",
            "sh",
            "-c",
            "exit 1",
        ],
    );
    assert_eq!(code, Some(1), "{log}");
    assert_nothing_glued(&log);
    assert!(log.lines().any(|l| l == "::group::retry: try 2/2"), "{log}");
}

#[test]
fn the_give_up_hook_s_unfinished_line_is_ended_before_the_next_run_writes() {
    let retry = assert_cmd::cargo::cargo_bin("retry");
    let script = format!(
        r#"'{r}' -q -n 1 --on-give-up "printf G" -- false; '{r}' -q -n 1 -- false"#,
        r = retry.display()
    );
    let mut cmd = assert_cmd::Command::new("sh");
    cmd.timeout(common::TEST_LIMIT)
        .env("GITHUB_ACTIONS", "true")
        .env_remove("RETRY_RUN_ID")
        .arg("-c")
        .arg(format!("{{ {script}; }} 2>&1"));
    let out = cmd.output().unwrap();
    let log = stdout_of(&out);
    let errors = log.lines().filter(|l| l.starts_with("::error ")).count();
    assert_eq!(errors, 2, "{log}");
    assert!(log.lines().any(|l| l == "G"), "{log}");
}

#[test]
fn a_quiet_repeat_in_which_no_try_ran_to_its_end_still_says_so() {
    let (code, log) = one_pipe(
        None,
        &["-q", "--repeat", "3", "-B", "200ms", "--", "sleep", "5"],
    );
    assert_eq!(code, Some(124), "{log}");
    assert!(log.contains("no try ran to its end"), "{log}");
}

#[test]
fn a_replay_whose_run_flaked_under_flaky_fail_says_flaky() {
    let dir = temp_dir("outputs-replay-flaky");
    let dead = dir.join("dead.jsonl");
    let flag = dir.join("flag");
    let script = format!(
        "test -e {f} || {{ touch {f}; exit 1; }}",
        f = flag.display()
    );
    let out = common::retry()
        .current_dir(&dir)
        .arg("--dead-letter")
        .arg(&dead)
        .args(["-n", "1", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    std::fs::remove_file(&flag).unwrap();
    let file = dir.join("outputs");
    let out = common::retry()
        .current_dir(&dir)
        .env("GITHUB_OUTPUT", &file)
        .arg("--replay")
        .arg(&dead)
        .args(["-n", "3", "-d", "1ms", "--flaky", "fail"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", common::stderr_of(&out));
    let got = step_outputs(&file);
    assert_eq!(got["flaky"], "true");
    assert_eq!(got["reason"], "pending");
    assert_eq!(got["tries"], "2");
}
