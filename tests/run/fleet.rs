//! A fleet's dead letters on Redis (docs/dead-letters.md#a-fleets-failed-runs-on-redis), with a
//! real `redis-server` of each test's own: runs that give up add their record to a stream, any
//! machine lists them, replays at once never run one twice, a replay killed midway leaves its
//! run to the next, and a Redis that cannot be reached loses no record.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::redis_server::{Server, cli};
use common::{json_lines, retry, retry_std, stderr_of, stdout_of, usage_error_of, wait_bounded};
use serde_json::Value;

/// `retry` in `dir`, keeping its local records under `dir/state`.
fn retry_in(dir: &Path) -> assert_cmd::Command {
    let mut cmd = retry();
    cmd.current_dir(dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env_remove("RETRY_REDIS_PASSWORD")
        .timeout(common::STEP_LIMIT);
    cmd
}

fn std_in(dir: &Path) -> std::process::Command {
    let mut cmd = retry_std();
    cmd.current_dir(dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env_remove("RETRY_REDIS_PASSWORD");
    cmd
}

/// A run in `dir` that gives up (`-n 1`), recorded in `url`, whose command appends its run id
/// to `marks` and then runs `then`.
fn give_up(dir: &Path, url: &str, label: &str, then: &str) {
    retry_in(dir)
        .args(["--dead-letter", url, "--label", label, "-n", "1", "--"])
        .args(["sh", "-c", &format!("echo $RETRY_RUN_ID >> marks; {then}")])
        .assert()
        .code(1);
}

/// The fleet's runs as `--replay URL --dry-run --log-format json ARGS` lists them.
fn listed(dir: &Path, url: &str, args: &[&str]) -> Vec<Value> {
    let out = retry_in(dir)
        .args(["--replay", url, "--dry-run", "--log-format", "json"])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    json_lines(&stdout_of(&out))
}

fn marks(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("marks"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_run_that_gives_up_is_on_the_stream_and_a_replay_forget_and_prune_work_on_it() {
    let Some(server) = Server::start("fleet-basics", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-basics");
    let url = server.url("jobs");
    for label in ["a", "b", "c"] {
        give_up(&dir, &url, label, "test -e ok");
    }
    assert_eq!(marks(&dir).len(), 3);
    assert!(
        !dir.join("redis:").exists(),
        "no directory is made of the URL"
    );
    let runs = listed(&dir, &url, &[]);
    assert_eq!(runs.len(), 3);
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    assert!(runs.iter().all(|r| r["host"] == host.as_str()), "{runs:?}");
    let ids: Vec<String> = runs
        .iter()
        .map(|r| r["id"].as_str().unwrap().into())
        .collect();
    // Forget the first by a prefix; replay only the second; the third fails again.
    retry_in(&dir)
        .args(["--forget", &url, &ids[0][..8]])
        .assert()
        .success()
        .stdout(format!("forgot 1 run of {url}; 2 still pending\n"));
    std::fs::write(dir.join("ok"), "").unwrap();
    retry_in(&dir)
        .args(["--replay", &url, "--only", &ids[1]])
        .assert()
        .success();
    std::fs::remove_file(dir.join("ok")).unwrap();
    retry_in(&dir).args(["--replay", &url]).assert().code(1);
    assert_eq!(marks(&dir)[3..], [ids[1].clone(), ids[2].clone()]);
    let all = listed(&dir, &url, &["--all"]);
    let states: Vec<(&str, u64)> = all
        .iter()
        .map(|r| {
            (
                r["state"].as_str().unwrap(),
                r["attempts"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(states, [("forgotten", 0), ("resolved", 0), ("pending", 1)]);
    retry_in(&dir)
        .args(["--prune", &url, "--older-than", "1d"])
        .assert()
        .success()
        .stdout(format!(
            "pruned {url}: dropped 1 resolved, 1 forgotten and 0 pending that gave up before the limit; kept 1 pending\n"
        ));
    let left = listed(&dir, &url, &["--all"]);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["id"], ids[2].as_str());
    assert_eq!(cli(server.port, &["XLEN", "retry:dead:{jobs}"]), ["1"]);
}

#[test]
fn four_replays_at_once_two_of_them_another_host_run_each_record_exactly_once() {
    let Some(server) = Server::start("fleet-four", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-four");
    let url = server.url("jobs");
    let other_host = common::have_package(
        "four_replays_at_once",
        "root, for a UTS namespace (unshare -u) that is another host",
        "root",
        common::euid() == 0
            && std::process::Command::new("unshare")
                .args(["-u", "true"])
                .status()
                .is_ok_and(|s| s.success()),
    );
    // 60 records made here, each command marking its run once it succeeds.
    for k in 0..60 {
        give_up(&dir, &url, &format!("r{k}"), "test -e go");
    }
    std::fs::remove_file(dir.join("marks")).unwrap();
    std::fs::write(dir.join("go"), "").unwrap();
    let me = assert_cmd::cargo::cargo_bin("retry").display().to_string();
    let mut replays: Vec<_> = (0..4)
        .map(|k| {
            let mut cmd = if k >= 2 && other_host {
                let mut c = std::process::Command::new("unshare");
                c.args([
                    "-u",
                    "sh",
                    "-c",
                    "hostname other-host && exec \"$0\" \"$@\"",
                    &me,
                ]);
                c
            } else {
                std::process::Command::new(&me)
            };
            cmd.current_dir(&dir)
                .env("XDG_STATE_HOME", dir.join("state"))
                .args(["--replay", &url, "--any-host", "-q"])
                .stderr(Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    for r in &mut replays {
        let status = wait_bounded(r, common::TEST_LIMIT);
        assert_eq!(status.code(), Some(0));
    }
    let mut seen = marks(&dir);
    assert_eq!(seen.len(), 60, "each record ran once: {} runs", seen.len());
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 60, "no record ran twice");
    assert!(listed(&dir, &url, &[]).is_empty());
    // Without --any-host, a replay on another host runs none of this host's records.
    if other_host {
        give_up(&dir, &url, "late", "test -e never");
        let out = std::process::Command::new("unshare")
            .args([
                "-u",
                "sh",
                "-c",
                "hostname other-host && exec \"$0\" \"$@\"",
                &me,
            ])
            .args(["--replay", &url, "-v"])
            .current_dir(&dir)
            .env("XDG_STATE_HOME", dir.join("state"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        assert_eq!(marks(&dir).len(), 61, "only the give-up marked");
    }
}

#[test]
fn a_replay_killed_midway_leaves_its_claimed_run_to_run_once_later() {
    let Some(server) = Server::start("fleet-kill", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-kill");
    let url = server.url("jobs");
    retry_in(&dir)
        .args(["--dead-letter", &url, "-n", "1", "-k", "100ms", "--"])
        .args([
            "sh",
            "-c",
            "echo run >> marks; test -e ok && exit 0; test -e first || { : > first; exit 1; }; echo $$ > try.pid; exec sleep 3",
        ])
        .assert()
        .code(1);
    // Claims of 1 s, renewed every third of that while the replay lives.
    let leased = format!("{url}:lease=1s");
    let mut replay = std_in(&dir)
        .args(["--replay", &leased])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(common::wait_until(Duration::from_secs(5), || marks(&dir)
        .len()
        == 2));
    // Renewed past its first length, the claim still holds the run.
    std::thread::sleep(Duration::from_millis(1300));
    assert_eq!(
        listed(&dir, &url, &[])[0]["claimed_by"]
            .as_str()
            .map(|s| s.is_empty()),
        Some(false)
    );
    let killed = Instant::now();
    common::send(replay.id(), nix::libc::SIGKILL);
    let _ = replay.wait();
    // Its try does not outlive it.
    if let Err(pid) = common::gone_within(&dir.join("try.pid"), Duration::from_secs(2)) {
        panic!("the killed replay's try {pid} is still running");
    }
    std::fs::write(dir.join("ok"), "").unwrap();
    // While the lease runs, another replay leaves the run alone.
    let listed_now = listed(&dir, &url, &[]);
    assert_eq!(listed_now.len(), 1);
    if killed.elapsed() < Duration::from_millis(700) {
        assert!(listed_now[0]["claimed_by"].is_string(), "{listed_now:?}");
        retry_in(&dir).args(["--replay", &url]).assert().success();
        assert_eq!(
            marks(&dir).len(),
            2,
            "the claimed run did not run again yet"
        );
    }
    // Once the lease lapsed, the next replay runs it, once, and says whose claim lapsed.
    std::thread::sleep(Duration::from_millis(1100).saturating_sub(killed.elapsed()));
    let out = retry_in(&dir).args(["--replay", &url]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("whose claim lapsed without being let go"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(marks(&dir).len(), 3);
    retry_in(&dir).args(["--replay", &url]).assert().success();
    assert_eq!(marks(&dir).len(), 3, "resolved: never again");
}

#[test]
fn redis_stopped_while_forty_runs_give_up_loses_no_record_and_adds_none_twice() {
    let Some(server) = Server::start("fleet-down", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-down");
    let port = server.port;
    let url = server.url("jobs");
    drop(server);
    let mut runs: Vec<_> = (0..40)
        .map(|k| {
            std_in(&dir)
                .args([
                    "--dead-letter",
                    &url,
                    "--label",
                    &format!("r{k}"),
                    "-n",
                    "1",
                    "--",
                    "false",
                ])
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for run in &mut runs {
        assert_eq!(wait_bounded(run, common::STEP_LIMIT).code(), Some(1));
    }
    for run in runs {
        let err = String::from_utf8_lossy(&run.wait_with_output().unwrap().stderr).into_owned();
        assert_eq!(err.matches("warning").count(), 1, "{err}");
        assert!(err.contains("the run is kept in"), "{err}");
    }
    let kept = std::fs::read_dir(dir.join("state/retry/unsent"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let copy = std::fs::read(&kept).unwrap();
    assert_eq!(copy.iter().filter(|&&b| b == b'\n').count(), 40);
    let Some(_server) = Server::start_on("fleet-down", port) else {
        return;
    };
    // The dry run lists the forty kept here and moves nothing; the replay moves them, then
    // runs them.
    assert_eq!(listed(&dir, &url, &[]).len(), 40);
    assert_eq!(std::fs::read(&kept).unwrap(), copy);
    retry_in(&dir)
        .args(["--replay", &url, "--dry-run", "--only-label", "none"])
        .assert()
        .success();
    retry_in(&dir)
        .args(["--replay", &url, "-n", "1", "-q"])
        .assert()
        .code(1);
    assert_eq!(std::fs::metadata(&kept).unwrap().len(), 0);
    assert_eq!(listed(&dir, &url, &[]).len(), 40);
    // A move cut short before the file was emptied, done again: no record twice.
    std::fs::write(&kept, &copy).unwrap();
    give_up(&dir, &url, "after", "true; exit 1");
    assert_eq!(std::fs::metadata(&kept).unwrap().len(), 0);
    let runs = listed(&dir, &url, &[]);
    assert_eq!(runs.len(), 41);
    assert_eq!(cli(port, &["XLEN", "retry:dead:{jobs}"]), ["41"]);
}

#[test]
fn the_password_is_never_shown_and_a_server_that_refuses_it_is_one_line() {
    let Some(server) = Server::start("fleet-auth", &["--requirepass", "s3cret-pass-word"]) else {
        return;
    };
    let dir = common::temp_dir("fleet-auth");
    let port = server.port;
    let good = format!("redis://:s3cret-pass-word@127.0.0.1:{port}/jobs");
    let out = retry_in(&dir)
        .args(["--dead-letter", &good, "-n", "1", "-v", "--", "false"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let log = stderr_of(&out);
    assert!(!log.contains("s3cret"), "{log}");
    let runs = listed(&dir, &good, &[]);
    assert_eq!(runs.len(), 1);
    let record = cli(
        port,
        &[
            "-a",
            "s3cret-pass-word",
            "--no-auth-warning",
            "XRANGE",
            "retry:dead:{jobs}",
            "-",
            "+",
        ],
    )
    .join("\n");
    assert!(
        !record.contains("s3cret"),
        "the record holds no password: {record}"
    );
    // The password from the environment works as well; a wrong one is a usage error.
    let plain = format!("redis://127.0.0.1:{port}/jobs");
    let out = retry_in(&dir)
        .env("RETRY_REDIS_PASSWORD", "s3cret-pass-word")
        .args(["--replay", &plain, "--dry-run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let bad = format!("redis://:wrong-pass-word@127.0.0.1:{port}/jobs");
    let out = retry_in(&dir).args(["--replay", &bad]).output().unwrap();
    let line = usage_error_of(&out, "--replay");
    assert!(
        line.contains("WRONGPASS") && !line.contains("wrong-pass"),
        "{line}"
    );
}

#[test]
fn a_server_that_answers_a_byte_at_a_time_holds_a_replay_one_deadline() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(mut socket) = socket else { return };
            std::thread::spawn(move || {
                use std::io::Write;
                loop {
                    if socket.write_all(b"+").is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
        }
    });
    let dir = common::temp_dir("fleet-dribble");
    let started = Instant::now();
    let out = retry_in(&dir)
        .args([
            "--replay",
            &format!("redis://127.0.0.1:{port}/jobs"),
            "--dry-run",
        ])
        .output()
        .unwrap();
    let took = started.elapsed();
    let line = usage_error_of(&out, "--replay");
    assert!(line.contains("no answer within 2000 ms"), "{line}");
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(8),
        "{took:?}"
    );
}

#[test]
fn a_fleets_history_on_redis_is_summed_up_by_stats_with_the_host_among_the_groupings() {
    let Some(server) = Server::start("fleet-history", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-history");
    let url = server.url("ci");
    let me = assert_cmd::cargo::cargo_bin("retry").display().to_string();
    let other_host = common::euid() == 0
        && std::process::Command::new("unshare")
            .args(["-u", "true"])
            .status()
            .is_ok_and(|s| s.success());
    for script in [
        "exit 0",
        "test -e once || { touch once; exit 1; }",
        "exit 0",
    ] {
        retry_in(&dir)
            .args(["--history", &url, "--label", "build", "-d", "0", "--"])
            .args(["sh", "-c", script])
            .assert()
            .success();
    }
    if other_host {
        let out = std::process::Command::new("unshare")
            .args([
                "-u",
                "sh",
                "-c",
                "hostname other-host && exec \"$0\" \"$@\"",
                &me,
            ])
            .args(["--history", &url, "--label", "build", "--", "true"])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
    }
    assert!(!dir.join("redis:").exists());
    let out = retry_in(&dir)
        .args(["--stats", &url, "--log-format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let rows: Vec<Value> = json_lines(&stdout_of(&out))
        .into_iter()
        .filter(|v| v["event"] == "stats_row")
        .collect();
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    let here = rows.iter().find(|r| r["host"] == host.as_str()).unwrap();
    assert_eq!(
        (here["name"].as_str(), here["runs"].as_u64()),
        (Some("build"), Some(3))
    );
    assert_eq!(here["flaky_pct"].as_f64(), Some(33.3));
    if other_host {
        let there = rows.iter().find(|r| r["host"] == "other-host").unwrap();
        assert_eq!(there["runs"], 1);
        assert_eq!(rows.len(), 2);
    }
    // The human table names each row's host; the stream is capped.
    let out = retry_in(&dir).args(["--stats", &url]).output().unwrap();
    assert!(
        stdout_of(&out).contains(&format!("{host}: build")),
        "{}",
        stdout_of(&out)
    );
    let runs = if other_host { "4" } else { "3" };
    assert_eq!(cli(server.port, &["XLEN", "retry:history:{ci}"]), [runs]);
}

#[test]
fn a_prune_on_redis_drops_the_old_runs_of_the_history_and_says_so() {
    let Some(server) = Server::start("fleet-prune-history", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-prune-history");
    let url = server.url("ci");
    // Two runs added in 1970, as the server's clock dates each entry, then two today.
    for id in ["1000-0", "2000-0"] {
        cli(
            server.port,
            &[
                "XADD",
                "retry:history:{ci}",
                id,
                "host",
                "old",
                "line",
                "{}",
            ],
        );
    }
    for _ in 0..2 {
        retry_in(&dir)
            .args(["--history", &url, "--", "true"])
            .assert()
            .success();
    }
    let out = retry_in(&dir)
        .args(["--prune", &url, "--older-than", "1d"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        stdout_of(&out).trim_end(),
        format!("pruned {url}: dropped 2 runs that ended before the limit; kept 2")
    );
    assert_eq!(cli(server.port, &["XLEN", "retry:history:{ci}"]), ["2"]);
    // A name with dead letters and a history gets a line for each; one with neither, one line.
    give_up(&dir, &url, "nightly", "exit 1");
    let out = retry_in(&dir)
        .args([
            "--prune",
            &url,
            "--older-than",
            "1d",
            "--log-format",
            "json",
        ])
        .output()
        .unwrap();
    let kinds: Vec<Value> = json_lines(&stdout_of(&out))
        .iter()
        .map(|v| v["kind"].clone())
        .collect();
    assert_eq!(kinds, ["dead_letters", "history"], "{}", stdout_of(&out));
    let out = retry_in(&dir)
        .args(["--prune", &server.url("none"), "--older-than", "1d"])
        .output()
        .unwrap();
    assert!(
        stdout_of(&out).ends_with("it is empty\n"),
        "{}",
        stdout_of(&out)
    );
}

#[test]
fn a_forget_or_a_prune_on_redis_acts_on_the_runs_kept_locally_too() {
    let Some(server) = Server::start("fleet-kept-forget", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-kept-forget");
    let port = server.port;
    let url = server.url("jobs");
    drop(server);
    // Two runs give up while Redis is down: kept in the local file.
    for _ in 0..2 {
        give_up(&dir, &url, "kept", "exit 1");
    }
    let Some(_server) = Server::start_on("fleet-kept-forget", port) else {
        return;
    };
    let out = retry_in(&dir)
        .args(["--forget", &url, "all"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stdout_of(&out).contains("forgot 2 runs"),
        "{}",
        stdout_of(&out)
    );
    assert!(listed(&dir, &url, &[]).is_empty());
    // And a prune drops them: nothing is left to move later.
    let out = retry_in(&dir)
        .args(["--prune", &url, "--older-than", "1d"])
        .output()
        .unwrap();
    assert!(
        stdout_of(&out).contains("dropped 0 resolved, 2 forgotten"),
        "{}",
        stdout_of(&out)
    );
    assert_eq!(cli(port, &["XLEN", "retry:dead:{jobs}"]), ["0"]);
}

#[test]
fn a_history_line_that_redis_cannot_take_is_one_warning_and_the_run_keeps_its_status() {
    let dir = common::temp_dir("fleet-history-down");
    let port = common::redis_server::free_port();
    let out = retry_in(&dir)
        .args([
            "--history",
            &format!("redis://127.0.0.1:{port}/ci"),
            "--",
            "sh",
            "-c",
            "exit 0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let log = stderr_of(&out);
    assert_eq!(log.matches("warning").count(), 1, "{log}");
}

/// A listener on 127.0.0.1 that answers every command of each connection with `answer`.
fn answering(answer: &'static [u8]) -> u16 {
    answering_after(b"", answer)
}

/// A listener on 127.0.0.1 that answers the first command of each connection with `first`
/// (`answer` when empty), and every other with `answer`.
fn answering_after(first: &'static [u8], answer: &'static [u8]) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(mut socket) = socket else { return };
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut buf = [0u8; 4096];
                let mut reply = if first.is_empty() { answer } else { first };
                while let Ok(n @ 1..) = socket.read(&mut buf) {
                    let _ = n;
                    if socket.write_all(reply).is_err() {
                        return;
                    }
                    reply = answer;
                }
            });
        }
    });
    port
}

#[test]
fn a_hostile_server_is_one_line_at_once_and_never_gets_the_password_shown() {
    let dir = common::temp_dir("fleet-hostile");
    // A reply announced as 2 GB is refused at its header.
    let huge = answering(b"$2000000000\r\n");
    let started = Instant::now();
    let out = retry_in(&dir)
        .args([
            "--replay",
            &format!("redis://127.0.0.1:{huge}/jobs"),
            "--dry-run",
        ])
        .output()
        .unwrap();
    let line = usage_error_of(&out, "--replay");
    assert!(line.contains("longer than"), "{line}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // A server that quotes the password back, as Redis quotes an unknown command's arguments.
    let quoting =
        answering(b"-ERR unknown command 'AUTH', with args beginning with: 'hunter2-hunter2' \r\n");
    for args in [
        vec![
            "--replay".to_string(),
            format!("redis://:hunter2-hunter2@127.0.0.1:{quoting}/jobs"),
        ],
        vec![
            "--forget".into(),
            format!("redis://:hunter2-hunter2@127.0.0.1:{quoting}/jobs"),
            "all".into(),
        ],
    ] {
        let out = retry_in(&dir).args(&args).output().unwrap();
        let line = usage_error_of(&out, &args[0]);
        assert!(!line.contains("hunter2"), "{line}");
    }
    let out = retry_in(&dir)
        .env("RETRY_REDIS_PASSWORD", "hunter2-hunter2")
        .args([
            "--dead-letter",
            &format!("redis://127.0.0.1:{quoting}/jobs"),
            "-n",
            "1",
            "--",
            "false",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let log = stderr_of(&out);
    assert!(!log.contains("hunter2"), "{log}");
    assert!(log.contains("the run is kept in"), "{log}");
}

#[test]
fn two_replays_at_once_run_a_run_that_fails_again_once_between_them() {
    let Some(server) = Server::start("fleet-fails", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-fails");
    let url = server.url("jobs");
    // Each run's command takes 0.4 s while `slow` exists: while the two replays run.
    std::thread::scope(|s| {
        for k in 0..4 {
            let (dir, url) = (&dir, &url);
            s.spawn(move || {
                give_up(
                    dir,
                    url,
                    &format!("f{k}"),
                    "if test -e slow; then sleep 0.4; fi; exit 1",
                );
            });
        }
    });
    std::fs::remove_file(dir.join("marks")).unwrap();
    std::fs::write(dir.join("slow"), "").unwrap();
    // The second starts once the first has failed its first run again and runs its second:
    // each run fails again once between them.
    let mut first = std_in(&dir)
        .args(["--replay", &url, "-q"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(common::wait_until(Duration::from_secs(5), || marks(&dir)
        .len()
        >= 2));
    retry_in(&dir)
        .args(["--replay", &url, "-q"])
        .assert()
        .code(1);
    assert_eq!(wait_bounded(&mut first, common::STEP_LIMIT).code(), Some(1));
    let mut seen = marks(&dir);
    assert_eq!(seen.len(), 4, "{seen:?}");
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 4);
    // A replay after both runs each once more.
    std::fs::remove_file(dir.join("slow")).unwrap();
    retry_in(&dir)
        .args(["--replay", &url, "-q"])
        .assert()
        .code(1);
    assert_eq!(marks(&dir).len(), 8);
}

#[test]
fn a_prune_while_a_replay_runs_a_run_keeps_it_and_the_dry_run_lists_what_is_kept_locally() {
    let Some(server) = Server::start("fleet-prune-held", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-prune-held");
    let url = server.url("jobs");
    give_up(&dir, &url, "slow", "test -e go || exit 1; sleep 1.5");
    std::fs::write(dir.join("go"), "").unwrap();
    let mut replay = std_in(&dir)
        .args(["--replay", &url, "-q"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(common::wait_until(Duration::from_secs(5), || marks(&dir)
        .len()
        == 2));
    retry_in(&dir)
        .args(["--prune", &url, "--older-than", "0s"])
        .assert()
        .success()
        .stdout(format!(
            "pruned {url}: dropped 0 resolved, 0 forgotten and 0 pending that gave up before the limit; kept 1 pending\n"
        ));
    assert!(wait_bounded(&mut replay, common::STEP_LIMIT).success());
    let all = listed(&dir, &url, &["--all"]);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["state"], "resolved");
    // The replay that held it settled it, once: it ran when it gave up and when replayed.
    assert_eq!(marks(&dir).len(), 2, "{:?}", marks(&dir));
    // A run kept locally while Redis could not be reached is listed by the dry run.
    let down = format!(
        "redis://127.0.0.1:{}/jobs",
        common::redis_server::free_port()
    );
    give_up(&dir, &down, "kept", "exit 1");
    let unsent: Vec<_> = std::fs::read_dir(dir.join("state/retry/unsent"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let name = unsent[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let port_of_down = down.split(':').nth(2).unwrap().split('/').next().unwrap();
    let moved = unsent[0].with_file_name(name.replace(port_of_down, &server.port.to_string()));
    std::fs::rename(&unsent[0], &moved).unwrap();
    let runs = listed(&dir, &url, &[]);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["command"][2], "echo $RETRY_RUN_ID >> marks; exit 1");
    assert!(moved.exists(), "the dry run moved nothing");
}

#[test]
fn an_only_that_names_another_machines_run_says_so_and_a_password_in_any_url_is_warned_of() {
    let Some(server) = Server::start("fleet-only-host", &["--requirepass", "pw-pw-pw-pw"]) else {
        return;
    };
    let dir = common::temp_dir("fleet-only-host");
    let port = server.port;
    let url = format!("redis://:pw-pw-pw-pw@127.0.0.1:{port}/jobs");
    let out = retry_in(&dir)
        .args([
            "--dead-letter",
            &url,
            "--history",
            &url.replace("/jobs", "/ci"),
        ])
        .args(["-n", "1", "--", "false"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    for option in ["--dead-letter", "--history"] {
        assert!(
            log.contains(&format!("the Redis password in {option} can be read")),
            "{log}"
        );
    }
    assert!(!log.contains("pw-pw"), "{log}");
    let runs = listed(&dir, &url, &[]);
    let id = runs[0]["id"].as_str().unwrap().to_string();
    // The record as another machine's: the replay here names where it ran.
    cli(
        port,
        &[
            "-a",
            "pw-pw-pw-pw",
            "--no-auth-warning",
            "DEL",
            "retry:dead:{jobs}",
        ],
    );
    let record = format!(
        "{{\"event\":\"dead_letter\",\"id\":\"{id}\",\"ts\":\"2026-12-01T00:00:00.000Z\",\"label\":null,\"cwd\":\"/\",\"command\":[\"true\"],\"options\":[],\"exit_code\":1,\"reason\":\"tries\",\"tries\":1,\"duration_ms\":1}}"
    );
    cli(
        port,
        &[
            "-a",
            "pw-pw-pw-pw",
            "--no-auth-warning",
            "XADD",
            "retry:dead:{jobs}",
            "*",
            "id",
            &id,
            "host",
            "web-9",
            "record",
            &record,
        ],
    );
    let out = retry_in(&dir)
        .args(["--replay", &url, "--only", &id[..8]])
        .output()
        .unwrap();
    let line = usage_error_of(&out, "--only");
    assert!(
        line.contains("gave up on web-9") && line.contains("--any-host"),
        "{line}"
    );
    // The store's own options warn of it as a run's do.
    let forms: [&[&str]; 4] = [
        &["--replay", &url, "--dry-run"],
        &["--forget", &url, "all"],
        &["--prune", &url, "--older-than", "30d"],
        &["--stats", &url.replace("/jobs", "/ci")],
    ];
    for args in forms {
        let out = retry_in(&dir).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr_of(&out));
        let log = stderr_of(&out);
        let warning = format!("the Redis password in {} can be read", args[0]);
        assert_eq!(log.matches(&warning).count(), 1, "{log}");
        assert!(!log.contains("pw-pw"), "{log}");
    }
}

/// Gives up a run in `dir` while Redis cannot be reached, and puts the local file it was kept
/// in where the store `url` on `port` looks for it: its path.
fn kept_for(dir: &Path, url: &str, port: u16) -> std::path::PathBuf {
    let down_port = common::redis_server::free_port();
    let down = url.replace(&format!(":{port}/"), &format!(":{down_port}/"));
    give_up(dir, &down, "kept", "exit 1");
    let kept = dir.join(format!(
        "state/retry/unsent/127.0.0.1_{down_port}_jobs.jsonl"
    ));
    let moved = dir.join(format!("state/retry/unsent/127.0.0.1_{port}_jobs.jsonl"));
    std::fs::rename(&kept, &moved).unwrap();
    moved
}

#[test]
fn runs_kept_locally_in_a_file_that_cannot_be_read_are_warned_of_and_not_listed_silently() {
    use std::os::unix::fs::PermissionsExt;
    let Some(server) = Server::start("fleet-kept-damaged", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-kept-damaged");
    let url = server.url("jobs");
    let kept = kept_for(&dir, &url, server.port);
    let whole = std::fs::read(&kept).unwrap();
    let mut damaged = whole.clone();
    damaged.extend_from_slice(b"not a record\n");
    for (why, contents, mode) in [("line 2", &damaged, 0o600), ("mode 0666", &whole, 0o666)] {
        std::fs::write(&kept, contents).unwrap();
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(mode)).unwrap();
        // A run that gives up on Redis says that the runs kept here did not go along.
        let out = retry_in(&dir)
            .args(["--dead-letter", &url, "-q", "-n", "1", "--", "false"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let log = stderr_of(&out);
        let warning: Vec<&str> = log.lines().filter(|l| l.contains("warning")).collect();
        assert_eq!(warning.len(), 1, "{why}: {log}");
        assert!(
            warning[0].contains(&kept.display().to_string()) && warning[0].contains(why),
            "{why}: {log}"
        );
        // The listing refuses, as the replay does, rather than leave them out.
        let out = retry_in(&dir)
            .args(["--replay", &url, "--dry-run"])
            .output()
            .unwrap();
        let line = usage_error_of(&out, why);
        assert!(
            line.contains(&kept.display().to_string()) && line.contains(why),
            "{line}"
        );
    }
    assert_eq!(cli(server.port, &["XLEN", "retry:dead:{jobs}"]), ["2"]);
}

#[test]
#[ignore = "tens of megabytes, side by side with the rest too costly for cargo test: run with --ignored, as .ci/run does"]
fn records_too_large_for_a_page_are_listed_in_smaller_pages_and_one_too_large_is_refused() {
    let _big = common::one_big_at_a_time();
    let Some(server) = Server::start("fleet-large", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-large");
    let url = server.url("jobs");
    // 700 records of 100 KB: 70 MB, more than one reply of a page may hold.
    let word = "x".repeat(100_000);
    let commands: Vec<Vec<Vec<u8>>> = (0..700)
        .map(|k| {
            let id = format!("00000000-0000-0000-0000-{k:012}");
            let record = format!(
                "{{\"event\":\"dead_letter\",\"id\":\"{id}\",\"ts\":\"2026-12-01T00:00:00.000Z\",\"label\":null,\"cwd\":\"/\",\"command\":[\"echo\",\"{word}\"],\"options\":[],\"exit_code\":1,\"reason\":\"tries\",\"tries\":1,\"duration_ms\":1}}"
            );
            [
                "XADD",
                "retry:dead:{jobs}",
                "*",
                "id",
                &id,
                "host",
                "web-1",
                "record",
                &record,
            ]
            .iter()
            .map(|w| w.as_bytes().to_vec())
            .collect()
        })
        .collect();
    common::redis_server::pipe(server.port, &commands);
    // The last is listed: every page before it was read.
    let last = "00000000-0000-0000-0000-000000000699";
    let runs = listed(&dir, &url, &["--only", last]);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["id"], last);
    // A record that no page could hold is refused when it is added, as a file refuses it.
    let words = vec![word; 11];
    let out = retry_in(&dir)
        .args(["--dead-letter", &url, "-q", "-n", "1", "--", "false"])
        .args(&words)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let log = stderr_of(&out);
    assert!(log.contains("more than the 1 MiB"), "{log}");
    assert_eq!(cli(server.port, &["XLEN", "retry:dead:{jobs}"]), ["700"]);
}

#[test]
fn the_dead_letters_and_the_history_may_share_a_name_on_redis_but_not_a_file() {
    let Some(server) = Server::start("fleet-same-name", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-same-name");
    let url = server.url("ci");
    retry_in(&dir)
        .args(["--dead-letter", &url, "--history", &url, "-q", "-n", "1"])
        .args(["--", "false"])
        .assert()
        .code(1);
    assert_eq!(cli(server.port, &["XLEN", "retry:dead:{ci}"]), ["1"]);
    assert_eq!(cli(server.port, &["XLEN", "retry:history:{ci}"]), ["1"]);
    let out = retry_in(&dir)
        .args(["--replay", &url, "--history", &url, "-q", "-n", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(cli(server.port, &["XLEN", "retry:history:{ci}"]), ["2"]);
    let out = retry_in(&dir)
        .args([
            "--dead-letter",
            "f.jsonl",
            "--history",
            "./f.jsonl",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let line = usage_error_of(&out, "");
    assert!(line.contains("same file"), "{line}");
}

#[test]
fn an_entry_id_or_an_entry_that_quotes_the_password_is_withheld() {
    let dir = common::temp_dir("fleet-entry-password");
    let entry = |id: &str, record: &str| {
        format!(
            "*2\r\n${}\r\n{id}\r\n*6\r\n$2\r\nid\r\n$1\r\nx\r\n$4\r\nhost\r\n$1\r\nh\r\n$6\r\nrecord\r\n${}\r\n{record}\r\n",
            id.len(),
            record.len()
        )
    };
    // A whole page whose last id is not one, so that the next page would start after it; and
    // one entry whose record is damaged.
    let mut page = "*5000\r\n".to_string();
    for k in 0..4999 {
        page += &entry(&format!("1-{k}"), "{}");
    }
    page += &entry("hunter2-hunter2", "{}");
    // Its states, claims and attempts are asked for at once: three replies to one read.
    let damaged = format!("*1\r\n{}", entry("hunter2-hunter2-0", "not a record")).repeat(3);
    for answer in [page, damaged] {
        let port = answering_after(b"+OK\r\n", answer.into_bytes().leak());
        let out = retry_in(&dir)
            .args([
                "--replay",
                &format!("redis://:hunter2-hunter2@127.0.0.1:{port}/jobs"),
            ])
            .arg("--dry-run")
            .output()
            .unwrap();
        let line = usage_error_of(&out, "--replay");
        assert!(!line.contains("hunter2"), "{line}");
        assert!(line.contains("not shown"), "{line}");
    }
}

#[test]
fn a_connection_the_server_drops_while_a_run_runs_is_opened_again_and_the_run_resolved_once() {
    // Redis closes connections idle for a second, as a managed server's `timeout` does.
    let Some(server) = Server::start("fleet-idle", &["--timeout", "1"]) else {
        return;
    };
    let dir = common::temp_dir("fleet-idle");
    let url = server.url("jobs");
    give_up(&dir, &url, "idle", "test -e ok && exec sleep 2.5; exit 1");
    std::fs::write(dir.join("ok"), "").unwrap();
    let out = retry_in(&dir).args(["--replay", &url]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    retry_in(&dir).args(["--replay", &url]).assert().success();
    assert_eq!(marks(&dir).len(), 2, "given up once, replayed once");
    let all = listed(&dir, &url, &["--all"]);
    assert_eq!(all[0]["state"], "resolved", "{all:?}");
}

#[test]
fn a_forget_leaves_a_run_a_replay_holds_and_says_so() {
    let Some(server) = Server::start("fleet-forget-held", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-forget-held");
    let url = server.url("jobs");
    give_up(&dir, &url, "held", "test -e ok && exec sleep 1.5; exit 1");
    std::fs::write(dir.join("ok"), "").unwrap();
    let mut replay = std_in(&dir)
        .args(["--replay", &url])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(common::wait_until(Duration::from_secs(5), || marks(&dir)
        .len()
        == 2));
    let out = retry_in(&dir)
        .args(["--forget", &url, "all"])
        .output()
        .unwrap();
    let said = format!("{}{}", stdout_of(&out), stderr_of(&out));
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("forgot 0 runs"), "{said}");
    assert!(said.contains("being replayed"), "{said}");
    assert_eq!(
        wait_bounded(&mut replay, common::STEP_LIMIT).code(),
        Some(0)
    );
    let all = listed(&dir, &url, &["--all"]);
    assert_eq!(
        all[0]["state"], "resolved",
        "the replay settled it: {all:?}"
    );
}

#[test]
fn a_replay_stopped_past_its_lease_stops_its_try_and_settles_nothing_another_took() {
    let Some(server) = Server::start("fleet-stopped", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-stopped");
    let url = server.url("jobs");
    // The first replay's try runs 3 s; the second one's succeeds at once.
    give_up(
        &dir,
        &url,
        "stopped",
        "test -e first || { : > first; exit 1; }; test -e second && exit 0; : > second; exec sleep 3",
    );
    let leased = format!("{url}:lease=1s");
    let mut first = std_in(&dir)
        .args(["--replay", &leased, "-k", "100ms"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(common::wait_until(Duration::from_secs(5), || marks(&dir)
        .len()
        == 2));
    common::send(first.id(), nix::libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(1300));
    // Its lease lapsed: another replay takes the run, and resolves it.
    let out = retry_in(&dir).args(["--replay", &url]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(marks(&dir).len(), 3);
    let continued = Instant::now();
    common::send(first.id(), nix::libc::SIGCONT);
    let status = wait_bounded(&mut first, common::STEP_LIMIT);
    assert!(
        continued.elapsed() < Duration::from_millis(2500),
        "the try was stopped at once, not run to its end: {:?}",
        continued.elapsed()
    );
    let err = String::from_utf8_lossy(&first.wait_with_output().unwrap().stderr).into_owned();
    assert_ne!(status.code(), Some(0), "{err}");
    assert!(err.contains("the claim on this run is lost"), "{err}");
    let all = listed(&dir, &url, &["--all"]);
    assert_eq!(
        (all[0]["state"].as_str(), all[0]["attempts"].as_u64()),
        (Some("resolved"), Some(0)),
        "the stopped replay recorded nothing: {all:?}"
    );
}

/// A forget that comes while the replay of a run is stopped past its lease (nobody took the
/// run since, so the lease is still the replay's to renew): the run is forgotten, and the
/// replay, continued, must not report it resolved nor count it, since the store says it was
/// forgotten.
#[test]
fn a_run_forgotten_while_its_replay_was_stopped_past_its_lease_is_not_reported_resolved() {
    let Some(server) = Server::start("fleet-forget-lapsed", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-forget-lapsed");
    let url = server.url("jobs");
    give_up(&dir, &url, "slow", "test -e go || exit 1; sleep 1");
    let id = marks(&dir)[0].clone();
    std::fs::write(dir.join("go"), "").unwrap();
    let log = dir.join("replay.jsonl");
    let mut replay = std_in(&dir)
        .args([
            "--replay",
            &format!("{url}:lease=300ms"),
            "--log-format",
            "json",
        ])
        .arg("--log-file")
        .arg(&log)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(common::wait_until(common::STEP_LIMIT, || marks(&dir).len() == 2));
    common::send(replay.id(), nix::libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(700));
    let forgot = retry_in(&dir)
        .args(["--forget", &url, &id, "--log-format", "json"])
        .output()
        .unwrap();
    common::send(replay.id(), nix::libc::SIGCONT);
    let _ = wait_bounded(&mut replay, common::STEP_LIMIT);
    let forgot = json_lines(&stdout_of(&forgot));
    let all = listed(&dir, &url, &["--all"]);
    let logged = common::json_file(&log);
    let resolved: Vec<&Value> = logged
        .iter()
        .filter(|v| v["event"] == "replayed" && v["result"] == "resolved")
        .collect();
    let end: Vec<&Value> = logged
        .iter()
        .filter(|v| v["event"] == "replay_end")
        .collect();
    if forgot.first().is_some_and(|f| f["forgotten"] == 1) {
        assert_eq!(all[0]["state"], "forgotten", "{all:?}");
        assert!(
            resolved.is_empty(),
            "the replay reported it resolved: {logged:?}"
        );
        assert_eq!(end[0]["resolved"], 0, "{logged:?}");
    } else {
        // The forget found the lease live (a loaded machine): the replay settles the run.
        assert_eq!(all[0]["state"], "resolved", "{all:?}");
    }
}

/// A proxy to the server on 127.0.0.1:`port` that, once, lets the command that marks a run
/// resolved reach the server and then drops the connection before its reply is passed on, as a
/// `CLIENT KILL` or a load balancer may at that moment: its port.
fn dropping_the_reply_of_a_resolve(port: u16) -> u16 {
    dropping_a_reply(
        port,
        b"HSETNX', KEYS[2], id, 'resolved'",
        b"\r\n$8\r\nresolved\r\n",
    )
}

/// A proxy to the server on 127.0.0.1:`port` that, once, lets the command holding `marker` and
/// ending with `end` reach the server, and drops the connection before its reply is passed on.
fn dropping_a_reply(port: u16, marker: &'static [u8], end: &'static [u8]) -> u16 {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy = listener.local_addr().unwrap().port();
    let armed = Arc::new(AtomicBool::new(true));
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { return };
            let Ok(mut server) = TcpStream::connect(("127.0.0.1", port)) else {
                return;
            };
            let mute = Arc::new(AtomicBool::new(false));
            let (mut from_server, mut to_client) =
                (server.try_clone().unwrap(), client.try_clone().unwrap());
            let quiet = mute.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while let Ok(n @ 1..) = from_server.read(&mut buf) {
                    if quiet.load(Ordering::SeqCst) || to_client.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
            let armed = armed.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                let mut seen: Vec<u8> = Vec::new();
                while let Ok(n @ 1..) = client.read(&mut buf) {
                    seen.extend_from_slice(&buf[..n]);
                    let resolve =
                        seen.windows(marker.len()).any(|w| w == marker) && seen.ends_with(end);
                    if resolve && armed.swap(false, Ordering::SeqCst) {
                        mute.store(true, Ordering::SeqCst);
                        let _ = server.write_all(&buf[..n]);
                        std::thread::sleep(Duration::from_millis(300));
                        let _ = client.shutdown(Shutdown::Both);
                        let _ = server.shutdown(Shutdown::Both);
                        return;
                    }
                    if seen.ends_with(b"\r\n") {
                        seen.clear();
                    }
                    if server.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    proxy
}

/// The connection drops after the server marked a run resolved and before its answer came
/// back: the replay sends the request again, and the answer must say it is done, not that the
/// claim was lost (the replay would stop there, and leave the next runs unreplayed).
#[test]
fn a_resolve_whose_answer_is_lost_with_the_connection_is_sent_again_and_the_replay_goes_on() {
    let Some(server) = Server::start("fleet-resolve-dropped", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-resolve-dropped");
    let proxy = dropping_the_reply_of_a_resolve(server.port);
    let url = format!("redis://127.0.0.1:{proxy}/jobs");
    give_up(&dir, &url, "one", "test -e go || exit 1");
    give_up(&dir, &url, "two", "test -e go || exit 1");
    std::fs::write(dir.join("go"), "").unwrap();
    let out = retry_in(&dir).args(["--replay", &url]).output().unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(log.contains("2 resolved"), "{log}");
    let all = listed(&dir, &server.url("jobs"), &["--all"]);
    assert!(all.iter().all(|r| r["state"] == "resolved"), "{all:?}");
    assert_eq!(marks(&dir).len(), 4, "each ran once when replayed");
}

/// A host name may hold a space (the kernel takes any byte but NUL): a replay on such a
/// host still holds its leases, renews and settles them, and others see them held.
#[test]
fn a_replay_on_a_host_whose_name_holds_a_space_holds_its_leases() {
    let uts = common::have_package(
        "a_replay_on_a_host_whose_name_holds_a_space",
        "root, for a UTS namespace (unshare -u) of another host name",
        "root",
        common::euid() == 0
            && std::process::Command::new("unshare")
                .args(["-u", "true"])
                .status()
                .is_ok_and(|s| s.success()),
    );
    if !uts {
        return;
    }
    let Some(server) = Server::start("fleet-host-space", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-host-space");
    let url = server.url("jobs");
    give_up(&dir, &url, "slow", "test -e go || exit 1; sleep 0.8");
    std::fs::write(dir.join("go"), "").unwrap();
    let me = assert_cmd::cargo::cargo_bin("retry").display().to_string();
    let mut replay = std::process::Command::new("unshare")
        .args([
            "-u",
            "sh",
            "-c",
            "printf 'web 3' > /proc/sys/kernel/hostname && exec \"$0\" \"$@\"",
            &me,
        ])
        .current_dir(&dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .args(["--replay", &url, "--any-host", "-q"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(common::wait_until(common::STEP_LIMIT, || marks(&dir).len() == 2));
    // While it runs, the run is held: no other replay takes it, no forget forgets it.
    let out = retry_in(&dir)
        .args(["--replay", &url, "--any-host", "-q"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let forgot = retry_in(&dir)
        .args(["--forget", &url, "all"])
        .output()
        .unwrap();
    assert!(
        stdout_of(&forgot).contains("forgot 0 runs"),
        "{}",
        stdout_of(&forgot)
    );
    let status = wait_bounded(&mut replay, common::STEP_LIMIT);
    let mut err = String::new();
    use std::io::Read;
    let _ = replay.stderr.take().unwrap().read_to_string(&mut err);
    assert!(status.success(), "{err}");
    assert_eq!(marks(&dir).len(), 2, "it ran once when replayed");
    let all = listed(&dir, &url, &["--all"]);
    assert_eq!(all[0]["state"], "resolved", "{all:?}");
}

/// The connection drops after the server forgot a run and before its answer came back: the
/// forget, sent again, still says it forgot the run.
#[test]
fn a_forget_whose_answer_is_lost_with_the_connection_still_says_what_it_forgot() {
    let Some(server) = Server::start("fleet-forget-dropped", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-forget-dropped");
    let url = server.url("jobs");
    give_up(&dir, &url, "one", "exit 1");
    let id = marks(&dir)[0].clone();
    let proxy = dropping_a_reply(server.port, b"'forgotten'", b"\r\n");
    let through = format!("redis://127.0.0.1:{proxy}/jobs");
    let out = retry_in(&dir)
        .args(["--forget", &through, &id])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        stdout_of(&out),
        format!("forgot 1 run of {through}; 0 still pending\n")
    );
    let all = listed(&dir, &url, &["--all"]);
    assert_eq!(all[0]["state"], "forgotten", "{all:?}");
}

/// The connection drops after the server ran a prune's batch and before its answer came back:
/// the prune sends it again, and its summary still counts every run it dropped.
#[test]
fn a_prune_whose_answer_is_lost_with_the_connection_counts_what_it_dropped() {
    let Some(server) = Server::start("fleet-prune-dropped", &[]) else {
        return;
    };
    let dir = common::temp_dir("fleet-prune-dropped");
    let direct = server.url("jobs");
    for _ in 0..2 {
        give_up(&dir, &direct, "gone", "exit 1");
    }
    let out = retry_in(&dir)
        .args(["--forget", &direct, "all"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let proxy = dropping_a_reply(server.port, b"HSET', KEYS[7], id", b"\r\n");
    let url = format!("redis://127.0.0.1:{proxy}/jobs");
    let out = retry_in(&dir)
        .args(["--prune", &url, "--older-than", "1d"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stdout_of(&out).contains("dropped 0 resolved, 2 forgotten"),
        "{}{}",
        stdout_of(&out),
        stderr_of(&out)
    );
    assert_eq!(cli(server.port, &["XLEN", "retry:dead:{jobs}"]), ["0"]);
}
