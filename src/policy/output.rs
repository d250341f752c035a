//! Classification by output (docs/classification.md#classification-by-output): a pattern, and a
//! matcher that finds it in a stream of bytes as it arrives, line by line, with bounded memory.

use std::fmt;
use std::ops::Range;

use regex_automata::util::syntax;
use regex_automata::{Input, MatchKind, PatternID, meta};

/// A regular expression given on the command line, matched against bytes (not only UTF-8).
#[derive(Clone, Debug)]
pub struct Pattern {
    text: String,
    regex: meta::Regex,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        self.text == other.text
    }
}

impl Pattern {
    pub fn new(text: &str) -> Result<Pattern, String> {
        refuse_named_classes(text)?;
        // Built as `regex::bytes::Regex::new` builds it: the same syntax, limits and matches.
        let regex = meta::Builder::new()
            .configure(
                meta::Config::new()
                    .match_kind(MatchKind::LeftmostFirst)
                    .utf8_empty(false)
                    .nfa_size_limit(Some(10 * (1 << 20)))
                    .hybrid_cache_capacity(2 * (1 << 20)),
            )
            .syntax(syntax::Config::new().utf8(false))
            .build(text)
            .map_err(|e| format!("not a valid regular expression: {}", reason(&e)))?;
        Ok(Pattern {
            text: text.to_string(),
            regex,
        })
    }

    /// A pattern whose first capture group holds what is wanted of each match: one without a
    /// group is refused.
    pub fn capturing(text: &str) -> Result<Pattern, String> {
        let pattern = Pattern::new(text)?;
        // Group 0 is the whole match.
        if pattern.regex.group_info().group_len(PatternID::ZERO) < 2 {
            return Err(
                "the regular expression has no capture group: put the wait in one, as in 'Retry-After: (\\d+)'"
                    .into(),
            );
        }
        Ok(pattern)
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn is_match(&self, bytes: &[u8]) -> bool {
        self.regex.is_match(bytes)
    }

    /// Whether a match lies within `bytes[span]`. Look-around at the span's edges (`^`, `$`,
    /// `\b`) sees the bytes beyond them: `^` matches at `span.start` only if it is 0, `$` at
    /// `span.end` only if it is `bytes.len()`.
    fn is_match_in(&self, bytes: &[u8], span: Range<usize>) -> bool {
        self.regex.is_match(Input::new(bytes).span(span))
    }

    /// Calls `each` with the first capture group of every match within `bytes[span]`, in
    /// order, look-around at the span's edges seeing the bytes beyond them as `is_match_in`.
    fn each_group(&self, bytes: &[u8], span: Range<usize>, each: &mut impl FnMut(Option<&[u8]>)) {
        // Most lines do not match: the fast engines say so before any group is looked for.
        if !self.is_match_in(bytes, span.clone()) {
            return;
        }
        for caps in self.regex.captures_iter(Input::new(bytes).span(span)) {
            each(caps.get_group(1).map(|g| &bytes[g.range()]));
        }
    }
}

/// Refuses a Unicode class by name (`\pL`, `\p{Greek}`, `\P{Lu}`): `retry` is built without
/// the tables of Unicode's classes (their pointers cost every start, see docs/startup.md), so
/// such a class would be "not found". Said here, the refusal names what is missing, and is the
/// same in every build (a test build links the tables for other crates). What a pattern still
/// has: Unicode case folding with `(?i)`, and Unicode-aware `\w`, `\d`, `\s` and `\b`.
fn refuse_named_classes(text: &str) -> Result<(), String> {
    use regex_syntax::ast::{self, Ast, ClassSetItem, Visitor};

    /// Stops at the first named class.
    struct Named;
    impl Visitor for Named {
        type Output = ();
        type Err = ();
        fn finish(self) -> Result<(), ()> {
            Ok(())
        }
        fn visit_pre(&mut self, ast: &Ast) -> Result<(), ()> {
            match ast {
                Ast::ClassUnicode(_) => Err(()),
                _ => Ok(()),
            }
        }
        fn visit_class_set_item_pre(&mut self, item: &ClassSetItem) -> Result<(), ()> {
            match item {
                ClassSetItem::Unicode(_) => Err(()),
                _ => Ok(()),
            }
        }
    }
    // A pattern that does not parse is left to the builder, which says why.
    let Ok(parsed) = ast::parse::Parser::new().parse(text) else {
        return Ok(());
    };
    ast::visit(&parsed, Named).map_err(|()| {
        "not a valid regular expression: Unicode classes by name (\\p{...}, \\P{...}) are not \
            supported; use a bracketed class such as [a-zA-Z] or \\w"
            .to_string()
    })
}

/// Why a pattern was refused, on one line.
fn reason(e: &meta::BuildError) -> String {
    if let Some(limit) = e.size_limit() {
        return format!("Compiled regex exceeds size limit of {limit} bytes.");
    }
    // A syntax error's message spans several lines, the pattern drawn with a caret under the
    // fault; keep its last, the reason.
    let message = match e.syntax_error() {
        Some(syntax) => syntax.to_string(),
        None => e.to_string(),
    };
    message
        .lines()
        .last()
        .unwrap_or("invalid regular expression")
        .trim()
        .trim_start_matches("error: ")
        .to_string()
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}'", self.text)
    }
}

/// The longest partial line kept between reads. A longer line is matched in windows of this
/// size that overlap by `OVERLAP` bytes, so only a match longer than the overlap that straddles
/// a window's edge can be missed. Anchors still mean the line's start and end (as in grep), not
/// a window's: each window is searched with `CONTEXT` bytes of the line on either side of it.
pub const MAX_LINE: usize = 64 * 1024;
const OVERLAP: usize = 4 * 1024;
/// All that look-around (`^`, `$`, `\b`) reads beyond a window's edge: one character, at most 4
/// bytes in UTF-8.
const CONTEXT: usize = 4;

/// A stream cut into lines (as grep reads it), with bounded memory: each complete line, and
/// each window of a line longer than `MAX_LINE`, is handed to a search.
#[derive(Debug, Default)]
struct Lines {
    /// The current line's bytes kept between reads.
    partial: Vec<u8>,
    /// `partial` does not begin the line: its first `CONTEXT` bytes end the window searched
    /// before, kept only so that look-around at this window's start sees them.
    mid_line: bool,
}

impl Lines {
    /// Feeds the next bytes of the stream, calling `search(haystack, span)` on each line or
    /// window they complete, in order; stops at the first search that returns true, and then
    /// returns true.
    fn feed(
        &mut self,
        mut data: &[u8],
        mut search: impl FnMut(&[u8], Range<usize>) -> bool,
    ) -> bool {
        while let Some(nl) = data.iter().position(|&b| b == b'\n') {
            let line = &data[..nl];
            let found = if self.partial.is_empty() && !self.mid_line {
                search(line, 0..line.len())
            } else {
                self.partial.extend_from_slice(line);
                let found = self.search_window(true, &mut search);
                self.partial.clear();
                self.mid_line = false;
                found
            };
            if found {
                return true;
            }
            data = &data[nl + 1..];
        }
        self.partial.extend_from_slice(data);
        if self.partial.len() > MAX_LINE {
            if self.search_window(false, &mut search) {
                return true;
            }
            // The next window starts `OVERLAP` bytes before this one's end, with its context
            // before it; this one's context after it is in the overlap.
            let drop = self.partial.len() - (OVERLAP + 2 * CONTEXT);
            self.partial.drain(..drop);
            self.mid_line = true;
        }
        false
    }

    /// Searches `partial`, the window of the line kept so far, leaving out the context before
    /// it (when the line started in an earlier window) and after it (when the line goes on), so
    /// that `^` and `$` match only at the line's true start and end.
    fn search_window(
        &self,
        line_ended: bool,
        search: &mut impl FnMut(&[u8], Range<usize>) -> bool,
    ) -> bool {
        let start = if self.mid_line { CONTEXT } else { 0 };
        let end = if line_ended {
            self.partial.len()
        } else {
            self.partial.len() - CONTEXT
        };
        search(&self.partial, start..end)
    }

    /// The stream has ended: search what is left of the last line, and forget it.
    fn finish(&mut self, mut search: impl FnMut(&[u8], Range<usize>) -> bool) -> bool {
        let found = !self.partial.is_empty() && self.search_window(true, &mut search);
        self.clear();
        found
    }

    fn clear(&mut self) {
        self.partial = Vec::new();
        self.mid_line = false;
    }
}

/// Finds a pattern in a stream, line by line (as grep does): a match split across two reads is
/// found, and memory stays bounded by `MAX_LINE` whatever the stream's length.
#[derive(Debug)]
pub struct LineMatcher {
    pattern: Pattern,
    lines: Lines,
    matched: bool,
}

impl LineMatcher {
    pub fn new(pattern: Pattern) -> LineMatcher {
        LineMatcher {
            pattern,
            lines: Lines::default(),
            matched: false,
        }
    }

    pub fn matched(&self) -> bool {
        self.matched
    }

    /// Feeds the next bytes of the stream.
    pub fn feed(&mut self, data: &[u8]) {
        if self.matched {
            return;
        }
        let pattern = &self.pattern;
        if self
            .lines
            .feed(data, |hay, span| pattern.is_match_in(hay, span))
        {
            self.matched = true;
            self.lines.clear();
        }
    }

    /// The stream has ended: match what is left of the last line.
    pub fn finish(&mut self) {
        let pattern = &self.pattern;
        let found = self
            .lines
            .finish(|hay, span| pattern.is_match_in(hay, span));
        self.matched |= found;
    }
}

/// Finds every match of a pattern in a stream, line by line as `LineMatcher` does, and hands
/// over, match by match in the order they come, what its first capture group holds (`None`
/// when the group took no part in the match). A match found twice, in the overlap of two
/// windows of a line longer than `MAX_LINE`, is handed over twice.
#[derive(Debug)]
pub struct CaptureMatcher {
    pattern: Pattern,
    lines: Lines,
}

impl CaptureMatcher {
    pub fn new(pattern: Pattern) -> CaptureMatcher {
        CaptureMatcher {
            pattern,
            lines: Lines::default(),
        }
    }

    /// Feeds the next bytes of the stream; `each` gets the group of every match they complete.
    pub fn feed(&mut self, data: &[u8], mut each: impl FnMut(Option<&[u8]>)) {
        let pattern = &self.pattern;
        self.lines.feed(data, |hay, span| {
            pattern.each_group(hay, span, &mut each);
            false
        });
    }

    /// The stream has ended: `each` gets the groups of the matches in the last line.
    pub fn finish(&mut self, mut each: impl FnMut(Option<&[u8]>)) {
        let pattern = &self.pattern;
        self.lines.finish(|hay, span| {
            pattern.each_group(hay, span, &mut each);
            false
        });
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
            assert!(m.lines.partial.len() <= MAX_LINE + chunk.len());
        }
        m.feed(b"needle");
        m.finish();
        assert!(m.matched());
    }

    /// Feeds `line` in reads of 8 KiB, as a pipe delivers it, then ends it with a newline.
    fn feed_line(m: &mut LineMatcher, line: &[u8]) {
        for chunk in line.chunks(8 * 1024) {
            m.feed(chunk);
        }
        m.feed(b"\n");
    }

    /// A 200 KiB line: `pad` bytes of `x`, then `ERROR` over and over.
    fn errors_after(pad: usize) -> Vec<u8> {
        let mut line = vec![b'x'; pad];
        line.extend(b"ERROR".repeat(40 * 1024));
        line
    }

    #[test]
    fn a_caret_does_not_match_at_a_window_edge_inside_a_long_line() {
        // One of five paddings puts an `ERROR` at the start of whatever window follows the first.
        for pad in 1..=5 {
            let mut m = matcher("^ERROR");
            feed_line(&mut m, &errors_after(pad));
            assert!(!m.matched(), "padding {pad}");
            let mut m = matcher("^ERROR");
            m.feed(&errors_after(pad));
            m.finish();
            assert!(!m.matched(), "padding {pad}, no newline");
        }
    }

    #[test]
    fn a_caret_matches_at_the_start_of_a_long_line() {
        let mut m = matcher("^ERROR");
        feed_line(&mut m, &errors_after(0));
        assert!(m.matched());
        // The start of the second line of a stream is a line's start too.
        let mut m = matcher("^ERROR");
        feed_line(&mut m, &errors_after(1));
        feed_line(&mut m, &errors_after(0));
        assert!(m.matched());
        let mut m = matcher("(?m)^ERROR");
        feed_line(&mut m, &errors_after(1));
        assert!(!m.matched(), "multi-line mode: still no line starts inside");
        feed_line(&mut m, &errors_after(0));
        assert!(m.matched());
    }

    #[test]
    fn a_dollar_does_not_match_at_a_window_edge_inside_a_long_line() {
        let mut line = vec![b'x'; 200 * 1024];
        line.push(b'y');
        for p in ["x$", "(?m)x$"] {
            let mut m = matcher(p);
            feed_line(&mut m, &line);
            assert!(!m.matched(), "{p}");
            let mut m = matcher(p);
            m.feed(&line);
            m.finish();
            assert!(!m.matched(), "{p}, no newline");
        }
    }

    #[test]
    fn a_dollar_matches_at_the_end_of_a_long_line() {
        let mut line = vec![b'y'];
        line.extend(vec![b'x'; 200 * 1024]);
        let mut m = matcher("x$");
        feed_line(&mut m, &line);
        assert!(m.matched());
        let mut m = matcher("x$");
        m.feed(&line);
        assert!(!m.matched(), "the line has not ended yet");
        m.finish();
        assert!(m.matched());
    }

    #[test]
    fn word_boundaries_see_the_bytes_before_a_window() {
        // `xERRORERROR...` has no word boundary before any `E`.
        for pad in 1..=5 {
            let mut m = matcher(r"\bERROR");
            feed_line(&mut m, &errors_after(pad));
            assert!(!m.matched(), "padding {pad}");
        }
    }

    #[test]
    fn a_match_straddling_a_window_edge_is_found() {
        // The first read fills a window that ends inside `needle`.
        let mut first = vec![b'x'; MAX_LINE - 2];
        first.extend(b"nee");
        let mut m = matcher("needle$");
        m.feed(&first);
        m.feed(b"dle");
        assert!(!m.matched());
        m.feed(b"\n");
        assert!(m.matched());
        let mut m = matcher("needle");
        m.feed(&first);
        m.feed(b"dle and more\n");
        assert!(m.matched());
    }

    #[test]
    fn unicode_classes_by_name_are_refused_and_the_rest_of_unicode_is_kept() {
        for p in [
            r"\pL",
            r"\p{Greek}",
            r"\P{Lu}",
            r"[\p{Lu}x]",
            r"a|(?i:\p{sc=Greek})",
        ] {
            let err = Pattern::new(p).unwrap_err();
            assert!(err.contains("Unicode classes by name"), "{p}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
        // Written out, such a pattern is plain text.
        assert!(Pattern::new(r"\\pL").unwrap().is_match(br"\pL"));
        // Case folding and the Perl classes stay Unicode-aware.
        assert!(
            Pattern::new("(?i)ошибка")
                .unwrap()
                .is_match("ОШИБКА".as_bytes())
        );
        assert!(
            Pattern::new("(?i)straße")
                .unwrap()
                .is_match("STRAẞE".as_bytes())
        );
        assert!(
            Pattern::new(r"^\w+$")
                .unwrap()
                .is_match("überall".as_bytes())
        );
        assert!(Pattern::new(r"^\d$").unwrap().is_match("٣".as_bytes()));
        assert!(
            Pattern::new(r"a\sb")
                .unwrap()
                .is_match("a\u{2003}b".as_bytes())
        );
        assert!(Pattern::new(r"\bé").unwrap().is_match(" é".as_bytes()));
        assert!(!Pattern::new(r"\bé").unwrap().is_match("aé".as_bytes()));
    }

    #[test]
    fn invalid_patterns_are_one_line() {
        let err = Pattern::new("(unclosed").unwrap_err();
        assert!(!err.contains('\n'), "{err}");
        assert!(err.starts_with("not a valid regular expression"), "{err}");
    }

    /// Every group a capture matcher hands over, as text (`-` for a group that took no part).
    fn groups(p: &str, reads: &[&[u8]]) -> Vec<String> {
        let mut m = CaptureMatcher::new(Pattern::capturing(p).unwrap());
        let mut seen = Vec::new();
        let mut each = |g: Option<&[u8]>| {
            seen.push(g.map_or("-".into(), |g| String::from_utf8_lossy(g).into_owned()))
        };
        for read in reads {
            m.feed(read, &mut each);
        }
        m.finish(&mut each);
        seen
    }

    #[test]
    fn a_capture_matcher_hands_over_every_group_in_order() {
        assert_eq!(
            groups(
                r"Retry-After: (\d+)",
                &[
                    b"HTTP/1.1 503\r\nRetry-Af",
                    b"ter: 30\r\n\r\nRetry-After: 7"
                ]
            ),
            ["30", "7"]
        );
        assert_eq!(
            groups(r"in (\S+)", &[b"retry in 2m or in 3m\nnothing here\n"]),
            ["2m", "3m"]
        );
        assert_eq!(groups(r"wait (\d+)|busy", &[b"busy\n"]), ["-"]);
        assert!(groups(r"wait (\d+)", &[b"no match\n"]).is_empty());
    }

    #[test]
    fn a_capture_matcher_sees_a_group_in_a_long_line() {
        let mut line = vec![b'x'; 200 * 1024];
        line.extend(b" retry in 5s");
        assert_eq!(groups(r"retry in (\S+)$", &[&line]), ["5s"]);
    }

    #[test]
    fn a_pattern_for_a_wait_needs_a_capture_group() {
        assert!(Pattern::capturing(r"Retry-After: (\d+)").is_ok());
        assert!(Pattern::capturing(r"(?:a)(b)").is_ok());
        for p in [r"Retry-After: \d+", r"(?:\d+)"] {
            let err = Pattern::capturing(p).unwrap_err();
            assert!(err.contains("no capture group"), "{p}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
        let err = Pattern::capturing("(unclosed").unwrap_err();
        assert!(err.starts_with("not a valid regular expression"), "{err}");
    }
}
