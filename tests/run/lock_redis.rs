//! `--lock redis://…/NAME` (docs/processes.md#one-run-at-a-time): one run at a time on a fleet,
//! against a real `redis-server`: runs of several hosts never run the command twice at once, a
//! killed holder's lease lapses within its length, a holder stopped past its lease loses it to
//! a run with a higher fencing token and ends with `lock_lost` in every record, and so does one
//! whose Redis restarted empty; and the server's clock, not the runs', times the lease.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::redis_server::{Server, cli, closed_port};
use crate::common::*;

/// A run holding the lock `url` while its try sleeps: the try writes its fencing token to
/// `token`, then its pid. Returns once the try has started. With `github`, it runs as a step
/// of GitHub Actions, writing its step outputs to `dir/go`.
fn holder(url: &str, dir: &Path, token: &Path, extra: &[&str], github: bool) -> Child {
    let script = format!(
        "echo $RETRY_FENCING_TOKEN > '{0}'; echo $$ >> '{0}'; exec sleep 20",
        token.display()
    );
    let mut cmd = retry_std();
    if github {
        cmd.env("GITHUB_ACTIONS", "true")
            .env("GITHUB_OUTPUT", dir.join("go"));
    }
    let child = cmd
        .current_dir(dir)
        .args(["-n", "1", "--log-format", "json", "--lock", url])
        .args(extra)
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the holder");
    assert!(
        wait_until(STEP_LIMIT, || std::fs::read_to_string(token)
            .is_ok_and(|s| s.lines().count() == 2)),
        "the holder's try never started"
    );
    child
}

/// The token and the pid that [`holder`]'s try wrote.
fn token_and_pid(file: &Path) -> (u64, u32) {
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines = text.lines().map(|l| l.trim().parse::<u64>().unwrap());
    (lines.next().unwrap(), lines.next().unwrap() as u32)
}

/// Whether the process `pid` is gone (or a zombie no one reaped yet).
fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
    })
}

/// Kills `holder`, whose lease on `url` is 600 ms long, and checks that a run gets the lease
/// within its length, and a moment for the run.
fn kill_and_see_the_lease_lapse(holder: &mut Child, url: &str) {
    holder.kill().unwrap();
    let killed = Instant::now();
    let _ = holder.wait();
    assert!(
        wait_until(STEP_LIMIT, || one_run(url) == Some(0)),
        "the lease was never free"
    );
    // The lease lapses 600 ms after its last renewal at the latest; a run takes a moment.
    let took = killed.elapsed();
    assert!(
        took < Duration::from_millis(600) + Duration::from_secs(3),
        "{took:?}"
    );
}

/// One run of `true` under the lock: its status.
fn one_run(url: &str) -> Option<i32> {
    retry_std()
        .args(["-n", "1", "--lock", url, "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .code()
}

#[test]
fn fifty_runs_at_once_from_four_hosts_never_run_the_command_twice_at_once() {
    let Some(server) = Server::start("lock-redis-fifty", &[]) else {
        return;
    };
    let url = format!("{}:lease=5s", server.url("fifty"));
    let dir = temp_dir("lock-redis-fifty");
    let hosts = other_hosts("fifty_runs_at_once_from_four_hosts");
    // The command checks by itself that it runs alone: a marker made and removed around it.
    let script = "mkdir marker || exit 99; echo $RETRY_FENCING_TOKEN >> ran; sleep 0.05; \
                  rmdir marker";
    let mut runs: Vec<Child> = (0..50)
        .map(|k| {
            on_host(hosts && k % 4 != 0, &format!("host-{}", k % 4))
                .current_dir(&dir)
                .args(["-n", "1", "--lock", &url, "--lock-wait"])
                .arg(if k % 2 == 0 { "0" } else { "10s" })
                .args(["--", "sh", "-c", script])
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
    // One grant after another: each holder's token is higher than the one before it.
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{text}");
}

#[test]
fn a_holder_killed_with_sigkill_frees_the_lease_within_its_length_and_leaves_no_try() {
    let Some(server) = Server::start("lock-redis-kill", &[]) else {
        return;
    };
    let url = format!("{}:lease=600ms", server.url("killed"));
    let dir = temp_dir("lock-redis-kill");
    let token = dir.join("token");
    let mut holder = holder(&url, &dir, &token, &[], false);
    let (_, try_pid) = token_and_pid(&token);
    assert_eq!(one_run(&url), Some(75), "the lease is held");
    // The dry run looks at the lease without taking it, and names its holder.
    let dry = retry_std()
        .args(["--dry-run", "-n", "1", "--lock", &url, "--", "true"])
        .output()
        .unwrap();
    let text = stdout_of(&dry);
    assert!(
        text.contains(&format!("is taken by pid {}", holder.id())),
        "{text}"
    );
    assert!(
        text.contains("a lease of 600ms, renewed every 200ms"),
        "{text}"
    );
    kill_and_see_the_lease_lapse(&mut holder, &url);
    assert!(
        wait_until(STEP_LIMIT, || gone(try_pid)),
        "the killed holder's try ran on"
    );
}

#[test]
fn a_holder_stopped_past_its_lease_loses_it_to_a_higher_token_and_ends_with_lock_lost() {
    let Some(server) = Server::start("lock-redis-stop", &[]) else {
        return;
    };
    let url = format!("{}:lease=600ms", server.url("stopped"));
    let dir = temp_dir("lock-redis-stop");
    let (token, other) = (dir.join("token"), dir.join("other"));
    let records = [
        "--history",
        "history",
        "--junit",
        "junit.xml",
        "--metrics",
        "m.prom",
    ];
    let mut a = holder(&url, &dir, &token, &records, true);
    let (first, try_pid) = token_and_pid(&token);
    send(a.id(), nix::libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(900));
    let script = format!("echo $RETRY_FENCING_TOKEN > '{}'", other.display());
    let b = retry_std()
        .args(["-n", "1", "--lock", &url, "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(b.status.code(), Some(0), "{}", stderr_of(&b));
    let second: u64 = std::fs::read_to_string(&other)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(second > first, "{second} after {first}");
    let continued = Instant::now();
    send(a.id(), nix::libc::SIGCONT);
    let status = wait_bounded(&mut a, STEP_LIMIT);
    let took = continued.elapsed();
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(status.code(), Some(75));
    assert!(gone(try_pid), "the lost holder's try runs on");
    let mut err = String::new();
    std::io::Read::read_to_string(a.stderr.as_mut().unwrap(), &mut err).unwrap();
    let give_up = json_lines(&err)
        .into_iter()
        .find(|e| e["event"] == "give_up")
        .unwrap_or_else(|| panic!("{err}"));
    assert_eq!(give_up["reason"], "lock_lost", "{err}");
    assert_eq!(give_up["exit_code"], 75, "{err}");
    let tried = json_lines(&err)
        .into_iter()
        .find(|e| e["event"] == "try")
        .unwrap_or_else(|| panic!("{err}"));
    assert_eq!(tried["verdict"], "lock_lost", "{err}");
    let history = std::fs::read_to_string(dir.join("history")).unwrap();
    assert!(history.contains(r#""reason":"lock_lost""#), "{history}");
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert!(junit.contains(r#"type="lock_lost""#), "{junit}");
    let metrics = std::fs::read_to_string(dir.join("m.prom")).unwrap();
    assert!(metrics.contains(r#"outcome="lock_lost""#), "{metrics}");
    assert!(metrics.contains(r#"result="lock_lost""#), "{metrics}");
    assert!(!metrics.contains(r#"result="interrupted""#), "{metrics}");
    let outputs = std::fs::read_to_string(dir.join("go")).unwrap();
    for line in ["exit_code=75", "reason=lock_lost", "tries=1"] {
        assert!(outputs.lines().any(|l| l == line), "{line}: {outputs}");
    }
    let stats = retry_std()
        .current_dir(&dir)
        .args(["--stats", "history", "--log-format", "json"])
        .output()
        .unwrap();
    assert_eq!(stats.status.code(), Some(0), "{}", stderr_of(&stats));
    let rows = json_lines(&stdout_of(&stats));
    let end = event(&rows, "stats_end");
    assert_eq!(end["runs"], 1, "{rows:?}");
    let row = event(&rows, "stats_row");
    assert_eq!(row["gave_up_pct"], 100, "{rows:?}");
    assert_eq!(row["interrupted"], 0, "{rows:?}");
}

#[test]
fn a_holder_whose_redis_restarted_empty_learns_it_at_its_next_renewal() {
    let Some(server) = Server::start("lock-redis-restart", &[]) else {
        return;
    };
    let port = server.port;
    let url = format!("{}:lease=900ms", server.url("restarted"));
    let dir = temp_dir("lock-redis-restart");
    let token = dir.join("token");
    let mut a = holder(&url, &dir, &token, &["--log-format", "human"], false);
    drop(server);
    let Some(_server) = Server::start_on_with("lock-redis-restart", port, &[]) else {
        let _ = a.kill();
        let _ = a.wait();
        return;
    };
    let restarted = Instant::now();
    let status = wait_bounded(&mut a, STEP_LIMIT);
    assert!(restarted.elapsed() < Duration::from_secs(3));
    assert_eq!(status.code(), Some(75));
    let mut err = String::new();
    std::io::Read::read_to_string(a.stderr.as_mut().unwrap(), &mut err).unwrap();
    // The human log tells the try that the loss stopped, as it tells a try a timeout stopped,
    // and the give-up.
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].starts_with("retry: try 1/1 was killed by SIGTERM after")
            && lines[0].contains("(lock_lost); giving up: the lock 'restarted' was lost"),
        "{err}"
    );
    assert!(
        lines.last().unwrap().contains("gave up after 1 try in")
            && lines
                .last()
                .unwrap()
                .contains("the lock 'restarted' was lost"),
        "{err}"
    );
    // The new server counts fencing tokens from 1 again: a resource keeps the highest it saw.
    assert_eq!(one_run(&url), Some(0));
}

#[test]
fn a_redis_that_cannot_be_reached_or_answers_late_leaves_the_run_unstarted_within_its_budget() {
    let (_closed, port) = closed_port();
    let url = format!("redis://127.0.0.1:{port}/job");
    let out = retry_std()
        .args(["-n", "1", "--lock", &url, "--", "sh", "-c", "echo ran"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(75), "{}", stderr_of(&out));
    assert!(out.stdout.is_empty());
    assert!(
        stderr_of(&out).contains("could not be taken"),
        "{}",
        stderr_of(&out)
    );
    // A server that takes the connection and never answers holds no run past its budget.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "redis://127.0.0.1:{}/job",
        silent.local_addr().unwrap().port()
    );
    let started = Instant::now();
    let out = retry_std()
        .args(["-n", "1", "--budget", "500ms", "--log-format", "json"])
        .args(["--lock", &url, "--", "sh", "-c", "echo ran"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_millis(1500), "{took:?}");
    assert_eq!(out.status.code(), Some(75), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains(r#""reason":"lock_unreachable""#));
}

#[test]
fn credentials_refused_are_a_misconfiguration_and_the_password_is_never_shown() {
    let Some(server) = Server::start("lock-redis-auth", &["--requirepass", "right-one"]) else {
        return;
    };
    let password = "wr0ng-Secret-Passw0rd";
    let url = format!("redis://:{password}@127.0.0.1:{}/job", server.port);
    let out = retry_std()
        .args(["-n", "1", "--lock", &url, "--", "sh", "-c", "echo ran"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", stderr_of(&out));
    assert!(out.stdout.is_empty());
    let err = stderr_of(&out);
    assert!(err.contains("WRONGPASS"), "{err}");
    // A password in the URL is there for every user's `ps` to read: said once.
    assert_eq!(err.matches("RETRY_REDIS_PASSWORD").count(), 1, "{err}");
    for piece in password.as_bytes().windows(8) {
        let piece = std::str::from_utf8(piece).unwrap();
        assert!(!err.contains(piece), "{piece} in {err}");
    }
}

#[test]
fn bad_values_of_a_lock_on_redis_are_one_line_naming_the_option() {
    for bad in [
        "redis://h/job:lease=0",
        "redis://h/job:lease=abc",
        "redis://h/job:ttl=5s",
        "redis://h/j%00b",
        "redis://h/j\u{7}b",
    ] {
        let out = retry_std()
            .args(["-n", "1", "--lock", bad, "--", "true"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{bad}");
        let err = stderr_of(&out);
        assert_eq!(err.lines().count(), 1, "{bad}: {err}");
        assert!(err.contains("--lock"), "{bad}: {err}");
    }
}

/// The holder renews its lease while its try runs: past two of its lengths another run is
/// still turned away. A holder that lost it (stopped past its lease, another run holding it
/// now) never lets go of the new holder's lease: the release checks the owner.
#[test]
fn a_lease_is_renewed_while_the_try_runs_and_a_lost_holder_never_lets_go_of_the_next_ones() {
    let Some(server) = Server::start("lock-redis-renew", &[]) else {
        return;
    };
    let url = format!("{}:lease=600ms", server.url("renewed"));
    let dir = temp_dir("lock-redis-renew");
    let token = dir.join("token");
    let mut a = holder(&url, &dir, &token, &[], false);
    std::thread::sleep(Duration::from_millis(1300));
    assert_eq!(
        one_run(&url),
        Some(75),
        "the lease lapsed while its try ran"
    );
    send(a.id(), nix::libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(900));
    let (b_id, go) = (dir.join("b-id"), dir.join("go"));
    let script = format!(
        "echo $RETRY_RUN_ID > '{0}.new' && mv '{0}.new' '{0}'; while [ ! -e '{1}' ]; do sleep 0.01; done",
        b_id.display(),
        go.display()
    );
    let mut b = retry_std()
        .args(["-n", "1", "--lock", &url, "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_until(STEP_LIMIT, || b_id.exists()),
        "the next run never got the lease"
    );
    send(a.id(), nix::libc::SIGCONT);
    assert_eq!(wait_bounded(&mut a, STEP_LIMIT).code(), Some(75));
    let out = retry_std()
        .args([
            "-n",
            "1",
            "--log-format",
            "json",
            "--lock",
            &url,
            "--",
            "true",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    std::fs::write(&go, "").unwrap();
    let b_status = wait_bounded(&mut b, STEP_LIMIT);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(75), "the lost holder let go: {err}");
    let give_up = event(&json_lines(&err), "give_up").clone();
    let b_run = std::fs::read_to_string(&b_id).unwrap();
    assert_eq!(give_up["holder_run_id"], b_run.trim(), "{give_up}");
    assert_eq!(b_status.code(), Some(0));
    assert_eq!(one_run(&url), Some(0));
}

/// `--lock-wait` on a lease held by another run waits for it, asking again, but never past the
/// budget: the run is turned away with 75 when the budget ends, naming the holder.
#[test]
fn the_wait_for_a_held_lease_ends_with_the_budget() {
    let Some(server) = Server::start("lock-redis-wait", &[]) else {
        return;
    };
    let url = server.url("waited");
    let dir = temp_dir("lock-redis-wait");
    let token = dir.join("token");
    let mut a = holder(&url, &dir, &token, &[], false);
    let started = Instant::now();
    let out = retry_std()
        .args(["-n", "1", "--budget", "700ms", "--lock-wait", "30s"])
        .args(["--log-format", "json", "--lock", &url, "--", "true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let took = started.elapsed();
    let (_, try_pid) = token_and_pid(&token);
    send(a.id(), nix::libc::SIGKILL);
    let _ = a.wait();
    send(try_pid, nix::libc::SIGKILL);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(75), "{err}");
    assert!(took >= Duration::from_millis(600), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let give_up = event(&json_lines(&err), "give_up").clone();
    assert_eq!(give_up["reason"], "locked", "{give_up}");
    assert_eq!(give_up["holder_pid"], a.id(), "{give_up}");
}

/// The time written after `word ` in `text` (`since 2026-…Z`, `done at 2026-…Z`), in seconds
/// since the epoch.
fn stamp_after(text: &str, word: &str) -> i64 {
    let at = text
        .split(&format!("{word} "))
        .nth(1)
        .and_then(|rest| rest.split([' ', ')', ';']).next())
        .unwrap_or_else(|| panic!("no '{word}' time in: {text}"));
    let time = humantime::parse_rfc3339(at).unwrap_or_else(|e| panic!("{at}: {e}"));
    time.duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The lease and the mark of a key done are the server's to time, whatever this machine's
/// clock says: with the server's clock an hour ahead of the runs' or an hour behind, renewals
/// keep a held lease held past several lengths, a killed holder's lease lapses within its
/// length, and the holder's since and a key's done time are the server's times.
#[test]
fn the_servers_clock_decides_the_lease_an_hour_ahead_of_the_runs_or_behind() {
    std::thread::scope(|scope| {
        for shift in [3600, -3600] {
            scope.spawn(move || the_lease_keeps_to_a_server_shifted_by(shift));
        }
    });
}

fn the_lease_keeps_to_a_server_shifted_by(shift: i64) {
    let name = format!("lock-redis-clock{shift}");
    let Some(server) = Server::start_with_clock_shifted(&name, shift) else {
        return;
    };
    let server_now = || {
        cli(server.port, &["TIME"])[0]
            .parse::<i64>()
            .expect("TIME's seconds")
    };
    let here_now = || {
        let now = std::time::SystemTime::now();
        now.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
    };
    assert!(
        (server_now() - here_now() - shift).abs() < 60,
        "the server's clock is not shifted"
    );
    let url = format!("{}:lease=600ms", server.url("shifted"));
    let dir = temp_dir(&name);
    let token = dir.join("token");
    let mut holder = holder(&url, &dir, &token, &[], false);
    // Three lengths later, the renewals have kept the lease held.
    std::thread::sleep(Duration::from_millis(1800));
    let turned = retry_std()
        .args(["-n", "1", "--lock", &url, "--", "true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(turned.status.code(), Some(75), "{}", stderr_of(&turned));
    let since = stamp_after(&stderr_of(&turned), "since");
    assert!(
        (since - server_now()).abs() < 60,
        "since {since}, the server's time {}",
        server_now()
    );
    kill_and_see_the_lease_lapse(&mut holder, &url);
    // A key done: marked with the server's time, and done to the next run.
    let once = server.url("nightly");
    let run = |count: &Path| {
        let script = format!("echo x >> '{}'", count.display());
        retry_std()
            .args(["-n", "1", "--once", &once, "--", "sh", "-c", &script])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let count = dir.join("count");
    assert_eq!(run(&count).status.code(), Some(0));
    let again = run(&count);
    assert_eq!(again.status.code(), Some(0), "{}", stderr_of(&again));
    assert_eq!(std::fs::read_to_string(&count).unwrap(), "x\n");
    let done = stamp_after(&stderr_of(&again), "done at");
    assert!(
        (done - server_now()).abs() < 60,
        "done at {done}, the server's time {}",
        server_now()
    );
}
