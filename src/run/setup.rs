//! How a real run is set up: its id, its log, the quota store it shares, and the runner, which
//! runs the command with `retry`'s signals caught; a run of `retry` and each run of a replay
//! start here.

use std::fs::OpenOptions;
use std::io::{self, IsTerminal};
use std::time::SystemTime;

use crate::config::Config;
use crate::exit::ExitStatus;
use crate::outcome::RunOutcome;
use crate::policy::quota::QuotaSpec;
use crate::report::ci::{Ci, Markers};
use crate::report::event::{Event, Failure, Warning};
use crate::report::history::History;
use crate::report::junit::{Junit, ReplayCases};
use crate::report::log::{Log, use_color};
use crate::report::metrics::Metrics;
use crate::report::out::Out;
use crate::report::ping::Ping;
use crate::report::pushgateway::Pushgateway;
use crate::run::clock::{self, Moment};
use crate::run::random;
use crate::run::runner::{self, RunEnd};
use crate::run::signals;
use crate::run::stderr::{Stderr, Withhold};
use crate::run::{process, stdio};
use crate::store::deadletter::{self, DeadLetter};
use crate::store::shared;

/// A new run's id, shaped like a UUID: every try gets it as `RETRY_RUN_ID`.
pub(crate) fn run_id() -> String {
    let id = random::random_u128();
    let hex = format!("{id:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// What a run starts from, besides its options.
pub(crate) struct Start {
    pub seed: u64,
    pub start: Moment,
    pub wall_start: SystemTime,
    pub run_id: String,
    pub dead_letter: Option<DeadLetter>,
    /// A replay's lease on the run, renewed while it runs.
    pub keeper: Option<crate::run::keep::Kept>,
    /// `retry`'s own standard error, which the tries' output passes through.
    pub stderr: Stderr,
}

/// The log of a run, to standard error (`stderr`) or --log-file; when that file cannot be
/// opened, the error is logged to standard error and the run ends with 125.
pub(crate) fn open_log(
    config: &Config,
    run_id: &str,
    start: Moment,
    stderr: &Stderr,
) -> Result<Log, ExitStatus> {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let stderr_tty = io::stderr().is_terminal();
    let ci = Ci::from_env(|name| std::env::var_os(name));
    let (out, color, opened): (Box<dyn Out>, bool, io::Result<()>) = match &config.log.file {
        Some(path) => match OpenOptions::new().create(true).append(true).open(path) {
            Ok(file) => (
                Box::new(file),
                use_color(config.log.color, false, no_color),
                Ok(()),
            ),
            // The failure is logged where the log would go without --log-file.
            Err(e) => (Box::new(stderr.lines(Withhold::Never)), false, Err(e)),
        },
        None => (
            Box::new(stderr.lines(log_withholding(config))),
            use_color(config.log.color, stderr_tty, no_color),
            Ok(()),
        ),
    };
    let on_stderr = opened.is_err() || config.log.file.is_none();
    let clock = clock::stamps(start);
    let log = Log::new(out, config, color, run_id.to_string(), clock);
    let mut log = log.with_ci(ci, on_stderr, markers_of(config, stderr));
    if let (Err(e), Some(path)) = (opened, &config.log.file) {
        log.emit(Event::Error(Failure::LogFile {
            path: path.clone(),
            why: e.to_string(),
        }));
        return Err(ExitStatus::Usage);
    }
    Ok(log)
}

/// Whether the `--junit` report may go to `path` (docs/ci.md#junit-reports): looked at before
/// the command runs, so that a symbolic link, a directory or anything but a regular file there
/// is refused at once (logged, 125), not found when the run is over.
pub(crate) fn check_junit(path: &std::path::Path, log: &mut Log) -> Result<(), ExitStatus> {
    crate::report::junit::check(path).map_err(|e| {
        log.emit(Event::Error(Failure::Junit {
            path: path.to_path_buf(),
            why: e.to_string(),
        }));
        ExitStatus::Usage
    })
}

/// Standard error as the log writes it: withheld with the rest of what `--output-on-failure` withholds,
/// but for the JSON log, which machines read as it comes (docs/output.md#output-on-failure).
fn log_withholding(config: &Config) -> Withhold {
    match config.output_on_failure && config.log.format == crate::config::LogFormat::Human {
        true => Withhold::WithTheRest,
        false => Withhold::Never,
    }
}

/// The CI markers, written where the log's lines go on standard error; the annotation of the
/// run's end apart, which `--output-on-failure` passes on after a success too.
fn markers_of(config: &Config, stderr: &Stderr) -> Markers {
    let (out, announce) = match config.output_on_failure {
        true => (Withhold::WithTheRest, Withhold::Always),
        false => (Withhold::Never, Withhold::Never),
    };
    Markers::writing_to(
        Box::new(stderr.lines(out)),
        Box::new(stderr.lines(announce)),
    )
}

/// The end of the budget of a run that started at `start`, if it has one, on the clock that the
/// Redis client and the history's lock wait read.
pub(crate) fn budget_end(config: &Config, start: Moment) -> Option<std::time::Instant> {
    let limit = config.policy.limit?;
    std::time::Instant::now().checked_add(limit.at.saturating_sub(start.elapsed()))
}

/// Opens the store of `--quota`; when it cannot be used, warns and returns `None`: the run's
/// own limits still apply (docs/herd.md#shared-retry-quota). A Redis quota that cannot be reached
/// is kept on this machine instead.
fn open_quota(
    spec: &QuotaSpec,
    until: Option<std::time::Instant>,
    log: &mut Log,
) -> Option<runner::SharedQuota> {
    if spec.has_password() {
        log.warn(Warning::PasswordInUrl {
            option: "--quota",
            variable: crate::store::redis::PASSWORD_VAR,
        });
    }
    match shared::Shared::open(spec, until, &|name| std::env::var_os(name)) {
        Ok(store) => Some(runner::SharedQuota {
            spec: spec.clone(),
            store,
        }),
        Err(why) => {
            log.warn(Warning::QuotaUnusable {
                quota: spec.shown(),
                why,
            });
            None
        }
    }
}

/// Runs the command of `config` to its end, its log open and `retry`'s signals caught.
pub(crate) fn run_logged(
    config: &Config,
    log: Log,
    signals: signals::Signals,
    begin: Start,
) -> RunEnd {
    let (mut log, trace) = crate::run::trace::attach(config, log);
    let countdown = io::stderr().is_terminal()
        && config.log.file.is_none()
        && !config.log.quiet
        && !config.output_on_failure
        && config.log.format == crate::config::LogFormat::Human;
    // Under CI the try's output and retry's lines meet in one log, which must never show
    // them glued on one line: retry sees what the try writes beside its lines.
    let relay = log.facts().ci.system.is_some();
    let mut stdio = match stdio::RunIo::new(config, relay, &begin.stderr) {
        Ok(stdio) => stdio,
        Err(e) => {
            log.emit(Event::Error(Failure::Internal(format!("{e:#}"))));
            // The records of a run that could not start are written all the same.
            let outcome = RunOutcome::before_any_try(ExitStatus::Usage);
            log.emit(Event::RunEnded(Box::new(outcome.clone())));
            return RunEnd::new(outcome, signals);
        }
    };
    stdio.set_dispositions(signals.dispositions());
    process::become_subreaper();
    let around = runner::Surroundings {
        run_id: begin.run_id,
        start: begin.start,
        wall_start: begin.wall_start,
        terminal: process::Terminal::detect(),
        inherited: process::Inherited::now(),
        outer: runner::OuterRun::from_env(|name| std::env::var_os(name)),
        quota: config.quota.as_ref().and_then(|spec| {
            let until = budget_end(config, begin.start);
            open_quota(spec, until, &mut log)
        }),
        dead_letter: begin.dead_letter,
        keeper: begin.keeper,
        lock: config.lock.as_ref().map(crate::store::run_lock::place_of),
        trace,
    };
    let runner = runner::Runner::new(config, log, signals, stdio, around).with_countdown(countdown);
    runner.run(begin.seed)
}

/// Runs one recorded run again for `--replay`, under its own id, with the signal handling of
/// the replay; it is never recorded again (the replay keeps it pending instead). With the
/// replay's `--junit`, its case goes to `junit`, for the replay's report. A replay of a fleet's
/// store hands its claim on the run as `keeper`, renewed while the run runs. The replay hands
/// over its standard error, `stderr`.
pub(crate) fn run_again(
    config: &Config,
    id: &str,
    signals: signals::Signals,
    junit: Option<&ReplayCases>,
    keeper: Option<crate::run::keep::Kept>,
    stderr: &Stderr,
) -> RunEnd {
    let start = Moment::now();
    let wall_start = SystemTime::now();
    // The replay writes one set of step outputs for all its runs, and one report.
    let log = match open_log(config, id, start, stderr) {
        Ok(log) => match junit {
            Some(shared) => log
                .leaving_step_outputs()
                .with_sink(Box::new(Junit::to_replay(shared.clone()))),
            None => log.leaving_step_outputs(),
        },
        Err(status) => {
            return RunEnd::new(RunOutcome::before_any_try(status), signals);
        }
    };
    // The run's --history, recorded or given to the replay, gets its line as any run's does.
    let log = match &config.history {
        Some(path) => match with_history(config, path, log) {
            Ok(log) => log,
            Err(status) => {
                return RunEnd::new(RunOutcome::before_any_try(status), signals);
            }
        },
        None => log,
    };
    let log = with_outside(config, with_metrics(config, log));
    let begin = Start {
        seed: config.seed.unwrap_or_else(random::random_u64),
        start,
        wall_start,
        run_id: id.to_string(),
        dead_letter: None,
        keeper,
        stderr: stderr.clone(),
    };
    run_logged(config, log, signals, begin)
}

/// The log, with the `--history` sink added: the file is opened now, so that a file that
/// cannot be written, or that retry must not trust (docs/files.md#files-that-outlive-a-run), is an
/// error (logged, 125) before the command runs.
pub(crate) fn with_history(
    config: &Config,
    path: &std::path::Path,
    mut log: Log,
) -> Result<Log, ExitStatus> {
    use crate::store::place::Place;
    if let Ok(Place::Redis(address)) = Place::of(path) {
        if address.password().is_some() {
            log.warn(Warning::PasswordInUrl {
                option: "--history",
                variable: crate::store::redis::PASSWORD_VAR,
            });
        }
        let fleet = crate::store::fleet::Fleet::from_env(&address, &|name| std::env::var_os(name));
        let shown = Place::Redis(address).shown();
        let history = History::new(shown, config.command.clone(), None).on(fleet);
        return Ok(log.with_sink(Box::new(history)));
    }
    if let Err(e) = crate::store::record::prepare_for(path, "run") {
        log.emit(Event::Error(Failure::History {
            path: path.to_path_buf(),
            why: e.to_string(),
        }));
        return Err(ExitStatus::Usage);
    }
    // Still recorded, but --stats would refuse the whole file.
    let bytes = std::fs::symlink_metadata(path).map_or(0, |m| m.len());
    if bytes > deadletter::MAX_FILE {
        log.warn(Warning::HistoryTooLarge {
            path: path.to_path_buf(),
            bytes,
        });
    }
    // The wait for the file's lock ends with the budget.
    let until = config.policy.limit.map(|limit| limit.at);
    let history = History::new(path.to_path_buf(), config.command.clone(), until);
    Ok(log.with_sink(Box::new(history)))
}

/// The log, with the `--metrics` sink added last, so that the run's metrics are merged after its
/// records are written (docs/dashboards.md#metrics). Nothing is checked now: a file that cannot
/// be written is a warning when the run ends, and never changes the run.
pub(crate) fn with_metrics(config: &Config, log: Log) -> Log {
    match &config.metrics {
        Some(path) => {
            let until = config.policy.limit.map(|limit| limit.at);
            let metrics = Metrics::new(path.clone(), &config.command, until);
            log.with_sink(Box::new(metrics))
        }
        None => log,
    }
}

/// The log, with the sinks of `--pushgateway` and `--ping` added after the others: what the
/// world outside is told of the run comes after its records (docs/dashboards.md). Nothing is
/// sent now: a URL that cannot be reached is a warning, and never changes the run.
pub(crate) fn with_outside(config: &Config, mut log: Log) -> Log {
    let until = config.policy.limit.map(|limit| limit.at);
    if let Some(url) = &config.outside.pushgateway {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let sink = Pushgateway::new(url.clone(), &config.command, until, &var);
        log = log.with_sink(Box::new(sink));
    }
    if let Some(url) = &config.outside.ping {
        log = log.with_sink(Box::new(Ping::new(url.clone(), until)));
    }
    log
}
