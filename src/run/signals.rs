//! Signals arriving at `retry`, turned into events: a handler writes the signal's number to a
//! pipe (the self-pipe trick), and the runner waits on that pipe with a timeout. One wait covers
//! a child's exit (SIGCHLD), a signal to forward, and the end of a timeout or a backoff wait, so
//! nothing polls and a wait costs no CPU.

use std::collections::VecDeque;
use std::io;
#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
use std::os::fd::AsFd;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

use nix::fcntl::OFlag;
#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
use nix::fcntl::{FcntlArg, fcntl};
use nix::libc;

use crate::policy::Signal;
use crate::run::clock::{CLOCK, Moment};
use crate::run::dispositions::Dispositions;
use crate::run::rawsig;

/// Signals forwarded to the try's group while the run goes on
/// (docs/processes.md#signals-received-by-retry): daemons and `dd` take them as requests, not as an
/// end.
pub const FORWARDED: [Signal; 2] = [Signal::USR1, Signal::USR2];

/// Signals whose default action ends a process, apart from the forwarded ones and SIGKILL: each
/// stops the run as SIGTERM does, so that none ends `retry` silently and orphans its try.
fn ending() -> Vec<i32> {
    let mut ending = vec![
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGTERM,
        libc::SIGALRM,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGIO,
        libc::SIGXCPU,
        libc::SIGXFSZ,
        libc::SIGSYS,
    ];
    #[cfg(any(target_os = "linux", target_os = "android"))]
    ending.extend([libc::SIGPWR, libc::SIGSTKFLT]);
    #[cfg(target_os = "linux")]
    ending.extend(libc::SIGRTMIN()..=libc::SIGRTMAX());
    ending
}

/// Signals that report a fault when the kernel sends them but end the run like SIGTERM when
/// someone sends them with kill(2). Their handler is reset after one delivery, so that a real
/// fault in `retry` still ends it with a core dump.
const FAULTS: [i32; 6] = [
    libc::SIGABRT,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGSEGV,
    libc::SIGTRAP,
];

static WRITE_FD: AtomicI32 = AtomicI32::new(-1);
/// The pid of `retry`: a child between fork and exec still runs the handler, and must not
/// speak for `retry`.
static OWNER: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signo: libc::c_int) {
    // Only async-signal-safe calls here. errno is saved because the handler may interrupt code
    // that is about to read it.
    let saved = nix::errno::Errno::last_raw();
    let fd = WRITE_FD.load(Ordering::Relaxed);
    // SAFETY: getpid is async-signal-safe.
    if fd >= 0 && unsafe { libc::getpid() } == OWNER.load(Ordering::Relaxed) {
        let byte = signo as u8;
        // A full pipe means the runner already has plenty of wake-ups pending.
        // SAFETY: write is async-signal-safe, and reads one byte from `byte`, which outlives
        // the call; `fd` is the pipe's writing end, which `Signals` keeps open.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
    nix::errno::Errno::set_raw(saved);
}

/// What woke the runner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// A child changed state: reap.
    Child,
    /// A stopping signal arrived.
    Stop(Signal),
    /// A signal to pass on to the try (SIGUSR1, SIGUSR2); the run goes on.
    Forward(Signal),
    /// SIGTSTP reached `retry` itself (Ctrl-Z while it holds the terminal, or kill -TSTP).
    Suspend,
    /// The terminal's window changed size (SIGWINCH reached `retry`).
    Resize,
    /// The time given to `next_with` has come.
    Timeout,
    /// One of the extra descriptors given to `next_with` is ready.
    Io,
}

/// The receiving end of the self-pipe. Create it once, before the first child is spawned.
pub struct Signals {
    read: OwnedFd,
    _write: OwnedFd,
    pending: VecDeque<Arrival>,
    /// What was ignored when `retry` started: left ignored, in `retry` and in its tries.
    entry: Dispositions,
    /// A timer on the run's clock (Linux): a wait that a suspend interrupts still ends on time,
    /// where ppoll's own timeout would not count the suspended time.
    timer: Option<OwnedFd>,
}

/// A pipe whose ends are close-on-exec and nonblocking.
fn self_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    {
        Ok(nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    {
        let (read, write) = nix::unistd::pipe()?;
        set_flags(&read)?;
        set_flags(&write)?;
        Ok((read, write))
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
fn set_flags(fd: &OwnedFd) -> io::Result<()> {
    fcntl(
        fd.as_fd(),
        FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )?;
    let flags = OFlag::from_bits_truncate(fcntl(fd.as_fd(), FcntlArg::F_GETFL)?);
    fcntl(fd.as_fd(), FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

impl Signals {
    /// Installs the handlers: SIGCHLD, SIGTSTP, the forwarded signals and every signal that would
    /// otherwise end `retry`, except those ignored when it started, which stay ignored.
    pub fn install() -> io::Result<Signals> {
        let (read, write) = self_pipe()?;
        WRITE_FD.store(write.as_raw_fd(), Ordering::Relaxed);
        OWNER.store(std::process::id() as i32, Ordering::Relaxed);
        let entry = catch_all(&caught())?;
        // The signals glibc reserves end a process by default too: catch them like SIGTERM.
        // Whether they were ignored on entry says nothing: glibc's posix_spawn leaves them
        // ignored in every program it starts, so nobody ignores them on purpose.
        let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        rawsig::catch_like(rawsig::reserved(), libc::SIGTERM, handler, 0);
        Ok(Signals {
            read,
            _write: write,
            pending: VecDeque::new(),
            entry,
            timer: timer(),
        })
    }

    /// The dispositions every command started by `retry` begins with.
    pub fn dispositions(&self) -> Dispositions {
        self.entry
    }

    fn drain(&mut self) {
        let mut buf = [0u8; 64];
        loop {
            match nix::unistd::read(&self.read, &mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    for &b in &buf[..n] {
                        let n = i32::from(b);
                        let event = match Signal::from_number(n) {
                            _ if n == libc::SIGCHLD => Arrival::Child,
                            _ if n == libc::SIGTSTP => Arrival::Suspend,
                            _ if n == libc::SIGWINCH => Arrival::Resize,
                            Some(s) if FORWARDED.contains(&s) => Arrival::Forward(s),
                            Some(s) => Arrival::Stop(s),
                            None => continue,
                        };
                        // Many SIGCHLDs in a row mean one reap.
                        if event != Arrival::Child || !self.pending.contains(&Arrival::Child) {
                            self.pending.push_back(event);
                        }
                    }
                }
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => break,
            }
        }
    }

    /// Waits for the next event, or until `until` (forever when `None`); also wakes when one of
    /// `extra` is ready (`Arrival::Io`; the caller reads their `revents`). Signals come first: a
    /// ready descriptor stays ready for the next call.
    pub fn next_with(&mut self, extra: &mut [libc::pollfd], until: Option<Moment>) -> Arrival {
        let mut fds = Vec::with_capacity(extra.len() + 2);
        loop {
            if let Some(event) = self.pending.pop_front() {
                return event;
            }
            let timeout = match until {
                None => None,
                Some(t) => {
                    let left = t.saturating_duration_since(Moment::now());
                    if left.is_zero() {
                        return Arrival::Timeout;
                    }
                    Some(left)
                }
            };
            fds.clear();
            fds.push(libc::pollfd {
                fd: self.read.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
            fds.extend(extra.iter().map(|p| libc::pollfd { revents: 0, ..*p }));
            // With the timer armed at the deadline, ppoll needs no timeout of its own.
            let armed = match (until, &self.timer) {
                (Some(t), Some(timer)) => arm(timer, t),
                _ => false,
            };
            if armed {
                if let Some(timer) = &self.timer {
                    fds.push(libc::pollfd {
                        fd: timer.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    });
                }
            }
            poll(&mut fds, if armed { None } else { timeout });
            if fds[0].revents != 0 {
                self.drain();
            }
            for (e, f) in extra.iter_mut().zip(&fds[1..]) {
                e.revents = f.revents;
            }
            if self.pending.is_empty() && extra.iter().any(|p| p.revents != 0) {
                return Arrival::Io;
            }
        }
    }

    /// A stopping signal that arrived while the runner was busy, if any, without waiting.
    /// Other pending events stay queued.
    pub fn pending_stop(&mut self) -> Option<Signal> {
        self.drain();
        let i = self
            .pending
            .iter()
            .position(|e| matches!(e, Arrival::Stop(_)))?;
        match self.pending.remove(i) {
            Some(Arrival::Stop(signal)) => Some(signal),
            _ => None,
        }
    }
}

/// A timer on the run's clock, if the platform has timerfd.
fn timer() -> Option<OwnedFd> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use std::os::fd::FromRawFd;
        // SAFETY: timerfd_create returns a new descriptor or -1.
        let fd = unsafe { libc::timerfd_create(CLOCK, libc::TFD_CLOEXEC | libc::TFD_NONBLOCK) };
        // SAFETY: a descriptor just created and owned by nothing else.
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = CLOCK;
        None
    }
}

/// Arms `timer` to fire at `at`; false if that failed (then ppoll's timeout serves).
fn arm(timer: &OwnedFd, at: Moment) -> bool {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: at.timespec(),
        };
        // SAFETY: `spec` outlives the call; setting the timer also clears a past expiry.
        let r = unsafe {
            libc::timerfd_settime(
                timer.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        r == 0
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = (timer, at);
        false
    }
}

/// The signals caught with `SA_RESTART` alone: SIGTSTP, SIGWINCH, the forwarded ones and
/// those that would end `retry`, in order, once each.
fn caught() -> Vec<i32> {
    let mut caught: Vec<i32> = vec![libc::SIGTSTP, libc::SIGWINCH];
    caught.extend(FORWARDED.iter().map(|s| s.number()));
    caught.extend(ending());
    caught.sort_unstable();
    caught.dedup();
    caught
}

/// Catches `caught`, SIGCHLD and the faults, and returns the dispositions found on entry.
/// Installing a handler reads the action it replaces, so one call per signal both catches it
/// and tells whether it was ignored on entry; one that was is set back to ignored. Every signal
/// is blocked meanwhile, and setting one back to ignored discards any instance that arrived in
/// between: none reaches the handler it should not.
fn catch_all(caught: &[i32]) -> io::Result<Dispositions> {
    let all = nix::sys::signal::SigSet::all();
    let mut before = nix::sys::signal::SigSet::empty();
    nix::sys::signal::sigprocmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&all),
        Some(&mut before),
    )?;
    let mut entry = Dispositions::default();
    let result = catch_each(caught, &mut entry);
    for n in Dispositions::settable_signals() {
        let handled = caught.contains(&n) || FAULTS.contains(&n) || n == libc::SIGCHLD;
        if !handled && is_ignored(n) {
            entry.set_ignored(n);
        }
    }
    nix::sys::signal::sigprocmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&before),
        None,
    )?;
    result?;
    Ok(entry)
}

/// The catching of `catch_all`, with every signal blocked; what was ignored goes in `entry`.
fn catch_each(caught: &[i32], entry: &mut Dispositions) -> io::Result<()> {
    for &n in caught {
        // No SA_NOCLDSTOP: a try stopped at the terminal (Ctrl-Z) must wake the runner.
        match catch(n, libc::SA_RESTART) {
            Ok(true) => {
                ignore(n);
                entry.set_ignored(n);
            }
            Ok(false) => {}
            // A real-time signal that the system keeps for itself (valgrind keeps one) cannot
            // be caught, so it cannot reach retry to be passed on either.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && n >= libc::SIGRTMIN() => {}
            Err(e) => return Err(e),
        }
    }
    // SIGCHLD always: retry must know when its children end, whatever it inherited; its tries
    // still start with it ignored if it was.
    if catch(libc::SIGCHLD, libc::SA_RESTART)? {
        entry.set_ignored(libc::SIGCHLD);
    }
    for n in FAULTS {
        if catch(n, libc::SA_RESTART | libc::SA_RESETHAND | libc::SA_ONSTACK)? {
            ignore(n);
            entry.set_ignored(n);
        }
    }
    Ok(())
}

/// Catches signal `n` with `on_signal`; returns whether it was ignored until then.
fn catch(n: i32, flags: libc::c_int) -> io::Result<bool> {
    // SAFETY: `sigaction` holds integers, a handler address and a signal set, for all of which
    // zero bytes are a valid value.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    action.sa_flags = flags;
    // SAFETY: sigemptyset writes only the mask of `action`.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    // SAFETY: `action` and `old` outlive the call; `action` has our handler, an empty mask and
    // valid flags, and the handler only calls async-signal-safe functions. (By number, as nix's
    // safe sigaction does not take real-time signals.)
    if unsafe { libc::sigaction(n, &action, &mut old) } == 0 {
        // Rust's runtime, or `retry`'s start-up in its place, ignores SIGPIPE before this, so
        // whether it was ignored on entry cannot be known: it starts at its default in every
        // command, as with std's Command.
        Ok(old.sa_sigaction == libc::SIG_IGN && n != libc::SIGPIPE)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets signal `n` back to ignored.
fn ignore(n: i32) {
    // SAFETY: zero bytes are a valid `sigaction`: no flags, an empty mask.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = libc::SIG_IGN;
    // SAFETY: `action` outlives the call and installs no handler; a null old action is allowed.
    unsafe { libc::sigaction(n, &action, std::ptr::null_mut()) };
}

/// Whether signal `n` was ignored on entry, for one that `retry` does not catch. SIGPIPE is
/// not read: `retry`'s start-up ignores it, so whether it was ignored before cannot be known,
/// and it starts at its default in every command, as with std's Command.
fn is_ignored(n: i32) -> bool {
    if n == libc::SIGPIPE {
        return false;
    }
    // SAFETY: zero bytes are a valid `sigaction`.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the current one into `old`, which outlives the call.
    let read = unsafe { libc::sigaction(n, std::ptr::null(), &mut old) };
    read == 0 && old.sa_sigaction == libc::SIG_IGN
}

/// Waits until one of `fds` is ready or the timeout passes.
fn poll(fds: &mut [libc::pollfd], timeout: Option<std::time::Duration>) {
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    {
        // ppoll takes nanoseconds, so a wait ends when it should rather than up to 1ms late.
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let ts_ptr = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: fds and ts outlive the call.
        unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                ts_ptr,
                std::ptr::null(),
            )
        };
    }
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    {
        // poll takes milliseconds: round up so that a wait never ends early.
        let ms = timeout.map_or(-1, |t| {
            t.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32
        });
        // SAFETY: fds outlives the call.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    }
}

/// Ends this process with `signal`, as if it had not been caught: the parent sees a signal
/// death (docs/processes.md#signals-received-by-retry, docs/exit-status.md#exit-status). Returns
/// only if the signal did not end the process.
pub fn die_by(signal: Signal) {
    let n = signal.number();
    // A re-raised SIGQUIT would otherwise leave a core file of retry, which is not what failed.
    let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
    // By number: real-time signals have no `nix` name.
    // SAFETY: a zeroed sigaction (integers, a handler address, a signal set: zero bytes are a
    // valid value of each) with SIG_DFL and an empty mask restores the default; the set
    // operations write only `default` and `set`, which outlive the calls; kill and getpid take
    // and return plain integers.
    unsafe {
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut default.sa_mask);
        if rawsig::reserved().contains(&n) {
            rawsig::set_default(n);
        } else {
            libc::sigaction(n, &default, std::ptr::null_mut());
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, n);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        // kill rather than raise: glibc's raise refuses the signals it reserves.
        libc::kill(libc::getpid(), n);
    }
}
