//! The nemesis test of `--lock redis://…/NAME` (docs/processes.md#a-lock-for-the-fleet): runs of
//! `retry --lock …:lease=300ms --lock-wait …` start at random moments of a schedule, each try
//! writing to a "resource" that checks fencing tokens as docs/processes.md says a resource
//! should (it keeps the highest token it accepted and refuses a lower one), while a nemesis
//! applies the faults a lease meets: the server's connections killed (`CLIENT KILL`), an idle
//! timeout of one second, the server paused (`CLIENT PAUSE`) or asleep (`DEBUG SLEEP`) up to
//! twice the lease, restarted from its snapshot or empty (the lease and its fencing counter
//! lost), unreachable for a moment, a holder stopped (SIGSTOP) past its lease and continued, a
//! holder killed (SIGKILL). A checker then reads what the tries, the resource and the runs' JSON
//! logs wrote, and the runs' exit statuses:
//!
//! - fencing holds: the resource never accepted a token lower than one it had accepted;
//! - two tries ran at once only when the earlier one's run lost the lease (`lock_lost`) or was
//!   stopped or killed by the nemesis, and then the later one has the higher token, unless the
//!   server lost its data between their grants;
//! - a holder stopped past its lease while another run took it, whose try still ran a lease
//!   after it was continued, ended `lock_lost`;
//! - every run ended with its command's status, or 75 with `locked`, `lock_lost` or
//!   `lock_unreachable`, as its JSON log says; a run turned away ran no try, one that lost the
//!   lease had one;
//! - tokens increase strictly in the order the tries began, between two losses of the server's
//!   data; after a loss the counter starts from 1 again (docs/decisions.md), so the tokens of
//!   the grants after it are no higher than the runs that could have asked for them.
//!
//! `tests/run/nemesis.rs` runs a fixed seed or two, `benches/nemesis.rs` (`--lock`) hundreds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::nemesis::{Faults, Report, Rng, now_ms, redis_cli};
use crate::common::redis_server::Server;

/// What one schedule of the lock does.
#[derive(Clone, Debug)]
pub struct LockPlan {
    pub seed: u64,
    /// How many runs start, spread over `span`.
    pub runs: usize,
    /// How long runs start and the faults go on.
    pub span: Duration,
    /// The lease's length.
    pub lease: Duration,
}

impl LockPlan {
    pub fn new(seed: u64) -> LockPlan {
        LockPlan {
            seed,
            runs: 18,
            span: Duration::from_millis(2400),
            lease: Duration::from_millis(300),
        }
    }
}

/// The try of run K (its directory and K as arguments): it writes twice to the resource, each
/// time under the resource's own lock, reading the highest token the resource accepted and
/// refusing a lower one (the resource's state is its log, one line appended by each write,
/// so that a try killed midway leaves it whole); between the two it takes from a tenth of a second to more than the
/// lease. It notes when
/// it began and finished, and exits 3 for every fourth run, 0 for the others.
const TRY: &str = r#"d="$1"; k="$2"; t="$RETRY_FENCING_TOKEN"
echo "begin $k $t $(date +%s%3N)" >> "$d/tries"
write() {
  exec 8>>"$d/resource.lock"; flock 8
  hi=$(awk '$1 == "accepted" && $3 > m { m = $3 } END { print m + 0 }' "$d/resource" 2>/dev/null)
  if [ "$t" -lt "${hi:-0}" ]; then echo "refused $k $t $1 $hi" >> "$d/resource"
  else echo "accepted $k $t $1 $hi" >> "$d/resource"; fi
  exec 8>&-
}
write start
sleep 0.$((k % 4 + 1))
write end
echo "finish $k $t $(date +%s%3N)" >> "$d/tries"
exit $((k % 4 == 3 ? 3 : 0))
"#;

/// The status run K's command exits with.
fn command_status(k: usize) -> i32 {
    if k % 4 == 3 { 3 } else { 0 }
}

/// One schedule, start to end: `None` when redis-server is missing (said loudly).
pub fn run_lock(plan: &LockPlan, retry: &Path) -> Option<Report> {
    let dir = crate::common::temp_dir(&format!("nemesis-lock-{:x}", plan.seed));
    for sub in ["logs", "redis"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::write(dir.join("try.sh"), TRY).unwrap();
    let redis_dir = dir.join("redis");
    let server = Server::start(
        "nemesis-lock",
        &[
            "--dir",
            redis_dir.to_str().unwrap(),
            "--dbfilename",
            "dump.rdb",
        ],
    )?;
    let url = format!("{}:lease={}ms", server.url("L"), plan.lease.as_millis());
    let world = Arc::new(World {
        dir: dir.clone(),
        retry: retry.to_path_buf(),
        url,
        redis: Mutex::new(Some(server)),
        redis_dir,
        lease: plan.lease,
        runs: Mutex::new(BTreeMap::new()),
        faults: Mutex::new(Faults::new()),
        stopped: Mutex::new(BTreeMap::new()),
        killed: Mutex::new(BTreeSet::new()),
        losses: Mutex::new(Vec::new()),
        launched: AtomicBool::new(false),
    });
    let mut rng = Rng::new(plan.seed);
    let launcher = {
        let (w, mut r, plan) = (world.clone(), rng.clone(), plan.clone());
        r.next();
        std::thread::spawn(move || w.launch(&mut r, &plan))
    };
    let reaper = {
        let w = world.clone();
        std::thread::spawn(move || w.reap())
    };
    let started = Instant::now();
    while started.elapsed() < plan.span {
        std::thread::sleep(rng.millis(100, 300));
        world.fault(&mut rng);
    }
    let _ = launcher.join();
    world.heal();
    let _ = reaper.join();
    Some(world.check())
}

/// One run of the schedule: its process, and how it ended.
struct Run {
    pid: u32,
    child: Option<Child>,
    /// Its exit status (`None`: killed by a signal), and when it was seen to end.
    ended: Option<(Option<i32>, u64)>,
}

/// What the schedule works on, shared by its threads.
struct World {
    dir: PathBuf,
    retry: PathBuf,
    url: String,
    redis: Mutex<Option<Server>>,
    redis_dir: PathBuf,
    lease: Duration,
    runs: Mutex<BTreeMap<usize, Run>>,
    faults: Mutex<Faults>,
    /// The runs the nemesis stopped past their lease (when, and when it continued them), and
    /// those it killed.
    stopped: Mutex<BTreeMap<usize, (u64, u64)>>,
    killed: Mutex<BTreeSet<usize>>,
    /// When the server lost its data: from just before it was shut down to when it answered
    /// again, in ms since the epoch.
    losses: Mutex<Vec<(u64, u64)>>,
    /// Every run has been started.
    launched: AtomicBool,
}

impl World {
    fn count(&self, fault: &'static str) {
        *self.faults.lock().unwrap().entry(fault).or_default() += 1;
    }

    fn port(&self) -> Option<u16> {
        self.redis.lock().unwrap().as_ref().map(|s| s.port)
    }

    /// Starts the plan's runs at random moments over its span, each waiting for the lock
    /// not at all, a little, or longer than a try takes.
    fn launch(&self, rng: &mut Rng, plan: &LockPlan) {
        let gap = plan.span.as_millis() as u64 / plan.runs.max(1) as u64;
        for k in 0..plan.runs {
            std::thread::sleep(rng.millis(gap / 2, gap * 3 / 2));
            let wait = ["0", "300ms", "1s"][rng.below(3) as usize];
            let log = self.dir.join(format!("logs/run-{k}.jsonl"));
            let mut cmd = Command::new(&self.retry);
            cmd.current_dir(&self.dir)
                .env_remove("RETRY_REDIS_PASSWORD")
                .env_remove("RETRY_RUN_ID")
                .args(["-n", "1", "--lock", &self.url, "--lock-wait", wait])
                .args(["--log-format", "json", "--log-file"])
                .arg(&log)
                .args(["--", "sh"])
                .arg(self.dir.join("try.sh"))
                .arg(&self.dir)
                .arg(k.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            for name in crate::common::CI_VARS {
                cmd.env_remove(name);
            }
            let child = cmd.spawn().expect("start a run");
            let run = Run {
                pid: child.id(),
                child: Some(child),
                ended: None,
            };
            self.runs.lock().unwrap().insert(k, run);
        }
        self.launched.store(true, Ordering::SeqCst);
    }

    /// Notes when each run ends, and how, until every run started has ended (bounded).
    fn reap(&self) {
        let until = Instant::now() + crate::common::TEST_LIMIT;
        loop {
            let mut live = 0;
            for run in self.runs.lock().unwrap().values_mut() {
                if let Some(child) = run.child.as_mut() {
                    match child.try_wait() {
                        Ok(Some(status)) => {
                            run.ended = Some((status.code(), now_ms()));
                            run.child = None;
                        }
                        _ if Instant::now() > until => {
                            let _ = child.kill();
                            let _ = child.wait();
                            run.child = None;
                        }
                        _ => live += 1,
                    }
                }
            }
            if live == 0 && self.launched.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The runs whose try began and has not finished, whose `retry` still runs: the holders.
    fn holders(&self) -> Vec<(usize, u32)> {
        let tries = std::fs::read_to_string(self.dir.join("tries")).unwrap_or_default();
        let (mut began, mut finished) = (BTreeSet::new(), BTreeSet::new());
        for line in tries.lines() {
            let w: Vec<&str> = line.split(' ').collect();
            match w.as_slice() {
                ["begin", k, ..] => began.insert(k.parse::<usize>().unwrap_or(usize::MAX)),
                ["finish", k, ..] => finished.insert(k.parse::<usize>().unwrap_or(usize::MAX)),
                _ => false,
            };
        }
        let runs = self.runs.lock().unwrap();
        began
            .difference(&finished)
            .filter_map(|k| {
                runs.get(k)
                    .filter(|r| r.child.is_some())
                    .map(|r| (*k, r.pid))
            })
            .collect()
    }

    /// One fault, drawn from those a lease can meet.
    fn fault(&self, rng: &mut Rng) {
        let Some(port) = self.port() else {
            return;
        };
        let kinds = [
            "stop holder past its lease",
            "kill holder",
            "client kill",
            "idle timeout",
            "client pause",
            "debug sleep",
            "restart",
            "restart empty",
            "unreachable",
        ];
        let kind = kinds[rng.below(kinds.len() as u64) as usize];
        let holder = || {
            let holders = self.holders();
            (!holders.is_empty()).then(|| holders[rng.clone().below(holders.len() as u64) as usize])
        };
        match kind {
            "stop holder past its lease" => {
                if let Some((k, pid)) = holder() {
                    let from = now_ms();
                    crate::common::send(pid, nix::libc::SIGSTOP);
                    self.count(kind);
                    std::thread::sleep(self.lease + rng.millis(100, 400));
                    crate::common::send(pid, nix::libc::SIGCONT);
                    self.stopped.lock().unwrap().insert(k, (from, now_ms()));
                }
            }
            "kill holder" => {
                if let Some((k, pid)) = holder() {
                    self.killed.lock().unwrap().insert(k);
                    crate::common::send(pid, nix::libc::SIGKILL);
                    self.count(kind);
                }
            }
            "client kill" => {
                let _ = redis_cli(port, &["CLIENT", "KILL", "TYPE", "normal"]);
                self.count(kind);
            }
            "idle timeout" => {
                let _ = redis_cli(port, &["CONFIG", "SET", "timeout", "1"]);
                self.count(kind);
            }
            "client pause" => {
                let ms = rng.millis(100, 600).as_millis().to_string();
                let _ = redis_cli(port, &["CLIENT", "PAUSE", &ms]);
                self.count(kind);
            }
            "debug sleep" => {
                let s = format!("0.{}", rng.millis(1, 6).as_millis());
                let _ = redis_cli(port, &["DEBUG", "SLEEP", &s]);
                self.count(kind);
            }
            "restart" => {
                self.restart(port, Duration::ZERO, false);
                self.count(kind);
            }
            "restart empty" => {
                self.restart(port, Duration::ZERO, true);
                self.count(kind);
            }
            _ => {
                self.restart(port, rng.millis(100, 500), false);
                self.count(kind);
            }
        }
    }

    /// Shuts the server down (saving its snapshot, unless `empty`: then the lease and its
    /// fencing counter are lost), and starts it again after `away`.
    fn restart(&self, port: u16, away: Duration, empty: bool) {
        let mut redis = self.redis.lock().unwrap();
        let lost_from = now_ms();
        let how = if empty { "NOSAVE" } else { "SAVE" };
        let _ = redis_cli(port, &["SHUTDOWN", how]);
        if let Some(mut old) = redis.take() {
            let _ = crate::common::wait_bounded(&mut old.child, Duration::from_secs(5));
        }
        if empty {
            let _ = std::fs::remove_file(self.redis_dir.join("dump.rdb"));
        }
        std::thread::sleep(away);
        let dir = self.redis_dir.to_str().unwrap().to_string();
        *redis = Server::start_on_with(
            "nemesis-lock",
            port,
            &["--dir", &dir, "--dbfilename", "dump.rdb"],
        );
        if empty {
            self.losses.lock().unwrap().push((lost_from, now_ms()));
        }
    }

    /// The faults end: every stopped run continued, the server's settings back.
    fn heal(&self) {
        for run in self.runs.lock().unwrap().values() {
            if run.child.is_some() {
                crate::common::send(run.pid, nix::libc::SIGCONT);
            }
        }
        if let Some(port) = self.port() {
            let _ = redis_cli(port, &["CONFIG", "SET", "timeout", "0"]);
            let _ = redis_cli(port, &["CLIENT", "UNPAUSE"]);
        }
    }

    /// What the tries, the resource, the runs' logs and statuses say, checked.
    fn check(&self) -> Report {
        let mut violations = Vec::new();
        let runs = self.runs.lock().unwrap();
        let stopped = self.stopped.lock().unwrap().clone();
        let killed = self.killed.lock().unwrap().clone();
        let losses = self.losses.lock().unwrap().clone();
        let faulted = |k: usize| stopped.contains_key(&k) || killed.contains(&k);
        // What the tries wrote: when each began and finished, with its token.
        let text = std::fs::read_to_string(self.dir.join("tries")).unwrap_or_default();
        let mut tries: Vec<Try> = Vec::new();
        let mut finished: BTreeMap<usize, u64> = BTreeMap::new();
        for line in text.lines() {
            let w: Vec<&str> = line.split(' ').collect();
            let (Some(k), Some(token), Some(at)) = (
                w.get(1).and_then(|k| k.parse().ok()),
                w.get(2).and_then(|t| t.parse().ok()),
                w.get(3).and_then(|t| t.parse().ok()),
            ) else {
                violations.push(format!("a try wrote '{line}'"));
                continue;
            };
            match w[0] {
                "begin" => tries.push(Try {
                    k,
                    token,
                    began: at,
                    ended: 0,
                }),
                _ => {
                    finished.insert(k, at);
                }
            }
        }
        for t in tries.iter_mut() {
            // A try that did not finish was stopped with its run: it ended by the run's end.
            t.ended = finished.get(&t.k).copied().unwrap_or_else(|| {
                runs.get(&t.k)
                    .and_then(|r| r.ended)
                    .map_or(u64::MAX, |(_, at)| at)
            });
        }
        // Fencing holds: the resource never accepted a token lower than one it had accepted,
        // and refused only those.
        let resource = std::fs::read_to_string(self.dir.join("resource")).unwrap_or_default();
        let mut highest = 0u64;
        for line in resource.lines() {
            let w: Vec<&str> = line.split(' ').collect();
            let token: u64 = w.get(2).and_then(|t| t.parse().ok()).unwrap_or(0);
            match w[0] {
                "accepted" if token < highest => violations.push(format!(
                    "the resource accepted token {token} (run {}) after token {highest}",
                    w[1]
                )),
                "accepted" => highest = token,
                _ if token >= highest => violations.push(format!(
                    "the resource refused token {token} (run {}), not lower than {highest}",
                    w[1]
                )),
                _ => {}
            }
        }
        // How each run ended, by its status and by its JSON log.
        let mut ending: BTreeMap<usize, String> = BTreeMap::new();
        let began: BTreeSet<usize> = tries.iter().map(|t| t.k).collect();
        for (k, run) in runs.iter() {
            let log = crate::common::json_file(&self.dir.join(format!("logs/run-{k}.jsonl")));
            let last = log
                .iter()
                .rev()
                .find(|e| e["event"] == "success" || e["event"] == "give_up");
            let said = last.map(|e| {
                let reason = e["reason"].as_str().unwrap_or("success").to_string();
                (reason, e["exit_code"].as_i64())
            });
            let Some((status, _)) = run.ended else {
                violations.push(format!("run {k} did not end"));
                continue;
            };
            if killed.contains(k) {
                continue;
            }
            let ran = began.contains(k);
            let expected = command_status(*k);
            let fits = match (status, said.as_ref()) {
                (Some(0), Some((r, Some(0)))) => r == "success" && expected == 0 && ran,
                (Some(3), Some((r, Some(3)))) => r == "tries" && expected == 3 && ran,
                (Some(75), Some((r, Some(75)))) => match r.as_str() {
                    "locked" | "lock_unreachable" => !ran,
                    "lock_lost" => ran,
                    _ => false,
                },
                _ => false,
            };
            if !fits {
                violations.push(format!(
                    "run {k} ended with {status:?}, its log says {said:?}, its try {} (its command exits {expected})",
                    if ran { "ran" } else { "did not run" }
                ));
            }
            if let Some((reason, _)) = said {
                ending.insert(*k, reason);
            }
        }
        // The data the server held was lost between the grants of tries that began at `a` and
        // `b` (ms): one that began before the server was back may have been granted before the
        // loss, its try beginning a moment later.
        let lost_between =
            |a: u64, b: u64| losses.iter().any(|(from, to)| a <= to + 50 && *from < b);
        // Two tries at once only when the earlier one's run lost the lease, or was stopped or
        // killed; and then the later one has the higher token, but across a loss of the data.
        let mut by_start = tries.clone();
        by_start.sort_by_key(|t| t.began);
        for (i, a) in by_start.iter().enumerate() {
            for b in &by_start[i + 1..] {
                if b.began >= a.ended {
                    continue;
                }
                let lost = ending.get(&a.k).is_some_and(|r| r == "lock_lost");
                if !lost && !faulted(a.k) {
                    violations.push(format!(
                        "runs {} (token {}) and {} (token {}) ran at once ({}..{} and {}..), and run {} ended {:?}",
                        a.k, a.token, b.k, b.token, a.began, a.ended, b.began, a.k, ending.get(&a.k)
                    ));
                } else if b.token <= a.token && !lost_between(a.began, b.began) && !faulted(b.k) {
                    violations.push(format!(
                        "run {} (token {}) ran beside run {} that lost the lease, with a token no higher: {}",
                        b.k, b.token, a.k, a.token
                    ));
                }
            }
        }
        // A holder stopped past its lease, which another run took meanwhile, learns it within a
        // renewal once continued: its try may not run on for a lease.
        let lease_ms = self.lease.as_millis() as u64;
        for (k, (from, to)) in &stopped {
            let taken = tries
                .iter()
                .any(|b| b.k != *k && *from < b.began && b.began < *to);
            let ran_on = finished.get(k).is_some_and(|at| *at > to + lease_ms);
            let ended = ending.get(k);
            if taken && ran_on && !killed.contains(k) && ended.is_none_or(|r| r != "lock_lost") {
                violations.push(format!(
                    "run {k} was stopped past its lease ({from}..{to}) and another run took it, its try ran on to {:?}, and it ended {ended:?}",
                    finished.get(k)
                ));
            }
        }
        // Tokens increase in the order the tries began, between two losses of the data (a try
        // that began while the server was down and up again is of neither side); a run stopped
        // by the nemesis may begin its try late. After a loss the counter starts from 1 again.
        let in_loss = |at: u64| {
            losses
                .iter()
                .any(|(from, to)| *from <= at && at <= *to + 50)
        };
        let ordered: Vec<&Try> = by_start
            .iter()
            .filter(|t| !in_loss(t.began) && !stopped.contains_key(&t.k))
            .collect();
        for w in ordered.windows(2) {
            let (a, b) = (w[0], w[1]);
            if b.token <= a.token && !lost_between(a.began, b.began) {
                violations.push(format!(
                    "run {} began with token {} after run {} with token {}, and the server lost nothing between",
                    b.k, b.token, a.k, a.token
                ));
            }
        }
        for (from, to) in &losses {
            // The counter went back: the lowest token after the loss is no higher than the
            // highest before it, unless it is no higher than the grants of the moment the
            // server came back, and of holders killed before their try began, allow.
            let previous = losses.iter().map(|l| l.0).filter(|l| l < from).max();
            let next = losses.iter().map(|l| l.0).filter(|l| l > from).min();
            let before = tries
                .iter()
                .filter(|t| t.began < *from && previous.is_none_or(|p| t.began > p))
                .map(|t| t.token)
                .max();
            let lowest = tries
                .iter()
                .filter(|t| t.began > *from && next.is_none_or(|n| t.began < n))
                .filter(|t| !in_loss(t.began))
                .map(|t| (t.token, t.k))
                .min();
            let window = tries
                .iter()
                .filter(|t| *from <= t.began && t.began <= to + 50)
                .count();
            let allow = (1 + window + killed.len()) as u64;
            if let (Some(before), Some((lowest, k))) = (before, lowest)
                && lowest > before
                && lowest > allow
            {
                violations.push(format!(
                    "run {k} began after the server lost its data with token {lowest}, above the highest before the loss ({before}): the counter did not start again"
                ));
            }
            // Each run takes the lock at most once: the grants after the loss are no more than
            // the runs that had not ended when it came.
            let after = runs
                .values()
                .filter(|r| r.ended.is_none_or(|(_, at)| at > *from))
                .count() as u64;
            for t in tries.iter().filter(|t| {
                t.began > *from && next.is_none_or(|n| t.began < n) && !in_loss(t.began)
            }) {
                if t.token > after {
                    violations.push(format!(
                        "run {} began after the server lost its data with token {}, though {after} runs could have been granted the lock since: the counter did not start again",
                        t.k, t.token
                    ));
                }
            }
        }
        Report {
            faults: self.faults.lock().unwrap().clone(),
            runs: runs.len(),
            tries: tries.len(),
            violations,
        }
    }
}

/// One try as it wrote itself: its run, its token, when it began and ended (ms).
#[derive(Clone, Debug)]
struct Try {
    k: usize,
    token: u64,
    began: u64,
    ended: u64,
}
