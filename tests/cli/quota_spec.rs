//! The value of `--quota` as `retry` shows it back (docs/bad-input.md#bad-input,
//! docs/herd.md#shared-retry-quota, docs/files.md#files-that-outlive-a-run): a bad one is one short
//! line naming the option and the value as written.

use crate::common;

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
        common::stdout_of(&out),
        common::stderr_of(&out),
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

/// The password every test below gives, which nothing `retry` writes may hold.
const PASSWORD: &str = "hunter2-Secret";

fn assert_hidden(what: &str, text: &str) {
    assert!(
        !text.contains(PASSWORD),
        "{what} shows the password: {text}"
    );
    assert!(
        !text.contains("hunter2"),
        "{what} shows part of the password: {text}"
    );
}

#[test]
fn a_bad_redis_quota_is_refused_without_showing_its_password() {
    let closed = common::redis_server::free_port();
    for value in [
        format!("redis://:{PASSWORD}@127.0.0.1:{closed}/q:cap=0"),
        format!("redis://:{PASSWORD}@127.0.0.1:{closed}/q:ratio=1e308"),
        format!("redis://:{PASSWORD}@127.0.0.1:{closed}/"),
        format!("redis://:{PASSWORD}@127.0.0.1:{closed}/bad name"),
        format!("redis://:{PASSWORD}@bad host:{closed}/q"),
        format!("redis://:{PASSWORD}@127.0.0.1:0/q"),
        format!("redis://:{PASSWORD}@127.0.0.1:99999/q"),
        format!("redis://:{PASSWORD}@[::1/q"),
        format!("redis://{PASSWORD}@127.0.0.1/q"),
    ] {
        for args in [
            vec!["--quota", &value, "--", "true"],
            vec!["--dry-run", "--log-format", "json", "--quota", &value],
        ] {
            let (status, out, err) = run(&args);
            assert_eq!(status, Some(125), "{value}: {err}");
            assert_eq!(err.lines().count(), 1, "{value}: {err}");
            assert!(err.contains("--quota"), "{value}: {err}");
            assert_hidden(&value, &err);
            assert_hidden(&value, &out);
        }
    }
    let joined = format!("--quota=redis://:{PASSWORD}@h/q:cap=0");
    let (status, _, err) = run(&[&joined, "--", "true"]);
    assert_eq!(status, Some(125), "{err}");
    assert_hidden(&joined, &err);
}

#[test]
fn a_redis_password_appears_in_no_log_dry_run_simulation_or_dead_letter() {
    let closed = common::redis_server::free_port();
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{closed}/hidden");
    let dir = common::temp_dir("quota-secret");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let letters = dir.join("dead.jsonl");
    let letters_arg = letters.display().to_string();
    for format in ["human", "json"] {
        let out = retry()
            .env("XDG_RUNTIME_DIR", &dir)
            .env_remove("RETRY_REDIS_PASSWORD")
            .args(["-v", "-n", "2", "-d", "0", "--log-format", format])
            .args([
                "--dead-letter",
                &letters_arg,
                "--quota",
                &url,
                "--",
                "false",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(log.contains("cannot be reached"), "{log}");
        // The warning about `ps` names the variable, never the password.
        assert!(log.contains("RETRY_REDIS_PASSWORD"), "{log}");
        assert_hidden(&format!("the {format} log"), &log);

        let (status, out, err) = run(&["--dry-run", "--log-format", format, "--quota", &url]);
        assert_eq!(status, Some(0), "{err}");
        assert!(out.contains("127.0.0.1"), "{out}");
        assert_hidden(&format!("the {format} dry run"), &out);
        assert_hidden(&format!("the {format} dry run's log"), &err);

        let (status, out, err) = run(&[
            "--simulate",
            "--clients",
            "5",
            "--log-format",
            format,
            "--quota",
            &url,
        ]);
        assert_eq!(status, Some(0), "{err}");
        assert_hidden(&format!("the {format} simulation"), &out);
        assert_hidden(&format!("the {format} simulation's log"), &err);
    }
    let recorded = std::fs::read_to_string(&letters).unwrap();
    assert_eq!(recorded.lines().count(), 2, "{recorded}");
    assert!(recorded.contains("127.0.0.1"), "{recorded}");
    assert_hidden("the dead-letter file", &recorded);
}

#[test]
fn the_help_and_the_manual_name_the_password_variable() {
    let (status, out, _) = run(&["--help"]);
    assert_eq!(status, Some(0));
    let environment = out.split("Environment:").nth(1).unwrap_or_default();
    assert!(environment.contains("RETRY_REDIS_PASSWORD"), "{out}");
    let manual = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/man/retry.1"));
    let section = manual.split(".SH ENVIRONMENT").nth(1).unwrap_or_default();
    let section = section.split(".SH ").next().unwrap_or_default();
    assert!(section.contains("RETRY_REDIS_PASSWORD"), "{section}");
}
