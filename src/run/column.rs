//! Where `retry`'s own standard output and error stand: at the start of a line, or after the
//! unfinished last line of a try's output (a progress line, a try killed mid-line). The shell
//! notes every byte it passes on from a try; every line `retry` writes itself (a log line, a CI
//! marker, a JSON object) asks first, and starts with a line break when the line is open, so
//! that a CI log never shows `progress 50%::endgroup::` (docs/ci.md).
//!
//! A plain value: the one [`Stderr`](crate::run::stderr::Stderr) of the shell holds it, and
//! every writer reaches it through that.

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

/// Where the line stands on each of `retry`'s streams.
#[derive(Clone, Copy, Debug, Default)]
pub struct Column {
    /// Whether the last byte passed on to each stream left its line unfinished.
    open: [bool; 2],
    /// Standard output and error are one file (`2>&1`, a CI runner's one pipe): a line left
    /// open on either is open on both.
    shared: bool,
}

impl Column {
    /// Tells whether standard output and error are one file.
    pub fn set_shared(&mut self, shared: bool) {
        self.shared = shared;
    }

    /// Whether standard output and error are one file.
    pub fn shared(&self) -> bool {
        self.shared
    }

    fn set_open(&mut self, stream: Stream, open: bool) {
        self.open[stream.index()] = open;
        if self.shared {
            self.open[stream.other().index()] = open;
        }
    }

    /// Notes that `written`, a try's output, has just gone out on `stream`.
    pub fn passed_on(&mut self, stream: Stream, written: &[u8]) {
        if let Some(&last) = written.last() {
            self.set_open(stream, last != b'\n');
        }
    }

    /// What a line that `retry` writes to `stream` starts with: a line break when a try's
    /// output left the line unfinished, nothing otherwise. The line is then taken as closed.
    pub fn line_start(&mut self, stream: Stream) -> &'static str {
        let open = std::mem::take(&mut self.open[stream.index()]);
        let other_open = self.shared && std::mem::take(&mut self.open[stream.other().index()]);
        if open || other_open { "\n" } else { "" }
    }

    /// What buffered output that a try wrote to its standard output, passed on now to `stream`,
    /// starts with: a line break when a line is left unfinished where it goes. On standard
    /// output, only when that is one file with standard error, whose line the try left open:
    /// the bytes of the try's standard output itself are never changed.
    pub fn buffered_start(&mut self, stream: Stream) -> &'static str {
        match stream {
            Stream::Stderr => self.line_start(Stream::Stderr),
            Stream::Stdout if self.shared => self.line_start(Stream::Stdout),
            Stream::Stdout => "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_left_open_is_closed_once_on_its_stream() {
        let mut c = Column::default();
        assert_eq!(c.line_start(Stream::Stderr), "");
        c.passed_on(Stream::Stderr, b"50%");
        assert_eq!(c.line_start(Stream::Stderr), "\n");
        assert_eq!(c.line_start(Stream::Stderr), "");
        c.passed_on(Stream::Stdout, b"50%");
        assert_eq!(c.line_start(Stream::Stderr), "", "another file");
        assert_eq!(
            c.buffered_start(Stream::Stdout),
            "",
            "a try's own bytes are kept"
        );
        c.passed_on(Stream::Stdout, b"done\n");
        c.passed_on(Stream::Stderr, b"");
        assert_eq!(c.line_start(Stream::Stdout), "");
    }

    #[test]
    fn a_line_left_open_on_a_shared_file_is_open_on_both_streams() {
        let mut c = Column::default();
        c.set_shared(true);
        c.passed_on(Stream::Stdout, b"progress 50%");
        assert_eq!(c.line_start(Stream::Stderr), "\n");
        assert_eq!(c.line_start(Stream::Stdout), "");
        c.passed_on(Stream::Stdout, b"a\nb");
        c.passed_on(Stream::Stderr, b"c\n");
        assert_eq!(
            c.line_start(Stream::Stderr),
            "",
            "the last byte on the file ended a line"
        );
        c.passed_on(Stream::Stderr, b"50%");
        assert_eq!(c.buffered_start(Stream::Stdout), "\n");
    }
}
