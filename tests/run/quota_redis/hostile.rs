//! The fleet quota store (docs/herd.md#shared-retry-quota, docs/files.md#files-that-outlive-a-run)
//! against servers that are not Redis: one that answers a byte at a time, one that announces a
//! reply of gigabytes. A quota decision has one deadline, connecting included, and a reply has a
//! size bound: the run goes on with the local store, quickly and in little memory. These servers
//! are small listeners on 127.0.0.1 in the test itself, so the tests need no `redis-server`.

use crate::common::{retry, runtime_dir, stderr_of, stdout_of};
use crate::quota_redis::open_store;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use retry::policy::quota::QuotaParams;
use retry::store::redis::RedisStoreError;

/// What a hostile server does with the commands it is sent.
#[derive(Clone, Copy)]
enum Hostile {
    /// Answers a simple string that never ends, one byte every 100 ms.
    Dribble,
    /// Answers with the header of a 2 GB string, then sends bytes for as long as it can.
    Huge,
    /// Answers the script as a version of it before the throttle would: `{granted, tokens}`.
    Malformed,
}

/// A listener on a free port of 127.0.0.1 that treats each connection as `how` says. With
/// `answers_ping`, AUTH and PING get their answers at once, so that the store connects and the
/// hostile answer comes to the script.
fn hostile(how: Hostile, answers_ping: bool) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(socket) = socket else { return };
            std::thread::spawn(move || serve(socket, how, answers_ping));
        }
    });
    port
}

fn serve(mut socket: TcpStream, how: Hostile, answers_ping: bool) {
    let _ = socket.set_read_timeout(Some(Duration::from_secs(5)));
    let mut request = [0u8; 4096];
    loop {
        let Ok(n) = socket.read(&mut request) else {
            return;
        };
        if n == 0 {
            return;
        }
        let seen = &request[..n];
        let is = |word: &[u8]| seen.windows(word.len()).any(|w| w == word);
        if answers_ping && is(b"PING") {
            let _ = socket.write_all(b"+PONG\r\n");
        } else if answers_ping && is(b"AUTH") {
            let _ = socket.write_all(b"+OK\r\n");
        } else {
            break;
        }
    }
    match how {
        Hostile::Dribble => {
            // Ten minutes at most, though the client goes long before.
            for byte in std::iter::once(b'+').chain(std::iter::repeat_n(b'x', 6000)) {
                if socket.write_all(&[byte]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Hostile::Malformed => {
            let _ = socket.write_all(b"*2\r\n:1\r\n$1\r\n9\r\n");
            // And again, to whatever follows.
            while matches!(socket.read(&mut request), Ok(1..)) {
                let _ = socket.write_all(b"*2\r\n:1\r\n$1\r\n9\r\n");
            }
        }
        Hostile::Huge => {
            if socket.write_all(b"$2000000000\r\n").is_err() {
                return;
            }
            let block = vec![b'x'; 64 * 1024];
            for _ in 0..(2_000_000_000 / block.len()) {
                if socket.write_all(&block).is_err() {
                    return;
                }
            }
        }
    }
}

/// `retry ARGS` with a bound of its own, well under the tests' limit: the time it took, its
/// exit status, standard output and standard error.
fn run(name: &str, args: &[&str]) -> (Duration, Option<i32>, String, String) {
    let runtime = runtime_dir(name);
    let start = Instant::now();
    let out = retry()
        .timeout(Duration::from_secs(6))
        .env("XDG_RUNTIME_DIR", &runtime)
        .env_remove("RETRY_REDIS_PASSWORD")
        .args(args)
        .output()
        .unwrap();
    (
        start.elapsed(),
        out.status.code(),
        stdout_of(&out),
        stderr_of(&out),
    )
}

#[test]
fn a_server_that_answers_a_byte_at_a_time_cannot_hold_the_run_past_the_deadline() {
    let port = hostile(Hostile::Dribble, false);
    let url = format!("redis://127.0.0.1:{port}/q");
    let (elapsed, status, out, log) = run(
        "hostile-dribble",
        &[
            "-n", "1", "-B", "2s", "--quota", &url, "--", "echo", "started",
        ],
    );
    assert_eq!(status, Some(0), "{log}");
    assert_eq!(out, "started\n", "the command ran: {log}");
    assert!(
        log.contains("cannot be reached")
            && log.contains("kept on this machine")
            && log.contains("no answer within 250 ms"),
        "{log}"
    );
    assert!(
        elapsed >= Duration::from_millis(200) && elapsed < Duration::from_millis(1500),
        "{elapsed:?}: {log}"
    );

    // The dry run reads the quota with the same deadline.
    let (elapsed, status, out, log) = run("hostile-dribble-dry", &["--dry-run", "--quota", &url]);
    assert_eq!(status, Some(0), "{log}");
    assert!(
        out.contains("cannot be read") && out.contains("no answer within 250 ms"),
        "{out}"
    );
    assert!(elapsed < Duration::from_millis(1500), "{elapsed:?}");
}

#[test]
fn a_throttled_run_against_a_hostile_server_is_held_one_deadline_and_fails_open() {
    for (how, name) in [
        (Hostile::Dribble, "hostile-throttle-dribble"),
        (Hostile::Malformed, "hostile-throttle-malformed"),
        (Hostile::Huge, "hostile-throttle-huge"),
    ] {
        let url = format!("redis://127.0.0.1:{}/q", hostile(how, true));
        let (elapsed, status, out, log) = run(
            name,
            &[
                "-n",
                "3",
                "-d",
                "1ms",
                "--throttle",
                "2",
                "--quota",
                &url,
                "--",
                "echo",
                "ran",
            ],
        );
        assert_eq!(status, Some(0), "{name}: {log}");
        assert_eq!(out, "ran\n", "{name}: {log}");
        assert!(
            log.contains("warning") && !log.contains("held"),
            "{name}: {log}"
        );
        assert!(
            elapsed < Duration::from_millis(1500),
            "{name}: {elapsed:?}: {log}"
        );
    }
}

#[test]
fn the_end_of_the_budget_cuts_the_deadline_shorter() {
    let port = hostile(Hostile::Dribble, false);
    let url = format!("redis://127.0.0.1:{port}/q");
    let (elapsed, _, _, log) = run(
        "hostile-budget",
        &["-n", "1", "-B", "100ms", "--quota", &url, "--", "true"],
    );
    assert!(
        log.contains("what was left of the run's budget") && log.contains("kept on this machine"),
        "{log}"
    );
    assert!(elapsed < Duration::from_millis(1500), "{elapsed:?}: {log}");
}

#[test]
fn a_reply_of_gigabytes_is_a_failed_store_read_no_further_than_its_header() {
    // In a process of its own: the peak memory of its children is that of every child of the
    // process, and the other tests' children may be large.
    crate::common::alone(
        "quota_redis::hostile::a_reply_of_gigabytes_is_a_failed_store_read_no_further_than_its_header",
        gigabyte_reply,
    );
}

fn gigabyte_reply() {
    let port = hostile(Hostile::Huge, false);
    let url = format!("redis://127.0.0.1:{port}/q");
    let (elapsed, status, out, log) = run(
        "hostile-huge",
        &["-n", "1", "--quota", &url, "--", "echo", "started"],
    );
    assert_eq!(status, Some(0), "{log}");
    assert_eq!(out, "started\n", "{log}");
    assert!(
        log.contains("kept on this machine") && log.contains("longer than 1024 bytes"),
        "{log}"
    );
    assert!(elapsed < Duration::from_millis(1500), "{elapsed:?}: {log}");
    // No child of this test (each a `retry`) ever grew large: reading the reply whole took
    // gigabytes.
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage");
    let max_rss_kib = usage.max_rss();
    assert!(max_rss_kib < 200 * 1024, "a child used {max_rss_kib} KiB");
}

/// The error of the first take from a store on `port`, and how long it took; the test fails
/// when the take has not ended within 5 s.
fn take_error(port: u16) -> (RedisStoreError, Duration) {
    let url = format!("redis://127.0.0.1:{port}/q");
    let store = open_store(&url, QuotaParams::default());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let start = Instant::now();
        let _ = tx.send((store.take(0), start.elapsed()));
    });
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok((Ok(update), _)) => panic!("the take succeeded: {update:?}"),
        Ok((Err(e), elapsed)) => (e, elapsed),
        Err(_) => panic!("the take did not end within 5 s"),
    }
}

#[test]
fn an_update_answered_a_byte_at_a_time_fails_within_one_deadline() {
    let (e, elapsed) = take_error(hostile(Hostile::Dribble, true));
    assert!(matches!(e, RedisStoreError::Command { .. }), "{e:?}");
    assert!(e.to_string().ends_with("no answer within 250 ms"), "{e}");
    assert!(
        elapsed >= Duration::from_millis(200) && elapsed < Duration::from_millis(800),
        "{elapsed:?}"
    );
}

#[test]
fn an_update_answered_with_gigabytes_fails_at_once() {
    let (e, elapsed) = take_error(hostile(Hostile::Huge, true));
    assert!(matches!(e, RedisStoreError::Command { .. }), "{e:?}");
    assert!(e.to_string().contains("longer than 1024 bytes"), "{e}");
    assert!(elapsed < Duration::from_millis(500), "{elapsed:?}");
}

#[test]
fn a_whole_reply_that_comes_too_slowly_fails_though_each_byte_comes_in_time() {
    // A valid reply to the script, a byte every 40 ms: 700 ms in all, each read well within
    // the deadline.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let Ok((mut socket, _)) = listener.accept() else {
            return;
        };
        let mut request = [0u8; 4096];
        // The script, the first thing sent without a password.
        if socket.read(&mut request).unwrap_or(0) == 0 {
            return;
        }
        for byte in b"*2\r\n:1\r\n$3\r\n9.4\r\n" {
            if socket.write_all(&[*byte]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(40));
        }
    });
    let (e, elapsed) = take_error(port);
    assert!(e.to_string().ends_with("no answer within 250 ms"), "{e}");
    assert!(elapsed < Duration::from_millis(600), "{elapsed:?}");
}

#[test]
fn a_server_that_quotes_the_password_back_never_gets_it_shown() {
    // As Redis answers a command renamed away: it quotes the command's arguments.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(mut socket) = socket else { return };
            let mut request = [0u8; 4096];
            if socket.read(&mut request).unwrap_or(0) > 0 {
                let _ = socket.write_all(
                    b"-ERR unknown command 'AUTH', with args beginning with: 'pa55-Word' \r\n",
                );
            }
        }
    });
    let url = format!("redis://:pa55-Word@127.0.0.1:{port}/q");
    let store = open_store(&url, QuotaParams::default());
    match store.peek(0) {
        Ok(update) => panic!("answered: {update:?}"),
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.ends_with("refused AUTH: ERR unknown command"),
                "{text}"
            );
            assert!(!text.contains("pa55"), "{text}");
        }
    }
    let (_, status, _, log) = run("hostile-echo", &["-n", "1", "--quota", &url, "--", "true"]);
    assert_eq!(status, Some(0), "{log}");
    assert!(
        log.contains("unknown command") && !log.contains("pa55-Word"),
        "{log}"
    );
}

/// A listener that answers PING and AUTH after `delay`, and nothing else ever (the script's
/// EVALSHA): the connection is kept open, silent, until the client leaves.
fn slow_hello(delay: Duration) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(mut socket) = socket else { return };
            std::thread::spawn(move || {
                let mut request = [0u8; 4096];
                while let Ok(n @ 1..) = socket.read(&mut request) {
                    let seen = &request[..n];
                    let is = |word: &[u8]| seen.windows(word.len()).any(|w| w == word);
                    if is(b"PING") || is(b"AUTH") {
                        std::thread::sleep(delay);
                        let answer: &[u8] = if is(b"PING") {
                            b"+PONG\r\n"
                        } else {
                            b"+OK\r\n"
                        };
                        let _ = socket.write_all(answer);
                    }
                }
            });
        }
    });
    port
}

/// The `elapsed_ms` of the `give_up` line of a JSON log: the run's own measure of its time.
fn gave_up_after(log: &str) -> Duration {
    let line = log
        .lines()
        .find(|l| l.contains(r#""event":"give_up""#))
        .unwrap_or_else(|| panic!("no give_up line: {log}"));
    let ms = line
        .split(r#""elapsed_ms":"#)
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("no elapsed_ms: {line}"));
    Duration::from_millis(ms)
}

#[test]
fn the_first_quota_decision_has_one_deadline_connecting_included() {
    // AUTH (or PING) answered after 220 ms, the script never: connecting and the first deposit
    // in two deadlines of 250 ms would hold the first try for at least 470 ms; in one, 250.
    let port = slow_hello(Duration::from_millis(220));
    let url = format!("redis://127.0.0.1:{port}/q");
    let args = [
        "--log-format",
        "json",
        "-n",
        "1",
        "--quota",
        &url,
        "--",
        "false",
    ];
    for password in [Some("pw"), None] {
        let runtime = runtime_dir("hostile-slow-hello");
        let mut cmd = retry();
        cmd.timeout(Duration::from_secs(6))
            .env("XDG_RUNTIME_DIR", &runtime)
            .env_remove("RETRY_REDIS_PASSWORD");
        if let Some(password) = password {
            cmd.env("RETRY_REDIS_PASSWORD", password);
        }
        let out = cmd.args(args).output().unwrap();
        let log = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{log}");
        assert!(log.contains("kept on this machine"), "{log}");
        // Measured by the run itself from its start, which a loaded machine delays only by
        // the time it takes to run `false`.
        let elapsed = gave_up_after(&log);
        assert!(
            elapsed < Duration::from_millis(420),
            "{password:?}: {elapsed:?}: {log}"
        );
    }
}

#[test]
fn no_piece_of_the_password_is_shown_whichever_reply_quotes_it() {
    // A proxy that says +OK to AUTH, then answers the script with an error that quotes the
    // AUTH it was sent, cut at 128 characters as Redis cuts them: the piece of the password
    // it holds must not be shown, though it is not the whole password.
    let password: String = (0..34).map(|i| format!("pw{i:03}-")).collect();
    let quoted = format!(
        "-ERR unknown command, with args beginning with: '{}'\r\n",
        &password[..120]
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(mut socket) = socket else { return };
            let quoted = quoted.clone();
            std::thread::spawn(move || {
                let mut request = [0u8; 8192];
                while let Ok(n @ 1..) = socket.read(&mut request) {
                    let seen = &request[..n];
                    let is = |w: &[u8]| seen.windows(w.len()).any(|x| x == w);
                    let answer: &[u8] = match is(b"AUTH") || is(b"PING") {
                        true => b"+OK\r\n",
                        false => quoted.as_bytes(),
                    };
                    if socket.write_all(answer).is_err() {
                        return;
                    }
                }
            });
        }
    });
    let url = format!("redis://127.0.0.1:{port}/q");
    let runtime = runtime_dir("hostile-second-error");
    let out = retry()
        .timeout(Duration::from_secs(6))
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("RETRY_REDIS_PASSWORD", &password)
        .args([
            "-v",
            "-n",
            "2",
            "-d",
            "0",
            "--throttle",
            "2",
            "--quota",
            &url,
            "--",
            "false",
        ])
        .output()
        .unwrap();
    let printed = [out.stdout.clone(), out.stderr.clone()].concat();
    let text = String::from_utf8_lossy(&printed);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let pieces: Vec<String> = password
        .as_bytes()
        .windows(8)
        .filter(|piece| printed.windows(8).any(|w| w == *piece))
        .map(|piece| String::from_utf8_lossy(piece).into_owned())
        .collect();
    assert!(pieces.is_empty(), "{pieces:?} in {text}");
    assert!(text.contains("they quote the password"), "{text}");
}
