//! The crontab lines of docs/dead-letters.md, run as cron runs them: by `/bin/sh -c`, with `PATH=/usr/bin:/bin`
//! and `HOME` only, both output streams going to the one mail cron sends when there is any.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The command of docs/dead-letters.md's crontab line that starts with `start` (after its five
/// time fields), with `retry`'s waits given as `wait` so that the test does not wait them.
fn crontab_line(start: &str, waits: &[(&str, &str)]) -> String {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/dead-letters.md"))
            .expect("docs/dead-letters.md");
    let line = page
        .lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no crontab line starts with {start}"));
    let mut command = line
        .splitn(6, ' ')
        .nth(5)
        .expect("five time fields")
        .to_string();
    for (from, to) in waits {
        assert!(command.contains(from), "{command}");
        command = command.replace(from, to);
    }
    command
}

/// A home with `retry` where `cargo install` puts it, and nothing else on cron's PATH.
fn home(name: &str) -> std::path::PathBuf {
    let home = common::temp_dir(name);
    let bin = home.join(".cargo/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_retry"), bin.join("retry")).unwrap();
    home
}

/// Runs `command` in `home` as cron does; what cron would mail (stdout and stderr, in order),
/// and the status.
fn as_cron(home: &Path, command: &str) -> (String, i32) {
    let out = assert_cmd::Command::new("/usr/bin/env")
        .current_dir(home)
        .timeout(common::TEST_LIMIT)
        .env_clear()
        .arg(format!("HOME={}", home.display()))
        .args(["PATH=/usr/bin:/bin", "/bin/sh", "-c"])
        .arg(format!("( {command} ) 2>&1"))
        .output()
        .unwrap();
    assert!(out.stderr.is_empty());
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// A check whose try N writes `out N` and `err N`, and succeeds from try `ok_from` on.
fn check(home: &Path, ok_from: u32) {
    let script = home.join("check-backups");
    let text = format!(
        "#!/bin/sh\necho \"out $RETRY_ATTEMPT\"\necho \"err $RETRY_ATTEMPT\" >&2\n[ \"$RETRY_ATTEMPT\" -ge {ok_from} ]\n"
    );
    std::fs::write(&script, text).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn the_cron_check_mails_only_when_it_gives_up_and_keeps_stdout_out_of_the_mail() {
    let line = crontab_line(
        "*/5 * * * * ~/.cargo/bin/retry --output-on-failure",
        &[("-d 20s", "-d 10ms")],
    );
    let home = home("cron-check");
    let log = home.join("check-backups.log");
    // A good run, on its first try or after failures: no mail; the successful try's stdout
    // in the file.
    for (ok_from, kept) in [(1, "out 1\n"), (3, "out 3\n")] {
        check(&home, ok_from);
        let _ = std::fs::remove_file(&log);
        let (mail, status) = as_cron(&home, &line);
        assert_eq!((mail.as_str(), status), ("", 0), "try {ok_from} succeeds");
        assert_eq!(std::fs::read_to_string(&log).unwrap(), kept);
    }
    assert!(
        !home.join("failed.jsonl").exists()
            || std::fs::read(home.join("failed.jsonl")).unwrap().is_empty()
    );
    // A run that gives up: the mail has every try's output, stdout and stderr, before
    // retry's line about that try, and the last line; the file gets nothing; the run is
    // recorded.
    check(&home, 9);
    let _ = std::fs::remove_file(&log);
    let (mail, status) = as_cron(&home, &line);
    assert_eq!(status, 1, "{mail}");
    let lines: Vec<&str> = mail.lines().collect();
    let at = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} in the mail: {mail}"))
    };
    for k in 1..=3 {
        let said = at(&format!("try {k}/3 exited 1"));
        assert!(at(&format!("out {k}")) < said, "{mail}");
        assert!(at(&format!("err {k}")) < said, "{mail}");
        if k > 1 {
            assert!(
                at(&format!("try {}/3 exited 1", k - 1)) < at(&format!("out {k}")),
                "{mail}"
            );
        }
    }
    assert!(
        at("try 3/3 exited 1") < at("gave up after 3 tries"),
        "{mail}"
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "");
    let recorded = std::fs::read_to_string(home.join("failed.jsonl")).unwrap();
    assert_eq!(recorded.lines().count(), 1, "{recorded}");
}

#[test]
fn the_morning_replay_mails_nothing_when_nothing_is_pending() {
    let line = crontab_line("0 8 * * * ~/.cargo/bin/retry --replay", &[]);
    let home = home("cron-replay");
    // Before any run gave up: the file is not made yet.
    assert_eq!(as_cron(&home, &line), (String::new(), 0));
    // A night that gave up is replayed, and said.
    check(&home, 9);
    let (_, status) = as_cron(
        &home,
        "~/.cargo/bin/retry -n 1 --dead-letter ~/failed.jsonl -- ./check-backups",
    );
    assert_eq!(status, 1);
    let (mail, status) = as_cron(&home, &line);
    assert_eq!(status, 1, "{mail}");
    assert!(mail.contains("1 still pending"), "{mail}");
    // Once it succeeds, it is resolved without a mail; the next morning is quiet too.
    check(&home, 1);
    assert_eq!(as_cron(&home, &line), (String::new(), 0));
    assert_eq!(as_cron(&home, &line), (String::new(), 0));
}
