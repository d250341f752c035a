//! The pseudo-terminals a try writes to when retry's own output is a terminal
//! (docs/classification.md#classification-by-output), and their window size, which follows the real
//! terminal's.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::fcntl::{FcntlArg, fcntl};
use nix::libc;

/// A pseudo-terminal for a try's output: (master, slave), with the real terminal's window size
/// and no output processing, so that the bytes retry passes on (and matches) are the bytes the
/// command wrote; the real terminal does its own processing.
pub(super) fn pseudo_terminal(real: BorrowedFd<'_>) -> io::Result<(OwnedFd, OwnedFd)> {
    let size = window_size(real);
    let pty = nix::pty::openpty(size.as_ref(), None)?;
    let mut termios = nix::sys::termios::tcgetattr(&pty.slave)?;
    termios
        .output_flags
        .remove(nix::sys::termios::OutputFlags::OPOST);
    nix::sys::termios::tcsetattr(&pty.slave, nix::sys::termios::SetArg::TCSANOW, &termios)?;
    for fd in [&pty.master, &pty.slave] {
        fcntl(fd, FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC))?;
    }
    Ok((pty.master, pty.slave))
}

/// The window size of the terminal on `fd`, if it is one.
pub(crate) fn window_size(fd: BorrowedFd<'_>) -> Option<nix::pty::Winsize> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, into `size`, which outlives
    // the call; on a descriptor that is not a terminal it fails and writes nothing.
    (unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &mut size) } == 0).then_some(size)
}

/// Keeps a try's pseudo-terminal as large as the real terminal: checked whenever the try
/// writes, since SIGWINCH goes to the terminal's foreground group (the try's), not to retry.
/// True when its size changed. The pseudo-terminal is no one's controlling terminal, so the
/// change signals nobody: the caller tells the try.
pub(super) fn follow_window_size(master: &OwnedFd, real: BorrowedFd<'_>) -> bool {
    let (Some(real), Some(ours)) = (window_size(real), window_size(master.as_fd())) else {
        return false;
    };
    if (real.ws_row, real.ws_col) == (ours.ws_row, ours.ws_col) {
        return false;
    }
    // SAFETY: TIOCSWINSZ only reads one `winsize` through the pointer, from `real`, which
    // outlives the call.
    unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &real) == 0 }
}
