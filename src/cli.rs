//! The command-line interface: every flag, its help text and its value parser. The doc comments
//! here are the `--help` text and the man page.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clap::{Parser, ValueEnum};

use crate::duration::{parse_duration, parse_time};
use crate::policy::{List, Pattern, Signal};

const TRIES: &str = "Tries and time";
const TIMEOUTS: &str = "Timeouts and signals";
const WAITS: &str = "Waits between tries";
const CLASSIFY: &str = "Which failures to retry";
const IO: &str = "Input and output";
const HOOKS: &str = "Hooks";
const OUTPUT: &str = "Log and dry run";

/// Run a command again when it fails, with capped, jittered exponential backoff.
///
/// A failed try is retried after a wait that grows exponentially, is capped by --max-delay and
/// is randomised by --jitter, until a try succeeds, a failure is permanent, the tries run out or
/// the time budget is spent. Each try runs in its own process group, so a timeout stops
/// everything the try started. The log on standard error says what happened and why; standard
/// output belongs to the command.
///
/// Signals: INT, TERM, HUP, QUIT and every other signal that would end retry are passed on to
/// the try's group, followed by SIGCONT; no further try starts, and retry then dies of the same
/// signal. USR1 and USR2 are passed on and the run goes on. Signals ignored when retry starts
/// stay ignored, in retry and in every try.
///
/// Exit status: 0 when a try succeeded; the last try's status when giving up; 124 when the last
/// try timed out; 125 for retry's own errors; 126 when the command cannot be executed; 127 when
/// it is not found; 128+N when the last try was killed by signal N. When retry itself is
/// interrupted, it dies of the same signal.
#[derive(Debug, Parser)]
#[command(
    name = "retry",
    version,
    about = "Run a command again when it fails, with capped, jittered exponential backoff",
    override_usage = "retry [OPTIONS] [--] COMMAND [ARG]...\n       retry [OPTIONS] --dry-run [[--] COMMAND [ARG]...]",
    after_help = "Examples:\n  retry -- curl -fsS https://example.com/health\n  retry -n 5 -t 2m -B 10m -- cargo test\n  retry --dry-run -n 8 -d 500ms",
    max_term_width = 100
)]
pub struct Cli {
    /// Maximum number of tries, the first included; 0 means no limit
    #[arg(short = 'n', long, value_name = "N", default_value = "3", value_parser = parse_tries, allow_hyphen_values = true, help_heading = TRIES)]
    pub tries: u64,

    /// Wall-clock budget for the whole run, tries and waits together; 0 means none
    ///
    /// A retry starts only if it can start before the end of the budget and, with --timeout,
    /// its whole timeout fits in what is left. A try still running at the end is stopped as on
    /// a timeout.
    #[arg(short = 'B', long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true, help_heading = TRIES)]
    pub budget: Option<Duration>,

    /// Absolute end of the run, in RFC 3339 (2026-01-15T08:05:00+07:00)
    ///
    /// The same rules as --budget; the earlier of the two wins.
    #[arg(long, value_name = "TIME", value_parser = parse_time, allow_hyphen_values = true, help_heading = TRIES)]
    pub deadline: Option<SystemTime>,

    /// Stop a try that runs longer than this; 0 means no timeout
    ///
    /// The try's whole process group gets --signal and SIGCONT, then SIGKILL after --kill-after;
    /// on Linux so does every process the try started that left its group. A try stopped this
    /// way exits 124 and is retried unless --stop-on timeout.
    #[arg(short = 't', long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true, help_heading = TIMEOUTS)]
    pub timeout: Option<Duration>,

    /// Signal sent to the try's process group on timeout: a name, with or without SIG, or a number
    ///
    /// Real-time signals are named RTMIN, RTMIN+N, RTMAX-N and RTMAX, as by bash's kill -l.
    #[arg(short = 's', long, value_name = "SIGNAL", default_value = "TERM", value_parser = parse_signal, allow_hyphen_values = true, help_heading = TIMEOUTS)]
    pub signal: Signal,

    /// Grace period between that signal and SIGKILL; 0 kills at once
    #[arg(short = 'k', long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration, allow_hyphen_values = true, help_heading = TIMEOUTS)]
    pub kill_after: Duration,

    /// Keep the command in retry's own process group
    ///
    /// Then only the command itself, not what it started, is stopped on a timeout.
    #[arg(long, help_heading = TIMEOUTS)]
    pub foreground: bool,

    /// Base wait before the first retry
    #[arg(short = 'd', long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration, allow_hyphen_values = true, help_heading = WAITS)]
    pub delay: Duration,

    /// How the wait grows: exponential (delay × factor^(k−1)), linear (delay × k) or constant
    #[arg(long, value_name = "KIND", value_enum, allow_hyphen_values = true, default_value_t = BackoffKind::Exponential, help_heading = WAITS)]
    pub backoff: BackoffKind,

    /// Growth factor of exponential backoff, a number of at least 1
    #[arg(long, value_name = "F", default_value = "2", value_parser = parse_factor, allow_hyphen_values = true, help_heading = WAITS)]
    pub factor: f64,

    /// Cap on any single wait, jitter included
    #[arg(short = 'm', long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration, allow_hyphen_values = true, help_heading = WAITS)]
    pub max_delay: Duration,

    /// Explicit waits, such as 2s,4s,8s: the k-th retry waits the k-th value, the last repeats
    ///
    /// They are waited exactly as listed, unless --jitter is also given.
    #[arg(long, value_name = "LIST", value_parser = parse_delays, allow_hyphen_values = true, conflicts_with_all = ["backoff", "factor", "delay"], help_heading = WAITS)]
    pub delays: Option<DelayList>,

    /// Randomise each wait: full, equal, decorrelated or none [default: full; none with --delays]
    ///
    /// With d the capped base wait: full waits 0 to d, equal d/2 to d, none d; decorrelated
    /// waits --delay to three times the previous wait, capped, and cannot be used with
    /// --delays. The waits listed by --delays are waited exactly, unless --jitter is given.
    #[arg(short = 'j', long, value_name = "KIND", value_enum, allow_hyphen_values = true, help_heading = WAITS)]
    pub jitter: Option<JitterKind>,

    /// Seed of the jitter's random source: the same seed gives the same waits
    ///
    /// It may be given in double quotes, as the JSON log writes it.
    #[arg(long, value_name = "N", value_parser = parse_seed, allow_hyphen_values = true, help_heading = WAITS)]
    pub seed: Option<u64>,

    /// Only these outcomes are transient; every other failure is permanent
    ///
    /// A LIST is comma-separated: exit codes (75), ranges (1-5), signal names (KILL, SIGTERM,
    /// RTMIN+2) and the word timeout. Exit 0 is always a success and cannot be listed.
    #[arg(long, value_name = "LIST", value_parser = parse_list, allow_hyphen_values = true, help_heading = CLASSIFY)]
    pub retry_on: Option<List>,

    /// These outcomes are permanent, even where --retry-on matches
    #[arg(long, value_name = "LIST", value_parser = parse_list, allow_hyphen_values = true, help_heading = CLASSIFY)]
    pub stop_on: Option<List>,

    /// Exit codes that count as success besides 0 (codes and ranges)
    #[arg(long, value_name = "LIST", value_parser = parse_list, allow_hyphen_values = true, help_heading = CLASSIFY)]
    pub success_on: Option<List>,

    /// A failed try is transient only if its stdout or stderr matched this regular expression
    ///
    /// Matching is on bytes, line by line, while the output streams to its destination.
    #[arg(long, value_name = "REGEX", value_parser = parse_pattern, allow_hyphen_values = true, help_heading = CLASSIFY)]
    pub retry_if_output: Option<Pattern>,

    /// A failed try is permanent if its stdout or stderr matched this regular expression
    #[arg(long, value_name = "REGEX", value_parser = parse_pattern, allow_hyphen_values = true, help_heading = CLASSIFY)]
    pub stop_if_output: Option<Pattern>,

    /// Standard input of the tries: auto, replay, inherit or null
    ///
    /// auto: a terminal is inherited, a regular file is read again from its start by every try,
    /// and a pipe is read only as a try asks for it, recorded, and replayed to every later try
    /// (the recorded part first, then whatever the pipe still holds): a try that never reads
    /// leaves all of it to whoever reads after retry. Where retry cannot see what a try asks
    /// for (systems other than Linux), auto passes a pipe on untouched. replay records a pipe
    /// as fast as the try takes it, inherit passes standard input untouched, null gives
    /// /dev/null.
    #[arg(long, value_name = "MODE", value_enum, allow_hyphen_values = true, default_value_t = StdinMode::Auto, help_heading = IO)]
    pub stdin: StdinMode,

    /// Hold each try's standard output; only the successful try's reaches stdout, once
    ///
    /// A failed try's output goes to standard error instead. Output past 64 MiB is held in a
    /// temporary file.
    #[arg(long, help_heading = IO)]
    pub buffer_stdout: bool,

    /// Shell command run (sh -c) before the wait that precedes each retry
    ///
    /// It sees the environment of the tries plus RETRY_EXIT_CODE (the status of the failed try)
    /// and RETRY_DELAY_MS (the wait ahead); its output goes to standard error. Its failure is
    /// logged and changes nothing else. It is bounded by --timeout and the budget, and stopped
    /// as a try is.
    #[arg(long, value_name = "CMD", allow_hyphen_values = true, help_heading = HOOKS)]
    pub on_retry: Option<String>,

    /// Shell command run (sh -c) when the run gives up, as --on-retry
    #[arg(long, value_name = "CMD", allow_hyphen_values = true, help_heading = HOOKS)]
    pub on_give_up: Option<String>,

    /// Print only the final line when giving up, and nothing on success
    #[arg(short = 'q', long, conflicts_with = "verbose", help_heading = OUTPUT)]
    pub quiet: bool,

    /// Add the command line, the policy, the seed and timestamps to the log
    #[arg(short = 'v', long, help_heading = OUTPUT)]
    pub verbose: bool,

    /// Format of the log: human, or json (one JSON object per line)
    #[arg(long, value_name = "FORMAT", value_enum, allow_hyphen_values = true, default_value_t = LogFormat::Human, help_heading = OUTPUT)]
    pub log_format: LogFormat,

    /// Append the log to this file instead of standard error
    #[arg(long, value_name = "PATH", help_heading = OUTPUT)]
    pub log_file: Option<PathBuf>,

    /// Colour the log: auto (when stderr is a terminal and NO_COLOR is unset), always, never
    #[arg(long, value_name = "WHEN", value_enum, allow_hyphen_values = true, default_value_t = ColorWhen::Auto, help_heading = OUTPUT)]
    pub color: ColorWhen,

    /// Print the schedule the options give, and run nothing
    #[arg(long, help_heading = OUTPUT)]
    pub dry_run: bool,

    /// The command to run, and its arguments
    #[arg(value_name = "COMMAND", trailing_var_arg = true, value_parser = clap::value_parser!(OsString))]
    pub command: Vec<OsString>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackoffKind {
    Exponential,
    Linear,
    Constant,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum JitterKind {
    Full,
    Equal,
    Decorrelated,
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StdinMode {
    Auto,
    Replay,
    Inherit,
    Null,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ColorWhen {
    Auto,
    Always,
    Never,
}

fn parse_tries(s: &str) -> Result<u64, String> {
    s.trim()
        .parse::<u64>()
        .map_err(|_| "expected a whole number of tries (0 for no limit)".into())
}

fn parse_seed(s: &str) -> Result<u64, String> {
    // The JSON log writes the seed as a string ("seed":"9403994254451210427"), so that readers
    // holding JSON numbers as doubles keep every digit; take it as copied, quotes included.
    let s = s.trim();
    let digits = s
        .strip_prefix('"')
        .and_then(|inner| inner.strip_suffix('"'))
        .unwrap_or(s);
    digits
        .parse::<u64>()
        .map_err(|_| "expected a whole number from 0 to 18446744073709551615".into())
}

fn parse_factor(s: &str) -> Result<f64, String> {
    let f: f64 = s
        .trim()
        .parse()
        .map_err(|_| "expected a number of at least 1".to_string())?;
    if !f.is_finite() || f < 1.0 {
        return Err("expected a finite number of at least 1".into());
    }
    Ok(f)
}

fn parse_signal(s: &str) -> Result<Signal, String> {
    s.parse()
}

fn parse_pattern(s: &str) -> Result<Pattern, String> {
    Pattern::new(s)
}

fn parse_list(s: &str) -> Result<List, String> {
    s.parse()
}

/// The waits of `--delays`, in order; never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelayList(pub Vec<Duration>);

fn parse_delays(s: &str) -> Result<DelayList, String> {
    s.split(',')
        .map(|item| parse_duration(item).map_err(|e| format!("item '{}': {e}", item.trim())))
        .collect::<Result<Vec<_>, _>>()
        .map(DelayList)
}
