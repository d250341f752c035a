//! Process trees (docs/processes.md#process-group-and-terminal, docs/processes.md#timeouts,
//! docs/processes.md#leftover-processes): a timeout or a failed try stops every process the try
//! started, and nothing is left behind.

use crate::common;

use std::time::{Duration, Instant};

use common::{alive, pids_in, retry, stderr_of};

#[test]
fn a_timeout_stops_every_process_of_the_try() {
    let dir = common::temp_dir("tree");
    let pids = dir.join("pids");
    let script = format!(
        "echo $$ >> '{p}'; sleep 300 & echo $! >> '{p}'; sleep 300 & echo $! >> '{p}'; wait",
        p = pids.display()
    );
    let started = Instant::now();
    let out = retry()
        .args([
            "-t", "500ms", "-n", "2", "-d", "0", "--", "sh", "-c", &script,
        ])
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(124), "{log}");
    assert!(took >= Duration::from_millis(1000), "{took:?}");
    assert!(took < Duration::from_secs(8), "{took:?}");
    let pids = pids_in(&pids);
    assert_eq!(pids.len(), 6, "two tries of three processes");
    let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(
        left.is_empty(),
        "still running when retry returned: {left:?}"
    );
    assert_eq!(log.matches("timed out").count(), 2, "{log}");
}

#[test]
fn a_command_that_ignores_term_is_killed_after_the_grace_period() {
    let dir = common::temp_dir("ignore-term");
    let pids = dir.join("pids");
    let script = format!(
        "trap '' TERM; echo $$ >> '{p}'; while :; do sleep 0.05; done",
        p = pids.display()
    );
    let started = Instant::now();
    let out = retry()
        .args([
            "-t", "300ms", "-k", "300ms", "-n", "1", "--", "sh", "-c", &script,
        ])
        .output()
        .unwrap();
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(124), "{}", stderr_of(&out));
    assert!(took >= Duration::from_millis(600), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let pids = pids_in(&pids);
    assert_eq!(pids.len(), 1);
    assert!(!alive(pids[0]));
}

#[test]
fn a_grandchild_that_ignores_term_dies_after_its_leader() {
    let dir = common::temp_dir("grandchild");
    let pids = dir.join("pids");
    // The leader dies of TERM at once; the grandchild ignores it (the ignored disposition
    // survives exec) and must be killed with SIGKILL after the grace period.
    let script = format!(
        "sh -c \"trap '' TERM; echo \\$\\$ >> '{p}'; exec sleep 300\" & echo $$ >> '{p}'; wait",
        p = pids.display()
    );
    let started = Instant::now();
    let out = retry()
        .args([
            "-t", "300ms", "-k", "400ms", "-n", "1", "--", "sh", "-c", &script,
        ])
        .output()
        .unwrap();
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(124), "{}", stderr_of(&out));
    assert!(took >= Duration::from_millis(700), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let pids = pids_in(&pids);
    assert_eq!(pids.len(), 2, "{pids:?}");
    let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(left.is_empty(), "still running: {left:?}");
}

#[test]
fn what_a_failed_try_leaves_running_is_stopped_before_the_next_try() {
    let dir = common::temp_dir("leftover");
    let bg = dir.join("bg");
    let result = dir.join("result");
    let script = format!(
        "if [ $RETRY_ATTEMPT = 1 ]; then sleep 300 & echo $! > '{bg}'; exit 1; fi
         if kill -0 $(cat '{bg}') 2>/dev/null; then echo alive > '{r}'; else echo gone > '{r}'; fi",
        bg = bg.display(),
        r = result.display()
    );
    let out = retry()
        .args(["-n", "2", "-d", "0", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert_eq!(
        std::fs::read_to_string(&result).unwrap().trim(),
        "gone",
        "{log}"
    );
    assert!(
        log.contains("try 1/2 left 1 process running; stopped it (SIGTERM)"),
        "{log}"
    );
}

#[test]
fn after_a_successful_try_nothing_is_killed() {
    let dir = common::temp_dir("success-bg");
    let bg = dir.join("bg");
    let script = format!(
        "sleep 300 >/dev/null 2>&1 & echo $! > '{}'; exit 0",
        bg.display()
    );
    let out = retry().args(["--", "sh", "-c", &script]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let pid = pids_in(&bg)[0];
    let was_alive = alive(pid);
    unsafe { nix::libc::kill(pid, nix::libc::SIGKILL) };
    assert!(
        was_alive,
        "a successful try's background process was killed"
    );
}

#[test]
fn foreground_keeps_the_command_in_retrys_group_and_still_times_it_out() {
    let out = retry()
        .args([
            "--foreground",
            "-t",
            "200ms",
            "-k",
            "200ms",
            "-n",
            "1",
            "--",
            "sh",
            "-c",
            "[ $(ps -o pgid= -p $$) = $(ps -o pgid= -p $PPID) ] && exec sleep 300",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(124), "{}", stderr_of(&out));
    let out = retry()
        .args(["-n", "1", "--", "sh", "-c", "[ $(ps -o pgid= -p $$) = $$ ]"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "each try leads a process group of its own"
    );
}

#[test]
fn leftovers_that_ignore_the_signal_are_killed_after_the_grace_period() {
    let dir = common::temp_dir("leftover-kill");
    let bg = dir.join("bg");
    // The leader exits only once its background process ignores TERM.
    let script = format!(
        "sh -c \"trap '' TERM; echo \\$\\$ > '{b}'; exec sleep 300\" >/dev/null 2>&1 &
         while [ ! -s '{b}' ]; do sleep 0.01; done; exit 1",
        b = bg.display()
    );
    let started = Instant::now();
    let out = retry()
        .args(["-n", "1", "-k", "300ms", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(
        log.contains("left 1 process running; stopped it (SIGTERM, then SIGKILL)"),
        "{log}"
    );
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(!alive(pids_in(&bg)[0]));
}
