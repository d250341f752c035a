//! The agreement test of whole runs at scale (tests/common/agree.rs): thousands of random
//! option combinations and scripted commands through the real `retry`, every record of each
//! run checked against the others. It prints the figures: the cases, the cases that break each
//! invariant, and the time; with `--verbose`, every failing case and its shrunk reproduction.
//!
//!     cargo bench --bench agree -- --cases 5000 --seed 0x5eed
//!     RETRY_AGREE_CASES=5000 RETRY_AGREE_SEED=7 cargo bench --bench agree
//!
//! `--threads N` (or RETRY_AGREE_THREADS) sets how many cases run at once (3 by default).

#[path = "../tests/common/mod.rs"]
mod common;

use common::agree;

fn main() {
    let mut plan = agree::Plan::from_env(agree::DEFAULT_SEED, 5_000);
    // No shrinking unless asked: the bench counts.
    if plan.shrink.is_none() {
        plan.shrink = Some(std::time::Duration::ZERO);
    }
    let mut verbose = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            let v = args
                .next()
                .unwrap_or_else(|| panic!("{name} takes a value"));
            match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => v.parse(),
            }
            .unwrap_or_else(|_| panic!("{name}: not a number: {v}"))
        };
        match arg.as_str() {
            "--cases" => plan.cases = value("--cases"),
            "--seed" => plan.seed = value("--seed"),
            "--threads" => plan.threads = value("--threads").max(1) as usize,
            "--shrink-secs" => {
                plan.shrink = Some(std::time::Duration::from_secs(value("--shrink-secs")))
            }
            "--verbose" => verbose = true,
            // What cargo bench passes to every harness.
            "--bench" => {}
            other => panic!(
                "unknown argument {other} (--cases N, --seed S, --threads N, --shrink-secs N, --verbose)"
            ),
        }
    }
    let report = agree::run(&plan);
    if verbose {
        println!("{}", report.text());
    } else {
        print!("{}", report.figures());
    }
    let per_case = report.elapsed.as_secs_f64() * 1000.0 / report.cases.max(1) as f64;
    println!("  {per_case:.1} ms a case on {} threads", plan.threads);
}
