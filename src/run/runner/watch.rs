//! The runner's waits: for what wakes it while a try or hook runs (the try's input and output
//! moving meanwhile, signals passed on, job control), for an ended try's output to be written
//! out, and between tries, with a countdown on the terminal.

use std::os::fd::AsFd;
use std::time::Duration;

use crate::policy::Signal;
use crate::report::event::{Event, Warning};
use crate::report::log::Log;
use crate::run::clock::{Moment, after};
use crate::run::keep::Kept;
use crate::run::process::{Inherited, Target, reap_all};
use crate::run::runner::job_control::JobControl;
use crate::run::signals::{Arrival, Signals};
use crate::run::stdio::{RunIo, TryIo};

/// The width of the terminal on standard error (0 when not known), when `retry`'s group is
/// its foreground group; `None` when `retry` runs in the background.
fn status_line_width() -> Option<u16> {
    let stderr = std::io::stderr();
    let foreground = nix::unistd::tcgetpgrp(&stderr).ok()?;
    if foreground != nix::unistd::getpgrp() {
        return None;
    }
    Some(crate::run::stdio::window_size(stderr.as_fd()).map_or(0, |size| size.ws_col))
}

/// What wakes the runner: `next_event` deals with the rest itself (signals to pass on, job
/// control, window sizes, the try's input and output).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
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

/// What the runner waits on, and what it does meanwhile: `retry`'s signals, the run's plumbing,
/// the try or hook running now, the terminal.
pub struct Watch {
    pub signals: Signals,
    pub stdio: RunIo,
    /// The try or hook running now: where forwarded signals go.
    pub current: Option<Target>,
    pub job: JobControl,
    /// What was below `retry` before its first try: never stopped with a try.
    inherited: Inherited,
    /// The try has ended and its output is being written out.
    draining: bool,
    /// Count down long waits on the terminal (stderr is one, and the log is human and on it).
    countdown: bool,
    /// The countdown line is on the terminal.
    status_shown: bool,
    /// A lease renewed while the runner waits, whatever it waits for; once it is lost, the
    /// run stops as on the stop signal.
    keeper: Option<Kept>,
    /// The lease of `--lock redis://…`, renewed the same way, and the signal that stops the
    /// try once it is lost (`--signal`, as a timeout stops it).
    lease: Option<(Kept, Signal)>,
    /// Why the lease of `--lock` was lost, once it was.
    lease_lost: Option<String>,
}

impl Watch {
    pub fn new(
        signals: Signals,
        stdio: RunIo,
        job: JobControl,
        inherited: Inherited,
        keeper: Option<Kept>,
    ) -> Watch {
        Watch {
            signals,
            stdio,
            current: None,
            job,
            inherited,
            draining: false,
            countdown: false,
            status_shown: false,
            keeper,
            lease: None,
            lease_lost: None,
        }
    }

    /// Renews `lease` (`--lock`'s) while the run waits from now on; once it is lost, the try
    /// under way is stopped with `signal`.
    pub fn hold_lease(&mut self, lease: Kept, signal: Signal) {
        self.lease = Some((lease, signal));
    }

    /// Why the lease of `--lock` was lost, if it was.
    pub fn lease_lost(&self) -> Option<&str> {
        self.lease_lost.as_deref()
    }

    /// When the next renewal of what the run keeps is due.
    fn due(&self) -> Option<Moment> {
        let keeper = self.keeper.as_ref().and_then(|k| k.borrow().due());
        let lease = self.lease.as_ref().and_then(|(k, _)| k.borrow().due());
        match (keeper, lease) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Counts down long waits (`on`) or not.
    pub fn count_down(&mut self, on: bool) {
        self.countdown = on;
    }

    /// What was below `retry` before its first try.
    pub fn inherited(&self) -> &Inherited {
        &self.inherited
    }

    /// Waits for the next event, moving the try's input and output meanwhile, and looking
    /// whether the try waits for input when that is due. Passes forwarded signals on and
    /// handles SIGTSTP and SIGWINCH itself.
    pub fn next_event(
        &mut self,
        log: &mut Log,
        mut io: Option<&mut TryIo>,
        until: Option<Moment>,
    ) -> Wake {
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
            let due = self.due();
            let wake = match (wake, due) {
                (Some(wake), Some(due)) => Some(wake.min(due)),
                (wake, due) => wake.or(due),
            };
            match self.signals.next_with(&mut fds, wake) {
                Arrival::Child => return Wake::Child,
                Arrival::Stop(signal) => return Wake::Stop(signal),
                Arrival::Timeout if due.is_some_and(|due| Moment::now() >= due) => {
                    if let Some(signal) = self.renew(log) {
                        return Wake::Stop(signal);
                    }
                }
                Arrival::Timeout if until.is_none_or(|until| Moment::now() < until) => {
                    if let Some(io) = io.as_deref_mut() {
                        self.stdio.scan(io, &self.inherited);
                    }
                }
                Arrival::Timeout => return Wake::Timeout,
                Arrival::Io => {
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
                Arrival::Forward(signal) => {
                    if let Some(target) = self.current {
                        target.signal(signal);
                    }
                }
                Arrival::Suspend => self.suspend(log),
                Arrival::Resize => {
                    if let Some(io) = io.as_deref() {
                        if self.stdio.follow_window_sizes(io) {
                            self.current.inspect(|t| t.signal(Signal::WINCH));
                        }
                    }
                }
            }
        }
    }

    /// Renews the lease that the run keeps: the stop signal when it is lost, once (the run
    /// then stops as if `retry` had received it, and says why first).
    fn renew(&mut self, log: &mut Log) -> Option<Signal> {
        let is_due = |k: &Kept| k.borrow().due().is_some_and(|due| Moment::now() >= due);
        if let Some(keeper) = self.keeper.as_ref().filter(|k| is_due(k)) {
            if let Err(why) = keeper.borrow_mut().renew() {
                let signal = Signal::TERM;
                log.warn(Warning::ClaimLost { why, signal });
                return Some(signal);
            }
        }
        if let Some((lease, signal)) = self.lease.as_ref().filter(|(k, _)| is_due(k)) {
            if let Err(why) = lease.borrow_mut().renew() {
                self.lease_lost = Some(why);
                return Some(*signal);
            }
        }
        None
    }

    /// A try started in process group `group`, or ended (`None`): the lease's keeper makes
    /// sure it does not outlive `retry`.
    pub fn guard(&mut self, group: Option<i32>) {
        if let Some(keeper) = &self.keeper {
            keeper.borrow_mut().guard(group);
        }
        if let Some((lease, _)) = &self.lease {
            lease.borrow_mut().guard(group);
        }
    }

    /// SIGTSTP reached `retry` (Ctrl-Z while it holds the terminal, or kill -TSTP): clear the
    /// countdown, stop the running try as a shell stops a job, stop, and when continued,
    /// continue the try.
    fn suspend(&mut self, log: &mut Log) {
        self.clear_status(log);
        self.job.suspend(self.current);
    }

    /// Takes the countdown line off the terminal, if it is there.
    fn clear_status(&mut self, log: &mut Log) {
        if self.status_shown {
            log.emit(Event::StatusCleared);
            self.status_shown = false;
        }
    }

    /// Writes out what the try's streams still hold, without ever blocking: a stopping signal
    /// ends it (and is returned), and so does `until`.
    pub fn drain(
        &mut self,
        log: &mut Log,
        io: &mut TryIo,
        until: Option<Moment>,
    ) -> Option<Signal> {
        self.draining = true;
        let received = self.drain_until(log, io, until);
        self.draining = false;
        received
    }

    fn drain_until(
        &mut self,
        log: &mut Log,
        io: &mut TryIo,
        until: Option<Moment>,
    ) -> Option<Signal> {
        while self.stdio.has_output(io) {
            match self.next_event(log, Some(io), until) {
                Wake::Stop(signal) => return Some(signal),
                Wake::Timeout => {
                    if self.stdio.has_output(io) {
                        log.warn(Warning::SlowReader);
                    }
                    break;
                }
                Wake::Child => reap_all(),
                Wake::OutputFailed | Wake::Drained => {}
            }
        }
        None
    }

    /// Waits `delay` before try `next`; a stopping signal ends the wait at once. On a terminal, a
    /// wait longer than two seconds shows a countdown that the next log line replaces.
    pub fn sleep(&mut self, log: &mut Log, delay: Duration, next: u64) -> Option<Signal> {
        let until = after(delay);
        let countdown = self.countdown && delay > Duration::from_secs(2) && until.is_some();
        let result = loop {
            let wake = match until {
                Some(until) if countdown => {
                    let left = until.saturating_duration_since(Moment::now());
                    let secs = left.as_secs_f64().ceil() as u64;
                    // Drawn only while `retry` is the terminal's foreground job: in the
                    // background it would write over the shell's prompt.
                    if let Some(width) = status_line_width() {
                        log.emit(Event::Countdown { next, secs, width });
                        self.status_shown = true;
                    }
                    // Wake when the shown number of seconds changes.
                    let tick = left.saturating_sub(Duration::from_secs(secs.saturating_sub(1)));
                    Some(Moment::now().checked_add(tick).unwrap_or(until).min(until))
                }
                other => other,
            };
            match self.next_event(log, None, wake) {
                Wake::Child => reap_all(),
                Wake::Stop(signal) => break Some(signal),
                _ => {
                    if until.is_some_and(|u| Moment::now() >= u) {
                        break None;
                    }
                }
            }
        };
        self.clear_status(log);
        result
    }
}
