//! Runs that something cut: the budget before any try of a repeat ended, a signal while the
//! output of a successful try is written, a try killed by SIGPIPE, a timeout's signal.

use std::time::{Duration, Instant};

use crate::common::{self, retry, stderr_of, temp_dir};

#[test]
fn a_repeat_in_which_no_try_ran_to_its_end_never_passes() {
    let dir = temp_dir("repeat-cut");
    let outputs = dir.join("outputs");
    let began = Instant::now();
    let out = retry()
        .env("GITHUB_OUTPUT", &outputs)
        .args(["--repeat", "5", "-B", "300ms", "--", "sleep", "10"])
        .output()
        .unwrap();
    let took = began.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(124), "{log}");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(8),
        "{took:?}"
    );
    assert!(log.contains("stopped at the end of the budget"), "{log}");
    assert!(
        log.contains("retry: no try ran to its end: the end of the budget stopped try 1"),
        "{log}"
    );
    assert!(!log.contains("0 failed (0%)"), "{log}");
    let text = std::fs::read_to_string(&outputs).unwrap();
    assert!(text.contains("exit_code=124\n"), "{text}");
    assert!(text.contains("outcome=gave_up\n"), "{text}");
    assert!(text.contains("reason=budget\n"), "{text}");

    // Once one try has run to its end and passed, the repeat passes as before.
    let out = retry()
        .args(["--repeat", "0", "-B", "400ms", "--", "sleep", "0.1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

#[test]
fn a_signal_while_a_successful_try_s_output_is_written_is_logged_as_that() {
    use std::process::Stdio;
    let dir = temp_dir("signal-output");
    let log_file = dir.join("log");
    // The try writes 4 MB, held; nobody reads retry's standard output, so writing it out
    // waits after the try has ended.
    let mut child = common::retry_std()
        .args(["-n", "3", "--buffer-stdout", "--log-file"])
        .arg(&log_file)
        .args(["--", "sh", "-c", "head -c 4000000 /dev/zero; touch \"$0\""])
        .arg(dir.join("done"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    // The try has started, then ended: retry is writing its output out.
    assert!(common::wait_until(common::STEP_LIMIT, || {
        dir.join("done").exists() && common::children_of(pid).is_empty()
    }));
    std::thread::sleep(Duration::from_millis(100));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = common::wait_bounded(&mut child, common::TEST_LIMIT);
    drop(child.stdout.take());
    let log = std::fs::read_to_string(&log_file).unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(15), "{log}");
    assert!(
        log.contains("received SIGTERM while writing the output of try 1/3"),
        "{log}"
    );
    assert!(!log.contains("during the wait"), "{log}");
}

/// `retry ARGS -- yes` (under GitHub Actions when `github`) with its standard output read for a few bytes, then closed, as
/// `| head -1` does: how it ended, and its standard error.
fn reader_leaves(github: bool, args: &[&str]) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    use std::process::Stdio;
    let mut cmd = common::retry_std();
    if github {
        cmd.env("GITHUB_ACTIONS", "true");
    }
    let mut child = cmd
        .args(args)
        .args(["--", "yes"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    out.read_exact(&mut [0u8; 2]).unwrap();
    drop(out);
    let status = common::wait_bounded(&mut child, common::TEST_LIMIT);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status, err)
}

#[test]
fn a_try_killed_by_sigpipe_ends_the_run_as_quietly_as_the_bare_pipeline() {
    use std::os::unix::process::ExitStatusExt;
    let (status, err) = reader_leaves(false, &[]);
    assert_eq!(status.signal(), Some(13), "{err}");
    assert_eq!(err, "");
    // Under CI too: no annotation.
    let (status, err) = reader_leaves(true, &["-n", "2"]);
    assert_eq!(status.signal(), Some(13), "{err}");
    assert_eq!(err, "");
    // -v tells what happened.
    let (status, err) = reader_leaves(false, &["-v"]);
    assert_eq!(status.signal(), Some(13), "{err}");
    assert!(err.contains("killed by SIGPIPE"), "{err}");
    assert!(err.contains("gave up after 1 try"), "{err}");
}

#[test]
fn timed_out_after_gives_the_moment_the_signal_was_sent_not_the_end_of_the_grace() {
    let began = Instant::now();
    let out = retry()
        .args(["-n", "1", "-t", "500ms", "-k", "700ms", "--"])
        .args(["sh", "-c", "trap '' TERM; sleep 10"])
        .output()
        .unwrap();
    let took = began.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(124), "{log}");
    // The grace period ran: the run took the timeout and the grace.
    assert!(took >= Duration::from_millis(1200), "{took:?}");
    let line = log
        .lines()
        .find(|l| l.contains("timed out after "))
        .unwrap_or_else(|| panic!("{log}"));
    let after = line
        .split("timed out after ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap();
    let ms: f64 = match after.strip_suffix("ms") {
        Some(ms) => ms.parse().unwrap(),
        None => after.strip_suffix('s').unwrap().parse::<f64>().unwrap() * 1000.0,
    };
    // When the signal went: at the timeout, well before the grace period ended.
    assert!((500.0..1100.0).contains(&ms), "{line}");
    assert!(
        line.contains("then SIGKILL after the 700ms grace period"),
        "{line}"
    );
}

#[test]
fn a_try_the_budget_cut_is_the_budget_s_whatever_retry_on_names() {
    let began = Instant::now();
    let out = retry()
        .args(["-n", "3", "-B", "300ms", "--retry-on", "75"])
        .args(["--log-format", "json", "--", "sleep", "10"])
        .output()
        .unwrap();
    let took = began.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(124), "{log}");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(8),
        "{took:?}"
    );
    assert!(!log.contains("not in --retry-on"), "{log}");
    assert!(log.contains(r#""reason":"cut by the budget""#), "{log}");
    assert!(log.contains(r#""reason":"budget""#), "{log}");
}
