//! The speed of `retry --stats` (docs/flaky.md#history-and-statistics; the target in BENCHMARKS.md:
//! a file of 100,000 runs summarised in under a second): a history file of 100,000 runs of about 40
//! steps, read and summarised by the library, and by `retry --stats FILE` as a user runs it,
//! start-up and printing included, when the binary has the option.
//!
//!     cargo bench --bench stats

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use retry::policy::{Outcome, Signal};
use retry::report::stats::{self, Options};
use retry::store::history::{self, Ending, Entry};

const RETRY: &str = env!("CARGO_BIN_EXE_retry");
const ROUNDS: usize = 5;
const RUNS: usize = 100_000;
const LABELS: usize = 36;
/// The runs without a label, named by their command line: four commands.
const UNLABELLED: usize = 4;
const REPEAT_RUNS: usize = 200;
const DAMAGED: usize = 7;
const SPAN: Duration = Duration::from_secs(30 * 86400);

/// xorshift64*: the same file at every run of the bench, without a dependency's API.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number from 0 to 1.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What one step is like: its label (none for the unlabelled), command, usual duration, and
/// how often it flakes and gives up.
struct Step {
    label: Option<String>,
    command: Vec<OsString>,
    base_ms: f64,
    flaky: f64,
    gave_up: f64,
}

/// The steps the runs are of: `LABELS` labelled, `UNLABELLED` named by their command.
fn steps(rng: &mut Rng) -> Vec<Step> {
    let kinds = ["unit", "integration", "e2e", "lint", "deploy", "migrate"];
    let mut steps = Vec::new();
    for k in 0..LABELS + UNLABELLED {
        let kind = kinds[k % kinds.len()];
        let command: Vec<&str> = match kind {
            "unit" => vec!["cargo", "test", "--workspace", "--lib"],
            "integration" => vec![
                "./scripts/integration.sh",
                "--db",
                "postgres://ci@db:5432/app",
            ],
            "e2e" => vec![
                "npx",
                "playwright",
                "test",
                "--shard=3/8",
                "--reporter=line",
            ],
            "lint" => vec!["sh", "-c", "cargo clippy --all-targets -- -D warnings"],
            "deploy" => vec![
                "kubectl",
                "rollout",
                "status",
                "deploy/api",
                "--timeout=120s",
            ],
            _ => vec![
                "psql",
                "-v",
                "ON_ERROR_STOP=1",
                "-f",
                "migrations/0042_orders.sql",
            ],
        };
        let mut command: Vec<OsString> = command.into_iter().map(OsString::from).collect();
        command.push(format!("--seed={k}").into());
        steps.push(Step {
            label: (k < LABELS).then(|| format!("{kind}-{}", k / kinds.len() + 1)),
            command,
            base_ms: 200.0 * (1.0 + 300.0 * rng.unit() * rng.unit()),
            flaky: 0.3 * rng.unit() * rng.unit(),
            gave_up: 0.05 * rng.unit() * rng.unit(),
        });
    }
    steps
}

/// How a failed try ended: mostly an exit code, sometimes a timeout or a kill.
fn failure(rng: &mut Rng) -> Outcome {
    match rng.below(10) {
        0 => Outcome::Timeout,
        1 => Outcome::Signal(Signal::KILL),
        _ => Outcome::Exit(1 + rng.below(3) as u8),
    }
}

/// One run of `step` that ended `ts`.
fn entry(rng: &mut Rng, step: &Step, id: usize, ts: SystemTime) -> Entry {
    let draw = rng.unit();
    let (ending, tries, reason) = if draw < step.gave_up {
        (Ending::GaveUp, 3, Some("tries".to_string()))
    } else if draw < step.gave_up + 0.002 {
        (Ending::Interrupted, 1, Some("interrupted".to_string()))
    } else if draw < step.gave_up + 0.002 + step.flaky {
        (Ending::Success, 2 + rng.below(2), None)
    } else {
        (Ending::Success, 1, None)
    };
    let mut try_outcomes: Vec<Outcome> = (0..tries).map(|_| failure(rng)).collect();
    let exit_code = match ending {
        Ending::Success => {
            try_outcomes[tries as usize - 1] = Outcome::Exit(0);
            0
        }
        Ending::Interrupted => {
            try_outcomes[0] = Outcome::Signal(Signal::INT);
            130
        }
        _ => 1,
    };
    Entry {
        id: format!("{:016x}", rng.next()),
        ts: humantime::format_rfc3339_millis(ts).to_string(),
        label: step.label.clone(),
        command: step.command.clone(),
        tries,
        ending,
        reason,
        exit_code,
        flaky: ending == Ending::Success && tries > 1,
        duration_ms: (step.base_ms * tries as f64 * (0.5 + rng.unit())) as u64 + id as u64 % 7,
        try_outcomes: try_outcomes.into_iter().map(Some).collect(),
        failed: None,
        host: None,
    }
}

/// A run of `--repeat` of `step`.
fn repeat(rng: &mut Rng, step: &Step, ts: SystemTime) -> Entry {
    let tries = 200;
    let failed = rng.below(4);
    Entry {
        ending: Ending::Repeat,
        tries,
        flaky: false,
        reason: None,
        exit_code: u64::from(failed > 0),
        try_outcomes: vec![Some(Outcome::Exit(0)); tries as usize],
        failed: Some(failed),
        host: None,
        ..entry(rng, step, 0, ts)
    }
}

/// Writes the history file: its runs over the last 30 days, a few runs of `--repeat`, and a
/// few damaged lines (a line cut short, garbage, a line of another file). Returns its size.
fn write_history(path: &Path, now: SystemTime) -> u64 {
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let steps = steps(&mut rng);
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let start = now - SPAN;
    let every = SPAN / (RUNS as u32 + 1);
    for k in 0..RUNS {
        let ts = start + every * (k as u32 + 1);
        let step = &steps[rng.below(steps.len() as u64) as usize];
        let line = entry(&mut rng, step, k, ts).line();
        if k % (RUNS / DAMAGED) == RUNS / DAMAGED / 2 {
            // A write cut short, ended by the next append's line break.
            writeln!(out, "{}", &line[..line.len() / 2]).unwrap();
        }
        writeln!(out, "{line}").unwrap();
        if k % (RUNS / REPEAT_RUNS) == 0 {
            writeln!(out, "{}", repeat(&mut rng, step, ts).line()).unwrap();
        }
    }
    writeln!(out, "{{\"event\":\"dead_letter\",\"id\":\"x\"}}").unwrap();
    out.into_inner().unwrap().sync_all().unwrap();
    std::fs::metadata(path).unwrap().len()
}

/// The middle of `v` (the upper one of an even count).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// What `--stats` prints, by the library: read, summarised and printed into memory.
fn library_once(path: &Path, now: SystemTime) -> Vec<u8> {
    let reading = history::read_for_stats(path).unwrap();
    let options = Options {
        since: None,
        json: false,
        ascii: false,
        width: 120,
    };
    let mut out = Vec::new();
    stats::print(path, &reading, &options, now, &mut out).unwrap();
    out
}

/// Median seconds of the library's read and print, and the output of the last round.
fn library(path: &Path, now: SystemTime) -> (f64, Vec<u8>) {
    let mut walls = Vec::new();
    let mut out = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        out = library_once(path, now);
        walls.push(started.elapsed().as_secs_f64());
    }
    (median(walls), out)
}

/// Median seconds of `retry --stats FILE`, or why it could not be timed.
fn command(path: &Path) -> Result<f64, String> {
    let mut walls = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let out = Command::new(RETRY)
            .arg("--stats")
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("cannot run {RETRY}: {e}"))?;
        let took = started.elapsed().as_secs_f64();
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            if stderr.contains("unexpected argument '--stats'") {
                return Err("binary lacks --stats".into());
            }
            return Err(format!("retry --stats failed ({}): {stderr}", out.status));
        }
        walls.push(took);
    }
    Ok(median(walls))
}

/// Whether `seconds` meets the spec's second.
fn verdict(seconds: f64) -> &'static str {
    if seconds < 1.0 { "yes" } else { "no" }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("retry-bench-stats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("history.jsonl");
    let now = SystemTime::now();
    let size = write_history(&path, now);
    println!(
        "a history file of {RUNS} runs ({} labels, {UNLABELLED} unlabelled commands), \
         {REPEAT_RUNS} runs of --repeat and {} damaged lines: {:.1} MB",
        LABELS,
        DAMAGED + 1,
        size as f64 / 1e6
    );
    let (seconds, out) = library(&path, now);
    println!(
        "  library (read_for_stats + stats::print), median of {ROUNDS}: {:.3}s, under a second: {}",
        seconds,
        verdict(seconds)
    );
    match command(&path) {
        Ok(seconds) => println!(
            "  retry --stats FILE, median of {ROUNDS}: {seconds:.3}s, under a second: {}",
            verdict(seconds)
        ),
        Err(why) => println!("  retry --stats FILE: {why}"),
    }
    println!("the first lines of what it prints:");
    for line in String::from_utf8_lossy(&out).lines().take(10) {
        println!("  {line}");
    }
    if let Some(footer) = String::from_utf8_lossy(&out).lines().last() {
        println!("  ...\n  {footer}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
