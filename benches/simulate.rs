//! The simulator's speed (docs/simulation.md#simulation; the target in BENCHMARKS.md: 10,000
//! clients in about a second): clients and tries simulated per second by the library, and the wall
//! time of `retry --simulate` as a user runs it, start-up and printing included.
//!
//!     cargo bench --bench simulate

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use retry::config::{ParseOutcome, parse};

const RETRY: &str = env!("CARGO_BIN_EXE_retry");
const ROUNDS: usize = 5;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The scenario and policy of `retry --simulate ARGS`, as the command line builds them.
fn config(args: &[&str]) -> retry::config::Config {
    let argv = ["retry", "--simulate"].iter().chain(args);
    match parse(argv, std::time::SystemTime::now()) {
        ParseOutcome::Run(config) => *config,
        other => panic!("{args:?}: {other:?}"),
    }
}

/// Median seconds of one simulation, and the tries it made.
fn library(args: &[&str]) -> (f64, u64) {
    let config = config(args);
    let sim = config.simulation().expect("--simulate");
    let mut walls = Vec::new();
    let mut tries = 0;
    for round in 0..ROUNDS {
        let started = Instant::now();
        let figures = retry::sim::simulate(&config.policy, &sim.scenario, round as u64);
        walls.push(started.elapsed().as_secs_f64());
        tries = figures.tries;
    }
    (median(walls), tries)
}

/// Median wall time of `retry --simulate ARGS`, its output thrown away.
fn command(args: &[&str]) -> Duration {
    let walls = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            let status = Command::new(RETRY)
                .arg("--simulate")
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "{args:?}");
            started.elapsed().as_secs_f64()
        })
        .collect();
    Duration::from_secs_f64(median(walls))
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let outage = ["-n", "6", "--outage", "10s", "--capacity", "1000/s"];
    let occ = ["--model", "occ", "-d", "10ms", "-m", "2s"];
    println!("the simulator, median of {ROUNDS} seeds:");
    println!("  model   clients        tries     time   clients/s      tries/s");
    for (name, base, sizes) in [
        ("outage", &outage[..], &[1_000u32, 10_000, 100_000][..]),
        ("occ", &occ[..], &[100, 1_000, 10_000][..]),
    ] {
        for &clients in sizes {
            let n = clients.to_string();
            let args: Vec<&str> = base.iter().copied().chain(["--clients", &n]).collect();
            let (seconds, tries) = library(&args);
            println!(
                "  {name:<6} {clients:>8} {tries:>12} {:>7.3}s {:>11.0} {:>12.0}",
                seconds,
                f64::from(clients) / seconds,
                tries as f64 / seconds
            );
        }
    }
    println!("retry --simulate as run, start-up and printing included, median of {ROUNDS}:");
    for args in [
        &[
            "--clients",
            "10000",
            "-n",
            "6",
            "--outage",
            "20s",
            "--capacity",
            "1000/s",
        ][..],
        &[
            "--clients",
            "10000",
            "-n",
            "6",
            "--outage",
            "20s",
            "--capacity",
            "1000/s",
            "--compare",
            "--quota",
            "q",
        ],
        &[
            "--clients",
            "1000",
            "--model",
            "occ",
            "-d",
            "10ms",
            "-m",
            "2s",
            "--compare",
        ],
    ] {
        println!(
            "  {:>8.3?}  retry --simulate {}",
            command(args),
            args.join(" ")
        );
    }
}
