//! A fleet's failed runs at scale (docs/dead-letters.md#a-fleets-failed-runs-on-redis, the
//! targets in BENCHMARKS.md), with a `redis-server` of its own on 127.0.0.1:
//!
//! - 1,000 records replayed by 4 replays at once, two of them as another host (a UTS
//!   namespace, when run as root), each command marking its run: every record runs once;
//! - `--prune` of a file of a million lines while 40 runs give up: every record kept, and the
//!   longest a run giving up took;
//! - `--replay redis://... --dry-run` of 300,000 records, and `--stats` over a million runs of a
//!   fleet's history.
//!
//!     cargo bench --bench fleet

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

#[path = "../tests/common/mod.rs"]
mod common;
use std::time::{Duration, Instant};

use retry::store::deadletter::Record;

const RETRY: &str = env!("CARGO_BIN_EXE_retry");

/// Sends `commands` to the server through `redis-cli --pipe`.
fn pipe(port: u16, commands: impl Iterator<Item = Vec<Vec<u8>>>) {
    let mut cli = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    {
        let mut input = std::io::BufWriter::with_capacity(1 << 20, cli.stdin.take().unwrap());
        for args in commands {
            write!(input, "*{}\r\n", args.len()).unwrap();
            for a in args {
                write!(input, "${}\r\n", a.len()).unwrap();
                input.write_all(&a).unwrap();
                input.write_all(b"\r\n").unwrap();
            }
        }
    }
    assert!(cli.wait().unwrap().success());
}

fn record(k: usize, dir: &Path, command: &str) -> Record {
    Record {
        id: format!("{:08x}-5ca1-4e00-8000-{:012x}", k, k * 7919),
        ts: "2026-12-01T02:00:00.000Z".into(),
        label: Some(format!("job-{}", k % 10)),
        cwd: Some(dir.as_os_str().to_os_string()),
        command: vec!["sh".into(), "-c".into(), command.into()],
        options: vec!["-n".into(), "1".into()],
        exit_code: 1,
        reason: "tries".into(),
        tries: 1,
        duration_ms: 12,
    }
}

/// Adds the records `0..n` to the dead letters of `name`, half of them made on `other`.
fn dead_letters(
    port: u16,
    name: &str,
    n: usize,
    dir: &Path,
    command: &str,
    here: &str,
    other: &str,
) {
    let stream = format!("retry:dead:{{{name}}}");
    let ids = format!("retry:dead:{{{name}}}:ids");
    pipe(
        port,
        (0..n).flat_map(|k| {
            let r = record(k, dir, command);
            let host = if k % 2 == 0 { here } else { other };
            [
                vec![
                    b"XADD".to_vec(),
                    stream.clone().into_bytes(),
                    b"*".to_vec(),
                    b"id".to_vec(),
                    r.id.clone().into_bytes(),
                    b"host".to_vec(),
                    host.as_bytes().to_vec(),
                    b"record".to_vec(),
                    r.line().into_bytes(),
                ],
                vec![
                    b"HSET".to_vec(),
                    ids.clone().into_bytes(),
                    r.id.into_bytes(),
                    b"0-0".to_vec(),
                ],
            ]
        }),
    );
}

fn host() -> String {
    nix::unistd::gethostname().unwrap().into_string().unwrap()
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("retry-bench-fleet-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn four_replays(port: u16) {
    let dir = temp("four");
    let url = format!("redis://127.0.0.1:{port}/four");
    dead_letters(
        port,
        "four",
        1000,
        &dir,
        "echo $RETRY_RUN_ID >> marks",
        &host(),
        "other-host",
    );
    let as_root = unsafe { nix::libc::geteuid() } == 0
        && Command::new("unshare")
            .args(["-u", "true"])
            .status()
            .is_ok_and(|s| s.success());
    let started = Instant::now();
    let mut replays: Vec<Child> = (0..4)
        .map(|k| {
            let mut cmd = if k >= 2 && as_root {
                let mut c = Command::new("unshare");
                c.args([
                    "-u",
                    "sh",
                    "-c",
                    "hostname other-host && exec \"$0\" \"$@\"",
                    RETRY,
                ]);
                c
            } else {
                Command::new(RETRY)
            };
            cmd.args(["--replay", &url, "--any-host", "-q"])
                .current_dir(&dir)
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for r in &mut replays {
        assert!(r.wait().unwrap().success());
    }
    let took = started.elapsed();
    let marks = std::fs::read_to_string(dir.join("marks")).unwrap();
    let mut ids: Vec<&str> = marks.lines().collect();
    let runs = ids.len();
    ids.sort_unstable();
    ids.dedup();
    println!(
        "1,000 records, 4 replays at once ({}): {runs} runs, {} distinct, {:.2} s",
        if as_root {
            "two in a UTS namespace as other-host"
        } else {
            "one host: not root"
        },
        ids.len(),
        took.as_secs_f64()
    );
    assert_eq!(
        (runs, ids.len()),
        (1000, 1000),
        "every record ran exactly once"
    );
}

fn prune_while_runs_give_up() {
    let dir = temp("prune");
    let file = dir.join("d.jsonl");
    {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&file).unwrap());
        for k in 0..500_000 {
            let r = record(k, &dir, "false");
            writeln!(out, "{}", r.line()).unwrap();
            writeln!(
                out,
                r#"{{"event":"resolved","id":"{}","ts":"2026-12-01T03:00:00.000Z","tries":1}}"#,
                r.id
            )
            .unwrap();
        }
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let started = Instant::now();
    let prune = Command::new(RETRY)
        .args(["--prune", "d.jsonl", "--older-than", "3650d"])
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Each run is waited for on a thread of its own, so that its time is its own.
    let mut runs = Vec::new();
    for _ in 0..40 {
        let at = Instant::now();
        let child = Command::new(RETRY)
            .args(["--dead-letter", "d.jsonl", "-n", "1", "--", "false"])
            .current_dir(&dir)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        runs.push(std::thread::spawn(move || {
            let out = child.wait_with_output().unwrap();
            (
                at.elapsed(),
                String::from_utf8_lossy(&out.stderr).contains("warning"),
            )
        }));
        std::thread::sleep(Duration::from_millis(25));
    }
    let mut times = Vec::new();
    let mut warned = 0;
    for run in runs {
        let (took, warning) = run.join().unwrap();
        times.push(took);
        warned += usize::from(warning);
    }
    times.sort();
    let longest = times[times.len() - 1];
    let median = times[times.len() / 2];
    let said = prune.wait_with_output().unwrap();
    let pruned_in = started.elapsed();
    let left = Command::new(RETRY)
        .args(["--replay", "d.jsonl", "--dry-run", "--log-format", "json"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let pending = String::from_utf8_lossy(&left.stdout).lines().count();
    println!(
        "prune of 1,000,000 lines while 40 runs give up: {:.2} s; {pending} of 40 records kept; a run giving up took {:.0} ms at the median, {:.0} ms at most; {warned} warnings",
        pruned_in.as_secs_f64(),
        median.as_secs_f64() * 1000.0,
        longest.as_secs_f64() * 1000.0
    );
    println!("  {}", String::from_utf8_lossy(&said.stdout).trim());
    assert_eq!(pending, 40);
}

fn listing_and_stats(port: u16) {
    let dir = temp("list");
    dead_letters(port, "big", 300_000, &dir, "true", &host(), "other-host");
    let url = format!("redis://127.0.0.1:{port}/big");
    let mut best = Duration::MAX;
    let mut listed = 0;
    for _ in 0..3 {
        let started = Instant::now();
        let out = Command::new(RETRY)
            .args(["--replay", &url, "--dry-run"])
            .output()
            .unwrap();
        best = best.min(started.elapsed());
        listed = String::from_utf8_lossy(&out.stdout)
            .lines()
            .count()
            .saturating_sub(1);
    }
    println!(
        "--replay redis://... --dry-run of 300,000 records: {listed} listed in {:.2} s (best of 3)",
        best.as_secs_f64()
    );
    let key = "retry:history:{fleet}".to_string();
    pipe(
        port,
        (0..1_000_000usize).map(|k| {
            let line = format!(
                r#"{{"event":"run","id":"{k:016x}","ts":"2026-12-01T{:02}:{:02}:00.000Z","label":"step-{}","command":["make","test"],"tries":{},"outcome":"success","reason":null,"exit_code":0,"flaky":{},"duration_ms":{},"try_outcomes":[{{"exit":0}}],"failed":0}}"#,
                k % 24,
                k % 60,
                k % 12,
                1 + k % 3 / 2,
                k % 3 == 2,
                100 + k % 900
            );
            vec![
                b"XADD".to_vec(),
                key.clone().into_bytes(),
                b"*".to_vec(),
                b"host".to_vec(),
                format!("web-{}", k % 5).into_bytes(),
                b"line".to_vec(),
                line.into_bytes(),
            ]
        }),
    );
    let url = format!("redis://127.0.0.1:{port}/fleet");
    let mut best = Duration::MAX;
    let mut rows = 0;
    for _ in 0..3 {
        let started = Instant::now();
        let out = Command::new(RETRY)
            .args(["--stats", &url, "--log-format", "json"])
            .output()
            .unwrap();
        best = best.min(started.elapsed());
        rows = String::from_utf8_lossy(&out.stdout)
            .matches("stats_row")
            .count();
    }
    println!(
        "--stats over 1,000,000 fleet runs on Redis: {rows} rows (12 labels x 5 hosts) in {:.2} s (best of 3)",
        best.as_secs_f64()
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    // RETRY_BENCH_ONLY=four|prune|list runs one part.
    let only = std::env::var("RETRY_BENCH_ONLY").unwrap_or_default();
    let part = |name: &str| only.is_empty() || only == name;
    // The tests' own server: started on a free port, stopped when dropped.
    let Some(server) = common::redis_server::Server::start("bench-fleet", &[]) else {
        return;
    };
    if part("four") {
        four_replays(server.port);
    }
    if part("prune") {
        prune_while_runs_give_up();
    }
    if part("list") {
        listing_and_stats(server.port);
    }
}
