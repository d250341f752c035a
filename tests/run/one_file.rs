//! Held output when standard output and error are one file (`2>&1`, as cron and CI give): the
//! playback keeps the order the try wrote, and held output starts on a line of its own.

use crate::common;

/// `retry ARGS -- sh -c SCRIPT` with its standard output and error one pipe; what came out.
fn one_file(args: &[&str], script: &str) -> (String, i32) {
    let out = assert_cmd::Command::new("/bin/sh")
        .timeout(common::TEST_LIMIT)
        .env_remove("RETRY_RUN_ID")
        .args(["-c", "exec \"$0\" \"$@\" 2>&1", env!("CARGO_BIN_EXE_retry")])
        .args(args)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

#[test]
fn a_failed_runs_playback_keeps_the_order_the_try_wrote_its_two_streams_in() {
    // Writes a moment apart, as a sync job's are.
    let script = "echo 'syncing orders'; sleep 0.05; echo 'error: upstream 503' >&2; sleep 0.05; \
                  echo 'retrying later'; exit 1";
    let (out, status) = one_file(&["--output-on-failure", "-n", "2", "-d", "0"], script);
    assert_eq!(status, 1, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    let tries: Vec<&[&str]> = lines.split(|l| l.starts_with("retry: try ")).collect();
    for (k, written) in tries.iter().take(2).enumerate() {
        assert_eq!(
            *written,
            ["syncing orders", "error: upstream 503", "retrying later"],
            "try {}: {out}",
            k + 1
        );
    }
    assert!(
        out.ends_with("gave up after 2 tries in ") || out.contains("gave up after 2 tries"),
        "{out}"
    );
    // A run that succeeds passes on only its successful try's standard output.
    let (out, status) = one_file(
        &["--output-on-failure", "-n", "2", "-d", "0"],
        "echo \"out $RETRY_ATTEMPT\"; echo \"err $RETRY_ATTEMPT\" >&2; [ $RETRY_ATTEMPT = 2 ]",
    );
    assert_eq!((out.as_str(), status), ("out 2\n", 0));
}

#[test]
fn held_output_starts_its_own_line_after_a_line_the_trys_standard_error_left_open() {
    let script =
        "echo \"out$RETRY_ATTEMPT\"; printf \"err$RETRY_ATTEMPT\" >&2; [ $RETRY_ATTEMPT = 2 ]";
    for log in ["human", "json"] {
        let (out, status) = one_file(
            &["--buffer-stdout", "--log-format", log, "-n", "2", "-d", "0"],
            script,
        );
        assert_eq!(status, 0, "{out}");
        for k in 1..=2 {
            assert!(out.contains(&format!("err{k}\nout{k}\n")), "{log}: {out}");
            assert!(!out.contains(&format!("err{k}out{k}")), "{log}: {out}");
        }
    }
    // Standard output alone is passed on as the try wrote it: nothing added.
    let out = common::retry()
        .args(["--buffer-stdout", "-n", "2", "-d", "0", "--", "sh", "-c"])
        .arg("printf \"out$RETRY_ATTEMPT\"; printf err >&2; [ $RETRY_ATTEMPT = 2 ]")
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"out2");
}
