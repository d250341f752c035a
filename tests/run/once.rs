//! `--once KEY` (docs/processes.md#once-only) on this machine: a key done runs nothing and
//! exits 0 naming the run that did it, a run that gives up lets go of the key, a key bound to
//! another command is a usage error, twenty runs at once run the command once, a killed holder
//! frees the key at once, another user's key file is refused, a replay keeps the key, and every
//! record tells a run done before apart from one that ran.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// `retry --once DIR/key.once -n 1`.
fn once(dir: &Path) -> std::process::Command {
    let mut cmd = retry_std();
    cmd.current_dir(dir)
        .arg("--once")
        .arg(key(dir))
        .args(["-n", "1"])
        .stdin(Stdio::null());
    cmd
}

fn key(dir: &Path) -> PathBuf {
    dir.join("key.once")
}

/// The job of the tests: it appends its run id to `ran`, and fails unless `ok` is there.
const JOB: &str = "echo $RETRY_RUN_ID >> ran; test -e ok";

fn ran(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("ran"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_key_done_runs_nothing_and_exits_0_naming_when_where_and_which_run_did_it() {
    let dir = runtime_dir("once-done");
    std::fs::write(dir.join("ok"), "").unwrap();
    let first = output_bounded(once(&dir).args(["--", "sh", "-c", JOB]), TEST_LIMIT);
    assert_eq!(first.status.code(), Some(0), "{}", stderr_of(&first));
    let by = ran(&dir);
    assert_eq!(by.len(), 1);
    let again = output_bounded(once(&dir).args(["--", "sh", "-c", JOB]), TEST_LIMIT);
    let log = stderr_of(&again);
    assert_eq!(again.status.code(), Some(0), "{log}");
    assert_eq!(ran(&dir), by, "the command ran again: {log}");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    for needle in ["was done at", host.trim(), &format!("by run {}", by[0])] {
        assert!(log.contains(needle), "{needle}: {log}");
    }
    // Kept done only for --once-for: past it the command runs again.
    std::thread::sleep(Duration::from_millis(20));
    let later = output_bounded(
        once(&dir).args(["--once-for", "10ms", "--", "sh", "-c", JOB]),
        TEST_LIMIT,
    );
    assert_eq!(later.status.code(), Some(0), "{}", stderr_of(&later));
    assert_eq!(ran(&dir).len(), 2);
}

#[test]
fn a_run_that_gives_up_lets_go_of_the_key_and_the_next_run_runs() {
    let dir = runtime_dir("once-give-up");
    let failed = output_bounded(once(&dir).args(["--", "sh", "-c", JOB]), TEST_LIMIT);
    assert_eq!(failed.status.code(), Some(1), "{}", stderr_of(&failed));
    std::fs::write(dir.join("ok"), "").unwrap();
    let next = output_bounded(once(&dir).args(["--", "sh", "-c", JOB]), TEST_LIMIT);
    assert_eq!(next.status.code(), Some(0), "{}", stderr_of(&next));
    assert_eq!(ran(&dir).len(), 2, "the next run did not run the command");
    let done = output_bounded(once(&dir).args(["--", "sh", "-c", JOB]), TEST_LIMIT);
    assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
    assert_eq!(ran(&dir).len(), 2, "a key done ran again");
}

#[test]
fn the_same_key_with_another_command_is_a_usage_error_while_it_is_kept() {
    let dir = runtime_dir("once-other");
    std::fs::write(dir.join("ok"), "").unwrap();
    let first = output_bounded(once(&dir).args(["--", "sh", "-c", JOB]), TEST_LIMIT);
    assert_eq!(first.status.code(), Some(0), "{}", stderr_of(&first));
    let other = output_bounded(once(&dir).args(["--", "touch", "other"]), TEST_LIMIT);
    let log = stderr_of(&other);
    assert_eq!(other.status.code(), Some(125), "{log}");
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(
        log.contains(&format!("--once {}", key(&dir).display())),
        "{log}"
    );
    assert!(!dir.join("other").exists(), "the other command ran");
    // The dry run says what the run would do: the same line and 125 for the other command,
    // done before for this one.
    let plan = output_bounded(
        once(&dir).args(["--dry-run", "--", "touch", "other"]),
        TEST_LIMIT,
    );
    assert_eq!(plan.status.code(), Some(125), "{}", stdout_of(&plan));
    assert_eq!(stderr_of(&plan), log);
    let plan = output_bounded(
        once(&dir).args(["--dry-run", "--", "sh", "-c", JOB]),
        TEST_LIMIT,
    );
    assert_eq!(plan.status.code(), Some(0), "{}", stderr_of(&plan));
    assert!(
        stdout_of(&plan).contains("(done_before)"),
        "{}",
        stdout_of(&plan)
    );
    // Held by a run of one command, the key is another's usage error too, run or planned.
    let held = runtime_dir("once-other-held");
    let mut holding = once(&held)
        .args(["--", "sh", "-c", "echo $$ > ready; exec sleep 20"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_until(STEP_LIMIT, || held.join("ready").exists()));
    for dry in [&["--dry-run"][..], &[]] {
        let other = output_bounded(once(&held).args(dry).args(["--", "true"]), TEST_LIMIT);
        let log = stderr_of(&other);
        assert_eq!(other.status.code(), Some(125), "{dry:?}: {log}");
        assert!(
            log.contains("bound to another command line"),
            "{dry:?}: {log}"
        );
    }
    let _ = holding.kill();
    let _ = holding.wait();
}

#[test]
fn twenty_runs_started_at_once_run_the_command_once() {
    let dir = runtime_dir("once-twenty");
    std::fs::write(dir.join("ok"), "").unwrap();
    let job = format!("{JOB}; sleep 0.2");
    let mut runs: Vec<Child> = (0..20)
        .map(|_| {
            once(&dir)
                .args(["--", "sh", "-c", &job])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start a run")
        })
        .collect();
    let (mut done, mut locked) = (0, 0);
    for run in &mut runs {
        match wait_bounded(run, TEST_LIMIT).code() {
            Some(0) => done += 1,
            Some(75) => locked += 1,
            other => panic!("a run ended with {other:?}"),
        }
    }
    assert_eq!(ran(&dir).len(), 1, "the command ran more than once");
    assert_eq!(done + locked, 20);
    assert!(done >= 1, "no run ended with 0");
}

#[test]
fn a_holder_killed_with_sigkill_frees_the_key_at_once() {
    let dir = runtime_dir("once-kill");
    // The first run's try waits; the next one's, which finds `ok`, does not.
    let job = "test -e ok && exit 0; echo $$ > ready; exec sleep 20";
    let mut holding = once(&dir)
        .args(["--", "sh", "-c", job])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the holder");
    let ready = dir.join("ready");
    assert!(
        wait_until(STEP_LIMIT, || std::fs::read_to_string(&ready)
            .is_ok_and(|s| s.ends_with('\n'))),
        "the holder's try never started"
    );
    send(holding.id(), nix::libc::SIGKILL);
    wait_bounded(&mut holding, STEP_LIMIT);
    std::fs::write(dir.join("ok"), "").unwrap();
    let started = Instant::now();
    let next = output_bounded(once(&dir).args(["--", "sh", "-c", job]), TEST_LIMIT);
    let took = started.elapsed();
    if let Some(pid) = std::fs::read_to_string(&ready)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
    {
        send(pid, nix::libc::SIGKILL);
    }
    assert_eq!(next.status.code(), Some(0), "{}", stderr_of(&next));
    assert!(took < Duration::from_secs(5), "the next run took {took:?}");
    let again = output_bounded(once(&dir).args(["--", "sh", "-c", job]), TEST_LIMIT);
    assert!(stderr_of(&again).contains("was done at"), "{again:?}");
}

/// Another user's key file, a link, or a plain KEY's directory that others may enter: refused
/// in one line with 125 before anything runs, so that no one else can take or break a key.
#[test]
fn a_key_file_another_user_could_take_or_break_is_refused() {
    let dir = runtime_dir("once-refused");
    let target = dir.join("target");
    std::fs::write(&target, "").unwrap();
    let link = dir.join("link.once");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let mut refused = vec![(link, "symbolic link")];
    if let Some(other) = other_user() {
        let theirs = dir.join("theirs.once");
        std::fs::write(&theirs, "").unwrap();
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::chown(&theirs, Some(other), None).unwrap();
        refused.push((theirs, "owned by uid"));
    }
    for (path, why) in refused {
        let out = output_bounded(
            retry_std()
                .current_dir(&dir)
                .arg("--once")
                .arg(&path)
                .args(["--", "touch", "ran"]),
            TEST_LIMIT,
        );
        let log = stderr_of(&out);
        assert_eq!(out.status.code(), Some(125), "{}: {log}", path.display());
        assert_eq!(log.lines().count(), 1, "{log}");
        assert!(log.contains(&format!("--once {}", path.display())), "{log}");
        assert!(log.contains(why), "{log}");
        assert!(!dir.join("ran").exists(), "ran with {}", path.display());
    }
    let home = runtime_dir("once-refused-home");
    let keys = home.join(".local/state/retry/once");
    std::fs::create_dir_all(&keys).unwrap();
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o755)).unwrap();
    let test = "a_key_file_another_user_could_take_or_break_is_refused";
    let Some(mut run) = at_home(test, &home) else {
        return;
    };
    let out = output_bounded(
        run.current_dir(&dir)
            .args(["--once", "nightly", "--", "touch", "ran"]),
        TEST_LIMIT,
    );
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(125), "{log}");
    assert!(
        log.contains("--once nightly") && log.contains("0755"),
        "{log}"
    );
    assert!(!dir.join("ran").exists());
}

/// `retry` run with `home` bound over the home directory that the password database gives, in
/// a mount namespace of its own; `None`, said loudly, where one cannot be made (not root).
fn at_home(test: &str, home: &Path) -> Option<std::process::Command> {
    let can = euid() == 0 && on_path("unshare") && on_path("mount");
    if !have_package(test, "root, unshare and mount", "util-linux", can) {
        return None;
    }
    let real = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(euid()))
        .ok()
        .flatten()
        .expect("the test's user in the password database")
        .dir;
    let mut cmd = std::process::Command::new("unshare");
    cmd.env_remove("RETRY_RUN_ID")
        .args(["--mount", "--", "sh", "-c"])
        .arg("mount --bind \"$0\" \"$1\" && shift && exec \"$@\"")
        .arg(home)
        .arg(real)
        .arg(assert_cmd::cargo::cargo_bin("retry"));
    Some(cmd)
}

#[test]
fn a_replay_of_a_run_that_gave_up_keeps_its_key() {
    let dir = runtime_dir("once-replay");
    let letters = dir.join("dead.jsonl");
    let failed = output_bounded(
        once(&dir)
            .arg("--dead-letter")
            .arg(&letters)
            .args(["--", "sh", "-c", JOB]),
        TEST_LIMIT,
    );
    assert_eq!(failed.status.code(), Some(1), "{}", stderr_of(&failed));
    std::fs::write(dir.join("ok"), "").unwrap();
    let replay = output_bounded(
        retry_std()
            .current_dir(&dir)
            .arg("--replay")
            .arg(&letters)
            .stdin(Stdio::null()),
        TEST_LIMIT,
    );
    assert_eq!(replay.status.code(), Some(0), "{}", stderr_of(&replay));
    assert_eq!(ran(&dir).len(), 2);
    // The replay ran under the key, and marked it done: the job does not run a third time.
    let next = output_bounded(once(&dir).args(["--", "sh", "-c", JOB]), TEST_LIMIT);
    let log = stderr_of(&next);
    assert_eq!(next.status.code(), Some(0), "{log}");
    assert_eq!(
        ran(&dir).len(),
        2,
        "the key was not kept by the replay: {log}"
    );
    assert!(log.contains(&format!("by run {}", ran(&dir)[1])), "{log}");
}

#[test]
fn every_record_of_a_run_done_before_says_done_before() {
    let dir = runtime_dir("once-records");
    std::fs::write(dir.join("ok"), "").unwrap();
    let first = output_bounded(once(&dir).args(["--", "sh", "-c", JOB]), TEST_LIMIT);
    assert_eq!(first.status.code(), Some(0), "{}", stderr_of(&first));
    let (history, junit, outputs, log) = (
        dir.join("history.jsonl"),
        dir.join("junit.xml"),
        dir.join("outputs"),
        dir.join("log.jsonl"),
    );
    let out = output_bounded(
        once(&dir)
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_OUTPUT", &outputs)
            .args(["--log-format", "json", "--history"])
            .arg(&history)
            .arg("--junit")
            .arg(&junit)
            .arg("--log-file")
            .arg(&log)
            .args(["--metrics", "m.prom", "--", "sh", "-c", JOB]),
        TEST_LIMIT,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let by = ran(&dir).remove(0);
    // Counted as a run that ran nothing: the job's last figures are not its.
    let metrics = std::fs::read_to_string(dir.join("m.prom")).unwrap();
    assert!(metrics.contains("outcome=\"done_before\"} 1"), "{metrics}");
    assert!(!metrics.contains("retry_last_"), "{metrics}");
    let lines = json_file(&log);
    let done = event(&lines, "done_before");
    assert_eq!(done["done_run_id"], by.as_str());
    assert!(events(&lines, "try").is_empty(), "{lines:?}");
    let run = json_file(&history).pop().expect("a history line");
    assert_eq!(
        (&run["outcome"], &run["exit_code"], &run["tries"]),
        (&"done_before".into(), &0.into(), &0.into())
    );
    let outputs = std::fs::read_to_string(&outputs).unwrap();
    for line in ["outcome=done_before", "exit_code=0", "tries=0"] {
        assert!(outputs.lines().any(|l| l == line), "{outputs}");
    }
    let junit = std::fs::read_to_string(&junit).unwrap();
    assert!(junit.contains("<skipped message=\""), "{junit}");
    assert!(junit.contains(&by), "{junit}");
    let stats = output_bounded(
        retry_std()
            .arg("--stats")
            .arg(&history)
            .stdin(Stdio::null()),
        TEST_LIMIT,
    );
    let text = stdout_of(&stats);
    assert!(text.contains("1 run of --once left out"), "{text}");
    // The dry run says what a run would do, and does nothing.
    let dry = output_bounded(
        once(&dir).args(["--dry-run", "--", "sh", "-c", JOB]),
        TEST_LIMIT,
    );
    let text = stdout_of(&dry);
    assert!(
        text.contains("the run would exit 0 (done_before)"),
        "{text}"
    );
    assert_eq!(ran(&dir).len(), 1);
}

#[test]
fn a_run_turned_away_by_a_held_key_says_locked_in_its_step_outputs() {
    let dir = runtime_dir("once-locked");
    let job = "echo $$ > ready; exec sleep 20";
    let mut holding = once(&dir)
        .args(["--", "sh", "-c", job])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the holder");
    let ready = dir.join("ready");
    assert!(
        wait_until(STEP_LIMIT, || std::fs::read_to_string(&ready)
            .is_ok_and(|s| s.ends_with('\n'))),
        "the holder's try never started"
    );
    let outputs = dir.join("outputs");
    let out = output_bounded(
        once(&dir)
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_OUTPUT", &outputs)
            .args(["--", "sh", "-c", job]),
        TEST_LIMIT,
    );
    let other = output_bounded(once(&dir).args(["--", "true"]), TEST_LIMIT);
    send(holding.id(), nix::libc::SIGKILL);
    wait_bounded(&mut holding, STEP_LIMIT);
    if let Some(pid) = std::fs::read_to_string(&ready)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
    {
        send(pid, nix::libc::SIGKILL);
    }
    assert_eq!(out.status.code(), Some(75), "{}", stderr_of(&out));
    let outputs = std::fs::read_to_string(&outputs).unwrap();
    for line in ["outcome=locked", "reason=locked", "exit_code=75"] {
        assert!(outputs.lines().any(|l| l == line), "{outputs}");
    }
    // Held by another command line: not this command's key.
    assert_eq!(other.status.code(), Some(125), "{}", stderr_of(&other));
}

#[test]
fn a_repeat_whose_tries_all_succeeded_marks_the_key_done_and_one_with_a_failure_does_not() {
    let dir = runtime_dir("once-repeat");
    let repeat = |dir: &Path| {
        let mut cmd = retry_std();
        cmd.current_dir(dir)
            .arg("--once")
            .arg(key(dir))
            .args(["--repeat", "2", "--", "sh", "-c", JOB])
            .stdin(Stdio::null());
        output_bounded(&mut cmd, TEST_LIMIT)
    };
    // Without `ok` the first try fails: the repeat ends with it, and the key stays free.
    let failed = repeat(&dir);
    assert_eq!(failed.status.code(), Some(1), "{}", stderr_of(&failed));
    std::fs::write(dir.join("ok"), "").unwrap();
    let passed = repeat(&dir);
    assert_eq!(passed.status.code(), Some(0), "{}", stderr_of(&passed));
    assert_eq!(ran(&dir).len(), 3);
    let again = repeat(&dir);
    assert_eq!(again.status.code(), Some(0), "{}", stderr_of(&again));
    assert!(
        stderr_of(&again).contains("was done at"),
        "{}",
        stderr_of(&again)
    );
    assert_eq!(ran(&dir).len(), 3, "a repeat ran again under a key done");
}

/// A key file or lock file that is `--metrics`'s lock file: the run would wait on its own lock
/// and lose its metrics, so it is a usage error before anything runs, for `--once` as for
/// `--lock`.
#[test]
fn a_key_or_lock_on_the_metrics_lock_file_is_a_usage_error() {
    let dir = runtime_dir("once-metrics-lock");
    let ran = dir.join("ran");
    for option in ["--once", "--lock"] {
        let out = output_bounded(
            retry_std()
                .current_dir(&dir)
                .args([
                    option,
                    "./m.prom.lock",
                    "--metrics",
                    "m.prom",
                    "-n",
                    "1",
                    "--",
                ])
                .arg("touch")
                .arg(&ran)
                .stdin(Stdio::null()),
            TEST_LIMIT,
        );
        let log = stderr_of(&out);
        assert_eq!(out.status.code(), Some(125), "{option}: {log}");
        assert_eq!(log.lines().count(), 1, "{option}: {log}");
        assert!(
            log.contains(&format!("{option} './m.prom.lock'"))
                && log.contains("--metrics's lock file"),
            "{option}: {log}"
        );
        assert!(!ran.exists(), "{option}: the command ran");
    }
}
