//! The nemesis test of a fleet's failed runs at scale (tests/common/nemesis.rs): hundreds of
//! schedules of runs giving up, replays, forgets and prunes at once under faults, on a fleet's
//! Redis and on a file, each checked. It prints the schedules, the faults applied by kind, and
//! every violation with its seed (rerun one with `RETRY_NEMESIS_SEED=S cargo test --test run
//! nemesis::`).
//!
//!     cargo bench --bench nemesis -- --schedules 300 --seed 1000
//!
//! `--threads N` runs that many schedules at once (2 by default). `--lock` runs the schedules of
//! `--lock redis://…` instead (tests/common/nemesis_lock.rs): runs of a fleet's lock and their
//! fencing tokens under the faults a lease meets.
//!
//!     cargo bench --bench nemesis -- --lock --schedules 300 --seed 1000

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use common::nemesis::{Plan, Store, run};
use common::nemesis_lock::{LockPlan, run_lock};

fn main() {
    let (mut schedules, mut first, mut threads) = (300u64, 1000u64, 2usize);
    let lock = std::env::args().any(|a| a == "--lock");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().and_then(|v| v.parse::<u64>().ok());
        match arg.as_str() {
            "--schedules" => schedules = value().expect("--schedules N"),
            "--seed" => first = value().expect("--seed S"),
            "--threads" => threads = value().expect("--threads N").max(1) as usize,
            _ => {}
        }
    }
    let retry = std::path::PathBuf::from(env!("CARGO_BIN_EXE_retry"));
    let next = Arc::new(Mutex::new(0u64));
    let totals = Arc::new(Mutex::new((
        BTreeMap::<&'static str, u64>::new(),
        0usize,
        0usize,
        0u64,
    )));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let started = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (next, totals, failures, retry) = (
                next.clone(),
                totals.clone(),
                failures.clone(),
                retry.clone(),
            );
            std::thread::spawn(move || {
                loop {
                    let k = {
                        let mut n = next.lock().unwrap();
                        if *n >= schedules {
                            return;
                        }
                        *n += 1;
                        *n - 1
                    };
                    let seed = first + k;
                    // Two schedules of three on Redis, one on a file; or the lock's.
                    let store = if k % 3 == 2 {
                        Store::File
                    } else {
                        Store::Redis
                    };
                    let report = match lock {
                        true => run_lock(&LockPlan::new(seed), &retry),
                        false => run(&Plan::new(seed, store), &retry),
                    };
                    let Some(report) = report else {
                        return;
                    };
                    let mode = if lock {
                        "--lock".to_string()
                    } else {
                        format!("{store:?}")
                    };
                    let mut t = totals.lock().unwrap();
                    for (kind, n) in &report.faults {
                        *t.0.entry(kind).or_default() += n;
                    }
                    t.1 += report.runs;
                    t.2 += report.tries;
                    t.3 += 1;
                    for v in report.violations {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("seed {seed} ({mode}): {v}"));
                    }
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
    let (faults, runs, tries, done) = totals.lock().unwrap().clone();
    let failures = failures.lock().unwrap();
    println!(
        "nemesis{}: {done} schedules (seeds {first}..{}), {runs} runs, {tries} tries, {:.0} s",
        if lock { " --lock" } else { "" },
        first + schedules,
        started.elapsed().as_secs_f64()
    );
    for (kind, n) in &faults {
        println!("  {kind:<28} {n}");
    }
    println!("violations: {}", failures.len());
    for f in failures.iter() {
        println!("  {f}");
    }
    if !failures.is_empty() {
        std::process::exit(1);
    }
}
