//! Text made safe to print: the escaping of control characters and of command-line words, and
//! the character set it is written in. Pure, and below every other module: it imports nothing
//! from the crate, and the character set is always given, never read from a global, so that
//! the same input gives the same text whatever ran before.

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;

/// The character set of what `retry` prints (spec 8.1): UTF-8, or ASCII only when the locale's
/// character set is not UTF-8.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Charset {
    #[default]
    Utf8,
    Ascii,
}

impl Charset {
    /// The character set of the locale that `var` describes: the first non-empty of `LC_ALL`,
    /// `LC_CTYPE` and `LANG` decides (unset everywhere is the C locale, ASCII), and it is UTF-8
    /// when it names `UTF-8` or `utf8`, in any case.
    pub fn of_locale(var: impl Fn(&str) -> Option<OsString>) -> Charset {
        let utf8 = ["LC_ALL", "LC_CTYPE", "LANG"]
            .into_iter()
            .filter_map(var)
            .find(|value| !value.is_empty())
            .is_some_and(|value| {
                let value = value.to_string_lossy().to_ascii_lowercase();
                value.contains("utf-8") || value.contains("utf8")
            });
        Charset::ascii_if(!utf8)
    }

    /// `Ascii` when `ascii` is true, else `Utf8`.
    pub fn ascii_if(ascii: bool) -> Charset {
        match ascii {
            true => Charset::Ascii,
            false => Charset::Utf8,
        }
    }

    pub fn is_ascii(self) -> bool {
        self == Charset::Ascii
    }

    /// Whether `c` may be printed as it is in this character set.
    fn holds(self, c: char) -> bool {
        !self.is_ascii() || c.is_ascii()
    }
}

/// Characters that must never reach a terminal raw: control characters (C0, DEL, C1), which
/// can move the cursor, end a line or start an escape sequence, and the invisible ones that
/// reorder or hide text (bidirectional overrides, zero-width characters).
pub fn unprintable(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        )
}

/// Pushes the escape of one character as bash's `$'...'` reads it: `\n`, `\t`, `\r`, `\e`,
/// otherwise each of its UTF-8 bytes as `\xHH`.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        '\u{1b}' => out.push_str("\\e"),
        c => {
            let mut buf = [0; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
}

/// One word of a command line as a shell reads it back, on one line of printable text: a
/// plain word stays bare (`make`, `--jobs=4`), a word with spaces, quotes or other shell
/// characters is single-quoted (`'a b'`, `'it'\''s'`), and a word with control characters or
/// bytes that are not UTF-8 takes bash's `$'...'` form with `\n`, `\t`, `\r`, `\e`, `\'`, `\\`
/// and `\xHH` escapes (`$'nope\nretry: forged'`). In ASCII, characters outside ASCII are
/// escaped as their `\xHH` bytes too.
pub fn quote(word: &OsStr, charset: Charset) -> String {
    let bytes = word.as_bytes();
    let plain = !bytes.is_empty()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(b));
    let printable = |s: &str| s.chars().all(|c| !unprintable(c) && charset.holds(c));
    match std::str::from_utf8(bytes) {
        Ok(s) if plain => s.to_string(),
        Ok(s) if printable(s) => format!("'{}'", s.replace('\'', r"'\''")),
        _ => dollar_quote(bytes, charset),
    }
}

/// A word in bash's `$'...'` form: see `quote`.
fn dollar_quote(bytes: &[u8], charset: Charset) -> String {
    let mut out = String::from("$'");
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str(r"\\"),
                '\'' => out.push_str(r"\'"),
                c if unprintable(c) || !charset.holds(c) => push_escaped(&mut out, c),
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out.push('\'');
    out
}

/// The command line as one shell-like string, for the log: every word `quote`d.
pub fn command_line(command: &[OsString], charset: Charset) -> String {
    command
        .iter()
        .map(|word| quote(word, charset))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A line of log text made safe for a terminal: every unprintable character (see
/// `unprintable`) escaped as in `quote`, so that nothing the user gave can end the line, forge
/// another, or reach the terminal as an escape sequence. Backslashes are left alone. Characters
/// outside ASCII are left too, whatever the character set: the writer of the line converts them.
pub fn printable(line: &str) -> String {
    if !line.chars().any(unprintable) {
        return line.to_string();
    }
    let mut out = String::with_capacity(line.len() + 8);
    for c in line.chars() {
        if unprintable(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    fn q(word: &[u8], charset: Charset) -> String {
        quote(OsStr::from_bytes(word), charset)
    }

    #[test]
    fn a_printable_line_has_no_control_character_left() {
        assert_eq!(printable("plain \\n text"), "plain \\n text");
        assert_eq!(
            printable("a\nb\tc\u{1b}[2J\u{7}\u{9b}\u{202e}"),
            r"a\nb\tc\e[2J\x07\xc2\x9b\xe2\x80\xae"
        );
        assert_eq!(printable("café ≥ 2"), "café ≥ 2");
    }

    #[test]
    fn a_word_is_bare_single_quoted_or_dollar_quoted_as_a_shell_reads_it() {
        for charset in [Charset::Utf8, Charset::Ascii] {
            assert_eq!(q(b"--jobs=4", charset), "--jobs=4");
            assert_eq!(q(b"", charset), "''");
            assert_eq!(q(b"a b", charset), "'a b'");
            assert_eq!(q(b"it's", charset), r"'it'\''s'");
            assert_eq!(
                q(b"nope\nretry: forged", charset),
                r"$'nope\nretry: forged'"
            );
            assert_eq!(q(b"a\\b'\x1b\xff", charset), r"$'a\\b\'\e\xff'");
        }
    }

    #[test]
    fn in_ascii_a_word_outside_ascii_is_escaped_byte_by_byte() {
        assert_eq!(q("café".as_bytes(), Charset::Utf8), "'café'");
        assert_eq!(q("café".as_bytes(), Charset::Ascii), r"$'caf\xc3\xa9'");
        assert_eq!(q(b"caf\xc3\xa9\xff", Charset::Utf8), r"$'café\xff'");
        assert_eq!(q(b"caf\xc3\xa9\xff", Charset::Ascii), r"$'caf\xc3\xa9\xff'");
        let words = [OsString::from("echo"), OsString::from("≥ 2")];
        assert_eq!(command_line(&words, Charset::Utf8), "echo '≥ 2'");
        assert_eq!(
            command_line(&words, Charset::Ascii),
            r"echo $'\xe2\x89\xa5 2'"
        );
    }

    #[test]
    fn the_character_set_of_one_call_does_not_reach_the_next() {
        let word = OsStr::new("né");
        let before = quote(word, Charset::Utf8);
        assert_eq!(quote(word, Charset::Ascii), r"$'n\xc3\xa9'");
        assert_eq!(quote(word, Charset::Utf8), before);
        assert_eq!(before, "'né'");
        assert_eq!(quote(word, Charset::Ascii), r"$'n\xc3\xa9'");
    }

    fn locale(vars: &[(&str, &str)]) -> Charset {
        let vars: Vec<(String, OsString)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Charset::of_locale(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn the_first_non_empty_locale_variable_decides_the_character_set() {
        let (utf8, ascii) = (Charset::Utf8, Charset::Ascii);
        assert_eq!(locale(&[]), ascii, "unset everywhere is the C locale");
        assert_eq!(locale(&[("LANG", "C.UTF-8")]), utf8);
        assert_eq!(locale(&[("LANG", "en_US.utf8")]), utf8);
        assert_eq!(locale(&[("LANG", "de_DE.Utf-8@euro")]), utf8);
        assert_eq!(locale(&[("LANG", "POSIX")]), ascii);
        assert_eq!(locale(&[("LANG", "en_US.ISO-8859-1")]), ascii);
        assert_eq!(locale(&[("LC_ALL", "C"), ("LANG", "C.UTF-8")]), ascii);
        assert_eq!(
            locale(&[("LC_ALL", ""), ("LC_CTYPE", "C.UTF-8"), ("LANG", "C")]),
            utf8
        );
        assert_eq!(locale(&[("LC_CTYPE", "C"), ("LANG", "C.UTF-8")]), ascii);
    }
}
