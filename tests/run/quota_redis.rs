//! The fleet quota store (docs/herd.md#shared-retry-quota) against a real `redis-server`: the
//! bucket's arithmetic, atomic updates from many connections, the key's expiry, the script reloaded
//! after a flush, a password, host names, and servers that cannot be reached or never answer.
//!
//! Each test starts its own server on 127.0.0.1 (it starts in milliseconds, and a test that
//! flushes scripts or sets a password disturbs no other) and stops it when it ends, also when
//! it fails. Without `redis-server` the tests say so loudly on stderr and pass, unless
//! RETRY_REQUIRE_REDIS=1 (as CI sets it) makes them fail.
//!
//! Servers that are not Redis have a file of their own (`quota_redis/hostile.rs`); a Redis
//! Cluster has a module of this test program (`cluster.rs`).

#[path = "quota_redis/hostile.rs"]
mod hostile;

use crate::common;

use common::quota_params;
use common::redis_server::{Server, closed_port};

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use retry::policy::quota::{Bucket, QuotaParams, QuotaSpec, QuotaStore};
use retry::store::redis::{RedisStore, RedisStoreError, SCRIPT, SCRIPT_SHA1, Settings};

/// The operations ignore the caller's time (the bucket runs on the server's clock).
const NOW: u64 = 0;

/// What these tests do with a server beyond starting it.
trait ServerExt {
    fn cli(&self, args: &[&str]) -> Vec<String>;
    fn store(&self, name: &str, p: QuotaParams) -> RedisStore;
}

impl ServerExt for Server {
    /// A command sent with `redis-cli`, to look at the server behind the store's back: the
    /// lines of its raw reply.
    fn cli(&self, args: &[&str]) -> Vec<String> {
        common::redis_server::cli(self.port, args)
    }

    fn store(&self, name: &str, p: QuotaParams) -> RedisStore {
        open_store(&self.url(name), p)
    }
}

/// The store of the quota at `url`, an address as `--quota` takes it, not connected yet.
fn open_store(url: &str, p: QuotaParams) -> RedisStore {
    let spec: QuotaSpec = url
        .parse()
        .unwrap_or_else(|e| panic!("{url} is an address: {e}"));
    match spec.store {
        QuotaStore::Redis(address) => RedisStore::open(&address, p, Settings::default()),
        QuotaStore::Local => panic!("{url} is a local quota"),
    }
}

/// The error of the first operation of a store that must not answer, and how long it took
/// to say so (connecting included: the store connects at its first operation).
fn connect_error(url: &str) -> (RedisStoreError, Duration) {
    let start = Instant::now();
    let store = open_store(url, QuotaParams::default());
    match store.peek(NOW) {
        Ok(update) => panic!("{url} answered: {update:?}"),
        Err(e) => (e, start.elapsed()),
    }
}

#[test]
fn deposits_and_takes_follow_the_bucket_arithmetic_on_the_server() {
    let Some(server) = Server::start("arithmetic", &[]) else {
        return;
    };
    // With no floor nothing accrues with time, so the server's clock cannot change the sums.
    let p = quota_params(0.4, 0.0, 3.0);
    let store = server.store("sums", p);
    let mut model = Bucket::full(&p, 0);

    let peek = store.peek(NOW).unwrap();
    assert!(peek.granted);
    assert_eq!(peek.tokens, 3.0, "a new quota is a full bucket");

    let mut steps = Vec::new();
    for op in "take take deposit take take deposit deposit take deposit deposit deposit take take"
        .split(' ')
    {
        let (update, expected) = match op {
            "take" => (store.take(NOW).unwrap(), model.take(&p, 0)),
            _ => (store.deposit(NOW).unwrap(), {
                model.deposit(&p, 0);
                true
            }),
        };
        assert_eq!(update.granted, expected, "{op} after {steps:?}");
        assert!(
            (update.tokens - model.tokens).abs() < 1e-12,
            "{op} after {steps:?}: {} tokens, the model has {}",
            update.tokens,
            model.tokens
        );
        assert_eq!(update.note, None);
        steps.push(format!("{op} -> {} ({})", update.tokens, update.granted));
    }
    // 3 - 1 - 1 + 0.4 - 1 = 0.4; a take fails; 0.4 + 0.8 = 1.2 - 1 = 0.2; + 1.2 = 1.4 - 1.
    let tokens = store.peek(NOW).unwrap().tokens;
    assert!((tokens - 0.4).abs() < 1e-9, "{tokens}: {steps:?}");
    assert!(!store.take(NOW).unwrap().granted);

    // Deposits stop at the cap.
    for _ in 0..20 {
        store.deposit(NOW).unwrap();
    }
    assert_eq!(store.peek(NOW).unwrap().tokens, 3.0);

    // Other names are other buckets.
    assert_eq!(server.store("other", p).peek(NOW).unwrap().tokens, 3.0);
}

#[test]
fn the_floor_refills_the_bucket_by_the_servers_clock() {
    let Some(server) = Server::start("floor", &[]) else {
        return;
    };
    // Ten tokens a second: an empty bucket has a token again after a tenth of a second.
    let store = server.store("refill", quota_params(0.0, 10.0, 2.0));
    let start = Instant::now();
    assert!(store.take(NOW).unwrap().granted);
    assert!(store.take(NOW).unwrap().granted);
    let drained = store.peek(NOW).unwrap();
    if start.elapsed() < Duration::from_millis(80) {
        assert!(!drained.granted, "{drained:?}");
    }
    std::thread::sleep(Duration::from_millis(150));
    let later = store.peek(NOW).unwrap();
    assert!(later.tokens >= 1.4 && later.tokens <= 2.0, "{later:?}");
    assert!(store.take(NOW).unwrap().granted);
    // The refill never passes the cap.
    std::thread::sleep(Duration::from_millis(250));
    assert_eq!(store.peek(NOW).unwrap().tokens, 2.0);
}

#[test]
fn concurrent_takes_from_eight_connections_grant_exactly_the_cap() {
    let Some(server) = Server::start("atomic", &[]) else {
        return;
    };
    let url = Arc::new(server.url("herd"));
    let p = quota_params(0.0, 0.0, 10.0);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let url = Arc::clone(&url);
            std::thread::spawn(move || {
                // A connection of its own, as another machine would have.
                let store = open_store(&url, p);
                (0..50)
                    .filter(|_| store.take(NOW).expect("take").granted)
                    .count()
            })
        })
        .collect();
    let granted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(granted, 10, "400 takes from a full bucket of 10");
    assert_eq!(server.store("herd", p).peek(NOW).unwrap().tokens, 0.0);
}

#[test]
fn the_quota_key_holds_the_bucket_and_expires_when_idle() {
    let Some(server) = Server::start("expiry", &[]) else {
        return;
    };
    let ttl = |key: &str| -> i64 { server.cli(&["PTTL", key])[0].parse().unwrap() };

    let store = server.store("idle", quota_params(0.2, 1.0, 10.0));
    assert_eq!(store.key(), "retry:quota:idle");
    // A peek writes nothing.
    store.peek(NOW).unwrap();
    assert_eq!(ttl("retry:quota:idle"), -2, "no key after a peek");

    store.deposit(NOW).unwrap();
    let left = ttl("retry:quota:idle");
    // 10 tokens at 1/s fill in 10 s: twice that is under the 2-minute minimum.
    assert!(left > 110_000 && left <= 120_000, "PTTL {left}");
    assert_eq!(store.expiry(), Duration::from_secs(120));
    let fields = server.cli(&["HGETALL", "retry:quota:idle"]);
    let names: Vec<&str> = fields.iter().step_by(2).map(String::as_str).collect();
    assert_eq!(names, ["tokens", "at"]);
    let at: u64 = fields[3].parse().unwrap();
    let time = server.cli(&["TIME"]);
    let server_now_ms = time[0].parse::<u64>().unwrap() * 1000;
    assert!(
        at.abs_diff(server_now_ms) < 5_000,
        "at={at} is the server's time, {server_now_ms}"
    );

    // A slow floor keeps the key longer: 1000 tokens at 0.5/s fill in 2000 s.
    let slow = server.store("slow", quota_params(0.2, 0.5, 1000.0));
    slow.take(NOW).unwrap();
    let left = ttl("retry:quota:slow");
    assert!(left > 3_990_000 && left <= 4_000_000, "PTTL {left}");
}

#[test]
fn a_flushed_script_is_loaded_again() {
    let Some(server) = Server::start("noscript", &[]) else {
        return;
    };
    let store = server.store("reload", quota_params(0.0, 0.0, 5.0));
    assert_eq!(store.take(NOW).unwrap().tokens, 4.0);
    assert_eq!(server.cli(&["SCRIPT", "FLUSH"]), ["OK"]);
    // EVALSHA answers NOSCRIPT; the store loads the script and runs it on the same bucket.
    let after = store.take(NOW).unwrap();
    assert!(after.granted);
    assert_eq!(after.tokens, 3.0);
}

#[test]
fn the_scripts_digest_is_the_one_redis_names_it_by() {
    let Some(server) = Server::start("digest", &[]) else {
        return;
    };
    // A wrong digest would still work, each EVALSHA answered NOSCRIPT and the script sent whole
    // again: only the server's own SHA-1 of the script tells.
    assert_eq!(server.cli(&["SCRIPT", "LOAD", SCRIPT]), [SCRIPT_SHA1]);
    assert_eq!(server.cli(&["SCRIPT", "FLUSH"]), ["OK"]);
    // The script the store sends is the one of that digest.
    assert!(
        server
            .store("digest", quota_params(0.0, 0.0, 5.0))
            .take(NOW)
            .unwrap()
            .granted
    );
    assert_eq!(server.cli(&["SCRIPT", "EXISTS", SCRIPT_SHA1]), ["1"]);
}

#[test]
fn a_password_in_the_address_is_sent_with_auth_and_never_shown() {
    let Some(server) = Server::start("auth", &["--requirepass", "s3cret:@x"]) else {
        return;
    };
    let url = format!("redis://:s3cret:@x@127.0.0.1:{}/locked", server.port);
    let store = open_store(&url, QuotaParams::default());
    assert!(store.take(NOW).unwrap().granted);
    assert!(!format!("{store:?}").contains("s3cret"));

    let (e, _) = connect_error(&server.url("locked"));
    assert!(e.to_string().contains("NOAUTH"), "{e}");
    assert_eq!(e.refusal(), Some("NOAUTH"), "{e:?}");

    let wrong = format!("redis://:wrong-s3cret@127.0.0.1:{}/locked", server.port);
    let (e, _) = connect_error(&wrong);
    assert!(matches!(e, RedisStoreError::Connect { .. }), "{e:?}");
    assert_eq!(e.refusal(), Some("WRONGPASS"), "{e:?}");
    let text = e.to_string();
    assert!(!text.contains("s3cret") && !text.contains('\n'), "{text}");
    assert!(
        text.contains(&format!("127.0.0.1:{}", server.port)),
        "{text}"
    );
}

#[test]
fn a_host_name_is_resolved() {
    let Some(server) = Server::start("hostname", &[]) else {
        return;
    };
    // localhost may resolve to ::1 first, where nothing listens: the next address is tried.
    let url = format!("redis://localhost:{}/named", server.port);
    let store = open_store(&url, QuotaParams::default());
    assert!(store.take(NOW).unwrap().granted);
    assert_eq!(store.server(), format!("localhost:{}", server.port));

    let (e, elapsed) = connect_error("redis://no-such-host.invalid/q");
    assert!(matches!(e, RedisStoreError::Resolve { .. }), "{e:?}");
    assert!(elapsed < Duration::from_millis(1000), "{elapsed:?}");
}

#[test]
fn a_closed_port_fails_at_once() {
    let (_bound, port) = closed_port();
    let (e, elapsed) = connect_error(&format!("redis://127.0.0.1:{port}/q"));
    let text = e.to_string();
    assert!(matches!(e, RedisStoreError::Connect { .. }), "{e:?}");
    assert!(text.starts_with(&format!("cannot use Redis at 127.0.0.1:{port}: ")));
    assert!(!text.contains('\n'), "{text}");
    assert!(elapsed < Duration::from_millis(1000), "{elapsed:?}");
}

#[test]
fn a_port_that_never_answers_fails_within_the_timeout() {
    // The kernel completes the connection to a listening socket nobody accepts from.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (e, elapsed) = connect_error(&format!("redis://127.0.0.1:{port}/q"));
    assert!(
        e.to_string().ends_with("no answer within 250 ms"),
        "{e}: {e:?}"
    );
    assert!(
        elapsed >= Duration::from_millis(200) && elapsed < Duration::from_millis(1000),
        "{elapsed:?}"
    );

    // One that accepts and then says nothing, with a password to send first.
    let accepted = std::thread::spawn(move || {
        let (socket, _) = listener.accept().unwrap();
        std::thread::sleep(Duration::from_secs(2));
        drop(socket);
    });
    let (e, elapsed) = connect_error(&format!("redis://:pw@127.0.0.1:{port}/q"));
    assert!(matches!(e, RedisStoreError::Connect { .. }), "{e:?}");
    assert!(elapsed < Duration::from_millis(1000), "{elapsed:?}");
    drop(accepted);
}

#[test]
fn a_server_gone_after_connecting_fails_each_update_quickly_and_comes_back() {
    let Some(mut server) = Server::start("gone", &[]) else {
        return;
    };
    let store = server.store("gone", quota_params(0.0, 0.0, 10.0));
    assert!(store.take(NOW).unwrap().granted);

    let _ = server.child.kill();
    let _ = server.child.wait();
    for _ in 0..3 {
        let start = Instant::now();
        let e = store.take(NOW).expect_err("the server is gone");
        assert!(start.elapsed() < Duration::from_millis(1000), "{e}");
        assert!(!e.to_string().contains('\n'), "{e}");
    }

    // A server on the same port again: the store connects anew (a new, full bucket).
    let Some(again) = restart_on(server.port) else {
        return;
    };
    let update = store.take(NOW).unwrap();
    assert!(update.granted);
    assert_eq!(update.tokens, 9.0);
    drop(again);
}

/// A server on `port` again, or `None` when the port was taken meanwhile.
fn restart_on(port: u16) -> Option<Server> {
    let dir = common::temp_dir("redis-again");
    let log = dir.join("redis.log");
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).ok()?)
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let server = Server {
        child,
        port,
        log,
        socket: None,
    };
    common::wait_until(Duration::from_secs(5), || server.answers()).then_some(server)
}

#[test]
fn a_bad_address_or_name_is_an_error_not_a_panic() {
    for url in [
        "redis://h:99999/q",
        "redis://h/bad name",
        "redis://h/",
        "redis://",
    ] {
        match url.parse::<QuotaSpec>() {
            Err(e) => assert!(!e.contains('\n'), "{e}"),
            Ok(spec) => panic!("{url}: {spec:?}"),
        }
    }
}

/// `retry ARGS` with this environment added, its own runtime directory and a bound: its exit
/// status and log.
fn retry_run(env: &[(&str, &str)], args: &[String]) -> (Option<i32>, String) {
    let out = retry_output(env, args);
    (out.status.code(), common::stderr_of(&out))
}

/// `retry ARGS` as [`retry_run`] runs it: all it wrote.
fn retry_output(env: &[(&str, &str)], args: &[String]) -> std::process::Output {
    let runtime = common::temp_dir("redis-run");
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let mut cmd = common::retry();
    cmd.env("XDG_RUNTIME_DIR", &runtime)
        .env_remove("RETRY_REDIS_PASSWORD");
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.args(args).output().unwrap()
}

#[test]
fn a_password_from_the_environment_authenticates_and_one_in_the_url_warns() {
    const PASSWORD: &str = "s3cret-from-env";
    let Some(server) = Server::start("env-password", &["--requirepass", PASSWORD]) else {
        return;
    };
    let failing = |url: &str, format: &str| {
        vec![
            "-v".to_string(),
            "-n".into(),
            "2".into(),
            "-d".into(),
            "0".into(),
            "--log-format".into(),
            format.into(),
            "--quota".into(),
            url.into(),
            "--".into(),
            "false".into(),
        ]
    };
    // No deposits and no refill: each run's retry takes one token of ten.
    let bare = format!("{}:ratio=0,floor=0", server.url("envpw"));
    let env = [("RETRY_REDIS_PASSWORD", PASSWORD)];

    // From the environment: no warning, and the bucket is on the server.
    let words = failing(&bare, "human");
    let (status, log) = retry_run(&env, &words);
    assert_eq!(status, Some(1), "{log}");
    assert!(!log.contains("warning"), "{log}");
    assert!(log.contains("retry, 9.00 tokens left"), "{log}");
    let exists = [
        "--no-auth-warning",
        "-a",
        PASSWORD,
        "EXISTS",
        "retry:quota:envpw",
    ];
    assert_eq!(server.cli(&exists), ["1"]);
    let words = failing(&bare, "json");
    let (_, log) = retry_run(&env, &words);
    assert!(
        log.contains(r#""tokens":8"#) && !log.contains(r#""event":"warning""#),
        "{log}"
    );
    assert!(!log.contains(PASSWORD), "{log}");

    // Without it, the server refuses the run, which keeps its quota on this machine.
    let (_, log) = retry_run(&[], &failing(&bare, "human"));
    assert!(
        log.contains("misconfiguration") && log.contains("(NOAUTH)"),
        "{log}"
    );

    // In the URL it works too (and wins over the environment's), with one warning naming the
    // variable; the password is shown nowhere.
    let with = format!(
        "redis://:{PASSWORD}@127.0.0.1:{}/envpw:ratio=0,floor=0",
        server.port
    );
    let wrong = [("RETRY_REDIS_PASSWORD", "not-the-password")];
    for (format, left) in [
        ("human", "retry, 7.00 tokens left"),
        ("json", r#""tokens":6"#),
    ] {
        let (status, log) = retry_run(&wrong, &failing(&with, format));
        assert_eq!(status, Some(1), "{log}");
        let warnings: Vec<&str> = log.lines().filter(|l| l.contains("warning")).collect();
        assert_eq!(warnings.len(), 1, "{log}");
        assert!(
            warnings[0].contains("ps") && warnings[0].contains("RETRY_REDIS_PASSWORD"),
            "{log}"
        );
        assert!(log.contains(left), "{left}: {log}");
        assert!(!log.contains(PASSWORD), "{log}");
    }
}

/// A password of 204 characters in which no piece of 8 repeats, nor reads like anything
/// `retry` prints: `pw000-pw001-...`.
fn long_password() -> String {
    let password: String = (0..34).map(|i| format!("pw{i:03}-")).collect();
    assert_eq!(password.len(), 204);
    password
}

/// The 8-character pieces of `secret` that `printed` holds.
fn pieces_in(secret: &str, printed: &[u8]) -> Vec<String> {
    secret
        .as_bytes()
        .windows(8)
        .filter(|piece| printed.windows(8).any(|w| w == *piece))
        .map(|piece| String::from_utf8_lossy(piece).into_owned())
        .collect()
}

#[test]
fn no_piece_of_a_long_password_is_printed_when_the_server_quotes_auth_back() {
    // With AUTH renamed away Redis answers "ERR unknown command 'AUTH', with args beginning
    // with:" and the first 128 characters of the password.
    let Some(server) = Server::start("auth-renamed", &["--rename-command", "AUTH", ""]) else {
        return;
    };
    let password = long_password();
    let in_url = format!("redis://:{password}@127.0.0.1:{}/q", server.port);
    let bare = server.url("q");
    let log_file = common::temp_dir("auth-renamed-log").join("log.json");
    let log_arg = log_file.to_string_lossy().into_owned();
    let env = [("RETRY_REDIS_PASSWORD", password.as_str())];
    let failing = ["-v", "-n", "2", "-d", "0", "--quota"];
    let json = ["--log-format", "json", "--log-file", &log_arg];
    // The password in the URL or in the environment; the human log, the JSON log, the dry run.
    let runs = [
        (&[][..], [&failing[..], &[&in_url, "--", "false"]].concat()),
        (&env, [&failing[..], &[&bare, "--", "false"]].concat()),
        (
            &env,
            [&json[..], &failing, &[&bare, "--", "false"]].concat(),
        ),
        (&[], vec!["--dry-run", "--quota", &in_url]),
        (
            &env,
            vec!["--dry-run", "--log-format", "json", "--quota", &bare],
        ),
    ];
    let mut printed = Vec::new();
    for (env, args) in runs {
        let args: Vec<String> = args.into_iter().map(str::to_string).collect();
        let out = retry_output(env, &args);
        printed.extend_from_slice(&out.stdout);
        printed.extend_from_slice(&out.stderr);
    }
    printed.extend(std::fs::read(&log_file).expect("the JSON log was written"));
    let text = String::from_utf8_lossy(&printed);
    // The runs said why the quota was not shared, by the code word alone.
    assert!(text.contains("ERR unknown command"), "{text}");
    assert_eq!(
        pieces_in(&password, &printed),
        Vec::<String>::new(),
        "{text}"
    );
}

#[test]
fn a_server_that_refuses_the_password_or_the_user_is_a_misconfiguration_the_run_survives() {
    const PASSWORD: &str = "s3cret-right";
    let Some(server) = Server::start("refusals", &["--requirepass", PASSWORD]) else {
        return;
    };
    let url = format!("{}:ratio=0,floor=0", server.url("refused"));
    let address = server.url("refused");
    let failing: Vec<String> = ["-v", "-n", "2", "-d", "0", "--quota", &url, "--", "false"]
        .map(str::to_string)
        .to_vec();
    let wrong = [("RETRY_REDIS_PASSWORD", "not-the-password")];
    let right = [("RETRY_REDIS_PASSWORD", PASSWORD)];
    // A user that may not run the script: the default one, its rights cut after the start.
    let Some(locked) = Server::start("refusals-noperm", &[]) else {
        return;
    };
    assert_eq!(
        locked.cli(&["ACL", "SETUSER", "default", "-evalsha", "-eval"]),
        ["OK"]
    );
    let locked_url = format!("{}:ratio=0,floor=0", locked.url("refused"));
    let locked_failing: Vec<String> = failing
        .iter()
        .map(|w| {
            if *w == url {
                locked_url.clone()
            } else {
                w.clone()
            }
        })
        .collect();
    for (env, words, code) in [
        (&wrong[..], &failing, "WRONGPASS"),
        (&[][..], &failing, "NOAUTH"),
        (&[][..], &locked_failing, "NOPERM"),
    ] {
        let (status, log) = retry_run(env, words);
        // Both tries ran, the retry on the quota kept on this machine (a full bucket of 10).
        assert_eq!(status, Some(1), "{code}: {log}");
        assert!(log.contains("retry, 9.00 tokens left"), "{code}: {log}");
        let warnings: Vec<&str> = log.lines().filter(|l| l.contains("warning")).collect();
        assert_eq!(warnings.len(), 1, "{code}: {log}");
        let here = if code == "NOPERM" {
            locked.url("refused")
        } else {
            address.clone()
        };
        for says in [
            &format!("({code})"),
            "misconfiguration",
            "not shared",
            &here,
        ] {
            assert!(warnings[0].contains(says), "{code}: {says}: {log}");
        }
        assert!(
            !log.contains("s3cret") && !log.contains("not-the-password"),
            "{log}"
        );
    }

    // Under GitHub Actions it is an annotation too, once.
    let (status, log) = retry_run(&[("GITHUB_ACTIONS", "true"), wrong[0]], &failing);
    assert_eq!(status, Some(1), "{log}");
    let annotations: Vec<&str> = log.lines().filter(|l| l.starts_with("::warning")).collect();
    assert_eq!(annotations.len(), 1, "{log}");
    assert!(
        annotations[0].contains("WRONGPASS") && annotations[0].contains("not shared"),
        "{log}"
    );

    // A deploy check with --dry-run fails on it, with one line.
    let dry: Vec<String> = ["--dry-run", "--quota", &url].map(str::to_string).to_vec();
    for env in [&wrong[..], &[][..]] {
        let out = retry_output(env, &dry);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("retry: --quota ") && err.contains(&address),
            "{err}"
        );
        assert!(err.contains("WRONGPASS") || err.contains("NOAUTH"), "{err}");
    }
    // With the right password the dry run reads the quota and passes.
    let out = retry_output(&right, &dry);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn a_redis_dropped_midway_turns_the_throttle_off_and_the_local_bucket_answers() {
    // Each run's first try ran against Redis; Redis then goes away, and the retry's exchange
    // falls back to this machine. Counted there, the first try made p = 1/2 on the local
    // figures: half the runs gave up `quota` with a full bucket. Now none does.
    for seed in 1..=4 {
        let Some(mut server) = Server::start("dropped", &[]) else {
            return;
        };
        let dir = common::temp_dir("redis-dropped");
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let mark = dir.join("ran");
        let mut child = common::retry_std()
            .env("XDG_RUNTIME_DIR", &dir)
            .env_remove("RETRY_REDIS_PASSWORD")
            .args([
                "-n",
                "2",
                "-d",
                "50ms",
                "-j",
                "none",
                "--throttle",
                "2",
                "--quota",
            ])
            .arg(server.url("dropped"))
            .args(["--seed", &seed.to_string(), "--", "sh", "-c"])
            // The try outlives Redis: the exchange after it finds Redis gone.
            .arg(format!(
                "echo x >> '{}'; sleep 0.15; exit 3",
                mark.display()
            ))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        assert!(common::wait_until(common::STEP_LIMIT, || mark.exists()));
        let _ = server.child.kill();
        let _ = server.child.wait();
        let status = common::wait_bounded(&mut child, common::STEP_LIMIT);
        let mut log = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut log).unwrap();
        assert_eq!(status.code(), Some(3), "seed {seed}: {log}");
        assert!(!log.contains("a retry takes 1"), "seed {seed}: {log}");
        assert!(!log.contains("held back"), "seed {seed}: {log}");
        let runs = std::fs::read_to_string(&mark).unwrap().lines().count();
        assert_eq!(runs, 2, "seed {seed}: both tries ran: {log}");
    }
}

#[test]
fn a_try_the_budget_cuts_short_is_counted_by_the_throttle_with_no_false_warning() {
    let Some(server) = Server::start("budget-count", &[]) else {
        return;
    };
    let url = server.url("cut");
    let hanging = |_: u64| {
        let words: Vec<String> = ["-n", "1", "-B", "200ms", "-k", "0", "--throttle", "2"]
            .iter()
            .map(|w| w.to_string())
            .chain([
                "--quota".into(),
                url.clone(),
                "--".into(),
                "sleep".into(),
                "5".into(),
            ])
            .collect();
        retry_run(&[], &words)
    };
    for k in 1..=2 {
        let (status, log) = hanging(k);
        // The first run's try counted, p = 1/2 for the second: held back (75) or cut (124).
        let held = k == 2 && status == Some(75);
        assert!(status == Some(124) || held, "run {k}: {status:?}: {log}");
        assert!(!log.contains("cannot be reached"), "run {k}: {log}");
    }
    // Both tries were counted, a held one as a try not accepted: the fleet's figures hold them.
    let words: Vec<String> = [
        "--dry-run",
        "--throttle",
        "2",
        "--quota",
        &url,
        "--",
        "true",
    ]
    .iter()
    .map(|w| w.to_string())
    .collect();
    let out = retry_output(&[], &words);
    let text = common::stdout_of(&out);
    assert!(text.contains("0 of 2 tries of quota"), "{text}");
}

#[test]
fn a_window_dated_an_hour_ahead_starts_again_at_once() {
    let Some(server) = Server::start("clock-step", &[]) else {
        return;
    };
    // The figures of a fleet whose server clock was an hour ahead, then corrected: 200 tries,
    // none accepted, in a slot that starts an hour from now.
    let time = server.cli(&["TIME"]);
    let now_ms = time[0].parse::<u64>().unwrap() * 1000;
    let ahead = (now_ms + 3_600_000).to_string();
    let now = now_ms.to_string();
    let set = [
        "HSET",
        "retry:quota:step",
        "tokens",
        "10",
        "at",
        &now,
        "ts",
        &ahead,
        "tr",
        "200",
        "ta",
        "0",
        "tpr",
        "0",
        "tpa",
        "0",
    ];
    server.cli(&set);
    let words: Vec<String> = ["--dry-run", "--throttle", "2:window=1s", "--quota"]
        .iter()
        .map(|w| w.to_string())
        .chain([server.url("step"), "--".into(), "true".into()])
        .collect();
    let out = retry_output(&[], &words);
    let text = common::stdout_of(&out);
    assert!(
        text.contains("0 of 0 tries"),
        "held until the clock catches up: {text}"
    );
}

#[test]
fn the_redis_record_keeps_its_window_and_another_counts_into_it_with_one_warning() {
    let Some(server) = Server::start("own-window", &[]) else {
        return;
    };
    let url = server.url("w");
    let words = |throttle: &str, tail: &[&str]| -> Vec<String> {
        [
            "-n",
            "3",
            "-d",
            "0",
            "--seed",
            "7",
            "--throttle",
            throttle,
            "--quota",
            &url,
        ]
        .iter()
        .chain(tail)
        .map(|w| w.to_string())
        .collect()
    };
    for _ in 0..5 {
        let _ = retry_run(&[], &words("2:window=1d", &["--", "false"]));
    }
    let (_, log) = retry_run(&[], &words("2:window=1s", &["--", "false"]));
    assert_eq!(
        log.matches("counts over its own window of 24h").count(),
        1,
        "{log}"
    );
    let fields = server.cli(&["HGET", "retry:quota:w", "tw"]);
    assert_eq!(fields, ["86400000"], "the record keeps its window");
    let out = retry_output(&[], &words("2:window=1d", &["--dry-run", "--", "true"]));
    let text = common::stdout_of(&out);
    assert!(
        text.contains("in the last 24h") && !text.contains("0 of 1 try"),
        "{text}"
    );
}

#[test]
fn a_hash_whose_window_no_run_could_name_is_counted_over_the_runs() {
    let Some(server) = Server::start("bad-window", &[]) else {
        return;
    };
    // A tw written by something else: 10 years.
    server.cli(&[
        "HSET",
        "retry:quota:bad",
        "tokens",
        "10",
        "tw",
        "315360000000",
    ]);
    let words: Vec<String> = ["--dry-run", "--throttle", "2", "--quota"]
        .iter()
        .map(|w| w.to_string())
        .chain([server.url("bad"), "--".into(), "true".into()])
        .collect();
    let out = retry_output(&[], &words);
    let text = common::stdout_of(&out);
    assert!(text.contains("in the last 2m"), "{text}");
}
