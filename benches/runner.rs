//! Figures for the runner, measured side by side in one run (not a timed test: the machines are
//! shared and noisy, so compare the ratios, not the absolute numbers).
//!
//!     cargo bench --bench runner
//!
//! It prints: the cost of one `retry -n 1 -- true` against Debian's C `retry`, bare `true` and
//! `timeout 10 true`, the commands called in turn (wall time, the ratio's median and spread over
//! many rounds, and peak memory); how late after its child's exit `retry` itself exits; how far
//! real waits overshoot the planned ones; the CPU `retry` uses while it waits.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::libc;

/// `retry` as installed: a copy of the build's program. The linker writes its output through a
/// memory map, and a program run from that very file starts measurably slower (a fifth more
/// overhead, side by side) than the same bytes written by `cp`, `cargo install` or dpkg, whose
/// page cache the kernel keeps in larger pieces. With `RETRY_BENCH_BINS` (see `builds`), the
/// last build it names.
fn retry_bin() -> &'static str {
    static INSTALLED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    INSTALLED.get_or_init(|| {
        let named = std::env::var("RETRY_BENCH_BINS").unwrap_or_default();
        let from = match named.split_whitespace().last() {
            Some(b) => b.split_once('=').map_or(b, |(_, path)| path).to_string(),
            None => env!("CARGO_BIN_EXE_retry").to_string(),
        };
        let to = format!("{}/retry", env!("CARGO_TARGET_TMPDIR"));
        let _ = std::fs::remove_file(&to);
        std::fs::copy(&from, &to).unwrap_or_else(|e| panic!("copy {from}: {e}"));
        to
    })
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Runs a command to its end; returns its wall time, and its CPU time and peak memory from
/// wait4.
// The child is reaped by wait4, which std's Child does not know of.
#[allow(clippy::zombie_processes)]
fn run(argv: &[&str]) -> (Duration, Duration, u64) {
    let started = Instant::now();
    let child = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    let cpu = Duration::from_micros(
        (usage.ru_utime.tv_sec as u64 + usage.ru_stime.tv_sec as u64) * 1_000_000
            + usage.ru_utime.tv_usec as u64
            + usage.ru_stime.tv_usec as u64,
    );
    (wall, cpu, usage.ru_maxrss as u64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Debian's `retry` (written in C), when it is installed.
fn debian_retry() -> Option<&'static str> {
    let path = "/usr/bin/retry";
    let out = Command::new(path)
        .arg("--help")
        .stderr(Stdio::null())
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .contains("--until")
        .then_some(path)
}

/// The builds of `retry` whose start-up is timed: `RETRY_BENCH_BINS="old=PATH new=PATH"` (say
/// a release build, as users install it, against another), else the one `cargo bench` built.
/// Each is timed from a copy, as installed (see `retry_bin`).
fn builds() -> Vec<(String, String)> {
    let list = std::env::var("RETRY_BENCH_BINS").unwrap_or_default();
    if list.trim().is_empty() {
        return vec![("retry".into(), retry_bin().into())];
    }
    list.split_whitespace()
        .enumerate()
        .map(|(k, b)| {
            let (name, path) = b.split_once('=').unwrap_or((b, b));
            let to = format!("{}/retry-{k}", env!("CARGO_TARGET_TMPDIR"));
            let _ = std::fs::remove_file(&to);
            std::fs::copy(path, &to).unwrap_or_else(|e| panic!("copy {path}: {e}"));
            (name.to_string(), to)
        })
        .collect()
}

/// The median, the quartiles and the extremes of `v`.
fn spread(mut v: Vec<f64>) -> [f64; 5] {
    v.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    [at(0.5), at(0.25), at(0.75), v[0], v[v.len() - 1]]
}

/// GNU time's maximum resident set of `argv` over `runs` runs: min, median, max, in KiB.
fn peak_rss(argv: &[&str], runs: usize) -> Option<[u64; 3]> {
    let mut peaks: Vec<u64> = (0..runs)
        .filter_map(|_| {
            let out = Command::new("/usr/bin/time")
                .args(["-f", "%M"])
                .args(argv)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .output()
                .ok()?;
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()?
                .trim()
                .parse()
                .ok()
        })
        .collect();
    peaks.sort_unstable();
    (!peaks.is_empty()).then(|| [peaks[0], peaks[peaks.len() / 2], peaks[peaks.len() - 1]])
}

/// Start-up against Debian's C `retry`, called in turn: in each of `ROUNDS` rounds every
/// command runs `PER_ROUND` times, the order turned by one at each call, so that no command
/// runs twice in a row and a noisy moment hits them all alike. Each round gives a ratio (of
/// its medians); the figure is the median of those ratios, with their spread.
fn overhead() {
    const ROUNDS: usize = 60;
    const PER_ROUND: usize = 10;
    let builds = builds();
    let debian = debian_retry();
    let mut commands: Vec<(String, Vec<&str>)> = vec![
        ("true".into(), vec!["true"]),
        ("timeout 10 true".into(), vec!["timeout", "10", "true"]),
    ];
    if let Some(debian) = debian {
        commands.push((
            "Debian retry -t 1 true".into(),
            vec![debian, "-t", "1", "true"],
        ));
    } else {
        println!("(Debian's retry is not installed: scripts/bench.sh installs it)");
    }
    let first_build = commands.len();
    for (name, path) in &builds {
        commands.push((
            format!("{name} -n 1 -- true"),
            vec![path, "-n", "1", "--", "true"],
        ));
    }
    for (name, path) in &builds {
        commands.push((format!("{name} --version"), vec![path, "--version"]));
    }
    let (rounds, all) = in_turn(&commands, ROUNDS, PER_ROUND);
    println!(
        "per invocation, {ROUNDS} rounds of {PER_ROUND} calls of each command in turn, median of all:"
    );
    for (c, (name, _)) in commands.iter().enumerate() {
        println!("  {name:<34} {:>7.0} µs", median(all[c].clone()));
    }
    if debian.is_some() {
        let d = first_build - 1;
        println!(
            "against Debian's retry, the median of the {ROUNDS} rounds' ratios [quartiles; min, max]:"
        );
        for b in 0..builds.len() {
            let c = first_build + b;
            let whole = spread(rounds.iter().map(|m| m[c] / m[d]).collect());
            let over = spread(
                rounds
                    .iter()
                    .map(|m| (m[c] - m[0]) / (m[d] - m[0]))
                    .collect(),
            );
            println!(
                "  {:<34} whole ×{:.3} [{:.3}–{:.3}; {:.3}, {:.3}]   over true ×{:.3} [{:.3}–{:.3}]   (target: at most ×1.00)",
                commands[c].0,
                whole[0],
                whole[1],
                whole[2],
                whole[3],
                whole[4],
                over[0],
                over[1],
                over[2]
            );
        }
    }
    peaks(&commands);
}

/// Runs every command `per_round` times in each of `rounds` rounds, the order turned by one
/// at each call. Returns each round's median of each command, and all the times of each, in
/// µs.
fn in_turn(
    commands: &[(String, Vec<&str>)],
    rounds: usize,
    per_round: usize,
) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let n = commands.len();
    let mut medians = Vec::with_capacity(rounds);
    let mut all = vec![Vec::new(); n];
    for r in 0..rounds {
        let mut walls = vec![Vec::with_capacity(per_round); n];
        for p in 0..per_round {
            for k in 0..n {
                let c = (k + r + p) % n;
                let (wall, _, _) = run(&commands[c].1);
                walls[c].push(wall.as_secs_f64() * 1e6);
            }
        }
        for (c, w) in walls.iter().enumerate() {
            all[c].extend(w);
        }
        medians.push(walls.into_iter().map(median).collect());
    }
    (medians, all)
}

/// The peak memory of each command, when GNU time is installed.
fn peaks(commands: &[(String, Vec<&str>)]) {
    // wait4's peak RSS of a child spawned from this (large) harness counts the harness's pages
    // shared before exec; GNU time, a small program, gives the command's own figure.
    if Path::new("/usr/bin/time").exists() {
        const RUNS: usize = 20;
        println!(
            "peak memory (GNU time's maximum resident set over {RUNS} runs: min / median / max):"
        );
        for (name, argv) in commands {
            if let Some([lo, mid, hi]) = peak_rss(argv, RUNS) {
                println!("  {name:<34} {lo:>5} / {mid:>5} / {hi:>5} KiB");
            }
        }
        println!("  (target for retry -n 1 -- true: under 2048 KiB)");
    }
}

/// From the end of a try's timeout to retry's exit, which comes after the whole tree is gone.
fn timeout_to_tree_death() {
    const ROUNDS: usize = 30;
    let timeout = Duration::from_millis(100);
    let lat: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let (wall, _, _) = run(&[
                retry_bin(),
                "-q",
                "-n",
                "1",
                "-t",
                "100ms",
                "-k",
                "5s",
                "--",
                "sh",
                "-c",
                "sleep 30 & sleep 30 & wait",
            ]);
            (wall.saturating_sub(timeout)).as_secs_f64() * 1e6
        })
        .collect();
    println!(
        "from a 100ms timeout to retry's exit with the tree (sh and two sleeps) gone, median of {ROUNDS}:"
    );
    println!(
        "  {:.0} µs (this includes starting retry and the try)",
        median(lat)
    );
}

/// 1,000 failing tries at -d 0 against a shell loop that runs false 1,000 times.
fn thousand_tries() {
    let rounds = 5;
    let mut ours = Vec::new();
    let mut loop_ = Vec::new();
    for _ in 0..rounds {
        ours.push(
            run(&[retry_bin(), "-q", "-n", "1000", "-d", "0", "--", "false"])
                .0
                .as_secs_f64(),
        );
        loop_.push(
            run(&[
                "sh",
                "-c",
                "i=0; while [ $i -lt 1000 ]; do /bin/false; i=$((i+1)); done",
            ])
            .0
            .as_secs_f64(),
        );
    }
    let (o, l) = (median(ours), median(loop_));
    println!("1,000 tries of false at -d 0, median of {rounds}:");
    println!("  retry -n 1000 -d 0 -- false   {o:.3} s");
    println!(
        "  sh loop running /bin/false    {l:.3} s   (retry ×{:.2} of the loop)",
        o / l
    );
}

/// The time from the helper's last instruction to the parent seeing the command end, for the
/// helper run directly and under retry.
fn exit_latency() {
    const ROUNDS: usize = 200;
    let me = std::env::current_exe().expect("the bench binary");
    let me = me.to_str().expect("a UTF-8 path");
    let measure = |argv: &[&str]| -> f64 {
        let child = Command::new(argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let out = child.wait_with_output().expect("wait");
        let seen = monotonic_ns();
        let exited: u64 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("the helper prints a time");
        (seen - exited) as f64 / 1000.0
    };
    let mut direct = Vec::new();
    let mut wrapped = Vec::new();
    for _ in 0..ROUNDS {
        direct.push(measure(&[me, "--print-time-and-exit"]));
        wrapped.push(measure(&[
            retry_bin(),
            "-n",
            "1",
            "--",
            me,
            "--print-time-and-exit",
        ]));
    }
    let (d, w) = (median(direct), median(wrapped));
    println!("from the child's exit to the caller seeing the end, median of {ROUNDS}:");
    println!("  child run directly      {d:>8.0} µs");
    println!(
        "  child run under retry   {w:>8.0} µs   (retry adds {:.0} µs)",
        w - d
    );
}

/// Gaps between one try's exit and the next try's start, against the planned wait.
fn wait_overshoot() {
    const WAIT_MS: u64 = 100;
    const TRIES: usize = 11;
    let me = std::env::current_exe().expect("the bench binary");
    let out = Command::new(retry_bin())
        .args([
            "-n",
            &TRIES.to_string(),
            "-j",
            "none",
            "--backoff",
            "constant",
            "-q",
        ])
        .args(["-d", &format!("{WAIT_MS}ms"), "--"])
        .arg(&me)
        .arg("--print-times-and-fail")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .expect("run retry");
    let times: Vec<(u64, u64)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (a, b) = l.split_once(' ')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .collect();
    let gaps: Vec<f64> = times
        .windows(2)
        .map(|w| (w[1].0 - w[0].1) as f64 / 1000.0 - (WAIT_MS * 1000) as f64)
        .collect();
    // What a spawn alone costs: from asking for the helper to its first instruction.
    let spawn: Vec<f64> = (0..50)
        .map(|_| {
            let before = monotonic_ns();
            let out = Command::new(&me)
                .arg("--print-times-and-fail")
                .stdin(Stdio::null())
                .output()
                .expect("run the helper");
            let started: u64 = String::from_utf8_lossy(&out.stdout)
                .split(' ')
                .next()
                .and_then(|s| s.parse().ok())
                .expect("a time");
            (started - before) as f64 / 1000.0
        })
        .collect();
    let spawn = median(spawn);
    let max = gaps.iter().cloned().fold(f64::MIN, f64::max);
    let med = median(gaps.clone());
    println!(
        "wait overshoot over {} waits of {WAIT_MS}ms, from a try's exit to the next try's start:",
        gaps.len()
    );
    println!("  gap beyond the planned wait: median {med:.0} µs, max {max:.0} µs");
    println!(
        "  a bare spawn of the same helper takes {spawn:.0} µs, so the wait itself overshoots by about {:.0} µs",
        (med - spawn).max(0.0)
    );
}

fn idle_cpu() {
    let (wall, cpu, _) = run(&[
        retry_bin(),
        "-n",
        "2",
        "-d",
        "3s",
        "-j",
        "none",
        "-q",
        "--",
        "false",
    ]);
    println!("CPU used by retry over a run with one 3s wait:");
    println!(
        "  {:.2} ms of CPU in {:.2} s of wall time (two tries included)",
        cpu.as_secs_f64() * 1000.0,
        wall.as_secs_f64()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--print-time-and-exit") {
        println!("{}", monotonic_ns());
        unsafe { libc::_exit(0) };
    }
    if args.iter().any(|a| a == "--print-times-and-fail") {
        let start = monotonic_ns();
        println!("{start} {}", monotonic_ns());
        unsafe { libc::_exit(1) };
    }
    if args.iter().any(|a| a == "--list") {
        return;
    }
    println!(
        "retry runner benchmark ({} cores)\n",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    overhead();
    println!();
    exit_latency();
    println!();
    timeout_to_tree_death();
    println!();
    wait_overshoot();
    println!();
    thousand_tries();
    println!();
    idle_cpu();
}
