//! The reader of JSON (RFC 8259), for the lines of the dead-letter and history files:
//! `serde_json`'s parser, which takes time linear in a line whatever it holds, building this
//! module's [`Value`] through a visitor that refuses a key given twice and nesting past
//! [`MAX_DEPTH`]; never a panic or an unbounded recursion on what a damaged or hostile file
//! holds. Its errors are reworded in the reader's own terms, the column counted in characters.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fmt;
use std::os::unix::ffi::OsStringExt;

use serde_core::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// How deep arrays and objects may nest: far more than a record needs, far less than the
/// stack holds.
const MAX_DEPTH: usize = 32;

/// A JSON value. A number is kept as text, a reader takes the type it needs from it: a whole
/// number from -2^63 to 2^64 - 1 as written, any other as Rust writes its nearest `f64`
/// (`1.5e3` as `1500.0`), so that it never reads as a whole number.
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
    read(text).map_err(|e| message(text, &e))
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
    read(text).map_err(|e| match e.is_eof() {
        true => Unparsed::EndsTooSoon,
        false => Unparsed::Wrong(message(text, &e)),
    })
}

/// Whether `text` is the start of a JSON value that stops too soon: nothing in it is wrong but
/// that it ends, as a line does whose write was cut short.
pub fn ends_too_soon(text: &str) -> bool {
    read(text).is_err_and(|e| e.is_eof())
}

/// The whole of `text` as one value, by `serde_json`'s parser and [`Nested`]'s checks.
fn read(text: &str) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Nested { depth: 0 }.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// What is wrong, in the reader's words, and the column where it was found.
fn message(text: &str, error: &serde_json::Error) -> String {
    let full = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    let what = full.strip_suffix(&suffix).unwrap_or(&full);
    match error.is_eof() {
        true => format!(
            "the line ends before the JSON value does at column {}",
            text.chars().count() + 1
        ),
        false => format!("{} at column {}", in_our_words(what), column(text, error)),
    }
}

/// `serde_json`'s description of a syntax error as the reader has always worded it; the
/// reader's own refusals (a key given twice, nesting too deep) pass unchanged.
fn in_our_words(what: &str) -> &str {
    match what {
        "expected value" | "expected ident" => "expected a JSON value",
        "expected `:`" => "expected ':'",
        "expected `,` or `]`" => "expected ',' or ']'",
        "expected `,` or `}`" => "expected ',' or '}'",
        "key must be a string" => "expected a key in double quotes",
        "trailing comma" => "a comma before the closing bracket",
        "trailing characters" => "unexpected text after the JSON value",
        "invalid number" => "not a valid number",
        "number out of range" => "a number too large for a float",
        "invalid escape" => "an invalid escape in a string",
        "control character (\\u0000-\\u001F) found while parsing a string" => {
            "a control character in a string"
        }
        "lone leading surrogate in hex escape" | "unexpected end of hex escape" => {
            "a lone surrogate in a string"
        }
        "recursion limit exceeded" => TOO_DEEP,
        other => other,
    }
}

/// The column of the error, in characters from 1: `serde_json` counts bytes from the start
/// of the error's line.
fn column(text: &str, error: &serde_json::Error) -> usize {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(error.line().saturating_sub(1))
        .map(str::len)
        .sum();
    let at = (line_start + error.column().saturating_sub(1)).min(text.len());
    let is_char_start = |b: &u8| (b & 0xC0) != 0x80;
    text.as_bytes()[..at]
        .iter()
        .filter(|b| is_char_start(b))
        .count()
        + 1
}

const TOO_DEEP: &str = "arrays or objects nested too deeply";

/// A value at `depth` arrays and objects down: deeper than [`MAX_DEPTH`] is refused before
/// anything of it is read, and an object's key given twice is refused where it is read.
#[derive(Clone, Copy)]
struct Nested {
    depth: usize,
}

impl Nested {
    fn inside(self) -> Nested {
        Nested {
            depth: self.depth + 1,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Nested {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        if self.depth > MAX_DEPTH {
            return Err(de::Error::custom(TOO_DEEP));
        }
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Nested {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.to_string()))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.to_string()))
    }

    /// A number with a fraction, an exponent, a minus zero or past 2^64: written with a
    /// fraction, so that it never reads as a whole number.
    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Value::Number(format!("{n:?}")))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.inside())? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Members::default();
        while let Some(key) = map.next_key::<String>()? {
            if !members.is_new(&key) {
                return Err(de::Error::custom(format!(
                    "the key \"{key}\" is given twice"
                )));
            }
            members
                .list
                .push((key, map.next_value_seed(self.inside())?));
        }
        Ok(Value::Object(members.list))
    }
}

/// An object's members as they are read, and the keys seen so far: searched in the list while
/// it is short, in a set once it is not, so that an object of any size is read in linear time.
#[derive(Default)]
struct Members {
    list: Vec<(String, Value)>,
    seen: HashSet<String>,
}

/// How many members an object has before its keys are looked up in a set.
const FEW: usize = 16;

impl Members {
    /// Whether `key` is not among the members yet.
    fn is_new(&mut self, key: &str) -> bool {
        if self.list.len() < FEW {
            return !self.list.iter().any(|(k, _)| k == key);
        }
        if self.seen.is_empty() {
            self.seen = self.list.iter().map(|(k, _)| k.clone()).collect();
        }
        self.seen.insert(key.to_owned())
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
            ("{", "ends before"),
            (r#"{"a":1,"#, "ends before"),
            ("{1:2}", "expected a key"),
            (r#"{"a":1"#, "ends before"),
            (r#"{"a":1 2}"#, "expected ',' or '}'"),
            ("[1 2]", "expected ',' or ']'"),
            (r#"{"a" 1}"#, "expected ':'"),
            (r#"{"a":1,"a":2}"#, "given twice"),
            (r#"{"a":01}"#, "not a valid number"),
            (r#"{"a":"\ud800"}"#, "lone surrogate"),
            (r#"{"a":"\x"}"#, "invalid escape"),
            ("{\"a\":\"\u{1}\"}", "control character"),
            (r#"{"a":"é"} x"#, "after the JSON value"),
            (r#"{"a":tru}"#, "expected a JSON value"),
            (r#"{"a":"\u12"}"#, "invalid escape"),
            ("[1,]", "a comma before the closing bracket"),
            ("[1e400]", "too large"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(why) && err.contains("column"), "{bad}: {err}");
        }
        let deep = "[".repeat(10_000);
        assert!(parse(&deep).unwrap_err().contains("too deeply"));
    }

    /// One object of `keys` members `"k00000":0`.
    fn wide_object(keys: usize) -> String {
        let members: Vec<String> = (0..keys)
            .map(|i| format!("\"k{i:05}\":{}", i % 10))
            .collect();
        format!("{{{}}}", members.join(","))
    }

    #[test]
    fn an_object_of_90000_keys_under_the_line_limit_is_read_in_linear_time() {
        let line = wide_object(90_000);
        assert!(line.len() < 1 << 20, "{}", line.len());
        let started = std::time::Instant::now();
        let value = parse_line(&line).unwrap();
        // Linear, this is milliseconds; a search of the keys before each key took 14 s.
        assert!(
            started.elapsed().as_secs_f64() < 2.0,
            "{:?}",
            started.elapsed()
        );
        let Value::Object(members) = &value else {
            panic!("not an object")
        };
        assert_eq!(members.len(), 90_000);
        assert_eq!(members[89_999].0, "k89999");
        assert_eq!(value.get("k89999").and_then(Value::as_u64), Some(9));
    }

    #[test]
    fn a_key_given_twice_is_refused_wherever_it_is() {
        let wide = wide_object(1000);
        let wide_body = &wide[1..wide.len() - 1];
        for (line, key) in [
            (r#"{"a":1,"a":2}"#.to_string(), "a"),
            (r#"{"a":1,"b":2,"a":3}"#.to_string(), "a"),
            (r#"[1,{"x":[{"a":{},"a":null}]}]"#.to_string(), "a"),
            (r#"{"\u0061":1,"a":2}"#.to_string(), "a"),
            (format!("{{{wide_body},\"k00003\":0}}"), "k00003"),
            (format!("{{{wide_body},\"k00999\":0}}"), "k00999"),
            (
                format!("[{{{wide_body},\"x\":[{{\"k\":1,\"k\":2}}]}}]"),
                "k",
            ),
        ] {
            let Err(Unparsed::Wrong(why)) = parse_line(&line) else {
                panic!("{line:.80} was read")
            };
            assert!(
                why.contains(&format!("the key \"{key}\" is given twice")),
                "{why}"
            );
        }
        // The same key in two objects, and a line cut short after a key given twice.
        assert!(parse_line(r#"[{"a":1},{"a":2,"b":{"a":3}}]"#).is_ok());
        assert!(matches!(
            parse_line(r#"{"a":1,"a""#),
            Err(Unparsed::Wrong(_))
        ));
    }

    #[test]
    fn nesting_deeper_than_the_bound_is_refused_without_a_stack_overflow() {
        let arrays = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(parse_line(&arrays(MAX_DEPTH + 1)).is_ok());
        for deep in [
            arrays(MAX_DEPTH + 2),
            "[".repeat(1_000_000),
            format!("{}1{}", "{\"a\":".repeat(100_000), "}".repeat(100_000)),
            format!("{}1", "[{\"a\":".repeat(100_000)),
        ] {
            let Err(Unparsed::Wrong(why)) = parse_line(&deep) else {
                panic!("{:.40} was not refused", deep)
            };
            assert!(why.contains("nested too deeply"), "{why}");
        }
    }

    #[test]
    fn only_a_whole_number_written_as_one_is_a_u64() {
        for (text, whole) in [
            ("0", Some(0)),
            ("18446744073709551615", Some(u64::MAX)),
            ("18446744073709551616", None),
            ("-0", None),
            ("-1", None),
            ("1.0", None),
            ("1e2", None),
            ("1.5E-3", None),
        ] {
            assert_eq!(parse(text).unwrap().as_u64(), whole, "{text}");
        }
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
