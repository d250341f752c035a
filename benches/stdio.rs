//! Throughput of standard input replay and of output matching against plain `cat`, and of
//! `--buffer-stdout` against a sponge (the same stream written to a temporary file, then copied
//! out), side by side in one run, and retry's peak memory for a 1 GiB input (another size in MiB
//! with `RETRY_BENCH_MIB`).
//!
//!     cargo bench --bench stdio
//!     RETRY_BENCH_MIB=256 cargo bench --bench stdio
//!     RETRY_BENCH_MIB=256 RETRY_BENCH_PAGES=cold cargo bench --bench stdio
//!
//! Each case starts on the same footing (`Pages`): by default after pages were just freed, with
//! `RETRY_BENCH_PAGES=cold` after a rest long enough for a virtual machine to hand its free pages
//! back to the host.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

use nix::libc;

const RETRY: &str = env!("CARGO_BIN_EXE_retry");

/// How many rounds of every case are run, the best of each case kept: `RETRY_BENCH_ROUNDS`, 5
/// by default.
fn rounds() -> usize {
    std::env::var("RETRY_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse::<usize>().ok())
        .filter(|&r| r > 0)
        .unwrap_or(5)
}

/// The bytes piped through each command: `RETRY_BENCH_MIB` MiB, 1 GiB by default.
fn size() -> usize {
    std::env::var("RETRY_BENCH_MIB")
        .ok()
        .and_then(|m| m.parse::<usize>().ok())
        .unwrap_or(1024)
        << 20
}

/// Pipes `SIZE` bytes through `argv` (stdin and stdout both pipes, as in a shell pipeline);
/// returns MB/s and the command's peak RSS in KiB.
// The child is reaped by waitpid, which std's Child does not know of.
#[allow(clippy::zombie_processes)]
fn through(argv: &[&str]) -> (f64, u64) {
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let started = Instant::now();
    let writer = std::thread::spawn(move || {
        let chunk: Vec<u8> = (0..1 << 20)
            .map(|i: u32| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        for _ in 0..size() / chunk.len() {
            if stdin.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    let mut total = 0usize;
    let mut buf = vec![0u8; 1 << 17];
    let mut hwm = 0u64;
    let status_path = format!("/proc/{}/status", child.id());
    for reads in 0u64.. {
        match stdout.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
        // The command's own high-water mark, read while it runs (wait4's figure would include
        // this harness's pages shared before exec).
        if reads % 256 == 0 {
            if let Some(kib) = std::fs::read_to_string(&status_path).ok().and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            }) {
                hwm = hwm.max(kib);
            }
        }
    }
    writer.join().unwrap();
    let mut status = 0;
    unsafe { libc::waitpid(child.id() as i32, &mut status, 0) };
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(total, size(), "{argv:?} lost bytes");
    (size() as f64 / secs / 1e6, hwm)
}

/// What each case finds of the machine's free memory. On a virtual machine that hands pages
/// freed for a while back to its host (virtio-balloon's free page reporting, after about 2 s),
/// the first touch of such a page costs about twice that of a page freed a moment ago, and a
/// case that holds two streams touches twice the pages of one that holds one: without a
/// condition of their own, each case inherits what the case before it freed.
#[derive(Clone, Copy)]
enum Pages {
    /// Each case after twice the input and 64 MiB more were written to a temporary file and
    /// freed (more than any case holds): pages a busy machine has just freed
    /// (`RETRY_BENCH_PAGES=warm`, the default).
    Warm,
    /// Each case after 4 s of rest: pages handed back to the host (`RETRY_BENCH_PAGES=cold`).
    Cold,
}

impl Pages {
    fn from_env() -> Pages {
        match std::env::var("RETRY_BENCH_PAGES").as_deref() {
            Ok("cold") => Pages::Cold,
            _ => Pages::Warm,
        }
    }

    fn settle(self) {
        match self {
            Pages::Warm => {
                let path =
                    std::env::temp_dir().join(format!("retry-bench-warm-{}", std::process::id()));
                let chunk = vec![1u8; 1 << 20];
                let mut file = std::fs::File::create(&path).expect("warm-up file");
                for _ in 0..((2 * size()) >> 20) + 64 {
                    file.write_all(&chunk).expect("warm-up write");
                }
                drop(file);
                std::fs::remove_file(&path).expect("warm-up remove");
            }
            Pages::Cold => std::thread::sleep(std::time::Duration::from_secs(4)),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Pages::Warm => "each case after twice its input and 64 MiB written and freed",
            Pages::Cold => "each case after 4 s of rest",
        }
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    println!(
        "{} MiB through each command, stdin and stdout pipes, best of {} interleaved rounds, {}:",
        size() >> 20,
        rounds(),
        Pages::from_env().name()
    );
    // Holding output costs a write and a read: what a shell does with a temporary file is the
    // figure to hold `--buffer-stdout` against.
    let sponge = r#"t=$(mktemp) && cat > "$t" && cat "$t"; rm -f "$t""#;
    let cases: [(&str, Vec<&str>); 7] = [
        ("cat", vec!["cat"]),
        ("sponge (cat > $t; cat $t)", vec!["sh", "-c", sponge]),
        ("retry -- cat (stdin replay)", vec![RETRY, "--", "cat"]),
        (
            "retry --retry-if-output (tee + match)",
            vec![
                RETRY,
                "--stdin",
                "inherit",
                "--retry-if-output",
                "zzz",
                "--",
                "cat",
            ],
        ),
        (
            "retry --buffer-stdout",
            vec![RETRY, "--stdin", "inherit", "--buffer-stdout", "--", "cat"],
        ),
        // As users type it: standard input recorded for another try too.
        (
            "retry --buffer-stdout, stdin recorded",
            vec![RETRY, "--buffer-stdout", "--", "cat"],
        ),
        (
            "retry --output-on-failure, stdin recorded",
            vec![RETRY, "--output-on-failure", "--", "cat"],
        ),
    ];
    // Rounds interleave the cases, so that a load that comes and goes on a shared machine
    // weighs on each of them alike.
    let mut results: Vec<(&str, (f64, u64))> =
        cases.iter().map(|(name, _)| (*name, (0.0, 0))).collect();
    let pages = Pages::from_env();
    for _ in 0..rounds() {
        for ((_, argv), (_, best)) in cases.iter().zip(&mut results) {
            pages.settle();
            let (rate, rss) = through(argv);
            if rate > best.0 {
                *best = (rate, rss);
            }
        }
    }
    let base = results[0].1.0;
    let held = |name: &str| {
        results
            .iter()
            .find(|(n, _)| n.contains(name))
            .map_or(0.0, |(_, (rate, _))| *rate)
    };
    for (name, (rate, rss)) in &results {
        println!(
            "  {name:<40} {rate:>7.0} MB/s  {:>5.0}% of cat   peak RSS {:>6} KiB (VmHWM)",
            rate / base * 100.0,
            rss
        );
    }
    for (name, (rate, rss)) in results
        .iter()
        .filter(|(n, _)| n.starts_with("retry --buffer") || n.starts_with("retry --output"))
    {
        println!(
            "  {name} / sponge: {:.0}%   (target: 90% or more); peak RSS {:.1} MiB (target: at most 72)",
            rate / held("sponge") * 100.0,
            *rss as f64 / 1024.0
        );
    }
}
