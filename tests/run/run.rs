//! Real runs through the real binary: tries, verdicts, exit statuses, the log, the child's
//! environment. Every test is bounded (common::TEST_LIMIT); times are checked with a lower bound
//! and a generous upper bound.

use crate::common;

use std::time::{Duration, Instant};

use common::{event_names, retry, stderr_of, stdout_of};

fn lines_with(text: &str, needle: &str) -> usize {
    text.lines().filter(|l| l.contains(needle)).count()
}

#[test]
fn a_command_that_fails_twice_then_succeeds_runs_three_times() {
    let dir = common::temp_dir("counter");
    let counter = dir.join("count");
    let script = format!(
        "n=$(cat '{c}' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '{c}'; [ $n -ge 3 ]",
        c = counter.display()
    );
    let out = retry()
        .args(["-n", "5", "-d", "10ms", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert_eq!(std::fs::read_to_string(&counter).unwrap().trim(), "3");
    assert_eq!(lines_with(&log, "retry: try "), 3, "{log}");
    assert!(log.contains("retry: try 1/5 exited 1 after "), "{log}");
    assert!(log.contains("retry: try 3/5 succeeded after "), "{log}");
    let last = log.lines().last().unwrap();
    assert!(
        last.starts_with("retry: succeeded on try 3/5 in ") && last.contains("(2 failed tries, "),
        "{log}"
    );
}

#[test]
fn a_first_try_success_is_silent_and_verbose_explains_it() {
    let out = retry().args(["--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty(), "{}", stderr_of(&out));
    let out = retry().args(["-v", "--", "true"]).output().unwrap();
    let log = stderr_of(&out);
    assert!(log.contains("command: true"), "{log}");
    assert!(log.contains("policy: 3 tries"), "{log}");
    assert!(log.contains("seed: "), "{log}");
    assert!(log.contains("succeeded on try 1/3"), "{log}");
}

#[test]
fn gives_up_after_three_tries_with_the_last_exit_code_and_no_wait_after_the_last() {
    let started = Instant::now();
    let out = retry()
        .args([
            "-n", "3", "-d", "200ms", "-j", "none", "--", "sh", "-c", "exit 7",
        ])
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(7), "{log}");
    assert_eq!(lines_with(&log, "exited 7"), 3, "{log}");
    assert_eq!(lines_with(&log, "next try in"), 2, "{log}");
    assert!(
        log.contains("next try in 200ms") && log.contains("next try in 400ms"),
        "{log}"
    );
    assert!(log.contains("try 3/3 exited 7") && log.contains("giving up: no tries left"));
    assert!(log.contains("gave up after 3 tries in "), "{log}");
    // Two waits (200ms + 400ms) and no third one.
    assert!(took >= Duration::from_millis(600), "{took:?}");
    assert!(took < Duration::from_millis(600 + 5000), "{took:?}");
}

#[test]
fn stop_on_retry_on_and_success_on_decide_the_verdict() {
    let out = retry()
        .args(["-d", "0", "--stop-on", "2", "--", "sh", "-c", "exit 2"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(lines_with(&log, "retry: try "), 1, "{log}");
    assert!(log.contains("(permanent: --stop-on 2); giving up"), "{log}");
    assert!(log.contains("gave up after 1 try in "), "{log}");

    let out = retry()
        .args(["-d", "0", "--retry-on", "75", "--", "sh", "-c", "exit 1"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(lines_with(&log, "retry: try "), 1, "{log}");
    assert!(log.contains("permanent: not in --retry-on"), "{log}");

    let out = retry()
        .args(["-d", "0", "--success-on", "3", "--", "sh", "-c", "exit 3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

#[test]
fn a_missing_command_exits_127_and_a_non_executable_one_126_after_one_try() {
    let out = retry()
        .args(["-d", "0", "--", "retry-test-no-such-command"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(127), "{log}");
    assert_eq!(lines_with(&log, "retry: try "), 1, "{log}");
    assert!(
        log.contains("could not start: retry-test-no-such-command was not found"),
        "{log}"
    );

    let dir = common::temp_dir("noexec");
    let file = dir.join("script.sh");
    std::fs::write(&file, "#!/bin/sh\nexit 0\n").unwrap();
    let out = retry().args(["-d", "0", "--"]).arg(&file).output().unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(126), "{log}");
    assert_eq!(lines_with(&log, "retry: try "), 1, "{log}");
    assert!(
        log.contains("cannot be executed: Permission denied"),
        "{log}"
    );
}

#[test]
fn a_directory_found_on_path_cannot_be_executed_as_with_timeout() {
    // `timeout 10 .` says "Permission denied" and exits 126: a directory of that name is on
    // PATH (every entry of PATH has a `.`), and execve refuses it.
    let dir = common::temp_dir("dir-on-path");
    std::fs::create_dir_all(dir.join("tool")).unwrap();
    for name in [".", "tool"] {
        let out = retry()
            .env("PATH", format!("{}:/usr/bin:/bin", dir.display()))
            .args(["-d", "0", "--", name])
            .output()
            .unwrap();
        let log = stderr_of(&out);
        assert_eq!(out.status.code(), Some(126), "{name}: {log}");
        assert_eq!(lines_with(&log, "retry: try "), 1, "{log}");
    }
}

#[test]
fn a_try_killed_by_a_signal_gives_128_plus_n() {
    let out = retry()
        .args(["-n", "2", "-d", "0", "--", "sh", "-c", "kill -KILL $$"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(128 + 9), "{log}");
    assert_eq!(lines_with(&log, "was killed by SIGKILL"), 2, "{log}");
}

#[test]
fn a_sigint_death_or_exit_130_is_never_retried() {
    let out = retry()
        .args(["-n", "5", "-d", "0", "--", "sh", "-c", "exit 130"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(130), "{log}");
    assert_eq!(lines_with(&log, "retry: try "), 1, "{log}");
    assert!(log.contains("(interrupted)"), "{log}");

    // A try that dies of SIGINT: retry dies of SIGINT too.
    let out = retry()
        .args(["-n", "5", "-d", "0", "--", "sh", "-c", "kill -INT $$"])
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(2), "{}", stderr_of(&out));
    assert_eq!(lines_with(&stderr_of(&out), "retry: try "), 1);
}

#[test]
fn nothing_retry_writes_goes_to_stdout() {
    let out = retry()
        .args(["-n", "2", "-d", "0", "--", "printf", "x"])
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"x");
    let out = retry()
        .args([
            "-v",
            "-n",
            "2",
            "-d",
            "0",
            "--",
            "sh",
            "-c",
            "printf 'a\\0b'; exit 1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"a\0ba\0b");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn stdin_reaches_the_command() {
    let out = retry()
        .args(["--", "cat"])
        .write_stdin("hello\n")
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"hello\n");
}

#[test]
fn the_child_sees_its_attempt_the_limits_and_one_run_id() {
    let dir = common::temp_dir("env");
    let file = dir.join("env");
    let script = format!(
        "echo \"$RETRY_ATTEMPT $RETRY_MAX_TRIES $RETRY_RUN_ID ${{RETRY_DEADLINE_MS:-none}}\" >> '{}'; exit 1",
        file.display()
    );
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    retry()
        .args(["-n", "3", "-d", "0", "-B", "60s", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(rows.len(), 3, "{text}");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row[0], (i + 1).to_string());
        assert_eq!(row[1], "3");
        assert_eq!(row[2], rows[0][2], "the run id is the same for every try");
        assert!(row[2].len() >= 16, "{text}");
        let deadline: u64 = row[3].parse().expect("RETRY_DEADLINE_MS is a number");
        assert!(
            deadline >= before + 59_000 && deadline <= before + 61_000,
            "{deadline}"
        );
    }

    let out = retry()
        .args([
            "-n",
            "0",
            "--",
            "sh",
            "-c",
            "echo \"$RETRY_MAX_TRIES ${RETRY_DEADLINE_MS:-none}\"",
        ])
        .output()
        .unwrap();
    assert_eq!(stdout_of(&out), "0 none\n");
    // Two runs have two run ids.
    let id = |_: ()| {
        stdout_of(
            &retry()
                .args(["--", "sh", "-c", "echo $RETRY_RUN_ID"])
                .output()
                .unwrap(),
        )
    };
    assert_ne!(id(()), id(()));
}

#[test]
fn a_budget_stops_the_try_at_the_deadline() {
    let started = Instant::now();
    let out = retry()
        .args(["-B", "1s", "-k", "2s", "--", "sleep", "30"])
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(124), "{log}");
    assert!(took >= Duration::from_millis(900), "{took:?}");
    // sleep dies of SIGTERM at once: well under the budget plus the grace period.
    assert!(took < Duration::from_millis(1000 + 1500), "{took:?}");
    // The budget, not a --timeout, ended the try: the log says so.
    assert!(
        log.contains("try 1/3 stopped at the end of the budget after"),
        "{log}"
    );
    assert!(!log.contains("timed out"), "{log}");
    assert!(log.contains("giving up: budget: "), "{log}");
}

#[test]
fn the_budget_rule_gives_up_without_sleeping_and_shows_its_numbers() {
    let started = Instant::now();
    let out = retry()
        .args([
            "-n",
            "0",
            "-B",
            "3s",
            "-t",
            "2s",
            "-d",
            "100ms",
            "-j",
            "none",
            "--backoff",
            "constant",
            "--",
            "false",
        ])
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    // Tries may start while now + 100ms + 2s ≤ 3s: for about 0.9s, then no more.
    assert!(took >= Duration::from_millis(800), "{took:?}");
    assert!(took < Duration::from_millis(2500), "{took:?}");
    let last_try = log.lines().rfind(|l| l.contains("retry: try ")).unwrap();
    assert!(
        last_try.contains("giving up: budget: ")
            && last_try.contains(" used + 100ms wait + 2s timeout > 3s"),
        "{log}"
    );
}

#[test]
fn a_sigpipe_death_is_permanent() {
    let retry_bin = assert_cmd::cargo::cargo_bin("retry");
    // -v: without it the run ends as quietly as the bare pipeline.
    let script = format!("'{}' -v -d 0 -- yes | head -1", retry_bin.display());
    let out = assert_cmd::Command::new("sh")
        .args(["-c", &script])
        .timeout(common::TEST_LIMIT)
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(stdout_of(&out), "y\n");
    assert_eq!(lines_with(&log, "] try "), 1, "{log}");
    assert!(
        log.contains("try 1/3 was killed by SIGPIPE after "),
        "{log}"
    );
    assert!(
        log.contains("(permanent: the reader of its output is gone); giving up"),
        "{log}"
    );
}

#[test]
fn quiet_keeps_only_the_gave_up_line() {
    let out = retry()
        .args(["-q", "-n", "3", "-d", "0", "--", "false"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.starts_with("retry: gave up after 3 tries in "), "{log}");
    let out = retry()
        .args(["-q", "-n", "3", "-d", "0", "--", "true"])
        .output()
        .unwrap();
    assert!(out.stderr.is_empty());
}

#[test]
fn log_file_gets_the_log_and_stderr_stays_clean() {
    let dir = common::temp_dir("logfile");
    let path = dir.join("retry.log");
    let out = retry()
        .args(["-n", "2", "-d", "0", "--log-file"])
        .arg(&path)
        .args(["--", "false"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stderr.is_empty(), "{}", stderr_of(&out));
    let log = std::fs::read_to_string(&path).unwrap();
    assert_eq!(lines_with(&log, "retry: try "), 2, "{log}");
    assert!(!log.contains('\x1b'), "no colour in a file: {log:?}");

    let out = retry()
        .args(["--log-file", "/nonexistent-dir/x.log", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr_of(&out).contains("--log-file"));
}

#[test]
fn color_always_paints_and_never_does_not() {
    let run = |when: &str| {
        stderr_of(
            &retry()
                .args(["--color", when, "-n", "2", "-d", "0", "--", "false"])
                .output()
                .unwrap(),
        )
    };
    assert!(run("always").contains("\x1b["));
    assert!(!run("never").contains("\x1b["));
    // auto: stderr is a pipe here.
    assert!(!run("auto").contains("\x1b["));
}

#[test]
fn json_log_lines_carry_the_fields_of_the_spec_in_order() {
    let out = retry()
        .args([
            "--log-format",
            "json",
            "-n",
            "3",
            "-d",
            "10ms",
            "--seed",
            "7",
            "--",
            "sh",
            "-c",
            "exit 7",
        ])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(7));
    let events: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let keys = |line: &str| -> Vec<String> {
        // serde_json sorts keys; read the order from the text.
        let mut keys = Vec::new();
        let mut depth = 0;
        let mut chars = line.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '{' | '[' => depth += 1,
                '}' | ']' => depth -= 1,
                '"' => {
                    let rest = &line[i + 1..];
                    let end = rest.find('"').unwrap();
                    let word = &rest[..end];
                    if depth == 1 && line[i + 1 + end + 1..].starts_with(':') {
                        keys.push(word.to_string());
                    }
                    for _ in 0..=end {
                        chars.next();
                    }
                }
                _ => {}
            }
        }
        keys
    };
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(
        event_names(&events),
        ["start", "try", "wait", "try", "wait", "try", "give_up"],
        "{log}"
    );
    assert_eq!(
        keys(lines[0])[..5],
        ["event", "ts", "run_id", "command", "policy"]
    );
    let policy_keys: Vec<String> = events[0]["policy"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    for k in [
        "tries",
        "budget_ms",
        "timeout_ms",
        "backoff",
        "jitter",
        "seed",
    ] {
        assert!(policy_keys.contains(&k.to_string()), "{k}");
    }
    assert_eq!(events[0]["policy"]["seed"], "7");
    assert_eq!(
        events[0]["command"],
        serde_json::json!(["sh", "-c", "exit 7"])
    );
    assert_eq!(
        keys(lines[1])[..7],
        [
            "event",
            "ts",
            "run_id",
            "attempt",
            "duration_ms",
            "outcome",
            "verdict"
        ]
    );
    assert_eq!(events[1]["outcome"], serde_json::json!({"exit": 7}));
    assert_eq!(events[1]["verdict"], "transient");
    assert_eq!(
        keys(lines[2])[..6],
        ["event", "ts", "run_id", "attempt", "base_ms", "delay_ms"]
    );
    assert_eq!(
        keys(lines[6])[..5],
        ["event", "ts", "run_id", "reason", "exit_code"]
    );
    assert_eq!(events[6]["reason"], "tries");
    assert_eq!(events[6]["exit_code"], 7);
    let run_id = &events[0]["run_id"];
    assert!(events.iter().all(|e| &e["run_id"] == run_id));
    let ts = events[0]["ts"].as_str().unwrap();
    assert!(
        ts.ends_with('Z') && ts.len() == "2026-01-01T00:00:00.000Z".len(),
        "{ts}"
    );

    let out = retry()
        .args(["--log-format", "json", "-n", "2", "-d", "0", "--", "true"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    let names: Vec<String> = log
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(names, ["start", "try", "success"]);
}

#[test]
fn a_real_run_waits_exactly_the_waits_of_the_dry_run() {
    let args = [
        "-n",
        "6",
        "-d",
        "20ms",
        "-m",
        "200ms",
        "--seed",
        "12345",
        "--log-format",
        "json",
    ];
    let planned: Vec<u64> = stdout_of(&retry().arg("--dry-run").args(args).output().unwrap())
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "plan")
        .filter_map(|v| v["delay_ms"].as_u64())
        .collect();
    let real: Vec<u64> = stderr_of(&retry().args(args).args(["--", "false"]).output().unwrap())
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "wait")
        .filter_map(|v| v["delay_ms"].as_u64())
        .collect();
    assert_eq!(planned.len(), 5);
    assert_eq!(planned, real);
    for jitter in ["equal", "decorrelated"] {
        let args = [
            "-n",
            "4",
            "-d",
            "10ms",
            "-m",
            "100ms",
            "--seed",
            "9",
            "-j",
            jitter,
            "--log-format",
            "json",
        ];
        let out = retry().arg("--dry-run").args(args).output().unwrap();
        let planned: Vec<u64> = stdout_of(&out)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v["delay_ms"].as_u64())
            .collect();
        let out = retry().args(args).args(["--", "false"]).output().unwrap();
        let real: Vec<u64> = stderr_of(&out)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["event"] == "wait")
            .filter_map(|v| v["delay_ms"].as_u64())
            .collect();
        assert_eq!(planned, real, "{jitter}");
    }
}

#[test]
fn many_tries_leave_no_zombie_and_do_not_grow_memory() {
    // The command reports on its parent, retry: its resident memory at try 10 and at try 200,
    // and at try 200 how many of retry's children are zombies.
    let dir = common::temp_dir("many");
    let report = dir.join("report");
    let script = format!(
        r#"case $RETRY_ATTEMPT in
             10|200) grep VmRSS /proc/$PPID/status | tr -s ' ' | cut -d' ' -f2 >> '{r}';;
           esac
           if [ "$RETRY_ATTEMPT" = 200 ]; then
             z=0
             for c in $(cat /proc/$PPID/task/*/children); do
               [ "$c" = $$ ] && continue
               grep -q '^State:.*Z' /proc/$c/status 2>/dev/null && z=$((z+1))
             done
             echo $z >> '{r}'
             exit 0
           fi
           exit 1"#,
        r = report.display()
    );
    let out = retry()
        .args(["-n", "200", "-d", "0", "-q", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let numbers: Vec<u64> = std::fs::read_to_string(&report)
        .unwrap()
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    let [rss_10, rss_200, zombies] = numbers[..] else {
        panic!("{numbers:?}")
    };
    assert_eq!(zombies, 0);
    // Resident memory in KiB: a leak per try would add far more than this over 190 tries.
    assert!(
        rss_200 <= rss_10 + 256,
        "grew from {rss_10} KiB to {rss_200} KiB"
    );
}

#[test]
fn a_script_without_a_shebang_runs_with_sh_as_execvp_would() {
    let dir = common::temp_dir("noshebang");
    let script = dir.join("job");
    std::fs::write(&script, "echo ran-$RETRY_ATTEMPT \"$@\"\nexit 3\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = retry()
        .args(["-n", "2", "-d", "0", "--"])
        .arg(&script)
        .args(["a", "b"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "ran-1 a b\nran-2 a b\n");
    // Found on PATH too.
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = retry()
        .env("PATH", path)
        .args(["-n", "1", "--", "job", "x"])
        .output()
        .unwrap();
    assert_eq!(stdout_of(&out), "ran-1 x\n", "{}", stderr_of(&out));
}
