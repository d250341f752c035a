//! The lines of a record file (the dead-letter file, the history): read one at a time, never
//! more than [`MAX_LINE`] bytes of one kept in memory, and told apart as a whole line, a blank
//! one, one cut short by a write that did not finish, and one too long to be a record.

use std::io::{self, BufRead, Read};

/// The longest line read: a record holds a command line, which the kernel keeps to 2 MiB of
/// arguments and environment together; a longer line is no record.
pub const MAX_LINE: usize = 1 << 20;

/// One line of a record file, its line break taken off.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// A line of text.
    Text(&'a str),
    /// A line of nothing but white space.
    Blank,
    /// The start of a line whose write did not finish (a character cut in two at its end).
    CutShort,
    /// A line that is not UTF-8.
    NotUtf8,
    /// A line over [`MAX_LINE`] bytes, read past without being kept.
    TooLong,
}

/// Reads lines from a record file, numbering them from 1.
pub struct Lines<R> {
    input: R,
    raw: Vec<u8>,
    number: usize,
}

impl<R: BufRead> Lines<R> {
    pub fn new(input: R) -> Lines<R> {
        Lines {
            input,
            raw: Vec::new(),
            number: 0,
        }
    }

    /// The next line and its number, `None` at the end; only a failure to read is an error.
    pub fn next_line(&mut self) -> io::Result<Option<(usize, Line<'_>)>> {
        self.raw.clear();
        let read = (&mut self.input)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut self.raw)?;
        if read == 0 {
            return Ok(None);
        }
        self.number += 1;
        if self.raw.last() == Some(&b'\n') {
            self.raw.pop();
        } else if self.raw.len() > MAX_LINE {
            skip_line(&mut self.input)?;
            return Ok(Some((self.number, Line::TooLong)));
        }
        let line = match std::str::from_utf8(&self.raw) {
            Ok(text) if text.trim().is_empty() => Line::Blank,
            Ok(text) => Line::Text(text),
            Err(e) if e.error_len().is_none() => Line::CutShort,
            Err(_) => Line::NotUtf8,
        };
        Ok(Some((self.number, line)))
    }
}

/// Reads past the rest of the line, up to its line break or the end, keeping none of it.
fn skip_line(input: &mut impl BufRead) -> io::Result<()> {
    loop {
        let buf = match input.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(at) => {
                input.consume(at + 1);
                return Ok(());
            }
            None => {
                let all = buf.len();
                input.consume(all);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_told_apart_and_a_long_one_is_read_past() {
        let mut text = b"one\n\n  \nnot \xff utf-8\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
        text.extend_from_slice(b"\nafter\ncut \xc3");
        let mut lines = Lines::new(&text[..]);
        let mut seen = Vec::new();
        while let Some((n, line)) = lines.next_line().unwrap() {
            seen.push(format!("{n} {line:?}"));
        }
        assert_eq!(
            seen,
            [
                "1 Text(\"one\")",
                "2 Blank",
                "3 Blank",
                "4 NotUtf8",
                "5 TooLong",
                "6 Text(\"after\")",
                "7 CutShort",
            ]
        );
    }
}
