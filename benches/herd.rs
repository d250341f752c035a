//! Herd safety side by side in one run (docs/herd.md#herd-safety): how many tries 50 always-failing
//! runs make at once with per-run limits only, with a local quota and with a Redis quota, and what
//! a quota check adds to a run.
//!
//!     cargo bench --bench herd
//!
//! The Redis figures need `redis-server` on PATH (scripts/bench.sh installs it); without it
//! they are left out, and said so.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RETRY: &str = env!("CARGO_BIN_EXE_retry");
const RUNS: usize = 50;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("retry-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Command::new("chmod").arg("700").arg(&dir).status().unwrap();
    dir
}

/// 50 runs of `retry ARGS -n 5 -d 0 -- sh -c 'echo >> tries; exit 1'` at once: the tries made
/// in all, and the wall time.
fn herd(args: &[&str], runtime: &Path) -> (usize, Duration) {
    let tries = runtime.join("tries");
    let _ = std::fs::remove_file(&tries);
    let script = format!("echo x >> '{}'; exit 1", tries.display());
    let started = Instant::now();
    let children: Vec<Child> = (0..RUNS)
        .map(|_| {
            Command::new(RETRY)
                .env("XDG_RUNTIME_DIR", runtime)
                .args(args)
                .args(["-n", "5", "-d", "0", "--", "sh", "-c", &script])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start retry")
        })
        .collect();
    for mut child in children {
        child.wait().unwrap();
    }
    let n = std::fs::read_to_string(&tries)
        .unwrap_or_default()
        .lines()
        .count();
    (n, started.elapsed())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The median wall time of each command, run round-robin.
fn interleaved(commands: &[Vec<String>], runtime: &Path, rounds: usize) -> Vec<f64> {
    let mut walls = vec![Vec::new(); commands.len()];
    for _ in 0..rounds {
        for (i, argv) in commands.iter().enumerate() {
            let started = Instant::now();
            Command::new(&argv[0])
                .args(&argv[1..])
                .env("XDG_RUNTIME_DIR", runtime)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap();
            walls[i].push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    walls.into_iter().map(median).collect()
}

struct Redis(Child);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A redis-server on a free loopback port, when one can be started.
fn redis() -> Option<(Redis, u16)> {
    let port = TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let server = Redis(child);
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some((server, port));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runtime = scratch("herd");
    let server = redis();
    let redis_url = server
        .as_ref()
        .map(|(_, port)| format!("redis://127.0.0.1:{port}/bench"));
    println!("{RUNS} always-failing runs at once, -n 5 -d 0: tries in all");
    let (plain, t_plain) = herd(&[], &runtime);
    println!("  per-run limits only        {plain:>5} tries   {t_plain:>8.2?}");
    let (local, t_local) = herd(&["--quota", "bench"], &runtime);
    println!(
        "  local quota                {local:>5} tries   {t_local:>8.2?}   (bound {:.0})",
        RUNS as f64 * 1.2 + 10.0 + t_local.as_secs_f64().ceil()
    );
    match &redis_url {
        Some(url) => {
            let (remote, t_remote) = herd(&["--quota", url], &runtime);
            println!("  Redis quota                {remote:>5} tries   {t_remote:>8.2?}");
        }
        None => println!("  Redis quota                (redis-server could not be started)"),
    }

    const ROUNDS: usize = 200;
    let mut commands = vec![
        vec![
            RETRY.into(),
            "-n".into(),
            "1".into(),
            "--".into(),
            "true".into(),
        ],
        vec![
            RETRY.into(),
            "--quota".into(),
            "latency".into(),
            "-n".into(),
            "1".into(),
            "--".into(),
            "true".into(),
        ],
    ];
    if let Some(url) = &redis_url {
        commands.push(vec![
            RETRY.into(),
            "--quota".into(),
            url.clone(),
            "-n".into(),
            "1".into(),
            "--".into(),
            "true".into(),
        ]);
    }
    let m = interleaved(&commands, &runtime, ROUNDS);
    println!("what a quota check adds to retry -n 1 -- true, median of {ROUNDS} interleaved runs:");
    println!("  without a quota            {:>7.0} µs", m[0]);
    println!(
        "  local quota                {:>7.0} µs   (+{:.0} µs; target under 1000)",
        m[1],
        m[1] - m[0]
    );
    if m.len() > 2 {
        println!(
            "  Redis quota                {:>7.0} µs   (+{:.0} µs; target under 2000)",
            m[2],
            m[2] - m[0]
        );
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&runtime);
}
