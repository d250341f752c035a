//! One output stream of a try as retry reads it (docs/output.md#holding-standard-output to 7.4):
//! where it goes, what is pending or buffered of it, and the matchers of the patterns that watch it.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::SystemTime;

use crate::policy::{CaptureMatcher, LineMatcher, OutputMatch, Pattern, Requests};
use crate::run::descriptor::Own;
use crate::run::spool::Spool;
use crate::run::stdio::fds::{BUFFER_PIPE, CHUNK};

/// Where a try's output stream goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Dest {
    Stdout,
    Stderr,
    /// Buffered until the try ends (`--buffer-stdout`).
    Buffer,
    /// Standard error withheld with the rest of the run's output, as it comes, until the run ends
    /// (`--output-on-failure`, docs/output.md#output-on-failure).
    Record,
}

/// retry's own stream that a try's stream's output goes to.
pub(super) fn real_stream(dest: Dest) -> Own {
    match dest {
        Dest::Stderr | Dest::Record => Own::Stderr(io::stderr()),
        Dest::Stdout | Dest::Buffer => Own::Stdout(io::stdout()),
    }
}

/// One of a try's output streams, read by retry.
#[derive(Debug)]
pub(super) struct Stream {
    pub(super) fd: Option<OwnedFd>,
    pub(super) dest: Dest,
    pub(super) pending: Vec<u8>,
    pub(super) written: usize,
    pub(super) watch: Matchers,
    pub(super) buffered: Spool,
    /// Buffered output on its way out after the try: where to (stdout or stderr), and how much of
    /// the spool has been taken into `pending`.
    pub(super) delivering: Option<(Dest, u64)>,
    /// `fd` is the master of a pseudo-terminal whose size follows the real terminal's.
    pub(super) tty: bool,
}

impl Stream {
    /// A stream read from `fd` (the master of a pseudo-terminal when `tty`), going to `dest`,
    /// watched by `watch`.
    pub(super) fn new(fd: OwnedFd, dest: Dest, watch: Matchers, tty: bool) -> Stream {
        Stream {
            fd: Some(fd),
            dest,
            pending: Vec::new(),
            written: 0,
            watch,
            buffered: Spool::new(),
            delivering: None,
            tty,
        }
    }

    /// Takes the next chunk of buffered output into `pending`; false when there is none (the end,
    /// or a read error, recorded in `failed`).
    pub(super) fn take_buffered_chunk(&mut self, failed: &mut Option<OutputError>) -> bool {
        let Some((_, pos)) = &mut self.delivering else {
            return false;
        };
        self.pending.resize(CHUNK, 0);
        match self.buffered.read_at(*pos, &mut self.pending) {
            Ok(n) => {
                self.pending.truncate(n);
                *pos += n as u64;
            }
            Err(error) => {
                self.pending.clear();
                self.delivering = None;
                failed.get_or_insert(OutputError {
                    stream: "buffered standard output",
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

    /// Buffered output that nothing matches goes from the pipe to the temporary file without
    /// passing through `retry`, once the part in memory is full: what that read gave, or
    /// `None` when this stream's output is not taken that way now.
    pub(super) fn splice_buffered(&mut self) -> Option<Read> {
        if self.dest != Dest::Buffer || !self.watch.is_empty() {
            return None;
        }
        let fd = self.fd.as_ref()?;
        match self.buffered.splice_from(fd.as_fd(), BUFFER_PIPE)? {
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
    pub(super) fn outgoing(&self) -> Option<Dest> {
        if let Some((dest, _)) = self.delivering {
            return Some(dest);
        }
        let passed_on = matches!(self.dest, Dest::Stdout | Dest::Stderr);
        (passed_on && self.written < self.pending.len()).then_some(self.dest)
    }
}

/// What one read of a try's stream gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Read {
    Data(usize),
    Nothing,
    End,
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

/// The patterns of the run that watch a try's output
/// (docs/classification.md#classification-by-output), given once.
#[derive(Debug, Default)]
pub(super) struct Patterns {
    pub(super) retry_if: Option<Pattern>,
    pub(super) stop_if: Option<Pattern>,
    pub(super) until: Option<Pattern>,
    pub(super) delay_from: Option<Pattern>,
    /// A `Date:` line, watched with `delay_from`: the clock that an HTTP-date it reads is
    /// measured by.
    pub(super) date_line: Option<Pattern>,
}

impl Patterns {
    pub(super) fn any(&self) -> bool {
        self.retry_if.is_some()
            || self.stop_if.is_some()
            || self.until.is_some()
            || self.delay_from.is_some()
    }

    /// Matchers of these patterns for one stream of one try.
    pub(super) fn matchers(&self) -> Matchers {
        Matchers {
            retry_if: self.retry_if.clone().map(LineMatcher::new),
            stop_if: self.stop_if.clone().map(LineMatcher::new),
            until: self.until.clone().map(LineMatcher::new),
            delay_from: self.delay_from.clone().map(CaptureMatcher::new),
            date_line: self.date_line.clone().map(CaptureMatcher::new),
        }
    }
}

/// What watches one stream of a try.
#[derive(Debug)]
pub(super) struct Matchers {
    retry_if: Option<LineMatcher>,
    stop_if: Option<LineMatcher>,
    /// `--until-output`: whether the try said it is ready.
    until: Option<LineMatcher>,
    /// `--delay-from-output`: reads the waits the output asks for.
    delay_from: Option<CaptureMatcher>,
    /// Reads the output's `Date:` lines, with `delay_from`.
    date_line: Option<CaptureMatcher>,
}

impl Matchers {
    pub(super) fn is_empty(&self) -> bool {
        self.retry_if.is_none()
            && self.stop_if.is_none()
            && self.until.is_none()
            && self.delay_from.is_none()
            && self.date_line.is_none()
    }

    /// Matches `data`, the next bytes of the stream; the waits it asks for go to `requests`.
    pub(super) fn feed(&mut self, data: &[u8], requests: &mut Requests) {
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
            m.feed(data, |group| requests.saw(group, SystemTime::now()));
        }
        if let Some(m) = &mut self.date_line {
            m.feed(data, |group| {
                requests.saw_date_line(group, SystemTime::now())
            });
        }
    }

    /// The stream has ended: its last line is matched, and what matched is added to `matched`.
    pub(super) fn finish(&mut self, matched: &mut OutputMatch, requests: &mut Requests) {
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
            m.finish(|group| requests.saw(group, SystemTime::now()));
        }
        if let Some(m) = &mut self.date_line {
            m.finish(|group| requests.saw_date_line(group, SystemTime::now()));
        }
    }

    /// `--until-output` has matched.
    pub(super) fn ready(&self) -> bool {
        self.until.as_ref().is_some_and(LineMatcher::matched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
