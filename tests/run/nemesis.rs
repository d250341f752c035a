//! Exactly once under faults (docs/dead-letters.md#what-is-promised-under-faults): the nemesis
//! test of `tests/common/nemesis.rs` on a few fixed seeds, on a fleet's Redis and on a file; and
//! that of `tests/common/nemesis_lock.rs`, of `--lock redis://…` and its fencing tokens.
//! `cargo bench --bench nemesis` runs hundreds of schedules. To run one seed again:
//! `RETRY_NEMESIS_SEED=S cargo test --test run nemesis::`.

use crate::common;
use common::nemesis::{Plan, Store, run};
use common::nemesis_lock::{LockPlan, run_lock};

fn seeds(fixed: &[u64]) -> Vec<u64> {
    match std::env::var("RETRY_NEMESIS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seed) => vec![seed],
        None => fixed.to_vec(),
    }
}

fn schedules(store: Store, fixed: &[u64]) {
    let retry = assert_cmd::cargo::cargo_bin("retry");
    for seed in seeds(fixed) {
        // Smaller than the bench's, to keep the suite quick and the machine unloaded.
        let plan = Plan {
            before: 6,
            replays: 2,
            span: std::time::Duration::from_millis(1200),
            lease: std::time::Duration::from_millis(600),
            ..Plan::new(seed, store)
        };
        let Some(report) = run(&plan, &retry) else {
            return;
        };
        assert!(
            report.violations.is_empty(),
            "seed {seed} ({store:?}; faults {:?}; {} runs, {} tries): {} violations:\n{}",
            report.faults,
            report.runs,
            report.tries,
            report.violations.len(),
            report.violations.join("\n")
        );
        assert!(report.runs > 0, "seed {seed}: no run gave up");
        if std::env::var_os("RETRY_NEMESIS_SHOW").is_some() {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "seed {seed} {store:?}: {} runs, {} tries, faults {:?}",
                report.runs,
                report.tries,
                report.faults
            );
        }
    }
}

#[test]
#[ignore = "runs under faults at random, a soak too costly for cargo test: run with --ignored, as .ci/run does"]
fn replays_forgets_and_prunes_on_a_fleets_redis_under_faults_run_each_run_once_at_a_time() {
    schedules(Store::Redis, &[1]);
}

#[test]
#[ignore = "runs under faults at random, a soak too costly for cargo test: run with --ignored, as .ci/run does"]
fn replays_and_prunes_on_a_file_killed_at_random_run_each_run_once_at_a_time() {
    schedules(Store::File, &[1]);
}

#[test]
#[ignore = "18 runs of a lease under faults load both cores for 3 s: run with --ignored, as .ci/run does"]
fn runs_of_a_fleets_lock_under_faults_overlap_only_when_one_lost_it_and_fencing_holds() {
    let retry = assert_cmd::cargo::cargo_bin("retry");
    // Seed 5 applies a holder stopped past its lease and one killed, the server restarted
    // empty and from its snapshot, paused, its connections killed, and an idle timeout.
    for seed in seeds(&[5]) {
        let Some(report) = run_lock(&LockPlan::new(seed), &retry) else {
            return;
        };
        assert!(
            report.violations.is_empty(),
            "seed {seed} (--lock; faults {:?}; {} runs, {} tries): {} violations:\n{}",
            report.faults,
            report.runs,
            report.tries,
            report.violations.len(),
            report.violations.join("\n")
        );
        assert!(report.tries > 0, "seed {seed}: no try ran");
        if std::env::var_os("RETRY_NEMESIS_SHOW").is_some() {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "seed {seed} --lock: {} runs, {} tries, faults {:?}",
                report.runs,
                report.tries,
                report.faults
            );
        }
    }
}

/// Found by the nemesis (seed 1002 on a file, and others): a replay of a file killed with
/// SIGKILL left its try running; the next replay, the hold having ended with the killed one,
/// ran the same run beside it.
#[test]
fn a_replay_of_a_file_killed_midway_leaves_no_try_of_it_running() {
    use std::time::Duration;
    let dir = common::temp_dir("file-replay-kill");
    let file = dir.join("dead.jsonl");
    let file = file.to_str().unwrap();
    common::retry()
        .current_dir(&dir)
        .args(["--dead-letter", file, "-n", "1", "--"])
        .args([
            "sh",
            "-c",
            "test -e first || { : > first; exit 1; }; echo $$ > try.pid; exec sleep 5",
        ])
        .assert()
        .code(1);
    let mut replay = common::retry_std()
        .current_dir(&dir)
        .args(["--replay", file])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid_file = dir.join("try.pid");
    assert!(common::wait_until(common::STEP_LIMIT, || {
        std::fs::read_to_string(&pid_file).is_ok_and(|p| p.ends_with('\n'))
    }));
    // The watchdog learns the try's group as soon as it started: give retry that moment on a
    // loaded machine.
    std::thread::sleep(Duration::from_millis(100));
    common::send(replay.id(), nix::libc::SIGKILL);
    let _ = replay.wait();
    if let Err(pid) = common::gone_within(&pid_file, Duration::from_secs(2)) {
        panic!("the killed replay's try {pid} is still running");
    }
}
