//! The loop of a real run: ask the schedule what to do, run the try, wait for the first of (the
//! try ends, its time is up, a signal arrives), report, obey.

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::time::{Duration, SystemTime};

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::config::Config;
use crate::duration::millis;
use crate::exit::ExitStatus;
use crate::policy::{Decision, GiveUp, Outcome, Schedule, Signal, Verdict};
use crate::report::log::{HookFailure, Log, TryReport, not_started};
use crate::run::clock::{Moment, after};
use crate::run::process::{
    Child, Inherited, SpawnError, SpawnOptions, Target, Terminal, descendants, has_children,
    reap_all, resolve, send,
};
use crate::run::signals::{Event, Signals};
use crate::run::stdio::{ChildFd, RunIo, TryIo};

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
}

impl<'c> Runner<'c> {
    /// `start` and `wall_start` are the moment `retry` started: the budget counts from there.
    pub fn new(
        config: &'c Config,
        log: Log,
        signals: Signals,
        stdio: RunIo,
        run_id: String,
        start: Moment,
        wall_start: SystemTime,
    ) -> Runner<'c> {
        let mut env = vec![
            ("RETRY_ATTEMPT", String::new()),
            (
                "RETRY_MAX_TRIES",
                config.policy.max_tries.unwrap_or(0).to_string(),
            ),
            ("RETRY_RUN_ID", run_id),
        ];
        if let Some(limit) = config.policy.limit {
            let ms = wall_start
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
            terminal: Terminal::detect(),
            start,
            env,
            current: None,
            status_shown: false,
            draining: false,
            inherited: Inherited::now(),
        }
    }

    pub fn with_countdown(mut self, on: bool) -> Runner<'c> {
        self.countdown = on;
        self
    }

    /// Warns once (on the outer run's first try) when this run is nested in another retry.
    fn warn_if_nested(&mut self) {
        let Some(outer_id) = std::env::var_os("RETRY_RUN_ID") else {
            return;
        };
        let outer_attempt = std::env::var("RETRY_ATTEMPT").unwrap_or_default();
        if !outer_attempt.is_empty() && outer_attempt != "1" {
            return;
        }
        let outer: u64 = std::env::var("RETRY_MAX_TRIES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let inner = self.config.policy.max_tries.unwrap_or(0);
        self.log.nested(&outer_id.to_string_lossy(), outer, inner);
    }

    pub fn run(mut self, seed: u64) -> ExitStatus {
        let config = self.config;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut schedule = Schedule::new(&config.policy);
        self.log.start(config, seed);
        self.warn_if_nested();
        loop {
            let now = self.start.elapsed();
            let limit = schedule.start_try(now);
            let by_limit = schedule.limit_ends_try(now);
            let attempt = schedule.tries();
            let try_start = Moment::now();
            let mut io = TryIo::default();
            self.log.group_start(attempt);
            let end = match self.run_try(attempt, limit, by_limit, &mut io) {
                Ok(end) => end,
                Err(e) => {
                    self.log.error(&format!("{e:#}"));
                    return ExitStatus::Usage;
                }
            };
            let output = self.stdio.finish_try(&mut io);
            if let Some(warning) = self.stdio.take_warning() {
                self.log.warn(&warning);
            }
            let (ended, detail) = match end {
                TryEnd::Ended(ended) => (ended, None),
                TryEnd::NotStarted(outcome, detail) => (
                    Ended {
                        outcome,
                        ending: Ending::Exited,
                        by_limit: false,
                        leftovers: None,
                    },
                    Some(detail),
                ),
                TryEnd::OutputFailed => {
                    self.log.group_end();
                    return self.output_failed(&io);
                }
                TryEnd::Interrupted(signal, ended) => {
                    // What can be written at once is; a received signal waits for nothing.
                    self.stdio.deliver(&mut io, false);
                    let _ = self.drain(&mut io, Some(Moment::now()));
                    self.log.group_end();
                    if let Some(ended) = ended {
                        self.log.try_interrupted(&TryReport {
                            attempt,
                            outcome: ended.outcome,
                            took: try_start.elapsed(),
                            verdict: &Verdict::Interrupted,
                            decision: &Decision::GiveUp(GiveUp::Interrupted),
                            detail: None,
                            killed: ended.ending.killed(),
                            stopped_by_limit: ended.by_limit,
                        });
                        if let Some(left) = ended.leftovers {
                            self.log
                                .leftovers(attempt, signal, left.ending.killed(), left.count);
                        }
                    }
                    return self.interrupted(attempt, signal, false);
                }
            };
            let outcome = ended.outcome;
            let took = try_start.elapsed();
            let (verdict, mut decision) =
                schedule.after_try_with_output(outcome, output, self.start.elapsed(), &mut rng);
            if matches!(decision, Decision::Retry(_)) && !self.stdio.can_replay() {
                // Another try would read only part of the input.
                decision = Decision::GiveUp(GiveUp::Input);
            }
            let success = matches!(decision, Decision::Succeed);
            self.stdio.deliver(&mut io, success);
            let drained = self.drain(&mut io, self.run_end());
            self.log.group_end();
            let report = TryReport {
                attempt,
                outcome,
                took,
                verdict: &verdict,
                decision: &decision,
                detail: detail.as_deref(),
                killed: ended.ending.killed(),
                stopped_by_limit: ended.by_limit,
            };
            if let Some(signal) = drained {
                // A signal came while the try's output was being written out.
                self.log.try_ended(&report);
                return self.interrupted(attempt, signal, true);
            }
            if io.failed.is_some() {
                self.log.try_ended(&report);
                return self.output_failed(&io);
            }
            if io.broken && success {
                // The output of the successful try did not all reach its reader: never 0
                // after losing output. The command itself would have met SIGPIPE.
                self.log.try_ended(&report);
                self.log.reader_gone();
                return ExitStatus::KilledBy(Signal::PIPE);
            }
            self.log.try_ended(&report);
            if let Some(left) = ended.leftovers {
                self.log.leftovers(
                    attempt,
                    self.config.signal,
                    left.ending.killed(),
                    left.count,
                );
            }
            match decision {
                Decision::Succeed => {
                    self.log
                        .succeeded(attempt, self.start.elapsed(), schedule.waited());
                    self.stdio.hand_off(&mut io);
                    return ExitStatus::Success;
                }
                Decision::GiveUp(why) => return self.give_up(attempt, &why, outcome),
                Decision::Retry(wait) => {
                    self.log.wait(attempt, wait);
                    let waiting = Moment::now();
                    if let Some(hook) = &config.on_retry {
                        let code = ExitStatus::from_last_try(outcome).code();
                        let bound = self.hook_bound();
                        if let Some(signal) =
                            self.run_hook("--on-retry", hook, attempt, code, wait.delay, bound)
                        {
                            return self.interrupted(attempt, signal, true);
                        }
                    }
                    // The hook's time is part of the wait: the next try starts as planned, or
                    // when the hook is done if it took longer. A hook that took long may have
                    // spent the budget the retry needed.
                    let left = wait.delay.saturating_sub(waiting.elapsed());
                    if let Err(exceeded) = schedule.still_fits(self.start.elapsed(), left) {
                        self.log.no_time_after_hook(attempt + 1, &exceeded);
                        return self.give_up(attempt, &GiveUp::Budget(exceeded), outcome);
                    }
                    if let Some(signal) = self.sleep(left, attempt + 1) {
                        return self.interrupted(attempt, signal, true);
                    }
                }
            }
        }
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
                        self.log.slow_reader();
                    }
                    break;
                }
                Wake::Child => reap_all(),
                _ => {}
            }
        }
        None
    }

    /// A try's output could not be written: say why; the run ends with status 1, as `cat` does.
    fn output_failed(&mut self, io: &TryIo) -> ExitStatus {
        if let Some(failure) = &io.failed {
            self.log.error(&failure.to_string());
        }
        ExitStatus::OutputFailed
    }

    /// Gives up after try `attempt` ended with `outcome`: the log, then `--on-give-up`.
    fn give_up(&mut self, attempt: u64, why: &GiveUp, outcome: Outcome) -> ExitStatus {
        let config = self.config;
        let status = match why {
            GiveUp::Input => ExitStatus::Usage,
            _ => ExitStatus::from_last_try(outcome),
        };
        self.log.gave_up(
            attempt,
            self.start.elapsed(),
            why,
            status,
            Some(outcome),
            None,
        );
        if let Some(hook) = &config.on_give_up {
            // The run may give up because its budget is spent: the hook still gets the grace
            // period.
            let bound = self.hook_bound().map(|b| b.max(config.kill_after));
            let code = status.code();
            if let Some(signal) =
                self.run_hook("--on-give-up", hook, attempt, code, Duration::ZERO, bound)
            {
                return self.interrupted(attempt, signal, true);
            }
        }
        status
    }

    fn interrupted(&mut self, attempt: u64, signal: Signal, in_wait: bool) -> ExitStatus {
        self.log.received(signal, attempt, in_wait);
        let status = ExitStatus::Reraise(signal);
        self.log.gave_up(
            attempt,
            self.start.elapsed(),
            &GiveUp::Interrupted,
            status,
            None,
            Some(signal),
        );
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
        let mut spawned = self.spawn_try(&self.config.command, io)?;
        if let Err(e) = &spawned {
            if e.wants_shell() {
                // execvp semantics: a file without `#!` that the kernel cannot run is a script.
                if let Ok(path) = resolve(&self.config.command[0]) {
                    let mut command = vec![OsString::from("/bin/sh"), path.into_os_string()];
                    command.extend(self.config.command[1..].iter().cloned());
                    spawned = self.spawn_try(&command, io)?;
                }
            }
        }
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let detail = not_started(&self.config.command[0], e.outcome, &e.error);
                return Ok(TryEnd::NotStarted(e.outcome, detail));
            }
        };
        self.current = Some(child.target());
        let end = self.wait_try(&mut child, limit, by_limit, io);
        self.current = None;
        if let TryEnd::Ended(mut ended) = end {
            if self.config.policy.stops_leftovers(ended.outcome) && self.left_running(&child) {
                // Leftovers of a failed try are stopped before anything else happens, so tries
                // never overlap (spec 6.3): what stayed in its group, and on Linux what left it.
                let stopped = self.stop(&mut child, StopCause::Leftovers, io);
                // Take the terminal back before writing to it: with `stty tostop`, a write
                // from outside the foreground group would stop retry.
                self.give_back_terminal(&child);
                if let Some(received) = stopped.received {
                    return Ok(TryEnd::Interrupted(received, Some(ended)));
                }
                ended.leftovers = Some(Leftovers {
                    count: stopped.count,
                    ending: stopped.ending,
                });
                return Ok(TryEnd::Ended(ended));
            }
        }
        self.give_back_terminal(&child);
        Ok(end)
    }

    /// Waits for a started try to end, stopping it when `limit` has passed.
    fn wait_try(
        &mut self,
        child: &mut Child,
        limit: Option<Duration>,
        by_limit: bool,
        io: &mut TryIo,
    ) -> TryEnd {
        let deadline = limit.and_then(after);
        loop {
            match self.next_event(Some(io), deadline) {
                Wake::Child => {
                    child.reap();
                    if let Some(outcome) = child.outcome() {
                        return TryEnd::Ended(Ended {
                            outcome,
                            ending: Ending::Exited,
                            by_limit: false,
                            leftovers: None,
                        });
                    }
                    if child.take_stopped() {
                        self.suspend_with(child);
                    }
                }
                Wake::Stop(signal) => {
                    let stopped = self.stop(child, StopCause::Received(signal), io);
                    let ended = Ended {
                        // A leader that SIGKILL ended after the grace period may not be reaped.
                        outcome: child.outcome().unwrap_or(Outcome::Signal(Signal::KILL)),
                        ending: stopped.ending,
                        by_limit: false,
                        leftovers: escaped(&stopped),
                    };
                    return TryEnd::Interrupted(signal, Some(ended));
                }
                Wake::OutputFailed => {
                    // The output cannot be written: stop the try, the run ends.
                    self.stop(child, StopCause::OutputFailed, io);
                    return TryEnd::OutputFailed;
                }
                // Only while the output of an ended try is written out.
                Wake::Drained => {}
                Wake::Timeout => {
                    let stopped = self.stop(child, StopCause::TimeUp, io);
                    let ended = Ended {
                        outcome: Outcome::Timeout,
                        ending: stopped.ending,
                        by_limit,
                        leftovers: escaped(&stopped),
                    };
                    return match stopped.received {
                        Some(signal) => TryEnd::Interrupted(signal, Some(ended)),
                        None => TryEnd::Ended(ended),
                    };
                }
            }
        }
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
                Event::Child => return Wake::Child,
                Event::Stop(signal) => return Wake::Stop(signal),
                Event::Timeout if until.is_none_or(|until| Moment::now() < until) => {
                    if let Some(io) = io.as_deref_mut() {
                        self.stdio.scan(io, &self.inherited);
                    }
                }
                Event::Timeout => return Wake::Timeout,
                Event::Io => {
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
                Event::Forward(signal) => {
                    if let Some(target) = self.current {
                        target.signal(signal);
                    }
                }
                Event::Suspend => self.suspend(),
                Event::Resize => {
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
            self.log.clear_status_line();
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
    fn stop(&mut self, child: &mut Child, cause: StopCause, io: &mut TryIo) -> Stopped {
        let signal = match cause {
            StopCause::Received(signal) => signal,
            StopCause::TimeUp | StopCause::Leftovers | StopCause::OutputFailed => {
                self.config.signal
            }
        };
        let mut received = None;
        let mut ending = Ending::Exited;
        let (count, outside) = self.send_all(child, signal);
        self.send_all(child, Signal::CONT);
        let kill_at = after(self.config.kill_after);
        while self.left_running(child) {
            match self.next_event(Some(io), kill_at) {
                Wake::Child => child.reap(),
                Wake::Stop(s) => {
                    // A first signal to retry during the grace period is the one retry will die
                    // of; any signal now means SIGKILL at once.
                    received.get_or_insert(s);
                    break;
                }
                _ => break,
            }
        }
        if self.left_running(child) {
            self.send_all(child, Signal::KILL);
            ending = Ending::Killed;
            let settle = after(KILL_SETTLE);
            while self.left_running(child) {
                match self.next_event(Some(io), settle) {
                    Wake::Child => {
                        child.reap();
                        // A process forked just before the kill is killed too.
                        self.send_all(child, Signal::KILL);
                    }
                    Wake::Stop(s) => {
                        received.get_or_insert(s);
                    }
                    _ => {
                        self.log.survivors(child.pid().as_raw(), KILL_SETTLE);
                        break;
                    }
                }
            }
        }
        child.reap();
        Stopped {
            received,
            ending,
            count,
            outside,
        }
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
    fn run_hook(
        &mut self,
        which: &str,
        command: &str,
        attempt: u64,
        exit_code: i32,
        delay: Duration,
        bound: Option<Duration>,
    ) -> Option<Signal> {
        let mut env = self.env.clone();
        env[0].1 = attempt.to_string();
        env.push(("RETRY_EXIT_CODE", exit_code.to_string()));
        env.push(("RETRY_DELAY_MS", millis(delay).to_string()));
        // The hook's output goes to standard error: standard output belongs to the command.
        let stdout = match std::io::stderr().as_fd().try_clone_to_owned() {
            Ok(fd) => ChildFd::Fd(fd),
            Err(_) => ChildFd::Null,
        };
        let sh_command = [
            OsString::from("sh"),
            OsString::from("-c"),
            OsString::from(command),
        ];
        let opts = SpawnOptions {
            stdio: crate::run::stdio::ChildStdio {
                stdin: ChildFd::Null,
                stdout,
                stderr: ChildFd::Inherit,
            },
            command: &sh_command,
            env: &env,
            foreground: false,
            terminal: None,
            dispositions: self.signals.dispositions(),
        };
        let mut child = match Child::spawn(opts) {
            Ok(child) => child,
            Err(e) => {
                let failure = HookFailure::NotStarted(&e.error);
                self.log.hook_ended(which, attempt, failure);
                return None;
            }
        };
        let until = bound.and_then(after);
        let mut io = TryIo::default();
        self.current = Some(child.target());
        let (result, failure) = loop {
            match self.next_event(None, until) {
                Wake::Child => {
                    child.reap();
                    match child.outcome() {
                        Some(Outcome::Exit(0)) => break (None, None),
                        Some(outcome) => break (None, Some(HookFailure::Ended(outcome))),
                        None => {}
                    }
                }
                Wake::Stop(signal) => {
                    self.stop(&mut child, StopCause::Received(signal), &mut io);
                    break (Some(signal), None);
                }
                _ => {
                    let received = self.stop(&mut child, StopCause::TimeUp, &mut io).received;
                    let took = bound.unwrap_or_default();
                    break (received, Some(HookFailure::TimedOut(took)));
                }
            }
        };
        self.current = None;
        if let Some(failure) = failure {
            self.log.hook_ended(which, attempt, failure);
        }
        if result.is_none() && self.left_running(&child) {
            // What a hook leaves running is stopped as a failed try's leftovers are (spec 8.3).
            let stopped = self.stop(&mut child, StopCause::Leftovers, &mut io);
            self.log.hook_leftovers(
                which,
                attempt,
                self.config.signal,
                stopped.ending.killed(),
                stopped.count,
            );
            return stopped.received;
        }
        result
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
                    self.log.countdown(next, secs);
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
            self.log.clear_status_line();
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
