//! Traces (docs/dashboards.md#traces) through the real binary, against a local OTLP/HTTP
//! receiver: the run's span and one per try in the trace of the `TRACEPARENT` given, each try
//! told its own span; a trace of the run's own without one, or with one the W3C specification
//! refuses; propagation without an endpoint; nothing at all without either; a receiver that
//! never answers or answers 500 costs a bounded time and one warning, never the exit status.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{self, output_bounded, retry_std, stderr_of};

const GIVEN: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const GIVEN_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const GIVEN_SPAN: &str = "00f067aa0ba902b7";

/// A local OTLP/HTTP receiver: each request's first line and body, kept in order.
struct Receiver {
    url: String,
    seen: Arc<Mutex<Vec<(String, String)>>>,
}

impl Receiver {
    /// Answers every request with `status`, or (0) reads it and never answers.
    fn start(status: u16) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                if let Some(request) = read_request(&mut conn) {
                    kept.lock().unwrap().push(request);
                }
                if status == 0 {
                    held.push(conn);
                    continue;
                }
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
            }
        });
        Receiver { url, seen }
    }

    fn requests(&self) -> Vec<(String, String)> {
        self.seen.lock().unwrap().clone()
    }

    /// The spans of the one request received.
    fn spans(&self) -> Vec<Value> {
        let requests = self.requests();
        assert_eq!(requests.len(), 1, "{requests:?}");
        let (line, body) = &requests[0];
        assert!(line.starts_with("POST /v1/traces HTTP/1.1"), "{line}");
        let v: Value = serde_json::from_str(body).expect("the body is JSON");
        v["resourceSpans"][0]["scopeSpans"][0]["spans"]
            .as_array()
            .expect("spans")
            .clone()
    }
}

/// A request's first line and body, read by its content-length.
fn read_request(conn: &mut TcpStream) -> Option<(String, String)> {
    conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut bytes = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        let n = conn.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        bytes.extend_from_slice(&buf[..n]);
        if let Some(i) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&bytes[..head_end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while bytes.len() < head_end + length {
        let n = conn.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&buf[..n]);
    }
    let line = head.lines().next().unwrap_or("").to_string();
    Some((
        line,
        String::from_utf8_lossy(&bytes[head_end..]).to_string(),
    ))
}

/// `retry` without any trace setting of the test's own environment, with `vars` set.
fn retry_with(vars: &[(&str, &str)]) -> Command {
    let mut cmd = retry_std();
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("OTEL_") || name == "TRACEPARENT" || name == "TRACESTATE" {
            cmd.env_remove(name.as_ref());
        }
    }
    cmd.envs(vars.iter().copied());
    cmd
}

/// The `TRACEPARENT` that try `n` found in its environment (written to `dir/env.N`), if any.
fn traceparent_of(dir: &Path, n: u64) -> Option<String> {
    let env = std::fs::read_to_string(dir.join(format!("env.{n}"))).expect("the try's env");
    env.lines()
        .find_map(|l| l.strip_prefix("TRACEPARENT="))
        .map(str::to_string)
}

/// A try that writes its environment to `dir/env.N` and fails until try `passes`.
fn tries_writing_env(dir: &Path, passes: u64) -> Vec<String> {
    let script = format!(
        "env > '{}/env.'$RETRY_ATTEMPT; test $RETRY_ATTEMPT -ge {passes}",
        dir.display()
    );
    ["--", "sh", "-c", &script].map(String::from).to_vec()
}

/// The value of attribute `key` of `span`, as a string (OTLP writes 64-bit integers so).
fn attribute(span: &Value, key: &str) -> Option<String> {
    let found = span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)?;
    let v = &found["value"];
    v["stringValue"]
        .as_str()
        .or(v["intValue"].as_str())
        .map(str::to_string)
}

fn id_of<'a>(span: &'a Value, key: &str) -> &'a str {
    span[key].as_str().unwrap_or("")
}

#[test]
fn a_run_that_fails_twice_exports_its_span_and_one_per_try_in_the_callers_trace() {
    let dir = common::temp_dir("traces-three");
    let receiver = Receiver::start(200);
    let mut cmd = retry_with(&[
        ("TRACEPARENT", GIVEN),
        ("TRACESTATE", "vendor=abc"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url),
    ]);
    let hook = format!(
        "echo \"$TRACEPARENT\" > '{}/hook.'$RETRY_ATTEMPT",
        dir.display()
    );
    cmd.args(["-n", "4", "-d", "10ms", "-q", "--on-retry", &hook])
        .args(tries_writing_env(&dir, 3));
    let out = output_bounded(&mut cmd, common::TEST_LIMIT);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stderr_of(&out), "");
    let spans = receiver.spans();
    assert_eq!(spans.len(), 4, "{spans:?}");
    let run = &spans[0];
    assert_eq!(id_of(run, "traceId"), GIVEN_TRACE);
    assert_eq!(id_of(run, "parentSpanId"), GIVEN_SPAN);
    assert_eq!(id_of(run, "traceState"), "vendor=abc");
    assert_eq!(attribute(run, "retry.run.tries").as_deref(), Some("3"));
    assert_eq!(
        attribute(run, "retry.run.outcome").as_deref(),
        Some("success")
    );
    assert_eq!(attribute(run, "process.exit.code").as_deref(), Some("0"));
    assert_eq!(attribute(run, "process.command").as_deref(), Some("sh"));
    assert!(run.get("status").is_none(), "{run}");
    let run_span = id_of(run, "spanId");
    for (i, span) in spans[1..].iter().enumerate() {
        let n = i as u64 + 1;
        assert_eq!(id_of(span, "traceId"), GIVEN_TRACE);
        assert_eq!(id_of(span, "parentSpanId"), run_span);
        let told = traceparent_of(&dir, n).expect("TRACEPARENT in the try's env");
        let own = format!("00-{GIVEN_TRACE}-{}-01", id_of(span, "spanId"));
        assert_eq!(told, own, "try {n}");
        assert_eq!(attribute(span, "retry.try.number"), Some(n.to_string()));
        let code = if n < 3 { "1" } else { "0" };
        assert_eq!(attribute(span, "process.exit.code").as_deref(), Some(code));
        let failed = n < 3;
        assert_eq!(attribute(span, "error.type").is_some(), failed, "{span}");
        assert_eq!(span["status"]["code"] == 2, failed, "{span}");
        let decision = if failed { "retry" } else { "succeed" };
        assert_eq!(
            attribute(span, "retry.try.decision").as_deref(),
            Some(decision)
        );
        // Arguments may hold secrets: only the command's name is sent.
        assert!(!span.to_string().contains("RETRY_ATTEMPT"), "{span}");
    }
    // Spans begin in the order of the tries, each inside the run.
    let time = |s: &Value, k: &str| s[k].as_str().unwrap().parse::<u128>().unwrap();
    assert!(time(&spans[1], "startTimeUnixNano") >= time(run, "startTimeUnixNano"));
    assert!(time(&spans[2], "startTimeUnixNano") >= time(&spans[1], "endTimeUnixNano"));
    assert!(time(&spans[3], "endTimeUnixNano") <= time(run, "endTimeUnixNano"));
    // A hook is part of the run, not of the try before it.
    let hook = std::fs::read_to_string(dir.join("hook.1")).unwrap();
    assert_eq!(hook.trim_end(), format!("00-{GIVEN_TRACE}-{run_span}-01"));
    // TRACESTATE reaches the tries as it was.
    let env = std::fs::read_to_string(dir.join("env.1")).unwrap();
    assert!(env.contains("TRACESTATE=vendor=abc\n"), "{env}");
}

#[test]
fn a_run_that_gives_up_exports_its_status_and_the_failure() {
    let dir = common::temp_dir("traces-gave-up");
    let receiver = Receiver::start(200);
    let mut cmd = retry_with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)]);
    cmd.args(["-n", "2", "-d", "10ms", "-q", "--", "sh", "-c", "exit 7"]);
    let out = output_bounded(&mut cmd, common::TEST_LIMIT);
    assert_eq!(out.status.code(), Some(7), "{}", stderr_of(&out));
    let spans = receiver.spans();
    assert_eq!(spans.len(), 3, "{spans:?}");
    let run = &spans[0];
    assert_eq!(attribute(run, "process.exit.code").as_deref(), Some("7"));
    assert_eq!(attribute(run, "error.type").as_deref(), Some("tries"));
    assert_eq!(
        attribute(run, "retry.run.outcome").as_deref(),
        Some("gave_up")
    );
    assert_eq!(run["status"]["code"], 2);
    assert_eq!(run["status"]["message"], "gave_up: tries");
    assert!(run.get("parentSpanId").is_none(), "{run}");
    let last = &spans[2];
    assert_eq!(attribute(last, "error.type").as_deref(), Some("7"));
    assert_eq!(
        attribute(last, "retry.try.decision").as_deref(),
        Some("give_up")
    );
    assert_eq!(
        attribute(last, "retry.try.stop_reason").as_deref(),
        Some("tries")
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn without_a_valid_traceparent_an_exporting_run_starts_a_trace_of_its_own() {
    let receiver = Receiver::start(200);
    let malformed = [
        None,
        Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1"),
        Some("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        Some("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
        Some("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"),
    ];
    let mut traces = Vec::new();
    for (i, given) in malformed.iter().enumerate() {
        let dir = common::temp_dir(&format!("traces-own-{i}"));
        let endpoint = format!("{}/v1/traces", receiver.url);
        let mut vars = vec![
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint.as_str()),
            ("TRACESTATE", "vendor=abc"),
        ];
        if let Some(given) = given {
            vars.push(("TRACEPARENT", given));
        }
        let mut cmd = retry_with(&vars);
        cmd.args(["-n", "1"]).args(tries_writing_env(&dir, 1));
        let out = output_bounded(&mut cmd, common::TEST_LIMIT);
        assert_eq!(out.status.code(), Some(0), "{given:?}: {}", stderr_of(&out));
        assert_eq!(stderr_of(&out), "", "{given:?}");
        let told = traceparent_of(&dir, 1).expect("a TRACEPARENT");
        let parts: Vec<&str> = told.split('-').collect();
        assert_eq!(parts.len(), 4, "{told}");
        assert_ne!(parts[1], GIVEN_TRACE, "{given:?}");
        assert_ne!(parts[1], "0".repeat(32), "{given:?}");
        assert_eq!(parts[3], "01", "{given:?}");
        // The caller's TRACESTATE is of a trace the try is not in: it is given it empty.
        let env = std::fs::read_to_string(dir.join("env.1")).unwrap();
        let state: Vec<&str> = env
            .lines()
            .filter(|l| l.starts_with("TRACESTATE="))
            .collect();
        assert_eq!(state, ["TRACESTATE="], "{given:?}");
        traces.push(parts[1].to_string());
        let _ = std::fs::remove_dir_all(dir);
    }
    let requests = receiver.requests();
    assert_eq!(requests.len(), malformed.len());
    for ((_, body), trace) in requests.iter().zip(&traces) {
        let v: Value = serde_json::from_str(body).unwrap();
        let spans = &v["resourceSpans"][0]["scopeSpans"][0]["spans"];
        assert_eq!(spans[0]["traceId"], trace.as_str());
        assert!(spans[0].get("parentSpanId").is_none(), "{}", spans[0]);
    }
    traces.sort();
    traces.dedup();
    assert_eq!(traces.len(), malformed.len(), "each run its own trace");
}

#[test]
fn a_traceparent_without_an_endpoint_is_passed_on_as_each_trys_own_span() {
    let dir = common::temp_dir("traces-passed-on");
    // Flags 00: the caller does not record; they are passed on as they are.
    let given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
    let mut cmd = retry_with(&[("TRACEPARENT", given)]);
    cmd.args(["-n", "2", "-d", "10ms", "-q"])
        .args(tries_writing_env(&dir, 2));
    let out = output_bounded(&mut cmd, common::TEST_LIMIT);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let first = traceparent_of(&dir, 1).unwrap();
    let second = traceparent_of(&dir, 2).unwrap();
    for told in [&first, &second] {
        assert!(told.starts_with(&format!("00-{GIVEN_TRACE}-")), "{told}");
        assert!(told.ends_with("-00"), "{told}");
        assert_ne!(told.as_str(), given);
    }
    assert_ne!(first, second);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn neither_a_traceparent_nor_an_endpoint_leaves_the_trys_environment_without_one() {
    let dir = common::temp_dir("traces-none");
    let mut cmd = retry_with(&[("OTEL_SERVICE_NAME", "x")]);
    cmd.args(["-n", "1"]).args(tries_writing_env(&dir, 1));
    let out = output_bounded(&mut cmd, common::TEST_LIMIT);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(traceparent_of(&dir, 1), None);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_receiver_that_never_answers_costs_the_run_its_export_deadline_only() {
    let receiver = Receiver::start(0);
    let mut cmd = retry_with(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "600"),
    ]);
    cmd.args(["-n", "1", "-q", "--", "sh", "-c", "exit 3"]);
    let started = Instant::now();
    let out = output_bounded(&mut cmd, common::TEST_LIMIT);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    assert!(took >= Duration::from_millis(550), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let log = stderr_of(&out);
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("spans")).collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(warnings[0].contains("no answer within"), "{log}");
}

#[test]
fn a_receiver_that_answers_500_is_one_warning_and_the_exit_status_stands() {
    let receiver = Receiver::start(500);
    let mut cmd = retry_with(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url),
        ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s3cr3t-0123456789"),
    ]);
    cmd.args(["-n", "1", "-q", "--", "true"]);
    let out = output_bounded(&mut cmd, common::TEST_LIMIT);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let log = stderr_of(&out);
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.contains("the server answered 500"), "{log}");
    assert!(log.contains(&receiver.url), "{log}");
    assert!(!log.contains("0123456789"), "{log}");
    // Tried again on 5xx, a few times at most.
    let n = receiver.requests().len();
    assert!((1..=3).contains(&n), "{n}");
}

#[test]
fn a_disabled_sdk_exporter_none_or_another_protocol_sends_nothing() {
    let receiver = Receiver::start(200);
    let cases: [(&str, &str, bool, bool); 4] = [
        // (variable, value, tries get a span of their own, a warning)
        ("OTEL_SDK_DISABLED", "true", false, false),
        ("OTEL_TRACES_EXPORTER", "none", true, false),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", true, true),
        (
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "http/protobuf",
            true,
            true,
        ),
    ];
    for (i, (variable, value, own, warned)) in cases.into_iter().enumerate() {
        let dir = common::temp_dir(&format!("traces-off-{i}"));
        let mut cmd = retry_with(&[
            ("TRACEPARENT", GIVEN),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url),
            (variable, value),
        ]);
        cmd.args(["-n", "1", "-q"]).args(tries_writing_env(&dir, 1));
        let out = output_bounded(&mut cmd, common::TEST_LIMIT);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{variable}: {}",
            stderr_of(&out)
        );
        let log = stderr_of(&out);
        assert_eq!(
            log.lines().count(),
            usize::from(warned),
            "{variable}: {log}"
        );
        if warned {
            assert!(log.contains(variable) && log.contains(value), "{log}");
        }
        let told = traceparent_of(&dir, 1).unwrap();
        assert_eq!(told != GIVEN, own, "{variable}: {told}");
        assert!(told.contains(GIVEN_TRACE), "{told}");
        let _ = std::fs::remove_dir_all(dir);
    }
    assert_eq!(receiver.requests(), Vec::new());
}

#[test]
fn a_signal_during_the_export_ends_the_run_by_the_exports_deadline_of_that_signal() {
    let receiver = Receiver::start(0);
    let mut cmd = retry_with(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "1500"),
    ]);
    let mut child = cmd
        .args(["-n", "1", "--", "true"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let sent = common::wait_until(common::STEP_LIMIT, || !receiver.requests().is_empty());
    assert!(sent, "no request came");
    let signalled = Instant::now();
    common::send(child.id(), nix::libc::SIGTERM);
    let status = common::wait_bounded(&mut child, common::TEST_LIMIT);
    let took = signalled.elapsed();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(nix::libc::SIGTERM), "{status:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(log.contains("spans were not sent"), "{log}");
    assert!(
        log.contains("received SIGTERM while writing the run's reports"),
        "{log}"
    );
}

#[test]
fn a_caller_that_does_not_sample_gets_its_trace_passed_on_and_nothing_sent() {
    let dir = common::temp_dir("traces-unsampled");
    let receiver = Receiver::start(200);
    let given = GIVEN.replace("-01", "-00");
    let mut cmd = retry_with(&[
        ("TRACEPARENT", &given),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url),
    ]);
    cmd.args(["-n", "1", "-q"]).args(tries_writing_env(&dir, 1));
    let out = output_bounded(&mut cmd, common::TEST_LIMIT);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stderr_of(&out), "");
    let told = traceparent_of(&dir, 1).unwrap();
    assert!(told.starts_with(&format!("00-{GIVEN_TRACE}-")), "{told}");
    assert!(told.ends_with("-00") && told != given, "{told}");
    assert_eq!(receiver.requests(), Vec::new());
    let _ = std::fs::remove_dir_all(dir);
}
