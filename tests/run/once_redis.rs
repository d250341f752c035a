//! `--once redis://…/KEY` (docs/processes.md#once-only) against a real `redis-server`: twenty
//! runs at once over four hosts run the command exactly once, a run that gives up lets go of
//! the key and the next one runs, a key done runs nothing and names the run that did it, kept
//! for `--once-for` on the server's clock, and another command with the key is 125.

use std::path::Path;
use std::process::{Child, Stdio};

use crate::common::redis_server::{Server, cli};
use crate::common::*;

/// The job of the tests: it appends its host and run id to `ran`, and fails unless `ok` is
/// there.
const JOB: &str = "echo $(hostname) $RETRY_RUN_ID >> ran; test -e ok";

fn ran(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("ran"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// One run of the job under the key `url`, in `dir`.
fn one_run(url: &str, dir: &Path, command: &[&str]) -> std::process::Output {
    output_bounded(
        retry_std()
            .current_dir(dir)
            .args(["-n", "1", "--once", url, "--"])
            .args(command)
            .stdin(Stdio::null()),
        TEST_LIMIT,
    )
}

#[test]
fn twenty_runs_at_once_over_four_hosts_run_the_command_exactly_once() {
    let Some(server) = Server::start("once-redis-twenty", &[]) else {
        return;
    };
    let url = server.url("twenty");
    let dir = temp_dir("once-redis-twenty");
    std::fs::write(dir.join("ok"), "").unwrap();
    let hosts = other_hosts("twenty_runs_at_once_over_four_hosts");
    let job = format!("{JOB}; sleep 0.2");
    let mut runs: Vec<Child> = (0..20)
        .map(|k| {
            on_host(hosts && k % 4 != 0, &format!("host-{}", k % 4))
                .current_dir(&dir)
                .args(["-n", "1", "--once", &url, "--", "sh", "-c", &job])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start a run")
        })
        .collect();
    let (mut zero, mut locked) = (0, 0);
    for run in &mut runs {
        match wait_bounded(run, TEST_LIMIT).code() {
            Some(0) => zero += 1,
            Some(75) => locked += 1,
            other => panic!("a run ended with {other:?}"),
        }
    }
    assert_eq!(zero + locked, 20);
    assert_eq!(ran(&dir).len(), 1, "{:?}", ran(&dir));
    // Every run after this one finds the key done, on any host.
    let after = output_bounded(
        on_host(hosts, "host-9")
            .current_dir(&dir)
            .args(["-n", "1", "--once", &url, "--", "sh", "-c", &job]),
        TEST_LIMIT,
    );
    let log = stderr_of(&after);
    assert_eq!(after.status.code(), Some(0), "{log}");
    let by = ran(&dir).remove(0);
    let (host, id) = by.split_once(' ').unwrap();
    assert!(
        log.contains(&format!("on {host} by run {id}")),
        "{log}\n{by}"
    );
    assert_eq!(ran(&dir).len(), 1);
}

#[test]
fn a_give_up_lets_go_of_the_key_and_a_key_done_is_kept_for_once_for() {
    let Some(server) = Server::start("once-redis-give-up", &[]) else {
        return;
    };
    let url = server.url("nightly");
    let dir = temp_dir("once-redis-give-up");
    let job = ["sh", "-c", JOB];
    let failed = one_run(&url, &dir, &job);
    assert_eq!(failed.status.code(), Some(1), "{}", stderr_of(&failed));
    std::fs::write(dir.join("ok"), "").unwrap();
    let next = output_bounded(
        retry_std()
            .current_dir(&dir)
            .args(["-n", "1", "--once", &url, "--once-for", "1h", "--"])
            .args(job)
            .stdin(Stdio::null()),
        TEST_LIMIT,
    );
    assert_eq!(next.status.code(), Some(0), "{}", stderr_of(&next));
    assert_eq!(ran(&dir).len(), 2, "the run after a give-up did not run");
    let done = one_run(&url, &dir, &job);
    assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
    assert!(stderr_of(&done).contains("was done at"), "{done:?}");
    assert_eq!(ran(&dir).len(), 2, "a key done ran again");
    // Kept done for --once-for, by the server's clock.
    let ttl: i64 = cli(server.port, &["PTTL", "retry:once:{nightly}:done"])[0]
        .parse()
        .unwrap();
    assert!(ttl > 3_500_000 && ttl <= 3_600_000, "{ttl}");
    // Another command with the key: a usage error, one line naming it.
    let other = one_run(&url, &dir, &["touch", "other"]);
    let log = stderr_of(&other);
    assert_eq!(other.status.code(), Some(125), "{log}");
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.contains("--once nightly"), "{log}");
    assert!(!dir.join("other").exists());
    // The dry run says the same, and done before for the key's own command.
    let dry = |words: &[&str]| {
        output_bounded(
            retry_std()
                .current_dir(&dir)
                .args(["--dry-run", "-n", "1", "--once", &url, "--"])
                .args(words)
                .stdin(Stdio::null()),
            TEST_LIMIT,
        )
    };
    let plan = dry(&["touch", "other"]);
    assert_eq!(plan.status.code(), Some(125), "{}", stdout_of(&plan));
    assert_eq!(stderr_of(&plan), log);
    let plan = dry(&job);
    assert_eq!(plan.status.code(), Some(0), "{}", stderr_of(&plan));
    assert!(
        stdout_of(&plan).contains("(done_before)"),
        "{}",
        stdout_of(&plan)
    );
}
