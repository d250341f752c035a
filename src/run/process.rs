//! One try's processes: spawned in a process group of its own, given the terminal when `retry`
//! has it, signalled as a group, and reaped.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::errno::Errno;
use nix::libc;
use nix::sys::signal::{SigSet, SigmaskHow, killpg, pthread_sigmask};
use nix::unistd::{Pid, getpgrp, isatty, tcgetpgrp, tcsetpgrp};

use crate::policy::{Outcome, Signal};
use crate::run::child::ChildStdio;
use crate::run::dispositions::Dispositions;
use crate::run::envfile::EnvVar;

/// Makes `retry` the parent of every orphan its tries leave (Linux): their deaths then wake the
/// runner, so it knows at once when a try's whole process group is gone.
pub fn become_subreaper() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let _ = nix::sys::prctl::set_child_subreaper(true);
}

/// `retry`'s controlling terminal: standard input when it is one, else `/dev/tty`. A try's
/// group is made its foreground group for the duration of the try, as a shell does for a job,
/// only when standard input is the terminal and `retry` is alone in the terminal's foreground
/// job (docs/processes.md#process-group-and-terminal); otherwise a try gets it only when it
/// asks, by being stopped for reading it.
#[derive(Clone, Copy, Debug)]
pub struct Terminal {
    own_group: Pid,
    /// The terminal's descriptor, open for the life of `retry`.
    fd: libc::c_int,
    /// Standard input is the terminal.
    on_stdin: bool,
}

impl Terminal {
    /// The controlling terminal, if there is one, whether or not `retry` is in its foreground
    /// now (a job can move between foreground and background).
    pub fn detect() -> Option<Terminal> {
        let stdin = io::stdin();
        if isatty(&stdin).unwrap_or(false) {
            return Some(Terminal {
                own_group: getpgrp(),
                fd: libc::STDIN_FILENO,
                on_stdin: true,
            });
        }
        // SAFETY: open takes a NUL-terminated path and flags, and returns a new descriptor or
        // -1; the descriptor is kept open for the life of the process.
        let fd = unsafe {
            libc::open(
                c"/dev/tty".as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NONBLOCK,
            )
        };
        (fd >= 0).then(|| Terminal {
            own_group: getpgrp(),
            fd,
            on_stdin: false,
        })
    }

    fn borrow(&self) -> std::os::fd::BorrowedFd<'_> {
        // SAFETY: the descriptor stays open for the life of the process (see `detect`).
        unsafe { std::os::fd::BorrowedFd::borrow_raw(self.fd) }
    }

    /// The terminal's foreground group, if it can be read.
    pub fn foreground_group(&self) -> Option<Pid> {
        tcgetpgrp(self.borrow()).ok()
    }

    /// Gives the terminal back to `retry`'s group.
    pub fn take_back(&self) {
        hand_terminal_to(self.fd, self.own_group);
    }

    /// True when `retry`'s group has the terminal (it was not resumed in the background).
    pub fn in_foreground(&self) -> bool {
        tcgetpgrp(self.borrow()).is_ok_and(|g| g == self.own_group)
    }

    /// Hands the terminal to a try's group.
    pub fn give_to(&self, group: Pid) {
        hand_terminal_to(self.fd, group);
    }

    /// True when a try is given the terminal as it starts: standard input is the terminal, and
    /// `retry` is alone in the terminal's foreground job. A job that holds other processes
    /// too (the shell script that runs `retry`, `watch`, the rest of a pipeline) keeps the
    /// terminal, so that Ctrl-C and Ctrl-Z reach all of it, as they would without `retry`.
    pub fn hands_over(&self) -> bool {
        self.on_stdin && self.in_foreground() && self.alone()
    }

    /// True when nothing else is in `retry`'s process group: no other process (what `retry`
    /// started aside), and standard output is not a pipe, whose reader a shell puts in the
    /// same job (it may not have started yet).
    fn alone(&self) -> bool {
        let stdout = io::stdout();
        let piped = nix::sys::stat::fstat(&stdout)
            .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFIFO);
        !piped && !group_has_others(self.own_group)
    }

    /// Stops `retry`'s whole job, as the terminal stops a job whose process reads it from the
    /// background, and as Ctrl-Z does. SIGSTOP rather than SIGTSTP or SIGTTIN: the kernel
    /// drops those for an orphaned process group.
    pub fn stop_job(&self) {
        let _ = killpg(self.own_group, nix::sys::signal::Signal::SIGSTOP);
    }

    /// Continues what of `retry`'s job was stopped meanwhile (a pager that read the terminal
    /// while a try had it).
    pub fn continue_job(&self) {
        let _ = killpg(self.own_group, nix::sys::signal::Signal::SIGCONT);
    }

    /// The terminal's modes now.
    pub fn modes(&self) -> Option<nix::sys::termios::Termios> {
        nix::sys::termios::tcgetattr(self.borrow()).ok()
    }

    /// Sets the terminal's modes back to `modes` once what is written has gone out, as a shell
    /// does when its foreground job dies of a signal. Only from the foreground: elsewhere the
    /// terminal is someone else's.
    pub fn restore(&self, modes: &nix::sys::termios::Termios) {
        if !self.in_foreground() {
            return;
        }
        let _ = nix::sys::termios::tcsetattr(
            self.borrow(),
            nix::sys::termios::SetArg::TCSADRAIN,
            modes,
        );
    }
}

/// True when a process other than `retry` and those it started is in `group`.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn group_has_others(group: Pid) -> bool {
    let me = std::process::id() as i32;
    let procs = proc_entries();
    let parent_of = |pid: i32| procs.iter().find(|e| e.pid == pid).map(|e| e.parent);
    let below_me = |mut pid: i32| {
        // A bounded walk up the tree: a process whose ancestors include `retry`.
        for _ in 0..64 {
            match parent_of(pid) {
                Some(p) if p == me => return true,
                Some(p) if p > 1 => pid = p,
                _ => return false,
            }
        }
        false
    };
    procs
        .iter()
        .any(|e| e.group == group.as_raw() && e.pid != me && !below_me(e.pid))
}

/// Without /proc: `retry` counts as alone when it leads its group, as the first command of a
/// shell's job does.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn group_has_others(group: Pid) -> bool {
    group != nix::unistd::getpid()
}

/// `tcsetpgrp` on terminal `fd` with SIGTTOU blocked, so that a process outside the foreground
/// group may call it. Async-signal-safe: it runs in the child between fork and exec too.
fn hand_terminal_to(fd: libc::c_int, group: Pid) {
    let mut ttou = SigSet::empty();
    ttou.add(nix::sys::signal::Signal::SIGTTOU);
    let mut old = SigSet::empty();
    let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut old));
    // SAFETY: `fd` is open for the life of the process: fd 0 (Rust's runtime opens /dev/null on
    // any of 0, 1 and 2 that is closed at start, and retry never closes them; in a child, only
    // dup2 replaces them) or the terminal `Terminal::detect` opened and never closes.
    let terminal = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let _ = tcsetpgrp(terminal, group);
    let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
}

/// How the command is started.
pub struct SpawnOptions<'a> {
    pub stdio: ChildStdio,
    pub command: &'a [OsString],
    pub env: &'a [EnvVar],
    /// Keep the command in `retry`'s own process group (`--foreground`).
    pub foreground: bool,
    pub terminal: Option<Terminal>,
    /// The signal dispositions the command starts with.
    pub dispositions: Dispositions,
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

/// A running (or ended, not yet cleaned up) try.
#[derive(Debug)]
pub struct Child {
    pid: Pid,
    /// The try's own process group; `None` with `--foreground`.
    group: Option<Pid>,
    status: Option<Outcome>,
    has_terminal: bool,
    /// The terminal was given to the try when it asked for it, while `retry` shared it with
    /// the rest of its job.
    lent: bool,
    /// The signal that stopped the command (Ctrl-Z at the terminal, SIGTTIN), not yet dealt
    /// with.
    stopped: Option<Signal>,
    /// `retry` said that the try asked for the terminal.
    told: bool,
}

impl Child {
    pub fn spawn(opts: SpawnOptions<'_>) -> Result<Child, SpawnError> {
        let Some((program, args)) = opts.command.split_first() else {
            return Err(SpawnError {
                outcome: Outcome::NotFound,
                error: io::Error::new(io::ErrorKind::NotFound, "empty command"),
            });
        };
        let own_group = !opts.foreground;
        let terminal = opts.terminal.filter(|_| own_group);
        let take_terminal = terminal.is_some();
        // Without a terminal to hand over, posix_spawn does all a try needs, at vfork's cost.
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        if !take_terminal {
            let pid = crate::run::spawn::spawn(crate::run::spawn::Spawn {
                command: opts.command,
                env: opts.env,
                stdio: opts.stdio,
                own_group,
                dispositions: opts.dispositions,
            })
            .map_err(spawn_error)?;
            return Ok(Child::started(pid, own_group, false));
        }
        let cmd = command(program, args, opts, terminal);
        Child::fork_exec(cmd, own_group, terminal)
    }

    /// Starts `cmd` (fork and exec), in a group of its own if `own_group`, and hands it
    /// `terminal` if there is one.
    fn fork_exec(
        mut cmd: Command,
        own_group: bool,
        terminal: Option<Terminal>,
    ) -> Result<Child, SpawnError> {
        let child = cmd.spawn().map_err(spawn_error)?;
        let pid = Pid::from_raw(child.id() as i32);
        // The parent hands the terminal over too, as shells do: whichever runs first wins the
        // race, and both leave the same state.
        if let Some(terminal) = terminal {
            terminal.give_to(pid);
        }
        // `child` is dropped without waiting: the runner reaps every child itself. Dropping
        // `cmd` closes retry's copies of the child's ends of its pipes.
        drop(child);
        drop(cmd);
        Ok(Child::started(pid, own_group, terminal.is_some()))
    }

    /// The child just started as `pid`, the leader of its own group if `own_group`.
    fn started(pid: Pid, own_group: bool, has_terminal: bool) -> Child {
        Child {
            pid,
            group: own_group.then_some(pid),
            status: None,
            has_terminal,
            lent: false,
            stopped: None,
            told: false,
        }
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

    /// Records that the try was lent the terminal that `retry` shares with its job.
    pub fn set_lent(&mut self) {
        self.has_terminal = true;
        self.lent = true;
    }

    /// True when the try was lent the terminal that `retry` shares with its job.
    pub fn lent(&self) -> bool {
        self.lent
    }

    /// True the first time only: `retry` says once per try that it asked for the terminal.
    pub fn first_telling(&mut self) -> bool {
        !std::mem::replace(&mut self.told, true)
    }

    /// How the command ended, once it has been reaped.
    pub fn outcome(&self) -> Option<Outcome> {
        self.status
    }

    /// Reaps every child that has ended: the try's leader (whose status is kept) and any orphan
    /// handed to `retry` as subreaper. Notes when the leader has been stopped.
    pub fn reap(&mut self) {
        let (leader, mut status, mut stopped) = (self.pid, None, None);
        reap_with_stops(|pid, event| match event {
            Reaped::Ended(outcome) if pid == leader => status = Some(outcome),
            Reaped::Stopped(signal) if pid == leader => stopped = Some(signal),
            _ => {}
        });
        if status.is_some() {
            self.status = status;
        } else if stopped.is_some() {
            self.stopped = stopped;
        }
    }

    /// Once after the leader was stopped (by Ctrl-Z, SIGTTIN or SIGSTOP): the signal that
    /// stopped it.
    pub fn take_stopped(&mut self) -> Option<Signal> {
        self.stopped.take()
    }

    /// The try's process group, unless `--foreground`.
    pub fn group(&self) -> Option<Pid> {
        self.group
    }

    /// Where signals for this try go while it runs.
    pub fn target(&self) -> Target {
        Target {
            pid: self.pid,
            group: self.group,
        }
    }

    /// Sends `signal` to the try's process group (or, with `--foreground`, to the command).
    /// Any signal number works, real-time ones included.
    pub fn signal(&self, signal: Signal) {
        match self.group {
            Some(group) => send_group(group, signal),
            None if self.status.is_none() => send(self.pid, signal),
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

/// The `Command` that runs `program` with `args` as `opts` say; with a `terminal`, the child
/// makes its group the terminal's foreground group before exec.
fn command(
    program: &OsString,
    args: &[OsString],
    opts: SpawnOptions<'_>,
    terminal: Option<Terminal>,
) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(opts.stdio.stdin.into_stdio())
        .stdout(opts.stdio.stdout.into_stdio())
        .stderr(opts.stdio.stderr.into_stdio());
    cmd.envs(opts.env.iter().map(|(k, v)| (k.as_ref(), v)));
    if !opts.foreground {
        cmd.process_group(0);
    }
    let dispositions = opts.dispositions;
    // A closure also keeps std from using posix_spawn, whose glibc version leaves the signals
    // glibc reserves (32 and 33) ignored in the new program.
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe functions may be called: it calls sigemptyset, sigaction,
    // rt_sigaction, getpid, tcsetpgrp and pthread_sigmask, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            dispositions.apply();
            if let Some(terminal) = terminal {
                // The child takes the terminal itself, before exec, so that it cannot read from
                // the terminal before it is in the foreground (and be stopped by SIGTTIN).
                hand_terminal_to(terminal.fd, nix::unistd::getpid());
            }
            Ok(())
        });
    }
    cmd
}

/// Where signals passed on to a running try (or hook) go: its group, or the command itself
/// with `--foreground`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    pid: Pid,
    group: Option<Pid>,
}

impl Target {
    pub fn signal(&self, signal: Signal) {
        match self.group {
            Some(group) => send_group(group, signal),
            None => send(self.pid, signal),
        }
    }

    pub fn group(&self) -> Option<Pid> {
        self.group
    }
}

/// What a failed start means for the try.
fn spawn_error(error: io::Error) -> SpawnError {
    SpawnError {
        outcome: match error.raw_os_error() {
            Some(libc::EAGAIN | libc::ENOMEM) => Outcome::NoResources,
            _ if error.kind() == io::ErrorKind::NotFound => Outcome::NotFound,
            _ => Outcome::NotExecutable,
        },
        error,
    }
}

/// Sends `signal` (by number: real-time signals have no `nix` name) to one process.
pub fn send(pid: Pid, signal: Signal) {
    // SAFETY: kill takes two integers and touches no memory of ours. (nix's safe kill takes
    // only the signals it names, without the real-time ones.)
    unsafe { libc::kill(pid.as_raw(), signal.number()) };
}

/// Sends `signal` to a process group.
pub fn send_group(group: Pid, signal: Signal) {
    // SAFETY: killpg takes two integers and touches no memory of ours.
    unsafe { libc::killpg(group.as_raw(), signal.number()) };
}

/// True when `retry` has a child, ended or not: when it has none, nothing that a try started
/// can be running, since every orphan of a try is handed to `retry` as subreaper.
pub fn has_children() -> bool {
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    // WNOWAIT only looks: a child that has ended stays to be reaped.
    let look = WaitPidFlag::WEXITED
        | WaitPidFlag::WSTOPPED
        | WaitPidFlag::WCONTINUED
        | WaitPidFlag::WNOHANG
        | WaitPidFlag::WNOWAIT;
    !matches!(waitid(Id::All, look), Err(Errno::ECHILD))
}

/// A process found below `retry`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descendant {
    pub pid: Pid,
    /// Its process group.
    pub group: Pid,
}

/// One live process of /proc (zombies excluded).
#[cfg(any(target_os = "linux", target_os = "android"))]
#[derive(Clone, Copy)]
struct ProcEntry {
    pid: i32,
    parent: i32,
    group: i32,
    /// Clock ticks after boot when it started.
    start: u64,
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn proc_entry(pid: i32) -> Option<ProcEntry> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields start after the last ')'.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = *fields.first()?;
    if state == "Z" || state == "X" {
        return None;
    }
    Some(ProcEntry {
        pid,
        parent: fields.get(1)?.parse().ok()?,
        group: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn proc_entries() -> Vec<ProcEntry> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter_map(proc_entry)
        .collect()
}

/// What was already below `retry` when it started (a script that ran `sidecar & exec retry
/// ...` hands its children to `retry`): never a try's, never stopped with one.
#[derive(Clone, Debug, Default)]
pub struct Inherited {
    pids: Vec<i32>,
    /// When `retry` started, in clock ticks after boot: a process that started earlier cannot
    /// be a try's.
    since: u64,
}

impl Inherited {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub fn now() -> Inherited {
        // Usually nothing: then nothing is read. Without a child now, whatever comes below
        // `retry` later descends from its tries, so neither list nor age is needed.
        if !has_children() {
            return Inherited::default();
        }
        let me = std::process::id() as i32;
        let since = proc_entry(me).map_or(0, |e| e.start);
        let pids = below(me, &Inherited::default())
            .into_iter()
            .map(|e| e.pid)
            .collect();
        Inherited { pids, since }
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    pub fn now() -> Inherited {
        Inherited::default()
    }
}

/// The processes below `root`, leaving out `inherited` ones and what is below them. Reads
/// only that subtree, through each task's `children` file, where the kernel has them;
/// elsewhere every process of /proc.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn below(root: i32, inherited: &Inherited) -> Vec<ProcEntry> {
    let keep = |e: &ProcEntry| !inherited.pids.contains(&e.pid) && e.start >= inherited.since;
    let Some(first) = children_of(root) else {
        // No `children` files: walk the whole process table.
        let procs = proc_entries();
        let mut found: Vec<ProcEntry> = Vec::new();
        let mut parents = vec![root];
        while let Some(parent) = parents.pop() {
            for entry in procs.iter().filter(|e| e.parent == parent && keep(e)) {
                parents.push(entry.pid);
                found.push(*entry);
            }
        }
        return found;
    };
    let mut found: Vec<ProcEntry> = Vec::new();
    let mut next = first;
    while let Some(pid) = next.pop() {
        let Some(entry) = proc_entry(pid) else {
            continue;
        };
        if !keep(&entry) {
            continue;
        }
        next.extend(children_of(pid).unwrap_or_default());
        found.push(entry);
    }
    found
}

/// The children of `pid`, from the `children` file of each of its threads; `None` when the
/// kernel has no such files.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn children_of(pid: i32) -> Option<Vec<i32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut children = Vec::new();
    let mut any = false;
    for task in tasks.flatten() {
        let Ok(list) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        any = true;
        children.extend(
            list.split_whitespace()
                .filter_map(|c| c.parse::<i32>().ok()),
        );
    }
    any.then_some(children)
}

/// Every live process below `retry` (zombies excluded) but the inherited ones, read from
/// /proc: the processes a try left behind, including those that left its process group
/// (`setsid`, `setpgid`) or were orphaned (a double fork) and so were handed to `retry` as
/// subreaper.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn descendants(inherited: &Inherited) -> Vec<Descendant> {
    below(std::process::id() as i32, inherited)
        .into_iter()
        .map(|e| Descendant {
            pid: Pid::from_raw(e.pid),
            group: Pid::from_raw(e.group),
        })
        .collect()
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn descendants(_inherited: &Inherited) -> Vec<Descendant> {
    Vec::new()
}

/// What `reap_with_stops` found about a child.
enum Reaped {
    Ended(Outcome),
    /// Stopped by this signal.
    Stopped(Signal),
}

/// Reaps every ended child without blocking, when no try is running: what ends then is an
/// orphan handed to `retry` as subreaper, whose status nobody reads.
pub fn reap_all() {
    reap_with_stops(|_, _| {});
}

/// Reaps every ended child without blocking, and reports stopped ones. The raw status is
/// decoded here, so that a death by any signal (real-time ones included) is seen.
fn reap_with_stops(mut seen: impl FnMut(Pid, Reaped)) {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid writes one `int` into `status`, which outlives the call. (nix's safe
        // waitpid cannot report a death by a real-time signal.)
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG | libc::WUNTRACED) };
        if pid == 0 {
            return;
        }
        if pid < 0 {
            if Errno::last() == Errno::EINTR {
                continue;
            }
            return;
        }
        let pid = Pid::from_raw(pid);
        if libc::WIFEXITED(status) {
            seen(
                pid,
                Reaped::Ended(Outcome::Exit(libc::WEXITSTATUS(status) as u8)),
            );
        } else if libc::WIFSIGNALED(status) {
            let outcome = match Signal::from_number(libc::WTERMSIG(status)) {
                Some(s) => Outcome::Signal(s),
                None => Outcome::Exit(255),
            };
            seen(pid, Reaped::Ended(outcome));
        } else if libc::WIFSTOPPED(status) {
            let signal = Signal::from_number(libc::WSTOPSIG(status)).unwrap_or(Signal::TSTP);
            seen(pid, Reaped::Stopped(signal));
        }
    }
}
