//! The character set of what `retry` prints (docs/log.md#human-format): UTF-8, or ASCII only when
//! the locale's character set is not UTF-8 ([`Charset`], chosen once in `config` from the locale).
//! The conversions are pure and take the choice as an argument.

use std::fmt::Write as _;
use std::io::{self, Write};

pub use crate::text::Charset;

/// The ASCII stand-in for a character that `retry` itself prints, if it has one.
fn stand_in(c: char) -> Option<&'static str> {
    Some(match c {
        'µ' | 'μ' => "u",
        '×' => "x",
        '≥' => ">=",
        '≤' => "<=",
        '±' => "+/-",
        '█' | '▄' | '▅' | '▆' | '▇' => "#",
        '▁' | '▂' | '▃' => ".",
        '…' => "...",
        '−' | '–' | '—' => "-",
        '→' => "->",
        '‘' | '’' => "'",
        '“' | '”' => "\"",
        _ => return None,
    })
}

/// Human text in ASCII: `retry`'s own symbols become their stand-ins (`µs` -> `us`, `×` ->
/// `x`, `≥` -> `>=`, `█` -> `#`), any other character outside ASCII its UTF-8 bytes as `\xHH`.
pub fn ascii_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else if let Some(s) = stand_in(c) {
            out.push_str(s);
        } else {
            let mut buf = [0; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out
}

/// JSON text in ASCII: every character outside ASCII as a `\uXXXX` escape (a surrogate pair
/// above U+FFFF), which every JSON reader turns back into the same character. Outside ASCII
/// only string contents can occur, so escaping the whole text is safe.
pub fn ascii_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0; 2];
            for u in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{u:04x}");
            }
        }
    }
    out
}

/// A writer that makes what passes through it ASCII when `ascii` is on (human text with
/// `ascii_text`, JSON lines with `ascii_json`), and passes it on unchanged otherwise.
pub struct Output<W: Write> {
    inner: W,
    ascii: bool,
    json: bool,
    /// The start of a character split between two writes.
    pending: Vec<u8>,
}

impl<W: Write> Output<W> {
    /// Follows the process-wide switch.
    pub fn with(inner: W, ascii: bool, json: bool) -> Output<W> {
        Output {
            inner,
            ascii,
            json,
            pending: Vec::new(),
        }
    }

    fn convert(&self, text: &str) -> String {
        if self.json {
            ascii_json(text)
        } else {
            ascii_text(text)
        }
    }
}

impl<W: Write> Write for Output<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !self.ascii {
            return self.inner.write(buf);
        }
        self.pending.extend_from_slice(buf);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        while !rest.is_empty() {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out += &self.convert(text);
                    rest = &[];
                }
                Err(e) => {
                    let (good, after) = rest.split_at(e.valid_up_to());
                    out += &self.convert(std::str::from_utf8(good).unwrap_or_default());
                    // An incomplete character at the end waits for the next write.
                    let Some(bad) = e.error_len() else {
                        rest = after;
                        break;
                    };
                    for b in &after[..bad] {
                        let _ = write!(out, "\\x{b:02x}");
                    }
                    rest = &after[bad..];
                }
            }
        }
        let used = self.pending.len() - rest.len();
        self.pending.drain(..used);
        self.inner.write_all(out.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_s_own_symbols_have_ascii_stand_ins() {
        assert_eq!(
            ascii_text("1µs, 2 × 3, 9s ≥ 8s, ███ … more"),
            "1us, 2 x 3, 9s >= 8s, ### ... more"
        );
        assert_eq!(ascii_text("▁▂▃▄▅▆▇█"), "...#####");
        assert_eq!(ascii_text("10ms ± 2ms"), "10ms +/- 2ms");
        assert_eq!(ascii_text("café"), "caf\\xc3\\xa9");
        assert_eq!(ascii_text("plain"), "plain");
    }

    #[test]
    fn json_in_ascii_escapes_what_is_outside_it() {
        assert_eq!(
            ascii_json(r#"{"a":"≥ é 😀"}"#),
            r#"{"a":"\u2265 \u00e9 \ud83d\ude00"}"#
        );
    }

    #[test]
    fn the_writer_converts_characters_split_between_writes() {
        let mut out = Output::with(Vec::new(), true, false);
        let text = "a × b ≥ c\n".as_bytes();
        for b in text {
            out.write_all(std::slice::from_ref(b)).unwrap();
        }
        out.write_all(b"bad \xff end").unwrap();
        assert_eq!(
            String::from_utf8(out.inner).unwrap(),
            "a x b >= c\nbad \\xff end"
        );
        let mut out = Output::with(Vec::new(), false, false);
        out.write_all("a × b".as_bytes()).unwrap();
        assert_eq!(String::from_utf8(out.inner).unwrap(), "a × b");
    }
}
