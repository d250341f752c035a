//! A small reader of JSON (RFC 8259), for the lines of a dead-letter file: enough to read back
//! what the writer (`json::Obj`) writes, strict about everything else, and never a panic or an unbounded
//! recursion on what a damaged or hostile file holds.

use std::cell::Cell;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

/// How deep arrays and objects may nest: far more than a record needs, far less than the
/// stack holds.
const MAX_DEPTH: usize = 32;

/// A JSON value. Numbers keep their text: a reader takes the type it needs from it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Value>),
    /// The members in the order they were written; a key written twice is refused.
    Object(Vec<(String, Value)>),
}

impl Value {
    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// A whole number from 0 to 2^64 - 1, written without a fraction or an exponent.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Number(n) => n.parse().ok(),
            _ => None,
        }
    }

    /// A word as `Obj::words` writes it: a string, or `{"base64":"..."}` for
    /// bytes that are not UTF-8.
    pub fn as_word(&self) -> Option<OsString> {
        match self {
            Value::String(s) => Some(OsString::from(s)),
            Value::Object(members) => match members.as_slice() {
                [(key, Value::String(b64))] if key == "base64" => {
                    base64_decode(b64).map(OsString::from_vec)
                }
                _ => None,
            },
            _ => None,
        }
    }
}

/// Parses one JSON text, the whole of `text`; the error says what is wrong and at which
/// column (counted in characters, from 1).
pub fn parse(text: &str) -> Result<Value, String> {
    let mut p = Parser::new(text);
    p.space();
    let value = p.value(0)?;
    p.space();
    if p.pos < text.len() {
        return Err(p.error("unexpected text after the JSON value"));
    }
    Ok(value)
}

/// Why a line is not one whole JSON value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unparsed {
    /// Nothing in it is wrong but that it ends, as a line does whose write was cut short.
    EndsTooSoon,
    /// It is not JSON: what is wrong, and at which column.
    Wrong(String),
}

/// Parses one JSON text, the whole of `text`, in one pass, telling a text that only stops too
/// soon from one that is wrong: what [`parse`] and [`ends_too_soon`] say together.
pub fn parse_line(text: &str) -> Result<Value, Unparsed> {
    let mut p = Parser::new(text);
    p.space();
    match p.value(0) {
        Ok(value) => {
            p.space();
            match p.pos < text.len() {
                true => Err(Unparsed::Wrong(
                    p.error("unexpected text after the JSON value"),
                )),
                false => Ok(value),
            }
        }
        Err(_) if p.ran_out.get() => Err(Unparsed::EndsTooSoon),
        Err(e) => Err(Unparsed::Wrong(e)),
    }
}

/// Whether `text` is the start of a JSON value that stops too soon: nothing in it is wrong but
/// that it ends, as a line does whose write was cut short.
pub fn ends_too_soon(text: &str) -> bool {
    let mut p = Parser::new(text);
    p.space();
    p.value(0).is_err() && p.ran_out.get()
}

struct Parser<'a> {
    text: &'a str,
    /// A byte offset, always at a character boundary.
    pos: usize,
    /// Whether the error found was the end of the text.
    ran_out: Cell<bool>,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Parser<'a> {
        Parser {
            text,
            pos: 0,
            ran_out: Cell::new(false),
        }
    }

    /// Moves to the end when what is left is the start of `expected`: the text ends in it.
    fn ends_in(&mut self, expected: &str) {
        if expected.starts_with(&self.text[self.pos..]) {
            self.pos = self.text.len();
        }
    }

    fn error(&self, what: &str) -> String {
        self.ran_out.set(self.pos >= self.text.len());
        let column = self.text[..self.pos].chars().count() + 1;
        format!("{what} at column {column}")
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected '{}'", char::from(byte))))
        }
    }

    fn literal(&mut self, word: &str, value: Value) -> Result<Value, String> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            self.ends_in(word);
            Err(self.error("expected a JSON value"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(self.error("arrays or objects nested too deeply"));
        }
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Value::String),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.error("expected a JSON value")),
            None => Err(self.error("the line ends before the JSON value does")),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, String> {
        self.expect(b'{')?;
        let mut members: Vec<(String, Value)> = Vec::new();
        self.space();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(members));
        }
        loop {
            self.space();
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a key in double quotes"));
            }
            let key_at = self.pos;
            let key = self.string()?;
            if members.iter().any(|(k, _)| *k == key) {
                self.pos = key_at;
                return Err(self.error(&format!("the key \"{key}\" is given twice")));
            }
            self.space();
            self.expect(b':')?;
            self.space();
            let value = self.value(depth + 1)?;
            members.push((key, value));
            self.space();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(members));
                }
                _ => return Err(self.error("expected ',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, String> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.space();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.space();
            items.push(self.value(depth + 1)?);
            self.space();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.error("expected ',' or ']'")),
            }
        }
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.pos;
        let digits = |p: &mut Parser<'_>| {
            let from = p.pos;
            while matches!(p.peek(), Some(b'0'..=b'9')) {
                p.pos += 1;
            }
            p.pos > from
        };
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        // One zero, or digits that do not start with one.
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if matches!(self.peek(), Some(b'0'..=b'9')) {
                    return Err(self.error("not a valid number"));
                }
            }
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return Err(self.error("not a valid number")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !digits(self) {
                return Err(self.error("not a valid number"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !digits(self) {
                return Err(self.error("not a valid number"));
            }
        }
        Ok(Value::Number(self.text[start..self.pos].to_string()))
    }

    fn string(&mut self) -> Result<String, String> {
        self.expect(b'"')?;
        let mut out = String::new();
        loop {
            // The characters up to the next quote, backslash or control character, copied at
            // once: those three are ASCII, so they never fall inside another character.
            let rest = &self.text.as_bytes()[self.pos..];
            let plain = rest
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .unwrap_or(rest.len());
            out.push_str(&self.text[self.pos..self.pos + plain]);
            self.pos += plain;
            match self.peek() {
                None => return Err(self.error("the string is not closed")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    out.push(self.escape()?);
                }
                Some(_) => return Err(self.error("a control character in a string")),
            }
        }
    }

    /// The character of the escape after a backslash.
    fn escape(&mut self) -> Result<char, String> {
        let c = self
            .peek()
            .ok_or_else(|| self.error("the string is not closed"))?;
        self.pos += 1;
        Ok(match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => return self.unicode(),
            _ => {
                self.pos -= 1;
                return Err(self.error("an unknown escape in a string"));
            }
        })
    }

    /// `\uXXXX`, or a surrogate pair `\uD83D\uDE00`; a lone surrogate is refused.
    fn unicode(&mut self) -> Result<char, String> {
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                if !self.text[self.pos..].starts_with("\\u") {
                    self.ends_in("\\u");
                    return Err(self.error("a lone surrogate in a string"));
                }
                self.pos += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(self.error("a lone surrogate in a string"));
                }
                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(self.error("a lone surrogate in a string")),
            code => code,
        };
        char::from_u32(code).ok_or_else(|| self.error("not a character"))
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let rest = &self.text[self.pos..];
        if rest.len() < 4 && rest.bytes().all(|b| b.is_ascii_hexdigit()) {
            self.pos = self.text.len();
        }
        let digits = self
            .text
            .get(self.pos..self.pos + 4)
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| self.error("expected four hex digits after \\u"))?;
        self.pos += 4;
        u32::from_str_radix(digits, 16).map_err(|_| self.error("expected four hex digits"))
    }
}

/// Standard base64 with padding (RFC 4648, section 4), as `json::base64` writes it;
/// `None` for anything else.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    fn sextet(c: u8) -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    }
    let bytes = text.as_bytes();
    if bytes.len() % 4 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let chunks = bytes.len() / 4;
    for (i, chunk) in bytes.chunks(4).enumerate() {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && i + 1 != chunks) {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            n = n << 6 | sextet(c)?;
        }
        n <<= 6 * pad as u32;
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        // Bits that padding leaves over must be zero, so that each text has one meaning.
        if decoded[3 - pad..].iter().any(|&b| b != 0) {
            return None;
        }
        out.extend_from_slice(&decoded[..3 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{Obj, base64};
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn reads_back_what_the_writer_writes() {
        let words = [
            OsStr::new("sh"),
            OsStr::new("a \"quoted\" word\n\t\u{1}\u{7f}\u{202e}é😀"),
            OsStr::from_bytes(b"\xff\xfe x"),
        ];
        let line = Obj::new()
            .str("id", "x")
            .num("n", 42u64)
            .words("command", words)
            .finish();
        let value = parse(&line).unwrap();
        assert_eq!(value.get("id").and_then(Value::as_str), Some("x"));
        assert_eq!(value.get("n").and_then(Value::as_u64), Some(42));
        let Some(Value::Array(read)) = value.get("command") else {
            panic!("{value:?}")
        };
        let read: Vec<OsString> = read.iter().filter_map(Value::as_word).collect();
        assert_eq!(read, words);
    }

    #[test]
    fn every_start_of_a_line_ends_too_soon_and_nothing_else_does() {
        let line = Obj::new()
            .str("event", "dead_letter")
            .raw("label", "null")
            .raw("ok", "true")
            .str("s", "\u{1}é😀\"\\")
            .words("w", [OsStr::from_bytes(b"\xff x")])
            .num("n", 1234u64)
            .finish();
        assert!(line.contains("\\u0001"), "{line}");
        let escaped = r#"{"s":"\ud83d\ude00\n\u00e9"}"#;
        for line in [line.as_str(), escaped] {
            assert!(!ends_too_soon(line));
            for (end, _) in line.char_indices().skip(1) {
                assert!(ends_too_soon(&line[..end]), "{}", &line[..end]);
            }
        }
        for damaged in [
            "{\"a\":nux",
            "{\"a\" 1",
            "[1,,",
            "{\"a\":\"\\q",
            "x",
            "{\"a\":1}}",
        ] {
            assert!(!ends_too_soon(damaged), "{damaged}");
        }
    }

    #[test]
    fn escapes_and_surrogate_pairs_are_read() {
        let v = parse(r#"["\u00e9\ud83d\ude00\/\b\f", 1.5e3, -0, true, null, {}]"#).unwrap();
        let Value::Array(items) = v else { panic!() };
        assert_eq!(items[0], Value::String("é😀/\u{8}\u{c}".into()));
        assert_eq!(items[1].as_u64(), None);
        assert_eq!(items[3], Value::Bool(true));
    }

    #[test]
    fn damaged_text_is_an_error_with_its_column_never_a_panic() {
        for (bad, why) in [
            ("", "ends before"),
            ("{", "expected a key"),
            (r#"{"a":1"#, "expected ',' or '}'"),
            (r#"{"a":1,"a":2}"#, "given twice"),
            (r#"{"a":01}"#, "not a valid number"),
            (r#"{"a":"\ud800"}"#, "lone surrogate"),
            (r#"{"a":"\x"}"#, "unknown escape"),
            ("{\"a\":\"\u{1}\"}", "control character"),
            (r#"{"a":"é"} x"#, "after the JSON value"),
            (r#"{"a":tru}"#, "expected a JSON value"),
            (r#"{"a":"\u12"}"#, "four hex digits"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(why) && err.contains("column"), "{bad}: {err}");
        }
        let deep = "[".repeat(10_000);
        assert!(parse(&deep).unwrap_err().contains("too deeply"));
    }

    #[test]
    fn base64_round_trips_and_refuses_what_it_did_not_write() {
        for bytes in [
            &b""[..],
            b"f",
            b"fo",
            b"foo",
            b"\xff\xfe",
            b"\x00\x01\x02\x03",
        ] {
            assert_eq!(base64_decode(&base64(bytes)).as_deref(), Some(bytes));
        }
        for bad in ["Zg", "Zg=", "Z===", "Zh==", "Zg==Zg==", "Z!==", "Zm9v\n"] {
            assert_eq!(base64_decode(bad), None, "{bad}");
        }
    }
}
