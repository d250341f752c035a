//! Job control: a try stopped at the terminal stops `retry` too, SIGTSTP to `retry` stops the
//! try, and the terminal goes back and forth between the try's group and `retry`.

use crate::policy::Signal;
use crate::run::process::{Child, Target, Terminal};

/// The terminal `retry` runs on, if any, and what `retry` does with it.
pub struct JobControl {
    terminal: Option<Terminal>,
    /// The terminal's modes before the running try was given it: set again when the try dies
    /// of a signal or is stopped by `retry`, as a shell does for its foreground job.
    saved: Option<nix::sys::termios::Termios>,
}

impl JobControl {
    pub fn new(terminal: Option<Terminal>) -> JobControl {
        JobControl {
            terminal,
            saved: None,
        }
    }

    /// The terminal a try is given as it starts: `retry`'s, while `retry` holds it alone
    /// (docs/processes.md#process-group-and-terminal). Its modes are kept first.
    pub fn for_try(&mut self) -> Option<Terminal> {
        let terminal = self.terminal.filter(|t| t.hands_over());
        self.saved = terminal.and_then(|t| t.modes());
        terminal
    }

    /// Job control: the try was stopped by `signal` (Ctrl-Z; SIGTTIN or SIGTTOU when it wants
    /// a terminal that it was not given). A try that wants the terminal while `retry`'s job
    /// has it is lent it, and continued. Otherwise `retry` stops its whole job with the try, so
    /// that the shell sees its job stop and takes the terminal back; when the shell continues
    /// the job in the foreground, the try gets the terminal if it had it or asked for it, and
    /// is continued. Returns, when the try wanted the terminal, whether it was given it.
    pub fn suspend_with(&mut self, child: &mut Child, signal: Signal) -> Option<bool> {
        let (Some(terminal), Some(group)) = (self.terminal, child.group()) else {
            // Without a terminal nobody is there to continue a stopped job: leave it be.
            return None;
        };
        let wants = (signal == Signal::TTIN || signal == Signal::TTOU)
            && terminal.foreground_group() != Some(group);
        if wants && terminal.in_foreground() {
            if self.saved.is_none() {
                self.saved = terminal.modes();
            }
            terminal.give_to(group);
            child.set_lent();
            child.signal(Signal::CONT);
            return Some(true);
        }
        if terminal.foreground_group() == Some(group) {
            terminal.take_back();
        }
        let had = child.has_terminal() || wants;
        terminal.stop_job();
        // Continued: by `fg` (retry has the terminal) or by `bg`.
        if had && terminal.in_foreground() {
            if self.saved.is_none() {
                self.saved = terminal.modes();
            }
            terminal.give_to(group);
            child.set_has_terminal();
        }
        child.signal(Signal::CONT);
        wants.then_some(false)
    }

    /// SIGTSTP reached `retry`, its countdown cleared: stop the running try (`current`) as a
    /// shell stops a job, stop, and when continued, continue the try.
    pub fn suspend(&self, current: Option<Target>) {
        if let Some(target) = current {
            target.signal(Signal::TSTP);
        }
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
        if let Some(target) = current {
            target.signal(Signal::CONT);
        }
    }

    /// Takes the terminal back from the try's group, if that group holds it (not after `bg`:
    /// then the shell has it). When the try did not end by itself (`killed`: it died of a
    /// signal, or `retry` stopped it), sets the terminal's modes back to what they were before
    /// the try, which may have left it raw or without echo.
    pub fn give_back_terminal(&mut self, child: &Child, killed: bool) {
        let saved = self.saved.take();
        if let (Some(terminal), true) = (self.terminal, child.has_terminal()) {
            if child.group().is_some() && terminal.foreground_group() == child.group() {
                terminal.take_back();
            }
            if let Some(modes) = saved.filter(|_| killed) {
                terminal.restore(&modes);
            }
            // What of the job read the terminal while the try had it was stopped for it.
            if child.lent() {
                terminal.continue_job();
            }
        }
    }
}
