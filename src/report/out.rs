//! Where a sink writes what people read: `retry`'s standard error, which the shell owns and
//! hands over (it knows where the line stands, and what `--output-on-failure` withholds:
//! `run::stderr`), or a file, or anything else that takes bytes, which needs none of that.

use std::io::Write;

/// What a sink writes its text to. Writing never fails the run: a closed stderr loses the log,
/// not the command's result.
pub trait Out {
    /// Writes one line of `retry`'s own (a log line, a CI marker, a JSON object), with its
    /// line break: on standard error, it starts on a line of its own.
    fn line(&mut self, text: &[u8]);

    /// Writes `text` where the cursor stands, as a status line redrawn in place (the
    /// countdown) is: it starts no line.
    fn in_place(&mut self, text: &[u8]);
}

/// A file, or a test's buffer: what is written goes as it comes.
impl<W: Write + ?Sized> Out for W {
    fn line(&mut self, text: &[u8]) {
        self.in_place(text);
    }

    fn in_place(&mut self, text: &[u8]) {
        let _ = self.write_all(text);
        let _ = self.flush();
    }
}
