//! The lines of a dead-letter file exactly as `retry` writes them, read back without the JSON
//! parser: most lines of a long file are such records or `resolved` lines, and reading them by
//! their exact shape (any other line goes to the parser, which reads it or names what is wrong
//! with it) keeps the reading of 300,000 runs near half a second.

use std::ffi::OsString;

/// The id of a `resolved` line exactly as `retry` writes it
/// (`{"event":"resolved","id":"ID","ts":"TS","tries":N}`, nothing escaped), read without
/// parsing it as any JSON: what the parser would make of it, and `None` for any other line,
/// which the parser then reads.
pub fn resolved_as_written(text: &str) -> Option<&str> {
    let plain = |s: &str| !s.is_empty() && !s.contains('\\') && !s.chars().any(char::is_control);
    let rest = text.strip_prefix(r#"{"event":"resolved","id":""#)?;
    let (id, rest) = rest.split_once('"')?;
    let (ts, rest) = rest.strip_prefix(r#","ts":""#)?.split_once('"')?;
    let tries = rest.strip_prefix(r#","tries":"#)?.strip_suffix('}')?;
    let number = !tries.is_empty()
        && tries.bytes().all(|b| b.is_ascii_digit())
        && (tries == "0" || !tries.starts_with('0'));
    (plain(id) && plain(ts) && number).then_some(id)
}

/// A record line exactly as `retry` writes it when nothing in it is escaped or base64 (its
/// members in their order, no white space), its parts borrowed from the line.
pub struct WrittenRecord<'a> {
    pub id: &'a str,
    pub ts: &'a str,
    pub label: Option<&'a str>,
    pub cwd: Option<&'a str>,
    /// The words of `command` and `options`, each as `"WORD","WORD"`, brackets left out.
    pub command: &'a str,
    pub options: &'a str,
    pub exit_code: u64,
    pub reason: &'a str,
    pub tries: u64,
    pub duration_ms: u64,
}

/// The words of an array of plain strings, `"a","b"` (brackets left out): none holds a `"`.
pub fn words(list: &str) -> Vec<OsString> {
    match list.strip_prefix('"').and_then(|l| l.strip_suffix('"')) {
        Some(inner) => inner.split(r#"",""#).map(OsString::from).collect(),
        None => Vec::new(),
    }
}

/// A record line as `retry` writes it, read without the parser as the parser would read it
/// (every field of the right type, the command not empty): `None` for any other line, which
/// the parser then reads, or names what is wrong with. Most lines of a long file are such
/// records or `resolved` lines, and this reads them without making a JSON value of each.
pub fn record_as_written(text: &str) -> Option<WrittenRecord<'_>> {
    let rest = text.strip_prefix(r#"{"event":"dead_letter","id":"#)?;
    let mut scan = Scan { rest };
    let id = scan.string()?;
    let ts = scan.member("ts")?.string()?;
    let label = scan.member("label")?.string_or_null()?;
    let cwd = scan.member("cwd")?.string_or_null()?;
    let command = scan.member("command")?.words()?;
    let options = scan.member("options")?.words()?;
    let exit_code = scan.member("exit_code")?.number()?;
    let reason = scan.member("reason")?.string()?;
    let tries = scan.member("tries")?.number()?;
    let duration_ms = scan.member("duration_ms")?.number()?;
    (scan.rest == "}" && !id.is_empty() && !command.is_empty()).then_some(WrittenRecord {
        id,
        ts,
        label,
        cwd,
        command,
        options,
        exit_code,
        reason,
        tries,
        duration_ms,
    })
}

/// A reader of the JSON that `retry` writes, for the lines read without the parser: each
/// method takes what it reads off the front of `rest`, or gives `None` for anything else.
struct Scan<'a> {
    rest: &'a str,
}

impl<'a> Scan<'a> {
    /// `,"NAME":`, before a member's value.
    fn member(&mut self, name: &str) -> Option<&mut Self> {
        let rest = self.rest.strip_prefix(",\"")?.strip_prefix(name)?;
        self.rest = rest.strip_prefix("\":")?;
        Some(self)
    }

    /// A string with nothing escaped in it and no control character.
    fn string(&mut self) -> Option<&'a str> {
        let (s, rest) = self.rest.strip_prefix('"')?.split_once('"')?;
        // Most are ASCII, told plain byte by byte; any other character is looked at whole.
        let plain_ascii = |b: u8| (b' '..0x7f).contains(&b) && b != b'\\';
        if !s.bytes().all(plain_ascii) && (s.contains('\\') || s.chars().any(char::is_control)) {
            return None;
        }
        self.rest = rest;
        Some(s)
    }

    fn string_or_null(&mut self) -> Option<Option<&'a str>> {
        match self.rest.strip_prefix("null") {
            Some(rest) => {
                self.rest = rest;
                Some(None)
            }
            None => self.string().map(Some),
        }
    }

    /// An array of such strings, as `"a","b"`, its brackets left out.
    fn words(&mut self) -> Option<&'a str> {
        let inner = self.rest.strip_prefix('[')?;
        self.rest = inner;
        if let Some(rest) = inner.strip_prefix(']') {
            self.rest = rest;
            return Some("");
        }
        loop {
            self.string()?;
            if let Some(rest) = self.rest.strip_prefix(']') {
                let list = &inner[..inner.len() - self.rest.len()];
                self.rest = rest;
                return Some(list);
            }
            self.rest = self.rest.strip_prefix(',')?;
        }
    }

    /// A whole number from 0 to 2^64 - 1, written as JSON writes it (no leading zero).
    fn number(&mut self) -> Option<u64> {
        let end = self
            .rest
            .bytes()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(self.rest.len());
        let digits = &self.rest[..end];
        if digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
            return None;
        }
        let n = digits.parse().ok()?;
        self.rest = &self.rest[end..];
        Some(n)
    }
}

/// FNV-1a over a run's id: the ids of one file, which its owner wrote, need no defence
/// against collisions made on purpose, and SipHash was a tenth of reading a long file.
#[derive(Default)]
pub struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        self.0 = h;
    }
}
