//! The tries' standard input (docs/stdin.md#standard-input): what each try gets, and, when retry's
//! own is a pipe or a socket, its recording, fed to every try from the start, at the pace the try
//! reads.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use anyhow::{Context as _, bail};
use nix::errno::Errno;
use nix::libc;
use nix::poll::PollFlags;
use nix::sys::stat::fstat;
use nix::unistd::{Whence, lseek};

use crate::config::StdinMode;
use crate::run::child::ChildFd;
use crate::run::clock::Moment;
use crate::run::demand::{self, Demand, Wanted};
use crate::run::descriptor::{Kind, is_socket, kind_of, pipe, read_fd, ready_now, set_nonblocking};
use crate::run::process::Inherited;
use crate::run::spool::Spool;
use crate::run::stdio::fds::{CHUNK, Token, pipe_size_within, set_pipe_size, unread};

/// The most recorded input stored in memory when no temporary file can be written. Past it,
/// recording stops: the try that is reading still gets every byte, passed through, but no
/// further try can get the same input (docs/stdin.md#standard-input).
const INPUT_MEMORY_CAP: usize = 128 * 1024 * 1024;

/// What the tries get as standard input, chosen once for the run.
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

/// Standard input as recorded so far, shared by every try.
#[derive(Debug, Default)]
struct Recorder {
    spool: Spool,
    eof: bool,
    /// Recording stopped at the memory cap; what is read now only passes through.
    overflow: Option<Overflow>,
    /// tee(2) refused standard input (a socket, not a pipe): it is read and written from then on.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    no_tee: bool,
}

/// Input read after recording stopped, on its way to the current try.
#[derive(Debug, Default)]
struct Overflow {
    buf: Vec<u8>,
    /// Where `buf` starts in the whole input.
    start: u64,
}

impl Input {
    /// What the tries get as standard input in `mode` (docs/stdin.md#standard-input), from what
    /// retry's own is.
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

    /// Keeps `data`, just read from standard input: in the recording, or, once recording has
    /// stopped, only until the try has been fed it. Past the memory cap with no temporary file,
    /// recording stops.
    fn keep(&mut self, data: &[u8], warning: &mut Option<String>) {
        if let Some(o) = &mut self.overflow {
            o.buf.extend_from_slice(data);
            return;
        }
        if let Err(e) = self.spool.append(data) {
            *warning = Some(format!(
                "cannot spill recorded standard input to a temporary file ({e}); holding it in memory"
            ));
        }
        if self.spool.file_failed() && self.spool.in_memory() >= INPUT_MEMORY_CAP {
            self.overflow = Some(Overflow {
                buf: Vec::new(),
                start: self.spool.len(),
            });
            *warning = Some(format!(
                "standard input is past the {} MiB retry holds in memory, and no temporary file can be written: this try reads the rest as it comes, but no further try can get the same input",
                INPUT_MEMORY_CAP >> 20
            ));
        }
    }

    /// Moves exactly `n` bytes, which the pipe of standard input holds (the try was just given
    /// them by tee), out of the pipe into the recording: into the temporary file without passing
    /// through retry where the spool spills to one, else read and kept. Should the pipe fail to
    /// give them, that is the end of the input, as when a plain read fails.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn take(&mut self, mut n: usize, buf: &mut Vec<u8>, warning: &mut Option<String>) {
        buf.resize(CHUNK, 0);
        while n > 0 {
            let moved = match self.spool.splice_from(io::stdin().as_fd(), n) {
                Some(moved) => moved,
                None => read_fd(io::stdin().as_fd(), &mut buf[..n.min(CHUNK)]).inspect(|&k| {
                    self.keep(&buf[..k], warning);
                }),
            };
            match moved {
                Ok(k @ 1..) => n -= k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(0) | Err(_) => {
                    self.eof = true;
                    return;
                }
            }
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

/// Feeding the recorded input to one try.
#[derive(Debug)]
pub(super) struct Feed {
    fd: OwnedFd,
    pos: u64,
    pace: Pace,
}

/// How much of `retry`'s standard input a try may have (docs/stdin.md#standard-input). What is
/// recorded already is `retry`'s own, and always given at once; this is about reading more.
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

impl Feed {
    /// How much may be read from standard input for this try now.
    fn allowance(&self) -> usize {
        match &self.pace {
            Pace::Eager => CHUNK,
            Pace::OnRequest(asking) => asking.grant.unwrap_or(0),
            Pace::Streaming { ahead } => ahead.saturating_sub(unread(&self.fd)),
        }
    }

    /// The try was just given input: one fed on request may ask for more soon.
    fn fed(&mut self) {
        if let Pace::OnRequest(asking) = &mut self.pace {
            asking.fed = Moment::now();
            asking.look_soon(asking.fed);
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

/// Standard input for the whole run: what the tries get, and the recording they are fed from.
#[derive(Debug)]
pub(super) struct Feeder {
    input: Input,
    /// Input is read only when a try asks for it (`--stdin auto` on a pipe), not as fast as the
    /// try's pipe takes it (`--stdin replay`).
    on_request: bool,
    /// The warning that a try could not be looked at has been given.
    warned_unseen: bool,
    /// The buffer reads and writes of input go through, kept from one to the next.
    buf: Vec<u8>,
}

impl Feeder {
    /// Standard input as `mode` has it for the run.
    pub(super) fn new(mode: StdinMode) -> anyhow::Result<Feeder> {
        let input = Input::new(mode)?;
        let on_request = mode == StdinMode::Auto && matches!(input, Input::Replay(_));
        Ok(Feeder {
            input,
            on_request,
            warned_unseen: false,
            buf: Vec::new(),
        })
    }

    /// False once standard input could not be recorded whole: no further try may run.
    pub(super) fn can_replay(&self) -> bool {
        !matches!(&self.input, Input::Replay(rec) if rec.overflow.is_some())
    }

    /// The try's standard input, and retry's end of it in `feed` when retry feeds it.
    pub(super) fn child_stdin(
        &mut self,
        feed: &mut Option<Feed>,
        warning: &mut Option<String>,
    ) -> anyhow::Result<ChildFd> {
        Ok(match &mut self.input {
            Input::Inherit => ChildFd::Inherit,
            Input::Unreplayed { tries } => {
                *tries += 1;
                if *tries == 2 {
                    *warning = Some(
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
                *feed = Some(Feed {
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

    /// The descriptor to poll for feeding the try, if any, with its events and what it is for.
    /// Ends the try's input (`feed` becomes `None`) once everything has been fed.
    pub(super) fn interest(
        &self,
        feed: &mut Option<Feed>,
    ) -> Option<(RawFd, libc::c_short, Token)> {
        let Input::Replay(rec) = &self.input else {
            return None;
        };
        let f = feed.as_ref()?;
        if f.pos < rec.len() {
            return Some((f.fd.as_raw_fd(), libc::POLLOUT, Token::FeedWrite));
        }
        if !rec.eof {
            if f.allowance() > 0 {
                return Some((libc::STDIN_FILENO, libc::POLLIN, Token::StdinRead));
            }
            return match &f.pace {
                // Enough is ready: wake when the try has read some.
                Pace::Streaming { .. } => Some((f.fd.as_raw_fd(), libc::POLLOUT, Token::FeedWrite)),
                Pace::OnRequest(asking) if !asking.stdin_ready => {
                    Some((libc::STDIN_FILENO, libc::POLLIN, Token::StdinReady))
                }
                // Waiting for the next look (`next_scan`).
                _ => None,
            };
        }
        // Everything recorded has been fed and the source is done: end of input.
        *feed = None;
        None
    }

    /// Standard input has something to read: read what the try may have into the recording.
    pub(super) fn stdin_readable(&mut self, feed: &mut Option<Feed>, warning: &mut Option<String>) {
        let Some(f) = feed else { return };
        let allowed = f.allowance();
        if let Pace::OnRequest(asking) = &mut f.pace {
            // One read per request.
            asking.grant = None;
        }
        if allowed > 0 && !self.tee(f, allowed, warning) {
            self.record(allowed, warning);
            // Passed on at once rather than after another poll (the write never
            // waits): a reader fed a byte at a time pays for each round trip.
            self.feed(feed, libc::POLLOUT);
        }
    }

    /// Gives the try up to `max` bytes of standard input straight from its pipe, when the try
    /// has been given everything recorded: tee(2) puts them in the try's pipe without copying
    /// them, and exactly as many are then moved into the recording (spliced into its temporary
    /// file once it spills), so that they are not read back from the recording and written again.
    /// False when this cannot be done now, and the caller reads and writes instead: standard
    /// input is not a pipe (a socket: from then on), the try's pipe is full (the plain path
    /// records what there is and waits for room, where tee would find standard input still
    /// readable and the poll would never wait), or the input has ended (the plain read sees it).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn tee(&mut self, feed: &mut Feed, max: usize, warning: &mut Option<String>) -> bool {
        use nix::fcntl::{SpliceFFlags, tee};
        let Input::Replay(rec) = &mut self.input else {
            return false;
        };
        if rec.no_tee || rec.overflow.is_some() || feed.pos != rec.len() {
            return false;
        }
        let flags = SpliceFFlags::SPLICE_F_NONBLOCK;
        match tee(io::stdin().as_fd(), &feed.fd, max.min(CHUNK), flags) {
            Ok(0) => false,
            Ok(n) => {
                rec.take(n, &mut self.buf, warning);
                feed.pos += n as u64;
                rec.passed(feed.pos);
                feed.fed();
                true
            }
            Err(Errno::EINVAL) => {
                rec.no_tee = true;
                false
            }
            Err(_) => false,
        }
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn tee(&mut self, _feed: &mut Feed, _max: usize, _warning: &mut Option<String>) -> bool {
        false
    }

    /// Standard input has something, or has ended: look at once whether the try asks for it.
    pub(super) fn stdin_ready(feed: &mut Option<Feed>) {
        if let Some(Feed {
            pace: Pace::OnRequest(asking),
            ..
        }) = feed
        {
            asking.stdin_ready = true;
            asking.interval = FIRST_LOOK;
            asking.next = Moment::now();
        }
    }

    /// Writes what the try has not been given yet of the recording to its pipe, as far as the
    /// pipe takes it; `revents` are what poll said of the pipe.
    pub(super) fn feed(&mut self, slot: &mut Option<Feed>, revents: libc::c_short) {
        let (Some(feed), Input::Replay(rec)) = (slot.as_mut(), &mut self.input) else {
            return;
        };
        if revents & (libc::POLLERR | libc::POLLHUP) != 0 && revents & libc::POLLOUT == 0 {
            // The try closed its standard input: it wants no more.
            *slot = None;
            return;
        }
        let buf = &mut self.buf;
        buf.resize(CHUNK, 0);
        let n = match rec.read_at(feed.pos, buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(_) => {
                *slot = None;
                return;
            }
        };
        match nix::unistd::write(&feed.fd, &buf[..n]) {
            Ok(0) => {}
            Ok(w) => {
                feed.pos += w as u64;
                rec.passed(feed.pos);
                feed.fed();
            }
            Err(Errno::EAGAIN | Errno::EINTR) => {}
            Err(_) => *slot = None,
        }
    }

    /// Reads at most `max` bytes of standard input into the recording.
    fn record(&mut self, max: usize, warning: &mut Option<String>) {
        let Input::Replay(rec) = &mut self.input else {
            return;
        };
        let buf = &mut self.buf;
        // The buffer keeps its size (filling it again would cost more than the read).
        buf.resize(CHUNK, 0);
        match read_fd(io::stdin().as_fd(), &mut buf[..max.clamp(1, CHUNK)]) {
            Ok(0) => rec.eof = true,
            Ok(n) => rec.keep(&buf[..n], warning),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => rec.eof = true,
        }
    }

    /// When to look next whether the try waits for input: only while it is fed on request,
    /// has been given everything recorded, and standard input has something for it.
    pub(super) fn next_scan(&self, feed: &Option<Feed>) -> Option<Moment> {
        let (Some(feed), Input::Replay(rec)) = (feed, &self.input) else {
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
    pub(super) fn scan(
        &mut self,
        feed: &mut Option<Feed>,
        inherited: &Inherited,
        warning: &mut Option<String>,
    ) {
        let Some(due) = self.next_scan(feed) else {
            return;
        };
        let now = Moment::now();
        let (Some(feed), Input::Replay(rec)) = (feed, &mut self.input) else {
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
                    *warning = Some(
                        "a process of the try cannot be looked at (a setuid program, or another user's), so retry cannot tell when it reads: it is given standard input as fast as it takes it, and what it leaves unread is lost to whoever reads after retry"
                            .to_string(),
                    );
                }
            }
        }
    }
}
