//! `--output-on-failure` (docs/output.md#output-on-failure), through the real binary: a run that
//! succeeds prints only the successful try's output (and under GitHub its one annotation); a run
//! that fails prints everything it held, in the order it happened, on standard error; what is
//! held goes to a temporary file, so that retry's memory stays bounded whatever the output.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{self, retry, retry_std, stderr_of, stdout_of, temp_dir, usage_error_of};

/// A script that counts its runs in the file `$0`, writes `out N` to standard output and
/// `err N` to standard error, and succeeds from run `from` on (never, for 0).
fn counted(from: u64) -> String {
    let last = match from {
        0 => "exit 3".to_string(),
        n => format!("[ $n -ge {n} ] || exit 3"),
    };
    format!(
        "n=$(cat \"$0\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$0\"; \
         echo \"out $n\"; echo \"err $n\" >&2; {last}"
    )
}

/// `retry ARGS -- sh -c SCRIPT COUNTER` in a fresh directory, with the environment `env`.
fn run_counted(args: &[&str], script: &str, env: &[(&str, &str)]) -> std::process::Output {
    let dir = temp_dir("output-on-failure");
    retry()
        .envs(env.iter().copied())
        .current_dir(&dir)
        .args(args)
        .args(["--", "sh", "-c", script])
        .arg(dir.join("count"))
        .output()
        .unwrap()
}

/// The same, with standard output and error on one pipe (`2>&1`), as cron and CI read them.
fn merged(args: &[&str], script: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let dir = temp_dir("output-on-failure-merged");
    let mut cmd = assert_cmd::Command::new("sh");
    cmd.timeout(common::TEST_LIMIT)
        .envs(env.iter().copied())
        .env_remove("RETRY_RUN_ID")
        .current_dir(&dir)
        .arg("-c")
        .arg(r#"exec "$0" "$@" 2>&1"#)
        .arg(assert_cmd::cargo::cargo_bin("retry"))
        .args(args)
        .args(["--", "sh", "-c", script])
        .arg(dir.join("count"));
    for name in common::CI_VARS {
        if !env.iter().any(|(set, _)| set == &name) {
            cmd.env_remove(name);
        }
    }
    let out = cmd.output().unwrap();
    (out.status.code(), stdout_of(&out))
}

/// Fails unless the lines of `text` start, one for one, with `starts`.
fn assert_lines(text: &str, starts: &[&str]) {
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), starts.len(), "{text}");
    for (line, start) in lines.iter().zip(starts) {
        assert!(
            line.starts_with(start),
            "{line:?} is not {start:?}… in\n{text}"
        );
    }
}

#[test]
fn a_late_success_prints_only_the_successful_try_s_output() {
    let args = ["--output-on-failure", "-n", "3", "-d", "1ms"];
    let out = run_counted(&args, &counted(3), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "out 3\n");
    assert_eq!(stderr_of(&out), "", "nothing else, not even a warning");

    // Byte for byte, with no line end.
    let script =
        "[ -e \"$0\" ] || { : > \"$0\"; echo no; exit 1; }; printf 'a\\000b\\r\\n\\377end'";
    let out = run_counted(&args, script, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(out.stdout, b"a\0b\r\n\xffend");
    assert!(out.stderr.is_empty(), "{}", stderr_of(&out));
}

#[test]
fn a_run_that_gives_up_prints_every_try_s_output_in_order_with_its_lines() {
    let args = ["--output-on-failure", "-n", "2", "-d", "1ms"];
    let lines = [
        "err 1",
        "out 1",
        "retry: try 1/2 exited 3 after ",
        "err 2",
        "out 2",
        "retry: try 2/2 exited 3 after ",
        "retry: gave up after 2 tries in ",
    ];
    // On one file, each try's output in the order it wrote it.
    let in_order = [
        "out 1",
        "err 1",
        "retry: try 1/2 exited 3 after ",
        "out 2",
        "err 2",
        "retry: try 2/2 exited 3 after ",
        "retry: gave up after 2 tries in ",
    ];
    let (code, both) = merged(&args, &counted(0), &[]);
    assert_eq!(code, Some(3), "{both}");
    assert_lines(&both, &in_order);

    // Apart, everything held goes to standard error: standard output is the successful try's
    // alone, as with --buffer-stdout.
    let out = run_counted(&args, &counted(0), &[]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stdout_of(&out), "");
    assert_lines(&stderr_of(&out), &lines);
}

#[test]
fn flaky_fail_prints_everything_with_the_successful_output_in_its_place() {
    let args = [
        "--output-on-failure",
        "--flaky",
        "fail",
        "-n",
        "3",
        "-d",
        "1ms",
    ];
    let (code, both) = merged(&args, &counted(2), &[]);
    assert_eq!(code, Some(3), "{both}");
    assert_lines(
        &both,
        &[
            "out 1",
            "err 1",
            "retry: try 1/3 exited 3 after ",
            "out 2",
            "err 2",
            "retry: try 2/3 succeeded after ",
            "retry: succeeded on try 2/3, but --flaky fail: exit 3",
        ],
    );
    let out = run_counted(&args, &counted(2), &[]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stdout_of(&out), "out 2\n");
    let log = stderr_of(&out);
    assert!(log.starts_with("err 1\nout 1\nretry: try 1/3 "), "{log}");
    assert!(!log.contains("out 2"), "{log}");
}

#[test]
fn under_github_a_late_success_prints_its_one_annotation_and_nothing_else() {
    let github = [("GITHUB_ACTIONS", "true")];
    let args = ["--output-on-failure", "-n", "3", "-d", "1ms"];
    let out = run_counted(&args, &counted(2), &github);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "out 2\n");
    assert_lines(&stderr_of(&out), &["::warning title=retry"]);
    assert!(stderr_of(&out).contains("succeeded on try 2/3 after 1 failure"));

    // The output that a late success leaves unfinished does not take the annotation's line.
    let script = "[ -e \"$0\" ] || { : > \"$0\"; exit 1; }; printf 'progress 50%%'";
    let (code, both) = merged(&args, script, &github);
    assert_eq!(code, Some(0), "{both}");
    assert_lines(&both, &["progress 50%", "::warning title=retry"]);

    // A run that gives up prints its groups too, and the annotation last.
    let (code, both) = merged(
        &["--output-on-failure", "-n", "2", "-d", "1ms"],
        &counted(0),
        &github,
    );
    assert_eq!(code, Some(3), "{both}");
    assert_lines(
        &both,
        &[
            "out 1",
            "err 1",
            "retry: try 1/2 exited 3 after ",
            "::group::retry: try 2/2",
            "out 2",
            "err 2",
            "::endgroup::",
            "retry: try 2/2 exited 3 after ",
            "::error title=retry",
        ],
    );
}

#[test]
fn a_try_s_unfinished_line_is_followed_by_retry_s_line_on_a_line_of_its_own() {
    let args = ["--output-on-failure", "-n", "2", "-d", "1ms"];
    for stream in ["", ">&2"] {
        let script = format!("printf 'progress 50%%' {stream}; exit 1");
        let (code, both) = merged(&args, &script, &[]);
        assert_eq!(code, Some(1), "{both}");
        assert_lines(
            &both,
            &[
                "progress 50%",
                "retry: try 1/2 exited 1 after ",
                "progress 50%",
                "retry: try 2/2 exited 1 after ",
                "retry: gave up after 2 tries in ",
            ],
        );
        assert_eq!(both.matches("progress 50%").count(), 2);
        assert!(
            both.lines()
                .filter(|l| l.starts_with("progress"))
                .all(|l| l == "progress 50%")
        );
    }
}

#[test]
fn a_failed_try_s_stdout_does_not_join_a_line_its_stderr_left_unfinished() {
    let args = ["--output-on-failure", "-n", "1"];
    let script = "echo out; printf 'err, no line break' >&2; exit 3";
    let (code, both) = merged(&args, script, &[]);
    assert_eq!(code, Some(3), "{both}");
    assert_lines(
        &both,
        &[
            "out",
            "err, no line break",
            "retry: try 1/1 exited 3 after ",
            "retry: gave up after 1 try in ",
        ],
    );
}

#[test]
fn quiet_and_verbose_still_shape_retry_s_own_lines() {
    let quiet = ["--output-on-failure", "-q", "-n", "2", "-d", "1ms"];
    let (code, both) = merged(&quiet, &counted(0), &[]);
    assert_eq!(code, Some(3), "{both}");
    assert_lines(
        &both,
        &[
            "out 1",
            "err 1",
            "out 2",
            "err 2",
            "retry: gave up after 2 tries",
        ],
    );

    let verbose = ["--output-on-failure", "-v", "-n", "2", "-d", "1ms"];
    let (code, both) = merged(&verbose, &counted(0), &[]);
    assert_eq!(code, Some(3), "{both}");
    assert!(both.starts_with("retry: ["), "-v stamps its lines: {both}");
    assert!(both.contains("] command: sh -c "), "{both}");
    let out = run_counted(&verbose, &counted(1), &[]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout_of(&out), "out 1\n");
    assert_eq!(stderr_of(&out), "", "-v shapes lines a success drops");
}

#[test]
fn the_hooks_output_is_held_with_the_rest() {
    let args = [
        "--output-on-failure",
        "-n",
        "2",
        "-d",
        "1ms",
        "--on-retry",
        "echo hook after $RETRY_ATTEMPT",
        "--on-give-up",
        "echo giving up >&2",
    ];
    let out = run_counted(&args, &counted(2), &[]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout_of(&out), "out 2\n");
    assert_eq!(stderr_of(&out), "");

    let (code, both) = merged(&args, &counted(0), &[]);
    assert_eq!(code, Some(3), "{both}");
    assert_lines(
        &both,
        &[
            "out 1",
            "err 1",
            "retry: try 1/2 exited 3 after ",
            "hook after 1",
            "out 2",
            "err 2",
            "retry: try 2/2 exited 3 after ",
            "retry: gave up after 2 tries in ",
            "giving up",
        ],
    );
}

#[test]
fn the_json_log_is_not_held() {
    let args = [
        "--output-on-failure",
        "--log-format",
        "json",
        "-n",
        "3",
        "-d",
        "1ms",
    ];
    let out = run_counted(&args, &counted(2), &[]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout_of(&out), "out 2\n");
    let log = stderr_of(&out);
    assert!(log.lines().count() >= 3, "{log}");
    assert!(log.lines().all(|l| l.starts_with("{\"event\":")), "{log}");
}

#[test]
fn an_interrupted_run_prints_what_it_held() {
    let dir = temp_dir("output-on-failure-interrupted");
    let started = dir.join("started");
    let script = "echo \"out $RETRY_ATTEMPT\"; echo \"err $RETRY_ATTEMPT\" >&2; \
                  [ $RETRY_ATTEMPT -lt 2 ] && exit 1; : > \"$0\"; exec sleep 20";
    let mut child = retry_std()
        .args([
            "--output-on-failure",
            "-n",
            "3",
            "-d",
            "1ms",
            "--",
            "sh",
            "-c",
            script,
        ])
        .arg(&started)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(common::wait_until(common::STEP_LIMIT, || started.exists()));
    common::send(child.id(), nix::libc::SIGTERM);
    common::wait_bounded(&mut child, common::STEP_LIMIT);
    let out = child.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(nix::libc::SIGTERM));
    assert_eq!(stdout_of(&out), "");
    assert_lines(
        &stderr_of(&out),
        &[
            "err 1",
            "out 1",
            "retry: try 1/3 exited 1 after ",
            "err 2",
            "out 2",
            "retry: received SIGTERM during try 2/3: stopped the try",
            "retry: gave up after 2 tries in ",
        ],
    );
}

#[test]
fn it_cannot_be_given_with_repeat() {
    let out = retry()
        .args(["--output-on-failure", "--repeat", "3", "--", "true"])
        .output()
        .unwrap();
    let err = usage_error_of(&out, "");
    assert!(
        err.contains("--output-on-failure") && err.contains("--repeat"),
        "{err}"
    );
}

/// The peak memory of the process `pid` so far (VmHWM), in KiB, while it runs.
fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    line.trim().trim_end_matches("kB").trim().parse().ok()
}

/// Bytes in the file at `path`.
fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

#[test]
#[ignore = "tens of megabytes, side by side with the rest too costly for cargo test: run with --ignored, as .ci/run does"]
fn what_is_held_goes_to_a_temporary_file_and_memory_stays_bounded() {
    let _big = common::one_big_at_a_time();
    // Two tries of 23.8 MB each on standard error and 1 MB on standard output: 49.6 MB held,
    // then passed on; retry's peak memory, read while it runs, stays far below it (about 10 MiB,
    // of which 4 MiB per stretch held in memory).
    const MB: u64 = 1_000_000;
    let dir = temp_dir("output-on-failure-memory");
    let (out_path, err_path) = (dir.join("out"), dir.join("err"));
    let script = "yes 'a line of output' | head -n 1400000 >&2; yes 1 | head -n 500000; exit 1";
    let started = Instant::now();
    let mut child = retry_std()
        .args([
            "--output-on-failure",
            "-n",
            "2",
            "-d",
            "1ms",
            "--",
            "sh",
            "-c",
            script,
        ])
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        peak = peak.max(peak_kib(child.id()).unwrap_or(0));
        assert!(started.elapsed() < common::TEST_LIMIT, "retry did not end");
        std::thread::sleep(Duration::from_millis(2));
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    assert_eq!(size(&out_path), 0);
    let held = size(&err_path);
    let output = 2 * (1_400_000 * 17 + MB);
    assert!(held > output && held < output + 1000, "{held} bytes");
    let log = std::fs::read_to_string(&err_path).unwrap();
    assert!(log.starts_with("a line of output\n"), "{}", &log[..100]);
    let first = log
        .find("retry: try 1/2 exited 1")
        .expect("the line of try 1");
    let before = &log[..first];
    assert!(before.ends_with("1\n1\n"), "try 1's output first");
    assert!(
        before.contains("a line of output\n1\n"),
        "its standard error, then output"
    );
    let last = log.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("retry: gave up after 2 tries in "),
        "{last}"
    );
    assert!(peak > 0, "the peak was read");
    assert!(peak < 24 * 1024, "peak {peak} KiB for 49.6 MB held");
}
