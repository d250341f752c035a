//! The schedule log through the real binary (spec 8.1, 8.2): its character set, what it quotes
//! and escapes, and what the JSON lines carry. Every test is bounded (common::TEST_LIMIT).

mod common;

use common::{stderr_of, stdout_of};

/// `retry` under a locale given explicitly: the test environment's own is not assumed.
fn retry_in(locale: &[(&str, &str)]) -> assert_cmd::Command {
    let mut cmd = common::retry();
    for name in ["LC_ALL", "LC_CTYPE", "LANG"] {
        cmd.env_remove(name);
    }
    for (name, value) in locale {
        cmd.env(name, value);
    }
    cmd
}

const UTF8: &[(&str, &str)] = &[("LC_ALL", "C.UTF-8")];

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn is_ascii(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii)
}

/// A run whose log has a microsecond wait, a nested-retry warning with its product, the
/// policy line with its factor and a budget message without a timeout.
fn symbols_run(locale: &[(&str, &str)]) -> String {
    let out = retry_in(locale)
        .env("RETRY_RUN_ID", "outer")
        .env("RETRY_ATTEMPT", "1")
        .env("RETRY_MAX_TRIES", "2")
        .args(["-v", "-n", "3", "-d", "1us", "-j", "none", "--", "false"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let mut log = stderr_of(&out);
    let out = retry_in(locale)
        .args([
            "-n", "3", "-d", "1s", "-j", "none", "-B", "300ms", "--", "false",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    log += &stderr_of(&out);
    log
}

#[test]
fn a_utf8_locale_gets_the_log_s_symbols() {
    let log = symbols_run(UTF8);
    assert!(log.contains("next try in 1µs"), "{log}");
    assert!(log.contains("up to 2 × 3 = 6 times"), "{log}");
    assert!(log.contains("exponential backoff from 1µs ×2"), "{log}");
    assert!(log.contains(" wait ≥ 300ms"), "{log}");
}

#[test]
fn the_c_locale_gets_an_ascii_log() {
    for locale in [&[("LC_ALL", "C")][..], &[("LANG", "POSIX")], &[]] {
        let log = symbols_run(locale);
        assert!(is_ascii(log.as_bytes()), "{locale:?}: {log}");
        assert!(log.contains("next try in 1us"), "{log}");
        assert!(log.contains("up to 2 x 3 = 6 times"), "{log}");
        assert!(log.contains("exponential backoff from 1us x2"), "{log}");
        assert!(log.contains(" wait >= 300ms"), "{log}");
    }
}

#[test]
fn lc_all_comes_before_lang() {
    let log = symbols_run(&[("LC_ALL", "C"), ("LANG", "C.UTF-8")]);
    assert!(log.contains("next try in 1us"), "{log}");
    let log = symbols_run(&[("LC_ALL", ""), ("LC_CTYPE", "en_US.utf8"), ("LANG", "C")]);
    assert!(log.contains("next try in 1µs"), "{log}");
}

#[test]
fn the_dry_run_is_ascii_in_the_c_locale() {
    let args = ["--dry-run", "-n", "4", "-d", "1s", "-j", "none", "-B", "4s"];
    let out = retry_in(UTF8).args(args).output().unwrap();
    let text = stdout_of(&out);
    assert!(text.contains("█") && text.contains("×2"), "{text}");
    let out = retry_in(&[("LANG", "POSIX")]).args(args).output().unwrap();
    let text = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(is_ascii(text.as_bytes()), "{text}");
    assert!(
        text.contains("  #") && text.contains("from 1s x2"),
        "{text}"
    );
    assert!(text.contains(" >= 4s"), "{text}");
}

#[test]
fn json_in_the_c_locale_is_ascii_and_reads_back_the_same() {
    let out = retry_in(&[("LC_ALL", "C")])
        .args(["--log-format", "json", "-n", "1", "--", "retry-test-café"])
        .output()
        .unwrap();
    assert!(is_ascii(&out.stderr), "{}", stderr_of(&out));
    let events = json_lines(&stderr_of(&out));
    assert_eq!(events[0]["command"][0], "retry-test-café");
}

#[test]
fn the_seed_in_the_start_event_is_a_string_that_keeps_every_digit() {
    let out = retry_in(UTF8)
        .args([
            "--log-format",
            "json",
            "--seed",
            "18446744073709551615",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let events = json_lines(&stderr_of(&out));
    assert_eq!(events[0]["event"], "start");
    assert_eq!(events[0]["policy"]["seed"], "18446744073709551615");
}

#[test]
fn an_argument_that_is_not_utf8_is_written_losslessly_as_base64() {
    use std::os::unix::ffi::OsStrExt;
    let out = retry_in(UTF8)
        .args(["--log-format", "json", "--", "sh", "-c", "exit 0", "sh"])
        .arg(std::ffi::OsStr::from_bytes(b"x\xff"))
        .arg("é\u{fffd}")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let events = json_lines(&stderr_of(&out));
    assert_eq!(
        events[0]["command"],
        serde_json::json!(["sh", "-c", "exit 0", "sh", {"base64": "eP8="}, "é\u{fffd}"])
    );
}
