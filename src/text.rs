//! Text made safe to print: the escaping of control and invisible characters and of
//! command-line words, cutting such text to a width, the character set it is written in, and
//! the shares and means that every output writes alike. Pure, and below every other module: it imports nothing
//! from the crate, and the character set is always given, never read from a global, so that
//! the same input gives the same text whatever ran before.

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;

/// The character set of what `retry` prints (docs/log.md#human-format): UTF-8, or ASCII only when
/// the locale's character set is not UTF-8.
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
    c.is_control() || invisible(c)
}

/// The characters that show nothing, or change how the text around them shows: Unicode's
/// format characters (soft hyphen, bidirectional marks and overrides, zero-width characters,
/// the tag characters U+E0000 to U+E007F), the line and paragraph separators, the fillers
/// that render blank, and the variation selectors past U+E0100, which can carry hidden text.
fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{034f}'
            | '\u{0600}'..='\u{0605}'
            | '\u{061c}'
            | '\u{06dd}'
            | '\u{070f}'
            | '\u{0890}'..='\u{0891}'
            | '\u{08e2}'
            | '\u{115f}'..='\u{1160}'
            | '\u{17b4}'..='\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{110bd}'
            | '\u{110cd}'
            | '\u{13430}'..='\u{1343f}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}'
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

/// `text`, made printable (by [`printable`] or [`quote`]), cut to `room` characters with
/// `ellipsis` in place of what is cut, never inside an escape: `\e`, `\\` or the `\xHH`
/// bytes of one character are kept whole or cut whole.
pub fn cut(text: &str, room: usize, ellipsis: &str) -> String {
    if text.chars().count() <= room {
        return text.to_string();
    }
    let mut left = room.saturating_sub(ellipsis.chars().count());
    let mut out = String::new();
    for unit in Units(text) {
        let width = unit.chars().count();
        if width > left {
            break;
        }
        left -= width;
        out.push_str(unit);
    }
    out + ellipsis
}

/// The pieces of printable text that a cut keeps or drops whole: a character, a backslash and
/// the character after it, or the `\xHH` escapes of one character's UTF-8 bytes.
struct Units<'a>(&'a str);

impl<'a> Iterator for Units<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let text = self.0;
        let first = text.chars().next()?;
        let len = match first {
            '\\' => match byte_escape(&text[1..]) {
                Some(lead) => escaped_char_len(text, lead),
                None => 1 + text[1..].chars().next().map_or(0, char::len_utf8),
            },
            c => c.len_utf8(),
        };
        self.0 = &text[len..];
        Some(&text[..len])
    }
}

/// The byte that `xHH` at the start of `text` (after a backslash) stands for.
fn byte_escape(text: &str) -> Option<u8> {
    let hex = text.strip_prefix('x')?.get(..2)?;
    u8::from_str_radix(hex, 16)
        .ok()
        .filter(|_| hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The length of the `\xHH` escapes at the start of `text` that spell one character whose
/// first byte is `lead`: its continuation bytes that follow, as many as `lead` announces.
fn escaped_char_len(text: &str, lead: u8) -> usize {
    let more = match lead {
        0xc0..=0xdf => 1,
        0xe0..=0xef => 2,
        0xf0..=0xf7 => 3,
        _ => 0,
    };
    let mut len = 4;
    for _ in 0..more {
        let next = text[len..].strip_prefix('\\').and_then(byte_escape);
        if !next.is_some_and(|b| (0x80..=0xbf).contains(&b)) {
            break;
        }
        len += 4;
    }
    len
}

/// A share of whole counts, `n` of `of`, as every output of `retry` writes it (docs/json-log.md,
/// "Shares and figures"): rounded once, half up, from the counts themselves, to one decimal of
/// a percent; a share below 0.1% or above 99.9% is never rounded to 0%, 0.1%, 99.9% or 100%.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    n: u64,
    of: u64,
}

/// The most decimals a share's JSON number keeps to stay below 0.1% or above 99.9%.
const MOST_DECIMALS: u32 = 17;

/// Where a share lies: what its one decimal may show, and what it may not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Region {
    /// None of them (0 of nothing too).
    None,
    /// More than none, less than 0.1%.
    Below,
    /// From 0.1% to 99.9%.
    Inside,
    /// More than 99.9%, less than all.
    Above,
    All,
}

impl Share {
    /// `n` of `of` (at most all of them); 0 of nothing.
    pub fn new(n: u64, of: u64) -> Share {
        Share { n: n.min(of), of }
    }

    /// In percent for people: `16.7%`, `50%`; `0%` and `100%` only when exact; `<0.1%` and
    /// `>99.9%` for a share below 0.1% or above 99.9%.
    pub fn percent(self) -> String {
        match self.region() {
            Region::None => "0%".into(),
            Region::Below => "<0.1%".into(),
            Region::Inside => format!("{}%", self.one_decimal()),
            Region::Above => ">99.9%".into(),
            Region::All => "100%".into(),
        }
    }

    /// In percent as a JSON number: the figure of [`Share::percent`] (`16.7`, `50`, `0`,
    /// `100`), and for a share below 0.1% or above 99.9% as many decimals as it needs to stay
    /// there (`0.01` for 1 in 10,000, `99.95` for 1,999 in 2,000).
    pub fn json(self) -> String {
        match self.region() {
            Region::None => "0".into(),
            Region::Inside => self.one_decimal(),
            Region::All => "100".into(),
            edge => self.off_the_edge(edge),
        }
    }

    /// The cells of a bar of `cells` that it fills, rounded half up: but at least one when it
    /// is not none, and one short of all when it is not all.
    pub fn cells(self, cells: u64) -> u64 {
        let full = rounded(self.n, self.of, u128::from(cells)) as u64;
        match self.region() {
            Region::None | Region::All => full,
            _ => full.clamp(1, cells.saturating_sub(1).max(1)),
        }
    }

    fn region(self) -> Region {
        let (n, of) = (u128::from(self.n), u128::from(self.of));
        match n {
            0 => Region::None,
            n if n == of => Region::All,
            n if n * 1000 < of => Region::Below,
            n if n * 1000 > of * 999 => Region::Above,
            _ => Region::Inside,
        }
    }

    /// In percent, rounded half up to one decimal, without a trailing `.0`.
    fn one_decimal(self) -> String {
        trimmed(&fixed(rounded(self.n, self.of, 1000), 1))
    }

    /// A share below 0.1% or above 99.9% with the fewest decimals that keep it there.
    fn off_the_edge(self, edge: Region) -> String {
        let mut steps = 0;
        for places in 2..=MOST_DECIMALS {
            let whole = 100 * 10u128.pow(places);
            let tenth = 10u128.pow(places - 1);
            steps = rounded(self.n, self.of, whole);
            let kept = match edge {
                Region::Below => steps > 0 && steps < tenth,
                _ => steps > whole - tenth && steps < whole,
            };
            if kept {
                return trimmed(&fixed(steps, places));
            }
        }
        // Past what any count needs: the nearest step off 0 or 100.
        let whole = 100 * 10u128.pow(MOST_DECIMALS);
        let steps = match edge {
            Region::Below => steps.max(1),
            _ => steps.min(whole - 1),
        };
        trimmed(&fixed(steps, MOST_DECIMALS))
    }
}

/// `n / of` in steps of which `scale` make a whole, rounded half up; 0 of nothing. Exact for
/// any counts and any scale up to 10^19.
fn rounded(n: u64, of: u64, scale: u128) -> u128 {
    if of == 0 {
        return 0;
    }
    let of = u128::from(of);
    // Half up: a remainder of exactly a half is only possible when `of` is even.
    (u128::from(n) * scale + of / 2) / of
}

/// A count of steps of `10^-places` written with `places` decimals: `fixed(1125, 3)` is
/// `1.125`.
fn fixed(steps: u128, places: u32) -> String {
    let unit = 10u128.pow(places);
    match places {
        0 => steps.to_string(),
        p => format!(
            "{}.{:0width$}",
            steps / unit,
            steps % unit,
            width = p as usize
        ),
    }
}

/// A decimal without its trailing zeros, nor a point left last: `50.0` is `50`.
fn trimmed(decimal: &str) -> String {
    match decimal.contains('.') {
        true => decimal
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string(),
        false => decimal.to_string(),
    }
}

/// A mean of whole counts, `total / of`, rounded once, half up, to `places` decimals (0 of
/// nothing): written with all of them for a table (`1.50`), without trailing zeros for JSON
/// (`1.5`), the same figure either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mean {
    total: u64,
    of: u64,
    places: u32,
}

impl Mean {
    pub fn new(total: u64, of: u64, places: u32) -> Mean {
        Mean {
            total,
            of,
            places: places.min(MOST_DECIMALS),
        }
    }

    /// With all its decimals: `1.50`.
    pub fn text(self) -> String {
        let steps = rounded(self.total, self.of, 10u128.pow(self.places));
        fixed(steps, self.places)
    }

    /// As a JSON number: `1.5`.
    pub fn json(self) -> String {
        trimmed(&self.text())
    }
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

    #[test]
    fn a_share_is_never_rounded_to_none_or_all_unless_it_is() {
        let both = |n, of| (Share::new(n, of).percent(), Share::new(n, of).json());
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(both(1, 10_000), pair("<0.1%", "0.01"));
        assert_eq!(both(9_999, 10_000), pair(">99.9%", "99.99"));
        assert_eq!(both(1, 2000), pair("<0.1%", "0.05"));
        assert_eq!(both(1999, 2000), pair(">99.9%", "99.95"));
        assert_eq!(both(1, 1000), pair("0.1%", "0.1"));
        assert_eq!(both(999, 1000), pair("99.9%", "99.9"));
        assert_eq!(both(1, 1001), pair("<0.1%", "0.0999"));
        assert_eq!(both(0, 7), pair("0%", "0"));
        assert_eq!(both(7, 7), pair("100%", "100"));
        assert_eq!(both(0, 0), pair("0%", "0"));
        assert_eq!(both(1, u64::MAX), pair("<0.1%", "0.00000000000000001"));
        assert_eq!(
            both(u64::MAX - 1, u64::MAX),
            pair(">99.9%", "99.99999999999999999")
        );
    }

    #[test]
    fn a_bar_is_full_or_empty_only_when_the_share_is_all_or_none() {
        let cells = |n, of| Share::new(n, of).cells(10);
        assert_eq!([cells(0, 5), cells(1, 1000), cells(1, 4)], [0, 1, 3]);
        assert_eq!(
            [cells(995, 1000), cells(1999, 2000), cells(5, 5)],
            [9, 9, 10]
        );
        assert_eq!(Share::new(1, 2).cells(1), 1);
    }

    #[test]
    fn a_share_is_rounded_half_up_from_its_counts_alike_in_text_and_json() {
        for (n, of, text) in [
            (1, 6, "16.7"),
            (1, 2, "50"),
            (3, 200, "1.5"),
            (1, 16, "6.3"),
            (1, 3, "33.3"),
            (2, 3, "66.7"),
            (199, 200, "99.5"),
            (1998, 2000, "99.9"),
        ] {
            assert_eq!(Share::new(n, of).percent(), format!("{text}%"));
            assert_eq!(Share::new(n, of).json(), text);
        }
    }

    #[test]
    fn a_mean_is_rounded_half_up_once_alike_in_text_and_json() {
        let mean = |t, of| Mean::new(t, of, 2);
        assert_eq!(
            (mean(9, 8).text(), mean(9, 8).json()),
            ("1.13".into(), "1.13".into())
        );
        assert_eq!(
            (mean(3, 2).text(), mean(3, 2).json()),
            ("1.50".into(), "1.5".into())
        );
        assert_eq!(
            (mean(5, 5).text(), mean(5, 5).json()),
            ("1.00".into(), "1".into())
        );
        assert_eq!(mean(0, 0).text(), "0.00");
        assert_eq!(mean(u64::MAX, 1).json(), u64::MAX.to_string());
    }

    #[test]
    fn invisible_characters_are_escaped_in_labels_and_words() {
        assert_eq!(
            printable("a\u{e0041}b\u{ad}c"),
            r"a\xf3\xa0\x81\x81b\xc2\xadc"
        );
        assert_eq!(
            printable("x\u{2064}\u{180e}\u{e0100}"),
            r"x\xe2\x81\xa4\xe1\xa0\x8e\xf3\xa0\x84\x80"
        );
        assert_eq!(
            q("tag\u{e0041}".as_bytes(), Charset::Utf8),
            r"$'tag\xf3\xa0\x81\x81'"
        );
        assert_eq!(
            printable("a ‑ b ✓ é"),
            "a ‑ b ✓ é",
            "visible characters stay"
        );
    }

    #[test]
    fn a_cut_never_falls_inside_an_escape() {
        let shown = printable("zero\u{200b}width");
        assert_eq!(shown, r"zero\xe2\x80\x8bwidth");
        assert_eq!(cut(&shown, 9, "…"), "zero…");
        assert_eq!(cut(&shown, 17, "…"), r"zero\xe2\x80\x8b…");
        assert_eq!(cut(&shown, 16, "…"), "zero…");
        assert_eq!(cut(r"a\nb\ec", 3, "…"), r"a…");
        assert_eq!(cut(r"a\nb\ec", 4, "…"), r"a\n…");
        assert_eq!(cut(r"ab\xff\x41cd", 8, "..."), r"ab...");
        assert_eq!(cut(r"ab\xff\x41cd", 9, "..."), r"ab\xff...");
        assert_eq!(cut("short", 5, "…"), "short");
        assert_eq!(cut("trailing\\", 8, "…"), "trailin…");
        for room in 0..30 {
            let kept = cut(&shown, room, "…");
            let bare = kept.trim_end_matches('…');
            assert!(shown.starts_with(bare), "{kept}");
            assert!(
                matches!(bare.len(), 0..=4 | 16..),
                "cut inside an escape: {kept}"
            );
        }
    }
}
