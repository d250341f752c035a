//! Pushback (docs/herd.md#pushback) through the real binary: the wait a failed try's output asks
//! for, from a real HTTP server's `Retry-After` read by `curl -si` (in seconds, or as an
//! HTTP-date measured by the response's own `Date:`), from a script that prints the lines of an
//! answer whose dates it makes with `date`, and from a tool that prints `retry in 300ms`. Times
//! are checked with a lower bound and a generous upper bound.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{retry, stderr_of, stdout_of, usage_error_of};

/// A local HTTP server that answers `503` with `Retry-After: 1` to its first `busy` requests,
/// then `200`; or, given `date`, with a `Retry-After` that is the HTTP-date two seconds after its
/// `Date:` line. Killed when dropped, whatever the test did.
struct Server {
    child: Child,
    port: u16,
}

const SERVER: &str = r#"
import email.utils, http.server, sys, time
busy = int(sys.argv[1])
as_date = sys.argv[2:] == ["date"]
class Handler(http.server.BaseHTTPRequestHandler):
    count = 0
    def do_GET(self):
        Handler.count += 1
        if Handler.count <= busy:
            # send_response writes the Date: line, by this machine's clock, before this one.
            self.send_response(503)
            if as_date:
                self.send_header("Retry-After", email.utils.formatdate(time.time() + 2, usegmt=True))
            else:
                self.send_header("Retry-After", "1")
            body = b"busy, come back later\n"
        else:
            self.send_response(200)
            body = b"ready\n"
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

impl Server {
    /// Starts the server on a free port (the system picks it), and waits until it listens.
    fn start(busy: u32) -> Server {
        Server::start_with(busy, &[])
    }

    /// `start`, with more arguments for the server (`date`).
    fn start_with(busy: u32, args: &[&str]) -> Server {
        let dir = common::temp_dir("pushback-server");
        let script = dir.join("server.py");
        std::fs::write(&script, SERVER).unwrap();
        let mut child = Command::new("python3")
            .arg(&script)
            .arg(busy.to_string())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs");
        let stdout = child.stdout.take().unwrap();
        let mut server = Server { child, port: 0 };
        // It prints its port once it is bound and listening.
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        server.port = line.trim().parse().expect("the server prints its port");
        server
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `curl -si --fail-with-body`: the headers on stdout, where `Retry-After` is read, and a
/// failed status for an HTTP error (plain `-f` would print nothing then).
const CURL: [&str; 5] = ["curl", "-si", "--fail-with-body", "--max-time", "5"];

#[test]
fn waits_as_long_as_retry_after_asks_and_succeeds_on_the_third_try() {
    if !common::have_curl(
        "pushback::waits_as_long_as_retry_after_asks_and_succeeds_on_the_third_try",
    ) {
        return;
    }
    let server = Server::start(2);
    let url = server.url();
    let started = Instant::now();
    let out = retry()
        .args([
            "-n",
            "5",
            "-d",
            "10ms",
            "--delay-from-output",
            r"Retry-After: (\d+)",
        ])
        .arg("--")
        .args(CURL)
        .arg(&url)
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(stdout_of(&out).contains("ready"), "{}", stdout_of(&out));
    assert!(log.contains("succeeded on try 3/5"), "{log}");
    assert_eq!(
        log.matches("next try in 1s (asked for by the output)")
            .count(),
        2,
        "{log}"
    );
    assert!(took >= Duration::from_secs(2), "{took:?}");
    assert!(took < common::STEP_LIMIT, "{took:?}");
}

#[test]
fn gives_up_at_once_when_the_budget_cannot_hold_the_requested_wait() {
    if !common::have_curl(
        "pushback::gives_up_at_once_when_the_budget_cannot_hold_the_requested_wait",
    ) {
        return;
    }
    let server = Server::start(5);
    let url = server.url();
    let started = Instant::now();
    let out = retry()
        .args(["-n", "5", "-d", "10ms", "-B", "1900ms"])
        .args(["--delay-from-output", r"Retry-After: (\d+)"])
        .arg("--")
        .args(CURL)
        .arg(&url)
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = stderr_of(&out);
    // curl's status for an HTTP error, the last try's.
    assert_eq!(out.status.code(), Some(22), "{log}");
    assert!(log.contains("try 1/5 exited 22"), "{log}");
    assert!(
        log.contains("try 2/5 exited 22") && !log.contains("try 3/5"),
        "{log}"
    );
    assert!(
        log.contains("giving up: the output asked for 1s (--delay-from-output), more than the ")
            && log.contains(" the budget leaves (budget: "),
        "{log}"
    );
    assert!(log.contains("gave up after 2 tries"), "{log}");
    // The first wait was held; the second was not slept, neither in full nor to the budget's
    // end. The budget leaves the two tries 900ms, room for a loaded machine's curl.
    assert!(took >= Duration::from_secs(1), "{took:?}");
    assert!(took < Duration::from_millis(1850), "{took:?}\n{log}");
}

#[test]
fn a_request_past_two_to_the_64_seconds_gives_up_on_the_budget_not_retries_at_once() {
    for asked in ["18446744073709551616", "99999999999999999999999999"] {
        let started = Instant::now();
        let out = retry()
            .args(["-n", "5", "-d", "0", "-B", "5s"])
            .args(["--delay-from-output", r"Retry-After: (\d+)"])
            .args(["--", "sh", "-c"])
            .arg(format!("echo 'Retry-After: {asked}'; exit 3"))
            .timeout(Duration::from_secs(20))
            .output()
            .unwrap();
        let log = stderr_of(&out);
        assert_eq!(out.status.code(), Some(3), "{log}");
        assert!(!log.contains("try 2/5"), "{log}");
        assert!(
            log.contains("giving up: the output asked for ") && log.contains("budget"),
            "{log}"
        );
        assert!(started.elapsed() < Duration::from_secs(4), "{log}");
    }
}

#[test]
fn a_tool_that_says_retry_in_300ms_is_waited_for_past_max_delay() {
    let started = Instant::now();
    let out = retry()
        .args(["-n", "2", "-d", "1ms", "-m", "5ms"])
        .args(["--delay-from-output", r"retry in (\S+)"])
        .args(["--", "sh", "-c", r#"echo "busy: retry in 300ms"; exit 1"#])
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(
        log.contains("try 1/2 exited 1 after ")
            && log.contains("(transient); next try in 300ms (asked for by the output)"),
        "{log}"
    );
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn the_json_wait_event_carries_the_requested_wait() {
    let out = retry()
        .args(["-n", "2", "-d", "1ms", "--log-format", "json"])
        .args(["--delay-from-output", r"retry in (\S+)"])
        .args(["--", "sh", "-c", r#"echo "retry in 0.2"; exit 1"#])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    let wait = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["event"] == "wait")
        .unwrap_or_else(|| panic!("no wait event: {log}"));
    assert_eq!(wait["requested_ms"], 200, "{wait}");
    assert_eq!(wait["delay_ms"], 200, "{wait}");
    assert_eq!(wait["attempt"], 1, "{wait}");
    let start: serde_json::Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(start["policy"]["delay_from_output"], r"retry in (\S+)");
}

#[test]
fn the_last_wait_asked_for_wins_on_either_stream() {
    // A long wait on stdout, then a short one on stderr: the short one, later, wins.
    let started = Instant::now();
    let script = r#"echo "retry in 5s"; sleep 0.1; echo "retry in 200ms" >&2; exit 1"#;
    let out = retry()
        .args(["-n", "2", "-d", "1ms"])
        .args(["--delay-from-output", r"retry in (\S+)"])
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = stderr_of(&out);
    assert!(
        log.contains("next try in 200ms (asked for by the output)"),
        "{log}"
    );
    assert!(took >= Duration::from_millis(200), "{took:?}");
    assert!(took < Duration::from_secs(4), "{took:?}");
}

#[test]
fn a_match_without_a_wait_is_ignored_and_said_with_verbose() {
    let started = Instant::now();
    let out = retry()
        .args(["-v", "-n", "2", "-d", "1ms", "-j", "none"])
        .args(["--delay-from-output", r"retry in (\S+)"])
        .args(["--", "sh", "-c", r#"echo "retry in a while"; exit 1"#])
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = stderr_of(&out);
    assert!(log.contains("next try in 1ms\n"), "{log}");
    assert!(
        log.contains(
            "try 1/2: output matched --delay-from-output, but its capture group held 'a', not a number of seconds, a duration or an HTTP-date; ignored"
        ),
        "{log}"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    // Without -v, the human log does not say it.
    let out = retry()
        .args(["-n", "2", "-d", "1ms"])
        .args(["--delay-from-output", r"retry in (\S+)"])
        .args(["--", "sh", "-c", r#"echo "retry in a while"; exit 1"#])
        .output()
        .unwrap();
    assert!(!stderr_of(&out).contains("ignored"), "{}", stderr_of(&out));
}

#[test]
fn a_success_is_not_held_back_by_a_request() {
    let started = Instant::now();
    let out = retry()
        .args(["--delay-from-output", r"retry in (\S+)"])
        .args(["--", "sh", "-c", r#"echo "retry in 5s""#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout_of(&out), "retry in 5s\n");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[test]
fn a_regex_without_a_capture_group_is_a_usage_error() {
    let out = retry()
        .args(["--delay-from-output", r"Retry-After: \d+", "--", "true"])
        .output()
        .unwrap();
    let log = usage_error_of(&out, "");
    assert!(
        log.contains("--delay-from-output") && log.contains(r"'Retry-After: \d+'"),
        "{log}"
    );
    assert!(log.contains("no capture group"), "{log}");
    let out = retry()
        .args(["--delay-from-output", "(unclosed", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr_of(&out).contains("'(unclosed'"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn the_dry_run_names_the_option_in_its_policy_line() {
    let out = retry()
        .args(["--dry-run", "-n", "3", "--seed", "1"])
        .args(["--delay-from-output", r"Retry-After: (\d+)"])
        .output()
        .unwrap();
    let plan = stdout_of(&out);
    let policy = plan
        .lines()
        .find(|l| l.trim_start().starts_with("policy:"))
        .unwrap_or_else(|| panic!("no policy line: {plan}"));
    assert!(
        policy.contains(
            r"longer waits when the output asks (--delay-from-output 'Retry-After: (\d+)')"
        ),
        "{plan}"
    );
}

/// A shell script's part that sets `at` to the HTTP-date (IMF-fixdate) `$1` seconds after the
/// local clock's now: `at 3`. In the C locale, so that the names are English.
const AT: &str = r#"export LC_ALL=C; now=$(date +%s); at() { date -u -d @$((now + $1)) '+%a, %d %b %Y %H:%M:%S GMT'; }; "#;

/// Runs `retry -n 2 -d 10ms` with `args`, on a try that runs `script` (after `AT`) and fails:
/// how long the run took, and its log.
fn two_failing_tries(args: &[&str], script: &str) -> (Duration, String) {
    let started = Instant::now();
    let out = retry()
        .args(["-n", "2", "-d", "10ms"])
        .args(["--delay-from-output", r"^Retry-After: (.+)$"])
        .args(args)
        .args(["--", "sh", "-c"])
        .arg(format!("{AT}{script}; exit 1"))
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(
        log.contains("gave up after 2 tries") || log.contains(r#""reason":"tries""#),
        "{log}"
    );
    (took, log)
}

/// The `wait` event of a JSON log.
fn wait_event(log: &str) -> serde_json::Value {
    log.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "wait")
        .unwrap_or_else(|| panic!("no wait event: {log}"))
}

#[test]
fn a_retry_after_date_three_seconds_ahead_is_waited_for_by_the_local_clock() {
    let (took, log) = two_failing_tries(&[], r#"echo "Retry-After: $(at 3)""#);
    // The date is whole seconds: 2 to 3 seconds after the try's end, at least 2 after the start.
    assert!(took >= Duration::from_secs(2), "{took:?}\n{log}");
    assert!(took < Duration::from_secs(8), "{took:?}\n{log}");
    assert!(
        log.contains("(asked for by the output: until its HTTP-date, by the local clock)"),
        "{log}"
    );
}

#[test]
fn a_server_whose_clock_is_an_hour_behind_still_gets_the_three_seconds_it_meant() {
    // The lines of an HTTP answer, as `curl -si` prints them, from a server an hour behind.
    let answer = r#"printf 'HTTP/1.1 503 Service Unavailable\r\nDate: %s\r\nRetry-After: %s\r\n\r\n' "$(at -3600)" "$(at -3597)""#;
    // The two runs wait at once.
    let (text, json) = std::thread::scope(|s| {
        let json = s.spawn(|| two_failing_tries(&["--log-format", "json"], answer));
        (two_failing_tries(&["-v"], answer), json.join().unwrap())
    });
    let (took, log) = text;
    assert!(took >= Duration::from_secs(2), "{took:?}\n{log}");
    assert!(took < Duration::from_secs(8), "{took:?}\n{log}");
    assert!(
        log.contains(
            "next try in 3s (asked for by the output: until its HTTP-date, by the server's Date: line)"
        ),
        "{log}"
    );
    // The JSON log names the clock on the wait event.
    let (took, log) = json;
    let wait = wait_event(&log);
    assert_eq!(wait["clock"], "server", "{wait}");
    assert_eq!(wait["requested_ms"], 3000, "{wait}");
    assert_eq!(wait["delay_ms"], 3000, "{wait}");
    assert!(took >= Duration::from_secs(2), "{took:?}\n{log}");
}

#[test]
fn the_json_log_names_the_local_clock_when_the_output_has_no_date_line() {
    let (_, log) = two_failing_tries(&["--log-format", "json"], r#"echo "Retry-After: $(at 2)""#);
    let wait = wait_event(&log);
    assert_eq!(wait["clock"], "local", "{wait}");
    let asked = wait["requested_ms"].as_u64().unwrap();
    assert!((500..=2000).contains(&asked), "{wait}");
    // A wait in seconds names no clock.
    let (_, log) = two_failing_tries(&["--log-format", "json"], r#"echo "Retry-After: 0.1""#);
    let wait = wait_event(&log);
    assert!(wait.get("clock").is_none(), "{wait}");
    assert_eq!(wait["requested_ms"], 100, "{wait}");
}

#[test]
fn a_date_in_the_past_in_any_of_the_three_forms_asks_for_no_wait() {
    for date in [
        "Thu, 01 Jan 2015 00:00:00 GMT",
        "Thursday, 01-Jan-15 00:00:00 GMT",
        "Thu Jan  1 00:00:00 2015",
    ] {
        let (took, log) =
            two_failing_tries(&["-j", "none"], &format!("echo 'Retry-After: {date}'"));
        assert!(took < Duration::from_secs(2), "{date}: {took:?}\n{log}");
        assert!(
            log.contains(
                "next try in 10ms (the output's HTTP-date has passed, by the local clock)"
            ),
            "{date}: {log}"
        );
    }
    // Past by the server's clock, though ahead of the local one.
    let (took, log) = two_failing_tries(
        &["-j", "none"],
        r#"echo "Retry-After: $(at 3600)"; echo "date: $(at 3605)""#,
    );
    assert!(took < Duration::from_secs(2), "{took:?}\n{log}");
    assert!(
        log.contains(
            "next try in 10ms (the output's HTTP-date has passed, by the server's Date: line)"
        ),
        "{log}"
    );
}

#[test]
fn a_malformed_date_is_ignored_with_a_warning_naming_it_and_the_schedules_wait_holds() {
    for (date, why) in [
        (
            "Fri, 01 Jan 2015 00:00:00 GMT",
            "not an HTTP-date: 01 Jan 2015 is a Thursday, not a Friday",
        ),
        (
            "Thu, 31 Feb 2015 00:00:00 GMT",
            "not an HTTP-date: Feb 2015 has no day 31",
        ),
        (
            "Thu, 01 Jan 2015 25:00:00 GMT",
            "not an HTTP-date: the time 25:00:00 is out of range",
        ),
        (
            "Thu, 01 Jan 2015 00:00:00 UTC",
            "not an HTTP-date: not laid out as Sun, 06 Nov 1994 08:49:37 GMT",
        ),
        (
            "next Tuesday",
            "not a number of seconds, a duration or an HTTP-date",
        ),
    ] {
        let (took, log) = two_failing_tries(
            &["-v", "-j", "none"],
            &format!("echo 'Retry-After: {date}'"),
        );
        assert!(
            log.contains(&format!(
                "try 1/2: output matched --delay-from-output, but its capture group held '{date}', {why}; ignored"
            )),
            "{date}: {log}"
        );
        assert!(
            log.contains("(transient); next try in 10ms\n"),
            "{date}: {log}"
        );
        assert!(took < Duration::from_secs(3), "{date}: {took:?}");
    }
}

#[test]
fn waits_until_a_real_servers_retry_after_date_by_its_date_line() {
    if !common::have_curl("pushback::waits_until_a_real_servers_retry_after_date_by_its_date_line")
    {
        return;
    }
    let server = Server::start_with(1, &["date"]);
    let url = server.url();
    let started = Instant::now();
    let out = retry()
        .args(["-n", "3", "-d", "10ms"])
        .args(["--delay-from-output", r"Retry-After: (.+)"])
        .arg("--")
        .args(CURL)
        .arg(&url)
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(log.contains("succeeded on try 2/3"), "{log}");
    assert!(
        log.contains("(asked for by the output: until its HTTP-date, by the server's Date: line)"),
        "{log}"
    );
    // Two seconds after the Date: line, or three when a second turned between the two lines.
    assert!(took >= Duration::from_secs(2), "{took:?}\n{log}");
    assert!(took < common::STEP_LIMIT, "{took:?}\n{log}");
}
