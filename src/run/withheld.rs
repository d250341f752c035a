//! What `--output-on-failure` withholds (docs/output.md#output-on-failure): everything a run
//! would print on standard error, in the order it came (each try's standard error, the failed
//! tries' standard output, what the hooks write, the log's lines and the CI markers), kept until
//! the run's outcome is known; then dropped after a success, or passed on after a failure. (In
//! the code, "withheld" is what this module keeps of a run, "buffered" what `--buffer-stdout`
//! keeps of a try: docs/architecture.md#glossary.)
//!
//! The record is a value: the shell's one [`Stderr`](crate::run::stderr::Stderr) keeps it while
//! a run withholds its output, every writer of standard error reaches it through that, and
//! `run::playback` passes on what [`playlist`] says when the run has ended.

use std::io;

use crate::run::column::Stream;
use crate::run::spool::Spool;

/// How much of what is withheld stays in memory, per stretch of it, before the rest goes to a
/// temporary file: the record is read once at most, at the end, and most often dropped unread.
pub const MEMORY_LIMIT: usize = 4 * 1024 * 1024;

/// One stretch of what is withheld, and where it goes when the run ends.
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

/// Everything one run withholds.
#[derive(Debug)]
pub struct Record {
    /// The stretches withheld so far, but for the one being added to.
    pieces: Vec<Piece>,
    current: Spool,
    /// The last byte withheld for standard error did not end a line: `retry`'s next line is
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
    /// A record of nothing yet; `shared` when standard output and error are one file.
    pub fn new(shared: bool) -> Record {
        Record {
            pieces: Vec::new(),
            current: Spool::with_limit(MEMORY_LIMIT),
            open: false,
            shared,
            live_open: false,
            warning: None,
        }
    }

    /// Withholds `data`, output of a try (or a hook) bound for standard error.
    pub fn withhold(&mut self, data: &[u8]) {
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

    /// A line of `retry`'s own, which starts a line of its own among what is withheld. A line
    /// break it starts with said that the line passed on before it was unfinished: what is
    /// withheld keeps its own account of that.
    pub fn line(&mut self, text: &[u8]) {
        let text = text.strip_prefix(b"\n").unwrap_or(text);
        if self.open && !text.is_empty() {
            self.withhold(b"\n");
        }
        self.withhold(text);
    }

    /// Ends the stretch being added to, before a piece of another kind.
    pub fn seal(&mut self) {
        if !self.current.is_empty() {
            let spool = std::mem::replace(&mut self.current, Spool::with_limit(MEMORY_LIMIT));
            self.pieces.push(Piece::Later(spool));
        }
    }

    /// GitHub's annotation of the run's end, passed on whatever the end.
    pub fn always(&mut self, text: &[u8]) {
        let text = text.strip_prefix(b"\n").unwrap_or(text);
        let Some(&last) = text.last() else { return };
        self.seal();
        self.pieces.push(Piece::Always {
            text: text.to_vec(),
            after_open: self.open,
        });
        self.open = last != b'\n';
    }

    /// Withholds the successful try's standard output, for standard output, in its place: the run
    /// fails all the same.
    pub fn stdout(&mut self, spool: Spool) {
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

impl Record {
    /// Withholds the standard output a failed try buffered, for standard error (as `--buffer-stdout`
    /// passes it on), copied: the try's spool is dropped next. It comes from another stream
    /// than what was withheld before it, so it starts on a line of its own: a line the try's
    /// standard error left unfinished is not glued to it.
    pub fn copy(&mut self, spool: &Spool) {
        let open = spool.last_byte().map(|b| b != b'\n');
        if open.is_some() && self.open {
            self.withhold(b"\n");
        }
        if let Err(e) = self.current.append_spool(spool) {
            self.file_failed(&e);
        }
        self.open = open.unwrap_or(self.open);
    }

    /// The successful try's output was passed on as it ended, its last byte `last`.
    pub fn passed_on_live(&mut self, last: u8) {
        self.live_open = self.shared && last != b'\n';
    }

    /// Why withholding could not use a temporary file, once.
    pub fn take_warning(&mut self) -> Option<String> {
        self.warning.take()
    }
}

/// What the end of a run that `failed`, or not, passes on, in order: the bytes, and the stream
/// each goes to; a piece for standard error that follows an unfinished line starts with a line
/// break.
pub fn playlist(record: &Record, failed: bool) -> Vec<(Stream, Source<'_>)> {
    let mut list = Vec::new();
    let line_break = (Stream::Stderr, Source::Bytes(b"\n"));
    // Left unfinished by what was passed on before: nothing withheld knows it.
    let mut open = record.live_open;
    for piece in &record.pieces {
        match piece {
            Piece::Later(spool) if failed => {
                if std::mem::take(&mut open) {
                    list.push(line_break);
                }
                list.push((Stream::Stderr, Source::Withheld(spool)));
            }
            Piece::Later(_) => {}
            Piece::Always { text, after_open } => {
                if std::mem::take(&mut open) || (failed && *after_open) {
                    list.push(line_break);
                }
                list.push((Stream::Stderr, Source::Bytes(text)));
            }
            Piece::Stdout(spool) => list.push((Stream::Stdout, Source::Withheld(spool))),
        }
    }
    list
}

/// What a piece is written from.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    Bytes(&'a [u8]),
    Withheld(&'a Spool),
}

impl Source<'_> {
    pub(crate) fn len(self) -> u64 {
        match self {
            Source::Bytes(bytes) => bytes.len() as u64,
            Source::Withheld(spool) => spool.len(),
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
                Source::Withheld(spool) => {
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
        Record::new(shared)
    }

    #[test]
    fn retry_s_lines_start_lines_of_their_own_among_what_is_withheld() {
        let mut r = record(false);
        r.withhold(b"progress 50%");
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
    fn a_success_passes_on_only_its_annotation_and_its_output_withheld_in_place() {
        let mut r = record(true);
        r.withhold(b"try 1 failed");
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
        r.withhold(b"warming up");
        r.live_open = true;
        r.line(b"\nretry: try 2/2 succeeded\n");
        r.always(b"::warning title=retry::succeeded\n");
        r.seal();
        let (_, err) = played(&r, false);
        assert_eq!(err, "\n::warning title=retry::succeeded\n");
    }
}
