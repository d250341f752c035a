//! `retry`'s own standard error as one value that the shell owns: where the line stands on it
//! (and on standard output, which may be the same file: `run::column`), and, while a run withholds
//! its output under `--output-on-failure`, the record of what it withholds (`run::withheld`). The
//! shell makes one for the whole process and hands a clone to every writer: the log's sinks
//! (through [`Lines`]), the plumbing of the tries (`run::descriptor::Outlet`), the hooks and the
//! playback. No writer keeps state of its own about standard error, and none is kept in a
//! static: every write goes through this one handle, in the one thread `retry` has.

use std::cell::RefCell;
use std::io::{self, Write};
use std::rc::Rc;

use crate::report::out::Out;
use crate::run::column::{Column, Stream};
use crate::run::spool::Spool;
use crate::run::withheld::Record;

/// The handle to `retry`'s standard error; its clones are the same one.
#[derive(Clone, Debug, Default)]
pub struct Stderr(Rc<RefCell<State>>);

#[derive(Debug, Default)]
struct State {
    column: Column,
    /// What the run withholds, while it withholds its output.
    record: Option<Record>,
}

impl Stderr {
    /// Standard error at the start of a line, withholding nothing.
    pub fn new() -> Stderr {
        Stderr::default()
    }

    /// Tells whether standard output and error are one file.
    pub fn set_shared(&self, shared: bool) {
        self.0.borrow_mut().column.set_shared(shared);
    }

    /// Whether standard output and error are one file.
    pub fn shared(&self) -> bool {
        self.0.borrow().column.shared()
    }

    /// Notes that `written`, a try's output, has just gone out on `stream`.
    pub fn passed_on(&self, stream: Stream, written: &[u8]) {
        self.0.borrow_mut().column.passed_on(stream, written);
    }

    /// What buffered output of a try's standard output, passed on now to `stream`, starts with
    /// (`Column::buffered_start`).
    pub fn buffered_start(&self, stream: Stream) -> &'static str {
        self.0.borrow_mut().column.buffered_start(stream)
    }

    /// Starts withholding what the run prints on standard error; `shared` when standard output
    /// and error are one file.
    pub fn begin_withholding(&self, shared: bool) {
        self.0.borrow_mut().record = Some(Record::new(shared));
    }

    /// Ends withholding: what the run withheld, for the playback.
    pub fn take_record(&self) -> Option<Record> {
        self.0.borrow_mut().record.take()
    }

    /// Runs `f` on the record of the run, if one withholds its output.
    fn with<T>(&self, f: impl FnOnce(&mut Record) -> T) -> Option<T> {
        self.0.borrow_mut().record.as_mut().map(f)
    }

    /// True while a run withholds its output.
    pub fn withholding(&self) -> bool {
        self.0.borrow().record.is_some()
    }

    /// Withholds `data`, output of a try or a hook bound for standard error; false when nothing is
    /// withheld, and the caller passes it on itself.
    pub fn withhold(&self, data: &[u8]) -> bool {
        self.with(|record| record.withhold(data)).is_some()
    }

    /// Withholds a copy of the standard output a failed try buffered, for standard error
    /// (`Record::copy`).
    pub fn withhold_copy(&self, spool: &Spool) {
        self.with(|record| record.copy(spool));
    }

    /// Withholds the successful try's standard output, for standard output, in its place: the run
    /// fails all the same.
    pub fn withhold_stdout(&self, spool: Spool) {
        self.with(|record| record.stdout(spool));
    }

    /// The successful try's output was passed on as it ended, its last byte `last`.
    pub fn passed_on_live(&self, last: u8) {
        self.with(|record| record.passed_on_live(last));
    }

    /// Why withholding could not use a temporary file, once.
    pub fn take_warning(&self) -> Option<String> {
        self.with(Record::take_warning).flatten()
    }

    /// Where the log's lines and the CI markers go on standard error, as [`Withhold`] says.
    pub fn lines(&self, withhold: Withhold) -> Lines {
        Lines {
            stderr: self.clone(),
            withhold,
        }
    }
}

/// What a writer of `retry`'s own lines does with them while a run withholds its output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Withhold {
    /// Writes them as they come all the same: the JSON log, which machines read as it comes.
    Never,
    /// Withholds them with the rest (the human log, the CI markers).
    WithTheRest,
    /// Withholds them to pass on whatever the end: GitHub's annotation of the run's end.
    Always,
}

/// `retry`'s standard error for the lines it writes itself (the human log, the JSON log, the
/// CI markers): each starts on a line of its own, and is withheld while a run withholds its
/// output, as `withhold` says.
pub struct Lines {
    stderr: Stderr,
    withhold: Withhold,
}

impl Out for Lines {
    fn line(&mut self, text: &[u8]) {
        let mut state = self.stderr.0.borrow_mut();
        let start = state.column.line_start(Stream::Stderr);
        let text = [start.as_bytes(), text].concat();
        match (self.withhold, state.record.as_mut()) {
            (Withhold::WithTheRest, Some(record)) => record.line(&text),
            (Withhold::Always, Some(record)) => record.always(&text),
            _ => {
                drop(state);
                write_stderr(&text);
            }
        }
    }

    fn in_place(&mut self, text: &[u8]) {
        let mut state = self.stderr.0.borrow_mut();
        match (self.withhold, state.record.as_mut()) {
            (Withhold::WithTheRest, Some(record)) => record.line(text),
            (Withhold::Always, Some(record)) => record.always(text),
            _ => {
                drop(state);
                write_stderr(text);
            }
        }
    }
}

/// Writes `text` to standard error, as it comes; a closed stderr loses it.
fn write_stderr(text: &[u8]) {
    let mut stderr = io::stderr();
    let _ = stderr.write_all(text);
    let _ = stderr.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_withheld_outside_a_run() {
        let stderr = Stderr::new();
        assert!(!stderr.withholding());
        assert!(!stderr.withhold(b"x"));
        stderr.begin_withholding(false);
        assert!(stderr.withholding() && stderr.withhold(b"x"));
        stderr.passed_on(Stream::Stderr, b"50%");
        stderr.lines(Withhold::WithTheRest).line(b"retry: a line\n");
        let mut record = stderr.take_record().expect("withheld");
        assert!(!stderr.withholding());
        record.seal();
        let played = crate::run::withheld::playlist(&record, true);
        let withheld: u64 = played.iter().map(|(_, source)| source.len()).sum();
        assert_eq!(withheld, 16, "x, a line break, and the line");
    }

    #[test]
    fn a_line_of_retry_s_own_is_withheld_only_as_its_writer_says() {
        let stderr = Stderr::new();
        stderr.begin_withholding(false);
        stderr
            .lines(Withhold::Always)
            .line(b"::warning title=retry::succeeded\n");
        stderr
            .lines(Withhold::WithTheRest)
            .line(b"retry: gave up\n");
        let mut record = stderr.take_record().expect("withheld");
        record.seal();
        assert_eq!(crate::run::withheld::playlist(&record, false).len(), 1);
        assert_eq!(crate::run::withheld::playlist(&record, true).len(), 2);
    }
}
