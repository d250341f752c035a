//! What people read: the schedule log (human and JSON lines) and the dry-run table.

pub mod charset;
pub mod ci;
pub mod dryrun;
pub mod event;
pub mod human;
pub mod json;
pub mod jsonlog;
pub mod layout;
pub mod log;
pub mod replay;
pub mod simulate;

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;

use crate::config::Config;
use crate::duration::{hms, millis};
use crate::policy::{Backoff, Jitter, LimitSource};

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
/// and `\xHH` escapes (`$'nope\nretry: forged'`). When the output is ASCII only (a locale that
/// is not UTF-8), characters outside ASCII are escaped as their `\xHH` bytes too.
pub fn quote(word: &OsStr) -> String {
    quote_in(word, charset::ascii())
}

/// `quote`, with the output's character set given.
pub fn quote_in(word: &OsStr, ascii: bool) -> String {
    let bytes = word.as_bytes();
    let plain = !bytes.is_empty()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(b));
    let printable = |s: &str| {
        s.chars()
            .all(|c| !unprintable(c) && (!ascii || c.is_ascii()))
    };
    match std::str::from_utf8(bytes) {
        Ok(s) if plain => s.to_string(),
        Ok(s) if printable(s) => format!("'{}'", s.replace('\'', r"'\''")),
        _ => {
            let mut out = String::from("$'");
            for chunk in bytes.utf8_chunks() {
                for c in chunk.valid().chars() {
                    match c {
                        '\\' => out.push_str(r"\\"),
                        '\'' => out.push_str(r"\'"),
                        c if unprintable(c) || (ascii && !c.is_ascii()) => {
                            push_escaped(&mut out, c)
                        }
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
    }
}

/// The command line as one shell-like string, for the log: every word `quote`d.
pub fn command_line(command: &[OsString]) -> String {
    command_line_in(command, charset::ascii())
}

/// `command_line`, with the output's character set given.
pub fn command_line_in(command: &[OsString], ascii: bool) -> String {
    command
        .iter()
        .map(|word| quote_in(word, ascii))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A line of log text made safe for a terminal: every unprintable character (see
/// `unprintable`) escaped as in `quote`, so that nothing the user gave can end the line, forge
/// another, or reach the terminal as an escape sequence. Backslashes are left alone.
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

/// The policy in one line: `3 tries, exponential backoff from 1s ×2, cap 60s, jitter full`.
/// Decorrelated jitter has no backoff: its waits are named by what they are drawn from.
pub fn describe_policy(config: &Config) -> String {
    let time = hms;
    let p = &config.policy;
    let tries = match p.max_tries {
        Some(1) => "1 try".to_string(),
        Some(n) => format!("{n} tries"),
        None => "no try limit".to_string(),
    };
    let waits = &p.waits;
    let backoff = match &waits.backoff {
        _ if waits.jitter == Jitter::Decorrelated => {
            format!("waits from {} to 3 × the previous", time(waits.delay))
        }
        Backoff::Exponential { factor } => {
            format!("exponential backoff from {} ×{factor}", time(waits.delay))
        }
        Backoff::Linear => format!("linear backoff from {}", time(waits.delay)),
        Backoff::Constant => format!("constant wait {}", time(waits.delay)),
        Backoff::List(list) => format!(
            "waits {}",
            list.iter().map(|d| time(*d)).collect::<Vec<_>>().join(",")
        ),
    };
    let mut out = format!(
        "{tries}, {backoff}, cap {}, jitter {}",
        time(waits.max_delay),
        waits.jitter.name()
    );
    if let Some(t) = p.timeout {
        out += &format!(
            ", timeout {} per try (then {}, SIGKILL after {})",
            time(t),
            config.signal,
            time(config.kill_after)
        );
    }
    if let Some(limit) = p.limit {
        match limit.source {
            LimitSource::Budget => out += &format!(", budget {}", time(limit.at)),
            LimitSource::Deadline => out += &format!(", deadline in {}", time(limit.at)),
        }
    }
    if let Some(pattern) = &config.delay_from_output {
        out += &format!(", longer waits when the output asks (--delay-from-output {pattern})");
    }
    if let Some(pattern) = &p.classifier.until_output {
        out += &format!(", until the output says it is ready (--until-output {pattern})");
    }
    out
}

/// The policy as a JSON object, for the `start` event and the dry run's header.
pub fn policy_json(config: &Config, seed: u64) -> json::Obj {
    let p = &config.policy;
    let (backoff, factor) = match &p.waits.backoff {
        Backoff::Exponential { factor } => ("exponential", Some(*factor)),
        Backoff::Linear => ("linear", None),
        Backoff::Constant => ("constant", None),
        Backoff::List(_) => ("delays", None),
    };
    let mut obj = json::Obj::new()
        .num("tries", p.max_tries.unwrap_or(0))
        .opt_num("budget_ms", p.limit.map(|l| millis(l.at)))
        .opt_num("timeout_ms", p.timeout.map(millis))
        .str("backoff", backoff)
        .str("jitter", p.waits.jitter.name())
        // A u64 may exceed 2^53, past which many JSON readers round numbers (spec 8.2).
        .str("seed", &seed.to_string())
        .num("delay_ms", millis(p.waits.delay))
        .num("max_delay_ms", millis(p.waits.max_delay));
    if let Some(f) = factor {
        obj = obj.float("factor", f);
    }
    if let Backoff::List(list) = &p.waits.backoff {
        let list: Vec<String> = list.iter().map(|d| millis(*d).to_string()).collect();
        obj = obj.raw("delays_ms", &format!("[{}]", list.join(",")));
    }
    if let Some(pattern) = &config.delay_from_output {
        obj = obj.str("delay_from_output", pattern.text());
    }
    if let Some(pattern) = &p.classifier.until_output {
        obj = obj.str("until_output", pattern.text());
    }
    obj.str("signal", &config.signal.name())
        .num("kill_after_ms", millis(config.kill_after))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ParseOutcome, parse};
    use std::time::SystemTime;

    fn config(args: &[&str]) -> Config {
        match parse(["retry"].iter().chain(args), SystemTime::UNIX_EPOCH) {
            ParseOutcome::Run(c) => *c,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_printable_line_has_no_control_character_left() {
        assert_eq!(printable("plain \\n text"), "plain \\n text");
        assert_eq!(
            printable("a\nb\tc\u{1b}[2J\u{7}\u{9b}\u{202e}"),
            r"a\nb\tc\e[2J\x07\xc2\x9b\xe2\x80\xae"
        );
    }

    #[test]
    fn decorrelated_jitter_claims_no_backoff() {
        let line = describe_policy(&config(&["-j", "decorrelated", "--", "true"]));
        assert_eq!(
            line,
            "3 tries, waits from 1s to 3 × the previous, cap 1m, jitter decorrelated"
        );
        let line = describe_policy(&config(&["-j", "full", "--", "true"]));
        assert!(line.contains("exponential backoff from 1s ×2"), "{line}");
    }

    #[test]
    fn the_seed_is_a_string_so_that_no_json_reader_rounds_it() {
        let policy = policy_json(&config(&["--", "true"]), 9_403_994_254_451_210_427).finish();
        assert!(
            policy.contains(r#""seed":"9403994254451210427""#),
            "{policy}"
        );
    }

    #[test]
    fn the_policy_says_the_output_may_ask_for_longer_waits() {
        let c = config(&["--delay-from-output", r"Retry-After: (\d+)", "--", "true"]);
        let line = describe_policy(&c);
        assert!(
            line.ends_with(
                r", longer waits when the output asks (--delay-from-output 'Retry-After: (\d+)')"
            ),
            "{line}"
        );
        let policy = policy_json(&c, 1).finish();
        assert!(
            policy.contains(r#""delay_from_output":"Retry-After: (\\d+)""#),
            "{policy}"
        );
        let plain = config(&["--", "true"]);
        assert!(!describe_policy(&plain).contains("--delay-from-output"));
        assert!(
            !policy_json(&plain, 1)
                .finish()
                .contains("delay_from_output")
        );
    }
}
