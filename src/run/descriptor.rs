//! Descriptors, as the plumbing of the tries uses them: what kind a descriptor is, pipes and
//! reads and writes that never wait, and `Outlet`, where `retry` writes a try's output without
//! ever blocking on a slow reader (docs/output.md#holding-standard-output).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::libc;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::stat::{SFlag, fstat};
use nix::unistd::isatty;

use crate::run::column::Stream;
use crate::run::stderr::Stderr;

/// What a descriptor is, for deciding how much can be written to it without blocking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Pipe,
    Regular,
    Other,
}

pub(super) fn kind_of(fd: BorrowedFd<'_>) -> Option<Kind> {
    let st = fstat(fd).ok()?;
    let fmt = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
    Some(if fmt == SFlag::S_IFIFO {
        Kind::Pipe
    } else if fmt == SFlag::S_IFREG {
        Kind::Regular
    } else {
        Kind::Other
    })
}

/// What a destination of output is, for writing: `/dev/null` takes every write whole and at
/// once, as a regular file does, and is written as one (a device that may make a write wait is
/// written only what poll promises).
fn destination_kind(fd: BorrowedFd<'_>) -> Kind {
    let Ok(st) = fstat(fd) else {
        return Kind::Other;
    };
    let fmt = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
    if fmt == SFlag::S_IFIFO {
        Kind::Pipe
    } else if fmt == SFlag::S_IFREG || (fmt == SFlag::S_IFCHR && is_null_device(st.st_rdev)) {
        Kind::Regular
    } else {
        Kind::Other
    }
}

/// True when `rdev` is the device of `/dev/null`: on Linux, always major 1, minor 3.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn is_null_device(rdev: libc::dev_t) -> bool {
    rdev == libc::makedev(1, 3)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn is_null_device(rdev: libc::dev_t) -> bool {
    nix::sys::stat::stat("/dev/null").is_ok_and(|null| null.st_rdev == rdev)
}

pub(super) fn is_socket(fd: BorrowedFd<'_>) -> bool {
    fstat(fd).is_ok_and(|st| {
        SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFSOCK
    })
}

pub(super) fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// A pipe whose ends are close-on-exec; the child's end is handed over as a `ChildFd`.
/// (pipe2 would do it in one call, but macOS has no pipe2; retry is single-threaded, so no other
/// thread can spawn between the two calls.)
pub(super) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe()?;
    for fd in [&r, &w] {
        fcntl(fd, FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC))?;
    }
    Ok((r, w))
}

/// Where `retry` writes a try's output: its own standard output or error. A write never blocks,
/// so that a slow reader cannot delay a timeout, the budget or a signal
/// (docs/output.md#holding-standard-output): on Linux the descriptor is opened again, as a private
/// description that can be made nonblocking without touching the one `retry` shares with other
/// processes; where that fails, only what poll promises to take (`PIPE_BUF` bytes) is written at a
/// time.
#[derive(Debug)]
pub(super) struct Outlet {
    own: Own,
    private: Option<OwnedFd>,
    kind: Kind,
    /// Where the line stands: every byte that goes out is noted there.
    stderr: Stderr,
}

/// `retry`'s own standard output or error, written through its descriptor, never through
/// std's buffer.
#[derive(Debug)]
pub(super) enum Own {
    Stdout(io::Stdout),
    Stderr(io::Stderr),
}

impl Own {
    fn stream(&self) -> Stream {
        match self {
            Own::Stdout(_) => Stream::Stdout,
            Own::Stderr(_) => Stream::Stderr,
        }
    }
}

impl AsFd for Own {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Own::Stdout(out) => out.as_fd(),
            Own::Stderr(err) => err.as_fd(),
        }
    }
}

impl Outlet {
    /// `retry`'s own stream `own`, whose bytes are noted in `stderr`.
    pub(super) fn new(own: Own, stderr: &Stderr) -> Outlet {
        let kind = destination_kind(own.as_fd());
        // A regular file or /dev/null never makes a write wait, and a second description of a
        // file would have an offset of its own: only pipes and terminals are opened again.
        let private = match kind {
            Kind::Pipe => reopen_nonblocking(own.as_fd()),
            Kind::Other if isatty(&own).unwrap_or(false) => reopen_nonblocking(own.as_fd()),
            _ => None,
        };
        Outlet {
            own,
            private,
            kind,
            stderr: stderr.clone(),
        }
    }

    /// The descriptor to poll for room.
    pub(super) fn poll_fd(&self) -> RawFd {
        match &self.private {
            Some(private) => private.as_raw_fd(),
            None => self.own.as_fd().as_raw_fd(),
        }
    }

    /// Writes what fits now, never waiting: `WouldBlock` when nothing does. What went out is
    /// noted, so that `retry`'s next line of its own starts on a line of its own.
    pub(super) fn write(&self, data: &[u8]) -> io::Result<usize> {
        let n = self.write_now(data)?;
        self.stderr.passed_on(self.own.stream(), &data[..n]);
        Ok(n)
    }

    fn write_now(&self, data: &[u8]) -> io::Result<usize> {
        if let Some(private) = &self.private {
            return write_fd(private.as_fd(), data);
        }
        let fd = self.own.as_fd();
        match self.kind {
            Kind::Regular => write_fd(fd, data),
            _ => {
                if !writable_now(fd) {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                write_fd(fd, &data[..data.len().min(libc::PIPE_BUF)])
            }
        }
    }
}

impl Outlet {
    /// Copies up to `len` bytes of `file` from `offset` with sendfile(2), never waiting; the
    /// data does not pass through `retry` (into a pipe, the pages are shared, not copied).
    /// `None` when this destination cannot take it that way: the caller writes instead.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub(super) fn send_file(
        &self,
        file: &std::fs::File,
        offset: u64,
        len: u64,
    ) -> Option<io::Result<usize>> {
        let out = match (&self.private, self.kind) {
            (Some(private), _) => private.as_fd(),
            (None, Kind::Regular) => self.own.as_fd(),
            // A blocking description shared with others: only what poll promises may be
            // written, which `write` knows how to do.
            _ => return None,
        };
        let mut at = nix::libc::off_t::try_from(offset).ok()?;
        let count = usize::try_from(len).unwrap_or(usize::MAX).min(1 << 30);
        match nix::sys::sendfile::sendfile(out, file, Some(&mut at), count) {
            Ok(n) => {
                self.note_sent(file, offset, n);
                Some(Ok(n))
            }
            // Not for this pair of files (an O_APPEND file, say): the caller writes instead.
            Err(Errno::EINVAL | Errno::ENOSYS) => None,
            Err(e) => Some(Err(e.into())),
        }
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    pub(super) fn send_file(
        &self,
        _file: &std::fs::File,
        _offset: u64,
        _len: u64,
    ) -> Option<io::Result<usize>> {
        None
    }
}

impl Outlet {
    /// Notes the last of `n` bytes just sent from `file` at `offset`.
    fn note_sent(&self, file: &std::fs::File, offset: u64, n: usize) {
        use std::os::unix::fs::FileExt;
        let mut last = [0u8];
        if n > 0 && file.read_exact_at(&mut last, offset + n as u64 - 1).is_ok() {
            self.stderr.passed_on(self.own.stream(), &last);
        }
    }
}

/// A second, nonblocking open file description of `fd` (a pipe, a terminal), if the system
/// gives one.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn reopen_nonblocking(fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .ok()?;
    Some(OwnedFd::from(file))
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn reopen_nonblocking(_fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    None
}

/// Looks, without waiting, whether `fd` is ready for `events`: what poll reported (empty when
/// nothing is ready), or `None` when poll failed. (The kernel reports only the events asked
/// for and POLLERR, POLLHUP, POLLNVAL, all of which nix knows.)
pub(super) fn ready_now(fd: BorrowedFd<'_>, events: PollFlags) -> Option<PollFlags> {
    let mut fds = [PollFd::new(fd, events)];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(0) => Some(PollFlags::empty()),
        Ok(_) => fds[0].revents(),
        Err(_) => None,
    }
}

/// True when poll says `fd` takes a write now.
fn writable_now(fd: BorrowedFd<'_>) -> bool {
    ready_now(fd, PollFlags::POLLOUT).is_some_and(|r| r.contains(PollFlags::POLLOUT))
}

/// Writes what `fd` takes of `data` now.
fn write_fd(fd: BorrowedFd<'_>, data: &[u8]) -> io::Result<usize> {
    Ok(nix::unistd::write(fd, data)?)
}

/// Writes all of `data` to `retry`'s standard error, on behalf of a hook, noting where the
/// line stands; or withholds it while a run withholds its output.
pub(super) fn pass_on_stderr(stderr: &Stderr, data: &[u8]) -> io::Result<()> {
    if stderr.withhold(data) {
        return Ok(());
    }
    write_all_fd(io::stderr().as_fd(), data)?;
    stderr.passed_on(Stream::Stderr, data);
    Ok(())
}

/// Writes all of `data` to `fd`, which blocks.
pub(super) fn write_all_fd(fd: BorrowedFd<'_>, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        match nix::unistd::write(fd, data) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

pub(super) fn read_fd(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match nix::unistd::read(fd, buf) {
            Err(Errno::EINTR) => {}
            read => return Ok(read?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_null_is_written_as_a_regular_file_and_a_pipe_as_a_pipe() {
        let null = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .expect("/dev/null");
        assert_eq!(destination_kind(null.as_fd()), Kind::Regular);
        let (r, w) = pipe().expect("a pipe");
        assert_eq!(destination_kind(w.as_fd()), Kind::Pipe);
        drop(r);
        // Another character device may make a write wait: only what poll promises is written.
        if let Ok(zero) = std::fs::OpenOptions::new().write(true).open("/dev/zero") {
            assert_eq!(destination_kind(zero.as_fd()), Kind::Other);
        }
    }
}
