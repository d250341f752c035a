//! The imperative shell: parse, then print the dry run or the simulation, replay a dead-letter
//! file, or run the command for real.

pub mod child;
pub mod claims;
pub mod clock;
pub mod column;
pub mod demand;
pub mod descriptor;
pub mod dispositions;
pub mod envfile;
pub mod fleet_replay;
pub mod keep;
pub mod playback;
pub mod process;
pub mod random;
pub mod rawsig;
pub mod records;
pub mod replay;
pub mod runner;
pub mod setup;
pub mod signals;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub mod spawn;
pub mod spool;
pub mod startup;
pub mod stderr;
pub mod stdio;
pub mod trace;
pub mod watchdog;
pub mod withheld;

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clock::Moment;

use crate::config::{self, Config, Mode, ParseOutcome};
use crate::exit::ExitStatus;
use crate::policy::lock::DoneBefore;
use crate::policy::quota::QuotaSpec;
use crate::policy::throttle::ThrottleSpec;
use crate::report::dryrun;
use crate::report::event::{Event, Failure, Warning};
use crate::report::junit::Junit;
use crate::report::log::Log;
use crate::store::deadletter::{self, DeadLetter, Record};
use crate::store::quota::unix_ms;
use crate::store::shared;
use setup::{Start, open_log, run_id, run_logged, with_history, with_metrics, with_outside};

/// Runs `retry` with these arguments (the program name first) and returns how it should end.
pub fn main_with(args: impl IntoIterator<Item = OsString>) -> ExitStatus {
    let start = Moment::now();
    let wall_start = SystemTime::now();
    let args: Vec<OsString> = args.into_iter().collect();
    let charset = crate::text::Charset::of_locale(|name| std::env::var_os(name));
    let config = match config::parse_in(&args, wall_start, charset, crate::cli::Reading::Own) {
        ParseOutcome::Run(config) => config,
        ParseOutcome::Info(info) => {
            let _ = info.print();
            return ExitStatus::Success;
        }
        ParseOutcome::Usage(e) => {
            eprintln!("retry: {}", crate::report::printable(&e.to_string()));
            return ExitStatus::Usage;
        }
    };
    // A replay draws a seed for each run it replays.
    let seed = || config.seed.unwrap_or_else(random::random_u64);
    let status = match &config.mode {
        Mode::Replay { file, .. } => match crate::store::place::Place::of_replay(file) {
            Ok((crate::store::place::Place::Redis(address), lease)) => {
                let lease = lease.unwrap_or(crate::store::lease::DEFAULT_LENGTH);
                fleet_replay::replay(&args, &config, &address, lease)
            }
            _ => replay::replay(&args, &config, file),
        },
        Mode::Stats { file, since } => stats(&config, file, *since),
        Mode::Forget { file, ids } => records::forget(&config, file, ids),
        Mode::Prune { file, older_than } => records::prune(&config, file, *older_than),
        Mode::Simulate(sim) => simulate(&config, sim, seed()),
        Mode::DryRun => dry_run(&config, seed()),
        Mode::Run => real_run(&config, &args, seed(), start, wall_start),
    };
    // Told last, unless the refusal of a usage error is the one line to tell.
    if status != ExitStatus::Usage {
        warn_of_a_password_in_url(&config.mode);
    }
    status
}

/// The warning that the Redis password in the URL of `--replay`, `--forget`, `--prune` or
/// `--stats` can be read by every user of the machine, as a run's `--quota`, `--dead-letter`
/// and `--history` warn of theirs.
fn warn_of_a_password_in_url(mode: &Mode) {
    let (option, file) = match mode {
        Mode::Replay { file, .. } => ("--replay", file),
        Mode::Stats { file, .. } => ("--stats", file),
        Mode::Forget { file, .. } => ("--forget", file),
        Mode::Prune { file, .. } => ("--prune", file),
        _ => return,
    };
    if let Ok(crate::store::place::Place::Redis(address)) = crate::store::place::Place::of(file) {
        if address.password().is_some() {
            let warning = Warning::PasswordInUrl {
                option,
                variable: crate::store::redis::PASSWORD_VAR,
            };
            eprintln!(
                "retry: warning: {}",
                crate::report::words::warning_text(&warning)
            );
        }
    }
}

fn dry_run(config: &Config, seed: u64) -> ExitStatus {
    let json = config.log.format == crate::config::LogFormat::Json;
    let ascii = config.charset.is_ascii();
    let mut out = crate::report::charset::Output::with(io::stdout().lock(), ascii, json);
    let quota = match config
        .quota
        .as_ref()
        .map(|spec| quota_now(spec, config.throttle))
        .transpose()
    {
        Ok(quota) => quota,
        Err(line) => {
            eprintln!("retry: {}", crate::report::printable(&line));
            return ExitStatus::Usage;
        }
    };
    // The lock is looked at, never taken: a dry run turns no run away. A lock file that a run
    // could not use stops it with 125; the dry run too, so that a deploy check sees it.
    let (lock, once_done, lock_error) = match look_at_lock(config) {
        Err(line) => {
            eprintln!("retry: {}", crate::report::printable(&line));
            return ExitStatus::Usage;
        }
        Ok(found) => found,
    };
    let now = dryrun::Now {
        quota: quota.as_ref(),
        lock: lock.as_ref(),
        lock_error: lock_error.as_deref(),
        once_done: once_done.as_ref(),
    };
    match dryrun::print_with(config, seed, json, &now, &mut out).and_then(|()| out.flush()) {
        Ok(()) => ExitStatus::Success,
        // A reader that has seen enough (`| head`) is not an error.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitStatus::Success,
        Err(e) => {
            eprintln!("retry: cannot write the schedule: {e}");
            ExitStatus::Usage
        }
    }
}

/// Who holds the lock, the run that did `--once`'s key, why a Redis could not be asked.
type LookedAt = (Option<dryrun::LockNow>, Option<DoneBefore>, Option<String>);

/// What the dry run says of `--lock` or `--once`, looked at, never taken: who holds it (`None`
/// when there is nothing to look at), the run that did `--once`'s key when it is done, and why
/// a Redis could not be asked; `Err` with the line to exit 125 with when a run could not use it.
fn look_at_lock(config: &Config) -> Result<LookedAt, String> {
    let Some(spec) = config.lock.as_ref() else {
        return Ok((None, None, None));
    };
    let since = |once: &crate::policy::lock::OnceSpec| {
        let within = u64::try_from(once.within.as_millis()).unwrap_or(u64::MAX);
        unix_ms(SystemTime::now()).saturating_sub(within)
    };
    // A key bound to another command line makes a run a usage error: the dry run too.
    let bound_here = |bound: &str| {
        let theirs = spec
            .once
            .as_ref()
            .filter(|o| !bound.is_empty() && o.command != bound);
        match theirs {
            Some(_) => Err(format!(
                "error: {}",
                crate::report::words::once_bound_elsewhere(&spec.name)
            )),
            None => Ok(()),
        }
    };
    match (&spec.lease, &spec.once) {
        (Some(at), None) => runner::peek_lease(at).map(|(holder, why)| (Some(holder), None, why)),
        (Some(at), Some(_)) => {
            let ((holder, done, bound), why) = runner::peek_once_lease(at)?;
            bound_here(&bound)?;
            Ok((Some(holder), done, why))
        }
        (None, once) => {
            let place = crate::store::run_lock::place_of(spec);
            let peeked = match once {
                Some(once) => crate::store::run_lock::peek_once(&place, &spec.name, since(once)),
                None => crate::store::run_lock::peek(&place, &spec.name)
                    .map(|h| (h, None, String::new())),
            };
            let (holder, done, bound) =
                peeked.map_err(|e| format!("error: {} {}: {e}", spec.option(), spec.name))?;
            bound_here(&bound)?;
            Ok((Some(holder), done, None))
        }
    }
}

/// The quota's tokens now, read without taking or adding any, or why they cannot be read;
/// `Err` is the line of a Redis server that refuses the password or the user, which a
/// deploy check must not pass.
fn quota_now(spec: &QuotaSpec, throttle: Option<ThrottleSpec>) -> Result<dryrun::QuotaNow, String> {
    let now = unix_ms(SystemTime::now());
    match shared::peek(spec, throttle, now, &|name| std::env::var_os(name)) {
        Ok(update) => Ok(Ok((update.tokens, update.admission))),
        Err(shared::Unread {
            refused: Some(code),
            ..
        }) => Err(format!(
            "--quota {}: the Redis server {}: runs would not share the quota",
            spec.address(),
            crate::report::words::refusal_words(code)
        )),
        Err(unread) => Ok(Err(unread.why)),
    }
}

/// `retry --stats FILE` (docs/flaky.md#history-and-statistics): summarises a history file on
/// standard output; a file that cannot be read is one line and 125, a damaged line is counted and
/// named.
fn stats(
    config: &Config,
    file: &std::path::Path,
    since: Option<std::time::Duration>,
) -> ExitStatus {
    use crate::report::stats::{Options, print};
    let place = crate::store::place::Place::of(file);
    let file = &match &place {
        Ok(place) => place.shown(),
        Err(_) => file.to_path_buf(),
    };
    let shown = crate::text::quote(file.as_os_str(), config.charset);
    let read = match place {
        Ok(crate::store::place::Place::Redis(address)) => fleet_history(&address),
        _ => crate::store::history::read_for_stats(file),
    };
    let reading = match read {
        Ok(reading) => reading,
        Err(why) => {
            eprintln!("retry: --stats {shown}: {}", crate::report::printable(&why));
            return ExitStatus::Usage;
        }
    };
    let json = config.log.format == crate::config::LogFormat::Json;
    let options = Options {
        since,
        json,
        ascii: config.charset.is_ascii(),
        width: terminal_width(|name| std::env::var_os(name)),
    };
    let mut out = crate::report::charset::Output::with(io::stdout().lock(), options.ascii, json);
    match print(file, &reading, &options, SystemTime::now(), &mut out).and_then(|()| out.flush()) {
        Ok(()) => ExitStatus::Success,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitStatus::Success,
        Err(e) => {
            eprintln!("retry: cannot write the statistics: {e}");
            ExitStatus::Usage
        }
    }
}

/// `--simulate` (docs/simulation.md#simulation): runs the simulation and prints it; runs nothing
/// else, and touches no quota store (the simulated clients share a bucket of their own).
fn simulate(config: &Config, sim: &config::Simulation, seed: u64) -> ExitStatus {
    use crate::report::simulate::{Results, print};
    let json = config.log.format == crate::config::LogFormat::Json;
    let results = if sim.compare {
        Results::Compare(crate::sim::compare(&config.policy, &sim.scenario, seed))
    } else {
        Results::One(Box::new(crate::sim::simulate(
            &config.policy,
            &sim.scenario,
            seed,
        )))
    };
    let width = terminal_width(|name| std::env::var_os(name));
    let ascii = config.charset.is_ascii();
    let mut out = crate::report::charset::Output::with(io::stdout().lock(), ascii, json);
    match print(config, sim, seed, &results, json, width, &mut out).and_then(|()| out.flush()) {
        Ok(()) => ExitStatus::Success,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitStatus::Success,
        Err(e) => {
            eprintln!("retry: cannot write the simulation: {e}");
            ExitStatus::Usage
        }
    }
}

/// The width that printed charts fit: `COLUMNS` when it holds a number (as `ls` reads it),
/// else the width of the terminal on standard output, else 80, as in a CI log.
fn terminal_width(var: impl Fn(&str) -> Option<OsString>) -> usize {
    let from_env = var("COLUMNS")
        .and_then(|v| v.to_str().and_then(|s| s.trim().parse::<usize>().ok()))
        .filter(|&n| n > 0);
    let from_terminal = || {
        stdio::window_size(io::stdout().as_fd())
            .map(|size| usize::from(size.ws_col))
            .filter(|&n| n > 0)
    };
    from_env
        .or_else(from_terminal)
        .unwrap_or(80)
        .clamp(40, 1000)
}

fn real_run(
    config: &Config,
    args: &[OsString],
    seed: u64,
    start: Moment,
    wall_start: SystemTime,
) -> ExitStatus {
    let run_id = run_id();
    let stderr = stderr::Stderr::new();
    let mut log = match open_log(config, &run_id, start, &stderr) {
        Ok(log) => log,
        Err(status) => return status,
    };
    if let Some(path) = &config.junit {
        if let Err(status) = setup::check_junit(path, &mut log) {
            return status;
        }
    }
    let dead_letter = match &config.dead_letter {
        Some(path) => match dead_letter(config, args, path, &run_id) {
            Ok(letter) => {
                if letter
                    .fleet
                    .as_ref()
                    .is_some_and(|a| a.password().is_some())
                {
                    log.warn(Warning::PasswordInUrl {
                        option: "--dead-letter",
                        variable: crate::store::redis::PASSWORD_VAR,
                    });
                }
                Some(letter)
            }
            Err(e) => {
                log.emit(Event::Error(Failure::DeadLetter {
                    path: path.clone(),
                    why: e.to_string(),
                }));
                return ExitStatus::Usage;
            }
        },
        None => None,
    };
    if let Some(path) = &config.history {
        log = match with_history(config, path, log) {
            Ok(log) => log,
            Err(status) => return status,
        };
    }
    // After the files that may still refuse the run: a report is of a run that began.
    if let Some(path) = &config.junit {
        log = log.with_sink(Box::new(Junit::to_file(path)));
    }
    log = with_outside(config, with_metrics(config, log));
    let signals = match signals::Signals::install() {
        Ok(signals) => signals,
        Err(e) => {
            log.emit(Event::Error(Failure::SignalHandlers(e.to_string())));
            return ExitStatus::Usage;
        }
    };
    let begin = Start {
        seed,
        start,
        wall_start,
        run_id,
        dead_letter,
        keeper: None,
        stderr,
    };
    run_logged(config, log, signals, begin).status()
}

/// The runs of a fleet's history on Redis, each with its host, as `--stats` reads a file's.
fn fleet_history(
    address: &crate::redis_url::RedisAddress,
) -> Result<crate::store::history::Reading, String> {
    use crate::store::history::{Reading, entry_of_line};
    let runs = crate::store::fleet::Fleet::from_env(address, &|name| std::env::var_os(name))
        .runs()
        .map_err(|e| e.to_string())?;
    let mut reading = Reading::default();
    for (k, (host, line)) in runs.into_iter().enumerate() {
        match entry_of_line(&line) {
            Ok(mut entry) => {
                entry.host = Some(host);
                reading.entries.push(entry);
            }
            Err(why) => reading
                .damaged
                .push(deadletter::Damaged { line: k + 1, why }),
        }
    }
    Ok(reading)
}

/// Runs the command of `config` with the seed given, reporting to `log` (whose sinks may be
/// any: a test collects the events). `retry`'s signals are caught while it runs. This is the
/// run of `real_run` less the dead-letter file.
pub fn run_reported(config: &Config, mut log: Log, seed: u64) -> ExitStatus {
    let (start, wall_start) = (Moment::now(), SystemTime::now());
    let signals = match signals::Signals::install() {
        Ok(signals) => signals,
        Err(e) => {
            log.emit(Event::Error(Failure::SignalHandlers(e.to_string())));
            return ExitStatus::Usage;
        }
    };
    let run_id = log.facts().run_id.clone();
    let begin = Start {
        seed,
        start,
        wall_start,
        run_id,
        dead_letter: None,
        keeper: None,
        stderr: stderr::Stderr::new(),
    };
    run_logged(config, log, signals, begin).status()
}

/// Where this run is recorded if it gives up: the file is created now, so that a path that
/// cannot be written is an error before the command runs, not after it failed. The options
/// kept are those given, less --dead-letter itself, --deadline, which would have passed by
/// the time of a replay, and --junit: a replay writes the report it is asked for. A deadline
/// that bounded the run is kept as the budget it gave the run (`recorded_bound`).
fn dead_letter(
    config: &Config,
    args: &[OsString],
    path: &std::path::Path,
    run_id: &str,
) -> io::Result<DeadLetter> {
    let place = crate::store::place::Place::of(path).map_err(io::Error::other)?;
    // A URL is named without its password, wherever the run names it.
    let shown = place.shown();
    let fleet = match place {
        crate::store::place::Place::File(_) => {
            deadletter::prepare(path)?;
            None
        }
        crate::store::place::Place::Redis(address) => Some(address),
    };
    let run = Record {
        id: run_id.to_string(),
        ts: String::new(),
        label: config.label.clone(),
        cwd: std::env::current_dir().ok().map(PathBuf::into_os_string),
        command: config.command.clone(),
        options: recorded_bound(config, args),
        exit_code: 0,
        reason: String::new(),
        tries: 0,
        duration_ms: 0,
    };
    Ok(DeadLetter {
        path: shown,
        fleet,
        run,
    })
}

/// The options a dead letter keeps. When the deadline came before any budget, it is recorded
/// as the budget it gave the run (`--budget=` the deadline less the start), in place of
/// `--budget` and `--deadline`: a replay is bounded as the run was, for as long, where without
/// it a run of `-n 0` would retry for ever.
fn recorded_bound(config: &Config, args: &[OsString]) -> Vec<OsString> {
    use crate::cli::id;
    let limit = config
        .policy
        .limit
        .filter(|l| l.source == crate::policy::LimitSource::Deadline);
    let Some(limit) = limit else {
        return crate::argv::recorded_options(
            args,
            &["dead-letter", id::DEADLINE, "junit", id::PING],
        );
    };
    let mut options = crate::argv::recorded_options(
        args,
        &["dead-letter", id::DEADLINE, id::BUDGET, "junit", id::PING],
    );
    // At least a millisecond, the finest the recorded form keeps: 0 would mean no budget.
    let budget = limit.at.max(Duration::from_millis(1));
    options.push(format!("--{}={}", id::BUDGET, crate::duration::hms(budget)).into());
    options
}
