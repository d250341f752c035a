//! The schedule log through the real binary (docs/log.md#human-format,
//! docs/json-log.md#the-json-log): its character set, what it quotes and escapes, and what the JSON
//! lines carry. Every test is bounded (common::TEST_LIMIT).

use crate::common;

use common::{event_names, json_lines, stderr_of, stdout_of, usage_error_of};

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

#[test]
fn an_argument_cannot_forge_a_log_line() {
    let out = retry_in(UTF8)
        .args(["-n", "1", "--", "nope\nretry: succeeded on try 1/1"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(127), "{log}");
    assert_eq!(log.lines().count(), 2, "{log}");
    assert!(!log.contains("\nretry: succeeded"), "{log}");
    assert!(
        log.contains(r"could not start: $'nope\nretry: succeeded on try 1/1' was not found"),
        "{log}"
    );
}

#[test]
fn control_characters_never_reach_the_terminal_raw() {
    // A coloured log keeps its own colours and nothing else: the argument's escape and the
    // pattern's are shown as `\e`.
    let out = retry_in(UTF8)
        .args(["-v", "--color", "always", "-n", "2", "-d", "0"])
        .args(["--stop-if-output", "boom\x1b", "--", "sh", "-c"])
        .args(["printf 'boom\\033' >&2; exit 3", "\x1b[31mred\x07"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(3), "{log}");
    assert!(
        log.contains(r"command: sh -c 'printf '\''boom\033'\'' >&2; exit 3' $'\e[31mred\x07'"),
        "{log}"
    );
    assert!(log.contains(r"--stop-if-output 'boom\e'"), "{log}");
    let log = log.replace("boom\x1b", "");
    let colours = ["\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[0m"];
    let bare = colours.iter().fold(log.clone(), |l, c| l.replace(c, ""));
    assert!(!bare.contains('\x1b') && !bare.contains('\x07'), "{bare:?}");
    assert!(log.contains("\x1b[31mpermanent\x1b[0m"), "{log:?}");
}

#[test]
fn quoted_words_read_back_in_bash_as_the_same_bytes() {
    use std::os::unix::ffi::OsStrExt;
    let words: [&[u8]; 10] = [
        b"plain-word",
        b"",
        b"two words",
        b"it's",
        b"a\nb\tc\rd",
        b"\x1b[2J\x07",
        b"back\\slash 'and' quote\n",
        b"bytes \xff\xfe\x80 end",
        "caf\u{e9} \u{202e}rtl".as_bytes(),
        b"\x01\x7f$HOME `x` \"q\"",
    ];
    for ascii in [false, true] {
        for word in words {
            let charset = retry::text::Charset::ascii_if(ascii);
            let quoted = retry::text::quote(std::ffi::OsStr::from_bytes(word), charset);
            assert!(!quoted.chars().any(retry::report::unprintable), "{quoted}");
            assert!(!ascii || quoted.is_ascii(), "{quoted}");
            let out = assert_cmd::Command::new("bash")
                .timeout(common::TEST_LIMIT)
                .args(["-c", &format!("printf %s {quoted}")])
                .output()
                .unwrap();
            assert_eq!(out.stdout, word, "{quoted}");
        }
    }
    let q = |w: &str| retry::text::quote(std::ffi::OsStr::new(w), retry::text::Charset::Utf8);
    assert_eq!(q("make"), "make");
    assert_eq!(q("--jobs=4"), "--jobs=4");
    assert_eq!(q("a b"), "'a b'");
    assert_eq!(q("it's"), r"'it'\''s'");
    assert_eq!(q("a\nb"), r"$'a\nb'");
}

/// The names of the events of a JSON run with a failing hook, leftovers and a warning.
fn json_event_names(extra: &[&str]) -> Vec<String> {
    let out = retry_in(UTF8)
        .env("RETRY_RUN_ID", "outer")
        .args(["--log-format", "json", "-n", "2", "-d", "0", "-k", "1s"])
        .args(extra)
        .args([
            "--on-retry",
            "exit 3",
            "--",
            "sh",
            "-c",
            "sleep 10 & exit 1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    json_lines(&stderr_of(&out))
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn quiet_and_verbose_shape_the_human_log_only() {
    let all = json_event_names(&[]);
    for name in [
        "start",
        "warning",
        "leftovers",
        "try",
        "wait",
        "hook",
        "give_up",
    ] {
        assert!(all.iter().any(|e| e == name), "{name}: {all:?}");
    }
    assert_eq!(json_event_names(&["-q"]), all);
    assert_eq!(json_event_names(&["-v"]), all);
}

#[test]
fn a_hook_event_names_the_try_it_followed() {
    let out = retry_in(UTF8)
        .args(["--log-format", "json", "-n", "3", "-d", "0"])
        .args([
            "--on-retry",
            "exit 3",
            "--on-give-up",
            "exit 4",
            "--",
            "false",
        ])
        .output()
        .unwrap();
    let hooks: Vec<(String, u64, String)> = json_lines(&stderr_of(&out))
        .iter()
        .filter(|e| e["event"] == "hook")
        .map(|e| {
            let attempt = e["attempt"].as_u64().expect("a hook event has its attempt");
            (e["hook"].to_string(), attempt, e["result"].to_string())
        })
        .collect();
    let hook = |h: &str, attempt, r: &str| (format!("\"{h}\""), attempt, format!("\"{r}\""));
    assert_eq!(
        hooks,
        [
            hook("--on-retry", 1, "exited 3"),
            hook("--on-retry", 2, "exited 3"),
            hook("--on-give-up", 3, "exited 4"),
        ]
    );
}

#[test]
fn a_label_names_the_run_in_every_human_line() {
    let out = retry_in(UTF8)
        .env("RETRY_RUN_ID", "outer")
        .args(["--label", "db migrate", "-v", "-n", "2", "-d", "0"])
        .args(["--on-retry", "exit 3", "--", "false"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    // command, policy, seed, the nested-run warning, two tries, the hook, the end.
    assert!(log.lines().count() >= 8, "{log}");
    for line in log.lines() {
        assert!(line.starts_with("retry[db migrate]: "), "{line:?} in {log}");
    }
    assert!(log.contains("retry[db migrate]: [") && log.contains("gave up after 2 tries"));
}

#[test]
fn a_label_is_in_every_json_event() {
    let out = retry_in(UTF8)
        .args([
            "--label",
            "api \"tests\"",
            "--log-format",
            "json",
            "-n",
            "2",
            "-d",
            "0",
        ])
        .args(["--on-retry", "exit 3", "--", "false"])
        .output()
        .unwrap();
    let events = json_lines(&stderr_of(&out));
    assert_eq!(
        event_names(&events),
        ["start", "try", "wait", "hook", "try", "give_up"]
    );
    for event in &events {
        assert_eq!(event["label"], "api \"tests\"", "{event}");
    }
    // Without --label there is no label field.
    let out = retry_in(UTF8)
        .args(["--log-format", "json", "-n", "1", "--", "false"])
        .output()
        .unwrap();
    let events = json_lines(&stderr_of(&out));
    assert!(
        events.iter().all(|e| e.get("label").is_none()),
        "{events:?}"
    );
}

#[test]
fn a_label_that_is_empty_or_breaks_the_line_is_a_usage_error() {
    for (label, shown) in [("", "''"), ("two\nlines", r"'two\nlines'")] {
        let out = retry_in(UTF8)
            .args(["--label", label, "--", "true"])
            .output()
            .unwrap();
        let log = usage_error_of(&out, "");
        assert!(
            log.starts_with("retry: invalid value ")
                && log.contains(shown)
                && log.contains("'--label <NAME>'"),
            "{log}"
        );
    }
}
