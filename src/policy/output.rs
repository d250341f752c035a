//! Classification by output (spec 7.3): a pattern, and a matcher that finds it in a stream of
//! bytes as it arrives, line by line, with bounded memory.

use std::fmt;

use regex::bytes::Regex;

/// A regular expression given on the command line, matched against bytes (not only UTF-8).
#[derive(Clone, Debug)]
pub struct Pattern {
    text: String,
    regex: Regex,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        self.text == other.text
    }
}

impl Pattern {
    pub fn new(text: &str) -> Result<Pattern, String> {
        let regex = Regex::new(text).map_err(|e| {
            // The regex crate's message spans several lines; keep its last, the reason.
            let reason = e.to_string();
            let reason = reason
                .lines()
                .last()
                .unwrap_or("invalid regular expression");
            format!(
                "not a valid regular expression: {}",
                reason.trim().trim_start_matches("error: ")
            )
        })?;
        Ok(Pattern {
            text: text.to_string(),
            regex,
        })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn is_match(&self, bytes: &[u8]) -> bool {
        self.regex.is_match(bytes)
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}'", self.text)
    }
}

/// The longest partial line kept between reads. A longer line is matched in windows of this
/// size that overlap by `OVERLAP` bytes, so only a match longer than the overlap that straddles
/// a window's edge can be missed.
pub const MAX_LINE: usize = 64 * 1024;
const OVERLAP: usize = 4 * 1024;

/// Finds a pattern in a stream, line by line (as grep does): a match split across two reads is
/// found, and memory stays bounded by `MAX_LINE` whatever the stream's length.
#[derive(Debug)]
pub struct LineMatcher {
    pattern: Pattern,
    partial: Vec<u8>,
    matched: bool,
}

impl LineMatcher {
    pub fn new(pattern: Pattern) -> LineMatcher {
        LineMatcher {
            pattern,
            partial: Vec::new(),
            matched: false,
        }
    }

    pub fn matched(&self) -> bool {
        self.matched
    }

    /// Feeds the next bytes of the stream.
    pub fn feed(&mut self, mut data: &[u8]) {
        if self.matched {
            return;
        }
        while let Some(nl) = data.iter().position(|&b| b == b'\n') {
            let line = &data[..nl];
            let found = if self.partial.is_empty() {
                self.pattern.is_match(line)
            } else {
                self.partial.extend_from_slice(line);
                let found = self.pattern.is_match(&self.partial);
                self.partial.clear();
                found
            };
            if found {
                self.matched = true;
                self.partial = Vec::new();
                return;
            }
            data = &data[nl + 1..];
        }
        self.partial.extend_from_slice(data);
        if self.partial.len() > MAX_LINE {
            if self.pattern.is_match(&self.partial) {
                self.matched = true;
                self.partial = Vec::new();
                return;
            }
            let keep = self.partial.len() - OVERLAP;
            self.partial.drain(..keep);
        }
    }

    /// The stream has ended: match what is left of the last line.
    pub fn finish(&mut self) {
        if !self.matched && !self.partial.is_empty() && self.pattern.is_match(&self.partial) {
            self.matched = true;
        }
        self.partial = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(p: &str) -> LineMatcher {
        LineMatcher::new(Pattern::new(p).unwrap())
    }

    #[test]
    fn finds_a_match_split_across_reads() {
        let mut m = matcher("connection reset");
        m.feed(b"error: conne");
        assert!(!m.matched());
        m.feed(b"ction reset by peer\n");
        assert!(m.matched());
    }

    #[test]
    fn matches_lines_not_across_them() {
        let mut m = matcher("a.b");
        m.feed(b"a\nb\n");
        m.finish();
        assert!(!m.matched());
        let mut m = matcher("^b$");
        m.feed(b"a\nb\nc");
        assert!(m.matched());
    }

    #[test]
    fn the_last_line_without_a_newline_counts() {
        let mut m = matcher("done$");
        m.feed(b"not yet\nall done");
        assert!(!m.matched());
        m.finish();
        assert!(m.matched());
    }

    #[test]
    fn matches_bytes_that_are_not_utf8() {
        let mut m = matcher(r"(?-u)\xff\xfe");
        m.feed(b"\x00\xff");
        m.feed(b"\xfe\n");
        assert!(m.matched());
    }

    #[test]
    fn memory_stays_bounded_on_an_endless_line() {
        let mut m = matcher("needle");
        let chunk = vec![b'x'; 10_000];
        for _ in 0..1000 {
            m.feed(&chunk);
            assert!(m.partial.len() <= MAX_LINE + chunk.len());
        }
        m.feed(b"needle");
        m.finish();
        assert!(m.matched());
    }

    #[test]
    fn invalid_patterns_are_one_line() {
        let err = Pattern::new("(unclosed").unwrap_err();
        assert!(!err.contains('\n'), "{err}");
        assert!(err.starts_with("not a valid regular expression"), "{err}");
    }
}
