//! A fleet's Redis watched by Sentinel (docs/redis.md#sentinel): `redis+sentinel://` URLs reach
//! the master the sentinels name, for every option that takes a URL; a sentinel
//! that is down is passed over; a master no sentinel knows is one clear line; and, in a test
//! that `.ci/run` runs (`cargo test --test run -- --ignored`), a failover while runs share a
//! quota and give up to a stream is followed to the new master.

use crate::common;
use crate::common::every_option::every_option;
use crate::common::redis_server::{cli, free_port, in_step};
use crate::common::sentinel::SentinelSet;

use std::path::Path;
use std::process::Output;

use common::{stderr_of, temp_dir};

fn run(dir: &Path, args: &[&str]) -> Output {
    common::retry()
        .current_dir(dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_RUNTIME_DIR", dir)
        .env_remove("RETRY_REDIS_PASSWORD")
        .env_remove("RETRY_REDIS_USER")
        .timeout(common::STEP_LIMIT)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn every_option_reaches_the_master_the_sentinels_name() {
    let Some(set) = SentinelSet::start("reach", true) else {
        return;
    };
    let dir = common::runtime_dir("sentinel-reach");
    // The first sentinel named is down: the next ones are asked.
    let down = free_port();
    let url = set.url("jobs").replacen(
        "redis+sentinel://",
        &format!("redis+sentinel://127.0.0.1:{down},"),
        1,
    );
    let quota = format!("{url}:ratio=0,floor=0,cap=5");
    let out = run(
        &dir,
        &["-v", "-n", "2", "-d", "0", "--quota", &quota, "--", "false"],
    );
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(!log.contains("warning"), "{log}");
    assert!(log.contains("retry, 4.00 tokens left"), "{log}");
    assert_eq!(cli(set.master.port, &["EXISTS", "retry:quota:jobs"]), ["1"]);

    let out = run(&dir, &["--dead-letter", &url, "-n", "1", "--", "false"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(!stderr_of(&out).contains("warning"), "{}", stderr_of(&out));
    assert_eq!(cli(set.master.port, &["XLEN", "retry:dead:{jobs}"]), ["1"]);
    let out = run(&dir, &["--stats", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // Every option on a store of its own, through the same sentinels.
    let every = url.replace("/mymaster/jobs", "/mymaster/every");
    every_option(&dir, &every, &|args| run(&dir, args));
    // The master the sentinels name holds it, beside its replica.
    let replica = set.replica.as_ref().unwrap().port;
    assert_eq!(cli(replica, &["ROLE"])[0], "slave");
    assert_eq!(
        cli(set.master.port, &["EXISTS", "retry:quota:every"]),
        ["1"]
    );
}

#[test]
fn a_master_no_sentinel_knows_is_one_line_naming_it() {
    let Some(set) = SentinelSet::start("unknown", false) else {
        return;
    };
    let dir = temp_dir("sentinel-unknown");
    let url = set.url("jobs").replace("/mymaster/", "/nosuchmaster/");
    let out = run(&dir, &["--stats", &url]);
    let err = stderr_of(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("master 'nosuchmaster'") && err.contains("no sentinel knows such a master"),
        "{err}"
    );
    // A run warns once and goes on with the quota on this machine.
    let quota = format!("{url}:cap=5");
    let out = run(
        &dir,
        &["-n", "2", "-d", "0", "--quota", &quota, "--", "false"],
    );
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.matches("no sentinel knows such a master").count(),
        1,
        "{err}"
    );
}

/// A failover that cannot fit in `cargo test`'s time: the sentinels take a few seconds to
/// promote the replica. `.ci/run` runs it (`cargo test --test run -- --ignored`).
#[test]
#[ignore = "a Sentinel failover takes seconds: run with --ignored, as .ci/run does"]
fn a_failover_while_runs_give_up_and_share_a_quota_loses_no_record_and_adds_none_twice() {
    let Some(mut set) = SentinelSet::start("failover", true) else {
        return;
    };
    let dir = common::runtime_dir("sentinel-failover");
    let url = set.url("jobs");
    let quota = format!("{url}:ratio=0,floor=0,cap=1000");
    let give_up = |n: usize| {
        std::thread::scope(|s| {
            for _ in 0..n {
                s.spawn(|| {
                    let out = run(
                        &dir,
                        &[
                            "-n",
                            "2",
                            "-d",
                            "0",
                            "--quota",
                            &quota,
                            "--dead-letter",
                            &url,
                            "--",
                            "false",
                        ],
                    );
                    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
                });
            }
        });
    };
    give_up(10);
    let old = set.master.port;
    assert_eq!(cli(old, &["XLEN", "retry:dead:{jobs}"]), ["10"]);
    // What the master holds has reached the replica before the master dies.
    let replica = set.replica.as_ref().unwrap().port;
    assert!(
        in_step(old, replica),
        "the replica never had what the master holds"
    );
    let _ = set.master.child.kill();
    let _ = set.master.child.wait();
    // Runs while the sentinels notice and elect: each gives up to the stream or, Redis out of
    // reach, to the file kept on this machine.
    give_up(20);
    let new = set.replica.as_ref().unwrap().port;
    assert!(
        common::wait_until(std::time::Duration::from_secs(30), || set.master_port()
            == Some(new)),
        "the sentinels never named the replica the master"
    );
    // Runs after it reach the new master, and the first of them moves the kept records there.
    give_up(10);
    let out = run(
        &dir,
        &[
            "--replay",
            &url,
            "--dry-run",
            "--log-format",
            "json",
            "--all",
        ],
    );
    let listing = common::stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let ids: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.split("\"id\":\"").nth(1)?.split('"').next())
        .collect();
    let unique: std::collections::BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(ids.len(), 40, "every run that gave up, once: {listing}");
    assert_eq!(unique.len(), 40, "none twice: {listing}");
    // The quota lives on the new master: its 40 runs each took one token at most.
    let tokens = cli(new, &["HGET", "retry:quota:jobs", "tokens"]);
    let tokens: f64 = tokens[0].parse().unwrap();
    assert!((960.0..1000.0).contains(&tokens), "{tokens}");
}
