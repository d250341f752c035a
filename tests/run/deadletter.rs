//! Dead letters and replay (docs/dead-letters.md#dead-letters-and-replay) through the real binary:
//! the file that runs giving up append to, and `--replay`, which runs them again.

use crate::common;

use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::{
    euid, events, json_file, other_user, retry, retry_std, stderr_of, stdout_of, usage_error_of,
    wait_bounded, wait_until,
};
use serde_json::Value;

fn ids(lines: &[&Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_string())
        .collect()
}

/// Runs `retry --dead-letter FILE ARGS -- sh -c SCRIPT` in `dir`; returns its exit status.
fn give_up(dir: &Path, file: &Path, args: &[&str], script: &str) -> i32 {
    let out = retry()
        .current_dir(dir)
        .arg("--dead-letter")
        .arg(file)
        .args(args)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    out.status.code().unwrap_or(-1)
}

/// Runs `retry --replay FILE ARGS` in `dir`.
fn replay(dir: &Path, file: &Path, args: &[&str]) -> std::process::Output {
    retry()
        .current_dir(dir)
        .arg("--replay")
        .arg(file)
        .args(args)
        .output()
        .unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn fifty_runs_giving_up_together_leave_fifty_whole_lines_in_a_private_file() {
    let dir = common::temp_dir("dl-fifty");
    let file = dir.join("new").join("dead.jsonl");
    let mut children: Vec<_> = (0..50)
        .map(|_| {
            retry_std()
                .current_dir(&dir)
                .arg("--dead-letter")
                .arg(&file)
                .args(["-n", "1", "--", "sh", "-c", "exit 3"])
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in &mut children {
        let status = wait_bounded(child, common::TEST_LIMIT);
        assert_eq!(status.code(), Some(3));
    }
    let lines = json_file(&file);
    assert_eq!(lines.len(), 50);
    let unique: HashSet<String> = ids(&events(&lines, "dead_letter")).into_iter().collect();
    assert_eq!(unique.len(), 50, "every run has its own id");
    for line in &lines {
        assert_eq!(line["command"], serde_json::json!(["sh", "-c", "exit 3"]));
        assert_eq!(line["options"], serde_json::json!(["-n", "1"]));
        assert_eq!(line["exit_code"], 3);
        assert_eq!(line["reason"], "tries");
        assert_eq!(line["tries"], 1);
        assert_eq!(line["label"], Value::Null);
        assert!(
            line["duration_ms"].is_u64() && line["ts"].is_string(),
            "{line}"
        );
        assert_eq!(line["cwd"], dir.to_str().unwrap_or_default());
    }
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);
}

#[test]
fn a_record_keeps_every_field_and_never_the_environment() {
    let dir = common::temp_dir("dl-fields");
    let file = dir.join("dead.jsonl");
    let out = retry()
        .current_dir(&dir)
        .env("SECRET_TOKEN", "hunter2")
        .args(["--label", "nightly sync", "-n", "2", "-d", "1ms"])
        .args(["--deadline", "2099-01-01T00:00:00Z", "--stop-on", "4"])
        .arg("--dead-letter")
        .arg(&file)
        .args(["--", "sh", "-c", "exit 4"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("hunter2"), "{text}");
    let lines = json_file(&file);
    assert_eq!(lines.len(), 1);
    let r = &lines[0];
    assert_eq!(r["label"], "nightly sync");
    assert_eq!(r["reason"], "permanent");
    assert_eq!(
        (r["exit_code"].as_u64(), r["tries"].as_u64()),
        (Some(4), Some(1))
    );
    // As given, less --dead-letter and --deadline, which would have passed at a replay, and
    // with the budget the deadline gave the run last.
    let mut options = r["options"].as_array().unwrap().clone();
    let bound = options.pop().unwrap();
    assert!(bound.as_str().unwrap().starts_with("--budget="), "{bound}");
    assert_eq!(
        serde_json::Value::Array(options),
        serde_json::json!([
            "--label",
            "nightly sync",
            "-n",
            "2",
            "-d",
            "1ms",
            "--stop-on",
            "4"
        ])
    );
}

#[test]
fn a_run_bounded_by_a_deadline_alone_is_replayed_within_the_budget_the_deadline_gave_it() {
    let dir = common::temp_dir("dl-deadline");
    let file = dir.join("dead.jsonl");
    let at = std::time::SystemTime::now() + Duration::from_millis(700);
    let at = humantime::format_rfc3339_millis(at).to_string();
    let args = ["-n", "0", "-d", "20ms", "-m", "50ms", "--deadline", &at];
    // The last try exits 3, or on a loaded machine the deadline cuts it (124).
    let code = give_up(&dir, &file, &args, "exit 3");
    assert!(code == 3 || code == 124, "{code}");
    let lines = json_file(&file);
    let options = lines[0]["options"].as_array().unwrap();
    let budget = options.last().and_then(Value::as_str).unwrap_or_default();
    let budget = budget.strip_prefix("--budget=").unwrap_or_else(|| {
        panic!("no budget in place of the deadline: {options:?}");
    });
    let budget = humantime::parse_duration(budget).unwrap();
    assert!(budget <= Duration::from_millis(700), "{budget:?}");
    // Without a bound in its place, the replay of -n 0 would retry for ever.
    let started = std::time::Instant::now();
    let mut child = retry_std()
        .current_dir(&dir)
        .arg("--replay")
        .arg(&file)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    assert!(started.elapsed() >= budget / 2, "{:?}", started.elapsed());
    assert_eq!(
        status.code(),
        Some(1),
        "a replay that gives up keeps the run"
    );
    let attempts = json_file(&file);
    let attempt = events(&attempts, "attempt");
    assert_eq!(attempt.len(), 1, "{attempts:?}");
    assert_eq!(attempt[0]["reason"], "budget");
}

#[test]
fn a_run_that_succeeds_or_is_interrupted_is_not_recorded() {
    let dir = common::temp_dir("dl-none");
    let file = dir.join("dead.jsonl");
    assert_eq!(give_up(&dir, &file, &["-n", "3"], "exit 0"), 0);
    // Ctrl-C reached the command: stop at once, and nothing to run again.
    let out = retry()
        .current_dir(&dir)
        .arg("--dead-letter")
        .arg(&file)
        .args(["--", "sh", "-c", "exit 130"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr_of(&out));
    // The file is created when the run starts, so that a path that cannot be written is found
    // at once; it holds no line.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "");
}

#[test]
fn a_dead_letter_file_that_cannot_be_created_is_an_error_before_the_command_runs() {
    let dir = common::temp_dir("dl-cannot");
    std::fs::write(dir.join("plain"), "").unwrap();
    let out = retry()
        .current_dir(&dir)
        .args(["--dead-letter", "plain/dead.jsonl", "--", "touch", "ran"])
        .output()
        .unwrap();
    let log = usage_error_of(&out, "");
    assert!(log.contains("--dead-letter 'plain/dead.jsonl'"), "{log}");
    assert!(!dir.join("ran").exists());
}

#[test]
fn an_argument_of_any_bytes_replays_byte_exact_in_its_directory() {
    let base = common::temp_dir("dl-bytes");
    // The directory's name is not UTF-8 either.
    let dir = base.join(OsStr::from_bytes(b"d\xffir"));
    std::fs::create_dir(&dir).unwrap();
    let file = base.join("dead.jsonl");
    let weird = OsStr::from_bytes(b"\xff\xfe a 'quote' \"double\"\nnext line");
    let script = "printf '%s\\0' \"$@\" > argv; test -e ok";
    let out = retry()
        .current_dir(&dir)
        .arg("--dead-letter")
        .arg(&file)
        .args(["-n", "1", "--", "sh", "-c", script, "sh"])
        .arg(weird)
        .arg("plain")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let mut expected = weird.as_bytes().to_vec();
    expected.extend_from_slice(b"\0plain\0");
    assert_eq!(std::fs::read(dir.join("argv")).unwrap(), expected);
    let record = &json_file(&file)[0];
    assert!(record["command"][4]["base64"].is_string(), "{record}");
    assert!(record["cwd"]["base64"].is_string(), "{record}");

    std::fs::remove_file(dir.join("argv")).unwrap();
    std::fs::write(dir.join("ok"), "").unwrap();
    let out = replay(&base, &file, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(std::fs::read(dir.join("argv")).unwrap(), expected);
}

/// Three runs that gave up, in directories `a`, `b` and `c` of `base`: each appends its name
/// to `base/runs` and succeeds once its directory holds `ok`.
fn three_runs(base: &Path) -> PathBuf {
    let file = base.join("dead.jsonl");
    for name in ["a", "b", "c"] {
        let dir = base.join(name);
        std::fs::create_dir(&dir).unwrap();
        let script = format!("echo {name} >> ../runs; test -e ok");
        assert_eq!(give_up(&dir, &file, &["-n", "2", "-d", "1ms"], &script), 1);
    }
    file
}

fn runs(base: &Path) -> String {
    std::fs::read_to_string(base.join("runs")).unwrap_or_default()
}

#[test]
fn of_three_runs_one_resolves_and_two_stay_pending_and_only_those_are_tried_again() {
    let base = common::temp_dir("dl-three");
    let file = three_runs(&base);
    assert_eq!(runs(&base), "a\na\nb\nb\nc\nc\n");
    let recorded = ids(&events(&json_file(&file), "dead_letter"));
    std::fs::write(base.join("a/ok"), "").unwrap();
    std::fs::remove_dir_all(base.join("c")).unwrap();

    // -n 1 given now overrides the recorded -n 2: one try each.
    let out = replay(&base, &file, &["-n", "1"]);
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert_eq!(runs(&base), "a\na\nb\nb\nc\nc\na\nb\n");
    assert!(log.contains("run 1/3 resolved"), "{log}");
    assert!(log.contains("run 2/3 still pending"), "{log}");
    assert!(
        log.contains("run 3/3 still pending: cannot enter its directory"),
        "{log}"
    );
    assert!(log.contains(": 1 resolved, 2 still pending"), "{log}");
    let after = json_file(&file);
    assert_eq!(ids(&events(&after, "resolved")), [recorded[0].clone()]);
    let attempts = events(&after, "attempt");
    assert_eq!(ids(&attempts), [recorded[1].clone(), recorded[2].clone()]);
    assert_eq!(attempts[0]["reason"], "tries");
    assert_eq!(attempts[1]["reason"], "cwd");

    // The dry run lists the two, and runs nothing.
    let out = replay(&base, &file, &["--dry-run"]);
    let list = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(list.starts_with("2 runs pending in "), "{list}");
    assert!(!list.contains(&recorded[0]), "{list}");
    for id in &recorded[1..] {
        let line = list
            .lines()
            .find(|l| l.starts_with(id.as_str()))
            .unwrap_or_else(|| panic!("{id} not listed: {list}"));
        assert!(
            line.contains("2 tries, exit 1 (tries), replayed once"),
            "{line}"
        );
        assert!(line.contains("2026") || line.contains('T'), "{line}");
    }
    assert!(
        list.contains("sh -c 'echo b >> ../runs; test -e ok'"),
        "{list}"
    );
    assert_eq!(runs(&base), "a\na\nb\nb\nc\nc\na\nb\n");

    // The second replay tries only the two; its own options are the recorded ones.
    std::fs::write(base.join("b/ok"), "").unwrap();
    let out = replay(&base, &file, &[]);
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert_eq!(runs(&base), "a\na\nb\nb\nc\nc\na\nb\nb\n");
    assert!(log.contains("run 1/2 resolved"), "{log}");
    assert!(log.contains(": 1 resolved, 1 still pending"), "{log}");
}

#[test]
fn a_replay_killed_midway_then_run_again_resolves_every_run_once() {
    let base = common::temp_dir("dl-killed");
    let file = base.join("dead.jsonl");
    for _ in 0..3 {
        let script = "test -e ok && sleep 0.4";
        assert_eq!(give_up(&base, &file, &["-n", "1"], script), 1);
    }
    let recorded: HashSet<String> = ids(&events(&json_file(&file), "dead_letter"))
        .into_iter()
        .collect();
    std::fs::write(base.join("ok"), "").unwrap();
    let mut child = retry_std()
        .current_dir(&base)
        .arg("--replay")
        .arg(&file)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let resolved = |n: usize| {
        std::fs::read_to_string(&file)
            .unwrap_or_default()
            .matches("\"event\":\"resolved\"")
            .count()
            >= n
    };
    assert!(wait_until(common::TEST_LIMIT, || resolved(1)));
    child.kill().unwrap();
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    assert_eq!(status.signal(), Some(nix::libc::SIGKILL));

    let out = replay(&base, &file, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let lines = json_file(&file);
    let records = ids(&events(&lines, "dead_letter"));
    assert_eq!(records.len(), 3, "no record lost or added");
    let resolved = ids(&events(&lines, "resolved"));
    assert_eq!(resolved.len(), 3, "each run resolved once: {resolved:?}");
    assert_eq!(resolved.into_iter().collect::<HashSet<_>>(), recorded);
    let out = replay(&base, &file, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout_of(&out).starts_with("nothing pending in "));
}

#[test]
fn a_run_that_gives_up_during_a_replay_is_kept_for_the_next() {
    let base = common::temp_dir("dl-meanwhile");
    let file = base.join("dead.jsonl");
    let late = format!(
        "retry --dead-letter {} -n 1 -- sh -c 'exit 5'; true",
        file.display()
    );
    let bin = assert_cmd::cargo::cargo_bin("retry");
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = retry()
        .current_dir(&base)
        .env("PATH", &path)
        .arg("--dead-letter")
        .arg(&file)
        .args([
            "-n",
            "1",
            "--",
            "sh",
            "-c",
            "test -e ok || exit 3; eval \"$LATE\"",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    std::fs::write(base.join("ok"), "").unwrap();
    // While replayed, the run starts another that gives up and appends itself.
    let out = retry()
        .current_dir(&base)
        .env("PATH", &path)
        .env("LATE", &late)
        .arg("--replay")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let lines = json_file(&file);
    assert_eq!(events(&lines, "dead_letter").len(), 2);
    assert_eq!(events(&lines, "resolved").len(), 1);
    let out = replay(&base, &file, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout_of(&out).contains("sh -c 'exit 5'"));
}

#[test]
fn an_interrupted_replay_stops_and_marks_nothing_resolved() {
    let base = common::temp_dir("dl-interrupted");
    let file = base.join("dead.jsonl");
    for _ in 0..2 {
        let script = "test -e ok && echo $$ >> pids && sleep 10";
        assert_eq!(give_up(&base, &file, &["-n", "1"], script), 1);
    }
    std::fs::write(base.join("ok"), "").unwrap();
    let mut child = retry_std()
        .current_dir(&base)
        .arg("--replay")
        .arg(&file)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(common::TEST_LIMIT, || {
        !common::pids_in(&base.join("pids")).is_empty()
    }));
    common::send(child.id(), nix::libc::SIGTERM);
    let status = wait_bounded(&mut child, Duration::from_secs(20));
    assert_eq!(status.signal(), Some(nix::libc::SIGTERM));
    let lines = json_file(&file);
    assert!(events(&lines, "resolved").is_empty());
    let attempts = events(&lines, "attempt");
    assert_eq!(attempts.len(), 1, "the second run never started");
    assert_eq!(attempts[0]["reason"], "interrupted");
    assert_eq!(common::pids_in(&base.join("pids")).len(), 1);
}

/// A signal that comes between two replayed runs (here while the replay waits for the file's
/// lock to record how the first one ended): the first run is recorded as it ended, the next
/// one is neither started nor marked attempted, and retry dies of the signal.
#[test]
fn a_signal_between_two_replayed_runs_starts_neither_the_next_nor_marks_it() {
    let base = common::temp_dir("dl-between");
    let file = base.join("dead.jsonl");
    // Replayed, the first run waits for the file to be locked before it ends.
    let first = "echo $RETRY_RUN_ID >> marks; test -e go || exit 1; \
                 while ! test -e locked; do sleep 0.01; done; exit 1";
    assert_eq!(give_up(&base, &file, &["-n", "1"], first), 1);
    let second = "echo $RETRY_RUN_ID >> marks; exit 1";
    assert_eq!(give_up(&base, &file, &["-n", "1"], second), 1);
    let given = std::fs::read_to_string(base.join("marks")).unwrap();
    std::fs::write(base.join("go"), "").unwrap();
    let log = base.join("replay.jsonl");
    let mut replay = retry_std()
        .current_dir(&base)
        .arg("--replay")
        .arg(&file)
        .args(["--log-format", "json", "--log-file"])
        .arg(&log)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let marks = base.join("marks");
    assert!(wait_until(common::TEST_LIMIT, || {
        std::fs::read_to_string(&marks).is_ok_and(|m| m.lines().count() == 3)
    }));
    let mut lock = common::LockHolder::lock(&file);
    std::fs::write(base.join("locked"), "").unwrap();
    // The first run ends, and the replay waits for the lock to record it: the signal comes
    // then.
    assert!(wait_until(common::TEST_LIMIT, || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("\"give_up\""))
    }));
    std::thread::sleep(Duration::from_millis(100));
    common::send(replay.id(), nix::libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(100));
    lock.release();
    let status = wait_bounded(&mut replay, common::TEST_LIMIT);
    assert_eq!(status.signal(), Some(nix::libc::SIGTERM));
    let id = given.lines().next().unwrap();
    let ran = std::fs::read_to_string(&marks).unwrap();
    assert_eq!(ran, format!("{given}{id}\n"), "the second run never ran");
    let lines = json_file(&file);
    assert_eq!(
        ids(&events(&lines, "attempt")),
        vec![id.to_string()],
        "{lines:?}"
    );
    assert!(events(&lines, "resolved").is_empty());
    let logged = json_file(&log);
    assert_eq!(
        ids(&events(&logged, "replay")),
        vec![id.to_string()],
        "the second run was not started: {logged:?}"
    );
}

#[test]
fn bad_input_to_replay_is_one_line_and_125() {
    let base = common::temp_dir("dl-bad");
    let file = base.join("dead.jsonl");
    assert_eq!(
        give_up(&base, &file, &["-n", "1", "--success-on", "7"], "exit 3"),
        3
    );
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("{\"event\":\"dead_letter\",\"id\":]\n");
    let damaged = base.join("damaged.jsonl");
    std::fs::write(&damaged, &text).unwrap();
    let missing = base.join("no-such-directory").join("missing.jsonl");
    let cases: [(Vec<&OsStr>, &str); 5] = [
        (
            vec![file.as_os_str(), OsStr::new("--"), OsStr::new("true")],
            "takes no command",
        ),
        (
            vec![file.as_os_str(), OsStr::new("true")],
            "takes no command",
        ),
        (vec![missing.as_os_str()], "missing.jsonl"),
        (vec![damaged.as_os_str()], "line 2: not JSON"),
        (
            vec![
                file.as_os_str(),
                OsStr::new("--dead-letter"),
                OsStr::new("x"),
            ],
            "--dead-letter",
        ),
    ];
    for (args, needle) in cases {
        let out = retry()
            .current_dir(&base)
            .arg("--replay")
            .args(&args)
            .output()
            .unwrap();
        let log = usage_error_of(&out, &format!("{args:?}"));
        assert!(log.contains(needle), "{args:?}: {log}");
    }
    // A damaged line stops the dry run too: nothing is skipped silently.
    let out = replay(&base, &damaged, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(stdout_of(&out).is_empty());
    // Options given now that cannot go with a run's are found before anything runs.
    let out = replay(&base, &file, &["--retry-on", "7"]);
    let log = usage_error_of(&out, "");
    assert!(
        log.contains("line 1") && log.contains("--success-on"),
        "{log}"
    );
}

#[test]
fn a_second_replay_of_the_same_file_meanwhile_ends_at_once_and_runs_nothing() {
    let base = common::temp_dir("dl-overlap");
    let file = base.join("dead.jsonl");
    let count = base.join("count");
    // Each run counts its tries; the first replay's run takes a second, while the second
    // replay starts.
    let script = format!(
        "echo x >> '{}'; test -e ok || exit 3; sleep 1",
        count.display()
    );
    assert_eq!(give_up(&base, &file, &["-n", "1"], &script), 3);
    std::fs::write(base.join("ok"), "").unwrap();
    let mut first = retry_std()
        .current_dir(&base)
        .arg("--replay")
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first replay's run has started: it counted its try.
    assert!(wait_until(common::STEP_LIMIT, || {
        std::fs::read_to_string(&count).is_ok_and(|c| c.lines().count() == 2)
    }));
    let out = replay(&base, &file, &[]);
    let log = usage_error_of(&out, "");
    assert!(
        log.contains("another replay of this file is running"),
        "{log}"
    );
    assert_eq!(
        wait_bounded(&mut first, Duration::from_secs(20)).code(),
        Some(0)
    );
    // Two tries in all: the one that gave up and the first replay's.
    assert_eq!(std::fs::read_to_string(&count).unwrap().lines().count(), 2);
    assert_eq!(events(&json_file(&file), "resolved").len(), 1);
}

#[test]
fn a_replay_that_could_not_record_what_it_did_runs_nothing() {
    let base = common::temp_dir("dl-readonly");
    let file = base.join("dead.jsonl");
    let ran = base.join("ran");
    let script = format!("test -e ok || exit 3; touch '{}'", ran.display());
    assert_eq!(give_up(&base, &file, &["-n", "1"], &script), 3);
    std::fs::write(base.join("ok"), "").unwrap();
    // Readable, but no longer writable: by its mode for a user, and for root (who writes
    // to any file whatever its mode) by the immutable attribute, taken off again whatever
    // the test finds.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o400)).unwrap();
    struct Immutable<'a>(&'a Path);
    impl Drop for Immutable<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(self.0)
                .status();
        }
    }
    let _guard = Immutable(&file);
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { nix::libc::geteuid() } == 0 {
        let set = std::process::Command::new("chattr")
            .arg("+i")
            .arg(&file)
            .status()
            .expect("chattr, to make a file root cannot write");
        assert!(set.success(), "chattr +i failed");
    }
    let held = file.clone();
    let out = replay(&base, &held, &[]);
    let log = usage_error_of(&out, "");
    assert!(!ran.exists(), "the run was replayed: {log}");
}

#[test]
fn the_dry_run_of_a_replay_checks_the_options_as_the_replay_would() {
    let base = common::temp_dir("dl-dry-options");
    let file = base.join("dead.jsonl");
    assert_eq!(
        give_up(&base, &file, &["-n", "1", "--success-on", "7"], "exit 3"),
        3
    );
    let out = replay(&base, &file, &["--dry-run", "--retry-on", "7"]);
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(125), "{log}");
    assert!(
        log.contains("line 1") && log.contains("--success-on"),
        "{log}"
    );
    assert!(stdout_of(&out).is_empty());
    // Options that go together: the dry run lists the run, as before.
    let out = replay(&base, &file, &["--dry-run", "-n", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(stdout_of(&out).contains("sh -c 'exit 3'"));
}

#[test]
fn a_redis_password_is_not_written_to_the_file() {
    let base = common::temp_dir("dl-secret");
    let file = base.join("dead.jsonl");
    // Nothing listens on port 1: the run warns and goes on with the local store, whose
    // directory the environment gives.
    let out = retry()
        .current_dir(&base)
        .env("XDG_RUNTIME_DIR", &base)
        .arg("--dead-letter")
        .arg(&file)
        .args([
            "-n",
            "1",
            "--quota",
            "redis://:s3cret@127.0.0.1:1/q",
            "--",
            "false",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("s3cret"), "{text}");
    let options = &json_file(&file)[0]["options"];
    assert!(
        options
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o == "--quota=redis://127.0.0.1:1/q"),
        "{options}"
    );
}

#[test]
fn recorded_options_edited_into_something_a_replay_cannot_run_are_refused() {
    let base = common::temp_dir("dl-edited");
    let ran = base.join("ran");
    for (options, needle) in [
        (r#"["--simulate"]"#, "--simulate"),
        (r#"["extra"]"#, "not an option"),
        (r#"["--","x"]"#, "not an option"),
        // clap's own -V, named as it was written.
        (r#"["-V"]"#, "--version"),
    ] {
        let file = base.join("edited.jsonl");
        let line = format!(
            "{{\"event\":\"dead_letter\",\"id\":\"e1\",\"ts\":\"2026-11-30T07:47:53.921Z\",\
             \"label\":null,\"cwd\":{cwd:?},\"command\":[\"touch\",{ran:?}],\"options\":{options},\
             \"exit_code\":1,\"reason\":\"tries\",\"tries\":1,\"duration_ms\":1}}\n",
            cwd = base.to_str().unwrap(),
            ran = ran.to_str().unwrap(),
        );
        std::fs::write(&file, line).unwrap();
        for args in [&[][..], &["--dry-run"][..]] {
            let out = replay(&base, &file, args);
            let log = usage_error_of(&out, &format!("{options} {args:?}"));
            assert!(log.contains("line 1") && log.contains(needle), "{log}");
            assert!(!log.contains("'--V'"), "{log}");
        }
        assert!(!ran.exists(), "{options}: the run was replayed");
    }
}

// Files that outlive a run (docs/files.md#files-that-outlive-a-run): the file itself, which
// outlives the run and may be shared with other users.

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).unwrap();
}

/// A file of `text` that only its owner may read and write, as `retry` creates one.
fn private_file(path: &Path, text: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

/// `retry ARGS` is refused in `dir` (`common::assert_refused`).
fn refused(dir: &Path, args: &[&OsStr], needles: &[&str]) {
    common::assert_refused(retry().args(args), dir, needles);
}

#[test]
fn a_dead_letter_file_that_is_no_regular_file_or_is_a_link_is_refused_before_the_command_runs() {
    let dir = common::temp_dir("dl-kinds");
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    let target = dir.join("target");
    private_file(&target, "keep\n");
    let link = dir.join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    for (file, needle) in [
        (fifo.as_path(), "a FIFO"),
        (Path::new("/dev/null"), "a character device"),
        (&sub, "a directory"),
        (&link, "symbolic link"),
        (Path::new("/dev/stdout"), "symbolic link"),
    ] {
        let args = [
            OsStr::new("-n1"),
            OsStr::new("--dead-letter"),
            file.as_os_str(),
        ];
        refused(&dir, &args, &["--dead-letter", needle]);
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep\n");
}

#[test]
fn replaying_a_fifo_a_device_or_a_link_is_refused_at_once() {
    let base = common::temp_dir("dl-replay-kinds");
    let file = base.join("dead.jsonl");
    assert_eq!(give_up(&base, &file, &["-n", "1"], "exit 3"), 3);
    let fifo = base.join("fifo");
    mkfifo(&fifo);
    let link = base.join("link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    for target in [fifo.as_path(), Path::new("/dev/zero"), &link] {
        for args in [&[][..], &["--dry-run"]] {
            let started = std::time::Instant::now();
            let out = retry()
                .current_dir(&base)
                .timeout(common::STEP_LIMIT)
                .arg("--replay")
                .arg(target)
                .args(args)
                .output()
                .unwrap();
            usage_error_of(&out, &format!("{target:?} {args:?}"));
            assert!(started.elapsed() < Duration::from_secs(5), "{target:?}");
        }
    }
}

#[test]
fn a_file_that_another_user_owns_or_others_may_write_is_refused_before_anything_runs() {
    let base = common::temp_dir("dl-owner");
    let file = base.join("failed.jsonl");
    let script = "test -e ok || exit 3; touch replayed";
    assert_eq!(give_up(&base, &file, &["-n", "1"], script), 3);
    std::fs::write(base.join("ok"), "").unwrap();
    let before = std::fs::read(&file).unwrap();
    let mut cases = vec![(euid(), 0o666), (euid(), 0o620)];
    if let Some(other) = other_user() {
        // Another user's file, as in a shared directory where a forged record waits.
        cases.extend([(other, 0o600), (other, 0o666)]);
    }
    let shown = file.display().to_string();
    for (owner, m) in cases {
        std::os::unix::fs::chown(&file, Some(owner), None).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(m)).unwrap();
        let needles = [shown.as_str(), &format!("uid {owner}"), &format!("{m:04o}")];
        for dry in [&[][..], &["--dry-run"]] {
            let out = replay(&base, &file, dry);
            let log = usage_error_of(&out, &format!("{owner} {m:o} {dry:?}"));
            for needle in needles {
                assert!(log.contains(needle), "{needle}: {log}");
            }
            assert!(!base.join("replayed").exists(), "{owner} {m:o}: replayed");
        }
        let args = [OsStr::new("--dead-letter"), file.as_os_str()];
        refused(&base, &args, &needles);
        assert_eq!(std::fs::read(&file).unwrap(), before, "nothing appended");
    }
    // Ours again, and private: the run is replayed.
    std::os::unix::fs::chown(&file, Some(euid()), None).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = replay(&base, &file, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(base.join("replayed").exists());
}

#[test]
fn a_file_in_a_directory_anyone_may_write_without_the_sticky_bit_is_refused() {
    let base = common::temp_dir("dl-open-dir");
    let open = base.join("open");
    std::fs::create_dir(&open).unwrap();
    let file = open.join("dead.jsonl");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    // With the sticky bit, as /tmp: nobody else may replace the file.
    assert_eq!(give_up(&base, &file, &["-n", "1"], "exit 3"), 3);
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let args = [OsStr::new("--dead-letter"), file.as_os_str()];
    refused(&base, &args, &["--dead-letter", "0777", "sticky"]);
    let out = replay(&base, &file, &[]);
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(125), "{log}");
    assert!(log.contains("sticky"), "{log}");
    assert_eq!(json_file(&file).len(), 1);
}

#[test]
fn a_dead_letter_file_and_its_directory_are_private_whatever_the_umask() {
    use std::os::unix::process::CommandExt;
    let base = common::temp_dir("dl-umask");
    let file = base.join("new").join("deeper").join("dead.jsonl");
    let mut cmd = retry_std();
    cmd.current_dir(&base)
        .arg("--dead-letter")
        .arg(&file)
        .args(["-n", "1", "--", "false"])
        .stderr(Stdio::null());
    // SAFETY: umask is async-signal-safe and touches no memory.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o277));
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    assert_eq!(wait_bounded(&mut child, common::TEST_LIMIT).code(), Some(1));
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(&base.join("new")), 0o700);
    assert_eq!(mode(&base.join("new").join("deeper")), 0o700);
    assert_eq!(json_file(&file).len(), 1);
}

#[test]
fn a_lock_held_elsewhere_delays_giving_up_no_longer_than_the_budget_allows() {
    let base = common::temp_dir("dl-held");
    let file = base.join("dead.jsonl");
    private_file(&file, "");
    let _holder = common::LockHolder::lock(&file);
    let spawn = |args: &[&str]| {
        let child = retry_std()
            .current_dir(&base)
            .arg("--dead-letter")
            .arg(&file)
            .args(args)
            .args(["--", "false"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        (child, std::time::Instant::now())
    };
    // One with a budget of a second, which it spends on its tries; one with no budget.
    let runs = [
        spawn(&["-B", "1s", "-d", "50ms", "-j", "none"]),
        spawn(&["-n", "1"]),
    ];
    let mut took = vec![];
    for (mut child, started) in runs {
        let status = wait_bounded(&mut child, Duration::from_secs(15));
        took.push(started.elapsed());
        let mut log = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut log).unwrap();
        assert_eq!(status.code(), Some(1), "{log}");
        assert!(
            log.contains("cannot record") && log.contains("lock"),
            "{log}"
        );
    }
    // The budgeted run waited about what it had left (nothing, so a tenth of a second), where
    // it waited 10 s; the other the two seconds at most that any run waits. The bounds leave
    // room for a loaded machine, and stay far from the 10 s.
    assert!(took[0] >= Duration::from_millis(500), "{took:?}");
    assert!(took[0] < Duration::from_millis(4500), "{took:?}");
    assert!(took[1] >= Duration::from_secs(2), "{took:?}");
    assert!(took[1] < Duration::from_secs(8), "{took:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "");
}

#[test]
fn a_replay_takes_its_hold_before_it_reads_the_file() {
    use std::os::fd::AsFd;
    let base = common::temp_dir("dl-hold-first");
    let file = base.join("dead.jsonl");
    // What a replay would refuse if it read it: it must not read it while another holds it.
    private_file(&file, "not a record\n");
    let held = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    // SAFETY: zero bytes are a valid `flock` (integers only).
    let mut range: nix::libc::flock = unsafe { std::mem::zeroed() };
    range.l_type = nix::libc::F_WRLCK as _;
    range.l_whence = nix::libc::SEEK_SET as _;
    range.l_start = i64::MAX - 1;
    range.l_len = 1;
    nix::fcntl::fcntl(held.as_fd(), nix::fcntl::FcntlArg::F_OFD_SETLK(&range)).unwrap();
    let out = replay(&base, &file, &[]);
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(125), "{log}");
    assert!(
        log.contains("another replay of this file is running"),
        "{log}"
    );
    drop(held);
    // A child that another test forks meanwhile shares the open file until its exec closes it,
    // and the hold with it: wait until no one holds it (a moment), then replay.
    let free = || {
        let probe = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        let mut range = range;
        range.l_type = nix::libc::F_WRLCK as _;
        nix::fcntl::fcntl(probe.as_fd(), nix::fcntl::FcntlArg::F_OFD_GETLK(&mut range)).is_ok()
            && i32::from(range.l_type) == nix::libc::F_UNLCK
    };
    assert!(
        common::wait_until(Duration::from_secs(5), free),
        "the hold was never let go"
    );
    let out = replay(&base, &file, &[]);
    assert!(
        stderr_of(&out).contains("line 1: not JSON"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn a_write_cut_short_by_a_full_disk_is_taken_back_and_the_file_stays_replayable() {
    let base = common::temp_dir("dl-full");
    let file = base.join("dead.jsonl");
    assert_eq!(give_up(&base, &file, &["-n", "1"], "exit 3"), 3);
    let before = std::fs::read(&file).unwrap();
    // The file may grow by 10 bytes: the next line is written in part, then not at all.
    let limit = before.len() as u64 + 10;
    let mut cmd = retry_std();
    cmd.current_dir(&base)
        .arg("--dead-letter")
        .arg(&file)
        .args(["-n", "1", "--", "sh", "-c", "exit 3"])
        .stderr(Stdio::piped());
    common::on_a_full_disk(&mut cmd, limit);
    let out = cmd.spawn().unwrap().wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{log}");
    assert!(
        log.contains("cannot record")
            && log.contains("after 10 of the")
            && log.contains("cut back"),
        "{log}"
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before,
        "no half line is left"
    );
    let out = replay(&base, &file, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(stdout_of(&out).contains("1 run pending"));
}

#[test]
fn a_line_that_an_older_retry_left_cut_short_is_skipped_with_a_warning() {
    let base = common::temp_dir("dl-torn");
    let file = base.join("dead.jsonl");
    assert_eq!(give_up(&base, &file, &["-n", "1"], "exit 3"), 3);
    assert_eq!(give_up(&base, &file, &["-n", "1"], "exit 4"), 4);
    let text = std::fs::read_to_string(&file).unwrap();
    let (first, second) = text.trim_end().split_once('\n').unwrap();
    // A line cut short by a full disk, and ended by the next run's append.
    std::fs::write(&file, format!("{first}\n{}\n{second}\n", &second[..10])).unwrap();
    let out = replay(&base, &file, &["--dry-run"]);
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(
        stdout_of(&out).contains("2 runs pending"),
        "{}",
        stdout_of(&out)
    );
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.contains("line 2") && log.contains("cut short"), "{log}");
    let out = replay(&base, &file, &[]);
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(log.contains("line 2") && log.contains("cut short"), "{log}");
    assert_eq!(events(&lines_after(&file, 3), "attempt").len(), 2);
}

/// The lines of the file after the first `skip`, each parsed.
fn lines_after(file: &Path, skip: usize) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .skip(skip)
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect()
}

#[test]
fn the_log_and_the_dead_letters_cannot_share_a_file() {
    let base = common::temp_dir("dl-same");
    std::fs::create_dir(base.join("sub")).unwrap();
    fn both<'a>(log: &'a str, letters: &'a str, to: &'a str) -> Vec<&'a OsStr> {
        ["--log-format", "json", "--log-file", log, to, letters]
            .into_iter()
            .map(OsStr::new)
            .collect()
    }
    let needles = ["--log-file", "--dead-letter", "same file"];
    refused(
        &base,
        &both("f.jsonl", "f.jsonl", "--dead-letter"),
        &needles,
    );
    refused(
        &base,
        &both("./sub/../f.jsonl", "f.jsonl", "--dead-letter"),
        &needles,
    );
    // By a link to a file that is there: the same device and inode.
    assert_eq!(
        give_up(&base, &base.join("f.jsonl"), &["-n", "1"], "exit 3"),
        3
    );
    std::os::unix::fs::symlink(base.join("f.jsonl"), base.join("link")).unwrap();
    refused(&base, &both("link", "f.jsonl", "--dead-letter"), &needles);
    let out = retry()
        .current_dir(&base)
        .args(["--replay", "f.jsonl", "--log-file", "link"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(125), "{log}");
    assert!(
        log.contains("--log-file") && log.contains("--replay"),
        "{log}"
    );
    assert_eq!(json_file(&base.join("f.jsonl")).len(), 1);
}

#[test]
fn the_dry_run_of_a_replay_lists_each_run_with_its_tries_and_exits_0() {
    let base = common::temp_dir("dl-dry-tries");
    let file = base.join("dead.jsonl");
    assert_eq!(
        give_up(&base, &file, &["-n", "3", "-d", "1ms"], "exit 3"),
        3
    );
    assert_eq!(give_up(&base, &file, &["--stop-on", "4"], "exit 4"), 4);
    let out = replay(&base, &file, &["--dry-run"]);
    let list = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(list.starts_with("2 runs pending in "), "{list}");
    assert!(
        list.contains("  3 tries, exit 3 (tries)  sh -c 'exit 3'"),
        "{list}"
    );
    assert!(
        list.contains("  1 try, exit 4 (permanent)  sh -c 'exit 4'"),
        "{list}"
    );

    let out = replay(&base, &file, &["--dry-run", "--log-format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let pending: Vec<Value> = stdout_of(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tries: Vec<_> = pending.iter().map(|p| p["tries"].as_u64()).collect();
    assert_eq!(tries, [Some(3), Some(1)], "{pending:?}");
}

#[test]
fn a_replay_does_not_wait_the_stagger_its_records_recorded_unless_given_it() {
    let dir = common::temp_dir("dl-stagger");
    let file = dir.join("dead");
    // Three runs that spread their arrivals, each giving up at once.
    for seed in 1..=3 {
        let args = ["-n", "1", "--stagger", "300ms", "--seed", &seed.to_string()];
        assert_eq!(give_up(&dir, &file, &args, "[ -e ok ]"), 1);
    }
    std::fs::write(dir.join("ok"), "").unwrap();
    let started = std::time::Instant::now();
    let out = replay(&dir, &file, &["--log-format", "json"]);
    let took = started.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(!log.contains("\"event\":\"stagger\""), "{log}");
    assert!(
        took < common::STEP_LIMIT,
        "three records took {took:?}: {log}"
    );

    // Given to the replay, the stagger holds each record's first try back.
    for seed in 1..=2 {
        let args = ["-n", "1", "--seed", &seed.to_string()];
        std::fs::remove_file(dir.join("ok")).unwrap();
        assert_eq!(give_up(&dir, &file, &args, "[ -e ok ]"), 1);
        std::fs::write(dir.join("ok"), "").unwrap();
    }
    let out = replay(&dir, &file, &["--stagger", "20ms", "--log-format", "json"]);
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert_eq!(log.matches("\"event\":\"stagger\"").count(), 2, "{log}");
}

#[test]
fn a_replay_with_nothing_pending_is_quiet_as_a_cron_line_that_did_nothing_should_be() {
    let base = common::temp_dir("dl-quiet");
    // Not made yet: no run has given up since the crontab named it.
    let unmade = base.join("failed.jsonl");
    let empty = base.join("empty.jsonl");
    // A run that succeeded made the file, and recorded nothing in it.
    assert_eq!(give_up(&base, &empty, &["-n", "1"], "exit 0"), 0);
    assert_eq!(std::fs::read(&empty).unwrap(), b"");
    for file in [&unmade, &empty] {
        let out = replay(&base, file, &["-n", "1"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        assert!(
            out.stdout.is_empty() && out.stderr.is_empty(),
            "{}",
            stderr_of(&out)
        );
        // -v says it; the listing says it; the JSON log has its end.
        let out = replay(&base, file, &["-n", "1", "-v"]);
        assert!(
            stderr_of(&out).contains("nothing was pending"),
            "{}",
            stderr_of(&out)
        );
        let out = replay(&base, file, &["--dry-run"]);
        assert_eq!(out.status.code(), Some(0));
        assert!(
            stdout_of(&out).starts_with("nothing pending in "),
            "{}",
            stdout_of(&out)
        );
        let out = replay(&base, file, &["--log-format", "json"]);
        assert!(
            stderr_of(&out).contains("\"resolved\":0,\"pending\":0"),
            "{}",
            stderr_of(&out)
        );
    }
    assert!(!unmade.exists(), "a replay makes no file");
    // A pending run is still said, with -q too.
    assert_eq!(give_up(&base, &unmade, &["-n", "1"], "exit 3"), 3);
    let out = replay(&base, &unmade, &["-n", "1", "-q"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("1 still pending"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn a_replayed_run_writes_the_history_it_recorded_or_the_one_given_now() {
    let base = common::temp_dir("dl-history");
    std::fs::create_dir(base.join("sub")).unwrap();
    let file = base.join("dead.jsonl");
    assert_eq!(
        give_up(&base, &file, &["--history", "h.jsonl", "-n", "1"], "exit 3"),
        3
    );
    let runs_in = |history: &Path| {
        json_file(history)
            .iter()
            .filter(|l| l["event"] == "run")
            .count()
    };
    assert_eq!(runs_in(&base.join("h.jsonl")), 1);
    // From another directory: the recorded history is named from the run's own.
    let out = replay(&base.join("sub"), &file, &["-q"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(runs_in(&base.join("h.jsonl")), 2);
    // One given now, named from where the replay starts, takes its place.
    let out = replay(&base.join("sub"), &file, &["-q", "--history", "now.jsonl"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(runs_in(&base.join("sub/now.jsonl")), 1);
    assert_eq!(runs_in(&base.join("h.jsonl")), 2);
    // It cannot be the file replayed.
    let out = replay(&base, &file, &["--history", "./dead.jsonl"]);
    let line = usage_error_of(&out, "");
    assert!(
        line.contains("--replay") && line.contains("--history") && line.contains("same file"),
        "{line}"
    );
}
