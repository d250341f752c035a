//! `--ping URL` (docs/dashboards.md#pings) through the real binary, against a receiver of the
//! test's own: a run that gives up pings its start and `/fail`, its body the exit status and
//! the tail of its output, one that succeeds its start and its success, each with the run's
//! id, and a run without `--ping` nothing; an HTTPS receiver whose certificate the trusted
//! roots hold is pinged; one that hangs or answers 500, or whose certificate is not trusted,
//! costs the run no more than the deadline and one warning; the URL's path (its secret) is
//! printed nowhere.

use std::time::{Duration, Instant};

use crate::common::receiver::{Answer, Receiver};
use crate::common::{self, output_bounded, retry_std, stderr_of, stdout_of};

/// The ping's deadline (docs/dashboards.md#pings).
const DEADLINE: Duration = Duration::from_secs(2);

/// A secret of the tests' ping URLs, which no output may show.
const KEY: &str = "5e3c7f0a-ping-key-91d2";

fn run(args: &[&str]) -> std::process::Output {
    output_bounded(retry_std().args(args), common::TEST_LIMIT)
}

#[test]
fn a_run_that_gives_up_pings_its_start_then_fail_with_its_status_and_the_tail_of_its_output() {
    let receiver = Receiver::start(Answer::Status(200));
    let url = receiver.url(&format!("/{KEY}"));
    let script = "echo \"id=$RETRY_RUN_ID try $RETRY_ATTEMPT\"; echo oops >&2; exit 3";
    let out = run(&[
        "-n", "2", "-d", "10ms", "-q", "--ping", &url, "--", "sh", "-c", script,
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    let id = stdout_of(&out)
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("id="))
        .and_then(|l| l.split(' ').next())
        .expect("the run's id")
        .to_string();
    let got = receiver.got();
    let paths: Vec<&str> = got.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            format!("/{KEY}/start?rid={id}"),
            format!("/{KEY}/fail?rid={id}")
        ],
        "{got:?}"
    );
    // The exit status and why the run ended, then the last try's output, both streams.
    assert_eq!(
        String::from_utf8_lossy(&got[1].body),
        format!("exit_code=3 outcome=gave_up reason=tries tries=2\nid={id} try 2\noops\n")
    );
    assert!(got[0].body.is_empty());
}

#[test]
fn a_run_that_succeeds_pings_its_start_then_its_success_and_one_without_ping_nothing() {
    let receiver = Receiver::start(Answer::Status(200));
    let url = receiver.url(&format!("/{KEY}?create=1"));
    let script = "echo $RETRY_RUN_ID; test $RETRY_ATTEMPT -ge 2";
    let out = run(&[
        "-n", "3", "-d", "10ms", "-q", "--ping", &url, "--", "sh", "-c", script,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let id = stdout_of(&out).lines().next().unwrap_or("").to_string();
    let paths: Vec<String> = receiver.got().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths,
        [
            format!("/{KEY}/start?create=1&rid={id}"),
            format!("/{KEY}?create=1&rid={id}")
        ]
    );
    let out = run(&["-n", "2", "-d", "10ms", "--", "sh", "-c", script]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(receiver.got().len(), 2);
}

/// Runs a failing command with `--ping url`, and checks that it ended with its own status
/// within the ping's deadline (and some), with one warning that names the URL without its
/// secret. Returns the warning.
fn costs_at_most_the_deadline(url: &str, env: &[(&str, &str)]) -> String {
    let started = Instant::now();
    let out = output_bounded(
        retry_std()
            .envs(env.iter().copied())
            .args(["-n", "1", "-q", "--ping", url, "--", "sh", "-c", "exit 4"]),
        common::TEST_LIMIT,
    );
    let took = started.elapsed();
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        took < DEADLINE + Duration::from_millis(2500),
        "{took:?}: {err}"
    );
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(!err.contains(KEY), "{err}");
    warnings[0].to_string()
}

#[test]
fn a_receiver_that_hangs_costs_the_run_at_most_the_deadline() {
    let receiver = Receiver::start(Answer::Hang);
    let started = Instant::now();
    let warning = costs_at_most_the_deadline(&receiver.url(&format!("/{KEY}")), &[]);
    // It did wait for an answer.
    assert!(started.elapsed() >= DEADLINE - Duration::from_millis(300));
    let shown = format!("--ping 'http://127.0.0.1:{}/…'", receiver.port);
    assert!(warning.contains(&shown), "{warning}");
    assert!(warning.contains("no answer within 2s"), "{warning}");
}

#[test]
fn a_receiver_that_answers_500_is_tried_again_within_the_deadline_then_warned_about() {
    let receiver = Receiver::start(Answer::Status(500));
    let warning = costs_at_most_the_deadline(&receiver.url(&format!("/{KEY}")), &[]);
    assert!(warning.contains("the server answered 500"), "{warning}");
    let got = receiver.got();
    let starts = got.iter().filter(|r| r.path.contains("/start?")).count();
    assert!((2..=3).contains(&starts), "{got:?}");
    assert!(
        got.iter()
            .any(|r| r.path.contains(&format!("/{KEY}/fail?"))),
        "{got:?}"
    );
}

/// An HTTPS receiver of the test's own (rustls's, showing the tests' good certificate, issued
/// by the tests' CA, for 127.0.0.1): it answers every request 200 and closes, for the step
/// limit at most. Its port, and the paths it read.
fn https_receiver(pki: &common::tls::Pki) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::io::{BufRead, BufReader, Write};
    use std::sync::{Arc, Mutex};

    let certs = CertificateDer::pem_file_iter(pki.path("server.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(pki.path("server.key")).unwrap();
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let config = Arc::new(config);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let paths = Arc::new(Mutex::new(Vec::new()));
    let seen = paths.clone();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let (config, seen) = (config.clone(), seen.clone());
            std::thread::spawn(move || {
                let _ = tcp.set_read_timeout(Some(common::STEP_LIMIT));
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = BufReader::new(rustls::StreamOwned::new(conn, tcp));
                let mut line = String::new();
                if tls.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                loop {
                    let mut header = String::new();
                    if tls.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                        break;
                    }
                }
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                seen.lock().unwrap().push(path);
                let tls = tls.get_mut();
                let _ = tls.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nOK",
                );
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    (port, paths)
}

#[test]
fn an_https_receiver_is_verified_against_the_trusted_roots_and_refused_with_one_line_otherwise() {
    let test = "ping::an_https_receiver_is_verified_against_the_trusted_roots_and_refused_with_one_line_otherwise";
    let Some(pki) = common::tls::Pki::get(test) else {
        return;
    };
    let (port, paths) = https_receiver(pki);
    let url = format!("https://127.0.0.1:{port}/{KEY}");
    // The tests' CA as the system's roots, as OpenSSL reads SSL_CERT_FILE.
    let ca = pki.ca();
    let out = output_bounded(
        retry_std()
            .env("SSL_CERT_FILE", &ca)
            .env("SSL_CERT_DIR", "/nonexistent")
            .args(["-n", "1", "-q", "--ping", &url, "--", "true"]),
        common::TEST_LIMIT,
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stderr_of(&out), "");
    let got = paths.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].starts_with(&format!("/{KEY}/start?rid=")), "{got:?}");
    assert!(got[1].starts_with(&format!("/{KEY}?rid=")), "{got:?}");
    // Roots that do not hold the tests' CA (a certificate of another name, as the one root).
    let other = pki.path("other.pem");
    let other = other.to_str().unwrap();
    let warning = costs_at_most_the_deadline(
        &url,
        &[("SSL_CERT_FILE", other), ("SSL_CERT_DIR", "/nonexistent")],
    );
    assert!(warning.contains("unknown authority"), "{warning}");
    assert_eq!(paths.lock().unwrap().len(), 2);
}

#[test]
fn the_secret_of_a_ping_url_is_printed_nowhere() {
    let receiver = Receiver::start(Answer::Status(500));
    let dir = common::temp_dir("ping-secret");
    let url = receiver.url(&format!("/{KEY}"));
    for format in ["human", "json"] {
        let out = run(&[
            "-n",
            "2",
            "-d",
            "10ms",
            "-v",
            "--log-format",
            format,
            "--ping",
            &url,
            "--dead-letter",
            dir.join("dead").to_str().unwrap(),
            "--history",
            dir.join("history").to_str().unwrap(),
            "--junit",
            dir.join("junit.xml").to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "exit 1",
        ]);
        assert_eq!(out.status.code(), Some(1));
        let all = format!("{}{}", stdout_of(&out), stderr_of(&out));
        assert!(all.contains("--ping"), "{all}");
        assert!(!all.contains(KEY) && !all.contains(&KEY[..8]), "{all}");
    }
    for file in ["dead", "history", "junit.xml"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        assert!(!text.contains(&KEY[..8]), "{file}: {text}");
    }
    // A server whose answer repeats the path it was asked for (a web server's page for a
    // missing file) is not shown repeating it.
    let echoing = Receiver::start(Answer::Echo(404));
    let out = run(&[
        "-n",
        "1",
        "--ping",
        &echoing.url(&format!("/{KEY}")),
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let said = stderr_of(&out);
    assert!(said.contains("answered 404"), "{said}");
    assert!(
        !said.contains(&KEY[..8]) && !said.contains(&KEY[16..]),
        "{said}"
    );
    // A URL refused keeps its secret too.
    let bad = format!("htps://hc-ping.com/{KEY}");
    let out = run(&["--ping", &bad, "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(!stderr_of(&out).contains(&KEY[..8]), "{}", stderr_of(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_url_is_one_line_naming_the_option_and_the_value_with_status_125() {
    for (option, value) in [("--ping", "ftp://x"), ("--pushgateway", "notaurl")] {
        let out = run(&[option, value, "--", "true"]);
        assert_eq!(out.status.code(), Some(125));
        let err = stderr_of(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(option) && err.contains(value), "{err}");
    }
}
