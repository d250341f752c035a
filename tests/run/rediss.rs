//! `rediss://` end to end (docs/redis.md#tls): the quota, the dead letters and `--stats` over TLS
//! to a `redis-server` that speaks only TLS, verified against `RETRY_REDIS_CA`; and each refusal
//! one line naming the host and the reason, with nothing run against the wrong server.

use crate::common;
use crate::common::every_option::every_option;
use crate::common::tls::{Pki, ServerCert, TlsServer};

use std::path::Path;
use std::process::Output;

use common::stderr_of;

fn run(dir: &Path, ca: &Path, args: &[&str]) -> Output {
    run_with(dir, ca, &[], args)
}

/// [`run`], with these variables more (a user and a password, say).
fn run_with(dir: &Path, ca: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = common::retry();
    cmd.current_dir(dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_RUNTIME_DIR", dir)
        .env("RETRY_REDIS_CA", ca)
        .env_remove("RETRY_REDIS_PASSWORD")
        .env_remove("RETRY_REDIS_USER")
        .env_remove("RETRY_REDIS_CERT")
        .env_remove("RETRY_REDIS_KEY")
        .timeout(common::STEP_LIMIT);
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.args(args).output().unwrap()
}

#[test]
fn the_quota_dead_letters_and_stats_go_over_tls() {
    let (Some(pki), Some(server)) = (
        Pki::get("rediss-reach"),
        TlsServer::start("rediss-reach", ServerCert::Good, false),
    ) else {
        return;
    };
    let dir = common::runtime_dir("rediss-reach");
    let url = format!("rediss://127.0.0.1:{}/jobs", server.port);
    let quota = format!("{url}:ratio=0,floor=0,cap=5");
    for left in ["4.00", "3.00"] {
        let out = run(
            &dir,
            &pki.ca(),
            &["-v", "-n", "2", "-d", "0", "--quota", &quota, "--", "false"],
        );
        let log = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{log}");
        assert!(!log.contains("warning"), "{log}");
        assert!(log.contains(&format!("retry, {left} tokens left")), "{log}");
    }
    let out = run(
        &dir,
        &pki.ca(),
        &["--dead-letter", &url, "-n", "1", "--", "false"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(!stderr_of(&out).contains("warning"), "{}", stderr_of(&out));
    let out = run(&dir, &pki.ca(), &["--stats", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let out = run(
        &dir,
        &pki.ca(),
        &["--replay", &url, "--dry-run", "--log-format", "json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(common::stdout_of(&out).matches("\"id\":").count(), 1);
}

#[test]
fn a_certificate_that_fails_verification_is_one_line_naming_the_host_and_why() {
    let Some(pki) = Pki::get("rediss-refused") else {
        return;
    };
    let dir = common::runtime_dir("rediss-refused");
    for (cert, why) in [
        (ServerCert::OtherName, "other.example"),
        (ServerCert::Expired, "expired"),
        (ServerCert::UnknownIssuer, "unknown authority"),
    ] {
        let Some(server) = TlsServer::start("rediss-refused", cert, false) else {
            return;
        };
        let url = format!("rediss://127.0.0.1:{}/jobs", server.port);
        let out = run(&dir, &pki.ca(), &["--stats", &url]);
        let err = stderr_of(&out);
        assert_ne!(out.status.code(), Some(0), "{cert:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{cert:?}: {err}");
        assert!(
            err.contains("127.0.0.1") && err.to_lowercase().contains(why),
            "{cert:?}: {err}"
        );
        // A run warns once, and its quota is kept on this machine.
        let quota = format!("{url}:cap=5");
        let out = run(
            &dir,
            &pki.ca(),
            &["-n", "2", "-d", "0", "--quota", &quota, "--", "false"],
        );
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{cert:?}: {err}");
        assert_eq!(err.matches("warning").count(), 1, "{cert:?}: {err}");
    }
    // A plain URL at the TLS port says to use rediss://.
    let Some(server) = TlsServer::start("rediss-plain", ServerCert::Good, false) else {
        return;
    };
    let url = format!("redis://127.0.0.1:{}/jobs", server.port);
    let out = run(&dir, &pki.ca(), &["--stats", &url]);
    assert!(
        stderr_of(&out).contains("use rediss://"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn tls_files_that_cannot_be_used_are_said_before_the_server_is_tried() {
    let dir = common::temp_dir("rediss-files");
    // Nothing listens there: the files' fault is still the one said.
    let url = format!(
        "rediss://127.0.0.1:{}/jobs",
        common::redis_server::free_port()
    );
    let out = run(&dir, &dir.join("no-such-ca.pem"), &["--stats", &url]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("RETRY_REDIS_CA") && err.contains("no-such-ca.pem"),
        "{err}"
    );
    assert!(!err.contains("refused"), "{err}");
}

#[test]
fn an_acl_user_over_tls_serves_every_option_and_no_piece_of_its_password_is_shown() {
    const PASSWORD: &str = "tls-pw-0123456789-abcdefghij";
    let password = format!(">{PASSWORD}");
    let extra = [
        "--user", "default", "off", "--user", "fleet", "on", &password, "~*", "&*", "+@all",
    ];
    let (Some(pki), Some(server)) = (
        Pki::get("rediss-acl"),
        TlsServer::start_with("rediss-acl", ServerCert::Good, false, &extra),
    ) else {
        return;
    };
    let dir = common::runtime_dir("rediss-acl");
    let url = format!("rediss://fleet:{PASSWORD}@127.0.0.1:{}/jobs", server.port);
    let quota = format!("{url}:ratio=0,floor=0,cap=5");
    let mut outputs = Vec::new();
    let out = run(
        &dir,
        &pki.ca(),
        &["-v", "-n", "2", "-d", "0", "--quota", &quota, "--", "false"],
    );
    assert!(
        stderr_of(&out).contains("retry, 4.00 tokens left"),
        "{}",
        stderr_of(&out)
    );
    outputs.push(out);
    let out = run(
        &dir,
        &pki.ca(),
        &["--dead-letter", &url, "-n", "1", "--", "false"],
    );
    assert!(!stderr_of(&out).contains("cannot"), "{}", stderr_of(&out));
    outputs.push(out);
    // A wrong password: refused, a misconfiguration, never "cannot be reached".
    let wrong = url.replace(PASSWORD, "tls-pw-wrong-0000000000");
    let out = run(&dir, &pki.ca(), &["--stats", &wrong]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(
        err.contains("WRONGPASS") && !err.contains("cannot be reached"),
        "{err}"
    );
    outputs.push(out);
    // Every option on a store of its own, the user and password from the environment.
    let every = format!("rediss://127.0.0.1:{}/every", server.port);
    let env = [
        ("RETRY_REDIS_USER", "fleet"),
        ("RETRY_REDIS_PASSWORD", PASSWORD),
    ];
    let run_every = |args: &[&str]| run_with(&dir, &pki.ca(), &env, args);
    outputs.extend(every_option(&dir, &every, &run_every));
    for out in &outputs {
        let text = format!("{}{}", common::stdout_of(out), stderr_of(out));
        for piece in PASSWORD.as_bytes().windows(8) {
            let piece = std::str::from_utf8(piece).unwrap();
            assert!(
                !text.contains(piece),
                "'{piece}' of the password in: {text}"
            );
        }
    }
}

/// The password of the hostile server's tests: long enough that a piece of it is unmistakable.
const ECHOED: &str = "echo-pw-Qm4zR8vX2kL7-tls";

/// The words of the RESP command at the start of `bytes`, once it has come whole.
fn command_of(bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    fn line(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
        let end = at + bytes.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
        let n = std::str::from_utf8(&bytes[at + 1..end])
            .ok()?
            .parse()
            .ok()?;
        Some((n, end + 2))
    }
    let (count, mut at) = line(bytes, 0)?;
    let mut words = Vec::new();
    for _ in 0..count {
        let (len, start) = line(bytes, at)?;
        words.push(bytes.get(start..start + len)?.to_vec());
        at = start + len + 2;
    }
    (bytes.len() >= at).then_some(words)
}

/// A TLS server of the test's own (rustls's, showing the tests' good certificate) that answers
/// the first command of each connection as a server that does not know it answers, quoting its
/// arguments back (`-ERR unknown command 'AUTH', with args beginning with: 'fleet' 'PASSWORD'`),
/// then closes. It takes `n` connections, or what comes within the step limit, and returns
/// what it quoted.
fn echoing_tls_server(pki: &Pki, n: usize) -> (u16, std::thread::JoinHandle<Vec<String>>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::io::{Read, Write};
    use std::sync::Arc;

    let certs = CertificateDer::pem_file_iter(pki.path("server.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(pki.path("server.key")).unwrap();
    // ring's provider, as `retry` uses it (its key exchanges lack the post-quantum hybrid).
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
    listener.set_nonblocking(true).unwrap();
    let server = std::thread::spawn(move || {
        let mut quoted = Vec::new();
        let until = std::time::Instant::now() + common::STEP_LIMIT;
        let mut taken = 0;
        while taken < n && std::time::Instant::now() < until {
            let Ok((tcp, _)) = listener.accept() else {
                std::thread::sleep(std::time::Duration::from_millis(5));
                continue;
            };
            taken += 1;
            let _ = tcp.set_nonblocking(false);
            let _ = tcp.set_read_timeout(Some(std::time::Duration::from_secs(2)));
            let conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            let mut got = Vec::new();
            let words = loop {
                if let Some(words) = command_of(&got) {
                    break words;
                }
                let mut chunk = [0u8; 256];
                match tls.read(&mut chunk) {
                    Ok(0) | Err(_) => break Vec::new(),
                    Ok(n) => got.extend_from_slice(&chunk[..n]),
                }
            };
            let Some((name, args)) = words.split_first() else {
                continue;
            };
            let args: Vec<String> = args
                .iter()
                .map(|a| format!("'{}' ", String::from_utf8_lossy(a)))
                .collect();
            let reply = format!(
                "-ERR unknown command '{}', with args beginning with: {}\r\n",
                String::from_utf8_lossy(name),
                args.concat()
            );
            let _ = tls.write_all(reply.as_bytes());
            let _ = tls.flush();
            tls.conn.send_close_notify();
            let _ = tls.flush();
            quoted.push(reply);
        }
        quoted
    });
    (port, server)
}

#[test]
fn a_server_that_echoes_auth_over_tls_with_a_user_shows_no_piece_of_the_password() {
    let Some(pki) = Pki::get("rediss-echo") else {
        return;
    };
    let dir = common::runtime_dir("rediss-echo");
    let (port, server) = echoing_tls_server(pki, 4);
    let in_url = format!("rediss://fleet:{ECHOED}@127.0.0.1:{port}/jobs");
    let bare = format!("rediss://127.0.0.1:{port}/jobs");
    let env = [
        ("RETRY_REDIS_USER", "fleet"),
        ("RETRY_REDIS_PASSWORD", ECHOED),
    ];
    let mut outputs = Vec::new();
    for (url, env) in [(&in_url, &[][..]), (&bare, &env[..])] {
        let out = run_with(&dir, &pki.ca(), env, &["--stats", url]);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(125), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("ERR unknown command"), "{err}");
        outputs.push(out);
    }
    let out = run_with(&dir, &pki.ca(), &env, &["--quota", &bare, "--", "true"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(err.matches("warning").count(), 1, "{err}");
    outputs.push(out);
    let out = run_with(
        &dir,
        &pki.ca(),
        &env,
        &["--dead-letter", &bare, "-n", "1", "--", "false"],
    );
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.matches("warning").count(), 1, "{err}");
    outputs.push(out);
    // The server did quote the user and the whole password back, over TLS, each time.
    let quoted = server.join().unwrap();
    assert_eq!(quoted.len(), 4, "{quoted:?}");
    for reply in &quoted {
        assert!(
            reply.contains(&format!(
                "'AUTH', with args beginning with: 'fleet' '{ECHOED}'"
            )),
            "{reply}"
        );
    }
    for out in &outputs {
        let text = format!("{}{}", common::stdout_of(out), stderr_of(out));
        for piece in ECHOED.as_bytes().windows(8) {
            let piece = std::str::from_utf8(piece).unwrap();
            assert!(
                !text.contains(piece),
                "'{piece}' of the password in: {text}"
            );
        }
    }
}
