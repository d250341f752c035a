//! `RETRY_ENV_FILE`: the variables an `--on-retry` hook sets for the later tries
//! (docs/log.md#variables-for-the-next-tries), through the real binary.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{STEP_LIMIT, json_lines, retry, retry_std, stderr_of};

/// What a test's runs leave in their private directory of `retry` (`$XDG_RUNTIME_DIR/retry`):
/// the names of the hooks' files still there.
fn env_files_left(runtime: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(runtime.join("retry")) else {
        return Vec::new();
    };
    entries
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("env-"))
        .collect()
}

#[test]
fn a_token_a_hook_sets_reaches_the_later_tries_and_a_later_hook_wins() {
    let dir = common::temp_dir("envfile-token");
    let runtime = common::runtime_dir("envfile-token-rt");
    let hook = r#"if [ "$RETRY_ATTEMPT" = 1 ]; then
            echo TOKEN=fresh >> "$RETRY_ENV_FILE"
        else
            echo "hook $RETRY_ATTEMPT saw $TOKEN" >> log
            printf 'MIRROR=m2\r\nTOKEN=newer\n' >> "$RETRY_ENV_FILE"
        fi"#;
    let out = retry()
        .current_dir(&dir)
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("TOKEN", "inherited")
        .args(["-n", "3", "-d", "10ms", "-j", "none", "--on-retry", hook])
        .args([
            "--on-give-up",
            r#"echo "give-up $TOKEN $MIRROR ${RETRY_ENV_FILE-none}" >> log"#,
            "--",
            "sh",
            "-c",
            r#"echo "try $RETRY_ATTEMPT $TOKEN ${MIRROR-unset}" >> log; exit 3"#,
        ])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(3), "{log}");
    assert!(!log.contains("warning"), "{log}");
    let text = std::fs::read_to_string(dir.join("log")).unwrap();
    assert_eq!(
        text,
        "try 1 inherited unset\n\
         try 2 fresh unset\n\
         hook 2 saw fresh\n\
         try 3 newer m2\n\
         give-up newer m2 none\n",
        "the first hook's TOKEN reaches tries 2 and 3 and the second hook, the second hook's \
         reaches try 3 and --on-give-up, which gets no file of its own"
    );
    assert_eq!(env_files_left(&runtime), Vec::<String>::new());
}

#[test]
fn refused_lines_are_warned_of_by_number_and_name_never_by_value() {
    let secret = "s3cr3t-Qx7vZ9";
    let dir = common::temp_dir("envfile-refused");
    let runtime = common::runtime_dir("envfile-refused-rt");
    let hook = format!(
        "printf 'OK=1\\nthe token is {secret}\\nRETRY_X={secret}\\nexport A={secret}\\n\\nKEY<<EOF\\n{secret}\\n' \
         >> \"$RETRY_ENV_FILE\""
    );
    let run = |format: &str| {
        retry()
            .current_dir(&dir)
            .env("XDG_RUNTIME_DIR", &runtime)
            .args(["-n", "2", "-d", "10ms", "--log-format", format])
            .args(["--on-retry", &hook, "--", "sh", "-c"])
            .arg(r#"echo "try $RETRY_ATTEMPT ${OK-unset} ${RETRY_X-unset} ${KEY-unset}" >> out; exit 1"#)
            .output()
            .unwrap()
    };
    let human = run("human");
    let log = stderr_of(&human);
    assert_eq!(human.status.code(), Some(1), "{log}");
    for expected in [
        "warning: RETRY_ENV_FILE line 2 is ignored: it is not NAME=VALUE",
        "warning: RETRY_ENV_FILE line 3: RETRY_X is not set: the RETRY_ variables are retry's own",
        "warning: RETRY_ENV_FILE line 4 is ignored: what comes before its = (or <<) is not a \
         variable name",
        "warning: RETRY_ENV_FILE line 6: KEY is not set: no line DELIMITER ends its value",
    ] {
        assert!(log.contains(expected), "{expected:?} in\n{log}");
    }
    assert_eq!(log.matches("RETRY_ENV_FILE line").count(), 4, "{log}");
    assert!(!log.contains(secret), "{log}");

    let json = run("json");
    let text = stderr_of(&json);
    assert!(!text.contains(secret), "{text}");
    let lines = json_lines(&text);
    let warnings: Vec<&str> = common::events(&lines, "warning")
        .iter()
        .map(|w| w["message"].as_str().unwrap())
        .collect();
    assert_eq!(warnings.len(), 4, "{warnings:?}");
    assert!(
        warnings[1].contains("line 3: RETRY_X is not set"),
        "{warnings:?}"
    );

    let out = std::fs::read_to_string(dir.join("out")).unwrap();
    assert_eq!(
        out,
        "try 1 unset unset unset\ntry 2 1 unset unset\n".repeat(2)
    );
    assert_eq!(env_files_left(&runtime), Vec::<String>::new());
}

#[test]
fn the_file_is_fresh_and_private_while_the_hook_runs_and_gone_after_it() {
    let dir = common::temp_dir("envfile-private");
    let runtime = common::runtime_dir("envfile-private-rt");
    let hook = r#"echo "$RETRY_ENV_FILE" >> paths
        if [ -f "$RETRY_ENV_FILE" ] && [ ! -s "$RETRY_ENV_FILE" ]; then echo empty >> modes; fi
        stat -c %a "$RETRY_ENV_FILE" >> modes
        echo "A=$RETRY_ATTEMPT" >> "$RETRY_ENV_FILE""#;
    // Whatever the umask would take away or leave: the file is 0600.
    for umask in ["000", "177"] {
        std::fs::write(dir.join("modes"), "").unwrap();
        let mut sh = assert_cmd::Command::new("sh");
        sh.timeout(common::TEST_LIMIT).env_remove("RETRY_RUN_ID");
        for name in common::CI_VARS {
            sh.env_remove(name);
        }
        let out = sh
            .current_dir(&dir)
            .env("XDG_RUNTIME_DIR", &runtime)
            .args(["-c", &format!("umask {umask}; exec \"$@\""), "sh"])
            .arg(assert_cmd::cargo::cargo_bin("retry"))
            .args(["-n", "3", "-d", "0", "--on-retry", hook, "--", "false"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
        let modes = std::fs::read_to_string(dir.join("modes")).unwrap();
        assert_eq!(modes, "empty\n600\nempty\n600\n", "umask {umask}");
    }
    let paths = std::fs::read_to_string(dir.join("paths")).unwrap();
    let paths: Vec<&str> = paths.lines().collect();
    assert_eq!(paths.len(), 4);
    let unique: std::collections::BTreeSet<&str> = paths.iter().copied().collect();
    assert_eq!(unique.len(), 4, "a fresh file for each call: {paths:?}");
    for path in &paths {
        assert!(
            path.starts_with(runtime.join("retry").to_str().unwrap()),
            "{path}"
        );
        assert!(!Path::new(path).exists(), "{path} is left after the hook");
    }
    let mode = std::fs::metadata(runtime.join("retry")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(mode.permissions().mode() & 0o777, 0o700);
}

#[test]
fn a_hook_that_times_out_still_hands_on_its_lines_and_its_file_goes() {
    let dir = common::temp_dir("envfile-timeout");
    let runtime = common::runtime_dir("envfile-timeout-rt");
    let started = Instant::now();
    let out = retry()
        .current_dir(&dir)
        .env("XDG_RUNTIME_DIR", &runtime)
        .args([
            "-n",
            "2",
            "-d",
            "0",
            "-t",
            "300ms",
            "-k",
            "100ms",
            "--on-retry",
        ])
        .arg(r#"echo "$RETRY_ENV_FILE" > path; echo T=late >> "$RETRY_ENV_FILE"; exec sleep 30"#)
        .args(["--", "sh", "-c", r#"echo "try ${T-unset}" >> out; exit 1"#])
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(log.contains("--on-retry hook timed out"), "{log}");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < STEP_LIMIT, "{took:?}");
    let tries = std::fs::read_to_string(dir.join("out")).unwrap();
    assert_eq!(tries, "try unset\ntry late\n");
    let path = std::fs::read_to_string(dir.join("path")).unwrap();
    assert!(!Path::new(path.trim_end()).exists(), "{path}");
}

#[test]
fn the_file_goes_when_retry_is_stopped_during_the_hook() {
    let dir = common::temp_dir("envfile-signal");
    let runtime = common::runtime_dir("envfile-signal-rt");
    let mut child = retry_std()
        .current_dir(&dir)
        .env("XDG_RUNTIME_DIR", &runtime)
        .args(["-n", "2", "-d", "0", "-k", "200ms", "--on-retry"])
        .arg(r#"echo T=1 >> "$RETRY_ENV_FILE"; echo "$RETRY_ENV_FILE" > path.tmp; mv path.tmp path; exec sleep 30"#)
        .args(["--", "false"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let path_file = dir.join("path");
    assert!(common::wait_until(STEP_LIMIT, || path_file.exists()));
    let path = std::fs::read_to_string(&path_file).unwrap();
    let path = Path::new(path.trim_end());
    assert!(path.exists(), "the file is there while the hook runs");
    common::send(child.id(), nix::libc::SIGTERM);
    let status = common::wait_bounded(&mut child, STEP_LIMIT);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(nix::libc::SIGTERM));
    assert!(!path.exists(), "{} is left after SIGTERM", path.display());
    assert_eq!(env_files_left(&runtime), Vec::<String>::new());
}

#[test]
fn a_hook_that_writes_megabytes_to_the_file_is_read_only_up_to_the_bound() {
    let dir = common::temp_dir("envfile-large");
    let runtime = common::runtime_dir("envfile-large-rt");
    // The try reads how much memory retry, its parent, has taken at most so far.
    let try_script = r#"echo "$(awk '/VmHWM/ { print $2 }' /proc/$PPID/status) ${TOKEN-unset} ${LAST-unset}" >> out; exit 1"#;
    let hook = r#"echo TOKEN=first >> "$RETRY_ENV_FILE"
        head -c 10000000 /dev/zero | tr '\0' x >> "$RETRY_ENV_FILE"
        echo LAST=after >> "$RETRY_ENV_FILE""#;
    let started = Instant::now();
    let out = retry()
        .current_dir(&dir)
        .env("XDG_RUNTIME_DIR", &runtime)
        .args([
            "-n",
            "2",
            "-d",
            "0",
            "--on-retry",
            hook,
            "--",
            "sh",
            "-c",
            try_script,
        ])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(started.elapsed() < STEP_LIMIT);
    assert!(
        log.contains(
            "RETRY_ENV_FILE holds more than the 64 KiB or 1000 lines that are read: what follows \
             line 1 sets nothing"
        ),
        "{log}"
    );
    let text = std::fs::read_to_string(dir.join("out")).unwrap();
    let tries: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(tries.len(), 2, "{text}");
    assert_eq!(tries[0][1..], ["unset", "unset"]);
    assert_eq!(
        tries[1][1..],
        ["first", "unset"],
        "the line past the bound sets nothing"
    );
    let kib = |t: &[&str]| {
        t[0].parse::<u64>()
            .unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    let grew = kib(&tries[1]).saturating_sub(kib(&tries[0]));
    assert!(
        grew < 2048,
        "retry took {grew} KiB more: it read the 10 MB file"
    );
    assert_eq!(env_files_left(&runtime), Vec::<String>::new());
}
