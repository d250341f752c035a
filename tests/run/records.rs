//! Every record of a run agrees, however it ends (docs/log.md#every-record-of-a-run-agrees): the
//! exit status, the JSON log, the step outputs, the history line, the JUnit report and the dead
//! letter read the one outcome the runner makes, and the hooks run only after tries that ran
//! and failed. Each test here is a case where two of them once disagreed.

use crate::common;
use crate::consecutive::{counting, runs};

use std::net::TcpListener;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{
    LockHolder, json_file, json_lines, retry, retry_std, send, stderr_of, temp_dir, wait_bounded,
};

/// The step outputs in `path`, as (name, value) pairs.
fn outputs(path: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn output<'a>(outputs: &'a [(String, String)], name: &str) -> &'a str {
    outputs
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.as_str())
}

#[test]
fn on_retry_never_runs_after_a_successful_try_of_a_streak() {
    let dir = temp_dir("records-streak-hook");
    let hooks = dir.join("hooks");
    let hook = format!(
        "echo \"$RETRY_ATTEMPT $RETRY_EXIT_CODE\" >> '{}'",
        hooks.display()
    );
    // S F S S: one failed try, so the hook runs once, after try 2.
    let out = retry()
        .args(["--consecutive", "2", "-n", "5", "-d", "1ms"])
        .args(["--on-retry", &hook, "--on-give-up", &hook])
        .args(["--", "sh", "-c", &counting(&dir, &[0, 4, 0, 0])])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert_eq!(runs(&dir), 4, "{log}");
    assert_eq!(std::fs::read_to_string(&hooks).unwrap(), "2 4\n", "{log}");
}

#[test]
fn a_streak_that_runs_out_gives_up_with_1_whatever_its_last_success_exited() {
    let dir = temp_dir("records-streak-code");
    let out_file = dir.join("out");
    let out = retry()
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", &out_file)
        .args([
            "--success-on",
            "0,3",
            "--consecutive",
            "2",
            "-n",
            "2",
            "-d",
            "1ms",
        ])
        .args(["--log-format", "json", "--log-file"])
        .arg(dir.join("log"))
        .args(["--", "sh", "-c", &counting(&dir, &[1, 3])])
        .output()
        .unwrap();
    let text = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("too few successful tries in a row for --consecutive: exit 1"),
        "the annotation says the status: {text}"
    );
    let outputs = outputs(&out_file);
    assert_eq!(output(&outputs, "exit_code"), "1");
    assert_eq!(output(&outputs, "reason"), "consecutive");
    let log = json_file(&dir.join("log"));
    let give_up = common::event(&log, "give_up");
    assert_eq!(give_up["exit_code"], 1, "{give_up}");
    assert_eq!(give_up["reason"], "consecutive", "{give_up}");
}

#[test]
fn failed_tries_counts_the_tries_that_failed_not_the_tries_before_the_last() {
    let dir = temp_dir("records-failed-tries");
    let history = dir.join("history");
    let out = retry()
        .env("GITHUB_ACTIONS", "true")
        .args([
            "--label",
            "check",
            "--consecutive",
            "2",
            "-n",
            "5",
            "-d",
            "1ms",
        ])
        .arg("--history")
        .arg(&history)
        .args(["--log-format", "json", "--log-file"])
        .arg(dir.join("log"))
        .args(["--", "sh", "-c", &counting(&dir, &[0, 1, 0, 0])])
        .output()
        .unwrap();
    let text = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let log = json_file(&dir.join("log"));
    let success = common::event(&log, "success");
    assert_eq!(success["failed_tries"], 1, "S F S S: {success}");
    assert_eq!(success["flaky"], true, "{success}");
    assert!(text.contains("after 1 failure: exit 1"), "{text}");
    let line = &json_file(&history)[0];
    assert_eq!(line["failed"], 1, "{line}");
    assert_eq!(line["tries"], 4, "{line}");
}

#[test]
fn stats_counts_a_streak_that_never_failed_as_a_first_try_success() {
    // One flaky streak (S F S S), one that never failed (S S S).
    let dir = temp_dir("records-streak-stats");
    let history = dir.join("history");
    let out = retry()
        .args([
            "--label",
            "check",
            "--consecutive",
            "2",
            "-n",
            "5",
            "-d",
            "1ms",
        ])
        .arg("--history")
        .arg(&history)
        .args(["--", "sh", "-c", &counting(&dir, &[0, 1, 0, 0])])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let out = retry()
        .args([
            "--label",
            "check",
            "--consecutive",
            "3",
            "-n",
            "3",
            "-d",
            "1ms",
        ])
        .arg("--history")
        .arg(&history)
        .args(["--log-format", "json", "--", "true"])
        .output()
        .unwrap();
    let log = json_lines(&stderr_of(&out));
    assert_eq!(common::event(&log, "success")["failed_tries"], 0);
    let out = retry()
        .args(["--stats"])
        .arg(&history)
        .args(["--log-format", "json"])
        .output()
        .unwrap();
    let rows = json_lines(&common::stdout_of(&out));
    let row = rows
        .iter()
        .find(|r| r.get("runs").is_some())
        .unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(row["runs"], 2, "{row}");
    // One flaky run, one that never failed: 50% each, nothing in no column.
    assert_eq!(row["first_try_pct"], 50.0, "{row}");
    assert_eq!(row["flaky_pct"], 50.0, "{row}");
}

#[test]
fn a_streak_under_a_spent_quota_is_not_cut_by_it() {
    // The streak's tries after a success retry no failure: they take no token.
    let runtime = common::runtime_dir("records-streak-quota");
    let out = retry()
        .env("XDG_RUNTIME_DIR", &runtime)
        .args(["--quota", "streak:cap=1,floor=0,ratio=0"])
        .args(["--consecutive", "3", "-n", "5", "-d", "0", "--", "true"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(!log.contains("quota"), "{log}");
}

#[test]
fn a_replayed_streak_that_succeeds_at_once_is_not_flaky() {
    let dir = temp_dir("records-replay-streak");
    let letters = dir.join("dead");
    // F S: the tries run out one success short; the dead letter keeps the run.
    let script = counting(&dir, &[1]);
    let out = retry()
        .current_dir(&dir)
        .args([
            "--consecutive",
            "2",
            "-n",
            "2",
            "-d",
            "1ms",
            "--dead-letter",
        ])
        .arg(&letters)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let out_file = dir.join("out");
    let history = dir.join("history");
    let out = retry()
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", &out_file)
        .arg("--replay")
        .arg(&letters)
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    let outputs = outputs(&out_file);
    assert_eq!(output(&outputs, "flaky"), "false", "S S: {outputs:?}");
    assert_eq!(output(&outputs, "outcome"), "success", "{outputs:?}");
    assert_eq!(runs(&dir), 4, "{log}");
    drop(history);
}

/// Runs `retry ARGS -- seq 1 100000 | head -1`, with its records asked for in `dir`: its
/// status, and its log.
fn reader_gone(dir: &Path, holding: &str) -> (Option<i32>, String) {
    let mut child = retry_std()
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", dir.join("out"))
        .arg(holding)
        .arg("--history")
        .arg(dir.join("history"))
        .arg("--junit")
        .arg(dir.join("junit.xml"))
        .args(["--", "seq", "1", "100000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 2];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    let mut log = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut log).unwrap();
    (std::os::unix::process::ExitStatusExt::signal(&status), log)
}

#[test]
fn a_held_run_whose_reader_has_gone_still_leaves_every_record() {
    for holding in ["--buffer-stdout", "--output-on-failure"] {
        let dir = temp_dir("records-reader-gone");
        let (signal, log) = reader_gone(&dir, holding);
        assert_eq!(signal, Some(13), "{holding} dies of SIGPIPE: {log}");
        let outputs = outputs(&dir.join("out"));
        assert_eq!(
            output(&outputs, "exit_code"),
            "141",
            "{holding}: {outputs:?}"
        );
        assert_eq!(output(&outputs, "outcome"), "interrupted", "{holding}");
        let line = &json_file(&dir.join("history"))[0];
        assert_eq!(line["exit_code"], 141, "{holding}: {line}");
        assert_eq!(line["outcome"], "interrupted", "{holding}: {line}");
        let report = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
        assert!(
            report.contains("tests=\"1\"") && report.contains("failures=\"1\""),
            "{holding}: {report}"
        );
        assert!(
            report.contains("interrupted by SIGPIPE"),
            "{holding}: {report}"
        );
        // It ends as quietly as the pipeline would: no line says it gave up.
        assert!(!log.contains("gave up"), "{holding}: {log}");
    }
}

#[test]
fn a_buffered_output_that_cannot_be_written_is_in_every_record() {
    let dir = temp_dir("records-full-disk");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let mut cmd = retry_std();
    cmd.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", dir.join("out"))
        .args(["--buffer-stdout", "--history"])
        .arg(dir.join("history"))
        .arg("--junit")
        .arg(dir.join("junit.xml"))
        .args(["--", "echo", "orders"])
        .stdout(full)
        .stderr(Stdio::piped());
    let out = cmd.spawn().unwrap().wait_with_output().unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(log.contains("No space left on device"), "{log}");
    let outputs = outputs(&dir.join("out"));
    assert_eq!(output(&outputs, "exit_code"), "1", "{outputs:?}");
    assert_eq!(output(&outputs, "outcome"), "gave_up", "{outputs:?}");
    assert_eq!(output(&outputs, "reason"), "output", "{outputs:?}");
    let line = &json_file(&dir.join("history"))[0];
    assert_eq!(line["exit_code"], 1, "{line}");
    assert_eq!(line["reason"], "output", "{line}");
    let report = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert!(report.contains("errors=\"1\""), "{report}");
}

#[test]
fn a_signal_while_the_reports_are_written_lets_them_finish_and_ends_retry() {
    let dir = temp_dir("records-signal-report");
    let history = dir.join("history");
    std::fs::write(&history, "").unwrap();
    std::fs::set_permissions(
        &history,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    // Another writer holds the history's lock: the run waits for it to write its line.
    let mut holder = LockHolder::lock(&history);
    let mut child = retry_std()
        .arg("--history")
        .arg(&history)
        .arg("--junit")
        .arg(dir.join("junit.xml"))
        .args(["--", "true"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    send(child.id(), nix::libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(100));
    holder.release();
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    let mut log = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut log).unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(15),
        "not swallowed: {log}"
    );
    assert!(
        log.contains("received SIGTERM while writing the run's reports"),
        "{log}"
    );
    // Both reports are whole.
    assert_eq!(json_file(&history).len(), 1);
    let report = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert!(report.trim_end().ends_with("</testsuite>"), "{report}");
}

#[test]
fn a_signal_during_playback_leaves_the_outcome_the_run_announced_in_every_record() {
    let dir = temp_dir("records-signal-playback");
    let (log_file, history, letter) = (dir.join("log"), dir.join("history"), dir.join("dead"));
    let mark = dir.join("mark");
    // One failed try that writes 1 MiB, more than a pipe holds: its playback waits for a reader.
    let script = format!(": > '{}'; yes | head -c 1048576; exit 3", mark.display());
    let mut child = retry_std()
        .args(["--output-on-failure", "-n", "1", "--log-format", "json"])
        .arg("--log-file")
        .arg(&log_file)
        .arg("--history")
        .arg(&history)
        .arg("--dead-letter")
        .arg(&letter)
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    // The try has ended once it has been reaped: the run plays back what it held, and waits.
    assert!(common::wait_until(common::STEP_LIMIT, || mark.exists()
        && common::children_of(pid).is_empty()));
    std::thread::sleep(Duration::from_millis(50));
    send(child.id(), nix::libc::SIGTERM);
    let drain = |stream: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            if let Some(mut stream) = stream {
                let _ = stream.read_to_end(&mut sink);
            }
        })
    };
    let out = drain(child.stdout.take().map(|s| Box::new(s) as _));
    let err = drain(child.stderr.take().map(|s| Box::new(s) as _));
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    let _ = (out.join(), err.join());
    let log = json_file(&log_file);
    // retry still dies of the signal.
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(15),
        "{log:?}"
    );
    let signal = common::event(&log, "signal");
    assert_eq!(signal["during"], "playback", "{signal}");
    // The run gave up as it announced, once; every record says so.
    let gave_up = common::events(&log, "give_up");
    assert_eq!(gave_up.len(), 1, "{log:?}");
    let reason = &gave_up[0]["reason"];
    assert_eq!(reason, "tries", "{log:?}");
    let line = &json_file(&history)[0];
    assert_eq!(&line["reason"], reason, "{line}");
    assert_eq!(line["exit_code"], 3, "{line}");
    let letters = json_file(&letter);
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(&letters[0]["reason"], reason, "{letters:?}");
    assert_eq!(letters[0]["exit_code"], 3, "{letters:?}");
}

#[test]
fn a_signal_during_on_give_up_is_told_as_during_the_hook_in_every_record() {
    let dir = temp_dir("records-signal-hook");
    let mark = dir.join("mark");
    let hook = format!("touch '{}'; sleep 5", mark.display());
    let mut child = retry_std()
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", dir.join("out"))
        .args(["-n", "1", "--on-give-up", &hook, "--history"])
        .arg(dir.join("history"))
        .arg("--junit")
        .arg(dir.join("junit.xml"))
        .args(["--log-format", "json", "--", "sh", "-c", "exit 3"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(common::wait_until(common::STEP_LIMIT, || mark.exists()));
    send(child.id(), nix::libc::SIGTERM);
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    let mut text = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut text).unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(15)
    );
    let log = json_lines(&text);
    let signal = common::event(&log, "signal");
    assert_eq!(signal["during"], "hook", "{signal}");
    // One give_up, the last told, after the signal.
    let give_ups = common::events(&log, "give_up");
    assert_eq!(give_ups.len(), 1, "{text}");
    assert_eq!(give_ups[0]["reason"], "interrupted", "{text}");
    assert_eq!(give_ups[0]["exit_code"], 143, "{text}");
    let outputs = outputs(&dir.join("out"));
    assert_eq!(output(&outputs, "exit_code"), "143", "{outputs:?}");
    assert_eq!(output(&outputs, "outcome"), "interrupted", "{outputs:?}");
    let line = &json_file(&dir.join("history"))[0];
    assert_eq!(line["exit_code"], 143, "{line}");
    assert_eq!(line["outcome"], "interrupted", "{line}");
    let report = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert!(report.contains("interrupted by SIGTERM"), "{report}");
}

#[test]
fn a_signal_during_the_first_exchange_with_the_quota_is_before_any_try() {
    // A Redis address that accepts and never answers: the first exchange waits its deadline.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = temp_dir("records-signal-start");
    let started = Instant::now();
    let mut child = retry_std()
        .env(
            "XDG_RUNTIME_DIR",
            common::runtime_dir("records-signal-start"),
        )
        .args(["-n", "3", "--log-format", "json", "--quota"])
        .arg(format!("redis://127.0.0.1:{port}/q"))
        .args(["--history"])
        .arg(dir.join("history"))
        .args(["--", "sh", "-c"])
        .arg(format!("touch '{}'", dir.join("ran").display()))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (socket, _) = listener.accept().unwrap();
    send(child.id(), nix::libc::SIGTERM);
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    drop(socket);
    let mut text = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut text).unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(15),
        "{text}"
    );
    assert!(started.elapsed() < common::STEP_LIMIT);
    assert!(!dir.join("ran").exists(), "no try ran");
    let log = json_lines(&text);
    assert!(common::events(&log, "try").is_empty(), "{text}");
    let signal = common::event(&log, "signal");
    assert_eq!(signal["attempt"], 0, "{signal}");
    assert_eq!(signal["during"], "start", "{signal}");
    assert_eq!(common::event(&log, "give_up")["tries"], 0, "{text}");
    assert_eq!(json_file(&dir.join("history"))[0]["tries"], 0);
}
