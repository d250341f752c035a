//! The JSON log's reference, `docs/json-log.md`, against what the binary writes: a set of
//! scenarios runs through the real binary with `--log-format json`, and the test fails when
//! an event or a field comes out that the reference does not list.
//!
//! How the reference is read:
//!
//! - Every table of the page whose first column is `event` lists events (a run, a replay, the
//!   replay's dry run, the dry run, the simulation, and any table added later). The names in
//!   backticks in the first column are the events; every word in backticks in the `fields`
//!   column counts as a field of them. That is generous on purpose: the values named in
//!   backticks among the fields (`tries`, `TERM`) do no harm, and a field the page mentions
//!   anywhere in its row counts as listed. An event found in several tables (`warning`, in a
//!   run and in the dry run) has the fields of all its rows.
//! - A word in backticks that is a JSON object (`{"exit":7}`, as `outcome` is described) lists
//!   its keys as well.
//! - What every line of a run starts with (`event`, `ts`, `run_id`, `label`) is read from the
//!   sentence above the first table that says so; the lines of the dry run and the simulation,
//!   on standard output, start with `event` only.
//! - Objects inside an event are checked key by key too, at any depth: against the table whose
//!   first column is `object`, where the page describes the object field by field for the
//!   events its `in` column names (`policy`, in `start`, `plan_start`, `simulation_start`),
//!   and otherwise against the row of the event that holds it (the `outcome` of `try`, the
//!   `failed` and `gave_up` of `figures` are described there). The objects in an array are
//!   checked the same way, and may also have the keys of the `{"base64":…}` word that the page
//!   shows, above its tables, for a command argument that is not UTF-8.
//!
//! Each scenario is one entry of [`SCENARIOS`]: its name, its arguments (`--log-format json`
//! is put in front of them), where its JSON lines go, and what it must show (`event`,
//! `event.field`, or a path into objects and arrays, `start.policy.delays_ms`,
//! `start.command.1.base64`), so that a scenario that stopped doing what it is for fails
//! instead of passing on nothing; between them they must make every event of [`MUST_SEE`].
//! A scenario may say
//! which option it needs ([`Scenario::needs`]): until the binary knows that option (its
//! `--help` does not name it), the scenario is skipped, so that the events and fields of a
//! planned option can be listed here before it lands, and are checked from the day it does.
//!
//! Each scenario runs in a directory of its own (`{dir}` in its arguments and environment),
//! which is its working directory and holds its `XDG_RUNTIME_DIR` (0700, for `--quota`);
//! scenarios of one group run one after another in one directory (a dead letter, then its
//! replay), and the groups run side by side. A try that leaves a process writes its pid to
//! `pids` there, and every such process must be gone at the end.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Where a scenario's JSON lines go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    /// A run's log, on standard error.
    Stderr,
    /// What the dry run, the simulation and the replay's dry run print, on standard output.
    Stdout,
}

/// One run of the binary, and what it must show.
#[derive(Clone, Copy)]
struct Scenario {
    name: &'static str,
    /// After `--log-format json`; `{dir}` is the scenario's directory.
    args: &'static [&'static str],
    /// Set for this scenario only; `{dir}` is its directory.
    env: &'static [(&'static str, &'static str)],
    stream: Stream,
    /// What its output must hold: `event`, `event.field`, `event.object.field`.
    expect: &'static [&'static str],
    /// Scenarios of one group run in order in one directory; without a group, alone.
    group: Option<&'static str>,
    /// The working directory, under its directory (created); its directory itself without.
    cwd: Option<&'static str>,
    /// Done to its directory before it runs.
    before: Option<fn(&Path)>,
    /// An option the binary must know for the scenario to run (a planned option).
    needs: Option<&'static str>,
}

/// A run, its log on standard error.
const fn run(name: &'static str, args: &'static [&'static str]) -> Scenario {
    Scenario {
        name,
        args,
        env: &[],
        stream: Stream::Stderr,
        expect: &[],
        group: None,
        cwd: None,
        before: None,
        needs: None,
    }
}

/// What `retry` prints without running a command (dry run, simulation), on standard output.
const fn printed(name: &'static str, args: &'static [&'static str]) -> Scenario {
    Scenario {
        stream: Stream::Stdout,
        ..run(name, args)
    }
}

impl Scenario {
    const fn expect(self, expect: &'static [&'static str]) -> Scenario {
        Scenario { expect, ..self }
    }

    const fn env(self, env: &'static [(&'static str, &'static str)]) -> Scenario {
        Scenario { env, ..self }
    }

    const fn group(self, group: &'static str) -> Scenario {
        Scenario {
            group: Some(group),
            ..self
        }
    }

    const fn cwd(self, cwd: &'static str) -> Scenario {
        Scenario {
            cwd: Some(cwd),
            ..self
        }
    }

    const fn before(self, before: fn(&Path)) -> Scenario {
        Scenario {
            before: Some(before),
            ..self
        }
    }

    /// Skipped until `retry --help` names `option`.
    const fn needs(self, option: &'static str) -> Scenario {
        Scenario {
            needs: Some(option),
            ..self
        }
    }
}

/// Fails on its first try and succeeds on its second (it counts in `count`).
const FLAKY: &str =
    r#"n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; [ $n -ge 2 ]"#;

/// The dead letters of the group `replay`.
const DEAD_LETTERS: &str = "dl/failed.jsonl";

#[rustfmt::skip]
const SCENARIOS: &[Scenario] = &[
    // Runs.
    run("a flaky success", &["--label", "flaky", "-n", "3", "-d", "1ms", "--", "sh", "-c", FLAKY])
        .expect(&["start.label", "try", "wait", "success.label"]),
    run("giving up on tries", &["-n", "2", "-d", "1ms", "--", "sh", "-c", "exit 3"])
        .expect(&["give_up.exit_code"]),
    run("a timeout that TERM does not stop", &["-n", "2", "-d", "1ms", "-t", "30ms", "-k", "10ms", "--", "sh", "-c", r#"trap "" TERM; echo $$ >> pids; exec sleep 5"#])
        .expect(&["try.outcome.timeout", "try.signal", "try.killed"]),
    run("a permanent exit (--stop-on)", &["--stop-on", "2", "--", "sh", "-c", "exit 2"])
        .expect(&["try.reason", "give_up"]),
    run("a command that is not found", &["--", "./no-such-command"])
        .expect(&["try.outcome.not_found", "try.error"]),
    run("a budget with no room for a retry", &["-B", "100ms", "-d", "1s", "-j", "none", "--", "false"])
        .expect(&["give_up.detail", "start.policy.budget_ms"]),
    run("a try stopped at the end of the budget", &["-B", "50ms", "-k", "10ms", "--", "sh", "-c", "echo $$ >> pids; exec sleep 5"])
        .expect(&["try.limit", "give_up.detail"]),
    run("a requested wait", &["-n", "2", "-d", "1ms", "--delay-from-output", r"after (\S+)", "--", "sh", "-c", "echo after 2ms; exit 1"])
        .expect(&["wait.requested_ms", "start.policy.delay_from_output"]),
    run("a requested wait until a date", &["-n", "2", "-d", "1ms", "--delay-from-output", r"after (.+)", "--", "sh", "-c", "echo 'after Thu, 01 Jan 2015 00:00:00 GMT'; exit 1"])
        .expect(&["wait.clock", "wait.requested_ms"]),
    run("a requested wait past the budget", &["-B", "200ms", "-d", "1ms", "--delay-from-output", r"after (\S+)", "--", "sh", "-c", "echo after 5s; exit 1"])
        .expect(&["give_up.requested_ms"]),
    run("a match that holds no wait", &["-n", "2", "-d", "1ms", "--delay-from-output", r"wait (\d*)", "--", "sh", "-c", "echo wait x; exit 1"])
        .expect(&["request_ignored.reason", "request_ignored.group"]),
    run("a quota that refuses a retry", &["-n", "3", "-d", "1ms", "--quota", "jsonref:cap=1,floor=0.01/s", "--", "false"])
        .expect(&["quota.granted", "give_up.detail"]),
    run("a streak of successful tries", &["--consecutive", "2", "-d", "1ms", "--", "true"])
        .expect(&["try.in_a_row"]),
    run("a throttle that holds tries back", &["-n", "4", "-d", "1ms", "--quota", "jsonref", "--throttle", "2", "--seed", "1", "--", "false"])
        .expect(&["try.outcome.held", "try.requests", "try.accepts", "try.held_back", "try.p", "quota.p"]),
    run("a stagger", &["--stagger", "2ms", "-n", "1", "--", "true"]).expect(&["stagger.most_ms"]),
    run("a failing --on-retry hook", &["-n", "2", "-d", "1ms", "--on-retry", "exit 4", "--", "false"])
        .expect(&["hook.result"]),
    run("a hook that leaves a process", &["-n", "2", "-d", "1ms", "-k", "10ms", "--on-retry", "sleep 5 >/dev/null 2>&1 & echo $! >> pids", "--", "false"])
        .expect(&["leftovers.hook", "leftovers.count"]),
    run("a try that leaves a process TERM does not stop", &["-n", "2", "-d", "1ms", "-k", "10ms", "--", "sh", "-c", r#"trap "" TERM; sleep 5 >/dev/null 2>&1 & echo $! >> pids; exit 1"#])
        .expect(&["leftovers.killed", "leftovers.count"]),
    run("a signal to retry during a try", &["--", "sh", "-c", "echo $$ >> pids; kill -TERM $PPID; exec sleep 5"])
        .expect(&["signal.during", "give_up.signal"]),
    run("a signal to retry during a wait", &["-n", "2", "-d", "1ms", "--on-retry", "kill -TERM $PPID", "--", "false"])
        .expect(&["signal.during"]),
    run("a run inside another (a warning)", &["-n", "1", "--", "true"])
        .env(&[("RETRY_RUN_ID", "outer"), ("RETRY_ATTEMPT", "1"), ("RETRY_MAX_TRIES", "3")])
        .expect(&["warning.message"]),
    run("a --log-file that cannot be opened", &["--log-file", "{dir}/missing/log.jsonl", "--", "true"])
        .expect(&["error.message"]),
    run("a --dead-letter that is no regular file", &["--dead-letter", "/dev/null", "--", "true"])
        .expect(&["error.message"]),
    run("a command word that is not UTF-8", &["-n", "1", "--", "true", "{ff}"])
        .expect(&["start.command.1.base64"]),
    run("--delays and --until-output", &["--delays", "1ms,1ms", "--until-output", "ready", "--", "sh", "-c", "echo ready"])
        .expect(&["start.policy.delays_ms", "start.policy.until_output", "success"]),
    // Dead letters, then their replay.
    run("a dead letter", &["-n", "1", "--label", "nightly", "--dead-letter", DEAD_LETTERS, "--", "sh", "-c", "test -e ok"])
        .group("replay").expect(&["dead_letter.file"]),
    run("another dead letter", &["-n", "1", "--dead-letter", DEAD_LETTERS, "--", "false"])
        .group("replay").expect(&["dead_letter"]),
    run("a dead letter whose directory goes", &["-n", "1", "--dead-letter", "../dl/failed.jsonl", "--", "false"])
        .group("replay").cwd("gone").expect(&["dead_letter"]),
    printed("the replay's dry run", &["--replay", DEAD_LETTERS, "--dry-run"])
        .group("replay").expect(&["pending.attempts"]),
    run("a replay", &["--replay", DEAD_LETTERS, "-n", "1"])
        .group("replay").before(remove_gone_and_make_ok)
        .expect(&["replay.of", "replayed.result", "replayed.error", "replay_end.resolved", "success.label"]),
    // The dry run.
    printed("a dry run with options that defeat each other", &["--dry-run", "-n", "2", "-d", "10s", "-m", "1s", "-t", "20s", "-B", "10s", "--seed", "7", "--", "make", "test"])
        .expect(&["plan_start.formula", "warning.kind", "plan.start_ms", "plan_end.worst_case_by"]),
    printed("a dry run with no try limit", &["--dry-run", "-n", "0", "-d", "1ms", "--stagger", "1s", "--quota", "jsonref", "--delay-from-output", r"after (\S+)"])
        .expect(&["plan_start.stagger_ms", "plan_start.quota_tokens", "plan_end.truncated"]),
    printed("a dry run with a throttle", &["--dry-run", "--quota", "jsonref", "--throttle", "2"])
        .expect(&["plan_start.throttle", "plan_start.throttle_requests", "plan_start.throttle_accepts", "plan_start.throttle_held_back", "plan_start.throttle_p"]),
    // The simulation.
    printed("a cron fleet simulated with a throttle", &["--simulate", "--compare", "--clients", "20", "--every", "1m", "--outage", "2m", "--quota", "jsonref", "--throttle", "2", "--seed", "1"])
        .expect(&["simulation_start.every_ms", "simulation_start.horizon_ms", "simulation_start.throttle_k", "simulation_start.throttle_window_ms", "simulation_start.throttle_max", "figures.throttle", "figures.gave_up.held", "figures.waves", "figures.in_outage", "figures.after_outage", "figures.held", "figures.p_recovered_ms"]),
    printed("a simulation compared", &["--simulate", "--compare", "--clients", "5", "-n", "3", "--outage", "1s", "--capacity", "2/s", "--stagger", "1s", "--quota", "jsonref", "--seed", "1"])
        .expect(&["simulation_start.capacity_per_second", "simulation_start.stagger_ms", "interval.jitter", "figures.gave_up", "figures.failed.overload"]),
    printed("a simulation of one shared record", &["--simulate", "--model", "occ", "--clients", "3", "-n", "2", "--seed", "1"])
        .expect(&["simulation_start.model", "figures.failed.conflict"]),
    printed("a simulation whose timeouts are permanent", &["--simulate", "--clients", "3", "-n", "2", "-t", "50ms", "--stop-on", "timeout", "--outage", "0s", "--seed", "1"])
        .expect(&["figures.gave_up.permanent"]),
    printed("a simulation past its clock", &["--simulate", "--clients", "2", "--latency", "500y", "-n", "2", "--seed", "1"])
        .expect(&["figures.past_clock"]),
    // Planned (docs/flaky.md#flaky-runs): they run once the binary has the option.
    run("a flaky run (--flaky)", &["--flaky", "warn", "-n", "3", "-d", "1ms", "--", "sh", "-c", FLAKY])
        .needs("--flaky").expect(&["success.flaky", "success.failed_tries"]),
    run("a repeated command (--repeat)", &["--repeat", "3", "--", "true"])
        .needs("--repeat").expect(&["repeat_end"]),
    run("a repeat past its failures (--keep-going)", &["--repeat", "3", "--keep-going", "--", "sh", "-c", FLAKY])
        .needs("--keep-going").expect(&["repeat_end.first_failure", "repeat_end.outcomes"]),
];

/// The events the scenarios must make between them, so that the test cannot pass on nothing.
const MUST_SEE: &[&str] = &[
    "start",
    "try",
    "wait",
    "success",
    "give_up",
    "leftovers",
    "hook",
    "quota",
    "stagger",
    "signal",
    "request_ignored",
    "warning",
    "error",
    "dead_letter",
    "replay",
    "replayed",
    "replay_end",
    "pending",
    "plan_start",
    "plan",
    "plan_end",
    "simulation_start",
    "interval",
    "figures",
];

/// Before the replay: the directory of one dead letter is gone, and another's command now
/// succeeds.
fn remove_gone_and_make_ok(dir: &Path) {
    std::fs::remove_dir_all(dir.join("gone")).expect("remove gone/");
    std::fs::write(dir.join("ok"), "").expect("write ok");
}

/// How long one scenario may run, whatever goes wrong.
const SCENARIO_LIMIT: Duration = Duration::from_secs(10);

/// The environment of the tries of an outer `retry`, or of CI: removed, so that a scenario
/// sees only what it sets.
const REMOVED_VARS: &[&str] = &[
    "RETRY_RUN_ID",
    "RETRY_ATTEMPT",
    "RETRY_MAX_TRIES",
    "RETRY_DEADLINE_MS",
    "RETRY_REDIS_PASSWORD",
];

// ---------------------------------------------------------------------------------------------
// The reference.

/// What docs/json-log.md lists.
#[derive(Debug, Default)]
struct Reference {
    /// Each event, and the words of its rows.
    events: BTreeMap<String, BTreeSet<String>>,
    /// Each object described field by field, by the event that holds it and its name, and
    /// its fields.
    objects: BTreeMap<(String, String), BTreeSet<String>>,
    /// What every line of a run starts with.
    run_head: BTreeSet<String>,
    /// The keys of the objects that stand for a command's words (`{"base64":…}`).
    word_keys: BTreeSet<String>,
}

fn reference() -> Reference {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json-log.md");
    let text = std::fs::read_to_string(&path).expect("read docs/json-log.md");
    parse_reference(&text)
}

fn parse_reference(text: &str) -> Reference {
    let mut reference = Reference {
        run_head: run_head(text),
        word_keys: word_keys(text),
        ..Reference::default()
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i + 1 < lines.len() {
        let is_table = lines[i].starts_with('|') && lines[i + 1].starts_with("|-");
        if !is_table {
            i += 1;
            continue;
        }
        let header = cells(lines[i]);
        let fields = header
            .iter()
            .position(|h| h == "fields")
            .unwrap_or_else(|| {
                panic!(
                    "a table of docs/json-log.md has no `fields` column: {}",
                    lines[i]
                )
            });
        // A table of objects says in its `in` column which events hold them.
        let holders = match header[0].as_str() {
            "event" => None,
            "object" => Some(header.iter().position(|h| h == "in").unwrap_or_else(|| {
                panic!("a table of objects in docs/json-log.md has no `in` column")
            })),
            other => panic!(
                "a table of docs/json-log.md lists `{other}`: this test reads tables of events \
                 and of objects only (teach it the new kind)"
            ),
        };
        i += 2;
        while i < lines.len() && lines[i].starts_with('|') {
            let row = cells(lines[i]);
            let names = backticked(&row[0]);
            assert!(!names.is_empty(), "a row names nothing: {}", lines[i]);
            let words: BTreeSet<String> = row
                .get(fields)
                .map(|cell| {
                    backticked(cell)
                        .into_iter()
                        .flat_map(listed_names)
                        .collect()
                })
                .unwrap_or_default();
            for name in names {
                match holders {
                    None => reference
                        .events
                        .entry(name)
                        .or_default()
                        .extend(words.clone()),
                    Some(column) => {
                        let events = row.get(column).map(|c| backticked(c)).unwrap_or_default();
                        assert!(!events.is_empty(), "no event holds `{name}`: {}", lines[i]);
                        for event in events {
                            let key = (event, name.clone());
                            reference
                                .objects
                                .entry(key)
                                .or_default()
                                .extend(words.clone());
                        }
                    }
                }
            }
            i += 1;
        }
    }
    assert!(
        reference.events.contains_key("start") && reference.events.contains_key("plan_start"),
        "docs/json-log.md: no table of a run's events or of the dry run's was found"
    );
    reference
}

/// What the reference says every line of a run starts with: the words in backticks from
/// "Every line of a run's log starts with" to the end of that clause.
fn run_head(text: &str) -> BTreeSet<String> {
    let prose = text.split("\n\n").map(|p| p.replace('\n', " "));
    let phrase = "Every line of a run's log starts with";
    let clause = prose
        .filter_map(|p| p.split_once(phrase).map(|(_, rest)| rest.to_string()))
        .next()
        .unwrap_or_else(|| panic!("docs/json-log.md no longer says \"{phrase}\""));
    let clause = clause.split(';').next().unwrap_or_default();
    let head: BTreeSet<String> = backticked(clause)
        .into_iter()
        .filter(|w| !w.starts_with('-'))
        .collect();
    for field in ["event", "ts", "run_id"] {
        assert!(
            head.contains(field),
            "the head of a run's lines, as docs/json-log.md says it, has no `{field}`: {head:?}"
        );
    }
    head
}

/// The keys of the objects in backticks where the reference says how command arguments are
/// written.
fn word_keys(text: &str) -> BTreeSet<String> {
    let phrase = "Command arguments are written exactly";
    let paragraph = text
        .split("\n\n")
        .find(|p| p.replace('\n', " ").contains(phrase))
        .unwrap_or_else(|| panic!("docs/json-log.md no longer says \"{phrase}\""));
    let keys: BTreeSet<String> = backticked(paragraph)
        .into_iter()
        .filter_map(|word| match serde_json::from_str::<Value>(&word) {
            Ok(Value::Object(object)) => Some(object.keys().cloned().collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect();
    assert!(
        !keys.is_empty(),
        "docs/json-log.md no longer shows how a command word that is not UTF-8 is written"
    );
    keys
}

/// The cells of a table's row: split at the `|` that are not inside backticks.
fn cells(row: &str) -> Vec<String> {
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut in_code = false;
    for c in row.trim().trim_start_matches('|').chars() {
        match c {
            '`' => {
                in_code = !in_code;
                cell.push(c);
            }
            '|' if !in_code => cells.push(std::mem::take(&mut cell).trim().to_string()),
            _ => cell.push(c),
        }
    }
    if !cell.trim().is_empty() {
        cells.push(cell.trim().to_string());
    }
    cells
}

/// Every text in backticks.
fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The names a word in backticks lists: itself, and the keys of a JSON object.
fn listed_names(word: String) -> Vec<String> {
    let mut names = Vec::new();
    if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(&word) {
        names.extend(object.keys().cloned());
    }
    names.push(word);
    names
}

// ---------------------------------------------------------------------------------------------
// Running the scenarios.

/// What one scenario printed.
struct Ran {
    scenario: Scenario,
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn stream(&self) -> &str {
        match self.scenario.stream {
            Stream::Stderr => &self.stderr,
            Stream::Stdout => &self.stdout,
        }
    }

    /// The JSON lines of its stream. On standard output every line is one; on standard error
    /// the lines that do not start with `{` are the command's and its hooks'.
    fn json_lines(&self) -> Result<Vec<Value>, String> {
        let mut values = Vec::new();
        for line in self.stream().lines().filter(|l| !l.is_empty()) {
            if self.scenario.stream == Stream::Stderr && !line.starts_with('{') {
                continue;
            }
            match serde_json::from_str::<Value>(line) {
                Ok(value @ Value::Object(_)) if value["event"].is_string() => values.push(value),
                _ => return Err(format!("a line that is no JSON event: {line}")),
            }
        }
        Ok(values)
    }

    fn describe(&self) -> String {
        format!(
            "scenario \"{}\": retry --log-format json {}\n  status {:?}\n  stdout:\n{}\n  stderr:\n{}",
            self.scenario.name,
            self.scenario.args.join(" "),
            self.status,
            self.stdout,
            self.stderr
        )
    }
}

/// A scenario's argument or variable: `{dir}` is its directory, `{ff}` the byte 0xFF (which no
/// UTF-8 text holds).
fn fill(text: &str, dir: &Path) -> OsString {
    let text = text.replace("{dir}", &dir.to_string_lossy());
    let mut bytes = Vec::new();
    for (i, part) in text.split("{ff}").enumerate() {
        if i > 0 {
            bytes.push(0xFF);
        }
        bytes.extend_from_slice(part.as_bytes());
    }
    OsString::from_vec(bytes)
}

/// Runs `scenario` in `dir`, its standard input null, killed past [`SCENARIO_LIMIT`].
fn run_scenario(scenario: Scenario, dir: &Path) -> Ran {
    let runtime = dir.join("runtime");
    std::fs::create_dir_all(&runtime).expect("create the runtime dir");
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700))
        .expect("make the runtime dir private");
    let cwd = match scenario.cwd {
        Some(sub) => dir.join(sub),
        None => dir.to_path_buf(),
    };
    std::fs::create_dir_all(&cwd).expect("create the working directory");
    if let Some(before) = scenario.before {
        before(dir);
    }
    let mut cmd: Command = common::retry_std();
    for name in REMOVED_VARS {
        cmd.env_remove(name);
    }
    cmd.env("XDG_RUNTIME_DIR", &runtime)
        .envs(scenario.env.iter().map(|(k, v)| (k, fill(v, dir))))
        .current_dir(&cwd)
        .args(["--log-format", "json"])
        .args(scenario.args.iter().map(|a| fill(a, dir)));
    let (status, stdout, stderr) = bounded_output(cmd, scenario.name);
    Ran {
        scenario,
        status,
        stdout,
        stderr,
    }
}

/// Runs `cmd`, its standard input null, and returns its status, stdout and stderr; fails the
/// test past [`SCENARIO_LIMIT`].
fn bounded_output(mut cmd: Command, name: &str) -> (std::process::ExitStatus, String, String) {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start retry");
    let stdout = read_all(child.stdout.take());
    let stderr = read_all(child.stderr.take());
    let until = Instant::now() + SCENARIO_LIMIT;
    let status = common::wait_bounded(&mut child, SCENARIO_LIMIT);
    // A process left behind could hold a pipe open: read for the rest of the bound only.
    let joined = |reader: std::thread::JoinHandle<String>, what: &str| {
        let left = until.saturating_duration_since(Instant::now());
        assert!(
            common::wait_until(left, || reader.is_finished()),
            "{name}: its {what} stayed open after retry ended"
        );
        reader.join().expect("read the output")
    };
    (status, joined(stdout, "stdout"), joined(stderr, "stderr"))
}

/// Reads `pipe` to its end on a thread of its own.
fn read_all(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// The scenarios in groups: those of one group in their order, each other alone.
fn groups(scenarios: &[Scenario]) -> Vec<Vec<Scenario>> {
    let mut groups: Vec<(Option<&str>, Vec<Scenario>)> = Vec::new();
    for s in scenarios {
        match groups
            .iter_mut()
            .find(|(g, _)| g.is_some() && *g == s.group)
        {
            Some((_, members)) => members.push(*s),
            None => groups.push((s.group, vec![*s])),
        }
    }
    groups.into_iter().map(|(_, members)| members).collect()
}

/// Runs every group, several at once, and returns what each scenario printed, in the order of
/// `scenarios`; fails when a process a scenario started outlives it.
fn run_all(scenarios: &[Scenario]) -> Vec<Ran> {
    let names: BTreeSet<&str> = scenarios.iter().map(|s| s.name).collect();
    assert_eq!(names.len(), scenarios.len(), "two scenarios have one name");
    let groups = groups(scenarios);
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::new());
    let workers = groups.len().min(6);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(group) = groups.get(i) else { break };
                    let dir = common::temp_dir("json-reference");
                    for scenario in group {
                        let ran = run_scenario(*scenario, &dir);
                        done.lock().unwrap().push(ran);
                    }
                    let left = common::survivors(
                        &common::pids_in(&dir.join("pids")),
                        Duration::from_secs(2),
                    );
                    assert!(
                        left.is_empty(),
                        "group of \"{}\" left processes running: {left:?}",
                        group[0].name
                    );
                    let _ = std::fs::remove_dir_all(&dir);
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap();
    done.sort_by_key(|ran| {
        scenarios
            .iter()
            .position(|s| s.name == ran.scenario.name)
            .unwrap_or(usize::MAX)
    });
    done
}

/// The scenarios this binary can run: those whose option its `--help` names.
fn runnable(scenarios: &[Scenario]) -> (Vec<Scenario>, Vec<Scenario>) {
    if scenarios.iter().all(|s| s.needs.is_none()) {
        return (scenarios.to_vec(), Vec::new());
    }
    let mut cmd = common::retry_std();
    cmd.arg("--help");
    let (_, help, _) = bounded_output(cmd, "retry --help");
    let knows = |option: &str| {
        help.split(|c: char| c.is_whitespace() || c == ',')
            .any(|word| word == option)
    };
    scenarios
        .iter()
        .copied()
        .partition(|s| s.needs.is_none_or(&knows))
}

// ---------------------------------------------------------------------------------------------
// The checks.

/// An event or a field the reference does not list, and the scenarios that wrote it.
type Unlisted = BTreeMap<String, BTreeSet<&'static str>>;

/// Adds to `unlisted` what `line` holds that the reference does not list.
fn check_line(
    reference: &Reference,
    stream: Stream,
    line: &Value,
    scenario: &'static str,
    unlisted: &mut Unlisted,
) {
    let Some(object) = line.as_object() else {
        return;
    };
    let event = line["event"].as_str().unwrap_or_default();
    let mut note = |what: String| {
        unlisted.entry(what).or_default().insert(scenario);
    };
    let Some(listed) = reference.events.get(event) else {
        note(format!("event `{event}`"));
        return;
    };
    for (key, value) in object {
        let in_head = match stream {
            Stream::Stderr => reference.run_head.contains(key),
            Stream::Stdout => key == "event",
        };
        if !in_head && !listed.contains(key) {
            note(format!("`{event}`: field `{key}`"));
        }
        check_nested(reference, listed, event, event, key, value, &mut note);
    }
}

/// The keys of an object inside `event`, at any depth (`path` leads to it, `key` names it):
/// against the reference's table of objects where it describes this one in this event, else
/// against the row of the event. The objects in an array (`key[]`) may have the keys of a
/// command's words too.
fn check_nested(
    reference: &Reference,
    row: &BTreeSet<String>,
    event: &str,
    path: &str,
    key: &str,
    value: &Value,
    note: &mut impl FnMut(String),
) {
    let listed = reference
        .objects
        .get(&(event.to_string(), key.to_string()))
        .unwrap_or(row);
    let (objects, path, words): (Vec<&serde_json::Map<String, Value>>, _, _) = match value {
        Value::Object(object) => (vec![object], format!("{path}.{key}"), None),
        Value::Array(items) => (
            items.iter().filter_map(Value::as_object).collect(),
            format!("{path}.{key}[]"),
            Some(&reference.word_keys),
        ),
        _ => return,
    };
    for object in objects {
        for (inner, value) in object {
            if !listed.contains(inner) && !words.is_some_and(|w| w.contains(inner)) {
                note(format!("`{path}`: field `{inner}`"));
            }
            check_nested(reference, row, event, &path, inner, value, note);
        }
    }
}

/// One step of a path: a key of an object, or an index into an array.
fn step<'v>(value: &'v Value, key: &str) -> Option<&'v Value> {
    match (value, key.parse::<usize>()) {
        (Value::Array(items), Ok(i)) => items.get(i),
        _ => value.get(key),
    }
}

/// Whether some line holds `want`: `event`, `event.field`, `event.object.field`, or with an
/// index into an array, `event.command.1.base64`.
fn holds(lines: &[Value], want: &str) -> bool {
    let mut parts = want.split('.');
    let event = parts.next().unwrap_or_default();
    let path: Vec<&str> = parts.collect();
    lines.iter().any(|line| {
        line["event"] == event && path.iter().try_fold(line, |v, key| step(v, key)).is_some()
    })
}

#[test]
fn the_json_log_writes_only_events_and_fields_that_its_reference_lists() {
    let started = Instant::now();
    let reference = reference();
    let (scenarios, skipped) = runnable(SCENARIOS);
    let ran = run_all(&scenarios);

    let mut failures = Vec::new();
    let mut unlisted = Unlisted::new();
    let mut seen = BTreeSet::new();
    for r in &ran {
        let lines = match r.json_lines() {
            Ok(lines) => lines,
            Err(e) => {
                failures.push(format!("{e}\n{}", r.describe()));
                continue;
            }
        };
        if lines.is_empty() {
            failures.push(format!("no JSON event\n{}", r.describe()));
        }
        for want in r.scenario.expect {
            if !holds(&lines, want) {
                failures.push(format!("no `{want}`\n{}", r.describe()));
            }
        }
        for line in &lines {
            seen.insert(line["event"].as_str().unwrap_or_default().to_string());
            check_line(
                &reference,
                r.scenario.stream,
                line,
                r.scenario.name,
                &mut unlisted,
            );
        }
    }
    let missing: Vec<&&str> = MUST_SEE.iter().filter(|e| !seen.contains(**e)).collect();
    if !missing.is_empty() {
        failures.push(format!("the scenarios made no {missing:?} event"));
    }
    if !unlisted.is_empty() {
        let list: Vec<String> = unlisted
            .iter()
            .map(|(what, from)| {
                let names: Vec<&str> = from.iter().copied().take(3).collect();
                let more = match from.len() {
                    n if n > 3 => format!(" and {} more", n - 3),
                    _ => String::new(),
                };
                format!("  {what}, written by: {}{more}", names.join("; "))
            })
            .collect();
        failures.push(format!(
            "docs/json-log.md does not list what the binary wrote:\n{}",
            list.join("\n")
        ));
    }
    let unseen: Vec<&String> = reference
        .events
        .keys()
        .filter(|e| !seen.contains(*e))
        .collect();
    eprintln!(
        "{} scenarios in {:?}; skipped (the binary lacks their option): {:?}; events listed but \
         not made by any scenario: {unseen:?}",
        ran.len(),
        started.elapsed(),
        skipped.iter().map(|s| s.name).collect::<Vec<_>>()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_reference_is_read_row_by_row_and_objects_key_by_key() {
    let reference = parse_reference(
        "Every line of a run's log starts with `event`, `ts` and `run_id`, then `label` when \
         `--label` names it; the others with `event`.\n\n\
         Command arguments are written exactly: one that is not UTF-8 is an object\n\
         `{\"base64\":\"…\"}`.\n\n\
         | event | when | fields |\n|---|---|---|\n\
         | `start` | first | `command`; `policy` |\n\
         | `try` | a try | `outcome` such as `{\"exit\":7}`; `a|b` |\n\n\
         | event | when | fields |\n|---|---|---|\n\
         | `plan_start` | first | `random`; `policy` |\n\
         | `try` | again | `more` |\n\n\
         | object | in | fields |\n|---|---|---|\n\
         | `policy` | `start` | `tries`, `seed` |\n",
    );
    let set = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(reference.run_head, set(&["event", "ts", "run_id", "label"]));
    assert_eq!(reference.events["start"], set(&["command", "policy"]));
    assert_eq!(
        reference.events["try"],
        set(&["outcome", "{\"exit\":7}", "exit", "a|b", "more"])
    );
    let policy = ("start".to_string(), "policy".to_string());
    assert_eq!(reference.objects[&policy], set(&["tries", "seed"]));

    let mut unlisted = Unlisted::new();
    let line = serde_json::json!({
        "event": "try", "ts": "t", "run_id": "r", "outcome": {"exit": 1, "core": true},
        "new": 1,
    });
    check_line(&reference, Stream::Stderr, &line, "s", &mut unlisted);
    let line = serde_json::json!({"event": "plan_start", "ts": "t", "random": true});
    check_line(&reference, Stream::Stdout, &line, "s", &mut unlisted);
    let line = serde_json::json!({"event": "start", "policy": {"tries": 1, "jitter": "full"}});
    check_line(&reference, Stream::Stderr, &line, "s", &mut unlisted);
    // Where the table of objects does not say so, the policy is checked against the row.
    let line = serde_json::json!({"event": "plan_start", "policy": {"random": 1, "seed": "7"}});
    check_line(&reference, Stream::Stdout, &line, "s", &mut unlisted);
    let line =
        serde_json::json!({"event": "start", "command": ["a", {"base64": "/w=="}, {"hex": "ff"}]});
    check_line(&reference, Stream::Stderr, &line, "s", &mut unlisted);
    let line = serde_json::json!({"event": "gone"});
    check_line(&reference, Stream::Stderr, &line, "s", &mut unlisted);
    assert_eq!(
        unlisted.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "`plan_start.policy`: field `seed`",
            "`plan_start`: field `ts`",
            "`start.command[]`: field `hex`",
            "`start.policy`: field `jitter`",
            "`try.outcome`: field `core`",
            "`try`: field `new`",
            "event `gone`",
        ]
    );
}
