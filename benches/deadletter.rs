//! The speed of reading a dead-letter file (docs/dead-letters.md#listing-what-is-pending; the
//! target in BENCHMARKS.md: the pending runs of a file of 300,000 resolved runs listed in about a
//! second): a file of 300,000 runs that gave up, a replay's `attempt` lines for some of them and a
//! `resolved` line for all but one, read by the library and by `retry --replay FILE --dry-run` as a
//! user runs it, start-up and printing included.
//!
//!     cargo bench --bench deadletter
//!
//! `RETRY_BENCH_BINS="old=PATH new=PATH"` times those builds of `retry` instead of the one
//! this bench was built with, in turn in each round (a release build is what users install;
//! `cargo bench` builds its own, with its dev-dependencies' features).

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use retry::store::deadletter::{self, Record, Replayed};
use retry::store::record::LOCK_WAIT;

const RUNS: usize = 300_000;
/// Every this many runs, one failed replay of it.
const ATTEMPT_EVERY: usize = 50;
const ROUNDS: usize = 5;

/// xorshift64*: the same file at every run of the bench.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// The id of run `k`, as `retry` makes them.
fn id(rng: &mut Rng) -> String {
    let hex = format!("{:016x}{:016x}", rng.next(), rng.next());
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Run `k` that gave up, as `retry --dead-letter` records it.
fn record(k: usize, id: String) -> Record {
    Record {
        id,
        ts: format!(
            "2026-11-{:02}T{:02}:{:02}:00.{:03}Z",
            1 + k % 28,
            k % 24,
            k % 60,
            k % 1000
        ),
        label: (k % 3 != 0).then(|| format!("deploy-{}", k % 7)),
        cwd: Some(format!("/home/ci/builds/app-{}", k % 50).into()),
        command: ["curl", "-fsS", "--max-time", "10"]
            .iter()
            .map(Into::into)
            .chain([format!("https://api.example.com/v1/orders/{k}").into()])
            .collect(),
        options: [
            "-n",
            "5",
            "-t",
            "30s",
            "--dead-letter",
            "/var/lib/retry/failed.jsonl",
        ]
        .iter()
        .map(Into::into)
        .collect(),
        exit_code: 1 + k as u64 % 7,
        reason: "tries".into(),
        tries: 5,
        duration_ms: 1000 + k as u64 % 9000,
    }
}

/// Writes the file; returns its size.
fn write_file(path: &Path) -> u64 {
    let mut rng = Rng(0x0dea_d1e7_7e55_0001);
    let ids: Vec<String> = (0..RUNS).map(|_| id(&mut rng)).collect();
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    for (k, id) in ids.iter().enumerate() {
        writeln!(out, "{}", record(k, id.clone()).line()).unwrap();
    }
    let failed = Replayed::Failed {
        exit_code: 1,
        reason: "tries".into(),
        tries: 5,
    };
    for id in ids.iter().step_by(ATTEMPT_EVERY) {
        writeln!(out, "{}", deadletter::replayed_line(id, &failed)).unwrap();
    }
    for id in &ids[..RUNS - 1] {
        let resolved = Replayed::Resolved { tries: 1 };
        writeln!(out, "{}", deadletter::replayed_line(id, &resolved)).unwrap();
    }
    out.into_inner().unwrap().sync_all().unwrap();
    std::fs::metadata(path).unwrap().len()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The builds to time: `RETRY_BENCH_BINS`, else the one built with this bench.
fn builds() -> Vec<(String, String)> {
    match std::env::var("RETRY_BENCH_BINS") {
        Ok(list) if !list.trim().is_empty() => list
            .split_whitespace()
            .map(|b| match b.split_once('=') {
                Some((name, path)) => (name.to_string(), path.to_string()),
                None => (b.to_string(), b.to_string()),
            })
            .collect(),
        _ => vec![("retry".into(), env!("CARGO_BIN_EXE_retry").into())],
    }
}

/// One `retry --replay FILE --dry-run`: its wall time, its peak RSS (GNU time's, when
/// installed), and what it printed.
fn once(bin: &str, path: &Path) -> (f64, Option<u64>, String) {
    let time = Path::new("/usr/bin/time").exists();
    let mut cmd = if time {
        let mut c = Command::new("/usr/bin/time");
        c.args(["-f", "%M", bin]);
        c
    } else {
        Command::new(bin)
    };
    let started = Instant::now();
    let out = cmd
        .arg("--replay")
        .arg(path)
        .arg("--dry-run")
        .stdin(Stdio::null())
        .output()
        .expect("run retry");
    let wall = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let peak = time
        .then(|| stderr.lines().last()?.trim().parse().ok())
        .flatten();
    (
        wall,
        peak,
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("retry-bench-dl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dead.jsonl");
    let size = write_file(&path);
    println!(
        "a dead-letter file of {RUNS} runs, {} attempt lines and {} resolved ones (one run \
         pending): {:.1} MB",
        RUNS.div_ceil(ATTEMPT_EVERY),
        RUNS - 1,
        size as f64 / 1e6
    );
    let mut walls = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let listing = deadletter::read(&path, None, LOCK_WAIT).expect("a readable file");
        walls.push(started.elapsed().as_secs_f64());
        assert_eq!(listing.pending.len(), 1);
    }
    println!(
        "  library (deadletter::read), median of {ROUNDS}: {:.3} s",
        median(walls)
    );
    let builds = builds();
    let mut times = vec![Vec::new(); builds.len()];
    let mut peaks = vec![Vec::new(); builds.len()];
    let mut printed = String::new();
    // In turn, each build first in as many rounds as the others.
    for round in 0..ROUNDS {
        for k in 0..builds.len() {
            let b = (k + round) % builds.len();
            let (wall, peak, out) = once(&builds[b].1, &path);
            times[b].push(wall);
            peaks[b].extend(peak);
            printed = out;
        }
    }
    for (b, (name, _)) in builds.iter().enumerate() {
        let sorted = {
            let mut t = times[b].clone();
            t.sort_by(f64::total_cmp);
            t
        };
        let peak = peaks[b]
            .iter()
            .max()
            .map_or("-".into(), |p| format!("{p} KiB"));
        println!(
            "  {name}: retry --replay FILE --dry-run, median of {ROUNDS}: {:.3} s \
             (min {:.3}, max {:.3}), peak RSS {peak}",
            median(times[b].clone()),
            sorted[0],
            sorted[sorted.len() - 1]
        );
    }
    println!("what it prints:");
    for line in printed.lines().take(3) {
        println!("  {line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
