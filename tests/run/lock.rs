//! `--lock NAME` (docs/processes.md#one-run-at-a-time): one run at a time holding a name on this
//! machine, turned away with 75 and reason `locked`, the lock freed however its holder ends, and
//! a fencing token that grows with every grant. A plain NAME's lock is in the home directory
//! that the password database gives, whatever the environment; a NAME with a `/` is a path.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// `retry` with the lock `name` at `runtime/name.lock`, a path in the test's own directory.
fn locked(runtime: &Path, name: &str) -> std::process::Command {
    let mut cmd = retry_std();
    cmd.arg("--lock")
        .arg(runtime.join(format!("{name}.lock")))
        .arg("-n")
        .arg("1");
    cmd
}

/// `retry` run with `home` in the place of the user's home directory: in a mount namespace of
/// its own, `home` is bound over the directory that the password database gives (the
/// environment's `HOME` is not what `retry` reads). `None`, said loudly, where a mount
/// namespace cannot be made (not root).
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
    let base = retry_std();
    let mut cmd = std::process::Command::new("unshare");
    for (name, value) in base.get_envs() {
        match value {
            Some(value) => cmd.env(name, value),
            None => cmd.env_remove(name),
        };
    }
    cmd.args(["--mount", "--", "sh", "-c"])
        .arg("mount --bind \"$0\" \"$1\" && shift && exec \"$@\"")
        .arg(home)
        .arg(real)
        .arg(base.get_program());
    Some(cmd)
}

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// The lock file of the plain NAME `name` below the home directory `home`.
fn home_lock(home: &Path, name: &str) -> PathBuf {
    home.join(".local/state/retry/locks")
        .join(format!("{name}.lock"))
}

/// A run that holds the lock `name` until it is killed: its try writes its pid to `ready`,
/// then sleeps. Returns once the try has started.
fn holder(runtime: &Path, name: &str, ready: &Path) -> Child {
    let script = format!("echo $$ > '{}'; exec sleep 20", ready.display());
    let child = locked(runtime, name)
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the holder");
    assert!(
        wait_until(STEP_LIMIT, || std::fs::read_to_string(ready)
            .is_ok_and(|s| s.ends_with('\n'))),
        "the holder's try never started"
    );
    child
}

/// Kills the try whose pid is in `file`, if it is still there.
fn kill_try(file: &Path) {
    if let Some(pid) = std::fs::read_to_string(file)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
    {
        send(pid, nix::libc::SIGKILL);
    }
}

#[test]
fn twenty_runs_started_at_once_run_the_command_one_at_a_time_and_all_run() {
    let dir = temp_dir("lock-twenty");
    let runtime = runtime_dir("lock-twenty-rt");
    let log = dir.join("log");
    let script = format!(
        "echo start $$ >> '{0}'; sleep 0.05; echo end $$ >> '{0}'",
        log.display()
    );
    let mut runs: Vec<Child> = (0..20)
        .map(|_| {
            locked(&runtime, "twenty")
                .args(["--lock-wait", "30s", "--", "sh", "-c", &script])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start a run")
        })
        .collect();
    for run in &mut runs {
        let status = wait_bounded(run, TEST_LIMIT);
        assert_eq!(status.code(), Some(0));
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 40, "{text}");
    let mut pids = std::collections::HashSet::new();
    for pair in lines.chunks(2) {
        // Each start is followed by its own end: no two tries overlapped.
        let start = pair[0].strip_prefix("start ").expect(&text);
        let end = pair[1].strip_prefix("end ").expect(&text);
        assert_eq!(start, end, "two tries overlapped:\n{text}");
        pids.insert(start.to_string());
    }
    assert_eq!(pids.len(), 20, "{text}");
}

#[test]
fn a_taken_lock_turns_a_run_away_with_75_naming_the_holder_and_writes_no_dead_letter() {
    let dir = temp_dir("lock-taken");
    let runtime = runtime_dir("lock-taken-rt");
    let ready = dir.join("ready");
    let mut holding = holder(&runtime, "held", &ready);
    let ran = dir.join("ran");
    let dead = dir.join("dead.jsonl");
    let out = output_bounded(
        locked(&runtime, "held")
            .args(["--log-format", "json", "--dead-letter"])
            .arg(&dead)
            .args(["--", "touch"])
            .arg(&ran),
        TEST_LIMIT,
    );
    send(holding.id(), nix::libc::SIGKILL);
    wait_bounded(&mut holding, STEP_LIMIT);
    kill_try(&ready);
    assert_eq!(out.status.code(), Some(75), "{}", stderr_of(&out));
    assert!(!ran.exists(), "the command ran");
    let lines = json_lines(&stderr_of(&out));
    let give_up = event(&lines, "give_up");
    assert_eq!(give_up["reason"], "locked", "{give_up}");
    assert_eq!(give_up["tries"], 0, "{give_up}");
    assert_eq!(give_up["holder_pid"], holding.id(), "{give_up}");
    assert!(
        give_up["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("pid {}", holding.id())),
        "{give_up}"
    );
    assert!(events(&lines, "dead_letter").is_empty(), "{lines:?}");
    // The file may be made at the start, to refuse one that cannot be trusted: no record in it.
    let letters = std::fs::read_to_string(&dead).unwrap_or_default();
    assert_eq!(letters, "", "a dead letter was written");
}

#[test]
fn a_holder_killed_with_sigkill_frees_the_lock_at_once() {
    let dir = temp_dir("lock-kill");
    let runtime = runtime_dir("lock-kill-rt");
    let ready = dir.join("ready");
    let mut holding = holder(&runtime, "killed", &ready);
    send(holding.id(), nix::libc::SIGKILL);
    wait_bounded(&mut holding, STEP_LIMIT);
    // The holder's try is still running: the lock went with retry all the same.
    let started = Instant::now();
    let out = output_bounded(locked(&runtime, "killed").args(["--", "true"]), TEST_LIMIT);
    let took = started.elapsed();
    kill_try(&ready);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(took < Duration::from_secs(2), "the next run took {took:?}");
}

#[test]
fn a_try_that_outlives_retry_does_not_keep_the_lock() {
    let dir = temp_dir("lock-outlive");
    let runtime = runtime_dir("lock-outlive-rt");
    let bg = dir.join("bg");
    let script = format!(
        "sleep 20 < /dev/null > /dev/null 2>&1 & echo $! > '{}'",
        bg.display()
    );
    let out = output_bounded(
        locked(&runtime, "outlive").args(["--", "sh", "-c", &script]),
        TEST_LIMIT,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let pid: i32 = std::fs::read_to_string(&bg)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let still_there = alive(pid);
    let next = output_bounded(locked(&runtime, "outlive").args(["--", "true"]), TEST_LIMIT);
    let after = alive(pid);
    kill_try(&bg);
    assert!(still_there && after, "the background sleep ended too soon");
    assert_eq!(next.status.code(), Some(0), "{}", stderr_of(&next));
}

#[test]
fn each_grant_of_the_lock_gives_the_tries_a_higher_fencing_token() {
    let dir = temp_dir("lock-token");
    let runtime = runtime_dir("lock-token-rt");
    let tokens = dir.join("tokens");
    let script = format!("echo \"$RETRY_FENCING_TOKEN\" >> '{}'", tokens.display());
    for _ in 0..3 {
        let out = output_bounded(
            locked(&runtime, "token").args(["--", "sh", "-c", &script]),
            TEST_LIMIT,
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    }
    let text = std::fs::read_to_string(&tokens).unwrap();
    let seen: Vec<u64> = text.lines().map(|l| l.parse().expect(&text)).collect();
    assert_eq!(seen.len(), 3, "{text}");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{text}");
}

#[test]
fn a_lock_name_that_cannot_be_a_file_name_is_a_usage_error() {
    let runtime = runtime_dir("lock-bad-rt");
    for bad in ["..", "", "a b", "dir/"] {
        let out = output_bounded(
            retry_std()
                .env("XDG_RUNTIME_DIR", &runtime)
                .args(["--lock", bad, "--", "true"]),
            TEST_LIMIT,
        );
        let line = usage_error_of(&out, bad);
        assert!(line.contains("--lock"), "{line}");
        assert!(line.contains(&format!("'{bad}'")), "{line}");
    }
    for (args, value) in [
        (&["--lock-wait", "2s"][..], "2s"),
        (&["--lock", "x", "--lock-wait", "2q"][..], "2q"),
    ] {
        let out = output_bounded(
            retry_std()
                .env("XDG_RUNTIME_DIR", &runtime)
                .args(args)
                .args(["--", "true"]),
            TEST_LIMIT,
        );
        let line = usage_error_of(&out, value);
        assert!(line.contains("--lock-wait"), "{line}");
        assert!(line.contains(value), "{line}");
    }
}

#[test]
fn a_lock_directory_that_others_may_enter_stops_the_run_before_any_try() {
    let test = "a_lock_directory_that_others_may_enter_stops_the_run_before_any_try";
    let dir = temp_dir("lock-unsafe");
    let home = runtime_dir("lock-unsafe-home");
    let locks = home_lock(&home, "unsafe").parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&locks).unwrap();
    std::fs::set_permissions(&locks, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ran = dir.join("ran");
    let Some(mut run) = at_home(test, &home) else {
        return;
    };
    let out = output_bounded(
        run.args(["--lock", "unsafe", "--", "touch"]).arg(&ran),
        TEST_LIMIT,
    );
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(125), "{log}");
    assert!(!ran.exists(), "the command ran without the lock");
    assert!(
        log.contains("--lock unsafe") && log.contains("0755"),
        "{log}"
    );
    assert_eq!(log.lines().count(), 1, "{log}");
    // The dry run stops as the run would, so that a deploy check sees it.
    let mut dry = at_home(test, &home).unwrap();
    let dry = output_bounded(
        dry.args(["--lock", "unsafe", "--dry-run", "--", "true"]),
        TEST_LIMIT,
    );
    let line = stderr_of(&dry);
    assert_eq!(dry.status.code(), Some(125), "{line}");
    assert!(
        line.contains("--lock unsafe") && line.contains("0755"),
        "{line}"
    );
}

/// A cron job (no `XDG_RUNTIME_DIR`, its own `TMPDIR` and `HOME`) and a login shell's run of the
/// same command lock one file: the lock of a plain NAME does not follow the environment.
#[test]
fn runs_in_different_environments_share_a_plain_names_lock() {
    let test = "runs_in_different_environments_share_a_plain_names_lock";
    let dir = temp_dir("lock-env");
    let home = runtime_dir("lock-env-home");
    let (runtime, tmp) = (runtime_dir("lock-env-rt"), runtime_dir("lock-env-tmp"));
    let ready = dir.join("ready");
    let script = format!("echo $$ > '{}'; exec sleep 20", ready.display());
    let Some(mut dry) = at_home(test, &home) else {
        return;
    };
    // A dry run looks at the lock and makes nothing.
    let free = output_bounded(
        dry.args(["--lock", "nightly", "--dry-run", "--", "true"]),
        TEST_LIMIT,
    );
    assert!(stdout_of(&free).contains("'nightly', taken before the first try: free now"));
    assert_eq!(
        std::fs::read_dir(&home).unwrap().count(),
        0,
        "the dry run made files"
    );
    let mut login = at_home(test, &home).unwrap();
    let mut holding = login
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("TMPDIR", &runtime)
        .env("HOME", &runtime)
        .args(["--lock", "nightly", "-n", "1", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the holder");
    let started = wait_until(STEP_LIMIT, || {
        std::fs::read_to_string(&ready).is_ok_and(|s| s.ends_with('\n'))
    });
    let mut cron = at_home(test, &home).unwrap();
    let out = output_bounded(
        cron.env_remove("XDG_RUNTIME_DIR")
            .env("TMPDIR", &tmp)
            .env("HOME", &tmp)
            .args(["--lock", "nightly", "--", "echo", "ran"]),
        TEST_LIMIT,
    );
    send(holding.id(), nix::libc::SIGKILL);
    wait_bounded(&mut holding, STEP_LIMIT);
    kill_try(&ready);
    assert!(started, "the holder's try never started");
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(75), "{log}");
    assert_eq!(stdout_of(&out), "", "the command ran beside the holder");
    assert!(log.contains(&format!("pid {}", holding.id())), "{log}");
    // The file and the directories made for it are the user's own.
    let lock = home_lock(&home, "nightly");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&lock), 0o600);
    for made in [
        ".local",
        ".local/state",
        ".local/state/retry",
        ".local/state/retry/locks",
    ] {
        assert_eq!(mode(&home.join(made)), 0o700, "{made}");
    }
    for other in [&runtime, &tmp] {
        let kept: Vec<_> = std::fs::read_dir(other).unwrap().collect();
        assert!(kept.is_empty(), "{kept:?} in {}", other.display());
    }
}

/// A NAME with a `/` is the lock file's path, as `flock FILE` takes one: made 0600, and
/// shared by every run that names it, whatever their environments.
#[test]
fn a_name_with_a_slash_is_the_lock_files_path() {
    let dir = runtime_dir("lock-path");
    let lock = dir.join("job.lock");
    let ready = dir.join("ready");
    let script = format!("echo $$ > '{}'; exec sleep 20", ready.display());
    let mut holding = retry_std()
        .env("XDG_RUNTIME_DIR", &dir)
        .arg("--lock")
        .arg(&lock)
        .args(["-n", "1", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the holder");
    let started = wait_until(STEP_LIMIT, || {
        std::fs::read_to_string(&ready).is_ok_and(|s| s.ends_with('\n'))
    });
    // The same file by a relative path, from another directory and another environment.
    let turned = output_bounded(
        retry_std()
            .current_dir(&dir)
            .env_remove("XDG_RUNTIME_DIR")
            .args(["--lock", "./job.lock", "--", "echo", "ran"]),
        TEST_LIMIT,
    );
    send(holding.id(), nix::libc::SIGKILL);
    wait_bounded(&mut holding, STEP_LIMIT);
    kill_try(&ready);
    assert!(started, "the holder's try never started");
    assert_eq!(turned.status.code(), Some(75), "{}", stderr_of(&turned));
    assert_eq!(stdout_of(&turned), "");
    let mode = std::fs::metadata(&lock).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let next = output_bounded(
        retry_std()
            .arg("--lock")
            .arg(&lock)
            .args(["--", "sh", "-c", "echo $RETRY_FENCING_TOKEN"]),
        TEST_LIMIT,
    );
    assert_eq!(next.status.code(), Some(0), "{}", stderr_of(&next));
    assert_eq!(stdout_of(&next), "2\n");
}

/// A lock path that is a symbolic link, another user's file, a directory or a FIFO is refused
/// in one line with 125 before anything runs; so is a plain NAME of a user whose home
/// directory is not there, with the way out named.
#[test]
fn a_lock_path_that_cannot_be_trusted_is_refused_before_anything_runs() {
    let dir = runtime_dir("lock-refused");
    let target = dir.join("target");
    std::fs::write(&target, "").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = dir.join("link.lock");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let directory = dir.join("dir.lock");
    std::fs::create_dir(&directory).unwrap();
    let fifo = dir.join("fifo.lock");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let mut refused = vec![
        (link, "symbolic link"),
        (directory, "a directory"),
        (fifo, "a FIFO"),
    ];
    if let Some(other) = other_user() {
        let theirs = dir.join("theirs.lock");
        std::fs::write(&theirs, "").unwrap();
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::chown(&theirs, Some(other), None).unwrap();
        refused.push((theirs, "owned by uid"));
    }
    let ran = dir.join("ran");
    for (path, why) in refused {
        let out = output_bounded(
            retry_std()
                .arg("--lock")
                .arg(&path)
                .args(["--", "touch"])
                .arg(&ran),
            TEST_LIMIT,
        );
        let log = stderr_of(&out);
        assert_eq!(out.status.code(), Some(125), "{}: {log}", path.display());
        assert_eq!(log.lines().count(), 1, "{log}");
        assert!(log.contains(&format!("--lock {}", path.display())), "{log}");
        assert!(log.contains(why), "{log}");
        assert!(!ran.exists(), "the command ran with {}", path.display());
    }
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "",
        "the link's target was written"
    );
}

/// A user whose home directory is not there cannot have a plain NAME's lock: one line names
/// the directory and the way out, and nothing runs.
#[test]
fn a_plain_name_of_a_user_without_a_home_is_refused_naming_the_way_out() {
    let test = "a_plain_name_of_a_user_without_a_home_is_refused_naming_the_way_out";
    let Some(other) = other_user() else {
        return;
    };
    if !have_package(test, "setpriv", "util-linux", on_path("setpriv")) {
        return;
    }
    let home = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(other))
        .ok()
        .flatten()
        .expect("the other user in the password database")
        .dir;
    assert!(!home.exists(), "{} has a home directory", home.display());
    let out = output_bounded(
        std::process::Command::new("setpriv")
            .args([format!("--reuid={other}"), format!("--regid={other}")])
            .arg("--clear-groups")
            .arg(retry_std().get_program())
            .args(["--lock", "nightly", "--", "echo", "ran"]),
        TEST_LIMIT,
    );
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(125), "{log}");
    assert_eq!(stdout_of(&out), "", "the command ran");
    assert_eq!(log.lines().count(), 1, "{log}");
    let dir = home.join(".local/state/retry/locks");
    assert!(log.contains(&format!("'{}'", dir.display())), "{log}");
    assert!(
        log.contains("does not exist") && log.contains("a NAME with a '/'"),
        "{log}"
    );
}

#[test]
fn a_signal_ends_the_wait_for_the_lock_at_once() {
    let dir = temp_dir("lock-signal");
    let runtime = runtime_dir("lock-signal-rt");
    let ready = dir.join("ready");
    let mut holding = holder(&runtime, "signal", &ready);
    let mut waiting = locked(&runtime, "signal")
        .args(["--lock-wait", "30s", "--log-format", "json", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the waiting run");
    // Its start line says it is under way, and waiting.
    // Read through to the end, so that retry's last lines find a reader.
    let mut stderr = std::io::BufReader::new(waiting.stderr.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut first).unwrap();
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
    });
    assert!(first.contains("\"event\":\"start\""), "{first}");
    std::thread::sleep(Duration::from_millis(100));
    let sent = Instant::now();
    send(waiting.id(), nix::libc::SIGTERM);
    let status = wait_bounded(&mut waiting, STEP_LIMIT);
    let took = sent.elapsed();
    let _ = rest.join();
    send(holding.id(), nix::libc::SIGKILL);
    wait_bounded(&mut holding, STEP_LIMIT);
    kill_try(&ready);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(nix::libc::SIGTERM), "{status:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn a_dry_run_says_whether_the_lock_is_taken_now_and_takes_nothing() {
    let dir = temp_dir("lock-dry");
    let runtime = runtime_dir("lock-dry-rt");
    let dry = |runtime: &Path| {
        let out = output_bounded(
            locked(runtime, "dry").args(["--dry-run", "--", "true"]),
            TEST_LIMIT,
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        stdout_of(&out)
    };
    let free = dry(&runtime);
    assert!(
        free.contains("dry.lock', taken before the first try: free now"),
        "{free}"
    );
    assert!(!runtime.join("dry.lock").exists());
    let ready = dir.join("ready");
    let mut holding = holder(&runtime, "dry", &ready);
    let taken = dry(&runtime);
    // The dry run took nothing: the holder's lock is still its own.
    let turned_away = output_bounded(locked(&runtime, "dry").args(["--", "true"]), TEST_LIMIT);
    send(holding.id(), nix::libc::SIGKILL);
    wait_bounded(&mut holding, STEP_LIMIT);
    kill_try(&ready);
    let named = format!("is taken by pid {}", holding.id());
    assert!(taken.contains(&named), "{taken}");
    assert_eq!(turned_away.status.code(), Some(75));
}

#[test]
fn the_wait_for_a_taken_lock_ends_with_the_budget() {
    let dir = temp_dir("lock-budget");
    let runtime = runtime_dir("lock-budget-rt");
    let ready = dir.join("ready");
    let mut holding = holder(&runtime, "budget", &ready);
    let started = Instant::now();
    let out = output_bounded(
        locked(&runtime, "budget").args(["--lock-wait", "30s", "-B", "1s", "--", "true"]),
        TEST_LIMIT,
    );
    let took = started.elapsed();
    send(holding.id(), nix::libc::SIGKILL);
    wait_bounded(&mut holding, STEP_LIMIT);
    kill_try(&ready);
    assert_eq!(out.status.code(), Some(75), "{}", stderr_of(&out));
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(10),
        "waited {took:?}"
    );
}

#[test]
fn a_run_that_waited_for_the_lock_does_not_wait_its_stagger_past_the_budget() {
    let dir = temp_dir("lock-stagger-budget");
    let runtime = runtime_dir("lock-stagger-budget-rt");
    let ready = dir.join("ready");
    let mut holding = holder(&runtime, "sb", &ready);
    // The holder lets go after half a second; the stagger that seed 1 draws is most of 2.4 s,
    // which after the wait would end past the budget of 2.5 s.
    let mut waiter = locked(&runtime, "sb");
    waiter
        .args([
            "--lock-wait",
            "10s",
            "-B",
            "2.5s",
            "--stagger",
            "2.4s",
            "--seed",
            "1",
        ])
        .args(["--", "echo", "ran"]);
    let waiting = std::thread::spawn(move || output_bounded(&mut waiter, STEP_LIMIT));
    std::thread::sleep(Duration::from_millis(500));
    send(holding.id(), nix::libc::SIGKILL);
    wait_bounded(&mut holding, STEP_LIMIT);
    kill_try(&ready);
    let out = waiting.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "ran\n");
}

/// A run turned away by the lock, every record asked for: each says `locked`, 75 and no try,
/// and neither the command nor `--on-give-up` ran.
#[test]
fn every_record_of_a_run_turned_away_says_locked() {
    let dir = temp_dir("lock-records");
    let runtime = runtime_dir("lock-records-rt");
    let ready = dir.join("ready");
    let mut holding = holder(&runtime, "records", &ready);
    let (history, junit, outputs, log) = (
        dir.join("history.jsonl"),
        dir.join("junit.xml"),
        dir.join("outputs"),
        dir.join("log.jsonl"),
    );
    let hook = dir.join("hook");
    let out = output_bounded(
        locked(&runtime, "records")
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_OUTPUT", &outputs)
            .args(["--log-format", "json", "--history"])
            .arg(&history)
            .arg("--junit")
            .arg(&junit)
            .arg("--log-file")
            .arg(&log)
            .arg("--on-give-up")
            .arg(format!("touch '{}'", hook.display()))
            .args(["--", "true"]),
        TEST_LIMIT,
    );
    send(holding.id(), nix::libc::SIGKILL);
    wait_bounded(&mut holding, STEP_LIMIT);
    kill_try(&ready);
    assert_eq!(out.status.code(), Some(75), "{}", stderr_of(&out));
    assert!(!hook.exists(), "--on-give-up ran");
    let give_up = json_file(&log)
        .into_iter()
        .find(|l| l["event"] == "give_up")
        .expect("a give_up line");
    assert_eq!(
        (&give_up["reason"], &give_up["exit_code"], &give_up["tries"]),
        (&"locked".into(), &75.into(), &0.into())
    );
    let run = json_file(&history).pop().expect("a history line");
    assert_eq!(
        (&run["reason"], &run["exit_code"], &run["tries"]),
        (&"locked".into(), &75.into(), &0.into())
    );
    let outputs = std::fs::read_to_string(&outputs).unwrap();
    for line in ["reason=locked", "exit_code=75", "tries=0"] {
        assert!(outputs.lines().any(|l| l == line), "{outputs}");
    }
    // Not a failure of the job: JUnit skips the case, GitHub gets a warning, not an error.
    let junit = std::fs::read_to_string(&junit).unwrap();
    assert!(junit.contains("<skipped message=\""), "{junit}");
    assert!(!junit.contains("<failure"), "{junit}");
    assert!(junit.contains("failures=\"0\""), "{junit}");
    assert!(junit.contains(&format!("pid {}", holding.id())), "{junit}");
    let stderr = stderr_of(&out);
    assert!(stderr.contains("::warning title="), "{stderr}");
    assert!(!stderr.contains("::error"), "{stderr}");
}

/// Starts `cmd` (a run with `--log-format json`) with its log piped, and reads the log until a
/// line holds `needle`; the rest is read on a thread, so that `retry` always finds a reader.
fn start_until(
    cmd: &mut std::process::Command,
    needle: &str,
) -> (Child, std::thread::JoinHandle<()>) {
    use std::io::BufRead;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the run");
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let wanted = needle.to_string();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if line.contains(&wanted) {
                let _ = tx.send(());
            }
        }
    });
    if rx.recv_timeout(STEP_LIMIT).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the run never logged {needle}");
    }
    (child, reader)
}

#[test]
fn the_lock_is_taken_before_the_stagger_and_kept_through_the_last_hook() {
    let dir = temp_dir("lock-span");
    let runtime = runtime_dir("lock-span-rt");
    let next = |name: &str| {
        output_bounded(locked(&runtime, name).args(["--", "true"]), TEST_LIMIT)
            .status
            .code()
    };
    // Seed 1 draws a stagger of 19.485s out of 20s.
    let (mut staggered, reader) = start_until(
        locked(&runtime, "span").args([
            "--stagger",
            "20s",
            "--seed",
            "1",
            "--log-format",
            "json",
            "--",
            "true",
        ]),
        "\"event\":\"stagger\"",
    );
    let during_stagger = next("span");
    send(staggered.id(), nix::libc::SIGKILL);
    wait_bounded(&mut staggered, STEP_LIMIT);
    let _ = reader.join();
    assert_eq!(
        during_stagger,
        Some(75),
        "a run got the lock during the stagger"
    );
    let hook = dir.join("hook");
    let script = format!("touch '{}'; sleep 0.5", hook.display());
    let mut failing = locked(&runtime, "span")
        .args(["--on-give-up", &script, "--", "false"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the failing run");
    assert!(
        wait_until(STEP_LIMIT, || hook.exists()),
        "the hook never ran"
    );
    let during_hook = next("span");
    wait_bounded(&mut failing, STEP_LIMIT);
    assert_eq!(
        during_hook,
        Some(75),
        "a run got the lock during --on-give-up"
    );
    assert_eq!(next("span"), Some(0));
}

/// A lock path that is the file of another option would have that file's text replaced by the
/// lock's record: a usage error, before anything is written.
#[test]
fn a_lock_path_that_is_another_options_file_is_a_usage_error() {
    let dir = runtime_dir("lock-same");
    let history = dir.join("history.jsonl");
    std::fs::write(&history, "").unwrap();
    let metrics = dir.join("retry.prom");
    let mut metrics_lock = metrics.clone().into_os_string();
    metrics_lock.push(".lock");
    for (option, file, lock) in [
        ("--history", &history, dir.join("./history.jsonl")),
        ("--metrics", &metrics, PathBuf::from(metrics_lock)),
    ] {
        let out = output_bounded(
            retry_std()
                .arg(option)
                .arg(file)
                .arg("--lock")
                .arg(&lock)
                .args(["--", "echo", "ran"]),
            TEST_LIMIT,
        );
        let line = usage_error_of(&out, &lock.display().to_string());
        assert!(line.contains("--lock") && line.contains(option), "{line}");
        assert_eq!(stdout_of(&out), "");
    }
    assert_eq!(std::fs::read_to_string(&history).unwrap(), "");
}

/// Under GitHub with `-q`, a run turned away still ends with its `::warning`, in place of its
/// gave-up line, as a run that gives up keeps its `::error`: `-q` leaves out only a success's.
#[test]
fn a_quiet_run_turned_away_under_github_keeps_its_warning() {
    let dir = temp_dir("lock-quiet");
    let runtime = runtime_dir("lock-quiet-rt");
    let ready = dir.join("ready");
    let mut holding = holder(&runtime, "quiet", &ready);
    let out = output_bounded(
        locked(&runtime, "quiet")
            .env("GITHUB_ACTIONS", "true")
            .args(["-q", "--", "true"]),
        TEST_LIMIT,
    );
    send(holding.id(), nix::libc::SIGKILL);
    wait_bounded(&mut holding, STEP_LIMIT);
    kill_try(&ready);
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(75), "{log}");
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.starts_with("::warning title=retry"), "{log}");
    assert!(log.contains("is taken by pid"), "{log}");
}

/// A lock file that a run of `retry` let go of and that another program holds now
/// (`flock FILE …`) is not said to be held by that run: the file keeps only its token, and the
/// turned-away run names the pid the kernel lists as the holder.
#[test]
fn a_lock_file_held_by_another_program_does_not_name_the_run_that_held_it_before() {
    if !have_package(
        "a_lock_file_held_by_another_program_does_not_name_the_run_that_held_it_before",
        "flock(1)",
        "util-linux",
        on_path("flock"),
    ) {
        return;
    }
    let dir = temp_dir("lock-stale");
    let runtime = runtime_dir("lock-stale-rt");
    let id_file = dir.join("id");
    let script = format!("echo \"$RETRY_RUN_ID\" > '{}'", id_file.display());
    let out = output_bounded(
        locked(&runtime, "stale").args(["--", "sh", "-c", &script]),
        TEST_LIMIT,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let old_id = std::fs::read_to_string(&id_file)
        .unwrap()
        .trim()
        .to_string();
    assert!(!old_id.is_empty());
    let ready = dir.join("ready");
    let hold = format!("echo held > '{}'; exec sleep 5", ready.display());
    let mut flock = std::process::Command::new("flock")
        .arg(runtime.join("stale.lock"))
        .args(["sh", "-c", &hold])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("start flock");
    assert!(
        wait_until(STEP_LIMIT, || ready.exists()),
        "flock never took the lock"
    );
    let out = output_bounded(
        locked(&runtime, "stale").args(["--log-format", "json", "--", "true"]),
        TEST_LIMIT,
    );
    // The sleep holds the lock too: the whole group goes.
    send(flock.id(), nix::libc::SIGKILL);
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(flock.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    wait_bounded(&mut flock, STEP_LIMIT);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(75), "{err}");
    assert!(
        !err.contains(&old_id),
        "the run that let go is named:\n{err}"
    );
    let lines = json_lines(&err);
    let give_up = event(&lines, "give_up");
    assert_eq!(give_up["reason"], "locked", "{give_up}");
    assert_eq!(give_up["holder_run_id"], "", "{give_up}");
    if std::fs::read_to_string("/proc/locks").is_err() {
        return;
    }
    assert_eq!(give_up["holder_pid"], flock.id(), "{give_up}");
    let free = || {
        std::process::Command::new("flock")
            .args(["-n"])
            .arg(runtime.join("stale.lock"))
            .arg("true")
            .status()
            .is_ok_and(|s| s.success())
    };
    assert!(wait_until(STEP_LIMIT, free), "flock's group kept the lock");
    // A run killed with SIGKILL cannot cut its details: the kernel's table is what tells.
    let started = dir.join("started");
    let mut killed = holder(&runtime, "stale", &started);
    send(killed.id(), nix::libc::SIGKILL);
    wait_bounded(&mut killed, STEP_LIMIT);
    kill_try(&started);
    let _ = std::fs::remove_file(&ready);
    let mut flock = std::process::Command::new("flock")
        .arg(runtime.join("stale.lock"))
        .args(["sh", "-c", &hold])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("start flock");
    assert!(
        wait_until(STEP_LIMIT, || ready.exists()),
        "flock never took the lock"
    );
    let out = output_bounded(
        locked(&runtime, "stale").args(["--log-format", "json", "--", "true"]),
        TEST_LIMIT,
    );
    // The sleep holds the lock too: the whole group goes.
    send(flock.id(), nix::libc::SIGKILL);
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(flock.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    wait_bounded(&mut flock, STEP_LIMIT);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(75), "{err}");
    let give_up = event(&json_lines(&err), "give_up").clone();
    assert_eq!(give_up["holder_pid"], flock.id(), "{give_up}");
    assert_eq!(give_up["holder_run_id"], "", "{give_up}");
}

/// Fifty runs started at once on one lock, half of them waiting for it and half not: the
/// command, which checks with a marker of its own that it runs alone, never runs twice at once;
/// every run ends with the command's status or 75, and the counts add up.
#[test]
fn fifty_runs_at_once_on_one_lock_never_run_the_command_twice_at_once() {
    let dir = temp_dir("lock-fifty");
    let runtime = runtime_dir("lock-fifty-rt");
    let script = "mkdir marker || exit 99; echo $RETRY_FENCING_TOKEN >> ran; sleep 0.02; \
                  rmdir marker";
    let mut runs: Vec<Child> = (0..50)
        .map(|k| {
            locked(&runtime, "fifty")
                .current_dir(&dir)
                .arg("--lock-wait")
                .arg(if k % 2 == 0 { "0" } else { "30s" })
                .args(["--", "sh", "-c", script])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start a run")
        })
        .collect();
    let (mut ran, mut locked) = (0, 0);
    for run in &mut runs {
        match wait_bounded(run, TEST_LIMIT).code() {
            Some(0) => ran += 1,
            Some(75) => locked += 1,
            other => panic!("a run ended with {other:?}: not the command's status nor 75"),
        }
    }
    assert_eq!(ran + locked, 50);
    assert!(ran >= 25, "every run that waited ran: {ran}");
    let text = std::fs::read_to_string(dir.join("ran")).unwrap();
    let tokens: Vec<u64> = text.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(tokens.len(), ran, "{text}");
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "each holder's token is higher than the one before: {text}"
    );
}

/// Another local user can neither take nor break a lock: the lock file is the holder's, 0600,
/// in a directory others may read but not write, so another user's run cannot open it (125,
/// nothing run), `flock` cannot lock it, and it cannot be removed; the holder keeps the lock.
#[test]
fn another_user_can_neither_take_nor_break_a_lock() {
    let test = "another_user_can_neither_take_nor_break_a_lock";
    let Some(other) = other_user() else {
        return;
    };
    if !have_package(test, "setpriv and flock", "util-linux", on_path("setpriv"))
        || !on_path("flock")
    {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let dir = std::env::temp_dir().join(format!("retry-lock-other-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ready = dir.join("ready");
    let mut holding = holder(&dir, "shared", &ready);
    let lock = dir.join("shared.lock");
    assert_eq!(std::fs::metadata(&lock).unwrap().mode() & 0o777, 0o600);
    let as_other = |program: &std::ffi::OsStr, args: &[&std::ffi::OsStr]| {
        let mut cmd = std::process::Command::new("setpriv");
        cmd.args([format!("--reuid={other}"), format!("--regid={other}")])
            .arg("--clear-groups")
            .arg(program)
            .args(args);
        output_bounded(&mut cmd, TEST_LIMIT)
    };
    let retry = retry_std().get_program().to_owned();
    let out = as_other(
        &retry,
        &[
            "--lock".as_ref(),
            lock.as_os_str(),
            "--".as_ref(),
            "echo".as_ref(),
            "ran".as_ref(),
        ],
    );
    let log = stderr_of(&out);
    let outcome = (out.status.code(), stdout_of(&out), log.lines().count());
    assert_eq!(outcome, (Some(125), String::new(), 1), "{log}");
    assert!(log.contains(&format!("--lock {}", lock.display())), "{log}");
    let flocked = as_other(
        "flock".as_ref(),
        &["-n".as_ref(), lock.as_os_str(), "true".as_ref()],
    );
    assert!(
        !flocked.status.success(),
        "flock took the lock as another user"
    );
    let removed = as_other("rm".as_ref(), &["-f".as_ref(), lock.as_os_str()]);
    assert!(
        !removed.status.success(),
        "another user removed the lock file"
    );
    // The holder has it still.
    let out = output_bounded(locked(&dir, "shared").args(["--", "true"]), TEST_LIMIT);
    send(holding.id(), nix::libc::SIGKILL);
    wait_bounded(&mut holding, STEP_LIMIT);
    kill_try(&ready);
    assert_eq!(out.status.code(), Some(75), "{}", stderr_of(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A grant whose fencing token cannot be written could give the next run the same token: the
/// lock fails closed, as one that cannot be made does, whether its file is new or not.
#[test]
fn a_lock_whose_token_cannot_be_written_runs_nothing_and_exits_125_naming_it() {
    let dir = temp_dir("lock-full");
    let runtime = runtime_dir("lock-full-rt");
    let ran = dir.join("ran");
    for (file, before) in [("new", None), ("kept", Some("token=7\n"))] {
        let path = runtime.join(format!("{file}.lock"));
        if let Some(text) = before {
            let run = output_bounded(locked(&runtime, file).arg("--").arg("true"), TEST_LIMIT);
            assert_eq!(run.status.code(), Some(0), "{}", stderr_of(&run));
            std::fs::write(&path, text).unwrap();
        }
        let out = output_bounded(
            on_a_full_disk(locked(&runtime, file).arg("--").arg("touch").arg(&ran), 0),
            TEST_LIMIT,
        );
        let log = stderr_of(&out);
        assert_eq!(out.status.code(), Some(125), "{file}: {log}");
        assert_eq!(log.lines().count(), 1, "{file}: {log}");
        assert!(
            log.contains(&format!("--lock {}", path.display())) && log.contains("cannot write"),
            "{file}: {log}"
        );
        assert!(!ran.exists(), "{file}: the command ran");
        // The token is the last one granted still: the next grant is one higher.
        if let Some(text) = before {
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        }
    }
}

/// A lock file or key file in a directory that is not there: the run stops with 125, as
/// `flock` does, and the dry run, which a crontab line is checked with, says the same.
#[test]
fn a_lock_or_key_in_a_missing_directory_is_the_same_error_in_the_dry_run_and_the_run() {
    let dir = runtime_dir("lock-nodir");
    let ran = dir.join("ran");
    for (option, file) in [("--lock", "x.lock"), ("--once", "k.once")] {
        let path = dir.join("nodir").join(file);
        let mut lines = Vec::new();
        for dry in [&["--dry-run"][..], &[]] {
            let out = output_bounded(
                retry_std()
                    .arg(option)
                    .arg(&path)
                    .args(dry)
                    .args(["--", "touch"])
                    .arg(&ran),
                TEST_LIMIT,
            );
            let log = stderr_of(&out);
            assert_eq!(out.status.code(), Some(125), "{option} {dry:?}: {log}");
            assert!(
                log.contains(&format!("{option} {}", path.display())),
                "{log}"
            );
            lines.push(log);
        }
        assert_eq!(lines[0], lines[1], "{option}");
        assert!(!ran.exists(), "{option}: the command ran");
        // A file that is not there in a directory that is: free, and the dry run says so.
        let there = dir.join(file);
        let out = output_bounded(
            retry_std()
                .arg(option)
                .arg(&there)
                .args(["--dry-run", "--", "true"]),
            TEST_LIMIT,
        );
        assert_eq!(out.status.code(), Some(0), "{option}: {}", stderr_of(&out));
        assert!(!there.exists(), "{option}: the dry run made the file");
    }
}
