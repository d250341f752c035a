//! Signals sent to `retry` (docs/processes.md#signals-received-by-retry): forwarded to the try's
//! group, no further try, and `retry` dies of the same signal.

use crate::common;

use std::fs::File;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{alive, pids_in, retry_std, send, wait_bounded, wait_for_lines, wait_until};

/// Starts retry on `script` with its log in `dir/log`.
fn start(dir: &std::path::Path, args: &[&str], script: &str) -> std::process::Child {
    retry_std()
        .args(args)
        .args(["--", "sh", "-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(dir.join("log")).unwrap())
        .spawn()
        .expect("spawn retry")
}

fn log(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("log")).unwrap_or_default()
}

fn wait_for_log(dir: &std::path::Path, needle: &str) {
    assert!(
        wait_until(common::STEP_LIMIT, || log(dir).contains(needle)),
        "log never said {needle:?}: {}",
        log(dir)
    );
}

fn a_signal_during_a_try_is_forwarded_and_retry_dies_of_it(signal: i32, name: &str) {
    let dir = common::temp_dir(&format!("sig-{name}"));
    let pids = dir.join("pids");
    let got = dir.join("got");
    let script = format!(
        "trap 'echo {name} >> \"{g}\"; exit 3' {name}; echo $$ >> '{p}'; sleep 300 & echo $! >> '{p}'; wait",
        g = got.display(),
        p = pids.display()
    );
    // Background jobs of a non-interactive shell ignore INT and QUIT, so the sleep may outlive
    // its leader until SIGKILL after the grace period.
    let mut child = start(&dir, &["-n", "3", "-d", "0", "-k", "500ms"], &script);
    wait_for_lines(&pids, 2, common::STEP_LIMIT);
    send(child.id(), signal);
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    assert_eq!(
        status.signal(),
        Some(signal),
        "{name}: {status:?}\n{}",
        log(&dir)
    );
    assert_eq!(
        std::fs::read_to_string(&got).unwrap_or_default().trim(),
        name,
        "the try's leader received {name}"
    );
    let pids = pids_in(&pids);
    assert_eq!(pids.len(), 2, "no further try started: {pids:?}");
    let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(left.is_empty(), "left running: {left:?}");
    let text = log(&dir);
    assert!(
        text.contains(&format!("received SIG{name} during try 1/3")),
        "{text}"
    );
}

#[test]
fn sigterm_during_a_try_stops_the_tree_and_retry_dies_of_sigterm() {
    a_signal_during_a_try_is_forwarded_and_retry_dies_of_it(nix::libc::SIGTERM, "TERM");
}

#[test]
fn sigint_during_a_try_stops_the_tree_and_retry_dies_of_sigint() {
    a_signal_during_a_try_is_forwarded_and_retry_dies_of_it(nix::libc::SIGINT, "INT");
}

#[test]
fn sighup_and_sigquit_are_forwarded_too() {
    a_signal_during_a_try_is_forwarded_and_retry_dies_of_it(nix::libc::SIGHUP, "HUP");
    a_signal_during_a_try_is_forwarded_and_retry_dies_of_it(nix::libc::SIGQUIT, "QUIT");
}

#[test]
fn sigterm_during_a_wait_ends_it_at_once() {
    let dir = common::temp_dir("sig-wait");
    let pids = dir.join("pids");
    let script = format!("echo $$ >> '{}'; exit 1", pids.display());
    let mut child = start(&dir, &["-n", "3", "-d", "60s", "-j", "none"], &script);
    wait_for_log(&dir, "next try in 1m");
    let sent = Instant::now();
    send(child.id(), nix::libc::SIGTERM);
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(status.signal(), Some(nix::libc::SIGTERM));
    assert_eq!(pids_in(&pids).len(), 1, "no further try");
    assert!(
        log(&dir).contains("received SIGTERM during the wait after try 1/3"),
        "{}",
        log(&dir)
    );
}

#[test]
fn a_try_that_ignores_the_signal_is_killed_after_the_grace_period() {
    let dir = common::temp_dir("sig-grace");
    let pids = dir.join("pids");
    let script = format!(
        "trap '' TERM; echo $$ >> '{}'; while :; do sleep 0.05; done",
        pids.display()
    );
    let mut child = start(&dir, &["-k", "500ms"], &script);
    wait_for_lines(&pids, 1, common::STEP_LIMIT);
    let sent = Instant::now();
    send(child.id(), nix::libc::SIGTERM);
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    let took = sent.elapsed();
    assert_eq!(status.signal(), Some(nix::libc::SIGTERM));
    assert!(took >= Duration::from_millis(450), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(!alive(pids_in(&pids)[0]));
}

#[test]
fn a_second_signal_kills_at_once() {
    let dir = common::temp_dir("sig-second");
    let pids = dir.join("pids");
    let got = dir.join("got");
    // The try outlives SIGTERM, noting that it came, and ignores SIGINT.
    let script = format!(
        "trap 'echo TERM >> \"{g}\"' TERM; trap '' INT; echo $$ >> '{p}'; while :; do sleep 0.05; done",
        g = got.display(),
        p = pids.display()
    );
    let mut child = start(&dir, &["-k", "60s"], &script);
    wait_for_lines(&pids, 1, common::STEP_LIMIT);
    let sent = Instant::now();
    send(child.id(), nix::libc::SIGTERM);
    // The second signal only once retry has passed the first on (sent together, both would be
    // pending at once, and the kernel delivers the lower-numbered SIGINT first).
    let forwarded = wait_until(common::STEP_LIMIT, || {
        std::fs::read_to_string(&got).is_ok_and(|text| text.contains("TERM"))
    });
    assert!(forwarded, "the try never got SIGTERM: {}", log(&dir));
    send(child.id(), nix::libc::SIGINT);
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "{:?}",
        sent.elapsed()
    );
    // retry dies of the first signal it received.
    assert_eq!(status.signal(), Some(nix::libc::SIGTERM));
    assert!(!alive(pids_in(&pids)[0]));
}
