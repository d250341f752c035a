//! A small writer of JSON objects whose fields keep the order they are written in, which the
//! log format promises (docs/json-log.md#the-json-log).

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;

/// One JSON object, built field by field.
#[derive(Debug)]
pub struct Obj {
    buf: String,
}

impl Default for Obj {
    fn default() -> Self {
        Obj::new()
    }
}

impl Obj {
    pub fn new() -> Obj {
        Obj {
            buf: String::from("{"),
        }
    }

    fn key(&mut self, key: &str) {
        if self.buf.len() > 1 {
            self.buf.push(',');
        }
        escape_into(&mut self.buf, key);
        self.buf.push(':');
    }

    pub fn str(mut self, key: &str, value: &str) -> Obj {
        self.key(key);
        escape_into(&mut self.buf, value);
        self
    }

    pub fn num(mut self, key: &str, value: impl Into<u64>) -> Obj {
        self.key(key);
        let _ = write!(self.buf, "{}", value.into());
        self
    }

    pub fn float(mut self, key: &str, value: f64) -> Obj {
        self.key(key);
        if value.is_finite() {
            let _ = write!(self.buf, "{value}");
        } else {
            self.buf.push_str("null");
        }
        self
    }

    pub fn bool(mut self, key: &str, value: bool) -> Obj {
        self.key(key);
        self.buf.push_str(if value { "true" } else { "false" });
        self
    }

    /// A number, or `null` for `None`.
    pub fn opt_num(mut self, key: &str, value: Option<u64>) -> Obj {
        self.key(key);
        match value {
            Some(v) => {
                let _ = write!(self.buf, "{v}");
            }
            None => self.buf.push_str("null"),
        }
        self
    }

    /// A value already in JSON.
    pub fn raw(mut self, key: &str, json: &str) -> Obj {
        self.key(key);
        self.buf.push_str(json);
        self
    }

    pub fn obj(mut self, key: &str, value: Obj) -> Obj {
        self.key(key);
        self.buf.push_str(&value.finish());
        self
    }

    /// Command words (docs/json-log.md#the-json-log), losslessly: a word that is valid UTF-8 is a
    /// JSON string; a word that is not (a file name in another encoding, binary data) is an object
    /// `{"base64":"..."}` holding its bytes in standard, padded base64 (RFC 4648, section 4). A
    /// reader tells the two apart by their JSON type, and gets back exactly the bytes that were
    /// given, never a U+FFFD in their place.
    pub fn words<'a>(mut self, key: &str, words: impl IntoIterator<Item = &'a OsStr>) -> Obj {
        self.key(key);
        self.buf.push('[');
        for (i, word) in words.into_iter().enumerate() {
            if i > 0 {
                self.buf.push(',');
            }
            push_word(&mut self.buf, word);
        }
        self.buf.push(']');
        self
    }

    /// One word, written as `words` writes each of its words.
    pub fn word(mut self, key: &str, word: &OsStr) -> Obj {
        self.key(key);
        push_word(&mut self.buf, word);
        self
    }

    pub fn finish(mut self) -> String {
        self.buf.push('}');
        self.buf
    }
}

fn push_word(buf: &mut String, word: &OsStr) {
    match std::str::from_utf8(word.as_bytes()) {
        Ok(text) => escape_into(buf, text),
        Err(_) => buf.push_str(&Obj::new().str("base64", &base64(word.as_bytes())).finish()),
    }
}

/// Standard base64 with padding (RFC 4648, section 4).
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Characters a JSON line escapes although JSON allows them raw: control characters (C0, DEL,
/// C1) and the invisible ones that reorder or hide text, the same as the human log escapes
/// ([`text::unprintable`]), so that a JSON line cannot act on a terminal either.
use crate::text::unprintable;

fn escape_into(buf: &mut String, s: &str) {
    buf.push('"');
    for c in s.chars() {
        match c {
            '"' => buf.push_str("\\\""),
            '\\' => buf.push_str("\\\\"),
            '\n' => buf.push_str("\\n"),
            '\r' => buf.push_str("\\r"),
            '\t' => buf.push_str("\\t"),
            // Every control character, and the invisible ones that reorder text, so that a
            // JSON line shown on a terminal cannot act on it.
            c if unprintable(c) => {
                let _ = write!(buf, "\\u{:04x}", c as u32);
            }
            c => buf.push(c),
        }
    }
    buf.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_keep_their_order_and_strings_are_escaped() {
        let s = Obj::new()
            .str("event", "try")
            .num("attempt", 2u64)
            .opt_num("timeout_ms", None)
            .float("factor", 1.5)
            .bool("ok", false)
            .words(
                "command",
                ["sh", "-c", "echo \"hi\"\n\u{1}"].map(OsStr::new),
            )
            .obj("outcome", Obj::new().num("exit", 7u8))
            .finish();
        assert_eq!(
            s,
            r#"{"event":"try","attempt":2,"timeout_ms":null,"factor":1.5,"ok":false,"command":["sh","-c","echo \"hi\"\n\u0001"],"outcome":{"exit":7}}"#
        );
    }

    #[test]
    fn c1_controls_and_bidi_overrides_are_escaped_too() {
        let s = Obj::new().str("a", "\u{7f}\u{9b}\u{202e}é").finish();
        assert_eq!(s, r#"{"a":"\u007f\u009b\u202eé"}"#);
    }

    #[test]
    fn base64_is_the_standard_padded_one() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (text, encoded) in vectors {
            assert_eq!(base64(text.as_bytes()), encoded);
        }
        assert_eq!(base64(&[0xfb, 0xff, 0xbf]), "+/+/");
    }

    #[test]
    fn words_that_are_not_utf8_become_base64_objects() {
        let words = [OsStr::new("a b"), OsStr::from_bytes(b"x\xff")];
        assert_eq!(
            Obj::new().words("command", words).finish(),
            r#"{"command":["a b",{"base64":"eP8="}]}"#
        );
    }
}
