//! The loop of a real run: ask the schedule what to do, run the try, wait for the first of (the
//! try ends, its time is up, a signal arrives), report, obey.

use std::ffi::OsString;
use std::ops::ControlFlow;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, SystemTime};

use crate::config::Config;
use crate::duration::millis;
use crate::exit::ExitStatus;
use crate::policy::quota::{QuotaRefusal, QuotaSpec};
use crate::policy::{
    Decision, Flaky, GiveUp, Outcome, OutputMatch, Repeat, RepeatEnd, Schedule, Signal, Verdict,
    Wait,
};
use crate::report::event::{During, Event, Failure, HookFailure, QuotaAction, TryReport, Warning};
use crate::report::log::{Log, not_started};
use crate::run::child::{ChildFd, ChildStdio, resolve};
use crate::run::clock::{Moment, after};
use crate::run::process::{
    Child, Inherited, SpawnError, SpawnOptions, Target, Terminal, descendants, has_children,
    reap_all, send,
};
use crate::run::random::LazyRng;
use crate::run::signals::{Event as SignalEvent, Signals};
use crate::run::stdio::{RunIo, TryIo};
use crate::store::deadletter::DeadLetter;
use crate::store::quota::{Unanswered, Update, unix_ms};
use crate::store::shared::{Shared, Use as QuotaUse};

/// After SIGKILL, how long to wait for the kernel to finish the group before going on without
/// it (a process in uninterruptible sleep dies only when its I/O ends).
const KILL_SETTLE: Duration = Duration::from_secs(5);

/// Why `retry` stops the processes of a try (or a hook): the cause names the signal they get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StopCause {
    /// Its time is up: `--timeout`, the budget or the deadline; for a hook, its bound.
    TimeUp,
    /// `retry` received this stopping signal, and passes it on (spec 6.4).
    Received(Signal),
    /// It ended, failed, and left processes running (spec 6.3, 8.3).
    Leftovers,
    /// Its output could not be written: the run ends.
    OutputFailed,
}

/// How the processes that `retry` stopped came to an end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// Every one ended within the grace period (or had ended by itself).
    Exited,
    /// Something outlived the grace period, or a further stopping signal cut it short: SIGKILL.
    Killed,
}

impl Ending {
    fn killed(self) -> bool {
        self == Ending::Killed
    }
}

/// What stopping a try (or hook) came to.
struct Stopped {
    /// A stopping signal that reached `retry` meanwhile: `retry` will die of it.
    received: Option<Signal>,
    /// When the stopping signal was sent.
    signalled: Moment,
    ending: Ending,
    /// How many processes were still running when the stop began.
    count: usize,
    /// How many of them had left the try's process group.
    outside: usize,
}

/// How a try that ran to its end (or was stopped on its time) ended.
#[derive(Clone, Copy, Debug)]
struct Ended {
    outcome: Outcome,
    /// `Killed` when the try was stopped and needed SIGKILL after the grace period.
    ending: Ending,
    /// The try was stopped by the end of the budget or the deadline, not by `--timeout`.
    by_limit: bool,
    /// What the failed try left running, and how stopping it went.
    leftovers: Option<Leftovers>,
    /// When `retry` sent the try its stopping signal, if it did.
    signalled: Option<Moment>,
}

/// What a hook wrote, kept in a temporary file, and how much of it has been passed on to
/// standard error.
struct HookOutput {
    file: std::fs::File,
    passed: u64,
}

impl HookOutput {
    /// Passes on to standard error what the hook has written since the last call, its last
    /// line ended: `retry` passes it on, so a line it leaves open would be `retry`'s (the last
    /// hook, `--on-give-up`, is followed by no line of `retry`'s that would end it).
    fn pass_on(&mut self) {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; 64 * 1024];
        let mut last = b'\n';
        while let Ok(n @ 1..) = self.file.read_at(&mut buf, self.passed) {
            if crate::run::sink::pass_on_stderr(&buf[..n]).is_err() {
                return;
            }
            last = buf[n - 1];
            self.passed += n as u64;
        }
        if last != b'\n' {
            let _ = crate::run::sink::pass_on_stderr(b"\n");
        }
    }
}

/// Processes a failed try left running, stopped before anything else happened.
#[derive(Clone, Copy, Debug)]
struct Leftovers {
    count: usize,
    ending: Ending,
}

/// How a try ended, from the runner's point of view.
enum TryEnd {
    Ended(Ended),
    /// The command could not be started.
    NotStarted(Outcome, String),
    /// The try's output could not be written (not for a closed pipe); the try has been
    /// stopped, and the run ends.
    OutputFailed,
    /// `retry` received a stopping signal during the try; the try has been stopped. The
    /// outcome is how it ended, if it had started.
    Interrupted(Signal, Option<Ended>),
}

/// How a child that `run_child` watched came to its end.
enum Finish {
    /// It ended by itself: its leader's outcome.
    Exited(Outcome),
    /// Its time came, and it was stopped.
    TimedOut(Stopped),
    /// `retry` received this stopping signal, and stopped it with the same.
    Interrupted(Signal, Stopped),
    /// Its output could not be written, and it was stopped.
    OutputFailed,
}

impl Ended {
    /// A try that ended by itself, or never started.
    fn by_itself(outcome: Outcome) -> Ended {
        Ended {
            outcome,
            ending: Ending::Exited,
            by_limit: false,
            leftovers: None,
            signalled: None,
        }
    }

    /// A try that `retry` stopped: `by_limit` when the budget or the deadline stopped it.
    fn stopped(outcome: Outcome, stopped: &Stopped, by_limit: bool) -> Ended {
        Ended {
            outcome,
            ending: stopped.ending,
            by_limit,
            leftovers: escaped(stopped),
            signalled: Some(stopped.signalled),
        }
    }

    /// What the log says about try `attempt`, which started at `start` and ended so after
    /// `took`.
    fn report(
        &self,
        attempt: u64,
        start: Moment,
        took: Duration,
        verdict: Verdict,
        decision: Decision,
        detail: Option<String>,
    ) -> TryReport {
        TryReport {
            attempt,
            outcome: self.outcome,
            took,
            verdict,
            decision,
            detail,
            killed: self.ending.killed(),
            stopped_by_limit: self.by_limit,
            signalled_after: self.signalled.map(|at| at.saturating_duration_since(start)),
        }
    }
}

/// The try being run: its number, when it started, its plumbing.
struct Try {
    attempt: u64,
    start: Moment,
    io: TryIo,
}

/// The retry that the schedule decided on after try `attempt` ended with `outcome`.
struct Retry {
    attempt: u64,
    outcome: Outcome,
    wait: Wait,
}

/// A hook to run (spec 8.3): which one, its command, and what it is told.
struct Hook<'a> {
    /// `--on-retry` or `--on-give-up`.
    which: &'static str,
    command: &'a str,
    /// The try after which it runs.
    attempt: u64,
    /// `RETRY_EXIT_CODE`: the status `retry` would exit with after that try.
    exit_code: i32,
    /// `RETRY_DELAY_MS`: the wait before the next try.
    delay: Duration,
    /// How long it may run.
    bound: Option<Duration>,
}

/// What wakes the runner: `next_event` deals with the rest itself (signals to pass on, job
/// control, window sizes, the try's input and output).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wake {
    /// A child changed state: reap.
    Child,
    /// A stopping signal reached `retry`.
    Stop(Signal),
    /// The time given has come.
    Timeout,
    /// The try's output could not be written (not for a closed pipe).
    OutputFailed,
    /// Everything the ended try wrote has been written out (only while draining).
    Drained,
}

/// What `retry` found around it when it started: read once by the shell (`run::real_run`)
/// and handed to the runner, which reads no environment and probes no terminal itself.
pub struct Surroundings {
    /// The run's id, passed to every try as `RETRY_RUN_ID`.
    pub run_id: String,
    /// When the run started, on the run's clock and on the wall clock.
    pub start: Moment,
    pub wall_start: SystemTime,
    /// The terminal `retry` runs on, if any.
    pub terminal: Option<Terminal>,
    /// What was below `retry` before its first try, never stopped with a try.
    pub inherited: Inherited,
    /// The run this one runs in, when a try of another `retry` started it.
    pub outer: Option<OuterRun>,
    /// The retry quota this run shares with others (`--quota`), its store open.
    pub quota: Option<SharedQuota>,
    /// Where the run is recorded if it gives up (`--dead-letter`).
    pub dead_letter: Option<DeadLetter>,
}

/// How a run ended: its status, and for a replay, its tries, why it gave up if it did, and
/// the signal handling, which outlives one run.
pub struct RunEnd {
    pub status: ExitStatus,
    pub tries: u64,
    /// The `reason` of its `give_up` event, if it gave up; `flaky` for a success that
    /// `--flaky fail` fails.
    pub reason: Option<&'static str>,
    pub signals: Signals,
}

/// A retry quota and the store that keeps it.
pub struct SharedQuota {
    pub spec: QuotaSpec,
    pub store: Shared,
}

/// The `retry` run that started this one, as its try's environment says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OuterRun {
    pub id: String,
    /// Its try that started this run (`RETRY_ATTEMPT`), as written.
    pub attempt: String,
    /// Its tries at most, 0 for no limit.
    pub max_tries: u64,
}

impl OuterRun {
    /// Reads the outer run from the environment variables a try of `retry` gets.
    pub fn from_env(var: impl Fn(&str) -> Option<OsString>) -> Option<OuterRun> {
        let id = var("RETRY_RUN_ID")?.to_string_lossy().into_owned();
        let text = |name| var(name).map(|v| v.to_string_lossy().into_owned());
        Some(OuterRun {
            id,
            attempt: text("RETRY_ATTEMPT").unwrap_or_default(),
            max_tries: text("RETRY_MAX_TRIES")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
        })
    }
}

pub struct Runner<'c> {
    config: &'c Config,
    /// Count down long waits on the terminal (stderr is one, and the log is human and on it).
    countdown: bool,
    log: Log,
    signals: Signals,
    stdio: RunIo,
    terminal: Option<Terminal>,
    start: Moment,
    env: Vec<(&'static str, String)>,
    /// The try or hook running now: where forwarded signals go.
    current: Option<Target>,
    /// The countdown line is on the terminal.
    status_shown: bool,
    /// The try has ended and its output is being written out.
    draining: bool,
    /// What was below `retry` before its first try: never stopped with a try.
    inherited: Inherited,
    /// The run this one is nested in, if any.
    outer: Option<OuterRun>,
    /// The shared retry quota, while its store answers; dropped (with a warning) when it fails,
    /// and only the run's own limits apply then.
    quota: Option<SharedQuota>,
    dead_letter: Option<DeadLetter>,
    /// `--repeat`: what its tries came to so far. It decides in place of the schedule.
    repeat: Option<Repeat>,
    /// How the last failed try ended, for `--flaky fail`.
    last_failed: Option<Outcome>,
    /// Tries run, and why the run gave up, once it has ended.
    ended: (u64, Option<&'static str>),
}

impl<'c> Runner<'c> {
    /// `start` and `wall_start` are the moment `retry` started: the budget counts from there.
    pub fn new(
        config: &'c Config,
        log: Log,
        signals: Signals,
        stdio: RunIo,
        around: Surroundings,
    ) -> Runner<'c> {
        let mut env = vec![
            ("RETRY_ATTEMPT", String::new()),
            (
                "RETRY_MAX_TRIES",
                config.policy.max_tries.unwrap_or(0).to_string(),
            ),
            ("RETRY_RUN_ID", around.run_id),
        ];
        if let Some(limit) = config.policy.limit {
            let ms = around
                .wall_start
                .checked_add(limit.at)
                .and_then(|end| end.duration_since(SystemTime::UNIX_EPOCH).ok())
                .map_or(u64::MAX, millis);
            env.push(("RETRY_DEADLINE_MS", ms.to_string()));
        }
        Runner {
            config,
            countdown: false,
            log,
            signals,
            stdio,
            terminal: around.terminal,
            start: around.start,
            env,
            current: None,
            status_shown: false,
            draining: false,
            inherited: around.inherited,
            outer: around.outer,
            quota: around.quota,
            dead_letter: around.dead_letter,
            repeat: config.repeat.map(Repeat::new),
            last_failed: None,
            ended: (0, None),
        }
    }

    pub fn with_countdown(mut self, on: bool) -> Runner<'c> {
        self.countdown = on;
        self
    }

    /// Warns once (on the outer run's first try) when this run is nested in another retry.
    fn warn_if_nested(&mut self) {
        let Some(outer) = &self.outer else { return };
        if !outer.attempt.is_empty() && outer.attempt != "1" {
            return;
        }
        let inner = self.config.policy.max_tries.unwrap_or(0);
        self.log.warn(Warning::Nested {
            outer_id: outer.id.clone(),
            outer: outer.max_tries,
            inner,
        });
    }

    pub fn run(mut self, seed: u64) -> RunEnd {
        let status = self.run_loop(seed);
        let (tries, reason) = self.ended;
        RunEnd {
            status,
            tries,
            reason,
            signals: self.signals,
        }
    }

    fn run_loop(&mut self, seed: u64) -> ExitStatus {
        let config = self.config;
        let mut rng = LazyRng::new(seed);
        let mut schedule = Schedule::new(&config.policy);
        self.log.emit(Event::Start { seed });
        self.warn_if_nested();
        if let Some(most) = config.stagger {
            let delay = crate::policy::schedule::stagger(most, &mut rng);
            self.log.emit(Event::Stagger { delay, most });
            if let Some(signal) = self.sleep(delay, 1) {
                return self.interrupted(0, signal, During::Stagger);
            }
        }
        self.use_quota(QuotaUse::Deposit);
        loop {
            if let ControlFlow::Break(status) = self.round(&mut schedule, &mut rng) {
                return status;
            }
        }
    }

    /// One try, and the wait before the next one if the schedule retries.
    fn round(&mut self, schedule: &mut Schedule<'_>, rng: &mut LazyRng) -> ControlFlow<ExitStatus> {
        let retry = self.next_try(schedule, rng)?;
        self.wait_to_retry(schedule, &retry)
    }

    /// Runs the next try to its end and reports it: `Continue` with the retry the schedule
    /// decided on, or `Break` with how the run ends.
    fn next_try(
        &mut self,
        schedule: &mut Schedule<'_>,
        rng: &mut LazyRng,
    ) -> ControlFlow<ExitStatus, Retry> {
        let now = self.start.elapsed();
        let limit = schedule.start_try(now);
        let by_limit = schedule.limit_ends_try(now);
        let mut t = Try {
            attempt: schedule.tries(),
            start: Moment::now(),
            io: TryIo::default(),
        };
        self.log.emit(Event::TryStarted { attempt: t.attempt });
        let end = match self.run_try(t.attempt, limit, by_limit, &mut t.io) {
            Ok(end) => end,
            Err(e) => {
                self.log.emit(Event::TryOutputDone { attempt: t.attempt });
                self.log
                    .emit(Event::Error(Failure::Internal(format!("{e:#}"))));
                return ControlFlow::Break(ExitStatus::Usage);
            }
        };
        let output = self.stdio.finish_try(&mut t.io);
        if let Some(warning) = self.stdio.take_warning() {
            self.log.warn(Warning::Stdio(warning));
        }
        let (ended, detail) = match end {
            TryEnd::Ended(ended) => (ended, None),
            TryEnd::NotStarted(outcome, detail) => (Ended::by_itself(outcome), Some(detail)),
            TryEnd::OutputFailed => {
                self.log.emit(Event::TryOutputDone { attempt: t.attempt });
                return ControlFlow::Break(self.output_failed(&t.io));
            }
            TryEnd::Interrupted(signal, ended) => {
                return ControlFlow::Break(self.interrupted_try(&mut t, signal, ended));
            }
        };
        let took = t.start.elapsed();
        let (verdict, decision) = self.decide(schedule, rng, t.attempt, &ended, output);
        self.report_try(&mut t, took, &ended, verdict, &decision, detail)?;
        self.obey(schedule, decision, &mut t, ended.outcome)
    }

    /// Writes out the output of try `t`, which ended as `ended`, and reports it with what the
    /// schedule decided: `Break` when writing the output ends the run.
    fn report_try(
        &mut self,
        t: &mut Try,
        took: Duration,
        ended: &Ended,
        verdict: Verdict,
        decision: &Decision,
        detail: Option<String>,
    ) -> ControlFlow<ExitStatus> {
        // Held output goes to standard output for the successful try; in a repeat, for every
        // try that succeeded.
        let success = match self.repeat {
            Some(_) => matches!(verdict, Verdict::Success(_)),
            None => matches!(decision, Decision::Succeed),
        };
        self.stdio.deliver(&mut t.io, success);
        let drained = self.drain(&mut t.io, self.run_end());
        self.log.emit(Event::TryOutputDone { attempt: t.attempt });
        // A request matters only to the wait after a transient failure.
        let transient = matches!(verdict, Verdict::Transient(_));
        let report = ended.report(t.attempt, t.start, took, verdict, decision.clone(), detail);
        self.log.emit(Event::TryEnded(report));
        if let Some(ignored) = t.io.requests.ignored.clone().filter(|_| transient) {
            self.log.emit(Event::RequestIgnored {
                attempt: t.attempt,
                ignored,
            });
        }
        if let Some(status) = self.output_ends_run(t.attempt, drained, &t.io, success) {
            return ControlFlow::Break(status);
        }
        if let Some(left) = ended.leftovers {
            self.log.emit(Event::Leftovers {
                attempt: t.attempt,
                hook: None,
                signal: self.config.signal,
                killed: left.ending.killed(),
                count: left.count,
            });
        }
        ControlFlow::Continue(())
    }

    /// What the schedule (or `--repeat`) makes of try `attempt`, which ended as `ended` and
    /// whose output matched (or not) the output patterns; a retry that could not get the same
    /// input gives up.
    fn decide(
        &mut self,
        schedule: &mut Schedule<'_>,
        rng: &mut LazyRng,
        attempt: u64,
        ended: &Ended,
        output: OutputMatch,
    ) -> (Verdict, Decision) {
        let now = self.start.elapsed();
        let outcome = ended.outcome;
        let (verdict, decision) = match &mut self.repeat {
            Some(repeat) => {
                let classifier = &self.config.policy.classifier;
                let verdict = classifier.verdict_with_output(outcome, output);
                let cut_short = ended.by_limit;
                let fits = |delay| schedule.still_fits(now, delay);
                let decision = repeat.after_try(attempt, outcome, &verdict, cut_short, fits);
                (verdict, decision)
            }
            None => schedule.after_try_with_output(outcome, output, now, rng),
        };
        // Another try would read only part of the input; the quota may have no token for it.
        let input_kept = self.stdio.can_replay();
        let decision = decision.confirmed(input_kept, || self.use_quota(QuotaUse::Take));
        (verdict, decision)
    }

    /// Deposits a first try's share in the quota, or takes a token for a retry: the refusal
    /// when there is none. A store that fails is warned about once and left: the run's own
    /// limits still hold.
    fn use_quota(&mut self, what: QuotaUse) -> Option<QuotaRefusal> {
        let quota = self.quota.as_mut()?;
        let applied = quota.store.apply(what, unix_ms(SystemTime::now()));
        let (shown, params) = (quota.spec.shown(), quota.spec.params);
        if let Some(fallback) = applied.fell_back {
            // Redis gone or refusing: the same bucket, kept on this machine from now on.
            let warning = Warning::of_fallback(&quota.spec, fallback);
            self.log.warn(warning);
        }
        let refused = |tokens| QuotaRefusal {
            quota: shown.clone(),
            tokens,
            params,
        };
        match applied.answer {
            Ok(update) => {
                let refusal = (!update.granted).then(|| refused(Some(update.tokens)));
                self.quota_updated(what, shown, update);
                refusal
            }
            // Held by other runs for longer than a run may wait, as when many retry at once on
            // a loaded machine: a first try goes on without depositing, and a retry counts it as
            // no token, so that the quota holds when it is needed most.
            Err(Unanswered::Busy(why)) => match what {
                QuotaUse::Deposit => {
                    self.log.warn(Warning::QuotaBusy { quota: shown, why });
                    None
                }
                QuotaUse::Take => Some(refused(None)),
            },
            Err(Unanswered::Failed(why)) => {
                self.log.warn(Warning::QuotaUnusable { quota: shown, why });
                self.quota = None;
                None
            }
        }
    }

    /// Reports what a quota operation did.
    fn quota_updated(&mut self, what: QuotaUse, quota: String, update: Update) {
        if let Some(note) = update.note {
            self.log.warn(Warning::QuotaNote(note));
        }
        let action = match what {
            QuotaUse::Deposit => QuotaAction::FirstTry,
            QuotaUse::Take => QuotaAction::Retry,
        };
        self.log.emit(Event::Quota {
            quota,
            action,
            granted: update.granted,
            tokens: update.tokens,
        });
    }

    /// Carries out the decision on try `t`, whose output has been written out.
    fn obey(
        &mut self,
        schedule: &Schedule<'_>,
        decision: Decision,
        t: &mut Try,
        outcome: Outcome,
    ) -> ControlFlow<ExitStatus, Retry> {
        match decision {
            Decision::Succeed => {
                // Under --flaky fail, a success after failed tries exits as the last of them
                // would have.
                let status = match (self.config.flaky, self.last_failed) {
                    (Flaky::Fail, Some(failed)) => ExitStatus::of_flaky_success(failed),
                    _ => ExitStatus::Success,
                };
                let flaky = (status != ExitStatus::Success).then_some("flaky");
                self.ended = (t.attempt, flaky);
                self.log.emit(Event::Succeeded {
                    attempt: t.attempt,
                    elapsed: self.start.elapsed(),
                    waited: schedule.waited(),
                    status,
                });
                if self.config.flaky == Flaky::Warn && self.last_failed.is_some() {
                    let of = self.config.policy.max_tries;
                    self.log.warn(Warning::Flaky {
                        attempt: t.attempt,
                        of,
                    });
                }
                self.stdio.hand_off(&mut t.io);
                ControlFlow::Break(status)
            }
            Decision::GiveUp(why) => ControlFlow::Break(self.give_up(t.attempt, &why, outcome)),
            Decision::Stop(why) => ControlFlow::Break(self.end_repeat(t.attempt, why)),
            Decision::Retry(wait) => {
                // Outside a repeat, only a failed try is retried.
                if self.repeat.is_none() {
                    self.last_failed = Some(outcome);
                }
                ControlFlow::Continue(Retry {
                    attempt: t.attempt,
                    outcome,
                    wait,
                })
            }
        }
    }

    /// `--repeat` ends after try `attempt`, for `why`: 0 when no try failed, else the status
    /// giving up after the first failed one would have given, and 124 when none ran to its end.
    fn end_repeat(&mut self, attempt: u64, why: RepeatEnd) -> ExitStatus {
        let Some(repeat) = &self.repeat else {
            return ExitStatus::Success;
        };
        let count = repeat.count().clone();
        let status = ExitStatus::of_repeat(repeat.failed_outcome(), count.tries);
        self.ended = (attempt, None);
        self.log.emit(Event::RepeatEnded {
            count,
            why,
            status,
            elapsed: self.start.elapsed(),
        });
        status
    }

    /// `retry` received `signal` during try `t`, which has been stopped (if it had started):
    /// writes out what can be at once, reports the try and what it left, and ends the run.
    fn interrupted_try(&mut self, t: &mut Try, signal: Signal, ended: Option<Ended>) -> ExitStatus {
        // What can be written at once is; a received signal waits for nothing.
        self.stdio.deliver(&mut t.io, false);
        let _ = self.drain(&mut t.io, Some(Moment::now()));
        self.log.emit(Event::TryOutputDone { attempt: t.attempt });
        if let Some(ended) = ended {
            let decision = Decision::GiveUp(GiveUp::Interrupted);
            let took = t.start.elapsed();
            let report = ended.report(
                t.attempt,
                t.start,
                took,
                Verdict::Interrupted,
                decision,
                None,
            );
            self.log.emit(Event::TryInterrupted(report));
            if let Some(left) = ended.leftovers {
                self.log.emit(Event::Leftovers {
                    attempt: t.attempt,
                    hook: None,
                    signal,
                    killed: left.ending.killed(),
                    count: left.count,
                });
            }
        }
        self.interrupted(t.attempt, signal, During::Try)
    }

    /// How writing out the output of try `attempt` ends the run, if it does: a stopping signal
    /// received meanwhile (`drained`), a failed write, or a reader of the successful try's
    /// output gone before it had all of it.
    fn output_ends_run(
        &mut self,
        attempt: u64,
        drained: Option<Signal>,
        io: &TryIo,
        success: bool,
    ) -> Option<ExitStatus> {
        if let Some(signal) = drained {
            return Some(self.interrupted(attempt, signal, During::Output));
        }
        if io.failed.is_some() {
            return Some(self.output_failed(io));
        }
        if io.broken && success {
            // Never 0 after losing output: the command itself would have met SIGPIPE, and
            // retry dies of it as the command would have.
            self.log.warn(Warning::ReaderGone);
            return Some(ExitStatus::Reraise(Signal::PIPE));
        }
        None
    }

    /// The wait before the try after `retry.attempt`: the `--on-retry` hook, then what is left of
    /// the wait, if the next try still fits in the budget.
    fn wait_to_retry(&mut self, schedule: &Schedule<'_>, retry: &Retry) -> ControlFlow<ExitStatus> {
        let Retry {
            attempt,
            outcome,
            wait,
        } = *retry;
        let config = self.config;
        self.log.emit(Event::Wait { attempt, wait });
        let waiting = Moment::now();
        if let Some(command) = &config.on_retry {
            let hook = Hook {
                which: "--on-retry",
                command,
                attempt,
                exit_code: ExitStatus::from_last_try(outcome).code(),
                delay: wait.delay,
                bound: self.hook_bound(),
            };
            if let Some(signal) = self.run_hook(&hook) {
                return ControlFlow::Break(self.interrupted(attempt, signal, During::Wait));
            }
        }
        // The hook's time is part of the wait: the next try starts as planned, or when the hook
        // is done if it took longer. A hook that took long may have spent the budget the retry
        // needed.
        let left = wait.delay.saturating_sub(waiting.elapsed());
        if let Err(exceeded) = schedule.still_fits(self.start.elapsed(), left) {
            self.log.emit(Event::NoTimeAfterHook {
                next: attempt + 1,
                exceeded,
            });
            let status = self.give_up(attempt, &GiveUp::Budget(exceeded), outcome);
            return ControlFlow::Break(status);
        }
        if let Some(signal) = self.sleep(left, attempt + 1) {
            return ControlFlow::Break(self.interrupted(attempt, signal, During::Wait));
        }
        ControlFlow::Continue(())
    }

    /// The end of the run's budget or deadline, if it has one.
    fn run_end(&self) -> Option<Moment> {
        let limit = self.config.policy.limit?;
        self.start.checked_add(limit.at)
    }

    /// Writes out what the try's streams still hold, without ever blocking: a stopping signal
    /// ends it (and is returned), and so does `until`.
    fn drain(&mut self, io: &mut TryIo, until: Option<Moment>) -> Option<Signal> {
        self.draining = true;
        let received = self.drain_until(io, until);
        self.draining = false;
        received
    }

    fn drain_until(&mut self, io: &mut TryIo, until: Option<Moment>) -> Option<Signal> {
        while self.stdio.has_output(io) {
            match self.next_event(Some(io), until) {
                Wake::Stop(signal) => return Some(signal),
                Wake::Timeout => {
                    if self.stdio.has_output(io) {
                        self.log.warn(Warning::SlowReader);
                    }
                    break;
                }
                Wake::Child => reap_all(),
                Wake::OutputFailed | Wake::Drained => {}
            }
        }
        None
    }

    /// A try's output could not be written: say why; the run ends with status 1, as `cat` does.
    fn output_failed(&mut self, io: &TryIo) -> ExitStatus {
        if let Some(failure) = &io.failed {
            self.log
                .emit(Event::Error(Failure::Output(failure.to_string())));
        }
        ExitStatus::OutputFailed
    }

    /// Gives up after try `attempt` ended with `outcome`: the log, then `--on-give-up`.
    fn give_up(&mut self, attempt: u64, why: &GiveUp, outcome: Outcome) -> ExitStatus {
        let config = self.config;
        let status = ExitStatus::of_giving_up(why, outcome);
        let elapsed = self.start.elapsed();
        self.ended = (attempt, Some(why.word()));
        self.log.emit(Event::GaveUp {
            tries: attempt,
            elapsed,
            why: why.clone(),
            status,
            last: Some(outcome),
            signal: None,
        });
        self.record_dead_letter(attempt, why, status, elapsed);
        if let Some(command) = &config.on_give_up {
            let hook = Hook {
                which: "--on-give-up",
                command,
                attempt,
                exit_code: status.code(),
                delay: Duration::ZERO,
                // The run may give up because its budget is spent: the hook still gets the
                // grace period.
                bound: self.hook_bound().map(|b| b.max(config.kill_after)),
            };
            if let Some(signal) = self.run_hook(&hook) {
                return self.interrupted(attempt, signal, During::Wait);
            }
        }
        status
    }

    /// Appends the run, which gives up after `attempt` tries, to `--dead-letter`: for every
    /// reason but an interrupt (nobody wants it run again) and input that could not be kept
    /// (`retry`'s own failure, status 125). A failure to append is told, and changes nothing
    /// else: the status still says what the command did.
    fn record_dead_letter(
        &mut self,
        attempt: u64,
        why: &GiveUp,
        status: ExitStatus,
        elapsed: Duration,
    ) {
        let Some(letter) = &self.dead_letter else {
            return;
        };
        if matches!(why, GiveUp::Interrupted | GiveUp::Input) {
            return;
        }
        let code = u64::try_from(status.code()).unwrap_or_default();
        let left = self
            .run_end()
            .map(|end| end.saturating_duration_since(Moment::now()));
        match letter.append(code, why.word(), attempt, elapsed, left) {
            Ok(()) => self.log.emit(Event::DeadLettered {
                path: letter.path.clone(),
            }),
            Err(e) => self.log.warn(Warning::DeadLetterNotWritten {
                path: letter.path.clone(),
                why: e.to_string(),
            }),
        }
    }

    fn interrupted(&mut self, attempt: u64, signal: Signal, during: During) -> ExitStatus {
        self.ended = (attempt, Some(GiveUp::Interrupted.word()));
        self.log.emit(Event::Received {
            signal,
            attempt,
            during,
        });
        let status = ExitStatus::Reraise(signal);
        if let Some(repeat) = &self.repeat {
            let count = repeat.count().clone();
            self.log.emit(Event::RepeatEnded {
                count,
                why: RepeatEnd::Interrupted(signal),
                status,
                elapsed: self.start.elapsed(),
            });
            return status;
        }
        self.log.emit(Event::GaveUp {
            tries: attempt,
            elapsed: self.start.elapsed(),
            why: GiveUp::Interrupted,
            status,
            last: None,
            signal: Some(signal),
        });
        status
    }

    /// Runs one try to its end, stopping it on its timeout (`limit`, which is the end of the
    /// run when `by_limit`), and stopping what a failed try left running.
    fn run_try(
        &mut self,
        attempt: u64,
        limit: Option<Duration>,
        by_limit: bool,
        io: &mut TryIo,
    ) -> anyhow::Result<TryEnd> {
        // A signal that came while retry was busy (logging, deciding) means no further try.
        if let Some(signal) = self.signals.pending_stop() {
            return Ok(TryEnd::Interrupted(signal, None));
        }
        self.env[0].1 = attempt.to_string();
        let mut child = match self.spawn_command(io)? {
            Ok(child) => child,
            Err(e) => {
                let charset = self.config.charset;
                let detail = not_started(&self.config.command[0], e.outcome, &e.error, charset);
                return Ok(TryEnd::NotStarted(e.outcome, detail));
            }
        };
        let finish = self.run_child(&mut child, limit.and_then(after), Some(io));
        let end = self.try_end(&mut child, finish, by_limit, io);
        // Take the terminal back before writing to it: with `stty tostop`, a write from outside
        // the foreground group would stop retry.
        self.give_back_terminal(&child);
        Ok(end)
    }

    /// Starts the command as the try, with fresh plumbing in `io`. As execvp does, a file
    /// without `#!` that the kernel cannot run is taken for a script, and run with `/bin/sh`.
    fn spawn_command(&mut self, io: &mut TryIo) -> anyhow::Result<Result<Child, SpawnError>> {
        let config = self.config;
        let command = &config.command;
        match self.spawn_try(command, io)? {
            Err(e) if e.wants_shell() => match resolve(&command[0]) {
                Ok(path) => {
                    let mut script = vec![OsString::from("/bin/sh"), path.into_os_string()];
                    script.extend(command[1..].iter().cloned());
                    self.spawn_try(&script, io)
                }
                Err(_) => Ok(Err(e)),
            },
            spawned => Ok(spawned),
        }
    }

    /// Starts `command` as the try, with fresh plumbing in `io`.
    fn spawn_try(
        &mut self,
        command: &[OsString],
        io: &mut TryIo,
    ) -> anyhow::Result<Result<Child, SpawnError>> {
        let (stdio, try_io) = self.stdio.start_try()?;
        *io = try_io;
        Ok(Child::spawn(SpawnOptions {
            stdio,
            command,
            env: &self.env,
            foreground: self.config.foreground,
            terminal: self.terminal.filter(|t| t.in_foreground()),
            dispositions: self.signals.dispositions(),
        }))
    }

    /// What a try that `run_child` saw to its end came to, once what a failed one left running
    /// has been stopped too, before anything else happens, so that tries never overlap (spec
    /// 6.3): what stayed in its group, and on Linux what left it.
    fn try_end(
        &mut self,
        child: &mut Child,
        finish: Finish,
        by_limit: bool,
        io: &mut TryIo,
    ) -> TryEnd {
        let mut ended = match finish {
            Finish::Exited(outcome) => Ended::by_itself(outcome),
            Finish::TimedOut(stopped) => {
                let ended = Ended::stopped(Outcome::Timeout, &stopped, by_limit);
                match stopped.received {
                    Some(signal) => return TryEnd::Interrupted(signal, Some(ended)),
                    None => ended,
                }
            }
            Finish::Interrupted(signal, stopped) => {
                // A leader that SIGKILL ended after the grace period may not be reaped.
                let outcome = child.outcome().unwrap_or(Outcome::Signal(Signal::KILL));
                let ended = Ended::stopped(outcome, &stopped, false);
                return TryEnd::Interrupted(signal, Some(ended));
            }
            Finish::OutputFailed => return TryEnd::OutputFailed,
        };
        if !self.stops_leftovers(ended.outcome, io) {
            return TryEnd::Ended(ended);
        }
        if let Some(stopped) = self.stop_leftovers(child, Some(io)) {
            if let Some(signal) = stopped.received {
                return TryEnd::Interrupted(signal, Some(ended));
            }
            ended.leftovers = Some(Leftovers {
                count: stopped.count,
                ending: stopped.ending,
            });
        }
        TryEnd::Ended(ended)
    }

    /// Whether what the try that ended with `outcome` left running is stopped now: after a
    /// failure by its status, and after a success by its status that has not printed the match
    /// of `--until-output` (not ready, so another try follows, and tries never overlap).
    fn stops_leftovers(&mut self, outcome: Outcome, io: &mut TryIo) -> bool {
        let policy = &self.config.policy;
        // The tries of a repeat never overlap, whatever they came to: each one is a run of its
        // own, and what it started must not meddle with the next.
        self.repeat.is_some()
            || policy.stops_leftovers(outcome)
            || (policy.classifier.until_output.is_some() && !self.stdio.ready_so_far(io))
    }

    /// Runs a started child, a try or a hook, until it ends or `until` comes, passing signals on
    /// to it meanwhile. Stops it when its time is up, when `retry` receives a stopping signal,
    /// or when the output of a try (`io`) cannot be written. A try takes part in job control; a
    /// hook, which has no `io`, does not.
    fn run_child(
        &mut self,
        child: &mut Child,
        until: Option<Moment>,
        mut io: Option<&mut TryIo>,
    ) -> Finish {
        self.current = Some(child.target());
        let finish = loop {
            match self.next_event(io.as_deref_mut(), until) {
                Wake::Child => {
                    child.reap();
                    if let Some(outcome) = child.outcome() {
                        break Finish::Exited(outcome);
                    }
                    if io.is_some() && child.take_stopped() {
                        self.suspend_with(child);
                    }
                }
                Wake::Stop(signal) => {
                    let stopped = self.stop(child, StopCause::Received(signal), io);
                    break Finish::Interrupted(signal, stopped);
                }
                Wake::OutputFailed => {
                    self.stop(child, StopCause::OutputFailed, io);
                    break Finish::OutputFailed;
                }
                // Only while the output of an ended try is written out.
                Wake::Drained => {}
                Wake::Timeout => break Finish::TimedOut(self.stop(child, StopCause::TimeUp, io)),
            }
        };
        self.current = None;
        finish
    }

    /// True when something of an ended try still runs: in its group, or (on Linux, where
    /// `retry` is subreaper) anywhere below `retry`.
    fn left_running(&self, child: &Child) -> bool {
        child.alive()
            || (self.sweeps() && has_children() && !descendants(&self.inherited).is_empty())
    }

    /// Whether stopping a try also stops the processes that left its group. Not with
    /// `--foreground`, which promises to stop only the command itself.
    fn sweeps(&self) -> bool {
        !self.config.foreground
    }

    /// Waits for the next event, moving the try's input and output meanwhile, and looking
    /// whether the try waits for input when that is due. Passes forwarded signals on and
    /// handles SIGTSTP and SIGWINCH itself.
    fn next_event(&mut self, mut io: Option<&mut TryIo>, until: Option<Moment>) -> Wake {
        let mut fds = Vec::new();
        let mut tokens = Vec::new();
        loop {
            fds.clear();
            tokens.clear();
            let mut scan = None;
            if let Some(io) = io.as_deref_mut() {
                self.stdio.interest(io, &mut fds, &mut tokens);
                scan = self.stdio.next_scan(io);
            }
            let wake = match (until, scan) {
                (Some(until), Some(scan)) => Some(until.min(scan)),
                (until, scan) => until.or(scan),
            };
            match self.signals.next_with(&mut fds, wake) {
                SignalEvent::Child => return Wake::Child,
                SignalEvent::Stop(signal) => return Wake::Stop(signal),
                SignalEvent::Timeout if until.is_none_or(|until| Moment::now() < until) => {
                    if let Some(io) = io.as_deref_mut() {
                        self.stdio.scan(io, &self.inherited);
                    }
                }
                SignalEvent::Timeout => return Wake::Timeout,
                SignalEvent::Io => {
                    if let Some(io) = io.as_deref_mut() {
                        self.stdio.on_ready(io, &fds, &tokens);
                        if io.failed.is_some() {
                            return Wake::OutputFailed;
                        }
                        if self.draining && !self.stdio.has_output(io) {
                            return Wake::Drained;
                        }
                    }
                }
                SignalEvent::Forward(signal) => {
                    if let Some(target) = self.current {
                        target.signal(signal);
                    }
                }
                SignalEvent::Suspend => self.suspend(),
                SignalEvent::Resize => {
                    if let Some(io) = io.as_deref() {
                        self.stdio.follow_window_sizes(io);
                    }
                }
            }
        }
    }

    /// Job control: the try was stopped at the terminal (Ctrl-Z, or SIGTTIN when `retry` runs in
    /// the background and the try reads the terminal). Stop retry too, so that the shell sees
    /// its job stop and takes the terminal back; when the shell continues retry in the
    /// foreground, give the terminal to the try, and continue it.
    fn suspend_with(&mut self, child: &mut Child) {
        let (Some(terminal), Some(group)) = (self.terminal, child.group()) else {
            // Without a terminal nobody is there to continue a stopped job: leave it be.
            return;
        };
        if terminal.foreground_group() == Some(group) {
            terminal.take_back();
        }
        // SIGSTOP rather than SIGTSTP: the kernel drops SIGTSTP for an orphaned process group.
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
        // Continued: by `fg` (retry has the terminal) or by `bg`.
        if terminal.in_foreground() {
            terminal.give_to(group);
            child.set_has_terminal();
        }
        child.signal(Signal::CONT);
    }

    /// SIGTSTP reached `retry` (Ctrl-Z while it holds the terminal, or kill -TSTP): clear the
    /// countdown, stop the running try as a shell stops a job, stop, and when continued,
    /// continue the try.
    fn suspend(&mut self) {
        if self.status_shown {
            self.log.emit(Event::StatusCleared);
            self.status_shown = false;
        }
        if let Some(target) = self.current {
            target.signal(Signal::TSTP);
        }
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
        if let Some(target) = self.current {
            target.signal(Signal::CONT);
        }
    }

    /// Takes the terminal back from the try's group, if that group holds it (not after `bg`:
    /// then the shell has it).
    fn give_back_terminal(&self, child: &Child) {
        if let (Some(terminal), true) = (self.terminal, child.has_terminal()) {
            if child.group().is_some() && terminal.foreground_group() == child.group() {
                terminal.take_back();
            }
        }
    }

    /// Stops the try (or hook) for `cause`: its signal then SIGCONT, so that a stopped process
    /// can act on it, to its group and, unless `--foreground`, to every process below `retry`
    /// (those that left the group); SIGKILL to all of them after `--kill-after`, or at once on a
    /// further stopping signal.
    fn stop(&mut self, child: &mut Child, cause: StopCause, mut io: Option<&mut TryIo>) -> Stopped {
        let signal = match cause {
            StopCause::Received(signal) => signal,
            StopCause::TimeUp | StopCause::Leftovers | StopCause::OutputFailed => {
                self.config.signal
            }
        };
        let signalled = Moment::now();
        let (count, outside) = self.send_all(child, signal);
        self.send_all(child, Signal::CONT);
        let mut received = self.grace(child, io.as_deref_mut());
        let ending = if self.left_running(child) {
            let late = self.kill(child, io);
            received = received.or(late);
            Ending::Killed
        } else {
            Ending::Exited
        };
        child.reap();
        Stopped {
            received,
            signalled,
            ending,
            count,
            outside,
        }
    }

    /// Waits for what was just signalled to end, for `--kill-after` at most; returns a stopping
    /// signal received meanwhile, which ends the grace period at once.
    fn grace(&mut self, child: &mut Child, mut io: Option<&mut TryIo>) -> Option<Signal> {
        let kill_at = after(self.config.kill_after);
        while self.left_running(child) {
            match self.next_event(io.as_deref_mut(), kill_at) {
                Wake::Child => child.reap(),
                // A first signal to retry during the grace period is the one retry will die of;
                // any signal now means SIGKILL at once.
                Wake::Stop(signal) => return Some(signal),
                Wake::Timeout | Wake::OutputFailed | Wake::Drained => break,
            }
        }
        None
    }

    /// SIGKILL to everything that is left, then a wait for the kernel to end it all, for
    /// `KILL_SETTLE` at most; returns a stopping signal received meanwhile.
    fn kill(&mut self, child: &mut Child, mut io: Option<&mut TryIo>) -> Option<Signal> {
        let mut received = None;
        self.send_all(child, Signal::KILL);
        let settle = after(KILL_SETTLE);
        while self.left_running(child) {
            match self.next_event(io.as_deref_mut(), settle) {
                Wake::Child => {
                    child.reap();
                    // A process forked just before the kill is killed too.
                    self.send_all(child, Signal::KILL);
                }
                Wake::Stop(signal) => {
                    received.get_or_insert(signal);
                }
                Wake::Timeout | Wake::OutputFailed | Wake::Drained => {
                    self.log.warn(Warning::Survivors {
                        pid: child.pid().as_raw(),
                        settle: KILL_SETTLE,
                    });
                    break;
                }
            }
        }
        received
    }

    /// Stops what `child` left running, if anything (spec 6.3 for a failed try, 8.3 for a
    /// hook).
    fn stop_leftovers(&mut self, child: &mut Child, io: Option<&mut TryIo>) -> Option<Stopped> {
        if !self.left_running(child) {
            return None;
        }
        Some(self.stop(child, StopCause::Leftovers, io))
    }

    /// Sends `signal` to the try's group and, when sweeping, to every process below `retry` that
    /// is not in that group (so that none gets it twice); returns how many processes there were,
    /// and how many of them outside the group.
    fn send_all(&self, child: &Child, signal: Signal) -> (usize, usize) {
        if !self.sweeps() {
            child.signal(signal);
            return (usize::from(child.alive()), 0);
        }
        // Counted before anything is signalled, so that what dies at once is counted too.
        let below = descendants(&self.inherited);
        child.signal(signal);
        let mut outside = 0;
        for d in below.iter().filter(|d| Some(d.group) != child.group()) {
            send(d.pid, signal);
            outside += 1;
        }
        (below.len(), outside)
    }

    /// How long a hook starting now may run.
    fn hook_bound(&self) -> Option<Duration> {
        self.config.policy.hook_limit(self.start.elapsed())
    }

    /// Runs a hook (`sh -c CMD`) to its end or its bound; returns a stopping signal received
    /// meanwhile. Its failure is logged and changes nothing else.
    fn run_hook(&mut self, hook: &Hook<'_>) -> Option<Signal> {
        let mut output = self.hook_output();
        let mut child = match self.spawn_hook(hook, output.as_ref()) {
            Ok(child) => child,
            Err(e) => {
                let failure = HookFailure::NotStarted(e.error.to_string());
                self.hook_failed(hook, failure);
                return None;
            }
        };
        let (received, failure) = match self.run_child(&mut child, hook.bound.and_then(after), None)
        {
            Finish::Exited(Outcome::Exit(0)) => (None, None),
            Finish::Exited(outcome) => (None, Some(HookFailure::Ended(outcome))),
            Finish::TimedOut(stopped) => {
                let took = hook.bound.unwrap_or_default();
                (stopped.received, Some(HookFailure::TimedOut(took)))
            }
            Finish::Interrupted(signal, _) => (Some(signal), None),
            // A hook's output goes straight to standard error: never through retry.
            Finish::OutputFailed => (None, None),
        };
        if let Some(out) = &mut output {
            out.pass_on();
        }
        if let Some(failure) = failure {
            self.hook_failed(hook, failure);
        }
        if received.is_some() {
            return received;
        }
        // What a hook leaves running is stopped as a failed try's leftovers are (spec 8.3).
        let stopped = self.stop_leftovers(&mut child, None)?;
        if let Some(out) = &mut output {
            out.pass_on();
        }
        self.log.emit(Event::Leftovers {
            attempt: hook.attempt,
            hook: Some(hook.which),
            signal: self.config.signal,
            killed: stopped.ending.killed(),
            count: stopped.count,
        });
        stopped.received
    }

    fn hook_failed(&mut self, hook: &Hook<'_>, failure: HookFailure) {
        self.log.emit(Event::HookFailed {
            which: hook.which,
            attempt: hook.attempt,
            failure,
        });
    }

    /// Under CI, where the try's output passes through `retry` so that its lines start lines
    /// of their own, a hook's output is kept in a temporary file and passed on when the hook
    /// ends: a hook is short, and no pipe can fill and stop it meanwhile.
    fn hook_output(&self) -> Option<HookOutput> {
        self.log.facts().ci.system?;
        let file = crate::run::spool::anonymous_file().ok()?;
        Some(HookOutput { file, passed: 0 })
    }

    /// Starts `sh -c CMD` for `hook`, with the environment of a try plus `RETRY_EXIT_CODE` and
    /// `RETRY_DELAY_MS`, no input, and its output on standard error (or in `output`, passed on
    /// later): standard output belongs to the command.
    fn spawn_hook(
        &self,
        hook: &Hook<'_>,
        output: Option<&HookOutput>,
    ) -> Result<Child, SpawnError> {
        let mut env = self.env.clone();
        env[0].1 = hook.attempt.to_string();
        env.push(("RETRY_EXIT_CODE", hook.exit_code.to_string()));
        env.push(("RETRY_DELAY_MS", millis(hook.delay).to_string()));
        let into = |fd: std::io::Result<OwnedFd>| match fd {
            Ok(fd) => ChildFd::Fd(fd),
            Err(_) => ChildFd::Null,
        };
        let (stdout, stderr) = match output {
            Some(out) => (
                into(out.file.as_fd().try_clone_to_owned()),
                into(out.file.as_fd().try_clone_to_owned()),
            ),
            None => (
                into(std::io::stderr().as_fd().try_clone_to_owned()),
                ChildFd::Inherit,
            ),
        };
        let sh_command = [
            OsString::from("sh"),
            OsString::from("-c"),
            OsString::from(hook.command),
        ];
        Child::spawn(SpawnOptions {
            stdio: ChildStdio {
                stdin: ChildFd::Null,
                stdout,
                stderr,
            },
            command: &sh_command,
            env: &env,
            foreground: false,
            terminal: None,
            dispositions: self.signals.dispositions(),
        })
    }

    /// Waits `delay` before try `next`; a stopping signal ends the wait at once. On a terminal, a
    /// wait longer than two seconds shows a countdown that the next log line replaces.
    fn sleep(&mut self, delay: Duration, next: u64) -> Option<Signal> {
        let until = after(delay);
        let countdown = self.countdown && delay > Duration::from_secs(2) && until.is_some();
        let result = loop {
            let wake = match until {
                Some(until) if countdown => {
                    let left = until.saturating_duration_since(Moment::now());
                    let secs = left.as_secs_f64().ceil() as u64;
                    self.log.emit(Event::Countdown { next, secs });
                    self.status_shown = true;
                    // Wake when the shown number of seconds changes.
                    let tick = left.saturating_sub(Duration::from_secs(secs.saturating_sub(1)));
                    Some(Moment::now().checked_add(tick).unwrap_or(until).min(until))
                }
                other => other,
            };
            match self.next_event(None, wake) {
                Wake::Child => reap_all(),
                Wake::Stop(signal) => break Some(signal),
                _ => {
                    if until.is_some_and(|u| Moment::now() >= u) {
                        break None;
                    }
                }
            }
        };
        if self.status_shown {
            self.log.emit(Event::StatusCleared);
            self.status_shown = false;
        }
        result
    }
}

/// The processes that had left a stopped try's group (found as `retry`'s descendants), for the
/// log: a timed-out or interrupted try names them as a failed try names its leftovers.
fn escaped(stopped: &Stopped) -> Option<Leftovers> {
    (stopped.outside > 0).then_some(Leftovers {
        count: stopped.outside,
        ending: stopped.ending,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outer_run_is_read_from_the_environment_a_try_gets() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        assert_eq!(OuterRun::from_env(env(&[])), None);
        let outer = OuterRun::from_env(env(&[
            ("RETRY_RUN_ID", "abc"),
            ("RETRY_ATTEMPT", "2"),
            ("RETRY_MAX_TRIES", "5"),
        ]));
        assert_eq!(
            outer,
            Some(OuterRun {
                id: "abc".into(),
                attempt: "2".into(),
                max_tries: 5
            })
        );
        let outer = OuterRun::from_env(env(&[("RETRY_RUN_ID", "x"), ("RETRY_MAX_TRIES", "n")]));
        assert_eq!(
            outer.map(|o| (o.attempt, o.max_tries)),
            Some((String::new(), 0))
        );
    }
}
