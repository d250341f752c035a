//! Flaky runs (docs/flaky.md#flaky-runs), through the real binary: `--flaky`, `--repeat` and
//! `--keep-going`, `--history` and `retry --stats`.

use crate::common;

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{
    euid, event, json_file, json_lines, other_user, retry, stderr_of, stdout_of, usage_error_of,
};
use serde_json::Value;

/// A script that counts its runs in the file `$0` and fails (exit `code`) on the runs listed.
fn failing_on(runs: &[u64], code: u8) -> String {
    let cases: Vec<String> = runs.iter().map(|r| r.to_string()).collect();
    format!(
        "n=$(cat \"$0\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$0\"; echo \"try $n\"; \
         case $n in {}) exit {code};; esac",
        cases.join("|")
    )
}

/// `retry ARGS -- sh -c SCRIPT COUNTER` in `dir`.
fn run_counted(dir: &Path, args: &[&str], script: &str) -> std::process::Output {
    retry()
        .current_dir(dir)
        .args(args)
        .args(["--", "sh", "-c", script])
        .arg(dir.join("count"))
        .output()
        .unwrap()
}

fn last_line(text: &str) -> &str {
    text.lines().last().unwrap_or_default()
}

// 18.1 --flaky

#[test]
fn flaky_fail_exits_with_the_last_failed_status_after_the_successful_output() {
    let dir = common::temp_dir("flaky-fail");
    let script = failing_on(&[1, 2], 3);
    let args = ["-n", "5", "-d", "1ms", "--flaky", "fail", "--buffer-stdout"];
    let out = run_counted(&dir, &args, &script);
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(3), "{log}");
    assert_eq!(
        stdout_of(&out),
        "try 3\n",
        "only the successful try's output"
    );
    assert_eq!(
        last_line(&log),
        "retry: succeeded on try 3/5, but --flaky fail: exit 3"
    );

    // Without --buffer-stdout every try's output went out, the successful one last.
    let dir = common::temp_dir("flaky-fail-stream");
    let out = run_counted(&dir, &["-n", "5", "-d", "1ms", "--flaky", "fail"], &script);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stdout_of(&out), "try 1\ntry 2\ntry 3\n");
}

#[test]
fn flaky_fail_exits_124_after_a_timeout_and_0_when_the_first_try_succeeds() {
    let dir = common::temp_dir("flaky-timeout");
    let script = "n=$(cat \"$0\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$0\"; \
                  [ $n -ge 2 ] || sleep 5";
    let args = [
        "-n", "3", "-d", "1ms", "-t", "200ms", "-k", "0", "--flaky", "fail",
    ];
    let out = run_counted(&dir, &args, script);
    assert_eq!(out.status.code(), Some(124), "{}", stderr_of(&out));
    assert!(last_line(&stderr_of(&out)).ends_with("--flaky fail: exit 124"));

    let out = retry()
        .args(["--flaky", "fail", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stderr_of(&out),
        "",
        "a run that succeeds at once says nothing"
    );
}

#[test]
fn flaky_warn_warns_and_exits_0_and_the_json_success_says_it_was_flaky() {
    let dir = common::temp_dir("flaky-warn");
    let script = failing_on(&[1, 2], 3);
    let out = run_counted(&dir, &["-n", "5", "-d", "1ms", "--flaky", "warn"], &script);
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert_eq!(
        last_line(&log),
        "retry: warning: flaky: try 3/5 succeeded after 2 failed tries (--flaky warn)"
    );

    let dir = common::temp_dir("flaky-json");
    let args = [
        "-n",
        "5",
        "-d",
        "1ms",
        "--flaky",
        "fail",
        "--log-format",
        "json",
    ];
    let out = run_counted(&dir, &args, &script);
    assert_eq!(out.status.code(), Some(3));
    let lines = json_lines(&stderr_of(&out));
    let success = event(&lines, "success");
    assert_eq!(success["flaky"], true);
    assert!(
        !lines.iter().any(|l| l["event"] == "warning"),
        "--flaky fail does not warn"
    );
    assert_eq!(success["failed_tries"], 2);
    assert_eq!(success["exit_code"], 3);

    // --flaky warn's warning is an event of the JSON log too.
    let dir = common::temp_dir("flaky-warn-json");
    let args = [
        "-n",
        "5",
        "-d",
        "1ms",
        "--flaky",
        "warn",
        "--log-format",
        "json",
    ];
    let lines = json_lines(&stderr_of(&run_counted(&dir, &args, &script)));
    let warning = event(&lines, "warning");
    assert!(
        warning["message"]
            .as_str()
            .unwrap()
            .contains("flaky: try 3/5")
    );

    let out = retry()
        .args(["--log-format", "json", "--", "true"])
        .output()
        .unwrap();
    let lines = json_lines(&stderr_of(&out));
    let success = event(&lines, "success");
    assert_eq!(
        (&success["flaky"], &success["failed_tries"]),
        (&Value::from(false), &Value::from(0))
    );
}

#[test]
fn github_outputs_follow_flaky_fail_and_a_repeat() {
    let dir = common::temp_dir("flaky-outputs");
    let outputs = dir.join("outputs");
    let script = failing_on(&[1, 2], 3);
    let out = retry()
        .current_dir(&dir)
        .env("GITHUB_OUTPUT", &outputs)
        .args([
            "-n", "5", "-d", "1ms", "--flaky", "fail", "--", "sh", "-c", &script,
        ])
        .arg(dir.join("count"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let text = std::fs::read_to_string(&outputs).unwrap();
    assert_eq!(
        text,
        "tries=3\nexit_code=3\nflaky=true\noutcome=flaky\nreason=\n"
    );

    std::fs::remove_file(&outputs).unwrap();
    std::fs::remove_file(dir.join("count")).unwrap();
    // A FIFO that nobody reads is a warning at once, not a run that never ends.
    let fifo = dir.join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    for var in ["GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"] {
        let started = Instant::now();
        let out = retry()
            .env(var, &fifo)
            .timeout(common::STEP_LIMIT)
            .args(["-n", "2", "-d", "1ms", "--", "sh", "-c", "exit 3"])
            .output()
            .unwrap();
        let log = stderr_of(&out);
        assert_eq!(out.status.code(), Some(3), "{var}: {log}");
        assert!(log.contains("warning: cannot append"), "{var}: {log}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
    let script = failing_on(&[2], 4);
    let out = retry()
        .current_dir(&dir)
        .env("GITHUB_OUTPUT", &outputs)
        .args(["--repeat", "5", "--", "sh", "-c", &script])
        .arg(dir.join("count"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let text = std::fs::read_to_string(&outputs).unwrap();
    assert_eq!(
        text,
        "tries=2\nexit_code=4\nflaky=false\noutcome=failed\nreason=failed\n"
    );
}

// 18.3 --repeat

#[test]
fn a_repeat_stops_at_the_first_failure_with_its_status() {
    let dir = common::temp_dir("repeat-stop");
    let out = run_counted(&dir, &["--repeat", "50"], &failing_on(&[17], 5));
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(5), "{log}");
    assert_eq!(
        last_line(&log),
        "retry: 17 tries, 1 failed (5.9%): exit 5 ×1; first failure on try 17"
    );
    let runs = std::fs::read_to_string(dir.join("count")).unwrap();
    assert_eq!(runs.trim(), "17", "no try after the failure");
    assert!(stdout_of(&out).ends_with("try 17\n"), "the flake's output");
    assert!(log.contains("retry: try 17/50 exited 5 after "), "{log}");
}

#[test]
fn a_repeat_that_keeps_going_reports_the_failure_rate_in_its_line_and_json() {
    let dir = common::temp_dir("repeat-keep");
    let script = failing_on(&[4, 9], 2);
    let out = run_counted(&dir, &["--repeat", "20", "--keep-going"], &script);
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{log}");
    assert_eq!(
        last_line(&log),
        "retry: 20 tries, 2 failed (10%): exit 2 ×2; first failure on try 4"
    );

    let dir = common::temp_dir("repeat-json");
    let args = ["--repeat", "20", "--keep-going", "--log-format", "json"];
    let out = run_counted(&dir, &args, &script);
    let lines = json_lines(&stderr_of(&out));
    let end = lines.last().unwrap();
    assert_eq!(end["event"], "repeat_end");
    assert_eq!(
        (end["tries"].as_u64(), end["failed"].as_u64()),
        (Some(20), Some(2))
    );
    assert_eq!(end["failed_pct"].as_f64(), Some(10.0));
    assert_eq!(end["first_failure"], 4);
    assert_eq!(end["exit_code"], 2);
    assert_eq!(end["outcomes"][0]["outcome"]["exit"], 2);
    assert_eq!(end["outcomes"][0]["count"], 2);

    // Nothing failed: 0, and the same line.
    let out = retry()
        .args(["--repeat", "3", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(last_line(&stderr_of(&out)), "retry: 3 tries, 0 failed (0%)");
}

#[test]
fn a_repeated_try_that_times_out_has_its_whole_tree_stopped() {
    let dir = common::temp_dir("repeat-tree");
    let pids = dir.join("pids");
    // The second try leaves a grandchild in its group, then hangs.
    let script = "n=$(cat \"$0\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$0\"; \
                  if [ $n -eq 2 ]; then sleep 30 & echo $! >> pids; sleep 30; fi";
    let started = Instant::now();
    let args = ["--repeat", "5", "-t", "1s", "-k", "100ms"];
    let out = run_counted(&dir, &args, script);
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(124), "{log}");
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert!(started.elapsed() < common::STEP_LIMIT);
    assert!(
        log.ends_with("retry: 2 tries, 1 failed (50%): timed out ×1; first failure on try 2\n"),
        "{log}"
    );
    let left = common::pids_in(&pids);
    assert_eq!(left.len(), 1);
    assert_eq!(
        common::survivors(&left, Duration::from_secs(2)),
        Vec::<i32>::new()
    );
}

#[test]
fn every_repeated_try_reads_the_same_input_and_matches_the_output_patterns() {
    let out = retry()
        .args(["--repeat", "3", "--", "cat"])
        .write_stdin("abc\n")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "abc\nabc\nabc\n");

    // A try that exits 0 without printing what --until-output wants has failed.
    let dir = common::temp_dir("repeat-until");
    let script = "n=$(cat \"$0\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$0\"; \
                  [ $n -eq 2 ] || echo ready";
    let args = ["--repeat", "4", "--until-output", "ready"];
    let out = run_counted(&dir, &args, script);
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(log.contains("try 2/4 exited 0 after "), "{log}");
    assert!(
        log.contains(", but was not ready (--until-output)"),
        "{log}"
    );
    assert_eq!(
        last_line(&log),
        "retry: 2 tries, 1 failed (50%): not ready ×1; first failure on try 2"
    );
}

#[test]
fn a_repeat_stops_what_even_a_successful_try_left_running_and_holds_only_failures_back() {
    let dir = common::temp_dir("repeat-leftovers");
    let script = "sleep 30 & echo $! >> pids; echo out$RETRY_ATTEMPT";
    let out = retry()
        .current_dir(&dir)
        .args(["--repeat", "3", "--buffer-stdout", "--", "sh", "-c", script])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    // Every successful try's output on stdout, once.
    assert_eq!(stdout_of(&out), "out1\nout2\nout3\n");
    let pids = common::pids_in(&dir.join("pids"));
    assert_eq!(pids.len(), 3);
    // Each was stopped before the next try started, not left to overlap it.
    assert_eq!(
        common::survivors(&pids, Duration::from_secs(2)),
        Vec::<i32>::new()
    );
    assert_eq!(
        log.matches("left 1 process running; stopped it").count(),
        3,
        "{log}"
    );
}

#[test]
fn repeat_0_runs_until_the_budget_ends_and_exits_0_when_nothing_failed() {
    let started = Instant::now();
    let out = retry()
        .args(["--repeat", "0", "-B", "400ms", "--", "sleep", "0.05"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(started.elapsed() >= Duration::from_millis(350), "{log}");
    let line = last_line(&log);
    assert!(line.contains(" 0 failed (0%)"), "{line}");
    assert!(line.contains("budget"), "{line}");
}

#[test]
fn the_dry_run_shows_the_repeat_and_the_flaky_mode() {
    let out = retry()
        .args([
            "--dry-run",
            "--repeat",
            "50",
            "-t",
            "5s",
            "-d",
            "1s",
            "--",
            "make",
        ])
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        text.contains("50 tries in a row, stopping at the first failure"),
        "{text}"
    );
    assert!(
        text.contains("worst case: 4m59s = 50 tries × 5s timeout + 49s of waits"),
        "{text}"
    );

    let out = retry()
        .args(["--dry-run", "--flaky", "fail", "--", "make"])
        .output()
        .unwrap();
    assert!(stdout_of(&out).contains("(--flaky fail)"));
}

#[test]
fn bad_flaky_input_is_one_line_naming_the_option_and_value_and_125() {
    let cases: [(&[&str], &[&str]); 9] = [
        (&["--since", "1d", "--", "true"], &["--since", "--stats"]),
        (&["--stats", "h.jsonl", "-n", "3"], &["--stats", "--tries"]),
        (&["--repeat", "-1", "--", "true"], &["--repeat", "-1"]),
        (&["--flaky", "maybe", "--", "true"], &["--flaky", "maybe"]),
        (
            &["--repeat", "3", "-n", "2", "--", "true"],
            &["--repeat", "--tries"],
        ),
        (
            &["--repeat", "3", "--quota", "q", "--", "true"],
            &["--repeat", "--quota"],
        ),
        (
            &["--repeat", "3", "-j", "none", "--", "true"],
            &["--repeat", "--jitter"],
        ),
        (
            &["--keep-going", "--", "true"],
            &["--keep-going", "--repeat"],
        ),
        (
            &["--stats", "/nonexistent/history.jsonl"],
            &["--stats", "/nonexistent/history.jsonl"],
        ),
    ];
    for (args, needles) in cases {
        let out = retry().args(args).output().unwrap();
        let log = usage_error_of(&out, &format!("{args:?}"));
        for needle in needles {
            assert!(log.contains(needle), "{args:?}: {needle}: {log}");
        }
    }
}

// 18.4 --history

#[test]
fn every_run_appends_one_line_to_the_history_whatever_its_end() {
    let dir = common::temp_dir("history");
    let file = dir.join("runs").join("history.jsonl");
    let h = file.to_str().unwrap();
    let flaky = failing_on(&[1], 3);
    assert_eq!(
        run_counted(&dir, &["-d", "1ms", "--label", "a", "--history", h], &flaky)
            .status
            .code(),
        Some(0)
    );
    let out = retry()
        .args([
            "-n",
            "2",
            "-d",
            "1ms",
            "--history",
            h,
            "--",
            "sh",
            "-c",
            "exit 4",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let out = retry()
        .args(["--repeat", "2", "--history", h, "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let lines = json_file(&file);
    assert_eq!(lines.len(), 3);
    let (a, gave_up, repeat) = (&lines[0], &lines[1], &lines[2]);
    assert_eq!(
        (&a["label"], &a["outcome"], &a["flaky"]),
        (&"a".into(), &"success".into(), &true.into())
    );
    assert_eq!(
        a["try_outcomes"],
        serde_json::json!([{"exit": 3}, {"exit": 0}])
    );
    assert_eq!(a["command"][0], "sh");
    assert_eq!(
        (
            &gave_up["outcome"],
            &gave_up["reason"],
            &gave_up["exit_code"]
        ),
        (&"gave_up".into(), &"tries".into(), &4.into())
    );
    assert_eq!(
        (&repeat["outcome"], &repeat["failed"], &repeat["tries"]),
        (&"repeat".into(), &0.into(), &2.into())
    );
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);
}

#[test]
fn an_interrupted_run_is_recorded_too() {
    let dir = common::temp_dir("history-int");
    let file = dir.join("history.jsonl");
    let mut child = common::retry_std()
        .arg("--history")
        .arg(&file)
        .args(["--", "sleep", "30"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill has no memory effects; the pid is our own child's.
    common::send(child.id(), nix::libc::SIGTERM);
    common::wait_bounded(&mut child, common::STEP_LIMIT);
    let lines = json_file(&file);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["outcome"], "interrupted");
    assert_eq!(lines[0]["exit_code"], 143);
}

#[test]
fn thirty_runs_at_once_leave_thirty_whole_lines() {
    let dir = common::temp_dir("history-herd");
    let file = dir.join("history.jsonl");
    let children: Vec<std::process::Child> = (0..30)
        .map(|k| {
            common::retry_std()
                .arg("--history")
                .arg(&file)
                .args(["--label", &format!("run{k}"), "-n", "2", "-d", "1ms"])
                .args(["--", "sh", "-c", &format!("exit {}", k % 2)])
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        common::wait_bounded(&mut child, Duration::from_secs(20));
    }
    let lines = json_file(&file);
    assert_eq!(lines.len(), 30);
    let mut labels: Vec<String> = lines
        .iter()
        .map(|l| l["label"].as_str().unwrap().to_string())
        .collect();
    labels.sort();
    labels.dedup();
    assert_eq!(labels.len(), 30, "every run once");
}

/// `retry --history FILE` is refused in `dir` (`common::assert_refused`).
fn refused(dir: &Path, file: &Path, needles: &[&str]) {
    common::assert_refused(retry().arg("--history").arg(file), dir, needles);
}

#[test]
fn a_history_file_that_is_a_link_a_fifo_or_not_ours_is_refused_before_the_command_runs() {
    let dir = common::temp_dir("history-refused");
    let file = dir.join("history.jsonl");
    std::fs::write(&file, "").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = dir.join("link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    refused(&dir, &link, &["--history", "link"]);
    let fifo = dir.join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    refused(&dir, &fifo, &["--history", "FIFO"]);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    refused(&dir, &file, &["--history", "0666"]);
    if let Some(other) = other_user() {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::chown(&file, Some(other), None).unwrap();
        refused(&dir, &file, &["--history", &format!("uid {other}")]);
        std::os::unix::fs::chown(&file, Some(euid()), None).unwrap();
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"", "nothing was appended");
}

#[test]
fn a_file_of_something_else_is_refused_and_a_line_no_reader_would_take_is_not_written() {
    let dir = common::temp_dir("history-other");
    let file = dir.join("passwd");
    std::fs::write(&file, "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    refused(
        &dir,
        &file,
        &["--history", "something other than retry's lines"],
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 1);

    // A command line of 1.2 MB: its line would be refused by every reader.
    let history = dir.join("history.jsonl");
    let word = "x".repeat(100_000);
    let out = retry()
        .arg("--history")
        .arg(&history)
        .args(["--", "sh", "-c", "exit 0"])
        .args(std::iter::repeat_n(&word, 12))
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(log.contains("cannot record this run in --history"), "{log}");
    assert!(log.contains("more than the 1 MiB a reader takes"), "{log}");
    assert_eq!(std::fs::read(&history).unwrap(), b"", "nothing written");
}

#[test]
fn a_history_below_a_directory_that_another_user_could_change_is_refused() {
    let dir = common::temp_dir("history-above");
    let open = dir.join("open");
    std::fs::create_dir_all(open.join("deep")).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    // Anyone could rename `deep` away and put a directory of theirs, or a link, in its place.
    let shown = open.display().to_string();
    let needles = ["--history", &shown, "with mode 0777", "no sticky bit"];
    refused(&dir, &open.join("deep").join("h.jsonl"), &needles);
    refused(&dir, &open.join("new").join("h.jsonl"), &needles);
    assert!(!open.join("new").exists(), "nothing was made in it");
    assert!(!open.join("deep").join("h.jsonl").exists());

    // A link another user planted in a sticky directory anyone may write, as /tmp.
    let Some(other) = other_user() else { return };
    let sticky = dir.join("sticky");
    std::fs::create_dir(&sticky).unwrap();
    std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = dir.join("victim");
    std::fs::create_dir(&victim).unwrap();
    let link = sticky.join("ci-history");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(other), None).unwrap();
    let needles = [
        "--history",
        &format!("symbolic link '{}', owned by uid {other}", link.display()),
    ];
    refused(&dir, &link.join("h.jsonl"), &needles);
    assert!(!victim.join("h.jsonl").exists());
    // Ours, the same link is followed.
    std::os::unix::fs::lchown(&link, Some(euid()), None).unwrap();
    let out = retry()
        .arg("--history")
        .arg(link.join("h.jsonl"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(victim.join("h.jsonl").exists());
}

#[test]
fn a_history_too_large_for_stats_is_still_written_and_the_run_warns() {
    let dir = common::temp_dir("history-large");
    let file = dir.join("history.jsonl");
    let out = retry()
        .arg("--history")
        .arg(&file)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    // A sparse file past the gibibyte that --stats reads.
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.set_len((1 << 30) + 10).unwrap();
    let out = retry()
        .arg("--history")
        .arg(&file)
        .args(["--", "true"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(
        log.contains("more than the 1 GiB that --stats reads"),
        "{log}"
    );
    assert!(
        std::fs::metadata(&file).unwrap().len() > (1 << 30) + 10,
        "recorded all the same"
    );
    let out = retry().arg("--stats").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(stderr_of(&out).lines().count(), 1);
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn the_history_cannot_be_the_log_or_the_dead_letter_file() {
    let dir = common::temp_dir("history-same");
    let file: PathBuf = dir.join("same.jsonl");
    for other in ["--log-file", "--dead-letter"] {
        let out = retry()
            .args([
                OsStr::new("--history"),
                file.as_os_str(),
                OsStr::new(other),
                file.as_os_str(),
            ])
            .args(["--", "true"])
            .output()
            .unwrap();
        let log = stderr_of(&out);
        assert_eq!(out.status.code(), Some(125), "{other}: {log}");
        assert!(log.contains("name the same file"), "{log}");
    }
}

// 18.4 --stats

/// A history line of a run labelled `label` that ended at `ts` after `tries` tries.
fn history_line(label: &str, ts: &str, tries: u64, outcome: &str) -> String {
    let flaky = outcome == "success" && tries > 1;
    let outcomes: Vec<Value> = (1..=tries)
        .map(|k| match k == tries && outcome == "success" {
            true => serde_json::json!({"exit": 0}),
            false => serde_json::json!({"exit": 1}),
        })
        .collect();
    serde_json::json!({
        "event": "run", "id": format!("{label}-{ts}-{tries}"), "ts": ts, "label": label,
        "command": ["make", label], "tries": tries, "outcome": outcome,
        "reason": if outcome == "gave_up" { Value::from("tries") } else { Value::Null },
        "exit_code": if outcome == "gave_up" { 1 } else { 0 }, "flaky": flaky,
        "duration_ms": 100 * tries, "try_outcomes": outcomes,
    })
    .to_string()
}

#[test]
fn stats_orders_the_labels_flakiest_first_and_counts_damaged_lines() {
    let dir = common::temp_dir("stats");
    let file = dir.join("history.jsonl");
    let recent = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    let old = "2020-01-01T00:00:00.000Z";
    let mut lines = Vec::new();
    // lint: never flaky; build: 1 flaky of 4; deploy: 2 flaky of 3, 1 of them long ago.
    for _ in 0..5 {
        lines.push(history_line("lint", &recent, 1, "success"));
    }
    for tries in [1, 1, 3] {
        lines.push(history_line("build", &recent, tries, "success"));
    }
    lines.push(history_line("build", &recent, 3, "gave_up"));
    lines.push(history_line("deploy", &recent, 2, "success"));
    lines.push(history_line("deploy", old, 2, "success"));
    lines.push(history_line("deploy", &recent, 1, "success"));
    lines.insert(3, "{\"event\":\"run\",\"id\":".to_string());
    lines.insert(6, "not json at all".to_string());
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();

    let out = retry().arg("--stats").arg(&file).output().unwrap();
    let text = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let order: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| ["lint", "build", "deploy"].contains(w))
        .collect();
    assert_eq!(order, ["deploy", "build", "lint"], "{text}");
    assert!(text.contains("2 damaged lines"), "{text}");
    assert!(text.contains("4, 7"), "the damaged lines are named: {text}");

    let out = retry()
        .args(["--log-format", "json", "--since", "7d", "--stats"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let rows = json_lines(&stdout_of(&out));
    let deploy = rows.iter().find(|r| r["name"] == "deploy").unwrap();
    assert_eq!(deploy["runs"], 2, "--since 7d leaves the old run out");
    assert_eq!(deploy["flaky_pct"].as_f64(), Some(50.0));
    let build = rows.iter().find(|r| r["name"] == "build").unwrap();
    assert_eq!(build["runs"], 4);
    assert_eq!(build["gave_up_pct"].as_f64(), Some(25.0));
    assert_eq!(rows[0]["name"], "deploy", "flakiest first");
    let end = rows.last().unwrap();
    assert_eq!(
        (&end["event"], &end["damaged"]),
        (&"stats_end".into(), &2.into())
    );
}

#[test]
fn stats_reads_what_the_history_option_wrote() {
    let dir = common::temp_dir("stats-roundtrip");
    let file = dir.join("history.jsonl");
    let h = file.to_str().unwrap();
    for _ in 0..2 {
        let _ = std::fs::remove_file(dir.join("count"));
        let out = run_counted(
            &dir,
            &["-d", "1ms", "--label", "flaky", "--history", h],
            &failing_on(&[1], 3),
        );
        assert_eq!(out.status.code(), Some(0));
    }
    let out = retry()
        .args(["--label", "solid", "--history", h, "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = retry()
        .args(["--log-format", "json", "--stats", h])
        .output()
        .unwrap();
    let rows = json_lines(&stdout_of(&out));
    assert_eq!(rows[0]["name"], "flaky");
    assert_eq!(rows[0]["flaky_pct"].as_f64(), Some(100.0));
    assert_eq!(rows[1]["name"], "solid");
    assert_eq!(rows[1]["first_try_pct"].as_f64(), Some(100.0));
}

#[test]
fn stats_never_shows_a_share_near_none_or_all_as_none_or_all() {
    let dir = common::temp_dir("stats-edges");
    let file = dir.join("history.jsonl");
    let ts = "2026-03-01T11:00:00.000Z";
    let mut lines = Vec::new();
    for k in 0..2000 {
        lines.push(history_line(
            "rare",
            ts,
            if k == 0 { 2 } else { 1 },
            "success",
        ));
        lines.push(history_line(
            "often",
            ts,
            if k == 0 { 1 } else { 2 },
            "success",
        ));
    }
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let out = retry().arg("--stats").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let text = stdout_of(&out);
    assert!(
        text.starts_with(&format!(
            "retry: stats of {}: 4000 runs since 2026-03-01 11:00 until 2026-03-01 11:00 UTC; \
             made ",
            file.display()
        )),
        "{text}"
    );
    let row = |name: &str| {
        let line = text.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace().skip(2).take(3).collect::<Vec<_>>()
    };
    assert_eq!(row("often"), ["<0.1%", ">99.9%", "█████████░"], "{text}");
    assert_eq!(row("rare"), [">99.9%", "<0.1%", "█░░░░░░░░░"], "{text}");
    let out = retry()
        .args(["--log-format", "json", "--stats"])
        .arg(&file)
        .output()
        .unwrap();
    let rows = json_lines(&stdout_of(&out));
    let often = rows.iter().find(|r| r["name"] == "often").unwrap();
    assert_eq!(often["flaky_pct"].as_f64(), Some(99.95));
    assert_eq!(often["first_try_pct"].as_f64(), Some(0.05));
    assert_eq!(often["mean_tries"].as_f64(), Some(2.0));
    let rare = rows.iter().find(|r| r["name"] == "rare").unwrap();
    assert_eq!(rare["flaky_pct"].as_f64(), Some(0.05));
    let end = rows.last().unwrap();
    assert_eq!(end["since"], ts);
    assert_eq!(end["until"], ts);
    assert!(end["made"].as_str().is_some_and(|t| t > ts), "{end}");
}

/// How far process `pid` has read `file` through its descriptor of it, if it has one open.
fn read_position(pid: u32, file: &Path) -> Option<u64> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    let fd = fds
        .filter_map(Result::ok)
        .find(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == file))?;
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_str()?));
    let pos = info
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("pos:"))?
        .trim()
        .parse();
    pos.ok()
}

#[test]
fn a_run_that_ends_while_stats_reads_keeps_its_line() {
    let dir = common::temp_dir("stats-while-read");
    let file = dir.join("history.jsonl");
    let h = file.to_str().unwrap();
    let out = retry()
        .args(["--history", h, "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // Enough lines that the read still goes on when it is caught.
    let line = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, line.repeat(40_000)).unwrap();
    let mut stats = common::retry_std()
        .arg("--stats")
        .arg(&file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(stats.id() as i32);
    // Stopped as soon as it has read a first block, the read is held open for as long as the
    // test likes: longer than a writer waits for the lock.
    let until = Instant::now() + common::STEP_LIMIT;
    while read_position(stats.id(), &file).is_none_or(|pos| pos == 0) {
        assert!(Instant::now() < until, "--stats never started to read");
        assert!(
            stats.try_wait().unwrap().is_none(),
            "--stats ended before it was caught"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let started = Instant::now();
    let out = retry()
        .args(["--label", "late", "--history", h, "--", "true"])
        .output()
        .unwrap();
    let took = started.elapsed();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    let _ = stats.wait();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stderr_of(&out), "", "the run waited for no lock");
    assert!(
        took < Duration::from_millis(1500),
        "it waited {took:?} to append"
    );
    let text = std::fs::read_to_string(&file).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["label"], "late");
    assert_eq!(text.lines().count(), 40_001);
}

#[test]
fn a_replay_under_flaky_fail_keeps_a_flaky_run_pending_with_reason_flaky() {
    let dir = common::temp_dir("flaky-replay");
    let letters = dir.join("dead.jsonl");
    let script = failing_on(&[1, 2], 3);
    let args = ["-n", "1", "--dead-letter", letters.to_str().unwrap()];
    assert_eq!(run_counted(&dir, &args, &script).status.code(), Some(3));
    let out = retry()
        .current_dir(&dir)
        .args([OsStr::new("--replay"), letters.as_os_str()])
        .args(["-n", "3", "-d", "1ms", "--flaky", "fail"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let lines = json_file(&letters);
    let attempt = lines.last().unwrap();
    assert_eq!(
        (&attempt["event"], &attempt["reason"]),
        (&"attempt".into(), &"flaky".into())
    );
    assert_eq!(attempt["exit_code"], 3);
}
