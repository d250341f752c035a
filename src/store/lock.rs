//! Taking a file's lock without ever blocking on it.

use std::fs::File;
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{self, FlockArg};

/// Why [`flock_within`] did not take the lock.
#[derive(Debug)]
pub enum LockError {
    /// Another process had it for all of the time allowed.
    Busy,
    Os(Errno),
}

/// Takes a `flock` without ever blocking: tries again after short sleeps, growing from 100 µs
/// to `longest_pause`, for at most `within` in all. The lock is released by closing the file,
/// never by an unlock call: that is what also happens when the process is killed, and it
/// cannot fail (nix's `Flock` guard panics when its unlock fails, and a run must not crash).
pub fn flock_within(
    file: &File,
    how: FlockArg,
    within: Duration,
    longest_pause: Duration,
) -> Result<(), LockError> {
    use std::os::fd::AsRawFd;
    let start = Instant::now();
    let mut pause = Duration::from_micros(100);
    loop {
        #[allow(deprecated)]
        match fcntl::flock(file.as_raw_fd(), how) {
            Ok(()) => return Ok(()),
            Err(Errno::EINTR) => continue,
            Err(Errno::EWOULDBLOCK) => {}
            Err(e) => return Err(LockError::Os(e)),
        }
        let waited = start.elapsed();
        if waited >= within {
            return Err(LockError::Busy);
        }
        thread::sleep(pause.min(within - waited));
        pause = (pause * 2).min(longest_pause);
    }
}
