//! `--until-output` (docs/classification.md#classification-by-output) through the real binary:
//! polling a local HTTP server with curl until it says it is ready. Times are checked with a lower
//! bound and a generous upper bound.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{retry, stderr_of, stdout_of, usage_error_of};

/// A local HTTP server on 127.0.0.1 that answers `200 starting` to its first `starting`
/// requests and `200 ready` after them, counting the requests. It stops when dropped.
struct Server {
    port: u16,
    requests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Server {
    fn start(starting: usize) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, done) = (requests.clone(), stop.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let n = count.fetch_add(1, Ordering::SeqCst) + 1;
                        answer(stream, if n <= starting { "starting" } else { "ready" });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Server {
            port,
            requests,
            stop,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/health", self.port)
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Reads the request's head, then answers `200` with `body` and closes the connection.
fn answer(mut stream: TcpStream, body: &str) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}\n",
        body.len() + 1
    );
}

const CURL: [&str; 4] = ["curl", "-fsS", "--max-time", "5"];

#[test]
fn polls_until_the_server_says_ready_in_exactly_four_tries() {
    if !common::have_curl("until_output::polls_until_the_server_says_ready_in_exactly_four_tries") {
        return;
    }
    let server = Server::start(3);
    let started = Instant::now();
    let out = retry()
        .args(["-n", "0", "-B", "20s", "-d", "100ms", "-j", "none"])
        .args(["--until-output", "^ready$", "--"])
        .args(CURL)
        .arg(server.url())
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert_eq!(server.requests(), 4, "{log}");
    assert_eq!(
        log.matches("exited 0 after").count(),
        3,
        "three tries were not ready: {log}"
    );
    assert_eq!(
        log.matches("(transient: not ready: no output matched --until-output '^ready$')")
            .count(),
        3,
        "{log}"
    );
    assert!(log.contains("succeeded on try 4 "), "{log}");
    // The output streams through as it comes: every answer reaches stdout.
    assert_eq!(stdout_of(&out), "starting\nstarting\nstarting\nready\n");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(15), "{took:?}");
}

#[test]
fn with_buffer_stdout_only_the_ready_answer_reaches_stdout() {
    if !common::have_curl("until_output::with_buffer_stdout_only_the_ready_answer_reaches_stdout") {
        return;
    }
    let server = Server::start(2);
    let out = retry()
        .args(["-n", "5", "-d", "10ms", "--buffer-stdout"])
        .args(["--until-output", "ready", "--"])
        .args(CURL)
        .arg(server.url())
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert_eq!(server.requests(), 3, "{log}");
    assert_eq!(stdout_of(&out), "ready\n");
    // The answers that were not ready went to standard error, as a failed try's output does.
    assert_eq!(log.matches("starting\n").count(), 2, "{log}");
}

#[test]
fn a_budget_too_short_gives_up_not_ready_and_says_why() {
    if !common::have_curl("until_output::a_budget_too_short_gives_up_not_ready_and_says_why") {
        return;
    }
    let server = Server::start(1000);
    // Tries at 0 and about 400 ms; the next wait, 800 ms, does not fit in the budget. The last
    // try ends half a second before the budget does, so a loaded machine does not have the
    // budget cut it short (a timeout, 124).
    let out = retry()
        .args(["-n", "0", "-B", "1s", "-d", "400ms", "-j", "none"])
        .args(["--until-output", "ready", "--"])
        .args(CURL)
        .arg(server.url())
        .output()
        .unwrap();
    let log = stderr_of(&out);
    // curl exited 0 every time, but a run that gives up never exits 0.
    assert_eq!(out.status.code(), Some(1), "{log}");
    let tries = server.requests();
    assert!((1..=4).contains(&tries), "{tries} tries: {log}");
    let last = log
        .lines()
        .rfind(|l| l.contains(" exited 0 after "))
        .unwrap_or_else(|| panic!("no try line: {log}"));
    assert!(
        last.contains("not ready: no output matched --until-output 'ready'")
            && last.contains("giving up: budget"),
        "{last}"
    );
    assert!(
        log.contains("gave up after") && log.contains("exit 0, but not ready (--until-output)"),
        "{log}"
    );
}

#[test]
fn a_failing_status_is_kept_when_giving_up_whatever_the_output() {
    let out = retry()
        .args(["-n", "2", "-d", "10ms", "--until-output", "ready", "--"])
        .args(["sh", "-c", "echo ready; exit 3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "ready\nready\n");
}

#[test]
fn the_other_output_patterns_see_a_try_that_is_not_ready_as_a_failure() {
    let out = retry()
        .args(["-n", "5", "-d", "10ms", "--until-output", "ready"])
        .args(["--stop-if-output", "fatal", "--"])
        .args(["sh", "-c", "echo 'fatal: no database'"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(
        log.contains("try 1/5 exited 0 after")
            && log.contains("(permanent: output matched --stop-if-output 'fatal'); giving up"),
        "{log}"
    );
}

#[test]
fn what_a_try_that_is_not_ready_left_running_is_stopped_before_the_next() {
    let dir = common::temp_dir("until-leftovers");
    let pids = dir.join("pids");
    let out = retry()
        .current_dir(&dir)
        .args([
            "-n",
            "3",
            "-d",
            "10ms",
            "-k",
            "1s",
            "--until-output",
            "ready",
        ])
        .arg("--")
        .args([
            "sh",
            "-c",
            "sleep 30 >/dev/null 2>&1 & echo $! >> pids; \
             if [ \"$RETRY_ATTEMPT\" = 2 ]; then echo ready; else echo starting; fi",
        ])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(
        log.contains("try 1/3 left 1 process running; stopped it"),
        "{log}"
    );
    let pids = common::pids_in(&pids);
    assert_eq!(pids.len(), 2, "{pids:?}");
    assert!(!common::alive(pids[0]), "the first try's sleep still runs");
    // After the ready try nothing is killed: its sleep is left to run, as after any success.
    assert!(common::alive(pids[1]), "the ready try's sleep was stopped");
    let _ = std::process::Command::new("kill")
        .arg(pids[1].to_string())
        .status();
}

#[test]
fn an_invalid_until_output_pattern_is_one_line_and_125() {
    let out = retry()
        .args(["--until-output", "(unclosed", "--", "true"])
        .output()
        .unwrap();
    let log = usage_error_of(&out, "");
    assert!(
        log.contains("--until-output") && log.contains("(unclosed"),
        "{log}"
    );
}

/// Without curl, a test that asks a server with it says so in one line and passes, as for any
/// missing package; under RETRY_REQUIRE_PACKAGES=1 (CI, which installs curl) it fails instead.
#[test]
fn a_curl_test_without_curl_skips_loudly_or_fails_when_packages_are_required() {
    let name = "until_output::polls_until_the_server_says_ready_in_exactly_four_tries";
    let empty = common::temp_dir("no-curl");
    let run = |require: bool| {
        let mut cmd = std::process::Command::new(std::env::current_exe().expect("this program"));
        cmd.args(["--exact", name, "--test-threads=1"])
            .env("PATH", &empty)
            .env_remove("RETRY_REQUIRE_PACKAGES");
        if require {
            cmd.env("RETRY_REQUIRE_PACKAGES", "1");
        }
        common::output_bounded(&mut cmd, common::TEST_LIMIT)
    };
    let out = run(false);
    let (said, log) = (stdout_of(&out), stderr_of(&out));
    assert!(out.status.success(), "{said}{log}");
    assert!(said.contains("test result: ok. 1 passed"), "{said}");
    let skipped: Vec<&str> = log.lines().filter(|l| l.starts_with("SKIPPED:")).collect();
    assert_eq!(skipped.len(), 1, "{log}");
    assert!(
        skipped[0].contains(name) && skipped[0].contains("curl is missing"),
        "{log}"
    );
    let out = run(true);
    assert!(!out.status.success(), "{}", stdout_of(&out));
    assert!(
        stdout_of(&out).contains("curl is missing"),
        "{}",
        stdout_of(&out)
    );
}
