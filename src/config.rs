//! From parsed flags to one validated `Config`: the cross-field checks, the usage errors and
//! the run's `Mode`. Pure apart from the time of day and the character set it is handed
//! (`parse_in`); `parse` reads the character set from the locale.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::cli::{BackoffKind, ClassifyArgs, Cli, FlakyArgs, FlakyMode, JitterKind, Reading};
pub use crate::cli::{ColorWhen, LogFormat, StdinMode};
use crate::policy::lock::LockSpec;
use crate::policy::quota::QuotaSpec;
use crate::policy::throttle::ThrottleSpec;
use crate::policy::{
    Backoff, Classifier, Flaky, Item, Jitter, Limit, List, Pattern, Policy, RepeatPolicy, Signal,
    WaitPolicy,
};
use crate::store::open::same_file;
use crate::text::{Charset, printable, quote, unprintable};

mod hint;
mod junit;
mod lock;
mod once;
mod outside;
mod records;
mod simulation;

pub use outside::Outside;
pub use records::Picks;
pub use simulation::Simulation;

/// A usage error: one line for the user, exit status 125.
#[derive(Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// What the parser did instead of producing a `Config`.
#[derive(Debug)]
pub enum ParseOutcome {
    Run(Box<Config>),
    /// `--help` or `--version`: print it (`clap::Error::print`) and exit 0.
    Info(clap::Error),
    Usage(UsageError),
}

/// How the log is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    pub quiet: bool,
    pub verbose: bool,
    pub format: LogFormat,
    pub file: Option<PathBuf>,
    pub color: ColorWhen,
}

/// What a run does, chosen once from the options (`--dry-run`, `--simulate`, `--replay`).
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// Run the command, and again as the policy says.
    Run,
    /// `--dry-run`: print the schedule the options give, and run nothing (docs/dry-run.md#dry-run).
    DryRun,
    /// `--simulate`: simulate a fleet following the policy, and run nothing
    /// (docs/simulation.md#simulation).
    Simulate(Simulation),
    /// `--replay FILE`: run the pending runs of a dead-letter file again
    /// (docs/dead-letters.md#dead-letters-and-replay); with `--dry-run`, list them and run nothing.
    Replay {
        file: PathBuf,
        dry_run: bool,
        picks: Picks,
    },
    /// `--forget FILE ID...`: mark pending runs forgotten, and run nothing
    /// (docs/dead-letters.md#picking-forgetting-pruning).
    Forget { file: PathBuf, ids: Vec<String> },
    /// `--prune FILE --older-than DURATION`: rewrite a record file without what is settled or
    /// old (docs/dead-letters.md#pruning).
    Prune { file: PathBuf, older_than: Duration },
    /// `--stats FILE`: summarise a history file (docs/flaky.md#history-and-statistics), counting
    /// only the runs of the last `since` when given.
    Stats {
        file: PathBuf,
        since: Option<Duration>,
    },
}

/// Everything a run needs, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub policy: Policy,
    pub signal: Signal,
    pub kill_after: Duration,
    pub foreground: bool,
    /// `-t N` with no unit: a timeout of N seconds, which a user of Debian's retry may have meant
    /// as N tries; the run warns once (docs/options.md#timeouts-and-signals).
    pub timeout_without_unit: Option<String>,
    /// `-d N` with no unit: the base of waits that the backoff grows and the jitter draws from,
    /// which a user of Debian's retry may have meant as a fixed wait of N seconds; the run
    /// warns once, as for `-t N`.
    pub delay_without_unit: Option<String>,
    pub seed: Option<u64>,
    pub log: LogConfig,
    /// `--label`: the run's name in the log, the JSON events and the CI output.
    pub label: Option<String>,
    /// `--delay-from-output`: the regex whose first group reads the wait a failed try's output
    /// asks for (docs/herd.md#pushback).
    pub delay_from_output: Option<Pattern>,
    /// `--stagger`: the most the first try waits; `None` for 0.
    pub stagger: Option<Duration>,
    /// `--quota`: the retry quota shared with other runs.
    pub quota: Option<QuotaSpec>,
    /// `--throttle`: tries held back while the quota's runs mostly fail.
    pub throttle: Option<ThrottleSpec>,
    /// `--lock` and `--lock-wait`: one run at a time holding the name on this machine.
    pub lock: Option<LockSpec>,
    /// What the run does: run the command, print its schedule, simulate a fleet or replay.
    pub mode: Mode,
    /// `--dead-letter`: where a run that gives up is recorded
    /// (docs/dead-letters.md#dead-letters-and-replay).
    pub dead_letter: Option<PathBuf>,
    /// `--history`: where every run is recorded (docs/flaky.md#history-and-statistics).
    pub history: Option<PathBuf>,
    /// `--junit`: where the JUnit XML report of the run goes (docs/ci.md#junit-reports).
    pub junit: Option<PathBuf>,
    /// `--metrics`: the Prometheus textfile the run's metrics are merged into
    /// (docs/dashboards.md#metrics).
    pub metrics: Option<PathBuf>,
    /// `--pushgateway` and `--ping` (docs/dashboards.md): where the run is reported to.
    pub outside: Outside,
    /// `--flaky`: what a run that succeeded after a failed try exits with
    /// (docs/flaky.md#failing-a-flaky-run).
    pub flaky: Flaky,
    /// `--repeat`: the command run many times in a row, in place of the retry policy
    /// (docs/flaky.md#repeating-a-command).
    pub repeat: Option<RepeatPolicy>,
    pub stdin: StdinMode,
    pub buffer_stdout: bool,
    /// `--output-on-failure`: what the run prints is withheld, and passed on only if it fails
    /// (docs/output.md#output-on-failure). It holds standard output as `buffer_stdout` does.
    pub output_on_failure: bool,
    pub on_retry: Option<String>,
    pub on_give_up: Option<String>,
    pub command: Vec<OsString>,
    /// The character set of what the run prints (docs/log.md#human-format).
    pub charset: Charset,
}

impl LogConfig {
    /// The log options of `cli`, `--log-file` taken out of it.
    fn of(cli: &mut Cli) -> LogConfig {
        LogConfig {
            quiet: cli.quiet,
            verbose: cli.verbose,
            format: cli.log_format,
            file: cli.log_file.take(),
            color: cli.color,
        }
    }
}

/// Parses the arguments (the program name first), for output in the character set of the
/// locale that the environment names (`LC_ALL`, `LC_CTYPE`, `LANG`): `parse_in` with it.
pub fn parse<I, T>(args: I, now: SystemTime) -> ParseOutcome
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let charset = Charset::of_locale(|name| std::env::var_os(name));
    parse_in(args, now, charset, Reading::Again)
}

/// Parses the arguments (the program name first) as `reading` says. `now` is the time the run
/// starts, used to turn `--deadline` into time since start; `charset` is the character set of
/// what the run prints, usage errors included.
pub fn parse_in<I, T>(args: I, now: SystemTime, charset: Charset, reading: Reading) -> ParseOutcome
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    match Cli::try_parse_from(&args, reading) {
        // The words after `--forget FILE` are ids, not a command: a short one is told as such.
        Ok(cli) => {
            match hint::for_command(&args, &cli.command).filter(|_| cli.records.forget.is_none()) {
                Some(line) => ParseOutcome::Usage(UsageError(line)),
                None => match Config::from_cli(cli, now, charset) {
                    Ok(config) => ParseOutcome::Run(Box::new(config)),
                    Err(e) => ParseOutcome::Usage(e),
                },
            }
        }
        Err(e) => match e.kind() {
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                // `--help` next to a word that is wrong is a usage error, wherever it stands.
                match crate::cli::check_every_word(&args) {
                    Ok(()) => ParseOutcome::Info(e),
                    Err(e) => ParseOutcome::Usage(usage(&e, &args, charset)),
                }
            }
            _ => ParseOutcome::Usage(usage(&e, &args, charset)),
        },
    }
}

/// Clap's error `e` for the command line `args`, as one line.
fn usage(e: &clap::Error, args: &[OsString], charset: Charset) -> UsageError {
    let line = match e.kind() {
        clap::error::ErrorKind::InvalidUtf8 => not_utf8(args, charset),
        _ => None,
    };
    UsageError(line.unwrap_or_else(|| one_line(e, hint::for_error(e, args))))
}

/// The option whose value is not UTF-8, and the value: clap says only that some argument is
/// not. The command's own words may hold any bytes, so it is the first such word among the
/// options: `--NAME=VALUE` itself, or the value after the option.
fn not_utf8(args: &[OsString], charset: Charset) -> Option<String> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let words = args.get(1..)?;
    let at = words.iter().position(|w| w.to_str().is_none())?;
    let word = words[at].as_bytes();
    let (option, value) = match word.iter().position(|&b| b == b'=') {
        Some(eq) if word.starts_with(b"--") => (
            String::from_utf8_lossy(&word[..eq]).into_owned(),
            OsString::from_vec(word[eq + 1..].to_vec()),
        ),
        _ => (
            words[..at].last()?.to_string_lossy().into_owned(),
            words[at].clone(),
        ),
    };
    let option = printable(&option);
    let value = quote(&value, charset);
    Some(format!(
        "invalid value {value} for '{option}': not UTF-8 text"
    ))
}

/// Clap's error as one line: what is wrong, the option and the value, the valid values, and
/// the `hint` toward what was meant, else clap's suggestion (`did you mean --timeout?`), which
/// it would print on later lines.
fn one_line(e: &clap::Error, hint: Option<String>) -> String {
    use clap::error::{ContextKind, ContextValue};
    let rendered = rendered(e);
    let mut line = rendered
        .lines()
        .next()
        .unwrap_or("invalid arguments")
        .trim_start_matches("error: ")
        .to_string();
    // An option that conflicts with several: clap lists them on lines of their own.
    if let (Some(head), Some(ContextValue::Strings(prior))) =
        (line.strip_suffix(':'), e.get(ContextKind::PriorArg))
    {
        let prior: Vec<String> = prior.iter().map(|p| format!("'{p}'")).collect();
        line = format!("{head} {}", prior.join(" or "));
    }
    // An option that needs another (`--keep-going` without `--repeat`): clap lists the missing
    // ones on lines of their own.
    if let (Some(head), Some(ContextValue::Strings(missing))) =
        (line.strip_suffix(':'), e.get(ContextKind::InvalidArg))
    {
        let missing: Vec<String> = missing.iter().map(|m| format!("'{m}'")).collect();
        line = format!("{head}: {}", missing.join(", "));
    }
    if let Some(ContextValue::Strings(values)) = e.get(ContextKind::ValidValue) {
        if !values.is_empty() {
            line += &format!(" (expected one of: {})", values.join(", "));
        }
    }
    match hint {
        Some(hint) => format!("{line} ({hint})"),
        None => line + &hint::suggestions(e),
    }
}

/// Clap's rendering of the error, or the line written anew when the value in it needs
/// escaping. A value with a line break in it must not break the one line (nor forge another),
/// and clap's rendering drops escape sequences from it; nor may it show a Redis password
/// (docs/files.md#files-that-outlive-a-run).
fn rendered(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    if let (Some(ContextValue::String(value)), Some(ContextValue::String(arg))) = (
        e.get(ContextKind::InvalidValue),
        e.get(ContextKind::InvalidArg),
    ) {
        let hidden = crate::policy::quota::hide_password(value);
        if hidden.is_some() || value.chars().any(unprintable) {
            let value = printable(hidden.as_deref().unwrap_or(value));
            return match std::error::Error::source(e) {
                Some(why) => format!("invalid value '{value}' for '{arg}': {why}"),
                None => format!("invalid value '{value}' for '{arg}'"),
            };
        }
    }
    e.render().to_string()
}

impl Config {
    pub fn from_cli(mut cli: Cli, now: SystemTime, charset: Charset) -> Result<Config, UsageError> {
        check_command(&cli)?;
        let records = records_mode(&cli);
        let picks = Picks::of(&cli);
        let log = LogConfig::of(&mut cli);
        let repeat = repeat(&cli);
        let waits = wait_policy(&cli)?;
        let lock = once::lock_or_once(&cli).map_err(UsageError)?;
        let classifier = classifier(cli.classify)?;
        // 0 is no limit, as with `timeout 0`: a limit of nothing would stop every try at once.
        let budget = cli.budget.filter(|b| !b.is_zero());
        let mut policy = Policy {
            max_tries: max_tries(cli.tries, repeat),
            waits,
            classifier,
            timeout: cli.timeout.filter(|t| !t.is_zero()),
            limit: Limit::earliest(budget, deadline_in(cli.deadline, now)?),
            consecutive: cli.consecutive,
        };
        check_consecutive(&policy)?;
        if let (Some(throttle), None) = (cli.throttle, &cli.quota) {
            return Err(UsageError(format!(
                "'--throttle {throttle}' needs --quota NAME: the figures it decides on are kept in the quota's store, shared by the runs that name it"
            )));
        }
        let stagger = stagger(cli.stagger, policy.limit)?;
        let simulate =
            simulation::simulation(&cli.simulate, stagger, cli.quota.as_ref(), cli.throttle)
                .map_err(UsageError)?;
        if simulate.as_ref().is_some_and(|s| s.until_success) {
            policy.max_tries = None;
        }
        let mode = match records {
            Some(mode) => mode,
            None => Mode::chosen(
                &cli.flaky,
                cli.dry_run,
                cli.replay.as_ref().map(|file| (file, picks)),
                simulate.as_ref(),
            ),
        };
        Ok(Config {
            policy,
            signal: cli.signal,
            kill_after: cli.kill_after,
            foreground: cli.foreground,
            timeout_without_unit: cli.timeout_without_unit,
            delay_without_unit: cli.delay_without_unit,
            seed: cli.seed,
            log,
            label: cli.label,
            delay_from_output: cli.delay_from_output,
            stagger,
            quota: cli.quota,
            throttle: cli.throttle,
            lock,
            mode,
            dead_letter: cli.dead_letter,
            history: cli.flaky.history,
            junit: cli.junit,
            metrics: cli.metrics,
            outside: Outside::of(cli.pushgateway, cli.ping).map_err(UsageError)?,
            flaky: flaky(cli.flaky.flaky),
            repeat,
            stdin: cli.stdin,
            buffer_stdout: cli.buffer_stdout || cli.output_on_failure,
            output_on_failure: cli.output_on_failure,
            on_retry: cli.on_retry,
            on_give_up: cli.on_give_up,
            command: cli.command,
            charset,
        })
    }

    /// Whether the run prints what it would do and runs nothing: `--dry-run`, of the schedule
    /// or of a replay.
    pub fn is_dry_run(&self) -> bool {
        matches!(self.mode, Mode::DryRun | Mode::Replay { dry_run: true, .. })
    }

    /// The fleet to simulate, in the mode `--simulate`.
    pub fn simulation(&self) -> Option<&Simulation> {
        match &self.mode {
            Mode::Simulate(simulation) => Some(simulation),
            _ => None,
        }
    }
}

impl Mode {
    /// The mode the options name; `--simulate` and `--stats` conflict with the others
    /// (cli.rs), and `--dry-run` with `--replay` lists what the replay would run.
    fn chosen(
        flaky: &FlakyArgs,
        dry_run: bool,
        replay: Option<(&PathBuf, Picks)>,
        simulate: Option<&Simulation>,
    ) -> Mode {
        if let Some(file) = &flaky.stats {
            return Mode::Stats {
                file: file.clone(),
                since: flaky.since,
            };
        }
        match (replay, simulate) {
            (Some((file, picks)), _) => Mode::Replay {
                file: file.clone(),
                dry_run,
                picks,
            },
            (None, Some(simulation)) => Mode::Simulate(simulation.clone()),
            (None, None) if dry_run => Mode::DryRun,
            (None, None) => Mode::Run,
        }
    }
}

/// The mode of `--forget FILE ID...` or `--prune FILE`, when given.
fn records_mode(cli: &Cli) -> Option<Mode> {
    if let Some(file) = &cli.records.forget {
        return Some(Mode::Forget {
            file: file.clone(),
            ids: cli
                .command
                .iter()
                .map(|w| w.to_string_lossy().into_owned())
                .collect(),
        });
    }
    let file = cli.records.prune.as_ref()?;
    Some(Mode::Prune {
        file: file.clone(),
        older_than: cli.records.older_than.unwrap_or_default(),
    })
}

/// The tries at most: `--tries`, 0 for no limit; a repeat's `N`, of which a try shows it is one
/// (`RETRY_MAX_TRIES`, `try 3/50`).
fn max_tries(tries: u64, repeat: Option<RepeatPolicy>) -> Option<u64> {
    match repeat {
        Some(repeat) => repeat.runs,
        None => (tries > 0).then_some(tries),
    }
}

/// `--flaky` as the policy names it.
fn flaky(mode: FlakyMode) -> Flaky {
    match mode {
        FlakyMode::Pass => Flaky::Pass,
        FlakyMode::Warn => Flaky::Warn,
        FlakyMode::Fail => Flaky::Fail,
    }
}

/// `--repeat N` and what shapes it: `--keep-going`, and `--delay` when it was given.
fn repeat(cli: &Cli) -> Option<RepeatPolicy> {
    let runs = cli.flaky.repeat?;
    Some(RepeatPolicy {
        runs: (runs > 0).then_some(runs),
        keep_going: cli.flaky.keep_going,
        delay: match cli.flaky.delay_given {
            true => cli.delay,
            false => Duration::ZERO,
        },
    })
}

/// The command, given where the mode needs one and only there: `--replay` runs the commands
/// its file recorded, `--stats` reads a file, and the log cannot go to the file of either
/// nor to the dead-letter or history file.
fn check_command(cli: &Cli) -> Result<(), UsageError> {
    if cli.replay.is_some() && !cli.command.is_empty() {
        return Err(UsageError(
            "--replay runs the commands its FILE recorded: it takes no command (see --help)".into(),
        ));
    }
    if cli.flaky.stats.is_some() && !cli.command.is_empty() {
        return Err(UsageError(
            "--stats reads its FILE and runs nothing: it takes no command (see --help)".into(),
        ));
    }
    records::no_url_as_a_path(cli).map_err(UsageError)?;
    records::check_words(cli).map_err(UsageError)?;
    same_file_as_the_log(cli)?;
    records::same_record_file(cli).map_err(UsageError)?;
    junit::same_file_as_another(cli).map_err(UsageError)?;
    records::metrics_beside_another(cli).map_err(UsageError)?;
    if cli.flaky.keep_going && cli.flaky.repeat.is_none() {
        return Err(UsageError(
            "--keep-going goes with --repeat N: it runs all N tries whatever fails (see --help)"
                .into(),
        ));
    }
    if cli.flaky.since.is_some() && cli.flaky.stats.is_none() {
        return Err(UsageError(
            "--since goes with --stats FILE: it keeps the recent runs of the history (see --help)"
                .into(),
        ));
    }
    let runs_nothing = cli.dry_run
        || cli.replay.is_some()
        || cli.simulate.simulate
        || cli.flaky.stats.is_some()
        || cli.records.forget.is_some()
        || cli.records.prune.is_some();
    if cli.command.is_empty() && !runs_nothing {
        // Debian's retry and many programs print their version for -v; here it is --verbose.
        let hint = if cli.verbose {
            " (-v is --verbose; the version is -V)"
        } else {
            ""
        };
        return Err(UsageError(format!(
            "no command given: usage is retry [OPTIONS] -- COMMAND [ARG]... (see --help){hint}"
        )));
    }
    Ok(())
}

/// The waits between tries: `--backoff`, `--delay`, `--max-delay` and `--jitter`, or the list
/// of `--delays`.
fn wait_policy(cli: &Cli) -> Result<WaitPolicy, UsageError> {
    // Listed waits are meant as they are written (Laravel's `$backoff = [2, 4]`); other
    // waits are jittered unless asked not to be, so that clients failing together spread out.
    let default_jitter = if cli.delays.is_some() {
        JitterKind::None
    } else {
        JitterKind::Full
    };
    let jitter = match cli.jitter.unwrap_or(default_jitter) {
        JitterKind::None => Jitter::None,
        JitterKind::Full => Jitter::Full,
        JitterKind::Equal => Jitter::Equal,
        JitterKind::Decorrelated => Jitter::Decorrelated,
    };
    let backoff = match (&cli.delays, cli.backoff) {
        (Some(_), _) if jitter == Jitter::Decorrelated => {
            return Err(UsageError(
                "--jitter decorrelated cannot be used with --delays: decorrelated jitter computes its own waits".into(),
            ));
        }
        (Some(list), _) => Backoff::List(list.0.clone()),
        (None, BackoffKind::Exponential) => Backoff::Exponential { factor: cli.factor },
        (None, BackoffKind::Linear) => Backoff::Linear,
        (None, BackoffKind::Constant) => Backoff::Constant,
    };
    Ok(WaitPolicy {
        backoff,
        delay: cli.delay,
        max_delay: cli.max_delay,
        jitter,
    })
}

/// `--deadline` as time since `now`, the start of the run; a time already passed is an error.
fn deadline_in(
    deadline: Option<SystemTime>,
    now: SystemTime,
) -> Result<Option<Duration>, UsageError> {
    let Some(at) = deadline else {
        return Ok(None);
    };
    match at.duration_since(now) {
        Ok(left) if !left.is_zero() => Ok(Some(left)),
        _ => Err(UsageError(format!(
            "invalid value '{}' for '--deadline <TIME>': that time has already passed",
            humantime::format_rfc3339_seconds(at)
        ))),
    }
}

/// `--consecutive N` needs N tries at least: the successful tries count against `--tries`.
fn check_consecutive(policy: &Policy) -> Result<(), UsageError> {
    match (policy.consecutive, policy.max_tries) {
        (Some(n), Some(tries)) if n > tries => Err(UsageError(format!(
            "invalid value '{n}' for '--consecutive <N>': the successful tries count against \
             --tries, and {n} in a row cannot fit in {tries} tries (give -n {n} or more, or -n 0)"
        ))),
        _ => Ok(()),
    }
}

/// `--stagger` (`None` for 0), which must end before the run's `limit` may: else the first try
/// might never start.
fn stagger(
    stagger: Option<(Duration, String)>,
    limit: Option<Limit>,
) -> Result<Option<Duration>, UsageError> {
    let stagger = stagger.filter(|(s, _)| !s.is_zero());
    if let (Some((most, written)), Some(limit)) = (&stagger, limit) {
        if *most >= limit.at {
            return Err(UsageError(format!(
                "invalid value '{}' for '--stagger <DURATION>': it is not shorter than the {} the run may take, so the first try might never start",
                printable(written),
                crate::duration::hms(limit.at)
            )));
        }
    }
    Ok(stagger.map(|(most, _)| most))
}

/// `--log-file` naming the file of `--dead-letter` or `--replay`
/// (docs/files.md#files-that-outlive-a-run): the log's lines would make every replay of it fail.
/// The same file by another path counts too.
fn same_file_as_the_log(cli: &Cli) -> Result<(), UsageError> {
    let Some(log) = &cli.log_file else {
        return Ok(());
    };
    for (option, path) in [
        ("--dead-letter", &cli.dead_letter),
        ("--replay", &cli.replay),
        ("--history", &cli.flaky.history),
        ("--stats", &cli.flaky.stats),
        ("--forget", &cli.records.forget),
        ("--prune", &cli.records.prune),
    ] {
        if let Some(path) = path.as_ref().filter(|p| same_file(log, p)) {
            return Err(UsageError(format!(
                "--log-file '{}' and {option} '{}' name the same file: the log would make its records unreadable",
                printable(&log.display().to_string()),
                printable(&path.display().to_string())
            )));
        }
    }
    Ok(())
}

/// Which tries succeed, which failures are retried and which stop the run, with the defaults
/// of the lists not given; lists that contradict each other are an error.
fn classifier(args: ClassifyArgs) -> Result<Classifier, UsageError> {
    let success_on = args.success_on.unwrap_or_default();
    if let Err(item) = success_on.codes_only() {
        return Err(UsageError(format!(
            "invalid value '{success_on}' for '--success-on <LIST>': item '{item}' is not an exit code or a range"
        )));
    }
    let stop_on = args.stop_on.unwrap_or_default();
    check_lists(args.retry_on.as_ref(), &stop_on, &success_on)?;
    Ok(Classifier {
        retry_on: args.retry_on,
        stop_on,
        success_on,
        retry_if_output: args.retry_if_output,
        stop_if_output: args.stop_if_output,
        until_output: args.until_output,
    })
}

/// Lists that contradict each other or the defaults (docs/classification.md#the-list-grammar): exit
/// 0 is always a success, so it cannot be retried or stopped on, and a code cannot be both a
/// success and a failure.
fn check_lists(
    retry_on: Option<&List>,
    stop_on: &List,
    success_on: &List,
) -> Result<(), UsageError> {
    for (option, list) in [("--retry-on", retry_on), ("--stop-on", Some(stop_on))] {
        let Some(list) = list else { continue };
        if let Some(item) = list.find_code(0) {
            let why = match item {
                Item::Code(_) => "exit code 0 is always a success".to_string(),
                _ => format!("item '{item}' includes exit code 0, which is always a success"),
            };
            return Err(UsageError(format!(
                "invalid value '{list}' for '{option} <LIST>': {why}"
            )));
        }
        if let Some(code) = list.shared_code(success_on) {
            return Err(UsageError(format!(
                "invalid value '{list}' for '{option} <LIST>': exit code {code} is also in --success-on '{success_on}', and cannot be both a success and a failure"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn config(args: &[&str]) -> Result<Config, String> {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        match parse(std::iter::once("retry").chain(args.iter().copied()), now) {
            ParseOutcome::Run(c) => Ok(*c),
            ParseOutcome::Usage(e) => Err(e.0),
            ParseOutcome::Info(_) => Err("info".into()),
        }
    }

    #[test]
    fn defaults_follow_the_spec() {
        let c = config(&["--", "true"]).unwrap();
        assert_eq!(c.policy.max_tries, Some(3));
        assert_eq!(c.policy.waits.delay, Duration::from_secs(1));
        assert_eq!(c.policy.waits.max_delay, Duration::from_secs(60));
        assert_eq!(c.policy.waits.backoff, Backoff::Exponential { factor: 2.0 });
        assert_eq!(c.policy.waits.jitter, Jitter::Full);
        assert_eq!(c.kill_after, Duration::from_secs(10));
        assert_eq!(c.signal, Signal::TERM);
        assert_eq!(c.policy.timeout, None);
        assert_eq!(c.policy.limit, None);
    }

    #[test]
    fn the_first_non_option_word_starts_the_command() {
        let c = config(&["-n", "2", "ls", "-l", "--tries", "9"]).unwrap();
        assert_eq!(c.command, ["ls", "-l", "--tries", "9"]);
        assert_eq!(c.policy.max_tries, Some(2));
        let c = config(&["--", "-weird-name", "--help"]).unwrap();
        assert_eq!(c.command, ["-weird-name", "--help"]);
    }

    #[test]
    fn zero_tries_means_no_limit() {
        assert_eq!(config(&["-n", "0", "x"]).unwrap().policy.max_tries, None);
    }

    #[test]
    fn zero_timeout_and_zero_budget_mean_none() {
        for zero in ["0", "0s", "0ms", "0.0"] {
            let c = config(&["-t", zero, "-B", zero, "x"]).unwrap();
            assert_eq!(c.policy.timeout, None, "-t {zero}");
            assert_eq!(c.policy.limit, None, "-B {zero}");
        }
        // A deadline still applies when the budget is 0.
        let c = config(&["--deadline", "2023-11-14T22:13:27Z", "-B", "0", "x"]).unwrap();
        assert_eq!(c.policy.limit.unwrap().at, Duration::from_secs(7));
    }

    #[test]
    fn explicit_delays_are_exact_unless_jitter_is_given() {
        let waits = |args: &[&str]| config(args).unwrap().policy.waits;
        let w = waits(&["--delays", "10s,20s", "x"]);
        assert_eq!(w.jitter, Jitter::None);
        assert_eq!(
            w.backoff,
            Backoff::List(vec![Duration::from_secs(10), Duration::from_secs(20)])
        );
        assert_eq!(
            waits(&["--delays", "10s", "-j", "full", "x"]).jitter,
            Jitter::Full
        );
        assert_eq!(
            waits(&["--delays", "10s", "-j", "equal", "x"]).jitter,
            Jitter::Equal
        );
        assert_eq!(waits(&["x"]).jitter, Jitter::Full);
        assert_eq!(waits(&["-j", "none", "x"]).jitter, Jitter::None);
    }

    #[test]
    fn deadline_becomes_time_since_start_and_the_earlier_limit_wins() {
        let c = config(&["--deadline", "2023-11-14T22:13:27Z", "-B", "1h", "x"]).unwrap();
        let limit = c.policy.limit.unwrap();
        assert_eq!(limit.at, Duration::from_secs(7));
        assert_eq!(limit.source, crate::policy::LimitSource::Deadline);
        let err = config(&["--deadline", "2020-01-01T00:00:00Z", "x"]).unwrap_err();
        assert!(
            err.contains("--deadline") && err.contains("already passed"),
            "{err}"
        );
    }

    #[test]
    fn usage_errors_are_one_line_naming_the_option_and_value() {
        for (args, option, value) in [
            (&["-d", "-1s", "x"][..], "--delay", "-1s"),
            (&["-d", "abc", "x"], "--delay", "abc"),
            (&["--factor", "0.5", "x"], "--factor", "0.5"),
            (&["--factor", "NaN", "x"], "--factor", "NaN"),
            (&["-n", "x", "x"], "--tries", "x"),
            (&["--retry-on", "1-", "x"], "--retry-on", "1-"),
            (&["--retry-on", "300", "x"], "--retry-on", "300"),
            (&["--retry-on", "5-2", "x"], "--retry-on", "5-2"),
            (&["-s", "SIGFOO", "x"], "--signal", "SIGFOO"),
            (&["-j", "fancy", "x"], "--jitter", "fancy"),
            (&["--backoff", "zigzag", "x"], "--backoff", "zigzag"),
            (&["--delays", "2s,x", "x"], "--delays", "2s,x"),
            (
                &["--delays", "1s", "-j", "decorrelated", "x"],
                "--delays",
                "decorrelated",
            ),
            (&["--deadline", "yesterday", "x"], "--deadline", "yesterday"),
            (&["--success-on", "TERM", "x"], "--success-on", "TERM"),
            (
                &["--delay-from-output", "Retry-After: \\d+", "x"],
                "--delay-from-output",
                "Retry-After: \\d+",
            ),
            (
                &["--delay-from-output", "(unclosed", "x"],
                "--delay-from-output",
                "(unclosed",
            ),
            (
                &["--delays", "1s", "--factor", "3", "x"],
                "--delays",
                "--factor",
            ),
        ] {
            let err = config(args).unwrap_err();
            assert!(!err.contains('\n'), "{args:?}: {err}");
            assert!(
                err.contains(option) && err.contains(value),
                "{args:?}: {err}"
            );
        }
        let err = config(&[]).unwrap_err();
        assert!(err.contains("no command"), "{err}");
    }

    #[test]
    fn lists_that_contradict_each_other_are_usage_errors() {
        for (args, needles) in [
            (
                &["--retry-on", "0", "x"][..],
                &["--retry-on", "'0'", "exit code 0"][..],
            ),
            (
                &["--retry-on", "0-3", "x"],
                &["--retry-on", "'0-3'", "exit code 0"],
            ),
            (
                &["--stop-on", "TERM,0", "x"],
                &["--stop-on", "'TERM,0'", "exit code 0"],
            ),
            (
                &["--success-on", "3", "--retry-on", "3", "x"],
                &["--retry-on", "--success-on", "'3'", "exit code 3"],
            ),
            (
                &["--success-on", "10-20", "--retry-on", "1-12", "x"],
                &[
                    "--retry-on",
                    "--success-on",
                    "'1-12'",
                    "'10-20'",
                    "exit code 10",
                ],
            ),
            (
                &["--success-on", "2,7", "--stop-on", "timeout,5-9", "x"],
                &[
                    "--stop-on",
                    "--success-on",
                    "'timeout,5-9'",
                    "'2,7'",
                    "exit code 7",
                ],
            ),
        ] {
            let err = config(args).unwrap_err();
            assert!(!err.contains('\n'), "{args:?}: {err}");
            for needle in needles {
                assert!(err.contains(needle), "{args:?}: {needle} not in {err}");
            }
        }
        // Lists that do not meet are fine, and --stop-on may narrow --retry-on.
        let c = config(&[
            "--success-on",
            "3",
            "--retry-on",
            "1-2,4-9",
            "--stop-on",
            "5",
            "x",
        ]);
        assert!(c.is_ok(), "{c:?}");
        assert!(config(&["--success-on", "0", "x"]).is_ok());
    }

    #[test]
    fn negative_numbers_are_values_of_their_option_not_unknown_flags() {
        for (args, option) in [
            (&["-n", "-1", "x"][..], "'--tries <N>'"),
            (&["--seed", "-1", "x"], "'--seed <N>'"),
            (&["--factor", "-2", "x"], "'--factor <F>'"),
        ] {
            let err = config(args).unwrap_err();
            assert!(
                err.starts_with("invalid value '-") && err.contains(option),
                "{args:?}: {err}"
            );
        }
    }

    #[test]
    fn clap_suggestions_stay_on_the_one_line() {
        let err = config(&["--timout", "1", "x"]).unwrap_err();
        assert_eq!(
            err,
            "unexpected argument '--timout' found (did you mean --timeout?)"
        );
        let err = config(&["-j", "ful", "x"]).unwrap_err();
        assert!(!err.contains('\n'), "{err}");
        assert!(err.contains("did you mean full?"), "{err}");
    }

    #[test]
    fn the_seed_may_be_quoted_as_the_json_log_writes_it() {
        for seed in ["42", "\"42\"", " \"42\" "] {
            assert_eq!(
                config(&["--seed", seed, "x"]).unwrap().seed,
                Some(42),
                "{seed}"
            );
        }
        let max = "\"18446744073709551615\"";
        assert_eq!(config(&["--seed", max, "x"]).unwrap().seed, Some(u64::MAX));
        for bad in ["\"42", "42\"", "\"\"", "\"", "\"x\"", "'42'", "\"\"42\"\""] {
            let err = config(&["--seed", bad, "x"]).unwrap_err();
            assert!(err.contains("'--seed <N>'"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_value_with_a_line_break_stays_on_one_escaped_line() {
        let err = config(&["-d", "1\nretry: succeeded", "x"]).unwrap_err();
        assert!(!err.contains('\n'), "{err}");
        assert!(
            err.contains("--delay") && err.contains("succeeded"),
            "{err}"
        );
    }

    #[test]
    fn a_label_is_one_printable_name() {
        assert_eq!(
            config(&["--label", "deploy db", "x"])
                .unwrap()
                .label
                .as_deref(),
            Some("deploy db")
        );
        assert_eq!(config(&["x"]).unwrap().label, None);
        for (bad, shown) in [
            ("", "''"),
            ("a\nretry: forged", r"'a\nretry: forged'"),
            ("tab\there", r"'tab\there'"),
            ("\u{1b}[31mred", r"'\e[31mred'"),
        ] {
            let err = config(&["--label", bad, "x"]).unwrap_err();
            assert!(!err.contains('\n'), "{err}");
            assert!(
                err.contains("--label <NAME>") && err.contains(shown),
                "{bad:?}: {err}"
            );
        }
    }

    #[test]
    fn a_pattern_for_the_wait_needs_a_capture_group() {
        let c = config(&["--delay-from-output", r"Retry-After: (\d+)", "x"]).unwrap();
        assert_eq!(
            c.delay_from_output.map(|p| p.text().to_string()),
            Some(r"Retry-After: (\d+)".to_string())
        );
        assert_eq!(config(&["x"]).unwrap().delay_from_output, None);
        let err = config(&["--delay-from-output", "retry in \\S+", "x"]).unwrap_err();
        assert!(err.contains("no capture group"), "{err}");
    }

    #[test]
    fn replay_takes_no_command_and_no_dead_letter_file() {
        let c = config(&["--replay", "f.jsonl", "-n", "1"]).unwrap();
        assert!(matches!(&c.mode, Mode::Replay { file, .. } if file == Path::new("f.jsonl")));
        assert!(c.command.is_empty());
        for args in [
            &["--replay", "f", "--", "true"][..],
            &["--replay", "f", "true"],
            &["--replay", "f", "--dead-letter", "g"],
        ] {
            let err = config(args).unwrap_err();
            assert!(!err.contains('\n'), "{err}");
            assert!(err.contains("--replay"), "{args:?}: {err}");
        }
    }

    #[test]
    fn the_log_cannot_go_to_the_dead_letter_or_replayed_file() {
        for args in [
            &["--log-file", "f.jsonl", "--dead-letter", "f.jsonl", "x"][..],
            &["--log-file", "./f.jsonl", "--dead-letter", "f.jsonl", "x"],
            &["--log-file", "f.jsonl", "--replay", "sub/../f.jsonl"],
        ] {
            let err = config(args).unwrap_err();
            assert!(!err.contains('\n'), "{err}");
            assert!(
                err.contains("--log-file") && err.contains("same file"),
                "{args:?}: {err}"
            );
        }
        assert!(config(&["--log-file", "log", "--dead-letter", "f.jsonl", "x"]).is_ok());
        // A link in place of the log, to a dead-letter file not created yet.
        let dir = std::env::temp_dir().join(format!("retry-same-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (link, letters) = (dir.join("log"), dir.join("f.jsonl"));
        std::os::unix::fs::symlink("f.jsonl", &link).unwrap();
        let (link, letters) = (link.to_str().unwrap(), letters.to_str().unwrap());
        let err = config(&["--log-file", link, "--dead-letter", letters, "x"]).unwrap_err();
        assert!(err.contains("same file"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_value_that_is_not_utf8_is_quoted_in_the_character_set_given() {
        use std::os::unix::ffi::OsStringExt;
        let now = SystemTime::UNIX_EPOCH;
        let args = |value: &[u8]| {
            ["retry", "--label"]
                .map(OsString::from)
                .into_iter()
                .chain([OsString::from_vec(value.to_vec()), OsString::from("x")])
                .collect::<Vec<_>>()
        };
        let error = |charset| match parse_in(args(b"\xc3\xa9\xff"), now, charset, Reading::Again) {
            ParseOutcome::Usage(e) => e.0,
            other => panic!("{other:?}"),
        };
        let utf8 = error(Charset::Utf8);
        assert_eq!(
            error(Charset::Ascii),
            r"invalid value $'\xc3\xa9\xff' for '--label': not UTF-8 text"
        );
        assert_eq!(
            utf8,
            r"invalid value $'é\xff' for '--label': not UTF-8 text"
        );
        assert_eq!(error(Charset::Utf8), utf8, "whatever was asked before");
    }

    #[test]
    fn the_mode_is_chosen_once_from_the_options() {
        let mode = |args: &[&str]| config(args).unwrap().mode;
        assert_eq!(mode(&["x"]), Mode::Run);
        assert_eq!(mode(&["--dry-run"]), Mode::DryRun);
        assert_eq!(mode(&["--dry-run", "x"]), Mode::DryRun);
        let file = PathBuf::from("f.jsonl");
        assert_eq!(
            mode(&["--replay", "f.jsonl"]),
            Mode::Replay {
                file: file.clone(),
                dry_run: false,
                picks: Picks::default(),
            }
        );
        assert_eq!(
            mode(&["--replay", "f.jsonl", "--dry-run"]),
            Mode::Replay {
                file: file.clone(),
                dry_run: true,
                picks: Picks::default(),
            }
        );
        assert_eq!(
            mode(&["--forget", "f.jsonl", "abcdefgh", "all"]),
            Mode::Forget {
                file: file.clone(),
                ids: vec!["abcdefgh".into(), "all".into()],
            }
        );
        assert_eq!(
            mode(&["--prune", "f.jsonl", "--older-than", "7d"]),
            Mode::Prune {
                file: file.clone(),
                older_than: Duration::from_secs(7 * 86400),
            }
        );
        for args in [
            &["--prune", "f.jsonl"][..],
            &["--only", "abcdefgh", "x"][..],
            &["--older-than", "1d", "x"][..],
            &["--all", "--replay", "f.jsonl"][..],
            &["--forget", "f.jsonl", "-n", "2", "all"][..],
        ] {
            assert!(config(args).is_err(), "{args:?}");
        }
        let c = config(&["--simulate", "--clients", "7"]).unwrap();
        let Mode::Simulate(simulation) = &c.mode else {
            panic!("{:?}", c.mode);
        };
        assert_eq!(simulation.scenario.clients, 7);
        assert_eq!(c.simulation(), Some(simulation));
        for (args, dry_run, replay) in [
            (&["x"][..], false, None),
            (&["--dry-run"], true, None),
            (&["--replay", "f.jsonl"], false, Some(&file)),
            (&["--replay", "f.jsonl", "--dry-run"], true, Some(&file)),
            (&["--simulate"], false, None),
        ] {
            let c = config(args).unwrap();
            assert_eq!(c.is_dry_run(), dry_run, "{args:?}");
            let file = match &c.mode {
                Mode::Replay { file, .. } => Some(file.as_path()),
                _ => None,
            };
            assert_eq!(file, replay.map(PathBuf::as_path), "{args:?}");
        }
    }

    #[test]
    fn the_options_of_the_simulation_need_it_and_their_model() {
        for (args, error) in [
            (
                &["--clients", "7", "x"][..],
                "'--clients 7' is an option of --simulate, and is given without it",
            ),
            (
                &["--compare", "x"],
                "'--compare' is an option of --simulate, and is given without it",
            ),
            (
                &["--latency", "5ms", "--model", "occ", "x"],
                "'--model occ' is an option of --simulate, and is given without it",
            ),
            (
                &["--capacity", "3", "x"],
                "'--capacity 3/s' is an option of --simulate, and is given without it",
            ),
            (
                &["--simulate", "--model", "occ", "--latency", "5ms"],
                "'--latency 5ms' is for --model outage: --model occ times its own network (about 10ms a hop)",
            ),
        ] {
            assert_eq!(config(args).unwrap_err(), error, "{args:?}");
        }
        let c = config(&["--simulate", "--model", "occ"]).unwrap();
        assert_eq!(c.policy.max_tries, None, "occ tries until it succeeds");
        let c = config(&["--simulate", "--model", "occ", "-n", "4"]).unwrap();
        assert_eq!(c.policy.max_tries, Some(4));
    }

    #[test]
    fn dry_run_needs_no_command() {
        assert!(config(&["--dry-run"]).unwrap().command.is_empty());
    }
}
