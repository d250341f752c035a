//! The command-line interface: every flag, its help text and its value parser. The texts here
//! are the `--help` text and the man page.
//!
//! Built with clap's builder API rather than its derive macros: with no procedural macro in the
//! build, `.cargo/config.toml` can link `retry` statically, which starts it about twice as fast
//! (BENCHMARKS.md).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clap::builder::{EnumValueParser, PossibleValue, ValueParser};
use clap::{Arg, ArgAction, ArgMatches, Command, ValueEnum};

use crate::duration::{parse_duration, parse_time};
use crate::policy::lock::LockName;
use crate::policy::quota::QuotaSpec;
use crate::policy::throttle::ThrottleSpec;
use crate::policy::{List, Pattern, Signal};

/// The id of every option, which is its long name: the one spelling the definitions below,
/// the reading of the matches and the lists of options that go together share, so that a
/// misspelt id does not compile.
pub mod id {
    pub const TRIES: &str = "tries";
    pub const BUDGET: &str = "budget";
    pub const DEADLINE: &str = "deadline";
    pub const QUOTA: &str = "quota";
    pub const THROTTLE: &str = "throttle";
    pub const LOCK: &str = "lock";
    pub const LOCK_WAIT: &str = "lock-wait";
    pub const ONCE: &str = "once";
    pub const ONCE_FOR: &str = "once-for";
    pub const CONSECUTIVE: &str = "consecutive";
    pub const TIMEOUT: &str = "timeout";
    pub const SIGNAL: &str = "signal";
    pub const KILL_AFTER: &str = "kill-after";
    pub const FOREGROUND: &str = "foreground";
    pub const DELAY: &str = "delay";
    pub const BACKOFF: &str = "backoff";
    pub const FACTOR: &str = "factor";
    pub const MAX_DELAY: &str = "max-delay";
    pub const DELAY_FROM_OUTPUT: &str = "delay-from-output";
    pub const DELAYS: &str = "delays";
    pub const JITTER: &str = "jitter";
    pub const SEED: &str = "seed";
    pub const STAGGER: &str = "stagger";
    pub const RETRY_ON: &str = "retry-on";
    pub const STOP_ON: &str = "stop-on";
    pub const SUCCESS_ON: &str = "success-on";
    pub const RETRY_IF_OUTPUT: &str = "retry-if-output";
    pub const STOP_IF_OUTPUT: &str = "stop-if-output";
    pub const UNTIL_OUTPUT: &str = "until-output";
    pub const STDIN: &str = "stdin";
    pub const BUFFER_STDOUT: &str = "buffer-stdout";
    pub const OUTPUT_ON_FAILURE: &str = "output-on-failure";
    pub const ON_RETRY: &str = "on-retry";
    pub const ON_GIVE_UP: &str = "on-give-up";
    pub const DEAD_LETTER: &str = "dead-letter";
    pub const REPLAY: &str = "replay";
    pub const ONLY: &str = "only";
    pub const ONLY_LABEL: &str = "only-label";
    pub const ALL: &str = "all";
    pub const FORGET: &str = "forget";
    pub const PRUNE: &str = "prune";
    pub const OLDER_THAN: &str = "older-than";
    pub const ANY_HOST: &str = "any-host";
    pub const QUIET: &str = "quiet";
    pub const VERBOSE: &str = "verbose";
    pub const LOG_FORMAT: &str = "log-format";
    pub const LOG_FILE: &str = "log-file";
    pub const LABEL: &str = "label";
    pub const JUNIT: &str = "junit";
    pub const METRICS: &str = "metrics";
    pub const PUSHGATEWAY: &str = "pushgateway";
    pub const PING: &str = "ping";
    pub const COLOR: &str = "color";
    pub const DRY_RUN: &str = "dry-run";
    pub const KEEP_GOING: &str = "keep-going";
    pub const FLAKY: &str = "flaky";
    pub const REPEAT: &str = "repeat";
    pub const HISTORY: &str = "history";
    pub const STATS: &str = "stats";
    pub const SINCE: &str = "since";
    pub const SIMULATE: &str = "simulate";
    pub const COMPARE: &str = "compare";
    pub const CLIENTS: &str = "clients";
    pub const MODEL: &str = "model";
    pub const OUTAGE: &str = "outage";
    pub const EVERY: &str = "every";
    pub const CAPACITY: &str = "capacity";
    pub const LATENCY: &str = "latency";
    pub const COMMAND: &str = "command";
}

const TRIES: &str = "Tries and time";
const TIMEOUTS: &str = "Timeouts and signals";
const WAITS: &str = "Waits between tries";
const CLASSIFY: &str = "Which failures to retry";
const IO: &str = "Input and output";
const HOOKS: &str = "Hooks";
const UNATTENDED: &str = "Runs that gave up";
const OUTPUT: &str = "Log and dry run";
const SIMULATE: &str = "Simulation";
const FLAKY: &str = "Flaky commands";

const ABOUT: &str = "Run a command again when it fails, with capped, jittered exponential backoff";

const LONG_ABOUT: &str = "Run a command again when it fails, with capped, jittered exponential \
    backoff.

A failed try is retried after a wait that grows exponentially, is capped by --max-delay and is \
    randomised by --jitter, until a try succeeds, a failure is permanent, the tries run out or the \
    time budget is spent. Each try runs in its own process group, so a timeout stops everything \
    the try started. The log on standard error says what happened and why; standard output \
    belongs to the command.

Signals: INT, TERM, HUP, QUIT and every other signal that would end retry are passed on to the \
    try's group, followed by SIGCONT; no further try starts, and retry then dies of the same \
    signal. USR1 and USR2 are passed on and the run goes on. Signals ignored when retry starts \
    stay ignored, in retry and in every try.

Exit status: 0 when a try succeeded, or --once's KEY was done; the last try's status when giving up; 124 when the last try \
    timed out; 125 for retry's own errors; 126 when the command cannot be executed; 127 when it \
    is not found; 128+N when the last try was killed by signal N; 1 when a try's output could \
    not be written, when the last try exited 0 but was not ready (--until-output), when \
    --consecutive saw too few successes in a row, or when a --replay left runs pending; 75 when \
    --throttle held back every try, none having run, or when --lock (or --once's KEY) turned the \
    run away, lost its lease or could not reach its Redis. When \
    retry itself is interrupted, it dies of the same signal.";

/// The parsed flags, before the cross-field checks of [`crate::config`].
#[derive(Debug)]
pub struct Cli {
    pub tries: u64,
    /// `--consecutive`: successful tries in a row the run needs.
    pub consecutive: Option<u64>,
    pub budget: Option<Duration>,
    pub deadline: Option<SystemTime>,
    pub timeout: Option<Duration>,
    /// `--timeout`'s value as written when it has no unit (`-t 5`), which Debian's retry reads
    /// as a number of tries; `None` for `-t 5s`, `-t 0` or no `-t`.
    pub timeout_without_unit: Option<String>,
    /// `--delay`'s value as written when it has no unit (`-d 2`), which Debian's retry reads as
    /// the fixed wait between tries; `None` for `-d 2s`, `-d 0` or no `-d`.
    pub delay_without_unit: Option<String>,
    pub signal: Signal,
    pub kill_after: Duration,
    pub foreground: bool,
    pub delay: Duration,
    pub backoff: BackoffKind,
    pub factor: f64,
    pub max_delay: Duration,
    pub delay_from_output: Option<Pattern>,
    pub delays: Option<DelayList>,
    pub jitter: Option<JitterKind>,
    pub seed: Option<u64>,
    /// `--stagger`, and the text it was given as: an error about it quotes what was written.
    pub stagger: Option<(Duration, String)>,
    pub quota: Option<QuotaSpec>,
    /// `--throttle`: admission control through the quota's store.
    pub throttle: Option<ThrottleSpec>,
    /// `--lock`: one run at a time holding this name on this machine, or on the fleet.
    pub lock: Option<LockName>,
    /// `--lock-wait`, and the text it was given as: an error about it quotes what was written.
    pub lock_wait: Option<(Duration, String)>,
    /// `--once`: the job of this key runs once, on this machine or on the fleet.
    pub once: Option<LockName>,
    /// `--once-for`, and the text it was given as.
    pub once_for: Option<(Duration, String)>,
    pub classify: ClassifyArgs,
    pub stdin: StdinMode,
    pub buffer_stdout: bool,
    pub output_on_failure: bool,
    pub on_retry: Option<String>,
    pub on_give_up: Option<String>,
    pub quiet: bool,
    pub verbose: bool,
    pub log_format: LogFormat,
    pub log_file: Option<PathBuf>,
    pub label: Option<String>,
    /// `--junit`: where the JUnit XML report of the run goes.
    pub junit: Option<PathBuf>,
    /// `--metrics`: the Prometheus textfile the run's metrics are merged into.
    pub metrics: Option<PathBuf>,
    /// `--pushgateway`: the Prometheus Pushgateway the run's metrics are pushed to, as given.
    pub pushgateway: Option<OsString>,
    /// `--ping`: the URL the run's start and end are pinged to, as given (a secret).
    pub ping: Option<OsString>,
    pub color: ColorWhen,
    pub dry_run: bool,
    pub dead_letter: Option<PathBuf>,
    pub replay: Option<PathBuf>,
    /// What `--replay`, `--forget` and `--prune` pick among the recorded runs.
    pub records: RecordsArgs,
    pub simulate: SimulateArgs,
    pub flaky: FlakyArgs,
    pub command: Vec<OsString>,
}

/// An option that takes a value. Its id is its long name; `text` is its help: the first
/// paragraph is the short help (`-h`), the whole text the long help (`--help`, the man page).
fn option(
    long: &'static str,
    value_name: &'static str,
    heading: &'static str,
    text: &'static str,
) -> Arg {
    help(
        Arg::new(long)
            .long(long)
            .value_name(value_name)
            .action(ArgAction::Set)
            .help_heading(heading),
        text,
    )
}

/// An option that takes no value.
fn flag(long: &'static str, heading: &'static str, text: &'static str) -> Arg {
    help(
        Arg::new(long)
            .long(long)
            .action(ArgAction::SetTrue)
            .help_heading(heading),
        text,
    )
}

fn help(arg: Arg, text: &'static str) -> Arg {
    if !TEXTS.get() {
        return arg;
    }
    // A plain byte scan: every start builds the command line, and `str::split_once` sets up a
    // substring search for each of the sixty texts, 7% of a plain run's instructions.
    match text.as_bytes().windows(2).position(|pair| pair == b"\n\n") {
        Some(end) => arg.help(&text[..end]).long_help(text),
        None => arg.help(text),
    }
}

thread_local! {
    /// Whether the command line being built carries its help texts (see `parsing_command`).
    static TEXTS: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Whose command line is read, which says what becomes of what clap made to read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// The process's own, read once: the definition and what clap read are left to the
    /// process's exit rather than freed one allocation at a time, which cost a plain run 7% of
    /// its instructions (BENCHMARKS.md).
    Own,
    /// Any other (a replay's recorded command lines, the tests'), freed as usual.
    Again,
}

/// The command line without its help texts, to read one with: clap copies every text it is
/// given, which was most of what building the definition cost at each start, and a command
/// line that is read without error reads the same without them. One that is not (an error,
/// `--help`, `--version`) is read again with `command()`, whose texts those show.
fn parsing_command() -> Command {
    /// Puts the texts back however the building ends.
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            TEXTS.set(true);
        }
    }
    let _restore = Restore;
    TEXTS.set(false);
    command()
}

/// The whole command line, as `--help`, the man page and the completions show it.
pub fn command() -> Command {
    let command = Command::new("retry")
        .version(env!("CARGO_PKG_VERSION"))
        .max_term_width(100)
        // An option given again takes its last value, as GNU tools read them: an alias or a
        // wrapper's defaults stay overridable (`alias retry='retry -n 5'`, then `retry -n 2`).
        .args_override_self(true)
        .args(options())
        .args(record_options())
        .args(flaky_options())
        .args(simulate_options());
    if !TEXTS.get() {
        return command;
    }
    command
        .about(ABOUT)
        .long_about(LONG_ABOUT)
        .override_usage(
            "retry [OPTIONS] [--] COMMAND [ARG]...\n       retry [OPTIONS] --dry-run [[--] COMMAND [ARG]...]\n       retry [OPTIONS] --simulate [[--] COMMAND [ARG]...]\n       retry [OPTIONS] --replay FILE\n       retry --stats FILE [--since DURATION]",
        )
        .after_help(
            "Examples:\n  retry -- curl -fsS https://example.com/health\n  retry -n 5 -t 2m -B 10m -- cargo test\n  retry --dry-run -n 8 -d 500ms\n  retry --replay failed.jsonl -n 1\n  retry --repeat 200 --keep-going -t 1m -- cargo test flaky_test\n\nEnvironment:\n  RETRY_REDIS_PASSWORD  the password of a Redis URL (--quota redis://HOST/NAME),\n                        which other users cannot read with ps, unlike one in the URL\n  RETRY_REDIS_USER      the ACL user of a Redis URL that names none (AUTH USER PASSWORD)",
        )
}

fn options() -> Vec<Arg> {
    vec![
        option(id::TRIES, "N", TRIES, "Maximum number of tries, the first included; 0 means no limit")
            .short('n')
            .default_value("3")
            .value_parser(parse_tries)
            .allow_hyphen_values(true),
        option(
            id::CONSECUTIVE,
            "N",
            TRIES,
            "Succeed only after N successful tries in a row; a failed try starts again from 0

The successful tries count against --tries, so N above --tries (other than 0) is an error. \
            Between successful tries the run waits --delay; after a failed one the backoff starts \
            again from its first wait. When the tries or the budget run out before N in a row, \
            the run gives up with status 1 (reason consecutive), unless its last try failed: then \
            with that try's status.",
        )
        .value_parser(parse_consecutive)
        .allow_hyphen_values(true),
        option(
            id::BUDGET,
            "DURATION",
            TRIES,
            "Wall-clock budget for the whole run, tries and waits together; 0 means none

A retry starts only if it can start before the end of the budget and, with --timeout, its whole \
            timeout fits in what is left. A try still running at the end is stopped as on a timeout.",
        )
        .short('B')
        .value_parser(parse_duration)
        .allow_hyphen_values(true),
        option(
            id::DEADLINE,
            "TIME",
            TRIES,
            "Absolute end of the run, in RFC 3339 (2026-01-15T08:05:00+07:00)

The same rules as --budget; the earlier of the two wins.",
        )
        .value_parser(parse_time)
        .allow_hyphen_values(true),
        option(
            id::QUOTA,
            "NAME",
            TRIES,
            "Share a retry quota with every run that names it: without a token, no retry

Each first try adds 0.2 tokens to the quota NAME, 1 more comes back every second, up to 10, and \
            every retry takes one: when none is left, the run gives up at once (reason quota). First \
            tries are never held back. Set the numbers as NAME:ratio=0.2,floor=1/s,cap=10 (any of \
            them). NAME (letters, digits, . _ -) is shared by this user's runs on this machine; \
            redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]/NAME shares it through Redis with a fleet \
            (also rediss:// for TLS, and redis+unix:///PATH/SOCKET/NAME?db=DB; see docs/redis.md); \
            give the password in RETRY_REDIS_PASSWORD (and the user in RETRY_REDIS_USER) rather \
            than in the URL, which every user can read with ps. A server that refuses them is a \
            warning in a run, and status 125 with --dry-run.",
        )
        .value_parser(parse_quota)
        .allow_hyphen_values(true),
        option(
            id::THROTTLE,
            "K",
            TRIES,
            "Hold tries back, first ones included, while the runs of --quota mostly fail

Over the last 2 minutes the quota's store counts the tries of the runs that use --throttle and \
            those accepted (not failed transiently); before each try, p = (tries − K × accepted) / \
            (tries + 1), at most 0.95, holds it back: it does not run, takes no token, and the \
            schedule's wait follows. While at least 1/K of the tries are accepted, nothing is held \
            back. A run whose last try was held gives up with reason held and its last status, or \
            75 when no try ran. K is above 1 (2 is usual, 1.1 stricter); set the window and the \
            cap as K:window=5m,max=0.9. A store that cannot be reached turns the throttle off.",
        )
        .value_parser(parse_throttle)
        .allow_hyphen_values(true),
        option(
            id::LOCK,
            "NAME",
            TRIES,
            "Run only while no other run holds the lock NAME on this machine, or on the fleet

The lock is taken before the first try (and before --stagger's wait) and kept until the run's \
            records are written; the kernel releases it however retry ends, and no try or hook \
            inherits it. A run that finds it taken runs nothing, writes no dead letter and exits 75 \
            (reason locked), naming the holder's host, pid and run id. Each try gets \
            RETRY_FENCING_TOKEN, higher for every grant of the lock. NAME (letters, digits, . _ -) \
            is the file ~/.local/state/retry/locks/NAME.lock, with the home directory of the \
            password database, whatever the environment: a cron job and a login shell share it. \
            A NAME with a / is the lock file's path, as flock FILE takes one: made 0600, and \
            refused when it is a link, not a regular file, or another user's.

redis://…/NAME[:lease=DURATION] (any form --quota takes) is a lock for the fleet: a lease \
            by the server's clock (30s unless lease= says otherwise), renewed every third of it \
            while the run lives. A run whose lease is lost stops its try as a timeout does and \
            exits 75 (reason lock_lost); a Redis that cannot be reached at the start leaves the \
            run unstarted, 75 (reason lock_unreachable).",
        )
        .value_parser(parse_lock)
        .conflicts_with(id::SIMULATE)
        .allow_hyphen_values(true),
        option(
            id::LOCK_WAIT,
            "DURATION",
            TRIES,
            "Wait up to this long for the lock, then be turned away (default 0)

The wait counts against the budget and never goes past it.",
        )
        .value_parser(parse_duration)
        .allow_hyphen_values(true),
        option(
            id::ONCE,
            "KEY",
            TRIES,
            "Run the command once for KEY: not again once a run of it succeeded

Before the first try KEY is looked up. Done within --once-for: the command does not run, and \
            retry exits 0, saying when, on which host and by which run it was done. Being run by \
            another run now: turned away as by a held --lock (75, reason locked). Otherwise the run \
            claims KEY, runs, and marks KEY done when it succeeds; a run that gives up lets go \
            of it, and the next run runs the command. KEY is bound to the command line: the same \
            KEY with another command exits 125 while it is claimed or done. KEY is named and kept \
            as --lock's NAME is: ~/.local/state/retry/once/KEY.once, or a path with a /; \
            redis://…/KEY[:lease=DURATION] keeps it for the fleet. Not with --lock.",
        )
        .value_parser(parse_lock)
        .conflicts_with_all([id::LOCK, id::SIMULATE])
        .allow_hyphen_values(true),
        option(
            id::ONCE_FOR,
            "DURATION",
            TRIES,
            "How long --once's KEY stays done (default 24h)

A run finding KEY done longer ago than this runs the command again, and binds KEY anew.",
        )
        .value_parser(parse_duration)
        .hide_short_help(true)
        .allow_hyphen_values(true),
        option(
            id::TIMEOUT,
            "DURATION",
            TIMEOUTS,
            "Stop a try that runs longer than this; 0 means no timeout

The try's whole process group gets --signal and SIGCONT, then SIGKILL after --kill-after; on \
            Linux so does every process the try started that left its group. A try stopped this way \
            exits 124 and is retried unless --stop-on timeout.",
        )
        .short('t')
        .value_parser(parse_duration)
        .allow_hyphen_values(true),
        option(
            id::SIGNAL,
            "SIGNAL",
            TIMEOUTS,
            "Signal sent to the try's process group on timeout: a name, with or without SIG, or a number

Real-time signals are named RTMIN, RTMIN+N, RTMAX-N and RTMAX, as by bash's kill -l.",
        )
        .short('s')
        .default_value("TERM")
        .value_parser(parse_signal)
        .allow_hyphen_values(true),
        option(id::KILL_AFTER, "DURATION", TIMEOUTS, "Grace period between that signal and SIGKILL; 0 kills at once

The grace period of a try that the end of the budget stops can run past the budget.")
            .short('k')
            .default_value("10s")
            .value_parser(parse_duration)
            .allow_hyphen_values(true),
        flag(
            id::FOREGROUND,
            TIMEOUTS,
            "Keep the command in retry's own process group

Then only the command itself, not what it started, is stopped on a timeout.",
        ),
        option(id::DELAY, "DURATION", WAITS, "Base wait before the first retry")
            .short('d')
            .default_value("1s")
            .value_parser(parse_duration)
            .allow_hyphen_values(true),
        option(
            id::BACKOFF,
            "KIND",
            WAITS,
            "How the wait grows: exponential (delay × factor^(k−1)), linear (delay × k) or constant",
        )
        .value_parser(EnumValueParser::<BackoffKind>::new())
        .allow_hyphen_values(true)
        .default_value("exponential"),
        option(id::FACTOR, "F", WAITS, "Growth factor of exponential backoff, a number of at least 1")
            .default_value("2")
            .value_parser(parse_factor)
            .allow_hyphen_values(true),
        option(id::MAX_DELAY, "DURATION", WAITS, "Cap on any single wait, jitter included")
            .short('m')
            .default_value("60s")
            .value_parser(parse_duration)
            .allow_hyphen_values(true),
        option(
            id::DELAY_FROM_OUTPUT,
            "REGEX",
            WAITS,
            "Wait at least as long as a failed try's output asks, read from this regex's first group

When a failed try's stdout or stderr matches, the first capture group is the wait asked for: a \
            number of seconds (--delay-from-output 'Retry-After: (\\d+)' with curl -si), a \
            duration (--delay-from-output 'retry in (\\S+)' for 'retry in 2m'), or an HTTP-date \
            (--delay-from-output 'Retry-After: (.+)'; IMF-fixdate, RFC 850 or asctime), which asks \
            to wait until then: measured against the same output's last 'Date:' line when it has \
            one (the server's clock), else against the local clock, and no wait when it has \
            passed. The log names the clock. The next wait is then the longer of the policy's and \
            the one asked for; it is not jittered below the request and not capped by \
            --max-delay, but it must fit in the budget: a request that does not gives up at once. \
            When a try matches several times, the last wait read wins; a match whose group holds \
            no wait, or a date that is not one, is ignored (said with -v). The regex must have a \
            capture group.",
        )
        .value_parser(parse_capture_pattern)
        .allow_hyphen_values(true),
        option(
            id::DELAYS,
            "LIST",
            WAITS,
            "Explicit waits, such as 2s,4s,8s: the k-th retry waits the k-th value, the last repeats

They are waited exactly as listed, unless --jitter is also given.",
        )
        .value_parser(parse_delays)
        .allow_hyphen_values(true)
        .conflicts_with_all([id::BACKOFF, id::FACTOR, id::DELAY]),
        option(
            id::JITTER,
            "KIND",
            WAITS,
            "Randomise each wait: full, equal, decorrelated or none [default: full; none with --delays]

With d the capped base wait: full waits 0 to d, equal d/2 to d, none d; decorrelated waits \
            --delay to three times the previous wait, capped, and cannot be used with --delays. The \
            waits listed by --delays are waited exactly, unless --jitter is given.",
        )
        .short('j')
        .value_parser(EnumValueParser::<JitterKind>::new())
        .allow_hyphen_values(true),
        option(
            id::SEED,
            "N",
            WAITS,
            "Seed of the jitter's random source: the same seed gives the same waits

It may be given in double quotes, as the JSON log writes it.",
        )
        .value_parser(parse_seed)
        .allow_hyphen_values(true),
        option(
            id::STAGGER,
            "DURATION",
            WAITS,
            "Wait a random time up to this before the first try

So that runs started together (cron at :00, a CI matrix) do not arrive together. The wait comes \
            from the same random source as the jitter (--seed) and counts against the budget.",
        )
        .value_parser(parse_duration)
        .allow_hyphen_values(true),
        option(
            id::RETRY_ON,
            "LIST",
            CLASSIFY,
            "Only these outcomes are transient; every other failure is permanent

A LIST is comma-separated: exit codes (75), ranges (1-5), signal names (KILL, SIGTERM, RTMIN+2) \
            and the word timeout. Exit 0 is always a success and cannot be listed.",
        )
        .value_parser(parse_list)
        .allow_hyphen_values(true),
        option(id::STOP_ON, "LIST", CLASSIFY, "These outcomes are permanent, even where --retry-on matches")
            .value_parser(parse_list)
            .allow_hyphen_values(true),
        option(id::SUCCESS_ON, "LIST", CLASSIFY, "Exit codes that count as success besides 0 (codes and ranges)")
            .value_parser(parse_list)
            .allow_hyphen_values(true),
        option(
            id::RETRY_IF_OUTPUT,
            "REGEX",
            CLASSIFY,
            "A failed try is transient only if its stdout or stderr matched this regular expression

Matching is on bytes, line by line, while the output streams to its destination.",
        )
        .value_parser(parse_pattern)
        .allow_hyphen_values(true),
        option(
            id::STOP_IF_OUTPUT,
            "REGEX",
            CLASSIFY,
            "A failed try is permanent if its stdout or stderr matched this regular expression",
        )
        .value_parser(parse_pattern)
        .allow_hyphen_values(true),
        option(
            id::UNTIL_OUTPUT,
            "REGEX",
            CLASSIFY,
            "A success counts only if the try's stdout or stderr matched this regular expression

A success without a match is a transient failure, not ready yet: with -n 0 -B 2m, retry polls \
            until the command prints that it is ready. To --stop-if-output and --retry-if-output, a \
            try that is not ready is a failure. With --buffer-stdout, only the ready try's output \
            reaches stdout. A run that gives up after a try that exited 0 but was not ready exits 1.",
        )
        .value_parser(parse_pattern)
        .allow_hyphen_values(true),
        option(
            id::STDIN,
            "MODE",
            IO,
            "Standard input of the tries: auto, replay, inherit or null

auto: a terminal is inherited, a regular file is read again by every try from the offset it had \
            when retry started, and a \
            pipe is read only as a try asks for it, recorded, and replayed to every later try (the \
            recorded part first, then whatever the pipe still holds): a try that never reads leaves \
            all of it to whoever reads after retry. Where retry cannot see what a try asks for \
            (systems other than Linux), auto passes a pipe on untouched. replay records a pipe as \
            fast as the try takes it, inherit passes standard input untouched, null gives /dev/null.",
        )
        .value_parser(EnumValueParser::<StdinMode>::new())
        .allow_hyphen_values(true)
        .default_value("auto"),
        flag(
            id::BUFFER_STDOUT,
            IO,
            "Hold each try's standard output; only the successful try's reaches stdout, once

A failed try's output goes to standard error instead. Output past 32 MiB is held in a temporary \
            file.",
        ),
        flag(
            id::OUTPUT_ON_FAILURE,
            IO,
            "Hold everything the run would print, and print it only if the run fails, as chronic does

While the run goes on, every try's standard error, the failed tries' standard output, the hooks' \
            output, the log and the CI markers are held (past 4 MiB, in a temporary file). A run \
            that succeeds passes on only the successful try's standard output, as --buffer-stdout \
            does (which it implies), and under GitHub Actions its one annotation: nothing else. A \
            run that gives up, is interrupted, or that --flaky fail fails, prints everything held \
            on standard error in the order it happened, each try's output before the log's line \
            about it, the successful try's standard output on standard output in its place. The \
            JSON log (--log-format json) and --log-file are not held. Not with --repeat.",
        )
        .conflicts_with(id::REPEAT),
        option(
            id::ON_RETRY,
            "CMD",
            HOOKS,
            "Shell command run (sh -c) before the wait that follows each failed try

It runs only after a try that ran and failed: never after a successful try of a --consecutive \
            streak, nor after a try that --throttle held back. It sees the environment of the \
            tries plus RETRY_EXIT_CODE (the status of the failed try) and \
            RETRY_DELAY_MS (the wait ahead); its output goes to standard error. Its failure is logged \
            and changes nothing else. It is bounded by --timeout and the budget, and stopped as a try \
            is.

RETRY_ENV_FILE names a fresh private file (0600, removed when the hook ends; --on-give-up \
            gets none): its NAME=VALUE lines (and NAME<<DELIMITER for a value of several lines, as \
            in GitHub's GITHUB_ENV) set variables for every later try and hook, a later line \
            winning: a fresh token, another mirror. At most 64 KiB and 1000 lines are read. Names \
            starting with RETRY_ are retry's own and refused; a refused line is warned of by its \
            number and name, never by its value.",
        )
        .value_parser(ValueParser::string())
        .allow_hyphen_values(true),
        option(id::ON_GIVE_UP, "CMD", HOOKS, "Shell command run (sh -c) when the run gives up after a failed try, as --on-retry")
            .value_parser(ValueParser::string())
            .allow_hyphen_values(true),
        option(
            id::DEAD_LETTER,
            "FILE",
            UNATTENDED,
            "When the run gives up, append it to FILE as one JSON line, to run it again with --replay

FILE may be a Redis URL, as --quota takes it: the record goes, with the machine's host \
            name, to a Redis Stream the fleet shares (the user and password as --quota takes them); when \
            Redis cannot be reached it is kept in a private local file and moved there by the \
            next run or replay of NAME that reaches it.

Not when it is interrupted. The line holds the run's id, the time (ts), the --label, the working \
            directory (cwd), the command, the options of the run, the exit status (exit_code), \
            why it gave up (reason), the tries and the duration (duration_ms); never the \
            environment. A word that is not UTF-8 is written as {\"base64\":\"...\"}, its bytes in \
            base64. --deadline is not kept, as it would have passed by the time of a replay: \
            a deadline that came before any budget is kept as the budget it gave the run \
            (--budget= the deadline less the start). FILE \
            and its directory are created if missing, for their owner only (0600, 0700); each \
            line is written whole under a lock, so runs giving up together never mix their lines. \
            FILE must be a regular file (not a symbolic link, a FIFO or a device) of the user \
            running retry, that group and others cannot write, and not the --log-file.",
        )
        .value_parser(ValueParser::path_buf())
        .conflicts_with(id::REPLAY),
        option(
            id::REPLAY,
            "FILE",
            UNATTENDED,
            "Run again, one after another, the runs of a --dead-letter FILE that are still pending

With redis://HOST[:PORT]/NAME, the pending runs of this machine (--any-host: of the fleet), each \
            claimed on Redis before it runs, so that replays at once never run one twice.

Each runs in its working directory with its recorded options, where the options given now \
            override those of the same name or that conflict with them (--replay FILE -n 1 tries \
            each once), and with its recorded id as RETRY_RUN_ID. A run that succeeds is marked \
            resolved, and one that fails again stays pending (it is not recorded anew), by a line \
            appended to FILE, which is never rewritten: runs that give up meanwhile are kept, and \
            a replay killed midway loses nothing (a run it had not marked resolved runs again \
            next time). Exit status: 0 when nothing is left pending, 1 otherwise, 125 when \
            FILE cannot be read, is refused as --dead-letter refuses it, or a line of it is \
            damaged (a line cut short by a write that never finished is skipped with a \
            warning). With --dry-run, lists the pending runs (each with its id, when it gave up, \
            its tries, exit status and reason, and its command), runs nothing and exits 0 \
            however many are pending. It takes no command.",
        )
        .value_parser(ValueParser::path_buf()),
        flag(id::QUIET, OUTPUT, "Print only the final line when giving up, and nothing on success")
            .short('q')
            .conflicts_with(id::VERBOSE),
        flag(id::VERBOSE, OUTPUT, "Add the command line, the policy, the seed and timestamps to the log")
            .short('v'),
        option(
            id::LOG_FORMAT,
            "FORMAT",
            OUTPUT,
            "Format of the log: human, or json (one JSON object per line)

Every event of the JSON log and every field of each are listed in json-log.md, in the docs \
            directory of retry's source and in /usr/share/doc/retry-wrapper of its Debian package.",
        )
            .value_parser(EnumValueParser::<LogFormat>::new())
            .allow_hyphen_values(true)
            .default_value("human"),
        option(id::LOG_FILE, "PATH", OUTPUT, "Append the log to this file instead of standard error")
            .value_parser(ValueParser::path_buf()),
        option(
            id::LABEL,
            "NAME",
            OUTPUT,
            "Name this run in the log (retry[NAME]: ...), the JSON log, CI annotations and summaries

Several retried steps in one CI log can then be told apart: every human log line starts \
            retry[NAME]:, every JSON event has \"label\":\"NAME\", and the GitHub Actions annotation, \
            the step summary's table and the folded sections of GitHub and GitLab are named by it. \
            It may not be empty nor hold a line break or another control character.",
        )
        .value_parser(parse_label)
        .allow_hyphen_values(true),
        option(
            id::JUNIT,
            "FILE",
            OUTPUT,
            "When the run ends, write a JUnit XML report of it to FILE, for the CI to read

Maven Surefire's schema, which Jenkins, GitLab and nextest read: one testsuite, and one testcase \
            named by --label, else by the command line. A run that gave up has a failure (its last \
            try and why it gave up) and a rerunFailure for each failed try before; a run that \
            succeeded after failed tries has a flakyFailure for each; a try held back by --throttle \
            did not fail, and has none. A --repeat has a testcase per try, a --replay one per run it \
            replays. FILE is replaced whole (written beside it, then \
            renamed over it), with the mode the umask gives; a symbolic link, a directory or \
            anything else but a regular file at FILE is refused before the command runs. A report \
            that cannot be written is a warning, and changes nothing else.",
        )
        .value_parser(ValueParser::path_buf())
        .conflicts_with_all([id::DRY_RUN, id::SIMULATE, id::STATS]),
        option(
            id::METRICS,
            "FILE",
            OUTPUT,
            "When the run ends, merge its metrics into FILE, for node_exporter's textfile collector

Prometheus's text format: the counters retry_runs_total{job,outcome} and \
            retry_tries_total{job,result}, and per job the gauges \
            retry_last_run_timestamp_seconds, retry_last_success_timestamp_seconds (kept when a \
            run fails), retry_last_duration_seconds, retry_last_tries and retry_last_exit_code. \
            The job is the --label, else the command's name. Many runs and jobs may share FILE \
            (name it *.prom in the collector's directory): each reads it back under the lock of \
            FILE.lock, adds its run, and renames a new file over it, so that it is never seen \
            half written. FILE is refused unless it is a regular file of the user running retry \
            that group and others cannot write, holding only retry's metrics; it is left \
            readable by others, for the collector. A file that cannot be written is a warning, \
            and changes nothing else.",
        )
        .value_parser(ValueParser::path_buf())
        .conflicts_with_all([id::DRY_RUN, id::SIMULATE, id::STATS]),
        option(
            id::PUSHGATEWAY,
            "URL",
            OUTPUT,
            "When the run ends, push its metrics to the Prometheus Pushgateway at URL

The gauges of --metrics (last run, last success, duration, tries, exit code), POSTed to \
            URL/metrics/job/JOB, JOB being the --label, else the command's name: a POST replaces \
            only the metrics it carries, and a run that failed carries no \
            retry_last_success_timestamp_seconds, so the last success stays. http:// or \
            https:// (the server's certificate verified against the system's trusted roots); a \
            user and password for basic authentication from RETRY_PUSHGATEWAY_USER and \
            RETRY_PUSHGATEWAY_PASSWORD, never the URL. The push has 2s (less when the run's \
            budget ends sooner, never under 500ms), tried again on 429 and 5xx; one that fails is \
            a warning, and changes nothing else.",
        )
        .value_parser(ValueParser::os_string())
        .conflicts_with_all([id::DRY_RUN, id::SIMULATE, id::STATS]),
        option(
            id::PING,
            "URL",
            OUTPUT,
            "Ping URL when the command first starts and when the run ends: a dead man's switch

In the scheme of healthchecks.io: URL/start when the first try starts, URL when the run \
            succeeds, URL/fail when it fails, its body a line with the exit status and the reason, \
            then the last 10 KB of the last try's output; each with ?rid=RUN_ID. A cronitor.link URL gets Cronitor's \
            ?state=run, complete or fail instead. A run that runs no command (turned away by \
            --lock) pings nothing. The URL is a secret: it is never printed but for its scheme \
            and host, nor kept in a dead letter. The start is pinged while the command runs; the \
            end has 2s (less when the run's budget ends sooner, never under 500ms), the start's \
            answer included, tried again on 429 and 5xx. A ping that fails is a warning, and \
            changes nothing else.",
        )
        .value_parser(ValueParser::os_string())
        .conflicts_with_all([id::DRY_RUN, id::SIMULATE, id::STATS]),
        option(
            id::COLOR,
            "WHEN",
            OUTPUT,
            "Colour the log: auto (when stderr is a terminal and NO_COLOR is unset), always, never",
        )
        .value_parser(EnumValueParser::<ColorWhen>::new())
        .allow_hyphen_values(true)
        .default_value("auto"),
        flag(id::DRY_RUN, OUTPUT, "Print the schedule the options give, and run nothing"),
        Arg::new(id::COMMAND)
            .value_name("COMMAND")
            .help("The command to run, and its arguments")
            .num_args(1..)
            .trailing_var_arg(true)
            .value_parser(ValueParser::os_string())
            .action(ArgAction::Append),
    ]
}

/// Reads every word of `args` (the program name first) as the command line would, with
/// `--help` and `--version` taken as plain flags: clap stops at them, so that `--help --foo`
/// would print the help, where GNU tools check every option first.
pub fn check_every_word(args: &[OsString]) -> Result<(), clap::Error> {
    let plain = |id: &'static str, short: char| {
        Arg::new(id)
            .short(short)
            .long(id)
            .action(ArgAction::SetTrue)
    };
    command()
        .disable_help_flag(true)
        .disable_version_flag(true)
        .arg(plain("help", 'h'))
        .arg(plain("version", 'V'))
        .try_get_matches_from(args)
        .map(drop)
}

/// `retry --forget FILE ID... [OPTIONS]`: the command line (the program name first) with the
/// options given after the ids moved before them and the ids after a `--`, so that
/// `--forget F all --log-format json` reads `--log-format` as the option it is, not as an id.
/// The words after `--forget FILE` are taken as ids until one starts with `-`; ids after an
/// explicit `--` are all ids. Any other command line is returned as it is.
fn options_before_ids(mut args: Vec<OsString>) -> Vec<OsString> {
    use std::os::unix::ffi::OsStrExt;
    // Most command lines have no --forget: they are not read once more for it.
    if !args.iter().any(|a| a.as_bytes().starts_with(b"--forget")) {
        return args;
    }
    let mut ids: Vec<OsString> = Vec::new();
    // Each turn takes the ids before the next option; a turn per group of ids is enough.
    for _ in 0..args.len() {
        let Ok(m) = parsing_command().try_get_matches_from(&args) else {
            break;
        };
        if !m.contains_id(id::FORGET) {
            break;
        }
        let words: Vec<OsString> = m
            .get_many::<OsString>(id::COMMAND)
            .map(|w| w.cloned().collect())
            .unwrap_or_default();
        let start = args.len() - words.len();
        if words.is_empty() || args[start - 1] == "--" {
            break;
        }
        let Some(k) = words
            .iter()
            .position(|w| w.as_bytes().starts_with(b"-") && w.len() > 1)
        else {
            break;
        };
        ids.extend_from_slice(&words[..k]);
        args.truncate(start);
        args.extend_from_slice(&words[k..]);
    }
    if ids.is_empty() {
        return args;
    }
    // The ids go first after a `--`, before those of the last group.
    let last = match parsing_command().try_get_matches_from(&args) {
        Ok(m) => m
            .get_many::<OsString>(id::COMMAND)
            .map_or(0, Iterator::count),
        Err(_) => 0,
    };
    let mut start = args.len() - last;
    let rest = args.split_off(start);
    if start > 0 && args[start - 1] == "--" {
        args.pop();
        start -= 1;
    }
    debug_assert_eq!(args.len(), start);
    args.push("--".into());
    args.extend(ids);
    args.extend(rest);
    args
}

impl Cli {
    /// Parses the arguments (the program name first).
    pub fn try_parse_from<I, T>(args: I, reading: Reading) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let args = options_before_ids(args.into_iter().map(Into::into).collect());
        let mut definition = parsing_command();
        let mut m = match definition.try_get_matches_from_mut(&args) {
            Ok(m) => m,
            // The error, or the help or version asked for, as the whole definition gives it.
            Err(_) => command().try_get_matches_from(&args)?,
        };
        let cli = Cli::from_matches(&mut m);
        if reading == Reading::Own {
            std::mem::forget(definition);
            std::mem::forget(m);
        }
        Ok(cli)
    }

    fn from_matches(m: &mut ArgMatches) -> Cli {
        let simulate = SimulateArgs::from_matches(m);
        let flaky = FlakyArgs::from_matches(m);
        Cli {
            tries: given(m, id::TRIES),
            consecutive: one(m, id::CONSECUTIVE),
            budget: one(m, id::BUDGET),
            deadline: one(m, id::DEADLINE),
            timeout_without_unit: without_unit(m, id::TIMEOUT),
            delay_without_unit: without_unit(m, id::DELAY).filter(|_| {
                m.value_source(id::DELAY) == Some(clap::parser::ValueSource::CommandLine)
            }),
            timeout: one(m, id::TIMEOUT),
            signal: given(m, id::SIGNAL),
            kill_after: given(m, id::KILL_AFTER),
            foreground: m.get_flag(id::FOREGROUND),
            delay: given(m, id::DELAY),
            backoff: given(m, id::BACKOFF),
            factor: given(m, id::FACTOR),
            max_delay: given(m, id::MAX_DELAY),
            delay_from_output: one(m, id::DELAY_FROM_OUTPUT),
            delays: one(m, id::DELAYS),
            jitter: one(m, id::JITTER),
            seed: one(m, id::SEED),
            classify: ClassifyArgs::from_matches(m),
            stdin: given(m, id::STDIN),
            buffer_stdout: m.get_flag(id::BUFFER_STDOUT),
            output_on_failure: m.get_flag(id::OUTPUT_ON_FAILURE),
            on_retry: one(m, id::ON_RETRY),
            on_give_up: one(m, id::ON_GIVE_UP),
            quiet: m.get_flag(id::QUIET),
            verbose: m.get_flag(id::VERBOSE),
            log_format: given(m, id::LOG_FORMAT),
            log_file: one(m, id::LOG_FILE),
            label: one(m, id::LABEL),
            junit: one(m, id::JUNIT),
            metrics: one(m, id::METRICS),
            pushgateway: one(m, id::PUSHGATEWAY),
            ping: one(m, id::PING),
            stagger: with_text(m, id::STAGGER),
            quota: one(m, id::QUOTA),
            throttle: one(m, id::THROTTLE),
            lock: one(m, id::LOCK),
            lock_wait: with_text(m, id::LOCK_WAIT),
            once: one(m, id::ONCE),
            once_for: with_text(m, id::ONCE_FOR),
            color: given(m, id::COLOR),
            dry_run: m.get_flag(id::DRY_RUN),
            dead_letter: one(m, id::DEAD_LETTER),
            replay: one(m, id::REPLAY),
            records: RecordsArgs::from_matches(m),
            simulate,
            flaky,
            command: m
                .remove_many::<OsString>(id::COMMAND)
                .map(Iterator::collect)
                .unwrap_or_default(),
        }
    }
}

/// The value of an option, taken out of the matches; the value parsers fixed each one's type.
fn one<T: Clone + Send + Sync + 'static>(m: &mut ArgMatches, id: &str) -> Option<T> {
    m.remove_one::<T>(id)
}

/// The last value of a DURATION option as written, when it is a bare number of seconds other
/// than 0 (`5`, `2.5`): what a user of another program may have meant as something else.
fn without_unit(m: &ArgMatches, id: &str) -> Option<String> {
    let raw = m.get_raw(id)?.next_back()?.to_str()?.trim();
    let bare = !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let zero = raw.bytes().all(|b| b == b'0' || b == b'.');
    (bare && !zero).then(|| raw.to_string())
}

/// The value of an option with a default, which always has one.
fn given<T: Clone + Send + Sync + 'static>(m: &mut ArgMatches, id: &str) -> T {
    one(m, id).expect("an option with a default value")
}

/// The value of an option and the text it was given as (the last, if given more than once).
fn with_text<T: Clone + Send + Sync + 'static>(
    m: &mut ArgMatches,
    id: &str,
) -> Option<(T, String)> {
    let text = m
        .get_raw(id)
        .and_then(|mut words| words.next_back())
        .map(|word| word.to_string_lossy().into_owned());
    one(m, id).zip(text)
}

/// The options of flaky commands (docs/flaky.md#flaky-runs): `--flaky`, `--repeat`, `--history`,
/// `--stats`.
#[derive(Debug)]
pub struct FlakyArgs {
    pub flaky: FlakyMode,
    pub repeat: Option<u64>,
    pub keep_going: bool,
    /// `--delay` was given on the command line: the wait between the tries of a repeat.
    pub delay_given: bool,
    pub history: Option<PathBuf>,
    pub stats: Option<PathBuf>,
    pub since: Option<Duration>,
}

impl FlakyArgs {
    fn from_matches(m: &mut ArgMatches) -> FlakyArgs {
        FlakyArgs {
            flaky: given(m, id::FLAKY),
            repeat: one(m, id::REPEAT),
            keep_going: m.get_flag(id::KEEP_GOING),
            delay_given: m.value_source(id::DELAY) == Some(clap::parser::ValueSource::CommandLine),
            history: one(m, id::HISTORY),
            stats: one(m, id::STATS),
            since: one(m, id::SINCE),
        }
    }
}

/// The options that mean nothing to `--repeat`, which has no retries to shape
/// (docs/flaky.md#repeating-a-command).
const NOT_WITH_REPEAT: &[&str] = &[
    id::TRIES,
    id::THROTTLE,
    id::CONSECUTIVE,
    id::BACKOFF,
    id::FACTOR,
    id::MAX_DELAY,
    id::DELAYS,
    id::JITTER,
    id::DELAY_FROM_OUTPUT,
    id::RETRY_ON,
    id::STOP_ON,
    id::QUOTA,
    id::DEAD_LETTER,
    id::ON_RETRY,
    id::ON_GIVE_UP,
];

/// The options of a run, which mean nothing to `--stats`, which runs nothing: every option
/// but those of the log's format and colour, `-q` and `-v`.
const NOT_WITH_STATS: &[&str] = &[
    id::TRIES,
    id::THROTTLE,
    id::LOCK,
    id::LOCK_WAIT,
    id::CONSECUTIVE,
    id::BUDGET,
    id::DEADLINE,
    id::TIMEOUT,
    id::SIGNAL,
    id::KILL_AFTER,
    id::FOREGROUND,
    id::DELAY,
    id::DELAYS,
    id::BACKOFF,
    id::FACTOR,
    id::MAX_DELAY,
    id::JITTER,
    id::SEED,
    id::DELAY_FROM_OUTPUT,
    id::QUOTA,
    id::STAGGER,
    id::RETRY_ON,
    id::STOP_ON,
    id::SUCCESS_ON,
    id::RETRY_IF_OUTPUT,
    id::STOP_IF_OUTPUT,
    id::UNTIL_OUTPUT,
    id::STDIN,
    id::BUFFER_STDOUT,
    id::OUTPUT_ON_FAILURE,
    id::FLAKY,
    id::KEEP_GOING,
    id::LABEL,
    id::ON_RETRY,
    id::ON_GIVE_UP,
    id::LOG_FILE,
];

/// The options that manage the runs a dead-letter file keeps (docs/dead-letters.md#picking-forgetting-pruning).
#[derive(Debug, Default)]
pub struct RecordsArgs {
    /// `--only`: run ids, or unique prefixes of them, in the order given.
    pub only: Vec<String>,
    pub only_label: Option<String>,
    pub all: bool,
    pub forget: Option<PathBuf>,
    pub prune: Option<PathBuf>,
    pub older_than: Option<Duration>,
    pub any_host: bool,
}

impl RecordsArgs {
    fn from_matches(m: &mut ArgMatches) -> RecordsArgs {
        RecordsArgs {
            only: m
                .remove_many::<String>(id::ONLY)
                .map(Iterator::collect)
                .unwrap_or_default(),
            only_label: one(m, id::ONLY_LABEL),
            all: m.get_flag(id::ALL),
            forget: one(m, id::FORGET),
            prune: one(m, id::PRUNE),
            older_than: one(m, id::OLDER_THAN),
            any_host: m.get_flag(id::ANY_HOST),
        }
    }
}

fn record_options() -> Vec<Arg> {
    vec![
        option(
            id::ONLY,
            "ID",
            UNATTENDED,
            "With --replay, run only the pending run with this id (a unique prefix of 8 or more characters will do); may be given again

An id that names no pending run, or more than one, is an error (125) before anything runs. A \
            second --only adds to the first.",
        )
        .value_parser(ValueParser::string())
        .action(ArgAction::Append)
        .requires(id::REPLAY),
        option(
            id::ONLY_LABEL,
            "GLOB",
            UNATTENDED,
            "With --replay, run only the pending runs whose --label matches this shell pattern (nightly-*)",
        )
        .value_parser(ValueParser::string())
        .requires(id::REPLAY),
        flag(
            id::ANY_HOST,
            UNATTENDED,
            "With --replay redis://..., take the pending runs of every machine, not only this one's

A run's record holds its working directory and command as they were on the machine it ran \
            on; --any-host is for a fleet whose machines are alike.",
        )
        .requires(id::REPLAY),
        flag(
            id::ALL,
            UNATTENDED,
            "With --replay FILE --dry-run, list the runs resolved or forgotten too, each with its state",
        )
        .requires(id::DRY_RUN),
        option(
            id::FORGET,
            "FILE",
            UNATTENDED,
            "Forget the pending runs of a --dead-letter FILE named by the ids that follow (or all): they are never replayed

retry --forget FILE ID... appends a forgotten line for each run named (an id, or a unique \
            prefix of 8 or more characters); the word all forgets every pending run. A forgotten \
            run is no longer pending, and is still listed by --replay FILE --dry-run --all until \
            --prune drops it. It runs nothing; exit status 0, or 125 when an id names no pending \
            run or more than one, and then nothing is forgotten.",
        )
        .value_parser(ValueParser::path_buf())
        .conflicts_with_all([id::REPLAY, id::DRY_RUN, id::SIMULATE, id::STATS, id::PRUNE, id::JUNIT])
        .conflicts_with_all(NOT_WITH_STATS),
        option(
            id::PRUNE,
            "FILE",
            UNATTENDED,
            "Rewrite a --dead-letter or --history FILE without what is settled or older than --older-than

Of a dead-letter file it drops the runs resolved or forgotten, and the pending ones that gave \
            up longer ago than --older-than; of a history, the runs that ended longer ago than that. \
            The file is written anew beside itself and renamed over it; runs that append meanwhile \
            lose nothing, and wait for the prune only while it copies what they appended as it read. \
            It prints what it dropped and kept, runs nothing, and exits 0, or 125 when the file \
            cannot be read or written, a line of a dead-letter file is damaged, or a replay of it \
            is running.",
        )
        .value_parser(ValueParser::path_buf())
        .requires(id::OLDER_THAN)
        .conflicts_with_all([id::REPLAY, id::DRY_RUN, id::SIMULATE, id::STATS, id::JUNIT])
        .conflicts_with_all(NOT_WITH_STATS),
        option(
            id::OLDER_THAN,
            "DURATION",
            UNATTENDED,
            "With --prune, which needs it, the age past which pending dead letters and history runs are dropped, as 30d or 12h; it has no default",
        )
        .value_parser(parse_duration)
        // `-1s` is a value to refuse in words of durations, not options `-1` and `-s`.
        .allow_hyphen_values(true)
        .requires(id::PRUNE),
    ]
}

fn flaky_options() -> Vec<Arg> {
    vec![
        option(
            id::FLAKY,
            "MODE",
            FLAKY,
            "What a run that succeeded only after a failed try exits with: pass, warn or fail

pass exits 0, as any success. warn exits 0 and logs a warning (under GitHub Actions, the run's \
            ::warning). fail exits, once the successful try's output has gone out, with the status \
            the last failed try would have given when giving up, and the last line says so: \
            succeeded on try 3/5, but --flaky fail: exit 1.",
        )
        .value_parser(EnumValueParser::<FlakyMode>::new())
        .allow_hyphen_values(true)
        .default_value("pass"),
        option(
            id::REPEAT,
            "N",
            FLAKY,
            "Run the command N times in a row to reproduce a flake; 0 runs until a try fails

Every try has its timeout, its process tree stopped, standard input replayed and the output \
            patterns, as in any run; there is no backoff, and --delay waits that long between tries \
            when given. The run stops at the first failed try, whose output is the flake to look \
            at, and exits with the status that try would give when giving up (0 when none failed, 124 \
            when no try ran to its end before the budget did); \
            the last line sums up: 200 tries, 3 failed (1.5%): exit 1 ×2, timed out ×1; first \
            failure on try 17. --budget bounds it as any run. The options that shape retries \
            (--tries, the backoff and jitter options, --retry-on, --stop-on, --quota, \
            --dead-letter, the hooks) cannot be given with it.",
        )
        .value_parser(parse_repeat)
        .allow_hyphen_values(true)
        .conflicts_with_all(NOT_WITH_REPEAT)
        .conflicts_with_all([id::FLAKY, id::REPLAY, id::SIMULATE]),
        flag(
            id::KEEP_GOING,
            FLAKY,
            "With --repeat, run all N tries whatever fails, and report the failure rate

The exit status is then that of the first failed try, 0 when none failed.",
        ),
        option(
            id::HISTORY,
            "FILE",
            FLAKY,
            "Append one JSON line for every run, whatever its end, for --stats to read

The line holds the run's id, the time (ts), the --label, the command, the tries, the outcome \
            (success, gave_up, interrupted, repeat, or done_before), the give-up reason, the exit status \
            (exit_code), whether it was flaky, the duration (duration_ms) and how each try ended \
            (try_outcomes). FILE may be a Redis URL, as --quota takes it: the fleet's history, a \
            Redis Stream capped at about a million runs, each with its host. FILE follows the rules of --dead-letter: created for its owner only, \
            each line written whole under a lock, so that many runs can share it, and refused \
            unless it is a regular file of the user running retry that group and others cannot \
            write.",
        )
        .value_parser(ValueParser::path_buf())
        .conflicts_with(id::SIMULATE),
        option(
            id::STATS,
            "FILE",
            FLAKY,
            "Summarise a --history FILE: one row per label (else per command line), flakiest first

Each row has the runs, the share that succeeded on the first try, that were flaky and that \
            gave up, the mean tries, the median and 95th-percentile duration, when it last failed, \
            and a bar of its flaky share. Damaged lines are counted and named, and skipped. With \
            --log-format json, one JSON object per row. Of a fleet's history on Redis \
            (redis://HOST[:PORT]/NAME), one row per label or command line and host. It takes no command.",
        )
        .value_parser(ValueParser::path_buf())
        .conflicts_with_all([id::DRY_RUN, id::REPLAY, id::SIMULATE, id::REPEAT, id::HISTORY, id::DEAD_LETTER])
        .conflicts_with_all(NOT_WITH_STATS),
        option(
            id::SINCE,
            "DURATION",
            FLAKY,
            "With --stats, count only the runs that ended this long ago or less (7d, 24h)",
        )
        .value_parser(parse_duration)
        .allow_hyphen_values(true),
    ]
}

/// The options that say which tries succeed, which failures are retried and which stop the
/// run (docs/classification.md#classification and docs/classification.md#classification-by-output),
/// each `None` where not given.
#[derive(Debug)]
pub struct ClassifyArgs {
    pub retry_on: Option<List>,
    pub stop_on: Option<List>,
    pub success_on: Option<List>,
    pub retry_if_output: Option<Pattern>,
    pub stop_if_output: Option<Pattern>,
    pub until_output: Option<Pattern>,
}

impl ClassifyArgs {
    fn from_matches(m: &mut ArgMatches) -> ClassifyArgs {
        ClassifyArgs {
            retry_on: one(m, id::RETRY_ON),
            stop_on: one(m, id::STOP_ON),
            success_on: one(m, id::SUCCESS_ON),
            retry_if_output: one(m, id::RETRY_IF_OUTPUT),
            stop_if_output: one(m, id::STOP_IF_OUTPUT),
            until_output: one(m, id::UNTIL_OUTPUT),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackoffKind {
    Exponential,
    Linear,
    Constant,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JitterKind {
    Full,
    Equal,
    Decorrelated,
    None,
}

/// Where the tries' standard input comes from (`--stdin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StdinMode {
    Auto,
    Replay,
    Inherit,
    Null,
}

/// What a flaky run exits with (`--flaky`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlakyMode {
    Pass,
    Warn,
    Fail,
}

/// The log's format (`--log-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Human,
    Json,
}

/// When the log is coloured (`--color`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorWhen {
    Auto,
    Always,
    Never,
}

/// The values of an option that names one of a few kinds, as clap lists and parses them.
macro_rules! value_enum {
    ($kind:ty { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl ValueEnum for $kind {
            fn value_variants<'a>() -> &'a [Self] {
                &[$(<$kind>::$variant),+]
            }

            fn to_possible_value(&self) -> Option<PossibleValue> {
                Some(PossibleValue::new(match self {
                    $(<$kind>::$variant => $name),+
                }))
            }
        }
    };
}

value_enum!(BackoffKind { Exponential => "exponential", Linear => "linear", Constant => "constant" });
value_enum!(JitterKind { Full => "full", Equal => "equal", Decorrelated => "decorrelated", None => "none" });
value_enum!(StdinMode { Auto => "auto", Replay => "replay", Inherit => "inherit", Null => "null" });
value_enum!(LogFormat { Human => "human", Json => "json" });
value_enum!(ColorWhen { Auto => "auto", Always => "always", Never => "never" });
value_enum!(FlakyMode { Pass => "pass", Warn => "warn", Fail => "fail" });
value_enum!(ModelKind { Outage => "outage", Occ => "occ" });

fn parse_tries(s: &str) -> Result<u64, String> {
    s.trim()
        .parse::<u64>()
        .map_err(|_| "expected a whole number of tries (0 for no limit)".into())
}

fn parse_repeat(s: &str) -> Result<u64, String> {
    s.trim()
        .parse::<u64>()
        .map_err(|_| "expected a whole number of tries (0 runs until a try fails)".into())
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

/// A run's name: printed as it is in every log line, so nothing that could end or forge a line.
fn parse_label(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("a label cannot be empty".into());
    }
    if s.chars().any(crate::text::unprintable) {
        return Err("a label cannot hold a line break or another control character".into());
    }
    Ok(s.to_string())
}

fn parse_pattern(s: &str) -> Result<Pattern, String> {
    Pattern::new(s)
}

fn parse_capture_pattern(s: &str) -> Result<Pattern, String> {
    Pattern::capturing(s)
}

fn parse_quota(s: &str) -> Result<QuotaSpec, String> {
    s.parse()
}

fn parse_lock(s: &str) -> Result<LockName, String> {
    s.parse()
}

fn parse_throttle(s: &str) -> Result<ThrottleSpec, String> {
    s.parse()
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

/// The options of `--simulate` (docs/simulation.md#simulation), each `None` or false where not
/// given: the defaults are applied, and the options checked against each other, in
/// [`crate::config`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimulateArgs {
    pub simulate: bool,
    pub clients: Option<u32>,
    pub model: Option<ModelKind>,
    pub outage: Option<Duration>,
    /// Tries per second.
    pub capacity: Option<f64>,
    pub latency: Option<Duration>,
    /// `--every`: the clients arrive again this often.
    pub every: Option<Duration>,
    pub compare: bool,
    /// `--tries` was given: without it, the occ model's clients try until they succeed.
    pub tries_given: bool,
}

impl SimulateArgs {
    fn from_matches(m: &mut ArgMatches) -> SimulateArgs {
        SimulateArgs {
            simulate: m.get_flag(id::SIMULATE),
            clients: m.remove_one(id::CLIENTS),
            model: m.remove_one(id::MODEL),
            outage: m.remove_one(id::OUTAGE),
            capacity: m.remove_one(id::CAPACITY),
            latency: m.remove_one(id::LATENCY),
            every: m.remove_one(id::EVERY),
            compare: m.get_flag(id::COMPARE),
            tries_given: m.value_source(id::TRIES) == Some(clap::parser::ValueSource::CommandLine),
        }
    }
}

/// What `--simulate` runs its clients against (`--model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelKind {
    Outage,
    Occ,
}

/// The options of `--simulate` (docs/simulation.md#simulation), in the order `--help` lists them.
fn simulate_options() -> Vec<Arg> {
    let mut options = vec![simulate_flag()];
    options.extend(fleet_options());
    options.extend(outage_options());
    options.push(flag(
        id::COMPARE,
        SIMULATE,
        "Simulate once per jitter kind, with and without --quota, and print the figures side by side

With --throttle, the herd controls side by side instead, with the policy's own jitter: no \
        quota, the quota alone, and the quota with the throttle.",
    ));
    options
}

fn simulate_flag() -> Arg {
    flag(
        id::SIMULATE,
        SIMULATE,
        "Simulate many clients following this policy at once, and run nothing

The policy's own code (waits, jitter, tries, budget, timeout, --stagger, --quota, --throttle) \
        drives --clients simulated runs on a virtual clock against the dependency of --model, \
        and retry prints what they do to it: the tries in all and per client, the peak rate, \
        when the last client finished, how many succeeded or gave up and why, and a chart of \
        tries per second sized to the terminal; with --throttle or --every, also the tries sent \
        during the outage and after it, the tries held back and how soon after the outage p \
        fell below 0.1. A COMMAND, if given, is not run. The same --seed gives the same \
        figures; with --log-format json, the figures and the tries per interval are JSON lines.",
    )
    .conflicts_with_all([id::DRY_RUN, id::REPLAY])
}

/// How many clients there are, and what they retry against.
fn fleet_options() -> [Arg; 2] {
    [
        option(
            id::CLIENTS,
            "N",
            SIMULATE,
            "Number of simulated clients, from 1 to 1000000 [default: 100]",
        )
        .value_parser(parse_clients)
        .allow_hyphen_values(true),
        option(
            id::MODEL,
            "MODEL",
            SIMULATE,
            "What the simulated clients retry against: outage or occ [default: outage]

outage: every try fails until --outage is over, then at most --capacity tries per second \
            succeed and the rest fail as overload; each try takes --latency. occ: the contention \
            of the AWS Architecture Blog's \"Exponential Backoff And Jitter\": each try reads one \
            shared record and writes it back, each network hop taking 10ms ± 2ms, and the write \
            succeeds only if no other write landed since the read; without --tries, the clients \
            try until they succeed.",
        )
        .value_parser(EnumValueParser::<ModelKind>::new())
        .allow_hyphen_values(true),
    ]
}

/// The dependency of `--model outage`.
fn outage_options() -> [Arg; 4] {
    [
        option(
            id::OUTAGE,
            "DURATION",
            SIMULATE,
            "How long every try fails, from the start (--model outage) [default: 10s]",
        )
        .value_parser(parse_duration)
        .allow_hyphen_values(true),
        option(
            id::CAPACITY,
            "N/s",
            SIMULATE,
            "Tries per second served after the outage; more fail as overload [default: no limit]

A rate limiter that holds one second of tries: N tries may arrive at once, then N more every \
            second. N is above 0 and may have a fraction (0.5/s).",
        )
        .value_parser(parse_capacity)
        .allow_hyphen_values(true),
        option(
            id::LATENCY,
            "DURATION",
            SIMULATE,
            "How long each simulated try takes (--model outage) [default: 100ms]",
        )
        .value_parser(parse_duration)
        .allow_hyphen_values(true),
        option(
            id::EVERY,
            "DURATION",
            SIMULATE,
            "The clients arrive again this often, as a cron fleet does (--model outage) [default: once]

At 0, DURATION, 2 × DURATION, … each of the --clients clients starts a new run, until the end of \
            the outage plus 20 × DURATION (or 5 windows of --throttle, when that is longer).",
        )
        .value_parser(parse_duration)
        .allow_hyphen_values(true),
    ]
}

fn parse_consecutive(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("expected a whole number of successful tries, at least 1".into()),
    }
}

fn parse_clients(s: &str) -> Result<u32, String> {
    let max = crate::sim::MAX_CLIENTS;
    match s.trim().parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a whole number of clients from 1 to {max}"
        )),
    }
}

/// `--capacity`: `N/s`, or a bare number per second.
fn parse_capacity(s: &str) -> Result<f64, String> {
    const MOST: f64 = 1e9;
    let s = s.trim();
    let number = s.strip_suffix("/s").unwrap_or(s).trim();
    match number.parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 && n <= MOST => Ok(n),
        _ => Err(format!(
            "expected a number of tries per second above 0 and at most {MOST}, such as 100/s"
        )),
    }
}
