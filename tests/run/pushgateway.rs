//! `--pushgateway URL` (docs/dashboards.md#pushgateway) through the real binary: against a real
//! Pushgateway (Debian's `prometheus-pushgateway`), a job's last success stays that of its run
//! that succeeded after a run that failed pushes; a gateway that hangs costs the run no more
//! than the push's deadline; the credentials of the environment go in a header and never in
//! what `retry` prints.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::receiver::{Answer, Receiver};
use crate::common::{self, output_bounded, retry_std, stderr_of};

/// The push's deadline (docs/dashboards.md#pushgateway).
const DEADLINE: Duration = Duration::from_secs(2);

/// A Pushgateway of this test, stopped when the test ends, however it ends.
struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET path` of the server on `port`, over HTTP/1.0: the body of a 200 answer.
fn get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).ok()?;
    let (head, body) = reply.split_once("\r\n\r\n")?;
    head.contains(" 200 ").then(|| body.to_string())
}

/// Starts a Pushgateway on a free port of 127.0.0.1 and waits until it answers.
fn gateway() -> (Gateway, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let gateway = Gateway(
        Command::new("prometheus-pushgateway")
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus-pushgateway"),
    );
    assert!(
        common::wait_until(common::STEP_LIMIT, || get(port, "/metrics").is_some()),
        "the Pushgateway did not answer on port {port}"
    );
    (gateway, port)
}

/// The value of the sample `name{...job="JOB"...}` in `text`.
fn sample(text: &str, name: &str, job: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| l.contains(&format!("job=\"{job}\"")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn a_failed_run_never_erases_the_last_success_a_real_pushgateway_holds() {
    let test = "pushgateway::a_failed_run_never_erases_the_last_success_a_real_pushgateway_holds";
    let present = common::on_path("prometheus-pushgateway");
    if !common::have_package(
        test,
        "prometheus-pushgateway",
        "prometheus-pushgateway",
        present,
    ) {
        return;
    }
    let (_gateway, port) = gateway();
    let url = format!("http://127.0.0.1:{port}");
    let dir = common::temp_dir("pushgateway-last-success");
    let file = dir.join("retry.prom");
    let push = |script: &str, metrics: bool| {
        let mut cmd = retry_std();
        cmd.args(["-n", "2", "-d", "10ms", "-q", "--label", "nightly"]);
        cmd.args(["--pushgateway", &url]);
        if metrics {
            cmd.arg("--metrics").arg(&file);
        }
        output_bounded(cmd.args(["--", "sh", "-c", script]), common::TEST_LIMIT)
    };
    // The success, whose time the textfile of --metrics gives too.
    let out = push("exit 0", true);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stderr_of(&out), "");
    let text = std::fs::read_to_string(&file).expect("the metrics file");
    let success = sample(&text, "retry_last_success_timestamp_seconds", "nightly").unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let out = push("exit 3", false);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(!err.contains("warning"), "{err}");
    let held = get(port, "/metrics").expect("the Pushgateway's metrics");
    let last_success = sample(&held, "retry_last_success_timestamp_seconds", "nightly");
    assert_eq!(last_success, Some(success), "{held}");
    // The failure's push did land: its exit code and tries are the job's last.
    assert_eq!(
        sample(&held, "retry_last_exit_code", "nightly"),
        Some(3.0),
        "{held}"
    );
    assert_eq!(
        sample(&held, "retry_last_tries", "nightly"),
        Some(2.0),
        "{held}"
    );
    let last_run = sample(&held, "retry_last_run_timestamp_seconds", "nightly").unwrap();
    assert!(last_run > success, "{held}");
    // No counter: the Pushgateway would hold one run's counts, not a total.
    assert!(!held.contains("retry_runs_total"), "{held}");
    // A job whose name a URL's path cannot hold is its own group all the same.
    let mut cmd = retry_std();
    cmd.args(["-n", "1", "-q", "--label", "a/b ??>", "--pushgateway", &url]);
    let out = output_bounded(cmd.args(["--", "true"]), common::TEST_LIMIT);
    assert_eq!(stderr_of(&out), "");
    let held = get(port, "/metrics").expect("the Pushgateway's metrics");
    assert_eq!(
        sample(&held, "retry_last_tries", "a/b ??>"),
        Some(1.0),
        "{held}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_gateway_that_hangs_costs_the_run_at_most_the_deadline() {
    let receiver = Receiver::start(Answer::Hang);
    let started = Instant::now();
    let out = output_bounded(
        retry_std()
            .args(["-n", "1", "-q", "--pushgateway", &receiver.url("")])
            .args(["--", "true"]),
        common::TEST_LIMIT,
    );
    let took = started.elapsed();
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(took >= DEADLINE - Duration::from_millis(300), "{took:?}");
    assert!(
        took < DEADLINE + Duration::from_millis(2500),
        "{took:?}: {err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("warning: cannot send this run's metrics to --pushgateway")
            && err.contains("no answer within 2s"),
        "{err}"
    );
    // A budget that ends sooner shortens the push, down to half a second.
    let started = Instant::now();
    let out = output_bounded(
        retry_std()
            .args([
                "-n",
                "1",
                "-q",
                "--budget",
                "100ms",
                "--pushgateway",
                &receiver.url(""),
            ])
            .args(["--", "true"]),
        common::TEST_LIMIT,
    );
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(0));
    assert!(took >= Duration::from_millis(400), "{took:?}");
    assert!(took < DEADLINE, "{took:?}");
}

#[test]
fn the_credentials_of_the_environment_go_in_a_header_and_are_never_printed() {
    let password = "pw-7f3a9c1e-secret";
    let receiver = Receiver::start(Answer::Status(401));
    let out = output_bounded(
        retry_std()
            .env("RETRY_PUSHGATEWAY_USER", "ci")
            .env("RETRY_PUSHGATEWAY_PASSWORD", password)
            .args(["-n", "1", "--log-format", "json", "--label", "a/b c"])
            .args(["--pushgateway", &receiver.url("/gw/"), "--", "true"]),
        common::TEST_LIMIT,
    );
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("the server answered 401"), "{err}");
    assert!(!err.contains(&password[..8]), "{err}");
    let got = receiver.got();
    assert_eq!(got.len(), 1, "{got:?}");
    // A job whose name a path cannot hold goes in base64.
    assert_eq!(got[0].path, "/gw/metrics/job@base64/YS9iIGM=");
    assert_eq!(got[0].method, "POST");
    // "ci:pw-7f3a9c1e-secret" in base64.
    assert_eq!(
        got[0].header("authorization"),
        Some("Basic Y2k6cHctN2YzYTljMWUtc2VjcmV0")
    );
}
