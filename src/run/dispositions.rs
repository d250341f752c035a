//! The signal dispositions a command starts with (docs/processes.md#signals-received-by-retry):
//! those ignored when `retry` started stay ignored, every other signal is at its default. `signals`
//! records them at start-up; `process`, `spawn` and the forwarder of late output in `stdio` apply
//! them in each child.

use nix::libc;

use crate::policy::Signal;
use crate::run::rawsig;

/// The set of signals ignored when `retry` started, and so in every command it starts
/// (docs/processes.md#signals-received-by-retry): `nohup` ignores SIGHUP, a non-interactive shell
/// starts background jobs with SIGINT and SIGQUIT ignored. Every other signal starts at its
/// default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dispositions {
    /// Bit `n` set: signal `n` is ignored.
    ignored: u128,
}

impl Dispositions {
    /// Records that signal `n` was ignored on entry.
    pub fn set_ignored(&mut self, n: i32) {
        if (0..128).contains(&n) {
            self.ignored |= 1 << n;
        }
    }

    /// The signals whose disposition a process may set: 1 to SIGRTMAX but SIGKILL, SIGSTOP
    /// and, on Linux, the ones glibc reserves for itself (32 up to SIGRTMIN).
    pub fn settable_signals() -> impl Iterator<Item = i32> {
        settable_signals()
    }

    /// The signals a command starts with at their default: every one that can be set but those
    /// ignored on entry (glibc's reserved 32 and 33 included).
    pub fn defaults(&self) -> impl Iterator<Item = i32> + '_ {
        settable_signals()
            .chain(rawsig::reserved())
            .filter(|n| self.ignored & (1 << n) == 0)
    }

    pub fn is_ignored(&self, signal: Signal) -> bool {
        let n = signal.number();
        (0..128).contains(&n) && self.ignored & (1 << n) != 0
    }

    /// Sets every signal to its default, or to ignored if it was ignored on entry. Runs in a
    /// child of `retry` (between fork and exec, or in the output forwarder): async-signal-safe,
    /// no allocation.
    pub fn apply(&self) {
        for n in settable_signals() {
            let handler = if self.ignored & (1 << n) != 0 {
                libc::SIG_IGN
            } else {
                libc::SIG_DFL
            };
            // SAFETY: `sigaction` holds integers, a handler address and a signal set, for all
            // of which zero bytes are a valid value.
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            action.sa_sigaction = handler;
            // SAFETY: sigemptyset writes only the mask of `action`; sigaction reads `action`,
            // a plain handler (SIG_DFL or SIG_IGN) with an empty mask, which outlives the call,
            // and is given no pointer for the old action. Both are async-signal-safe.
            unsafe {
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(n, &action, std::ptr::null_mut());
            }
        }
        reset_reserved_signals();
    }
}

/// The signals glibc keeps for itself (32 and 33) cannot be set through its `sigaction`, yet a
/// caller started through `posix_spawn` hands them down ignored: set them to their default
/// with the system call itself, so that the command starts as from a shell.
fn reset_reserved_signals() {
    for n in rawsig::reserved() {
        rawsig::set_default(n);
    }
}

/// The signals whose disposition a process may set: 1 to SIGRTMAX but SIGKILL, SIGSTOP and, on
/// Linux, the ones glibc reserves for itself (32 up to SIGRTMIN).
fn settable_signals() -> impl Iterator<Item = i32> {
    #[cfg(target_os = "linux")]
    let (reserved, max) = (32..libc::SIGRTMIN(), libc::SIGRTMAX());
    #[cfg(not(target_os = "linux"))]
    let (reserved, max) = (0..0, 31);
    (1..=max.min(127))
        .filter(move |n| *n != libc::SIGKILL && *n != libc::SIGSTOP && !reserved.contains(n))
}
