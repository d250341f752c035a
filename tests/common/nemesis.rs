//! The nemesis test of a fleet's failed runs (docs/dead-letters.md#what-is-promised-under-faults):
//! runs give up to a store (a real `redis-server`'s stream, or a file) while replays, forgets and
//! prunes work on it at once, and a nemesis applies at random moments the faults a fleet meets:
//! a replay killed (SIGKILL) or stopped (SIGSTOP) past its lease and continued, the server's
//! connections killed (`CLIENT KILL`), its idle timeout set to one second, the server paused
//! (`CLIENT PAUSE`) or asleep (`DEBUG SLEEP`), restarted (from the snapshot it saved as it shut
//! down) or unreachable for a moment, so that runs keep their records locally. Then the faults
//! end, replays run until nothing is pending, and a checker reads what every try wrote of itself
//! and every store:
//!
//! - no run ran twice at once (each try takes a lock named by its run id, `flock -n`: a try
//!   that finds it held says so);
//! - no run started again after a replay reported it resolved;
//! - every run that gave up is in the store exactly once, or was dropped by a prune after it
//!   was resolved or forgotten; none is pending at the end.
//!
//! A schedule is drawn from a seed: `tests/run/nemesis.rs` runs a few fixed seeds, and
//! `benches/nemesis.rs` hundreds, with the faults each applied.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::redis_server::{Server, cli};

/// A small random source of the test's own: a schedule is the same for the same seed.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.below(to.saturating_sub(from) + 1))
    }
}

/// Where the runs give up to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Store {
    Redis,
    File,
}

/// What one schedule does.
#[derive(Clone, Debug)]
pub struct Plan {
    pub seed: u64,
    pub store: Store,
    /// Runs that give up before the replays start, and while they run.
    pub before: usize,
    pub during: usize,
    /// Replays running at once, each starting again as soon as it ends.
    pub replays: usize,
    /// How long the faults go on.
    pub span: Duration,
    /// The length of a replay's claims.
    pub lease: Duration,
}

impl Plan {
    pub fn new(seed: u64, store: Store) -> Plan {
        Plan {
            seed,
            store,
            before: 8,
            during: 4,
            replays: 3,
            span: Duration::from_millis(2000),
            lease: Duration::from_millis(900),
        }
    }
}

/// The faults one schedule applied, by kind.
pub type Faults = BTreeMap<&'static str, u64>;

/// What a schedule came to: the faults it applied, the runs, and what the checker found.
pub struct Report {
    pub faults: Faults,
    pub runs: usize,
    pub tries: usize,
    pub violations: Vec<String>,
}

/// The command every run runs: it takes the lock of its run id (or says it found it held),
/// counts its tries, fails until `go` exists, then fails its first replay for about half the
/// runs, and takes a tenth of a second or more.
const JOB: &str = r#"d="$1"; id="$RETRY_RUN_ID"
exec 9>>"$d/locks/$id"
if ! flock -n 9; then echo "overlap $id $$ $(date +%s%3N)" >> "$d/hist"; exit 3; fi
n=$(cat "$d/n/$id" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$d/n/$id"
echo "start $id $n $(date +%s%3N)" >> "$d/hist"
[ -e "$d/go" ] || exit 1
sleep 0.$(( (n * 3 + ${#d}) % 3 + 1 ))
case "$id" in *[0-7]) ok=1 ;; *) ok=0 ;; esac
if [ $ok = 1 ] || [ $n -ge 3 ]; then echo "end $id $n 0 $(date +%s%3N)" >> "$d/hist"; exit 0; fi
echo "end $id $n 1 $(date +%s%3N)" >> "$d/hist"; exit 1
"#;

/// One schedule, start to end: `None` when redis-server is missing (said loudly).
pub fn run(plan: &Plan, retry: &Path) -> Option<Report> {
    let dir = crate::common::temp_dir(&format!("nemesis-{:x}", plan.seed));
    for sub in ["locks", "n", "logs", "state", "redis"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::write(dir.join("job.sh"), JOB).unwrap();
    let redis_dir = dir.join("redis");
    let server = match plan.store {
        Store::Redis => Some(Server::start(
            "nemesis",
            &[
                "--dir",
                redis_dir.to_str().unwrap(),
                "--dbfilename",
                "dump.rdb",
            ],
        )?),
        Store::File => None,
    };
    let store = match &server {
        Some(server) => server.url("jobs"),
        None => dir.join("dead.jsonl").to_string_lossy().into_owned(),
    };
    let world = World {
        dir: dir.clone(),
        retry: retry.to_path_buf(),
        store,
        redis: Mutex::new(server),
        redis_dir,
        lease: plan.lease,
        procs: Mutex::new(Vec::new()),
        forgotten: Mutex::new(BTreeSet::new()),
        faults: Mutex::new(Faults::new()),
        stop: AtomicBool::new(false),
    };
    let world = Arc::new(world);
    let mut rng = Rng::new(plan.seed);
    // Runs give up, a few at a time.
    let give_ups: Vec<Child> = (0..plan.before).map(|k| world.give_up(k)).collect();
    for mut child in give_ups {
        let _ = crate::common::wait_bounded(&mut child, crate::common::STEP_LIMIT);
    }
    std::fs::write(dir.join("go"), "").unwrap();
    let mut workers = Vec::new();
    for k in 0..plan.replays {
        let w = world.clone();
        workers.push(std::thread::spawn(move || w.replays(k)));
    }
    {
        let w = world.clone();
        let (during, before) = (plan.during, plan.before);
        let mut r = rng.clone();
        r.next();
        workers.push(std::thread::spawn(move || {
            w.operator(&mut r, before, during)
        }));
    }
    let started = Instant::now();
    while started.elapsed() < plan.span {
        std::thread::sleep(rng.millis(100, 350));
        world.fault(&mut rng);
    }
    world.stop.store(true, Ordering::SeqCst);
    for w in workers {
        let _ = w.join();
    }
    world.heal();
    world.settle_all();
    Some(world.check(plan))
}

/// What the schedule works on, shared by its threads.
struct World {
    dir: PathBuf,
    retry: PathBuf,
    store: String,
    redis: Mutex<Option<Server>>,
    redis_dir: PathBuf,
    lease: Duration,
    /// The replays running now: pid, and whether the nemesis stopped it.
    procs: Mutex<Vec<(u32, bool)>>,
    /// The runs a forget said it forgot.
    forgotten: Mutex<BTreeSet<String>>,
    faults: Mutex<Faults>,
    stop: AtomicBool,
}

impl World {
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.retry);
        cmd.current_dir(&self.dir)
            .env("XDG_STATE_HOME", self.dir.join("state"))
            .env_remove("RETRY_REDIS_PASSWORD")
            .env_remove("RETRY_RUN_ID")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for name in crate::common::CI_VARS {
            cmd.env_remove(name);
        }
        cmd
    }

    fn port(&self) -> Option<u16> {
        self.redis.lock().unwrap().as_ref().map(|s| s.port)
    }

    fn count(&self, fault: &'static str) {
        *self.faults.lock().unwrap().entry(fault).or_default() += 1;
    }

    /// A run that gives up (`-n 1`) into the store.
    fn give_up(&self, k: usize) -> Child {
        let job = self.dir.join("job.sh");
        self.command()
            .args(["--dead-letter", &self.store, "--label", &format!("r{k}")])
            .args(["-n", "1", "--", "sh"])
            .arg(&job)
            .arg(&self.dir)
            .spawn()
            .unwrap()
    }

    /// The store as a replay source: a fleet's claims of the plan's lease.
    fn source(&self) -> String {
        match self.port() {
            Some(_) => format!("{}:lease={}ms", self.store, self.lease.as_millis()),
            None => self.store.clone(),
        }
    }

    /// Replays, one after another, until the faults end; each logs its JSON lines.
    fn replays(&self, worker: usize) {
        let mut k = 0;
        while !self.stop.load(Ordering::SeqCst) {
            k += 1;
            let log = self.dir.join(format!("logs/replay-{worker}-{k}.jsonl"));
            let child = self
                .command()
                .args(["--replay", &self.source(), "-n", "1", "-k", "100ms"])
                .args(["--log-format", "json", "--log-file"])
                .arg(&log)
                .spawn();
            let Ok(mut child) = child else {
                continue;
            };
            let pid = child.id();
            self.procs.lock().unwrap().push((pid, false));
            let until = Instant::now() + Duration::from_secs(20);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            if child.try_wait().ok().flatten().is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
            self.procs.lock().unwrap().retain(|(p, _)| *p != pid);
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    /// Runs that give up meanwhile, forgets of a pending run, and prunes.
    fn operator(&self, rng: &mut Rng, first: usize, during: usize) {
        let mut given = 0;
        while !self.stop.load(Ordering::SeqCst) {
            std::thread::sleep(rng.millis(150, 400));
            match rng.below(3) {
                0 if given < during => {
                    let mut child = self.give_up(first + given);
                    given += 1;
                    let _ = crate::common::wait_bounded(&mut child, crate::common::STEP_LIMIT);
                }
                1 => {
                    let pending = self.listed(false);
                    let Some(id) = pending.iter().map(|(id, _)| id).nth(rng.below(4) as usize)
                    else {
                        continue;
                    };
                    let out = self
                        .command()
                        .args(["--forget", &self.store, id, "--log-format", "json"])
                        .stdout(Stdio::piped())
                        .output();
                    if let Ok(out) = out {
                        for line in String::from_utf8_lossy(&out.stdout).lines() {
                            if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
                                for id in v["ids"].as_array().into_iter().flatten() {
                                    let id = id.as_str().unwrap_or_default().to_string();
                                    self.forgotten.lock().unwrap().insert(id);
                                }
                            }
                        }
                    }
                }
                _ => {
                    let _ = self
                        .command()
                        .args(["--prune", &self.store, "--older-than", "1h"])
                        .status();
                }
            }
        }
    }

    /// The runs of the store (`--all`: settled ones too), each with its state, as listed.
    fn listed(&self, all: bool) -> Vec<(String, String)> {
        let mut cmd = self.command();
        cmd.args(["--replay", &self.store, "--dry-run", "--log-format", "json"]);
        if all {
            cmd.arg("--all");
        }
        let Ok(out) = cmd.stdout(Stdio::piped()).output() else {
            return Vec::new();
        };
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["event"] == "pending")
            .map(|v| {
                let state = v["state"].as_str().unwrap_or("pending").to_string();
                (v["id"].as_str().unwrap_or_default().to_string(), state)
            })
            .collect()
    }

    /// One fault, drawn from those the store can meet.
    fn fault(&self, rng: &mut Rng) {
        let redis = self.port();
        let kinds: &[&str] = match redis {
            Some(_) => &[
                "kill replay",
                "stop replay past its lease",
                "client kill",
                "idle timeout",
                "client pause",
                "debug sleep",
                "restart",
                "unreachable",
            ],
            None => &["kill replay", "stop replay past its lease", "kill prune"],
        };
        let kind = kinds[rng.below(kinds.len() as u64) as usize];
        let victim = || {
            let procs = self.procs.lock().unwrap();
            let live: Vec<u32> = procs.iter().filter(|p| !p.1).map(|p| p.0).collect();
            (!live.is_empty()).then(|| live[rng.clone().below(live.len() as u64) as usize])
        };
        match (kind, redis) {
            ("kill replay", _) => {
                if let Some(pid) = victim() {
                    crate::common::send(pid, nix::libc::SIGKILL);
                    self.count(kind);
                }
            }
            ("stop replay past its lease", _) => {
                if let Some(pid) = victim() {
                    crate::common::send(pid, nix::libc::SIGSTOP);
                    self.count(kind);
                    let pause = self.lease + rng.millis(100, 600);
                    std::thread::sleep(pause);
                    crate::common::send(pid, nix::libc::SIGCONT);
                }
            }
            ("kill prune", _) => {
                let child = self
                    .command()
                    .args(["--prune", &self.store, "--older-than", "1h"])
                    .spawn();
                if let Ok(mut child) = child {
                    std::thread::sleep(rng.millis(0, 20));
                    let _ = child.kill();
                    let _ = child.wait();
                    self.count(kind);
                }
            }
            ("client kill", Some(port)) => {
                let _ = redis_cli(port, &["CLIENT", "KILL", "TYPE", "normal"]);
                self.count(kind);
            }
            ("idle timeout", Some(port)) => {
                let _ = redis_cli(port, &["CONFIG", "SET", "timeout", "1"]);
                self.count(kind);
            }
            ("client pause", Some(port)) => {
                let ms = rng.millis(100, 600).as_millis().to_string();
                let _ = redis_cli(port, &["CLIENT", "PAUSE", &ms]);
                self.count(kind);
            }
            ("debug sleep", Some(port)) => {
                let _ = redis_cli(port, &["DEBUG", "SLEEP", "0.3"]);
                self.count(kind);
            }
            ("restart", Some(port)) => {
                self.restart(port, Duration::ZERO);
                self.count(kind);
            }
            ("unreachable", Some(port)) => {
                self.restart(port, rng.millis(200, 800));
                self.count(kind);
            }
            _ => {}
        }
    }

    /// Shuts the server down (it saves its snapshot as it goes), and starts it again from that
    /// snapshot after `away`.
    fn restart(&self, port: u16, away: Duration) {
        let mut redis = self.redis.lock().unwrap();
        let _ = redis_cli(port, &["SHUTDOWN", "SAVE"]);
        if let Some(mut old) = redis.take() {
            let _ = crate::common::wait_bounded(&mut old.child, Duration::from_secs(5));
        }
        std::thread::sleep(away);
        let dir = self.redis_dir.to_str().unwrap().to_string();
        *redis = Server::start_on_with(
            "nemesis",
            port,
            &["--dir", &dir, "--dbfilename", "dump.rdb"],
        );
    }

    /// The faults end: every stopped replay continued, the server up and its settings back.
    fn heal(&self) {
        for (pid, _) in self.procs.lock().unwrap().iter() {
            crate::common::send(*pid, nix::libc::SIGCONT);
        }
        if let Some(port) = self.port() {
            let _ = redis_cli(port, &["CONFIG", "SET", "timeout", "0"]);
            let _ = redis_cli(port, &["CLIENT", "UNPAUSE"]);
        }
    }

    /// Replays until nothing is pending (every run succeeds by its third try).
    fn settle_all(&self) {
        for round in 0..6 {
            // Leases of killed replays lapse first; a file's hold ends with its replay.
            if self.port().is_some() || round > 0 {
                std::thread::sleep(self.lease + Duration::from_millis(100));
            }
            let log = self.dir.join("logs/final.jsonl");
            let _ = self
                .command()
                .args(["--replay", &self.source(), "-n", "3", "-d", "10ms"])
                .args(["--log-format", "json", "--log-file"])
                .arg(&log)
                .status();
            if self.listed(false).is_empty() {
                break;
            }
        }
    }

    /// What the tries wrote of themselves, the replays' logs and the store, checked.
    fn check(&self, plan: &Plan) -> Report {
        let mut violations = Vec::new();
        let hist = std::fs::read_to_string(self.dir.join("hist")).unwrap_or_default();
        let mut started: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        let mut succeeded: BTreeSet<String> = BTreeSet::new();
        let mut tries = 0;
        for line in hist.lines() {
            let w: Vec<&str> = line.split(' ').collect();
            match w.as_slice() {
                ["overlap", id, pid, at] => violations.push(format!(
                    "run {id} ran twice at once: try {pid} found its lock held at {at}"
                )),
                ["start", id, _, at] => {
                    tries += 1;
                    started
                        .entry(id.to_string())
                        .or_default()
                        .push(at.parse().unwrap_or(0));
                }
                ["end", id, _, "0", _] => {
                    succeeded.insert(id.to_string());
                }
                _ => {}
            }
        }
        // When each run was reported resolved, by the replays whose logs say so.
        let mut resolved_at: BTreeMap<String, u64> = BTreeMap::new();
        for entry in std::fs::read_dir(self.dir.join("logs"))
            .into_iter()
            .flatten()
        {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
            for line in text.lines() {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                if v["event"] == "replayed" && v["result"] == "resolved" {
                    let at = v["ts"]
                        .as_str()
                        .and_then(|ts| humantime::parse_rfc3339(ts).ok())
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .map_or(0, |d| d.as_millis() as u64);
                    let id = v["id"].as_str().unwrap_or_default().to_string();
                    let first = resolved_at.entry(id).or_insert(at);
                    *first = (*first).min(at);
                }
            }
        }
        for (id, at) in &resolved_at {
            for start in started.get(id).into_iter().flatten() {
                if start > at {
                    violations.push(format!(
                        "run {id} started again at {start}, after a replay resolved it at {at}"
                    ));
                }
            }
        }
        // Every run that gave up is in the store once, settled; or dropped by a prune after
        // it was resolved or forgotten.
        let stored = self.listed(true);
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (id, _) in &stored {
            *seen.entry(id.as_str()).or_default() += 1;
        }
        let forgotten = self.forgotten.lock().unwrap();
        for id in started.keys() {
            match seen.get(id.as_str()) {
                Some(1) => {}
                Some(n) => violations.push(format!("run {id} is in the store {n} times")),
                None if succeeded.contains(id) || forgotten.contains(id) => {}
                None => violations.push(format!(
                    "run {id} gave up and is not in the store, though it was never resolved nor forgotten"
                )),
            }
        }
        for (id, state) in &stored {
            if !started.contains_key(id) {
                violations.push(format!("run {id} is in the store but never ran"));
            }
            if state == "pending" {
                violations.push(format!("run {id} is still pending after the last replays"));
            }
            if state == "resolved" && !succeeded.contains(id) {
                violations.push(format!("run {id} is resolved but no try of it succeeded"));
            }
        }
        let _ = plan;
        Report {
            faults: self.faults.lock().unwrap().clone(),
            runs: started.len(),
            tries,
            violations,
        }
    }
}

/// `redis-cli` on 127.0.0.1:`port`, bounded: what it printed, or `None`.
fn redis_cli(port: u16, args: &[&str]) -> Option<String> {
    let mut child = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let status = crate::common::wait_bounded(&mut child, Duration::from_secs(5));
    let _ = cli;
    status.success().then(String::new)
}
