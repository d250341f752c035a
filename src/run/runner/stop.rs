//! Watching a started try or hook to its end, and stopping its processes when its time is up, a
//! stopping signal reaches `retry`, its output cannot be written, or it ended and left some
//! running: its signal to the whole group (and what left it), a grace period, then SIGKILL.

use std::time::Duration;

use crate::config::Config;
use crate::policy::{Outcome, Signal};
use crate::report::event::Warning;
use crate::report::log::Log;
use crate::run::clock::{Moment, after};
use crate::run::process::{Child, Inherited, descendants, has_children, send};
use crate::run::runner::watch::{Wake, Watch};
use crate::run::stdio::TryIo;

/// After SIGKILL, how long to wait for the kernel to finish the group before going on without
/// it (a process in uninterruptible sleep dies only when its I/O ends).
const KILL_SETTLE: Duration = Duration::from_secs(5);

/// Why `retry` stops the processes of a try (or a hook): the cause names the signal they get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StopCause {
    /// Its time is up: `--timeout`, the budget or the deadline; for a hook, its bound.
    TimeUp,
    /// `retry` received this stopping signal, and passes it on
    /// (docs/processes.md#signals-received-by-retry).
    Received(Signal),
    /// It ended, failed, and left processes running (docs/processes.md#leftover-processes,
    /// docs/log.md#hooks).
    Leftovers,
    /// Its output could not be written: the run ends.
    OutputFailed,
}

/// How the processes that `retry` stopped came to an end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupEnd {
    /// Every one ended within the grace period (or had ended by itself).
    Exited,
    /// Something outlived the grace period, or a further stopping signal cut it short: SIGKILL.
    Killed,
}

impl GroupEnd {
    pub fn killed(self) -> bool {
        self == GroupEnd::Killed
    }
}

/// What stopping a try (or hook) came to.
pub struct Stopped {
    /// A stopping signal that reached `retry` meanwhile: `retry` will die of it.
    pub received: Option<Signal>,
    /// When the stopping signal was sent.
    pub signalled: Moment,
    pub ending: GroupEnd,
    /// How many processes were still running when the stop began.
    pub count: usize,
    /// How many of them had left the try's process group.
    pub outside: usize,
}

/// Processes a failed try left running, stopped before anything else happened.
#[derive(Clone, Copy, Debug)]
pub struct Leftovers {
    pub count: usize,
    pub ending: GroupEnd,
}

/// How a child that `run_child` watched came to its end.
pub enum Finish {
    /// It ended by itself: its leader's outcome.
    Exited(Outcome),
    /// Its time came, and it was stopped.
    TimedOut(Stopped),
    /// `retry` received this stopping signal, and stopped it with the same.
    Interrupted(Signal, Stopped),
    /// Its output could not be written, and it was stopped.
    OutputFailed(Stopped),
}

/// How `retry` stops a try or hook: `--signal`, `--kill-after`, and whether `--foreground`
/// keeps it to the command's own group.
#[derive(Clone, Copy, Debug)]
pub struct Stopper {
    /// The signal that stops a try whose time is up, or that failed and left processes running.
    pub signal: Signal,
    kill_after: Duration,
    foreground: bool,
}

impl Stopper {
    pub fn new(config: &Config) -> Stopper {
        Stopper {
            signal: config.signal,
            kill_after: config.kill_after,
            foreground: config.foreground,
        }
    }

    /// Runs a started child, a try or a hook, until it ends or `until` comes, passing signals on
    /// to it meanwhile. Stops it when its time is up, when `retry` receives a stopping signal,
    /// or when the output of a try (`io`) cannot be written. A try takes part in job control; a
    /// hook, which has no `io`, does not.
    pub fn run_child(
        &self,
        watch: &mut Watch,
        log: &mut Log,
        child: &mut Child,
        until: Option<Moment>,
        mut io: Option<&mut TryIo>,
    ) -> Finish {
        watch.current = Some(child.target());
        let finish = loop {
            match watch.next_event(log, io.as_deref_mut(), until) {
                Wake::Child => {
                    child.reap();
                    if let Some(outcome) = child.outcome() {
                        break Finish::Exited(outcome);
                    }
                    if let Some(signal) = child.take_stopped().filter(|_| io.is_some()) {
                        let wanted = watch.job.suspend_with(child, signal);
                        if let Some(given) = wanted.filter(|_| child.first_telling()) {
                            log.warn(Warning::Stdio(wants_terminal(signal, given)));
                        }
                    }
                }
                Wake::Stop(signal) => {
                    let stopped = self.stop(watch, log, child, StopCause::Received(signal), io);
                    break Finish::Interrupted(signal, stopped);
                }
                Wake::OutputFailed => {
                    let stopped = self.stop(watch, log, child, StopCause::OutputFailed, io);
                    break Finish::OutputFailed(stopped);
                }
                // Only while the output of an ended try is written out.
                Wake::Drained => {}
                Wake::Timeout => {
                    break Finish::TimedOut(self.stop(watch, log, child, StopCause::TimeUp, io));
                }
            }
        };
        watch.current = None;
        finish
    }

    /// Stops the try (or hook) for `cause`: its signal then SIGCONT, so that a stopped process
    /// can act on it, to its group and, unless `--foreground`, to every process below `retry`
    /// (those that left the group); SIGKILL to all of them after `--kill-after`, or at once on a
    /// further stopping signal.
    fn stop(
        &self,
        watch: &mut Watch,
        log: &mut Log,
        child: &mut Child,
        cause: StopCause,
        mut io: Option<&mut TryIo>,
    ) -> Stopped {
        let signal = match cause {
            StopCause::Received(signal) => signal,
            StopCause::TimeUp | StopCause::Leftovers | StopCause::OutputFailed => self.signal,
        };
        let signalled = Moment::now();
        let (count, outside) = self.send_all(watch.inherited(), child, signal);
        self.send_all(watch.inherited(), child, Signal::CONT);
        let mut received = self.grace(watch, log, child, io.as_deref_mut());
        let ending = if self.left_running(watch.inherited(), child) {
            let late = self.kill(watch, log, child, io);
            received = received.or(late);
            GroupEnd::Killed
        } else {
            GroupEnd::Exited
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
    fn grace(
        &self,
        watch: &mut Watch,
        log: &mut Log,
        child: &mut Child,
        mut io: Option<&mut TryIo>,
    ) -> Option<Signal> {
        let kill_at = after(self.kill_after);
        while self.left_running(watch.inherited(), child) {
            match watch.next_event(log, io.as_deref_mut(), kill_at) {
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
    fn kill(
        &self,
        watch: &mut Watch,
        log: &mut Log,
        child: &mut Child,
        mut io: Option<&mut TryIo>,
    ) -> Option<Signal> {
        let mut received = None;
        self.send_all(watch.inherited(), child, Signal::KILL);
        let settle = after(KILL_SETTLE);
        while self.left_running(watch.inherited(), child) {
            match watch.next_event(log, io.as_deref_mut(), settle) {
                Wake::Child => {
                    child.reap();
                    // A process forked just before the kill is killed too.
                    self.send_all(watch.inherited(), child, Signal::KILL);
                }
                Wake::Stop(signal) => {
                    received.get_or_insert(signal);
                }
                Wake::Timeout | Wake::OutputFailed | Wake::Drained => {
                    log.warn(Warning::Survivors {
                        pid: child.pid().as_raw(),
                        settle: KILL_SETTLE,
                    });
                    break;
                }
            }
        }
        received
    }

    /// Stops what `child` left running, if anything (docs/processes.md#leftover-processes for a
    /// failed try, docs/log.md#hooks for a hook).
    pub fn stop_leftovers(
        &self,
        watch: &mut Watch,
        log: &mut Log,
        child: &mut Child,
        io: Option<&mut TryIo>,
    ) -> Option<Stopped> {
        if !self.left_running(watch.inherited(), child) {
            return None;
        }
        Some(self.stop(watch, log, child, StopCause::Leftovers, io))
    }

    /// Sends `signal` to the try's group and, when sweeping, to every process below `retry` that
    /// is not in that group (so that none gets it twice); returns how many processes there were,
    /// and how many of them outside the group.
    fn send_all(&self, inherited: &Inherited, child: &Child, signal: Signal) -> (usize, usize) {
        if !self.sweeps() {
            child.signal(signal);
            return (usize::from(child.alive()), 0);
        }
        // Counted before anything is signalled, so that what dies at once is counted too.
        let below = descendants(inherited);
        child.signal(signal);
        let mut outside = 0;
        for d in below.iter().filter(|d| Some(d.group) != child.group()) {
            send(d.pid, signal);
            outside += 1;
        }
        (below.len(), outside)
    }

    /// True when something of an ended try still runs: in its group, or (on Linux, where
    /// `retry` is subreaper) anywhere below `retry`, apart from what was there before it
    /// (`inherited`).
    fn left_running(&self, inherited: &Inherited, child: &Child) -> bool {
        child.alive() || (self.sweeps() && has_children() && !descendants(inherited).is_empty())
    }

    /// Whether stopping a try also stops the processes that left its group. Not with
    /// `--foreground`, which promises to stop only the command itself.
    fn sweeps(&self) -> bool {
        !self.foreground
    }
}

/// What `retry` says when a try was stopped by `signal` (SIGTTIN, SIGTTOU) for using a
/// terminal that it was not given.
fn wants_terminal(signal: Signal, given: bool) -> String {
    let then = if given {
        "gave it the terminal"
    } else {
        "stopping with it until the job is in the foreground"
    };
    format!("the try was stopped by {signal} for using the terminal; {then}")
}

/// The processes that had left a stopped try's group (found as `retry`'s descendants), for the
/// log: a timed-out or interrupted try names them as a failed try names its leftovers.
pub fn escaped(stopped: &Stopped) -> Option<Leftovers> {
    (stopped.outside > 0).then_some(Leftovers {
        count: stopped.outside,
        ending: stopped.ending,
    })
}
