//! Signals arriving at `retry`, turned into events: a handler writes the signal's number to a
//! pipe (the self-pipe trick), and the runner waits on that pipe with a timeout. One wait covers
//! a child's exit (SIGCHLD), a signal to forward, and the end of a timeout or a backoff wait, so
//! nothing polls and a wait costs no CPU.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Instant;

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::libc;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, sigaction};

use crate::policy::Signal;

/// The signals that stop a run (spec 6.4); they are forwarded to the try.
pub const STOPPING: [Signal; 4] = [Signal::INT, Signal::TERM, Signal::HUP, Signal::QUIT];

static WRITE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(signo: libc::c_int) {
    // Only async-signal-safe calls here. errno is saved because the handler may interrupt code
    // that is about to read it.
    let saved = nix::errno::Errno::last_raw();
    let fd = WRITE_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = signo as u8;
        // A full pipe means the runner already has plenty of wake-ups pending.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
    nix::errno::Errno::set_raw(saved);
}

/// What woke the runner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A child changed state: reap.
    Child,
    /// A stopping signal arrived.
    Stop(Signal),
    /// The time given to `next_with` has come.
    Timeout,
    /// One of the extra descriptors given to `next_with` is ready.
    Io,
}

/// The receiving end of the self-pipe. Create it once, before the first child is spawned.
pub struct Signals {
    read: OwnedFd,
    _write: OwnedFd,
    pending: VecDeque<Event>,
}

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
    /// Installs the handlers for SIGCHLD and the stopping signals.
    pub fn install() -> io::Result<Signals> {
        let (read, write) = nix::unistd::pipe()?;
        set_flags(&read)?;
        set_flags(&write)?;
        WRITE_FD.store(write.as_raw_fd(), Ordering::Relaxed);
        let action = SigAction::new(
            SigHandler::Handler(on_signal),
            // No SA_NOCLDSTOP: a try stopped at the terminal (Ctrl-Z) must wake the runner too.
            SaFlags::SA_RESTART,
            SigSet::empty(),
        );
        let mut signals = vec![nix::sys::signal::Signal::SIGCHLD];
        for s in STOPPING {
            signals.push(nix::sys::signal::Signal::try_from(s.number()).map_err(io::Error::from)?);
        }
        for s in signals {
            // SAFETY: the handler only calls async-signal-safe functions.
            unsafe { sigaction(s, &action) }?;
        }
        Ok(Signals {
            read,
            _write: write,
            pending: VecDeque::new(),
        })
    }

    fn drain(&mut self) {
        let mut buf = [0u8; 64];
        loop {
            match nix::unistd::read(&self.read, &mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    for &b in &buf[..n] {
                        let event = if i32::from(b) == libc::SIGCHLD {
                            Event::Child
                        } else {
                            match Signal::from_number(i32::from(b)) {
                                Some(s) => Event::Stop(s),
                                None => continue,
                            }
                        };
                        // Many SIGCHLDs in a row mean one reap.
                        if event != Event::Child || !self.pending.contains(&Event::Child) {
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
    /// `extra` is ready (`Event::Io`; the caller reads their `revents`). Signals come first: a
    /// ready descriptor stays ready for the next call.
    pub fn next_with(&mut self, extra: &mut [libc::pollfd], until: Option<Instant>) -> Event {
        let mut fds = Vec::with_capacity(extra.len() + 1);
        loop {
            if let Some(event) = self.pending.pop_front() {
                return event;
            }
            let timeout = match until {
                None => None,
                Some(t) => {
                    let left = t.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Event::Timeout;
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
            poll(&mut fds, timeout);
            if fds[0].revents != 0 {
                self.drain();
            }
            for (e, f) in extra.iter_mut().zip(&fds[1..]) {
                e.revents = f.revents;
            }
            if self.pending.is_empty() && extra.iter().any(|p| p.revents != 0) {
                return Event::Io;
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
            .position(|e| matches!(e, Event::Stop(_)))?;
        match self.pending.remove(i) {
            Some(Event::Stop(signal)) => Some(signal),
            _ => None,
        }
    }
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
/// death (spec 6.4, 11). Returns only if the signal did not end the process.
pub fn die_by(signal: Signal) {
    let Ok(sig) = nix::sys::signal::Signal::try_from(signal.number()) else {
        return;
    };
    // A re-raised SIGQUIT would otherwise leave a core file of retry, which is not what failed.
    let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
    let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    // SAFETY: restoring the default disposition.
    let _ = unsafe { sigaction(sig, &default) };
    let mut set = SigSet::empty();
    set.add(sig);
    let _ = set.thread_unblock();
    let _ = nix::sys::signal::raise(sig);
}
