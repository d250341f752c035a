//! Standard input replay, held standard output and classification by output
//! (docs/output.md#input-and-output), through the real binary.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{retry, stderr_of, stdout_of};

/// A file of `len` pseudo-random bytes (xorshift), made quickly without /dev/urandom.
fn random_file(dir: &Path, len: usize) -> std::path::PathBuf {
    let path = dir.join("input");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut buf = Vec::with_capacity(1 << 16);
    let mut left = len;
    while left > 0 {
        buf.clear();
        while buf.len() < (1 << 16).min(left) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf.extend_from_slice(&x.to_le_bytes());
        }
        buf.truncate((1 << 16).min(left));
        out.write_all(&buf).unwrap();
        left -= buf.len();
    }
    out.flush().unwrap();
    path
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    stdout_of(&out)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

fn sh(script: &str) -> std::process::Output {
    assert_cmd::Command::new("bash")
        .args(["-c", script])
        .env("RETRY", assert_cmd::cargo::cargo_bin("retry"))
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap()
}

#[test]
#[ignore = "tens of megabytes, side by side with the rest too costly for cargo test: run with --ignored, as .ci/run does"]
fn every_try_reads_the_same_piped_input_and_the_same_file() {
    let _big = common::one_big_at_a_time();
    let dir = common::temp_dir("replay");
    // Past the 32 MiB of the recording kept in memory.
    let file = random_file(&dir, 40_000_000);
    // Each try compares what it reads with the file itself: `cmp` says "same" only for every
    // byte in order, and costs far less than hashing 40 MB six times.
    let try_ = format!("cmp - '{}' && echo same; exit 1", file.display());
    let piped = sh(&format!(
        "cat '{}' | \"$RETRY\" -n 3 -d 0 -- sh -c \"{try_}\"",
        file.display()
    ));
    let redirected = sh(&format!(
        "\"$RETRY\" -n 3 -d 0 -- sh -c \"{try_}\" < '{}'",
        file.display()
    ));
    for out in [piped, redirected] {
        assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
        assert_eq!(stdout_of(&out), "same\nsame\nsame\n", "{}", stderr_of(&out));
    }
}

#[test]
fn a_try_that_reads_nothing_leaves_all_input_to_the_next() {
    let dir = common::temp_dir("unread");
    let file = random_file(&dir, 1_000_000);
    let out = sh(&format!(
        "cat '{}' | \"$RETRY\" -n 2 -d 0 -- sh -c '[ $RETRY_ATTEMPT = 1 ] && exit 1; sha256sum'",
        file.display()
    ));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(stdout_of(&out).starts_with(&sha256(&file)));
    // One that reads part of it: the next still gets every byte.
    let out = sh(&format!(
        "cat '{}' | \"$RETRY\" -n 2 -d 0 -- sh -c '[ $RETRY_ATTEMPT = 1 ] && head -c 1000 >/dev/null && exit 1; sha256sum'",
        file.display()
    ));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(stdout_of(&out).starts_with(&sha256(&file)));
}

#[test]
fn a_try_fed_from_the_pipe_and_one_fed_from_the_recording_get_the_same_bytes() {
    let dir = common::temp_dir("tee");
    let file = random_file(&dir, 5 << 20);
    let expected = stdout_of(&sh(&format!("cksum < '{}'", file.display())));
    assert!(expected.ends_with(" 5242880\n"), "{expected}");
    // The first try reads standard input as it comes from the pipe, and fails; the second is
    // fed what was recorded. Each writes the checksum of what it read to a file of its own.
    let try_ = "cksum > \"$0/try.$RETRY_ATTEMPT\"; [ $RETRY_ATTEMPT = 2 ]";
    for (i, mode) in [
        &["--stdin", "auto"][..],
        &["--stdin", "replay"],
        &["--buffer-stdout"],
        &["--output-on-failure"],
    ]
    .into_iter()
    .enumerate()
    {
        let tries = dir.join(format!("mode{i}"));
        std::fs::create_dir(&tries).unwrap();
        let out = sh(&format!(
            "cat '{}' | \"$RETRY\" {} -n 2 -d 0 -- sh -c '{try_}' '{}'",
            file.display(),
            mode.join(" "),
            tries.display()
        ));
        assert_eq!(out.status.code(), Some(0), "{mode:?}: {}", stderr_of(&out));
        for attempt in 1..=2 {
            let read = std::fs::read_to_string(tries.join(format!("try.{attempt}"))).unwrap();
            assert_eq!(read, expected, "{mode:?}, try {attempt}");
        }
    }
}

#[test]
fn an_endless_producer_is_read_only_as_the_try_needs() {
    // In a process of its own: a child started from a process takes that process's peak
    // memory into its own peak until it runs its program, and this test process grows large
    // with the output other tests hold.
    common::alone(
        "stdio::an_endless_producer_is_read_only_as_the_try_needs",
        endless_producer,
    );
}

// retry is reaped by wait4, which reports its peak memory; std's Child does not know of it.
#[allow(clippy::zombie_processes)]
fn endless_producer() {
    let mut yes = Command::new("yes").stdout(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    let child = common::retry_std()
        .args(["--", "head", "-1"])
        .stdin(Stdio::from(yes.stdout.take().unwrap()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let mut status = 0;
    let mut usage: nix::libc::rusage = unsafe { std::mem::zeroed() };
    // wait4 reports the peak memory of retry itself; polled, so that a hang fails the test.
    loop {
        let r = unsafe { nix::libc::wait4(pid, &mut status, nix::libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        if started.elapsed() > common::STEP_LIMIT {
            unsafe { nix::libc::kill(pid, nix::libc::SIGKILL) };
            let _ = yes.kill();
            panic!("retry did not return");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = started.elapsed();
    let _ = yes.kill();
    let _ = yes.wait();
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.unwrap(), &mut stdout).unwrap();
    assert_eq!(stdout, "y\n");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(nix::libc::WEXITSTATUS(status), 0);
    // ru_maxrss is in KiB: far less than the memory an endless read would take.
    assert!(
        usage.ru_maxrss < 32 * 1024,
        "peak RSS {} KiB",
        usage.ru_maxrss
    );
}

#[test]
fn stdin_null_and_inherit() {
    let out = retry()
        .args(["--stdin", "null", "--", "cat"])
        .write_stdin("ignored")
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"");
    let out = retry()
        .args([
            "--stdin",
            "inherit",
            "-n",
            "2",
            "-d",
            "0",
            "--",
            "sh",
            "-c",
            "cat; exit 1",
        ])
        .write_stdin("once")
        .output()
        .unwrap();
    // Without replay the second try finds the pipe empty.
    assert_eq!(out.stdout, b"once");
}

#[test]
fn buffer_stdout_passes_on_only_the_successful_output() {
    let out = retry()
        .args([
            "--buffer-stdout",
            "-n",
            "3",
            "-d",
            "0",
            "--",
            "sh",
            "-c",
            "if [ $RETRY_ATTEMPT = 1 ]; then echo partial; exit 1; fi; echo whole",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"whole\n");
    assert!(stderr_of(&out).contains("partial\n"), "{}", stderr_of(&out));
    // When every try fails, nothing reaches stdout.
    let out = retry()
        .args([
            "--buffer-stdout",
            "-n",
            "2",
            "-d",
            "0",
            "--",
            "sh",
            "-c",
            "echo no; exit 1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"");
    assert_eq!(stderr_of(&out).matches("no\n").count(), 2);
}

#[test]
fn buffer_stdout_on_two_files_starts_retry_s_lines_after_an_unfinished_stderr_line() {
    // Standard output and error are two pipes: the try's progress line on standard error has
    // no line break, and neither has the standard output held and played back there.
    for script in [
        "printf 'progress 50%%' >&2; exit 1",
        "printf 'progress 50%%' >&2; printf out; exit 1",
    ] {
        let out = retry()
            .args(["--buffer-stdout", "-n", "2", "-d", "0", "--", "sh", "-c"])
            .arg(script)
            .output()
            .unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(out.stdout, b"");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(
            lines.len(),
            5 + script.contains("out") as usize * 2,
            "{err}"
        );
        for line in &lines {
            assert!(
                line.starts_with("retry: ") || *line == "progress 50%" || *line == "out",
                "{err}"
            );
        }
        assert_eq!(err.matches("retry: try ").count(), 2, "{err}");
    }
}

#[test]
fn retry_if_output_retries_only_failures_that_printed_it() {
    let run = |script: &str| {
        retry()
            .args([
                "-n",
                "3",
                "-d",
                "0",
                "--retry-if-output",
                "connection reset",
                "--",
                "sh",
                "-c",
                script,
            ])
            .output()
            .unwrap()
    };
    let out = run("echo 'read: connection reset by peer' >&2; exit 1");
    let log = stderr_of(&out);
    assert_eq!(log.matches("retry: try ").count(), 3, "{log}");
    assert!(
        log.contains("transient: output matched --retry-if-output 'connection reset'"),
        "{log}"
    );
    let out = run("echo 'no such host'; exit 1");
    let log = stderr_of(&out);
    assert_eq!(log.matches("retry: try ").count(), 1, "{log}");
    assert!(
        log.contains("permanent: output did not match --retry-if-output 'connection reset'"),
        "{log}"
    );
    assert_eq!(out.stdout, b"no such host\n", "output still reaches stdout");
    // Split across two writes.
    let out = run("printf 'connection '; sleep 0.2; printf 'reset\\n'; exit 1");
    assert_eq!(stderr_of(&out).matches("retry: try ").count(), 3);
    assert_eq!(out.stdout, b"connection reset\n".repeat(3));
}

#[test]
fn stop_if_output_makes_a_matching_failure_permanent() {
    let run = |script: &str| {
        retry()
            .args([
                "-n",
                "3",
                "-d",
                "0",
                "--stop-if-output",
                "(?i)fatal",
                "--",
                "sh",
                "-c",
                script,
            ])
            .output()
            .unwrap()
    };
    let log = stderr_of(&run("echo FATAL: bad config; exit 1"));
    assert_eq!(log.matches("retry: try ").count(), 1, "{log}");
    assert!(
        log.contains("permanent: output matched --stop-if-output '(?i)fatal'"),
        "{log}"
    );
    let log = stderr_of(&run("echo busy; exit 1"));
    assert_eq!(log.matches("retry: try ").count(), 3, "{log}");
    // Bad patterns are usage errors.
    let out = retry()
        .args(["--stop-if-output", "(", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr_of(&out).contains("--stop-if-output"));
}

#[test]
fn watched_output_still_streams_while_the_try_runs() {
    let mut child = common::retry_std()
        .args([
            "-n",
            "1",
            "--retry-if-output",
            "x",
            "--",
            "sh",
            "-c",
            "echo early; sleep 3; exit 1",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let started = Instant::now();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "early\n");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "output came only at the end"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "the try is still running"
    );
    // Seen while the try runs: the rest of its three seconds teaches nothing. retry stops the
    // try's group on SIGTERM.
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    common::wait_bounded(&mut child, common::STEP_LIMIT);
}

#[test]
fn a_timeout_does_not_wait_for_a_grandchild_holding_the_pipe() {
    let dir = common::temp_dir("holder");
    let pid_file = dir.join("pid");
    // The grandchild leaves the try's group (setsid), so the group's kill does not reach it, and
    // it keeps the output pipe open.
    let script = format!(
        "setsid sleep 30 & echo $! > '{}'; sleep 30",
        pid_file.display()
    );
    let started = Instant::now();
    let out = retry()
        .args([
            "-n",
            "1",
            "-t",
            "300ms",
            "-k",
            "300ms",
            "--retry-if-output",
            "x",
            "--buffer-stdout",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output();
    let took = started.elapsed();
    let holder = common::pids_in(&pid_file);
    for pid in &holder {
        unsafe { nix::libc::kill(*pid, nix::libc::SIGKILL) };
    }
    let out = out.unwrap();
    assert_eq!(out.status.code(), Some(124), "{}", stderr_of(&out));
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
#[ignore = "tens of megabytes, side by side with the rest too costly for cargo test: run with --ignored, as .ci/run does"]
fn when_no_temporary_file_can_be_made_nothing_is_lost() {
    let _big = common::one_big_at_a_time();
    // Past 32 MiB retry spills to a temporary file; with nowhere to put one, it keeps the rest
    // in memory and says so.
    let out = retry()
        .env("TMPDIR", "/nonexistent-retry-dir")
        .args([
            "--buffer-stdout",
            "--",
            "head",
            "-c",
            "40000000",
            "/dev/zero",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout.len(), 40_000_000);
    assert!(out.stdout.iter().all(|&b| b == 0));
    let log = stderr_of(&out);
    assert!(log.contains("cannot spill held standard output"), "{log}");
}

#[test]
#[ignore = "tens of megabytes, side by side with the rest too costly for cargo test: run with --ignored, as .ci/run does"]
fn held_output_past_the_memory_part_arrives_byte_exact_in_a_pipe_a_file_and_on_stderr() {
    let _big = common::one_big_at_a_time();
    // Past 32 MiB, held output moves from the try's pipe to a temporary file and back out
    // without passing through retry (splice and sendfile on Linux): every byte must survive,
    // in order, whatever the destination.
    let dir = common::temp_dir("held");
    let input = dir.join("input");
    let made = Command::new("sh")
        .args(["-c", "head -c 40000000 /dev/urandom > \"$0\""])
        .arg(&input)
        .status()
        .unwrap();
    assert!(made.success());
    let data = std::fs::read(&input).unwrap();
    assert_eq!(data.len(), 40_000_000);
    let input = input.to_str().unwrap();

    // Standard output a pipe.
    let out = retry()
        .args(["-n", "1", "--buffer-stdout", "--", "cat", input])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(out.stdout == data, "held output through a pipe differs");

    // Standard output a regular file, opened for appending as by `>>`.
    let file = dir.join("output");
    std::fs::write(&file, b"before\n").unwrap();
    let sink = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_retry"))
        .args(["-n", "1", "--buffer-stdout", "--", "cat", input])
        .stdout(sink)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let written = std::fs::read(&file).unwrap();
    assert!(written.starts_with(b"before\n") && written[7..] == data[..]);

    // A failed try's held output goes to standard error.
    let script = format!("cat '{input}'; exit 3");
    let out = retry()
        .args([
            "-n",
            "1",
            "-q",
            "--buffer-stdout",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout.is_empty());
    assert!(
        out.stderr.starts_with(&data),
        "held output of a failed try differs"
    );
}

#[test]
fn anchors_in_output_patterns_mean_the_start_and_end_of_a_long_line() {
    // Lines of 200 KiB are matched in windows; `^` and `$` must not match at a window's edge
    // inside the line, as grep agrees.
    let dir = common::temp_dir("anchors");
    let long = |first: &[u8], fill: u8, last: &[u8]| {
        let mut line = first.to_vec();
        line.extend(vec![fill; 200 * 1024]);
        line.extend(last);
        line.push(b'\n');
        line
    };
    let cases: [(&str, Vec<u8>, usize); 4] = [
        ("^E", long(b"x", b'E', b""), 2),
        ("^E", long(b"", b'E', b""), 1),
        ("x$", long(b"", b'x', b"y"), 2),
        ("x$", long(b"y", b'x', b""), 1),
    ];
    for (i, (pattern, line, tries)) in cases.iter().enumerate() {
        let file = dir.join(format!("line{i}"));
        std::fs::write(&file, line).unwrap();
        let grep = Command::new("grep")
            .args(["-c", pattern])
            .arg(&file)
            .output()
            .unwrap();
        let grep_matches = if *tries == 1 { "1" } else { "0" };
        assert_eq!(
            stdout_of(&grep).trim(),
            grep_matches,
            "grep {pattern} on line {i}"
        );
        let out = retry()
            .args([
                "-n",
                "2",
                "-d",
                "0",
                "--stop-if-output",
                pattern,
                "--",
                "sh",
                "-c",
            ])
            .arg(format!("cat '{}'; exit 1", file.display()))
            .output()
            .unwrap();
        let log = stderr_of(&out);
        assert_eq!(
            log.matches("retry: try ").count(),
            *tries,
            "{pattern} on line {i}: {log}"
        );
        assert_eq!(
            out.stdout.len(),
            line.len() * tries,
            "the output still passes through"
        );
    }
}

#[test]
#[ignore = "tens of megabytes, side by side with the rest too costly for cargo test: run with --ignored, as .ci/run does"]
fn without_a_temporary_file_recording_stops_at_the_memory_cap_and_gives_up_with_125() {
    let _big = common::one_big_at_a_time();
    // 200 MB through a TMPDIR that does not exist: past the cap the try still gets every byte,
    // retry's memory stays bounded, and no second try runs on part of the input.
    let mut child = common::retry_std()
        .env("TMPDIR", "/nonexistent")
        .args(["--stdin", "replay", "-n", "2", "-d", "0"])
        .args(["--on-give-up", "grep VmHWM /proc/$PPID/status >&2"])
        .args(["--", "sh", "-c", "wc -c; exit 1"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let chunk = vec![b'z'; 1 << 20];
        for _ in 0..200 {
            if input.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    common::wait_bounded(&mut child, std::time::Duration::from_secs(25));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{log}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "209715200",
        "{log}"
    );
    assert!(
        log.contains("no further try can get the same input"),
        "{log}"
    );
    assert!(!log.contains("try 2/2"), "{log}");
    let peak_kib: u64 = log
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("the hook showed retry's peak memory");
    assert!(peak_kib < 200 * 1024, "peak {peak_kib} KiB: {log}");
}

/// Bytes `seq 100000` writes.
const SEQ_BYTES: usize = 588_895;

/// What `seq 100000 | { sleep 0.2; TRY; wc -c; }` leaves for `wc`, and the try's output. The
/// sleep lets `seq` fill the pipe first, so that a read returns all it asks for.
fn left_after(try_cmd: &str) -> (usize, String) {
    let out = sh(&format!(
        "seq 100000 | {{ sleep 0.2; {try_cmd}; wc -c >&2; }} 2>\"$T/left\"; cat \"$T/left\" >&2"
    )
    .replace("$T", common::temp_dir("left").to_str().unwrap()));
    let log = stderr_of(&out);
    let left = log
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count from wc: {log}"));
    (left, stdout_of(&out))
}

#[test]
fn a_try_that_never_reads_leaves_every_line_to_the_shell_loop() {
    let out =
        sh("printf '1\\n2\\n3\\n' | while read l; do \"$RETRY\" -t 10s -- echo \"line $l\"; done");
    assert_eq!(
        stdout_of(&out),
        "line 1\nline 2\nline 3\n",
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn a_try_takes_from_a_pipe_only_what_it_reads() {
    // Never read: every byte is left.
    let (left, _) = left_after("\"$RETRY\" -t 10s -- true");
    assert_eq!(left, SEQ_BYTES);
    let (left, _) = left_after("\"$RETRY\" -t 10s -- sleep 0.3");
    assert_eq!(left, SEQ_BYTES);
    // One read: as much as that read takes when the command runs without retry.
    let (direct, _) = left_after("head -1 >/dev/null");
    let (left, out) = left_after("\"$RETRY\" -t 10s -- head -1");
    assert_eq!(out, "1\n");
    assert_eq!(left, direct, "head -1 alone leaves {direct}");
    // A process below the try, not the try itself, reads.
    let (left, out) = left_after("\"$RETRY\" -t 10s -- sh -c 'head -1; exit 0'");
    assert_eq!(out, "1\n");
    assert_eq!(left, direct, "head -1 alone leaves {direct}");
}

#[test]
fn a_try_that_reads_part_gets_it_again_and_leaves_the_rest_but_one_block_read_ahead() {
    // `read` takes a line a byte at a time: it is given exactly those bytes, and the rest is
    // left as it is without retry.
    let (direct, _) = left_after("sh -c 'read x'");
    let (left, out) = left_after("\"$RETRY\" -n 2 -d 0 -t 10s -- sh -c 'read x; echo $x; exit 1'");
    assert_eq!(out, "1\n1\n");
    assert_eq!(left, direct);
    // Reads of less than 1 KiB are exact however many there are: three of 1000 bytes.
    let (left, out) = left_after(
        "\"$RETRY\" -n 2 -d 0 -t 10s -- sh -c 'dd bs=1000 count=3 status=none | wc -c; exit 1'",
    );
    assert_eq!(out, "3000\n3000\n");
    assert_eq!(left, SEQ_BYTES - 3000);
    // One block read, not followed by another: nothing is read ahead.
    let (left, out) =
        left_after("\"$RETRY\" -n 2 -d 0 -t 10s -- sh -c 'head -c 5000 | wc -c; exit 1'");
    assert_eq!(out, "5000\n5000\n");
    assert_eq!(left, SEQ_BYTES - 5000);
    // A try that reads 300 kB in reads of 8 KiB (`head -c`): retry is never more than one such
    // read ahead of it.
    let (direct, want) = left_after("head -c 300000 | cksum");
    let (left, out) =
        left_after("\"$RETRY\" -n 2 -d 0 -t 10s -- sh -c 'head -c 300000 | cksum; exit 1'");
    assert_eq!(out, format!("{want}{want}"));
    assert_eq!(direct, SEQ_BYTES - 300_000);
    assert!(
        left <= direct && left >= direct - 8192,
        "left {left}, direct {direct}"
    );
}

/// What `sh` prints for a loop over twelve lines that prints each line it reads, in brackets,
/// then runs `cmd`, which reads standard input after it.
fn shell_loop(cmd: &str) -> String {
    let script = format!(
        "printf 'line%s\\n' 1 2 3 4 5 6 7 8 9 10 11 12 | \
         while read -r l; do printf '[%s]' \"$l\"; {cmd}; done"
    );
    let out = assert_cmd::Command::new("sh")
        .args(["-c", &script])
        .env("RETRY", assert_cmd::cargo::cargo_bin("retry"))
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    assert!(out.status.success(), "{script}: {}", stderr_of(&out));
    stdout_of(&out)
}

#[test]
fn a_shell_loop_sees_every_line_a_try_that_reads_lines_leaves() {
    for try_ in ["sh -c 'read x'", "sh -c 'read x; read y'"] {
        let direct = shell_loop(try_);
        let through_retry = shell_loop(&format!("\"$RETRY\" -q -n 1 -t 10s -- {try_}"));
        assert_eq!(through_retry, direct, "{try_}");
    }
    // The loops the comparison stands for.
    assert_eq!(
        shell_loop("sh -c 'read x'"),
        "[line1][line3][line5][line7][line9][line11]"
    );
    assert_eq!(
        shell_loop("sh -c 'read x; read y'"),
        "[line1][line4][line7][line10]"
    );
}

#[test]
fn a_retried_try_gets_the_lines_the_first_read_again_and_the_loop_the_rest() {
    // Each try prints what it read in angle brackets; the first try fails, the second
    // succeeds. Without retry the command runs once and succeeds.
    for (reads, alone) in [
        (
            "read x; y=",
            "[line1]<line2|>[line3]<line4|>[line5]<line6|>[line7]<line8|>[line9]<line10|>[line11]<line12|>",
        ),
        (
            "read x; read y",
            "[line1]<line2|line3>[line4]<line5|line6>[line7]<line8|line9>[line10]<line11|line12>",
        ),
    ] {
        let try_ = format!(
            "sh -c '{reads}; printf \"<%s|%s>\" \"$x\" \"$y\"; [ \"${{RETRY_ATTEMPT:-2}}\" != 1 ]'"
        );
        let direct = shell_loop(&try_);
        let through_retry = shell_loop(&format!("\"$RETRY\" -q -n 2 -d 0 -t 10s -- {try_}"));
        // Every try's output twice: the second try read the same lines again.
        let mut twice = String::new();
        for part in direct.split_inclusive('>') {
            match part.find('<') {
                Some(at) => {
                    twice.push_str(&part[..at]);
                    twice.push_str(&part[at..]);
                    twice.push_str(&part[at..]);
                }
                None => twice.push_str(part),
            }
        }
        assert_eq!(direct, alone);
        assert_eq!(through_retry, twice, "{reads}");
    }
}

#[test]
fn a_try_that_reads_a_thousand_lines_a_byte_at_a_time_leaves_the_rest_and_is_not_slow() {
    // 3893 bytes, each asked for on its own: fed one read at a time, each soon after it comes.
    let started = Instant::now();
    let out = sh(
        "seq 2000 | { \"$RETRY\" -t 20s -- sh -c 'n=0; while [ $n -lt 1000 ] && read l; do n=$((n+1)); done; echo $l'; wc -l; }",
    );
    let took = started.elapsed();
    assert_eq!(
        stdout_of(&out).split_whitespace().collect::<Vec<_>>(),
        ["1000", "1000"],
        "{}",
        stderr_of(&out)
    );
    assert!(took < Duration::from_secs(15), "{took:?}");
}

#[test]
fn readers_that_wait_in_poll_epoll_or_a_thread_are_fed() {
    let poll = "import os, select\n\
                p = select.poll(); p.register(0, select.POLLIN); p.poll()\n\
                print(os.read(0, 100).split()[0].decode())";
    let asyncio = "import asyncio, sys\n\
                   async def main():\n\
                   \x20   loop = asyncio.get_running_loop(); r = asyncio.StreamReader()\n\
                   \x20   await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(r), sys.stdin)\n\
                   \x20   print((await r.readline()).decode().strip())\n\
                   asyncio.run(main())";
    let thread = "import sys, threading\n\
                  t = threading.Thread(target=lambda: print(sys.stdin.readline().strip()))\n\
                  t.start(); t.join()";
    for (what, script) in [("poll", poll), ("asyncio", asyncio), ("thread", thread)] {
        let (left, out) = left_after(&format!(
            "\"$RETRY\" -t 10s -- python3 -c '{}'",
            script.replace('\'', "'\\''")
        ));
        assert_eq!(out, "1\n", "{what}");
        // Waiting in poll or epoll says nothing of how much it will read: retry gives it 64 KiB.
        assert!(left >= SEQ_BYTES - 65536, "{what}: left {left}");
    }
}

#[test]
fn a_try_that_cannot_be_looked_at_is_fed_as_it_takes_input_and_retry_says_so() {
    // A setuid program run by another user hides what it waits on. Making one needs root, and
    // a file system that honours the setuid bit.
    let dir = common::temp_dir("setuid");
    let cat = dir.join("cat");
    let made = unsafe { nix::libc::geteuid() } == 0
        && std::fs::copy("/bin/cat", &cat).is_ok()
        && Command::new("chmod")
            .arg("4755")
            .arg(&cat)
            .status()
            .is_ok_and(|s| s.success());
    let nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"];
    let setuid_works = made
        && Command::new("setpriv")
            .args(nobody)
            .arg(&cat)
            .arg("/proc/self/status")
            .output()
            .is_ok_and(|o| {
                stdout_of(&o)
                    .lines()
                    .any(|l| l.starts_with("Uid:\t65534\t0\t"))
            });
    if !setuid_works {
        eprintln!("skipped: no setuid program can be made and run as another user here");
        return;
    }
    let out = sh(&format!(
        "printf 'a\\nb\\n' | setpriv {} \"$RETRY\" -t 10s -- '{}'",
        nobody.join(" "),
        cat.display()
    ));
    assert_eq!(stdout_of(&out), "a\nb\n", "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("cannot be looked at"),
        "{}",
        stderr_of(&out)
    );
}

/// Whether `dir` lets a file be made without a name (`O_TMPFILE`), as retry's spool tries first.
fn makes_unnamed_files(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(nix::libc::O_TMPFILE | nix::libc::O_EXCL)
        .mode(0o600)
        .open(dir)
        .is_ok()
}

/// What retry (`pid`) has open in `dir`, as the kernel names it.
fn open_in(pid: u32, dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .collect()
}

/// Runs `retry ARGS` with `TMPDIR` an empty directory and standard input `stdin`, waits until it
/// holds a temporary file there, and kills it with SIGKILL: nothing may be left in the directory.
fn killed_while_spilled(name: &str, args: &[&str], stdin: Stdio) {
    let dir = common::temp_dir(name);
    let tmp = dir.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let pid_file = dir.join("pid");
    let mut cmd = common::retry_std();
    cmd.env("TMPDIR", &tmp)
        .args(args)
        .arg(&pid_file)
        .stdin(stdin)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let mut held = Vec::new();
    let spilled = common::wait_until(Duration::from_secs(30), || {
        held = open_in(pid, &tmp);
        !held.is_empty()
    });
    unsafe { nix::libc::kill(pid as i32, nix::libc::SIGKILL) };
    let _ = child.wait();
    // The try outlives retry (it is in a process group of its own): ended here.
    let tries = common::pids_in(&pid_file);
    for &try_pid in &tries {
        unsafe { nix::libc::kill(try_pid, nix::libc::SIGKILL) };
    }
    assert!(common::survivors(&tries, Duration::from_secs(5)).is_empty());
    assert!(spilled, "{name}: retry never spilled to {}", tmp.display());
    if makes_unnamed_files(&tmp) {
        // The file never had a name there, so there was never one to remove.
        assert!(
            held.iter()
                .all(|target| !target.to_string_lossy().contains(".retry-spool-")),
            "{name}: {held:?}"
        );
    }
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{name}: left behind in TMPDIR: {left:?}");
}

#[cfg(target_os = "linux")]
#[test]
#[ignore = "tens of megabytes, side by side with the rest too costly for cargo test: run with --ignored, as .ci/run does"]
fn a_run_killed_with_sigkill_while_spilled_leaves_no_temporary_file() {
    let _big = common::one_big_at_a_time();
    // Held output past the 32 MiB kept in memory, then a try that waits to be killed.
    killed_while_spilled(
        "spool-held",
        &[
            "--buffer-stdout",
            "--",
            "sh",
            "-c",
            "echo $$ > \"$0\"; head -c 40000000 /dev/zero; exec sleep 30",
        ],
        Stdio::null(),
    );
    // Recorded standard input past the same 32 MiB, read whole by the try.
    let dir = common::temp_dir("spool-input");
    let input = dir.join("input");
    let made = Command::new("sh")
        .args(["-c", "head -c 40000000 /dev/zero > \"$0\""])
        .arg(&input)
        .status()
        .unwrap();
    assert!(made.success());
    killed_while_spilled(
        "spool-recorded",
        &[
            "--stdin",
            "replay",
            "--",
            "sh",
            "-c",
            "echo $$ > \"$0\"; cat > /dev/null; exec sleep 30",
        ],
        Stdio::from(std::fs::File::open(&input).unwrap()),
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
