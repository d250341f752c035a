//! Passing a try's output on (docs/output.md#holding-standard-output): a slow reader never delays a
//! timeout or a signal, and an error writing the output is never silent.

use crate::common;

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{alive, pids_in, retry_std, stderr_of, wait_bounded, wait_for_lines};

/// Waits until `pid` is gone; returns when it went, or panics after `limit`.
fn gone_within(pid: i32, limit: Duration) -> Instant {
    let until = Instant::now() + limit;
    while alive(pid) {
        assert!(Instant::now() < until, "pid {pid} still running");
        std::thread::sleep(Duration::from_millis(5));
    }
    Instant::now()
}

#[test]
fn a_reader_that_never_reads_delays_neither_the_timeout_nor_a_signal() {
    let dir = common::temp_dir("slow-reader");
    let pids = dir.join("pids");
    let script = format!("echo $$ >> '{p}'; exec yes", p = pids.display());
    let started = Instant::now();
    // The test holds the read end of retry's stdout and never reads it.
    let mut child = retry_std()
        .args(["-t", "1", "-n", "1", "-k", "1"])
        .args(["--retry-if-output", "zzz", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_lines(&pids, 1, common::STEP_LIMIT);
    let yes = pids_in(&pids)[0];
    let stopped = gone_within(yes, common::STEP_LIMIT);
    let at = stopped - started;
    assert!(at >= Duration::from_millis(900), "{at:?}");
    assert!(
        at < Duration::from_millis(2500),
        "stopped {at:?} after the start"
    );
    // retry still has output it cannot write; a signal ends it at once all the same.
    std::thread::sleep(Duration::from_millis(200));
    let sent = Instant::now();
    common::send(child.id(), nix::libc::SIGTERM);
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    assert!(
        sent.elapsed() < Duration::from_millis(1500),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(status.signal(), Some(nix::libc::SIGTERM), "{status:?}");
}

#[test]
fn a_reader_that_stops_reading_partway_does_not_delay_the_timeout() {
    let dir = common::temp_dir("partial-reader");
    let pids = dir.join("pids");
    let script = format!(
        "yes & echo $! >> '{p}'; echo $$ >> '{p}'; wait",
        p = pids.display()
    );
    let started = Instant::now();
    let mut child = retry_std()
        .args(["-t", "1", "-n", "1", "-k", "1"])
        .args(["--retry-if-output", "zzz", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = vec![0u8; 70_000];
    out.read_exact(&mut first).unwrap();
    wait_for_lines(&pids, 2, common::STEP_LIMIT);
    let pids = pids_in(&pids);
    let mut last = started;
    for pid in &pids {
        last = last.max(gone_within(*pid, common::STEP_LIMIT));
    }
    let at = last - started;
    assert!(
        at < Duration::from_millis(2500),
        "stopped {at:?} after the start"
    );
    let sent = Instant::now();
    common::send(child.id(), nix::libc::SIGTERM);
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    assert!(sent.elapsed() < Duration::from_millis(1500));
    assert_eq!(status.signal(), Some(nix::libc::SIGTERM), "{status:?}");
    drop(out);
}

/// retry with its standard output on /dev/full.
fn to_full_disk(args: &[&str]) -> std::process::Output {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let mut child = retry_std()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(full))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_bounded(&mut child, common::STEP_LIMIT);
    child.wait_with_output().unwrap()
}

#[test]
fn an_error_writing_held_or_watched_output_is_reported_and_ends_the_run_with_1() {
    for args in [
        &["--buffer-stdout", "--", "echo", "hi"][..],
        &["--retry-if-output", "x", "--", "echo", "hi"],
        &["--retry-if-output", "x", "--", "seq", "100000"],
    ] {
        let out = to_full_disk(args);
        let log = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {log}");
        assert!(
            log.contains("cannot write standard output: No space left on device"),
            "{args:?}: {log}"
        );
        assert!(!log.contains("SIGPIPE"), "{args:?}: {log}");
    }
}

#[test]
fn a_reader_gone_before_the_held_output_is_written_dies_of_sigpipe_never_0() {
    for args in [
        &["--buffer-stdout", "--", "seq", "1000000"][..],
        &["--retry-if-output", "zzz", "--", "seq", "1000000"],
    ] {
        let mut child = retry_std()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read the first line, as `head -1` does, then go.
        let mut out = child.stdout.take().unwrap();
        let mut byte = [0u8; 2];
        out.read_exact(&mut byte).unwrap();
        assert_eq!(&byte, b"1\n");
        drop(out);
        let status = wait_bounded(&mut child, common::STEP_LIMIT);
        // As the bare command in a pipeline ends: a shell shows 141.
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(13), "{args:?}: {status:?}");
    }
}

#[test]
fn output_written_after_a_successful_try_still_arrives_and_does_not_delay_the_status() {
    // Both at once: each waits for its late writer.
    std::thread::scope(|s| {
        for args in [&["--retry-if-output", "x"][..], &["--buffer-stdout"]] {
            s.spawn(move || output_written_after_a_successful_try(args));
        }
    });
}

fn output_written_after_a_successful_try(args: &[&str]) {
    let started = Instant::now();
    let mut child = retry_std()
        .args(args)
        .args(["--", "sh", "-c", "(sleep 2; echo late) & echo early"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    let ended = started.elapsed();
    assert_eq!(status.code(), Some(0), "{args:?}");
    // Well before the late writer's 2s, however loaded the machine.
    assert!(
        ended < Duration::from_millis(1500),
        "{args:?}: retry waited {ended:?} for output written after its try"
    );
    let mut text = String::new();
    out.read_to_string(&mut text).unwrap();
    assert_eq!(text, "early\nlate\n", "{args:?}");
    assert!(started.elapsed() >= Duration::from_millis(500));
}

#[test]
fn with_stdout_and_stderr_in_one_place_watching_keeps_their_order() {
    // Closed on exec: a process another test starts meanwhile must not hold the pipe open.
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
    let w2 = w.try_clone().unwrap();
    let mut child = retry_std()
        .args(["--retry-if-output", "zzz", "--", "sh", "-c"])
        .arg("for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; done")
        .stdin(Stdio::null())
        .stdout(Stdio::from(w))
        .stderr(Stdio::from(w2))
        .spawn()
        .unwrap();
    wait_bounded(&mut child, common::STEP_LIMIT);
    drop(child);
    let mut text = String::new();
    std::fs::File::from(r).read_to_string(&mut text).unwrap();
    let expected: String = (1..=5).map(|i| format!("out{i}\nerr{i}\n")).collect();
    assert_eq!(text, expected);
}
