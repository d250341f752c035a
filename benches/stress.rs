//! The reliability stress run: signals at random moments, many retries at once over trees
//! that ignore SIGTERM, memory over 10,000 tries, and 1 GiB of stdin replayed. It prints its
//! figures and fails (status 1) if any leak counter is not zero.
//!
//!     cargo bench --bench stress
//!
//! It is bounded: about three minutes on a 2-core machine. `STRESS_RUNS=N` changes the number of
//! signalled runs, and `STRESS_EXTRA_ARGS` adds options to them: with `--foreground` (only the
//! command itself is stopped, not its tree) the leak counters must go up, which shows that they
//! can. The harness makes itself the
//! subreaper of everything below it, so a process that a run leaves behind comes back to it and
//! is counted, instead of vanishing into init.

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nix::libc;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

const RETRY: &str = env!("CARGO_BIN_EXE_retry");

/// Processes whose command line contains `marker`, and whether each is a zombie.
fn processes_with(marker: &str) -> Vec<(i32, bool)> {
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in dir.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmdline).contains(marker) {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
        found.push((pid, zombie));
    }
    found
}

/// Zombie children of this harness other than the ones it is about to wait for.
fn zombie_children(except: &[i32]) -> Vec<i32> {
    let me = std::process::id();
    let children =
        std::fs::read_to_string(format!("/proc/{me}/task/{me}/children")).unwrap_or_default();
    children
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
        .filter(|p| !except.contains(p))
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .unwrap_or_default()
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .collect()
}

fn wait_pid(pid: i32) -> (i32, libc::rusage) {
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    (status, usage)
}

#[derive(Default)]
struct Counters {
    alive: usize,
    zombies: usize,
    wrong_end: usize,
}

fn signals_at_random_moments(runs: usize, seed: u64, extra: &[String]) -> Counters {
    let counters = Mutex::new(Counters::default());
    let next = AtomicUsize::new(0);
    let live_retries = Mutex::new(Vec::<i32>::new());
    std::thread::scope(|scope| {
        for worker in 0..4u64 {
            let (counters, next, live_retries) = (&counters, &next, &live_retries);
            scope.spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed ^ (worker << 32));
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= runs {
                        break;
                    }
                    let marker = format!("7.{i:04}");
                    // Three kinds of try: failing at once (the signal lands mostly in waits), a
                    // tree that dies on TERM, and a tree that ignores TERM and INT (the signal
                    // lands in the grace period).
                    let script = match i % 3 {
                        0 => format!("exit 1; sleep {marker}"),
                        1 => format!("sleep {marker} & sleep {marker}; exit 1"),
                        _ => format!("trap '' TERM INT; sleep {marker} & sleep {marker}; exit 1"),
                    };
                    let signal = if rng.random_bool(0.5) {
                        libc::SIGTERM
                    } else {
                        libc::SIGINT
                    };
                    let delay = Duration::from_millis(rng.random_range(0..1500));
                    let child = Command::new(RETRY)
                        .args(extra)
                        .args(["-q", "-n", "0", "-B", "5s", "-t", "300ms", "-k", "300ms"])
                        .args(["-d", "200ms", "-j", "none", "--backoff", "constant", "--"])
                        .args(["sh", "-c", &script])
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .expect("spawn retry");
                    let pid = child.id() as i32;
                    live_retries.lock().unwrap().push(pid);
                    std::thread::sleep(delay);
                    unsafe { libc::kill(pid, signal) };
                    let (status, _) = wait_pid(pid);
                    live_retries.lock().unwrap().retain(|&p| p != pid);
                    let ended_by_signal =
                        libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == signal;
                    std::thread::sleep(Duration::from_millis(50));
                    let left = processes_with(&marker);
                    let mut c = counters.lock().unwrap();
                    if !ended_by_signal {
                        c.wrong_end += 1;
                        eprintln!("run {i}: ended with status {status:#x}, not by signal {signal}");
                    }
                    if left.iter().any(|(_, z)| !z) {
                        c.alive += 1;
                        eprintln!("run {i}: left {left:?}");
                    }
                    for (p, _) in left {
                        unsafe { libc::kill(p, libc::SIGKILL) };
                    }
                    drop(c);
                    let except = live_retries.lock().unwrap().clone();
                    let zombies = zombie_children(&except);
                    if !zombies.is_empty() {
                        counters.lock().unwrap().zombies += 1;
                        eprintln!("run {i}: zombies {zombies:?}");
                        for z in zombies {
                            wait_pid(z);
                        }
                    }
                    // Dropping `child` does not wait: it was reaped above.
                    drop(child);
                }
            });
        }
    });
    counters.into_inner().unwrap()
}

fn many_at_once(n: usize) -> (usize, Duration) {
    let started = Instant::now();
    let children: Vec<_> = (0..n)
        .map(|i| {
            let marker = format!("9.{i:04}");
            Command::new(RETRY)
                .args([
                    "-q", "-t", "200ms", "-n", "5", "-k", "200ms", "-d", "0", "--",
                ])
                .args([
                    "sh",
                    "-c",
                    &format!("trap '' TERM; sleep {marker} & sleep {marker}"),
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn retry")
        })
        .collect();
    for child in &children {
        wait_pid(child.id() as i32);
    }
    let wall = started.elapsed();
    std::thread::sleep(Duration::from_millis(100));
    let mut survivors = 0;
    for i in 0..n {
        for (pid, _) in processes_with(&format!("9.{i:04}")) {
            survivors += 1;
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    drop(children);
    (survivors, wall)
}

/// retry's resident memory (all, and anonymous) at try 100 and at try 10,000 of a run of
/// 10,000 failing tries at -d 0, read by the try itself from retry's /proc entry.
fn memory_over_tries() -> Option<[(u64, u64); 2]> {
    let dir = std::env::temp_dir().join(format!("retry-stress-mem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let report = dir.join("report");
    let script = format!(
        "case $RETRY_ATTEMPT in 100|10000) grep -E '^(VmRSS|RssAnon):' /proc/$PPID/status >> '{}';; esac; exit 1",
        report.display()
    );
    let status = Command::new(RETRY)
        .args(["-q", "-n", "10000", "-d", "0", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    let text = std::fs::read_to_string(&report).ok()?;
    let _ = std::fs::remove_dir_all(&dir);
    if status.code() != Some(1) {
        return None;
    }
    let kib: Vec<u64> = text
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
        .collect();
    match kib[..] {
        [rss_100, anon_100, rss_10k, anon_10k] => Some([(rss_100, anon_100), (rss_10k, anon_10k)]),
        _ => None,
    }
}

fn replay_gibibyte() -> bool {
    let dir = std::env::temp_dir().join(format!("retry-stress-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = format!(
        "set -o pipefail; head -c 1073741824 /dev/urandom | tee >(sha256sum | cut -d' ' -f1 > '{d}/in') \
         | '{RETRY}' -q -n 3 -d 0 -- sh -c 'sha256sum | cut -d\" \" -f1; exit 1' > '{d}/out'; wait; sleep 0.2",
        d = dir.display()
    );
    let _ = Command::new("bash").args(["-c", &script]).status();
    let want = std::fs::read_to_string(dir.join("in")).unwrap_or_default();
    let got = std::fs::read_to_string(dir.join("out")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let digests: Vec<&str> = got.lines().collect();
    println!("  input digest {}", want.trim());
    for (i, d) in digests.iter().enumerate() {
        println!("  try {} digest {d}", i + 1);
    }
    digests.len() == 3 && digests.iter().all(|d| *d == want.trim())
}

/// 1 GiB of random bytes through `retry FLAGS -- cat`: true when the output equals the input.
fn gibibyte_byte_exact(flags: &str) -> bool {
    let dir = std::env::temp_dir().join(format!("retry-gib-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = format!(
        "set -o pipefail; head -c 1073741824 /dev/urandom | tee >(sha256sum > '{d}/in') \
         | '{RETRY}' {flags} -- cat | sha256sum > '{d}/out'; wait; sleep 0.2; \
         cmp -s '{d}/in' '{d}/out'",
        d = dir.display()
    );
    let same = Command::new("bash")
        .args(["-c", &script])
        .status()
        .is_ok_and(|s| s.success());
    let _ = std::fs::remove_dir_all(&dir);
    same
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    // Orphans of the runs come back to this harness, to be counted.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let started = Instant::now();
    let seed: u64 = std::env::var("STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("retry stress run (seed {seed}; STRESS_SEED={seed} repeats the moments)\n");

    let runs: usize = std::env::var("STRESS_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    let extra: Vec<String> = std::env::var("STRESS_EXTRA_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect();
    let t = Instant::now();
    let c = signals_at_random_moments(runs, seed, &extra);
    println!(
        "{runs} runs, SIGTERM or SIGINT at a random moment (try, wait, grace period), 4 at a time:"
    );
    println!("  runs that left a process alive:          {}", c.alive);
    println!("  runs that left a zombie:                 {}", c.zombies);
    println!("  runs not ended by the received signal:   {}", c.wrong_end);
    println!("  ({:.0}s)\n", t.elapsed().as_secs_f64());

    let (survivors, wall) = many_at_once(50);
    let ideal = Duration::from_millis(5 * (200 + 200));
    println!("50 retries at once, -t 200ms -n 5 -k 200ms -d 0, over trees that ignore SIGTERM:");
    println!("  surviving processes afterwards:          {survivors}");
    println!(
        "  wall time {:.2}s against an ideal of {:.2}s (×{:.2})\n",
        wall.as_secs_f64(),
        ideal.as_secs_f64(),
        wall.as_secs_f64() / ideal.as_secs_f64()
    );

    let memory = memory_over_tries();
    println!("resident memory of retry -n 10000 -d 0 over failing tries:");
    let grew = match memory {
        Some([(rss_a, anon_a), (rss_b, anon_b)]) => {
            println!("  at try 100:      {rss_a} KiB, of which anonymous {anon_a} KiB");
            println!("  at try 10,000:   {rss_b} KiB, of which anonymous {anon_b} KiB");
            println!(
                "  growth of anonymous memory: {} KiB\n",
                anon_b as i64 - anon_a as i64
            );
            anon_b > anon_a + 64
        }
        None => {
            println!("  could not be measured\n");
            true
        }
    };

    println!("1 GiB of random bytes on stdin, replayed to 3 tries:");
    let replay_ok = replay_gibibyte();
    println!(
        "  every try read the same bytes:           {}\n",
        if replay_ok { "yes" } else { "NO" }
    );

    println!("1 GiB of random bytes through retry FLAGS -- cat, byte-exact:");
    let mut exact = true;
    for flags in ["--stdin replay", "--buffer-stdout", "--retry-if-output zzz"] {
        let same = gibibyte_byte_exact(flags);
        exact &= same;
        println!(
            "  {flags:<28} {}",
            if same { "same bytes" } else { "DIFFERENT" }
        );
    }
    println!();

    println!("done in {:.0}s", started.elapsed().as_secs_f64());
    if c.alive + c.zombies + c.wrong_end + survivors > 0 || !replay_ok || !exact || grew {
        println!("FAILED: a counter is not zero");
        std::process::exit(1);
    }
    println!("all leak counters are 0");
}
