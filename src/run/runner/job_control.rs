//! Job control: a try stopped at the terminal stops `retry` too, SIGTSTP to `retry` stops the
//! try, and the terminal goes back and forth between the try's group and `retry`.

use crate::policy::Signal;
use crate::run::process::{Child, Target, Terminal};

/// The terminal `retry` runs on, if any, and what `retry` does with it.
pub struct JobControl {
    terminal: Option<Terminal>,
}

impl JobControl {
    pub fn new(terminal: Option<Terminal>) -> JobControl {
        JobControl { terminal }
    }

    /// The terminal a try is given: `retry`'s, while `retry` holds it.
    pub fn for_try(&self) -> Option<Terminal> {
        self.terminal.filter(|t| t.in_foreground())
    }

    /// Job control: the try was stopped at the terminal (Ctrl-Z, or SIGTTIN when `retry` runs in
    /// the background and the try reads the terminal). Stop retry too, so that the shell sees
    /// its job stop and takes the terminal back; when the shell continues retry in the
    /// foreground, give the terminal to the try, and continue it.
    pub fn suspend_with(&self, child: &mut Child) {
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
    /// then the shell has it).
    pub fn give_back_terminal(&self, child: &Child) {
        if let (Some(terminal), true) = (self.terminal, child.has_terminal()) {
            if child.group().is_some() && terminal.foreground_group() == child.group() {
                terminal.take_back();
            }
        }
    }
}
