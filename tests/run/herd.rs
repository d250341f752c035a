//! Herd safety through the binary (docs/herd.md#herd-safety): the stagger before a first try, and
//! the retry quota that runs on one machine share through its local store.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::redis_server::Server;
use common::{retry, retry_std, runtime_dir, stderr_of, temp_dir, wait_bounded};

/// Runs `n` copies of `retry ARGS -- sh -c 'echo >> TRIES; exit 1'` at once, each with
/// `XDG_RUNTIME_DIR` at `runtime`; returns how many tries they made in all and how long it took,
/// and how many runs went on without the shared bucket: a Redis quota kept on their own machine
/// because Redis did not answer in time, or a quota file another run held past the wait (a loaded
/// machine can make either miss the deadline of a quota decision).
fn concurrent_failing_runs(n: usize, args: &[&str], runtime: &Path) -> (usize, Duration, usize) {
    let dir = temp_dir("herd-tries");
    let tries = dir.join("tries");
    let script = format!("echo x >> '{}'; exit 1", tries.display());
    let started = Instant::now();
    let mut children: Vec<_> = (0..n)
        .map(|k| {
            retry_std()
                .env("XDG_RUNTIME_DIR", runtime)
                .args(args)
                .args(["--", "sh", "-c", &script])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join(format!("log{k}"))).unwrap())
                .spawn()
                .expect("start retry")
        })
        .collect();
    for child in &mut children {
        let status = wait_bounded(child, Duration::from_secs(20));
        assert_eq!(
            status.code(),
            Some(1),
            "every run gives up with the try's status"
        );
    }
    let elapsed = started.elapsed();
    let count = std::fs::read_to_string(&tries)
        .unwrap_or_default()
        .lines()
        .count();
    let fell_back = (0..n)
        .filter(|k| {
            let log = std::fs::read_to_string(dir.join(format!("log{k}"))).unwrap_or_default();
            log.contains("the quota is kept on this machine") || log.contains("is busy")
        })
        .count();
    (count, elapsed, fell_back)
}

/// The local quota store's directory under `runtime`, with this mode.
fn store_dir(runtime: &Path, mode: u32) {
    std::fs::create_dir(runtime.join("retry")).unwrap();
    std::fs::set_permissions(runtime.join("retry"), std::fs::Permissions::from_mode(mode)).unwrap();
}

/// One run of `retry --quota q -n TRIES -d 0 -- sh -c 'exit 1'`: its log, once it gave up with
/// the try's status.
fn failing_quota_run(runtime: &Path, tries: &str) -> String {
    let out = retry()
        .env("XDG_RUNTIME_DIR", runtime)
        .args([
            "--quota", "q", "-n", tries, "-d", "0", "--", "sh", "-c", "exit 1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    stderr_of(&out)
}

#[test]
fn a_shared_quota_caps_the_retries_of_many_runs() {
    let runtime = runtime_dir("herd-quota");
    let (without, _, _) = concurrent_failing_runs(40, &["-n", "5", "-d", "0"], &runtime);
    assert_eq!(without, 200, "without a quota every run makes its 5 tries");
    let (with, elapsed, alone) =
        concurrent_failing_runs(40, &["--quota", "q", "-n", "5", "-d", "0"], &runtime);
    // 40 first tries, then at most what the bucket held (10), what they deposited (40 × 0.2)
    // and what came back meanwhile (1 a second), and the 4 retries of a run that found the
    // quota's file busy and went on without it, as it says (docs/herd.md).
    let bound = 40.0 + 40.0 * 0.2 + 10.0 + elapsed.as_secs_f64().ceil() + 4.0 * alone as f64;
    assert!(
        (with as f64) <= bound,
        "{with} tries with the quota, more than {bound} (in {elapsed:?}; {alone} runs without it)"
    );
    assert!(with >= 40, "every first try runs: {with}");
}

#[test]
fn a_run_without_a_token_gives_up_at_once_with_reason_quota() {
    let runtime = runtime_dir("herd-refused");
    let out = retry()
        .env("XDG_RUNTIME_DIR", &runtime)
        .args([
            "--quota",
            "solo:cap=1,floor=0,ratio=0",
            "-n",
            "5",
            "-d",
            "0",
        ])
        .args(["--log-format", "json", "--", "sh", "-c", "exit 3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "the last try's status");
    let log = stderr_of(&out);
    let give_up = log
        .lines()
        .find(|l| l.contains("\"event\":\"give_up\""))
        .unwrap_or_else(|| panic!("no give_up event: {log}"));
    assert!(give_up.contains("\"reason\":\"quota\""), "{give_up}");
    assert!(
        give_up.contains("\"tries\":2"),
        "one retry had a token: {give_up}"
    );
    assert!(
        give_up.contains("retry quota 'solo' has 0.00 tokens"),
        "{give_up}"
    );

    // The human log says why, with the numbers.
    let out = retry()
        .env("XDG_RUNTIME_DIR", &runtime)
        .args([
            "--quota",
            "solo:cap=1,floor=0,ratio=0",
            "-n",
            "5",
            "-d",
            "0",
        ])
        .args(["--", "sh", "-c", "exit 3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let log = stderr_of(&out);
    assert!(
        log.contains("try 1/5 exited 3") && log.contains("giving up: the retry quota 'solo'"),
        "{log}"
    );
}

#[test]
fn a_damaged_quota_file_is_reset_with_a_warning() {
    let runtime = runtime_dir("herd-damaged");
    store_dir(&runtime, 0o700);
    std::fs::write(
        runtime.join("retry/q.quota"),
        b"\x00garbage\xff not a record",
    )
    .unwrap();
    let log = failing_quota_run(&runtime, "2");
    assert!(log.contains("warning:") && log.contains("q.quota"), "{log}");
    assert!(log.contains("try 2/2"), "the run went on: {log}");
}

#[test]
fn an_unusable_store_warns_and_the_run_keeps_its_own_limits() {
    let runtime = runtime_dir("herd-unusable");
    // A store directory that others may enter is refused.
    store_dir(&runtime, 0o777);
    let log = failing_quota_run(&runtime, "3");
    assert!(
        log.contains("cannot be used") && log.contains("only this run's own limits apply"),
        "{log}"
    );
    assert!(log.contains("try 3/3"), "all three tries ran: {log}");
}

/// The number after `"name":` in a JSON log line.
fn json_number(line: &str, name: &str) -> Option<u64> {
    let rest = line.split(&format!("\"{name}\":")).nth(1)?;
    rest.split([',', '}']).next()?.parse().ok()
}

/// Nanoseconds since the epoch, as `date +%s%N` writes them.
fn epoch_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[test]
fn staggered_runs_start_spread_over_the_stagger() {
    // Each run's first try starts no sooner than the stagger it drew after the run was started,
    // and the twenty draws spread over most of the second. Measured against each run's own
    // draw, not against the other runs: a machine that stalls for a second delays every try
    // but cannot make one start early.
    let dir = temp_dir("herd-stagger");
    let began = Instant::now();
    let mut runs: Vec<_> = (1..=20)
        .map(|seed| {
            let started = dir.join(format!("started{seed}"));
            let log = dir.join(format!("log{seed}"));
            let spawned = epoch_ns();
            let child = retry_std()
                .args(["--stagger", "1s", "--seed", &seed.to_string()])
                .args(["--log-format", "json", "--"])
                .args(["sh", "-c", &format!("date +%s%N > '{}'", started.display())])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .expect("start retry");
            (child, spawned, started, log)
        })
        .collect();
    let mut delays = Vec::new();
    for (child, spawned, started, log) in &mut runs {
        assert!(wait_bounded(child, common::STEP_LIMIT).success());
        let log = std::fs::read_to_string(log).unwrap();
        let event = log
            .lines()
            .find(|l| l.contains("\"event\":\"stagger\""))
            .unwrap_or_else(|| panic!("no stagger event: {log}"));
        let delay = Duration::from_millis(json_number(event, "delay_ms").expect(event));
        let at: u128 = std::fs::read_to_string(started)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let after = Duration::from_nanos((at - *spawned) as u64);
        // The wall clock may be slewed a little while the run waits.
        assert!(
            after + Duration::from_millis(2) >= delay,
            "{after:?} < {delay:?}"
        );
        assert!(
            after < delay + Duration::from_secs(5),
            "{after:?} for {delay:?}"
        );
        delays.push(delay);
    }
    delays.sort_unstable();
    assert!(
        delays[19] - delays[0] >= Duration::from_millis(500),
        "{delays:?}"
    );
    assert!(delays[19] <= Duration::from_secs(1), "{delays:?}");
    let took = began.elapsed();
    assert!(took < Duration::from_secs(8), "took {took:?}");
}

#[test]
fn the_stagger_is_drawn_from_the_seed_and_shown_by_the_dry_run_and_the_json_log() {
    let dry = retry()
        .args(["--dry-run", "--stagger", "10s", "--seed", "7", "-n", "2"])
        .output()
        .unwrap();
    assert_eq!(dry.status.code(), Some(0));
    let text = String::from_utf8_lossy(&dry.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.contains("stagger:"))
        .unwrap_or_else(|| panic!("no stagger line: {text}"));
    let again = retry()
        .args(["--dry-run", "--stagger", "10s", "--seed", "7", "-n", "2"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains(line));

    // The real run draws the same wait first: the JSON stagger event has it.
    let out = retry()
        .args([
            "--stagger",
            "300ms",
            "--seed",
            "7",
            "--log-format",
            "json",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let log = stderr_of(&out);
    let event = log
        .lines()
        .find(|l| l.contains("\"event\":\"stagger\""))
        .unwrap_or_else(|| panic!("no stagger event: {log}"));
    assert!(event.contains("\"most_ms\":300"), "{event}");
    let json = retry()
        .args(["--dry-run", "--stagger", "300ms", "--seed", "7"])
        .args(["--log-format", "json"])
        .output()
        .unwrap();
    let delay = json_number(event, "delay_ms").expect(event);
    assert!(
        String::from_utf8_lossy(&json.stdout).contains(&format!("\"stagger_ms\":{delay}")),
        "dry run and run disagree on the stagger {delay}"
    );
}

#[test]
fn a_stagger_as_long_as_the_budget_is_a_usage_error() {
    let out = retry()
        .args(["--stagger", "10s", "-B", "5s", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let log = stderr_of(&out);
    assert!(
        log.contains("--stagger") && log.lines().count() == 1,
        "{log}"
    );
}

#[test]
fn two_machines_share_one_redis_quota() {
    let Some(server) = Server::start("herd-fleet", &[]) else {
        return;
    };
    let url = server.url("fleet");
    // Two groups of runs with stores of their own, as on two machines: only Redis joins them.
    let (a, b) = (runtime_dir("herd-machine-a"), runtime_dir("herd-machine-b"));
    let started = Instant::now();
    let (url_a, url_b) = (url.clone(), url.clone());
    let group_a = std::thread::spawn(move || {
        concurrent_failing_runs(20, &["--quota", &url_a, "-n", "5", "-d", "0"], &a)
    });
    let group_b = std::thread::spawn(move || {
        concurrent_failing_runs(20, &["--quota", &url_b, "-n", "5", "-d", "0"], &b)
    });
    let ((tries_a, _, fell_a), (tries_b, _, fell_b)) =
        (group_a.join().unwrap(), group_b.join().unwrap());
    let elapsed = started.elapsed();
    let total = tries_a + tries_b;
    // A run whose Redis answer missed its deadline (a loaded machine) keeps the quota on its
    // own machine, as it must: each such machine's bucket adds its own cap, and each such run
    // its own deposit.
    let machines_fell_back = usize::from(fell_a > 0) + usize::from(fell_b > 0);
    let local = machines_fell_back as f64 * 10.0 + (fell_a + fell_b) as f64 * 0.2;
    let bound = 40.0 + 40.0 * 0.2 + 10.0 + elapsed.as_secs_f64().ceil() + local;
    assert!(
        (total as f64) <= bound,
        "{total} tries ({tries_a} + {tries_b}) across both, more than {bound} in {elapsed:?} \
         ({fell_a} + {fell_b} runs kept the quota on their machine)"
    );
    // Redis answered most of them: the quota was shared, not only kept apart.
    assert!(
        fell_a + fell_b < 40,
        "every run kept the quota on its machine"
    );
    assert!(total >= 40);
}

#[test]
fn runs_that_lose_redis_warn_and_go_on_with_the_local_store() {
    let Some(server) = Server::start("herd-lost", &[]) else {
        return;
    };
    let url = server.url("lost");
    let runtime = runtime_dir("herd-lost");
    // The first try deposits in Redis; the server goes before the retry takes its token.
    let dir = temp_dir("herd-lost-signal");
    let marker = dir.join("tried");
    let script = format!("touch '{}'; sleep 0.5; exit 1", marker.display());
    let mut child = retry_std()
        .env("XDG_RUNTIME_DIR", &runtime)
        .args([
            "--quota", &url, "-n", "3", "-d", "0", "--", "sh", "-c", &script,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        common::wait_until(Duration::from_secs(5), || marker.exists()),
        "the first try never started"
    );
    drop(server);
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    let mut log = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut log).unwrap();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains("cannot be reached") && log.contains("kept on this machine"),
        "{log}"
    );
    assert!(
        log.contains("try 3/3"),
        "the run went on with the local store: {log}"
    );
    assert_eq!(
        log.matches("cannot be reached").count(),
        1,
        "warned once: {log}"
    );
    assert!(runtime.join("retry/lost.quota").exists());

    // Unreachable from the start: the same warning, and the local store from the first try.
    let out = retry()
        .env("XDG_RUNTIME_DIR", &runtime)
        .args([
            "--quota", &url, "-n", "2", "-d", "0", "--", "sh", "-c", "exit 1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let log = stderr_of(&out);
    assert!(
        log.contains("cannot be reached") && log.contains("try 2/2"),
        "{log}"
    );
}

#[test]
fn a_signal_during_the_stagger_is_said_as_such_and_no_try_runs() {
    let dir = temp_dir("herd-stagger-signal");
    let ran = dir.join("ran");
    // Seed 1 draws 9.742 s of the 10 s.
    let mut child = retry_std()
        .args(["--stagger", "10s", "--seed", "1", "--", "touch"])
        .arg(&ran)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    common::send(child.id(), nix::libc::SIGTERM);
    let status = wait_bounded(&mut child, common::STEP_LIMIT);
    let mut log = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut log).unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(nix::libc::SIGTERM), "{log}");
    assert!(!ran.exists(), "{log}");
    assert!(
        log.contains("received SIGTERM during the stagger before the first try: no try ran"),
        "{log}"
    );
    assert!(log.contains("gave up before the first try in "), "{log}");
    assert!(!log.contains("try 0/") && !log.contains("0 tries"), "{log}");
}
