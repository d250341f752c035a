//! The loop of a real run: ask the schedule what to do, run the try, wait for the first of (the
//! try ends, its time is up, a signal arrives), report, obey.

use std::time::{Duration, Instant, SystemTime};

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::config::Config;
use crate::duration::millis;
use crate::exit::ExitStatus;
use crate::policy::{Decision, GiveUp, Outcome, Schedule, Signal, TryLimit, Verdict};
use crate::report::log::Log;
use crate::run::process::{Child, SpawnOptions, Terminal, reap_all};
use crate::run::signals::{Event, Signals};
use crate::run::stdio::{RunIo, TryIo};

/// After SIGKILL, how long to wait for the kernel to finish the group before going on without
/// it (a process in uninterruptible sleep dies only when its I/O ends).
const KILL_SETTLE: Duration = Duration::from_secs(5);

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
            let end = wall_start + limit.at;
            let ms = end
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(millis)
                .unwrap_or(0);
            env.push(("RETRY_DEADLINE_MS", ms.to_string()));
        }
        Runner {
            config,
            log,
            signals,
            stdio,
            terminal: Terminal::detect(),
            start,
            env,
        }
    }

    pub fn run(mut self, seed: u64) -> ExitStatus {
        let config = self.config;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut schedule = Schedule::new(&config.policy);
        self.log.start(config, seed);
        loop {
            let limit = schedule.start_try(self.start.elapsed());
            let attempt = schedule.tries();
            let try_start = Instant::now();
            let mut io = TryIo::default();
            let end = match self.run_try(attempt, limit, &mut io) {
                Ok(end) => end,
                Err(e) => {
                    self.log.warn(&format!("{e:#}"));
                    return ExitStatus::Usage;
                }
            };
            let output = self.stdio.finish_try(&mut io);
            let (outcome, detail) = match end {
                TryEnd::Ended(outcome) => (outcome, None),
                TryEnd::NotStarted(outcome, detail) => (outcome, Some(detail)),
                TryEnd::Interrupted(signal) => {
                    self.stdio.deliver(&mut io, false);
                    return self.interrupted(attempt, signal, false);
                }
            };
            let took = try_start.elapsed();
            let (verdict, decision) =
                schedule.after_try_with_output(outcome, output, self.start.elapsed(), &mut rng);
            self.stdio
                .deliver(&mut io, matches!(decision, Decision::Succeed));
            self.log.try_ended(
                attempt,
                outcome,
                took,
                &verdict,
                &decision,
                detail.as_deref(),
            );
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
                    return status;
                }
                Decision::Retry(wait) => {
                    self.log.wait(attempt, wait);
                    if let Some(signal) = self.sleep(wait.delay) {
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
        limit: Option<TryLimit>,
        io: &mut TryIo,
    ) -> anyhow::Result<TryEnd> {
        // A signal that came while retry was busy (logging, deciding) means no further try.
        if let Some(signal) = self.signals.pending_stop() {
            return Ok(TryEnd::Interrupted(signal));
        }
        self.env[0].1 = attempt.to_string();
        let (stdio, try_io) = self.stdio.start_try()?;
        *io = try_io;
        let opts = SpawnOptions {
            stdio,
            command: &self.config.command,
            env: &self.env,
            foreground: self.config.foreground,
            terminal: self.terminal,
        };
        let mut child = match Child::spawn(opts) {
            Ok(child) => child,
            Err(e) => {
                let name = self.config.command[0].to_string_lossy().into_owned();
                let reason = match e.error.raw_os_error() {
                    Some(errno) => nix::errno::Errno::from_raw(errno).desc().to_string(),
                    None => e.error.to_string(),
                };
                let detail = match e.outcome {
                    Outcome::NotFound => format!("'{name}' was not found"),
                    _ => format!("'{name}' cannot be executed: {reason}"),
                };
                return Ok(TryEnd::NotStarted(e.outcome, detail));
            }
        };
        let deadline = limit.map(|l| Instant::now() + l.duration);
        let end = loop {
            match self.next_event(Some(io), deadline) {
                Event::Child => {
                    child.reap();
                    if let Some(outcome) = child.outcome() {
                        break TryEnd::Ended(outcome);
                    }
                }
                Event::Stop(signal) => {
                    self.stop(&mut child, signal, false, io);
                    break TryEnd::Interrupted(signal);
                }
                Event::Timeout | Event::Io => {
                    match self.stop(&mut child, self.config.signal, true, io) {
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
                let before = Instant::now();
                if let Some(received) = self.stop(&mut child, signal, true, io) {
                    self.give_back_terminal(&child);
                    return Ok(TryEnd::Interrupted(received));
                }
                let killed = before.elapsed() >= self.config.kill_after;
                self.log.leftovers(attempt, signal, killed);
            }
        }
        self.give_back_terminal(&child);
        Ok(end)
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

    fn give_back_terminal(&self, child: &Child) {
        if let (Some(terminal), true) = (self.terminal, child.has_terminal()) {
            terminal.take_back();
        }
    }

    /// Stops the try's group: `signal` (with SIGCONT when `cont`, so that a stopped process can
    /// act on it), then SIGKILL after `--kill-after`, or at once on a further stopping signal.
    /// Returns the stopping signal received meanwhile, if any.
    fn stop(
        &mut self,
        child: &mut Child,
        signal: Signal,
        cont: bool,
        io: &mut TryIo,
    ) -> Option<Signal> {
        let mut received = None;
        child.signal(signal);
        if cont {
            child.signal(Signal::CONT);
        }
        let kill_at = Instant::now() + self.config.kill_after;
        while child.alive() {
            match self.next_event(Some(io), Some(kill_at)) {
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
            let settle = Instant::now() + KILL_SETTLE;
            while child.alive() {
                match self.next_event(Some(io), Some(settle)) {
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
        received
    }

    /// Waits `delay` before the next try; a stopping signal ends the wait at once.
    fn sleep(&mut self, delay: Duration) -> Option<Signal> {
        let until = Instant::now() + delay;
        loop {
            match self.next_event(None, Some(until)) {
                Event::Timeout | Event::Io => return None,
                Event::Child => reap_all(|_, _| {}),
                Event::Stop(signal) => return Some(signal),
            }
        }
    }
}
