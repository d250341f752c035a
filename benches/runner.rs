//! Figures for the runner, measured side by side in one run (not a timed test: the machines are
//! shared and noisy, so compare the ratios, not the absolute numbers).
//!
//!     cargo bench --bench runner
//!
//! It prints: the cost of one `retry -n 1 -- true` against bare `true` and `timeout 10 true`
//! (wall time and peak memory); how late after its child's exit `retry` itself exits; how far
//! real waits overshoot the planned ones; the CPU `retry` uses while it waits.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::libc;

/// `retry` as installed: a copy of the build's program. The linker writes its output through a
/// memory map, and a program run from that very file starts measurably slower (a fifth more
/// overhead, side by side) than the same bytes written by `cp`, `cargo install` or dpkg, whose
/// page cache the kernel keeps in larger pieces.
fn retry_bin() -> &'static str {
    static INSTALLED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    INSTALLED.get_or_init(|| {
        let to = format!("{}/retry", env!("CARGO_TARGET_TMPDIR"));
        let _ = std::fs::remove_file(&to);
        std::fs::copy(env!("CARGO_BIN_EXE_retry"), &to).expect("copy retry");
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

fn overhead() {
    const ROUNDS: usize = 300;
    let mut commands: Vec<(&str, Vec<&str>)> = vec![
        ("true", vec!["true"]),
        ("timeout 10 true", vec!["timeout", "10", "true"]),
        (
            "retry -n 1 -- true",
            vec![retry_bin(), "-n", "1", "--", "true"],
        ),
        ("retry --version", vec![retry_bin(), "--version"]),
    ];
    let debian = debian_retry();
    if let Some(debian) = debian {
        commands.push(("Debian retry -t 1 true", vec![debian, "-t", "1", "true"]));
    } else {
        println!("(Debian's retry is not installed: scripts/bench.sh installs it)");
    }
    let mut walls = vec![Vec::new(); commands.len()];
    // Round-robin, so that a noisy moment hits every command alike.
    for _ in 0..ROUNDS {
        for (i, (_, argv)) in commands.iter().enumerate() {
            let (wall, _, _) = run(argv);
            walls[i].push(wall.as_secs_f64() * 1e6);
        }
    }
    let medians: Vec<f64> = walls.into_iter().map(median).collect();
    let (base, timeout, ours) = (medians[0], medians[1], medians[2]);
    println!("per invocation, median of {ROUNDS} interleaved runs:");
    for (i, (name, _)) in commands.iter().enumerate() {
        let m = medians[i];
        println!(
            "  {name:<29} {m:>7.0} µs   ×{:.2} of true   ×{:.2} of timeout   ×{:.2} of retry",
            m / base,
            m / timeout,
            m / ours,
        );
    }
    println!("overhead over true (the command's own start and end taken away):");
    println!("  retry -n 1 -- true            {:>7.0} µs", ours - base);
    if debian.is_some() {
        let theirs = medians[4] - base;
        println!("  Debian retry -t 1 true        {theirs:>7.0} µs");
        println!(
            "  retry's overhead / Debian's:  ×{:.2}   (target: at most ×1.00)",
            (ours - base) / theirs
        );
    }
    // wait4's peak RSS of a child spawned from this (large) harness counts the harness's pages
    // shared before exec; GNU time, a small program, gives the command's own figure.
    if Path::new("/usr/bin/time").exists() {
        println!("peak memory (GNU time's maximum resident set, highest of 5 runs):");
        for (name, argv) in &commands {
            let peak = (0..5)
                .filter_map(|_| {
                    let out = Command::new("/usr/bin/time")
                        .arg("-f")
                        .arg("%M")
                        .args(argv)
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .output()
                        .ok()?;
                    String::from_utf8_lossy(&out.stderr)
                        .lines()
                        .last()?
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
                .max()
                .unwrap_or(0);
            println!("  {name:<29} {peak:>7} KiB");
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
