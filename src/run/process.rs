//! One try's processes: spawned in a process group of its own, given the terminal when `retry`
//! has it, signalled as a group, and reaped.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::errno::Errno;
use nix::libc;
use nix::sys::signal::{SigSet, SigmaskHow, killpg, pthread_sigmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getpgrp, isatty, tcgetpgrp, tcsetpgrp};

use crate::policy::{Outcome, Signal};

/// Makes `retry` the parent of every orphan its tries leave (Linux): their deaths then wake the
/// runner, so it knows at once when a try's whole process group is gone.
pub fn become_subreaper() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// The controlling terminal on standard input. While `retry` is in its foreground group, each
/// try's group is made the foreground group for the duration of the try, as a shell does for a
/// job.
#[derive(Clone, Copy, Debug)]
pub struct Terminal {
    own_group: Pid,
}

impl Terminal {
    /// The terminal on standard input, if there is one, whether or not `retry` is in its
    /// foreground now (a job can move between foreground and background).
    pub fn detect() -> Option<Terminal> {
        let stdin = io::stdin();
        if !isatty(&stdin).unwrap_or(false) {
            return None;
        }
        Some(Terminal {
            own_group: getpgrp(),
        })
    }

    /// The terminal's foreground group, if it can be read.
    pub fn foreground_group(&self) -> Option<Pid> {
        tcgetpgrp(io::stdin()).ok()
    }

    /// Gives the terminal back to `retry`'s group.
    pub fn take_back(&self) {
        hand_terminal_to(self.own_group);
    }

    /// True when `retry`'s group has the terminal (it was not resumed in the background).
    pub fn in_foreground(&self) -> bool {
        tcgetpgrp(io::stdin()).is_ok_and(|g| g == self.own_group)
    }

    /// Hands the terminal to a try's group again.
    pub fn give_to(&self, group: Pid) {
        hand_terminal_to(group);
    }
}

/// `tcsetpgrp` with SIGTTOU blocked, so that a process outside the foreground group may call it.
/// Async-signal-safe: it runs in the child between fork and exec too.
fn hand_terminal_to(group: Pid) {
    let mut ttou = SigSet::empty();
    ttou.add(nix::sys::signal::Signal::SIGTTOU);
    let mut old = SigSet::empty();
    let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut old));
    // SAFETY: fd 0 is open for the life of the process.
    let stdin = unsafe { std::os::fd::BorrowedFd::borrow_raw(libc::STDIN_FILENO) };
    let _ = tcsetpgrp(stdin, group);
    let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
}

/// How the command is started.
pub struct SpawnOptions<'a> {
    pub stdio: crate::run::stdio::ChildStdio,
    pub command: &'a [OsString],
    pub env: &'a [(&'static str, String)],
    /// Keep the command in `retry`'s own process group (`--foreground`).
    pub foreground: bool,
    pub terminal: Option<Terminal>,
}

/// The command could not be started.
#[derive(Debug)]
pub struct SpawnError {
    pub outcome: Outcome,
    pub error: io::Error,
}

impl SpawnError {
    /// The file exists and is executable but is not a binary the kernel can run, nor a script
    /// with `#!`: execvp would run it with /bin/sh, and so does retry.
    pub fn wants_shell(&self) -> bool {
        self.error.raw_os_error() == Some(libc::ENOEXEC)
    }
}

/// The file that execvp would have run for `program`: itself when it names a path, else the
/// first executable file of that name in PATH.
pub fn resolve(program: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    if program.as_bytes().contains(&b'/') {
        return Some(program.into());
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            nix::unistd::access(candidate, nix::unistd::AccessFlags::X_OK).is_ok()
                && candidate.is_file()
        })
}

/// A running (or ended, not yet cleaned up) try.
#[derive(Debug)]
pub struct Child {
    pid: Pid,
    /// The try's own process group; `None` with `--foreground`.
    group: Option<Pid>,
    status: Option<Outcome>,
    has_terminal: bool,
    /// The command was stopped (Ctrl-Z at the terminal) and not yet dealt with.
    stopped: bool,
}

impl Child {
    pub fn spawn(opts: SpawnOptions<'_>) -> Result<Child, SpawnError> {
        let Some((program, args)) = opts.command.split_first() else {
            return Err(SpawnError {
                outcome: Outcome::NotFound,
                error: io::Error::new(io::ErrorKind::NotFound, "empty command"),
            });
        };
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(opts.stdio.stdin)
            .stdout(opts.stdio.stdout)
            .stderr(opts.stdio.stderr);
        cmd.envs(opts.env.iter().map(|(k, v)| (k, v)));
        let terminal = opts.terminal.filter(|_| !opts.foreground);
        if !opts.foreground {
            cmd.process_group(0);
        }
        if terminal.is_some() {
            // The child takes the terminal itself, before exec, so that it cannot read from
            // the terminal before it is in the foreground (and be stopped by SIGTTIN).
            // SAFETY: the closure only calls async-signal-safe functions.
            unsafe {
                cmd.pre_exec(|| {
                    hand_terminal_to(Pid::from_raw(libc::getpid()));
                    Ok(())
                });
            }
        }
        let child = cmd.spawn().map_err(|error| SpawnError {
            outcome: match error.kind() {
                io::ErrorKind::NotFound => Outcome::NotFound,
                _ => Outcome::NotExecutable,
            },
            error,
        })?;
        let pid = Pid::from_raw(child.id() as i32);
        // The parent hands the terminal over too, as shells do: whichever runs first wins the
        // race, and both leave the same state.
        if terminal.is_some() {
            hand_terminal_to(pid);
        }
        // `child` is dropped without waiting: the runner reaps every child itself. Dropping
        // `cmd` closes retry's copies of the child's ends of its pipes.
        drop(child);
        drop(cmd);
        Ok(Child {
            pid,
            group: (!opts.foreground).then_some(pid),
            status: None,
            has_terminal: terminal.is_some(),
            stopped: false,
        })
    }

    pub fn pid(&self) -> Pid {
        self.pid
    }

    pub fn has_terminal(&self) -> bool {
        self.has_terminal
    }

    /// Records that the try's group was given the terminal after it started.
    pub fn set_has_terminal(&mut self) {
        self.has_terminal = true;
    }

    /// How the command ended, once it has been reaped.
    pub fn outcome(&self) -> Option<Outcome> {
        self.status
    }

    /// Reaps every child that has ended: the try's leader (whose status is kept) and any orphan
    /// handed to `retry` as subreaper. Notes when the leader has been stopped.
    pub fn reap(&mut self) {
        let (leader, mut status, mut stopped) = (self.pid, None, false);
        reap_with_stops(|pid, event| match event {
            Reaped::Ended(outcome) if pid == leader => status = Some(outcome),
            Reaped::Stopped if pid == leader => stopped = true,
            _ => {}
        });
        if status.is_some() {
            self.status = status;
        } else if stopped {
            self.stopped = true;
        }
    }

    /// True once after the leader was stopped (by Ctrl-Z, SIGTTIN or SIGSTOP).
    pub fn take_stopped(&mut self) -> bool {
        std::mem::take(&mut self.stopped)
    }

    /// The try's process group, unless `--foreground`.
    pub fn group(&self) -> Option<Pid> {
        self.group
    }

    /// Sends `signal` to the try's process group (or, with `--foreground`, to the command).
    pub fn signal(&self, signal: Signal) {
        let Ok(sig) = nix::sys::signal::Signal::try_from(signal.number()) else {
            return;
        };
        match self.group {
            Some(group) => {
                let _ = killpg(group, sig);
            }
            None if self.status.is_none() => {
                let _ = nix::sys::signal::kill(self.pid, sig);
            }
            None => {}
        }
    }

    /// True while any process of the try remains: a member of its group, or, with
    /// `--foreground`, the command itself.
    pub fn alive(&self) -> bool {
        match self.group {
            Some(group) => !matches!(killpg(group, None), Err(Errno::ESRCH)),
            None => self.status.is_none(),
        }
    }
}

/// What `reap_with_stops` found about a child.
enum Reaped {
    Ended(Outcome),
    Stopped,
}

/// Reaps every ended child without blocking, calling `seen` for each.
pub fn reap_all(mut seen: impl FnMut(Pid, Outcome)) {
    reap_with_stops(|pid, event| {
        if let Reaped::Ended(outcome) = event {
            seen(pid, outcome);
        }
    });
}

/// Reaps every ended child without blocking, and reports stopped ones.
fn reap_with_stops(mut seen: impl FnMut(Pid, Reaped)) {
    loop {
        match waitpid(
            Pid::from_raw(-1),
            Some(WaitPidFlag::WNOHANG | WaitPidFlag::WUNTRACED),
        ) {
            Ok(WaitStatus::Exited(pid, code)) => {
                seen(pid, Reaped::Ended(Outcome::Exit(code as u8)))
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) => match Signal::from_number(sig as i32) {
                Some(s) => seen(pid, Reaped::Ended(Outcome::Signal(s))),
                None => seen(pid, Reaped::Ended(Outcome::Exit(255))),
            },
            Ok(WaitStatus::Stopped(pid, _)) => seen(pid, Reaped::Stopped),
            Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => return,
            Ok(_) => continue,
            Err(Errno::EINTR) => continue,
            Err(_) => return,
        }
    }
}
