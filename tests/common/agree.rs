//! The agreement test of whole runs ("every record of a run agrees, however it ends":
//! docs/log.md#every-record-of-a-run-agrees): a seeded generator draws option combinations and a scripted command, the real
//! `retry` runs them, and a checker reads every record the run was asked for (its exit status,
//! the JSON log, the last human line and the CI annotation, the step outputs and the job
//! summary, the history line, the --metrics file, the JUnit report, the dead letter and the
//! replays of it, the hooks' own log and the command's own count of its runs) and checks that
//! they say the same thing, and what the docs say they must.
//!
//! Used by `tests/run/agree.rs` (a fixed seed, a few hundred cases) and `benches/agree.rs`
//! (thousands, with the figures by invariant). A case is known by its seed and index alone:
//! `RETRY_AGREE_SEED=S RETRY_AGREE_ONLY=K` runs it again, and a failure prints the shell
//! command line that reproduces it, shrunk to the fewest options that still disagree.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use super::receiver::{Answer, Receiver};
use super::{STEP_LIMIT, retry_std, send, temp_dir, wait_bounded, wait_until};

/// How many replays of each kind ran: of the same tries, of a fixed command, of those from a
/// pruned file and of those from Redis.
static REPLAYS: [AtomicUsize; 4] = [
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
];

/// How many checks of cases have run, for names of their stores on Redis that no other check
/// (a shrinking of the same case, say) shares.
static CHECKS: AtomicUsize = AtomicUsize::new(0);

/// The checks that ran a store on TLS: quotas, dead letters, replays moved there; and the
/// checks of cases that drew one and ran without, for want of a server with TLS.
static ON_TLS: [AtomicUsize; 4] = [
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
];

/// The checks of cases with `--lock`: its lock free, held (the run turned away), held a while
/// (the run waits for it); of those, the locks on Redis, the cases that drew one and ran
/// with a lock file, for want of a `redis-server`, and the runs that lost their lease.
static LOCKS: [AtomicUsize; 6] = [
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
];

/// The checks of cases with `--ping`: those whose run ran a try (a start and an end pinged),
/// and those that ran none (nothing pinged).
static PINGS: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// The receiver of every case's `--ping`, on a port of its own: each case pings a path of its
/// own, `/p/NAME` with the name of its stores.
fn ping_receiver() -> &'static Receiver {
    static RECEIVER: std::sync::OnceLock<Receiver> = std::sync::OnceLock::new();
    RECEIVER.get_or_init(|| Receiver::start(Answer::Status(200)))
}

/// The checks of cases with `--once`: its key free, claimed by another run (turned away), done.
static ONCES: [AtomicUsize; 3] = [
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
];

/// The seed of `cargo test`'s cases: of the first 60 seeds, the one whose first 220 cases
/// reach each of the twelve disagreements the checker found in `retry` of December 2026
/// (a change to the generator draws other cases: pick the seed again).
pub const DEFAULT_SEED: u64 = 48;

/// How many cases `cargo test` runs.
pub const DEFAULT_CASES: u64 = 220;

// ---------------------------------------------------------------------------------------------
// The random source: splitmix64, so that a case is the same on every machine and release.

#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True `percent` times in 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize].clone()
    }
}

// ---------------------------------------------------------------------------------------------
// Cases.

/// The waits between tries.
#[derive(Clone, Debug, PartialEq)]
pub enum Waits {
    /// `-d MS` (and `-j JITTER`).
    Delay {
        ms: u64,
        jitter: Option<&'static str>,
    },
    /// `--delays A,B`.
    Delays(Vec<u64>),
    /// No wait option (a `--repeat` without `-d` waits nothing).
    Unset,
}

/// Where the log goes, and in which format.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Log {
    Human,
    HumanFile,
    JsonStderr,
    JsonFile,
}

/// Where `retry`'s standard output goes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stdout {
    /// A file of its own (`>out 2>err`).
    Own,
    /// The file of standard error (`>both 2>&1`).
    WithStderr,
    /// A pipe whose reader reads one line and goes away (`| head -1`).
    ReaderGone,
    /// `/dev/full`: every write fails with ENOSPC.
    Full,
}

/// When the test sends its signal to `retry`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Phase {
    /// During try K (the try touches `m`, then sleeps).
    Try(u64),
    /// During the wait after try 1 (which touches `m` as it ends; the waits are long).
    Wait,
    /// During the `--on-retry` hook (which touches `m`, then sleeps).
    RetryHook,
    /// During the `--on-give-up` hook.
    GiveUpHook,
}

/// How a scripted try ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum End {
    Exit,
    /// `sleep 5`: for `-t` or `-B` to stop.
    Hang,
    /// `kill -9 $$`.
    Kill,
    /// `:>m; sleep 2`: the test signals `retry` once `m` appears.
    Mark,
}

/// Where a try prints READY, the pattern of `--until-output`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ready {
    No,
    Out,
    Err,
}

/// One scripted try: what it prints, how long it takes and how it ends.
#[derive(Clone, Debug, PartialEq)]
pub struct Try {
    pub code: i32,
    /// Standard output, with a final newline (true) or not.
    pub out: Option<bool>,
    pub err: Option<bool>,
    pub ready: Ready,
    /// `sleep 0.01` first.
    pub nap: bool,
    pub end: End,
    /// Touches `m` as it ends (the wait after it is where the test signals).
    pub wmark: bool,
}

/// A replay of the run's dead letter: first with the command's count reset (the same tries
/// again), then with the command fixed after `fail_first` more failures.
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    pub fail_first: u64,
    /// `-n N` given to the second replay, overriding the recorded one.
    pub tries: Option<u64>,
    /// `retry --prune dl --older-than 3650d` before the second replay: the replay reads the
    /// file as the prune rewrote it.
    pub pruned: bool,
    /// The second replay is of a fleet's store on Redis, which the dead letter is moved to first
    /// (as a run that could not reach Redis left it locally): skipped without `redis-server`.
    pub redis: bool,
}

/// Which of a case's stores are on the agreement test's `redis-server` with TLS
/// (`rediss://localhost:PORT/NAME`, the server's CA in `RETRY_REDIS_CA`), in place of where the
/// case keeps them otherwise. Drawn from a random stream of its own ([`draw_tls`]): every case
/// of the generator is the case it was, with only its stores moved.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tls {
    /// `--quota rediss://…/NAME[:PARAMS]` in place of the local store `q` (never with a
    /// throttle primed with failed tries: that is written into the local store).
    pub quota: bool,
    /// `--dead-letter rediss://…/NAME` in place of the file `dl`: the checks read its records
    /// from the store's listing, and the replays replay the store.
    pub dead_letter: bool,
    /// The replay from Redis ([`Replay::redis`]) moves the dead letter to `rediss://…/NAME`
    /// rather than to the plain `redis://` server.
    pub replay: bool,
}

impl Tls {
    pub fn any(&self) -> bool {
        self.quota || self.dead_letter || self.replay
    }
}

/// `--lock ./lk` or `--lock redis://…/NAME`, and whether another process has the lock as the
/// run starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lock {
    /// The test holds the lock when the run starts: without `wait`, the run is turned away
    /// (75, reason `locked`, no try).
    pub held: bool,
    /// `--lock-wait 5s`: the holder lets go after [`LOCK_HOLD`], and the run gets the lock.
    pub wait: bool,
    /// `--once ./lk` in the place of `--lock ./lk`: the key claimed as the lock is taken.
    pub once: bool,
    /// With `once`: the key is done, for this command, by an earlier run; the run ends with 0,
    /// outcome `done_before`, and no try.
    pub done: bool,
    /// The lock is a lease on the agreement test's `redis-server`
    /// (`redis://127.0.0.1:PORT/NAME`), and its holder another run of `retry` with the same
    /// lock, whose try waits until the test lets it end.
    pub redis: bool,
    /// The run loses its lease on Redis while its marking try runs: the test deletes the lease
    /// once the try has made `m` (the lease lasts 300ms, renewed every 100ms), and the run
    /// stops the try and ends with 75, reason `lock_lost`.
    pub lost: bool,
}

/// The record of a `--once` key done by an earlier run of the command `script`, at `ms`.
fn done_record(script: &str, ms: &str) -> String {
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    for word in ["sh", "-c", script] {
        digest.update(word.as_bytes());
        digest.update(&[0]);
    }
    let hex: String = digest
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        "token=3\nhost=agree\npid=1\nrun_id=agree-done\nsince=2026-01-01T00:00:00Z\ncommand={hex}\ndone_ms={ms}\n"
    )
}

/// How long the test holds the lock of a case that waits for it.
pub const LOCK_HOLD: Duration = Duration::from_millis(150);

/// The lock file's record of the test as its holder, as `retry` writes its own.
const LOCK_RECORD: &str =
    "token=7\nhost=agree\npid=1\nrun_id=agree-holder\nsince=2026-01-01T00:00:00Z\n";

/// An option that makes a usage error, added to a valid case: the one line of the error must
/// name `names`.
#[derive(Clone, Debug, PartialEq)]
pub struct Misuse {
    pub args: Vec<String>,
    pub names: &'static str,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    pub seed: u64,
    pub index: u64,
    pub misuse: Option<Misuse>,
    /// `--repeat N` and `--keep-going`.
    pub repeat: Option<(u64, bool)>,
    /// `-n` (0: no limit); unused with `--repeat`.
    pub tries: u64,
    pub waits: Waits,
    pub max_delay_ms: Option<u64>,
    pub consecutive: Option<u64>,
    pub until_output: bool,
    pub success_on: Option<Vec<i32>>,
    pub stop_on: Option<&'static str>,
    pub flaky: Option<&'static str>,
    pub buffer_stdout: bool,
    pub output_on_failure: bool,
    pub timeout_ms: Option<u64>,
    pub budget_ms: Option<u64>,
    pub quota: Option<&'static str>,
    /// `--throttle K`, and the failed tries the store has seen before the run.
    pub throttle: Option<(&'static str, u64)>,
    pub on_retry: bool,
    pub on_give_up: bool,
    pub junit: bool,
    pub history: bool,
    /// `--metrics m.prom`: drawn from the other draws (junit xor history), so that a seed gives
    /// the cases it gave before the file was checked.
    pub metrics: bool,
    pub dead_letter: bool,
    pub replay: Option<Replay>,
    /// The stores on the `redis-server` with TLS.
    pub tls: Tls,
    /// `--lock ./lk` and the contention for it.
    pub lock: Option<Lock>,
    /// `--ping URL` to the test's receiver.
    pub ping: bool,
    pub github: bool,
    pub log: Log,
    pub quiet: bool,
    pub run_seed: u64,
    pub plan: Vec<Try>,
    /// The phase and the signal (15 TERM, 2 INT).
    pub interrupt: Option<(Phase, i32)>,
    pub stdout: Stdout,
}

/// Case `index` of `seed`.
pub fn generate(seed: u64, index: u64) -> Case {
    let mut case = draw(seed, index);
    draw_tls(&mut case);
    draw_lock(&mut case);
    draw_ping(&mut case);
    draw_once(&mut case);
    case
}

/// Whether `case` pings the test's receiver: about one case in four, drawn from a stream of
/// its own, as [`draw_tls`]'s, so that the other draws stay the cases they were.
fn draw_ping(case: &mut Case) {
    let mut p = Rng::new(
        (case.seed ^ 0x9146_9146_9146_9146).wrapping_mul(0xC2B2_AE3D_27D4_EB4F) ^ case.index,
    );
    p.next();
    case.ping = p.chance(25);
}

/// Whether `case` takes a lock, and whether it finds it held: about one case in seven, a third
/// of them finding it free, a third turned away, a third waiting for it. Drawn from a stream
/// of its own, as [`draw_tls`]'s, so that the other draws stay the cases they were. A run that
/// a signal is to stop in a phase it reaches only after its first try is never turned away.
fn draw_lock(case: &mut Case) {
    let mut l = Rng::new(
        (case.seed ^ 0x10C6_10C6_10C6_10C6).wrapping_mul(0x9FB2_1C65_1E98_DF25) ^ case.index,
    );
    l.next();
    if !l.chance(15) {
        return;
    }
    let (held, wait) = match l.below(3) {
        0 => (false, false),
        1 if case.interrupt.is_none() => (true, false),
        _ => (true, true),
    };
    let redis = l.chance(40);
    // Half the runs on Redis that a signal was to stop during a try lose the lease instead.
    let lost = redis && matches!(case.interrupt, Some((Phase::Try(_), _))) && l.chance(50);
    if lost {
        case.interrupt = None;
    }
    case.lock = Some(Lock {
        held,
        wait,
        redis,
        lost,
        once: false,
        done: false,
    });
}

/// Whether `case`, with no lock, claims a `--once` key, and what it finds: about one case in
/// seven of those without a lock, a replay, a repeat or a misuse, a third finding it free, a
/// third claimed by another run (turned away), a third done (nothing runs). Drawn from a
/// stream of its own, as [`draw_lock`]'s. A run that a signal is to stop finds it free.
fn draw_once(case: &mut Case) {
    let mut o = Rng::new(
        (case.seed ^ 0x0AC3_0AC3_0AC3_0AC3).wrapping_mul(0xC2B2_AE3D_27D4_EB4F) ^ case.index,
    );
    o.next();
    let alone = case.lock.is_none()
        && case.replay.is_none()
        && case.repeat.is_none()
        && case.misuse.is_none();
    if !o.chance(15) || !alone {
        return;
    }
    let (held, done) = match o.below(3) {
        1 if case.interrupt.is_none() => (true, false),
        2 if case.interrupt.is_none() => (false, true),
        _ => (false, false),
    };
    case.lock = Some(Lock {
        held,
        wait: false,
        once: true,
        done,
        redis: false,
        lost: false,
    });
}

/// Which of the stores of `case` go on the server with TLS: about a third of the quotas and of
/// the replays moved to Redis, a fifth of the dead letters (the most of them, and each asks for
/// a listing more, a handshake each: the test stays within half a second of its time without
/// TLS). The draws come from a stream of their own, derived from the case's seed and index
/// alone, and are made whatever the case is, so that [`draw`]'s cases stay the cases they were
/// (the fixed seeds are chosen for the disagreements they reach).
fn draw_tls(case: &mut Case) {
    let mut t = Rng::new(
        (case.seed ^ 0x7A5C_0FF1_CE5E_ED00).wrapping_mul(0xE703_7ED1_A0B4_28DB) ^ case.index,
    );
    t.next();
    let (quota, dead_letter, replay) = (t.chance(33), t.chance(20), t.chance(33));
    let unprimed = case.throttle.is_none_or(|(_, failed)| failed == 0);
    let dead_letter = dead_letter && case.dead_letter;
    case.tls = Tls {
        quota: quota && case.quota.is_some() && unprimed,
        dead_letter,
        // A dead letter on TLS is replayed from there: there is nothing to move.
        replay: replay && case.replay.as_ref().is_some_and(|r| r.redis) && !dead_letter,
    };
}

/// The case `index` of `seed` draws, its stores where they are without TLS.
fn draw(seed: u64, index: u64) -> Case {
    let mut r = Rng::new(seed ^ index.wrapping_mul(0xA076_1D64_78BD_642F));
    r.next();
    let repeat = r.chance(14).then(|| (r.range(1, 4), r.chance(50)));
    let plain = repeat.is_none();
    let timeout_ms = r.chance(18).then(|| r.pick(&[60, 100]));
    let budget_ms = r.chance(12).then(|| r.pick(&[80, 150, 300]));
    let mut tries = if plain {
        r.pick(&[1, 2, 2, 3, 3, 3, 4, 4])
    } else {
        0
    };
    if plain && budget_ms.is_some() && r.chance(25) {
        tries = 0;
    }
    let len = match (repeat, tries) {
        (Some((n, _)), _) => n,
        (None, 0) => r.range(2, 4),
        (None, n) => n,
    };
    let until_output = r.chance(20);
    let success_on = r
        .chance(15)
        .then(|| r.pick(&[&[3][..], &[0, 3], &[3, 4]]).to_vec());
    let mut stop_on =
        (plain && r.chance(15)).then(|| r.pick(&["4", "timeout", "4,timeout", "KILL"]));
    if stop_on.is_some_and(|s| s.contains('4'))
        && success_on.as_ref().is_some_and(|s| s.contains(&4))
    {
        stop_on = None;
    }
    let may_hang = timeout_ms.is_some() || budget_ms.is_some();
    let plan: Vec<Try> = (0..len)
        .map(|_| {
            let out = r.chance(60).then(|| r.chance(50));
            let err = r.chance(50).then(|| r.chance(50));
            let ready = if until_output {
                r.pick(&[Ready::No, Ready::Out, Ready::Err, Ready::Out])
            } else {
                Ready::No
            };
            let end = if may_hang && r.chance(15) {
                End::Hang
            } else if r.chance(4) {
                End::Kill
            } else {
                End::Exit
            };
            Try {
                code: r.pick(&[0, 0, 0, 0, 1, 1, 1, 1, 3, 4, 2]),
                out,
                err,
                ready,
                nap: r.chance(8),
                end,
                wmark: false,
            }
        })
        .collect();
    let consecutive = (plain && r.chance(20)).then(|| match tries {
        0 => r.range(1, 3),
        n => r.range(1, n.min(3)),
    });
    // A streak of --success-on codes: a success that is not exit 0.
    let mut plan = plan;
    let success_on = match (&success_on, consecutive) {
        (None, Some(_)) if r.chance(40) => {
            for t in plan.iter_mut() {
                if r.chance(30) {
                    t.code = 3;
                }
            }
            Some(r.pick(&[&[3][..], &[0, 3]]).to_vec())
        }
        _ => success_on,
    };
    // A streak that the tries end after a success: it gives up (docs/policy.md#consecutive).
    let codes_succeed = success_on.as_ref().is_some_and(|s| s.contains(&3));
    if consecutive.is_some_and(|c| c >= 2) && codes_succeed && len >= 2 && r.chance(50) {
        let n = plan.len();
        plan[n - 2].code = 1;
        plan[n - 2].end = End::Exit;
        plan[n - 1].code = 3;
        plan[n - 1].end = End::Exit;
    }
    let waits = if !plain {
        match r.chance(50) {
            true => Waits::Delay {
                ms: r.range(0, 2),
                jitter: None,
            },
            false => Waits::Unset,
        }
    } else if r.chance(20) {
        Waits::Delays((0..r.range(1, 3)).map(|_| r.range(1, 4)).collect())
    } else {
        Waits::Delay {
            ms: r.range(1, 3),
            jitter: r.pick(&[None, None, Some("none"), Some("equal")]),
        }
    };
    // A streak's successes are --delay apart (1s unless given), which --delays does not set.
    let waits = match (&waits, consecutive) {
        (Waits::Delays(_), Some(_)) => Waits::Delay {
            ms: 1,
            jitter: None,
        },
        _ => waits,
    };
    let max_delay_ms = (plain && matches!(waits, Waits::Delay { .. })).then_some(5);
    let quota = (plain && r.chance(14))
        .then(|| r.pick(&["q", "q:cap=1,floor=0/s", "q:cap=2,floor=0.01/s", "q:cap=1"]));
    let throttle = (quota.is_some() && r.chance(60))
        .then(|| (r.pick(&["2", "1.1"]), r.pick(&[0, 1, 3, 1000])));
    let dead_letter = plain && r.chance(30);
    let mut case = Case {
        seed,
        index,
        misuse: None,
        repeat,
        tries,
        waits,
        max_delay_ms,
        consecutive,
        until_output,
        success_on,
        stop_on,
        flaky: (plain && r.chance(30)).then(|| r.pick(&["pass", "warn", "fail", "fail"])),
        buffer_stdout: r.chance(15),
        output_on_failure: plain && r.chance(15),
        timeout_ms,
        budget_ms,
        quota,
        throttle,
        on_retry: plain && r.chance(25),
        on_give_up: plain && r.chance(20),
        junit: r.chance(40),
        history: r.chance(45),
        metrics: false,
        dead_letter,
        replay: None,
        tls: Tls::default(),
        lock: None,
        ping: false,
        github: r.chance(35),
        log: r.pick(&[
            Log::Human,
            Log::Human,
            Log::Human,
            Log::HumanFile,
            Log::JsonStderr,
            Log::JsonStderr,
            Log::JsonFile,
            Log::JsonFile,
            Log::JsonFile,
        ]),
        quiet: r.chance(8),
        run_seed: r.below(1_000_000),
        plan,
        interrupt: None,
        stdout: r.pick(&[
            Stdout::Own,
            Stdout::Own,
            Stdout::Own,
            Stdout::Own,
            Stdout::Own,
            Stdout::WithStderr,
            Stdout::WithStderr,
            Stdout::WithStderr,
            Stdout::ReaderGone,
            Stdout::Full,
        ]),
    };
    case.metrics = case.junit != case.history;
    if r.chance(4) {
        add_misuse(&mut case, &mut r);
        return case;
    }
    if r.chance(12) {
        add_interrupt(&mut case, &mut r);
    }
    if case.dead_letter && case.interrupt.is_none() && r.chance(60) {
        let tries = r
            .chance(30)
            .then(|| case.consecutive.unwrap_or(1).max(2) + 1);
        case.replay = Some(Replay {
            fail_first: r.pick(&[0, 0, 1]),
            tries,
            pruned: r.chance(40),
            redis: r.chance(40),
        });
        // Mostly a run that gives up, so that there is a dead letter to replay.
        if r.chance(70) {
            for t in &mut case.plan {
                let success = t.code == 0
                    || case
                        .success_on
                        .as_ref()
                        .is_some_and(|s| s.contains(&t.code));
                if success {
                    t.code = r.pick(&[1, 2]);
                }
            }
        }
    }
    case
}

impl Case {
    /// A case of `plan` with every option off but `-n` (its length) and `-d 1ms`, for tests
    /// that name their case.
    pub fn plain(plan: Vec<Try>) -> Case {
        Case {
            seed: 0,
            index: 0,
            misuse: None,
            repeat: None,
            tries: plan.len() as u64,
            waits: Waits::Delay {
                ms: 1,
                jitter: None,
            },
            max_delay_ms: None,
            consecutive: None,
            until_output: false,
            success_on: None,
            stop_on: None,
            flaky: None,
            buffer_stdout: false,
            output_on_failure: false,
            timeout_ms: None,
            budget_ms: None,
            quota: None,
            throttle: None,
            on_retry: false,
            on_give_up: false,
            junit: false,
            history: false,
            metrics: false,
            dead_letter: false,
            replay: None,
            tls: Tls::default(),
            lock: None,
            ping: false,
            github: false,
            log: Log::Human,
            quiet: false,
            run_seed: 1,
            plan,
            interrupt: None,
            stdout: Stdout::Own,
        }
    }
}

impl Try {
    /// A try that prints a line on each stream and exits `code`.
    pub fn exit(code: i32) -> Try {
        Try {
            code,
            out: Some(true),
            err: Some(true),
            ready: Ready::No,
            nap: false,
            end: End::Exit,
            wmark: false,
        }
    }
}

/// Makes `case` a usage error, by one of the conflicts of config.rs and cli.rs.
fn add_misuse(case: &mut Case, r: &mut Rng) {
    let plain = case.repeat.is_none();
    let mut choices: Vec<Misuse> = Vec::new();
    let m = |args: &[&str], names| Misuse {
        args: args.iter().map(|a| a.to_string()).collect(),
        names,
    };
    if plain {
        choices.push(m(&["--keep-going"], "--keep-going"));
        if case.quota.is_none() {
            choices.push(m(&["--throttle", "2"], "--throttle"));
        }
        if case.stop_on.is_none() {
            choices.push(m(&["--stop-on", "0"], "--stop-on"));
        }
        if case.tries > 0 && case.consecutive.is_none() {
            let n = (case.tries + 1).to_string();
            choices.push(Misuse {
                args: vec!["--consecutive".into(), n],
                names: "--consecutive",
            });
        }
        if matches!(case.waits, Waits::Delay { .. }) {
            choices.push(m(&["--delays", "1ms"], "--delays"));
        }
    } else {
        if !case.dead_letter {
            choices.push(m(&["--dead-letter", "dl"], "--dead-letter"));
        }
        choices.push(m(&["--stop-on", "4"], "--stop-on"));
        choices.push(m(&["--on-retry", "true"], "--on-retry"));
    }
    case.misuse = Some(r.pick(&choices));
    case.replay = None;
    case.interrupt = None;
    case.stdout = Stdout::Own;
}

/// Adds a signal to `retry` in a phase of the run, where the case allows one.
fn add_interrupt(case: &mut Case, r: &mut Rng) {
    let signal = r.pick(&[15, 2]);
    let len = case.plan.len() as u64;
    let plain = case.repeat.is_none();
    let phase = match r.below(4) {
        1 if len >= 2 => Phase::Wait,
        2 if plain && len >= 2 => Phase::RetryHook,
        3 if plain => Phase::GiveUpHook,
        _ => Phase::Try(r.range(1, len)),
    };
    match phase {
        Phase::Try(k) => case.plan[k as usize - 1].end = End::Mark,
        Phase::Wait => {
            let first = &mut case.plan[0];
            first.code = 1;
            first.end = End::Exit;
            first.wmark = true;
            case.waits = match plain {
                true => Waits::Delays(vec![400]),
                false => Waits::Delay {
                    ms: 400,
                    jitter: None,
                },
            };
            case.max_delay_ms = None;
            case.budget_ms = None;
            // A held first try would make every wait a long one, and no try marks.
            case.throttle = None;
        }
        Phase::RetryHook | Phase::GiveUpHook => {
            case.timeout_ms = None;
            case.budget_ms = None;
            for t in &mut case.plan {
                if t.end == End::Hang {
                    t.end = End::Exit;
                }
            }
            if phase == Phase::RetryHook {
                case.on_retry = true;
                case.plan[0].code = 1;
                case.plan[0].end = End::Exit;
            } else {
                case.on_give_up = true;
                for t in &mut case.plan {
                    t.code = 1;
                }
            }
        }
    }
    // A signal goes to `retry`, not to the reader of its pipe.
    if case.stdout == Stdout::ReaderGone {
        case.stdout = Stdout::Own;
    }
    if case.tries == 0 && case.budget_ms.is_none() {
        case.tries = len;
        case.consecutive = case.consecutive.map(|c| c.min(len));
    }
    case.interrupt = Some((phase, signal));
}

/// Where the stores of one check of a case are on the server with TLS: its port, its CA
/// bundle, and the name of the case's stores there; and the receiver of its pings. In the
/// reproduction line, the shell variables that stand for them (`${TLS_PORT}`, `$CA`,
/// `${PING_URL}`).
#[derive(Clone, Debug)]
pub struct Stores {
    pub port: String,
    pub ca: String,
    pub name: String,
    /// The receiver's URL, without the case's path.
    pub pings: String,
    /// The port of the plain `redis-server`, for a lock on Redis.
    pub redis_port: String,
}

impl Stores {
    /// The placeholders of the reproduction line, the store named by the case alone.
    pub fn shell(case: &Case) -> Stores {
        Stores {
            port: "${TLS_PORT}".into(),
            ca: "$CA".into(),
            name: format!("agree-{:x}-{}", case.seed, case.index),
            pings: "${PING_URL}".into(),
            redis_port: "${REDIS_PORT}".into(),
        }
    }

    /// The path of the case's pings on the receiver.
    pub fn ping_path(&self) -> String {
        format!("/p/{}", self.name)
    }

    /// The case's store on the server with TLS.
    pub fn url(&self) -> String {
        format!("rediss://localhost:{}/{}", self.port, self.name)
    }

    /// The case's lock on the plain server.
    pub fn lock_url(&self) -> String {
        format!("redis://127.0.0.1:{}/{}", self.redis_port, self.name)
    }

    /// The hash of the case's lock on the plain server.
    pub fn lock_key(&self) -> String {
        format!("retry:lock:{{{}}}", self.name)
    }
}

impl Try {
    /// The shell words of try `k`.
    fn body(&self, k: usize) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mut out = self.out;
        let mut err = self.err;
        match self.ready {
            Ready::Out if out.is_none() => out = Some(true),
            Ready::Err if err.is_none() => err = Some(true),
            _ => {}
        }
        let text = |stream: char, ready: bool| match ready {
            true => format!("{stream}{k}-READY"),
            false => format!("{stream}{k}"),
        };
        if let Some(nl) = out {
            let t = text('o', self.ready == Ready::Out);
            parts.push(match nl {
                true => format!("echo {t}"),
                false => format!("printf {t}"),
            });
        }
        if let Some(nl) = err {
            let t = text('e', self.ready == Ready::Err);
            parts.push(match nl {
                true => format!("echo {t}>&2"),
                false => format!("printf {t}>&2"),
            });
        }
        if self.nap {
            parts.push("sleep 0.01".into());
        }
        match self.end {
            End::Exit => {}
            End::Hang => parts.push("sleep 5".into()),
            End::Kill => parts.push("kill -9 $$".into()),
            End::Mark => parts.push(":>m;sleep 2".into()),
        }
        if self.wmark {
            parts.push(":>m".into());
        }
        parts.push(format!("exit {}", self.code));
        parts.join(";")
    }
}

impl Case {
    /// The command's script: it counts its runs in `n`, then plays the try of that count.
    /// With a replay to come, a file `ok` makes it fail that many more times, then succeed.
    pub fn script(&self) -> String {
        // One line appended per run, in one write: a try killed at any moment leaves the count
        // of the runs before it whole (a rewrite of the file could be cut between its truncation
        // and its write).
        let mut s =
            String::from("k=$(($(wc -l 2>/dev/null <n||echo 0)+1));echo $k $RETRY_RUN_ID >>n;");
        if self.replay.is_some() {
            s += "if [ -e ok ];then r=$(cat ok);echo $((r-1)) >ok;[ $r -le 0 ]&&{ echo READY;exit 0;};exit 1;fi;";
        }
        s += "case $k in ";
        for (i, t) in self.plan.iter().enumerate() {
            let _ = write!(s, "{})", i + 1);
            s += &t.body(i + 1);
            s += ";;";
        }
        s += "*)echo READY;;esac";
        s
    }

    fn hook(&self, file: &str, marks: bool) -> String {
        let mut hook = format!("echo \"$RETRY_ATTEMPT $RETRY_EXIT_CODE\" >>{file}");
        if marks {
            hook += ";:>m;sleep 2";
        }
        hook
    }

    /// `retry`'s arguments, the command included, its stores on TLS as the reproduction line
    /// names them.
    pub fn args(&self) -> Vec<String> {
        self.args_in(&Stores::shell(self))
    }

    /// `retry`'s arguments, the command included, with its stores on TLS in `stores`.
    fn args_in(&self, stores: &Stores) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        let mut push = |words: &[&str]| a.extend(words.iter().map(|w| w.to_string()));
        match self.repeat {
            Some((n, keep_going)) => {
                push(&["--repeat", &n.to_string()]);
                if keep_going {
                    push(&["--keep-going"]);
                }
            }
            None => push(&["-n", &self.tries.to_string()]),
        }
        match &self.waits {
            Waits::Delay { ms, jitter } => {
                push(&["-d", &format!("{ms}ms")]);
                if let Some(j) = jitter {
                    push(&["-j", j]);
                }
            }
            Waits::Delays(list) => {
                let list: Vec<String> = list.iter().map(|ms| format!("{ms}ms")).collect();
                push(&["--delays", &list.join(",")]);
            }
            Waits::Unset => {}
        }
        if let Some(ms) = self.max_delay_ms {
            push(&["-m", &format!("{ms}ms")]);
        }
        if let Some(c) = self.consecutive {
            push(&["--consecutive", &c.to_string()]);
        }
        if self.until_output {
            push(&["--until-output", "READY"]);
        }
        if let Some(codes) = &self.success_on {
            let codes: Vec<String> = codes.iter().map(|c| c.to_string()).collect();
            push(&["--success-on", &codes.join(",")]);
        }
        if let Some(list) = self.stop_on {
            push(&["--stop-on", list]);
        }
        if let Some(mode) = self.flaky {
            push(&["--flaky", mode]);
        }
        if self.buffer_stdout {
            push(&["--buffer-stdout"]);
        }
        if self.output_on_failure {
            push(&["--output-on-failure"]);
        }
        if let Some(ms) = self.timeout_ms {
            push(&["-t", &format!("{ms}ms")]);
        }
        if let Some(ms) = self.budget_ms {
            push(&["-B", &format!("{ms}ms")]);
        }
        if let Some(q) = self.quota {
            match self.tls.quota {
                true => {
                    let params = q.strip_prefix('q').unwrap_or(q);
                    push(&["--quota", &format!("{}{params}", stores.url())]);
                }
                false => push(&["--quota", q]),
            }
        }
        if let Some((k, _)) = self.throttle {
            push(&["--throttle", k]);
        }
        let phase = self.interrupt.map(|(p, _)| p);
        if self.on_retry {
            let hook = self.hook("hr", phase == Some(Phase::RetryHook));
            push(&["--on-retry", &hook]);
        }
        if self.on_give_up {
            let hook = self.hook("hg", phase == Some(Phase::GiveUpHook));
            push(&["--on-give-up", &hook]);
        }
        if self.junit {
            push(&["--junit", "junit.xml"]);
        }
        if self.history {
            push(&["--history", "hist"]);
        }
        if self.metrics {
            push(&["--metrics", "m.prom"]);
        }
        if self.dead_letter {
            match self.tls.dead_letter {
                true => push(&["--dead-letter", &stores.url()]),
                false => push(&["--dead-letter", "dl"]),
            }
        }
        if self.ping {
            push(&["--ping", &format!("{}{}", stores.pings, stores.ping_path())]);
        }
        if let Some(lock) = self.lock {
            match (lock.redis, lock.lost) {
                (true, true) => push(&["--lock", &format!("{}:lease=300ms", stores.lock_url())]),
                (true, false) => push(&["--lock", &stores.lock_url()]),
                (false, _) => push(&[if lock.once { "--once" } else { "--lock" }, "./lk"]),
            }
            if lock.wait {
                push(&["--lock-wait", "5s"]);
            }
        }
        match self.log {
            Log::Human => {}
            Log::HumanFile => push(&["--log-file", "log"]),
            Log::JsonStderr => push(&["--log-format", "json"]),
            Log::JsonFile => push(&["--log-format", "json", "--log-file", "log"]),
        }
        if self.quiet {
            push(&["-q"]);
        }
        push(&["--seed", &self.run_seed.to_string()]);
        if let Some(m) = &self.misuse {
            a.extend(m.args.iter().cloned());
        }
        a.extend(["--".to_string(), "sh".into(), "-c".into(), self.script()]);
        a
    }

    /// The environment of a run of the case, `dir` the case's directory: with a store on TLS,
    /// the server's CA, and the directory of what a run keeps while Redis cannot be reached.
    fn env(
        &self,
        dir: &Path,
        stores: &Stores,
        outputs: &str,
        summary: &str,
    ) -> Vec<(String, String)> {
        let mut env = vec![("XDG_RUNTIME_DIR".to_string(), dir.display().to_string())];
        if self.tls.any() {
            env.push(("RETRY_REDIS_CA".into(), stores.ca.clone()));
            env.push((
                "XDG_STATE_HOME".into(),
                dir.join("state").display().to_string(),
            ));
        }
        if self.github {
            env.push(("GITHUB_ACTIONS".into(), "true".into()));
            env.push((
                "GITHUB_OUTPUT".into(),
                dir.join(outputs).display().to_string(),
            ));
            env.push((
                "GITHUB_STEP_SUMMARY".into(),
                dir.join(summary).display().to_string(),
            ));
        }
        env
    }

    /// Whether the case is one that the generator could make: what the shrinker keeps to.
    fn valid(&self) -> bool {
        let len = self.plan.len() as u64;
        if len == 0 {
            return false;
        }
        let tries_fit = match self.repeat {
            Some((n, _)) => n == len,
            None => self.tries == len || (self.tries == 0 && self.budget_ms.is_some()),
        };
        let consecutive_fits = self
            .consecutive
            .is_none_or(|c| c >= 1 && (self.tries == 0 || c <= self.tries));
        let hangs_end = self.timeout_ms.is_some()
            || self.budget_ms.is_some()
            || self.plan.iter().all(|t| t.end != End::Hang);
        let lost = self.lock.is_some_and(|l| l.lost);
        let marks_fit = match self.interrupt {
            None if lost => {
                !self.plan.iter().any(|t| t.wmark)
                    && self.plan.iter().filter(|t| t.end == End::Mark).count() == 1
            }
            None => self.plan.iter().all(|t| t.end != End::Mark && !t.wmark),
            Some((Phase::Try(k), _)) => k <= len && self.plan[k as usize - 1].end == End::Mark,
            Some((Phase::Wait, _)) => self.plan[0].wmark,
            Some((Phase::RetryHook, _)) => self.on_retry,
            Some((Phase::GiveUpHook, _)) => self.on_give_up,
        };
        tries_fit
            && consecutive_fits
            && hangs_end
            && marks_fit
            && (self.throttle.is_none() || self.quota.is_some())
            && (self.replay.is_none() || self.dead_letter)
            && (!self.tls.quota
                || (self.quota.is_some() && self.throttle.is_none_or(|(_, n)| n == 0)))
            && (!self.tls.dead_letter || self.dead_letter)
            && (!self.tls.replay
                || (self.replay.as_ref().is_some_and(|r| r.redis) && !self.tls.dead_letter))
            && (!lost || (self.lock.is_some_and(|l| l.redis) && self.interrupt.is_none()))
    }

    /// The shell commands that make the case's store before it runs.
    fn prepare_shell(&self) -> Option<String> {
        let (_, failed) = self.throttle?;
        (failed > 0).then(|| {
            format!(
                "mkdir -m 700 retry && t=$(date +%s%3N) && printf '%-63s\\n%-159s\\n' \"retry-quota v1 tokens=10.000000 at=$t\" \"retry-throttle v1 start=$t r={failed} a=0 pr=0 pa=0\" >retry/q.quota && chmod 600 retry/q.quota"
            )
        })
    }

    /// The store of `--throttle`, primed with failed tries, as the shell of `prepare_shell`
    /// makes it.
    fn prepare(&self, dir: &Path) {
        let Some((_, failed)) = self.throttle else {
            return;
        };
        if failed == 0 {
            return;
        }
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let store = dir.join("retry");
        std::fs::create_dir_all(&store).unwrap();
        std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o700)).unwrap();
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        let bucket = format!("retry-quota v1 tokens=10.000000 at={now}");
        let window = format!("retry-throttle v1 start={now} r={failed} a=0 pr=0 pa=0");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(store.join("q.quota"))
            .unwrap();
        write!(file, "{bucket:<63}\n{window:<159}\n").unwrap();
    }

    /// The shell command line that runs the case again, from an empty directory.
    pub fn shell(&self) -> String {
        let mut s = String::from("cd \"$(mktemp -d)\" && ");
        if let Some(prep) = self.prepare_shell() {
            s += &prep;
            s += " && ";
        }
        if let Some(Lock { done: true, .. }) = self.lock {
            let record = done_record(&self.script(), "$(date +%s000)").replace('\n', "\\n");
            let _ = write!(s, "printf \"{record}\" >lk && chmod 600 lk && ");
        }
        match self.lock {
            Some(Lock {
                held: true,
                wait,
                redis: false,
                ..
            }) => {
                let hold = if wait { LOCK_HOLD.as_secs_f64() } else { 3.0 };
                let _ = write!(
                    s,
                    "printf '{}' >lk && chmod 600 lk && {{ flock lk sh -c ':>held; sleep {hold}' & }} && until [ -e held ]; do sleep 0.002; done && ",
                    LOCK_RECORD.replace('\n', "\\n")
                );
            }
            Some(Lock {
                held: true,
                wait,
                redis: true,
                ..
            }) => {
                let hold = if wait { LOCK_HOLD.as_secs_f64() } else { 3.0 };
                let url = Stores::shell(self).lock_url();
                let _ = write!(
                    s,
                    "{{ XDG_RUNTIME_DIR=$PWD retry -n 1 --lock \"{url}\" -- sh -c ':>{LEASE_HELD}; sleep {hold}' </dev/null >/dev/null 2>&1 & }} && until [ -e {LEASE_HELD} ]; do sleep 0.002; done && "
                );
            }
            _ => {}
        }
        let mut env = String::from("XDG_RUNTIME_DIR=$PWD ");
        env += &self.tls_shell_env();
        if self.github {
            env += "GITHUB_ACTIONS=true GITHUB_OUTPUT=$PWD/go GITHUB_STEP_SUMMARY=$PWD/sum ";
        }
        // A store on TLS names the server's port as a shell variable: in double quotes.
        let words: Vec<String> = self
            .args()
            .iter()
            .map(|a| {
                match a.contains("${TLS_PORT}")
                    || a.contains("${REDIS_PORT}")
                    || a.contains("${PING_URL}")
                {
                    true => format!("\"{a}\""),
                    false => quote(a),
                }
            })
            .collect();
        let redirect = match self.stdout {
            Stdout::Own => "</dev/null >out 2>err",
            Stdout::WithStderr => "</dev/null >both 2>&1",
            Stdout::ReaderGone => "</dev/null 2>err | head -1",
            Stdout::Full => "</dev/null >/dev/full 2>err",
        };
        let run = format!("{env}retry {} {redirect}", words.join(" "));
        match self.interrupt {
            None if self.lock.is_some_and(|l| l.lost) => {
                let key = Stores::shell(self).lock_key();
                let _ = write!(
                    s,
                    "{run} & p=$!; until [ -e m ]; do sleep 0.002; done; redis-cli -p \"${{REDIS_PORT}}\" DEL '{key}' >/dev/null; wait $p; echo \"status $?\""
                );
            }
            None => {
                s += &run;
                s += match self.stdout {
                    Stdout::ReaderGone => "; echo \"status ${PIPESTATUS[0]}\"",
                    _ => "; echo \"status $?\"",
                };
            }
            Some((phase, signal)) => {
                let name = if signal == 2 { "INT" } else { "TERM" };
                let settle = if phase == Phase::Wait {
                    "0.04"
                } else {
                    "0.015"
                };
                // Job control, else bash starts a job in the background with SIGINT ignored.
                let _ = write!(
                    s,
                    "set -m; {run} & p=$!; until [ -e m ]; do sleep 0.002; done; sleep {settle}; kill -{name} $p; wait $p; echo \"status $?\""
                );
            }
        }
        if let Some(replay) = &self.replay {
            if self.replays_same_tries() {
                s += &self.replay_shell();
            }
            let junit = if self.junit {
                " --junit rjunit2.xml"
            } else {
                ""
            };
            let env = if self.github {
                "GITHUB_ACTIONS=true GITHUB_OUTPUT=$PWD/go2 GITHUB_STEP_SUMMARY=$PWD/sum2 "
            } else {
                ""
            };
            let tries = replay.tries.map(|n| format!(" -n {n}")).unwrap_or_default();
            let tls = self.tls_shell_env();
            let ca = match self.tls.any() {
                true => "RETRY_REDIS_CA=\"$CA\" ",
                false => "",
            };
            let mut source = self.replay_source_shell();
            if replay.pruned {
                let _ = write!(s, "; {tls}retry --prune {source} --older-than 3650d");
            }
            // The move to Redis: the dead letter as a run that could not reach it keeps it.
            if replay.redis && !self.tls.dead_letter {
                let stores = Stores::shell(self);
                let (scheme, host, port) = match self.tls.replay {
                    true => ("rediss", "localhost", stores.port.as_str()),
                    false => ("redis", "127.0.0.1", "${REDIS_PORT}"),
                };
                let name = &stores.name;
                let _ = write!(
                    s,
                    "; (umask 077 && mkdir -p state/retry/unsent && cp dl state/retry/unsent/{host}_{port}_{name}.jsonl)"
                );
                source = format!("\"{scheme}://{host}:{port}/{name}\"");
            }
            let _ = write!(
                s,
                "; echo {} >ok; XDG_RUNTIME_DIR=$PWD XDG_STATE_HOME=$PWD/state {ca}{env}retry --replay {source} --log-format json --log-file rlog2{junit}{tries} >rout2 2>rerr2; echo \"replay status $?\"",
                replay.fail_first
            );
        }
        s
    }

    /// The environment that a store on TLS adds to the reproduction line: the server's CA
    /// (`$CA`), and the directory of what a run keeps while Redis cannot be reached.
    fn tls_shell_env(&self) -> String {
        match self.tls.any() {
            true => "RETRY_REDIS_CA=\"$CA\" XDG_STATE_HOME=$PWD/state ".into(),
            false => String::new(),
        }
    }

    /// What the replays of the reproduction line replay: the file, or the store on TLS.
    fn replay_source_shell(&self) -> String {
        match self.tls.dead_letter {
            true => format!("\"{}\"", Stores::shell(self).url()),
            false => "dl".into(),
        }
    }

    /// Whether the first replay, of the same tries again, runs (when the run gave up): what
    /// the tries do must not hang on the time, the store, or the reader of the output.
    fn replays_same_tries(&self) -> bool {
        self.replay.is_some()
            && self.budget_ms.is_none()
            && self.quota.is_none()
            && matches!(self.stdout, Stdout::Own | Stdout::WithStderr)
    }

    /// The first replay as a shell runs it: the command's count starts again.
    fn replay_shell(&self) -> String {
        let junit = if self.junit {
            " --junit rjunit1.xml"
        } else {
            ""
        };
        let env = if self.github {
            "GITHUB_ACTIONS=true GITHUB_OUTPUT=$PWD/go1 GITHUB_STEP_SUMMARY=$PWD/sum1 "
        } else {
            ""
        };
        let (tls, source) = (self.tls_shell_env(), self.replay_source_shell());
        format!(
            "; rm n; XDG_RUNTIME_DIR=$PWD {tls}{env}retry --replay {source} --log-format json --log-file rlog1{junit} >rout1 2>rerr1; echo \"replay status $?\""
        )
    }

    /// The case in one line of options, for the report.
    pub fn name(&self) -> String {
        let args = self.args();
        let cut = args.len().saturating_sub(4);
        args[..cut].join(" ")
    }
}

/// `word` as a shell reads it back.
pub fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./,:=+@%".contains(&b));
    match plain {
        true => word.to_string(),
        false => format!("'{}'", word.replace('\'', "'\\''")),
    }
}

// ---------------------------------------------------------------------------------------------
// Running.

/// How `retry` ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Code(i32),
    Signal(i32),
    /// It ran past the limit and was killed.
    Hung,
}

impl Status {
    /// The status as a shell shows it: 128+N for a death by signal N.
    fn shell(self) -> i64 {
        match self {
            Status::Code(c) => c as i64,
            Status::Signal(s) => 128 + s as i64,
            Status::Hung => -1,
        }
    }
}

/// What one invocation of `retry` left.
#[derive(Clone, Debug)]
pub struct Ran {
    pub status: Status,
    /// Standard error (or standard output and error together, for `2>&1`).
    pub stderr: String,
    pub signalled: bool,
}

/// How long one invocation may take before it counts as hung.
const HUNG: Duration = Duration::from_secs(15);

/// Runs `retry ARGS` in `dir`.
fn run_retry(
    dir: &Path,
    args: &[String],
    env: &[(String, String)],
    stdout: Stdout,
    interrupt: Option<(Phase, i32)>,
    names: (&str, &str),
) -> Ran {
    run_retry_losing(dir, args, env, stdout, interrupt, names, None)
}

/// [`run_retry`], deleting the key `lose` of the server at its port once the try that marks
/// has made `m`: the run's lease on Redis is gone.
fn run_retry_losing(
    dir: &Path,
    args: &[String],
    env: &[(String, String)],
    stdout: Stdout,
    interrupt: Option<(Phase, i32)>,
    names: (&str, &str),
    lose: Option<(u16, String)>,
) -> Ran {
    let (out_name, err_name) = names;
    let mut cmd = retry_std();
    cmd.current_dir(dir).args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let stderr_file = match stdout {
        Stdout::WithStderr => "both".to_string(),
        _ => err_name.to_string(),
    };
    match stdout {
        Stdout::Own => {
            cmd.stdout(File::create(dir.join(out_name)).unwrap());
            cmd.stderr(File::create(dir.join(err_name)).unwrap());
        }
        Stdout::WithStderr => {
            let both = File::create(dir.join("both")).unwrap();
            cmd.stdout(both.try_clone().unwrap());
            cmd.stderr(both);
        }
        Stdout::ReaderGone => {
            cmd.stdout(Stdio::piped());
            cmd.stderr(File::create(dir.join(err_name)).unwrap());
        }
        Stdout::Full => {
            let full = std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("/dev/full");
            cmd.stdout(full);
            cmd.stderr(File::create(dir.join(err_name)).unwrap());
        }
    }
    let mut child = cmd.spawn().expect("start retry");
    // `| head -1`: one line, then the reader goes away.
    let reader = child.stdout.take().map(|mut pipe| {
        std::thread::spawn(move || {
            let mut byte = [0u8; 1];
            while let Ok(1) = pipe.read(&mut byte) {
                if byte[0] == b'\n' {
                    break;
                }
            }
        })
    });
    let started = Instant::now();
    let mut signalled = false;
    let mut lost = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break match status.signal() {
                Some(s) => Status::Signal(s),
                None => Status::Code(status.code().unwrap_or(-1)),
            };
        }
        if let Some((phase, signal)) = interrupt {
            if !signalled && dir.join("m").exists() {
                // The sleep after `m` starts (a dash that catches SIGINT before it forks the
                // sleep dies of it only once the sleep ends); for the wait, the try that
                // touched `m` ends and the long wait begins.
                let settle = if phase == Phase::Wait { 40 } else { 15 };
                std::thread::sleep(Duration::from_millis(settle));
                send(child.id(), signal);
                signalled = true;
            }
        }
        if let Some((port, key)) = lose.as_ref().filter(|_| !lost) {
            if dir.join("m").exists() {
                super::redis_server::cli(*port, &["DEL", key]);
                lost = true;
            }
        }
        if started.elapsed() > HUNG {
            let _ = child.kill();
            let _ = child.wait();
            break Status::Hung;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    if let Some(reader) = reader {
        let _ = reader.join();
    }
    Ran {
        status,
        stderr: read(dir, &stderr_file).unwrap_or_default(),
        signalled,
    }
}

fn read(dir: &Path, name: &str) -> Option<String> {
    std::fs::read(dir.join(name))
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

// ---------------------------------------------------------------------------------------------
// Findings.

/// One disagreement: the invariant it breaks, and the values seen.
#[derive(Clone, Debug)]
pub struct Finding {
    pub invariant: &'static str,
    pub detail: String,
}

#[derive(Default)]
struct Findings(Vec<Finding>);

impl Findings {
    /// Says where the records of a failing case are kept.
    fn fail_note(&mut self, dir: &Path) {
        if let Some(first) = self.0.first_mut() {
            first.detail += &format!(" (records in {})", dir.display());
        }
    }

    fn fail(&mut self, invariant: &'static str, detail: impl Into<String>) {
        let detail = detail.into();
        if !self
            .0
            .iter()
            .any(|f| f.invariant == invariant && f.detail == detail)
        {
            self.0.push(Finding { invariant, detail });
        }
    }
}

/// The invariants, as the report names them.
pub const INVARIANTS: &[(&str, &str)] = &[
    (
        "ended",
        "retry ended within 15 s, and not with 125 for a valid case",
    ),
    (
        "usage",
        "a usage error is status 125 and one line naming the option, and nothing ran",
    ),
    (
        "records",
        "every record asked for is written (or a warning names it)",
    ),
    (
        "json",
        "the JSON log has one start, tries 1..T in order, and one end event",
    ),
    (
        "status=json",
        "the exit status is the JSON end event's exit_code",
    ),
    (
        "status=tries",
        "the exit status is what the tries' outcomes and the reason give (docs/exit-status.md)",
    ),
    (
        "outputs",
        "the step outputs agree with the exit status and the JSON log",
    ),
    (
        "history",
        "the history line agrees with the exit status and the JSON log",
    ),
    (
        "metrics",
        "the --metrics file counts one run, with the exit status, the outcome and the tries",
    ),
    (
        "pings",
        "--ping got a start and an end agreeing with the run, or nothing when no try ran",
    ),
    (
        "junit",
        "the JUnit report's counts and elements agree with the tries",
    ),
    (
        "human",
        "the last human line (or the annotation in its place) agrees with the run",
    ),
    (
        "annotation",
        "one ::warning/::error of the right kind, or none",
    ),
    ("summary", "the job summary agrees with the run"),
    (
        "dead-letter",
        "a dead letter exactly when the run gave up, agreeing with it",
    ),
    (
        "runs",
        "the command's own count of its runs is the tries that ran",
    ),
    (
        "failed_tries",
        "JSON failed_tries and flaky count the tries that ran and failed",
    ),
    (
        "held",
        "a try held back by the throttle is transient, and never a run or a failure",
    ),
    (
        "hooks",
        "hooks run only after tries that ran and failed, once each, with their status",
    ),
    (
        "no-try-finished",
        "a run in which no try finished never reports success",
    ),
    (
        "replay",
        "a replay's records agree with its own status and runs",
    ),
    (
        "replay=direct",
        "a replay of the same tries records what the direct run did",
    ),
    (
        "lines",
        "every retry line and CI marker starts a line of the captured stream",
    ),
    (
        "signal",
        "a signal during a hook is reported as during that hook (docs/log.md#hooks)",
    ),
];

fn invariant_name(name: &str) -> &'static str {
    INVARIANTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, _)| *n)
        .unwrap_or("ended")
}

// ---------------------------------------------------------------------------------------------
// Reading the records.

/// One try, as the JSON log (exactly) or the history (with verdicts worked out from the case)
/// tells it.
#[derive(Clone, Debug)]
struct TryView {
    attempt: u64,
    outcome: Value,
    held: bool,
    verdict: String,
    /// The end of the run stopped it (`limit`).
    cut: bool,
}

impl TryView {
    fn failed(&self) -> bool {
        !self.held && matches!(self.verdict.as_str(), "transient" | "permanent")
    }

    fn succeeded(&self) -> bool {
        !self.held && self.verdict == "success"
    }
}

/// The number of a signal by its name, with or without SIG.
fn signum(name: &str) -> Option<i64> {
    let name = name.trim_start_matches("SIG");
    Some(match name {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "ABRT" => 6,
        "KILL" => 9,
        "USR1" => 10,
        "SEGV" => 11,
        "USR2" => 12,
        "PIPE" => 13,
        "ALRM" => 14,
        "TERM" => 15,
        _ => return None,
    })
}

/// The status a failed try with `outcome` gives when the run gives up after it
/// (docs/exit-status.md): its code (1 for an exit 0 that was not ready), 124, 128+N.
fn failed_status(outcome: &Value) -> Option<i64> {
    if let Some(code) = outcome["exit"].as_i64() {
        return Some(if code == 0 { 1 } else { code });
    }
    if outcome["timeout"] == true {
        return Some(124);
    }
    if let Some(name) = outcome["signal"].as_str() {
        return signum(name).map(|n| 128 + n);
    }
    if outcome["not_found"] == true {
        return Some(127);
    }
    if outcome["not_executable"] == true {
        return Some(126);
    }
    if outcome["no_resources"] == true {
        return Some(125);
    }
    None
}

/// What a record says about the end of the run; `None` where it says nothing.
#[derive(Clone, Debug, Default, PartialEq)]
struct Facts {
    /// `success`, `flaky-fail` (a late success that --flaky fail failed), `gave_up`,
    /// `interrupted`, `error` (retry's own failure), `repeat`.
    outcome: Option<String>,
    /// The give-up reason; `Some(None)`: none.
    reason: Option<Option<String>>,
    status: Option<i64>,
    tries: Option<u64>,
    flaky: Option<bool>,
}

impl Facts {
    /// Whether `--once`'s key was done by an earlier run: nothing ran, and the run exits 0.
    fn done_before(&self) -> bool {
        self.outcome.as_deref() == Some("done_before")
    }

    /// Whether `--lock` turned the run away: it ran nothing, another run having the lock.
    fn locked(&self) -> bool {
        self.reason
            .as_ref()
            .is_some_and(|r| r.as_deref() == Some("locked"))
    }

    /// Each field that both say and on which they differ, in words.
    fn differences(&self, truth: &Facts) -> Vec<String> {
        let mut out = Vec::new();
        if let (Some(a), Some(b)) = (&self.outcome, &truth.outcome) {
            if a != b {
                out.push(format!("outcome {a} (vs {b})"));
            }
        }
        if let (Some(a), Some(b)) = (&self.reason, &truth.reason) {
            if a != b {
                out.push(format!("reason {a:?} (vs {b:?})"));
            }
        }
        if let (Some(a), Some(b)) = (self.status, truth.status) {
            if a != b {
                out.push(format!("exit code {a} (vs {b})"));
            }
        }
        if let (Some(a), Some(b)) = (self.tries, truth.tries) {
            if a != b {
                out.push(format!("tries {a} (vs {b})"));
            }
        }
        if let (Some(a), Some(b)) = (self.flaky, truth.flaky) {
            if a != b {
                out.push(format!("flaky {a} (vs {b})"));
            }
        }
        out
    }
}

/// The JSON objects of `text`: each line's object from its `{"event":`, wherever the command's
/// own unfinished line put it.
fn json_objects(text: &str, f: &mut Findings) -> Vec<Value> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(at) = line.find("{\"event\":") else {
            continue;
        };
        match serde_json::from_str::<Value>(&line[at..]) {
            Ok(v) => out.push(v),
            Err(e) => f.fail(
                "json",
                format!("a JSON line that does not parse ({e}): {line:?}"),
            ),
        }
    }
    out
}

/// The events of one run of a JSON log: its tries, and the event that ended it.
#[derive(Clone, Debug)]
struct JsonRun {
    tries: Vec<TryView>,
    /// `success`, `give_up` or `repeat_end`; the last one (a signal during --on-give-up gives
    /// up a second time).
    end: Option<Value>,
    ends: usize,
    error: Option<Value>,
    warnings: Vec<String>,
    signals: Vec<Value>,
}

fn json_run(events: &[Value]) -> JsonRun {
    let mut run = JsonRun {
        tries: Vec::new(),
        end: None,
        ends: 0,
        error: None,
        warnings: Vec::new(),
        signals: Vec::new(),
    };
    for e in events {
        match e["event"].as_str().unwrap_or("") {
            "try" => run.tries.push(TryView {
                attempt: e["attempt"].as_u64().unwrap_or(0),
                outcome: e["outcome"].clone(),
                held: e["outcome"]["held"] == true,
                verdict: e["verdict"].as_str().unwrap_or("").to_string(),
                cut: e.get("limit").is_some(),
            }),
            "success" | "give_up" | "repeat_end" | "done_before" => {
                run.ends += 1;
                run.end = Some(e.clone());
            }
            "error" => run.error = Some(e.clone()),
            "warning" => run
                .warnings
                .push(e["message"].as_str().unwrap_or("").to_string()),
            "signal" => run.signals.push(e.clone()),
            _ => {}
        }
    }
    run
}

/// What the end event of a JSON run says.
fn json_facts(run: &JsonRun) -> Option<Facts> {
    let Some(end) = &run.end else {
        return run.error.as_ref().map(|_| Facts {
            outcome: Some("error".into()),
            ..Facts::default()
        });
    };
    let status = end["exit_code"].as_i64();
    Some(match end["event"].as_str().unwrap_or("") {
        // `--once`'s key was done: nothing ran, and the run exits 0 (docs/processes.md).
        "done_before" => Facts {
            outcome: Some("done_before".into()),
            reason: Some(None),
            status: Some(0),
            tries: Some(0),
            flaky: Some(false),
        },
        "success" => Facts {
            outcome: Some(
                if status == Some(0) {
                    "success"
                } else {
                    "flaky-fail"
                }
                .into(),
            ),
            reason: Some(None),
            status,
            tries: end["attempt"].as_u64(),
            flaky: end["flaky"].as_bool(),
        },
        "give_up" => {
            let reason = end["reason"].as_str().unwrap_or("").to_string();
            Facts {
                outcome: Some(
                    if reason == "interrupted" {
                        "interrupted"
                    } else {
                        "gave_up"
                    }
                    .into(),
                ),
                reason: Some(Some(reason)),
                status,
                tries: end["tries"].as_u64(),
                flaky: Some(false),
            }
        }
        _ => Facts {
            outcome: Some("repeat".into()),
            reason: None,
            status,
            tries: end["tries"].as_u64(),
            flaky: None,
        },
    })
}

/// The step outputs of a file of `name=value` lines; the last value of each name wins.
fn step_outputs(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// One `<testcase>` of a JUnit report.
#[derive(Clone, Debug, Default, PartialEq)]
struct JunitCase {
    failures: usize,
    failure_type: Option<String>,
    reruns: usize,
    flaky: usize,
    errors: usize,
    skipped: usize,
}

#[derive(Clone, Debug, Default)]
struct Junit {
    tests: Option<u64>,
    failures: Option<u64>,
    errors: Option<u64>,
    skipped: Option<u64>,
    cases: Vec<JunitCase>,
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = tag[at..].find('"')?;
    Some(tag[at..at + end].to_string())
}

fn junit(text: &str) -> Junit {
    let suite = text
        .find("<testsuite ")
        .map(|at| &text[at..at + text[at..].find('>').unwrap_or(0)])
        .unwrap_or("");
    let num = |name| attribute(suite, name).and_then(|v| v.parse().ok());
    let cases = text
        .split("<testcase ")
        .skip(1)
        .map(|case| JunitCase {
            failures: case.matches("<failure ").count(),
            failure_type: case
                .find("<failure ")
                .and_then(|at| attribute(&case[at..], "type")),
            reruns: case.matches("<rerunFailure ").count(),
            flaky: case.matches("<flakyFailure ").count(),
            errors: case.matches("<error ").count(),
            skipped: case.matches("<skipped").count(),
        })
        .collect();
    Junit {
        tests: num("tests"),
        failures: num("failures"),
        errors: num("errors"),
        skipped: num("skipped"),
        cases,
    }
}

/// The facts of one JUnit test case.
fn junit_facts(case: &JunitCase) -> Facts {
    let outcome = if case.errors > 0 {
        "error"
    } else if case.failures == 0 {
        "success"
    } else {
        match case.failure_type.as_deref() {
            Some("interrupted") => "interrupted",
            Some("flaky") => "flaky-fail",
            _ => "gave_up",
        }
    };
    Facts {
        outcome: Some(outcome.into()),
        ..Facts::default()
    }
}

/// The count of failures in a list such as `exit 1 ×2, timed out`.
fn count_list(list: &str) -> u64 {
    list.split(", ")
        .filter(|item| !item.is_empty())
        .map(|item| {
            let n = item
                .rsplit_once(" ×")
                .or_else(|| item.rsplit_once(" x"))
                .and_then(|(_, n)| n.parse().ok());
            n.unwrap_or(1)
        })
        .sum()
}

/// The number after `prefix` in `text`.
fn number_after(text: &str, prefix: &str) -> Option<u64> {
    let at = text.find(prefix)? + prefix.len();
    let digits: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

/// The status of a gave-up line's cause: `exit 4`, `timeout`, `signal SIGKILL`, ...
fn cause_status(cause: &str) -> Option<i64> {
    if let Some(rest) = cause.strip_prefix("interrupted by ") {
        return signum(rest.trim()).map(|n| 128 + n);
    }
    if cause.starts_with("every try was held back") {
        return Some(75);
    }
    if let Some((_, last)) = cause.split_once("the last that ran: ") {
        return cause_status(last);
    }
    if cause.starts_with("exit 0,") {
        return Some(1);
    }
    if let Some(code) = cause.strip_prefix("exit ") {
        return code.trim().parse().ok();
    }
    if cause.starts_with("timeout") {
        return Some(124);
    }
    if let Some(name) = cause.strip_prefix("signal ") {
        return signum(name.trim()).map(|n| 128 + n);
    }
    match cause {
        "not found" => Some(127),
        "not executable" => Some(126),
        _ => None,
    }
}

/// What the run's last human line says, when there is one: the last `succeeded on` or
/// `gave up` line, or a repeat's summary.
fn human_facts(text: &str, repeat: bool) -> Option<(Facts, String)> {
    let mut found = None;
    for line in text.lines() {
        let Some(at) = line.find("retry: ") else {
            continue;
        };
        let rest = &line[at + "retry: ".len()..];
        if let Some(after) = rest.strip_prefix("succeeded on try ") {
            let tries = number_after(after, "");
            let facts = match after.split_once(", but --flaky fail: exit ") {
                Some((_, code)) => Facts {
                    outcome: Some("flaky-fail".into()),
                    status: code.trim().parse().ok(),
                    tries,
                    ..Facts::default()
                },
                None => Facts {
                    outcome: Some("success".into()),
                    status: Some(0),
                    tries,
                    ..Facts::default()
                },
            };
            found = Some((facts, rest.to_string()));
        } else if let Some(after) = rest.strip_prefix("gave up ") {
            let tries = match after.starts_with("before the first try") {
                true => Some(0),
                false => number_after(after, "after "),
            };
            let cause = after.split_once(": ").map(|(_, c)| c).unwrap_or("");
            let interrupted = cause.starts_with("interrupted by ");
            found = Some((
                Facts {
                    outcome: Some(
                        if interrupted {
                            "interrupted"
                        } else {
                            "gave_up"
                        }
                        .into(),
                    ),
                    status: cause_status(cause),
                    tries,
                    ..Facts::default()
                },
                rest.to_string(),
            ));
        } else if repeat
            && (rest.contains(" failed (") || rest.starts_with("no try ran to its end"))
            && (rest.starts_with(|c: char| c.is_ascii_digit()) || rest.starts_with("no try"))
        {
            let tries = match rest.starts_with("no try") {
                true => Some(0),
                false => number_after(rest, ""),
            };
            found = Some((
                Facts {
                    outcome: Some("repeat".into()),
                    tries,
                    ..Facts::default()
                },
                rest.to_string(),
            ));
        }
    }
    found
}

/// The run's GitHub annotation: its kind (`warning`, `error`), what it says, and the failures
/// it counts.
#[derive(Clone, Debug)]
struct Annotation {
    kind: String,
    facts: Facts,
    failed: Option<u64>,
    line: String,
}

fn annotations(text: &str) -> Vec<Annotation> {
    let mut out = Vec::new();
    for line in text.lines() {
        for kind in ["warning", "error"] {
            let Some(at) = line.find(&format!("::{kind} ")) else {
                continue;
            };
            let rest = &line[at + kind.len() + 3..];
            let message = rest.split_once("::").map(|(_, m)| m).unwrap_or("");
            let mut facts = Facts::default();
            let mut failed = None;
            if let Some(at) = message.find(" succeeded on try ") {
                let after = &message[at + " succeeded on try ".len()..];
                facts.tries = number_after(after, "");
                failed = number_after(after, " after ");
                match after.split_once(", but --flaky fail: exit ") {
                    Some((_, code)) => {
                        facts.outcome = Some("flaky-fail".into());
                        facts.status = number_after(code, "").map(|n| n as i64);
                    }
                    None => {
                        facts.outcome = Some("success".into());
                        facts.status = Some(0);
                    }
                }
            } else if let Some(at) = message.find(" gave up ") {
                let after = &message[at + " gave up ".len()..];
                facts.tries = match after.starts_with("before the first try") {
                    true => Some(0),
                    false => number_after(after, "after "),
                };
                let interrupted = after.contains(", interrupted by ");
                facts.outcome = Some(
                    if interrupted {
                        "interrupted"
                    } else {
                        "gave_up"
                    }
                    .into(),
                );
                failed = Some(
                    after
                        .split_once(": ")
                        .map_or(0, |(_, list)| count_list(list)),
                );
            }
            out.push(Annotation {
                kind: kind.to_string(),
                facts,
                failed,
                line: line.to_string(),
            });
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The checks of one case.

/// What the checks of a direct run found out, for its replays.
#[derive(Clone, Debug, Default)]
struct Direct {
    truth: Facts,
    tries: Option<Vec<TryView>>,
    junit: Option<JunitCase>,
    /// The runs `--dead-letter` recorded.
    letters: Vec<Value>,
}

/// Runs `case` in a fresh directory and checks every record; the directory is kept when
/// something disagrees, for a look at the records.
pub fn check_case(case: &Case) -> Vec<Finding> {
    check_case_in(case, true)
}

fn check_case_in(case: &Case, keep: bool) -> Vec<Finding> {
    let mut stores = Stores {
        port: String::new(),
        ca: String::new(),
        name: format!(
            "agree-{:x}-{}-{}",
            case.seed,
            case.index,
            CHECKS.fetch_add(1, Ordering::Relaxed)
        ),
        pings: match case.ping {
            true => ping_receiver().url(""),
            false => String::new(),
        },
        redis_port: String::new(),
    };
    // Without a `redis-server`, a lock on Redis is a lock file (said once, loudly).
    let lock_local;
    let case = match case.lock.filter(|l| l.redis) {
        None => case,
        Some(lock) => match agree_redis() {
            Some(port) => {
                stores.redis_port = port.to_string();
                LOCKS[3].fetch_add(1, Ordering::Relaxed);
                case
            }
            None => {
                LOCKS[4].fetch_add(1, Ordering::Relaxed);
                lock_local = Case {
                    lock: Some(Lock {
                        redis: false,
                        lost: false,
                        ..lock
                    }),
                    ..case.clone()
                };
                &lock_local
            }
        },
    };
    // Without a server with TLS, the case runs as it would without it (said once, loudly).
    let without_tls;
    let case = match case.tls.any() {
        false => case,
        true => match agree_tls() {
            Some((port, ca)) => {
                stores.port = port.to_string();
                stores.ca = ca;
                for (at, on) in [case.tls.quota, case.tls.dead_letter, case.tls.replay]
                    .into_iter()
                    .enumerate()
                {
                    ON_TLS[at].fetch_add(usize::from(on), Ordering::Relaxed);
                }
                case
            }
            None => {
                ON_TLS[3].fetch_add(1, Ordering::Relaxed);
                without_tls = Case {
                    tls: Tls::default(),
                    ..case.clone()
                };
                &without_tls
            }
        },
    };
    let dir = temp_dir(&format!("agree-{}", case.index));
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    case.prepare(&dir);
    let mut f = Findings::default();
    let args = case.args_in(&stores);
    let env = case.env(&dir, &stores, "go", "sum");
    // The lock held by another: let go after a while for a run that waits for it, else kept
    // until the run has ended.
    if let Some(lock) = case.lock {
        match lock.once {
            true => &ONCES[usize::from(lock.held) + 2 * usize::from(lock.done)],
            false => &LOCKS[usize::from(lock.held) + usize::from(lock.wait)],
        }
        .fetch_add(1, Ordering::Relaxed);
    }
    if case.lock.is_some_and(|l| l.done) {
        use std::os::unix::fs::OpenOptionsExt;
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap();
        let record = done_record(&case.script(), &now.as_millis().to_string());
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(dir.join("lk"))
            .expect("the key's file");
        file.write_all(record.as_bytes()).unwrap();
    }
    let holder = case.lock.filter(|l| l.held).map(|l| match l.redis {
        false => Holder::File(hold_lock(&dir)),
        true => Holder::Run(hold_lease(&dir, &stores.lock_url())),
    });
    let (holder, letting_go) = match (holder, case.lock.is_some_and(|l| l.wait)) {
        (Some(holder), true) => (
            None,
            Some(std::thread::spawn(move || {
                std::thread::sleep(LOCK_HOLD);
                holder.let_go();
            })),
        ),
        (held, _) => (held, None),
    };
    let lose = case
        .lock
        .filter(|l| l.lost)
        .and_then(|_| Some((stores.redis_port.parse().ok()?, stores.lock_key())));
    if lose.is_some() {
        LOCKS[5].fetch_add(1, Ordering::Relaxed);
    }
    let ran = run_retry_losing(
        &dir,
        &args,
        &env,
        case.stdout,
        case.interrupt,
        ("out", "err"),
        lose,
    );
    if let Some(holder) = holder {
        holder.let_go();
    }
    if let Some(thread) = letting_go {
        let _ = thread.join();
    }
    let direct = check_direct(case, &dir, &stores, &ran, &mut f);
    if let (Some(replay), Some(direct)) = (&case.replay, direct) {
        check_replays(case, replay, &dir, &stores, &direct, &mut f);
    }
    if f.0.is_empty() || !keep {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        f.fail_note(&dir);
        if case.tls.any() {
            f.0[0].detail += &format!(" (stores {}, RETRY_REDIS_CA={})", stores.url(), stores.ca);
        }
    }
    f.0
}

/// Another holder of the case's lock: the lock file, held open; or another run of `retry`
/// holding the lease, its try waiting for [`LEASE_GO`].
enum Holder {
    File(File),
    Run(Option<(std::process::Child, std::path::PathBuf)>),
}

/// The file the try of a run holding a lease on Redis makes once it holds it, and the one it
/// waits for to end.
const LEASE_HELD: &str = "lease-held";
const LEASE_GO: &str = "lease-go";

impl Holder {
    /// Lets go of the lock: closes the file, or lets the holding run end, and waits for it
    /// (it lets go of the lease after its records are written, as it ends).
    fn let_go(self) {
        match self {
            Holder::File(file) => drop(file),
            Holder::Run(None) => {}
            Holder::Run(Some((mut child, dir))) => {
                let _ = File::create(dir.join(LEASE_GO));
                let _ = wait_bounded(&mut child, STEP_LIMIT);
            }
        }
    }
}

/// Takes the lease `url` as another run of `retry` in `dir` does: returns once that run's try
/// holds it; `None` when its try never started (the case then finds the lock free, which its
/// checks see).
fn hold_lease(dir: &Path, url: &str) -> Option<(std::process::Child, std::path::PathBuf)> {
    let script = format!(":>{LEASE_HELD}; while [ ! -e {LEASE_GO} ]; do sleep 0.005; done");
    let mut child = retry_std()
        .current_dir(dir)
        .env("XDG_RUNTIME_DIR", dir)
        .args(["-n", "1", "--lock", url, "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the lease's holder");
    if wait_until(STEP_LIMIT, || dir.join(LEASE_HELD).exists()) {
        return Some((child, dir.to_path_buf()));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Takes the lock of `--lock ./lk` in `dir` as another run would, its record in the file: the
/// lock is held while the returned file is open.
fn hold_lock(dir: &Path) -> File {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(dir.join("lk"))
        .expect("the lock file");
    // The pid the kernel lists as the holder, so that `retry` trusts the record and names it.
    let record = LOCK_RECORD.replace("pid=1\n", &format!("pid={}\n", std::process::id()));
    file.write_all(record.as_bytes()).unwrap();
    #[allow(deprecated)]
    nix::fcntl::flock(
        std::os::fd::AsRawFd::as_raw_fd(&file),
        nix::fcntl::FlockArg::LockExclusive,
    )
    .expect("the lock");
    file
}

/// The history's view of the tries, its verdicts worked out from the case: a success is exit
/// 0 or a code of `--success-on`, that printed READY under `--until-output`.
fn history_tries(case: &Case, outcomes: &[Value]) -> Vec<TryView> {
    outcomes
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let held = o["held"] == true;
            let ready = |k: usize| case.plan.get(k).is_none_or(|t| t.ready != Ready::No);
            let verdict = match o["exit"].as_i64() {
                _ if held => "transient",
                Some(code)
                    if code == 0
                        || case
                            .success_on
                            .as_ref()
                            .is_some_and(|s| s.contains(&(code as i32))) =>
                {
                    match !case.until_output || ready(i) {
                        true => "success",
                        false => "transient",
                    }
                }
                _ => "transient",
            };
            TryView {
                attempt: i as u64 + 1,
                outcome: o.clone(),
                held,
                verdict: verdict.into(),
                cut: false,
            }
        })
        .collect()
}

fn check_direct(
    case: &Case,
    dir: &Path,
    stores: &Stores,
    ran: &Ran,
    f: &mut Findings,
) -> Option<Direct> {
    let status = ran.status;
    if status == Status::Hung {
        f.fail("ended", "retry ran past 15 s and was killed");
        return None;
    }
    let code = status.shell();
    let stream = &ran.stderr;
    let count = read(dir, "n").map_or(0, |t| t.lines().count() as u64);
    if let Some(misuse) = &case.misuse {
        let lines: Vec<&str> = stream.lines().collect();
        if status != Status::Code(125) || lines.len() != 1 || !lines[0].contains(misuse.names) {
            f.fail(
                "usage",
                format!(
                    "{} gives status {code} and {} lines (want 125 and one line naming {}): {:?}",
                    misuse.args.join(" "),
                    lines.len(),
                    misuse.names,
                    stream.lines().take(3).collect::<Vec<_>>()
                ),
            );
        }
        if count > 0 {
            f.fail(
                "usage",
                format!("the command ran {count} times after a usage error"),
            );
        }
        return None;
    }
    if status == Status::Code(125) {
        f.fail(
            "ended",
            format!(
                "status 125 for a valid case: {:?}",
                stream.lines().last().unwrap_or("")
            ),
        );
        return None;
    }
    let log_text = match case.log {
        Log::HumanFile | Log::JsonFile => read(dir, "log").unwrap_or_default(),
        Log::Human | Log::JsonStderr => stream.clone(),
    };
    let json_asked = matches!(case.log, Log::JsonStderr | Log::JsonFile);
    let reader_gone = case.stdout == Stdout::ReaderGone && status == Status::Signal(13);

    // The JSON log.
    let json = json_asked.then(|| {
        let events = json_objects(&log_text, f);
        check_json_shape(case, &events, f);
        json_run(&events)
    });
    let json_facts = json.as_ref().and_then(json_facts);
    if json_asked && json_facts.is_none() {
        f.fail(
            "records",
            "the JSON log has no success, give_up, repeat_end or error event at its end",
        );
    }

    // The history.
    let history_line = case.history.then(|| {
        let text = read(dir, "hist").unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if lines.len() != 1 && !warned(stream, &log_text, "hist") {
            f.fail(
                "records",
                format!("--history hist holds {} lines for one run", lines.len()),
            );
        }
        lines.into_iter().next()
    });
    let history_line = history_line.flatten();
    let history_facts = history_line.as_ref().map(|h| history_facts(case, h));

    // The tries, and the truth that every record is held to.
    let views = match (&json, &history_line) {
        (Some(run), _) if json_facts.is_some() => Some((run.tries.clone(), true)),
        // The history's own tries, when its count of them agrees with its list (a list that
        // leaves tries out is reported below, and says nothing of the rest).
        (_, Some(h)) => h["try_outcomes"]
            .as_array()
            .filter(|o| h["tries"].as_u64() == Some(o.len() as u64) && case.repeat.is_none())
            .map(|o| (history_tries(case, o), false)),
        _ => None,
    };
    let (truth, truth_name) = match (&json_facts, &history_facts) {
        (Some(j), _) => (j.clone(), "the JSON log"),
        (None, Some(h)) => (h.clone(), "the history"),
        _ => (Facts::default(), "nothing"),
    };
    let truth = Facts {
        status: Some(code),
        ..truth
    };
    let interrupted = truth.outcome.as_deref() == Some("interrupted") || ran.signalled;

    if let Some(j) = &json_facts {
        if let Some(s) = j.status {
            if s != code {
                f.fail(
                    "status=json",
                    format!("exit status {code} ({status:?}), JSON end event exit_code {s}"),
                );
            }
        }
    }
    if let (Some(run), Some(_)) = (&json, &json_facts) {
        check_json_run(case, run, dir, "hr", "hg", "", f);
    }

    // The command's own count of its runs.
    let ran_tries = match &views {
        Some((v, _)) => Some(v.iter().filter(|t| !t.held).count() as u64),
        None if case.throttle.is_none() && case.repeat.is_none() => truth.tries,
        None => None,
    };
    // A try that a timeout, the end of the budget or retry (on a signal or an output it could
    // not write) stopped right after it started may have been stopped before it counted
    // itself: on a loaded machine a 60ms timeout can come before the shell's first command.
    let stopped = views.as_ref().map_or(0, |(v, _)| {
        v.iter()
            .filter(|t| !t.held)
            .filter(|t| t.cut || t.verdict == "interrupted" || t.outcome["timeout"] == true)
            .count() as u64
    });
    if let Some(n) = ran_tries {
        if !(count <= n && n - count <= stopped) {
            f.fail(
                "runs",
                format!("the command ran {count} times; the records count {n} tries that ran"),
            );
        }
    }

    // The history line.
    if let (Some(h), Some(hf)) = (&history_line, &history_facts) {
        compare(f, "history", "the history", hf, &truth, truth_name, code);
        if let (Some(run), Some(outcomes)) = (&json, h["try_outcomes"].as_array()) {
            let from_json: Vec<&Value> = run.tries.iter().map(|t| &t.outcome).collect();
            let from_history: Vec<&Value> = outcomes.iter().collect();
            if json_facts.is_some() && from_json != from_history {
                f.fail(
                    "history",
                    format!(
                        "history try_outcomes {} vs the JSON tries {}",
                        Value::from(outcomes.clone()),
                        Value::from(from_json.iter().map(|v| (*v).clone()).collect::<Vec<_>>())
                    ),
                );
            }
            if let Some(t) = h["tries"].as_u64() {
                if case.repeat.is_none() && t as usize != outcomes.len() {
                    f.fail(
                        "history",
                        format!("history tries {t}, but {} try_outcomes", outcomes.len()),
                    );
                }
            }
        }
        if case.repeat.is_some() {
            if let (Some(run), Some(failed)) = (&json, h["failed"].as_u64()) {
                if let Some(end) = &run.end {
                    if end["failed"].as_u64().is_some_and(|n| n != failed) {
                        f.fail(
                            "history",
                            format!(
                                "history failed {failed}, repeat_end failed {}",
                                end["failed"]
                            ),
                        );
                    }
                }
            }
        }
    }

    // The metrics file: one run (a replay's runs add theirs).
    if case.metrics && case.replay.is_none() {
        match read(dir, "m.prom") {
            Some(text) => check_metrics(case, &text, &truth, code, f),
            None if warned(stream, &log_text, "m.prom") => {}
            None => f.fail("metrics", "--metrics m.prom was not written".to_string()),
        }
    }

    // The pings: a start and an end for a run that ran a try, nothing for one that ran none.
    if case.ping {
        let rid = read(dir, "n").and_then(|t| {
            let first = t.lines().next()?.split(' ').nth(1)?.to_string();
            (!first.is_empty()).then_some(first)
        });
        let pinged = Pinged {
            count,
            ran_tries,
            rid,
            code,
            status,
        };
        check_pings(case, dir, stores, &pinged, &truth, f);
    }

    // The step outputs.
    if case.github {
        let text = read(dir, "go").unwrap_or_default();
        let outputs = step_outputs(&text);
        let keys = ["tries", "exit_code", "flaky", "outcome", "reason"];
        if keys.iter().any(|k| !outputs.contains_key(*k)) {
            if !warned(stream, &log_text, "go") {
                f.fail(
                    "records",
                    format!("GITHUB_OUTPUT holds {:?}, not the five step outputs", text),
                );
            }
        } else {
            let repeat_end = json.as_ref().and_then(|run| run.end.as_ref());
            check_outputs(
                case,
                &outputs,
                &truth,
                truth_name,
                code,
                views.as_ref(),
                repeat_end,
                f,
                "outputs",
            );
        }
    }

    // The JUnit report.
    let mut junit_case = None;
    if case.junit {
        match read(dir, "junit.xml") {
            None => {
                if !warned(stream, &log_text, "junit.xml") {
                    f.fail("records", "--junit junit.xml was not written");
                }
            }
            Some(text) => {
                let report = junit(&text);
                check_junit(
                    case,
                    &report,
                    &truth,
                    truth_name,
                    views.as_ref(),
                    interrupted,
                    f,
                    "junit",
                );
                junit_case = report.cases.first().cloned();
            }
        }
    }

    // The dead letter.
    let letters = match case.dead_letter {
        true => dead_letters(case, dir, stores),
        false => Vec::new(),
    };
    if case.dead_letter {
        check_dead_letter(&letters, &truth, truth_name, code, f);
    }

    // The human log, and the annotation that takes the place of its last line.
    let human_asked = matches!(case.log, Log::Human | Log::HumanFile);
    let annotations = annotations(stream);
    if human_asked {
        let line = human_facts(&log_text, case.repeat.is_some());
        match line {
            Some((facts, text)) => {
                let diffs = facts.differences(&truth);
                if !diffs.is_empty() {
                    f.fail(
                        "human",
                        format!("the last line {text:?} says {}; {truth_name} and the exit status say otherwise", diffs.join(", ")),
                    );
                }
            }
            None => {
                // A gave-up line is kept by -q and held output is played back; only a reader
                // that went away ends quietly, and under GitHub the annotation takes its place.
                let gave_up = matches!(truth.outcome.as_deref(), Some("gave_up" | "interrupted"));
                let replaced = case.github && case.log == Log::Human;
                let output_failed = truth
                    .reason
                    .as_ref()
                    .is_some_and(|r| r.as_deref() == Some("output"));
                let said = (output_failed || case.stdout == Stdout::Full)
                    && log_text.contains("error: cannot write");
                if gave_up && !reader_gone && !replaced && !said {
                    f.fail(
                        "human",
                        format!(
                            "the run {} but the log has no `gave up` line",
                            truth.outcome.as_deref().unwrap_or("?")
                        ),
                    );
                }
            }
        }
    }
    if case.github && case.log != Log::JsonStderr && case.repeat.is_none() {
        check_annotation(
            case,
            &annotations,
            &truth,
            truth_name,
            views.as_ref(),
            reader_gone,
            f,
        );
    }
    if case.github && case.log == Log::JsonStderr && !annotations.is_empty() {
        f.fail(
            "annotation",
            format!(
                "a JSON log on stderr, and an annotation in it: {:?}",
                annotations[0].line
            ),
        );
    }
    if case.github && case.repeat.is_none() {
        check_summary(
            dir,
            &truth,
            truth_name,
            views.as_ref(),
            (stream, &log_text),
            reader_gone,
            f,
        );
    }

    // Lines of their own.
    if case.github
        || (case.output_on_failure && matches!(case.stdout, Stdout::Own | Stdout::WithStderr))
    {
        check_lines(case, stream, f);
    }

    // A signal during a hook.
    if let Some((phase @ (Phase::RetryHook | Phase::GiveUpHook), _)) = case.interrupt {
        if ran.signalled && human_asked {
            let which = if phase == Phase::RetryHook {
                "--on-retry"
            } else {
                "--on-give-up"
            };
            if let Some(line) = log_text.lines().find(|l| l.contains(": received SIG")) {
                if !line.contains(&format!("during the {which} hook")) {
                    f.fail(
                        "signal",
                        format!(
                            "a signal during the {which} hook is logged as {:?}",
                            line.trim_start()
                        ),
                    );
                }
            }
        }
    }

    // No try finished: no success.
    if let Some((v, _)) = &views {
        let finished = v.iter().any(|t| t.succeeded());
        // A run whose `--once` key was done ran nothing, and says so (docs/processes.md).
        let done = truth.done_before() && v.is_empty();
        let says_success = code == 0 && case.repeat.is_none() && !done;
        if says_success && !finished {
            f.fail(
                "no-try-finished",
                format!(
                    "exit status 0, but no try succeeded: {:?}",
                    v.iter().map(|t| &t.outcome).collect::<Vec<_>>()
                ),
            );
        }
    }

    Some(Direct {
        truth,
        tries: views.map(|(v, _)| v),
        junit: junit_case,
        letters,
    })
}

/// Whether a warning in the log names `file` (a record that could not be written).
/// The `--metrics` file of one run against the truth: one run counted, its outcome in the step
/// outputs' words, its exit status, its tries (those that ran and those held back).
fn check_metrics(case: &Case, text: &str, truth: &Facts, code: i64, f: &mut Findings) {
    let samples = |name: &str| -> Vec<(String, f64)> {
        text.lines()
            .filter_map(|l| l.strip_prefix(name))
            .filter_map(|l| l.strip_prefix('{'))
            .filter_map(|l| l.rsplit_once("} "))
            .map(|(labels, v)| (labels.to_string(), v.parse().unwrap_or(f64::NAN)))
            .collect()
    };
    let gauge = |name: &str| samples(name).first().map(|(_, v)| *v);
    let runs = samples("retry_runs_total");
    let outcome = match runs.as_slice() {
        [(labels, n)] if *n == 1.0 => labels
            .split("outcome=\"")
            .nth(1)
            .map(|w| w.trim_end_matches('"').to_string()),
        _ => None,
    };
    let Some(outcome) = outcome else {
        return f.fail("metrics", format!("not one run counted:\n{text}"));
    };
    // A run that `--lock` turned away is counted apart, and leaves the job's last figures as
    // they were: none, in a file of its own (docs/dashboards.md). Without a record that says
    // why the run ended, its 75 and the file's own word tell it.
    let unknown = truth.reason.is_none() && code == 75 && outcome == "locked";
    // So is a run whose `--once` key was done: it ran nothing either. Without a record that
    // says so, the case's own key, written done before the run, tells it.
    let found_done = truth.outcome.is_none() && case.lock.is_some_and(|l| l.done);
    if truth.done_before() || found_done {
        let last = text.lines().any(|l| l.starts_with("retry_last_"));
        if outcome != "done_before" || last {
            f.fail(
                "metrics",
                format!("a run done before counted as {outcome}:\n{text}"),
            );
        }
        return;
    }
    if truth.locked() || unknown {
        let last: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("retry_last_") || l.starts_with("retry_tries_total"))
            .collect();
        if outcome != "locked" || !last.is_empty() {
            f.fail(
                "metrics",
                format!("a run turned away counted as {outcome}, with {last:?}"),
            );
        }
        return;
    }
    if !outcome_agrees(&outcome, truth) {
        f.fail(
            "metrics",
            format!("outcome {outcome}, but {:?}", truth.outcome),
        );
    }
    if gauge("retry_last_exit_code") != Some(code as f64) {
        f.fail(
            "metrics",
            format!(
                "retry_last_exit_code {:?}, exit status {code}",
                gauge("retry_last_exit_code")
            ),
        );
    }
    let last_tries = gauge("retry_last_tries");
    // A repeat's summary leaves out a try that a signal cut short; the run counts it, as the
    // history's line does.
    let repeat = truth.outcome.as_deref() == Some("repeat");
    if let (Some(t), Some(n), false) = (truth.tries, last_tries, repeat) {
        if t as f64 != n {
            f.fail("metrics", format!("retry_last_tries {n}, tries {t}"));
        }
    }
    let tries: f64 = samples("retry_tries_total").iter().map(|(_, v)| v).sum();
    if last_tries != Some(tries) {
        f.fail(
            "metrics",
            format!("retry_tries_total sums to {tries}, retry_last_tries {last_tries:?}"),
        );
    }
    let success = gauge("retry_last_success_timestamp_seconds").is_some();
    if success != (code == 0) {
        f.fail(
            "metrics",
            format!("exit status {code}, and a last success time: {success}"),
        );
    }
}

/// Whether `word`, an outcome in the step outputs' words, is the outcome `truth` tells.
fn outcome_agrees(word: &str, truth: &Facts) -> bool {
    match (word, truth.outcome.as_deref()) {
        (_, None) => true,
        // A repeat's end is in the words of the step outputs, which the JSON log's repeat_end
        // does not use.
        (o, Some("repeat")) => ["success", "gave_up", "failed", "interrupted"].contains(&o),
        ("flaky", Some(t)) => t == "flaky-fail",
        ("gave_up", Some(t)) => t == "gave_up" || t == "error",
        (o, Some(t)) => o == t,
    }
}

/// What the pings of a run are held to: the command's own count of its runs and the run id it
/// was given, the tries the records say ran, and how `retry` ended.
struct Pinged {
    count: u64,
    ran_tries: Option<u64>,
    rid: Option<String>,
    code: i64,
    status: Status,
}

/// The pings of one run against its other records (docs/dashboards.md#pings): a run that ran
/// a try pings `/start?rid=ID` and then, `retry` having ended by itself, `?rid=ID` for 0 or
/// `/fail?rid=ID` with a first line in the step outputs' words; a run that ran no try pings
/// nothing. ID is the run id the command was given.
fn check_pings(
    case: &Case,
    dir: &Path,
    stores: &Stores,
    pinged: &Pinged,
    truth: &Facts,
    f: &mut Findings,
) {
    let base = stores.ping_path();
    let got: Vec<super::receiver::Received> = ping_receiver()
        .got()
        .into_iter()
        .filter(|r| {
            let path = r.path.split('?').next().unwrap_or("");
            path == base || path.strip_prefix(&base).is_some_and(|p| p.starts_with('/'))
        })
        .collect();
    let seen: Vec<String> = got
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    let ran = match (pinged.count, pinged.ran_tries) {
        (1.., _) => Some(true),
        (0, Some(n)) => Some(n > 0),
        (0, None) => None,
    };
    PINGS[usize::from(ran == Some(false))].fetch_add(1, Ordering::Relaxed);
    if ran == Some(false) || (ran.is_none() && got.is_empty()) {
        if !got.is_empty() {
            f.fail("pings", format!("no try ran, and yet pinged {seen:?}"));
        }
        return;
    }
    let Some(start) = got.first() else {
        return f.fail("pings", "a try ran, and nothing was pinged".to_string());
    };
    let rid = start
        .path
        .strip_prefix(&format!("{base}/start?rid="))
        .unwrap_or("");
    if start.method != "POST" || rid.is_empty() || !start.body.is_empty() {
        return f.fail(
            "pings",
            format!("the first ping is not the start: {seen:?}"),
        );
    }
    if pinged.rid.as_deref().is_some_and(|id| id != rid) {
        f.fail(
            "pings",
            format!(
                "the start pinged rid={rid}, the command was given {:?}",
                pinged.rid
            ),
        );
    }
    // `retry` killed by a signal (its reader gone) pings no end.
    let ended_itself = matches!(pinged.status, Status::Code(_));
    let ends = &got[1..];
    let end = match (ends, ended_itself) {
        ([], false) => return,
        ([end], _) => end,
        _ => return f.fail("pings", format!("not one start and one end: {seen:?}")),
    };
    let code = pinged.code;
    let want = match code {
        0 => format!("{base}?rid={rid}"),
        _ => format!("{base}/fail?rid={rid}"),
    };
    if end.method != "POST" || end.path != want {
        return f.fail(
            "pings",
            format!("exit status {code}, and the end pinged {seen:?}"),
        );
    }
    if code == 0 {
        return;
    }
    let body = String::from_utf8_lossy(&end.body);
    let line = body.lines().next().unwrap_or("");
    let said = step_outputs(&line.replace(' ', "\n"));
    // The step outputs, where the case writes them, are the very words of the line.
    if case.github {
        let outputs = step_outputs(&read(dir, "go").unwrap_or_default());
        let keys = ["exit_code", "outcome", "reason", "tries"];
        if outputs.len() == 5 && keys.iter().any(|k| said.get(*k) != outputs.get(*k)) {
            return f.fail(
                "pings",
                format!("the failure's line {line:?}, the step outputs {outputs:?}"),
            );
        }
    }
    let number = |k: &str| said.get(k).and_then(|v| v.parse::<i64>().ok());
    let outcome = said.get("outcome").map_or("", |o| o.as_str());
    let tries_differ = matches!(
        (truth.tries, number("tries"), truth.outcome.as_deref()),
        (Some(t), Some(n), Some(o)) if o != "repeat" && t as i64 != n
    );
    if number("exit_code") != Some(code) || !outcome_agrees(outcome, truth) || tries_differ {
        f.fail(
            "pings",
            format!("exit status {code} ({truth:?}), the failure's line {line:?}"),
        );
    }
}

fn warned(stream: &str, log: &str, file: &str) -> bool {
    [stream, log].iter().any(|text| {
        text.lines()
            .any(|l| l.contains("warning") && l.contains(file))
    })
}

fn history_facts(case: &Case, h: &Value) -> Facts {
    let status = h["exit_code"].as_i64();
    let outcome = match h["outcome"].as_str().unwrap_or("?") {
        "success" if status.is_some_and(|s| s != 0) => "flaky-fail".to_string(),
        other => other.to_string(),
    };
    let repeat = case.repeat.is_some();
    Facts {
        reason: match (repeat, outcome.as_str()) {
            (true, _) | (false, "flaky-fail") => None,
            _ => Some(h["reason"].as_str().map(str::to_string)),
        },
        outcome: Some(outcome),
        status,
        tries: if repeat { None } else { h["tries"].as_u64() },
        flaky: if repeat { None } else { h["flaky"].as_bool() },
    }
}

/// Compares a record's facts with the truth and its status with the exit status.
fn compare(
    f: &mut Findings,
    invariant: &'static str,
    name: &str,
    got: &Facts,
    truth: &Facts,
    truth_name: &str,
    code: i64,
) {
    let mut truth = truth.clone();
    // An end by retry's own error has no outcome in the other records' words.
    if truth.outcome.as_deref() == Some("error") {
        truth.outcome = None;
        truth.reason = None;
    }
    let diffs = got.differences(&Facts {
        status: None,
        ..truth
    });
    if !diffs.is_empty() {
        f.fail(
            invariant,
            format!(
                "{name} says {}; {truth_name} says otherwise",
                diffs.join(", ")
            ),
        );
    }
    if let Some(s) = got.status {
        if s != code {
            f.fail(
                invariant,
                format!("{name} says exit_code {s}, the exit status is {code}"),
            );
        }
    }
}

/// The shape of a direct run's JSON log: one start first, the tries in order.
fn check_json_shape(case: &Case, events: &[Value], f: &mut Findings) {
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap_or(""))
        .collect();
    if names.first() != Some(&"start") || names.iter().filter(|n| **n == "start").count() != 1 {
        f.fail(
            "json",
            format!("the JSON log does not start with one start event: {names:?}"),
        );
    }
    let attempts: Vec<u64> = events
        .iter()
        .filter(|e| e["event"] == "try")
        .map(|e| e["attempt"].as_u64().unwrap_or(0))
        .collect();
    if attempts.iter().enumerate().any(|(i, &a)| a != i as u64 + 1) {
        f.fail(
            "json",
            format!("try attempts {attempts:?}, not 1..T in order"),
        );
    }
    let ends = names
        .iter()
        .filter(|n| matches!(**n, "success" | "give_up" | "repeat_end"))
        .count();
    let on_give_up_signalled = matches!(case.interrupt, Some((Phase::GiveUpHook, _)));
    if ends > 1 && !on_give_up_signalled {
        f.fail("json", format!("{ends} end events: {names:?}"));
    }
}

/// The checks of one run's JSON events (a direct run, or a run of a replay, `tag` naming it):
/// the status its tries give, failed_tries, held tries, hooks, and the end's own fields.
#[allow(clippy::too_many_arguments)]
fn check_json_run(
    case: &Case,
    run: &JsonRun,
    dir: &Path,
    retry_log: &str,
    give_up_log: &str,
    tag: &str,
    f: &mut Findings,
) {
    let Some(end) = &run.end else {
        return;
    };
    let tries = &run.tries;
    let failed: Vec<&TryView> = tries.iter().filter(|t| t.failed()).collect();
    let ran: Vec<&TryView> = tries.iter().filter(|t| !t.held).collect();
    let exit = end["exit_code"].as_i64();
    let event = end["event"].as_str().unwrap_or("");
    let outcomes = || {
        tries
            .iter()
            .map(|t| {
                format!(
                    "{}{}",
                    t.outcome,
                    if t.verdict.is_empty() {
                        String::new()
                    } else {
                        format!(":{}", t.verdict)
                    }
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let inv_status = "status=tries";
    // A try that `retry` stopped when the lease of `--lock` was lost says `lock_lost`, as the
    // run's end does, never `interrupted`; no other try says it.
    let lost = end["reason"] == "lock_lost";
    let last = tries.len();
    for (k, t) in tries.iter().enumerate() {
        let wrong = match t.verdict.as_str() {
            "lock_lost" => !lost || k + 1 != last,
            "interrupted" => lost && k + 1 == last,
            _ => false,
        };
        if wrong {
            f.fail(
                "json",
                format!(
                    "{tag}try {} has verdict {} in a run that ended with reason {}: {}",
                    t.attempt,
                    t.verdict,
                    end["reason"],
                    outcomes()
                ),
            );
        }
    }
    // A run turned away names the holder: the test's record in the lock file, or the run
    // holding the lease.
    let want_holder = match case.lock {
        Some(Lock { redis: false, .. }) => Some("agree-holder"),
        _ => None,
    };
    let holder = end["holder_run_id"].as_str().unwrap_or("");
    let named = !holder.is_empty() && want_holder.is_none_or(|w| w == holder);
    if end["reason"] == "locked" && !named {
        f.fail(
            "json",
            format!("{tag}the run was turned away by --lock naming holder run '{holder}'"),
        );
    }
    match event {
        "success" => {
            let flaky_fail = case.flaky == Some("fail") && !failed.is_empty();
            let want = match flaky_fail {
                true => failed.last().and_then(|t| failed_status(&t.outcome)),
                false => Some(0),
            };
            if exit != want {
                f.fail(
                    inv_status,
                    format!(
                        "{tag}success exit_code {exit:?}, but the tries {} give {want:?}",
                        outcomes()
                    ),
                );
            }
            if end["attempt"].as_u64() != Some(tries.len() as u64) {
                f.fail(
                    "json",
                    format!(
                        "{tag}success attempt {}, but {} try events",
                        end["attempt"],
                        tries.len()
                    ),
                );
            }
            if !tries.last().is_some_and(|t| t.succeeded()) {
                f.fail(
                    "no-try-finished",
                    format!(
                        "{tag}a success event whose last try did not succeed: {}",
                        outcomes()
                    ),
                );
            }
            let n = failed.len() as u64;
            if end["failed_tries"].as_u64() != Some(n) {
                f.fail(
                    "failed_tries",
                    format!(
                        "{tag}success failed_tries {}, but {n} of the tries that ran failed: {}",
                        end["failed_tries"],
                        outcomes()
                    ),
                );
            }
            if end["flaky"].as_bool() != Some(n > 0) {
                f.fail(
                    "failed_tries",
                    format!(
                        "{tag}success flaky {}, with {n} failed tries: {}",
                        end["flaky"],
                        outcomes()
                    ),
                );
            }
            if case.flaky == Some("warn") && n > 0 {
                match run.warnings.iter().find(|w| w.contains("flaky")) {
                    None => f.fail(
                        "failed_tries",
                        format!("{tag}--flaky warn after {n} failed tries, and no warning event"),
                    ),
                    Some(w) => {
                        if number_after(w, "after ") != Some(n) {
                            f.fail(
                                "failed_tries",
                                format!("{tag}the flaky warning {w:?}, with {n} failed tries"),
                            );
                        }
                    }
                }
            }
        }
        "give_up" => {
            let reason = end["reason"].as_str().unwrap_or("");
            if end["tries"].as_u64() != Some(tries.len() as u64) {
                f.fail(
                    "json",
                    format!(
                        "{tag}give_up tries {}, but {} try events",
                        end["tries"],
                        tries.len()
                    ),
                );
            }
            let last = tries.last();
            let last_ran = ran.last();
            let want = match reason {
                "interrupted" => end["signal"]
                    .as_str()
                    .and_then(signum)
                    .map(|n| 128 + n)
                    .or(exit),
                "held" => match last_ran {
                    None => Some(75),
                    Some(t) if t.failed() => failed_status(&t.outcome),
                    // After a success of a streak: unsettled, but never 0 (checked below).
                    Some(_) => exit,
                },
                "consecutive" => Some(1),
                "input" => exit,
                _ => match last {
                    Some(t) if t.failed() => failed_status(&t.outcome),
                    _ => exit,
                },
            };
            if exit != want {
                f.fail(inv_status, format!("{tag}give_up reason {reason} exit_code {exit:?}, but the tries {} give {want:?}", outcomes()));
            }
            match reason {
                "held" if !last.is_some_and(|t| t.held) => {
                    f.fail(inv_status, format!("{tag}give_up reason held, but the last try was not held: {}", outcomes()))
                }
                "consecutive" if !last_ran.is_some_and(|t| t.succeeded()) => f.fail(
                    inv_status,
                    format!("{tag}give_up reason consecutive, but the last try that ran did not succeed: {}", outcomes()),
                ),
                "tries" | "permanent" | "budget" if last.is_some_and(|t| t.succeeded()) => f.fail(
                    inv_status,
                    format!(
                        "{tag}gave up (reason {reason}, exit_code {exit:?}) after a successful try: docs/policy.md#consecutive says reason consecutive, status 1: {}",
                        outcomes()
                    ),
                ),
                _ => {}
            }
            // Giving up is never a success.
            if exit == Some(0) {
                f.fail(
                    inv_status,
                    format!(
                        "{tag}give_up reason {reason} with exit_code 0: {}",
                        outcomes()
                    ),
                );
            }
        }
        "repeat_end" => {
            let counted: Vec<&TryView> = tries
                .iter()
                .filter(|t| !t.cut && t.verdict != "interrupted")
                .collect();
            let failed_counted = counted.iter().filter(|t| t.failed()).count() as u64;
            if end["failed"].as_u64() != Some(failed_counted) {
                f.fail(
                    "json",
                    format!(
                        "{tag}repeat_end failed {}, but {failed_counted} tries failed: {}",
                        end["failed"],
                        outcomes()
                    ),
                );
            }
            if end["tries"].as_u64() != Some(counted.len() as u64) {
                f.fail(
                    "json",
                    format!(
                        "{tag}repeat_end tries {}, but {} tries ran to their end: {}",
                        end["tries"],
                        counted.len(),
                        outcomes()
                    ),
                );
            }
            let want = if end["reason"] == "interrupted" {
                end["signal"]
                    .as_str()
                    .and_then(signum)
                    .map(|n| 128 + n)
                    .or(exit)
            } else if let Some(first) = counted.iter().find(|t| t.failed()) {
                failed_status(&first.outcome)
            } else if counted.is_empty() {
                Some(124)
            } else {
                Some(0)
            };
            if exit != want {
                f.fail(
                    inv_status,
                    format!(
                        "{tag}repeat_end exit_code {exit:?}, but the tries {} give {want:?}",
                        outcomes()
                    ),
                );
            }
        }
        _ => {}
    }
    // Held tries.
    for t in tries.iter().filter(|t| t.held) {
        if t.verdict != "transient" {
            f.fail(
                "held",
                format!("{tag}held try {} has verdict {}", t.attempt, t.verdict),
            );
        }
    }

    // Hooks.
    let hooks = |name: &str| -> Vec<(u64, i64)> {
        read(dir, name)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (a, c) = l.split_once(' ')?;
                Some((a.parse().ok()?, c.parse().ok()?))
            })
            .collect()
    };
    if case.on_retry {
        let lines = hooks(retry_log);
        let mut seen = Vec::new();
        for &(attempt, status) in &lines {
            let t = tries.get(attempt.saturating_sub(1) as usize);
            match t {
                None => f.fail("hooks", format!("{tag}--on-retry ran for try {attempt}, which is not among the tries: {}", outcomes())),
                Some(t) if t.held => f.fail("hooks", format!("{tag}--on-retry ran after try {attempt}, which was held back: {}", outcomes())),
                Some(t) if !t.failed() => f.fail(
                    "hooks",
                    format!("{tag}--on-retry ran after try {attempt}, which did not fail ({}:{}), with RETRY_EXIT_CODE={status}", t.outcome, t.verdict),
                ),
                Some(t) => {
                    if Some(status) != failed_status(&t.outcome) {
                        f.fail(
                            "hooks",
                            format!("{tag}--on-retry after try {attempt} ({}) got RETRY_EXIT_CODE={status}, want {:?}", t.outcome, failed_status(&t.outcome)),
                        );
                    }
                }
            }
            if status == 0 {
                f.fail(
                    "hooks",
                    format!("{tag}--on-retry got RETRY_EXIT_CODE=0 after try {attempt}"),
                );
            }
            if seen.contains(&attempt) {
                f.fail(
                    "hooks",
                    format!("{tag}--on-retry ran twice after try {attempt}"),
                );
            }
            seen.push(attempt);
        }
        for pair in tries.windows(2) {
            if pair[0].failed() && !seen.contains(&pair[0].attempt) {
                f.fail(
                    "hooks",
                    format!("{tag}try {} failed and try {} followed, but --on-retry did not run between them", pair[0].attempt, pair[1].attempt),
                );
            }
        }
    }
    if case.on_give_up {
        let lines = hooks(give_up_log);
        // A hook runs only after a try that ran and failed (docs/log.md#hooks): never after a held try,
        // nor after a success of a --consecutive streak that the tries or the budget cut.
        // Nor for a run that `--lock` turned away: it ran nothing (docs/processes.md).
        let last_failed = tries.last().is_none_or(|t| t.failed());
        let locked = end["reason"] == "locked";
        if locked && !lines.is_empty() {
            f.fail(
                "hooks",
                format!("{tag}the run was turned away by --lock, and --on-give-up ran"),
            );
        }
        let gave_up =
            event == "give_up" && end["reason"] != "interrupted" && !locked && last_failed;
        if event == "give_up" && !last_failed && !lines.is_empty() {
            f.fail(
                "hooks",
                format!(
                    "{tag}the run gave up ({}) after a try that did not fail, and --on-give-up ran",
                    end["reason"]
                ),
            );
        }
        if gave_up && lines.len() != 1 {
            f.fail(
                "hooks",
                format!(
                    "{tag}the run gave up ({}), and --on-give-up ran {} times",
                    end["reason"],
                    lines.len()
                ),
            );
        }
        if event == "success" && case.flaky != Some("fail") && !lines.is_empty() {
            f.fail(
                "hooks",
                format!("{tag}the run succeeded, and --on-give-up ran"),
            );
        }
        if gave_up {
            if let (Some(&(_, status)), Some(exit)) = (lines.first(), exit) {
                if status != exit {
                    f.fail("hooks", format!("{tag}--on-give-up got RETRY_EXIT_CODE={status}, the run gave up with {exit}"));
                }
            }
        }
    }
}

/// The step outputs (`name=value`) against the truth.
#[allow(clippy::too_many_arguments)]
fn check_outputs(
    case: &Case,
    o: &BTreeMap<String, String>,
    truth: &Facts,
    truth_name: &str,
    code: i64,
    views: Option<&(Vec<TryView>, bool)>,
    repeat_end: Option<&Value>,
    f: &mut Findings,
    invariant: &'static str,
) {
    let exit: Option<i64> = o["exit_code"].parse().ok();
    let tries: Option<u64> = o["tries"].parse().ok();
    let outcome = o["outcome"].as_str();
    let reason = o["reason"].as_str();
    let flaky = o["flaky"].as_str();
    let say = |what: String| format!("step outputs {what}");
    if exit != Some(code) {
        f.fail(
            invariant,
            say(format!(
                "exit_code={} but the exit status is {code}",
                o["exit_code"]
            )),
        );
    }
    // Without a record that says so, the case's own key, written done before the run, tells it.
    let done =
        truth.done_before() || (truth.outcome.is_none() && case.lock.is_some_and(|l| l.done));
    let ran_nothing_ok = outcome == "done_before" && done;
    if (outcome == "success" || ran_nothing_ok) != (exit == Some(0)) {
        f.fail(
            invariant,
            say(format!(
                "outcome={outcome} with exit_code={}",
                o["exit_code"]
            )),
        );
    }
    if case.repeat.is_some() {
        // docs/ci.md#step-outputs: `failed` when a try failed, `gave_up` when no try ran to its
        // end, the repeat_end reason unless every try ran.
        if let Some(end) = repeat_end {
            let why = end["reason"].as_str().unwrap_or("");
            let want = match (why, code) {
                ("interrupted", _) => "interrupted",
                // Turned away by `--lock`: the repeat ran nothing (docs/ci.md#step-outputs).
                ("locked", _) => "locked",
                (_, 0) => "success",
                _ if end["tries"] == 0 => "gave_up",
                _ => "failed",
            };
            if outcome != want {
                f.fail(
                    invariant,
                    say(format!("outcome={outcome}; repeat_end says {end}")),
                );
            }
            let want_reason = if why == "done" { "" } else { why };
            if reason != want_reason {
                f.fail(
                    invariant,
                    say(format!("reason={reason:?}; repeat_end says reason {why}")),
                );
            }
        }
        return;
    }
    let want_outcome = match truth.outcome.as_deref() {
        Some("success") => Some("success"),
        Some("flaky-fail") => Some("flaky"),
        // Turned away by a lock, the run ran nothing (docs/ci.md#step-outputs).
        Some("gave_up") if truth.locked() => Some("locked"),
        Some("done_before") => Some("done_before"),
        Some("gave_up") => Some("gave_up"),
        Some("interrupted") => Some("interrupted"),
        _ => None,
    };
    if let Some(want) = want_outcome {
        if outcome != want {
            f.fail(
                invariant,
                say(format!("outcome={outcome}; {truth_name} says {want}")),
            );
        }
    }
    match &truth.reason {
        Some(Some(r)) if reason != r.as_str() => f.fail(
            invariant,
            say(format!("reason={reason:?}; {truth_name} says {r}")),
        ),
        Some(None)
            if !(reason.is_empty() || reason == "flaky" && want_outcome == Some("flaky")) =>
        {
            f.fail(invariant, say(format!("reason={reason:?} after a success")))
        }
        _ => {}
    }
    if let Some(t) = truth.tries {
        if tries != Some(t) {
            f.fail(
                invariant,
                say(format!("tries={}; {truth_name} says {t}", o["tries"])),
            );
        }
    }
    let want_flaky = match views {
        Some((v, _)) if matches!(want_outcome, Some("success" | "flaky")) => {
            Some(v.iter().any(|t| t.failed()))
        }
        _ if matches!(want_outcome, Some("gave_up" | "interrupted")) => Some(false),
        _ => truth.flaky,
    };
    if let Some(want) = want_flaky {
        if flaky != want.to_string() {
            f.fail(
                invariant,
                say(format!(
                    "flaky={flaky}, but {} of the tries that ran failed",
                    views.map_or("?".to_string(), |(v, _)| v
                        .iter()
                        .filter(|t| t.failed())
                        .count()
                        .to_string())
                )),
            );
        }
    }
}

/// The JUnit report against the truth and the tries.
#[allow(clippy::too_many_arguments)]
fn check_junit(
    case: &Case,
    report: &Junit,
    truth: &Facts,
    truth_name: &str,
    views: Option<&(Vec<TryView>, bool)>,
    interrupted: bool,
    f: &mut Findings,
    invariant: &'static str,
) {
    let total = |pick: fn(&JunitCase) -> usize| report.cases.iter().map(pick).sum::<usize>() as u64;
    for (name, attr, count) in [
        ("tests", report.tests, report.cases.len() as u64),
        ("failures", report.failures, total(|c| c.failures)),
        ("errors", report.errors, total(|c| c.errors)),
    ] {
        if attr != Some(count) {
            f.fail(
                invariant,
                format!("JUnit {name}={attr:?}, but {count} such elements"),
            );
        }
    }
    // A run turned away, or whose `--once` key was done, is one skipped case, not a failure
    // (docs/ci.md#junit-reports).
    if truth.locked() || truth.done_before() {
        let skipped = report.cases.iter().map(|c| c.skipped).collect::<Vec<_>>();
        if skipped != [1] || total(|c| c.failures) + total(|c| c.errors) > 0 {
            f.fail(
                invariant,
                format!("a run turned away has JUnit cases {:?}", report.cases),
            );
        }
        return;
    }
    if case.repeat.is_some() {
        if let Some((v, true)) = views {
            if report.cases.len() != v.len() && !interrupted {
                f.fail(
                    invariant,
                    format!(
                        "JUnit has {} test cases for a repeat of {} tries",
                        report.cases.len(),
                        v.len()
                    ),
                );
            }
            let failed = v.iter().filter(|t| t.failed() && !t.cut).count() as u64;
            let none_ran = v.iter().all(|t| t.cut);
            let want = failed + u64::from(none_ran);
            if !interrupted && total(|c| c.failures) != want {
                f.fail(
                    invariant,
                    format!(
                        "JUnit has {} failures for a repeat with {failed} failed tries",
                        total(|c| c.failures)
                    ),
                );
            }
        }
        return;
    }
    if report.cases.len() != 1 {
        f.fail(
            invariant,
            format!("JUnit has {} test cases for one run", report.cases.len()),
        );
        return;
    }
    let c = &report.cases[0];
    let got = junit_facts(c);
    // An output that cannot be written is retry's own failure: an <error> (docs/decisions.md).
    let output_failed = truth
        .reason
        .as_ref()
        .is_some_and(|r| r.as_deref() == Some("output"));
    let want = match output_failed {
        true => Some("error".to_string()),
        false => truth.outcome.clone(),
    };
    if let (Some(g), Some(w)) = (&got.outcome, &want) {
        if g != w && w != "error" {
            f.fail(
                invariant,
                format!("the JUnit test case reads as {g} ({c:?}); {truth_name} says {w}"),
            );
        }
    }
    let Some((v, exact)) = views else {
        return;
    };
    // Views read from the history alone do not tell a failed try from one that retry stopped
    // because its output could not be written.
    if !exact && (interrupted || want.as_deref() == Some("error")) {
        return;
    }
    let failed = v.iter().filter(|t| t.failed()).count();
    let last_failed = v.last().is_some_and(|t| t.failed());
    let want_counts = match want.as_deref() {
        Some("success") => Some((0, 0, failed)),
        Some("gave_up") => Some((1, failed - usize::from(last_failed), 0)),
        Some("flaky-fail") => Some((1, failed, 0)),
        Some("error") => Some((0, failed, 0)),
        _ => None,
    };
    if let Some((failures, reruns, flakies)) = want_counts {
        if (c.failures, c.reruns, c.flaky) != (failures, reruns, flakies) {
            f.fail(
                invariant,
                format!(
                    "JUnit has {} failure, {} rerunFailure, {} flakyFailure; a run that {} after {failed} failed tries ({}) has {failures}, {reruns}, {flakies}",
                    c.failures,
                    c.reruns,
                    c.flaky,
                    want.as_deref().unwrap_or("?"),
                    v.iter().map(|t| t.outcome.to_string()).collect::<Vec<_>>().join(" ")
                ),
            );
        }
    }
}

/// The runs that `--dead-letter` recorded: the file's `dead_letter` lines, or of a store on
/// TLS, the runs its listing shows (each with the `reason`, `exit_code` and `tries` of the
/// file's line).
fn dead_letters(case: &Case, dir: &Path, stores: &Stores) -> Vec<Value> {
    if case.tls.dead_letter {
        return listing(dir, &stores.url(), stores).unwrap_or_default();
    }
    let text = read(dir, "dl").unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "dead_letter")
        .collect()
}

/// A dead letter exactly when the run gave up (docs/dead-letters.md), agreeing with it.
fn check_dead_letter(
    letters: &[Value],
    truth: &Facts,
    truth_name: &str,
    code: i64,
    f: &mut Findings,
) {
    let reason = truth.reason.clone().flatten();
    let outcome = truth.outcome.as_deref();
    let required = outcome == Some("gave_up")
        && matches!(
            reason.as_deref(),
            Some("permanent" | "tries" | "budget" | "quota" | "held")
        );
    let forbidden = matches!(outcome, Some("success" | "interrupted"));
    match letters.len() {
        0 if required => f.fail(
            "dead-letter",
            format!(
                "the run gave up (reason {}, {truth_name}), and --dead-letter has no record",
                reason.unwrap_or_default()
            ),
        ),
        0 => {}
        1 if forbidden => f.fail(
            "dead-letter",
            format!(
                "the run ended {} ({truth_name}), and --dead-letter recorded it: {}",
                outcome.unwrap_or("?"),
                letters[0]
            ),
        ),
        1 => {
            let l = &letters[0];
            let got = Facts {
                reason: Some(l["reason"].as_str().map(str::to_string)),
                status: l["exit_code"].as_i64(),
                tries: l["tries"].as_u64(),
                ..Facts::default()
            };
            let mut want = truth.clone();
            want.outcome = None;
            want.flaky = None;
            if outcome != Some("gave_up") {
                want.reason = None;
            }
            compare(
                f,
                "dead-letter",
                "the dead letter",
                &got,
                &want,
                truth_name,
                code,
            );
        }
        n => f.fail("dead-letter", format!("{n} dead letters for one run")),
    }
}

/// The one annotation of a run under GitHub Actions (docs/ci.md#the-annotation).
fn check_annotation(
    case: &Case,
    found: &[Annotation],
    truth: &Facts,
    truth_name: &str,
    views: Option<&(Vec<TryView>, bool)>,
    reader_gone: bool,
    f: &mut Findings,
) {
    if found.len() > 1 {
        f.fail(
            "annotation",
            format!(
                "{} annotations: {:?}",
                found.len(),
                found.iter().map(|a| &a.line).collect::<Vec<_>>()
            ),
        );
        return;
    }
    let failed = views.map(|(v, _)| v.iter().filter(|t| t.failed()).count() as u64);
    let tries = truth.tries;
    // What kind the docs ask for, if they settle it.
    let want: Option<Option<&str>> = match truth.outcome.as_deref() {
        _ if reader_gone => None,
        // Turned away by `--lock`: it ran nothing, and the job is being run (docs/ci.md).
        _ if truth.locked() => Some(Some("warning")),
        Some("success") if tries == Some(1) => Some(None),
        Some("success") if failed.is_some_and(|n| n > 0) => {
            Some((!case.quiet).then_some("warning"))
        }
        Some("flaky-fail") if !case.quiet => Some(Some("error")),
        Some("gave_up" | "interrupted") => Some(Some("error")),
        _ => None,
    };
    let got = found.first().map(|a| a.kind.as_str());
    if let Some(want) = want {
        if got != want {
            f.fail(
                "annotation",
                format!(
                    "the run {} ({truth_name}) has annotation {got:?}, want {want:?}",
                    truth.outcome.as_deref().unwrap_or("?")
                ),
            );
        }
    }
    let Some(a) = found.first() else {
        return;
    };
    let mut diffs = a.facts.differences(truth);
    // A run whose output could not be written ends the JSON log with `error`; the step
    // outputs, the history and the annotation say it gave up, for reason `output`.
    if truth.outcome.as_deref() == Some("error") {
        diffs.retain(|d| !d.starts_with("outcome gave_up"));
    }
    if !diffs.is_empty() {
        f.fail(
            "annotation",
            format!(
                "the annotation {:?} says {}; {truth_name} says otherwise",
                a.line,
                diffs.join(", ")
            ),
        );
    }
    // A lost lock's cause has words after a colon of its own (why it was lost), which the
    // count of the failures after the cause cannot tell from a list.
    let lost = truth.reason.as_ref().and_then(Option::as_deref) == Some("lock_lost");
    if let (Some(n), Some(m), Some((_, true))) = (a.failed, failed, views) {
        if n != m && truth.outcome.as_deref() != Some("interrupted") && !lost {
            f.fail(
                "annotation",
                format!(
                    "the annotation {:?} counts {n} failures; {m} tries ran and failed",
                    a.line
                ),
            );
        }
    }
}

/// The job summary (docs/ci.md#the-job-summary): a table of the tries of a run that retried or
/// gave up.
#[allow(clippy::too_many_arguments)]
fn check_summary(
    dir: &Path,
    truth: &Facts,
    truth_name: &str,
    views: Option<&(Vec<TryView>, bool)>,
    (stream, log): (&str, &str),
    reader_gone: bool,
    f: &mut Findings,
) {
    let text = read(dir, "sum").unwrap_or_default();
    let sections = text.matches("### retry").count();
    let outcome = truth.outcome.as_deref();
    // A run that retried after a failure or gave up has a summary; one whose later tries
    // followed held tries or successes of a streak only is not settled by the docs.
    let failed = views.map(|(v, _)| v.iter().any(|t| t.failed()));
    // A run whose last try died of SIGPIPE (its reader gone) ends as quietly as the bare
    // pipeline would: no annotation, no summary (docs/ci.md).
    let quiet = reader_gone
        || views.is_some_and(|(v, _)| v.last().is_some_and(|t| t.outcome["signal"] == "PIPE"));
    let expected = !quiet
        && (failed == Some(true)
            || matches!(outcome, Some("gave_up" | "interrupted" | "flaky-fail")));
    let unsettled = !expected && truth.tries.is_some_and(|t| t > 1);
    if sections == 0 {
        if expected && outcome.is_some() && !warned(stream, log, "sum") {
            f.fail(
                "summary",
                format!(
                    "the run {} after {:?} tries, and no job summary",
                    outcome.unwrap_or("?"),
                    truth.tries
                ),
            );
        }
        return;
    }
    if sections > 1 {
        f.fail("summary", format!("{sections} sections for one run"));
        return;
    }
    // retry's own failure after a try (its output could not be written) is announced too.
    let own_failure = outcome == Some("error");
    if !expected && !unsettled && !own_failure && outcome.is_some() && failed.is_some() {
        f.fail(
            "summary",
            format!(
                "the run {} on its first try, and a job summary: {text:?}",
                outcome.unwrap_or("?")
            ),
        );
        return;
    }
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| try "))
        .collect();
    if let Some(t) = truth.tries {
        if rows.len() as u64 != t && t <= 50 {
            f.fail(
                "summary",
                format!("the job summary has {} rows for {t} tries", rows.len()),
            );
        }
    }
    if let Some((v, true)) = views {
        let failed_rows = rows
            .iter()
            .filter(|r| {
                let verdict = r
                    .trim_end_matches('|')
                    .rsplit('|')
                    .next()
                    .unwrap_or("")
                    .trim();
                verdict.starts_with("transient") || verdict.starts_with("permanent")
            })
            .count();
        let held_rows = rows.iter().filter(|r| r.contains("held back")).count();
        let failed = v.iter().filter(|t| t.failed()).count();
        let held = v.iter().filter(|t| t.held).count();
        if held_rows != held || (failed_rows + held_rows != failed + held) {
            f.fail(
                "summary",
                format!("the job summary has {failed_rows} failed and {held_rows} held rows; {truth_name} has {failed} failed and {held} held tries"),
            );
        }
    }
    let header = text
        .lines()
        .find(|l| l.contains("succeeded on try") || l.contains("gave up "))
        .unwrap_or("");
    let says = if header.contains("--flaky fail") {
        "flaky-fail"
    } else if header.contains("succeeded on try") {
        "success"
    } else if header.contains("interrupted by") {
        "interrupted"
    } else {
        "gave_up"
    };
    if let Some(o) = outcome {
        if o != says && o != "error" {
            f.fail(
                "summary",
                format!("the job summary says {header:?}; {truth_name} says {o}"),
            );
        }
    }
}

/// Every `retry` line and CI marker starts a line of the stream (docs/ci.md#lines-of-their-own).
fn check_lines(case: &Case, stream: &str, f: &mut Findings) {
    let mut markers = vec!["retry: "];
    if case.github {
        markers.extend(["::group::", "::endgroup::", "::error", "::warning"]);
        if case.log == Log::JsonStderr {
            markers.push("{\"event\":");
        }
    }
    for line in stream.lines() {
        // A fold's title is retry's line: `::group::retry: try 2/3`.
        let line = line.strip_prefix("::group::").unwrap_or(line);
        for m in &markers {
            if let Some(at) = line.find(m) {
                if at > 0 {
                    f.fail("lines", format!("{m:?} does not start a line: {line:?}"));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Replays.

/// The runs of a replay's JSON log: each run's events, between its `replay` and `replayed`.
struct ReplayLog {
    runs: Vec<(JsonRun, Value)>,
    end: Option<Value>,
}

fn replay_log(text: &str, f: &mut Findings) -> ReplayLog {
    let events = json_objects(text, f);
    let mut runs = Vec::new();
    let mut current: Option<Vec<Value>> = None;
    let mut end = None;
    for e in events {
        match e["event"].as_str().unwrap_or("") {
            "replay" => current = Some(Vec::new()),
            "replayed" => {
                let events = current.take().unwrap_or_default();
                runs.push((json_run(&events), e));
            }
            "replay_end" => end = Some(e),
            _ => {
                if let Some(events) = current.as_mut() {
                    events.push(e);
                }
            }
        }
    }
    ReplayLog { runs, end }
}

fn check_replays(
    case: &Case,
    replay: &Replay,
    dir: &Path,
    stores: &Stores,
    direct: &Direct,
    f: &mut Findings,
) {
    let gave_up = direct.truth.outcome.as_deref() == Some("gave_up");
    if direct.letters.is_empty() {
        return;
    }
    // What the replays replay: the file, or the store on TLS the run recorded in.
    let source = case.tls.dead_letter.then(|| stores.url());
    // The same tries again: the records must be the direct run's.
    let same = gave_up && case.replays_same_tries();
    if same {
        let _ = std::fs::remove_file(dir.join("n"));
        truncate_hooks(dir);
        let mut args = vec![
            "--replay",
            source.as_deref().unwrap_or("dl"),
            "--log-format",
            "json",
            "--log-file",
            "rlog1",
        ];
        if case.junit {
            args.extend(["--junit", "rjunit1.xml"]);
        }
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let ran = run_retry(
            dir,
            &args,
            &case.env(dir, stores, "go1", "sum1"),
            Stdout::Own,
            None,
            ("rout1", "rerr1"),
        );
        REPLAYS[0].fetch_add(1, Ordering::Relaxed);
        let runs = check_replay(case, dir, &ran, 1, source.as_deref(), stores, f);
        if let Some((run, _)) = runs.first() {
            if let Some(facts) = json_facts(run) {
                let mut want = direct.truth.clone();
                want.flaky = None;
                let diffs = facts.differences(&want);
                if !diffs.is_empty() {
                    f.fail("replay=direct", format!("the replay of the same tries ends with {}; the direct run did otherwise", diffs.join(", ")));
                }
            }
            if let Some(tries) = &direct.tries {
                let a: Vec<&Value> = run.tries.iter().map(|t| &t.outcome).collect();
                let b: Vec<&Value> = tries.iter().map(|t| &t.outcome).collect();
                if a != b {
                    f.fail(
                        "replay=direct",
                        format!(
                            "the replay of the same tries has tries {a:?}; the direct run had {b:?}"
                        ),
                    );
                }
            }
        }
        if let (Some(d), true) = (&direct.junit, case.junit) {
            if let Some(text) = read(dir, "rjunit1.xml") {
                if let Some(c) = junit(&text).cases.first() {
                    if c != d {
                        f.fail(
                            "replay=direct",
                            format!("the replay's JUnit case {c:?}; the direct run's {d:?}"),
                        );
                    }
                }
            }
        }
        // A store on Redis counts the attempt (checked above), and keeps no line of it.
        let last = match source {
            Some(_) => String::new(),
            None => read(dir, "dl").unwrap_or_default(),
        };
        if let Some(line) = last
            .lines()
            .last()
            .and_then(|l| serde_json::from_str::<Value>(l).ok())
        {
            if line["event"] == "attempt" {
                let got = Facts {
                    reason: Some(line["reason"].as_str().map(str::to_string)),
                    status: line["exit_code"].as_i64(),
                    tries: line["tries"].as_u64(),
                    ..Facts::default()
                };
                let mut want = direct.truth.clone();
                want.outcome = None;
                want.flaky = None;
                let diffs = got.differences(&want);
                if !diffs.is_empty() {
                    f.fail("replay=direct", format!("the replay's attempt line {line} says {}; the direct run did otherwise", diffs.join(", ")));
                }
            }
        }
    }
    if replay.pruned {
        match &source {
            Some(store) => prune_store_then_check(dir, store, stores, f),
            None => prune_then_check(dir, f),
        }
        REPLAYS[2].fetch_add(1, Ordering::Relaxed);
    }
    let store = match (source, replay.redis) {
        (Some(store), _) => Some(store),
        (None, true) => to_redis(case, dir, stores),
        (None, false) => None,
    };
    // The dependency is back after `fail_first` more failures.
    std::fs::write(dir.join("ok"), replay.fail_first.to_string()).unwrap();
    truncate_hooks(dir);
    let mut args: Vec<String> = [
        "--replay",
        store.as_deref().unwrap_or("dl"),
        "--log-format",
        "json",
        "--log-file",
        "rlog2",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    if case.junit {
        args.extend(["--junit".to_string(), "rjunit2.xml".to_string()]);
    }
    if let Some(n) = replay.tries {
        args.extend(["-n".to_string(), n.to_string()]);
    }
    let mut env = case.env(dir, stores, "go2", "sum2");
    if !case.tls.any() {
        env.push((
            "XDG_STATE_HOME".into(),
            dir.join("state").display().to_string(),
        ));
    }
    let ran = run_retry(dir, &args, &env, Stdout::Own, None, ("rout2", "rerr2"));
    REPLAYS[1].fetch_add(1, Ordering::Relaxed);
    check_replay(case, dir, &ran, 2, store.as_deref(), stores, f);
}

/// The runs of the agreement test under way, and their one `redis-server` once a case asked
/// for it (`Some(None)`: there is none). The last run to end stops it: a server kept in a
/// static would outlive the test, holding what the test held open.
static REDIS: Mutex<(usize, Option<Option<super::redis_server::Server>>)> = Mutex::new((0, None));

/// The agreement test's `redis-server`, started at its first use: `None`, said loudly once
/// (a failure under RETRY_REQUIRE_REDIS=1), where there is none.
fn agree_redis() -> Option<u16> {
    let mut redis = REDIS.lock().unwrap_or_else(|e| e.into_inner());
    redis
        .1
        .get_or_insert_with(|| super::redis_server::Server::start("agree", &[]))
        .as_ref()
        .map(|s| s.port)
}

/// The agreement test's `redis-server` with TLS, once a case asked for it (`Some(None)`: there
/// is none), stopped with the plain one by the last run to end.
#[allow(clippy::type_complexity)]
static TLS_REDIS: Mutex<Option<Option<(super::tls::TlsServer, String)>>> = Mutex::new(None);

/// The port of the agreement test's `redis-server` with TLS, started at its first use, and the
/// CA bundle its certificate (for `localhost`) chains to. `None`, said loudly once, where there
/// is no `openssl` or no `redis-server` built with TLS: the cases run their stores where they
/// are without it. Under CI (`CI` set, as every CI service sets it) or RETRY_REQUIRE_REDIS=1, a
/// failure instead.
fn agree_tls() -> Option<(u16, String)> {
    use super::tls::{Pki, ServerCert, TlsServer};
    let mut tls = TLS_REDIS.lock().unwrap_or_else(|e| e.into_inner());
    if tls.is_none() {
        // Each says why it cannot, once: the server is not tried without certificates.
        let ca = Pki::get("agree").map(|pki| pki.ca().display().to_string());
        let server =
            ca.and_then(|ca| Some((TlsServer::start("agree", ServerCert::Good, false)?, ca)));
        let missing = server.is_none();
        *tls = Some(server);
        if missing && std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
            panic!("the agreement test's stores on TLS have no redis-server with TLS (CI is set)");
        }
    }
    tls.as_ref()
        .and_then(Option::as_ref)
        .map(|(s, ca)| (s.port, ca.clone()))
}

/// A run of the agreement test begins (`true`) or ends; the last to end stops the servers.
fn redis_users(begins: bool) {
    let mut redis = REDIS.lock().unwrap_or_else(|e| e.into_inner());
    if begins {
        redis.0 += 1;
        return;
    }
    redis.0 -= 1;
    if redis.0 == 0 {
        redis.1 = None;
        *TLS_REDIS.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Moves the case's dead letter to a store of its own on Redis (the server with TLS, for
/// [`Tls::replay`]), as a run that gave up while Redis could not be reached leaves it: in the
/// local file the next replay moves from. The store's URL, or `None` without a server.
fn to_redis(case: &Case, dir: &Path, stores: &Stores) -> Option<String> {
    let (host, port, url) = match case.tls.replay {
        true => ("localhost", stores.port.clone(), stores.url()),
        false => {
            let port = agree_redis()?;
            let url = format!("redis://127.0.0.1:{port}/{}", stores.name);
            ("127.0.0.1", port.to_string(), url)
        }
    };
    REPLAYS[3].fetch_add(1, Ordering::Relaxed);
    let name = &stores.name;
    let unsent = dir.join("state/retry/unsent");
    std::fs::create_dir_all(&unsent).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for d in [dir.join("state"), dir.join("state/retry"), unsent.clone()] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let file = unsent.join(format!("{host}_{port}_{name}.jsonl"));
    std::fs::copy(dir.join("dl"), &file).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    Some(url)
}

/// Every run of the fleet's store `store` as its JSON listing shows it (`--dry-run --all`),
/// or `None` when the listing fails.
fn listing(dir: &Path, store: &str, stores: &Stores) -> Option<Vec<Value>> {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("retry"));
    cmd.args([
        "--replay",
        store,
        "--dry-run",
        "--all",
        "--log-format",
        "json",
    ])
    .env("XDG_STATE_HOME", dir.join("state"))
    .current_dir(dir);
    if store.starts_with("rediss:") {
        cmd.env("RETRY_REDIS_CA", &stores.ca);
    }
    let out = cmd.output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines().map(|l| serde_json::from_str(l).ok()).collect()
}

/// The one run of the fleet's store `store` as its listing shows it.
fn listed_on_redis(dir: &Path, store: &str, stores: &Stores) -> Option<Value> {
    let mut runs = listing(dir, store, stores)?;
    match runs.len() {
        1 => runs.pop(),
        _ => None,
    }
}

/// Prunes the dead letter as an operator would between two replays: the one run, pending, must
/// stay, with every line about it as it was, and the prune must say so.
fn prune_then_check(dir: &Path, f: &mut Findings) {
    let before = read(dir, "dl").unwrap_or_default();
    let out = super::retry()
        .args(["--prune", "dl", "--older-than", "3650d"])
        .current_dir(dir)
        .output()
        .expect("run retry --prune");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.code() != Some(0) || !said.contains("kept 1 pending") {
        f.fail(
            "replay",
            format!(
                "the prune between the replays ended {:?} saying {said:?} {:?}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            ),
        );
    }
    let after = read(dir, "dl").unwrap_or_default();
    let kept: Vec<&str> = before
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.contains("\"event\":\"resolved\""))
        .collect();
    if after.lines().collect::<Vec<_>>() != kept {
        f.fail(
            "replay",
            format!("the prune between the replays left {after:?} of {before:?}"),
        );
    }
}

/// [`prune_then_check`], of the store on Redis the run recorded in: the one run stays pending,
/// and the prune says so.
fn prune_store_then_check(dir: &Path, store: &str, stores: &Stores, f: &mut Findings) {
    let out = super::retry()
        .args(["--prune", store, "--older-than", "3650d"])
        .env("RETRY_REDIS_CA", &stores.ca)
        .env("XDG_STATE_HOME", dir.join("state"))
        .current_dir(dir)
        .output()
        .expect("run retry --prune");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.code() != Some(0) || !said.contains("kept 1 pending") {
        f.fail(
            "replay",
            format!(
                "the prune of the store between the replays ended {:?} saying {said:?} {:?}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            ),
        );
    }
    let state = listed_on_redis(dir, store, stores);
    if state.as_ref().is_none_or(|s| s["state"] != "pending") {
        f.fail(
            "replay",
            format!(
                "the prune of the store between the replays left {state:?}, not the one run pending"
            ),
        );
    }
}

fn truncate_hooks(dir: &Path) {
    for name in ["hr", "hg"] {
        let _ = std::fs::remove_file(dir.join(name));
    }
}

/// The checks of replay `k`'s records: its status, its runs' ends and `replayed` results, the
/// dead letter's new lines, its step outputs and JUnit report, the count of runs and hooks.
fn check_replay(
    case: &Case,
    dir: &Path,
    ran: &Ran,
    k: u64,
    store: Option<&str>,
    stores: &Stores,
    f: &mut Findings,
) -> Vec<(JsonRun, Value)> {
    let tag = format!("replay {k}: ");
    if ran.status == Status::Hung {
        f.fail("replay", format!("{tag}ran past 15 s"));
        return Vec::new();
    }
    let code = ran.status.shell();
    if code == 125 {
        f.fail(
            "replay",
            format!(
                "{tag}status 125: {:?}",
                ran.stderr.lines().last().unwrap_or("")
            ),
        );
        return Vec::new();
    }
    let log = replay_log(&read(dir, &format!("rlog{k}")).unwrap_or_default(), f);
    if log.runs.len() != 1 {
        f.fail(
            "replay",
            format!(
                "{tag}{} runs in the replay's log, one pending",
                log.runs.len()
            ),
        );
        return log.runs;
    }
    let (run, replayed) = &log.runs[0];
    let Some(facts) = json_facts(run) else {
        f.fail(
            "replay",
            format!("{tag}the replayed run's log has no end event"),
        );
        return log.runs;
    };
    let result = replayed["result"].as_str().unwrap_or("");
    let resolved = facts.outcome.as_deref() == Some("success");
    if (result == "resolved") != resolved {
        f.fail(
            "replay",
            format!(
                "{tag}the run ended {:?} with exit_code {:?}, and the replay says {result}",
                facts.outcome, facts.status
            ),
        );
    }
    let want_status = if resolved { 0 } else { 1 };
    if code != want_status {
        f.fail(
            "replay",
            format!("{tag}exit status {code}; the run was {result}"),
        );
    }
    if let Some(end) = &log.end {
        let (r, p) = (end["resolved"].as_u64(), end["pending"].as_u64());
        if (r, p) != (Some(u64::from(resolved)), Some(u64::from(!resolved))) {
            f.fail(
                "replay",
                format!("{tag}replay_end resolved {r:?} pending {p:?}; the run was {result}"),
            );
        }
    }
    let failed = run.tries.iter().filter(|t| t.failed()).count();
    let ran_tries = run.tries.iter().filter(|t| !t.held).count() as u64;
    let count = read(dir, "n").map_or(0, |t| t.lines().count() as u64);
    // The first replay starts the count again; the second goes on from it.
    if k == 1 && count != ran_tries {
        f.fail("replay", format!("{tag}the command ran {count} times; the replayed run's log has {ran_tries} tries that ran"));
    }
    check_json_run(case, run, dir, "hr", "hg", &tag, f);
    // Of a store on Redis: the run's state there.
    if let Some(store) = store {
        let state = listed_on_redis(dir, store, stores);
        let got = state
            .as_ref()
            .and_then(|s| Some((s["state"].as_str()?, s["attempts"].as_u64()?)));
        let fine = match got {
            Some(("resolved", _)) => resolved,
            Some(("pending", attempts)) => !resolved && attempts >= 1,
            _ => false,
        };
        if !fine {
            f.fail(
                "replay",
                format!("{tag}the run was {result}, and the store on Redis lists it as {state:?}"),
            );
        }
    }
    // The dead letter's new line.
    let text = read(dir, "dl").unwrap_or_default();
    let line = text
        .lines()
        .last()
        .and_then(|l| serde_json::from_str::<Value>(l).ok());
    match line {
        // The replay recorded what became of the run on Redis, not in the file.
        _ if store.is_some() => {}
        Some(line) if resolved => {
            if line["event"] != "resolved" || line["tries"].as_u64() != facts.tries {
                f.fail("replay", format!("{tag}the run resolved after {:?} tries, and the file's last line is {line}", facts.tries));
            }
        }
        Some(line) => {
            let reason = match facts.outcome.as_deref() {
                Some("flaky-fail") => Some("flaky".to_string()),
                _ => facts.reason.clone().flatten(),
            };
            if line["event"] != "attempt"
                || line["exit_code"].as_i64() != facts.status
                || line["tries"].as_u64() != facts.tries
                || line["reason"].as_str().map(str::to_string) != reason
            {
                f.fail(
                    "replay",
                    format!("{tag}the run stayed pending (exit_code {:?}, reason {reason:?}, {:?} tries), and the file's last line is {line}", facts.status, facts.tries),
                );
            }
        }
        None => f.fail("replay", format!("{tag}the dead-letter file has no line")),
    }
    // The replay's step outputs: one set for the replay.
    if case.github {
        let o = step_outputs(&read(dir, &format!("go{k}")).unwrap_or_default());
        let get = |k: &str| o.get(k).map(String::as_str).unwrap_or("<missing>");
        let flaky =
            failed > 0 && matches!(facts.outcome.as_deref(), Some("success" | "flaky-fail"));
        let want = [
            ("exit_code", code.to_string()),
            (
                "outcome",
                if resolved { "success" } else { "gave_up" }.to_string(),
            ),
            ("reason", if resolved { "" } else { "pending" }.to_string()),
            ("tries", facts.tries.map_or("?".into(), |t| t.to_string())),
            ("flaky", flaky.to_string()),
        ];
        for (name, value) in want {
            if get(name) != value {
                f.fail(
                    "replay",
                    format!("{tag}step output {name}={}, want {value} (the run: {:?} after {:?} tries, {failed} failed)", get(name), facts.outcome, facts.tries),
                );
            }
        }
    }
    if case.junit {
        match read(dir, &format!("rjunit{k}.xml")) {
            None => f.fail(
                "replay",
                format!("{tag}--junit rjunit{k}.xml was not written"),
            ),
            Some(text) => {
                let report = junit(&text);
                let views = (run.tries.clone(), true);
                let mut invariant_findings = Findings::default();
                check_junit(
                    case,
                    &report,
                    &facts,
                    "the replayed run's log",
                    Some(&views),
                    false,
                    &mut invariant_findings,
                    "replay",
                );
                for x in invariant_findings.0 {
                    f.fail("replay", format!("{tag}{}", x.detail));
                }
            }
        }
    }
    log.runs
}

// ---------------------------------------------------------------------------------------------
// Many cases, shrinking, and the report.

/// What to run.
#[derive(Clone, Debug)]
pub struct Plan {
    pub seed: u64,
    pub cases: u64,
    pub threads: usize,
    /// Only this case.
    pub only: Option<u64>,
    /// How long shrinking the failures may take in all; `None`: what is left of 4 s once the
    /// cases have run, so that `cargo test` stays quick while it fails.
    pub shrink: Option<Duration>,
}

impl Plan {
    /// The plan of `cases` cases of `seed`, unless the environment says otherwise:
    /// `RETRY_AGREE_SEED`, `RETRY_AGREE_CASES`, `RETRY_AGREE_ONLY`, `RETRY_AGREE_THREADS`,
    /// `RETRY_AGREE_SHRINK_SECS`.
    pub fn from_env(seed: u64, cases: u64) -> Plan {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let num = |v: String| {
            let v = v.trim().to_string();
            match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => v.parse().ok(),
            }
        };
        Plan {
            seed: var("RETRY_AGREE_SEED").and_then(num).unwrap_or(seed),
            cases: var("RETRY_AGREE_CASES").and_then(num).unwrap_or(cases),
            threads: var("RETRY_AGREE_THREADS")
                .and_then(num)
                .map_or(3, |n| n.max(1) as usize),
            only: var("RETRY_AGREE_ONLY").and_then(num),
            shrink: var("RETRY_AGREE_SHRINK_SECS")
                .and_then(num)
                .map(Duration::from_secs),
        }
    }
}

/// A case that disagreed, and what disagreed.
#[derive(Clone, Debug)]
pub struct Failure {
    pub case: Case,
    pub findings: Vec<Finding>,
}

/// The outcome of a plan.
#[derive(Debug)]
pub struct Report {
    pub plan: Plan,
    pub cases: u64,
    pub failures: Vec<Failure>,
    pub elapsed: Duration,
    /// Per kind of disagreement, a shrunk case that still shows it.
    pub shrunk: Vec<(String, Case, Vec<Finding>)>,
    pub usage_cases: u64,
    pub interrupted_cases: u64,
    pub replay_cases: u64,
    /// The slowest cases: how long each took, and its index.
    pub slowest: Vec<(Duration, u64)>,
    /// The replays that ran: of the same tries, of a fixed command, of the latter those from a
    /// pruned file and from Redis.
    pub replays: (usize, usize, usize, usize),
    /// The checks that ran a store on TLS ([`ON_TLS`]): quotas, dead letters, replays moved
    /// there; and those that drew one and ran without, for want of a server with TLS.
    pub tls: [usize; 4],
}

impl Report {
    /// Cases that broke each invariant.
    pub fn by_invariant(&self) -> BTreeMap<&'static str, u64> {
        let mut out = BTreeMap::new();
        for fail in &self.failures {
            let mut seen: Vec<&str> = fail.findings.iter().map(|f| f.invariant).collect();
            seen.dedup();
            seen.sort();
            seen.dedup();
            for inv in seen {
                *out.entry(invariant_name(inv)).or_insert(0) += 1;
            }
        }
        out
    }

    /// The figures: cases, time, and the disagreements by invariant.
    pub fn figures(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "agree: {} cases of seed {:#x} in {:.2?} on {} threads ({} usage errors, {} signalled, {} with replays: {} of the same tries, {} of a fixed command, {} of them from a pruned file and {} from Redis): {} disagree",
            self.cases,
            self.plan.seed,
            self.elapsed,
            self.plan.threads,
            self.usage_cases,
            self.interrupted_cases,
            self.replay_cases,
            self.replays.0,
            self.replays.1,
            self.replays.2,
            self.replays.3,
            self.failures.len()
        );
        let slowest: Vec<String> = self
            .slowest
            .iter()
            .map(|(took, k)| format!("case {k} {took:.0?}"))
            .collect();
        let [quotas, letters, moved, without] = self.tls;
        let _ = write!(
            s,
            "  on TLS: {quotas} quotas, {letters} dead letters, {moved} replays moved there"
        );
        let _ = match without {
            0 => writeln!(s),
            n => writeln!(
                s,
                "; {n} cases ran without, for want of a redis-server with TLS"
            ),
        };
        let [free, away, waited, redis, local, lost] =
            LOCKS.each_ref().map(|n| n.load(Ordering::Relaxed));
        let _ = write!(
            s,
            "  --lock: {free} found it free, {away} were turned away, {waited} waited for it; {redis} on Redis, {lost} of them lost it"
        );
        let _ = match local {
            0 => writeln!(s),
            n => writeln!(s, "; {n} on a file, for want of a redis-server"),
        };
        let [pinged, silent] = PINGS.each_ref().map(|n| n.load(Ordering::Relaxed));
        let _ = writeln!(
            s,
            "  --ping: {pinged} ran a try and pinged, {silent} ran none and pinged nothing"
        );
        let [free, away, done] = ONCES.each_ref().map(|n| n.load(Ordering::Relaxed));
        let _ = writeln!(
            s,
            "  --once: {free} found the key free, {away} were turned away, {done} found it done"
        );
        let _ = writeln!(s, "  slowest: {}", slowest.join(", "));
        if let Some(k) = self.plan.only {
            let _ = writeln!(s, "  case {k}: {}", generate(self.plan.seed, k).shell());
        }
        let by = self.by_invariant();
        for (name, what) in INVARIANTS {
            let _ = writeln!(
                s,
                "  {:<16} {:>6} cases  {what}",
                name,
                by.get(name).copied().unwrap_or(0)
            );
        }
        s
    }

    /// Everything: each failing case, its findings and how to run it again, then the shrunk
    /// reproductions, then the figures.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let bin = assert_cmd::cargo::cargo_bin("retry");
        let _ = writeln!(s, "retry below is {}", bin.display());
        for fail in &self.failures {
            let c = &fail.case;
            let _ = writeln!(
                s,
                "\ncase {} (RETRY_AGREE_SEED={:#x} RETRY_AGREE_ONLY={}):",
                c.index, c.seed, c.index
            );
            for finding in &fail.findings {
                let _ = writeln!(s, "  [{}] {}", finding.invariant, finding.detail);
            }
            let _ = writeln!(s, "  reproduce: {}", c.shell());
        }
        if !self.shrunk.is_empty() {
            let _ = writeln!(s, "\nshrunk, one per kind of disagreement:");
            for (key, case, findings) in &self.shrunk {
                let _ = writeln!(s, "\n  {key} (from case {}):", case.index);
                for finding in findings.iter().filter(|f| kind(f) == *key) {
                    let _ = writeln!(s, "    {}", finding.detail);
                }
                let _ = writeln!(s, "    {}", case.shell());
            }
        }
        s += "\n";
        s += &self.figures();
        s
    }
}

/// Runs the cases of `plan` on its threads, then shrinks one failure per invariant.
pub fn run(plan: &Plan) -> Report {
    redis_users(true);
    let report = run_cases(plan);
    redis_users(false);
    report
}

fn run_cases(plan: &Plan) -> Report {
    let started = Instant::now();
    let mut indexes: Vec<u64> = match plan.only {
        Some(k) => vec![k],
        None => (0..plan.cases).collect(),
    };
    // The cases with a store on TLS run last, while the server with TLS starts beside the rest
    // (its certificates take a few tenths of a second to make).
    let on_tls = |k: &u64| generate(plan.seed, *k).tls.any();
    indexes.sort_by_key(on_tls);
    let tls_wanted = indexes.last().is_some_and(on_tls);
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let counts = Mutex::new((0u64, 0u64, 0u64));
    let slow = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        if tls_wanted {
            scope.spawn(agree_tls);
        }
        for _ in 0..plan.threads.min(indexes.len()).max(1) {
            scope.spawn(|| {
                loop {
                    let at = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&index) = indexes.get(at) else {
                        break;
                    };
                    let case = generate(plan.seed, index);
                    {
                        let mut c = counts.lock().unwrap();
                        c.0 += u64::from(case.misuse.is_some());
                        c.1 += u64::from(case.interrupt.is_some());
                        c.2 += u64::from(case.replay.is_some());
                    }
                    let began = Instant::now();
                    let findings = check_case(&case);
                    slow.lock().unwrap().push((began.elapsed(), index));
                    if !findings.is_empty() {
                        failures.lock().unwrap().push(Failure { case, findings });
                    }
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap();
    failures.sort_by_key(|f| f.case.index);
    let elapsed = started.elapsed();
    let (usage_cases, interrupted_cases, replay_cases) = counts.into_inner().unwrap();
    let replays = (
        REPLAYS[0].load(Ordering::Relaxed),
        REPLAYS[1].load(Ordering::Relaxed),
        REPLAYS[2].load(Ordering::Relaxed),
        REPLAYS[3].load(Ordering::Relaxed),
    );
    let tls = ON_TLS.each_ref().map(|n| n.load(Ordering::Relaxed));
    let mut slowest = slow.into_inner().unwrap();
    slowest.sort_by(|a, b| b.cmp(a));
    slowest.truncate(5);
    let budget = plan
        .shrink
        .unwrap_or_else(|| Duration::from_secs(4).saturating_sub(elapsed));
    let shrunk = shrink_all(&failures, budget, plan.threads);
    Report {
        plan: plan.clone(),
        cases: indexes.len() as u64,
        failures,
        elapsed,
        shrunk,
        usage_cases,
        interrupted_cases,
        replay_cases,
        slowest,
        replays,
        tls,
    }
}

/// What kind of disagreement a finding is: its invariant and the words of its detail, the
/// numbers and the JSON in it left out, so that two findings of one defect are of one kind.
pub fn kind(f: &Finding) -> String {
    let words: Vec<String> = f
        .detail
        .split(['{', '('])
        .next()
        .unwrap_or("")
        .split_whitespace()
        .take(9)
        .map(|w| {
            if w.chars().any(|c| c.is_ascii_digit()) {
                "N".to_string()
            } else {
                w.to_string()
            }
        })
        .collect();
    format!("[{}] {}", f.invariant, words.join(" "))
}

/// One shrunk case per kind of disagreement, within `budget`, `threads` at once: each starts
/// from the smallest case that shows it.
fn shrink_all(
    failures: &[Failure],
    budget: Duration,
    threads: usize,
) -> Vec<(String, Case, Vec<Finding>)> {
    let until = Instant::now() + budget;
    let mut kinds: Vec<String> = failures
        .iter()
        .flat_map(|f| f.findings.iter().map(kind))
        .collect();
    kinds.sort();
    kinds.dedup();
    if budget.is_zero() {
        return Vec::new();
    }
    let next = AtomicUsize::new(0);
    let out = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads.min(kinds.len()).max(1) {
            scope.spawn(|| {
                loop {
                    let at = next.fetch_add(1, Ordering::Relaxed);
                    let Some(key) = kinds.get(at) else {
                        break;
                    };
                    if Instant::now() > until {
                        break;
                    }
                    let start = failures
                        .iter()
                        .filter(|f| f.findings.iter().any(|x| kind(x) == *key))
                        .min_by_key(|f| {
                            f.case.args().len()
                                + f.case.plan.len() * 3
                                + if f.case.replay.is_some() { 20 } else { 0 }
                        })
                        .expect("a failure of it");
                    let (case, findings) = shrink(&start.case, &start.findings, key, until);
                    out.lock().unwrap().push((key.clone(), case, findings));
                }
            });
        }
    });
    let mut out = out.into_inner().unwrap();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A change that makes a case simpler, if it applies.
type Change = Box<dyn Fn(&mut Case)>;

/// The changes to try on a case of `len` tries, one at a time.
fn changes(len: usize) -> Vec<Change> {
    let mut out: Vec<Change> = vec![
        Box::new(|d| {
            d.interrupt = None;
            for t in &mut d.plan {
                if t.end == End::Mark {
                    t.end = End::Exit;
                }
                t.wmark = false;
            }
        }),
        Box::new(|d| {
            d.replay = None;
            d.tls.replay = false;
        }),
        Box::new(|d| d.tls = Tls::default()),
        Box::new(|d| {
            if let Some(r) = &mut d.replay {
                r.tries = None;
            }
        }),
        Box::new(|d| {
            if let Some(r) = &mut d.replay {
                r.fail_first = 0;
            }
        }),
        Box::new(|d| d.github = false),
        Box::new(|d| d.junit = false),
        Box::new(|d| d.history = false),
        Box::new(|d| d.metrics = false),
        Box::new(|d| d.ping = false),
        Box::new(|d| {
            d.dead_letter = false;
            d.replay = None;
            d.tls.dead_letter = false;
            d.tls.replay = false;
        }),
        Box::new(|d| d.on_retry = false),
        Box::new(|d| d.on_give_up = false),
        Box::new(|d| d.quiet = false),
        Box::new(|d| d.buffer_stdout = false),
        Box::new(|d| d.output_on_failure = false),
        Box::new(|d| d.until_output = false),
        Box::new(|d| d.flaky = None),
        Box::new(|d| d.consecutive = None),
        Box::new(|d| d.success_on = None),
        Box::new(|d| d.stop_on = None),
        Box::new(|d| d.throttle = None),
        Box::new(|d| {
            d.throttle = None;
            d.quota = None;
            d.tls.quota = false;
        }),
        Box::new(|d| d.timeout_ms = None),
        Box::new(|d| d.budget_ms = None),
        Box::new(|d| {
            d.timeout_ms = None;
            d.budget_ms = None;
            for t in &mut d.plan {
                if t.end == End::Hang {
                    t.end = End::Exit;
                    t.code = 1;
                }
            }
        }),
        Box::new(|d| d.stdout = Stdout::Own),
        Box::new(|d| d.log = Log::Human),
        Box::new(|d| d.log = Log::JsonFile),
        Box::new(|d| d.max_delay_ms = None),
        Box::new(|d| {
            if d.repeat.is_none() {
                d.waits = Waits::Delay {
                    ms: 1,
                    jitter: None,
                };
            } else {
                d.waits = Waits::Unset;
            }
        }),
        Box::new(|d| {
            if let Some((n, keep)) = d.repeat {
                if n > 1 {
                    d.repeat = Some((n - 1, keep));
                    d.plan.pop();
                }
            } else if d.tries > 1 {
                d.tries -= 1;
                d.plan.pop();
            }
        }),
        Box::new(|d| {
            if d.plan.len() > 1 && d.interrupt.is_none() {
                d.plan.remove(0);
                match &mut d.repeat {
                    Some((n, _)) => *n -= 1,
                    None if d.tries > 0 => d.tries -= 1,
                    None => {}
                }
            }
        }),
        Box::new(|d| {
            if let Some((n, true)) = d.repeat {
                d.repeat = Some((n, false));
            }
        }),
        Box::new(|d| {
            if d.tries == 0 {
                d.tries = d.plan.len() as u64;
            }
        }),
    ];
    for i in 0..len {
        let at = move |d: &mut Case, change: &dyn Fn(&mut Try)| {
            if let Some(t) = d.plan.get_mut(i) {
                change(t);
            }
        };
        out.push(Box::new(move |d| {
            at(d, &|t| {
                t.out = None;
                t.err = None;
            })
        }));
        out.push(Box::new(move |d| at(d, &|t| t.nap = false)));
        out.push(Box::new(move |d| {
            at(d, &|t| {
                if t.end == End::Kill {
                    t.end = End::Exit;
                }
            })
        }));
        out.push(Box::new(move |d| {
            at(d, &|t| {
                if t.ready != Ready::No {
                    t.ready = Ready::Out;
                }
            })
        }));
        out.push(Box::new(move |d| at(d, &|t| t.out = t.out.map(|_| true))));
        out.push(Box::new(move |d| at(d, &|t| t.err = t.err.map(|_| true))));
    }
    out
}

/// `case` made as simple as it can be while it still shows a disagreement of kind `key`,
/// before `until`.
fn shrink(case: &Case, findings: &[Finding], key: &str, until: Instant) -> (Case, Vec<Finding>) {
    let mut best = case.clone();
    let mut best_findings = findings.to_vec();
    for _ in 0..3 {
        let mut changed = false;
        for change in changes(best.plan.len()) {
            if Instant::now() > until {
                return (best, best_findings);
            }
            let mut candidate = best.clone();
            change(&mut candidate);
            if candidate == best || !candidate.valid() {
                continue;
            }
            let found = check_case_in(&candidate, false);
            if found.iter().any(|f| kind(f) == key) {
                best = candidate;
                best_findings = found;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    (best, best_findings)
}

/// Writes `text` to standard error at once, whatever the test harness captures.
pub fn say(text: &str) {
    let _ = std::io::stderr().write_all(text.as_bytes());
}
