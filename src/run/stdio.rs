//! Standard input and output of the tries (spec 7): stdin replayed to every try, stdout held
//! until a try succeeds, and output watched for the patterns of `--retry-if-output` and
//! `--stop-if-output`. Every descriptor here is driven by the runner's one poll, so a slow
//! reader or writer never stops `retry` from seeing a timeout or a signal.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

use anyhow::{Context as _, bail};
use nix::errno::Errno;
use nix::fcntl::{FcntlArg, fcntl};
use nix::libc;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::stat::fstat;
use nix::unistd::{Whence, isatty, lseek};

use crate::config::Config;
use crate::config::StdinMode;
use crate::policy::{CaptureMatcher, LineMatcher, OutputMatch, Pattern, Requests};
use crate::report::column;
use crate::run::child::{ChildFd, ChildStdio};
use crate::run::clock::Moment;
use crate::run::demand::{self, Demand, Wanted};
use crate::run::dispositions::Dispositions;
use crate::run::process::Inherited;
use crate::run::sink::{
    Kind, Own, Sink, is_socket, kind_of, pipe, read_fd, ready_now, set_nonblocking, write_all_fd,
};
use crate::run::spool::Spool;

const CHUNK: usize = 64 * 1024;
/// The size asked for the pipe that carries held output, and the most read from it at once.
const HELD_PIPE: usize = 256 * 1024;

/// The most recorded input held in memory when no temporary file can be written. Past it,
/// recording stops: the try that is reading still gets every byte, passed through, but no
/// further try can get the same input (spec 7.1).
const INPUT_MEMORY_CAP: usize = 2 * crate::run::spool::MEMORY_LIMIT;

/// True while some process still holds the writing end of this pipe or pseudo-terminal.
fn has_writer(fd: &OwnedFd) -> bool {
    ready_now(fd.as_fd(), PollFlags::POLLIN).is_some_and(|r| {
        r.is_empty() || (r.contains(PollFlags::POLLIN) && !r.contains(PollFlags::POLLHUP))
    })
}

/// retry's own stream that a try's stream's output goes to.
fn real_stream(dest: Dest) -> Own {
    match dest {
        Dest::Stderr => Own::Stderr(io::stderr()),
        Dest::Stdout | Dest::Hold => Own::Stdout(io::stdout()),
    }
}

/// True when two descriptors refer to the same file (as after `2>&1`).
fn same_file(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    match (fstat(a), fstat(b)) {
        (Ok(x), Ok(y)) => x.st_dev == y.st_dev && x.st_ino == y.st_ino,
        _ => false,
    }
}

/// A pseudo-terminal for a try's output: (master, slave), with the real terminal's window size
/// and no output processing, so that the bytes retry passes on (and matches) are the bytes the
/// command wrote; the real terminal does its own processing.
fn pseudo_terminal(real: BorrowedFd<'_>) -> io::Result<(OwnedFd, OwnedFd)> {
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
fn follow_window_size(master: &OwnedFd, real: BorrowedFd<'_>) {
    let (Some(real), Some(ours)) = (window_size(real), window_size(master.as_fd())) else {
        return;
    };
    if (real.ws_row, real.ws_col) != (ours.ws_row, ours.ws_col) {
        // SAFETY: TIOCSWINSZ only reads one `winsize` through the pointer, from `real`, which
        // outlives the call.
        unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &real) };
    }
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

/// Standard input as recorded so far, shared by every try.
#[derive(Debug, Default)]
struct Recorder {
    spool: Spool,
    eof: bool,
    /// Recording stopped at the memory cap; what is read now only passes through.
    overflow: Option<Overflow>,
}

/// Input read after recording stopped, on its way to the current try.
#[derive(Debug, Default)]
struct Overflow {
    buf: Vec<u8>,
    /// Where `buf` starts in the whole input.
    start: u64,
}

impl Input {
    /// What the tries get as standard input in `mode` (spec 7.1), from what retry's own is.
    fn new(mode: StdinMode) -> anyhow::Result<Input> {
        let stdin_kind = kind_of(io::stdin().as_fd());
        // Looked at only when it matters: each look is a system call at start-up.
        let stdin_socket = || is_socket(io::stdin().as_fd());
        let is_tty = nix::unistd::isatty(io::stdin()).unwrap_or(false);
        let record = || Input::Replay(Recorder::default());
        // Where retry cannot see what a try asks for, a pipe is passed on as it is: read
        // ahead, a line meant for whoever reads after retry would be lost.
        let unreplayed = Input::Unreplayed { tries: 0 };
        Ok(match mode {
            StdinMode::Inherit => Input::Inherit,
            StdinMode::Null => Input::Null,
            StdinMode::Replay if is_tty => {
                bail!("--stdin replay: standard input is a terminal, which cannot be replayed")
            }
            StdinMode::Replay if stdin_kind.is_none() => Input::Inherit,
            StdinMode::Replay => record(),
            StdinMode::Auto => match stdin_kind {
                Some(Kind::Pipe) if !demand::SUPPORTED => unreplayed,
                Some(Kind::Pipe) => record(),
                Some(Kind::Other) if stdin_socket() && !demand::SUPPORTED => unreplayed,
                Some(Kind::Other) if stdin_socket() => record(),
                Some(Kind::Regular) => match lseek(io::stdin().as_fd(), 0, Whence::SeekCur) {
                    Ok(offset) => Input::Rewind(offset as u64),
                    Err(_) => Input::Inherit,
                },
                _ => Input::Inherit,
            },
        })
    }
}

impl Recorder {
    /// How much of the input has been read: recorded, then passed through.
    fn len(&self) -> u64 {
        match &self.overflow {
            Some(o) => o.start + o.buf.len() as u64,
            None => self.spool.len(),
        }
    }

    /// Reads the input from `pos` into `buf`: the recording, then what passes through.
    fn read_at(&self, pos: u64, buf: &mut [u8]) -> io::Result<usize> {
        match &self.overflow {
            Some(o) if pos >= o.start => {
                let from = usize::try_from(pos - o.start).unwrap_or(usize::MAX);
                let rest = o.buf.get(from..).unwrap_or_default();
                let n = rest.len().min(buf.len());
                buf[..n].copy_from_slice(&rest[..n]);
                Ok(n)
            }
            _ => self.spool.read_at(pos, buf),
        }
    }

    /// Forgets what passed through up to `pos`: it was fed and is not kept.
    fn passed(&mut self, pos: u64) {
        if let Some(o) = &mut self.overflow {
            let fed = usize::try_from(pos.saturating_sub(o.start)).unwrap_or(usize::MAX);
            let fed = fed.min(o.buf.len());
            o.buf.drain(..fed);
            o.start += fed as u64;
        }
    }
}

#[derive(Debug)]
enum Input {
    Inherit,
    /// A pipe passed on as it is, since this system does not show what a try waits for: worth
    /// a warning when a second try runs. Counts the tries started.
    Unreplayed {
        tries: u64,
    },
    Null,
    /// A regular file, read again from this offset by every try.
    Rewind(u64),
    Replay(Recorder),
}

/// Where a try's output stream goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dest {
    Stdout,
    Stderr,
    /// Held until the try ends (`--buffer-stdout`).
    Hold,
}

/// Feeding the recorded input to one try.
#[derive(Debug)]
struct Feed {
    fd: OwnedFd,
    pos: u64,
    pace: Pace,
}

/// How much of `retry`'s standard input a try may have (spec 7.1). What is recorded already is
/// `retry`'s own, and always given at once; this is about reading more.
#[derive(Debug)]
enum Pace {
    /// As much as the try's pipe takes (`--stdin replay`, or a try that cannot be looked at).
    Eager,
    /// Nothing until the try is seen waiting for input; then what that one read asked for.
    OnRequest(Asking),
    /// The try reads in blocks: two reads in a row asked for `BLOCK_READ` bytes or more. Its
    /// pipe holds at most `ahead` unread bytes, the size of the read that started streaming
    /// (at most `CHUNK`), and the pipe is no larger than that (or one page, if that is more), so
    /// that a full pipe means enough is ready and poll wakes retry when the try reads.
    Streaming { ahead: usize },
}

/// A read that asks for fewer bytes than this is taken to want exactly that many: a shell's
/// `read` asks for one byte at a time, precisely so as not to take a byte past the line, and
/// `head -c 100` or `dd bs=512 count=1` ask for what they mean to use. Such a read is given
/// exactly what it asks for, however many it makes. A read of this size or more is a buffered
/// reader's: the smallest stdio buffer in common use is musl's 1 KiB (its `readv` asks for
/// 1 KiB more than the caller wants), glibc's is a page on a pipe, `cat` asks for 128 KiB.
const BLOCK_READ: usize = 1024;

/// Waiting for a try to ask for input, looking at its processes now and then.
#[derive(Debug)]
struct Asking {
    demand: Demand,
    /// The last request seen was a block read (`BLOCK_READ` bytes or more, or a wait in
    /// poll, select or epoll): a second one in a row starts streaming.
    block_read: bool,
    /// One read of standard input, of at most this many bytes, for the request just seen.
    grant: Option<usize>,
    /// Standard input had something to read, or its end, at the last look: looking is of use
    /// only then, and otherwise retry waits for it to have something.
    stdin_ready: bool,
    /// When to look next, and the wait after that look.
    next: Moment,
    interval: Duration,
    /// When the try was last fed (or started).
    fed: Moment,
    /// What the last look cost.
    cost: Duration,
}

/// The first look after a feed comes this soon, and the waits between looks double from it.
const FIRST_LOOK: Duration = Duration::from_micros(20);
/// Looks at a try that has been idle a while come every 1/64 of its idle time, within these.
const STEADY_LOOKS: (Duration, Duration) = (Duration::from_millis(1), Duration::from_millis(16));
/// And never more often than this many times their cost.
const LOOK_COST_FACTOR: u32 = 100;

impl Asking {
    fn new(demand: Demand) -> Asking {
        let now = Moment::now();
        Asking {
            demand,
            block_read: false,
            grant: None,
            stdin_ready: true,
            next: now,
            interval: FIRST_LOOK,
            fed: now,
            cost: Duration::ZERO,
        }
    }

    /// The try was just fed, or may have something to ask for: look again soon.
    fn look_soon(&mut self, now: Moment) {
        self.interval = FIRST_LOOK;
        self.next = now.checked_add(FIRST_LOOK).unwrap_or(now);
    }

    /// Nothing to do this time: the next look comes after twice the wait, up to the steady
    /// interval, which grows with the time the try has been idle.
    fn look_later(&mut self, now: Moment) {
        let idle = now.saturating_duration_since(self.fed);
        let steady = (idle / 64)
            .clamp(STEADY_LOOKS.0, STEADY_LOOKS.1)
            .max(self.cost.saturating_mul(LOOK_COST_FACTOR));
        self.interval = self.interval.saturating_mul(2).min(steady);
        self.next = now.checked_add(self.interval).unwrap_or(now);
    }
}

/// What retry's standard input has now, seen without reading it.
enum StdinState {
    Empty,
    Ready,
    Ended,
}

fn stdin_state() -> StdinState {
    match ready_now(io::stdin().as_fd(), PollFlags::POLLIN) {
        None => StdinState::Empty,
        Some(r) if r.is_empty() => StdinState::Empty,
        Some(r) if r.contains(PollFlags::POLLIN) => StdinState::Ready,
        // Hung up and empty: the end, which takes nothing from anyone.
        Some(_) => StdinState::Ended,
    }
}

/// How many bytes a pipe (or pseudo-terminal) holds unread.
fn unread(fd: &OwnedFd) -> usize {
    let mut queued: libc::c_int = 0;
    // SAFETY: FIONREAD writes one `int` through the pointer, into `queued`, which outlives the
    // call; where it fails, it writes nothing and `queued` stays 0.
    unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut queued) };
    queued.max(0) as usize
}

/// The largest pipe size (a power of two of pages) that is no more than `bound`, and one page
/// at least.
fn pipe_size_within(bound: usize) -> usize {
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
fn set_pipe_size(fd: &OwnedFd, size: usize) -> Option<usize> {
    let size = libc::c_int::try_from(size).ok()?;
    let taken = fcntl(fd, FcntlArg::F_SETPIPE_SZ(size)).ok()?;
    usize::try_from(taken).ok()
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn set_pipe_size(_fd: &OwnedFd, _size: usize) -> Option<usize> {
    None
}

impl Feed {
    /// How much may be read from standard input for this try now.
    fn allowance(&self) -> usize {
        match &self.pace {
            Pace::Eager => CHUNK,
            Pace::OnRequest(asking) => asking.grant.unwrap_or(0),
            Pace::Streaming { ahead } => ahead.saturating_sub(unread(&self.fd)),
        }
    }

    /// The try, fed on request, was seen waiting for input, for `count` bytes when its system
    /// call says: it is granted one read of that much, or, after a second block read in a row,
    /// it is streamed to.
    fn requested(&mut self, count: Option<usize>) {
        let Pace::OnRequest(asking) = &mut self.pace else {
            return;
        };
        // A wait in poll, select or epoll does not say how much it will read: it is taken as a
        // block read of `CHUNK`.
        let count = count.unwrap_or(CHUNK).clamp(1, CHUNK);
        let block = count >= BLOCK_READ;
        if block && asking.block_read {
            self.start_streaming(count);
        } else {
            asking.block_read = block;
            asking.grant = Some(count);
            asking.look_soon(Moment::now());
        }
    }

    /// The try asked in blocks twice in a row, the last time for `block` bytes: it keeps
    /// reading, and is kept at most that many bytes ahead. The pipe is empty now, so it can
    /// shrink to the bound; where it cannot, the try is fed as fast as it takes input.
    fn start_streaming(&mut self, block: usize) {
        let ahead = block.clamp(1, CHUNK);
        let size = pipe_size_within(ahead);
        self.pace = match set_pipe_size(&self.fd, size) {
            Some(capacity) if capacity <= size => Pace::Streaming { ahead },
            _ => Pace::Eager,
        };
    }
}

/// One of a try's output streams, read by retry.
#[derive(Debug)]
struct Stream {
    fd: Option<OwnedFd>,
    dest: Dest,
    pending: Vec<u8>,
    written: usize,
    watch: Matchers,
    held: Spool,
    /// Held output on its way out after the try: where to (stdout or stderr), and how much of
    /// the spool has been taken into `pending`.
    delivering: Option<(Dest, u64)>,
    /// `fd` is the master of a pseudo-terminal whose size follows the real terminal's.
    tty: bool,
}

/// The patterns of the run that watch a try's output (spec 7.4), given once.
#[derive(Debug, Default)]
struct Patterns {
    retry_if: Option<Pattern>,
    stop_if: Option<Pattern>,
    until: Option<Pattern>,
    delay_from: Option<Pattern>,
}

impl Patterns {
    fn any(&self) -> bool {
        self.retry_if.is_some()
            || self.stop_if.is_some()
            || self.until.is_some()
            || self.delay_from.is_some()
    }

    /// Matchers of these patterns for one stream of one try.
    fn matchers(&self) -> Matchers {
        Matchers {
            retry_if: self.retry_if.clone().map(LineMatcher::new),
            stop_if: self.stop_if.clone().map(LineMatcher::new),
            until: self.until.clone().map(LineMatcher::new),
            delay_from: self.delay_from.clone().map(CaptureMatcher::new),
        }
    }
}

/// What watches one stream of a try.
#[derive(Debug)]
struct Matchers {
    retry_if: Option<LineMatcher>,
    stop_if: Option<LineMatcher>,
    /// `--until-output`: whether the try said it is ready.
    until: Option<LineMatcher>,
    /// `--delay-from-output`: reads the waits the output asks for.
    delay_from: Option<CaptureMatcher>,
}

impl Matchers {
    fn is_empty(&self) -> bool {
        self.retry_if.is_none()
            && self.stop_if.is_none()
            && self.until.is_none()
            && self.delay_from.is_none()
    }

    /// Matches `data`, the next bytes of the stream; the waits it asks for go to `requests`.
    fn feed(&mut self, data: &[u8], requests: &mut Requests) {
        if let Some(m) = &mut self.retry_if {
            m.feed(data);
        }
        if let Some(m) = &mut self.stop_if {
            m.feed(data);
        }
        if let Some(m) = &mut self.until {
            m.feed(data);
        }
        if let Some(m) = &mut self.delay_from {
            m.feed(data, |group| requests.saw(group));
        }
    }

    /// The stream has ended: its last line is matched, and what matched is added to `matched`.
    fn finish(&mut self, matched: &mut OutputMatch, requests: &mut Requests) {
        if let Some(m) = &mut self.retry_if {
            m.finish();
            matched.retry_if |= m.matched();
        }
        if let Some(m) = &mut self.stop_if {
            m.finish();
            matched.stop_if |= m.matched();
        }
        if let Some(m) = &mut self.until {
            m.finish();
            matched.until |= m.matched();
        }
        if let Some(m) = &mut self.delay_from {
            m.finish(|group| requests.saw(group));
        }
    }

    /// `--until-output` has matched.
    fn ready(&self) -> bool {
        self.until.as_ref().is_some_and(LineMatcher::matched)
    }
}

impl Stream {
    /// Takes the next chunk of held output into `pending`; false when there is none (the end,
    /// or a read error, recorded in `failed`).
    fn take_held_chunk(&mut self, failed: &mut Option<OutputError>) -> bool {
        let Some((_, pos)) = &mut self.delivering else {
            return false;
        };
        self.pending.resize(CHUNK, 0);
        match self.held.read_at(*pos, &mut self.pending) {
            Ok(n) => {
                self.pending.truncate(n);
                *pos += n as u64;
            }
            Err(error) => {
                self.pending.clear();
                self.delivering = None;
                failed.get_or_insert(OutputError {
                    stream: "held standard output",
                    error,
                });
                return false;
            }
        }
        self.written = 0;
        if self.pending.is_empty() {
            self.delivering = None;
            return false;
        }
        true
    }

    /// Held output that nothing matches goes from the pipe to the temporary file without
    /// passing through `retry`, once the part held in memory is full: what that read gave, or
    /// `None` when this stream's output is not taken that way now.
    fn splice_held(&mut self) -> Option<Read> {
        if self.dest != Dest::Hold || !self.watch.is_empty() {
            return None;
        }
        let fd = self.fd.as_ref()?;
        match self.held.splice_from(fd.as_fd(), HELD_PIPE)? {
            Ok(0) => {
                self.fd = None;
                Some(Read::End)
            }
            Ok(n) => Some(Read::Data(n)),
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.kind() == io::ErrorKind::Interrupted =>
            {
                Some(Read::Nothing)
            }
            Err(_) => None,
        }
    }

    /// Where this stream's output goes now, if some waits to be written.
    fn outgoing(&self) -> Option<Dest> {
        if let Some((dest, _)) = self.delivering {
            return Some(dest);
        }
        (self.dest != Dest::Hold && self.written < self.pending.len()).then_some(self.dest)
    }
}

/// What one read of a try's stream gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    Data(usize),
    Nothing,
    End,
}

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

/// The plumbing of the whole run.
#[derive(Debug)]
pub struct RunIo {
    input: Input,
    patterns: Patterns,
    /// Which of a try's streams pass through retry.
    layout: Layout,
    stdout: Sink,
    stderr: Sink,
    /// Standard output, or error, is a terminal.
    stdout_tty: bool,
    stderr_tty: bool,
    /// A problem worth a line in the log, not yet logged.
    warning: Option<String>,
    /// The dispositions the forwarder of late output starts with: those of a command.
    forwarder_dispositions: Dispositions,
    /// The buffer reads go into, kept from one read to the next.
    scratch: Vec<u8>,
    /// Input is read only when a try asks for it (`--stdin auto` on a pipe), not as fast as the
    /// try's pipe takes it (`--stdin replay`).
    on_request: bool,
    /// The warning that a try could not be looked at has been given.
    warned_unseen: bool,
}

/// Which of a try's output streams pass through retry, chosen once for the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// Nothing holds or watches the output: the try writes to retry's own stdout and stderr.
    Inherit,
    /// `--buffer-stdout`: standard output is held, and standard error read too when a pattern
    /// watches it.
    Hold { watch_stderr: bool },
    /// Watched, and standard output and error go to the same place (`2>&1`, one terminal):
    /// one stream for both keeps their order exactly as the command wrote it.
    Shared,
    /// Watched, each stream on its own.
    Separate,
    /// Relayed, not watched, and standard output goes elsewhere: only standard error passes
    /// through `retry`, which writes its own lines there.
    Stderr,
}

impl Layout {
    /// `same_place` (stdout and stderr are the same file) is looked at only when it matters:
    /// each look is a system call at start-up.
    fn new(
        buffer_stdout: bool,
        watching: bool,
        relay: bool,
        same_place: impl FnOnce() -> bool,
    ) -> Layout {
        match (buffer_stdout, watching, relay) {
            (true, watching, relay) => Layout::Hold {
                watch_stderr: watching || relay,
            },
            (false, false, false) => Layout::Inherit,
            (false, _, _) if same_place() => Layout::Shared,
            (false, true, _) => Layout::Separate,
            (false, false, true) => Layout::Stderr,
        }
    }
}

/// The plumbing of one try.
#[derive(Debug, Default)]
pub struct TryIo {
    feed: Option<Feed>,
    streams: Vec<Stream>,
    /// Output that could not reach its destination: the reader has gone.
    pub broken: bool,
    /// Output that could not be written for another reason (a full disk): the run ends.
    pub failed: Option<OutputError>,
    /// The waits the try's output asked for (`--delay-from-output`), from both of its streams
    /// in the order they were read.
    pub requests: Requests,
    /// The try's output pipes after it ended, kept for what its background processes may still
    /// write: passed on after a success (`hand_off`), closed otherwise.
    late: Vec<(OwnedFd, Dest)>,
}

/// Writing a try's output failed for a reason other than a closed pipe.
#[derive(Debug)]
pub struct OutputError {
    /// `standard output` or `standard error`.
    pub stream: &'static str,
    pub error: io::Error,
}

impl std::fmt::Display for OutputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot write {}: {}", self.stream, self.error)
    }
}

impl RunIo {
    /// `relay`: pass the try's standard error (and its standard output, when the two are one
    /// file) through `retry` even when nothing watches them, so that `retry` sees a line the
    /// try left unfinished and starts its own lines on a line of their own (under CI).
    pub fn new(config: &Config, relay: bool) -> anyhow::Result<RunIo> {
        let input = Input::new(config.stdin)?;
        let on_request = config.stdin == StdinMode::Auto && matches!(input, Input::Replay(_));
        let classifier = &config.policy.classifier;
        let patterns = Patterns {
            retry_if: classifier.retry_if_output.clone(),
            stop_if: classifier.stop_if_output.clone(),
            until: classifier.until_output.clone(),
            delay_from: config.delay_from_output.clone(),
        };
        let mut shared = None;
        let mut same_place =
            || *shared.get_or_insert_with(|| same_file(io::stdout().as_fd(), io::stderr().as_fd()));
        let layout = Layout::new(config.buffer_stdout, patterns.any(), relay, &mut same_place);
        if layout != Layout::Inherit {
            column::set_shared(same_place());
        }
        Ok(RunIo {
            input,
            patterns,
            layout,
            stdout: Sink::new(Own::Stdout(io::stdout())),
            stderr: Sink::new(Own::Stderr(io::stderr())),
            stdout_tty: isatty(io::stdout()).unwrap_or(false),
            stderr_tty: isatty(io::stderr()).unwrap_or(false),
            warning: None,
            forwarder_dispositions: Default::default(),
            scratch: Vec::new(),
            on_request,
            warned_unseen: false,
        })
    }

    /// The signal dispositions a forwarder of late output starts with (those of a command:
    /// retry's own handlers must not run in it).
    pub fn set_dispositions(&mut self, dispositions: Dispositions) {
        self.forwarder_dispositions = dispositions;
    }

    /// False once standard input could not be recorded whole: no further try may run.
    pub fn can_replay(&self) -> bool {
        !matches!(&self.input, Input::Replay(rec) if rec.overflow.is_some())
    }

    /// A warning for the log, once.
    pub fn take_warning(&mut self) -> Option<String> {
        self.warning.take()
    }

    /// Sets up one try: the child's standard streams, and retry's ends of them.
    pub fn start_try(&mut self) -> anyhow::Result<(ChildStdio, TryIo)> {
        let mut io = TryIo::default();
        let stdin = self.child_stdin(&mut io)?;
        let (stdout, stderr) = self.child_output(&mut io)?;
        Ok((
            ChildStdio {
                stdin,
                stdout,
                stderr,
            },
            io,
        ))
    }

    /// The try's standard input, and retry's end of it when retry feeds it.
    fn child_stdin(&mut self, io: &mut TryIo) -> anyhow::Result<ChildFd> {
        Ok(match &mut self.input {
            Input::Inherit => ChildFd::Inherit,
            Input::Unreplayed { tries } => {
                *tries += 1;
                if *tries == 2 {
                    self.warning = Some(
                        "standard input is a pipe, which retry cannot replay on this system: this try reads what the earlier ones left of it (--stdin replay records it for every try)"
                            .to_string(),
                    );
                }
                ChildFd::Inherit
            }
            Input::Null => ChildFd::Null,
            Input::Rewind(offset) => {
                let _ = lseek(io::stdin().as_fd(), *offset as libc::off_t, Whence::SeekSet);
                ChildFd::Inherit
            }
            Input::Replay(_) => {
                let (r, w) = pipe().context("cannot create a pipe for standard input")?;
                set_nonblocking(&w)?;
                io.feed = Some(Feed {
                    fd: w,
                    pos: 0,
                    pace: self.first_pace(&r),
                });
                ChildFd::Fd(r)
            }
        })
    }

    /// How a try whose input pipe reads from `r` is fed at first.
    fn first_pace(&self, r: &OwnedFd) -> Pace {
        // The pipe is known in /proc by its inode and device. (Their types differ between
        // systems, hence the casts.)
        #[allow(clippy::unnecessary_cast)]
        match fstat(r) {
            Ok(st) if self.on_request => {
                Pace::OnRequest(Asking::new(Demand::new(st.st_ino as u64, st.st_dev as u64)))
            }
            _ => Pace::Eager,
        }
    }

    /// The try's standard output and error, as `layout` has them.
    fn child_output(&self, io: &mut TryIo) -> anyhow::Result<(ChildFd, ChildFd)> {
        Ok(match self.layout {
            Layout::Inherit => (ChildFd::Inherit, ChildFd::Inherit),
            Layout::Hold { watch_stderr } => {
                let stdout = self.open_stream(io, Dest::Hold, self.stdout_tty)?;
                let stderr = if watch_stderr {
                    ChildFd::Fd(self.open_stream(io, Dest::Stderr, self.stderr_tty)?)
                } else {
                    ChildFd::Inherit
                };
                (ChildFd::Fd(stdout), stderr)
            }
            Layout::Shared => {
                let both = self.open_stream(io, Dest::Stdout, self.stdout_tty)?;
                let again = both.try_clone().context("cannot share the output pipe")?;
                (ChildFd::Fd(both), ChildFd::Fd(again))
            }
            Layout::Stderr => (
                ChildFd::Inherit,
                ChildFd::Fd(self.open_stream(io, Dest::Stderr, self.stderr_tty)?),
            ),
            Layout::Separate => (
                ChildFd::Fd(self.open_stream(io, Dest::Stdout, self.stdout_tty)?),
                ChildFd::Fd(self.open_stream(io, Dest::Stderr, self.stderr_tty)?),
            ),
        })
    }

    /// One stream passed through retry, to `dest`: a pipe, or a pseudo-terminal when `tty`
    /// (its destination is a terminal), so that the try still sees one (spec 7.3). Returns the
    /// try's end.
    fn open_stream(&self, io: &mut TryIo, dest: Dest, tty: bool) -> anyhow::Result<OwnedFd> {
        let (r, w) = if tty {
            pseudo_terminal(real_stream(dest).as_fd())
                .context("cannot create a pseudo-terminal for output")?
        } else {
            let (r, w) = pipe().context("cannot create a pipe for output")?;
            if dest == Dest::Hold {
                // Held output is taken as fast as it comes: a larger pipe means fewer
                // wake-ups per byte (1 GiB held: 1.2 times as fast, BENCHMARKS.md).
                set_pipe_size(&r, HELD_PIPE);
            }
            (r, w)
        };
        set_nonblocking(&r)?;
        io.streams.push(Stream {
            fd: Some(r),
            dest,
            pending: Vec::new(),
            written: 0,
            watch: self.patterns.matchers(),
            held: Spool::new(),
            delivering: None,
            tty,
        });
        Ok(w)
    }

    /// The descriptors to poll for this try, with what each is for.
    pub fn interest(&self, io: &mut TryIo, fds: &mut Vec<libc::pollfd>, tokens: &mut Vec<Token>) {
        let mut add = |fd: RawFd, events: libc::c_short, token: Token| {
            fds.push(libc::pollfd {
                fd,
                events,
                revents: 0,
            });
            tokens.push(token);
        };
        if let (Some(feed), Input::Replay(rec)) = (&mut io.feed, &self.input) {
            if feed.pos < rec.len() {
                add(feed.fd.as_raw_fd(), libc::POLLOUT, Token::FeedWrite);
            } else if !rec.eof {
                if feed.allowance() > 0 {
                    add(libc::STDIN_FILENO, libc::POLLIN, Token::StdinRead);
                } else {
                    match &feed.pace {
                        // Enough is ready: wake when the try has read some.
                        Pace::Streaming { .. } => {
                            add(feed.fd.as_raw_fd(), libc::POLLOUT, Token::FeedWrite)
                        }
                        Pace::OnRequest(asking) if !asking.stdin_ready => {
                            add(libc::STDIN_FILENO, libc::POLLIN, Token::StdinReady)
                        }
                        // Waiting for the next look (`next_scan`).
                        _ => {}
                    }
                }
            }
        }
        if let (Some(_), Input::Replay(rec)) = (&io.feed, &self.input) {
            if io.feed.as_ref().is_some_and(|f| f.pos >= rec.len()) && rec.eof {
                // Everything recorded has been fed and the source is done: end of input.
                io.feed = None;
            }
        }
        if io.failed.is_some() {
            return;
        }
        for (i, s) in io.streams.iter().enumerate() {
            if let Some(dest) = s.outgoing() {
                add(self.sink(dest).poll_fd(), libc::POLLOUT, Token::Write(i));
            } else if let Some(fd) = &s.fd {
                add(fd.as_raw_fd(), libc::POLLIN, Token::Read(i));
            }
        }
    }

    /// Acts on the descriptors that poll reported ready.
    pub fn on_ready(&mut self, io: &mut TryIo, fds: &[libc::pollfd], tokens: &[Token]) {
        for (pfd, token) in fds.iter().zip(tokens) {
            if pfd.revents == 0 {
                continue;
            }
            match *token {
                Token::FeedWrite => self.feed(io, pfd.revents),
                Token::StdinRead => {
                    let Some(feed) = &mut io.feed else { continue };
                    let allowed = feed.allowance();
                    if let Pace::OnRequest(asking) = &mut feed.pace {
                        // One read per request.
                        asking.grant = None;
                    }
                    if allowed > 0 {
                        self.record(allowed);
                        // Passed on at once rather than after another poll (the write never
                        // waits): a reader fed a byte at a time pays for each round trip.
                        self.feed(io, libc::POLLOUT);
                    }
                }
                Token::StdinReady => {
                    if let Some(Feed {
                        pace: Pace::OnRequest(asking),
                        ..
                    }) = &mut io.feed
                    {
                        asking.stdin_ready = true;
                        asking.interval = FIRST_LOOK;
                        asking.next = Moment::now();
                    }
                }
                Token::Read(i) => {
                    self.read_stream(io, i);
                }

                Token::Write(i) => self.flush_stream(io, i),
            }
        }
    }

    fn feed(&mut self, io: &mut TryIo, revents: libc::c_short) {
        let (Some(feed), Input::Replay(rec)) = (&mut io.feed, &mut self.input) else {
            return;
        };
        if revents & (libc::POLLERR | libc::POLLHUP) != 0 && revents & libc::POLLOUT == 0 {
            // The try closed its standard input: it wants no more.
            io.feed = None;
            return;
        }
        let buf = &mut self.scratch;
        buf.resize(CHUNK, 0);
        let n = match rec.read_at(feed.pos, buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(_) => {
                io.feed = None;
                return;
            }
        };
        match nix::unistd::write(&feed.fd, &buf[..n]) {
            Ok(0) => {}
            Ok(w) => {
                feed.pos += w as u64;
                rec.passed(feed.pos);
                if let Pace::OnRequest(asking) = &mut feed.pace {
                    asking.fed = Moment::now();
                    asking.look_soon(asking.fed);
                }
            }
            Err(Errno::EAGAIN | Errno::EINTR) => {}
            Err(_) => io.feed = None,
        }
    }

    /// Reads at most `max` bytes of standard input into the recording.
    fn record(&mut self, max: usize) {
        let Input::Replay(rec) = &mut self.input else {
            return;
        };
        let buf = &mut self.scratch;
        // The buffer keeps its size (filling it again would cost more than the read).
        buf.resize(CHUNK, 0);
        match read_fd(io::stdin().as_fd(), &mut buf[..max.clamp(1, CHUNK)]) {
            Ok(0) => rec.eof = true,
            Ok(n) => {
                if let Some(o) = &mut rec.overflow {
                    o.buf.extend_from_slice(&buf[..n]);
                    return;
                }
                if let Err(e) = rec.spool.append(&buf[..n]) {
                    self.warning = Some(format!(
                        "cannot spill recorded standard input to a temporary file ({e}); holding it in memory"
                    ));
                }
                if rec.spool.file_failed() && rec.spool.in_memory() >= INPUT_MEMORY_CAP {
                    rec.overflow = Some(Overflow {
                        buf: Vec::new(),
                        start: rec.spool.len(),
                    });
                    self.warning = Some(format!(
                        "standard input is past the {} MiB retry holds in memory, and no temporary file can be written: this try reads the rest as it comes, but no further try can get the same input",
                        INPUT_MEMORY_CAP >> 20
                    ));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => rec.eof = true,
        }
    }

    /// When to look next whether the try waits for input: only while it is fed on request,
    /// has been given everything recorded, and standard input has something for it.
    pub fn next_scan(&self, io: &TryIo) -> Option<Moment> {
        let (Some(feed), Input::Replay(rec)) = (&io.feed, &self.input) else {
            return None;
        };
        let Pace::OnRequest(asking) = &feed.pace else {
            return None;
        };
        let waiting = feed.pos >= rec.len() && !rec.eof;
        (waiting && asking.grant.is_none() && asking.stdin_ready).then_some(asking.next)
    }

    /// Looks whether some process of the try waits for input on its pipe, when it is time
    /// (`next_scan`): a request is granted one read of what it asked for (at most `CHUNK`, and
    /// `CHUNK` when poll, select or epoll does not say), so that a reader of a few bytes at a
    /// time gets exactly those; a second block read in a row starts streaming. `inherited` are
    /// the processes below `retry` that are not the try's.
    pub fn scan(&mut self, io: &mut TryIo, inherited: &Inherited) {
        let Some(due) = self.next_scan(io) else {
            return;
        };
        let now = Moment::now();
        let (Some(feed), Input::Replay(rec)) = (&mut io.feed, &mut self.input) else {
            return;
        };
        let Pace::OnRequest(asking) = &mut feed.pace else {
            return;
        };
        if now < due {
            return;
        }
        match stdin_state() {
            StdinState::Empty => {
                asking.stdin_ready = false;
                return;
            }
            // Nothing more will come: the try gets the end of its input now.
            StdinState::Ended => {
                rec.eof = true;
                return;
            }
            StdinState::Ready => {}
        }
        if unread(&feed.fd) > 0 {
            // The try has not read all it was given yet: it cannot be waiting.
            asking.look_later(now);
            return;
        }
        let wanted = asking.demand.wanted(inherited);
        asking.cost = now.elapsed();
        match wanted {
            Wanted::No => asking.look_later(Moment::now()),
            Wanted::Yes { count } => feed.requested(count),
            Wanted::Unknowable => {
                feed.pace = Pace::Eager;
                if !self.warned_unseen {
                    self.warned_unseen = true;
                    self.warning = Some(
                        "a process of the try cannot be looked at (a setuid program, or another user's), so retry cannot tell when it reads: it is given standard input as fast as it takes it, and what it leaves unread is lost to whoever reads after retry"
                            .to_string(),
                    );
                }
            }
        }
    }

    /// Reads what the stream has now. The read goes into a buffer kept between reads; for a
    /// stream passed on, that buffer becomes the pending output, and the emptied pending buffer
    /// becomes the next read's, so a byte is copied once, by the kernel.
    fn read_stream(&mut self, io: &mut TryIo, i: usize) -> Read {
        if let Some(read) = io.streams[i].splice_held() {
            return read;
        }
        let s = &mut io.streams[i];
        let Some(fd) = &s.fd else { return Read::End };
        let mut buf = std::mem::take(&mut self.scratch);
        buf.resize(
            if s.dest == Dest::Hold {
                HELD_PIPE
            } else {
                CHUNK
            },
            0,
        );
        if s.tty {
            follow_window_size(fd, real_stream(s.dest).as_fd());
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
        match s.dest {
            Dest::Hold => {
                self.hold(&mut s.held, &buf);
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

    /// Adds `data` to held output; a temporary file that fails is worth a warning.
    fn hold(&mut self, held: &mut Spool, data: &[u8]) {
        if let Err(e) = held.append(data) {
            self.warning = Some(format!(
                "cannot spill held standard output to a temporary file ({e}); holding it in memory"
            ));
        }
    }

    fn sink(&self, dest: Dest) -> &Sink {
        match dest {
            Dest::Stderr => &self.stderr,
            Dest::Stdout | Dest::Hold => &self.stdout,
        }
    }

    /// Writes what the stream has pending, as far as its destination takes it now.
    fn flush_stream(&mut self, io: &mut TryIo, i: usize) {
        let s = &mut io.streams[i];
        let Some(dest) = s.outgoing() else { return };
        if s.written >= s.pending.len() {
            match self.send_held(s, dest, &mut io.failed) {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => return Self::write_failed(io, i, dest, e),
            }
        }
        let s = &mut io.streams[i];
        match self.sink(dest).write(&s.pending[s.written..]) {
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

    /// Held output on its way out, with nothing pending: the part in memory is written from
    /// the spool, the part in the temporary file goes out with sendfile, where the destination
    /// takes it; the rest is taken a chunk at a time into `pending`. True when something is
    /// pending now, to be written.
    fn send_held(
        &self,
        s: &mut Stream,
        dest: Dest,
        failed: &mut Option<OutputError>,
    ) -> io::Result<bool> {
        let Some((_, pos)) = &mut s.delivering else {
            return Ok(false);
        };
        // The part held in memory is written from where it is, not copied to `pending` first.
        if let Some(part) = s.held.memory_part(*pos) {
            let n = self.sink(dest).write(&part[..part.len().min(HELD_PIPE)])?;
            *pos += n as u64;
            if *pos >= s.held.len() {
                s.delivering = None;
            }
            return Ok(false);
        }
        let sent = s
            .held
            .file_part(*pos)
            .and_then(|(file, offset, len)| self.sink(dest).send_file(file, offset, len));
        match sent {
            Some(Ok(n)) if n > 0 => {
                *pos += n as u64;
                if *pos >= s.held.len() {
                    s.delivering = None;
                }
                Ok(s.written < s.pending.len())
            }
            Some(Err(e)) => Err(e),
            // Nothing sent (the file ended early) or no sendfile here: read and write.
            Some(Ok(_)) | None => Ok(s.take_held_chunk(failed) && s.written < s.pending.len()),
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
    /// leftover process may never give, finish matching, and end its input. What is taken is
    /// written out by `drain`.
    pub fn finish_try(&mut self, io: &mut TryIo) -> OutputMatch {
        io.feed = None;
        for i in 0..io.streams.len() {
            self.read_queued(io, i);
            if let Some(fd) = io.streams[i].fd.take() {
                let dest = io.streams[i].dest;
                io.late.push((fd, dest));
            }
        }
        let mut matched = OutputMatch::default();
        for s in &mut io.streams {
            s.watch.finish(&mut matched, &mut io.requests);
        }
        matched.requested = io.requests.wait;
        matched
    }

    /// Whether the try has printed the match of `--until-output` yet, in what its pipes hold now
    /// too: a try that exited 0 without it is not ready, and what it left running is stopped as
    /// a failed try's leftovers are.
    pub fn ready_so_far(&mut self, io: &mut TryIo) -> bool {
        for i in 0..io.streams.len() {
            self.read_queued(io, i);
        }
        io.streams.iter().any(|s| s.watch.ready())
    }

    /// Reads what a stream's pipe holds now (only that: a process still writing must not keep
    /// retry here), adding it to what is pending.
    fn read_queued(&mut self, io: &mut TryIo, i: usize) {
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
            match s.dest {
                Dest::Hold => self.hold(&mut s.held, data),
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
    /// lost; `retry` itself exits at once. Held output goes to stdout, as the success's did.
    pub fn hand_off(&mut self, io: &mut TryIo) {
        let late: Vec<(OwnedFd, Dest)> = std::mem::take(&mut io.late)
            .into_iter()
            .filter(|(fd, _)| has_writer(fd))
            .collect();
        if late.is_empty() || io.broken || io.failed.is_some() {
            return;
        }
        let ignored = self.forwarder_dispositions;
        // SAFETY: `retry` runs on one thread, so no lock can be held by another thread at the
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

    /// The real terminal changed size: the try's pseudo-terminals follow it at once.
    pub fn follow_window_sizes(&self, io: &TryIo) {
        for s in io.streams.iter().filter(|s| s.tty) {
            if let Some(fd) = &s.fd {
                follow_window_size(fd, real_stream(s.dest).as_fd());
            }
        }
    }

    /// True while some output of the try still waits to be written.
    pub fn has_output(&self, io: &TryIo) -> bool {
        io.failed.is_none() && io.streams.iter().any(|s| s.outgoing().is_some())
    }

    /// Sends held standard output on its way: to stdout for the successful try, to stderr
    /// otherwise. `drain` writes it.
    pub fn deliver(&mut self, io: &mut TryIo, success: bool) {
        for s in &mut io.streams {
            if s.dest != Dest::Hold || s.held.is_empty() {
                continue;
            }
            let dest = if success { Dest::Stdout } else { Dest::Stderr };
            s.delivering = Some((dest, 0));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_looks_at_the_place_only_when_watching_without_holding() {
        let never = || -> bool { panic!("same_place looked at") };
        assert_eq!(Layout::new(false, false, false, never), Layout::Inherit);
        assert_eq!(
            Layout::new(true, false, false, never),
            Layout::Hold {
                watch_stderr: false
            }
        );
        assert_eq!(
            Layout::new(true, true, false, never),
            Layout::Hold { watch_stderr: true }
        );
        assert_eq!(Layout::new(false, true, false, || true), Layout::Shared);
        assert_eq!(Layout::new(false, true, false, || false), Layout::Separate);
    }

    #[test]
    fn under_ci_the_streams_retry_writes_beside_pass_through_it() {
        let never = || -> bool { panic!("same_place looked at") };
        assert_eq!(
            Layout::new(true, false, true, never),
            Layout::Hold { watch_stderr: true }
        );
        assert_eq!(Layout::new(false, false, true, || true), Layout::Shared);
        assert_eq!(Layout::new(false, false, true, || false), Layout::Stderr);
        assert_eq!(Layout::new(false, true, true, || false), Layout::Separate);
    }

    #[test]
    fn matchers_match_across_feeds_and_the_last_line_at_the_end() {
        let pattern = |text: &str| Some(Pattern::new(text).expect("a valid pattern"));
        let patterns = Patterns {
            retry_if: pattern("busy"),
            until: pattern("ready$"),
            ..Patterns::default()
        };
        assert!(patterns.any() && !Patterns::default().any());
        assert!(Patterns::default().matchers().is_empty());
        let mut watch = patterns.matchers();
        let mut requests = Requests::default();
        watch.feed(b"server bu", &mut requests);
        watch.feed(b"sy\nnow rea", &mut requests);
        watch.feed(b"dy", &mut requests);
        assert!(!watch.ready(), "the last line is not a line until the end");
        let mut matched = OutputMatch::default();
        watch.finish(&mut matched, &mut requests);
        assert!(matched.retry_if && matched.until && !matched.stop_if);
        assert!(watch.ready());
    }
}
