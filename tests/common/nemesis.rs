//! The nemesis test of a fleet's failed runs (docs/dead-letters.md#what-is-promised-under-faults):
//! runs give up to a store (a real `redis-server`'s stream, or a file) while replays, forgets and
//! prunes work on it at once, and a nemesis applies at random moments the faults a fleet meets:
//! a replay killed (SIGKILL) or stopped (SIGSTOP) past its lease and continued, the server's
//! connections killed (`CLIENT KILL`), its idle timeout set to one second, the server paused
//! (`CLIENT PAUSE`) or asleep (`DEBUG SLEEP`), restarted (from the snapshot it saved as it shut
//! down, or empty: every write lost) or unreachable for a moment, so that runs keep their
//! records locally; on a file, prunes killed midway and the disk full for a moment (a small
//! tmpfs). Then the faults end, replays run until nothing is pending, and a checker reads what
//! every try wrote of itself and every store:
//!
//! - no run ran twice at once (each try takes a lock named by its run id, `flock -n`: a try
//!   that finds it held says so);
//! - no run started again after a replay reported it resolved;
//! - every run that gave up is in the store exactly once, or was dropped by a prune after it
//!   was resolved or forgotten, or gave up before the server lost its data, or warned that the
//!   full disk kept it from being recorded; none is pending at the end;
//! - no run was reported resolved twice, nor resolved and forgotten both;
//! - the listing (`--replay S --dry-run [--all]`), the store as read directly, the replays' JSON
//!   logs and their own summaries, and `--stats` of the history the replays wrote agree on what
//!   became of every run.
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

/// The command every run runs (its directory and label as arguments): it takes the lock of its
/// run id (or says it found it held), notes its label, fails its first try when told to,
/// counts its tries, fails until `go` exists, then fails its first replay for about half the
/// runs, and takes a tenth of a second or more.
const JOB: &str = r#"d="$1"; id="$RETRY_RUN_ID"
exec 9>>"$d/locks/$id"
if ! flock -n 9; then echo "overlap $id $$ $(date +%s%3N)" >> "$d/hist"; exit 3; fi
n=$(cat "$d/n/$id" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$d/n/$id"
echo "start $id $n $(date +%s%3N)" >> "$d/hist"
[ -e "$d/labels/$id" ] || echo "$2" > "$d/labels/$id"
[ -e "$d/go" ] || exit 1
[ "$3" = fails-first ] && [ $n = 1 ] && exit 1
sleep 0.$(( (n * 3 + ${#d}) % 3 + 1 ))
case "$id" in *[0-7]) ok=1 ;; *) ok=0 ;; esac
if [ $ok = 1 ] || [ $n -ge 3 ]; then echo "end $id $n 0 $(date +%s%3N)" >> "$d/hist"; exit 0; fi
echo "end $id $n 1 $(date +%s%3N)" >> "$d/hist"; exit 1
"#;

/// One schedule, start to end: `None` when redis-server is missing (said loudly).
pub fn run(plan: &Plan, retry: &Path) -> Option<Report> {
    let dir = crate::common::temp_dir(&format!("nemesis-{:x}", plan.seed));
    for sub in [
        "locks", "n", "logs", "state", "redis", "giveup", "fs", "labels",
    ] {
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
    // A file store is on a file system of its own, small enough to fill, when one can be
    // mounted.
    let disk = match plan.store {
        Store::File => Disk::mount(&dir.join("fs")),
        Store::Redis => None,
    };
    let store = match &server {
        Some(server) => server.url("jobs"),
        None => dir.join("fs/dead.jsonl").to_string_lossy().into_owned(),
    };
    let world = World {
        dir: dir.clone(),
        retry: retry.to_path_buf(),
        store,
        redis: Mutex::new(server),
        redis_dir,
        lease: plan.lease,
        before: plan.before,
        procs: Mutex::new(Vec::new()),
        forgotten: Mutex::new(BTreeSet::new()),
        faults: Mutex::new(Faults::new()),
        stop: AtomicBool::new(false),
        lost_at: Mutex::new(None),
        next_run: std::sync::atomic::AtomicUsize::new(0),
        disk,
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
    /// How many runs gave up before the replays started.
    before: usize,
    /// The replays running now: pid, and whether the nemesis stopped it.
    procs: Mutex<Vec<(u32, bool)>>,
    /// The runs a forget said it forgot.
    forgotten: Mutex<BTreeSet<String>>,
    faults: Mutex<Faults>,
    stop: AtomicBool,
    /// When the server last lost its data (restarted empty), in ms since the epoch.
    lost_at: Mutex<Option<u64>>,
    /// The runs that gave up after the first ones, numbered after them.
    next_run: std::sync::atomic::AtomicUsize,
    /// The small file system the file store is on, when one could be mounted.
    disk: Option<Disk>,
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

    /// A run that gives up (`-n 1`) into the store, unless its try succeeds.
    fn give_up(&self, k: usize) -> Child {
        self.give_up_with(k, "")
    }

    /// A run that gives up, `how` passed on to the command (`fails-first`: it does give up).
    fn give_up_with(&self, k: usize, how: &str) -> Child {
        let job = self.dir.join("job.sh");
        let err = std::fs::File::create(self.dir.join(format!("giveup/r{k}.err"))).unwrap();
        self.command()
            .stderr(err)
            .args(["--dead-letter", &self.store, "--label", &format!("r{k}")])
            .args(["-n", "1", "--", "sh"])
            .arg(&job)
            .arg(&self.dir)
            .arg(format!("r{k}"))
            .arg(how)
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
                .arg("--history")
                .arg(self.dir.join("history.jsonl"))
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
                    let k = first + self.next_run.fetch_add(1, Ordering::SeqCst);
                    let mut child = self.give_up(k);
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
        self.listing(all)
            .iter()
            .map(|v| {
                let state = v["state"].as_str().unwrap_or("pending").to_string();
                (v["id"].as_str().unwrap_or_default().to_string(), state)
            })
            .collect()
    }

    /// The `pending` objects of the listing (`--all`: settled runs too).
    fn listing(&self, all: bool) -> Vec<serde_json::Value> {
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
            .collect()
    }

    /// The store as it is, read without `retry`: for each run id, how many records of it it
    /// holds, its state and its failed replays.
    fn stored(&self) -> BTreeMap<String, Stored> {
        let mut runs: BTreeMap<String, Stored> = BTreeMap::new();
        match self.port() {
            Some(port) => {
                let key = "retry:dead:{jobs}";
                let stream = redis_out(port, &["--raw", "XRANGE", key, "-", "+"]);
                let words: Vec<&str> = stream.lines().collect();
                for pair in words.windows(2) {
                    if pair[0] == "id" {
                        runs.entry(pair[1].to_string()).or_default().records += 1;
                    }
                }
                let hash = |name: &str| -> Vec<(String, String)> {
                    let out = redis_out(port, &["--raw", "HGETALL", &format!("{key}:{name}")]);
                    let words: Vec<&str> = out.lines().collect();
                    words
                        .chunks(2)
                        .filter(|c| c.len() == 2)
                        .map(|c| (c[0].to_string(), c[1].to_string()))
                        .collect()
                };
                for (id, state) in hash("state") {
                    runs.entry(id).or_default().state = Some(state);
                }
                for (id, n) in hash("attempts") {
                    runs.entry(id).or_default().attempts = n.parse().unwrap_or(u64::MAX);
                }
            }
            None => {
                let text = std::fs::read_to_string(&self.store).unwrap_or_default();
                for line in text.lines() {
                    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                        continue;
                    };
                    let id = v["id"].as_str().unwrap_or_default().to_string();
                    let run = runs.entry(id).or_default();
                    match v["event"].as_str() {
                        Some("dead_letter") => run.records += 1,
                        Some("attempt") => run.attempts += 1,
                        Some(state @ ("resolved" | "forgotten")) if run.state.is_none() => {
                            run.state = Some(state.to_string());
                        }
                        _ => {}
                    }
                }
            }
        }
        runs
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
                "restart empty",
                "unreachable",
            ],
            None if self.disk.is_some() => &[
                "kill replay",
                "stop replay past its lease",
                "kill prune",
                "full disk",
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
                self.restart(port, Duration::ZERO, false);
                self.count(kind);
            }
            ("restart empty", Some(port)) => {
                self.restart(port, Duration::ZERO, true);
                self.count(kind);
            }
            ("unreachable", Some(port)) => {
                self.restart(port, rng.millis(200, 800), false);
                self.count(kind);
            }
            ("full disk", None) => {
                if let Some(disk) = &self.disk {
                    disk.fill();
                    self.count(kind);
                    // A run gives up meanwhile: it cannot be recorded, and says so.
                    let k = self.before + self.next_run.fetch_add(1, Ordering::SeqCst);
                    let mut child = self.give_up_with(k, "fails-first");
                    std::thread::sleep(rng.millis(200, 600));
                    let _ = crate::common::wait_bounded(&mut child, crate::common::STEP_LIMIT);
                    disk.free();
                }
            }
            _ => {}
        }
    }

    /// Shuts the server down (it saves its snapshot as it goes, unless `empty`: then every
    /// write is lost), and starts it again from that snapshot after `away`.
    fn restart(&self, port: u16, away: Duration, empty: bool) {
        let mut redis = self.redis.lock().unwrap();
        let how = if empty { "NOSAVE" } else { "SAVE" };
        let _ = redis_cli(port, &["SHUTDOWN", how]);
        if let Some(mut old) = redis.take() {
            let _ = crate::common::wait_bounded(&mut old.child, Duration::from_secs(5));
        }
        if empty {
            let _ = std::fs::remove_file(self.redis_dir.join("dump.rdb"));
            *self.lost_at.lock().unwrap() = Some(now_ms());
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
        if let Some(disk) = &self.disk {
            disk.free();
        }
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
                .arg("--history")
                .arg(self.dir.join("history.jsonl"))
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
        // What the replays' logs say: when each run was reported resolved, and by how many.
        let mut resolved_at: BTreeMap<String, u64> = BTreeMap::new();
        let mut resolved_by: BTreeMap<String, usize> = BTreeMap::new();
        let mut replayed_by: BTreeMap<String, usize> = BTreeMap::new();
        for entry in std::fs::read_dir(self.dir.join("logs"))
            .into_iter()
            .flatten()
        {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let (mut resolved, mut pending, mut failed) = (0, 0, false);
            for line in text.lines() {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                let id = v["id"].as_str().unwrap_or_default().to_string();
                match v["event"].as_str() {
                    Some("replayed") if v["result"] == "resolved" => {
                        resolved += 1;
                        let at = v["ts"]
                            .as_str()
                            .and_then(|ts| humantime::parse_rfc3339(ts).ok())
                            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                            .map_or(0, |d| d.as_millis() as u64);
                        let first = resolved_at.entry(id.clone()).or_insert(at);
                        *first = (*first).min(at);
                        *resolved_by.entry(id.clone()).or_default() += 1;
                        *replayed_by.entry(id).or_default() += 1;
                    }
                    Some("replayed") => {
                        pending += 1;
                        if v.get("error").is_none() {
                            *replayed_by.entry(id).or_default() += 1;
                        }
                    }
                    Some("error") => failed = true,
                    // A replay's summary counts what its log says it did (the final log holds
                    // several replays: each summary counts its own).
                    Some("replay_end") => {
                        let said = (v["resolved"].as_u64(), v["pending"].as_u64());
                        if said.0 != Some(resolved)
                            || said
                                .1
                                .is_none_or(|p| p < pending || (!failed && p != pending))
                        {
                            violations.push(format!(
                                "{name}: the summary says {} resolved and {} pending, its runs {resolved} and {pending}",
                                v["resolved"], v["pending"]
                            ));
                        }
                        (resolved, pending, failed) = (0, 0, false);
                    }
                    _ => {}
                }
            }
        }
        for (id, n) in &resolved_by {
            if *n > 1 {
                violations.push(format!("run {id} was reported resolved {n} times"));
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
        // it was resolved or forgotten; or lost with the server's data, having given up before
        // that; or not recorded, and its run said so.
        let all = self.listing(true);
        let stored = self.listed(true);
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (id, _) in &stored {
            *seen.entry(id.as_str()).or_default() += 1;
        }
        let forgotten = self.forgotten.lock().unwrap();
        let lost_at = *self.lost_at.lock().unwrap();
        let labels = self.labels();
        for (id, starts) in &started {
            let lost = lost_at.is_some_and(|lost| starts.first().is_some_and(|s| *s < lost));
            let unrecorded = labels.get(id).is_some_and(|label| {
                std::fs::read_to_string(self.dir.join(format!("giveup/{label}.err")))
                    .is_ok_and(|e| e.contains("cannot record this run in --dead-letter"))
            });
            match seen.get(id.as_str()) {
                Some(1) => {}
                Some(n) => violations.push(format!("run {id} is in the store {n} times")),
                None if succeeded.contains(id) || forgotten.contains(id) => {}
                None if lost || unrecorded => {}
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
        // The listing says what the store holds: the same runs, states and failed replays.
        let store = self.stored();
        let in_store: BTreeMap<&str, (&str, u64)> = store
            .iter()
            .filter(|(_, s)| s.records > 0)
            .map(|(id, s)| {
                let state = s.state.as_deref().unwrap_or("pending");
                (id.as_str(), (state, s.attempts))
            })
            .collect();
        let in_listing: BTreeMap<&str, (&str, u64)> = all
            .iter()
            .map(|v| {
                let state = v["state"].as_str().unwrap_or("pending");
                let attempts = v["attempts"].as_u64().unwrap_or(u64::MAX);
                (v["id"].as_str().unwrap_or_default(), (state, attempts))
            })
            .collect();
        for (id, s) in &store {
            if s.records > 1 {
                violations.push(format!("run {id} has {} records in the store", s.records));
            }
        }
        if in_store != in_listing {
            violations.push(format!(
                "the listing (--all) says {in_listing:?}, the store holds {in_store:?}"
            ));
        }
        let pending_listed: BTreeSet<String> =
            self.listed(false).into_iter().map(|(id, _)| id).collect();
        let pending_stored: BTreeSet<String> = in_store
            .iter()
            .filter(|(_, (state, _))| *state == "pending")
            .map(|(id, _)| id.to_string())
            .collect();
        if pending_listed != pending_stored {
            violations.push(format!(
                "the listing says {pending_listed:?} pending, the store {pending_stored:?}"
            ));
        }
        // The logs and the forgets say what the store holds: a run reported resolved is
        // resolved (or dropped by a prune), one forgotten is forgotten; none is both.
        for id in resolved_by.keys() {
            if let Some((state, _)) = in_store.get(id.as_str()).filter(|(s, _)| *s != "resolved") {
                violations.push(format!(
                    "run {id} was reported resolved, the store says {state}"
                ));
            }
            if forgotten.contains(id) {
                violations.push(format!("run {id} was reported resolved and forgotten"));
            }
        }
        for id in forgotten.iter() {
            if let Some((state, _)) = in_store.get(id.as_str()).filter(|(s, _)| *s != "forgotten") {
                violations.push(format!(
                    "run {id} was reported forgotten, the store says {state}"
                ));
            }
        }
        // `--stats` of the history the replays wrote: each run's row counts every replay of
        // it that its logs show, and a success for each one reported resolved.
        let stats = self.stats();
        for (id, label) in &labels {
            let (runs, succeeded) = stats.get(label).copied().unwrap_or((0, 0));
            let replayed = replayed_by.get(id).copied().unwrap_or(0) as u64;
            let resolved = resolved_by.get(id).copied().unwrap_or(0) as u64;
            let settled = in_store
                .get(id.as_str())
                .is_some_and(|(s, _)| *s == "resolved");
            if runs < replayed || succeeded < resolved || (settled && succeeded == 0) {
                violations.push(format!(
                    "run {id} ({label}): --stats counts {runs} runs, {succeeded} that succeeded; the logs {replayed} replays, {resolved} resolved; the store says {:?}",
                    in_store.get(id.as_str())
                ));
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

    /// Each run's label (`r0`, `r1`...), by its id, as the tries wrote them.
    fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::new();
        for entry in std::fs::read_dir(self.dir.join("labels"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let id = entry.file_name().to_string_lossy().into_owned();
            if let Ok(label) = std::fs::read_to_string(entry.path()) {
                labels.insert(id, label.trim().to_string());
            }
        }
        labels
    }

    /// `--stats` of the replays' history: for each label, its runs and those that succeeded.
    fn stats(&self) -> BTreeMap<String, (u64, u64)> {
        let out = self
            .command()
            .args(["--stats"])
            .arg(self.dir.join("history.jsonl"))
            .args(["--log-format", "json"])
            .stdout(Stdio::piped())
            .output();
        let Ok(out) = out else {
            return BTreeMap::new();
        };
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["event"] == "stats_row")
            .map(|v| {
                let runs = v["runs"].as_u64().unwrap_or(0);
                let gave_up = v["gave_up_pct"].as_f64().unwrap_or(100.0);
                let succeeded = (runs as f64 * (100.0 - gave_up) / 100.0).round() as u64;
                (
                    v["name"].as_str().unwrap_or_default().to_string(),
                    (runs, succeeded),
                )
            })
            .collect()
    }
}

/// What the store holds of one run, read directly.
#[derive(Default, Debug)]
struct Stored {
    records: usize,
    state: Option<String>,
    attempts: u64,
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A small tmpfs of the schedule's own, for the file store: the nemesis fills it for a moment.
/// Unmounted when dropped.
struct Disk {
    dir: PathBuf,
}

impl Disk {
    /// Mounts a 256 KiB tmpfs on `dir`, or says loudly why the full disk is not applied
    /// (failing instead under CI=true, where the runner is root).
    fn mount(dir: &Path) -> Option<Disk> {
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs"])
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output();
        match out {
            Ok(out) if out.status.success() => Some(Disk {
                dir: dir.to_path_buf(),
            }),
            out => {
                let why = match out {
                    Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
                    Err(e) => e.to_string(),
                };
                if std::env::var_os("CI").is_some_and(|v| v == "true") {
                    panic!("the nemesis cannot mount a tmpfs for its full disk (CI=true): {why}");
                }
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED: the nemesis's full disk was not applied: cannot mount a tmpfs ({why})"
                );
                None
            }
        }
    }

    /// Fills the file system up to its last byte.
    fn fill(&self) {
        use std::io::Write;
        let Ok(mut file) = std::fs::File::create(self.dir.join("filler")) else {
            return;
        };
        let block = [0u8; 4096];
        while file.write_all(&block).is_ok() {}
        while file.write_all(&block[..1]).is_ok() {}
    }

    fn free(&self) {
        let _ = std::fs::remove_file(self.dir.join("filler"));
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// What `redis-cli` on 127.0.0.1:`port` printed, bounded (empty when it failed).
fn redis_out(port: u16, args: &[&str]) -> String {
    let out = Command::new("timeout")
        .args(["5", "redis-cli", "-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// `redis-cli` on 127.0.0.1:`port`, bounded: what it printed, or `None`.
pub fn redis_cli(port: u16, args: &[&str]) -> Option<String> {
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
