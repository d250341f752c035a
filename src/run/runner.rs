//! The loop of a real run: ask the schedule what to do, run the try, wait for the first of (the
//! try ends, its time is up, a signal arrives), report, obey.

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::time::{Duration, Instant, SystemTime};

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::config::Config;
use crate::duration::{human, millis};
use crate::exit::ExitStatus;
use crate::policy::{Decision, GiveUp, Outcome, Schedule, Signal, Verdict};
use crate::report::log::{Log, TryReport};
use crate::run::process::{Child, SpawnError, SpawnOptions, Terminal, reap_all, resolve};
use crate::run::signals::{Event, Signals};
use crate::run::stdio::{RunIo, TryIo};

/// After SIGKILL, how long to wait for the kernel to finish the group before going on without
/// it (a process in uninterruptible sleep dies only when its I/O ends).
const KILL_SETTLE: Duration = Duration::from_secs(5);

/// The moment `d` from now, or `None` when that is past the end of the clock (a wait that
/// never ends): durations come from the user and may be as long as `Duration::MAX`.
fn after(d: Duration) -> Option<Instant> {
    Instant::now().checked_add(d)
}

/// What stopping a group came to.
struct Stopped {
    /// A stopping signal that reached `retry` meanwhile: `retry` will die of it.
    received: Option<Signal>,
    /// The group outlived the grace period and got SIGKILL.
    killed: bool,
}

/// How a try ended, from the runner's point of view.
enum TryEnd {
    Ended(Outcome),
    /// The command could not be started.
    NotStarted(Outcome, String),
    /// `retry` received a stopping signal during the try; the try has been stopped.
    Interrupted(Signal),
}

pub struct Runner<'c> {
    config: &'c Config,
    /// Count down long waits on the terminal (stderr is one, and the log is human and on it).
    countdown: bool,
    log: Log,
    signals: Signals,
    stdio: RunIo,
    terminal: Option<Terminal>,
    start: Instant,
    env: Vec<(&'static str, String)>,
}

impl<'c> Runner<'c> {
    /// `start` and `wall_start` are the moment `retry` started: the budget counts from there.
    pub fn new(
        config: &'c Config,
        log: Log,
        signals: Signals,
        stdio: RunIo,
        run_id: String,
        start: Instant,
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
        let total = match (outer, inner) {
            (0, _) | (_, 0) => "without limit".to_string(),
            (o, i) => format!("up to {o} × {i} = {} times", o.saturating_mul(i)),
        };
        self.log.warn(&format!(
            "running inside another retry (run {}): the tries multiply, and the command may run {total}; nested retries are a classic cause of retry storms",
            outer_id.to_string_lossy()
        ));
    }

    pub fn run(mut self, seed: u64) -> ExitStatus {
        let config = self.config;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut schedule = Schedule::new(&config.policy);
        self.log.start(config, seed);
        self.warn_if_nested();
        loop {
            let limit = schedule.start_try(self.start.elapsed());
            let attempt = schedule.tries();
            let try_start = Instant::now();
            let mut io = TryIo::default();
            self.log.group_start(attempt);
            let end = match self.run_try(attempt, limit, &mut io) {
                Ok(end) => end,
                Err(e) => {
                    self.log.warn(&format!("{e:#}"));
                    return ExitStatus::Usage;
                }
            };
            let output = self.stdio.finish_try(&mut io);
            if let Some(warning) = self.stdio.take_warning() {
                self.log.warn(&warning);
            }
            let (outcome, detail) = match end {
                TryEnd::Ended(outcome) => (outcome, None),
                TryEnd::NotStarted(outcome, detail) => (outcome, Some(detail)),
                TryEnd::Interrupted(signal) => {
                    self.stdio.deliver(&mut io, false);
                    self.log.group_end();
                    return self.interrupted(attempt, signal, false);
                }
            };
            let took = try_start.elapsed();
            let (verdict, decision) =
                schedule.after_try_with_output(outcome, output, self.start.elapsed(), &mut rng);
            self.stdio
                .deliver(&mut io, matches!(decision, Decision::Succeed));
            self.log.group_end();
            self.log.try_ended(&TryReport {
                attempt,
                outcome,
                took,
                verdict: &verdict,
                decision: &decision,
                detail: detail.as_deref(),
                killed: false,
                stopped_by_limit: false,
            });
            match decision {
                Decision::Succeed => {
                    self.log
                        .succeeded(attempt, self.start.elapsed(), schedule.waited());
                    return ExitStatus::Success;
                }
                Decision::GiveUp(why) => {
                    let status = ExitStatus::from_last_try(outcome);
                    self.log.gave_up(
                        attempt,
                        self.start.elapsed(),
                        &why,
                        status,
                        Some(outcome),
                        None,
                    );
                    if let Some(hook) = &config.on_give_up {
                        // The run may give up because its budget is spent: the hook still gets
                        // the grace period.
                        let bound = self.hook_bound().map(|b| b.max(config.kill_after));
                        let code = status.code();
                        if let Some(signal) = self.run_hook(
                            "--on-give-up",
                            hook,
                            attempt,
                            code,
                            Duration::ZERO,
                            bound,
                        ) {
                            return self.interrupted(attempt, signal, true);
                        }
                    }
                    return status;
                }
                Decision::Retry(wait) => {
                    self.log.wait(attempt, wait);
                    let waiting = Instant::now();
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
                    // when the hook is done if it took longer.
                    let left = wait.delay.saturating_sub(waiting.elapsed());
                    if let Some(signal) = self.sleep(left, attempt + 1) {
                        return self.interrupted(attempt, signal, true);
                    }
                }
            }
        }
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

    /// Runs one try to its end, stopping it on its timeout, and stopping what a failed try
    /// left in its group.
    fn run_try(
        &mut self,
        attempt: u64,
        limit: Option<Duration>,
        io: &mut TryIo,
    ) -> anyhow::Result<TryEnd> {
        // A signal that came while retry was busy (logging, deciding) means no further try.
        if let Some(signal) = self.signals.pending_stop() {
            return Ok(TryEnd::Interrupted(signal));
        }
        self.env[0].1 = attempt.to_string();
        let mut spawned = self.spawn_try(&self.config.command, io)?;
        if let Err(e) = &spawned {
            if e.wants_shell() {
                // execvp semantics: a file without `#!` that the kernel cannot run is a script.
                if let Some(path) = resolve(&self.config.command[0]) {
                    let mut command = vec![OsString::from("/bin/sh"), path.into_os_string()];
                    command.extend(self.config.command[1..].iter().cloned());
                    spawned = self.spawn_try(&command, io)?;
                }
            }
        }
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let name = crate::report::quote(&self.config.command[0]);
                let reason = match e.error.raw_os_error() {
                    Some(errno) => nix::errno::Errno::from_raw(errno).desc().to_string(),
                    None => e.error.to_string(),
                };
                let detail = match e.outcome {
                    Outcome::NotFound => format!("{name} was not found"),
                    _ => format!("{name} cannot be executed: {reason}"),
                };
                return Ok(TryEnd::NotStarted(e.outcome, detail));
            }
        };
        let deadline = limit.and_then(after);
        let end = loop {
            match self.next_event(Some(io), deadline) {
                Event::Child => {
                    child.reap();
                    if let Some(outcome) = child.outcome() {
                        break TryEnd::Ended(outcome);
                    }
                    if child.take_stopped() {
                        self.suspend_with(&mut child);
                    }
                }
                Event::Stop(signal) => {
                    self.stop(&mut child, signal, false, io);
                    break TryEnd::Interrupted(signal);
                }
                // (next_event never returns Io.)
                Event::Timeout | Event::Io => {
                    match self.stop(&mut child, self.config.signal, true, io).received {
                        Some(signal) => break TryEnd::Interrupted(signal),
                        None => break TryEnd::Ended(Outcome::Timeout),
                    }
                }
            }
        };
        if let TryEnd::Ended(outcome) = end {
            let success = matches!(
                self.config.policy.classifier.verdict(outcome),
                Verdict::Success(_)
            );
            if !success && child.alive() {
                // Leftovers of a failed try are stopped before anything else happens, so tries
                // never overlap (spec 6.3).
                let signal = self.config.signal;
                let stopped = self.stop(&mut child, signal, true, io);
                // Take the terminal back before writing to it: with `stty tostop`, a write
                // from outside the foreground group would stop retry.
                self.give_back_terminal(&child);
                if let Some(received) = stopped.received {
                    return Ok(TryEnd::Interrupted(received));
                }
                self.log.leftovers(attempt, signal, stopped.killed, 0);
                return Ok(end);
            }
        }
        self.give_back_terminal(&child);
        Ok(end)
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
        }))
    }

    /// Waits for the next event, moving the try's input and output meanwhile; never returns
    /// `Event::Io`.
    fn next_event(&mut self, mut io: Option<&mut TryIo>, until: Option<Instant>) -> Event {
        let mut fds = Vec::new();
        let mut tokens = Vec::new();
        loop {
            fds.clear();
            tokens.clear();
            if let Some(io) = io.as_deref_mut() {
                self.stdio.interest(io, &mut fds, &mut tokens);
            }
            match self.signals.next_with(&mut fds, until) {
                Event::Io => {
                    if let Some(io) = io.as_deref_mut() {
                        self.stdio.on_ready(io, &fds, &tokens);
                    }
                }
                event => return event,
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

    /// Takes the terminal back from the try's group, if that group holds it (not after `bg`:
    /// then the shell has it).
    fn give_back_terminal(&self, child: &Child) {
        if let (Some(terminal), true) = (self.terminal, child.has_terminal()) {
            if child.group().is_some() && terminal.foreground_group() == child.group() {
                terminal.take_back();
            }
        }
    }

    /// Stops the try's group: `signal` (with SIGCONT when `cont`, so that a stopped process can
    /// act on it), then SIGKILL after `--kill-after`, or at once on a further stopping signal.
    fn stop(&mut self, child: &mut Child, signal: Signal, cont: bool, io: &mut TryIo) -> Stopped {
        let mut received = None;
        let mut killed = false;
        child.signal(signal);
        if cont {
            child.signal(Signal::CONT);
        }
        let kill_at = after(self.config.kill_after);
        while child.alive() {
            match self.next_event(Some(io), kill_at) {
                Event::Child => child.reap(),
                Event::Timeout | Event::Io => break,
                Event::Stop(s) => {
                    // A first signal to retry during the grace period is the one retry will die
                    // of; any signal now means SIGKILL at once.
                    received.get_or_insert(s);
                    break;
                }
            }
        }
        if child.alive() {
            child.signal(Signal::KILL);
            killed = true;
            let settle = after(KILL_SETTLE);
            while child.alive() {
                match self.next_event(Some(io), settle) {
                    Event::Child => child.reap(),
                    Event::Timeout | Event::Io => {
                        self.log.warn(&format!(
                            "processes of pid {} still exist {:?} after SIGKILL",
                            child.pid(),
                            KILL_SETTLE
                        ));
                        break;
                    }
                    Event::Stop(s) => {
                        received.get_or_insert(s);
                    }
                }
            }
        }
        child.reap();
        Stopped { received, killed }
    }

    /// How long a hook may run: `--timeout`, and what is left of the budget.
    fn hook_bound(&self) -> Option<Duration> {
        let left = self
            .config
            .policy
            .limit
            .map(|l| l.at.saturating_sub(self.start.elapsed()));
        match (self.config.policy.timeout, left) {
            (Some(t), Some(l)) => Some(t.min(l)),
            (t, l) => t.or(l),
        }
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
            Ok(fd) => std::process::Stdio::from(fd),
            Err(_) => std::process::Stdio::null(),
        };
        let sh_command = [
            OsString::from("sh"),
            OsString::from("-c"),
            OsString::from(command),
        ];
        let opts = SpawnOptions {
            stdio: crate::run::stdio::ChildStdio {
                stdin: std::process::Stdio::null(),
                stdout,
                stderr: std::process::Stdio::inherit(),
            },
            command: &sh_command,
            env: &env,
            foreground: false,
            terminal: None,
        };
        let mut child = match Child::spawn(opts) {
            Ok(child) => child,
            Err(e) => {
                self.log
                    .hook_failed(which, attempt, &format!("could not start: {}", e.error));
                return None;
            }
        };
        let until = bound.and_then(after);
        let mut io = TryIo::default();
        loop {
            match self.next_event(None, until) {
                Event::Child => {
                    child.reap();
                    match child.outcome() {
                        Some(Outcome::Exit(0)) => return None,
                        Some(outcome) => {
                            let what = match outcome {
                                Outcome::Exit(code) => format!("exited {code}"),
                                Outcome::Signal(s) => format!("was killed by {s}"),
                                other => other.to_string(),
                            };
                            self.log.hook_failed(which, attempt, &what);
                            return None;
                        }
                        None => {}
                    }
                }
                Event::Stop(signal) => {
                    self.stop(&mut child, signal, false, &mut io);
                    return Some(signal);
                }
                Event::Timeout | Event::Io => {
                    let received = self
                        .stop(&mut child, self.config.signal, true, &mut io)
                        .received;
                    let took = bound.unwrap_or_default();
                    self.log.hook_failed(
                        which,
                        attempt,
                        &format!("timed out after {}; stopped it", human(took)),
                    );
                    return received;
                }
            }
        }
    }

    /// Waits `delay` before try `next`; a stopping signal ends the wait at once. On a terminal, a
    /// wait longer than two seconds shows a countdown that the next log line replaces.
    fn sleep(&mut self, delay: Duration, next: u64) -> Option<Signal> {
        let until = after(delay);
        let countdown = self.countdown && delay > Duration::from_secs(2) && until.is_some();
        let label = self.log.try_label(next);
        let result = loop {
            let wake = match until {
                Some(until) if countdown => {
                    let left = until.saturating_duration_since(Instant::now());
                    let secs = left.as_secs_f64().ceil() as u64;
                    self.log
                        .status_line(&format!("next try ({label}) in {secs}s"));
                    // Wake when the shown number of seconds changes.
                    let tick = left.saturating_sub(Duration::from_secs(secs.saturating_sub(1)));
                    Some(Instant::now().checked_add(tick).unwrap_or(until).min(until))
                }
                other => other,
            };
            match self.next_event(None, wake) {
                Event::Timeout | Event::Io => {
                    if until.is_some_and(|u| Instant::now() >= u) {
                        break None;
                    }
                }
                Event::Child => reap_all(|_, _| {}),
                Event::Stop(signal) => break Some(signal),
            }
        };
        if countdown {
            self.log.clear_status_line();
        }
        result
    }
}
