//! The value of `--quota` as `retry` shows it back (spec 12, 15.3, 19): a bad one is one short
//! line naming the option and the value as written.

mod common;

use common::retry;

/// `retry ARGS`: its exit status, standard output and standard error.
fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = retry()
        .env_remove("RETRY_REDIS_PASSWORD")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_huge_parameter_is_refused_on_a_short_line_as_written() {
    let (status, _, err) = run(&["--quota", "q:ratio=1e308", "--", "true"]);
    assert_eq!(status, Some(125));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--quota") && err.contains("1e308"), "{err}");
    assert!(err.len() < 160, "{} characters: {err}", err.len());

    // A tiny one is accepted, and the dry run shows it short too.
    let (status, out, err) = run(&["--dry-run", "--quota", "q:ratio=1e-300,floor=1e300"]);
    assert_eq!(status, Some(0), "{err}");
    let line = out
        .lines()
        .find(|l| l.contains("quota:"))
        .unwrap_or_default();
    assert!(
        line.contains("ratio=1e-300,floor=1e300/s") && line.len() < 160,
        "{line}"
    );
}
