//! What a run does, as typed events: the one vocabulary between the runner (and the replay),
//! which carry decisions out and say what happened, and the sinks that turn it into what people
//! and programs read (the human log, JSON lines, CI markers, the step summary). The runner writes
//! no text: every sentence of the log is written by a sink, from one of these.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::exit::ExitStatus;
pub use crate::outcome::During;
use crate::outcome::RunOutcome;
use crate::policy::pushback::Ignored;
use crate::policy::quota::QuotaSpec;
use crate::policy::throttle::{Admission, ThrottleSpec};
use crate::policy::{
    BudgetExceeded, Decision, GiveUp, Hook, Outcome, RepeatCount, RepeatEnd, Signal, Verdict,
};
use crate::report::tally::Tally;
use crate::store::deadletter::{Pending, Replayed};
use crate::store::quota::Note;
use crate::store::shared::Fallback;

/// When an event happened: the time of day, and how long the run had been going. The shell
/// reads its clock once per event, so that no sink reads one and every sink of an event
/// sees the same time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub at: SystemTime,
    pub elapsed: Duration,
}

/// An event as every sink gets it: what happened, and when.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    pub stamp: Stamp,
    pub event: Event,
}

/// One thing a run did or met.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The run starts, with this seed (the command and the policy are the sinks' own).
    Start { seed: u64 },
    /// `--stagger` holds the first try back by `delay`, drawn up to `most`.
    Stagger { delay: Duration, most: Duration },
    /// Try `attempt` starts: its output follows.
    TryStarted { attempt: u64 },
    /// The output of try `attempt` has gone out (or the try could not start); with `--junit`
    /// or `--ping`, its last bytes.
    TryOutputDone {
        attempt: u64,
        output: Option<OutputTail>,
    },
    /// A try ended, and the schedule decided what follows.
    TryEnded(TryReport),
    /// A try that `retry` stopped for a reason of its own: a stopping signal it received, or
    /// output of the try that it could not write.
    TryInterrupted(TryReport),
    /// `--throttle` held a try back: it did not run, and the schedule decided what follows.
    TryHeld(HeldReport),
    /// Try `attempt`'s output matched `--delay-from-output`, but asked for no wait.
    RequestIgnored { attempt: u64, ignored: Ignored },
    /// What a failed try (or a hook, `hook`) left running was stopped: `count` processes (0:
    /// not counted), with `signal`, then SIGKILL if `killed`.
    Leftovers {
        attempt: u64,
        hook: Option<Hook>,
        signal: Signal,
        killed: bool,
        count: usize,
    },
    /// The wait before the try after `attempt`.
    Wait {
        attempt: u64,
        wait: crate::policy::Wait,
    },
    /// A hook (`--on-retry`, `--on-give-up`) after try `attempt` failed; the run goes on.
    HookFailed {
        which: Hook,
        attempt: u64,
        failure: HookFailure,
    },
    /// The `--on-retry` hook took so long (`hook`), or the wait ended so late (the run was
    /// stopped past the budget's end, with Ctrl-Z), that try `next` no longer fits in the
    /// budget.
    NoTimeAfterHook {
        next: u64,
        exceeded: BudgetExceeded,
        hook: bool,
    },
    /// The retry quota after a first try's deposit or a retry's take.
    Quota {
        quota: String,
        action: QuotaAction,
        granted: bool,
        tokens: f64,
        /// With `--throttle`, when the try was let through: the figures it was let through on.
        throttle: Option<(ThrottleSpec, Admission)>,
    },
    /// The run succeeded on try `attempt`, and exits with `status`: 0, or under `--flaky fail`
    /// after failed tries, what giving up after the last of them would have given.
    Succeeded {
        attempt: u64,
        elapsed: Duration,
        waited: Duration,
        status: ExitStatus,
        /// The run succeeded only after failed tries (`RunOutcome::flaky`).
        flaky: bool,
        /// The tries that ran and failed before it.
        failed: u64,
    },
    /// `--repeat` ended, for `why`, with `status`: what its tries came to (`signal` when a
    /// stopping signal ends `retry`).
    RepeatEnded {
        count: RepeatCount,
        why: RepeatEnd,
        status: ExitStatus,
        elapsed: Duration,
    },
    /// A stopping signal reached `retry` during try `attempt`, or the wait after it (the
    /// stagger, when `attempt` is 0).
    Received {
        signal: Signal,
        attempt: u64,
        during: During,
    },
    /// The run gave up after `tries` tries, for `why`, with `status`. `last` is how the last try
    /// ended; `signal` the signal that stops `retry`, if one does.
    GaveUp {
        tries: u64,
        elapsed: Duration,
        why: GiveUp,
        status: ExitStatus,
        last: Option<Outcome>,
        signal: Option<Signal>,
        /// `--consecutive`: the successful tries in a row when it gave up (0 when the last
        /// try failed).
        streak: u64,
    },
    /// `--once`'s `key` was done by the run `done` names: the command does not run.
    DoneBefore {
        key: String,
        done: Box<crate::policy::lock::DoneBefore>,
    },
    /// The run has ended, as `outcome` says: the last event of a run, after its hooks and the
    /// playback of withheld output, which every record of the run reads.
    RunEnded(Box<RunOutcome>),
    /// The run that gave up was appended to the `--dead-letter` file.
    DeadLettered { path: PathBuf },
    /// The countdown to try `next`, `secs` seconds away, on the terminal's status line, which
    /// is `width` columns wide (0: not known).
    Countdown { next: u64, secs: u64, width: u16 },
    /// The status line is cleared, for the next line to take its place.
    StatusCleared,
    /// The end of a run that retried or gave up, announced once, before its last line:
    /// `summary` sums it up (`succeeded on try 3/4 after 2 failures: ...`), and `tally` holds
    /// its tries, for GitHub's annotation and the job summary.
    Concluded {
        level: Level,
        summary: String,
        tally: Tally,
    },
    /// A problem that does not change the run.
    Warning(Warning),
    /// A failure of `retry` itself, or of writing the try's output: the run ends next.
    Error(Failure),
    /// `--replay` runs pending run `k` of `total`.
    ReplayStart {
        k: usize,
        total: usize,
        pending: Box<Pending>,
    },
    /// What replaying run `k` of `total` came to.
    ReplayEnd {
        k: usize,
        total: usize,
        pending: Box<Pending>,
        replayed: Replayed,
    },
    /// A replay of `file` ended: how many runs it resolved, how many are still pending, the
    /// tries of all its runs, whether a run it resolved needed more than one, and the status
    /// the replay exits with.
    ReplaySummary {
        file: PathBuf,
        resolved: usize,
        pending: usize,
        tries: u64,
        flaky: bool,
        status: ExitStatus,
        /// The pending runs of the source it did not take (not picked, or another machine's).
        unpicked: usize,
    },
}

/// What a sink that acts only where a try or a run ends sees of an event: the narrow view
/// that [`Event::ends`] gives. That function matches every event without a catch-all arm,
/// so a new event does not compile until it says whether it ends a try or a run, and a sink
/// that matches this view without a catch-all arm handles every end.
#[derive(Clone, Copy, Debug)]
pub enum Ends<'a> {
    /// A try ended by itself (`TryEnded`).
    Try(&'a TryReport),
    /// A try that `retry` stopped because it received a stopping signal.
    TryInterrupted(&'a TryReport),
    /// A try that `--throttle` held back: it did not run.
    TryHeld(&'a HeldReport),
    /// The run ended, as its outcome says.
    Run(&'a RunOutcome),
    /// A replay ended: the runs still pending, the tries of all its runs, whether a run was
    /// flaky, and the status it exits with.
    Replay {
        pending: usize,
        tries: u64,
        flaky: bool,
        status: ExitStatus,
    },
    /// The event ends neither a try nor a run.
    Neither,
}

impl Event {
    /// The event as a sink that acts only where a try or a run ends sees it.
    pub fn ends(&self) -> Ends<'_> {
        match self {
            Event::TryEnded(r) => Ends::Try(r),
            Event::TryInterrupted(r) => Ends::TryInterrupted(r),
            Event::TryHeld(r) => Ends::TryHeld(r),
            Event::RunEnded(outcome) => Ends::Run(outcome),
            Event::ReplaySummary {
                pending,
                tries,
                flaky,
                status,
                ..
            } => Ends::Replay {
                pending: *pending,
                tries: *tries,
                flaky: *flaky,
                status: *status,
            },
            // These tell of a run's end in words, for the log; its records read the outcome.
            Event::Succeeded { .. }
            | Event::GaveUp { .. }
            | Event::DoneBefore { .. }
            | Event::RepeatEnded { .. }
            | Event::Concluded { .. }
            | Event::Start { .. }
            | Event::Stagger { .. }
            | Event::TryStarted { .. }
            | Event::TryOutputDone { .. }
            | Event::RequestIgnored { .. }
            | Event::Leftovers { .. }
            | Event::Wait { .. }
            | Event::HookFailed { .. }
            | Event::NoTimeAfterHook { .. }
            | Event::Quota { .. }
            | Event::Received { .. }
            | Event::DeadLettered { .. }
            | Event::Countdown { .. }
            | Event::StatusCleared
            | Event::Warning(_)
            | Event::Error(_)
            | Event::ReplayStart { .. }
            | Event::ReplayEnd { .. } => Ends::Neither,
        }
    }

    /// Whether the event tells of a run that ends because the reader of its output has gone
    /// (`retry -- yes | head -1`): its last try killed by SIGPIPE, which will not pass. Such a
    /// run ends as quietly as the bare pipeline would, so the log leaves these out unless `-v`.
    pub fn reader_gone(&self) -> bool {
        let pipe = Outcome::Signal(Signal::PIPE);
        match self {
            Event::TryEnded(r) => {
                r.outcome == pipe && matches!(r.decision, Decision::GiveUp(GiveUp::Permanent))
            }
            Event::GaveUp {
                why: GiveUp::Permanent,
                last,
                ..
            } => *last == Some(pipe),
            // retry dies of SIGPIPE after the successful try's output lost its reader.
            Event::GaveUp {
                signal: Some(signal),
                ..
            } => *signal == Signal::PIPE,
            _ => false,
        }
    }
}

/// What the log says about an ended try.
#[derive(Clone, Debug, PartialEq)]
pub struct TryReport {
    pub attempt: u64,
    pub outcome: Outcome,
    pub took: Duration,
    pub verdict: Verdict,
    pub decision: Decision,
    /// Why the command could not start, if it could not.
    pub detail: Option<NotStarted>,
    /// The try was stopped (a timeout outcome) and its group outlived the grace period
    /// (`--kill-after`), so it got SIGKILL.
    pub killed: bool,
    /// The try was stopped because the budget or the deadline ended, not by `--timeout`.
    pub stopped_by_limit: bool,
    /// When `retry` sent its stopping signal, from the try's start: what `timed out after`
    /// says, while `took` runs on through the grace period to the last process's end.
    pub signalled_after: Option<Duration>,
    /// With `--consecutive`: the successful tries in a row, this one included (0 after a
    /// failure); 0 without it.
    pub in_a_row: u64,
}

/// A try that `--throttle` held back: the quota whose figures held it, on which figures, and
/// what the schedule decided after it.
#[derive(Clone, Debug, PartialEq)]
pub struct HeldReport {
    pub attempt: u64,
    pub quota: String,
    pub spec: ThrottleSpec,
    pub admission: Admission,
    pub decision: Decision,
}

/// The last bytes a try wrote, both streams in the order they came (`--junit` and `--ping` keep
/// them), and whether more came before them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutputTail {
    pub bytes: Vec<u8>,
    pub cut: bool,
}

/// Why the command could not be started: the program, and the error of `exec` (its errno,
/// or the standard library's words when it has none). The sinks word it
/// (`words::not_started`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotStarted {
    pub program: OsString,
    pub errno: Option<i32>,
    pub error: String,
}

impl NotStarted {
    pub fn new(program: &OsStr, error: &std::io::Error) -> NotStarted {
        NotStarted {
            program: program.to_os_string(),
            errno: error.raw_os_error(),
            error: error.to_string(),
        }
    }
}

/// How a run's end is announced: a flaky success warns, giving up is an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// A success after failed tries: `-q` announces no success.
    Warning,
    /// A run that `--lock` turned away: a warning too, which `-q` keeps, as it keeps every line
    /// of a run that gave up.
    TurnedAway,
    Error,
}

impl Level {
    pub fn word(self) -> &'static str {
        match self {
            Level::Warning | Level::TurnedAway => "warning",
            Level::Error => "error",
        }
    }
}

/// What a quota operation was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaAction {
    /// A first try deposits its share.
    FirstTry,
    /// A try after a success (the next of a `--consecutive` streak) deposits its share too:
    /// it retries no failure.
    AfterSuccess,
    /// A retry takes a token.
    Retry,
    /// The last try's outcome is counted by the throttle, as the run ends.
    Counted,
}

impl QuotaAction {
    pub fn word(self) -> &'static str {
        match self {
            QuotaAction::FirstTry => "first try",
            QuotaAction::AfterSuccess => "try after a success",
            QuotaAction::Retry => "retry",
            QuotaAction::Counted => "last try counted",
        }
    }
}

/// How a hook failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookFailure {
    /// `sh` could not be started: why.
    NotStarted(String),
    /// It ended badly by itself.
    Ended(Outcome),
    /// It ran past its bound, this long, and was stopped.
    TimedOut(Duration),
}

/// A failure that ends the run, as a value: the sinks word it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Something failed inside `retry`: the error and its causes, in words.
    Internal(String),
    /// `retry`'s signal handlers could not be installed.
    SignalHandlers(String),
    /// `--log-file` cannot be opened.
    LogFile { path: PathBuf, why: String },
    /// `--dead-letter` cannot be opened.
    DeadLetter { path: PathBuf, why: String },
    /// `--history` cannot be opened.
    History { path: PathBuf, why: String },
    /// `--junit` names something the report may not replace (a symbolic link, a directory).
    Junit { path: PathBuf, why: String },
    /// The try's output could not be written (not for a closed pipe): the failure in words.
    Output(String),
    /// A replay cannot append what became of a run to its file: it stops.
    ReplayNotRecorded { path: PathBuf, why: String },
}

/// A problem that does not change the run, as a value: the sinks word it.
#[derive(Clone, Debug, PartialEq)]
pub enum Warning {
    /// `-t` was given a number without a unit (`value`, as written): a timeout of that many
    /// seconds per try here, while Debian's retry reads it as the number of tries.
    TimeoutWithoutUnit { value: String },
    /// `-d` was given a number without a unit (`value`, as written): the base of waits that
    /// grow and are jittered here, while Debian's retry waits that many seconds every time.
    DelayWithoutUnit { value: String },
    /// This run is nested in another retry (run `outer_id`, of `outer` tries, this one of
    /// `inner`; 0: no limit): the tries multiply.
    Nested {
        outer_id: String,
        outer: u64,
        inner: u64,
    },
    /// The try's output could not all be written before the run had to go on.
    SlowReader,
    /// The reader of standard output left before the successful try's output was all written.
    ReaderGone,
    /// Processes of the group led by `pid` outlived SIGKILL by `settle`.
    Survivors { pid: i32, settle: Duration },
    /// What the try's input or output plumbing has to say (`stdio`'s own sentence).
    Stdio(String),
    /// The quota's store had something to say of its state (a damaged file, reset).
    QuotaNote(Note),
    /// The quota's store is locked by other runs for longer than a run may wait: a first try
    /// adds nothing to it.
    QuotaBusy { quota: String, why: String },
    /// The quota's store was locked by other runs for longer than a run may wait as the run
    /// ended: its throttle did not count the last try's outcome.
    CountBusy { quota: String, why: String },
    /// The Redis quota cannot be reached: it is kept on this machine (`from_now_on`: after it
    /// was reached before).
    QuotaUnreachable {
        quota: String,
        why: String,
        from_now_on: bool,
    },
    /// Redis refused the password or the user (`code`: `WRONGPASS`, `NOAUTH`, `NOPERM`): a
    /// misconfiguration; the quota `quota` (its address, without the password) is kept on
    /// this machine, not shared.
    QuotaRefused { quota: String, code: &'static str },
    /// The quota's record counts its throttle's figures over its own window `own`, not the
    /// `asked` one the run named: the run decides on them as they are.
    ThrottleWindow {
        quota: String,
        own: Duration,
        asked: Duration,
    },
    /// The quota cannot be used at all: only the run's own limits apply.
    QuotaUnusable { quota: String, why: String },
    /// The Redis password is written in `--quota`'s URL, where `ps` shows it.
    PasswordInUrl {
        option: &'static str,
        variable: &'static str,
    },
    /// The run could not be recorded in `--dead-letter`.
    DeadLetterNotWritten { path: PathBuf, why: String },
    /// The run is on the fleet's store on Redis (`path`), but the runs kept locally before it
    /// could not be moved there, as `why` says (naming their file): they stay where no replay
    /// of the store sees them.
    DeadLetterKeptNotMoved { path: PathBuf, why: String },
    /// The fleet's store on Redis (`path`) failed as said: the record is kept in the local
    /// `file` until a run or replay of the store on this machine reaches Redis.
    DeadLetterKeptLocally {
        path: PathBuf,
        file: PathBuf,
        why: String,
    },
    /// The lease of the replay `owner` on the run `id` lapsed without being let go: that replay
    /// died, or was stopped or cut off from Redis, and a try it started may still run.
    ClaimLapsed { id: String, owner: String },
    /// A replay did not run the run `id`, which it was asked for by name, for `why` (another
    /// replay holds it, or settled it since it was listed).
    ReplaySkipped { id: String, why: String },
    /// The run `id` that a replay ran was forgotten meanwhile, while the replay's lease on it
    /// had lapsed: the forget stands, and nothing of this replay of it is recorded.
    ReplayForgotten { id: String },
    /// A replay's claim on the run it runs now was lost (`why`): another replay may hold the
    /// run; this run is stopped as on `signal`, and settles nothing.
    ClaimLost { why: String, signal: Signal },
    /// Line `line` of the dead-letter file `path` was cut short by a write that did not
    /// finish: it holds no whole run, and is skipped.
    LineCutShort { path: PathBuf, line: usize },
    /// `--flaky warn`: the run succeeded on try `attempt` (of `of` at most) only after `failed`
    /// tries failed.
    Flaky {
        attempt: u64,
        of: Option<u64>,
        /// The tries that ran and failed before it.
        failed: u64,
    },
    /// `--once`'s `key` could not be marked done after the run succeeded, for `why`: the next
    /// run will run the command again.
    NotMarkedDone { key: String, why: String },
    /// The `--history` file holds `bytes`, more than `--stats` reads: the run is recorded all
    /// the same.
    HistoryTooLarge { path: PathBuf, bytes: u64 },
    /// The run could not be recorded in `--history`.
    HistoryNotWritten { path: PathBuf, why: String },
    /// The run's metrics could not be merged into `--metrics`.
    MetricsNotWritten { path: PathBuf, why: String },
    /// The run could not be reported to a URL outside (`--pushgateway`, `--ping`): `what`
    /// could not be sent to `option`'s URL, shown as it may be printed (`http::shown` for a
    /// ping's), for `why`.
    NotReported {
        option: &'static str,
        what: &'static str,
        url: String,
        why: String,
    },
    /// The run's step outputs could not be appended to `GITHUB_OUTPUT`.
    OutputsNotWritten { path: PathBuf, why: String },
    /// The tries could not be appended to the job summary.
    SummaryNotWritten { path: PathBuf, why: String },
    /// The run's spans were not taken by the OTLP endpoint `to` (shown without its path).
    TracesNotSent { to: String, why: String },
    /// An OpenTelemetry setting, `variable`, is not followed, for `why`.
    TracesSetting { variable: &'static str, why: String },
    /// What `RETRY_ENV_FILE` came to (docs/log.md#variables-for-the-next-tries): a line
    /// refused, a file too large, or one that could not be made or read.
    EnvFile(EnvFileNote),
    /// The `--junit` report could not be written.
    JunitNotWritten { path: PathBuf, why: String },
}

impl Warning {
    /// What a run says when it leaves the quota's store for the one on this machine.
    pub fn of_fallback(spec: &QuotaSpec, fallback: Fallback) -> Warning {
        match fallback.refused {
            Some(code) => Warning::QuotaRefused {
                quota: spec.address(),
                code,
            },
            None => Warning::QuotaUnreachable {
                quota: spec.shown(),
                why: fallback.why,
                from_now_on: fallback.answered_before,
            },
        }
    }
}

/// What `--on-retry`'s `RETRY_ENV_FILE` came to, when it set less than it holds. Never a
/// value: it may be a secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvFileNote {
    /// Line `line` sets nothing, for `why`; `name` is the variable it names, when it names a
    /// valid one.
    Line {
        line: usize,
        name: Option<String>,
        why: EnvLineProblem,
    },
    /// The file holds more than is read (`max_bytes`, `max_lines`): the lines after line
    /// `read` set nothing.
    TooLarge {
        read: usize,
        max_bytes: usize,
        max_lines: usize,
    },
    /// The file could not be made: the hook runs without it.
    NotMade(String),
    /// The file could not be read after the hook: it sets nothing.
    NotRead(String),
}

/// Why a line of `RETRY_ENV_FILE` sets nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnvLineProblem {
    /// Neither `NAME=VALUE` nor `NAME<<DELIMITER`.
    NotAssignment,
    /// What comes before `=` or `<<` is not a variable's name.
    BadName,
    /// The name starts with `RETRY_`: those are `retry`'s own.
    Reserved,
    /// The value holds a NUL byte or bytes that are not UTF-8, which no variable can hold.
    NotText,
    /// `NAME<<DELIMITER` with no line `DELIMITER` after it to end the value.
    Unended,
    /// The hooks have set as many variables as a run keeps (`max`).
    TooMany { max: usize },
}
