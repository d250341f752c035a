//! Hooks, CI annotations and nested runs (docs/log.md#hooks, docs/log.md#terminals-ci-and-nesting),
//! through the real binary.

use crate::common;

use std::time::{Duration, Instant};

use common::{retry, stderr_of, stdout_of};

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
fn a_nested_retry_warns_once_and_the_tries_multiply() {
    // `retry -n 2 -- retry -n 3 -- false`, with short waits: the default ones (a second and
    // more) would only make the test slow.
    let retry_bin = assert_cmd::cargo::cargo_bin("retry");
    // The log's `×` needs a UTF-8 locale (tests/cli/log.rs has the ASCII one).
    let out = retry()
        .env("LC_ALL", "C.UTF-8")
        .args(["-n", "2", "-d", "20ms", "--"])
        .arg(&retry_bin)
        .args(["-n", "3", "-d", "20ms", "--", "false"])
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

/// `retry` under GitHub Actions, in a UTF-8 locale (the summaries' `×`).
fn github() -> assert_cmd::Command {
    let mut cmd = retry();
    cmd.env("GITHUB_ACTIONS", "true").env("LC_ALL", "C.UTF-8");
    cmd
}

/// `retry` under GitLab CI.
fn gitlab() -> assert_cmd::Command {
    let mut cmd = retry();
    cmd.env("GITLAB_CI", "true").env("LC_ALL", "C.UTF-8");
    cmd
}

/// A command that fails until its try `n`, writing `out K` to stdout and `err K` to stderr.
fn flaky(n: u64) -> [String; 3] {
    [
        "sh".into(),
        "-c".into(),
        format!(
            r#"echo out $RETRY_ATTEMPT; echo err $RETRY_ATTEMPT >&2; [ "$RETRY_ATTEMPT" -ge {n} ]"#
        ),
    ]
}

/// The GitHub annotations in `log`: (level, title, message).
fn annotations(log: &str) -> Vec<(String, String, String)> {
    log.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("::")?;
            let (head, message) = rest.split_once("::")?;
            let (level, properties) = head.split_once(' ').unwrap_or((head, ""));
            if !matches!(level, "warning" | "error" | "notice") {
                return None;
            }
            let title = properties.strip_prefix("title=").unwrap_or(properties);
            Some((level.into(), title.into(), message.into()))
        })
        .collect()
}

/// Checks that the `::group::` lines of `log` are balanced and never nested; returns the
/// groups' titles in order.
fn github_groups(log: &str) -> Vec<String> {
    let mut titles = Vec::new();
    let mut open = false;
    for line in log.lines() {
        if let Some(title) = line.strip_prefix("::group::") {
            assert!(!open, "a group opened inside another: {log}");
            open = true;
            titles.push(title.to_string());
        } else if line == "::endgroup::" {
            assert!(open, "a group closed that was not open: {log}");
            open = false;
        }
    }
    assert!(!open, "a group left open: {log}");
    titles
}

#[test]
fn a_flaky_run_ends_with_one_warning_that_sums_it_up() {
    let out = github()
        .args(["-n", "6", "-d", "0", "--"])
        .args(flaky(6))
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    let found = annotations(&log);
    assert_eq!(found.len(), 1, "{log}");
    let (level, title, message) = &found[0];
    // Without a label, the command names the run.
    assert_eq!(level, "warning");
    assert!(title.starts_with("retry%3A sh -c 'echo out"), "{title}");
    let message = message
        .strip_prefix("sh -c 'echo out $RETRY_ATTEMPT; echo …: ")
        .unwrap_or_else(|| panic!("not named by the command: {message}"));
    assert!(
        message.starts_with("succeeded on try 6/6 after 5 failures: exit 1 ×5 (")
            && message.ends_with(" waiting)"),
        "{log}"
    );
    // stdout stays the command's, every try of it.
    let expected: String = (1..=6).map(|k| format!("out {k}\n")).collect();
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
}

#[test]
fn a_run_that_gives_up_ends_with_one_error() {
    let out = github()
        .args(["-n", "3", "-d", "0", "--", "sh", "-c", "exit 4"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(4), "{log}");
    let found = annotations(&log);
    assert_eq!(found.len(), 1, "{log}");
    let (level, _, message) = &found[0];
    assert_eq!(level, "error");
    assert!(
        message.starts_with("sh -c 'exit 4': gave up after 3 tries in ")
            && message.ends_with(", no tries left: exit 4 ×3"),
        "{log}"
    );

    let out = github()
        .args([
            "-n",
            "3",
            "-d",
            "0",
            "--stop-on",
            "2",
            "--",
            "sh",
            "-c",
            "exit 2",
        ])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    let found = annotations(&log);
    assert_eq!(found.len(), 1, "{log}");
    assert!(
        found[0]
            .2
            .starts_with("sh -c 'exit 2': gave up after 1 try in ")
            && found[0].2.ends_with(", the failure is permanent: exit 2"),
        "{log}"
    );
}

#[test]
fn no_log_line_is_printed_twice_under_github_actions() {
    for (args, end, status) in [
        (flaky(6), "succeeded on try 6/6", 0),
        (flaky(9), "gave up after 6 tries", 1),
    ] {
        let out = github()
            .args(["-n", "6", "-d", "0", "--"])
            .args(args)
            .output()
            .unwrap();
        let log = stderr_of(&out);
        assert_eq!(out.status.code(), Some(status), "{log}");
        let lines: Vec<&str> = log.lines().filter(|l| *l != "::endgroup::").collect();
        let distinct: std::collections::HashSet<&str> = lines.iter().copied().collect();
        assert_eq!(distinct.len(), lines.len(), "a line repeated in {log}");
        // The end of the run is said once, as the annotation.
        assert_eq!(log.matches(end).count(), 1, "{log}");
        assert!(log.contains(&format!("…: {end}")), "{log}");
        // Each try is told once.
        for k in 1..=6 {
            let line = format!("retry: try {k}/6 ");
            assert_eq!(log.matches(&line).count(), 1, "{log}");
        }
    }

    // With the log in a file, the file has the log and standard error the annotation.
    let dir = common::temp_dir("gh-file");
    let file = dir.join("retry.log");
    let out = github()
        .args(["-n", "2", "-d", "0", "--log-file"])
        .arg(&file)
        .args(["--", "sh", "-c", "exit 4"])
        .output()
        .unwrap();
    let log = std::fs::read_to_string(&file).unwrap();
    let stderr = stderr_of(&out);
    assert!(log.contains("retry: gave up after 2 tries"), "{log}");
    assert!(!log.contains("::"), "{log}");
    assert_eq!(annotations(&stderr).len(), 1, "{stderr}");
    assert!(stderr.lines().all(|l| l.starts_with("::")), "{stderr}");
}

#[test]
fn a_first_try_success_is_never_folded_and_later_tries_are() {
    for verbose in [&[][..], &["-v"]] {
        let out = github()
            .args(verbose)
            .args([
                "-n",
                "3",
                "-d",
                "0",
                "--",
                "sh",
                "-c",
                "echo first; echo first-err >&2",
            ])
            .output()
            .unwrap();
        let log = stderr_of(&out);
        assert_eq!(out.status.code(), Some(0), "{log}");
        assert_eq!(stdout_of(&out), "first\n");
        assert!(!log.contains("::"), "{verbose:?}: {log}");
        assert!(log.contains("first-err\n"), "{log}");
    }

    let out = github()
        .args(["-n", "4", "-d", "0", "--"])
        .args(flaky(4))
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(
        github_groups(&log),
        ["retry: try 2/4", "retry: try 3/4", "retry: try 4/4"]
    );
    // The first try's output is outside any group, each later try's inside its own, and the
    // line about each try follows its group.
    let lines: Vec<&str> = log.lines().collect();
    let at = |text: &str| lines.iter().position(|l| *l == text).unwrap();
    assert!(at("err 1") < at("::group::retry: try 2/4"), "{log}");
    for k in 2..=4 {
        let group = at(&format!("::group::retry: try {k}/4"));
        assert_eq!(lines[group + 1], format!("err {k}"), "{log}");
        assert_eq!(lines[group + 2], "::endgroup::", "{log}");
        assert!(
            lines[group + 3].starts_with(&format!("retry: try {k}/4 ")),
            "{log}"
        );
    }
}

#[test]
fn a_label_names_the_run_in_its_annotation_and_groups() {
    let out = github()
        .args([
            "--label",
            "db: eu,us",
            "-n",
            "2",
            "-d",
            "0",
            "--",
            "sh",
            "-c",
            "exit 4",
        ])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(github_groups(&log), ["retry[db: eu,us]: try 2/2"]);
    let found = annotations(&log);
    assert_eq!(found.len(), 1, "{log}");
    assert_eq!(found[0].1, "retry[db%3A eu%2Cus]", "{log}");
    assert!(
        found[0].2.starts_with("db: eu,us: gave up after 2 tries"),
        "{log}"
    );
    assert!(log.contains("retry[db: eu,us]: try 1/2 exited 4"), "{log}");
}

/// The rows of the Markdown tables in `text`, as their cells.
fn table_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| try |"))
        .map(|l| {
            l.trim_start_matches("| ")
                .trim_end_matches(" |")
                .split(" | ")
                .map(String::from)
                .collect()
        })
        .collect()
}

#[test]
fn a_run_that_retried_or_gave_up_appends_its_tries_to_the_job_summary() {
    let dir = common::temp_dir("step-summary");
    let summary = dir.join("summary.md");
    std::fs::write(&summary, "# Tests\n\n").unwrap();
    let out = github()
        .env("GITHUB_STEP_SUMMARY", &summary)
        .args(["--label", "api tests", "-n", "5", "-d", "0", "--"])
        .args(flaky(3))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // A first-try success adds nothing.
    let out = github()
        .env("GITHUB_STEP_SUMMARY", &summary)
        .args(["-n", "5", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = github()
        .env("GITHUB_STEP_SUMMARY", &summary)
        .args([
            "-n",
            "3",
            "-d",
            "0",
            "--stop-on",
            "4",
            "--",
            "sh",
            "-c",
            "exit 4",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));

    let text = std::fs::read_to_string(&summary).unwrap();
    let tables: Vec<&str> = text.split("### retry: ").collect();
    assert_eq!(tables.len(), 3, "{text}");
    assert_eq!(tables[0], "# Tests\n\n", "what was there is kept");

    let first = tables[1];
    assert!(first.starts_with("api tests\n\n`sh -c '"), "{first}");
    assert!(
        first.contains(": succeeded on try 3/5 after 2 failures: exit 1 ×2 ("),
        "{first}"
    );
    assert!(
        first.contains(
            "| try | outcome | duration | wait | verdict |\n|---:|:---|---:|---:|:---|\n"
        ),
        "{first}"
    );
    let rows = table_rows(first);
    let fixed: Vec<[&str; 4]> = rows
        .iter()
        .map(|r| [r[0].as_str(), r[1].as_str(), r[3].as_str(), r[4].as_str()])
        .collect();
    assert_eq!(
        fixed,
        [
            ["1/5", "exit 1", "0s", "transient"],
            ["2/5", "exit 1", "0s", "transient"],
            ["3/5", "exit 0", "-", "success"],
        ],
        "{first}"
    );
    assert!(
        rows.iter().all(|r| r[2].ends_with('s')),
        "durations: {first}"
    );

    let second = tables[2];
    assert!(
        second.starts_with("`sh -c 'exit 4'`\n\ngave up after 1 try in "),
        "{second}"
    );
    let rows = table_rows(second);
    assert_eq!(rows.len(), 1, "{second}");
    assert_eq!(
        [&rows[0][0], &rows[0][1], &rows[0][3], &rows[0][4]],
        ["1/3", "exit 4", "-", "permanent: --stop-on 4"]
    );
}

#[test]
fn runs_ending_together_each_append_a_whole_table() {
    let dir = common::temp_dir("step-summary-race");
    let summary = dir.join("summary.md");
    let mut children: Vec<_> = (0..4)
        .map(|k| {
            common::retry_std()
                .env("GITHUB_ACTIONS", "true")
                .env("GITHUB_STEP_SUMMARY", &summary)
                .args(["--label", &format!("run {k}"), "-n", "3", "-d", "0", "-q"])
                .args(["--", "sh", "-c", "exit 3"])
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in &mut children {
        let status = common::wait_bounded(child, Duration::from_secs(20));
        assert_eq!(status.code(), Some(3));
    }
    let text = std::fs::read_to_string(&summary).unwrap();
    let mut labels: Vec<&str> = Vec::new();
    for table in text.split("### retry: ").skip(1) {
        let (label, _) = table.split_once('\n').unwrap();
        labels.push(label);
        let tries: Vec<String> = table_rows(table)
            .into_iter()
            .map(|r| r[0].clone())
            .collect();
        assert_eq!(tries, ["1/3", "2/3", "3/3"], "{text}");
    }
    labels.sort_unstable();
    assert_eq!(labels, ["run 0", "run 1", "run 2", "run 3"], "{text}");
}

#[test]
fn a_json_log_on_stderr_stays_json_lines_under_any_ci() {
    let dir = common::temp_dir("ci-json");
    let summary = dir.join("summary.md");
    for ci in ["GITHUB_ACTIONS", "GITLAB_CI"] {
        for script in ["echo out; [ $RETRY_ATTEMPT -ge 3 ]", "echo out; exit 4"] {
            let out = retry()
                .env(ci, "true")
                .env("GITHUB_STEP_SUMMARY", &summary)
                .args(["--log-format", "json", "--label", "j", "-n", "3", "-d", "0"])
                .args(["--", "sh", "-c", script])
                .output()
                .unwrap();
            let log = stderr_of(&out);
            assert!(!log.is_empty());
            let events: Vec<serde_json::Value> = log
                .lines()
                .map(|l| {
                    serde_json::from_str(l).unwrap_or_else(|e| panic!("{ci}: {e}: {l:?} in {log}"))
                })
                .collect();
            // start, 3 tries, 2 waits, and the end.
            assert_eq!(events.len(), 7, "{log}");
            assert!(events.iter().all(|e| e["label"] == "j"), "{log}");
            assert_eq!(stdout_of(&out), "out\n".repeat(3));
        }
    }
    // The job summary is a file, not the stream: it still gets its tables.
    let text = std::fs::read_to_string(&summary).unwrap();
    assert_eq!(text.matches("### retry: j\n").count(), 4, "{text}");

    // With the JSON log in a file, standard error is free for the annotation and the groups.
    let file = dir.join("log.jsonl");
    let out = github()
        .args(["-n", "3", "-d", "0", "--log-format", "json", "--log-file"])
        .arg(&file)
        .args(["--", "sh", "-c", "exit 4"])
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert_eq!(annotations(&stderr).len(), 1, "{stderr}");
    assert_eq!(github_groups(&stderr).len(), 2, "{stderr}");
    let json = std::fs::read_to_string(&file).unwrap();
    for line in json.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
}

/// The GitLab sections of `log`, checked to be balanced, unnested, collapsed and uniquely
/// named: (name, title) in order.
fn gitlab_sections(log: &str) -> Vec<(String, String)> {
    let mut sections = Vec::new();
    let mut open: Option<String> = None;
    for line in log.lines() {
        if let Some(rest) = line.strip_prefix("\x1b[0Ksection_start:") {
            let (ts, rest) = rest.split_once(':').unwrap();
            assert!(ts.parse::<u64>().is_ok(), "{line:?}");
            let (name, title) = rest.split_once("[collapsed=true]\r\x1b[0K").unwrap();
            assert!(open.is_none(), "a section opened inside another: {log:?}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
                "{name}"
            );
            open = Some(name.to_string());
            sections.push((name.to_string(), title.to_string()));
        } else if let Some(rest) = line.strip_prefix("\x1b[0Ksection_end:") {
            let (ts, rest) = rest.split_once(':').unwrap();
            assert!(ts.parse::<u64>().is_ok(), "{line:?}");
            let name = rest.strip_suffix("\r\x1b[0K").unwrap();
            assert_eq!(open.take().as_deref(), Some(name), "{log:?}");
        } else {
            assert!(!line.contains("section_"), "{line:?}");
        }
    }
    assert!(open.is_none(), "a section left open: {log:?}");
    let names: std::collections::HashSet<&String> = sections.iter().map(|(n, _)| n).collect();
    assert_eq!(names.len(), sections.len(), "names repeat: {log:?}");
    sections
}

#[test]
fn gitlab_sections_fold_each_later_try_balanced_and_uniquely_named() {
    let run = || {
        let out = gitlab()
            .args(["--label", "deploy", "-n", "4", "-d", "0", "--"])
            .args(flaky(9))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        stderr_of(&out)
    };
    let (first, second) = (run(), run());
    let a = gitlab_sections(&first);
    let b = gitlab_sections(&second);
    let titles: Vec<&str> = a.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        titles,
        [
            "retry[deploy]: try 2/4",
            "retry[deploy]: try 3/4",
            "retry[deploy]: try 4/4"
        ]
    );
    // Two runs in one job never share a section name.
    assert!(
        a.iter()
            .all(|(name, _)| !b.iter().any(|(other, _)| other == name))
    );
    // The try's output is inside its section, the log line about it after.
    assert!(
        first.contains(
            "[collapsed=true]\r\x1b[0Kretry[deploy]: try 2/4\nerr 2\n\x1b[0Ksection_end:"
        )
    );
    assert!(!first.contains("::"), "{first:?}");

    let out = gitlab()
        .args(["-n", "3", "--", "sh", "-c", "echo first >&2"])
        .output()
        .unwrap();
    assert_eq!(
        stderr_of(&out),
        "first\n",
        "a first-try success is not folded"
    );
}

/// The step outputs a run appends to GITHUB_OUTPUT, as a map (the last value of a name wins,
/// as GitHub reads them).
pub(crate) fn step_outputs(file: &std::path::Path) -> std::collections::HashMap<String, String> {
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.ends_with('\n'), "{text:?}");
    text.lines()
        .map(|l| {
            let (k, v) = l
                .split_once('=')
                .unwrap_or_else(|| panic!("not name=value: {l}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

#[test]
fn every_run_hands_its_outcome_to_later_steps_in_github_output() {
    let dir = common::temp_dir("outputs");
    let outputs = dir.join("outputs");
    let out = retry()
        .env("GITHUB_OUTPUT", &outputs)
        .args(["-n", "4", "-d", "10ms", "--", "sh", "-c"])
        .arg(format!(
            "n=$(cat {c} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {c}; [ $n -ge 3 ] || exit 3",
            c = dir.join("count").display()
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let got = step_outputs(&outputs);
    assert_eq!(got["tries"], "3");
    assert_eq!(got["exit_code"], "0");
    assert_eq!(got["flaky"], "true");
    assert_eq!(got["outcome"], "success");
    assert_eq!(got["reason"], "");

    // A second run in the same step: its values are the ones read.
    let out = retry()
        .env("GITHUB_OUTPUT", &outputs)
        .args(["-n", "2", "-d", "10ms", "--", "sh", "-c", "exit 4"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let got = step_outputs(&outputs);
    assert_eq!(got["tries"], "2");
    assert_eq!(got["exit_code"], "4");
    assert_eq!(got["flaky"], "false");
    assert_eq!(got["outcome"], "gave_up");
    assert_eq!(got["reason"], "tries");
    assert_eq!(
        std::fs::read_to_string(&outputs).unwrap().lines().count(),
        10
    );

    // A first try that succeeds is no flake.
    let out = retry()
        .env("GITHUB_OUTPUT", &outputs)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(step_outputs(&outputs)["flaky"], "false");
    assert_eq!(step_outputs(&outputs)["tries"], "1");
}

#[test]
fn an_outputs_file_that_cannot_be_written_warns_once_and_changes_nothing_else() {
    let dir = common::temp_dir("outputs-bad");
    let out = retry()
        .env("GITHUB_OUTPUT", &dir)
        .args(["-n", "2", "-d", "10ms", "--", "sh", "-c", "exit 4"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(4), "{log}");
    assert_eq!(
        log.matches("cannot append the step outputs to").count(),
        1,
        "{log}"
    );
}
