//! What a try's input and output share: the tokens of the runner's poll, the sizes of reads
//! and pipes, and how much a pipe holds.

use std::os::fd::{AsRawFd, OwnedFd};

use nix::fcntl::{FcntlArg, fcntl};
use nix::libc;

/// The most read from a stream, or fed to a try, at once.
pub(super) const CHUNK: usize = 64 * 1024;
/// The size asked for the pipe that carries buffered output, and the most read from it at once.
pub(super) const BUFFER_PIPE: usize = 256 * 1024;

/// A descriptor the runner polls for a try, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Token {
    FeedWrite,
    StdinRead,
    /// Standard input has something to read, or has ended: time to look whether the try asks.
    StdinReady,
    Read(usize),
    Write(usize),
}

/// How many bytes a pipe (or pseudo-terminal) holds unread.
pub(super) fn unread(fd: &OwnedFd) -> usize {
    let mut queued: libc::c_int = 0;
    // SAFETY: FIONREAD writes one `int` through the pointer, into `queued`, which outlives the
    // call; where it fails, it writes nothing and `queued` stays 0.
    unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut queued) };
    queued.max(0) as usize
}

/// The largest pipe size (a power of two of pages) that is no more than `bound`, and one page
/// at least.
pub(super) fn pipe_size_within(bound: usize) -> usize {
    // SAFETY: sysconf takes a name and returns a number: nothing to keep valid. (nix's safe
    // sysconf needs a feature of nix that retry does not build.)
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .unwrap_or(4096)
        .max(1);
    let pages = (bound / page).max(1);
    page << pages.ilog2()
}

/// Sets the size of a pipe, returning the size it took.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) fn set_pipe_size(fd: &OwnedFd, size: usize) -> Option<usize> {
    let size = libc::c_int::try_from(size).ok()?;
    let taken = fcntl(fd, FcntlArg::F_SETPIPE_SZ(size)).ok()?;
    usize::try_from(taken).ok()
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(super) fn set_pipe_size(_fd: &OwnedFd, _size: usize) -> Option<usize> {
    None
}
