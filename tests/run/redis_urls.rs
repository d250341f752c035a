//! Your fleet's Redis (docs/redis.md), against servers the tests start: an ACL user named in the
//! URL or in the environment, for every option that takes a URL; credentials refused, which is a
//! misconfiguration (125 where a check is asked for, one warning in a run) and never an
//! unreachable server; a Unix socket; a plain URL at a port that speaks TLS; and a password that
//! no output holds, whole or in part.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Output;

use common::every_option::every_option;
use common::redis_server::Server;
use common::{json_lines, stderr_of, stdout_of};

const USER: &str = "fleet";
const PASSWORD: &str = "Zq7kLm2-fleet-Pw91xR";

/// `retry` in `dir` with `env` (and no Redis user or password of the test's own environment),
/// run with `args`.
fn run(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = common::retry();
    cmd.current_dir(dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_RUNTIME_DIR", dir)
        .env_remove("RETRY_REDIS_PASSWORD")
        .env_remove("RETRY_REDIS_USER")
        .timeout(common::STEP_LIMIT);
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.args(args).output().unwrap()
}

/// The lines of `out`'s stderr that are warnings.
fn warnings(out: &Output) -> Vec<String> {
    stderr_of(out)
        .lines()
        .filter(|l| l.starts_with("retry: warning:"))
        .map(str::to_string)
        .collect()
}

/// Fails when any output holds 8 characters of the password in a row.
fn holds_no_piece_of_the_password(outputs: &[Output]) {
    for out in outputs {
        let text = format!("{}{}", stdout_of(out), stderr_of(out));
        for piece in PASSWORD.as_bytes().windows(8) {
            let piece = std::str::from_utf8(piece).unwrap();
            assert!(
                !text.contains(piece),
                "'{piece}' of the password in: {text}"
            );
        }
    }
}

/// A server whose `default` user is off: only the ACL user `fleet` may use it.
fn acl_server(test: &str) -> Option<Server> {
    let password = format!(">{PASSWORD}");
    Server::start(
        test,
        &[
            "--user", "default", "off", "--user", USER, "on", &password, "~*", "&*", "+@all",
        ],
    )
}

#[test]
fn an_acl_user_in_the_url_or_the_environment_serves_every_option() {
    let Some(server) = acl_server("acl-user") else {
        return;
    };
    let dir = common::temp_dir("acl-user");
    let port = server.port;
    let in_url = format!("redis://{USER}:{PASSWORD}@127.0.0.1:{port}/2/jobs");
    let bare = format!("redis://127.0.0.1:{port}/2/jobs");
    let env = [
        ("RETRY_REDIS_USER", USER),
        ("RETRY_REDIS_PASSWORD", PASSWORD),
    ];
    let mut outputs = Vec::new();
    let quota = run(
        &dir,
        &[],
        &["--quota", &in_url, "-n", "2", "-d", "1ms", "--", "false"],
    );
    assert_eq!(quota.status.code(), Some(1), "{}", stderr_of(&quota));
    let ps = warnings(&quota);
    assert!(
        ps.len() == 1 && ps[0].contains("RETRY_REDIS_PASSWORD"),
        "{ps:?}"
    );
    outputs.push(quota);
    let common_args = [
        "--throttle",
        "2",
        "--dead-letter",
        &bare,
        "--history",
        &bare,
    ];
    let given_up = run(
        &dir,
        &env,
        &[
            &["--quota", &bare],
            &common_args[..],
            &["-n", "1", "--", "false"],
        ]
        .concat(),
    );
    assert_eq!(given_up.status.code(), Some(1), "{}", stderr_of(&given_up));
    assert_eq!(warnings(&given_up), Vec::<String>::new());
    let listed = run(
        &dir,
        &env,
        &["--replay", &bare, "--dry-run", "--log-format", "json"],
    );
    assert_eq!(listed.status.code(), Some(0), "{}", stderr_of(&listed));
    assert_eq!(json_lines(&stdout_of(&listed)).len(), 1);
    let stats = run(&dir, &env, &["--stats", &bare]);
    assert_eq!(stats.status.code(), Some(0), "{}", stderr_of(&stats));
    // The URL's password with the environment's user.
    let password_only = format!("redis://:{PASSWORD}@127.0.0.1:{port}/2/jobs");
    let user = [("RETRY_REDIS_USER", USER)];
    let mixed = run(&dir, &user, &["--stats", &password_only]);
    assert_eq!(mixed.status.code(), Some(0), "{}", stderr_of(&mixed));
    outputs.push(mixed);
    let replay = run(&dir, &env, &["--replay", &bare, "-n", "1"]);
    assert_eq!(replay.status.code(), Some(1), "{}", stderr_of(&replay));
    outputs.extend([given_up, listed, stats, replay]);
    // Every option on a store of its own, in database 2, the user and password from the
    // environment.
    let every = format!("redis://127.0.0.1:{port}/2/every");
    outputs.extend(every_option(&dir, &every, &|args| run(&dir, &env, args)));
    holds_no_piece_of_the_password(&outputs);
}

#[test]
fn credentials_refused_are_a_misconfiguration_everywhere_and_never_unreachable() {
    let Some(server) = acl_server("acl-refused") else {
        return;
    };
    let dir = common::temp_dir("acl-refused");
    let url = format!("redis://127.0.0.1:{}/jobs", server.port);
    let wrong = [
        ("RETRY_REDIS_USER", USER),
        ("RETRY_REDIS_PASSWORD", "not-the-password"),
    ];
    let mut outputs = Vec::new();
    for args in [
        &["--dry-run", "--quota", &url, "-n", "2"][..],
        &["--replay", &url],
        &["--replay", &url, "--dry-run"],
        &["--forget", &url, "all"],
        &["--prune", &url, "--older-than", "1d"],
        &["--stats", &url],
    ] {
        let out = run(&dir, &wrong, args);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(125), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("WRONGPASS"), "{args:?}: {err}");
        assert!(!err.contains("cannot be reached"), "{args:?}: {err}");
    }
    for args in [
        &["--quota", &url, "--throttle", "2"][..],
        &["--dead-letter", &url],
    ] {
        let out = run(&dir, &wrong, &[args, &["-n", "1", "--", "false"]].concat());
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr_of(&out));
        let said = warnings(&out);
        assert_eq!(said.len(), 1, "{args:?}: {said:?}");
        assert!(said[0].contains("WRONGPASS"), "{said:?}");
        assert!(said[0].contains("misconfiguration"), "{said:?}");
        assert!(!said[0].contains("cannot be reached"), "{said:?}");
        outputs.push(out);
    }
    // The right password with the wrong user is refused too, and no output holds it.
    let other = format!("redis://nobody:{PASSWORD}@127.0.0.1:{}/jobs", server.port);
    let out = run(&dir, &[], &["--stats", &other]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr_of(&out));
    outputs.push(out);
    holds_no_piece_of_the_password(&outputs);
}

#[test]
fn a_password_for_a_server_that_has_none_is_refused_not_unreachable() {
    let Some(server) = Server::start("no-password", &[]) else {
        return;
    };
    let dir = common::temp_dir("no-password");
    let url = server.url("jobs");
    let env = [("RETRY_REDIS_PASSWORD", PASSWORD)];
    let out = run(&dir, &env, &["--dry-run", "--quota", &url, "-n", "2"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("RETRY_REDIS_USER"), "{err}");
    let out = run(&dir, &env, &["--stats", &url]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("misconfiguration"), "{err}");
    let out = run(&dir, &env, &["--quota", &url, "-n", "1", "--", "true"]);
    let said = warnings(&out);
    assert!(
        said.len() == 1 && said[0].contains("misconfiguration"),
        "{said:?}"
    );
}

#[test]
fn a_unix_socket_serves_every_option() {
    let Some(server) = Server::start_unix("socket", &["--port", "0"]) else {
        return;
    };
    let dir = common::temp_dir("socket");
    let socket = server.socket.as_ref().unwrap().to_str().unwrap();
    let url = format!("redis+unix://{socket}/jobs?db=3");
    let out = run(
        &dir,
        &[],
        &[
            "--quota",
            &url,
            "--dead-letter",
            &url,
            "-n",
            "2",
            "-d",
            "1ms",
            "--",
            "false",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_eq!(warnings(&out), Vec::<String>::new());
    let out = run(
        &dir,
        &[],
        &["--replay", &url, "--dry-run", "--log-format", "json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(json_lines(&stdout_of(&out)).len(), 1);
    let out = run(&dir, &[], &["--dry-run", "--quota", &url, "-n", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // Another database of the same server holds none of it.
    let other = format!("redis+unix://{socket}/jobs");
    let out = run(
        &dir,
        &[],
        &["--replay", &other, "--dry-run", "--log-format", "json"],
    );
    assert_eq!(json_lines(&stdout_of(&out)).len(), 0, "{}", stderr_of(&out));
    let every = format!("redis+unix://{socket}/every?db=3");
    every_option(&dir, &every, &|args| run(&dir, &[], args));
}

/// A port that answers the first request as `answer` says, then closes: the bytes of a TLS
/// alert, or nothing. Returns the port, and the connections it took, read when it is done.
fn tls_port(answer: impl AsRef<[u8]> + Send + 'static) -> (u16, std::thread::JoinHandle<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let taken = std::thread::spawn(move || {
        let mut n = 0;
        let until = std::time::Instant::now() + common::STEP_LIMIT;
        while std::time::Instant::now() < until {
            match listener.accept() {
                Ok((mut s, _)) => {
                    n += 1;
                    let _ = s.set_nonblocking(false);
                    let mut buf = [0u8; 64];
                    let _ = s.read(&mut buf);
                    let _ = s.write_all(answer.as_ref());
                    if n == 2 {
                        break;
                    }
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
            }
        }
        n
    });
    (port, taken)
}

#[test]
fn a_plain_url_at_a_port_that_speaks_tls_says_to_use_rediss() {
    let dir = common::temp_dir("tls-port");
    for answer in [&b"\x15\x03\x03\x00\x02\x02\x32"[..], b""] {
        let (port, taken) = tls_port(answer);
        let url = format!("redis://127.0.0.1:{port}/jobs");
        let out = run(&dir, &[], &["--stats", &url]);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(125), "{err}");
        assert!(err.contains("use rediss://"), "{err}");
        let out = run(&dir, &[], &["--quota", &url, "-n", "1", "--", "true"]);
        let said = warnings(&out);
        assert!(
            said.len() == 1 && said[0].contains("use rediss://"),
            "{said:?}"
        );
        assert_eq!(taken.join().unwrap(), 2);
    }
}

#[test]
fn a_rediss_url_never_connects_in_plain() {
    let dir = common::temp_dir("rediss");
    let (port, taken) = tls_port(b"+OK\r\n");
    let url = format!("rediss://{USER}:{PASSWORD}@127.0.0.1:{port}/jobs");
    let out = run(&dir, &[], &["--stats", &url]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("TLS") && err.lines().count() <= 2, "{err}");
    // Nothing was sent in plain: wake the listener twice to see what it took.
    for _ in 0..2 {
        let _ = std::net::TcpStream::connect(("127.0.0.1", port)).map(|mut s| s.write_all(b"x"));
    }
    assert_eq!(taken.join().unwrap(), 2);
    let outputs = vec![out];
    holds_no_piece_of_the_password(&outputs);
}

#[test]
fn a_server_that_echoes_auth_with_a_user_shows_no_piece_of_the_password() {
    let dir = common::temp_dir("echo-auth");
    let echo = format!(
        "-ERR unknown command 'AUTH', with args beginning with: '{USER}' '{PASSWORD}' \r\n"
    );
    let (port, taken) = tls_port(echo);
    let url = format!("redis://127.0.0.1:{port}/jobs");
    let env = [
        ("RETRY_REDIS_USER", USER),
        ("RETRY_REDIS_PASSWORD", PASSWORD),
    ];
    let stats = run(&dir, &env, &["--stats", &url]);
    assert_eq!(stats.status.code(), Some(125), "{}", stderr_of(&stats));
    assert!(
        stderr_of(&stats).contains("ERR unknown command"),
        "{}",
        stderr_of(&stats)
    );
    let quota = run(&dir, &env, &["--quota", &url, "-n", "1", "--", "true"]);
    assert_eq!(warnings(&quota).len(), 1, "{}", stderr_of(&quota));
    assert_eq!(taken.join().unwrap(), 2);
    holds_no_piece_of_the_password(&[stats, quota]);
}
