//! Runs that something cut: the budget before any try of a repeat ended, a signal while the
//! output of a successful try is written, a try killed by SIGPIPE, a timeout's signal.

use std::time::{Duration, Instant};

use crate::common::{retry, stderr_of, temp_dir};

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
