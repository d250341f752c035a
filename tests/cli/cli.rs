//! The command line: usage errors, help and version, through the real binary.

use crate::common;

use common::{retry, stderr_of, usage_error_of};

/// clap's own checks of the option table: no two flags with one name, every default a valid
/// value, every group and conflict naming a flag that exists.
#[test]
fn the_option_table_passes_clap_s_own_checks() {
    retry::cli::command().debug_assert();
}

#[test]
fn an_option_given_again_takes_its_last_value_and_a_list_is_replaced() {
    // A wrapper's -n 3, then the user's -n 1: one try.
    let out = retry()
        .args(["-n", "3", "--tries", "1", "-d", "1ms", "--", "false"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(log.contains("gave up after 1 try"), "{log}");
    // The second --success-on replaces the first: 3 is a failure again, 4 a success.
    let out = retry()
        .args(["--success-on", "3", "--success-on", "4", "-n", "1", "--"])
        .args(["sh", "-c", "exit 4"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let out = retry()
        .args(["--success-on", "3", "--success-on", "4", "-n", "1", "--"])
        .args(["sh", "-c", "exit 3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
}

#[test]
fn invalid_values_exit_125_with_one_line_naming_the_option_and_value() {
    let cases: &[(&[&str], &str, &str)] = &[
        (&["-d", "-1s", "--", "true"], "--delay", "-1s"),
        (&["-d", "abc", "--", "true"], "--delay", "abc"),
        (&["--factor", "0.5", "--", "true"], "--factor", "0.5"),
        (&["--factor", "NaN", "--", "true"], "--factor", "NaN"),
        (&["-n", "x", "--", "true"], "--tries", "x"),
        (&["--retry-on", "1-", "--", "true"], "--retry-on", "1-"),
        (&["--retry-on", "300", "--", "true"], "--retry-on", "300"),
        (&["--retry-on", "5-2", "--", "true"], "--retry-on", "5-2"),
        (&["-s", "SIGFOO", "--", "true"], "--signal", "SIGFOO"),
        (&["-j", "fancy", "--", "true"], "--jitter", "fancy"),
        (
            &["--backoff", "zigzag", "--", "true"],
            "--backoff",
            "zigzag",
        ),
        (&["--delays", "2s,x", "--", "true"], "--delays", "2s,x"),
        (
            &["--delays", "1s", "-j", "decorrelated", "--", "true"],
            "--delays",
            "decorrelated",
        ),
        (
            &["--deadline", "yesterday", "--", "true"],
            "--deadline",
            "yesterday",
        ),
        (
            &["--no-such-flag", "--", "true"],
            "--no-such-flag",
            "--no-such-flag",
        ),
        (&["-t", "1x", "--dry-run"], "--timeout", "1x"),
        (&["-n", "-1", "--", "true"], "--tries", "-1"),
        (&["--tries", "-5", "--dry-run"], "--tries", "-5"),
        (&["--factor", "-2", "--", "true"], "--factor", "-2"),
        (&["--seed", "-1", "--", "true"], "--seed", "-1"),
        (&["-d", "-1", "--", "true"], "--delay", "-1"),
        (&["--retry-on", "0-3", "--", "true"], "--retry-on", "0-3"),
        (&["--stop-on", "0", "--", "true"], "--stop-on", "0"),
        (
            &["--success-on", "3", "--retry-on", "1-5", "--", "true"],
            "--retry-on",
            "1-5",
        ),
        // The value as it was written, not as retry would write the duration.
        (
            &["--stagger", "500y", "-B", "1s", "--", "true"],
            "--stagger",
            "'500y'",
        ),
    ];
    for (args, option, value) in cases {
        let out = retry().args(*args).output().unwrap();
        let err = usage_error_of(&out, &format!("{args:?}"));
        assert!(err.starts_with("retry: "), "{args:?}: {err}");
        assert!(
            err.contains(option) && err.contains(value),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn no_command_and_no_dry_run_is_a_usage_error() {
    let out = retry().output().unwrap();
    assert_eq!(out.status.code(), Some(125));
    let err = stderr_of(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no command"), "{err}");
    // Options alone are not a command either.
    let out = retry().args(["-n", "3"]).output().unwrap();
    assert_eq!(out.status.code(), Some(125));
}

#[test]
fn help_groups_the_options_and_exits_0() {
    let out = retry().arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8(out.stdout).unwrap();
    for heading in [
        "Tries and time:",
        "Timeouts and signals:",
        "Waits between tries:",
        "Which failures to retry:",
        "Input and output:",
        "Log and dry run:",
    ] {
        assert!(help.contains(heading), "missing {heading}");
    }
    let words = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("[default: full; none with --delays]"),
        "{help}"
    );
    for flag in [
        "--tries",
        "--budget",
        "--deadline",
        "--timeout",
        "--kill-after",
        "--jitter",
        "--stop-on",
        "--dry-run",
    ] {
        assert!(help.contains(flag), "missing {flag}");
    }
}

#[test]
fn version_prints_the_package_version() {
    let out = retry().arg("--version").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        format!("retry {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn words_after_the_command_belong_to_it() {
    // `--help` after the command goes to the command, not to retry.
    let out = retry()
        .args([
            "-n",
            "1",
            "sh",
            "-c",
            "echo \"$@\"",
            "sh",
            "--help",
            "-n",
            "5",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(out.stdout, b"--help -n 5\n");
}

#[test]
fn a_zero_timeout_lets_the_try_run_to_its_end() {
    // `-t 0` is no timeout, as with timeout(1): the try is not stopped at once.
    let out = retry()
        .args([
            "-n",
            "1",
            "-t",
            "0",
            "-B",
            "0",
            "--",
            "sh",
            "-c",
            "sleep 0.2; echo done",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(out.stdout, b"done\n");
}

#[test]
fn a_timeout_too_small_for_the_clock_still_stops_the_try() {
    // Rounded down it would be 0, which means no timeout: the try would run its 5 s.
    let started = std::time::Instant::now();
    let out = retry()
        .args([
            "-n",
            "1",
            "-t",
            "0.0000000001",
            "-k",
            "0",
            "--",
            "sleep",
            "5",
        ])
        .timeout(std::time::Duration::from_secs(20))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(124), "{}", stderr_of(&out));
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
}

#[test]
fn a_code_in_success_on_and_in_another_list_names_both_options_and_the_code() {
    for (list, value) in [("--retry-on", "1-5"), ("--stop-on", "3")] {
        let out = retry()
            .args(["--success-on", "3", list, value, "--", "true"])
            .output()
            .unwrap();
        let err = usage_error_of(&out, "");
        for needle in [list, "--success-on", "exit code 3"] {
            assert!(err.contains(needle), "{needle} not in {err}");
        }
    }
}

#[test]
fn an_unknown_option_points_to_the_help_on_its_one_line() {
    let out = retry()
        .args(["--no-such-flag", "--", "true"])
        .output()
        .unwrap();
    let err = usage_error_of(&out, "");
    assert!(
        err.contains("'--no-such-flag'") && err.contains("--help"),
        "{err}"
    );
}

#[test]
fn a_misspelt_option_gets_the_suggestion_on_its_one_line() {
    let out = retry()
        .args(["--timout", "1", "--", "true"])
        .output()
        .unwrap();
    let err = usage_error_of(&out, "");
    assert!(err.contains("'--timout'"), "{err}");
    assert!(err.contains("did you mean --timeout"), "{err}");
}

#[test]
fn an_option_that_conflicts_with_several_names_them_all_on_its_one_line() {
    let out = retry()
        .args([
            "--delays",
            "10ms",
            "--backoff",
            "linear",
            "--factor",
            "3",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let err = usage_error_of(&out, "");
    for option in ["--delays", "--backoff", "--factor"] {
        assert!(err.contains(option), "{option}: {err}");
    }
}

#[test]
fn a_value_that_is_not_utf8_names_its_option_on_one_line() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let bad = OsStr::from_bytes(b"lab\xe9");
    let mut joined = b"--label=".to_vec();
    joined.extend_from_slice(bad.as_bytes());
    for args in [
        vec![OsStr::new("--label"), bad],
        vec![OsStr::from_bytes(&joined)],
        vec![OsStr::new("--until-output"), OsStr::from_bytes(b"\xff")],
    ] {
        let out = retry().args(&args).args(["--", "true"]).output().unwrap();
        let err = usage_error_of(&out, &format!("{args:?}"));
        let option = if args.len() == 1 {
            "--label"
        } else {
            args[0].to_str().unwrap()
        };
        assert!(err.contains(&format!("'{option}'")), "{args:?}: {err}");
        assert!(err.contains("\\x"), "the value, escaped: {err}");
    }
    // The command's own words may hold any bytes.
    let out = retry()
        .args(["-n", "1", "--", "printf", "%s"])
        .arg(OsStr::from_bytes(b"\xe9"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(out.stdout, b"\xe9");
}

#[test]
fn real_time_signals_are_accepted_by_name_and_shown_by_name() {
    let out = retry()
        .args([
            "--dry-run",
            "--log-format",
            "json",
            "-t",
            "1s",
            "-s",
            "sigrtmin+2",
            "--retry-on",
            "RTMAX-1,rtmin,SIG32",
            "--stop-on",
            "SigRtMax",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let first = common::stdout_of(&out);
    let first = first.lines().next().unwrap();
    assert!(first.contains(r#""signal":"RTMIN+2""#), "{first}");

    let out = retry()
        .args(["--dry-run", "-t", "1s", "-s", "RTMAX"])
        .output()
        .unwrap();
    assert!(
        common::stdout_of(&out).contains("(then SIGRTMAX, SIGKILL after 10s)"),
        "{}",
        common::stdout_of(&out)
    );
}

#[test]
fn out_of_range_real_time_signals_are_one_line_usage_errors() {
    for (option, value) in [
        ("--signal", "RTMIN+99"),
        ("--retry-on", "1,RTMIN+99"),
        ("--stop-on", "SIGRTMAX-99"),
    ] {
        let out = retry().args(["--dry-run", option, value]).output().unwrap();
        let err = usage_error_of(&out, "");
        assert!(
            err.contains(option) && err.contains(value) && err.contains("RTMAX ("),
            "{err}"
        );
    }
}

#[test]
fn a_unicode_class_by_name_in_a_pattern_is_a_one_line_usage_error() {
    for option in ["--retry-if-output", "--stop-if-output", "--until-output"] {
        let out = retry()
            .args([option, r"\p{Greek}", "--", "true"])
            .output()
            .unwrap();
        let err = usage_error_of(&out, option);
        assert!(err.contains(option) && err.contains(r"\p{Greek}"), "{err}");
    }
    // The Perl classes and case folding stay, and match beyond ASCII.
    let out = retry()
        .args(["-n", "1", "--until-output", r"(?i)^ÉTÉ\w+$", "--"])
        .args(["sh", "-c", "echo étéß"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

#[test]
fn stats_refuses_every_option_of_a_run() {
    let cases: &[&[&str]] = &[
        &["--buffer-stdout"],
        &["--stdin", "null"],
        &["--signal", "KILL"],
        &["-k", "1s"],
        &["--foreground"],
        &["--factor", "3"],
        &["-m", "5s"],
        &["--seed", "1"],
        &["--delay-from-output", "(\\d+)"],
        &["--retry-on", "1"],
        &["--stop-on", "2"],
        &["--success-on", "3"],
        &["--retry-if-output", "x"],
        &["--stop-if-output", "x"],
        &["--until-output", "x"],
        &["-n", "2"],
    ];
    let dir = common::temp_dir("cli-stats-options");
    let file = dir.join("history.jsonl");
    std::fs::write(&file, "").unwrap();
    for option in cases {
        let out = retry()
            .arg("--stats")
            .arg(&file)
            .args(*option)
            .output()
            .unwrap();
        let err = usage_error_of(&out, &format!("{option:?}"));
        assert!(
            err.contains("--stats") && err.contains("cannot be used with"),
            "{option:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{option:?}");
    }
    // The options of the log still go with it.
    let out = retry()
        .arg("--stats")
        .arg(&file)
        .args(["--log-format", "json", "--color", "never", "-q"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

#[test]
fn help_or_version_next_to_a_wrong_word_is_a_usage_error() {
    let wrong: &[&[&str]] = &[
        &["--help", "--foo"],
        &["--version", "--foo"],
        &["--foo", "--help"],
        &["-h", "--foo"],
        &["-V", "-d", "abc"],
        &["--help", "-n", "x"],
        &["--help", "--delays", "1s", "--factor", "3"],
    ];
    for args in wrong {
        let out = retry().args(*args).output().unwrap();
        let err = usage_error_of(&out, &format!("{args:?}"));
        assert!(err.starts_with("retry: "), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // Next to words that are right, and before a command's own words, it is still the help.
    let right: &[&[&str]] = &[
        &["--help", "-n", "3"],
        &["-q", "--version"],
        &["-h", "--", "true"],
        &["--help", "sh", "--foo"],
    ];
    for args in right {
        let out = retry().args(*args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr_of(&out));
        assert!(!out.stdout.is_empty(), "{args:?}");
    }
}

/// Runs `retry ARGS` and returns its one line of usage error, checking it is one (125).
fn usage_error(args: &[&str]) -> String {
    let out = retry().args(args).output().unwrap();
    let err = usage_error_of(&out, &format!("{args:?}"));
    assert!(out.stdout.is_empty(), "{args:?}");
    err
}

#[test]
fn a_long_option_of_one_letter_is_pointed_to_the_short_one() {
    let err = usage_error(&["--n", "3", "--", "true"]);
    assert!(err.contains("'--n'"), "{err}");
    assert!(err.ends_with("(did you mean -n/--tries?)\n"), "{err}");
    let err = usage_error(&["--t=3", "true"]);
    assert!(err.ends_with("(did you mean -t/--timeout?)\n"), "{err}");
    // No short option of that letter: not the nearest long name either.
    let err = usage_error(&["--x", "true"]);
    assert!(!err.contains("did you mean"), "{err}");
}

#[test]
fn a_number_where_the_command_starts_is_pointed_to_the_tries() {
    for args in [&["5", "--", "true"][..], &["-q", "5", "true"]] {
        let err = usage_error(args);
        assert!(
            err.contains("'5'") && err.contains("(did you mean -n 5?)"),
            "{err}"
        );
    }
    // After `--`, the command is whatever it is named.
    let out = retry().args(["-n", "1", "--", "5"]).output().unwrap();
    assert_eq!(out.status.code(), Some(127), "{}", stderr_of(&out));
}

#[test]
fn the_options_of_debians_retry_are_pointed_to_their_counterparts() {
    let debian = "an option of Debian's retry, another program";
    for (args, hint) in [
        (
            &["-d", "1,2,4", "--", "true"][..],
            "(did you mean --delays 1s,2s,4s?)",
        ),
        (
            &["--delay=1,0.5", "true"],
            "(did you mean --delays 1s,0.5s?)",
        ),
        (
            &["-m", "backing off", "--", "true"],
            "did you mean --label NAME?)",
        ),
        (&["--message=x", "true"], "did you mean --label NAME"),
        (&["--times", "5", "true"], "did you mean -n 5?"),
        (
            &["--until", "0,3", "--", "true"],
            "did you mean --success-on 3?)",
        ),
        (&["-u", "fail", "true"], "did you mean --repeat 0"),
        (&["--until=success", "true"], "leave it out"),
        (&["--while", "1-5", "true"], "did you mean --retry-on 1-5?)"),
        (&["-w", "false", "true"], "leave it out"),
    ] {
        let err = usage_error(args);
        assert!(err.contains(hint), "{args:?}: {err}");
        if !args[0].starts_with("-d") && !args[0].starts_with("--delay") {
            assert!(err.contains(debian), "{args:?}: {err}");
        }
    }
    // Given by its long name, --max-delay is not taken for Debian's -m.
    let err = usage_error(&["--max-delay", "soon", "true"]);
    assert!(!err.contains("Debian"), "{err}");
}

#[test]
fn the_debian_package_says_it_is_another_program_than_debians_retry() {
    let present = common::on_path("dpkg-deb") && common::on_path("dpkg");
    if !common::have_package("the Debian package test", "dpkg-deb", "dpkg", present) {
        return;
    }
    let dir = common::temp_dir("cli-deb");
    // A stand-in for the binary: the test is of the package, not of a release build.
    let binary = dir.join("retry");
    std::fs::write(&binary, "#!/bin/sh\n").unwrap();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/deb.sh");
    let out = common::output_bounded(
        std::process::Command::new("bash")
            .arg(&script)
            .arg(dir.join("out"))
            .env("RETRY_DEB_BINARY", &binary),
        common::TEST_LIMIT,
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let deb = String::from_utf8(out.stdout).unwrap();
    let field = |name: &str| {
        let out = std::process::Command::new("dpkg-deb")
            .args(["-f", deb.trim(), name])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(field("Conflicts").trim(), "retry");
    assert_eq!(field("Replaces").trim(), "retry");
    assert_eq!(
        field("Provides").trim(),
        "",
        "its options are not Debian's retry's"
    );
    let description = field("Description");
    let words = description.split_whitespace().collect::<Vec<_>>().join(" ");
    for needle in [
        "a different program from the retry of Debian's own retry package",
        "Here -t is the timeout of each try",
        "in Debian's retry, -t (--times) is the number of tries",
        "--delays 1s,2s,4s",
    ] {
        assert!(words.contains(needle), "{needle}: {description}");
    }
    for line in description.lines() {
        assert!(line.len() <= 80, "too long for dpkg: {line:?}");
    }
}

#[test]
fn a_duration_that_cannot_be_read_is_explained_in_retrys_words() {
    let form = "a duration is a number and a unit, such as 500ms, 2s, 1m30s or 1.5h";
    for (args, why) in [
        (&["-d", "5x", "--", "true"][..], "'x' is not a unit of time"),
        (
            &["-d", "1,2,4", "--", "true"],
            "',' cannot be part of a duration",
        ),
        (
            &["-m", "deploy", "--", "true"],
            "a duration starts with a number",
        ),
        (
            &["-t", "1h30", "--", "true"],
            "30 has no unit (such as 30s or 30m)",
        ),
        (
            &["-B", "2 hours min", "--", "true"],
            "a number is missing before 'min'",
        ),
        (
            &["--throttle", "2:window=5q", "--quota", "q", "--", "true"],
            "'q' is not a unit",
        ),
    ] {
        let err = usage_error(args);
        assert!(err.contains(why) && err.contains(form), "{args:?}: {err}");
        for words in [
            "few variations",
            "invalid character at",
            "expected number at",
        ] {
            assert!(!err.contains(words), "{args:?}: the parser's words: {err}");
        }
    }
    // What a duration may look like, as the message says.
    let out = retry()
        .args([
            "--dry-run",
            "-n",
            "2",
            "-j",
            "none",
            "-d",
            "1.5h",
            "-m",
            "2h",
            "--",
        ])
        .arg("true")
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && shown.contains("1h30m"), "{shown}");
}

#[test]
fn a_command_meant_for_a_shell_is_pointed_to_sh_c() {
    for (command, hint) in [
        (&["ls -l"][..], "run them in a shell, as sh -c 'ls -l'"),
        (
            &["cd", "/"],
            "cd is a word of the shell, not a program: run it in one, as sh -c 'cd …'",
        ),
        (&["export", "A=1"], "as sh -c 'export …'"),
    ] {
        let out = retry()
            .args(["-n", "1", "--"])
            .args(command)
            .output()
            .unwrap();
        let log = stderr_of(&out);
        assert_eq!(out.status.code(), Some(127), "{log}");
        assert!(log.contains(hint), "{command:?}: {log}");
    }
    // A program that is simply missing gets no hint.
    let out = retry()
        .args(["-n", "1", "--", "no-such-program-here"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert!(log.contains("was not found (permanent)"), "{log}");
}

#[test]
fn v_alone_points_to_the_version() {
    let err = usage_error(&["-v"]);
    assert!(
        err.contains("no command given") && err.contains("the version is -V"),
        "{err}"
    );
    let err = usage_error(&["-q"]);
    assert!(!err.contains("-V"), "{err}");
    let out = retry().arg("-V").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("retry "));
}

#[test]
fn a_delay_without_a_unit_warns_once_that_it_is_not_debians_fixed_wait() {
    let warning = "-d 0.001 is the base wait of 0.001 seconds that the backoff grows";
    for args in [
        &["-d", "0.001"][..],
        &["--delay", "0.001"],
        &["--delay=0.001"],
    ] {
        let out = retry()
            .args(args)
            .args(["-n", "2", "--", "false"])
            .output()
            .unwrap();
        let log = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{log}");
        assert_eq!(log.matches(warning).count(), 1, "{args:?}: once: {log}");
        let out = retry()
            .arg("--dry-run")
            .args(args)
            .arg("true")
            .output()
            .unwrap();
        let shown = String::from_utf8_lossy(&out.stdout);
        assert_eq!(shown.matches(warning).count(), 1, "{args:?}: {shown}");
    }
    for args in [&["-d", "1ms"][..], &["-d", "0"], &["-d", "2", "-d", "1ms"]] {
        let out = retry()
            .args(args)
            .args(["-n", "1", "--", "true"])
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(out.stderr.is_empty(), "{args:?}: {}", stderr_of(&out));
    }
}

#[test]
fn a_timeout_without_a_unit_warns_once_that_it_is_not_debians_tries() {
    let warning = "-t 5 is a timeout of 5 seconds for each try (Debian's retry reads -t as tries: here they are -n 5)";
    for args in [&["-t", "5"][..], &["--timeout", "5"], &["--timeout=5"]] {
        let out = retry()
            .args(args)
            .args(["-n", "2", "-d", "0", "--", "false"])
            .output()
            .unwrap();
        let log = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{log}");
        assert_eq!(log.matches(warning).count(), 1, "{args:?}: once: {log}");
        // In the dry run too, where a policy is planned.
        let out = retry()
            .arg("--dry-run")
            .args(args)
            .arg("true")
            .output()
            .unwrap();
        let shown = String::from_utf8_lossy(&out.stdout);
        assert_eq!(shown.matches(warning).count(), 1, "{args:?}: {shown}");
    }
    // The last -t is the one that counts: a unit there, no warning.
    for args in [
        &["-t", "5s"][..],
        &["-t", "0"],
        &["-t", "5", "-t", "5s"],
        &["-t", "250ms"],
    ] {
        let out = retry()
            .args(args)
            .args(["-n", "1", "--", "true"])
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(out.stderr.is_empty(), "{args:?}: {}", stderr_of(&out));
    }
}

#[test]
fn the_help_of_older_than_gives_an_example_not_a_default() {
    let out = retry().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let at = help
        .find("--older-than <DURATION>")
        .expect("--older-than in --help");
    let text: String = help[at..]
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(!text.contains("(30d)"), "{text}");
    assert!(
        text.contains("as 30d") && text.contains("no default"),
        "{text}"
    );
}

#[test]
fn a_negative_older_than_is_refused_in_retrys_words() {
    let out = retry()
        .args(["--prune", "d.jsonl", "--older-than", "-1s"])
        .output()
        .unwrap();
    let line = usage_error_of(&out, "--older-than");
    assert!(
        line.contains("'-1s'") && line.contains("--older-than") && line.contains("negative"),
        "{line}"
    );
}

#[test]
fn prune_refuses_a_history_or_a_dead_letter_file_given_beside_it() {
    let dir = common::temp_dir("cli-prune-beside");
    for option in ["--history", "--dead-letter"] {
        let out = retry()
            .current_dir(&dir)
            .args([
                "--prune",
                "d.jsonl",
                "--older-than",
                "1d",
                option,
                "h.jsonl",
            ])
            .output()
            .unwrap();
        let line = usage_error_of(&out, option);
        assert!(
            line.contains("--prune takes its store as its value") && line.contains(option),
            "{line}"
        );
    }
    assert!(std::fs::read_dir(&dir).unwrap().next().is_none());
}

/// `-h` is the summary a newcomer reads, `--help` the whole text (README.md says so): `-h`
/// stays within 160 lines and under a third of `--help`, which alone sums up the exit statuses.
#[test]
fn the_short_help_is_a_summary_and_the_long_help_the_whole_text() {
    let short = common::stdout_of(&retry().arg("-h").output().unwrap());
    let long = common::stdout_of(&retry().arg("--help").output().unwrap());
    let (s, l) = (short.lines().count(), long.lines().count());
    assert!(s <= 160 && s * 3 <= l, "-h: {s} lines, --help: {l}");
    assert!(long.contains("\nExit status:"), "{long}");
    assert!(!short.contains("Exit status:"), "{short}");
}
