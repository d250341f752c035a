//! What `--output-on-failure` withholds (docs/output.md#output-on-failure): everything a run
//! would print on standard error, in the order it came (each try's standard error, the failed
//! tries' standard output, what the hooks write, the log's lines and the CI markers), kept until
//! the run's outcome is known; then dropped after a success, or passed on after a failure. (In
//! the code, "held" is a try that `--throttle` held back, "buffered" what `--buffer-stdout`
//! keeps of a try, and "withheld" what this module keeps of a run.)
//!
//! Holding is a state of `retry`'s standard error, a descriptor of the whole process, so the
//! record lives in the storage of the one thread `retry` has, as the line state of
//! `report::column` lives in statics: the log's writer ([`Stderr`]) and the plumbing of the tries
//! write into it without being handed it. A run starts holding with its plumbing (`begin`) and
//! ends it once its exit status is known (`end`).

use std::cell::RefCell;
use std::io::{self, Write};
use std::os::fd::RawFd;

use nix::libc;

use crate::policy::Signal;
use crate::report::column::Stream;
use crate::run::process::reap_all;
use crate::run::signals::{Arrival, Signals};
use crate::run::sink::{Outlet, Own, pass_on_stderr as write_stderr};
use crate::run::spool::Spool;

/// How much of what is held stays in memory, per stretch of it, before the rest goes to a
/// temporary file: the record is read once at most, at the end, and most often dropped unread.
pub const MEMORY_LIMIT: usize = 4 * 1024 * 1024;

/// The most written at once on playback.
const CHUNK: usize = 256 * 1024;

thread_local! {
    static RECORD: RefCell<Option<Record>> = const { RefCell::new(None) };
}

/// One stretch of what is held, and where it goes when the run ends.
#[derive(Debug)]
enum Piece {
    /// For standard error, if the run fails.
    Later(Spool),
    /// For standard error whatever the end: GitHub's annotation of the run's end.
    /// `after_open`: it came after a line left unfinished, which a failure's playback ends first.
    Always { text: Vec<u8>, after_open: bool },
    /// The successful try's standard output, in its place among the rest, for a run that fails
    /// all the same (`--flaky fail`).
    Stdout(Spool),
}

/// Everything one run holds.
#[derive(Debug)]
struct Record {
    /// The stretches held so far, but for the one being added to.
    pieces: Vec<Piece>,
    current: Spool,
    /// The last byte held for standard error did not end a line: `retry`'s next line is
    /// started with a line break.
    open: bool,
    /// Standard output and error are one file: a line left unfinished on one is unfinished on
    /// the other.
    shared: bool,
    /// The successful try's output, passed on as it ended, left a line unfinished on that one
    /// file: the annotation passed on after it starts with a line break.
    live_open: bool,
    /// Why the temporary file could not be used, once, for the log.
    warning: Option<String>,
}

impl Record {
    fn hold(&mut self, data: &[u8]) {
        let Some(&last) = data.last() else { return };
        self.open = last != b'\n';
        if let Err(e) = self.current.append(data) {
            self.file_failed(&e);
        }
    }

    fn file_failed(&mut self, e: &io::Error) {
        self.warning.get_or_insert_with(|| {
            format!("cannot hold output in a temporary file ({e}); holding it in memory")
        });
    }

    /// A line of `retry`'s own, which starts a line of its own among what is held. A line
    /// break it starts with said that the line passed on before it was unfinished: what is
    /// held keeps its own account of that.
    fn line(&mut self, text: &[u8]) {
        let text = text.strip_prefix(b"\n").unwrap_or(text);
        if self.open && !text.is_empty() {
            self.hold(b"\n");
        }
        self.hold(text);
    }

    /// Ends the stretch being added to, before a piece of another kind.
    fn seal(&mut self) {
        if !self.current.is_empty() {
            let spool = std::mem::replace(&mut self.current, Spool::with_limit(MEMORY_LIMIT));
            self.pieces.push(Piece::Later(spool));
        }
    }

    fn always(&mut self, text: &[u8]) {
        let text = text.strip_prefix(b"\n").unwrap_or(text);
        let Some(&last) = text.last() else { return };
        self.seal();
        self.pieces.push(Piece::Always {
            text: text.to_vec(),
            after_open: self.open,
        });
        self.open = last != b'\n';
    }

    fn stdout(&mut self, spool: Spool) {
        let Some(last) = spool.last_byte() else {
            return;
        };
        if self.shared {
            self.open = last != b'\n';
        }
        self.seal();
        self.pieces.push(Piece::Stdout(spool));
    }
}

/// Runs `f` on the record of the run, if one holds its output.
fn with<T>(f: impl FnOnce(&mut Record) -> T) -> Option<T> {
    RECORD.with(|cell| cell.borrow_mut().as_mut().map(f))
}

/// Starts holding what the run prints on standard error; `shared` when standard output and
/// error are one file.
pub fn begin(shared: bool) {
    let record = Record {
        pieces: Vec::new(),
        current: Spool::with_limit(MEMORY_LIMIT),
        open: false,
        shared,
        live_open: false,
        warning: None,
    };
    RECORD.with(|cell| *cell.borrow_mut() = Some(record));
}

/// True while a run holds its output.
pub fn withholding() -> bool {
    with(|_| ()).is_some()
}

/// Holds `data`, output of a try bound for standard error; false when nothing is held, and the
/// caller passes it on itself.
pub fn withhold(data: &[u8]) -> bool {
    with(|record| record.hold(data)).is_some()
}

/// Holds the standard output a failed try held, for standard error (as `--buffer-stdout`
/// passes it on), copied: the try's spool is dropped next. It comes from another stream than
/// what was held before it, so it starts on a line of its own: a line the try's standard error
/// left unfinished is not glued to it.
pub fn withhold_copy(spool: &Spool) {
    with(|record| {
        let open = spool.last_byte().map(|b| b != b'\n');
        if open.is_some() && record.open {
            record.hold(b"\n");
        }
        if let Err(e) = record.current.append_spool(spool) {
            record.file_failed(&e);
        }
        record.open = open.unwrap_or(record.open);
    });
}

/// Holds the successful try's standard output, for standard output, in its place: the run
/// fails all the same.
pub fn withhold_stdout(spool: Spool) {
    with(|record| record.stdout(spool));
}

/// The successful try's output was passed on as it ended, its last byte `last`.
pub fn passed_on_live(last: u8) {
    with(|record| record.live_open = record.shared && last != b'\n');
}

/// Why holding could not use a temporary file, once.
pub fn take_warning() -> Option<String> {
    with(|record| record.warning.take()).flatten()
}

/// Writes what a hook wrote to standard error, or holds it while a run holds its output.
pub fn pass_on_stderr(data: &[u8]) -> io::Result<()> {
    match withhold(data) {
        true => Ok(()),
        false => write_stderr(data),
    }
}

/// `retry`'s standard error for the lines it writes itself (the human log, the CI markers):
/// held while a run holds its output, else written as it comes. Each write is one line.
pub struct Stderr {
    /// The annotation of the run's end: passed on whatever the end.
    announcement: bool,
}

impl Stderr {
    /// For lines held with the rest.
    pub fn withheld() -> Stderr {
        Stderr {
            announcement: false,
        }
    }

    /// For GitHub's annotation of the run's end, which a success passes on too.
    pub fn announcement() -> Stderr {
        Stderr { announcement: true }
    }
}

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let held = with(|record| match self.announcement {
            true => record.always(buf),
            false => record.line(buf),
        });
        match held {
            Some(()) => Ok(buf.len()),
            None => io::stderr().write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

/// Ends holding, the run having ended. With `failed` (the run's outcome plays its output back:
/// a give-up, an interruption, `--flaky fail`) every piece is passed on in the order it came;
/// after a success, and after a run that ends because the reader of its output has gone (as
/// quietly as it would without `retry`), only the annotation of its end and its standard
/// output held in place. A stopping signal that arrives meanwhile ends the playback, and is
/// returned.
pub fn end(failed: bool, signals: &mut Signals) -> Option<Signal> {
    let mut record = RECORD.with(|cell| cell.borrow_mut().take())?;
    record.seal();
    let mut playback = Playback {
        stdout: Some(Outlet::new(Own::Stdout(io::stdout()))),
        stderr: Some(Outlet::new(Own::Stderr(io::stderr()))),
        signals,
    };
    for (stream, source) in playlist(&record, failed) {
        if let Err(signal) = playback.send(stream, source) {
            return Some(signal);
        }
    }
    None
}

/// What the end of a run that `failed`, or not, passes on, in order: the bytes, and the stream
/// each goes to; a piece for standard error that follows an unfinished line starts with a line
/// break.
fn playlist(record: &Record, failed: bool) -> Vec<(Stream, Source<'_>)> {
    let mut list = Vec::new();
    let line_break = (Stream::Stderr, Source::Bytes(b"\n"));
    // Left unfinished by what was passed on before: nothing held knows it.
    let mut open = record.live_open;
    for piece in &record.pieces {
        match piece {
            Piece::Later(spool) if failed => {
                if std::mem::take(&mut open) {
                    list.push(line_break);
                }
                list.push((Stream::Stderr, Source::Held(spool)));
            }
            Piece::Later(_) => {}
            Piece::Always { text, after_open } => {
                if std::mem::take(&mut open) || (failed && *after_open) {
                    list.push(line_break);
                }
                list.push((Stream::Stderr, Source::Bytes(text)));
            }
            Piece::Stdout(spool) => list.push((Stream::Stdout, Source::Held(spool))),
        }
    }
    list
}

/// What a piece is written from.
#[derive(Clone, Copy)]
enum Source<'a> {
    Bytes(&'a [u8]),
    Held(&'a Spool),
}

impl Source<'_> {
    fn len(self) -> u64 {
        match self {
            Source::Bytes(bytes) => bytes.len() as u64,
            Source::Held(spool) => spool.len(),
        }
    }
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
        let Some(sink) = dest.as_ref() else {
            return Ok(());
        };
        let mut buf = Vec::new();
        let mut pos = 0;
        while pos < source.len() {
            match write_some(sink, source, pos, &mut buf) {
                Ok(n) => pos += n as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    wait_for_room(self.signals, sink.poll_fd())?;
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

/// Writes what `sink` takes now of `source` from `pos`: from memory where it is there, with
/// sendfile from the temporary file where the destination takes it, else read and written.
fn write_some(sink: &Outlet, source: Source<'_>, pos: u64, buf: &mut Vec<u8>) -> io::Result<usize> {
    let spool = match source {
        Source::Bytes(bytes) => {
            let start = usize::try_from(pos).unwrap_or(usize::MAX).min(bytes.len());
            let part = &bytes[start..];
            return nonzero(sink.write(&part[..part.len().min(CHUNK)]));
        }
        Source::Held(spool) => spool,
    };
    if let Some(part) = spool.memory_part(pos) {
        return nonzero(sink.write(&part[..part.len().min(CHUNK)]));
    }
    let sent = spool
        .file_part(pos)
        .and_then(|(file, offset, len)| sink.send_file(file, offset, len));
    match sent {
        Some(Ok(n)) if n > 0 => return Ok(n),
        Some(Err(e)) => return Err(e),
        Some(Ok(_)) | None => {}
    }
    buf.resize(CHUNK, 0);
    let n = spool.read_at(pos, buf)?;
    nonzero(sink.write(&buf[..n]))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes that the end of a run that `failed`, or not, passes on to each stream.
    fn played(record: &Record, failed: bool) -> (String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        for (stream, source) in playlist(record, failed) {
            let bytes = match source {
                Source::Bytes(bytes) => bytes.to_vec(),
                Source::Held(spool) => {
                    let mut bytes = vec![0u8; spool.len() as usize];
                    assert_eq!(spool.read_at(0, &mut bytes).unwrap(), bytes.len());
                    bytes
                }
            };
            match stream {
                Stream::Stdout => out.extend(bytes),
                Stream::Stderr => err.extend(bytes),
            }
        }
        (
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    fn record(shared: bool) -> Record {
        begin(shared);
        RECORD.with(|cell| cell.borrow_mut().take()).unwrap()
    }

    #[test]
    fn retry_s_lines_start_lines_of_their_own_among_what_is_held() {
        let mut r = record(false);
        r.hold(b"progress 50%");
        r.line(b"retry: try 1/2 exited 1\n");
        r.line(b"\nretry: gave up\n");
        r.seal();
        let (out, err) = played(&r, true);
        assert!(out.is_empty());
        assert_eq!(
            err,
            "progress 50%\nretry: try 1/2 exited 1\nretry: gave up\n"
        );
        assert_eq!(played(&r, false), (String::new(), String::new()));
    }

    #[test]
    fn a_success_passes_on_only_its_annotation_and_its_output_held_in_place() {
        let mut r = record(true);
        r.hold(b"try 1 failed");
        r.always(b"::warning title=retry::succeeded\n");
        let mut stdout = Spool::new();
        stdout.append(b"answer").unwrap();
        r.stdout(stdout);
        r.line(b"retry: succeeded on try 2/2, but --flaky fail: exit 1\n");
        r.seal();
        assert_eq!(r.pieces.len(), 4, "{:?}", r.pieces);
        let (out, err) = played(&r, false);
        assert_eq!(out, "answer");
        assert_eq!(err, "::warning title=retry::succeeded\n");
        let (out, err) = played(&r, true);
        assert_eq!(out, "answer");
        assert_eq!(
            err,
            "try 1 failed\n::warning title=retry::succeeded\n\
             \nretry: succeeded on try 2/2, but --flaky fail: exit 1\n",
            "the output left a line unfinished on the one file"
        );
    }

    #[test]
    fn the_annotation_of_a_success_starts_a_line_after_its_unfinished_output() {
        let mut r = record(true);
        r.hold(b"warming up");
        r.live_open = true;
        r.line(b"\nretry: try 2/2 succeeded\n");
        r.always(b"::warning title=retry::succeeded\n");
        r.seal();
        let (_, err) = played(&r, false);
        assert_eq!(err, "\n::warning title=retry::succeeded\n");
    }

    #[test]
    fn nothing_is_held_outside_a_run() {
        RECORD.with(|cell| *cell.borrow_mut() = None);
        assert!(!withholding());
        assert!(!withhold(b"x"));
        begin(false);
        assert!(withholding() && withhold(b"x"));
        let mut line = Stderr::withheld();
        line.write_all(b"retry: a line\n").unwrap();
        let r = RECORD.with(|cell| cell.borrow_mut().take()).unwrap();
        assert_eq!(r.current.len(), 16);
        assert!(!withholding());
    }
}
