//! Moving a try's output (docs/output.md#holding-standard-output,
//! docs/classification.md#classification-by-output): read from its streams as they have it, written
//! on as far as retry's own output takes it, buffered until the try ends under `--buffer-stdout`, and
//! after a success passed on by a forwarder for what the try's background processes write late.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::SystemTime;

use nix::errno::Errno;
use nix::libc;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::policy::{OutputMatch, Requests};
use crate::report::event::OutputTail;
use crate::run::column;
use crate::run::descriptor::{Outlet, Own, read_fd, ready_now, write_all_fd};
use crate::run::dispositions::Dispositions;
use crate::run::spool::Spool;
use crate::run::stderr::Stderr;
use crate::run::stdio::fds::{BUFFER_PIPE, CHUNK, unread};
use crate::run::stdio::input::Feed;
use crate::run::stdio::pty::follow_window_size;
use crate::run::stdio::stream::{Dest, OutputError, Read, Stream, real_stream};
use crate::run::stdio::tail::Tail;

/// The plumbing of one try: the feed of its input, its output streams, and what came of them.
#[derive(Debug, Default)]
pub struct TryIo {
    pub(super) feed: Option<Feed>,
    pub(super) streams: Vec<Stream>,
    /// Output that could not reach its destination: the reader has gone.
    pub broken: bool,
    /// Output that could not be written for another reason (a full disk): the run ends.
    pub failed: Option<OutputError>,
    /// The waits the try's output asked for (`--delay-from-output`), from both of its streams
    /// in the order they were read.
    pub requests: Requests,
    /// `--junit`: the last bytes of the try's output, both streams in the order read.
    pub(super) tail: Option<Tail>,
    /// `--output-on-failure` on one file: buffered standard output also goes into what the run
    /// withholds as it is read, in its place among the standard error (docs/output.md#output-on-failure).
    pub(super) withhold_stdout: bool,
    /// The try's output pipes after it ended, kept for what its background processes may still
    /// write: passed on after a success (`hand_off`), closed otherwise.
    pub(super) late: Vec<(OwnedFd, Dest)>,
}

impl TryIo {
    /// `--junit`: the last bytes of the try's output, taken once.
    pub fn take_tail(&mut self) -> Option<OutputTail> {
        self.tail.take().map(Tail::finish)
    }
}

/// Where the tries' output goes, for the whole run.
#[derive(Debug)]
pub(super) struct Outputs {
    stdout: Outlet,
    stderr: Outlet,
    /// The dispositions the forwarder of late output starts with: those of a command.
    pub(super) forwarder_dispositions: Dispositions,
    /// The buffer reads go into, kept from one read to the next.
    scratch: Vec<u8>,
    /// `retry`'s own standard error: where its line stands, and what the run withholds.
    own: Stderr,
}

/// True while some process still holds the writing end of this pipe or pseudo-terminal.
fn has_writer(fd: &OwnedFd) -> bool {
    ready_now(fd.as_fd(), PollFlags::POLLIN).is_some_and(|r| {
        r.is_empty() || (r.contains(PollFlags::POLLIN) && !r.contains(PollFlags::POLLHUP))
    })
}

/// The forwarder's loop: copies each pipe to retry's stdout or stderr until every writer is
/// done. Blocking is fine here: nothing else waits on this process.
fn forward(late: &[(OwnedFd, Dest)]) -> i32 {
    let mut open: Vec<bool> = vec![true; late.len()];
    let mut buf = vec![0u8; CHUNK];
    while open.iter().any(|o| *o) {
        let watched: Vec<usize> = (0..late.len()).filter(|&i| open[i]).collect();
        let mut fds: Vec<PollFd<'_>> = watched
            .iter()
            .map(|&i| PollFd::new(late[i].0.as_fd(), PollFlags::POLLIN))
            .collect();
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(_) => return 1,
        }
        // An event poll does not know is an event too.
        let ready: Vec<usize> = watched
            .iter()
            .zip(&fds)
            .filter(|(_, pfd)| pfd.any() != Some(false))
            .map(|(&i, _)| i)
            .collect();
        for i in ready {
            let (fd, dest) = &late[i];
            match read_fd(fd.as_fd(), &mut buf) {
                Ok(0) | Err(_) => open[i] = false,
                // What the successful try's leftovers write to standard error later, under
                // --output-on-failure: the run has ended, and a success prints nothing there.
                Ok(_) if *dest == Dest::Record => {}
                Ok(n) => {
                    if write_all_fd(real_stream(*dest).as_fd(), &buf[..n]).is_err() {
                        return 1;
                    }
                }
            }
        }
    }
    0
}

/// Adds `data` to buffered output; a temporary file that fails is worth a warning.
fn buffer(buffered: &mut Spool, data: &[u8], warning: &mut Option<String>) {
    if let Err(e) = buffered.append(data) {
        *warning = Some(format!(
            "cannot spill held standard output to a temporary file ({e}); holding it in memory"
        ));
    }
}

impl Outputs {
    /// retry's own standard output and error, as the tries' output goes to them.
    pub(super) fn new(stderr: &Stderr) -> Outputs {
        Outputs {
            stdout: Outlet::new(Own::Stdout(io::stdout()), stderr),
            stderr: Outlet::new(Own::Stderr(io::stderr()), stderr),
            forwarder_dispositions: Default::default(),
            scratch: Vec::new(),
            own: stderr.clone(),
        }
    }

    /// Reads what the stream has now. The read goes into a buffer kept between reads; for a
    /// stream passed on, that buffer becomes the pending output, and the emptied pending buffer
    /// becomes the next read's, so a byte is copied once, by the kernel.
    pub(super) fn read_stream(
        &mut self,
        io: &mut TryIo,
        i: usize,
        warning: &mut Option<String>,
    ) -> Read {
        // Spliced output never passes through retry: not while its tail is kept.
        if io.tail.is_none()
            && !io.withhold_stdout
            && let Some(read) = io.streams[i].splice_buffered()
        {
            return read;
        }
        let s = &mut io.streams[i];
        let Some(fd) = &s.fd else { return Read::End };
        let mut buf = std::mem::take(&mut self.scratch);
        buf.resize(
            match s.dest {
                Dest::Buffer | Dest::Record => BUFFER_PIPE,
                Dest::Stdout | Dest::Stderr => CHUNK,
            },
            0,
        );
        if s.tty {
            let _ = follow_window_size(fd, real_stream(s.dest).as_fd());
        }
        let n = match read_fd(fd.as_fd(), &mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.scratch = buf;
                return Read::Nothing;
            }
            // Including EIO from a pseudo-terminal whose last writer has gone: its end.
            Err(_) => 0,
        };
        if n == 0 {
            s.fd = None;
            self.scratch = buf;
            return Read::End;
        }
        buf.truncate(n);
        s.watch.feed(&buf, &mut io.requests);
        if let Some(tail) = &mut io.tail {
            tail.feed(&buf);
        }
        match s.dest {
            Dest::Buffer => {
                buffer(&mut s.buffered, &buf, warning);
                if io.withhold_stdout {
                    self.own.withhold(&buf);
                }
                self.scratch = buf;
            }
            Dest::Record => {
                self.own.withhold(&buf);
                self.scratch = buf;
            }
            Dest::Stdout | Dest::Stderr => {
                // Only an empty pending buffer is read into (see `interest`).
                self.scratch = std::mem::replace(&mut s.pending, buf);
                s.written = 0;
                self.flush_stream(io, i);
            }
        }
        Read::Data(n)
    }

    /// retry's own stream that output bound for `dest` is written to.
    pub(super) fn outlet(&self, dest: Dest) -> &Outlet {
        match dest {
            Dest::Stderr | Dest::Record => &self.stderr,
            Dest::Stdout | Dest::Buffer => &self.stdout,
        }
    }

    /// Writes what the stream has pending, as far as its destination takes it now.
    pub(super) fn flush_stream(&mut self, io: &mut TryIo, i: usize) {
        // Where buffered output meets what the try's other stream passes on as it comes (one file,
        // or a failed try's standard output played back on standard error), the buffered output
        // goes out after that has gone: that came first.
        let live_first = io.streams[i].delivering.is_some_and(|(to, _)| {
            io.streams.iter().enumerate().any(|(j, t)| {
                j != i
                    && t.delivering.is_none()
                    && t.written < t.pending.len()
                    && (self.own.shared() || t.dest == to)
            })
        });
        if live_first {
            return;
        }
        let s = &mut io.streams[i];
        let Some(dest) = s.outgoing() else { return };
        if s.written >= s.pending.len() {
            match self.send_buffered(s, dest, &mut io.failed) {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => return Self::write_failed(io, i, dest, e),
            }
        }
        let s = &mut io.streams[i];
        match self.outlet(dest).write(&s.pending[s.written..]) {
            Ok(n) => {
                s.written += n;
                if s.written >= s.pending.len() {
                    s.pending.clear();
                    s.written = 0;
                }
            }
            Err(e) => Self::write_failed(io, i, dest, e),
        }
    }

    /// Buffered output on its way out, with nothing pending: the part in memory is written from
    /// the spool, the part in the temporary file goes out with sendfile, where the destination
    /// takes it; the rest is taken a chunk at a time into `pending`. True when something is
    /// pending now, to be written.
    fn send_buffered(
        &self,
        s: &mut Stream,
        dest: Dest,
        failed: &mut Option<OutputError>,
    ) -> io::Result<bool> {
        let Some((_, pos)) = &mut s.delivering else {
            return Ok(false);
        };
        // Buffered output starts on a line of its own where a line was left open: after a line of
        // the try's standard error, on one file.
        if *pos == 0 && s.pending.len() <= s.written && !s.buffered.is_empty() {
            let start = match dest {
                Dest::Stdout => self.own.buffered_start(column::Stream::Stdout),
                _ => self.own.buffered_start(column::Stream::Stderr),
            };
            if !start.is_empty() {
                s.pending = start.as_bytes().to_vec();
                s.written = 0;
                return Ok(true);
            }
        }
        // The part in memory is written from where it is, not copied to `pending` first.
        if let Some(part) = s.buffered.memory_part(*pos) {
            let n = self
                .outlet(dest)
                .write(&part[..part.len().min(BUFFER_PIPE)])?;
            *pos += n as u64;
            if *pos >= s.buffered.len() {
                s.delivering = None;
            }
            return Ok(false);
        }
        let sent = s
            .buffered
            .file_part(*pos)
            .and_then(|(file, offset, len)| self.outlet(dest).send_file(file, offset, len));
        match sent {
            Some(Ok(n)) if n > 0 => {
                *pos += n as u64;
                if *pos >= s.buffered.len() {
                    s.delivering = None;
                }
                Ok(s.written < s.pending.len())
            }
            Some(Err(e)) => Err(e),
            // Nothing sent (the file ended early) or no sendfile here: read and write.
            Some(Ok(_)) | None => Ok(s.take_buffered_chunk(failed) && s.written < s.pending.len()),
        }
    }

    /// What a failed write of stream `i` to `dest` means: nothing yet (it would block), the
    /// reader has gone, or an output error.
    fn write_failed(io: &mut TryIo, i: usize, dest: Dest, e: io::Error) {
        let s = &mut io.streams[i];
        match e {
            e if e.kind() == io::ErrorKind::WouldBlock
                || e.kind() == io::ErrorKind::Interrupted => {}
            e if e.kind() == io::ErrorKind::BrokenPipe => {
                // The reader of retry's output has gone: stop reading the try's stream, so that
                // the try meets a closed pipe too, as it would without retry.
                s.fd = None;
                s.pending = Vec::new();
                s.written = 0;
                s.delivering = None;
                io.broken = true;
            }
            error => {
                s.pending = Vec::new();
                s.written = 0;
                s.delivering = None;
                io.failed.get_or_insert(OutputError {
                    stream: if dest == Dest::Stderr {
                        "standard error"
                    } else {
                        "standard output"
                    },
                    error,
                });
            }
        }
    }

    /// After the try: take what its streams still hold without waiting for an end that a
    /// leftover process may never give, and finish matching. What is taken is written out by
    /// `drain`.
    pub(super) fn finish(&mut self, io: &mut TryIo, warning: &mut Option<String>) -> OutputMatch {
        for i in 0..io.streams.len() {
            self.read_queued(io, i, warning);
            if let Some(fd) = io.streams[i].fd.take() {
                let dest = io.streams[i].dest;
                io.late.push((fd, dest));
            }
        }
        let mut matched = OutputMatch::default();
        for s in &mut io.streams {
            s.watch.finish(&mut matched, &mut io.requests);
        }
        // A moment asked for is measured from the try's end.
        matched.requested = io.requests.wait(SystemTime::now());
        matched
    }

    /// Whether the try has printed the match of `--until-output` yet, in what its pipes hold now
    /// too: a try that exited 0 without it is not ready, and what it left running is stopped as
    /// a failed try's leftovers are.
    pub(super) fn ready_so_far(&mut self, io: &mut TryIo, warning: &mut Option<String>) -> bool {
        for i in 0..io.streams.len() {
            self.read_queued(io, i, warning);
        }
        io.streams.iter().any(|s| s.watch.ready())
    }

    /// Reads what a stream's pipe holds now (only that: a process still writing must not keep
    /// retry here), adding it to what is pending.
    fn read_queued(&mut self, io: &mut TryIo, i: usize, warning: &mut Option<String>) {
        let s = &mut io.streams[i];
        let Some(fd) = &s.fd else { return };
        let mut left = unread(fd);
        let mut buf = std::mem::take(&mut self.scratch);
        while left > 0 {
            buf.resize(CHUNK.min(left), 0);
            let n = match read_fd(fd.as_fd(), &mut buf) {
                Ok(n) if n > 0 => n,
                _ => break,
            };
            left = left.saturating_sub(n);
            let data = &buf[..n];
            s.watch.feed(data, &mut io.requests);
            if let Some(tail) = &mut io.tail {
                tail.feed(data);
            }
            match s.dest {
                Dest::Buffer => {
                    buffer(&mut s.buffered, data, warning);
                    if io.withhold_stdout {
                        self.own.withhold(data);
                    }
                }
                Dest::Record => {
                    self.own.withhold(data);
                }
                Dest::Stdout | Dest::Stderr => {
                    if s.written >= s.pending.len() {
                        s.pending.clear();
                        s.written = 0;
                    }
                    s.pending.extend_from_slice(data);
                }
            }
        }
        self.scratch = buf;
    }

    /// After a successful try: if a process the try left running (nothing is killed after a
    /// success) still holds one of its output pipes, a small forwarder process takes the pipes
    /// over and passes what comes on until every writer is done, so that late output is not
    /// lost; `retry` itself exits at once. Buffered output goes to stdout, as the success's did.
    pub(super) fn hand_off(&mut self, io: &mut TryIo) {
        let late: Vec<(OwnedFd, Dest)> = std::mem::take(&mut io.late)
            .into_iter()
            .filter(|(fd, _)| has_writer(fd))
            .collect();
        if late.is_empty() || io.broken || io.failed.is_some() {
            return;
        }
        let ignored = self.forwarder_dispositions;
        // SAFETY: `retry` runs on one thread, so no other thread can own a lock at the
        // fork, and the child may allocate and take std's locks; it only copies bytes between
        // descriptors that it owns, or that stay open for its life (its stdout and stderr), and
        // ends with _exit.
        match unsafe { libc::fork() } {
            0 => {
                ignored.apply();
                let code = forward(&late);
                // SAFETY: _exit ends the process at once, without running the exit handlers
                // and destructors that belong to the parent; nothing is left to release.
                unsafe { libc::_exit(code) }
            }
            // The parent keeps none of the pipes; a failed fork loses what comes late, as
            // before.
            _ => drop(late),
        }
    }

    /// The real terminal changed size: the try's pseudo-terminals follow it at once. True when
    /// one of them changed size.
    pub(super) fn follow_window_sizes(&self, io: &TryIo) -> bool {
        let mut changed = false;
        for s in io.streams.iter().filter(|s| s.tty) {
            if let Some(fd) = &s.fd {
                changed |= follow_window_size(fd, real_stream(s.dest).as_fd());
            }
        }
        changed
    }

    /// True while some output of the try still waits to be written.
    pub(super) fn has_output(&self, io: &TryIo) -> bool {
        io.failed.is_none() && io.streams.iter().any(|s| s.outgoing().is_some())
    }

    /// Under `--output-on-failure`: the try's buffered standard output goes into what the run
    /// withholds, for standard error as a failed try's (copied, and the try's own spool emptied),
    /// or `as_stdout`, in its place, as the successful output of a run that fails all the same.
    pub(super) fn withhold_for_the_run(&mut self, io: &mut TryIo, as_stdout: bool) {
        for s in io.streams.iter_mut().filter(|s| s.dest == Dest::Buffer) {
            let spool = std::mem::take(&mut s.buffered);
            // Already withheld as it came, in its place.
            if io.withhold_stdout {
                continue;
            }
            match as_stdout {
                true => self.own.withhold_stdout(spool),
                false => self.own.withhold_copy(&spool),
            }
        }
    }

    /// The successful try's buffered standard output is about to be passed on: what it leaves
    /// unfinished, the run's withheld lines know.
    pub(super) fn note_success(&self, io: &TryIo) {
        let streams = io.streams.iter().filter(|s| s.dest == Dest::Buffer);
        if let Some(last) = streams.filter_map(|s| s.buffered.last_byte()).next_back() {
            self.own.passed_on_live(last);
        }
    }

    /// Sends buffered standard output on its way: to stdout for the successful try, to stderr
    /// otherwise. `drain` writes it.
    pub(super) fn deliver(&mut self, io: &mut TryIo, success: bool) {
        for s in &mut io.streams {
            if s.dest != Dest::Buffer || s.buffered.is_empty() {
                continue;
            }
            let dest = if success { Dest::Stdout } else { Dest::Stderr };
            s.delivering = Some((dest, 0));
        }
    }
}
