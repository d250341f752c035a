//! Where `retry`'s own standard output and error stand: at the start of a line, or after the
//! unfinished last line of a try's output (a progress line, a try killed mid-line). The shell
//! notes every byte it passes on from a try; every line `retry` writes itself (a log line, a CI
//! marker, a JSON object) asks first, and starts with a line break when the line is open, so
//! that a CI log never shows `progress 50%::endgroup::` (docs/ci.md).
//!
//! This is the state of two process-wide descriptors, so it lives in statics: each is written
//! by one thread, `retry` having only one.

use std::sync::atomic::{AtomicBool, Ordering};

/// One of `retry`'s own output streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn index(self) -> usize {
        match self {
            Stream::Stdout => 0,
            Stream::Stderr => 1,
        }
    }

    fn other(self) -> Stream {
        match self {
            Stream::Stdout => Stream::Stderr,
            Stream::Stderr => Stream::Stdout,
        }
    }
}

/// Whether the last byte passed on to each stream ended a line.
static OPEN: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];
/// Standard output and error are one file (`2>&1`, a CI runner's one pipe): a line left open
/// on either is open on both.
static SHARED: AtomicBool = AtomicBool::new(false);

/// Tells whether standard output and error are one file.
pub fn set_shared(shared: bool) {
    SHARED.store(shared, Ordering::Relaxed);
}

/// Whether standard output and error are one file.
pub fn shared() -> bool {
    SHARED.load(Ordering::Relaxed)
}

fn set_open(stream: Stream, open: bool) {
    OPEN[stream.index()].store(open, Ordering::Relaxed);
    if SHARED.load(Ordering::Relaxed) {
        OPEN[stream.other().index()].store(open, Ordering::Relaxed);
    }
}

/// Notes that `written`, a try's output, has just gone out on `stream`.
pub fn passed_on(stream: Stream, written: &[u8]) {
    if let Some(&last) = written.last() {
        set_open(stream, last != b'\n');
    }
}

/// What a line that `retry` writes to `stream` starts with: a line break when a try's output
/// left the line unfinished, nothing otherwise. The line is then taken as closed.
pub fn line_start(stream: Stream) -> &'static str {
    let open = OPEN[stream.index()].swap(false, Ordering::Relaxed);
    let other_open = SHARED.load(Ordering::Relaxed)
        && OPEN[stream.other().index()].swap(false, Ordering::Relaxed);
    if open || other_open { "\n" } else { "" }
}

/// What held output that a try wrote to its standard output, passed on now to `stream`, starts
/// with: a line break when a line is left unfinished where it goes. On standard output, only
/// when that is one file with standard error, whose line the try left open: the bytes of the
/// try's standard output itself are never changed.
pub fn held_start(stream: Stream) -> &'static str {
    match stream {
        Stream::Stderr => line_start(Stream::Stderr),
        Stream::Stdout if SHARED.load(Ordering::Relaxed) => line_start(Stream::Stdout),
        Stream::Stdout => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test, since the state is the process's: tests in parallel would share it.
    #[test]
    fn a_line_left_open_is_closed_once_on_its_stream_and_on_a_shared_one() {
        set_shared(false);
        assert_eq!(line_start(Stream::Stderr), "");
        passed_on(Stream::Stderr, b"50%");
        assert_eq!(line_start(Stream::Stderr), "\n");
        assert_eq!(line_start(Stream::Stderr), "");
        passed_on(Stream::Stdout, b"50%");
        assert_eq!(line_start(Stream::Stderr), "", "another file");
        passed_on(Stream::Stdout, b"done\n");
        passed_on(Stream::Stderr, b"");
        assert_eq!(line_start(Stream::Stdout), "");

        set_shared(true);
        passed_on(Stream::Stdout, b"progress 50%");
        assert_eq!(line_start(Stream::Stderr), "\n");
        assert_eq!(line_start(Stream::Stdout), "");
        passed_on(Stream::Stdout, b"a\nb");
        passed_on(Stream::Stderr, b"c\n");
        assert_eq!(
            line_start(Stream::Stderr),
            "",
            "the last byte on the file ended a line"
        );
        set_shared(false);
    }
}
