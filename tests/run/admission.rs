//! Admission control through the binary (docs/herd.md#admission-control): `--throttle` holds
//! tries back, first ones included, while the runs of a quota mostly fail; the figures live in
//! the quota's store, a file on this machine or a Redis key.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use common::redis_server::Server;
use common::{retry, retry_std, runtime_dir, stderr_of, temp_dir, wait_bounded};

/// What 40 runs at once came to: how often the command ran, and the exit codes.
struct Fleet {
    ran: usize,
    codes: Vec<i32>,
    logs: Vec<String>,
}

/// Starts `n` runs of `retry ARGS --seed K -- sh -c 'echo >> RAN; SCRIPT'` at once, each with
/// `XDG_RUNTIME_DIR` at `runtime`, and waits for them all.
fn fleet(n: usize, args: &[&str], script: &str, runtime: &Path) -> Fleet {
    let dir = temp_dir("throttle-fleet");
    let ran = dir.join("ran");
    let script = format!("echo x >> '{}'; {script}", ran.display());
    let mut children: Vec<_> = (0..n)
        .map(|k| {
            let log = dir.join(format!("log{k}"));
            let child = retry_std()
                .env("XDG_RUNTIME_DIR", runtime)
                .args(args)
                .args(["--seed", &(k + 1).to_string()])
                .args(["--", "sh", "-c", &script])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .expect("start retry");
            (child, log)
        })
        .collect();
    let mut codes = Vec::new();
    let mut logs = Vec::new();
    for (child, log) in &mut children {
        let status = wait_bounded(child, Duration::from_secs(20));
        codes.push(status.code().unwrap_or(-1));
        logs.push(std::fs::read_to_string(log).unwrap());
    }
    let ran = std::fs::read_to_string(&ran).map_or(0, |t| t.lines().count());
    Fleet { ran, codes, logs }
}

// The reference's runs (docs/herd.md, scripts/throttle-local.sh) are spread over `--stagger 4s`;
// here over 1.5 s, which keeps the suite short and is the harder case: the runs overlap more, so
// fewer of them see the others' failures before they try. With these seeds the command runs 10
// times at 4 s, 1.5 s, 1 s and 500 ms alike, and 13 to 19 times with no stagger at all.
const FAILING: [&str; 10] = [
    "-n",
    "3",
    "-d",
    "50ms",
    "--stagger",
    "1500ms",
    "--throttle",
    "2",
    "--quota",
    "",
];

/// The 40 runs of the reference against a command that always fails transiently.
fn failing_fleet(quota: &str, runtime: &Path) -> Fleet {
    let mut args = FAILING;
    args[9] = quota;
    fleet(40, &args, "exit 1", runtime)
}

fn assert_held_back(f: &Fleet) {
    // The quota alone lets about 60 tries through, nothing 120.
    assert!(f.ran <= 20, "the command ran {} times", f.ran);
    assert!(
        f.ran >= 1,
        "the first runs into a store that saw no failure run"
    );
    let held = f.codes.iter().filter(|&&c| c == 75).count();
    assert!(held > 0, "no run gave up held: {:?}", f.codes);
    // Every other run gave up with the status of its last try that ran.
    assert!(f.codes.iter().all(|&c| c == 75 || c == 1), "{:?}", f.codes);
    let log = f
        .logs
        .iter()
        .find(|l| l.contains("held back"))
        .expect("a held try");
    assert!(
        log.contains("tries of quota") && log.contains("(p=0."),
        "{log}"
    );
}

#[test]
fn forty_failing_runs_on_one_machine_run_the_command_at_most_twenty_times() {
    let runtime = runtime_dir("throttle-local");
    let f = failing_fleet("q", &runtime);
    assert_held_back(&f);
}

#[test]
fn forty_failing_runs_that_share_redis_run_the_command_at_most_twenty_times() {
    let Some(server) = Server::start("throttle", &[]) else {
        return;
    };
    let runtime = runtime_dir("throttle-redis");
    let f = failing_fleet(&server.url("q"), &runtime);
    assert_held_back(&f);
    // The figures were the server's: nothing was kept on this machine.
    assert!(!runtime.join("retry").join("q.quota").exists());
    assert!(
        f.logs.iter().all(|l| !l.contains("warning")),
        "{:?}",
        f.logs
    );
}

#[test]
fn forty_runs_at_once_against_a_command_that_succeeds_hold_nothing_back() {
    let runtime = runtime_dir("throttle-ok");
    let f = fleet(
        40,
        &["-n", "3", "--quota", "q", "--throttle", "2"],
        "true",
        &runtime,
    );
    assert_eq!(f.ran, 40);
    assert!(f.codes.iter().all(|&c| c == 0), "{:?}", f.codes);
    assert!(
        f.logs.iter().all(|l| !l.contains("held back")),
        "{:?}",
        f.logs
    );
    // Each run's try was counted as the run ended, forty tries and forty accepted, but for
    // the runs that found the store held by others for longer than a run waits (a loaded
    // machine), which say so: their try is not counted.
    let uncounted = f
        .logs
        .iter()
        .filter(|l| l.contains("its throttle does not count how this run's last try ended"))
        .count();
    let record = std::fs::read_to_string(runtime.join("retry").join("q.quota")).unwrap();
    let figure = |name: &str| -> u64 {
        record
            .split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {record}"))
    };
    let counted = 40 - uncounted as u64;
    assert_eq!(
        (figure("r="), figure("a=")),
        (counted, counted),
        "expected {counted} tries counted and as many accepted (40 runs, {uncounted} said \
         their try was not counted), found this record: {record}"
    );
    assert!(
        uncounted <= 20,
        "{uncounted} of 40 runs found the store busy"
    );
}

/// A quota file whose throttle has seen `failed` tries fail in the window, none accepted, for
/// the runs of `runtime`.
fn failing_store(runtime: &Path, name: &str, failed: u64) -> PathBuf {
    let dir = runtime.join("retry");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let mut bucket = format!("retry-quota v1 tokens=10.000000 at={now}").into_bytes();
    bucket.resize(63, b' ');
    bucket.push(b'\n');
    let mut window = format!("retry-throttle v1 start={now} r={failed} a=0 pr=0 pa=0").into_bytes();
    window.resize(159, b' ');
    window.push(b'\n');
    let path = dir.join(format!("{name}.quota"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode_0600()
        .open(&path)
        .unwrap();
    file.write_all(&bucket).unwrap();
    file.write_all(&window).unwrap();
    path
}

trait Mode0600 {
    fn mode_0600(&mut self) -> &mut Self;
}

impl Mode0600 for std::fs::OpenOptions {
    fn mode_0600(&mut self) -> &mut Self {
        std::os::unix::fs::OpenOptionsExt::mode(self, 0o600)
    }
}

#[test]
fn a_run_whose_last_try_was_held_exits_with_the_status_of_its_last_try_that_ran() {
    // One try ran and failed with 3; after it the store has seen one failure and nothing
    // accepted, so p = 1/2 and about half the seeds hold the second try back.
    let mut seen_held = 0;
    for seed in 1..=16 {
        let runtime = runtime_dir("throttle-status");
        let out = retry()
            .env("XDG_RUNTIME_DIR", &runtime)
            .args(["-n", "2", "-d", "1ms", "--quota", "q", "--throttle", "2"])
            .args(["--seed", &seed.to_string(), "--", "sh", "-c", "exit 3"])
            .output()
            .unwrap();
        let log = stderr_of(&out);
        if log.contains("try 2/2 held back") {
            seen_held += 1;
            assert_eq!(out.status.code(), Some(3), "{log}");
            assert!(log.contains("the last that ran: exit 3"), "{log}");
        } else {
            assert_eq!(out.status.code(), Some(3), "{log}");
            assert!(log.contains("try 2/2 exited 3"), "{log}");
        }
    }
    assert!(seen_held > 0, "no seed held the second try back");
}

#[test]
fn a_success_after_held_tries_only_is_not_flaky() {
    // p = 0.95: most first tries are held; a run whose first try ran and succeeded, or whose
    // held tries were followed by a success, exits 0 even under --flaky fail.
    let mut held_then_ok = 0;
    for seed in 1..=30 {
        let runtime = runtime_dir("throttle-flaky");
        failing_store(&runtime, "q", 1000);
        let out = retry()
            .env("XDG_RUNTIME_DIR", &runtime)
            .args(["-n", "20", "-d", "1ms", "-m", "2ms", "--flaky", "fail"])
            .args([
                "--quota",
                "q",
                "--throttle",
                "2",
                "--seed",
                &seed.to_string(),
            ])
            .args(["--", "true"])
            .output()
            .unwrap();
        let log = stderr_of(&out);
        if log.contains("held back") && out.status.code() == Some(0) {
            held_then_ok += 1;
            assert!(!log.contains("flaky"), "{log}");
        }
        assert!(matches!(out.status.code(), Some(0 | 75)), "{log}");
    }
    assert!(held_then_ok > 0, "no run succeeded after held tries");
}

#[test]
fn the_seed_gives_the_same_waits_held_tries_or_not() {
    let runtime = runtime_dir("throttle-waits");
    failing_store(&runtime, "q", 1000);
    let waits = |runtime: &Path, throttle: bool| {
        let mut cmd = retry();
        cmd.env("XDG_RUNTIME_DIR", runtime)
            .args(["-n", "4", "-d", "5ms", "--quota", "q", "--seed", "9"])
            .args(["--log-format", "json"]);
        if throttle {
            cmd.args(["--throttle", "2"]);
        }
        let out = cmd.args(["--", "sh", "-c", "exit 1"]).output().unwrap();
        stderr_of(&out)
            .lines()
            .filter(|l| l.contains("\"event\":\"wait\""))
            .map(|l| l.split("\"delay_ms\":").nth(1).unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let plain = waits(&runtime_dir("throttle-waits-plain"), false);
    let held = waits(&runtime, true);
    assert_eq!(plain.len(), 3);
    assert_eq!(plain, held);
}

#[test]
fn the_dry_run_and_the_json_log_show_the_figures() {
    let runtime = runtime_dir("throttle-dry");
    failing_store(&runtime, "q", 48);
    let out = retry()
        .env("XDG_RUNTIME_DIR", &runtime)
        .args([
            "--dry-run",
            "--quota",
            "q",
            "--throttle",
            "2:window=5m,max=0.9",
            "--",
            "x",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("throttle: --throttle 2:window=5m,max=0.9: 0 of 48 tries of quota 'q' (48 ran, 0 held back) were accepted in the last 5m (p=0.90)"),
        "{text}"
    );
    let out = retry()
        .env("XDG_RUNTIME_DIR", &runtime)
        .args([
            "--dry-run",
            "--log-format",
            "json",
            "--quota",
            "q",
            "--throttle",
            "2",
        ])
        .args(["--", "x"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("\"throttle\":\"2\",\"throttle_requests\":48"),
        "{text}"
    );
    assert!(text.contains("\"throttle_p\":0.95"), "{text}");
    // A held try in the JSON log.
    let out = retry()
        .env("XDG_RUNTIME_DIR", &runtime)
        .args([
            "-n",
            "1",
            "--log-format",
            "json",
            "--quota",
            "q",
            "--throttle",
            "2",
        ])
        .args(["--seed", "1", "--", "true"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    if out.status.code() == Some(75) {
        assert!(log.contains("\"outcome\":{\"held\":true}"), "{log}");
        assert!(
            log.contains("\"reason\":\"held\",\"exit_code\":75"),
            "{log}"
        );
    } else {
        assert_eq!(out.status.code(), Some(0), "{log}");
    }
}

#[test]
fn a_held_run_is_a_dead_letter_that_replay_runs_once_the_dependency_is_back() {
    let runtime = runtime_dir("throttle-replay");
    failing_store(&runtime, "q", 1000);
    let dir = temp_dir("throttle-replay");
    let letters = dir.join("dead");
    let args = ["-n", "1", "--quota", "q", "--throttle", "2:window=1s"];
    // Seeds whose one try is held (p = 0.95) give up with 75 and are recorded.
    let mut held = 0;
    for seed in 1..=6 {
        let out = retry()
            .env("XDG_RUNTIME_DIR", &runtime)
            .args(args)
            .arg("--dead-letter")
            .arg(&letters)
            .args(["--seed", &seed.to_string(), "--", "true"])
            .output()
            .unwrap();
        if out.status.code() == Some(75) {
            held += 1;
        }
    }
    assert!(held > 0, "no run was held back");
    let text = std::fs::read_to_string(&letters).unwrap();
    assert!(text.contains("\"reason\":\"held\""), "{text}");
    // Two windows after the last held try the failures and the held tries no longer count: the
    // replay runs them, and they succeed.
    std::thread::sleep(Duration::from_millis(2100));
    let out = retry()
        .env("XDG_RUNTIME_DIR", &runtime)
        .arg("--replay")
        .arg(&letters)
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(!log.contains("held back"), "{log}");
}

#[test]
fn a_damaged_record_of_the_figures_fails_open() {
    let runtime = runtime_dir("throttle-damaged");
    let path = failing_store(&runtime, "q", 1000);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[64..100].copy_from_slice(&[0xff; 36]);
    std::fs::write(&path, bytes).unwrap();
    let out = retry()
        .env("XDG_RUNTIME_DIR", &runtime)
        .args([
            "-n",
            "1",
            "--quota",
            "q",
            "--throttle",
            "2",
            "--seed",
            "1",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // The record was written afresh.
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes[64..].starts_with(b"retry-throttle v1 "));
}

#[test]
fn a_redis_that_never_answers_delays_a_run_by_one_deadline_and_the_throttle_fails_open() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accepts and reads, never answers.
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut buf = [0u8; 4096];
                while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    let runtime = runtime_dir("throttle-hang");
    let began = Instant::now();
    let out = retry()
        .env("XDG_RUNTIME_DIR", &runtime)
        .args(["-n", "2", "-d", "1ms", "--throttle", "2", "--quota"])
        .arg(format!("redis://127.0.0.1:{port}/q"))
        .args(["--", "true"])
        .output()
        .unwrap();
    let took = began.elapsed();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(log.contains("warning"), "{log}");
    assert!(!log.contains("held"), "{log}");
    // One deadline (250 ms) for the first exchange; the run goes on without the store.
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

#[test]
fn throttle_needs_a_quota_and_a_k_above_one() {
    for (args, word) in [
        (&["--throttle", "2"][..], "--quota"),
        (&["--quota", "q", "--throttle", "1"][..], "--throttle"),
        (&["--quota", "q", "--throttle", "2:max=1"][..], "max=1"),
        (
            &["--quota", "q", "--throttle", "2:window=0s"][..],
            "window=0s",
        ),
        (
            &["--quota", "q", "--throttle", "2", "--repeat", "3"][..],
            "--repeat",
        ),
    ] {
        let out = retry().args(args).args(["--", "true"]).output().unwrap();
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        let err = stderr_of(&out);
        assert!(err.contains(word), "{args:?}: {err}");
    }
}

#[test]
fn held_tries_are_in_the_history_and_no_hook_runs_after_one() {
    // p = 0.95: most tries are held back. The hook runs only after a try that ran and failed,
    // and a run whose every try was held lists them all in its history line.
    let mut all_held = 0;
    for seed in 1..=12 {
        let runtime = runtime_dir("throttle-records");
        failing_store(&runtime, "q", 1000);
        let dir = temp_dir("throttle-records");
        let (ran, hooks, history) = (dir.join("ran"), dir.join("hooks"), dir.join("history"));
        let out = retry()
            .env("XDG_RUNTIME_DIR", &runtime)
            .args(["-n", "3", "-d", "1ms", "--quota", "q", "--throttle", "2"])
            .arg("--on-retry")
            .arg(format!("echo $RETRY_ATTEMPT >> '{}'", hooks.display()))
            .arg("--history")
            .arg(&history)
            .args(["--seed", &seed.to_string(), "--", "sh", "-c"])
            .arg(format!(
                "echo $RETRY_ATTEMPT >> '{}'; exit 1",
                ran.display()
            ))
            .output()
            .unwrap();
        let log = stderr_of(&out);
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        let ran: Vec<String> = read(&ran).lines().map(str::to_string).collect();
        for attempt in read(&hooks).lines() {
            assert!(
                ran.iter().any(|r| r == attempt),
                "a hook after try {attempt}, which did not run (ran: {ran:?}): {log}"
            );
        }
        let line = &common::json_file(&history)[0];
        assert_eq!(line["tries"], 3, "{line}");
        let outcomes = line["try_outcomes"].as_array().unwrap();
        assert_eq!(outcomes.len(), 3, "one entry a try, held or not: {line}");
        let held = outcomes.iter().filter(|o| o["held"] == true).count();
        assert_eq!(held + ran.len(), 3, "{line}");
        assert_eq!(
            line["failed"],
            ran.len(),
            "a held try is no failure: {line}"
        );
        if ran.is_empty() {
            all_held += 1;
            assert_eq!(out.status.code(), Some(75), "{log}");
            assert_eq!(line["exit_code"], 75, "{line}");
        }
    }
    assert!(all_held > 0, "no seed held every try back");
}

#[test]
fn the_dry_run_says_a_store_it_cannot_read_holds_nothing_back_and_prints_settings_short() {
    // A closed port: the store cannot be read, and a run would hold no try back.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let out = retry()
        .args(["--dry-run", "-n", "3", "--quota"])
        .arg(format!("redis://127.0.0.1:{port}/q"))
        .args(["--throttle", "2:max=1e-300", "--", "true"])
        .output()
        .unwrap();
    let text = common::stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr_of(&out));
    let line = text
        .lines()
        .find(|l| l.contains("--throttle"))
        .unwrap_or_else(|| panic!("no throttle line: {text}"));
    assert!(line.contains("holds no try back"), "{line}");
    assert!(!line.contains("with that chance"), "{line}");
    assert!(line.contains("max=1e-300"), "{line}");
    assert!(line.len() < 200, "{} characters: {line}", line.len());
}

#[test]
fn p_shows_it_is_neither_0_nor_1() {
    // 40 tries seen, 1 accepted: p = (40 - 2) / 41 is about 0.93; with max=0.999999 and none
    // accepted, p = 1000 / 1001, printed as neither 1 nor rounded up to it.
    let runtime = runtime_dir("throttle-precision");
    failing_store(&runtime, "q", 1000);
    let out = retry()
        .env("XDG_RUNTIME_DIR", &runtime)
        .args([
            "--dry-run",
            "--quota",
            "q",
            "--throttle",
            "2:max=0.999999",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let text = common::stdout_of(&out);
    assert!(text.contains("(p=0.999"), "{text}");
    assert!(!text.contains("p=1.00"), "{text}");
}

#[test]
fn a_local_window_dated_an_hour_ahead_starts_again_at_once() {
    let runtime = runtime_dir("throttle-clock-step");
    let path = failing_store(&runtime, "q", 200);
    // Date the window's slot an hour ahead, as a clock that was ahead and then corrected left it.
    let text = std::fs::read(&path).unwrap();
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let window = format!(
        "retry-throttle v1 start={} r=200 a=0 pr=0 pa=0",
        now + 3_600_000
    );
    let mut record = window.into_bytes();
    record.resize(159, b' ');
    record.push(b'\n');
    let mut text = text[..64].to_vec();
    text.extend_from_slice(&record);
    std::fs::write(&path, text).unwrap();
    let out = retry()
        .env("XDG_RUNTIME_DIR", &runtime)
        .args([
            "--dry-run",
            "--quota",
            "q",
            "--throttle",
            "2:window=1s",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let text = common::stdout_of(&out);
    assert!(
        text.contains("0 of 0 tries"),
        "held until the clock catches up: {text}"
    );
}

#[test]
fn the_quota_keeps_its_window_and_a_run_naming_another_counts_into_it_with_one_warning() {
    let runtime = runtime_dir("throttle-own-window");
    let run = |throttle: &str| {
        retry()
            .env("XDG_RUNTIME_DIR", &runtime)
            .args([
                "-n",
                "3",
                "-d",
                "0",
                "--quota",
                "w",
                "--throttle",
                throttle,
                "--seed",
                "7",
            ])
            .args(["--", "sh", "-c", "exit 1"])
            .output()
            .unwrap()
    };
    // Runs of a 1-day window count 20 failed tries.
    for _ in 0..7 {
        let _ = run("2:window=1d");
    }
    let dry = |throttle: &str| {
        let out = retry()
            .env("XDG_RUNTIME_DIR", &runtime)
            .args([
                "--dry-run",
                "--quota",
                "w",
                "--throttle",
                throttle,
                "--",
                "true",
            ])
            .output()
            .unwrap();
        common::stdout_of(&out)
    };
    let before = dry("2:window=1d");
    assert!(before.contains("in the last 24h"), "{before}");
    // A run that names 1s counts into the day's figures, and says so once.
    let out = run("2:window=1s");
    let log = stderr_of(&out);
    assert_eq!(
        log.matches("counts over its own window of 24h").count(),
        1,
        "{log}"
    );
    let after = dry("2:window=1d");
    let count = |text: &str| -> u64 {
        let at = text.find(" tries of quota").expect("the figures");
        let head = &text[..at];
        head[head.rfind(" of ").unwrap() + 4..]
            .trim()
            .parse()
            .unwrap()
    };
    assert!(
        count(&after) > count(&before),
        "reset by a 1s window: {before}\n{after}"
    );
}

#[test]
fn a_run_that_finds_the_store_busy_as_it_ends_says_its_try_was_not_counted() {
    if !common::on_path("flock") {
        eprintln!("SKIPPED: flock(1) is not installed (util-linux)");
        assert!(
            std::env::var_os("RETRY_REQUIRE_PACKAGES").is_none(),
            "flock is needed"
        );
        return;
    }
    let runtime = runtime_dir("throttle-count-busy");
    let dir = temp_dir("throttle-count-busy-run");
    let started = dir.join("started");
    let held = dir.join("held");
    let done = dir.join("done");
    // The try ends once the store is held by another process.
    let mut run = retry_std()
        .env("XDG_RUNTIME_DIR", &runtime)
        .args([
            "-n",
            "1",
            "--quota",
            "q",
            "--throttle",
            "2",
            "--",
            "sh",
            "-c",
        ])
        .arg(format!(
            "touch '{}'; while [ ! -e '{}' ]; do sleep 0.01; done",
            started.display(),
            held.display()
        ))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The try has started, its first exchange done: hold the store past the try's end.
    assert!(common::wait_until(common::STEP_LIMIT, || started.exists()));
    let quota = runtime.join("retry").join("q.quota");
    let mut holder = std::process::Command::new("flock")
        .arg("-x")
        .arg(&quota)
        .args(["sh", "-c"])
        .arg(format!(
            "touch '{}'; while [ ! -e '{}' ]; do sleep 0.01; done",
            held.display(),
            done.display()
        ))
        .spawn()
        .unwrap();
    let status = wait_bounded(&mut run, common::TEST_LIMIT);
    let mut log = String::new();
    run.stderr.take().unwrap().read_to_string(&mut log).unwrap();
    std::fs::write(&done, "").unwrap();
    wait_bounded(&mut holder, common::STEP_LIMIT);
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(
        log.contains("its throttle does not count how this run's last try ended"),
        "{log}"
    );
    let record = std::fs::read_to_string(&quota).unwrap();
    assert!(record.contains(" r=0 a=0 "), "{record}");
}

/// Runs `-n 5` of a failing command on `quota`, whose throttle has seen ten tries fail; then
/// the dry run's figures of the fifteen tries say how many ran and how many were held back, as
/// the run's own lines counted them.
fn held_and_ran_are_told_apart(quota: &str, runtime: &Path) {
    let out = retry()
        .env("XDG_RUNTIME_DIR", runtime)
        .args(["-n", "5", "-d", "1ms", "--quota", quota, "--throttle", "2"])
        .args(["--seed", "1", "--", "false"])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    let held = log.matches(" held back: ").count();
    assert!(held > 0, "{log}");
    let out = retry()
        .env("XDG_RUNTIME_DIR", runtime)
        .args(["--dry-run", "--quota", quota, "--throttle", "2", "--", "x"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let figures = format!(
        " ({} ran, {held} held back) were accepted in the last 2m",
        15 - held
    );
    assert!(
        text.contains("0 of 15 tries of quota ") && text.contains(&figures),
        "{figures}\n{log}\n{text}"
    );
}

#[test]
fn the_figures_tell_the_tries_that_ran_from_those_held_back_in_either_store() {
    let runtime = runtime_dir("throttle-held-file");
    failing_store(&runtime, "q", 10);
    held_and_ran_are_told_apart("q", &runtime);
    let Some(server) = Server::start("throttle-held", &[]) else {
        return;
    };
    // A hash written before the held tries were counted: none of its ten was held.
    let time = common::redis_server::cli(server.port, &["TIME"]);
    let now = (time[0].parse::<u64>().unwrap() * 1000).to_string();
    let mut set = vec![
        "HSET",
        "retry:quota:h",
        "tokens",
        "10",
        "at",
        &now,
        "ts",
        &now,
    ];
    set.extend([
        "tr", "10", "ta", "0", "tpr", "0", "tpa", "0", "tw", "120000",
    ]);
    common::redis_server::cli(server.port, &set);
    held_and_ran_are_told_apart(&server.url("h"), &runtime_dir("throttle-held-redis"));
}

#[test]
fn a_held_try_neither_ends_nor_extends_the_streak_the_give_up_reports() {
    // Seed 18, one failure in the window (p = 2/3 before the first try): try 1 runs and
    // succeeds, try 2 is held back, and the wait after it is about half a second. retry is
    // kept stopped in that wait past the end of the budget, so the run gives up once it is
    // let go, its last try that ran a success: one of three in a row, not a try not ready.
    let runtime = runtime_dir("throttle-streak");
    failing_store(&runtime, "q", 2);
    let began = Instant::now();
    let mut child = retry_std()
        .env("XDG_RUNTIME_DIR", &runtime)
        .args(["--consecutive", "3", "-B", "2s", "-d", "500ms"])
        .args([
            "--quota",
            "q",
            "--throttle",
            "1.01",
            "--seed",
            "18",
            "--",
            "true",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (lines, seen) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut log = String::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines.send(line.clone());
            log.push_str(&line);
            log.push('\n');
        }
        log
    });
    let held = loop {
        match seen.recv_timeout(Duration::from_secs(10)) {
            Ok(line) if line.contains("try 2/3 held back") => break true,
            Ok(_) => continue,
            Err(_) => break false,
        }
    };
    if held {
        common::send(child.id(), nix::libc::SIGSTOP);
        std::thread::sleep(Duration::from_millis(2300).saturating_sub(began.elapsed()));
        common::send(child.id(), nix::libc::SIGCONT);
    }
    let status = wait_bounded(&mut child, Duration::from_secs(20));
    let log = reader.join().unwrap();
    assert!(held, "try 2 was not held back: {log}");
    assert!(log.contains("try 1/3 succeeded"), "{log}");
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains("exit 0, but only 1 of 3 successful tries in a row (--consecutive)"),
        "{log}"
    );
    assert!(!log.contains("not ready"), "{log}");
    let took = began.elapsed();
    assert!(took >= Duration::from_secs(2), "{took:?}");
}
