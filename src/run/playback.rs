//! The end of a run that withheld its output (`--output-on-failure`): what the record says is
//! passed on (`withheld::playlist`), to `retry`'s own standard output and error, never blocking
//! on a reader, so that a stopping signal still ends it.

use std::io;
use std::os::fd::RawFd;

use nix::libc;

use crate::policy::Signal;
use crate::run::column::Stream;
use crate::run::descriptor::{Outlet, Own};
use crate::run::process::reap_all;
use crate::run::signals::{Arrival, Signals};
use crate::run::stderr::Stderr;
use crate::run::withheld::{Source, playlist};

/// The most written at once on playback.
const CHUNK: usize = 256 * 1024;

/// Ends withholding, the run having ended. With `failed` (the run's outcome plays its output back:
/// a give-up, an interruption, `--flaky fail`) every piece is passed on in the order it came;
/// after a success, and after a run that ends because the reader of its output has gone (as
/// quietly as it would without `retry`), only the annotation of its end and its standard
/// output withheld in place. A stopping signal that arrives meanwhile ends the playback, and is
/// returned.
pub fn end(stderr: &Stderr, failed: bool, signals: &mut Signals) -> Option<Signal> {
    let mut record = stderr.take_record()?;
    record.seal();
    let mut playback = Playback {
        stdout: Some(Outlet::new(Own::Stdout(io::stdout()), stderr)),
        stderr: Some(Outlet::new(Own::Stderr(io::stderr()), stderr)),
        signals,
    };
    for (stream, source) in playlist(&record, failed) {
        if let Err(signal) = playback.send(stream, source) {
            return Some(signal);
        }
    }
    None
}

/// The pieces on their way out, never blocking: a write that would block waits in poll with
/// the signals, so that a stopping signal ends the playback even when nobody reads.
struct Playback<'s> {
    /// `None` once a write failed (the reader has gone): that destination takes nothing more.
    stdout: Option<Outlet>,
    stderr: Option<Outlet>,
    signals: &'s mut Signals,
}

impl Playback<'_> {
    /// Writes all of `source` to `stream`, and returns a stopping signal that arrived
    /// meanwhile.
    fn send(&mut self, stream: Stream, source: Source<'_>) -> Result<(), Signal> {
        let dest = match stream {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        };
        let Some(outlet) = dest.as_ref() else {
            return Ok(());
        };
        let mut buf = Vec::new();
        let mut pos = 0;
        while pos < source.len() {
            match write_some(outlet, source, pos, &mut buf) {
                Ok(n) => pos += n as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    wait_for_room(self.signals, outlet.poll_fd())?;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    *dest = None;
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// Writes what `outlet` takes now of `source` from `pos`: from memory where it is there, with
/// sendfile from the temporary file where the destination takes it, else read and written.
fn write_some(
    outlet: &Outlet,
    source: Source<'_>,
    pos: u64,
    buf: &mut Vec<u8>,
) -> io::Result<usize> {
    let spool = match source {
        Source::Bytes(bytes) => {
            let start = usize::try_from(pos).unwrap_or(usize::MAX).min(bytes.len());
            let part = &bytes[start..];
            return nonzero(outlet.write(&part[..part.len().min(CHUNK)]));
        }
        Source::Withheld(spool) => spool,
    };
    if let Some(part) = spool.memory_part(pos) {
        return nonzero(outlet.write(&part[..part.len().min(CHUNK)]));
    }
    let sent = spool
        .file_part(pos)
        .and_then(|(file, offset, len)| outlet.send_file(file, offset, len));
    match sent {
        Some(Ok(n)) if n > 0 => return Ok(n),
        Some(Err(e)) => return Err(e),
        Some(Ok(_)) | None => {}
    }
    buf.resize(CHUNK, 0);
    let n = spool.read_at(pos, buf)?;
    nonzero(outlet.write(&buf[..n]))
}

/// A write that took nothing of what it was given, or a read of nothing, ends the piece.
fn nonzero(written: io::Result<usize>) -> io::Result<usize> {
    match written {
        Ok(0) => Err(io::ErrorKind::WriteZero.into()),
        written => written,
    }
}

/// Waits until `fd` has room, or a stopping signal arrives (returned); a child that ended
/// meanwhile (a process a successful try left) is reaped, and SIGTSTP stops `retry`.
fn wait_for_room(signals: &mut Signals, fd: RawFd) -> Result<(), Signal> {
    let mut fds = [libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    }];
    loop {
        match signals.next_with(&mut fds, None) {
            Arrival::Stop(signal) => return Err(signal),
            Arrival::Io | Arrival::Timeout => return Ok(()),
            Arrival::Child => reap_all(),
            Arrival::Suspend => {
                let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
            }
            Arrival::Forward(_) | Arrival::Resize => {}
        }
    }
}
