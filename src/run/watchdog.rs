//! What outlives a replay that dies without warning (SIGKILL, the OOM killer): nothing of its
//! try. A replay of a fleet's store starts one small process of its own before its first run,
//! which it tells the process group of each try as the try starts and ends, through a pipe
//! (a socket pair) that only it can write. When `retry` dies, whatever the cause, the kernel closes its end of
//! the pipe; the watchdog reads the end of the pipe, stops the group of the try under way with
//! SIGKILL, and exits. Without it, the try of a killed replay would run on after its lease
//! lapsed, beside the replay that took the run over.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::libc;

/// The watchdog of a replay: the pipe to it and its pid.
pub struct Watchdog {
    pipe: OwnedFd,
    pid: libc::pid_t,
}

impl Watchdog {
    /// Starts the watchdog, in a process group of its own (terminal signals never reach it),
    /// holding nothing of `retry`'s but its end of the pipe.
    pub fn start() -> io::Result<Watchdog> {
        let mut fds = [0 as libc::c_int; 2];
        // A socket pair rather than a pipe: a write to a watchdog that is gone fails with
        // EPIPE and no SIGPIPE (MSG_NOSIGNAL), which `retry` would take for its reader gone.
        // SAFETY: `fds` has room for the two descriptors socketpair writes.
        let made = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if made < 0 {
            return Err(io::Error::last_os_error());
        }
        let (read, write) = (fds[0], fds[1]);
        // SAFETY: the child only makes async-signal-safe calls (sigaction, close_range, read,
        // kill, _exit) before it exits, and touches no memory `retry` shares with another thread.
        match unsafe { libc::fork() } {
            -1 => {
                let e = io::Error::last_os_error();
                // SAFETY: descriptors this function owns.
                unsafe {
                    libc::close(read);
                    libc::close(write);
                }
                Err(e)
            }
            // SAFETY: the child of the fork, which only makes async-signal-safe calls.
            0 => unsafe { watch(read) },
            pid => {
                // SAFETY: the read end is the watchdog's, and the write end is owned from here
                // on by nothing but the `OwnedFd`.
                let pipe = unsafe {
                    libc::close(read);
                    OwnedFd::from_raw_fd(write)
                };
                Ok(Watchdog { pipe, pid })
            }
        }
    }

    /// The process group of the try under way (`None` when none is): the one the watchdog
    /// stops if `retry` dies now.
    pub fn guard(&self, group: Option<i32>) {
        let line = format!("{}\n", group.unwrap_or(0));
        // SAFETY: a send of a few bytes from a live buffer on a socket `retry` owns; a watchdog
        // that is gone (EPIPE, no signal) changes nothing.
        unsafe {
            libc::send(
                self.pipe.as_raw_fd(),
                line.as_ptr().cast(),
                line.len(),
                libc::MSG_NOSIGNAL,
            )
        };
    }

    /// The watchdog's pid.
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }
}

/// What a replay of a file keeps while a run runs: no lease (the replay holds the file), only
/// its watchdog.
pub struct Guard(pub Option<Watchdog>);

impl crate::run::keep::Keep for Guard {
    fn due(&self) -> Option<crate::run::clock::Moment> {
        None
    }

    fn renew(&mut self) -> Result<(), String> {
        Ok(())
    }

    fn token(&self) -> Option<u64> {
        None
    }

    fn guard(&mut self, group: Option<i32>) {
        if let Some(watchdog) = &self.0 {
            watchdog.guard(group);
        }
    }
}

impl Drop for Watchdog {
    /// `retry` ends with no try under way: the watchdog reads the end of the pipe (closed with
    /// `pipe` after this) and exits, stopping nothing.
    fn drop(&mut self) {
        self.guard(None);
    }
}

/// The watchdog's life: every signal to its default, every descriptor closed but the pipe,
/// then the pipe read to its end, keeping the last group named; that group is stopped.
///
/// # Safety
///
/// Called only in the child of a fork, with `read` its end of the socket pair.
unsafe fn watch(read: libc::c_int) -> ! {
    // SAFETY: async-signal-safe calls on the process's own state and its own descriptor.
    unsafe {
        libc::setpgid(0, 0);
        for n in 1..32 {
            if n != libc::SIGKILL && n != libc::SIGSTOP {
                libc::signal(n, libc::SIG_DFL);
            }
        }
        // Interrupts at the terminal are the replay's to handle; a hang-up of the session
        // is no reason to let a try of a dead replay run on.
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        libc::signal(libc::SIGTSTP, libc::SIG_IGN);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        if read > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, (read - 1) as u32, 0u32);
        }
        libc::syscall(libc::SYS_close_range, (read + 1) as u32, u32::MAX, 0u32);
        let mut buf = [0u8; 64];
        let (mut group, mut number): (libc::pid_t, libc::pid_t) = (0, 0);
        loop {
            let n = libc::read(read, buf.as_mut_ptr().cast(), buf.len());
            if n == 0 {
                break;
            }
            if n < 0 {
                if *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                break;
            }
            for &b in &buf[..n as usize] {
                match b {
                    b'\n' => {
                        group = number;
                        number = 0;
                    }
                    b'0'..=b'9' => {
                        number = number
                            .saturating_mul(10)
                            .saturating_add(i32::from(b - b'0'))
                    }
                    _ => {}
                }
            }
        }
        if group > 1 {
            libc::kill(-group, libc::SIGKILL);
        }
        libc::_exit(0)
    }
}
