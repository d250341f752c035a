//! Admission control's targets in simulation (docs/simulation.md#admission-control; the figures
//! in BENCHMARKS.md): 1,000 clients arriving every minute at a dependency down for 10 minutes,
//! with the defaults of `retry` (3 tries, exponential backoff from 1s ×2, cap 1m, full jitter)
//! and the quota at its defaults, with the quota alone and with `--throttle 2`; then how K, the
//! window and max move the figures. Each figure is the median of a few seeds. Then docs/herd.md's
//! fleet line as deployed (`--stagger 20s -n 3 -B 50s`), with the runs that arrive once `p` has
//! recovered; a store whose clock is stepped an hour either way at the end of the outage, in
//! simulation; and a real local store's record left by a clock an hour ahead, through the
//! binary.
//!
//!     cargo bench --bench throttle

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use retry::config::{ParseOutcome, parse};
use retry::sim::{Figures, StoreClock, simulate};

const RETRY: &str = env!("CARGO_BIN_EXE_retry");

/// docs/herd.md's crontab line for a fleet (`--stagger 20s -n 3 -B 50s --quota …`), 1,000 clients
/// every minute against the same outage.
const README_FLEET: &[&str] = &[
    "--clients",
    "1000",
    "--every",
    "1m",
    "--outage",
    "10m",
    "--stagger",
    "20s",
    "-n",
    "3",
    "-B",
    "50s",
    "--quota",
    "db",
];

/// Seeds of each figure: 1 to SEEDS.
const SEEDS: u64 = 7;

/// The target scenario, as `retry --simulate` takes it.
const FLEET: &[&str] = &[
    "--clients",
    "1000",
    "--every",
    "1m",
    "--outage",
    "10m",
    "--quota",
    "q",
];

/// The outage, in minutes.
const OUTAGE_MINUTES: usize = 10;

/// The policy and scenario of `retry --simulate ARGS`, as the command line builds them.
fn config(args: &[&str]) -> retry::config::Config {
    let argv = ["retry", "--simulate"].iter().chain(args);
    match parse(argv, std::time::SystemTime::now()) {
        ParseOutcome::Run(config) => *config,
        other => panic!("{args:?}: {other:?}"),
    }
}

/// The figures of each seed, and the median wall time of one simulation.
fn run(args: &[&str]) -> (Vec<Figures>, Duration) {
    run_with_clock(args, StoreClock::default())
}

/// [`run`], with the throttle's store on `clock`.
fn run_with_clock(args: &[&str], clock: StoreClock) -> (Vec<Figures>, Duration) {
    let config = config(args);
    let mut scenario = config.simulation().expect("--simulate").scenario.clone();
    scenario.store_clock = clock;
    let mut walls = Vec::new();
    let figures = (1..=SEEDS)
        .map(|seed| {
            let started = Instant::now();
            let f = simulate(&config.policy, &scenario, seed);
            walls.push(started.elapsed());
            f
        })
        .collect();
    walls.sort();
    (figures, walls[walls.len() / 2])
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Tries sent in each minute.
fn per_minute(f: &Figures) -> Vec<u64> {
    let factor = 60_000_000_000 / f.series.width.as_nanos().max(1);
    f.series.merged(factor as usize).tries
}

/// What one setting of the throttle does, against the quota alone of the same seed.
struct Row {
    /// Tries sent during the outage, as a share of the quota alone's.
    share: f64,
    /// The largest share of any minute of the outage after the first window.
    worst_minute: f64,
    /// The smallest share of those minutes.
    best_minute: f64,
    after: f64,
    /// Seconds from the end of the outage until p fell below 0.1; infinite when it did not.
    recovered: f64,
    held_runs: f64,
    in_outage: f64,
    /// The share of the runs arriving once `p` was below 0.1 that succeeded.
    after_recovery: f64,
}

fn row(alone: &[Figures], with: &[Figures], window_minutes: usize) -> Row {
    let mut shares = Vec::new();
    let mut worst = Vec::new();
    let mut best = Vec::new();
    for (q, t) in alone.iter().zip(with) {
        shares.push(t.fleet.in_outage as f64 / q.fleet.in_outage as f64);
        let (qm, tm) = (per_minute(q), per_minute(t));
        let minutes: Vec<f64> = (window_minutes..OUTAGE_MINUTES)
            .map(|m| tm[m] as f64 / qm[m] as f64)
            .collect();
        worst.push(minutes.iter().copied().fold(0.0, f64::max));
        best.push(minutes.iter().copied().fold(f64::INFINITY, f64::min));
    }
    let of = |get: &dyn Fn(&Figures) -> f64| median(with.iter().map(get).collect());
    Row {
        share: median(shares),
        worst_minute: median(worst),
        best_minute: median(best),
        after: of(&|f| f.fleet.after_outage as f64),
        recovered: of(&|f| f.fleet.recovered.map_or(f64::INFINITY, |d| d.as_secs_f64())),
        held_runs: of(&|f| f64::from(f.gave_up_for("held"))),
        in_outage: of(&|f| f.fleet.in_outage as f64),
        after_recovery: of(&|f| {
            f64::from(f.fleet.succeeded_after_recovery) / f64::from(f.fleet.after_recovery.max(1))
        }),
    }
}

/// Seconds as `360s`, or `never`.
fn secs(s: f64) -> String {
    if s.is_finite() {
        format!("{s:.0}s")
    } else {
        "never".into()
    }
}

/// docs/herd.md's fleet line, with its budget and stagger, the quota alone against the throttle.
fn readme_fleet() {
    let throttled: Vec<&str> = README_FLEET
        .iter()
        .copied()
        .chain(["--throttle", "2"])
        .collect();
    let (alone, _) = run(README_FLEET);
    let (with, _) = run(&throttled);
    let r = row(&alone, &with, 2);
    println!(
        "docs/herd.md's fleet line: retry --simulate {} --throttle 2, median of {SEEDS} seeds:",
        README_FLEET.join(" ")
    );
    println!(
        "  during the outage {:.1}% of the quota alone's (at most 30%); after the first window \
         {:.1}-{:.1}% a minute (at most 20%); p below 0.1 {} after it, {:.2} windows (within 4)",
        100.0 * r.share,
        100.0 * r.best_minute,
        100.0 * r.worst_minute,
        secs(r.recovered),
        r.recovered / 120.0
    );
    let seeds: Vec<String> = with
        .iter()
        .map(|f| {
            format!(
                "{} of {}",
                f.fleet.succeeded_after_recovery, f.fleet.after_recovery
            )
        })
        .collect();
    println!(
        "  runs arriving once p was below 0.1 that succeeded: {:.1}% (at least 95%); seed by seed: {}",
        100.0 * r.after_recovery,
        seeds.join(", ")
    );
}

/// The throttle's store with its clock an hour ahead until the end of the outage and right
/// after it, and right until then and an hour ahead after it, against a right clock.
fn clock_steps() {
    let throttled: Vec<&str> = FLEET.iter().copied().chain(["--throttle", "2"]).collect();
    let hour = 3_600_000;
    let outage_end = Duration::from_secs(60 * OUTAGE_MINUTES as u64);
    println!("a store clock stepped at the end of the outage, median of {SEEDS} seeds:");
    for (what, ahead_ms, ahead_after_ms) in [
        ("right all along", 0, 0),
        ("an hour ahead, then corrected (back 1h)", hour, 0),
        ("stepped forward 1h", 0, hour),
    ] {
        let clock = StoreClock {
            step_at: outage_end,
            ahead_ms,
            ahead_after_ms,
        };
        let (with, _) = run_with_clock(&throttled, clock);
        let recovered = median(
            with.iter()
                .map(|f| f.fleet.recovered.map_or(f64::INFINITY, |d| d.as_secs_f64()))
                .collect(),
        );
        let held = median(with.iter().map(|f| f.fleet.held as f64).collect());
        println!(
            "  {what:<42} p below 0.1 {:>5} after the outage (within one window, 120s); {held:.0} tries held",
            secs(recovered)
        );
    }
}

/// `retry ARGS` with `XDG_RUNTIME_DIR=runtime`: its standard output and error.
fn retry_in(runtime: &Path, args: &[&str]) -> (String, String) {
    let out = Command::new(RETRY)
        .env("XDG_RUNTIME_DIR", runtime)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run retry");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A local store filled by 10 failing runs, its window then dated `ahead_ms` ahead as a host
/// whose clock was ahead would have left it: `p` now, and how many of 20 runs of a command
/// that succeeds (one try each) had their try held back.
fn real_store(ahead_ms: u64) -> (String, usize) {
    let runtime = std::env::temp_dir().join(format!(
        "retry-bench-throttle-{}-{ahead_ms}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&runtime);
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let throttle = ["--quota", "q", "--throttle", "2"];
    for _ in 0..10 {
        let args: Vec<&str> = throttle
            .iter()
            .copied()
            .chain(["-n", "3", "-d", "0", "--", "sh", "-c", "exit 1"])
            .collect();
        retry_in(&runtime, &args);
    }
    let path = runtime.join("retry").join("q.quota");
    let mut text = std::fs::read(&path).expect("the quota's file");
    let record = String::from_utf8_lossy(&text[64..]).into_owned();
    let start: u64 = record
        .split_whitespace()
        .find_map(|w| w.strip_prefix("start="))
        .and_then(|n| n.parse().ok())
        .expect("the window's start");
    let moved = record.replacen(
        &format!("start={start}"),
        &format!("start={}", start + ahead_ms),
        1,
    );
    assert_eq!(moved.len(), record.len(), "the same number of digits");
    text.truncate(64);
    text.extend_from_slice(moved.as_bytes());
    std::fs::write(&path, text).unwrap();
    let dry: Vec<&str> = ["--dry-run"]
        .iter()
        .chain(&throttle)
        .chain(&["--", "true"])
        .copied()
        .collect();
    let (shown, _) = retry_in(&runtime, &dry);
    let p = shown
        .lines()
        .find(|l| l.contains("throttle:"))
        .unwrap_or_default()
        .trim()
        .to_string();
    let mut held = 0;
    for _ in 0..20 {
        let args: Vec<&str> = throttle
            .iter()
            .copied()
            .chain(["-n", "1", "--", "true"])
            .collect();
        let (_, log) = retry_in(&runtime, &args);
        held += usize::from(log.contains("held back"));
    }
    let _ = std::fs::remove_dir_all(&runtime);
    (p, held)
}

/// A bar of `n` tries, one `#` per `per` tries.
fn bar(n: u64, per: u64) -> String {
    "#".repeat(n.div_ceil(per) as usize)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let throttled: Vec<&str> = FLEET.iter().copied().chain(["--throttle", "2"]).collect();
    let (alone, alone_wall) = run(FLEET);
    let (with, with_wall) = run(&throttled);
    let target = row(&alone, &with, 2);
    let median_of =
        |fs: &[Figures], get: &dyn Fn(&Figures) -> f64| median(fs.iter().map(get).collect());
    println!(
        "retry --simulate {}, median of {SEEDS} seeds:",
        FLEET.join(" ")
    );
    println!(
        "  quota alone:   {:>6.0} tries during the outage, {:>6.0} after it  ({alone_wall:.1?} a simulation)",
        median_of(&alone, &|f| f.fleet.in_outage as f64),
        median_of(&alone, &|f| f.fleet.after_outage as f64),
    );
    println!(
        "  --throttle 2:  {:>6.0} tries during the outage, {:>6.0} after it  ({with_wall:.1?} a simulation)",
        target.in_outage, target.after
    );
    println!(
        "  during the outage {:.1}% of the quota alone's (target at most 30%); after the first \
         window {:.1}-{:.1}% a minute (at most 20%)",
        100.0 * target.share,
        100.0 * target.best_minute,
        100.0 * target.worst_minute
    );
    println!(
        "  p below 0.1 {:.0}s after the outage, {:.2} windows (target within 4); runs that gave \
         up held {:.0}",
        target.recovered,
        target.recovered / 120.0,
        target.held_runs
    );
    let seeds: Vec<String> = with
        .iter()
        .map(|f| {
            f.fleet
                .recovered
                .map_or("never".into(), |d| format!("{:.0}s", d.as_secs_f64()))
        })
        .collect();
    println!("  p below 0.1, seed by seed: {}", seeds.join(" "));

    println!("tries sent per minute, seed 1 (# = 50 tries):");
    let (q, t) = (per_minute(&alone[0]), per_minute(&with[0]));
    for (minute, &sent) in q.iter().enumerate().take(30) {
        let mark = if minute == OUTAGE_MINUTES {
            " <- the outage ends"
        } else {
            ""
        };
        let held = t.get(minute).copied().unwrap_or(0);
        println!(
            "  {minute:>2}m  quota alone {sent:>5} {:<21}  --throttle 2 {held:>5} {}{mark}",
            bar(sent, 50),
            bar(held, 50)
        );
    }

    readme_fleet();
    clock_steps();
    println!("a real local store after 10 failing runs, then 20 runs of a command that succeeds:");
    for (what, ahead_ms) in [
        ("its record right", 0),
        ("its record dated an hour ahead", 3_600_000),
    ] {
        let (p, held) = real_store(ahead_ms);
        println!("  {what:<32} {held:>2} of 20 runs held back; before them: {p}");
    }

    println!("how the settings move the figures, median of {SEEDS} seeds:");
    println!(
        "  --throttle              in outage  share  worst min  best min  after it  p<0.1 after  held runs"
    );
    for (spec, window_minutes) in [
        ("1.1", 2),
        ("2", 2),
        ("3", 2),
        ("2:window=1m", 1),
        ("2:window=5m", 5),
        ("2:max=0.8", 2),
        ("2:max=0.9", 2),
        ("2:max=0.95", 2),
    ] {
        let args: Vec<&str> = FLEET.iter().copied().chain(["--throttle", spec]).collect();
        let (figures, _) = run(&args);
        let r = row(&alone, &figures, window_minutes);
        let recovered = if r.recovered.is_finite() {
            format!("{:.0}s", r.recovered)
        } else {
            "never".into()
        };
        println!(
            "  {spec:<22} {:>10.0} {:>5.1}% {:>9.1}% {:>8.1}% {:>9.0} {:>12} {:>10.0}",
            r.in_outage,
            100.0 * r.share,
            100.0 * r.worst_minute,
            100.0 * r.best_minute,
            r.after,
            recovered,
            r.held_runs
        );
    }
}
